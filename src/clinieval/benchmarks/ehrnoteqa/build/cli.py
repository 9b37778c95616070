"""``clinieval ehrnoteqa build``: generate EHRNoteQA-style questions, then re-import their review.

Thin: each command parses its options, calls :mod:`.pipeline` or :mod:`.importing` and prints. A
:class:`~clinieval.errors.UserError` propagates to ``clinieval``'s ``main``, which prints it on one
line and exits non-zero. Mount with ``ehrnoteqa_app.add_typer(app, name="build")``.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.cli_commands import Endpoints, command
from clinieval.cli_options import ShowProgress, command_group

if TYPE_CHECKING:
    from clinieval.benchmarks.ehrnoteqa.build.pipeline import BuildResult, BuildSettings, Patient
    from clinieval.models.spec import BackendOptions

app = command_group("Build an EHRNoteQA-like dataset: two-step question generation, then clinician review.")


@dataclass(frozen=True)
class GeneratorEndpoints(Endpoints):
    """The generator's endpoint options: a patient's two steps are one item in flight."""

    concurrency: Annotated[int | None, typer.Option(min=1, help="items in flight")] = None


@command(app)
def generate(
    notes: Annotated[Path, typer.Option(help="MIMIC-IV-Note discharge.csv or discharge.csv.gz")],
    model: Annotated[str, typer.Option("--model", "-m", help="the generator's model spec")],
    out: Annotated[Path, typer.Option(help="build folder (cache, generated.jsonl, review.csv, summary)")],
    patients: Annotated[
        Path | None, typer.Option(help="file with one subject_id per line (or use --sample)")
    ] = None,
    sample: Annotated[
        int | None, typer.Option(help="draw N patients with notes at random (seeded by --seed)")
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of --sample and of the generation")] = 0,
    per_patient: Annotated[int, typer.Option(min=1, help="questions per patient")] = 1,
    temperature: Annotated[float, typer.Option(help="step 1 (question) temperature; the paper: 1")] = 1.0,
    choices_temperature: Annotated[float, typer.Option(help="step 2 (choices) temperature")] = 1.0,
    max_tokens: Annotated[int, typer.Option(min=1, help="reply length limit of each step")] = 1024,
    endpoints: GeneratorEndpoints = GeneratorEndpoints(n_ctx=8192),
    overwrite_review: Annotated[
        bool, typer.Option(help="replace a review.csv that reviewers already wrote in")
    ] = False,
    progress: ShowProgress = True,
) -> None:
    """Write a question (step 1) then five options (step 2) per patient, check them, and export
    review.csv for clinicians. Re-running the same command resumes; a finished build asks nothing.
    """
    from clinieval.benchmarks.ehrnoteqa.build.pipeline import BuildSettings, load_patients

    settings = BuildSettings(
        per_patient=per_patient,
        seed=seed,
        temperature=temperature,
        choices_temperature=choices_temperature,
        max_tokens=max_tokens,
        concurrency=endpoints.in_flight(),
        progress=progress,
        overwrite_review=overwrite_review,
    )
    settings.check()
    chosen = load_patients(notes, patients_file=patients, sample=sample, seed=seed)
    result = asyncio.run(_generate(chosen, model, endpoints.backend(), out, settings))
    typer.echo(result.to_text())
    warning = result.summary.get("warning")
    if warning:
        typer.echo(f"warning: {warning}", err=True)


async def _generate(
    patients: list[Patient], spec: str, backend: BackendOptions, out: Path, settings: BuildSettings
) -> BuildResult:
    from clinieval.benchmarks.ehrnoteqa.build.pipeline import generate_dataset
    from clinieval.models.spec import parse_model_spec

    model = parse_model_spec(spec, backend)
    try:
        return await generate_dataset(patients, model, out, settings)
    finally:
        await model.aclose()


@command(app, "import")
def import_(
    review: Annotated[Path, typer.Argument(help="the filled review.csv")],
    out: Annotated[Path, typer.Option(help="the final QA jsonl (PhysioNet EHRNoteQA format)")],
    generated: Annotated[
        Path | None,
        typer.Option(
            help="generated.jsonl to check the original columns against (default: beside the review)"
        ),
    ] = None,
    allow_failed_checks: Annotated[
        bool, typer.Option(help="keep items failing five_options, distinct_options or valid_answer")
    ] = False,
    stats: Annotated[
        Path | None,
        typer.Option(help="where to write the review statistics (default: OUT.review_stats.json)"),
    ] = None,
) -> None:
    """Apply the clinicians' review (keep, revised_*) and write the final questions and statistics."""
    from clinieval.benchmarks.ehrnoteqa.build.importing import import_review

    result = import_review(
        review, out, generated=generated, allow_failed_checks=allow_failed_checks, stats_out=stats
    )
    typer.echo(result.stats.to_text())
    typer.echo(f"{len(result.items)} questions -> {result.out}\nstatistics -> {result.stats_path}")
