"""The ``rank`` kind (MedAlign): rank every answer (1 = best; ties only when the config says
``ties: true``), mark each correct or incorrect, and for an incorrect one tick its reasons (C1-C3)
and write why. Its export is the long ``ranks.csv`` and MedAlign's ``reviews.csv``; its agreement
is Kendall's tau between reviewers' rankings and alpha/kappa on the correct marks.

With ``rank: false`` in the config the same study asks only the yes/no correctness of each answer
(with the reasons and rationale of an incorrect one), not the ranking: a correctness study, as a
judge of binary correctness is calibrated against (``clinieval suite sample``); its items may
then have a single answer, its ``rank`` column stays empty and its agreement is on the marks."""

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
    cell,
    checked_text,
    only,
    whole_number,
)
from clinieval.review.study_kinds.form_fields import FormData, FormView, one, shown_value, text, whole

REASONS: Final = {
    "C1": "not clinically appropriate given the record",
    "C2": "errors that would change the clinical interpretation",
    "C3": "does not address the instruction",
}
"""MedAlign's reasons an answer is incorrect."""


def medalign_reviews(table: Sequence[Row]) -> Table:
    """The rank table under the column names MedAlign's analysis reads (``--reviews``)."""
    rows = [
        {
            "instruction_id": r["item"],
            "model": r["model"],
            "rank": r["rank"],
            "correct": r["correct"],
            "rater": r["reviewer"],
        }
        for r in table
    ]
    return ["instruction_id", "model", "rank", "correct", "rater"], rows


