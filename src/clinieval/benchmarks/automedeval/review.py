"""AutoMedEval sets to and from clinician review in the browser (``clinieval review``).

A judge-evaluation set becomes review items of the ``rate`` kind: the patient question as the
prompt, the record it is about as the context (a set made from runs by ``automedeval convert``
carries each sample's record), the reference answer, one answer per response (``a1``, ``a2``, …
— the model's name stays in the database and never reaches the page). Physicians rate each
answer on Relevancy, Fluency and Knowledge Correctness (1-5), the paper's three criteria and the
review app's default scales.
The review export's ``ratings.csv`` (``item, reviewer, model, relevancy, fluency, correctness``)
then goes back into the set as each reviewer's ratings, so ``automedeval judge`` and ``analyze``
compare judges with these physicians.

:data:`REVIEW_SOURCE` lets ``clinieval review import SET.jsonl --study NAME`` read a set directly
(it is recognised by its fields), without writing the items file first.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from clinieval.benchmarks.automedeval.judge_set import CRITERIA, SCORE_RANGE, JudgeItem, Rating
from clinieval.errors import UserError, shown
from clinieval.review.items import AnswerIn, ReviewItem
from clinieval.review.sources import Converted, ReviewSource, first_json_object, has_columns


def to_review_items(items: Sequence[JudgeItem]) -> list[ReviewItem]:
    """One ``rate`` item per set item; the reference rationale travels in ``meta``."""
    return [
        ReviewItem(
            item=x.id,
            prompt=x.question,
            context=x.context,
            reference=x.reference,
            answers=tuple(AnswerIn(f"a{j}", r.model, r.text) for j, r in enumerate(x.responses, 1)),
            meta={"rationale": x.rationale} if x.rationale else {},
        )
        for x in items
    ]


def _score(value: float | None, where: str, column: str) -> int:
    low, high = SCORE_RANGE
    if value is None or not float(value).is_integer() or not low <= value <= high:
        raise UserError(f"{where}: column {column!r} must be a whole number {low}-{high}, got {value!r}")
    return int(value)


def read_review_ratings(path: Path) -> dict[tuple[str, str], dict[str, Rating]]:
    """``(item, model) -> {reviewer: Rating}`` from a review export's ``ratings.csv``."""
    from clinieval.analysis.table import read_table

    table = read_table(path)
    table.require("item", "reviewer", "model", *CRITERIA)
    out: dict[tuple[str, str], dict[str, Rating]] = {}
    for row in table.rows:
        item, reviewer, model = (table.text(row, c) for c in ("item", "reviewer", "model"))
        if item is None or model is None or reviewer is None:
            raise UserError(f"{row.where}: item, reviewer and model must not be empty")
        scores = [_score(table.number(row, c), row.where, c) for c in CRITERIA]
        ratings = out.setdefault((item, model), {})
        if reviewer in ratings:
            raise UserError(f"{row.where}: {shown(reviewer)} rated {shown(model)} on {shown(item)} twice")
        ratings[reviewer] = Rating(*scores)
    return out


def with_review_ratings(items: Sequence[JudgeItem], path: Path) -> tuple[list[JudgeItem], int]:
    """The set with the review's ratings added to each response (an existing rating by the same
    physician is replaced); how many ratings were added. A rating for an item or model the set
    does not have is an error: it was exported from another set."""
    ratings = read_review_ratings(path)
    known = {(x.id, r.model) for x in items for r in x.responses}
    strangers = sorted(set(ratings) - known)
    if strangers:
        item, model = strangers[0]
        raise UserError(
            f"{path}: ratings for item {shown(item)} and model {shown(model)}, which the set does not have "
            f"({len(strangers)} such pairs); give the set the review was made from"
        )
    out = [
        replace(x, responses=tuple(
            replace(r, ratings={**r.ratings, **ratings.get((x.id, r.model), {})}) for r in x.responses
        ))
        for x in items
    ]  # fmt: skip
    return out, sum(len(v) for v in ratings.values())


def accepts(paths: Sequence[Path]) -> bool:
    """One judge-evaluation set: JSON Lines whose first item has ``question`` and ``responses``, or
    a CSV/TSV with the set's columns (:mod:`.data`)."""
    if len(paths) != 1 or not paths[0].is_file():
        return False
    path = paths[0]
    if path.suffix.lower() == ".jsonl":
        first = first_json_object(path)
        return first is not None and {"id", "question", "responses"} <= set(first)
    return path.suffix.lower() in (".csv", ".tsv") and has_columns(
        path, "id", "question", "reference", "model", "response"
    )


def convert(paths: Sequence[Path]) -> Converted:
    """The set's items as ``rate`` items (:func:`to_review_items`); ratings already in the set stay
    in the set, since reviewers rate blind."""
    from clinieval.benchmarks.automedeval.data import load_set

    if len(paths) != 1:
        raise UserError(f"a judge-evaluation set is one file; {len(paths)} paths were given")
    items = to_review_items(load_set(paths[0]))
    back = f"after the export: clinieval automedeval review-ratings {paths[0]} EXPORT/ratings.csv --out OUT"
    return Converted(items, (back,))


REVIEW_SOURCE = ReviewSource(
    name="automedeval-set",
    kind="rate",
    describe="an AutoMedEval judge-evaluation set (.jsonl or .csv) for physicians' 1-5 ratings",
    accepts=accepts,
    convert=convert,
)
