"""``clinieval judge``: grade the answers of any finished run with an LLM judge and a named rubric.

The one generic entry point to judging (docs/judge.md); benchmarks keep their own commands
(``clinieval medalign judge``, ``clinieval ehrnoteqa judge``) where they pick the rubric for the
user. The rubric is found by name among the shared ones (``judge.catalog.SHARED_RUBRICS``) and
each benchmark's ``rubrics()``, which is why this lives in the CLI layer: the shared layers never
import a benchmark. Failures are printed by kind with their fix, and a failed judge call makes
the command exit 3 (``errors.EXIT_FAILED_ITEMS``) unless ``--allow-failures``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.cli_commands import JudgeOptions, judge_runs, rubric_judge
from clinieval.cli_options import JudgeSpec, NCtx

if TYPE_CHECKING:
    from clinieval.judge.catalog import RubricEntry, RubricOptions


def known_rubrics() -> dict[str, RubricEntry]:
    """Every rubric ``--rubric`` may name: the shared ones, then each benchmark's own."""
    from clinieval.benchmarks import BENCHMARKS
    from clinieval.judge.catalog import SHARED_RUBRICS, rubric_mapping

    return rubric_mapping([*SHARED_RUBRICS, *(r for b in BENCHMARKS for r in b.rubrics())])


@dataclass(frozen=True)
class RunJudging(JudgeOptions):
    """The judge options, worded for any run folder rather than a benchmark's arms."""

    limit: Annotated[int | None, typer.Option(min=1, help="judge only the first N answers of each run")] = (
        None
    )
    n_ctx: NCtx = 4096


def judge(
    runs: Annotated[list[Path], typer.Argument(help="run directories (or a folder of them)")],
    judge_model: JudgeSpec,
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
    judging: RunJudging = RunJudging(),
) -> None:
    """Judge every answer in RUNS with a rubric; scores go to RUN/scores/RUBRIC.jsonl.

    Re-running resumes: finished judge requests come from each run's cache. Failures are listed
    by kind with their fix; a failed judge call exits 3 unless --allow-failures, and so does a
    pass that scored nothing (or, with --allow-failures FRACTION, left more unscored).
    """
    entry = _pick(rubric, snippets)
    generation = entry.judge_generation(max_tokens, judging.judge_temperature)
    built = entry.build(_options(snippets))
    judge_one = rubric_judge(judge_model, built, judging, repeats=repeats, generation=generation)
    judge_runs(runs, judging, judge_one, shrink="--snippets" if entry.uses_snippets else None)


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
