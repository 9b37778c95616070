"""``datasets.once_each``: the one way readers refuse an id given twice."""

from __future__ import annotations

import pytest

from clinieval.datasets import once_each
from clinieval.errors import UserError


def test_keeps_order_and_names_both_places_of_a_repeat() -> None:
    rows = [("f:1", {"id": "a"}), ("f:2", {"id": "b"})]
    assert once_each(rows, lambda r: r["id"], "item") == [{"id": "a"}, {"id": "b"}]
    with pytest.raises(UserError, match=r"^f:3: item id 'a' repeats f:1$"):
        once_each([*rows, ("f:3", {"id": "a"})], lambda r: r["id"], "item id")


def test_stops_at_the_first_repeat_without_reading_further() -> None:
    read: list[str] = []

    def rows():  # type: ignore[no-untyped-def]
        for where, key in (("f:1", "x"), ("f:2", "x"), ("f:3", "never")):
            read.append(where)
            yield where, key

    with pytest.raises(UserError, match="f:2"):
        once_each(rows(), str, "id")
    assert read == ["f:1", "f:2"]


def test_an_empty_input_is_empty() -> None:
    assert once_each([], str, "id") == []
