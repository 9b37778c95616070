"""The ``clinieval`` command: parses, calls the library, prints. No logic of its own."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.cli_commands import Endpoints, command
from clinieval.cli_options import (
    AllowRunFailures,
    FieldMapping,
    OutputFormat,
    ServerKindOption,
    ShowProgress,
    command_group,
    echo_failed_kinds,
    echo_summary,
    warn_if_echoed,
)
from clinieval.errors import EXIT_FAILED_ITEMS, UserError, storage_message
from clinieval.fsutil import slug
from clinieval.models.catalog import DEFAULT_MODEL
from clinieval.models.spec import parse_model_spec
from clinieval.records.failures import FailureReport, parse_allowed
from clinieval.records.summary import EchoCount, ScorerSummary
from clinieval.scoring.scorers import Scorer
from clinieval.task import PromptTemplate, Task

if TYPE_CHECKING:
    from collections.abc import Sequence

    from clinieval.engine.session import RunResult

app = command_group("Offline, private evaluation of language models on clinical tasks.")


def _add_subcommands() -> None:
    """Each benchmark's own commands as ``clinieval NAME``, then the shared ones."""
    from clinieval.benchmarks import BENCHMARKS
    from clinieval.cli.analyze import analyze, export
    from clinieval.cli.correlate import correlate
    from clinieval.cli.ehr import app as ehr_app
    from clinieval.cli.judge import judge
    from clinieval.cli.review import make_review_app
    from clinieval.cli.suite import app as suite_app
    from clinieval.view.cli import view

    app.add_typer(ehr_app, name="ehr")
    review_app = make_review_app([s for b in BENCHMARKS for s in b.review_sources()])
    app.add_typer(review_app, name="review", help="Blinded clinician review: web app, database, exports.")
    app.add_typer(suite_app, name="suite")
    for benchmark in BENCHMARKS:
        commands = benchmark.commands()
        if commands is not None:
            app.add_typer(commands, name=benchmark.name, help=benchmark.description)
    for name, function in (
        ("analyze", analyze),
        ("export", export),
        ("judge", judge),
        ("correlate", correlate),
        ("view", view),
    ):
        command(app, name)(function)


_add_subcommands()

TINY_MODEL_NOTE = (
    "note: {name} is a tiny embedded model: it exercises every code path with real text, but its "
    "scores say nothing about clinical ability. Point --model at a capable server for real numbers."
)


def _scorers() -> dict[str, Scorer]:
    """Every scorer ``--scorer`` may name: the shared ones and each benchmark's own."""
    from clinieval.benchmarks import BENCHMARKS
    from clinieval.scoring.catalog import SHARED_SCORERS, scorer_mapping

    return scorer_mapping([*SHARED_SCORERS, *(s for b in BENCHMARKS for s in b.scorers())])


def _pick_scorers(names: list[str] | None) -> list[Scorer] | None:
    from clinieval.scoring.catalog import pick_scorer

    if not names:
        return None
    known = _scorers()
    return [pick_scorer(known, n) for n in names]


def _build_task(
    name: str,
    data: Path | None,
    split: str | None,
    scorers: list[Scorer] | None,
    budget: tuple[str | None, int | None],
    prompt: PromptTemplate | None = None,
    fields: Sequence[str] = (),
) -> Task:
    from clinieval.benchmark import TaskRequest, find_benchmark
    from clinieval.benchmarks import BENCHMARKS

    tokenizer, max_context = budget
    request = TaskRequest(
        name,
        data,
        split,
        scorers,
        budget_tokenizer=tokenizer,
        max_context=max_context,
        prompt=prompt,
        fields=tuple(fields),
    )
    benchmark = find_benchmark(BENCHMARKS, name)
    if fields and benchmark.name != "jsonl":
        raise UserError(f"--field applies to your own .jsonl, .json or .csv file, not to {name}")
    built = benchmark.task(request)
    if prompt is not None:  # every benchmark's task takes --prompt, whether or not it reads it
        built.prompt = prompt
    return built


