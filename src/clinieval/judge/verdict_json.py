"""JSON verdicts: the reply's final verdict object, every required key once.

Why a module of its own: reading a JSON (or Python-literal) object out of free text (balanced
braces past quoted strings, keys given twice, a format echoed with ``<true|false>``, an object
nested in another) is a concern apart from the line-based readers of
:mod:`clinieval.judge.verdict`, whose principle it follows: only the final complete object is the
verdict (MedAlign's rubric and any JSON rubric read it here).
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from clinieval.judge.verdict import (
    VerdictParseError,
    check_not_revised_later,
    check_revision_stated,
    refusal_or,
)

__all__ = ["as_mapping", "final_json_object", "json_field"]


def _matching_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``start``; braces inside quoted strings are skipped."""
    depth = 0
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _balanced_objects(text: str) -> Iterator[tuple[int, int]]:
    """Every balanced ``{...}`` span (start, end) in reading order (enclosing before enclosed)."""
    start = text.find("{")
    while start != -1:
        end = _matching_brace(text, start)
        if end is not None:
            yield start, end + 1
        start = text.find("{", start + 1)


def _norm_key(key: str) -> str:
    return key.strip().lower()


class _Object(dict[str, Any]):
    """A parsed JSON object that remembers the keys it was given twice with different values."""

    twice: tuple[str, ...] = ()


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    obj = _Object()
    seen: dict[str, Any] = {}
    twice: list[str] = []
    for key, value in pairs:
        norm = _norm_key(key) if isinstance(key, str) else key
        if norm in seen and seen[norm] != value:
            twice.append(str(key))
        seen[norm] = value
        obj[key] = value
    obj.twice = tuple(twice)
    return obj


def _python_twice(span: str) -> tuple[str, ...]:
    """Keys of a Python-style dict literal given twice with different values (top level)."""
    try:
        node = ast.parse(span, mode="eval").body
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return ()
    if not isinstance(node, ast.Dict):
        return ()
    seen: dict[str, str] = {}
    twice = []
    for key, value in zip(node.keys, node.values, strict=True):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            norm, dumped = _norm_key(key.value), ast.dump(value)
            if seen.setdefault(norm, dumped) != dumped:
                twice.append(key.value)
    return tuple(twice)


def as_mapping(span: str) -> _Object | None:
    """A span read as a JSON object, or as a Python dict literal (single quotes, True/False)."""
    try:
        value = json.loads(span, strict=False, object_pairs_hook=_pairs)  # strict=False: raw newlines
    except (ValueError, RecursionError):  # not JSON, an integer over 4,300 digits, or nested too deep
        if len(span) > 20_000:
            return None
        try:
            literal = ast.literal_eval(span)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):  # TypeError: {[1]: 2}
            return None
        if not isinstance(literal, dict):
            return None
        value = _Object(literal)
        value.twice = _python_twice(span)
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    return value if isinstance(value, _Object) else _Object(value)


def final_json_object(text: str, required: Sequence[str] = ()) -> dict[str, Any]:
    """The reply's final verdict object: the last object (not one nested in another) that holds
    every ``required`` key (any case), each once.

    An echo of the requested format (``"C1": <true|false>``) is not JSON, so it is never read; a
    verdict the judge corrected with a later complete object is not read either, while a later
    fragment (``{"score": 5}`` quoted in prose) is no verdict and does not displace it. A key of
    the verdict given twice with different values is unparsed (a JSON reader would silently keep
    the last). Under the reading policy (docs/judge.md) an earlier object with other values needs
    a revision stated between the two ("Wait, I was wrong. Corrected: {...}"), else ``conflict``;
    a revision stated after the last object that cannot be read is ``conflict`` too.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output", "empty")
    wanted = {_norm_key(k) for k in required}
    found_any = False
    candidates: list[tuple[int, int, _Object]] = []
    for start, end in _balanced_objects(text):
        obj = as_mapping(text[start:end])
        if obj is None:
            continue
        found_any = True
        if wanted <= {_norm_key(k) for k in obj}:
            candidates.append((start, end, obj))
    if not found_any:
        raise refusal_or(text, VerdictParseError("no JSON object in the output", "no_verdict"))
    if not candidates:
        raise VerdictParseError(f"no JSON object with all of {', '.join(required)}", "missing")
    outer = [
        c for c in candidates if not any(o[0] <= c[0] and c[1] <= o[1] and o is not c for o in candidates)
    ]
    start, end, obj = outer[-1]
    _unexplained_change(text, outer, wanted)
    check_not_revised_later(text[end:], r"(?i)[{\d]|\b(?:true|false|yes|no)\b")
    twice = [k for k in obj.twice if not wanted or _norm_key(k) in wanted]
    if twice:
        raise VerdictParseError(f"the verdict gives {twice[0]!r} twice with different values", "conflict")
    return dict(obj)


def _unexplained_change(text: str, outer: list[tuple[int, int, _Object]], wanted: set[str]) -> None:
    """An earlier complete verdict object with other values must be revised in words between the
    two ("Wait, I was wrong. Corrected: {...}"); two objects back to back are a ``conflict``."""
    start, _, last = outer[-1]

    def values(obj: Mapping[str, Any]) -> dict[str, Any]:
        return {
            _norm_key(k): v for k, v in obj.items() if _norm_key(k) in wanted and _norm_key(k) != "rationale"
        }

    earlier = ((values(obj), end) for _, end, obj in reversed(outer[:-1]))
    check_revision_stated(text, earlier, values(last), start, "verdict objects")


def json_field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` matched case-insensitively; VerdictParseError when absent."""
    wanted = _norm_key(name)
    for key, value in obj.items():
        if _norm_key(key) == wanted:
            return value
    raise VerdictParseError(f"missing field {name!r}", "missing")
