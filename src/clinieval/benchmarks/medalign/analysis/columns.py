"""The caller's half of the MedAlign analysis: which column of the long table holds what.

It is the one part of the analysis a caller builds (with :func:`.compute.medalign_analysis`), so
it lives apart from the statistics that read it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["LengthCounter", "MedAlignColumns"]

LengthCounter = Callable[[str], int]
"""Counts the length of a response text (words by default; a tokenizer's count works too)."""


@dataclass(frozen=True)
class MedAlignColumns:
    """Which column of the long table holds what, and how to name the reference ranking.

    ``patient`` names each instruction's patient: items of one patient are resampled together
    in every interval and paired test (when the column is filled for every instruction and holds
    2+ patients; otherwise, or with ``patient=None``, items are resampled alone, and the report
    says which).
    Only ``instruction`` and ``model`` are required; a section whose column is absent or empty
    is listed as undefined. ``metrics`` are score columns where higher is better. ``rank`` is the
    reference ranking (1 = best, ties allowed): clinicians' in the paper; when it was computed
    from another column, say so in ``reference_label`` ("computed reference"), which every
    report prints beside the ranking.
    """

    instruction: str = "instruction_id"
    model: str = "model"
    patient: str | None = "patient_id"
    response: str = "response"
    error_kind: str = "error_kind"
    correct: str = "correct"
    rank: str = "rank"
    rater: str = "rater"
    category: str = "category"
    subcategory: str = "subcategory"
    specialty: str = "specialty"
    ehr_tokens: str = "ehr_tokens"
    gold_response: str = "gold_response"
    groups: tuple[str, ...] = ("age_group", "gender", "race", "ethnicity")
    metrics: tuple[str, ...] = ()
    reference_label: str = "clinician"

    def roles(self) -> list[str]:
        """Every column given a role other than metric."""
        return [
            self.instruction,
            self.model,
            *([self.patient] if self.patient else []),
            self.response,
            self.error_kind,
            self.correct,
            self.rank,
            self.rater,
            self.category,
            self.subcategory,
            self.specialty,
            self.ehr_tokens,
            self.gold_response,
            *self.groups,
        ]
