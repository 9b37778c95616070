"""One MedEval arm: a model on one of the five tasks, zero-shot or with k examples.

Each test item becomes a :class:`~clinieval.types.Sample` whose input is the whole prompt (the
paper's template with the item and the few-shot examples in place), so a run's fingerprint covers
the exact text sent. Few-shot examples come from the train split, drawn with a seed and balanced
over the classes for the classification tasks (the paper's NLU setting uses as many examples as
classes), or are the paper's own examples (``paper_examples``). Temperature 0 and 200 new tokens,
as in the paper.

Inputs longer than a model's window: the paper notes that both chunking and dropping distort, and
asks that the policy be recorded. Here the policy is *drop*: an over-long prompt is sent as is,
the backend refuses it, and the record carries the ``context_length`` failure (counted, never
scored); every record also carries its prompt's length in the model's own tokens.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.benchmarks.medeval.items import ReportItem, SentenceItem, Split, TaskName
from clinieval.benchmarks.medeval.paper_prompts import Shots
from clinieval.benchmarks.medeval.parsing import QualifiedRule
from clinieval.benchmarks.medeval.task_table import TASK_TABLE, MedEvalTask
from clinieval.engine.session import ArmSettings, RunResult, run_arm
from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.task import PromptTemplate, Task, loaded
from clinieval.types import JSON, GenerationConfig, Sample

GENERATION = GenerationConfig(temperature=0.0, max_tokens=200, seed=0)
"""The paper's decoding: temperature 0, at most 200 new tokens."""

Item = SentenceItem | ReportItem


@dataclass(frozen=True, slots=True)
class MedEvalSettings(ArmSettings):
    """An arm's settings: which examples, from which split, and how absent codes are asked for."""

    generation: GenerationConfig = field(default_factory=lambda: GENERATION)
    shots: int = 0
    paper_examples: bool = False
    seed: int = 0
    split: Split = "test"
    absent_as: str = "unknown"
    """What a code the report never mentions should be predicted as. The prompt offers positive,
    negative or unknown; of those only "unknown" is true of an observation the report is silent on."""
    qualified: QualifiedRule = "paper"
    """How a label answer qualifies (the paper's rule by default; "strict" as an option)."""
    rewrite_label: bool = True
    """Whether a rewriting query carries the sentence's ``Diagnostic: Normal.|Abnormal.`` (as every
    rewrite prompt the paper shows does); False gives Appendix C.3's label-free template line."""


def arm_label(task: TaskName, settings: MedEvalSettings) -> str:
    """An arm's folder name: the task, its examples (``paper``, ``3shot``), then each setting that
    departs from the defaults and changes the prompt or the scoring (``seed4`` for examples drawn
    with another seed, ``nolabel``, ``strict``, ``absent-negative``), then a split other than test.
    Default arms keep the names they always had (so their runs resume); two arms that differ get
    two folders instead of one refusing the other as "a different run"."""
    parts = [task, "paper" if settings.paper_examples else f"{settings.shots}shot"]
    if settings.shots and not settings.paper_examples and settings.seed != 0:
        parts.append(f"seed{settings.seed}")
    params = TASK_TABLE[task].params(settings)
    if params.get("rewrite_label") is False:
        parts.append("nolabel")
    if params.get("qualified_rule") not in (None, "paper"):
        parts.append(str(params["qualified_rule"]))
    if params.get("absent_as") not in (None, "unknown"):
        parts.append(f"absent-{params['absent_as']}")
    if settings.split != "test":
        parts.append(settings.split)
    return "-".join(parts)


def eligible(task: TaskName, item: Item) -> bool:
    """Whether an item has what ``task`` needs (a label, a rewrite, chest codes, both sections)."""
    return TASK_TABLE[task].eligible(item)


