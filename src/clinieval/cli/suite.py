"""``clinieval suite``: every model over every benchmark from one TOML file, and the leaderboard.

The commands only parse, call :mod:`clinieval.suite` and print. This is the layer that knows both
the benchmarks (``BENCHMARKS``, each offering a suite part) and the command line's endpoint
options (:class:`~clinieval.cli_commands.Endpoints`), so it hands the suite layer the parts and
the one function that turns a suite's ``[endpoints]`` table into backend options.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clinieval.cli_options import ShowProgress, command_group
from clinieval.errors import EXIT_FAILED_ITEMS

if TYPE_CHECKING:
    from clinieval.models.spec import BackendOptions
    from clinieval.suite.config import Suite
    from clinieval.suite.layout import EndpointSettings
    from clinieval.suite.manifest import SuiteManifest
    from clinieval.suite.part import SuiteModel, SuitePart
    from clinieval.suite.plan import SuitePlan

app = command_group(
    "Suites: every model over every benchmark from one TOML file (docs/suite.md), and the leaderboard."
)

SuiteFile = Annotated[
    Path, typer.Argument(help="the suite file (TOML; docs/suite.md, docs/suite.schema.json)")
]
Overwrite = Annotated[
    bool, typer.Option(help="run again, from scratch, a cell whose settings changed since it ran")
]
TINY_NOTE = (
    "{models}: tiny embedded models; they exercise every code path with real text, but their "
    "numbers say nothing clinical. Name capable models in a suite file for real ones."
)


def suite_parts() -> list[SuitePart]:
    """The suite part of every benchmark that offers one."""
    from clinieval.benchmarks import BENCHMARKS

    return [p for b in BENCHMARKS if (p := b.suite()) is not None]


def backend_for(settings: EndpointSettings) -> tuple[BackendOptions, int | None]:
    """A suite's ``[endpoints]`` table as the command line's endpoint options read it: the options
    models are opened with, and the requests each run keeps in flight."""
    from clinieval.cli_commands import Endpoints

    shared = {f.name: getattr(settings, f.name) for f in dataclasses.fields(Endpoints)}
    # The table keeps an empty tuple where the option group keeps None: "no extra hosts".
    endpoints = Endpoints(**{**shared, "allow_host": list(settings.allow_host) or None})
    return endpoints.backend(settings.server_kind), endpoints.in_flight()


def _read(path: Path) -> Suite:
    from clinieval.suite.config import read_suite

    return read_suite(path, suite_parts(), backend_for)


@app.command()
def schema() -> None:
    """Print the suite file's JSON Schema (draft 2020-12; docs/suite.schema.json is this output)."""
    from clinieval.suite.layout import published_schema

    typer.echo(schema_text(published_schema(suite_parts())), nl=False)


def schema_text(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, indent=2, ensure_ascii=False) + "\n"


@app.command()
def plan(
    suite_file: SuiteFile,
    out: Annotated[Path | None, typer.Option(help="a suite folder: also show what is already done")] = None,
    check: Annotated[
        bool,
        typer.Option(
            help="open every model and run each cell's own pre-flight (tokenizer, context size, "
            "log-likelihoods, server, judge); --no-check reads only the file and the data"
        ),
    ] = True,
) -> None:
    """Check SUITE_FILE, its data and every cell's pre-flight (no model is asked for an answer)
    and print every model x benchmark cell with its steps and model calls."""
    from clinieval.suite.manifest import SuiteManifest
    from clinieval.suite.plan import plan as make_plan
    from clinieval.suite.plan import plan_lines
    from clinieval.suite.preflight import check_cells, still_to_run

    suite = _read(suite_file)
    planned = make_plan(suite, out or Path("DIR"))
    manifest = None if out is None else SuiteManifest.read(out)
    todo = still_to_run(planned, manifest)
    opened = check_cells(todo, suite.path) if check else 0
    for line in plan_lines(planned, manifest):
        typer.echo(line)
    if check:
        passed = f"checked: {len(todo)} cells to run pass their benchmarks' pre-flight"
        typer.echo(f"{passed} ({opened} models opened)")
    else:
        typer.echo("not checked: models were not opened (--no-check); `suite run` checks every cell first")


