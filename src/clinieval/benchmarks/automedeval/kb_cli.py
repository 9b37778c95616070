"""``clinieval automedeval kb``: build and query the knowledge base behind the knowledge completion chain."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.cli_options import command_group

kb_app = command_group("The knowledge base behind the judge's knowledge completion chain.")


@kb_app.command("build")
def kb_build(
    docs: Annotated[list[Path], typer.Argument(help=".txt, .md or .jsonl documents, or folders of them")],
    out: Annotated[Path, typer.Option(help="folder for the index (replaced atomically)")],
) -> None:
    """Cut the documents into 1,000-character chunks and index them with BM25 (built once, reused)."""
    from clinieval.benchmarks.automedeval.knowledge import build_kb

    n = build_kb(docs, out)
    typer.echo(f"{n} chunks indexed; written: {out}")


@kb_app.command("query")
def kb_query(
    base: Annotated[Path, typer.Argument(help="a folder written by `kb build`")],
    question: Annotated[str, typer.Argument(help="what the judge asked after [Question]")],
    top: Annotated[int, typer.Option(min=1, help="chunks to return")] = 1,
) -> None:
    """Print the line the knowledge chain would append for QUESTION, and the chunks it came from."""
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase, knowledge_line

    found = KnowledgeBase(base, top_k=top).lookup(question)
    typer.echo(knowledge_line(found))
    typer.echo("chunks: " + (", ".join(found.chunk_ids) or "none"))
