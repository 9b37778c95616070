"""The ``sentence`` kind (MedEval): label a sentence on each of the config's label sets and
rewrite it. Its export is ``sentences.csv`` (a column per label set and the rewrite); its
agreement, per label set, is alpha and kappa."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from clinieval.errors import UserError
from clinieval.review.study_kinds.base import (
    AgreementStats,
    Check,
    Kind,
    Measure,
    Row,
    Table,
    as_object,
    checked_text,
    column_name,
    only,
)
from clinieval.review.study_kinds.form_fields import FormData, FormView, config_map, one, shown_value

DEFAULT_LABELS: Final = {"abnormality": ["normal", "abnormal"], "ambiguity": ["unambiguous", "ambiguous"]}


class SentenceKind(Kind):
    name = "sentence"
    description = "label a sentence on each label set and rewrite it (MedEval)"
    label = "Label sentence"
    config_keys = ("labels",)
    table = "sentences.csv"

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        raw = given.get("labels", {k: list(v) for k, v in DEFAULT_LABELS.items()})
        if not isinstance(raw, dict) or not raw:
            raise UserError("the sentence config's 'labels' must map each label set to its values")
        labels: dict[str, list[str]] = {}
        for name, values in raw.items():
            column_name(name, "label set")
            if (
                not isinstance(values, list)
                or len(values) < 2
                or not all(isinstance(v, str) and v.strip() for v in values)
                or len(set(values)) != len(values)
            ):
                raise UserError(f"label set {name!r} needs at least 2 distinct text values")
            labels[name] = list(values)
        return {"labels": labels}

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        sets = config["labels"]
        return tuple(Measure(name, name, ("labels", name), per_answer=False, ordered=False) for name in sets)

    def agreement(self, config: Mapping[str, Any], stats: AgreementStats) -> dict[str, Any]:
        return {"labels": {m.key: stats.nominal(m) for m in self.measures(config)}}

    def _rebuild(self, payload: object, check: Check) -> dict[str, Any]:
        obj = as_object(payload, "the response")
        only(obj, ("labels", "rewrite"), "the response")
        sets: Mapping[str, list[str]] = check.config["labels"]
        given = as_object(obj.get("labels", {}), "labels")
        only(given, list(sets), "labels")
        labels: dict[str, str | None] = {}
        for name, values in sets.items():
            value = given.get(name)
            if value is None and check.partial:
                labels[name] = None
            elif value not in values:
                raise UserError(f"choose {name}: {' or '.join(values)}")
            else:
                labels[name] = value
        return {"labels": labels, "rewrite": checked_text(obj.get("rewrite"), "the rewrite")}

    def export_table(self, rows: Sequence[Row], config: Mapping[str, Any]) -> Table:
        names = list(config["labels"])
        out = [
            {
                "item": r["item"],
                "reviewer": r["reviewer"],
                **{k: r["payload"]["labels"][k] for k in names},
                "rewrite": r["payload"]["rewrite"],
            }
            for r in rows
        ]
        return ["item", "reviewer", *names, "rewrite"], out

    def page_values(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"label_sets": config_map(config, "labels")}

    def parse_form(self, view: FormView, form: FormData) -> dict[str, Any]:
        sets = config_map(view.config, "labels")
        return {
            "labels": {name: one(form, f"label-{name}") or None for name in sets},
            "rewrite": one(form, "rewrite") or "",
        }

    def _form_state(self, view: FormView, payload: Mapping[str, Any]) -> dict[str, Any]:
        given = payload.get("labels")
        chosen = given if isinstance(given, Mapping) else {}
        return {
            "labels": {n: chosen.get(n) for n in config_map(view.config, "labels")},
            "rewrite": shown_value(payload.get("rewrite")),
        }

    def _summary_lines(self, view: FormView, state: Mapping[str, Any]) -> list[tuple[str, str]]:
        lines = [(name, shown_value(v) or "—") for name, v in state["labels"].items()]
        return [*lines, ("Rewrite", state["rewrite"] or "—")]
