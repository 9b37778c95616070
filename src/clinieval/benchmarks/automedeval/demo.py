"""AutoMedEval end to end without restricted data: the synthetic set, a knowledge base, the
embedded models as judges (each repeat in its own seeded order, with the knowledge chain), and the
report with the judges side by side.

The set's physician ratings follow a stated rule from how each response was built (see
:mod:`clinieval.benchmarks.automedeval.synth`), so what a good judge should say is known. The
embedded models are tiny: as judges they exercise every step with real text and real parsing, and
the report labels them not credible. Re-running resumes: the set and the knowledge base are
reused, finished judge calls come from each judge's cache. The judges are opened with the
command's endpoint options (``backend``, ``concurrency``: the ``--n-ctx``, ``--timeout``,
``--concurrency``, ``--executor`` ... that ``automedeval judge`` takes).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.benchmarks.automedeval.judge_set import JudgeItem
from clinieval.models.spec import BackendOptions

SYNTHETIC_WARNING = (
    "These numbers are on clinieval's synthetic judge-evaluation set: its physician ratings are a stated "
    "formula of how each response was built, plus seeded rater noise, not real physicians. They check the "
    "method end to end and are not comparable with the paper's."
)

DEMO_MAX_TOKENS = 256
"""Shorter than the judge's default 512: the tiny judges otherwise write on to the limit, doubling
the demo's time without changing what it shows. Recorded in each judge's cache key."""

DEMO_STOP = ("[Patient Question]",)
"""Where a reply that has given its verdict starts inventing the next item: Gemma-3-270M, a base
model after the worked example, writes its ``Score:`` line and then a new ``[Patient Question]``
section on to the token limit (all 24 of its replies in the 12-item demo). Stopping there halves
its decoding; every score, rationale and lookup is read from the text before it, so the parsed
verdicts are the same (checked on those 48 replies). Recorded in each judge's cache key."""


@dataclass(frozen=True, slots=True)
class DemoPlan:
    out: Path
    judges: tuple[str, ...]
    items: int = 12
    repeats: int = 2
    seed: int = 0
    backend: BackendOptions = field(default_factory=BackendOptions)
    """How every judge opens its model (the command's endpoint options)."""
    concurrency: int | None = None
    """Judge requests in flight (None: each judge's own ceiling)."""
    progress: bool = True


def _knowledge_base(folder: Path) -> Path:
    """A small base of the synthetic conditions' key facts, one document per condition."""
    from clinieval.benchmarks.automedeval.knowledge import build_kb
    from clinieval.benchmarks.automedeval.synth import CONDITIONS
    from clinieval.fsutil import atomic_write_text

    kb = folder / "kb"
    if not kb.is_dir():
        docs = folder / "documents"
        docs.mkdir(parents=True, exist_ok=True)
        for n, condition in enumerate(CONDITIONS):
            atomic_write_text(docs / f"condition-{n:02d}.txt", " ".join(condition.facts) + "\n")
        build_kb([docs], kb)
    return kb


def _the_set(plan: DemoPlan) -> list[JudgeItem]:
    from clinieval.benchmarks.automedeval.convert import write_set
    from clinieval.benchmarks.automedeval.synth import synthetic_set

    items = synthetic_set(plan.items, seed=plan.seed)
    write_set(items, plan.out / "set.jsonl")
    return items


def run_demo(plan: DemoPlan, echo: Callable[[str], None]) -> list[Path]:
    """Write the set, the base, each judge's verdicts and the report under ``plan.out``."""
    from clinieval.benchmarks.automedeval import report
    from clinieval.benchmarks.automedeval.analysis import AnalysisSettings, analyze, read_judge_runs
    from clinieval.benchmarks.automedeval.judging import JUDGE_GENERATION, JudgePlan, judge_all, judge_folders
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
    from clinieval.benchmarks.automedeval.overlap_judge import judge_model

    plan.out.mkdir(parents=True, exist_ok=True)
    items = _the_set(plan)
    kb = KnowledgeBase(_knowledge_base(plan.out))
    judge_plan = JudgePlan(
        repeats=plan.repeats,
        seed=plan.seed,
        generation=dataclasses.replace(JUDGE_GENERATION, max_tokens=DEMO_MAX_TOKENS, stop=DEMO_STOP),
        kb=kb,
        concurrency=plan.concurrency,
        progress=plan.progress,
        # untrained tiny judges almost never write the score line without the worked example
        # (0 of 24 replies each in a 12-item trial; 1 of 4 for SmolLM2 with it)
        one_shot=True,
    )
    folders = judge_folders(plan.out / "judges", plan.judges, nested=True)
    echo(f"judging {len(items)} items x {plan.repeats} repeats with {', '.join(plan.judges)}")
    judges = [judge_model(spec, plan.backend) for spec in plan.judges]
    asyncio.run(judge_all(items, judges, folders, judge_plan))
    result = analyze(items, read_judge_runs(folders), AnalysisSettings(), warnings=[SYNTHETIC_WARNING])
    return report.write(result, plan.out)


def demo_judges(judges: Sequence[str] | None) -> tuple[str, ...]:
    """Both embedded models and the rule-based overlap baseline, unless judges are given."""
    from clinieval.benchmarks.automedeval.overlap_judge import SPEC
    from clinieval.models.catalog import DEMO_MODELS

    return tuple(judges or (*DEMO_MODELS, SPEC))
