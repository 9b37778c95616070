"""Reading and filling the review forms: the helpers every kind's form mapping is written with.

Posted field names use the answer's *letter* (``rank-B``), never its key or its model; a kind
maps letters back to keys with the assignment's stored order (:class:`FormView`). Parsing is
deliberately lenient: it turns the form into a payload of the right shape and leaves every
judgement (a rank out of range, a missing reason) to the kind's ``validate``, the one place the
rules live. A value that does not parse (``rank-A=abc``) is passed on as the text it was, so the
kind's message names it and the form shows it again as typed.

Field names (stable; browser tests use them):

* all kinds: ``csrf_token``, ``version``, ``action`` (``save`` or ``submit``)
* rank: ``rank-A``, ``correct-A`` (``correct``/``incorrect``), ``reasons-A`` (``C1``..``C3``,
  repeated), ``rationale-A``
* rate: ``score-A-<scale>`` (``1``..``5``)
* question: ``decision`` (``keep``/``revise``/``discard``), ``field-<name>`` for a text field,
  ``field-<name>-<index or key>`` inside a list or object, ``comment``
* sentence: ``label-<set>`` (one of the set's values), ``rewrite``
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

FormData = Mapping[str, Sequence[str]]
"""The posted form as name → every value sent under that name (checkboxes repeat a name)."""


class Lettered(Protocol):
    """An answer as the page shows it: its letter, and its key (server-side only)."""

    @property
    def letter(self) -> str: ...

    @property
    def key(self) -> str: ...


class FormView(Protocol):
    """What a form mapping needs of an assignment (:class:`clinieval.review.reviewing.AssignmentView`
    has it): its answers in the order shown, the study's config, the item's fields."""

    @property
    def answers(self) -> Sequence[Lettered]: ...

    @property
    def config(self) -> dict[str, Any]: ...

    @property
    def fields(self) -> dict[str, Any]: ...


def one(form: FormData, name: str) -> str | None:
    values = form.get(name)
    return text(values[-1]) if values else None


def text(value: str) -> str:
    """Browsers send a textarea's line breaks as CRLF; the stored text uses LF."""
    return value.replace("\r\n", "\n").replace("\r", "\n")


def whole(value: str | None) -> int | str | None:
    """A number field: an int when it is one, None when blank, else the text as typed."""
    if value is None or not value.strip():
        return None
    try:
        return int(value.strip())
    except ValueError:
        return value


def shown_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def config_list(config: Mapping[str, Any], key: str) -> list[Any]:
    """A list from a study's config (its scales), empty when it has none."""
    found = config.get(key)
    return list(found) if isinstance(found, list) else []


def config_map(config: Mapping[str, Any], key: str) -> dict[str, Any]:
    """An object from a study's config (its label sets), empty when it has none."""
    found = config.get(key)
    return dict(found) if isinstance(found, dict) else {}
