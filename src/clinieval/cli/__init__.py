"""The ``clinieval`` command: parses, calls the library, prints. No logic of its own."""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.cli_options import AllowHost, Concurrency, NCtx, Retries, ShowProgress, Timeout, command_group
from clinieval.errors import UserError, storage_message
from clinieval.fsutil import slug
from clinieval.models.catalog import DEFAULT_MODEL
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.scoring.scorers import Scorer
from clinieval.summary import ScorerSummary, format_counts
from clinieval.task import Task

if TYPE_CHECKING:
    from clinieval.analysis.rank_agreement import GoldRule

app = command_group("Offline, private evaluation of language models on clinical tasks.")


def _add_subcommands() -> None:
    """Each benchmark's own commands as ``clinieval NAME``, then the shared ones."""
    from clinieval.benchmarks import BENCHMARKS
    from clinieval.cli.correlate import correlate
    from clinieval.cli.ehr import app as ehr_app
    from clinieval.review.cli import make_review_app
    from clinieval.view.cli import view

    app.add_typer(ehr_app, name="ehr")
    review_app = make_review_app([s for b in BENCHMARKS for s in b.review_sources()])
    app.add_typer(review_app, name="review", help="Blinded clinician review: web app, database, exports.")
    for benchmark in BENCHMARKS:
        commands = benchmark.commands()
        if commands is not None:
            app.add_typer(commands, name=benchmark.name, help=benchmark.description)
    app.command("correlate")(correlate)
    app.command("view")(view)


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
) -> Task:
    from clinieval.benchmark import TaskRequest, find_benchmark
    from clinieval.benchmarks import BENCHMARKS

    tokenizer, max_context = budget
    request = TaskRequest(name, data, split, scorers, budget_tokenizer=tokenizer, max_context=max_context)
    return find_benchmark(BENCHMARKS, name).task(request)


def _setup_logging(verbose: bool) -> None:
    # Patient text is logged only at DEBUG, which this CLI never enables.
    logging.basicConfig(level=logging.INFO if verbose else logging.WARNING, format="%(message)s")


@app.command()
def run(
    task: Annotated[
        str, typer.Argument(help="pubmedqa, medalign, ehrnoteqa, or a .jsonl file of your own samples")
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
    concurrency: Concurrency = None,
    timeout: Timeout = 120.0,
    retries: Retries = 4,
    n_ctx: NCtx = 4096,
    allow_host: AllowHost = None,
    overwrite: Annotated[bool, typer.Option(help="discard a different run at --out")] = False,
    rerun_changed: Annotated[
        bool, typer.Option(help="ask again exactly the samples whose data changed since they were recorded")
    ] = False,
    progress: ShowProgress = True,
    verbose: Annotated[bool, typer.Option("--verbose", "-v")] = False,
    executor: Annotated[
        str,
        typer.Option(help="who evaluates: local (this process) or ray (Ray workers; docs/distributed.md)"),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option(help="with --executor ray: the cluster to join, HEAD:6379 (default: a local Ray)"),
    ] = None,
    ray_workers: Annotated[
        int | None, typer.Option(min=1, help="with --executor ray: how many workers (default: one per node)")
    ] = None,
) -> None:
    """Evaluate MODEL on TASK; re-running the same command resumes where it stopped."""
    _setup_logging(verbose)
    from clinieval.distributed import TaskRecipe, WorkerJob, open_executor
    from clinieval.session import RunRequest, run_evaluation

    scorers = _pick_scorers(scorer)
    the_task = _build_task(task, data, split, scorers, (tokenizer, max_context))
    # The task's own generation settings are the defaults; the flags override them.
    the_task.generation = dataclasses.replace(
        the_task.generation,
        temperature=temperature,
        max_tokens=max_tokens if max_tokens is not None else the_task.generation.max_tokens,
        seed=seed,
        stop=tuple(stop or ()),
    )
    options = BackendOptions.from_cli(n_ctx, timeout, retries, concurrency, allow_host)
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
    )
    job = WorkerJob(recipe, model, options)
    with open_executor(executor, job, ray_address=ray_address, ray_workers=ray_workers) as chosen:
        request = RunRequest(
            task=the_task,
            model=the_model,
            model_spec=model,
            out=out,
            limit=limit,
            shuffle=shuffle,
            repeats=repeats,
            concurrency=concurrency,
            overwrite=overwrite,
            progress=progress,
            rerun_changed=rerun_changed,
            executor=chosen,
            default_out=lambda fp: Path("runs") / f"{slug(the_task.name)}-{slug(the_model.name)}-{fp[:8]}",
        )
        result = asyncio.run(run_evaluation(request))
    _print_result(result.run_path, result.summaries, result.stats_line)
    if model.startswith("llamacpp:") and "/" not in model:
        typer.echo(TINY_MODEL_NOTE.format(name=the_model.name), err=True)
    if result.summaries and all(s.samples and not s.scored for s in result.summaries):
        errors = format_counts(result.summaries[0].errors)
        typer.echo(
            f"error: every model call failed ({errors}); the messages are in {result.run_path}/samples.jsonl",
            err=True,
        )
        raise typer.Exit(1)


def _print_result(path: Path, summaries: list[ScorerSummary], stats_line: str) -> None:
    from rich.console import Console

    from clinieval.summary import render_table

    console = Console()
    console.print(render_table(summaries, title=str(path)))
    console.print(stats_line)