def _setup_logging(verbose: bool) -> None:
    # Patient text is logged only at DEBUG, which this CLI never enables.
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


@command(app)
def run(
    task: Annotated[
        str,
        typer.Argument(help="pubmedqa, medalign, ehrnoteqa, or your own .jsonl, .json or .csv file"),
    ],
    model: Annotated[
        str,
        typer.Option(
            "--model",
            "-m",
            help="model spec: llamacpp:NAME|FILE.gguf, openai:URL@NAME, openai:URL1,URL2@NAME (a pool), "
            "openai:ENDPOINTS.yaml",
        ),
    ] = DEFAULT_MODEL,
    limit: Annotated[int | None, typer.Option(help="evaluate only the first N samples")] = None,
    shuffle: Annotated[int | None, typer.Option(help="shuffle samples with this seed before --limit")] = None,
    out: Annotated[Path | None, typer.Option(help="run directory (default: runs/TASK-MODEL-HASH)")] = None,
    data: Annotated[
        Path | None, typer.Option(help="dataset folder or file (default: shared/data/TASK)")
    ] = None,
    split: Annotated[str | None, typer.Option(help="dataset split (pubmedqa: test or all)")] = None,
    scorer: Annotated[list[str] | None, typer.Option(help="scorer name (repeatable)")] = None,
    field: FieldMapping = None,
    prompt: Annotated[
        Path | None,
        typer.Option(
            help="prompt template file using {input}, {context} and {choices} (lettered lines) "
            "(default: the task's own)"
        ),
    ] = None,
    tokenizer: Annotated[
        str | None,
        typer.Option(help="budget tokenizer for long records, e.g. tiktoken:cl100k_base (default: model's)"),
    ] = None,
    max_context: Annotated[
        int | None, typer.Option(help="context length to budget long records for (default: the model's)")
    ] = None,
    temperature: Annotated[float, typer.Option()] = 0.0,
    max_tokens: Annotated[int | None, typer.Option(help="generation budget")] = None,
    seed: Annotated[int, typer.Option()] = 0,
    stop: Annotated[list[str] | None, typer.Option(help="stop sequence (repeatable)")] = None,
    repeats: Annotated[int, typer.Option(min=1, help="ask each sample N times")] = 1,
    endpoints: Endpoints = Endpoints(timeout=120.0),
    overwrite: Annotated[bool, typer.Option(help="discard a different run at --out")] = False,
    rerun_changed: Annotated[
        bool, typer.Option(help="ask again exactly the samples whose data changed since they were recorded")
    ] = False,
    progress: ShowProgress = True,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    server_kind: ServerKindOption = None,
    allow_failures: AllowRunFailures = None,
    output_format: OutputFormat = "text",
) -> None:
    """Evaluate MODEL on TASK; re-running the same command resumes where it stopped.

    Exit status: 0 done; 1 every answer was a content-filter refusal (no score); 2 a mistake in the
    command or its input (nothing written); 3 finished, but items (some or all) failed after retries
    (each kind with its fix above it; --allow-failures accepts some)."""
    _setup_logging(verbose)
    from clinieval.engine.distributed import TaskRecipe, WorkerJob
    from clinieval.engine.session import RunRequest, run_evaluation

    scorers = _pick_scorers(scorer)
    template = None if prompt is None else PromptTemplate.from_file(prompt)
    the_task = _build_task(task, data, split, scorers, (tokenizer, max_context), template, field or ())
    # The task's own generation settings are the defaults; the flags override them.
    the_task.generation = dataclasses.replace(
        the_task.generation,
        temperature=temperature,
        max_tokens=max_tokens if max_tokens is not None else the_task.generation.max_tokens,
        seed=seed,
        stop=tuple(stop or ()),
    )
    allowed = parse_allowed(allow_failures)
    fmt = _output_format(output_format)
    # --executor ray sends whole items to Ray workers here (not single requests, as the other
    # commands do), so the model this process opens is the plain one
    options = endpoints.local_backend(server_kind)
    the_model = parse_model_spec(model, options)
    # Ray workers rebuild the task from its command-line recipe and the model from its spec.
    recipe = TaskRecipe.of(
        task,
        data,
        split,
        scorer,
        (tokenizer, max_context),
        the_task.generation,
        build=_build_task,
        pick_scorers=_pick_scorers,
        prompt=the_task.prompt,  # as the driver resolved it: a worker may not have the data file
    )
    job = WorkerJob(recipe, model, options)
    with endpoints.open_executor(job) as chosen:
        request = RunRequest(
            task=the_task,
            model=the_model,
            model_spec=model,
            out=out,
            limit=limit,
            shuffle=shuffle,
            repeats=repeats,
            concurrency=endpoints.concurrency,
            overwrite=overwrite,
            progress=progress,
            rerun_changed=rerun_changed,
            executor=chosen,
            default_out=lambda fp: Path("runs") / f"{slug(the_task.name)}-{slug(the_model.name)}-{fp[:8]}",
            default_scorers=not scorer,
            fingerprint=options.fingerprint,
        )
        result = asyncio.run(run_evaluation(request))
    _print_result(result.run_path, result.summaries, result.stats_line, fmt, result.failures, result.echo)
    warn_if_echoed(result.echo)
    if model.startswith("llamacpp:") and "/" not in model:
        typer.echo(TINY_MODEL_NOTE.format(name=the_model.name), err=True)
    _exit_for_failures(result, allowed)


