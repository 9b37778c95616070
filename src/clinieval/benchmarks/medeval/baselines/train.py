"""Train a baseline on a task's train split, test it, save it with a model card, and write its test
answers as an arm, so the analysis puts adapted PLMs and prompted LLMs side by side.

The arm is an ordinary run folder (``manifest.json``, ``samples.jsonl``, ``summary.json``): each
test item's record holds the baseline's answer written in the format the task asks of an LLM (a
label word, or the 14 ``(observation, prediction)`` tuples), scored by the same scorers. Its model
spec is ``baseline:<kind>``. Summaries get a labelled extractive baseline instead: the findings'
first sentence.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval import __version__
from clinieval.benchmarks.medeval.answers import CodeAnswers, LabelAnswers
from clinieval.benchmarks.medeval.baselines.classifiers import Labels, new_classifier
from clinieval.benchmarks.medeval.items import TASKS, ReportItem, Split, TaskName
from clinieval.benchmarks.medeval.splits import split_leakage
from clinieval.benchmarks.medeval.task import Item, MedEvalSettings, medeval_task
from clinieval.benchmarks.medeval.task_table import SUMMARIZATION, TASK_TABLE
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json
from clinieval.records.runs import SUMMARY, RunDir, append_record, build_manifest
from clinieval.records.sample_record import SampleRecord
from clinieval.records.summary import summarize
from clinieval.types import JSON, Message, ModelOutput

CLASSIFIED: tuple[TaskName, ...] = tuple(t for t in TASKS if TASK_TABLE[t].answers.classified() is not None)
"""Tasks a trained classifier answers (rewriting has no baseline; summaries get the lead sentence)."""


def _classified(task: TaskName) -> LabelAnswers | CodeAnswers:
    answers = TASK_TABLE[task].answers.classified()
    if answers is None:
        raise UserError(f"no trained baseline for {task}; the classified tasks are {', '.join(CLASSIFIED)}")
    return answers


def heads_of(task: TaskName) -> tuple[str, ...]:
    return _classified(task).heads(task)


def example(task: TaskName, item: Item, absent_as: str) -> tuple[str, Labels]:
    """The text a baseline reads and its gold labels (one per head)."""
    return _classified(task).example(item, absent_as)


def answer_text(task: TaskName, labels: Labels) -> str:
    """A prediction written as the task asks an LLM to answer."""
    return _classified(task).answer_text(labels)


def _split(task: TaskName, items: Sequence[Item], split: str) -> list[Item]:
    entry = TASK_TABLE[task]
    return [x for x in items if x.split == split and entry.eligible(x)]


def data_hash(texts: Sequence[str], labels: Sequence[Labels]) -> str:
    """sha256 of the training data as the classifier saw it (recorded in the model card)."""
    h = hashlib.sha256()
    for text, label in zip(texts, labels, strict=True):
        h.update(json.dumps([text, list(label)], ensure_ascii=False).encode())
    return h.hexdigest()


def test_metrics(task: TaskName, gold: Sequence[Labels], predicted: Sequence[Labels]) -> JSON:
    """The baseline's own test numbers: accuracy and macro-F1, or average accuracy and exact match."""
    return _classified(task).test_metrics(gold, predicted)


@dataclass(frozen=True, slots=True)
class Trained:
    """Where a trained baseline went: its folder (weights + card.json) and its test arm."""

    card: JSON
    model_dir: Path
    arm_dir: Path


