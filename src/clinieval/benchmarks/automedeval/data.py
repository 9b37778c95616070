"""Reading judge-evaluation sets: JSON Lines (one item per line) or CSV (one row per response).

**JSON Lines**, one object per item::

    {"id": "q1", "question": "...", "reference": "...", "rationale": "... (optional)",
     "context": "the record the question is about (optional)",
     "responses": [{"model": "a", "text": "...",
                    "ratings": {"dr_1": {"relevancy": 4, "fluency": 5, "correctness": 3}}}, ...]}

**CSV** (or TSV), one row per response, or per response and physician when rated: ``id``,
``question``, ``reference``, ``model``, ``response``, and optionally ``physician``, ``relevancy``,
``fluency``, ``correctness``, ``rationale``, ``context``. An item's question, reference, rationale
and context must be the same on all its rows; a response's text the same on all of its
physicians' rows.

Every mistake is one error naming the file, the line and the field. An item needs at least two
responses from distinct models; ratings are whole numbers 1-5 with all three criteria or none.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from clinieval.benchmarks.automedeval.judge_set import CRITERIA, SCORE_RANGE, JudgeItem, Rating, Response
from clinieval.datasets import json_objects, once_each, require
from clinieval.errors import UserError


def load_set(path: Path) -> list[JudgeItem]:
    """A judge-evaluation set from a ``.jsonl``, ``.csv`` or ``.tsv`` file."""
    if not path.is_file():
        raise UserError(f"{path}: judge-evaluation set not found")
    suffix = path.suffix.lower()
    if suffix == ".jsonl":
        items = [_item_json(obj, where) for where, obj in json_objects(path)]
    elif suffix in (".csv", ".tsv"):
        items = _items_csv(path)
    else:
        raise UserError(f"{path}: expected a .jsonl, .csv or .tsv file")
    if not items:
        raise UserError(
            f"{path}: the file is empty: expected one item per line (JSON Lines) or a row per response"
        )
    return once_each(((item.source, item) for item in items), lambda item: item.id, "item id")


def score(value: object, where: str, name: str) -> int:
    """A rating: a whole number 1-5 (``4`` or ``"4"``; ``4.0`` too, being whole)."""
    number: float | None = None
    if isinstance(value, int | float) and not isinstance(value, bool):
        number = float(value)
    elif isinstance(value, str) and value.strip():
        try:
            number = float(value.strip())
        except ValueError:
            number = None
    low, high = SCORE_RANGE
    if number is None or not number.is_integer() or not low <= number <= high:
        raise UserError(f"{where}: field {name!r} is {value!r}; expected a whole number {low}-{high}")
    return int(number)


def _rating(raw: object, where: str) -> Rating:
    if not isinstance(raw, Mapping):
        raise UserError(f"{where}: a rating must be an object with {', '.join(CRITERIA)}")
    values = [score(raw.get(c), where, c) for c in CRITERIA]
    return Rating(*values)


def _response_json(raw: object, where: str) -> Response:
    if not isinstance(raw, dict):
        raise UserError(f"{where}: each response must be an object with model and text")
    model = require(raw, "model", where, str).strip()
    text = require(raw, "text", where, str)
    if not model:
        raise UserError(f"{where}: field 'model' is empty")
    ratings = raw.get("ratings") or {}
    if not isinstance(ratings, dict):
        raise UserError(f"{where}: field 'ratings' must map each physician to a rating")
    return Response(
        model, text, {str(k): _rating(v, f"{where}: rating by {k!r}") for k, v in ratings.items()}
    )


def _item_json(obj: dict[str, Any], where: str) -> JudgeItem:
    item_id = str(require(obj, "id", where, (str, int))).strip()
    question = require(obj, "question", where, str)
    reference = require(obj, "reference", where, str)
    raw = require(obj, "responses", where, list)
    responses = tuple(_response_json(r, f"{where}: response {i + 1}") for i, r in enumerate(raw))
    rationale = obj.get("rationale")
    if rationale is not None and not isinstance(rationale, str):
        raise UserError(f"{where}: field 'rationale' must be text")
    context = obj.get("context", "")
    if not isinstance(context, str):
        raise UserError(f"{where}: field 'context' must be text")
    return _checked(JudgeItem(item_id, question, reference, responses, rationale or None, where, context))


def _checked(item: JudgeItem) -> JudgeItem:
    if not item.id:
        raise UserError(f"{item.source}: field 'id' is empty")
    if not item.question.strip():
        raise UserError(f"{item.source}: field 'question' is empty")
    if len(item.responses) < 2:
        raise UserError(f"{item.source}: {len(item.responses)} response(s); a judge compares at least 2")
    models = item.models
    twice = sorted({m for m in models if models.count(m) > 1})
    if twice:
        raise UserError(f"{item.source}: model {twice[0]!r} answers twice; give each model once per item")
    return item


# --- CSV ------------------------------------------------------------------------------------

_REQUIRED = ("id", "question", "reference", "model", "response")


def _items_csv(path: Path) -> list[JudgeItem]:
    from clinieval.analysis.table import read_table

    table = read_table(path)
    table.require(*_REQUIRED)
    rated = [c for c in CRITERIA if c in table.columns]
    if rated and (len(rated) != len(CRITERIA) or "physician" not in table.columns):
        raise UserError(f"{path}: ratings need the columns physician, {', '.join(CRITERIA)} together")
    items: dict[str, dict[str, Any]] = {}
    for row in table.rows:
        cells = {c: table.text(row, c) for c in table.columns}
        _add_row(items, cells, row.where, bool(rated))
    return [_checked(_build(item)) for item in items.values()]


def _add_row(
    items: dict[str, dict[str, Any]], cells: Mapping[str, str | None], where: str, rated: bool
) -> None:
    item_id = (cells.get("id") or "").strip()
    model = (cells.get("model") or "").strip()
    for name, value in (("id", item_id), ("model", model)):
        if not value:
            raise UserError(f"{where}: field {name!r} is empty")
    item = items.setdefault(item_id, {"id": item_id, "where": where, "responses": {}})
    for name in ("question", "reference", "rationale", "context"):
        value = cells.get(name) or ""
        if item.setdefault(name, value) != value:
            raise UserError(
                f"{where}: field {name!r} differs from item {item_id!r}'s first row ({item['where']})"
            )
    text = cells.get("response") or ""
    response = item["responses"].setdefault(model, {"text": text, "ratings": {}, "where": where})
    if response["text"] != text:
        raise UserError(
            f"{where}: model {model!r}'s response differs from its first row ({response['where']})"
        )
    if rated and any(cells.get(c) for c in ("physician", *CRITERIA)):
        physician = (cells.get("physician") or "").strip()
        if not physician:
            raise UserError(f"{where}: field 'physician' is empty on a rated row")
        if physician in response["ratings"]:
            raise UserError(
                f"{where}: physician {physician!r} rates model {model!r} twice in item {item_id!r}"
            )
        response["ratings"][physician] = Rating(*(score(cells.get(c), where, c) for c in CRITERIA))


def _build(item: dict[str, Any]) -> JudgeItem:
    responses = tuple(Response(m, r["text"], r["ratings"]) for m, r in item["responses"].items())
    return JudgeItem(
        id=item["id"],
        question=item["question"],
        reference=item["reference"],
        responses=responses,
        rationale=item.get("rationale") or None,
        context=item.get("context") or "",
        source=item["where"],
    )