def _exit_for_failures(result: RunResult, allowed: float | None) -> None:
    """Exit 3 (``EXIT_FAILED_ITEMS``) when items failed beyond what --allow-failures accepts, and
    whenever every item failed (there is no score to accept); one line per failure kind with its
    likely fix comes first, and the first error message when every item failed. Exit 1 when every
    answer was a content-filter refusal: nothing failed, but there is no score at all."""
    from clinieval.records.failures import REFUSED_FIX

    report = result.failures
    if not report.failed:
        if result.summaries and all(s.samples and not s.scored and not s.unscored for s in result.summaries):
            kinds = ", ".join(f"{k}={v}" for k, v in sorted(result.summaries[0].errors.items()))
            typer.echo(f"error: every model call failed ({kinds}) in {result.run_path}:", err=True)
            typer.echo(f"  {REFUSED_FIX}", err=True)
            _echo_example(result)
            raise typer.Exit(1)
        return
    accepted = report.accepted(allowed) and not report.everything
    echo_failed_kinds("warning" if accepted else "error", report, result.run_path)
    if accepted:
        return
    if report.everything:
        _echo_example(result)
        typer.echo(
            "nothing was answered, so there is no score; apply the fix above and run the same command "
            "again to ask the failed items",
            err=True,
        )
    else:
        typer.echo(
            "the score is over the answered items only; run the same command again to ask just the failed "
            "ones, or pass --allow-failures [FRACTION] to accept them",
            err=True,
        )
    raise typer.Exit(EXIT_FAILED_ITEMS)


def _echo_example(result: RunResult) -> None:
    """The first error message (the transport's words, no prompt text) and where the rest are."""
    line = result.failures.example_line()
    if line is not None:
        typer.echo(line, err=True)
    typer.echo(f"  every message is in {result.run_path}/samples.jsonl", err=True)


def _output_format(value: str) -> str:
    from clinieval.errors import one_of

    return one_of(value, ("text", "json"), "--format")


