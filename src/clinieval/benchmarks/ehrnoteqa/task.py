"""EHRNoteQA arms: one model in one answer format, generated, scored, then judged.

An *arm* is (model, format): ``mc`` answers the five-option prompt and is scored three ways
(judge, letter extraction, option log-likelihood); ``free`` answers without the options and is
scored by the 0/1 judge. Each arm is its own run directory (manifest, append-only samples,
request cache), so arms resume independently; judging is a later step over the same folder, and
its requests share the folder's cache.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.benchmarks.ehrnoteqa.prompts import FORMATS, GENERATION, PROMPTS, Format
from clinieval.benchmarks.ehrnoteqa.scoring import (
    ChoiceJudgeRubric,
    FreeTextJudgeRubric,
    LetterExtraction,
    OptionLoglik,
    option_continuations,
)
from clinieval.engine.session import ArmSettings, RunResult, run_arm
from clinieval.errors import UserError, one_of
from clinieval.judge.rubric import Rubric
from clinieval.judge.run import JudgeResult, judge_folder
from clinieval.models.spec import BackendOptions
from clinieval.records.runs import RunDir
from clinieval.scoring.scorers import Answered, Scorer
from clinieval.task import Task, loaded
from clinieval.types import GenerationConfig, Sample

JUDGE_GENERATION = GenerationConfig(temperature=0.0, seed=0, max_tokens=16)
"""The multiple-choice judge answers one word; 16 tokens leave room for "Yes." and markup."""

FREE_JUDGE_GENERATION = GenerationConfig(temperature=0.0, seed=0, max_tokens=256)
"""The free-text judge writes ``Score:`` and a short reasoning."""


@dataclass(frozen=True, slots=True)
class EHRNoteQASettings(ArmSettings):
    """An EHRNoteQA arm's settings beyond the shared ones: the paper's generation and whether
    multiple-choice arms also score the options by log-likelihood."""

    generation: GenerationConfig = GENERATION
    loglik: bool = True


def task_name(fmt: Format) -> str:
    """The task name a format's arms are recorded under."""
    return f"ehrnoteqa-{fmt}"


TASK_FORMATS: Mapping[str, Format] = {task_name(fmt): fmt for fmt in FORMATS}
"""The task name each format's arms are recorded under, for telling an EHRNoteQA run apart."""


def check_format(fmt: str) -> Format:
    return one_of(fmt, FORMATS, "format")


def format_scorers(fmt: Format, loglik: bool) -> list[Scorer]:
    """``mc``: letter extraction, plus both log-likelihood variants unless turned off; ``free``:
    whether an answer came back (its correctness is the judge's)."""
    if fmt == "free":
        return [Answered()]
    scorers: list[Scorer] = [LetterExtraction()]
    if loglik:
        scorers += [OptionLoglik("letter"), OptionLoglik("text")]
    return scorers


def ehrnoteqa_task(
    samples: Sequence[Sample], fmt: Format, settings: EHRNoteQASettings, data_files: Sequence[Path] = ()
) -> Task:
    return Task(
        name=task_name(fmt),
        load=loaded(samples),
        prompt=PROMPTS[fmt],
        scorers=format_scorers(fmt, settings.loglik),
        generation=settings.generation,
        data_files=list(data_files),
        params={"format": fmt, "loglik_continuations": "letters+texts"},
        loglik_continuations=option_continuations,
    )


async def run_format_arm(
    samples: Sequence[Sample],
    model_spec: str,
    fmt: Format,
    out: Path,
    settings: EHRNoteQASettings,
    data_files: Sequence[Path] = (),
) -> RunResult:
    """Generate (and score log-likelihoods) for one arm, resuming whatever ``out`` holds."""
    task = ehrnoteqa_task(samples, fmt, settings, data_files)
    return await run_arm(task, model_spec, out, settings)


def arm_format(run: RunDir) -> Format:
    """The format an arm was run in, from its manifest (refusing runs of other tasks)."""
    task = run.manifest().get("spec", {}).get("task", {})
    fmt = (task.get("params") or {}).get("format")
    if TASK_FORMATS.get(str(task.get("name", ""))) is None or fmt not in FORMATS:
        raise UserError(f"{run.path}: not an EHRNoteQA run (made by `clinieval ehrnoteqa run`)")
    return check_format(str(fmt))


def arm_model(run: RunDir) -> str:
    """The model spec an arm was run with."""
    return str(run.manifest().get("spec", {}).get("model", {}).get("spec", run.path.name))


@dataclass(frozen=True, slots=True)
class FormatJudging:
    """How one answer format is judged: the rubric, the judge's generation settings, and one line
    for `clinieval judge`'s list of rubrics."""

    rubric: Callable[[], Rubric]
    generation: GenerationConfig
    description: str


JUDGING: Mapping[Format, FormatJudging] = {
    "mc": FormatJudging(
        ChoiceJudgeRubric, JUDGE_GENERATION, "EHRNoteQA's yes/no judge of multiple-choice answers"
    ),
    "free": FormatJudging(
        FreeTextJudgeRubric, FREE_JUDGE_GENERATION, "EHRNoteQA's 0/1 judge of free-text answers, shown notes"
    ),
}
"""Each format's judging, in one place (the multiple-choice yes/no judge; the free-text 0/1 judge)."""


def rubric_for(fmt: Format) -> Rubric:
    return JUDGING[fmt].rubric()


def judge_generation(
    fmt: Format, max_tokens: int | None = None, temperature: float | None = None
) -> GenerationConfig:
    """The format's judge settings, with the reply limit and temperature a user asked for."""
    config = JUDGING[fmt].generation
    if max_tokens is not None:
        config = dataclasses.replace(config, max_tokens=max_tokens)
    if temperature is not None:
        config = dataclasses.replace(config, temperature=temperature)
    return config


async def judge_arm(
    path: Path,
    judge_spec: str,
    *,
    repeats: int = 5,
    backend: BackendOptions | None = None,
    max_tokens: int | None = None,
    temperature: float | None = None,
    concurrency: int | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> JudgeResult:
    """Judge an arm's answers ``repeats`` times with the rubric of its format (repeat r with seed
    ``seed + r``)."""
    run = RunDir.open(path)
    fmt = arm_format(run)
    return await judge_folder(
        run,
        judge_spec,
        rubric_for(fmt),
        backend=backend or BackendOptions(),
        repeats=repeats,
        generation=judge_generation(fmt, max_tokens, temperature),
        concurrency=concurrency,
        limit=limit,
        progress=progress,
    )