@app.command()
def run(
    suite_file: SuiteFile,
    out: Annotated[Path, typer.Option(help="the suite folder: a cell per model x benchmark, suite.json")],
    overwrite: Overwrite = False,
    progress: ShowProgress = True,
    skip_refused: Annotated[
        bool,
        typer.Option(
            help="record the cells whose pre-flight fails (an unreachable model, a missing tokenizer) "
            "as failed and run the others, instead of refusing the suite"
        ),
    ] = False,
) -> None:
    """Run every model over every benchmark of SUITE_FILE into OUT; the same command again resumes
    (finished cells are not asked again). Every cell still to run is checked first, as `suite
    plan` checks it.

    Exit status: 0 done; 2 a mistake in the suite file, its data or a cell's pre-flight (nothing
    asked, nothing written); 3 finished, but cells or items failed (listed at the end; run again
    to retry them)."""
    if not _run(_read(suite_file), out, overwrite=overwrite, progress=progress, skip_refused=skip_refused):
        raise typer.Exit(EXIT_FAILED_ITEMS)


def _run(
    suite: Suite,
    out: Path,
    *,
    overwrite: bool,
    progress: bool,
    keep: Sequence[str] = (),
    skip_refused: bool = False,
) -> bool:
    """Plan and run ``suite``; print the summary; whether every cell finished whole."""
    from clinieval.suite.execute import run_suite, summary_lines
    from clinieval.suite.plan import plan as make_plan

    planned = make_plan(suite, out)
    if suite.path.resolve().parent == out.resolve():
        keep = (*keep, suite.path.name)
    outcome = run_suite(
        planned, out, overwrite=overwrite, progress=progress, keep=keep, skip_refused=skip_refused
    )
    for line in summary_lines(outcome, out):
        typer.echo(line, err=True)
    typer.echo(f"next: clinieval suite report {out}", err=True)
    return not outcome.failed and not outcome.with_failed_items


@app.command()
def report(
    suite_dir: Annotated[Path, typer.Argument(help="a suite folder written by `clinieval suite run`")],
    clinicians: Annotated[
        str | None,
        typer.Option(
            help="the clinicians' ratings of a `suite sample`: the review database (SQLite file or"
            " postgresql:// URL) or a study's export; the judged benchmarks they rated are calibrated"
            " (PPI++, docs/calibration.md)"
        ),
    ] = None,
    sample_name: Annotated[
        str | None,
        typer.Option("--sample", help="with --clinicians: the sample's name (`suite sample --study`)"),
    ] = None,
    lam: Annotated[
        float | None,
        typer.Option(
            "--lam",
            help="with --clinicians: fix the judge's weight instead of fitting it (1: plain PPI, 0: the"
            " clinicians alone); docs/calibration.md advises it below about 100 rated items",
        ),
    ] = None,
) -> None:
    """Write the leaderboard (SUITE_DIR/report/leaderboard.html, .md, .json), each benchmark's own
    report and a per-item results browser, from what the suite recorded; no model is asked."""
    for line in _report(suite_dir, clinicians=clinicians, sample_name=sample_name, lam=lam):
        typer.echo(line)


def _recorded(out: Path) -> tuple[SuitePlan, SuiteManifest]:
    """The suite at ``out`` as it last ran (the suite file's text its manifest keeps, so what is
    read matches what ran even if the file was edited since), planned again, and its manifest."""
    from clinieval.suite.config import parse_suite
    from clinieval.suite.manifest import SuiteManifest
    from clinieval.suite.plan import plan as make_plan

    manifest = SuiteManifest.open(out)
    recorded = manifest.data.get("suite", {})
    suite = parse_suite(
        recorded.get("text", ""), Path(recorded.get("file", out / "suite.toml")), suite_parts(), backend_for
    )
    return make_plan(suite, out), manifest


