"""The ``rate`` kind (AutoMedEval): score every answer 1-5 on each of the config's scales. Its
export is ``ratings.csv`` (a column per scale and their ``mean``, AutoMedEval's human score) and
``clinicians.csv`` for ``clinieval correlate``; its agreement, per scale, is Krippendorff's alpha
(ordinal) and the ICC."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final

from clinieval.errors import UserError
from clinieval.review.study_kinds.base import (
    AgreementStats,
    AnswerKind,
    Check,
    ExtraTable,
    ItemShape,
    Measure,
    Row,
    Table,
    column_name,
    only,
    whole_number,
)
from clinieval.review.study_kinds.form_fields import (
    FormData,
    FormView,
    config_list,
    one,
    shown_value,
    whole,
)

SCALE_RANGE: Final = (1, 5)
DEFAULT_SCALES: Final = (
    {"name": "relevancy", "label": "Relevancy"},
    {"name": "fluency", "label": "Fluency"},
    {"name": "correctness", "label": "Knowledge correctness"},
)


def clinician_scores(table: Sequence[Row]) -> Table:
    """Each reviewer's mean score (the mean over scales) per model, long: what ``clinieval
    correlate --clinicians`` compares benchmarks' model rankings with."""
    sums: dict[tuple[str, str], list[float]] = {}
    for r in table:
        sums.setdefault((r["model"], r["reviewer"]), []).append(float(r["mean"]))
    rows = [{"model": m, "clinician": c, "score": sum(v) / len(v)} for (m, c), v in sums.items()]
    return ["model", "clinician", "score"], rows


class RateKind(AnswerKind):
    name = "rate"
    description = "score each answer 1-5 on named scales (AutoMedEval)"
    label = "Rate answers"
    config_keys = ("scales",)
    table = "ratings.csv"
    extra = ExtraTable("clinicians.csv", clinician_scores)

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        raw = given.get("scales", [dict(s) for s in DEFAULT_SCALES])
        if not isinstance(raw, list) or not raw:
            raise UserError("the rate config's 'scales' must be a non-empty list of {name, label}")
        scales: list[dict[str, str]] = []
        for s in raw:
            if not isinstance(s, dict) or set(s) - {"name", "label"} or "name" not in s:
                raise UserError(f"the rate config's scale {s!r} should be an object with name and label")
            name = column_name(s["name"], "scale name")
            label = s.get("label", name)
            if not isinstance(label, str) or not label.strip():
                raise UserError(f"scale {name!r}: label must be text")
            scales.append({"name": name, "label": label})
        dup = sorted({s["name"] for s in scales if [t["name"] for t in scales].count(s["name"]) > 1})
        if dup:
            raise UserError(f"the rate config names scale {dup[0]!r} twice")
        return {"scales": scales}

    def check_item(self, item: ItemShape, where: str, config: Mapping[str, Any]) -> None:
        if not item.answer_keys:
            raise UserError(f"{where}: a rate study needs at least 1 answer per item")

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        scales = config["scales"]
        return tuple(
            Measure(s["name"], s["label"], (s["name"],), per_answer=True, ordered=True) for s in scales
        )

    def agreement(self, config: Mapping[str, Any], stats: AgreementStats) -> dict[str, Any]:
        return {"scales": {m.key: stats.ordinal(m) for m in self.measures(config)}}

    def _answers(self, given: dict[str, dict[str, Any]], check: Check) -> dict[str, dict[str, Any]]:
        scales = [s["name"] for s in check.config["scales"]]
        low, high = SCALE_RANGE
        out: dict[str, dict[str, Any]] = {}
        for key, obj in given.items():
            what = check.labelled(key)
            only(obj, scales, what)
            out[key] = {
                s: whole_number(obj.get(s), low, high, f"{what}: {s}", partial=check.partial) for s in scales
            }
        return out

    def export_table(self, rows: Sequence[Row], config: Mapping[str, Any]) -> Table:
        """One column per scale, and ``mean``: AutoMedEval's human score of a response is the mean
        of its scales."""
        scales = [s["name"] for s in config["scales"]]
        out: list[Row] = []
        for r in rows:
            for model, a in r["payload"]["answers"].items():
                values = [a[s] for s in scales]
                mean = sum(values) / len(values)
                out.append(
                    {
                        "item": r["item"],
                        "reviewer": r["reviewer"],
                        "model": model,
                        **dict(zip(scales, values, strict=True)),
                    }
                    | {"mean": int(mean) if mean.is_integer() else mean}
                )
        return ["item", "reviewer", "model", *scales, "mean"], out

    def page_values(self, config: Mapping[str, Any]) -> dict[str, Any]:
        return {"scales": config_list(config, "scales")}

    def parse_form(self, view: FormView, form: FormData) -> dict[str, Any]:
        answers: dict[str, Any] = {}
        for a in view.answers:
            scores = {
                s["name"]: whole(one(form, f"score-{a.letter}-{s['name']}"))
                for s in config_list(view.config, "scales")
            }
            if any(v is not None for v in scores.values()):
                answers[a.key] = scores
        return {"answers": answers}

    def _answer_state(self, raw: object) -> dict[str, Any]:
        obj = raw if isinstance(raw, Mapping) else {}
        return {name: shown_value(obj.get(name)) for name in obj}

    def _answer_summary(self, state: Mapping[str, Any]) -> str:
        return ", ".join(f"{k} {v}" for k, v in state.items() if v) or "—"
