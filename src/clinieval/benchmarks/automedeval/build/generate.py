"""Step (b): several models answer every instance's question, through a request cache.

The paper's responses were sampled with temperature 0.5, top-k 50, top-p 1 and at most 200 new
tokens; :data:`RESPONSE_GENERATION` is exactly that (seeded, so a rerun asks the same). Each model
answers each question once, in the order the models were given, and every answer goes through the
folder's request cache: a killed pass resumes asking only what is missing, and a second pass asks
nothing. An item a model failed on (an error, or an empty answer) is left out of the output, so
every written instance has one response per model in the same order, and counted per model.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clinieval.benchmarks.automedeval.build.instances import Answer, Instance, write_instances
from clinieval.engine.runner import CachedCalls, CallTally, ProgressBar, cached_generate, map_each
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json
from clinieval.models.base import Model
from clinieval.records.cache import RequestCache
from clinieval.records.summary import ECHO_KEY, EchoCount, count_echoes
from clinieval.types import GenerationConfig, Message

RESPONSE_GENERATION = GenerationConfig(temperature=0.5, top_k=50, top_p=1.0, max_tokens=200, seed=0)
"""The paper's sampling of the judged responses."""

PATIENT_SYSTEM = (
    "You are a doctor answering a patient's question. Answer accurately and concisely, in plain language."
)
PROMPT_NAME = "automedeval-patient-v1"
"""Part of every cache key: a changed prompt wording must never reuse old answers."""

INSTANCES_FILE = "instances.jsonl"
SUMMARY_FILE = "generate-summary.json"
CACHE_FILE = "cache.sqlite"


def patient_messages(question: str) -> list[Message]:
    """The prompt a responding model sees: a doctor's role, then the patient's question."""
    return [Message("system", PATIENT_SYSTEM), Message("user", question)]


@dataclass(frozen=True)
class GeneratePlan:
    seed: int = 0
    max_tokens: int = 200
    concurrency: int | None = None
    progress: bool = True

    @property
    def generation(self) -> GenerationConfig:
        return replace(RESPONSE_GENERATION, seed=self.seed, max_tokens=self.max_tokens)


@dataclass
class ModelPass:
    """One model's answers (instance index -> text) and its failures (index -> why)."""

    label: str
    model: Model
    answers: dict[int, str] = field(default_factory=dict)
    failures: dict[int, str] = field(default_factory=dict)

    def summary(self) -> dict[str, Any]:
        return {
            "model": self.label,
            "identity": self.model.identity,
            "answered": len(self.answers),
            "failed": len(self.failures),
            "failures": dict(Counter(self.failures.values())),
        }

    def echo(self, instances: Sequence[Instance]) -> EchoCount:
        """This model's answers that mostly repeat the question it was sent (a base model behind a
        chat template), counted as every run counts them (:func:`clinieval.records.summary.count_echoes`)."""
        sent = (
            (text, [m.content for m in patient_messages(instances[i].question)])
            for i, text in self.answers.items()
        )
        return count_echoes(sent)


@dataclass
class Generated:
    instances: list[Instance]
    left_out: list[str]
    passes: list[ModelPass]
    tally: CallTally
    summary: dict[str, Any]


def unique_labels(specs: Sequence[str], names: Sequence[str]) -> list[str]:
    """Each model's name in the responses: its short name, or its spec where two share a name."""
    twice = sorted({s for s in specs if specs.count(s) > 1})
    if twice:
        raise UserError(f"--model {twice[0]} is given twice; give each model once")
    return [n if names.count(n) == 1 else s for s, n in zip(specs, names, strict=True)]


async def _answer_all(
    instances: Sequence[Instance], run: ModelPass, cache: RequestCache, tally: CallTally, plan: GeneratePlan
) -> None:
    calls, config = CachedCalls(run.model, cache), plan.generation
    settings = {**config.to_dict(), "prompt": PROMPT_NAME}
    bar = ProgressBar(plan.progress, len(instances), 0, f"generate {run.label}")

    async def one(i: int) -> None:
        out, asked = await cached_generate(
            calls, "automedeval-respond", settings, patient_messages(instances[i].question), 0, config
        )
        tally.add(out, asked)
        if not out.ok:
            run.failures[i] = str(out.error_kind)
        elif not out.text.strip():
            run.failures[i] = "empty answer"
        else:
            run.answers[i] = out.text.strip()

    await run.model.check()
    await map_each(range(len(instances)), plan.concurrency or run.model.max_concurrency, one, bar)


async def generate_responses(
    instances: Sequence[Instance], models: Sequence[tuple[str, Model]], out: Path, plan: GeneratePlan
) -> Generated:
    """Every model (label, model) answers every instance, one model after the other (an embedded
    model is loaded only for its own pass and closed after it); writes ``instances.jsonl`` and
    ``generate-summary.json`` in ``out``. Steps after this one are reset: new responses make an
    old evaluation, verdict or quality label meaningless."""
    if not models:
        raise UserError("give at least one --model")
    out.mkdir(parents=True, exist_ok=True)
    cache, tally = RequestCache(out / CACHE_FILE), CallTally()
    passes = [ModelPass(label, model) for label, model in models]
    started = time.perf_counter()
    try:
        for run in passes:
            try:
                await _answer_all(instances, run, cache, tally, plan)
            finally:
                await run.model.aclose()
    finally:
        cache.close()
    kept, left_out = _assemble(instances, passes)
    write_instances(out / INSTANCES_FILE, kept)
    summary = _summary(instances, kept, left_out, passes, tally, plan, time.perf_counter() - started)
    atomic_write_json(out / SUMMARY_FILE, summary)
    return Generated(kept, left_out, passes, tally, summary)


def _assemble(instances: Sequence[Instance], passes: Sequence[ModelPass]) -> tuple[list[Instance], list[str]]:
    kept: list[Instance] = []
    left_out: list[str] = []
    for i, x in enumerate(instances):
        if any(i in run.failures for run in passes):
            left_out.append(x.id)
            continue
        answers = tuple(Answer(run.label, run.answers[i]) for run in passes)
        kept.append(Instance(x.id, x.question, x.reference, answers))
    return kept, left_out


def _summary(
    instances: Sequence[Instance],
    kept: Sequence[Instance],
    left_out: Sequence[str],
    passes: Sequence[ModelPass],
    tally: CallTally,
    plan: GeneratePlan,
    seconds: float,
) -> dict[str, Any]:
    return {
        "items": len(instances),
        "written": len(kept),
        "left_out": len(left_out),
        "left_out_ids": list(left_out),
        "left_out_why": "an item any model failed on is left out, so every instance has all k responses",
        "models": [{**run.summary(), ECHO_KEY: run.echo(instances).to_dict()} for run in passes],
        "generation": plan.generation.to_dict(),
        "prompt": {"name": PROMPT_NAME, "system": PATIENT_SYSTEM},
        "calls": {"requests": tally.requests, "cache_hits": tally.cache_hits,
                  "prompt_tokens": tally.prompt_tokens, "completion_tokens": tally.completion_tokens},
        "seconds": round(seconds, 3),
    }  # fmt: skip
