"""``clinieval automedeval judge | analyze | demo``: judge a set with one or more judges and
compare their verdicts with the physicians' ratings.

``judge`` ends with the same analysis and report that ``analyze`` writes for folders judged
earlier, so both go through :func:`_analyze_and_write`; ``demo`` runs the whole chain on a
synthetic set. The work lives in ``judging.py``, ``analysis.py``, ``report.py`` and ``demo.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from clinieval.benchmarks.automedeval.cli.options import KbChain, KbSearch, echo_written
from clinieval.cli_commands import Endpoints
from clinieval.cli_options import ShowProgress

if TYPE_CHECKING:
    from clinieval.benchmarks.automedeval.judge_set import JudgeItem

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
Rationale = Annotated[bool, typer.Option(help="score rationales against reference rationales with BERTScore")]


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
    kb_path: KbChain = None,
    kb_mode: KbSearch = "bm25",
    max_tokens: Annotated[int, typer.Option(min=1, help="judge reply limit")] = 512,
    one_shot: Annotated[
        bool, typer.Option(help="show a worked example first (for judges not trained on the format)")
    ] = False,
    rationale: Rationale = True,
    endpoints: Endpoints = Endpoints(),
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

    items = load_set(judge_set_path)
    folders = judge_folders(out, judge_models)
    kb = KnowledgeBase(kb_path, mode=kb_mode) if kb_path is not None else None
    plan = JudgePlan(
        repeats=repeats,
        seed=seed,
        generation=dataclasses.replace(JUDGE_GENERATION, max_tokens=max_tokens),
        kb=kb,
        concurrency=endpoints.in_flight(),
        progress=progress,
        one_shot=one_shot,
        order=order,
        estimator=estimator,
    )
    backend = endpoints.backend()
    models = [judge_model(spec, backend) for spec in judge_models]

    asyncio.run(judge_all(items, models, folders, plan))  # judge_all closes each judge after its pass
    typer.echo(f"{len(items)} items x {repeats} repeats ({order} order) judged by {len(models)} judge(s)")
    _analyze_and_write(items, folders, out, rationale=rationale, estimator=estimator)


def analyze(
    judge_set_path: Annotated[
        Path, typer.Argument(metavar="SET", help="the judge-evaluation set the judges ran on")
    ],
    folders: Annotated[list[Path], typer.Argument(metavar="JUDGED...", help="folders written by `judge`")],
    out: Annotated[Path, typer.Option(help="folder for automedeval.json, .md and .html")],
    resamples: Annotated[int, typer.Option(min=100, help="bootstrap resamples for the CIs")] = 2000,
    rationale: Rationale = True,
    estimator: Estimator = "per-run",
) -> None:
    """Compare judges' verdicts with the physicians' ratings, side by side, with CIs and paired tests."""
    from clinieval.benchmarks.automedeval.data import load_set

    _analyze_and_write(
        load_set(judge_set_path), folders, out, rationale=rationale, resamples=resamples, estimator=estimator
    )


def _analyze_and_write(
    items: list[JudgeItem],
    folders: list[Path],
    out: Path,
    *,
    rationale: bool,
    resamples: int = 2000,
    estimator: str = "per-run",
) -> None:
    """The analysis of judged folders against the set, written as automedeval.{json,md,html}."""
    from clinieval.benchmarks.automedeval import report
    from clinieval.benchmarks.automedeval.analysis import AnalysisSettings, analyze, read_judge_runs

    settings = AnalysisSettings(resamples=resamples, rationale=rationale, estimator=estimator)
    result = analyze(items, read_judge_runs(folders), settings)
    paths = report.write(result, out)
    for w in result["warnings"]:
        typer.echo(f"warning: {w}", err=True)
    echo_written(paths)


DEMO_ENDPOINTS = Endpoints(timeout=120.0)
"""The demo's endpoint options: the 120 s per request the demo has always used; the rest as
every command has them."""


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
    endpoints: Endpoints = DEMO_ENDPOINTS,
    progress: ShowProgress = True,
) -> None:
    """AutoMedEval end to end on a synthetic set whose physician ratings are computable.

    Both embedded models (not credible) and the overlap baseline judge it with the knowledge chain;
    the report puts them side by side. Re-running resumes from each judge's cache.
    """
    from clinieval.benchmarks.automedeval.demo import DemoPlan, demo_judges, run_demo

    plan = DemoPlan(
        out,
        demo_judges(judge_models),
        items=items,
        repeats=repeats,
        seed=seed,
        backend=endpoints.backend(),
        concurrency=endpoints.in_flight(),
        progress=progress,
    )
    echo_written(run_demo(plan, typer.echo))
