"""The ``question`` kind (EHRNoteQA's build review): keep, revise or discard a generated item,
editing the item's ``fields`` (question, options, answer) when revising. Its export is
``questions.csv`` (the decision and the fields as they now stand); its agreement is alpha and
kappa on the decision. The form shows one input per leaf of the fields (a list's entries, an
object's values), named after the path to it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from clinieval.errors import UserError
from clinieval.review.study_kinds.base import (
    AgreementStats,
    Check,
    ItemShape,
    Kind,
    Measure,
    Row,
    Table,
    as_object,
    cell,
    checked_text,
    column_name,
    only,
)
from clinieval.review.study_kinds.form_fields import FormData, FormView, one, shown_value, text, whole

DECISIONS: Final = ("keep", "revise", "discard")


@dataclass(frozen=True)
class FieldInput:
    """One editable leaf of a question item's fields: its form name, a label, and its values."""

    name: str
    label: str
    original: str
    value: str
    multiline: bool


class QuestionKind(Kind):
    name = "question"
    description = "keep, revise or discard a generated item, editing its fields (EHRNoteQA build review)"
    label = "Review a generated question"
    config_keys = ()
    table = "questions.csv"

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        return {}

    def preview(self, prompt: str, fields: Mapping[str, Any]) -> str:
        """The generated question itself, when the item has one as text (every item of a build
        review shares one prompt, "Review this generated question")."""
        question = fields.get("question")
        return question if isinstance(question, str) and question.strip() else prompt

    def check_item(self, item: ItemShape, where: str, config: Mapping[str, Any]) -> None:
        for name in item.fields:
            column_name(name, f"{where}: field")

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        return (Measure("decision", "Decision", ("decision",), per_answer=False, ordered=False),)

    def agreement(self, config: Mapping[str, Any], stats: AgreementStats) -> dict[str, Any]:
        return {m.key: stats.nominal(m) for m in self.measures(config)}

    def _rebuild(self, payload: object, check: Check) -> dict[str, Any]:
        obj = as_object(payload, "the response")
        only(obj, ("decision", "fields", "comment"), "the response")
        decision = obj.get("decision")
        if decision is None and check.partial:
            pass
        elif decision not in DECISIONS:
            raise UserError(f"choose a decision: {', '.join(DECISIONS)} (got {decision!r})")
        item = check.item
        edits = as_object(obj.get("fields", {}), "fields")
        unknown = [k for k in edits if k not in item.fields]
        if unknown:
            raise UserError(f"field {unknown[0]!r} is not one of this item's fields")
        fields = dict(item.fields)
        for key, value in edits.items():
            _same_shape(item.fields[key], value, f"field {key!r}")
            fields[key] = value
        changed = fields != item.fields
        if not check.partial and decision == "keep" and changed:
            raise UserError(
                "the fields were edited but the decision is keep: choose revise or undo the edits"
            )
        if not check.partial and decision == "revise" and not changed:
            raise UserError("the decision is revise but no field was changed")
        comment = checked_text(obj.get("comment"), "the comment")
        return {"decision": decision, "fields": fields, "comment": comment}

    def export_table(self, rows: Sequence[Row], config: Mapping[str, Any]) -> Table:
        names = list(dict.fromkeys(k for r in rows for k in r["payload"]["fields"]))
        out = [
            {
                "item": r["item"],
                "reviewer": r["reviewer"],
                "decision": r["payload"]["decision"],
                **{k: cell(r["payload"]["fields"].get(k)) for k in names},
                "comment": r["payload"]["comment"],
            }
            for r in rows
        ]
        return ["item", "reviewer", "decision", *names, "comment"], out

    def parse_form(self, view: FormView, form: FormData) -> dict[str, Any]:
        return {
            "decision": one(form, "decision") or None,
            "fields": {name: _edited(value, f"field-{name}", form) for name, value in view.fields.items()},
            "comment": one(form, "comment") or "",
        }

    def _form_state(self, view: FormView, payload: Mapping[str, Any]) -> dict[str, Any]:
        return {
            "decision": payload.get("decision"),
            "fields": field_inputs(view.fields, payload.get("fields")),
            "comment": shown_value(payload.get("comment")),
        }

    def _summary_lines(self, view: FormView, state: Mapping[str, Any]) -> list[tuple[str, str]]:
        lines = [("Decision", shown_value(state["decision"]) or "—")]
        lines += [(f.label, f.value) for f in state["fields"] if f.value != f.original]
        return [*lines, ("Comment", state["comment"] or "—")]


def _same_shape(original: object, edited: object, what: str) -> None:
    """An edited field must keep the original's structure (text stays text, a list of options
    keeps its length, an object its keys): the exported item must still load as the same kind."""
    if isinstance(original, dict):
        if not isinstance(edited, dict) or set(edited) != set(original):
            raise UserError(f"{what} must keep the entries {', '.join(map(str, original))}")
        for k in original:
            _same_shape(original[k], edited[k], f"{what}[{k!r}]")
    elif isinstance(original, list):
        if not isinstance(edited, list) or len(edited) != len(original):
            raise UserError(f"{what} must stay a list of {len(original)} entries")
        for i, (a, b) in enumerate(zip(original, edited, strict=True)):
            _same_shape(a, b, f"{what}[{i}]")
    elif isinstance(original, str):
        checked_text(edited, what)
        if not isinstance(edited, str):
            raise UserError(f"{what} should be text")
    elif type(edited) is not type(original):
        raise UserError(f"{what} should be {type(original).__name__}, got {type(edited).__name__}")


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
