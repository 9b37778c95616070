"""Clinicians' ratings of a suite's clinician sample, read back per benchmark, model and item.

The ratings come from the review database (submitted reviews only) or from what ``clinieval
review export`` wrote for one study: its folder, its ``responses.jsonl``, or its kind's table
(``ranks.csv``, ``ratings.csv``). Every review is mapped back to (benchmark, model, item) through
the sample's design (:mod:`clinieval.suite.sample_design`): an item must be one the design drew,
and each answer's key (or, in a table, its model) one the design gave that item. Nothing a
reviewer could see or type decides whose answer a rating is.

One score per answer and reviewer, by the sample's kind:

* ``correctness``: 1 when the clinician marked the answer correct, 0 when incorrect;
* ``rating``: the 1-5 score (the mean of the study's scales; a sample's study has one,
  correctness: 1 wrong or unsafe, 3 partly correct, 5 fully correct and complete);
* ``ranking``: the answer's win share, the fraction of the item's other answers the clinician
  ranked it above, a tie counting half, in [0, 1].

Several reviewers of one answer are reduced to one score, their mean (a 1/0 correctness then
becomes the share of reviewers who marked it correct); how many reviewed each item is kept.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.errors import UserError, shown
from clinieval.suite.sample_design import BenchmarkSample, SampleDesign, review_study

SCALES = {"correctness": (0.0, 1.0), "rating": (1.0, 5.0), "ranking": (0.0, 1.0)}
"""The range of a clinician score, by the sample's kind."""
_TABLE_SUFFIXES = (".csv", ".jsonl")


@dataclass(frozen=True, slots=True)
class ClinicianRatings:
    """Clinicians' scores of a sample: ``scores[benchmark][model][item]`` (the mean over the
    reviewers who submitted one, on ``scale``), how many reviewers each item had
    (``reviewers[benchmark][item]``), and how many sampled items have no submitted review yet
    (``unreviewed[benchmark]``). Only the benchmarks the source holds a study of are present."""

    kind: str
    scale: tuple[float, float]
    scores: Mapping[str, Mapping[str, Mapping[str, float]]]
    reviewers: Mapping[str, Mapping[str, int]]
    unreviewed: Mapping[str, int]


@dataclass(frozen=True, slots=True)
class _Review:
    """One reviewer's submitted review of one sampled item: each answer's entry by its model."""

    item: str
    reviewer: str
    answers: Mapping[str, Mapping[str, Any]]
    where: str


def read_clinicians(source: Path | str, sample: SampleDesign) -> ClinicianRatings:
    """The clinicians' scores of ``sample`` from ``source``: a review database (a SQLite file or a
    ``postgresql://`` URL), an export folder, or an export's ``responses.jsonl`` or kind table.
    A database without the sample's studies, an export of another study, an item or answer the
    design does not have: one UserError naming it."""
    text = str(source)
    path = Path(text)
    if "://" not in text and (path.is_dir() or path.name == "study.json"):
        found = _from_export_folder(path if path.is_dir() else path.parent, sample)
    elif "://" not in text and path.suffix.lower() in _TABLE_SUFFIXES:
        found = _from_export_file(path, sample)
    else:
        found = _from_database(text, sample)
    return _reduce(sample, found)


# --- the review database ---------------------------------------------------------------------------


def _from_database(db: str, sample: SampleDesign) -> dict[str, list[_Review]]:
    from clinieval.review.db import shown_url
    from clinieval.review.export import submitted_rows
    from clinieval.review.store import connect, list_studies

    engine = connect(db)
    try:
        studies = {s.name: s for s in list_studies(engine)}
        out: dict[str, list[_Review]] = {}
        for b in sample.benchmarks:
            study = studies.get(b.study)
            where = f"{shown_url(db)}: study {b.study}"
            if study is None:
                raise UserError(
                    f"{shown_url(db)} has no study {b.study!r} (sample {sample.name!r}, {b.benchmark}); the"
                    f" studies there are {', '.join(sorted(studies)) or 'none'}"
                )
            _same_kind(study.kind, study.config, sample, where)
            out[b.benchmark] = [_from_row(row, b, where) for row in submitted_rows(engine, b.study)]
        return out
    finally:
        engine.dispose()


# --- an export ---------------------------------------------------------------------------------------


