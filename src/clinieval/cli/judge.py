"""``clinieval judge``: grade the answers of any finished run with an LLM judge and a named rubric.

The one generic entry point to judging (docs/judge.md); benchmarks keep their own commands
(``clinieval medalign judge``, ``clinieval ehrnoteqa judge``) where they pick the rubric for the
user. The rubric is found by name among the shared ones (``judge.catalog.SHARED_RUBRICS``) and
each benchmark's ``rubrics()``, which is why this lives in the CLI layer: the shared layers never
import a benchmark. Failures are printed by kind with their fix, and a failed judge call makes
the command exit 3 (``errors.EXIT_FAILED_ITEMS``) unless ``--allow-failures``.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.cli_options import (
    AllowHost,
    AllowJudgeFailures,
    Concurrency,
    JudgeTemperature,
    NCtx,
    Retries,
    ShowProgress,
    Timeout,
    echo_judged,
    exit_if_judge_failed,
)
from clinieval.models.spec import BackendOptions

if TYPE_CHECKING:
    from clinieval.judge.catalog import RubricEntry, RubricOptions
    from clinieval.judge.run import JudgeResult


def known_rubrics() -> dict[str, RubricEntry]:
    """Every rubric ``--rubric`` may name: the shared ones, then each benchmark's own."""
    from clinieval.benchmarks import BENCHMARKS
    from clinieval.judge.catalog import SHARED_RUBRICS, rubric_mapping

    return rubric_mapping([*SHARED_RUBRICS, *(r for b in BENCHMARKS for r in b.rubrics())])


def judge(
    runs: Annotated[list[Path], typer.Argument(help="run directories (or a folder of them)")],
    judge_model: Annotated[
        str, typer.Option("--judge", help="the judge's model spec (not the model under test)")
    ],
    rubric: Annotated[
        str,
        typer.Option(
            help="reference_correct (any task with targets) or a benchmark's rubric, e.g. medalign_judge; "
            "a wrong name lists them all"
        ),
    ],
    repeats: Annotated[int, typer.Option(min=1, help="judge each answer N times (distinct requests)")] = 5,
    snippets: Annotated[
        int | None, typer.Option(min=0, help="EHR excerpts shown by rubrics that show them (default 5)")
    ] = None,
    max_tokens: Annotated[
        int | None, typer.Option(min=1, help="judge reply limit (default: the rubric's own)")
    ] = None,
    judge_temperature: JudgeTemperature = 0.0,
    limit: Annotated[
        int | None, typer.Option(min=1, help="judge only the first N answers of each run")
    ] = None,
    n_ctx: NCtx = 4096,
    timeout: Timeout = 600.0,
    retries: Retries = 4,
    concurrency: Concurrency = None,
    allow_host: AllowHost = None,
    progress: ShowProgress = True,
    allow_failures: AllowJudgeFailures = None,
) -> None:
    """Judge every answer in RUNS with a rubric; scores go to RUN/scores/RUBRIC.jsonl.

    Re-running resumes: finished judge requests come from each run's cache. Failures are listed
    by kind with their fix; a failed judge call exits 3 unless --allow-failures.
    """
    from clinieval.failures import parse_allowed
    from clinieval.judge.run import judge_folder
    from clinieval.runs import RunDir, find_run_dirs

    allowed = parse_allowed(allow_failures)
    entry = _pick(rubric, snippets)
    paths = find_run_dirs(runs)
    built = entry.build(_options(snippets))
    generation = entry.judge_generation(max_tokens, judge_temperature)
    backend = BackendOptions.from_cli(n_ctx, timeout, retries, concurrency, allow_host)
    results: list[JudgeResult] = []
    for path in paths:
        result = asyncio.run(
            judge_folder(
                RunDir.open(path),
                judge_model,
                built,
                backend=backend,
                repeats=repeats,
                generation=generation,
                concurrency=concurrency,
                limit=limit,
                progress=progress,
            )
        )
        echo_judged(path, result, shrink="--snippets" if entry.uses_snippets else None)
        results.append(result)
    exit_if_judge_failed(results, allowed)


def _pick(name: str, snippets: int | None) -> RubricEntry:
    """The named rubric; ``--snippets`` on a rubric that shows none is a mistake worth one line."""
    from clinieval.errors import UserError
    from clinieval.judge.catalog import pick_rubric

    entry = pick_rubric(known_rubrics(), name)
    if snippets is not None and not entry.uses_snippets:
        raise UserError(f"--snippets: rubric {entry.name} shows no EHR excerpts")
    return entry


def _options(snippets: int | None) -> RubricOptions:
    from clinieval.judge.catalog import RubricOptions

    return RubricOptions() if snippets is None else RubricOptions(snippets=snippets)
