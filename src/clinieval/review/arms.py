"""Run folders (one per arm: one model's answers to one benchmark) read side by side, for the
benchmarks that turn arms into review items (``medalign-arms``, and every judged benchmark's part
in ``clinieval suite sample``).

Why here, below the benchmarks: reading several arms and keeping the questions every one of them
answered, each asked the same way, is the same step whatever the benchmark; only what an item
shows (the prompt, the record, the reference) is the benchmark's. A benchmark then builds its
items from :class:`SharedRecords` with its own converter.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.errors import UserError
from clinieval.records.sample_record import SampleRecord
from clinieval.review.items import AnswerIn


@dataclass(frozen=True, slots=True)
class SharedRecords:
    """The first-repeat records of the questions every arm has a record of (a failed call
    included: whether to keep it is the converter's call), in sorted id order, one record per arm
    in the arms' order; ``partial`` counts the questions only some arms have."""

    ids: tuple[str, ...]
    records: Mapping[str, tuple[SampleRecord, ...]]
    partial: int


def shared_records(
    paths: Sequence[Path], *, noun: str = "item", keep: Collection[str] | None = None
) -> SharedRecords:
    """The records of ``paths`` (run folders) for the questions all of them answered, sorted by id
    (a run's file is in completion order, which concurrency makes vary); ``keep`` limits them to
    those ids. A question asked differently in two arms is refused (``noun`` names a question in
    the messages): its answers would not be answers to one question."""
    from clinieval.records.runs import RunDir

    runs = [RunDir.open(p) for p in paths]
    answered = [{r.sample.id: r for r in run.records() if r.repeat == 0} for run in runs]
    every = sorted(set(answered[0]).intersection(*answered[1:])) if answered else []
    if not every:
        raise UserError(f"the runs share no {noun}; were they run on the same {noun}s?")
    partial = len(set().union(*answered)) - len(every)
    if keep is not None:
        every = [i for i in every if i in keep]
    records: dict[str, tuple[SampleRecord, ...]] = {}
    for iid in every:
        found = tuple(a[iid] for a in answered)
        first = found[0].sample
        for run, rec in zip(runs[1:], found[1:], strict=True):
            if rec.sample.input != first.input:
                raise UserError(
                    f"{run.path}: {noun} {iid!r} differs from the one in {runs[0].path}; were the"
                    f" runs made from the same {noun}s?"
                )
        records[iid] = found
    return SharedRecords(tuple(every), records, partial)


def arm_answers(labels: Sequence[str], records: Sequence[SampleRecord]) -> tuple[AnswerIn, ...]:
    """One question's answers as review answers: each arm's under the key ``a1``, ``a2`` ... in
    the arms' order (the import blinds and reorders them per reviewer), its label the answer's
    source; an arm whose call failed has no answer to show and is left out (the caller counts
    ``len(records) - len(answers)``)."""
    return tuple(
        AnswerIn(f"a{j}", label, rec.output.text)
        for j, (label, rec) in enumerate(zip(labels, records, strict=True), 1)
        if rec.output is not None and rec.output.ok
    )