def _report(
    out: Path,
    notes: Sequence[str] = (),
    *,
    clinicians: str | None = None,
    sample_name: str | None = None,
    lam: float | None = None,
) -> list[str]:
    from clinieval.errors import UserError
    from clinieval.suite.report import write_suite_report

    if sample_name is not None and clinicians is None:
        raise UserError("--sample goes with --clinicians DB_OR_EXPORT")
    if lam is not None and clinicians is None:
        raise UserError("--lam goes with --clinicians DB_OR_EXPORT (it weighs the judge against the ratings)")
    if lam is not None and not 0.0 <= lam <= 1.0:
        raise UserError(f"--lam {lam:g}: expected a weight from 0 (the clinicians alone) to 1 (plain PPI)")
    planned, manifest = _recorded(out)
    tiny = tiny_models(planned.suite.models)
    if tiny:
        notes = [TINY_NOTE.format(models=", ".join(tiny)), *notes]
    ratings = None
    if clinicians is not None:
        from clinieval.suite.clinicians import read_clinicians
        from clinieval.suite.sample_design import DEFAULT_NAME, design_path, read_design

        design = read_design(design_path(out, sample_name or DEFAULT_NAME))
        ratings = read_clinicians(clinicians, design)
    written = write_suite_report(planned, manifest, notes=notes, clinicians=ratings, lam=lam)
    return [*(f"note: {n}" for n in written.notes), *(str(p) for p in written.files)]


def tiny_models(models: Sequence[SuiteModel]) -> list[str]:
    """The suite's models that are the tiny embedded ones (their numbers say nothing clinical)."""
    from clinieval.models.catalog import EMBEDDED

    names = {f"llamacpp:{e.name}" for e in EMBEDDED}
    return [m.name for m in models if m.spec in names]


