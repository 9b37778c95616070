"""Step (c): a teacher model evaluates every instance, one-shot, with the knowledge completion chain.

The prompt is the judge's own (:func:`judging.judge_messages`: the format the trained judge will
be asked in), with one worked example before it as a user/assistant pair, so the teacher sees the
expected ``Analyze: Step 1: ... Score: Doctor 1: X points. ...`` reply once (the paper's one-shot
prompt; its wording is not public, this is clinieval's). The responses are shown in their
original order, never permuted: the teacher's scores are training targets, and the instance's
order is the one the SFT example shows.

The knowledge completion chain is the one :mod:`judging` runs: while the reply holds a
``[Question]`` line and fewer than :data:`MAX_ROUNDS` lookups were made, the lookup is appended
(``According to the Reference, ...``) and the teacher continues; the last reply is the evaluation
(the protocol asks for the whole analysis and score once the knowledge is given), read with
:func:`verdict.parse_scores`. Every call goes through the folder's request cache, so a killed
pass resumes and a second pass asks nothing. An unparsed reply is kept with ``scores: null`` and
counted: it is never an SFT example, but a reader can see what the teacher wrote.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clinieval.benchmarks.automedeval.build.instances import (
    Evaluation,
    Instance,
    LookupRecord,
    write_instances,
)
from clinieval.benchmarks.automedeval.judging import JUDGE_GENERATION, ask_with_knowledge
from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
from clinieval.benchmarks.automedeval.prompts import one_shot_messages
from clinieval.benchmarks.automedeval.verdict import cut_response, parse_scores
from clinieval.engine.runner import CachedCalls, CallTally, ProgressBar, map_each
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json
from clinieval.judge.rubric import VerdictParseError
from clinieval.models.base import Model
from clinieval.records.cache import RequestCache
from clinieval.types import GenerationConfig, Message

TEACHER_GENERATION = JUDGE_GENERATION
"""Greedy, as the judge: a training target should be the teacher's most likely evaluation."""
PROMPT_NAME = "automedeval-teacher-one-shot-v1"
"""Part of every cache key: a changed example must never reuse old evaluations."""

INSTANCES_FILE = "instances.jsonl"
SUMMARY_FILE = "teach-summary.json"
CACHE_FILE = "cache.sqlite"


def teacher_messages(instance: Instance, *, knowledge: bool) -> list[Message]:
    """The one-shot prompt: the judge's system message for this instance's k, the example as a
    user/assistant pair, then the instance with its responses in original order (each cut to the
    paper's 1,000 characters)."""
    shown = [cut_response(a.text).text for a in instance.responses]
    return one_shot_messages(instance.judge_item(), shown, knowledge=knowledge)


@dataclass(frozen=True)
class TeachPlan:
    generation: GenerationConfig = TEACHER_GENERATION
    kb: KnowledgeBase | None = None
    concurrency: int | None = None
    progress: bool = True


@dataclass
class Taught:
    instances: list[Instance]
    failed: dict[str, str] = field(default_factory=dict)
    summary: dict[str, Any] = field(default_factory=dict)


async def _evaluate(
    instance: Instance, calls: CachedCalls, tally: CallTally, plan: TeachPlan, label: str
) -> Evaluation | str:
    """The teacher's evaluation of one instance, or why the call failed (a failure is no
    evaluation: it is asked again on the next pass)."""
    settings = {**plan.generation.to_dict(), "teacher": PROMPT_NAME}
    chained = await ask_with_knowledge(
        calls,
        tally,
        "automedeval-teacher",
        settings,
        teacher_messages(instance, knowledge=plan.kb is not None),
        0,
        plan.generation,
        plan.kb,
    )
    if chained.error is not None:
        return f"teacher {chained.error}"
    text = chained.text
    lookups = [LookupRecord(f.query, f.chunk_ids) for f in chained.lookups]
    try:
        scores: tuple[int, ...] | None = tuple(parse_scores(text, len(instance.responses)))
    except VerdictParseError:
        scores = None
    return Evaluation(label, text, scores, tuple(lookups))


def check_responses(instances: Sequence[Instance], source: str) -> None:
    """Every instance must have responses to evaluate (checked before a teacher is opened)."""
    for x in instances:
        if not x.responses:
            raise UserError(
                f"{source}: instance {x.id!r} has no responses; run `automedeval build generate` first"
            )


async def teach(
    instances: Sequence[Instance], teacher: Model, out: Path, plan: TeachPlan, source: str = "instances"
) -> Taught:
    """Evaluate every instance into ``out`` (instances.jsonl with ``evaluation`` set, a summary).
    An instance whose teacher call failed is left out and counted; a rerun asks it again."""
    check_responses(instances, source)
    out.mkdir(parents=True, exist_ok=True)
    cache, tally = RequestCache(out / CACHE_FILE), CallTally()
    bar = ProgressBar(plan.progress, len(instances), 0, f"teach {teacher.name}")
    started = time.perf_counter()
    calls = CachedCalls(teacher, cache)

    async def one(instance: Instance) -> Evaluation | str:
        return await _evaluate(instance, calls, tally, plan, teacher.name)

    try:
        results = await map_each(instances, plan.concurrency or teacher.max_concurrency, one, bar)
    finally:
        cache.close()
    done = Taught([])
    for x, result in zip(instances, results, strict=True):
        if isinstance(result, str):
            done.failed[x.id] = result
        else:
            done.instances.append(replace(x, evaluation=result, verification=None, quality=None,
                                          quality_score=None, suggestions=()))  # fmt: skip
    write_instances(out / INSTANCES_FILE, done.instances)
    done.summary = _summary(instances, done, teacher, tally, plan, time.perf_counter() - started)
    atomic_write_json(out / SUMMARY_FILE, done.summary)
    return done


def _summary(
    instances: Sequence[Instance],
    done: Taught,
    teacher: Model,
    tally: CallTally,
    plan: TeachPlan,
    seconds: float,
) -> dict[str, Any]:
    evaluations = [x.evaluation for x in done.instances if x.evaluation is not None]
    parsed = sum(e.scores is not None for e in evaluations)
    return {
        "teacher": {"name": teacher.name, "identity": teacher.identity},
        "items": len(instances),
        "evaluated": len(evaluations),
        "parsed": parsed,
        "unparsed": len(evaluations) - parsed,
        "parse_rate": parsed / len(evaluations) if evaluations else None,
        "failed": len(done.failed),
        "failures": dict(Counter(done.failed.values())),
        "failed_ids": sorted(done.failed),
        "knowledge_base": plan.kb is not None,
        "lookups": sum(len(e.lookups) for e in evaluations),
        "items_with_lookups": sum(bool(e.lookups) for e in evaluations),
        "generation": plan.generation.to_dict(),
        "prompt": PROMPT_NAME,
        "calls": {"requests": tally.requests, "cache_hits": tally.cache_hits,
                  "prompt_tokens": tally.prompt_tokens, "completion_tokens": tally.completion_tokens},
        "seconds": round(seconds, 3),
    }  # fmt: skip
