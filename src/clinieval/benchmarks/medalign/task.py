"""One MedAlign arm end to end: a model under one context strategy, generation then metrics.

An *arm* is what the analysis compares: (model, context strategy). Each arm is its own run
directory (manifest, append-only samples, request cache), so arms resume independently, and a
later arm never disturbs an earlier one. After generation the reference-based text metrics are
computed over the saved answers in one batch (``scores/*.jsonl``); judges come later, as their
own step over the same directory.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.benchmarks.medalign.prompts import MEDALIGN_PROMPT
from clinieval.errors import UserError
from clinieval.models.spec import BackendOptions, model_short_name
from clinieval.scoring.scorers import Answered, Scorer
from clinieval.session import RunResult, run_into
from clinieval.summary import ScorerSummary
from clinieval.task import ContextPolicy, PromptTemplate, Task
from clinieval.types import GenerationConfig, Sample

DEFAULT_METRICS = ("rougeL", "chrf++", "google_bleu", "meteor", "bertscore")
"""The paper's source-free metrics that run here (BLEURT and LENS need local checkpoints)."""

GENERATION = GenerationConfig(temperature=0.0, max_tokens=256, seed=0)
"""MedAlign limits answers to 256 tokens; greedy decoding so reruns agree."""


STRATEGIES = ("keep-recent", "refine", "retrieval", "whole")
"""The context strategies a MedAlign run can use, recorded per run and per sample."""


@dataclass(frozen=True, slots=True)
class StrategyOptions:
    """How the record is fitted: the budget tokenizer (None: the model's own), the context length
    (None: the model's), tokens reserved for generation, and the longest answer carried between
    refinement steps."""

    tokenizer: str | None = None
    max_context: int | None = None
    reserve: int = 256
    answer_tokens: int = 256


def context_policy(
    strategy: str, options: StrategyOptions, template: PromptTemplate = MEDALIGN_PROMPT
) -> ContextPolicy:
    """The policy for ``strategy`` (one of :data:`STRATEGIES`).

    ``whole`` keeps a record that fits and otherwise records the sample as a context_length
    failure without calling the model (counted, never dropped silently).
    """
    from clinieval.context.fit import ChunkPolicy, DropPolicy, KeepRecentPolicy
    from clinieval.context.refine import RefinePolicy
    from clinieval.context.retrieve import RetrievalPolicy

    tok, ctx, reserve = options.tokenizer, options.max_context, options.reserve
    if strategy == "keep-recent":
        return KeepRecentPolicy(template, tok, ctx, reserve)
    if strategy == "retrieval":
        return RetrievalPolicy(template, tok, ctx, reserve)
    if strategy == "whole":
        return DropPolicy(template, tok, ctx, reserve)
    if strategy == "refine":
        return RefinePolicy(ChunkPolicy(template, tok, ctx, reserve), answer_tokens=options.answer_tokens)
    raise UserError(f"unknown context strategy {strategy!r}; choose from {', '.join(STRATEGIES)}")


@dataclass(frozen=True, slots=True)
class ArmSettings:
    """Everything about an arm except the model and the strategy."""

    strategy: StrategyOptions = field(default_factory=StrategyOptions)
    generation: GenerationConfig = GENERATION
    template: PromptTemplate = MEDALIGN_PROMPT
    metrics: tuple[str, ...] = ()
    backend: BackendOptions = field(default_factory=BackendOptions)
    limit: int | None = None
    concurrency: int | None = None
    overwrite: bool = False
    progress: bool = True


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


def scorers_for(samples: Sequence[Sample]) -> list[Scorer]:
    """``answered`` always; key-fact recall when every sample carries answer keys (synthetic sets)."""
    scorers: list[Scorer] = [Answered()]
    if samples and all(s.metadata.get("answer_keys") for s in samples):
        from clinieval.scoring.keyfacts import KeyFacts, KeyFactsAll

        scorers += [KeyFacts(), KeyFactsAll()]
    return scorers


def medalign_task(
    samples: Sequence[Sample], strategy: str, settings: ArmSettings, data_files: Sequence[Path] = ()
) -> Task:
    kept = list(samples)
    return Task(
        name=f"medalign-{strategy}",
        load=lambda: list(kept),
        prompt=settings.template,
        scorers=scorers_for(kept),
        generation=settings.generation,
        context_policy=context_policy(strategy, settings.strategy, settings.template),
        data_files=list(data_files),
        params={"strategy": strategy, "strategy_options": dataclasses.asdict(settings.strategy)},
    )


async def run_arm(
    samples: Sequence[Sample],
    model_spec: str,
    strategy: str,
    out: Path,
    settings: ArmSettings,
    data_files: Sequence[Path] = (),
) -> ArmResult:
    """Generate (resuming whatever ``out`` already holds), then score the text metrics."""
    from clinieval.rescore import score_text_metrics
    from clinieval.runs import RunDir

    task = medalign_task(samples, strategy, settings, data_files)
    result = await run_into(
        task,
        model_spec,
        out,
        settings.backend,
        limit=settings.limit,
        concurrency=settings.concurrency,
        overwrite=settings.overwrite,
        progress=settings.progress,
    )
    has_gold = any(s.target for s in samples)
    metrics = score_text_metrics(RunDir.open(out), settings.metrics) if settings.metrics and has_gold else []
    return ArmResult(model_spec, strategy, result, metrics)