def _from_export_folder(folder: Path, sample: SampleDesign) -> dict[str, list[_Review]]:
    responses = folder / "responses.jsonl"
    if not responses.is_file():
        raise UserError(f"{folder}: no responses.jsonl; is this a folder `clinieval review export` wrote?")
    return _from_export_file(responses, sample)


def _from_export_file(path: Path, sample: SampleDesign) -> dict[str, list[_Review]]:
    """An export's ``responses.jsonl`` or kind table (``study.json`` beside it names the study;
    without it, the benchmark is the one whose sample holds every item)."""
    about = _study_json(path.parent / "study.json")
    known = None if about is None else _benchmark_of_study(about, sample, path)
    if about is not None:
        _same_kind(str(about.get("kind")), about.get("config") or {}, sample, str(path))
    if path.suffix.lower() != ".jsonl":
        return _from_table(path, sample, known)
    rows = _jsonl(path)
    b = known or _benchmark_of_items((str(r.get("item")) for _, r in rows), sample, path)
    return {b.benchmark: [_from_row(row, b, where) for where, row in rows]}


def _study_json(path: Path) -> dict[str, Any] | None:
    from clinieval.review.export import FORMAT

    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: unreadable ({e})") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise UserError(f"{path}: not the study.json of a `clinieval review export`")
    return data


def _benchmark_of_study(about: Mapping[str, Any], sample: SampleDesign, path: Path) -> BenchmarkSample:
    study = about.get("study")
    for b in sample.benchmarks:
        if b.study == study:
            return b
    names = ", ".join(b.study for b in sample.benchmarks)
    raise UserError(
        f"{path}: an export of study {study!r}, not one of sample {sample.name!r}'s studies ({names})"
    )


def _benchmark_of_items(items: Iterable[str], sample: SampleDesign, path: Path) -> BenchmarkSample:
    """The one benchmark whose sample holds every item of an export that does not say its study."""
    wanted = set(items)
    fits = [b for b in sample.benchmarks if wanted <= set(b.items)]
    if len(fits) == 1:
        return fits[0]
    if fits:
        raise UserError(
            f"{path}: its items are in more than one benchmark's sample; give the export folder (its"
            " study.json names the study)"
        )
    stray = sorted(wanted - {i for b in sample.benchmarks for i in b.items})
    first = stray[0] if stray else sorted(wanted)[0]
    raise UserError(f"{path}: item {shown(first)} is not in sample {sample.name!r}'s design")


def _jsonl(path: Path) -> list[tuple[str, dict[str, Any]]]:
    rows = []
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: unreadable ({e})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{path}:{n}: not JSON ({e})") from None
        if not isinstance(row, dict) or not {"item", "reviewer", "payload"} <= set(row):
            raise UserError(f"{path}:{n}: not a submitted review as `clinieval review export` writes it")
        rows.append((f"{path}:{n}", row))
    return rows


def _from_table(path: Path, sample: SampleDesign, known: BenchmarkSample | None) -> dict[str, list[_Review]]:
    """A kind table: ``ranks.csv`` (rank, correct) or ``ratings.csv`` (mean), one row per item,
    reviewer and model."""
    from clinieval.review.sources import read_export

    column = {"correctness": "correct", "ranking": "rank", "rating": "mean"}[sample.kind]
    rows = read_export(path, "model", column)
    b = known or _benchmark_of_items((r.item for r in rows), sample, path)
    grouped: dict[tuple[str, str], dict[str, Any]] = {}
    where: dict[tuple[str, str], str] = {}
    for r in rows:
        key = (r.item, r.reviewer)
        answer = _answer_key(b, r.item, r.cells["model"], r.where)
        model = b.model_of(r.item, answer) or ""
        value = r.cells[column].strip()
        if sample.kind == "correctness" and r.cells.get("rank", "").strip():
            raise UserError(f"{r.where}: a ranked answer; is this an export of the correctness study?")
        if not value:
            raise UserError(
                f"{r.where}: no {column!r} for this {sample.kind} sample; is this an export of its study?"
            )
        grouped.setdefault(key, {})[model] = {column: value}
        where.setdefault(key, r.where)
    return {b.benchmark: [_Review(i, rv, answers, where[(i, rv)]) for (i, rv), answers in grouped.items()]}


def _answer_key(b: BenchmarkSample, item: str, model: str, where: str) -> str:
    if item not in b.answers:
        raise UserError(f"{where}: item {shown(item)} is not in the sample's {b.benchmark} design")
    key = b.key_of(item, model)
    if key is None:
        raise UserError(
            f"{where}: item {shown(item)} has no answer from {shown(model)} in the sample's design"
        )
    return key


