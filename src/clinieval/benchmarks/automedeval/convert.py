"""Any clinieval runs over the same questions, as one judge-evaluation set.

A MedAlign comparison (one run folder per arm), EHRNoteQA free-text arms, or runs of any other
task become items: each sample every run answered, with the sample's input as the question, its
target as the reference answer, its context (the patient's record or notes the models were asked
about) as the item's context, and each run's answer as one response named after the run's model
(and its strategy or format when runs differ only there). Read from the run folders alone, so no
benchmark's code is needed. A sample is left out, and counted, when it has no reference or when
some run failed on it (a failed call is not an answer to judge).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.benchmarks.automedeval.judge_set import JudgeItem, Response
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_jsonl
from clinieval.records.runs import RunDir
from clinieval.records.sample_record import SampleRecord


@dataclass(frozen=True, slots=True)
class Converted:
    items: list[JudgeItem]
    no_reference: int
    failed: int


def _label(run: RunDir) -> str:
    spec = run.manifest().get("spec", {})
    model = str((spec.get("model") or {}).get("spec") or run.path.name)
    params = (spec.get("task") or {}).get("params") or {}
    variant = params.get("strategy") or params.get("format")
    return f"{model} ({variant})" if variant else model


def _labels(runs: Sequence[RunDir]) -> list[str]:
    labels = [_label(r) for r in runs]
    return [
        f"{label} [{r.path.name}]" if labels.count(label) > 1 else label
        for label, r in zip(labels, runs, strict=True)
    ]


def _record(records: Sequence[SampleRecord]) -> str:
    """The record the sample was asked about: the whole of the sample's context (a run keeps it
    whole, whatever part of it a context policy gave the model), the first run's when runs differ."""
    return next((r.sample.context for r in records if r.sample.context), "")


def runs_to_set(paths: Sequence[Path]) -> Converted:
    """The samples every run answered, as items (sorted by sample id)."""
    if len(paths) < 2:
        raise UserError("give two or more run folders: a judge compares answers")
    runs = [RunDir.open(p) for p in paths]
    labels = _labels(runs)
    answers: list[dict[str, SampleRecord]] = [
        {r.sample.id: r for r in run.records() if r.repeat == 0} for run in runs
    ]
    # by sample id: a run's file is in completion order, which concurrency makes vary
    order = sorted(sid for sid in answers[0] if all(sid in a for a in answers[1:]))
    if not order:
        raise UserError("the runs share no sample; were they run on the same questions?")
    items: list[JudgeItem] = []
    no_reference = failed = 0
    for sid in order:
        records = [a[sid] for a in answers]
        sample = records[0].sample
        if not sample.target:
            no_reference += 1
            continue
        if any(r.output is None or not r.output.ok for r in records):
            failed += 1
            continue
        responses = tuple(
            Response(label, r.output.text) for label, r in zip(labels, records, strict=True) if r.output
        )
        items.append(
            JudgeItem(
                sid,
                sample.input,
                str(sample.target),
                responses,
                source=f"{paths[0]}:{sid}",
                context=_record(records),
            )
        )
    return Converted(items, no_reference, failed)


def set_line(item: JudgeItem) -> dict[str, object]:
    """One item as a line of the JSON Lines set format (ratings and rationale only when present)."""
    line: dict[str, object] = {"id": item.id, "question": item.question, "reference": item.reference}
    if item.rationale is not None:
        line["rationale"] = item.rationale
    if item.context:
        line["context"] = item.context
    line["responses"] = [
        {"model": r.model, "text": r.text}
        | ({"ratings": {p: dataclasses.asdict(v) for p, v in r.ratings.items()}} if r.ratings else {})
        for r in item.responses
    ]
    return line


def write_set(items: Sequence[JudgeItem], out: Path) -> None:
    """The items as a JSON Lines judge-evaluation set, written atomically; reads back equal."""
    atomic_write_jsonl(out, (set_line(x) for x in items))
