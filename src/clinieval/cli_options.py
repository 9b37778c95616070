"""Command-line pieces every command group shares: the options that reach a model and the way a
group is declared.

The CLI package (``clinieval.cli``) sits above the benchmarks and mounts their command groups, so
what both need lives here, below the benchmarks: one spelling of ``--n-ctx``, ``--timeout``,
``--retries``, ``--concurrency``, ``--allow-host`` and ``--progress`` for ``clinieval run``, each
benchmark's ``run``/``judge`` and the dataset builders, and one way to declare a group. Each
command keeps its own default (an HTTP judge waits longer than a 16-token answer does).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from clinieval.judge.run import JudgeResult

NCtx = Annotated[int, typer.Option(help="context window of an embedded model")]
Timeout = Annotated[float, typer.Option(help="seconds per HTTP request")]
Retries = Annotated[int, typer.Option(min=0, help="retries on 429/5xx/connection errors")]
Concurrency = Annotated[int | None, typer.Option(min=1, help="requests in flight")]
AllowHost = Annotated[list[str] | None, typer.Option(help="allow a non-loopback endpoint host (repeatable)")]
JudgeTemperature = Annotated[
    float,
    typer.Option(
        "--judge-temperature",
        min=0.0,
        help="judge sampling temperature; repeats get seeds seed+0, seed+1, ... so they can differ",
    ),
]
ShowProgress = Annotated[bool, typer.Option(help="show progress bars")]
OverwriteArms = Annotated[bool, typer.Option(help="discard different runs at the arms' folders")]


def command_group(help: str) -> typer.Typer:
    """A typer group as clinieval declares them: help without arguments, no shell completion,
    and plain errors (``clinieval.cli.main`` prints a UserError as one line)."""
    return typer.Typer(no_args_is_help=True, add_completion=False, pretty_exceptions_enable=False, help=help)


def echo_judged(path: Path, result: JudgeResult) -> None:
    """One line per judged run, and the judge's warning (a tiny judge, unparsed verdicts) on stderr."""
    typer.echo(f"{path}: {result.describe()}")
    if result.summary.warning:
        typer.echo(f"warning: {result.summary.warning}", err=True)
