"""``clinieval automedeval kb``: build and query the knowledge base behind the knowledge completion chain.

Its own group because the base is built once and then used by several commands (``judge``,
``build teach``, ``build introspect``); ``query`` shows what the chain would append.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.benchmarks.automedeval.cli.options import KbMode
from clinieval.cli_options import ShowProgress, command_group

kb_app = command_group("The knowledge base behind the judge's knowledge completion chain.")


@kb_app.command("build")
def kb_build(
    docs: Annotated[list[Path], typer.Argument(help=".txt, .md or .jsonl documents, or folders of them")],
    out: Annotated[Path, typer.Option(help="folder for the index (replaced atomically)")],
    dense: Annotated[
        bool,
        typer.Option(
            "--dense",
            help="also embed every chunk with all-MiniLM-L6-v2 for `--mode dense|hybrid` "
            "(20-50 chunks/s on 2 CPU cores: minutes for 10,000 chunks)",
        ),
    ] = False,
    progress: ShowProgress = True,
) -> None:
    """Cut the documents into 1,000-character chunks, index them with BM25 and, with --dense, embed them
    (built once, reused)."""
    from clinieval.benchmarks.automedeval.knowledge import build_kb

    n = build_kb(docs, out, dense=dense, progress=progress)
    typer.echo(f"{n} chunks indexed{' and embedded' if dense else ''}; written: {out}")


@kb_app.command("query")
def kb_query(
    base: Annotated[Path, typer.Argument(help="a folder written by `kb build`")],
    question: Annotated[str, typer.Argument(help="what the judge asked after [Question]")],
    top: Annotated[int, typer.Option(min=1, help="chunks to return")] = 1,
    mode: KbMode = "bm25",
) -> None:
    """Print the line the knowledge chain would append for QUESTION, and the chunks it came from."""
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase, knowledge_line

    found = KnowledgeBase(base, top_k=top, mode=mode).lookup(question)
    typer.echo(knowledge_line(found))
    typer.echo(f"chunks ({found.mode}): " + (", ".join(found.chunk_ids) or "none"))
