"""MedEval as a suite runs it: every model on the chosen tasks through ``run_task_arm``.

A suite ranks models on one number per item, but MedEval's five tasks are scored by different
metrics (accuracy, code accuracy, sentence BLEU-4, ROUGE-L) and the paper reports them task by
task, never averaged together. So the suite's per-item score is each task's own per-answer score
on 0-1 (the value :mod:`.comparisons` pairs items on, divided by 100: a label right or wrong, the
share of the 14 codes right, all-or-nothing for an unqualified answer, sentence BLEU-4, ROUGE-L F),
unqualified answers counted wrong as in the paper's counted-wrong view, and a failed model call
left out and counted. With ``balance = "equal"`` (the default) every task is asked the same number
of items (the smallest task's), so the plain item mean the leaderboard bootstraps *is* the mean of
the task means: no task outweighs another because the data happen to hold more of it. Item ids are
``task/sample id`` and an item's cluster is its source report (else the sentence itself), so the
sentences of one report, and one sentence asked in three tasks, are resampled together.

The trained baselines are no model under test; the report trains only the cheap TF-IDF ones (a
few seconds, no model call), so it shows adapted PLMs beside the suite's models and rewriting's
ΔAcc, as ``medeval analyze --classifiers`` does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clinieval.benchmarks.medeval.items import TASKS, TaskName
from clinieval.errors import UserError
from clinieval.suite.part import Cell, CheckedModels, Headline, Prepared, Shared, Step

if TYPE_CHECKING:
    from clinieval.benchmarks.medeval.data import MedEvalData
    from clinieval.benchmarks.medeval.task import MedEvalSettings
    from clinieval.records.sample_record import SampleRecord
    from clinieval.review.items import ReviewItem

NAME = "medeval"
METRIC = "task score per item (accuracy, code accuracy, sentence BLEU-4, ROUGE-L; 0-1), tasks weighed equally"


@dataclass(frozen=True, slots=True)
class MedEvalOptions:
    """A ``[benchmarks.medeval]`` table: the data, which tasks, and how each arm is prompted."""

    data: Path | None = field(
        default=None,
        metadata={
            "help": "a MedEval-shaped folder (tables, a MIMIC-CXR tree or Open-i XML) as `medeval run --data`"
        },
    )
    tasks: tuple[str, ...] = field(
        default=TASKS,
        metadata={
            "help": "tasks asked: abnormality, ambiguity, rewriting, codes, summarization (default: all)"
        },
    )
    shots: Literal["paper", "zero"] = field(
        default="paper",
        metadata={
            "help": "paper: the paper's examples per task (2 for NLU, 3 for NLG) from train; zero: zero-shot"
        },
    )
    paper_examples: bool = field(
        default=False,
        metadata={"help": "with shots = paper, use the paper's own examples where it published them"},
    )
    split: Literal["test", "validation"] = field(
        default="test", metadata={"help": "the split asked: test (reported) or validation"}
    )
    balance: Literal["equal", "all"] = field(
        default="equal",
        metadata={"help": "equal: every task asks the smallest task's number of items (tasks weigh equally)"},
    )
    qualified: Literal["paper", "strict"] = field(
        default="paper",
        metadata={
            "help": "when a label answer qualifies: paper (one label word) or strict (the label alone)"
        },
    )
    rewrite_label: bool = field(
        default=True,
        metadata={"help": "rewriting prompts carry the sentence's Diagnostic: label (the paper's)"},
    )
    max_tokens: int = field(default=200, metadata={"help": "answer length limit (the paper: 200)"})
    sentence_max_tokens: int | None = field(
        default=None, metadata={"help": "answer limit of the sentence tasks (default: max_tokens)"}
    )
    stop: tuple[str, ...] = field(default=(), metadata={"help": "stop sequences (the paper: none)"})
    baselines: bool = field(
        default=True,
        metadata={
            "help": "the report adds TF-IDF baselines trained on train (no model call) and rewriting's ΔAcc"
        },
    )
    strict: bool = field(
        default=False,
        metadata={"help": "stop at an unreadable Open-i or MIMIC-CXR report instead of skipping it"},
    )


@dataclass(frozen=True, slots=True)
class _Payload:
    """What prepare read, handed back to every later call."""

    data: MedEvalData
    tasks: tuple[TaskName, ...]
    counts: Mapping[TaskName, int]
    """Items each task's arm asks (after limit and balance)."""
    seed: int
    asked: Mapping[TaskName, frozenset[str]]
    """The ids each task's arm asks: a headline reads only these, whatever else an earlier run with
    a larger limit left in the folder."""


