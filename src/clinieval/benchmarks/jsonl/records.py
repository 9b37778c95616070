"""One line of a user's file read through a :class:`Layout`: every problem of the line at once.

A user fixing a file by hand should see everything wrong with a line (and with the next lines) in
one go, not one missing field per attempt; so each reader here returns what it read and the
problems it found, and nothing raises.
"""

from __future__ import annotations

import string
from dataclasses import dataclass, field
from typing import Any

from clinieval.benchmarks.jsonl.shapes import EXPECTED, Layout

SCALAR = (str, int, float)


@dataclass(slots=True)
class Draft:
    """A line read: the sample's parts, and its answer (an option's index, a number still to be
    counted from 0 or 1 once the whole file is seen, or a free text when there are no choices)."""

    line: int
    id: str
    question: str
    context: str = ""
    choices: tuple[str, ...] = ()
    index: int | None = None
    number: int | None = None
    free_target: str | None = None
    """The answer as written (kept as the target where no option is resolved, or the file is
    clinieval's own list of choices, whose targets were always kept as written)."""
    listed: bool = False
    targets: tuple[str, ...] = ()
    metadata: dict[str, Any] = field(default_factory=dict)


def read_record(item: dict[str, Any], line: int, layout: Layout) -> tuple[Draft, list[str]]:
    """The line's draft and its problems (empty when it is a question)."""
    problems: list[str] = []
    problems += _missing(item, layout)
    question = _text(item, layout.question, problems, required=True)
    draft = Draft(
        line=line,
        id=_id(item, line, layout, problems),
        question=question,
        context=_text(item, layout.context, problems, required=False),
        choices=_choices(item, layout, problems),
        targets=_targets(item, layout, problems),
        metadata=_metadata(item, layout),
    )
    draft.listed = len(layout.choices) == 1 and isinstance(item.get(layout.choices[0]), list)
    _answer(item, layout, draft, problems)
    return draft, problems


def _missing(item: dict[str, Any], layout: Layout) -> list[str]:
    """One problem naming every required column the line lacks, with what each should hold."""
    absent = [
        f"{column!r} ({_expected(layout, name)})"
        for name in sorted(layout.required)
        for column in layout.columns(name)
        if column not in item
    ]
    return [f"missing field{'s' if len(absent) > 1 else ''} {', '.join(absent)}"] if absent else []


def _expected(layout: Layout, name: str) -> str:
    """What a column of loader field ``name`` should hold (one option's text, where each option
    has its own column)."""
    if name == "choices" and len(layout.choices) > 1:
        return "an option's text"
    return EXPECTED[name]


def _text(item: dict[str, Any], column: str | None, problems: list[str], required: bool) -> str:
    if column is None or column not in item:
        return ""
    value = item[column]
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        problems.append(f"{column!r} should be text, got {_kind(value)}")
        return ""
    if required and not value.strip():
        problems.append(f"{column!r} is empty")
    return value


def _id(item: dict[str, Any], line: int, layout: Layout, problems: list[str]) -> str:
    if layout.id is None:
        return str(line)
    value = item.get(layout.id)
    if layout.id not in item:
        return ""
    if isinstance(value, bool) or not isinstance(value, (str, int)) or str(value) == "":
        problems.append(f"{layout.id!r} should be {EXPECTED['id']}, got {_kind(value)}")
        return ""
    return str(value)


def _choices(item: dict[str, Any], layout: Layout, problems: list[str]) -> tuple[str, ...]:
    if len(layout.choices) == 1:
        return _one_column_choices(item, layout.choices[0], problems)
    texts: list[str | None] = []
    for column in layout.choices:
        value = item.get(column)
        if isinstance(value, bool) or (value is not None and not isinstance(value, SCALAR)):
            problems.append(f"{column!r} should be an option's text, got {_kind(value)}")
            value = "?"
        texts.append(None if value is None or str(value).strip() == "" else str(value))
    while texts and texts[-1] is None:  # a spreadsheet's 4-option rows beside 5-option ones
        texts.pop()
    gaps = [c for c, t in zip(layout.choices, texts, strict=False) if t is None and c in item]
    if gaps:
        problems.append(f"option {', '.join(repr(c) for c in gaps)} empty while a later option is not")
    return tuple(t or "" for t in texts)


def _one_column_choices(item: dict[str, Any], column: str, problems: list[str]) -> tuple[str, ...]:
    if column not in item:
        return ()
    value = item[column]
    if isinstance(value, dict):
        return _lettered(value, column, problems)
    if isinstance(value, list):
        bad = [i for i, v in enumerate(value) if isinstance(v, bool) or not isinstance(v, SCALAR)]
        if bad:
            kind = _kind(value[bad[0]])
            problems.append(f"{column!r} item {bad[0] + 1} should be an option's text, got {kind}")
        empty = [i for i, v in enumerate(value) if isinstance(v, str) and not v.strip()]
        if empty:
            problems.append(f"{column!r} option {string.ascii_uppercase[empty[0] % 26]} is empty")
        return tuple(str(v) for v in value)
    problems.append(f"{column!r} should be {EXPECTED['choices']}, got {_kind(value)}")
    return ()


