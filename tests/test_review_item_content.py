"""``review.items.item_content``: the one list of what an item says besides its key and answers,
which the stored item copies from an items file's line and a re-import compares. A field added to
:class:`ReviewItem` but not to :class:`ItemContent` would be silently dropped on import."""

from __future__ import annotations

import dataclasses
from typing import Any

from clinieval.review.db import Item
from clinieval.review.items import CONTENT_FIELDS, AnswerIn, ReviewItem, difference, item_content


def _item() -> ReviewItem:
    return ReviewItem(
        item="q1",
        prompt="P",
        context="C",
        reference="R",
        author="A",
        answers=(AnswerIn("a1", "m", "t"),),
        fields={"f": 1},
        meta={"m": 2},
    )


def test_content_is_every_field_but_key_and_answers() -> None:
    names = [f.name for f in dataclasses.fields(ReviewItem)]
    assert tuple(n for n in names if n not in ("item", "answers")) == CONTENT_FIELDS


def test_content_round_trips_through_the_stored_item() -> None:
    it = _item()
    content = item_content(it)
    assert content == {
        "prompt": "P",
        "context": "C",
        "reference": "R",
        "author": "A",
        "fields": {"f": 1},
        "meta": {"m": 2},
    }
    row = Item(study_id=1, key=it.item, **content)
    assert item_content(row) == content
    back = ReviewItem(item=row.key, answers=it.answers, **item_content(row))
    assert back == it and difference(back, it) is None


def test_difference_names_each_content_field() -> None:
    it = _item()
    for name in CONTENT_FIELDS:
        new: dict[str, Any] = {name: {"x": 0} if name in ("fields", "meta") else "other"}
        changed = dataclasses.replace(it, **new)
        assert difference(it, changed) == name
