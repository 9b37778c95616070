"""``clinieval view``: a read-only results browser over run folders, written as a static site."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def view(
    runs: Annotated[list[Path], typer.Argument(help="run directories, one per arm (or a folder of them)")],
    out: Annotated[Path, typer.Option(help="folder for the site: index.html, items/, view.js, view.css")],
) -> None:
    """Write a static results browser for RUNS: per sample the question, what the model saw, each
    arm's answer, the reference, every score and judge rationale. Open OUT/index.html; no server."""
    from clinieval.view.site import build_site

    typer.echo(build_site(runs, out).describe())