def _lettered(value: dict[str, Any], column: str, problems: list[str]) -> tuple[str, ...]:
    """An object of letter -> text, in letter order; its keys must be A, B, C, ... (any case)."""
    keys = {str(k).strip().upper(): v for k, v in value.items()}
    expected = list(string.ascii_uppercase[: len(keys)])
    if sorted(keys) != expected:
        got = ", ".join(repr(k) for k in value)
        want = ", ".join(expected) or "A, B, ..."
        problems.append(f"{column!r} keys should be the letters {want}, got {got}")
        return ()
    texts: list[str] = []
    for letter in expected:
        text = keys[letter]
        if isinstance(text, bool) or not isinstance(text, SCALAR) or not str(text).strip():
            problems.append(f"{column!r} option {letter} should be its text, got {_kind(text)}")
        texts.append(str(text))
    return tuple(texts)


def _targets(item: dict[str, Any], layout: Layout, problems: list[str]) -> tuple[str, ...]:
    if layout.targets is None or item.get(layout.targets) is None:
        return ()
    value = item[layout.targets]
    if not isinstance(value, list) or any(isinstance(v, (dict, list)) for v in value):
        problems.append(f"{layout.targets!r} should be {EXPECTED['targets']}, got {_kind(value)}")
        return ()
    return tuple(str(v) for v in value)


def _metadata(item: dict[str, Any], layout: Layout) -> dict[str, Any]:
    """The metadata columns: an object is merged (clinieval's own ``metadata``), any other value
    kept under its column's name."""
    kept: dict[str, Any] = {}
    for column in layout.metadata:
        if column not in item:
            continue
        value = item[column]
        if isinstance(value, dict):
            kept.update(value)
        else:
            kept[column] = value
    return kept


def _answer(item: dict[str, Any], layout: Layout, draft: Draft, problems: list[str]) -> None:
    """The line's answer into ``draft``: an option's index, a number to count later, or (without
    choices) the text as written. An answer that names no option is a problem."""
    column = layout.target
    if column is None or column not in item or item[column] in layout.unanswered:
        return
    value = item[column]
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, SCALAR):
        problems.append(f"{column!r} should be {EXPECTED['target']}, got {_kind(value)}")
        return
    draft.free_target = str(value)
    if not draft.choices:
        return
    index, number = _option_index(value, draft.choices)
    if index is None and number is None:
        letters = f"A-{string.ascii_uppercase[min(len(draft.choices), 26) - 1]}"
        what = "a letter outside the options" if _is_letter(value) else "neither a letter, number nor option"
        shown = repr(value) if len(str(value)) <= 40 else "a text"
        problems.append(f"{column!r} is {shown}, {what} ({letters})")
        return
    draft.index, draft.number = index, number
    if index is not None:
        _check_answer_text(item, layout, draft.choices[index], problems)


def _option_index(value: str | int | float, choices: tuple[str, ...]) -> tuple[int | None, int | None]:
    """(index, None) for a letter or an option's text; (None, number) for a whole number that is
    no option's text; (None, None) for anything else."""
    text = str(value).strip()
    folded = [c.strip().casefold() for c in choices]
    if _is_letter(value) and text.casefold() not in folded:
        index = string.ascii_uppercase.index(text.upper())
        return (index, None) if index < len(choices) else (None, None)
    if text.casefold() in folded:
        return folded.index(text.casefold()), None
    if isinstance(value, int) or text.lstrip("-").isdigit():
        return None, int(text)
    return None, None


def _is_letter(value: object) -> bool:
    text = value.strip().upper() if isinstance(value, str) else ""
    return len(text) == 1 and text in string.ascii_uppercase


def _check_answer_text(item: dict[str, Any], layout: Layout, chosen: str, problems: list[str]) -> None:
    """MedQA's ``answer`` must be the text of the option its ``answer_idx`` names."""
    column = layout.answer_text
    if column is None or column not in item:
        return
    given = item[column]
    if not isinstance(given, str) or given.strip().casefold() != chosen.strip().casefold():
        problems.append(f"{column!r} is {given!r} but {layout.target!r} names option {chosen!r}")


def _kind(value: object) -> str:
    """A JSON value's kind as a user's file shows it."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, str):
        return "text" if value.strip() else "empty text"  # never a user's text: it may be a patient's
    if isinstance(value, (int, float)):
        return f"number {value}"
    return "a list" if isinstance(value, list) else "an object"
