"""Options and wiring that AutoMedEval's command groups share.

The judge, the teacher and knowledge introspection all search a knowledge base, open several
models and must close them whatever happens, and every command ends by saying what it wrote.
Each of these is spelled here once, so a command module states only what is its own. Heavy
libraries (the models, numpy) are imported inside the functions, so ``--help`` stays fast.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal, TypeVar

import typer

if TYPE_CHECKING:
    from clinieval.models.base import Model

T = TypeVar("T")

SearchMode = Literal["bm25", "dense", "hybrid"]
"""``knowledge.Mode``, spelled again because typer reads the choices at run time and importing
``knowledge`` (numpy) would slow every ``--help``."""

_SEARCH_HELP = (
    "bm25 (shared words), dense (MiniLM cosine; needs `kb build --dense`) or hybrid "
    "(reciprocal rank fusion of both)"
)

KbMode = Annotated[SearchMode, typer.Option("--mode", help=_SEARCH_HELP)]
"""How ``kb query`` searches the base it is given."""

KbSearch = Annotated[SearchMode, typer.Option("--kb-mode", help=f"how --kb is searched: {_SEARCH_HELP}")]
"""The same choice for the commands that use a base (judge, introspect)."""

KbChain = Annotated[
    Path | None, typer.Option("--kb", help="a `kb build` folder: turns on the knowledge completion chain")
]
"""The base that turns on the knowledge completion chain (judge, teach)."""

Instances = Annotated[Path, typer.Argument(metavar="INSTANCES", help="an instances .jsonl file")]
"""The file every build step reads: one instance per line (``build/instances.py``)."""


def echo_written(paths: Iterable[object]) -> None:
    """The last line of a command that wrote several files."""
    typer.echo("written: " + ", ".join(map(str, paths)))


def run_models(models: Sequence[Model], work: Callable[[], Awaitable[T]], *, check: bool = True) -> T:
    """Run ``work`` in a fresh event loop and close every model after it, whatever happens.

    With ``check`` each model is checked first, so a wrong spec fails before any call; without,
    the step checks each one itself when its turn comes (an embedded model is loaded only then).
    """

    async def go() -> T:
        try:
            if check:
                for m in models:
                    await m.check()
            return await work()
        finally:
            for m in models:
                await m.aclose()

    return asyncio.run(go())
