"""One MedAlign arm end to end: a model under one context strategy, generation then metrics.

An *arm* is what the analysis compares: (model, context strategy). Each arm is its own run
directory (manifest, append-only samples, request cache), so arms resume independently, and a
later arm never disturbs an earlier one. After generation the reference-based text metrics are
computed over the saved answers in one batch (``scores/*.jsonl``); judges come later, as their
own step over the same directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.benchmarks.medalign.prompts import MEDALIGN_PROMPT
from clinieval.engine.session import ArmSettings, RunResult, run_arm
from clinieval.errors import UserError
from clinieval.models.spec import model_short_name
from clinieval.records.summary import ScorerSummary
from clinieval.scoring.scorers import Answered, Scorer
from clinieval.task import ContextPolicy, PromptTemplate, Task, loaded
from clinieval.types import GenerationConfig, Sample

DEFAULT_METRICS = ("rougeL", "chrf++", "google_bleu", "meteor", "bertscore")
"""The paper's source-free metrics that run here (BLEURT and LENS need local checkpoints)."""

GENERATION = GenerationConfig(temperature=0.0, max_tokens=256, seed=0)
"""MedAlign limits answers to 256 tokens; greedy decoding so reruns agree."""


@dataclass(frozen=True, slots=True)
class StrategyOptions:
    """How the record is fitted: the budget tokenizer (None: the model's own), the context length
    (None: the model's), tokens reserved for generation, and the longest answer carried between
    refinement steps."""

    tokenizer: str | None = None
    max_context: int | None = None
    reserve: int = 256
    answer_tokens: int = 256


StrategyFactory = Callable[[PromptTemplate, StrategyOptions], ContextPolicy]
"""Builds a strategy's context policy from the prompt and the fitting options."""


def _keep_recent(template: PromptTemplate, o: StrategyOptions) -> ContextPolicy:
    from clinieval.context.fit import KeepRecentPolicy

    return KeepRecentPolicy(template, o.tokenizer, o.max_context, o.reserve)


def _refine(template: PromptTemplate, o: StrategyOptions) -> ContextPolicy:
    from clinieval.context.fit import ChunkPolicy
    from clinieval.context.refine import RefinePolicy

    chunks = ChunkPolicy(template, o.tokenizer, o.max_context, o.reserve)
    return RefinePolicy(chunks, answer_tokens=o.answer_tokens)


def _retrieval(template: PromptTemplate, o: StrategyOptions) -> ContextPolicy:
    from clinieval.context.retrieve import RetrievalPolicy

    return RetrievalPolicy(template, o.tokenizer, o.max_context, o.reserve)


def _whole(template: PromptTemplate, o: StrategyOptions) -> ContextPolicy:
    """Keeps a record that fits; a longer one becomes a counted context_length failure without
    a model call (never dropped silently)."""
    from clinieval.context.fit import DropPolicy

    return DropPolicy(template, o.tokenizer, o.max_context, o.reserve)


STRATEGIES: Mapping[str, StrategyFactory] = {
    "keep-recent": _keep_recent,
    "refine": _refine,
    "retrieval": _retrieval,
    "whole": _whole,
}
"""The context strategies a MedAlign run can use, by the name recorded per run and per sample."""


def context_policy(
    strategy: str, options: StrategyOptions, template: PromptTemplate = MEDALIGN_PROMPT
) -> ContextPolicy:
    """The policy for ``strategy`` (a key of :data:`STRATEGIES`), or one error naming the choices."""
    factory = STRATEGIES.get(strategy)
    if factory is None:
        raise UserError(f"unknown context strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")
    return factory(template, options)


@dataclass(frozen=True, slots=True)
class MedAlignSettings(ArmSettings):
    """A MedAlign arm's settings beyond the shared ones: how the record is fitted, the prompt,
    and the text metrics scored after generation (the model and strategy name the arm)."""

    generation: GenerationConfig = GENERATION
    strategy: StrategyOptions = field(default_factory=StrategyOptions)
    template: PromptTemplate = MEDALIGN_PROMPT
    metrics: tuple[str, ...] = ()


@dataclass(slots=True)
class ArmResult:
    model_spec: str
    strategy: str
    run: RunResult
    metrics: list[ScorerSummary]

    @property
    def label(self) -> str:
        return arm_label(self.model_spec, self.strategy)


def arm_label(model_spec: str, strategy: str) -> str:
    """How an arm is named in tables: the model as given, then the strategy."""
    return f"{model_short_name(model_spec)}/{strategy}"


def medalign_scorers(samples: Sequence[Sample]) -> list[Scorer]:
    """``answered`` always; key facts when every sample carries answer keys (synthetic sets):
    recall, all-or-nothing, and the F-score with precision that the computed reference uses."""
    scorers: list[Scorer] = [Answered()]
    if samples and all(s.metadata.get("answer_keys") for s in samples):
        from clinieval.scoring.keyfacts import KeyFacts, KeyFactsAll, KeyFactsF1

        scorers += [KeyFacts(), KeyFactsAll(), KeyFactsF1()]
    return scorers


def medalign_task(
    samples: Sequence[Sample], strategy: str, settings: MedAlignSettings, data_files: Sequence[Path] = ()
) -> Task:
    return Task(
        name=f"medalign-{strategy}",
        load=loaded(samples),
        prompt=settings.template,
        scorers=medalign_scorers(samples),
        generation=settings.generation,
        context_policy=context_policy(strategy, settings.strategy, settings.template),
        data_files=list(data_files),
        params={"strategy": strategy, "strategy_options": dataclasses.asdict(settings.strategy)},
    )


async def run_strategy_arm(
    samples: Sequence[Sample],
    model_spec: str,
    strategy: str,
    out: Path,
    settings: MedAlignSettings,
    data_files: Sequence[Path] = (),
) -> ArmResult:
    """Generate (resuming whatever ``out`` already holds), then score the text metrics."""
    from clinieval.engine.rescore import score_text_metrics
    from clinieval.records.runs import RunDir

    task = medalign_task(samples, strategy, settings, data_files)
    result = await run_arm(task, model_spec, out, settings)
    has_gold = any(s.target for s in samples)
    metrics = score_text_metrics(RunDir.open(out), settings.metrics) if settings.metrics and has_gold else []
    return ArmResult(model_spec, strategy, result, metrics)