def _print_result(
    path: Path,
    summaries: list[ScorerSummary],
    stats_line: str,
    fmt: str = "text",
    failures: FailureReport | None = None,
    echo: EchoCount | None = None,
) -> None:
    """The summary: JSON for scripts; a folding table on a terminal; plain aligned text in a pipe
    or a CI log, where rich would cut the table at 80 columns."""
    if fmt == "json":
        from clinieval.fsutil import finite_json

        data: dict[str, object] = {
            "run": str(path),
            "summaries": [s.to_dict() for s in summaries],
            "stats": stats_line,
        }
        if failures is not None:
            data["failed_items"] = {
                "count": failures.failed,
                "of": failures.total,
                "kinds": dict(failures.kinds),
            }
        if echo is not None:
            data["echoed_prompt"] = echo.to_dict()
        typer.echo(json.dumps(finite_json(data), indent=2, ensure_ascii=False, allow_nan=False))
        return
    echo_summary(str(path), summaries, stats_line)


@command(app)
def score(
    run_dir: Annotated[Path, typer.Argument(help="a finished run directory")],
    scorer: Annotated[list[str], typer.Option(help="scorer name (repeatable)")],
    output_format: OutputFormat = "text",
) -> None:
    """Re-score RUN_DIR with other scorers without calling the model under test."""
    from clinieval.engine.rescore import rescore
    from clinieval.records.runs import RunDir

    fmt = _output_format(output_format)
    run_ = RunDir.open(run_dir)
    summaries = rescore(run_, _pick_scorers(scorer) or [])
    _print_result(run_dir, summaries, f"scores written to {run_dir / 'scores'}", fmt)


@command(app)
def summary(
    run_dir: Annotated[Path, typer.Argument(help="a run directory")], output_format: OutputFormat = "text"
) -> None:
    """Print the summary table of a run from its results file."""
    from clinieval.records.failures import failure_report
    from clinieval.records.runs import RunDir
    from clinieval.records.summary import summarize

    fmt = _output_format(output_format)
    run_ = RunDir.open(run_dir)
    names = run_.manifest()["spec"]["task"]["scorers"]
    known = _scorers()
    reads_text = {n for n in names if n not in known or known[n].needs == "generate"}
    records = run_.records()
    status = f"status: {run_.manifest()['status']}"
    _print_result(run_dir, summarize(records, names, reads_text), status, fmt, failure_report(records))


@command(app)
def benchmarks() -> None:
    """List the benchmarks: the names `clinieval run` takes and the command groups."""
    from clinieval.benchmarks import BENCHMARKS

    for benchmark in BENCHMARKS:
        typer.echo(f"{benchmark.name}\t{benchmark.description}")


@command(app)
def models() -> None:
    """List the embedded models and whether they are installed."""
    from clinieval.models.catalog import EMBEDDED

    for entry in EMBEDDED:
        try:
            where = str(entry.locate())
        except UserError as e:
            where = f"not available: {e}"
        typer.echo(f"llamacpp:{entry.name}\t{entry.description}\n    {where}")


OPTIONAL_VALUES = {"--allow-failures": "all"}
"""Options whose value may be left out (``--allow-failures`` alone, or ``--allow-failures 0.05``):
click can parse them, but typer does not pass ``flag_value`` on, so the bare form is spelt out
here before typer sees the arguments."""


def _with_optional_values(args: list[str]) -> list[str]:
    """``args`` with the implied value after a bare optional-value option (a value is only what
    reads as one: a number or ``all``; anything else, a path or another option, follows it)."""
    out: list[str] = []
    for i, arg in enumerate(args):
        out.append(arg)
        if arg in OPTIONAL_VALUES and not _is_value(args[i + 1] if i + 1 < len(args) else None):
            out.append(OPTIONAL_VALUES[arg])
    return out


def _is_value(token: str | None) -> bool:
    if token is None:
        return False
    if token == "all":
        return True
    try:
        float(token)
    except ValueError:
        return False
    return True


def main() -> None:
    try:
        app(args=_with_optional_values(sys.argv[1:]))
    except UserError as e:
        typer.echo(f"error: {e}", err=True)
        sys.exit(2)
    except OSError as e:
        message = storage_message(e)
        if message is None:
            raise
        typer.echo(f"error: {message}", err=True)
        sys.exit(2)
    except KeyboardInterrupt:
        typer.echo("interrupted; run the same command again to resume", err=True)
        sys.exit(130)
