"""Command-line pieces every command group shares: the options that reach a model and the way a
group is declared.

The CLI package (``clinieval.cli``) sits above the benchmarks and mounts their command groups, so
what both need lives here, below the benchmarks: one spelling of ``--n-ctx``, ``--timeout``,
``--retries``, ``--concurrency``, ``--allow-host`` and ``--progress`` for ``clinieval run``, each
benchmark's ``run``/``judge`` and the dataset builders (``--model``, ``--judge``, the arms' run
folders, ...), one way to declare a group, and one way to print a run's summary and a judging
pass. Each command keeps its own default (an HTTP judge waits longer than a 16-token answer does).
The aliases are the atoms; :mod:`clinieval.cli_commands` groups them into the blocks commands
share (endpoints, arms, judging, executor) and registers commands that use them.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.errors import EXIT_FAILED_ITEMS

if TYPE_CHECKING:
    from clinieval.engine.session import RunResult
    from clinieval.judge.run import JudgeResult
    from clinieval.records.failures import FailureReport
    from clinieval.records.summary import EchoCount, ScorerSummary

NCtx = Annotated[int, typer.Option(help="context window of an embedded model")]
Timeout = Annotated[float, typer.Option(help="seconds per HTTP request")]
Retries = Annotated[int, typer.Option(min=0, help="retries on 429/5xx/connection errors")]
Concurrency = Annotated[int | None, typer.Option(min=1, help="requests in flight")]
AllowHost = Annotated[list[str] | None, typer.Option(help="allow a non-loopback endpoint host (repeatable)")]
CaBundle = Annotated[
    Path | None,
    typer.Option(
        "--ca-bundle",
        help="PEM file of CA certificates to trust for https endpoints, besides the system's "
        "(a hospital's own CA; SSL_CERT_FILE also works)",
    ),
]
NoProxy = Annotated[
    bool,
    typer.Option(
        "--no-proxy",
        help="never use HTTPS_PROXY/HTTP_PROXY for allowlisted hosts (loopback never goes through a proxy)",
    ),
]
JudgeTemperature = Annotated[
    float,
    typer.Option(
        "--judge-temperature",
        min=0.0,
        help="judge sampling temperature; repeats get seeds seed+0, seed+1, ... so they can differ",
    ),
]
ShowProgress = Annotated[bool, typer.Option(help="show progress bars")]
FingerprintOption = Annotated[
    str | None,
    typer.Option(
        "--fingerprint",
        help="when a resumed run, a judging pass or a suite cell finds another model behind its spec "
        "(docs/endpoints.md, Model fingerprints): strict refuses, warn goes on with a warning, off "
        "takes no fingerprint (default: $CLINIEVAL_FINGERPRINT, else strict)",
    ),
]
FieldMapping = Annotated[
    list[str] | None,
    typer.Option(
        "--field",
        metavar="NAME=COLUMN",
        help="for your own .jsonl/.json/.csv file: which column holds NAME (id, question, context, choices, "
        "target, targets, metadata; choices=A,B,C,D for one column per option), when the file is not "
        "clinieval's, MedQA's or MedMCQA's shape (repeatable)",
    ),
]
ServerKindOption = Annotated[
    str | None,
    typer.Option(
        "--server-kind",
        help="what the HTTP server is, instead of asking it: llama-cpp-python, llama.cpp, vllm, tgi, "
        "ollama or generic (decides default scorers and requests in flight)",
    ),
]
AllowRunFailures = Annotated[
    str | None,
    typer.Option(
        "--allow-failures",
        metavar="[FRACTION]",
        help="exit 0 although items failed after retries: alone, any number; with a fraction "
        "(0.05), up to that share of the items",
    ),
]
OutputFormat = Annotated[
    str, typer.Option("--format", help="text (a table that never cuts numbers) or json (for scripts)")
]
AllowJudgeFailures = Annotated[
    str | None,
    typer.Option(
        "--allow-failures",
        metavar="[FRACTION]",
        help="exit 0 although judge calls failed (they stay unscored): alone, any number; with a "
        "fraction (0.05), up to that share of the judge calls",
    ),
]
OverwriteArms = Annotated[bool, typer.Option(help="discard different runs at the arms' folders")]
ArmModels = Annotated[
    list[str], typer.Option("--model", "-m", help="model spec (repeatable: one arm per model)")
]
DemoModels = Annotated[
    list[str] | None, typer.Option("--model", "-m", help="models under test (default: both embedded)")
]
JudgeSpec = Annotated[str, typer.Option("--judge", help="the judge's model spec (not the model under test)")]
ArmRuns = Annotated[list[Path], typer.Argument(help="arm run directories (or a folder of them)")]
JudgeLimit = Annotated[int | None, typer.Option(help="judge only the first N answers of each arm")]
ConfidenceLevel = Annotated[float, typer.Option(help="confidence level")]
BootstrapSeed = Annotated[int, typer.Option(help="bootstrap seed")]


def command_group(help: str) -> typer.Typer:
    """A typer group as clinieval declares them: help without arguments, no shell completion,
    plain help text that wraps at any width, and plain errors (``clinieval.cli.main`` prints a
    UserError as one line)."""
    # Plain help (click's), not rich panels: rich cuts option help into "…" at 80 columns, in pipes
    # and CI logs; click wraps it and never drops a word.
    return typer.Typer(
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        help=help,
        rich_markup_mode=None,
    )


def echo_summary(title: str, summaries: Sequence[ScorerSummary], stats_line: str) -> None:
    """A run's summary table: drawn with borders and folding cells on a terminal, plain aligned
    text of any width in a pipe, a file or a CI log (where rich would cut it at 80 columns)."""
    import sys

    if not sys.stdout.isatty():
        from clinieval.records.summary import plain_table

        typer.echo(f"{title}\n{plain_table(summaries)}\n{stats_line}")
        return
    from rich.console import Console

    from clinieval.records.summary import render_table

    console = Console()
    console.print(render_table(summaries, title=title))
    console.print(stats_line)


def echo_run(label: str, result: RunResult, extra: Sequence[ScorerSummary] = ()) -> None:
    """One finished run (an arm): its summary table titled ``LABEL: RUN_FOLDER``, with ``extra``
    rows (text metrics scored after the run) below the run's own; then on stderr its failed items
    by kind with their fixes (the first message too when every item failed) and the echo warning."""
    echo_summary(f"{label}: {result.run_path}", [*result.summaries, *extra], result.stats_line)
    report = result.failures
    if report.failed:
        echo_failed_kinds(f"warning: {label}", report, result.run_path)
        example = report.example_line() if report.everything else None
        if example is not None:
            typer.echo(example, err=True)
        typer.echo("  run the same command again to ask just the failed ones", err=True)
    warn_if_echoed(result.echo, label)


def echo_failed_kinds(level: str, report: FailureReport, run_path: Path) -> None:
    """``LEVEL: N of M items failed ... in RUN:`` and one line per kind with its fix, on stderr:
    how a run and each benchmark arm name what failed."""
    typer.echo(f"{level}: {report.headline()} in {run_path}:", err=True)
    for line in report.lines():
        typer.echo(line, err=True)


def warn_if_echoed(echo: EchoCount, label: str | None = None) -> None:
    """One warning when more than a tenth of a run's answers mostly repeat their prompt
    (:class:`clinieval.records.summary.EchoCount`); ``label`` names the arm where a command runs several."""
    if echo.warns:
        where = f"{label}: " if label else ""
        typer.echo(f"warning: {where}{echo.message()}", err=True)


def echo_judged(path: Path, result: JudgeResult, *, shrink: str | None = None) -> None:
    """One line per judged run; then on stderr each kind of failure with its fix (failed calls,
    unparsed replies, answers the run itself lost) and the judge's warning (a tiny judge, identical
    repeats). ``shrink`` names the option that shortens this rubric's prompt (``--snippets``), the
    first fix for a prompt too long for the judge."""
    from clinieval.judge.failures import failures

    typer.echo(f"{path}: {result.describe()}")
    for failure in failures(result.summary, shrink=shrink, scores=result.scores_path):
        typer.echo(failure.line(), err=True)
    if result.summary.warning:
        typer.echo(f"warning: {result.summary.warning}", err=True)


def exit_if_judge_failed(results: Sequence[JudgeResult], allowed: float | None) -> None:
    """After every run is judged: exit with EXIT_FAILED_ITEMS, as ``clinieval run`` does for its
    items, when

    * judge calls failed beyond the share ``allowed`` (``--allow-failures [FRACTION]`` read by
      ``failures.parse_allowed`` before judging; None: no failure accepted);
    * a pass scored none of the answers it sent to the judge (failed calls or unreadable replies:
      "0/10 answers scored" is no result, whatever ``--allow-failures`` says);
    * with ``--allow-failures FRACTION``, more than that share of the judged answers is unscored,
      unparsed replies included (without the option an unparsed reply alone does not fail a pass:
      ``clinieval.judge.failures`` says why).

    The fix of each kind is printed above this by :func:`echo_judged`; the error repeats where."""
    from clinieval.judge.failures import scored_nothing, unscored_share
    from clinieval.records.summary import format_counts

    failed = sum(r.summary.failed_calls for r in results)
    calls = sum(r.summary.judge_calls for r in results)
    if failed:
        kinds = format_counts(sum((Counter(r.summary.judge_errors) for r in results), Counter()))
        headline = f"{failed} of {calls} judge calls failed ({kinds})"
        if allowed is None or failed / calls > allowed:
            typer.echo(
                f"error: {headline}; they are unscored in the scores file. Apply the fix above and run "
                "the same command again (finished calls come from the cache), or pass --allow-failures "
                "[FRACTION] to accept them",
                err=True,
            )
            raise typer.Exit(EXIT_FAILED_ITEMS)
        typer.echo(f"warning: {headline}; kept as unscored", err=True)
    empty = [r for r in results if scored_nothing(r.summary)]
    if empty:
        where = ", ".join(str(r.scores_path) for r in empty)
        typer.echo(
            f"error: no answer could be scored in {where}: apply the fix above (see parse_error and "
            "error_kind there), then run the same command again (finished calls come from the cache)",
            err=True,
        )
        raise typer.Exit(EXIT_FAILED_ITEMS)
    unscored, judged = unscored_share([r.summary for r in results])
    if allowed is not None and judged and unscored / judged > allowed:
        typer.echo(
            f"error: {unscored} of {judged} judged answers are unscored ({unscored / judged:.0%}), more "
            f"than --allow-failures {allowed:g} accepts; apply the fix above and run the same command again",
            err=True,
        )
        raise typer.Exit(EXIT_FAILED_ITEMS)
