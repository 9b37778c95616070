"""Runs read back as the browser shows them: samples, each arm's answers, and every score.

An *arm* is one run directory (one model, one setting). A sample's scores come from two places:
the run's own ``samples.jsonl`` (the scorers the run was made with) and ``scores/NAME.jsonl``
(``clinieval score``, text metrics, judges). A file under ``scores/`` wins over a run score of
the same name, because it was written later from the same records (a re-score replaces).

Nothing here formats anything: the pages (:mod:`clinieval.view.item_page`,
:mod:`clinieval.view.index_page`) decide how it looks.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.errors import UserError
from clinieval.records.runs import SCORES, RunDir, find_run_dirs
from clinieval.records.sample_record import SampleRecord
from clinieval.types import JSON, Sample, Score

UNPARSED_VERDICT = "judge_unparsed"
"""The error kind the browser files a judge reply under when the rubric could not read it."""

CATEGORY_LIMIT = 20
"""A metadata field with at most this many distinct values (and at least two) is a category."""


@dataclass(frozen=True, slots=True)
class Arm:
    """One run directory as a column of the browser."""

    name: str
    path: Path
    model: str
    task: str
    sample_order: tuple[str, ...] = ()
    """The run's sample ids in the order of its data (``manifest.json``'s ``sample_order``);
    empty for a run written before clinieval recorded it."""


@dataclass(frozen=True, slots=True)
class NamedScore:
    """One score on one answer, with where it was read from (``samples.jsonl`` or ``scores/``)."""

    name: str
    source: str
    score: Score

    @property
    def judge_repeats(self) -> list[JSON]:
        """Each judge repeat (values, rationale, error, raw reply); empty for a non-judge score."""
        repeats = self.score.metadata.get("judge_repeats")
        return [r for r in repeats if isinstance(r, dict)] if isinstance(repeats, list) else []

    def error_kinds(self) -> list[str]:
        """Why this score (or one of its judge repeats) has no value; a failed answer is left to
        the answer itself, so one failure is not counted once per score."""
        kinds: list[str] = []
        kind = self.score.metadata.get("error_kind")
        if isinstance(kind, str) and not kind.startswith("answer_failed:"):
            kinds.append(kind)
        for rep in self.judge_repeats:
            rep_kind = rep.get("error_kind")
            if rep_kind == "unparsed":
                kinds.append(UNPARSED_VERDICT)
            elif isinstance(rep_kind, str):
                kinds.append(f"judge_failed:{rep_kind}")
        return kinds


@dataclass(slots=True)
class Answer:
    """One arm's record of one (sample, repeat) with every score it has."""

    record: SampleRecord
    scores: list[NamedScore] = field(default_factory=list)

    def error_kinds(self) -> list[str]:
        """The model call's failure (if any) and each score's, once each, in order."""
        kinds = [k] if (k := self.record.error_kind()) is not None else []
        for s in self.scores:
            kinds.extend(s.error_kinds())
        return list(dict.fromkeys(kinds))


@dataclass(slots=True)
class Item:
    """One sample across arms: ``answers[arm position]`` holds that arm's repeats in order."""

    sample: Sample
    answers: dict[int, list[Answer]] = field(default_factory=dict)
    differs_in: list[int] = field(default_factory=list)
    """Arms whose copy of the sample (question, context, references) differs from ``sample``."""

    def arm_score(self, arm: int, name: str) -> float | None:
        """The mean of ``name`` over the arm's repeats that have a value, or None."""
        values = [
            s.score.value
            for a in self.answers.get(arm, [])
            for s in a.scores
            if s.name == name and s.score.value is not None
        ]
        return statistics.fmean(values) if values else None

    def arm_errors(self, arm: int) -> list[str]:
        return list(dict.fromkeys(k for a in self.answers.get(arm, []) for k in a.error_kinds()))


@dataclass(slots=True)
class Results:
    """Everything a site shows: the arms, the samples in data order (:func:`in_data_order`), the
    filter choices."""

    arms: list[Arm]
    items: list[Item]
    score_names: list[str]
    error_kinds: list[str]
    categories: dict[str, list[str]]


def load_results(paths: Sequence[Path]) -> Results:
    """Read every run under ``paths`` (run folders or folders of them) into one :class:`Results`."""
    run_dirs = find_run_dirs(list(paths))
    if len(set(p.resolve() for p in run_dirs)) != len(run_dirs):
        raise UserError("the same run directory is named twice; give each arm once")
    arms = [_arm(RunDir.open(p), name) for p, name in zip(run_dirs, arm_names(run_dirs), strict=True)]
    items: dict[str, Item] = {}
    for position, arm in enumerate(arms):
        _add_arm(items, position, RunDir(arm.path))
    if not items:
        raise UserError(f"{', '.join(str(p) for p in paths)}: no finished samples to show")
    found = in_data_order(items, arms)
    return Results(
        arms=arms,
        items=found,
        score_names=_score_names(found),
        error_kinds=sorted({k for it in found for arm in it.answers for k in it.arm_errors(arm)}),
        categories=categories(it.sample for it in found),
    )