@app.command()
def demo(
    out: Annotated[Path, typer.Option(help="folder for the demo: suite.toml, data/, the cells, report/")],
    models: Annotated[
        list[str] | None,
        typer.Option(
            "--models", "-m", help="model specs to compare (repeatable; default: the embedded ones)"
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed for the synthetic data and the shuffles")] = 0,
    progress: ShowProgress = True,
) -> None:
    """Every benchmark's small synthetic set (PubMedQA: a few of its own questions) over the two
    tiny embedded models, judged by the embedded SmolLM2, then the leaderboard. Run again, it
    asks nothing already answered (cells whose demo settings changed run again)."""
    from clinieval.models.catalog import DEMO_MODELS

    specs = list(models or DEMO_MODELS)
    path = write_demo_suite(out, specs, seed)
    typer.echo(f"wrote {path}", err=True)
    suite = _read(path)
    # the demo writes its own suite file: cells whose demo settings changed (a newer clinieval)
    # run again instead of being refused; the others are not asked again
    whole = _run(suite, out, overwrite=True, progress=progress, keep=("data", path.name))
    # calibration needs every judged cell complete; a failed one is reported and retried first
    clinicians = calibrate_with_demo_clinician(out, seed) if whole else None
    for line in _report(out, clinicians=clinicians):  # its notes say the numbers say nothing clinical
        typer.echo(line)
    if not whole:
        raise typer.Exit(EXIT_FAILED_ITEMS)


DEMO_RATED = 4
"""Items per judged benchmark the demo's stand-in clinician rates (of the suite demo's six
EHRNoteQA questions, one per patient): a few unrated remain for PPI++ to use."""


def calibrate_with_demo_clinician(out: Path, seed: int, n: int = DEMO_RATED) -> str | None:
    """The demo's calibration step, as a hospital team would take it with real clinicians: draw
    the clinician sample of the finished suite at ``out`` into ``out/review.db`` (`suite
    sample`), have the stand-in clinician (:mod:`clinieval.suite.demo_clinician`) submit its
    reviews through the review app's code, and return the database for `suite report
    --clinicians`. None when the suite has no judged benchmark to calibrate."""
    from clinieval.review.store import init_db
    from clinieval.suite.demo_clinician import RULE, review_as_demo_clinician
    from clinieval.suite.sample import SampleRequest, judged_benchmarks, sample_suite

    planned, manifest = _recorded(out)
    if not judged_benchmarks(planned, manifest):
        return None
    db = out / "review.db"
    init_db(db).dispose()  # creates it, or changes nothing in a current one
    outcome = sample_suite(planned, manifest, SampleRequest(n, seed), str(db))
    done = review_as_demo_clinician(str(db), [b.study for b in outcome.design.benchmarks])
    typer.echo(
        f"calibration: {n} items per judged benchmark drawn into {db}; the demo's stand-in clinician"
        f" ({RULE}) submitted {done.submitted} reviews ({done.already} already there)",
        err=True,
    )
    return str(db)


def _inside(value: Any, out: Path) -> Any:
    """A path a part returned, as a Path when it lies under ``out`` (the suite file then names it
    relative to its own folder, so the demo folder can move)."""
    inside = isinstance(value, str | Path) and Path(value).is_absolute()
    return Path(value) if inside and Path(value).resolve().is_relative_to(out.resolve()) else value


def write_demo_suite(out: Path, specs: Sequence[str], seed: int) -> Path:
    """Each suite part's synthetic data under ``out/data/<benchmark>`` and ``out/suite.toml`` naming
    them, ``specs`` and the embedded SmolLM2 as judge."""
    from clinieval.fsutil import atomic_write_text, slug
    from clinieval.models.catalog import DEMO_MODELS
    from clinieval.models.spec import model_short_name
    from clinieval.suite.toml_text import suite_toml

    tables: dict[str, Mapping[str, Any]] = {}
    for part in suite_parts():
        folder = (out / "data" / part.name).resolve()
        tables[part.name] = {k: _inside(v, out) for k, v in part.synthetic(folder, seed).items()}
    names: dict[str, str] = {}
    for spec in specs:
        name = slug(model_short_name(spec))
        names[name if name not in names else f"{name}-{len(names) + 1}"] = spec
    text = suite_toml(
        title="clinieval suite demo (tiny models: the numbers say nothing clinical)",
        seed=seed,
        models=names,
        judge={"model": DEMO_MODELS[0], "repeats": 2},
        benchmarks=tables,
        base=out,
    )
    path = out / "suite.toml"
    atomic_write_text(path, text)
    return path


@app.command()
def sample(
    run_dir: Annotated[Path, typer.Argument(help="a finished suite folder (`clinieval suite run`)")],
    n: Annotated[
        int | None,
        typer.Option(
            "--n", min=1, help="items per judged benchmark, the same for every model (whole patients)"
        ),
    ] = None,
    review: Annotated[
        str | None,
        typer.Option(
            "--review",
            envvar="CLINIEVAL_REVIEW_DB",
            help="the review database: SQLite file or postgresql:// URL (env CLINIEVAL_REVIEW_DB)",
        ),
    ] = None,
    seed: Annotated[int, typer.Option(help="seed of the draw and of the blind answer keys")] = 0,
    kind: Annotated[
        str | None,
        typer.Option(
            help="correctness, rating or ranking (default: correctness for 1/0 verdicts, else rating)"
        ),
    ] = None,
    study: Annotated[
        str | None,
        typer.Option(
            help="name of the sample: studies NAME-<benchmark>, design calibration/NAME.json (default:"
            " <suite title>-<benchmark>-calibration, calibration/sample.json)"
        ),
    ] = None,
    plan: Annotated[
        float | None,
        typer.Option(
            "--plan",
            help="print the ratings per benchmark x model a 95% interval this wide needs (PPI++ and"
            " clinicians alone); with --n and --review it also draws",
        ),
    ] = None,
    pilot: Annotated[
        str | None,
        typer.Option(help="with --plan: the review database or export holding an earlier sample's ratings"),
    ] = None,
    assume_rho: Annotated[
        float | None,
        typer.Option("--assume-rho", help="with --plan: the judge-clinician correlation to plan with"),
    ] = None,
) -> None:
    """Draw a seeded sample of the judged items of the suite in RUN_DIR for clinicians to rate,
    as one blinded review study per judged benchmark in --review (docs/leaderboard.md,
    "Calibrating the judge with clinicians"). The same command again changes nothing; another
    seed or size for the same sample is refused."""
    from clinieval.errors import UserError
    from clinieval.suite.sample import SampleRequest, sample_lines, sample_suite
    from clinieval.suite.sample_plan import plan_report

    if plan is None and (pilot is not None or assume_rho is not None):
        raise UserError("--pilot and --assume-rho go with --plan WIDTH")
    if n is None and plan is None:
        raise UserError("give --n N and --review DB to draw a sample, or --plan WIDTH to plan one")
    if n is not None and review is None:
        raise UserError("--review DB: name the review database the studies go into (`clinieval review init`)")
    planned, manifest = _recorded(run_dir)
    if plan is not None:
        for line in plan_report(planned, manifest, plan, kind=kind, rho=assume_rho, pilot=pilot):
            typer.echo(line)
    if n is not None and review is not None:
        outcome = sample_suite(planned, manifest, SampleRequest(n, seed, kind, study), review)
        for line in sample_lines(outcome, review):
            typer.echo(line)