def draw_examples(task: TaskName, pool: Sequence[Item], k: int, seed: int) -> list[Item]:
    """k train items, seeded; classes taken in turn so two examples of a two-class task cover
    both classes, as the paper's examples do."""
    entry = TASK_TABLE[task]
    candidates = [x for x in pool if entry.eligible(x)]
    if len(candidates) < k:
        raise UserError(
            f"{task}: {k} examples asked for, but the train split has {len(candidates)} usable items"
        )
    rng = random.Random(f"medeval-shots:{seed}:{task}")
    by_class: dict[str, list[Item]] = {}
    for x in sorted(candidates, key=lambda x: x.id):
        by_class.setdefault(entry.balance_class(x), []).append(x)
    for members in by_class.values():
        rng.shuffle(members)
    picked: list[Item] = []
    while len(picked) < k:
        for label in sorted(by_class):
            if by_class[label] and len(picked) < k:
                picked.append(by_class[label].pop())
    return picked


def _shots(entry: MedEvalTask, train: Sequence[Item], settings: MedEvalSettings) -> tuple[Shots, list[str]]:
    if settings.paper_examples:
        return entry.paper_shots_given(), []
    if settings.shots == 0:
        return Shots(), []
    examples = draw_examples(entry.name, train, settings.shots, settings.seed)
    return entry.data_shots(examples), [x.id for x in examples]


def _sample(entry: MedEvalTask, item: Item, shots: Shots, settings: MedEvalSettings) -> Sample:
    prompt, target, fields = entry.sample_parts(item, shots, settings)
    meta: JSON = {"task": entry.name, "domain": item.domain, "split": item.split} | fields
    return Sample(id=item.id, input=prompt, target=target, metadata=meta)


@dataclass(frozen=True, slots=True)
class PromptLength:
    """The *drop* policy: the prompt goes as is; its length in the model's tokens is recorded, and
    a prompt longer than the window comes back as a ``context_length`` failure."""

    name: str = "drop"

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        try:
            tokens: int | None = await model.count_tokens(sample.input)
        except UserError:  # a server without a tokenize route: the length is unknown, not a failure
            tokens = None
        return "", {"policy": self.name, "prompt_tokens": tokens}

    async def check(self, samples: Sequence[Sample], model: Model) -> None:
        """Nothing to refuse: a prompt longer than the window is a counted failure, not a mistake."""


def medeval_task(
    task: TaskName,
    items: Sequence[Item],
    settings: MedEvalSettings,
    data_files: Sequence[Path] = (),
    split_info: JSON | None = None,
) -> Task:
    """The task for one arm: the ``settings.split`` items ``task`` can use, prompted with the
    examples the settings ask for (drawn from the train split)."""
    entry = TASK_TABLE[task]
    train = [x for x in items if x.split == "train"]
    shots, shot_ids = _shots(entry, train, settings)
    tested = [x for x in items if x.split == settings.split and entry.eligible(x)]
    if not tested:
        raise UserError(f"{task}: no {settings.split} item has what the task needs")
    samples = [_sample(entry, x, shots, settings) for x in tested]
    params: JSON = {
        "task": task,
        "level": entry.level,
        "shots": len(shots.lines),
        "paper_examples": settings.paper_examples,
        "shot_ids": shot_ids,
        "shot_seed": settings.seed,
        "split": settings.split,
        "splits": split_info or {},
        **entry.params(settings),
        "context_policy": "drop",
        "paper_shots": entry.paper_shots,
    }
    return Task(
        name=f"medeval-{task}",
        load=loaded(samples),
        prompt=PromptTemplate(user="{input}"),
        scorers=(entry.scorer(settings.qualified),),
        generation=settings.generation,
        context_policy=PromptLength(),
        data_files=list(data_files),
        params=params,
    )


async def run_task_arm(
    task: TaskName,
    items: Sequence[Item],
    model_spec: str,
    out: Path,
    settings: MedEvalSettings,
    data_files: Sequence[Path] = (),
    split_info: JSON | None = None,
) -> RunResult:
    """One model on one task with one shot setting, into ``out`` (resuming what it holds)."""
    return await run_arm(
        medeval_task(task, items, settings, data_files, split_info), model_spec, out, settings
    )