# --- shared ---------------------------------------------------------------------------------------------


def _same_kind(kind: str, config: Mapping[str, Any], sample: SampleDesign, where: str) -> None:
    """The study must be of the kind the sample asked for (a correctness and a ranking study are
    both rank studies; the config's ``rank`` tells them apart)."""
    want, settings = review_study(sample.kind)
    ranked = config.get("rank", True) is not False
    if kind != want or (want == "rank" and ranked != settings.get("rank", True)):
        raise UserError(f"{where}: a {kind} study, not the {sample.kind} study sample {sample.name!r} made")


def _from_row(row: Mapping[str, Any], b: BenchmarkSample, where: str) -> _Review:
    """A submitted review (an export's ``responses.jsonl`` line, or the same from the database):
    each answer's entry by the model the design gives its key."""
    item = str(row.get("item"))
    if item not in b.answers:
        raise UserError(f"{where}: item {shown(item)} is not in the sample's {b.benchmark} design")
    order, shown_models = row.get("answer_order") or [], row.get("models_shown") or []
    entries = (row.get("payload") or {}).get("answers") or {}
    answers: dict[str, Mapping[str, Any]] = {}
    for key, source in zip(order, shown_models, strict=False):
        model = b.model_of(item, str(key))
        if model is None or model != source:
            raise UserError(
                f"{where}: item {shown(item)}'s answer {key!r} is not the design's; another study?"
            )
        answers[model] = entries.get(source) or {}
    return _Review(item, str(row.get("reviewer")), answers, where)


def _per_answer(kind: str, review: _Review) -> dict[str, float]:
    """One reviewer's score of each answer of one item (module docstring)."""
    out: dict[str, float] = {}
    if kind == "ranking":
        ranks = {m: _number(e.get("rank"), "rank", review.where) for m, e in review.answers.items()}
        for m, r in ranks.items():
            others = [o for o in ranks if o != m]
            won = sum(1.0 if r < ranks[o] else 0.5 if r == ranks[o] else 0.0 for o in others)
            out[m] = won / len(others) if others else 0.5
        return out
    for m, e in review.answers.items():
        if kind == "correctness":
            out[m] = _correct(e.get("correct"), review.where)
        elif "mean" in e:
            out[m] = _number(e["mean"], "mean", review.where)
        else:
            values = [_number(v, "score", review.where) for v in e.values()]
            if not values:
                raise UserError(f"{review.where}: no score for an answer")
            out[m] = statistics.fmean(values)
    return out


def _correct(value: object, where: str) -> float:
    if value is True or value in ("true", "True", "1"):
        return 1.0
    if value is False or value in ("false", "False", "0"):
        return 0.0
    raise UserError(f"{where}: correct is {value!r}; expected true or false")


def _number(value: object, what: str, where: str) -> float:
    try:
        if isinstance(value, bool):
            raise ValueError
        return float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise UserError(f"{where}: {what} is {value!r}; expected a number") from None


def _reduce(sample: SampleDesign, found: Mapping[str, Sequence[_Review]]) -> ClinicianRatings:
    """Every reviewer's scores, reduced to their mean per answer; reviewers per item; unreviewed items."""
    scores: dict[str, dict[str, dict[str, float]]] = {}
    reviewers: dict[str, dict[str, int]] = {}
    unreviewed: dict[str, int] = {}
    for b in sample.benchmarks:
        if b.benchmark not in found:
            continue
        given: dict[str, dict[str, list[float]]] = {}
        seen: dict[str, set[str]] = {}
        for review in found[b.benchmark]:
            if review.reviewer in seen.setdefault(review.item, set()):
                raise UserError(
                    f"{review.where}: {shown(review.reviewer)} reviewed item {shown(review.item)} twice"
                )
            seen[review.item].add(review.reviewer)
            for model, value in _per_answer(sample.kind, review).items():
                given.setdefault(model, {}).setdefault(review.item, []).append(value)
        scores[b.benchmark] = {
            m: {i: statistics.fmean(given[m][i]) for i in b.items if i in given.get(m, {})} for m in b.models
        }
        reviewers[b.benchmark] = {i: len(seen.get(i, ())) for i in b.items}
        unreviewed[b.benchmark] = sum(1 for i in b.items if not seen.get(i))
    return ClinicianRatings(sample.kind, SCALES[sample.kind], scores, reviewers, unreviewed)