def train_baseline(
    kind: str,
    task: TaskName,
    items: Sequence[Item],
    out: Path,
    *,
    seed: int = 0,
    epochs: int = 10,
    absent_as: str = "unknown",
    split_info: JSON | None = None,
) -> Trained:
    """Fit ``kind`` on the train split, test it, save it under ``out/models`` and its arm under
    ``out/arms``."""
    _classified(task)
    train, test = _split(task, items, "train"), _split(task, items, "test")
    if not train or not test:
        raise UserError(
            f"{task}: the data has {len(train)} train and {len(test)} test items; both are needed"
        )
    texts, labels = zip(*(example(task, x, absent_as) for x in train), strict=True)
    classifier = new_classifier(kind, heads_of(task), seed, epochs)
    started = time.perf_counter()
    classifier.fit(texts, labels)
    seconds = time.perf_counter() - started
    test_texts, test_gold = zip(*(example(task, x, absent_as) for x in test), strict=True)
    predicted = classifier.predict(test_texts)
    card: JSON = {
        "kind": classifier.kind,
        "task": task,
        "heads": list(heads_of(task)),
        "seed": seed,
        "data_sha256": data_hash(texts, labels),
        "split": {
            "train": len(train),
            "test": len(test),
            "test_in_train": split_leakage(train, test),  # test items with a copy among the train items
            **(split_info or {}),
        },
        "hyperparameters": classifier.describe(),
        "metrics": test_metrics(task, test_gold, predicted),
        "training_seconds": round(seconds, 3),
        "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "clinieval_version": __version__,
    }
    model_dir = out / "models" / f"{kind}-{task}"
    classifier.save(model_dir)
    atomic_write_json(model_dir / "card.json", card)
    answers = {x.id: answer_text(task, p) for x, p in zip(test, predicted, strict=True)}
    arm = write_baseline_arm(
        task, items, answers, f"baseline:{kind}", card, out / "arms" / f"baseline-{kind}-{task}"
    )
    validation = _split(task, items, "validation")
    if validation:  # the split the analysis chooses arms on, as for the prompted models
        said = classifier.predict([example(task, x, absent_as)[0] for x in validation])
        write_baseline_arm(
            task,
            items,
            {x.id: answer_text(task, p) for x, p in zip(validation, said, strict=True)},
            f"baseline:{kind}",
            card,
            out / "arms" / f"baseline-{kind}-{task}-validation",
            split="validation",
        )
    return Trained(card, model_dir, arm)


def lead_sentence_arm(items: Sequence[Item], out: Path) -> Path:
    """The extractive summary baseline: each test report's first FINDINGS sentence as its summary."""
    from clinieval.benchmarks.medeval.sections import split_sentences

    tested = [x for x in _split(SUMMARIZATION.name, items, "test") if isinstance(x, ReportItem)]
    answers = {x.id: (split_sentences(x.findings) or [x.findings])[0] for x in tested}
    identity = {"kind": "lead-sentence", "rule": "the first sentence of the FINDINGS section"}
    return write_baseline_arm(SUMMARIZATION.name, items, answers, "baseline:lead-sentence", identity, out)


def write_baseline_arm(
    task: TaskName,
    items: Sequence[Item],
    answers: Mapping[str, str],
    spec: str,
    identity: JSON,
    out: Path,
    split: Split = "test",
    settings: MedEvalSettings | None = None,
) -> Path:
    """A run folder whose records hold ``answers`` (sample id -> text) for the ``split`` items,
    scored as an LLM's would be; ``settings`` (default: zero-shot, the paper's prompt) are the
    arm's prompt settings, recorded as a ``medeval run`` records them (their split is ``split``)."""
    chosen = dataclasses.replace(settings or MedEvalSettings(), split=split)
    built = medeval_task(task, items, chosen)
    samples = built.load()
    run_spec: dict[str, Any] = {
        "task": built.spec(),
        "model": {"spec": spec, "identity": identity},
        "generation": {},
        "repeats": 1,
    }
    run = RunDir.create_or_resume(out, build_manifest(run_spec, []), overwrite=True)
    records = []
    with run.open_appender() as f:
        for sample in samples:
            text = answers[sample.id]
            record = SampleRecord(
                sample, 0, [Message("user", sample.input)], {"policy": "baseline"}, ModelOutput(text)
            )
            record.scores = {s.name: s.score(record) for s in built.scorers}
            append_record(f, record)
            records.append(record)
    summaries = summarize(records, [s.name for s in built.scorers])
    atomic_write_json(out / SUMMARY, {"summaries": [s.to_dict() for s in summaries]})
    run.set_status("complete")
    return out