def in_data_order(items: dict[str, Item], arms: Sequence[Arm]) -> list[Item]:
    """The items in the order of the first arm's data, then those only a later arm has (in its
    data order), then any no run's order names (a run written before orders were recorded, or
    records of samples a later --limit left out) in the order they were read. Never in the order
    answers finished: that changes from run to run, and a reader looks for sample 3 after 2."""
    listed = (sid for arm in arms for sid in arm.sample_order)
    ordered = dict.fromkeys([*(sid for sid in listed if sid in items), *items])
    return [items[sid] for sid in ordered]


def arm_names(paths: Sequence[Path]) -> list[str]:
    """Each run folder's name; a name given twice (``a/run`` and ``b/run``) gets its parent too."""
    names = [p.name for p in paths]
    return [f"{p.parent.name}/{p.name}" if names.count(p.name) > 1 else p.name for p in paths]


def _arm(run: RunDir, name: str) -> Arm:
    manifest = run.manifest()
    spec = manifest.get("spec") or {}
    return Arm(
        name=name,
        path=run.path,
        model=_named_part(spec, "model", "spec"),
        task=_named_part(spec, "task", "name"),
        sample_order=_sample_order(manifest),
    )


def _sample_order(manifest: JSON) -> tuple[str, ...]:
    order = manifest.get("sample_order")
    return tuple(str(sid) for sid in order) if isinstance(order, list) else ()


def _named_part(spec: JSON, part: str, key: str) -> str:
    """``spec[part][key]`` as written by ``clinieval run``; a run written by another tool may hold
    a plain string there, or nothing."""
    value = spec.get(part)
    if isinstance(value, dict):
        value = value.get(key)
    return str(value) if value else "?"


def _score_files(run: RunDir) -> dict[str, dict[tuple[str, int], Score]]:
    """Every ``scores/NAME.jsonl`` of a run, read with the judge's reader (one error per bad line)."""
    from clinieval.judge.run import read_judge_scores

    folder = run.path / SCORES
    if not folder.is_dir():
        return {}
    return {p.stem: read_judge_scores(run, p.stem) for p in sorted(folder.glob("*.jsonl"))}


def _add_arm(items: dict[str, Item], position: int, run: RunDir) -> None:
    files = _score_files(run)
    for record in run.records():
        answer = Answer(record, _scores_of(record, files))
        item = items.get(record.sample.id)
        if item is None:
            item = items[record.sample.id] = Item(record.sample)
        elif _differs(item.sample, record.sample) and position not in item.differs_in:
            item.differs_in.append(position)
        item.answers.setdefault(position, []).append(answer)
    for answers in (it.answers.get(position) for it in items.values()):
        if answers:
            answers.sort(key=lambda a: a.record.repeat)


def _scores_of(record: SampleRecord, files: dict[str, dict[tuple[str, int], Score]]) -> list[NamedScore]:
    named = {n: NamedScore(n, "samples.jsonl", s) for n, s in record.scores.items()}
    for name, scores in files.items():
        if record.key in scores:
            named[name] = NamedScore(name, f"{SCORES}/{name}.jsonl", scores[record.key])
    return list(named.values())


def _differs(a: Sample, b: Sample) -> bool:
    return (a.input, a.context, a.all_targets, a.choices) != (b.input, b.context, b.all_targets, b.choices)


def _score_names(items: Iterable[Item]) -> list[str]:
    names = (s.name for it in items for answers in it.answers.values() for a in answers for s in a.scores)
    return list(dict.fromkeys(names))


def categories(samples: Iterable[Sample]) -> dict[str, list[str]]:
    """Metadata fields whose values are short scalars with 2 to :data:`CATEGORY_LIMIT` distinct
    values, at least one of them shared by two samples, each with its values sorted: the fields
    worth a filter (a level, a specialty, a task type), not ids or free text."""
    seen: dict[str, set[str]] = {}
    counts: dict[str, int] = {}
    rejected: set[str] = set()
    for sample in samples:
        for key, value in sample.metadata.items():
            if value is None:
                continue  # a sample without a value for the field: no category, not a reason to drop it
            text = category_value(value)
            if text is None:
                rejected.add(key)
            elif key not in rejected:
                seen.setdefault(key, set()).add(text)
                counts[key] = counts.get(key, 0) + 1
                if len(seen[key]) > CATEGORY_LIMIT:
                    rejected.add(key)
    return {k: sorted(v) for k, v in seen.items() if k not in rejected and 2 <= len(v) < counts[k]}


def category_value(value: object) -> str | None:
    """A metadata value as a category label, or None when it cannot be one (a list, long text)."""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float | str) and len(str(value)) <= 60:
        return str(value)
    return None