class RankKind(AnswerKind):
    name = "rank"
    description = "rank all answers, mark each correct or incorrect with reasons and a rationale (MedAlign)"
    label = "Rank answers"
    config_keys = ("ties", "rank")

    def title(self, config: Mapping[str, Any]) -> str:
        return self.label if ranked(config) else "Mark answers correct"

    table = "ranks.csv"
    extra = ExtraTable("reviews.csv", medalign_reviews)

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, default in (("ties", False), ("rank", True)):
            value = given.get(key, default)
            if not isinstance(value, bool):
                raise UserError(f"the rank config's {key!r} must be true or false, got {value!r}")
            out[key] = value
        if out["rank"]:
            del out["rank"]  # stored only when off: studies made before it existed compare equal
        return out

    def check_item(self, item: ItemShape, where: str, config: Mapping[str, Any]) -> None:
        if not ranked(config) and not item.answer_keys:  # a correctness study takes a single answer
            raise UserError(f"{where}: a correctness study needs at least 1 answer per item")
        if ranked(config) and len(item.answer_keys) < 2:
            raise UserError(f"{where}: a rank study needs at least 2 answers per item")

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        correct = Measure("correct", "Correct or incorrect", ("correct",), per_answer=True, ordered=False)
        if not ranked(config):
            return (correct,)
        return (Measure("rank", "Ranking", ("rank",), per_answer=True, ordered=True), correct)

    def agreement(self, config: Mapping[str, Any], stats: AgreementStats) -> dict[str, Any]:
        if not ranked(config):
            (correct,) = self.measures(config)
            return {"correct": stats.nominal(correct)}
        rank, correct = self.measures(config)
        return stats.ranking(rank, correct)

    # --- validation ---

    def _answers(self, given: dict[str, dict[str, Any]], check: Check) -> dict[str, dict[str, Any]]:
        n = len(check.item.answer_keys)
        asked = ranked(check.config)
        out = {
            k: self._answer(v, n, check.labelled(k), partial=check.partial, asked=asked)
            for k, v in given.items()
        }
        if asked:
            self._check_ranks(out, bool(check.config.get("ties", False)), check)
        return out

    def _answer(
        self, obj: dict[str, Any], n: int, what: str, *, partial: bool, asked: bool = True
    ) -> dict[str, Any]:
        only(obj, ("rank", "correct", "reasons", "rationale"), what)
        correct = obj.get("correct")
        if correct is not None and not isinstance(correct, bool):
            raise UserError(f"{what}: correct must be true or false")
        if correct is None and not partial:
            raise UserError(f"{what}: mark it correct or incorrect")
        reasons = self._reasons(obj.get("reasons"), what)
        rationale = checked_text(obj.get("rationale"), f"{what}: the rationale")
        if not partial and correct and reasons:
            raise UserError(f"{what} is marked correct but has reasons {', '.join(reasons)}; untick them")
        if not partial and correct is False and not reasons:
            raise UserError(f"{what} is marked incorrect: tick at least one reason (C1, C2, C3)")
        if not partial and correct is False and not rationale.strip():
            raise UserError(f"{what} is marked incorrect: write a rationale")
        if asked:
            rank = whole_number(obj.get("rank"), 1, n, f"{what}: the rank", partial=partial)
        elif obj.get("rank") not in (None, ""):
            raise UserError(f"{what}: this study asks only whether each answer is correct, not a rank")
        else:
            rank = None
        return {"rank": rank, "correct": correct, "reasons": reasons, "rationale": rationale}

    @staticmethod
    def _reasons(value: object, what: str) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise UserError(f"{what}: reasons should be a list of C1, C2, C3")
        unknown = [r for r in value if r not in REASONS]
        if unknown:
            raise UserError(f"{what}: reason {unknown[0]!r} is unknown; choose from {', '.join(REASONS)}")
        return [r for r in REASONS if r in value]

    @staticmethod
    def _check_ranks(out: Mapping[str, dict[str, Any]], ties: bool, check: Check) -> None:
        ranks = {k: v["rank"] for k, v in out.items() if v["rank"] is not None}
        if not ties:
            seen: dict[int, str] = {}
            for key, rank in ranks.items():
                if rank in seen:
                    raise UserError(
                        f"{check.labelled(seen[rank])} and {check.labelled(key)} share rank {rank};"
                        " this study does not allow ties"
                    )
                seen[rank] = key
        if not check.partial and ranks and min(ranks.values()) != 1:
            raise UserError("no answer has rank 1: give the best answer rank 1")

    # --- export ---

    def export_table(self, rows: Sequence[Row], config: Mapping[str, Any]) -> Table:
        columns = ["item", "reviewer", "model", "rank", "correct", "reasons", "rationale"]
        out = [
            {
                "item": r["item"],
                "reviewer": r["reviewer"],
                "model": model,
                "rank": a["rank"],
                "correct": cell(a["correct"]),
                "reasons": ";".join(a["reasons"]),
                "rationale": a["rationale"],
            }
            for r in rows
            for model, a in r["payload"]["answers"].items()
        ]
        return columns, out

    # --- the form ---

    def parse_form(self, view: FormView, form: FormData) -> dict[str, Any]:
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

    def _answer_state(self, raw: object) -> dict[str, Any]:
        obj = raw if isinstance(raw, Mapping) else {}
        reasons = obj.get("reasons")
        return {
            "rank": shown_value(obj.get("rank")),
            "correct": obj.get("correct") if isinstance(obj.get("correct"), bool) else None,
            "reasons": [r for r in reasons if isinstance(r, str)] if isinstance(reasons, list) else [],
            "rationale": shown_value(obj.get("rationale")),
        }

    def _answer_summary(self, state: Mapping[str, Any]) -> str:
        verdict = {True: "correct", False: "incorrect", None: "not marked"}[state["correct"]]
        parts = [f"rank {state['rank'] or '—'}", verdict, *state["reasons"]]
        if state["rationale"]:
            parts.append(f"rationale: {state['rationale']}")
        return " · ".join(parts)


def ranked(config: Mapping[str, Any]) -> bool:
    """Whether a rank study asks for the ranking (every one but a ``rank: false`` correctness study)."""
    return config.get("rank", True) is not False
