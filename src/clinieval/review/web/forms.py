"""Between the HTML form and a kind's payload, both ways.

Posted field names use the answer's *letter* (``rank-B``), never its key or its model; this
module maps letters back to keys with the assignment's stored order. Parsing is deliberately
lenient: it turns the form into a payload of the right shape and leaves every judgement (a rank
out of range, a missing reason) to :mod:`clinieval.review.study_kinds`, the one place the rules live.
A value that does not parse (``rank-A=abc``) is passed on as the text it was, so the kind's
message names it and the form shows it again as typed.

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
from dataclasses import dataclass
from typing import Any

from clinieval.review.web.data import AssignmentView

FormData = Mapping[str, Sequence[str]]
"""The posted form as name → every value sent under that name (checkboxes repeat a name)."""


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


# --- form → payload -----------------------------------------------------------------------------


def payload_from_form(view: AssignmentView, form: FormData) -> dict[str, Any]:
    parse = {"rank": _rank, "rate": _rate, "question": _question, "sentence": _sentence}[view.kind]
    return parse(view, form)


def _rank(view: AssignmentView, form: FormData) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for a in view.answers:
        verdict = one(form, f"correct-{a.letter}")
        answers[a.key] = {
            "rank": whole(one(form, f"rank-{a.letter}")),
            "correct": {"correct": True, "incorrect": False}.get(verdict or "", verdict or None),
            "reasons": [text(r) for r in form.get(f"reasons-{a.letter}", [])],
            "rationale": one(form, f"rationale-{a.letter}") or "",
        }
    return {"answers": answers}


def scales(view: AssignmentView) -> list[dict[str, str]]:
    found = view.config.get("scales")
    return list(found) if isinstance(found, list) else []


def _rate(view: AssignmentView, form: FormData) -> dict[str, Any]:
    answers: dict[str, Any] = {}
    for a in view.answers:
        scores = {s["name"]: whole(one(form, f"score-{a.letter}-{s['name']}")) for s in scales(view)}
        if any(v is not None for v in scores.values()):
            answers[a.key] = scores
    return {"answers": answers}


def _question(view: AssignmentView, form: FormData) -> dict[str, Any]:
    return {
        "decision": one(form, "decision") or None,
        "fields": {name: _edited(value, f"field-{name}", form) for name, value in view.fields.items()},
        "comment": one(form, "comment") or "",
    }


def _edited(original: Any, name: str, form: FormData) -> Any:
    """The posted version of one item field, walking the original's structure (so the names are
    never parsed back, and a field the form did not show keeps its value)."""
    if isinstance(original, dict):
        return {k: _edited(v, f"{name}-{k}", form) for k, v in original.items()}
    if isinstance(original, list):
        return [_edited(v, f"{name}-{i}", form) for i, v in enumerate(original)]
    posted = one(form, name)
    if posted is None:
        return original
    if isinstance(original, str):
        return original if posted == text(original) else posted
    if isinstance(original, bool):
        return {"true": True, "false": False}.get(posted, posted)
    if isinstance(original, int):
        return whole(posted)
    if isinstance(original, float):
        try:
            return float(posted)
        except ValueError:
            return posted
    return original


def labels(view: AssignmentView) -> dict[str, list[str]]:
    found = view.config.get("labels")
    return dict(found) if isinstance(found, dict) else {}


def _sentence(view: AssignmentView, form: FormData) -> dict[str, Any]:
    return {
        "labels": {name: one(form, f"label-{name}") or None for name in labels(view)},
        "rewrite": one(form, "rewrite") or "",
    }


# --- payload → what the form shows ------------------------------------------------------------------


@dataclass(frozen=True)
class FieldInput:
    """One editable leaf of a question item's fields: its form name, a label, and its values."""

    name: str
    label: str
    original: str
    value: str
    multiline: bool


