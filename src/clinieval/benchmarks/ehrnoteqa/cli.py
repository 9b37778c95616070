"""``clinieval ehrnoteqa``: run, judge, analyze, build and demo EHRNoteQA evaluations.

Thin: each command parses its options, calls the library and prints. The work lives beside this
module: ``data`` (loading, levels), ``prompts``, ``task`` (arms and judging), ``scoring`` (the
three scoring modes), ``analysis`` / ``report`` (the analysis) and ``build`` (dataset building).
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.cli_commands import ArmOptions, Endpoints, JudgeOptions, command, judge_runs
from clinieval.cli_options import (
    ArmModels,
    ArmRuns,
    DemoModels,
    JudgeSpec,
    ShowProgress,
    command_group,
    echo_run,
)
from clinieval.errors import UserError
from clinieval.models.catalog import DEFAULT_MODEL
from clinieval.records.runs import find_run_dirs as run_dirs

if TYPE_CHECKING:
    from clinieval.benchmarks.ehrnoteqa.data import LoadedSet
    from clinieval.judge.run import JudgeResult

app = command_group(
    "EHRNoteQA: questions over a patient's discharge summaries (run, judge, analyze, build, demo)."
)


def _add_build() -> None:
    from clinieval.benchmarks.ehrnoteqa.build.cli import app as build_app

    app.add_typer(build_app, name="build")


_add_build()


def load_set(
    qa: Path | None, notes: Path | None, inline: Path | None, tokenizer: str, level: list[int] | None
) -> LoadedSet:
    """The questions from the release (``--qa`` with ``--notes``) or an inline jsonl."""
    from clinieval.benchmarks.ehrnoteqa.data import load_inline, load_physionet

    if inline is not None:
        if qa is not None or notes is not None:
            raise UserError("give either --inline FILE, or --qa FILE with --notes FILE, not both")
        return load_inline(inline, tokenizer=tokenizer, levels=level)
    if qa is None or notes is None:
        raise UserError(
            "say what to evaluate: --qa EHRNoteQA.jsonl --notes discharge.csv.gz (the PhysioNet release "
            "and your MIMIC-IV-Note copy), or --inline FILE (questions with their notes inline); "
            "`clinieval ehrnoteqa demo` builds a synthetic set"
        )
    return load_physionet(qa, notes, tokenizer=tokenizer, levels=level)


@dataclass(frozen=True)
class NoteArms(ArmOptions):
    """The arm options, with an embedded model's window sized for Level 2's long notes."""

    n_ctx: Annotated[int, typer.Option(help="context window of an embedded model (Level 2 needs 8k)")] = 8192


@command(app)
def run(
    model: ArmModels,
    out: Annotated[Path, typer.Option(help="folder for the arms' run directories (one per model x format)")],
    qa: Annotated[Path | None, typer.Option(help="the EHRNoteQA QA jsonl (PhysioNet)")] = None,
    notes: Annotated[Path | None, typer.Option(help="MIMIC-IV-Note discharge.csv or .csv.gz")] = None,
    inline: Annotated[Path | None, typer.Option(help="a jsonl with the notes inline (instead)")] = None,
    answer_format: Annotated[
        list[str] | None, typer.Option("--format", help="mc (multiple choice) and/or free (repeatable)")
    ] = None,
    level: Annotated[list[int] | None, typer.Option(help="keep only this level (1 or 2; repeatable)")] = None,
    level_tokenizer: Annotated[
        str, typer.Option(help="tokenizer that assigns levels (the paper: by note length in tokens)")
    ] = "tiktoken:cl100k_base",
    loglik: Annotated[bool, typer.Option(help="also score the options by log-likelihood (mc)")] = True,
    max_tokens: Annotated[int, typer.Option(min=1, help="answer length limit (the paper: 600)")] = 600,
    limit: Annotated[int | None, typer.Option(help="evaluate only the first N questions")] = None,
    arms: NoteArms = NoteArms(),
) -> None:
    """Answer every question with every model in each format; score letters and log-likelihoods.

    Re-running the same command resumes each arm where it stopped. Judge afterwards with
    `clinieval ehrnoteqa judge`.
    """
    import dataclasses

    from clinieval.benchmarks.ehrnoteqa.prompts import GENERATION
    from clinieval.benchmarks.ehrnoteqa.task import EHRNoteQASettings, check_format, run_format_arm
    from clinieval.models.spec import arm_dir_name

    formats = [check_format(f) for f in (answer_format or ["mc"])]
    loaded = load_set(qa, notes, inline, level_tokenizer, level)
    typer.echo(loaded.describe())
    for w in loaded.warnings:
        typer.echo(f"warning: {w}", err=True)
    if not loaded.samples:
        raise UserError("no question is left to evaluate after the level filter")
    own = EHRNoteQASettings(generation=dataclasses.replace(GENERATION, max_tokens=max_tokens), loglik=loglik)
    settings = arms.apply_to(own, limit)
    for spec in model:
        for fmt in formats:
            path = out / arm_dir_name(spec, fmt)
            result = asyncio.run(run_format_arm(loaded.samples, spec, fmt, path, settings, loaded.files))
            echo_run(f"{spec} ({fmt})", result)
    typer.echo(f"next: clinieval ehrnoteqa judge {out} --judge MODEL, then clinieval ehrnoteqa analyze {out}")


@command(app)
def judge(
    runs: ArmRuns,
    judge_model: JudgeSpec,
    repeats: Annotated[int, typer.Option(min=1, help="judge each answer N times (the paper: 5)")] = 5,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="judge reply limit (default: 16 for mc, 256 for free)")
    ] = None,
    judging: JudgeOptions = JudgeOptions(n_ctx=8192),
) -> None:
    """Judge every arm's answers N times: the paper's yes/no prompt for mc, the 0/1 judge for free.

    Re-running resumes: finished judge requests come from each run's cache. Exits 3 when a judge
    call failed (each kind is listed with its fix), unless --allow-failures.
    """
    from clinieval.benchmarks.ehrnoteqa.task import judge_arm

    async def judge_one(path: Path) -> JudgeResult:
        temperature = judging.judge_temperature
        return await judge_arm(
            path,
            judge_model,
            repeats=repeats,
            max_tokens=max_tokens,
            temperature=temperature,
            **judging.call(),
        )

    judge_runs(runs, judging, judge_one)


@command(app)
def analyze(
    runs: ArmRuns,
    out: Annotated[Path, typer.Option(help="folder for analysis.json, report.md and report.html")],
) -> None:
    """Scores in every mode side by side, their agreement, judge SD, rank stability, breakdowns."""
    from clinieval.benchmarks.ehrnoteqa.analysis import analyze_runs
    from clinieval.benchmarks.ehrnoteqa.report import render_markdown, write_report

    result = analyze_runs(run_dirs(runs))
    paths = write_report(result, out)
    typer.echo(render_markdown(result))
    typer.echo(f"wrote {', '.join(map(str, paths))}")


DEMO_ENDPOINTS = Endpoints(n_ctx=8192, timeout=120.0)
"""The demo's endpoint options: an 8k window, as Level 2's notes need (``demo.DEMO_N_CTX``), and
the 120 s per request the demo has always used; the rest as every command has them."""


@command(app)
def demo(
    out: Annotated[Path, typer.Option(help="folder for the synthetic set, the arms and the report")],
    patients: Annotated[int, typer.Option(min=1, help="synthetic patients")] = 5,
    per_patient: Annotated[int, typer.Option(min=1, help="questions per patient")] = 2,
    seed: Annotated[int, typer.Option(help="seed of the synthetic set")] = 0,
    model: DemoModels = None,
    judge_model: Annotated[
        str, typer.Option("--judge", help="judge model (default: the tiny embedded one, not credible)")
    ] = DEFAULT_MODEL,
    repeats: Annotated[int, typer.Option(min=1, help="judge repeats")] = 5,
    free: Annotated[bool, typer.Option(help="also run the free-text format")] = True,
    max_tokens: Annotated[int, typer.Option(min=1, help="answer length limit (kept short for speed)")] = 48,
    loglik: Annotated[
        bool,
        typer.Option(
            help="also score the options by log-likelihood (mc; the embedded models and vLLM return "
            "prompt log-probabilities, most OpenAI-compatible servers do not)"
        ),
    ] = True,
    endpoints: Endpoints = DEMO_ENDPOINTS,
    progress: ShowProgress = True,
) -> None:
    """EHRNoteQA end to end on a synthetic set: embedded models, both formats, tiny judge, report.

    The synthetic set has both levels; the tiny judge is labelled as not credible in the report.
    """
    from clinieval.benchmarks.ehrnoteqa.demo import DemoPlan, run_demo
    from clinieval.models.catalog import DEMO_MODELS

    plan = DemoPlan(
        out=out,
        patients=patients,
        per_patient=per_patient,
        seed=seed,
        models=tuple(model or DEMO_MODELS),
        judge=judge_model,
        repeats=repeats,
        formats=("mc", "free") if free else ("mc",),
        max_tokens=max_tokens,
        loglik=loglik,
        backend=endpoints.backend(),
        concurrency=endpoints.in_flight(),
        progress=progress,
    )
    for line in asyncio.run(run_demo(plan)):
        typer.echo(line)


@command(app, "review-verdicts")
def review_verdicts(
    export: Annotated[
        Path, typer.Argument(metavar="EXPORT_CSV", help="questions.csv written by `clinieval review export`")
    ],
    out: Annotated[
        Path, typer.Option(help="the review CSV to fill (the build's review.csv, or a copy with --review)")
    ],
    review: Annotated[
        Path | None,
        typer.Option(help="the build's review.csv the study came from (default: --out, in place)"),
    ] = None,
    reviewer: Annotated[
        list[str] | None,
        typer.Option(help="whose verdict wins where reviewers differ (repeatable, first listed wins)"),
    ] = None,
) -> None:
    """Write the review app's verdicts into a build's review.csv, for `ehrnoteqa build import`."""
    from clinieval.benchmarks.ehrnoteqa.build.pipeline import GENERATED_FILE
    from clinieval.benchmarks.ehrnoteqa.review import fill_review

    source = review if review is not None else out
    filled = fill_review(export, source, out, reviewer or ())
    counts = ", ".join(f"{n} {d}" for d, n in filled.decisions.items())
    typer.echo(f"{sum(filled.decisions.values())} items ({counts}) -> {out}")
    generated = source.parent / GENERATED_FILE
    check = f" --generated {generated}" if generated.is_file() and out.parent != source.parent else ""
    typer.echo(f"next: clinieval ehrnoteqa build import {out}{check} --out FINAL.jsonl")