def _check_options(options: MedEvalOptions) -> tuple[TaskName, ...]:
    from clinieval.errors import one_of

    if not options.tasks:
        raise UserError("medeval.tasks is empty; name one or more of " + ", ".join(TASKS))
    tasks = tuple(dict.fromkeys(one_of(t, TASKS, "medeval.tasks: task") for t in options.tasks))
    for name, value in (
        ("max_tokens", options.max_tokens),
        ("sentence_max_tokens", options.sentence_max_tokens),
    ):
        if value is not None and value < 1:
            raise UserError(f"medeval.{name} is {value}; give a positive number of tokens")
    return tasks


def _folder(options: MedEvalOptions, base: Path) -> Path:
    if options.data is None:
        raise UserError(
            "medeval needs `data`: a MedEval-shaped folder (`clinieval medeval demo` writes a synthetic one)"
        )
    folder = options.data if options.data.is_absolute() else base / options.data
    if not folder.is_dir():
        raise UserError(f"{folder}: medeval.data is not a folder")
    return folder


def settings_for(
    task: TaskName, options: MedEvalOptions, shared: Shared, limit: int | None
) -> MedEvalSettings:
    """One arm's settings: the paper's decoding with the options' limits, the suite's backend."""
    from clinieval.benchmarks.medeval.task import GENERATION, MedEvalSettings
    from clinieval.benchmarks.medeval.task_table import TASK_TABLE

    entry = TASK_TABLE[task]
    tokens = options.max_tokens
    if entry.level == "sentence" and options.sentence_max_tokens is not None:
        tokens = options.sentence_max_tokens
    # the paper's own examples where it published them; elsewhere its number, drawn from train
    published = options.shots == "paper" and options.paper_examples and entry.paper_examples is not None
    return MedEvalSettings(
        generation=dataclasses.replace(GENERATION, max_tokens=tokens, stop=tuple(options.stop)),
        backend=shared.backend,
        concurrency=shared.concurrency,
        limit=limit,
        progress=shared.progress,
        shots=entry.paper_shots if options.shots == "paper" and not published else 0,
        paper_examples=published,
        seed=shared.seed,
        split=options.split,
        qualified=options.qualified,
        rewrite_label=options.rewrite_label,
    )


def arm_name(settings: MedEvalSettings, task: TaskName) -> str:
    """An arm's folder in the cell, named as ``medeval run`` names its variants."""
    from clinieval.benchmarks.medeval.task import arm_label

    return arm_label(task, settings)


def _asked(
    task: TaskName, data: MedEvalData, options: MedEvalOptions, shared: Shared, folder: Path
) -> list[str]:
    """The ids of the items ``task``'s arm has, in the order it asks them (building the task checks
    that it has test items and that its examples can be drawn)."""
    from clinieval.benchmarks.medeval.task import medeval_task

    settings = settings_for(task, options, shared, None)
    try:
        built = medeval_task(task, data.items_for(task), settings, data.files, data.split_info())
    except UserError as e:
        raise UserError(f"{folder}: {e}") from None
    return [sample.id for sample in built.load()]