def shown_value(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def field_inputs(original: Mapping[str, Any], current: Mapping[str, Any] | None) -> list[FieldInput]:
    out: list[FieldInput] = []
    for name, value in original.items():
        now = current.get(name, value) if isinstance(current, Mapping) else value
        _leaves(value, now, f"field-{name}", name, out)
    return out


def _leaves(original: Any, current: Any, name: str, label: str, out: list[FieldInput]) -> None:
    if isinstance(original, dict):
        for k, v in original.items():
            now = current.get(k, v) if isinstance(current, dict) else v
            _leaves(v, now, f"{name}-{k}", f"{label} {k}", out)
    elif isinstance(original, list):
        for i, v in enumerate(original):
            now = current[i] if isinstance(current, list) and i < len(current) else v
            _leaves(v, now, f"{name}-{i}", f"{label} {i + 1}", out)
    elif original is not None:
        shown = shown_value(current)
        multiline = isinstance(original, str) and (len(original) > 80 or "\n" in original)
        out.append(FieldInput(name, label, shown_value(original), shown, multiline))


def form_state(view: AssignmentView, payload: Mapping[str, Any] | None) -> dict[str, Any]:
    """What each input shows, keyed the way the template reads it (by letter for answers).

    ``payload`` is the stored response, or the one rebuilt from a refused form (then it may hold
    values no kind accepts, shown as typed so the reviewer can fix them)."""
    payload = payload if isinstance(payload, Mapping) else {}
    if view.kind == "question":
        return {
            "decision": payload.get("decision"),
            "fields": field_inputs(view.fields, payload.get("fields")),
            "comment": shown_value(payload.get("comment")),
        }
    if view.kind == "sentence":
        given = payload.get("labels")
        chosen = given if isinstance(given, Mapping) else {}
        return {
            "labels": {n: chosen.get(n) for n in labels(view)},
            "rewrite": shown_value(payload.get("rewrite")),
        }
    answers = payload.get("answers")
    by_key = answers if isinstance(answers, Mapping) else {}
    return {"answers": {a.letter: _answer_state(view.kind, by_key.get(a.key)) for a in view.answers}}


def _answer_state(kind: str, raw: object) -> dict[str, Any]:
    obj = raw if isinstance(raw, Mapping) else {}
    if kind == "rate":
        return {name: shown_value(obj.get(name)) for name in obj}
    reasons = obj.get("reasons")
    return {
        "rank": shown_value(obj.get("rank")),
        "correct": obj.get("correct") if isinstance(obj.get("correct"), bool) else None,
        "reasons": [r for r in reasons if isinstance(r, str)] if isinstance(reasons, list) else [],
        "rationale": shown_value(obj.get("rationale")),
    }


# --- the saved values, for the stale-save page ---------------------------------------------------


def summary(view: AssignmentView, payload: Mapping[str, Any] | None) -> list[tuple[str, str]]:
    """The stored response as (what, value) lines: what someone else saved, shown read-only."""
    if not payload:
        return [("Response", "nothing saved")]
    state = form_state(view, payload)
    if view.kind == "question":
        lines = [("Decision", shown_value(state["decision"]) or "—")]
        lines += [(f.label, f.value) for f in state["fields"] if f.value != f.original]
        return [*lines, ("Comment", state["comment"] or "—")]
    if view.kind == "sentence":
        lines = [(name, shown_value(v) or "—") for name, v in state["labels"].items()]
        return [*lines, ("Rewrite", state["rewrite"] or "—")]
    out: list[tuple[str, str]] = []
    for a in view.answers:
        s = state["answers"][a.letter]
        if view.kind == "rate":
            out.append((f"Answer {a.letter}", ", ".join(f"{k} {v}" for k, v in s.items() if v) or "—"))
            continue
        verdict = {True: "correct", False: "incorrect", None: "not marked"}[s["correct"]]
        parts = [f"rank {s['rank'] or '—'}", verdict, *s["reasons"]]
        if s["rationale"]:
            parts.append(f"rationale: {s['rationale']}")
        out.append((f"Answer {a.letter}", " · ".join(parts)))
    return out
