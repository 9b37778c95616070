"""Generic review items: the JSON Lines format every benchmark converts its own files into.

One item per line::

    {"item": "q17", "prompt": "...", "context": "...", "reference": null, "author": null,
     "answers": [{"id": "a1", "source": "model name", "text": "..."}],
     "fields": {...}, "meta": {...}}

Only ``item`` and ``prompt`` are required; ``answers`` may be empty (a question or a sentence is
reviewed without model answers). ``source`` names the model and is never shown to a reviewer;
``meta`` is carried through to the export untouched. Every bad line is one UserError naming the
file, the line and the field, because these files are written by converters and by hand.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, TypedDict, cast

from clinieval.datasets import json_objects, once_each
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_jsonl

KNOWN_FIELDS = ("item", "prompt", "context", "reference", "author", "answers", "fields", "meta")
ANSWER_FIELDS = ("id", "source", "text")


class ItemContent(TypedDict):
    """What an item says besides its key and its answers: what the stored item keeps of an items
    file's line, and what a re-import must find unchanged."""

    prompt: str
    context: str
    reference: str | None
    author: str | None
    fields: dict[str, Any]
    meta: dict[str, Any]


CONTENT_FIELDS: tuple[str, ...] = tuple(ItemContent.__annotations__)


class HasContent(Protocol):
    """An item in either form: :class:`ReviewItem` (an items file's line) or the stored ``db.Item``."""

    @property
    def prompt(self) -> str: ...
    @property
    def context(self) -> str: ...
    @property
    def reference(self) -> str | None: ...
    @property
    def author(self) -> str | None: ...
    @property
    def fields(self) -> dict[str, Any]: ...
    @property
    def meta(self) -> dict[str, Any]: ...


def item_content(item: HasContent) -> ItemContent:
    """``item``'s content, to build the item's other form from (``ReviewItem(**item_content(row), ...)``)."""
    return cast(ItemContent, {name: getattr(item, name) for name in CONTENT_FIELDS})


@dataclass(frozen=True, slots=True)
class AnswerIn:
    """One model answer of an item: its key within the item, the model, the text."""

    id: str
    source: str
    text: str


@dataclass(frozen=True, slots=True)
class ReviewItem:
    """One item as read from (or about to be written to) an items file."""

    item: str
    prompt: str
    context: str = ""
    reference: str | None = None
    author: str | None = None
    answers: tuple[AnswerIn, ...] = ()
    fields: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)

    @property
    def answer_keys(self) -> list[str]:
        return [a.id for a in self.answers]

    def to_json(self) -> dict[str, Any]:
        """The item as one line of an items file (the inverse of :func:`parse_item`)."""
        return {
            "item": self.item,
            "prompt": self.prompt,
            "context": self.context,
            "reference": self.reference,
            "author": self.author,
            "answers": [{"id": a.id, "source": a.source, "text": a.text} for a in self.answers],
            "fields": self.fields,
            "meta": self.meta,
        }


def _text(obj: Mapping[str, Any], name: str, where: str, *, optional: bool = False) -> str | None:
    value = obj.get(name)
    if value is None and optional:
        return None
    if name not in obj:
        raise UserError(f"{where}: missing field {name!r}")
    if not isinstance(value, str):
        raise UserError(f"{where}: field {name!r} is {type(value).__name__}, not text")
    return value


def _key(obj: Mapping[str, Any], name: str, where: str) -> str:
    if name not in obj:
        raise UserError(f"{where}: missing field {name!r}")
    value = obj[name]
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)  # ids are often numbers in converters' output; they are keys either way
    if not isinstance(value, str) or not value.strip():
        raise UserError(f"{where}: field {name!r} must be a non-empty text key, got {value!r}")
    if value != value.strip():
        raise UserError(f"{where}: field {name!r} is {value!r}: remove the spaces around it")
    return value


