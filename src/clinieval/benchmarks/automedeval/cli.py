"""``clinieval automedeval``: judge, analyze, kb, convert, build, train and demo (see docs/automedeval.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Literal

import typer

from clinieval.benchmarks.automedeval.build.cli import build_app
from clinieval.benchmarks.automedeval.judge_set import JudgeItem
from clinieval.benchmarks.automedeval.kb_cli import KbSearch, kb_app
from clinieval.benchmarks.automedeval.train_cli import train
from clinieval.cli_options import AllowHost, Concurrency, NCtx, Retries, ShowProgress, Timeout, command_group
from clinieval.errors import UserError

Order = Annotated[
    Literal["fixed", "shuffled", "balanced"],
    typer.Option(
        help="the order each repeat shows the answers in: fixed (the paper's protocol: as given), "
        "shuffled (an independent seeded draw per repeat) or balanced (a Latin square of rotations: "
        "each answer in each position equally often; needed for position-bias figures, "
        "--repeats 2k gives each order a same-order control)"
    ),
]
Estimator = Annotated[
    Literal["per-run", "mean-scores"],
    typer.Option(
        help="per-run (the paper's: each metric on each run's own verdicts, a failed reply wrong in "
        "that run, averaged over runs with their spread) or mean-scores (each answer's mean over "
        "the parsed repeats, then scored)"
    ),
]

app = command_group("AutoMedEval: judge a medical judge against physicians; build its training data.")
app.add_typer(kb_app, name="kb")
app.add_typer(build_app, name="build")
app.command("train")(train)


@app.command()
def convert(
    runs: Annotated[list[Path], typer.Argument(help="two or more run folders over the same questions")],
    out: Annotated[Path, typer.Option(help="the judge-evaluation set to write (.jsonl)")],
) -> None:
    """Turn runs (MedAlign arms, EHRNoteQA free-text arms, any task) into a judge-evaluation set."""
    from clinieval.benchmarks.automedeval.convert import runs_to_set, write_set

    done = runs_to_set(runs)
    if not done.items:
        raise UserError(
            f"no sample to judge: {done.no_reference} have no reference answer, "
            f"{done.failed} failed in some run"
        )
    write_set(done.items, out)
    typer.echo(
        f"{len(done.items)} items x {len(done.items[0].responses)} responses; left out: {done.no_reference} "
        f"without a reference, {done.failed} with a failed call; written: {out}"
    )


@app.command()
def judge(
    judge_set_path: Annotated[
        Path, typer.Argument(metavar="SET", help="a judge-evaluation set (.jsonl, .csv)")
    ],
    judge_models: Annotated[
        list[str],
        typer.Option("--judge", help="a judge's model spec, or baseline:overlap; repeat for several"),
    ],
    out: Annotated[
        Path,
        typer.Option(help="folder for the verdicts (one subfolder per judge when several), cache and report"),
    ],
    repeats: Annotated[int, typer.Option(min=1, help="judge each item N times (the paper's runs)")] = 3,
    seed: Annotated[int, typer.Option(help="seed of the response orders (and of repeat r: seed + r)")] = 0,
    order: Order = "fixed",
    estimator: Estimator = "per-run",
    kb_path: Annotated[
        Path | None, typer.Option("--kb", help="a `kb build` folder: turns on the knowledge completion chain")
    ] = None,
    kb_mode: KbSearch = "bm25",
    max_tokens: Annotated[int, typer.Option(min=1, help="judge reply limit")] = 512,
    one_shot: Annotated[
        bool, typer.Option(help="show a worked example first (for judges not trained on the format)")
    ] = False,
    rationale: Annotated[
        bool, typer.Option(help="score rationales against reference rationales with BERTScore")
    ] = True,
    n_ctx: NCtx = 4096,
    timeout: Timeout = 600.0,
    retries: Retries = 4,
    concurrency: Concurrency = None,
    allow_host: AllowHost = None,
    progress: ShowProgress = True,
) -> None:
    """Score every item's responses with one or more judges, then write the analysis report.

    Per judge: verdicts.jsonl and summary.json (parse rate, calls, agreement, bias); in --out:
    automedeval.{json,md,html} with the judges side by side. Re-running resumes: finished judge
    calls come from each folder's cache.
    """
    import asyncio
    import dataclasses

    from clinieval.benchmarks.automedeval.data import load_set
    from clinieval.benchmarks.automedeval.judging import JUDGE_GENERATION, JudgePlan, judge_all, judge_folders
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
    from clinieval.benchmarks.automedeval.overlap_judge import judge_model
    from clinieval.models.spec import BackendOptions

    items = load_set(judge_set_path)
    folders = judge_folders(out, judge_models)
    kb = KnowledgeBase(kb_path, mode=kb_mode) if kb_path is not None else None
    plan = JudgePlan(
        repeats=repeats,
        seed=seed,
        generation=dataclasses.replace(JUDGE_GENERATION, max_tokens=max_tokens),
        kb=kb,
        concurrency=concurrency,
        progress=progress,
        one_shot=one_shot,
        order=order,
        estimator=estimator,
    )
    options = BackendOptions.from_cli(n_ctx, timeout, retries, concurrency, allow_host)
    models = [judge_model(spec, options) for spec in judge_models]

    asyncio.run(judge_all(items, models, folders, plan))
    typer.echo(f"{len(items)} items x {repeats} repeats ({order} order) judged by {len(models)} judge(s)")
    _analyze_and_write(items, folders, out, rationale=rationale, estimator=estimator)


def _analyze_and_write(
    items: list[JudgeItem],
    folders: list[Path],
    out: Path,
    *,
    rationale: bool,
    resamples: int = 2000,
    estimator: str = "per-run",
) -> None:
    from clinieval.benchmarks.automedeval import report
    from clinieval.benchmarks.automedeval.analysis import AnalysisSettings, analyze, read_judge_runs

    settings = AnalysisSettings(resamples=resamples, rationale=rationale, estimator=estimator)
    result = analyze(items, read_judge_runs(folders), settings)
    paths = report.write(result, out)
    for w in result["warnings"]:
        typer.echo(f"warning: {w}", err=True)
    typer.echo("written: " + ", ".join(map(str, paths)))


@app.command()
def analyze(
    judge_set_path: Annotated[
        Path, typer.Argument(metavar="SET", help="the judge-evaluation set the judges ran on")
    ],
    folders: Annotated[list[Path], typer.Argument(metavar="JUDGED...", help="folders written by `judge`")],
    out: Annotated[Path, typer.Option(help="folder for automedeval.json, .md and .html")],
    resamples: Annotated[int, typer.Option(min=100, help="bootstrap resamples for the CIs")] = 2000,
    rationale: Annotated[
        bool, typer.Option(help="score rationales against reference rationales with BERTScore")
    ] = True,
    estimator: Estimator = "per-run",
) -> None:
    """Compare judges' verdicts with the physicians' ratings, side by side, with CIs and paired tests."""
    from clinieval.benchmarks.automedeval.data import load_set

    _analyze_and_write(
        load_set(judge_set_path), folders, out, rationale=rationale, resamples=resamples, estimator=estimator
    )


@app.command()
def demo(
    out: Annotated[
        Path, typer.Option(help="folder for the synthetic set, the knowledge base, verdicts, report")
    ],
    judge_models: Annotated[
        list[str] | None,
        typer.Option("--judge", help="judges (default: both embedded models and baseline:overlap)"),
    ] = None,
    items: Annotated[int, typer.Option(min=2, help="synthetic items")] = 12,
    repeats: Annotated[int, typer.Option(min=1, help="repeats per item (runs), in the given order")] = 2,
    seed: Annotated[int, typer.Option(help="seed of the set and of the orders")] = 0,
    progress: ShowProgress = True,
) -> None:
    """AutoMedEval end to end on a synthetic set whose physician ratings are computable.

    Both embedded models (not credible) and the overlap baseline judge it with the knowledge chain;
    the report puts them side by side. Re-running resumes from each judge's cache.
    """
    from clinieval.benchmarks.automedeval.demo import DemoPlan, demo_judges, run_demo

    plan = DemoPlan(
        out, demo_judges(judge_models), items=items, repeats=repeats, seed=seed, progress=progress
    )
    written = run_demo(plan, typer.echo)
    typer.echo("written: " + ", ".join(str(p) for p in written))


@app.command("review-items")
def review_items(
    judge_set_path: Annotated[
        Path, typer.Argument(metavar="SET", help="a judge-evaluation set (.jsonl, .csv)")
    ],
    out: Annotated[Path, typer.Option(help="the review items file to write (.jsonl)")],
) -> None:
    """Turn a set into review items for physicians' ratings in the browser (`clinieval review import`)."""
    from clinieval.benchmarks.automedeval.data import load_set
    from clinieval.benchmarks.automedeval.review import to_review_items
    from clinieval.review.items import write_items

    items = to_review_items(load_set(judge_set_path))
    write_items(out, items)
    typer.echo(
        f"{len(items)} items written: {out}\nnext: clinieval review import {out} --study NAME --kind rate"
    )


@app.command("review-ratings")
def review_ratings(
    judge_set_path: Annotated[Path, typer.Argument(metavar="SET", help="the set the review items came from")],
    ratings: Annotated[Path, typer.Argument(help="ratings.csv from `clinieval review export`")],
    out: Annotated[Path, typer.Option(help="the set with the physicians' ratings (.jsonl)")],
) -> None:
    """Add the physicians' ratings from a review export to the set, for `judge` and `analyze`."""
    from clinieval.benchmarks.automedeval.convert import write_set
    from clinieval.benchmarks.automedeval.data import load_set
    from clinieval.benchmarks.automedeval.review import with_review_ratings

    items, added = with_review_ratings(load_set(judge_set_path), ratings)
    write_set(items, out)
    typer.echo(f"{added} ratings added to {len(items)} items; written: {out}")