def _cluster(task: TaskName, sample_id: str, data: MedEvalData) -> str:
    from clinieval.benchmarks.medeval.task_table import TASK_TABLE

    if TASK_TABLE[task].level == "report":
        return sample_id
    return data.sentence_reports.get(sample_id, sample_id)


@dataclass(frozen=True, slots=True)
class MedEvalPart:
    """MedEval's :class:`~clinieval.suite.part.SuitePart` (module docstring)."""

    name: str = NAME
    options: type[Any] = MedEvalOptions
    judged: bool = False
    metric: str = METRIC

    def prepare(self, options: Any, shared: Shared, base: Path) -> Prepared:
        from clinieval.benchmarks.medeval.data import load_folder

        tasks = _check_options(options)
        folder = _folder(options, base)
        data = load_folder(folder, seed=shared.seed, strict=options.strict)
        found = {t: _asked(t, data, options, shared, folder) for t in tasks}
        counts = {
            t: len(ids) if shared.limit is None else min(len(ids), shared.limit) for t, ids in found.items()
        }
        if options.balance == "equal":
            smallest = min(counts.values())
            counts = dict.fromkeys(tasks, smallest)
        asked_ids = {t: frozenset(found[t][: counts[t]]) for t in tasks}
        asked = ", ".join(f"{t} {n}" for t, n in counts.items())
        return Prepared(
            benchmark=NAME,
            options=options,
            items=sum(counts.values()),
            data_files=tuple(data.files),
            describe=f"{data.describe()}; asked per task ({options.split}): {asked}",
            payload=_Payload(data, tasks, counts, shared.seed, asked_ids),
            clustered=True,
        )

    def plan(self, prepared: Prepared, cell: Cell) -> Sequence[Step]:
        payload: _Payload = prepared.payload
        steps = []
        for task in payload.tasks:
            settings = settings_for(task, prepared.options, cell.shared, payload.counts[task])
            steps.append(Step(f"arm {arm_name(settings, task)}", cell.model.spec, payload.counts[task]))
        return steps

    async def check(self, prepared: Prepared, cell: Cell, models: CheckedModels) -> None:
        """``medeval run``'s pre-flight for each task's arm, the model opened once."""
        from clinieval.benchmarks.medeval.task import medeval_task
        from clinieval.engine.session import check_arm

        payload: _Payload = prepared.payload
        model = await models.checked(cell.model.spec)
        for task in payload.tasks:
            settings = settings_for(task, prepared.options, cell.shared, payload.counts[task])
            items = payload.data.items_for(task)
            built = medeval_task(task, items, settings, payload.data.files, payload.data.split_info())
            await check_arm(built, model, settings)

    async def run(self, prepared: Prepared, cell: Cell) -> None:
        from clinieval.benchmarks.medeval.task import run_task_arm

        payload: _Payload = prepared.payload
        for task in payload.tasks:
            settings = settings_for(task, prepared.options, cell.shared, payload.counts[task])
            await run_task_arm(
                task,
                payload.data.items_for(task),
                cell.model.spec,
                cell.out / arm_name(settings, task),
                settings,
                payload.data.files,
                payload.data.split_info(),
            )

    def _arm_dirs(self, prepared: Prepared, cell: Cell) -> list[tuple[TaskName, Path]]:
        payload: _Payload = prepared.payload
        return [
            (t, cell.out / arm_name(settings_for(t, prepared.options, cell.shared, payload.counts[t]), t))
            for t in payload.tasks
        ]

    def headline(self, prepared: Prepared, cell: Cell) -> Headline:
        from clinieval.benchmarks.medeval.arms import read_arm

        payload: _Payload = prepared.payload
        scores: dict[str, float] = {}
        clusters: dict[str, str] = {}
        failed = 0
        runs = []
        for task, path in self._arm_dirs(prepared, cell):
            arm = read_arm(path)
            runs.append(path)
            for record in arm.records:
                if record.sample.id not in payload.asked[task]:
                    continue
                value = item_score(task, record)
                if value is None:
                    failed += 1
                    continue
                key = f"{task}/{record.sample.id}"
                scores[key] = value
                clusters[key] = _cluster(task, record.sample.id, payload.data)
        return Headline(METRIC, scores, clusters, runs=runs, failed=failed)

    def report(self, prepared: Prepared, cells: Sequence[Cell], out: Path) -> Path | None:
        from clinieval.benchmarks.medeval.analysis import medeval_analysis, read_arm
        from clinieval.benchmarks.medeval.report import write_medeval_report

        arms = [
            # under the suite's model name: two servers may serve one model name
            read_arm(path, cell.model.name)
            for cell in cells
            for _, path in self._arm_dirs(prepared, cell)
            if path.is_dir()
        ]
        if not arms:
            return None
        classifiers = None
        if prepared.options.baselines:
            baseline_arms, classifiers = _baselines(prepared.payload, out / "baselines")
            arms += baseline_arms
        result = medeval_analysis(arms, classifiers=classifiers)
        data: MedEvalData = prepared.payload.data
        write_medeval_report(result, arms, out, synthetic=data.synthetic)
        return out / "medeval.html"

    def synthetic(self, folder: Path, seed: int) -> Mapping[str, Any]:
        from clinieval.benchmarks.medeval.synth.writer import write_synthetic

        if not (folder / "manifest.json").is_file():
            write_synthetic(
                folder, seed=seed, sentences=SYNTHETIC_SENTENCES, reports=SYNTHETIC_REPORTS, overwrite=True
            )
        return {
            "data": str(folder),
            "max_tokens": 128,
            "sentence_max_tokens": 48,
            "stop": ["\n"],
        }

    def review_items(
        self, prepared: Prepared, cells: Sequence[Cell], items: Collection[str]
    ) -> Sequence[ReviewItem]:
        """No judge decides MedEval's score, so there is nothing to calibrate with clinicians."""
        return ()