@app.command()
def score(
    run_dir: Annotated[Path, typer.Argument(help="a finished run directory")],
    scorer: Annotated[list[str], typer.Option(help="scorer name (repeatable)")],
) -> None:
    """Re-score RUN_DIR with other scorers without calling the model under test."""
    from clinieval.rescore import rescore
    from clinieval.runs import RunDir

    run_ = RunDir.open(run_dir)
    summaries = rescore(run_, _pick_scorers(scorer) or [])
    _print_result(run_dir, summaries, f"scores written to {run_dir / 'scores'}")


@app.command()
def summary(run_dir: Annotated[Path, typer.Argument(help="a run directory")]) -> None:
    """Print the summary table of a run from its results file."""
    from clinieval.runs import RunDir
    from clinieval.summary import summarize

    run_ = RunDir.open(run_dir)
    names = run_.manifest()["spec"]["task"]["scorers"]
    _print_result(run_dir, summarize(run_.records(), names), f"status: {run_.manifest()['status']}")


@app.command()
def analyze(
    table: Annotated[
        Path, typer.Argument(help="per-item results: .csv, .tsv or .jsonl, one row per item and model")
    ],
    item: Annotated[str, typer.Option(help="column naming the item")] = "item",
    model: Annotated[str, typer.Option(help="column naming the model")] = "model",
    score: Annotated[
        list[str] | None, typer.Option(help="score column (repeatable; default: every other numeric column)")
    ] = None,
    lower_is_better: Annotated[
        list[str] | None, typer.Option(help="score column where lower is better (repeatable)")
    ] = None,
    human_rank: Annotated[
        str | None, typer.Option(help="column with the clinician's rank (1 = best)")
    ] = None,
    human_score: Annotated[
        str | None, typer.Option(help="column with the clinician's score, to judge a judge against")
    ] = None,
    human_label: Annotated[
        str, typer.Option(help="what the human columns are, in the report (e.g. 'computed reference')")
    ] = "clinician",
    correct: Annotated[
        str | None, typer.Option(help="column with binary correctness (1/0, true/false)")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option(help="column to cluster the bootstrap by (patient, instruction)")
    ] = None,
    group: Annotated[
        list[str] | None, typer.Option(help="subgroup column for the chi-square of --correct (repeatable)")
    ] = None,
    rater: Annotated[
        str | None, typer.Option(help="column naming the clinician, for inter-rater agreement")
    ] = None,
    run: Annotated[
        str | None, typer.Option(help="column naming a repeated run, for rank instability")
    ] = None,
    gold_rank: Annotated[
        str,
        typer.Option(help="with --run, a gold rank among tied modes: first (EHRNoteQA), smallest, median"),
    ] = "smallest",
    out: Annotated[Path | None, typer.Option(help="folder for analysis.json and analysis.md")] = None,
    level: Annotated[float, typer.Option(help="confidence level")] = 0.95,
    resamples: Annotated[int, typer.Option(help="bootstrap resamples")] = 2000,
    seed: Annotated[int, typer.Option(help="bootstrap and permutation seed")] = 0,
) -> None:
    """Statistics of results you already have: CIs, paired tests, rankings, agreement with clinicians."""
    from rich.console import Console
    from rich.markdown import Markdown

    from clinieval.analysis.analyze import AnalyzeOptions
    from clinieval.analysis.analyze import analyze as run_analysis
    from clinieval.analysis.markdown import render_markdown
    from clinieval.analysis.table import read_table
    from clinieval.fsutil import atomic_write_json, atomic_write_text

    options = AnalyzeOptions(
        item=item,
        model=model,
        scores=tuple(score or ()),
        lower_is_better=frozenset(lower_is_better or ()),
        human_rank=human_rank,
        human_score=human_score,
        human_label=human_label,
        correct=correct,
        cluster=cluster,
        groups=tuple(group or ()),
        rater=rater,
        run=run,
        gold_rank=_gold_rule(gold_rank),
        level=level,
        resamples=resamples,
        seed=seed,
    )
    result = run_analysis(read_table(table), options)
    text = render_markdown(result)
    Console().print(Markdown(text))
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "analysis.json", result)
        atomic_write_text(out / "analysis.md", text)
        typer.echo(f"written: {out / 'analysis.json'}, {out / 'analysis.md'}")


@app.command()
def benchmarks() -> None:
    """List the benchmarks: the names `clinieval run` takes and the command groups."""
    from clinieval.benchmarks import BENCHMARKS

    for benchmark in BENCHMARKS:
        typer.echo(f"{benchmark.name}\t{benchmark.description}")


def _gold_rule(name: str) -> GoldRule:
    from clinieval.analysis.rank_agreement import GOLD_RULES
    from clinieval.errors import one_of

    return one_of(name, GOLD_RULES, "--gold-rank")


@app.command()
def models() -> None:
    """List the embedded models and whether they are installed."""
    from clinieval.models.catalog import EMBEDDED

    for entry in EMBEDDED:
        try:
            where = str(entry.locate())
        except UserError as e:
            where = f"not available: {e}"
        typer.echo(f"llamacpp:{entry.name}\t{entry.description}\n    {where}")


def main() -> None:
    try:
        app()
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