def _answers(value: object, where: str) -> tuple[AnswerIn, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise UserError(f"{where}: field 'answers' should be a list, got {type(value).__name__}")
    out: list[AnswerIn] = []
    seen: set[str] = set()
    for i, raw in enumerate(value):
        at = f"{where}: answers[{i}]"
        if not isinstance(raw, dict):
            raise UserError(f"{at} should be an object with id, source and text")
        extra = sorted(set(raw) - set(ANSWER_FIELDS))
        if extra:
            raise UserError(f"{at}: unknown field {extra[0]!r}; an answer has {', '.join(ANSWER_FIELDS)}")
        key = _key(raw, "id", at)
        if key in seen:
            raise UserError(f"{at}: answer id {key!r} appears twice in this item")
        seen.add(key)
        source = _text(raw, "source", at)
        text = _text(raw, "text", at)
        assert source is not None and text is not None
        if not source.strip():
            raise UserError(f"{at}: field 'source' is empty; name the model that wrote the answer")
        out.append(AnswerIn(key, source, text))
    return tuple(out)


def _object(obj: Mapping[str, Any], name: str, where: str) -> dict[str, Any]:
    value = obj.get(name)
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise UserError(f"{where}: field {name!r} should be an object, got {type(value).__name__}")
    return value


def parse_item(obj: Mapping[str, Any], where: str) -> ReviewItem:
    """One item from a decoded JSON object; ``where`` (``file:line``) starts every error."""
    extra = sorted(set(obj) - set(KNOWN_FIELDS))
    if extra:
        raise UserError(f"{where}: unknown field {extra[0]!r}; put extra data under 'meta'")
    prompt = _text(obj, "prompt", where)
    assert prompt is not None
    return ReviewItem(
        item=_key(obj, "item", where),
        prompt=prompt,
        context=_text(obj, "context", where, optional=True) or "",
        reference=_text(obj, "reference", where, optional=True),
        author=_author(obj, where),
        answers=_answers(obj.get("answers"), where),
        fields=_object(obj, "fields", where),
        meta=_object(obj, "meta", where),
    )


def _author(obj: Mapping[str, Any], where: str) -> str | None:
    author = _text(obj, "author", where, optional=True)
    if author is None or not author.strip():
        return None
    return author.strip()


def read_items(path: Path) -> list[ReviewItem]:
    """Every item of a JSON Lines file, refusing a repeated item key (naming both lines)."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    items = once_each(
        ((where, parse_item(obj, where)) for where, obj in json_objects(path)), lambda i: i.item, "item"
    )
    if not items:
        raise UserError(f"{path}: no items")
    return items


def write_items(path: Path, items: Iterable[ReviewItem]) -> None:
    """Write an items file atomically (what a benchmark's converter calls)."""
    atomic_write_jsonl(path, (i.to_json() for i in items))


def excerpt(text: str, limit: int) -> str:
    """``text`` on one line (runs of white space as one space), cut to about ``limit`` characters
    at a word break with "…" when longer: what a list shows for an item's question or an answer."""
    flat = " ".join(text.split())
    if len(flat) <= limit:
        return flat
    cut = flat.rfind(" ", 0, limit)
    if cut < limit * 2 // 3:
        cut = limit
    return flat[:cut].rstrip() + "…"


def difference(a: ReviewItem, b: ReviewItem) -> str | None:
    """The first field in which two versions of one item differ, or None when they are the same;
    re-importing a study uses it to refuse a changed item by naming what changed."""
    for name in CONTENT_FIELDS:
        if getattr(a, name) != getattr(b, name):
            return name
    return _answers_difference(a.answers, b.answers)


def _answers_difference(a: Sequence[AnswerIn], b: Sequence[AnswerIn]) -> str | None:
    if [x.id for x in a] != [x.id for x in b]:
        return "answers (their ids)"
    for x, y in zip(a, b, strict=True):
        if x != y:
            return f"answer {x.id!r} ({'source' if x.source != y.source else 'text'})"
    return None