SYNTHETIC_SENTENCES = 60
SYNTHETIC_REPORTS = 30
"""The suite demo's corpus: enough for every task's train examples, and few test items (with equal
balance 2 per task at seed 0: 10 answers per model). Its options stop each answer at its first
line break, shorter than ``medeval demo``'s blank line: every answer the tasks ask for is one line
(a label, a rewrite, the 14 tuples, a short impression), and the embedded Gemma, a base model,
otherwise writes numbered lists to the limit on most items, which took the cell from about 1 to
over 3 minutes on a busy 2-core machine."""


def item_score(task: TaskName, record: SampleRecord) -> float | None:
    """A record's per-item score on 0-1 (None: the model call failed): the task's own per-answer
    score, an unqualified answer 0 (the paper's counted-wrong view)."""
    from clinieval.benchmarks.medeval.comparisons import record_score

    if record.output is None or not record.output.ok:
        return None
    value = record_score(task, record)
    return None if value is None else value / 100.0


def _baselines(payload: _Payload, out: Path) -> tuple[list[Any], tuple[Path, Path] | None]:
    """The TF-IDF baselines of the tasks a classifier answers, trained on the train split (reused
    when already trained there), their test answers as arms, and the ΔAcc classifier pair."""
    from clinieval.benchmarks.medeval.analysis import read_arm
    from clinieval.benchmarks.medeval.baselines.train import CLASSIFIED, train_baseline

    arms = []
    for task in CLASSIFIED:
        try:
            done = train_baseline(
                "tfidf", task, payload.data.items_for(task), out, seed=payload.seed,
                split_info=payload.data.split_info(),
            )  # fmt: skip
        except UserError:  # a task the data cannot train (no train items, one class): no baseline
            continue
        if task in payload.tasks:
            arms.append(read_arm(done.arm_dir))
    models = out / "models"
    pair = (models / "tfidf-ambiguity", models / "tfidf-abnormality")
    return arms, pair if all(p.is_dir() for p in pair) and "rewriting" in payload.tasks else None
