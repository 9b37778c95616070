"""What an AutoMedEval judge-evaluation set is made of.

An item is a patient question, a reference answer and k responses from named models (k = 3 in
the paper); optionally each response carries physicians' ratings on Relevancy, Fluency and
Knowledge Correctness (1-5), and the item a reference rationale. A response's human score is the
mean of its three criteria, averaged over the physicians who rated it (the paper's definition).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

CRITERIA: tuple[str, ...] = ("relevancy", "fluency", "correctness")
"""The physicians' three criteria, each 1-5 (correctness = Knowledge Correctness)."""

SCORE_RANGE = (1, 5)


@dataclass(frozen=True, slots=True)
class Rating:
    """One physician's ratings of one response."""

    relevancy: int
    fluency: int
    correctness: int

    @property
    def mean(self) -> float:
        return (self.relevancy + self.fluency + self.correctness) / 3


@dataclass(frozen=True, slots=True)
class Response:
    """One model's answer, with the ratings physicians gave it (physician id -> rating)."""

    model: str
    text: str
    ratings: Mapping[str, Rating] = field(default_factory=dict)

    def human_score(self) -> float | None:
        """The mean over physicians of each one's mean over the three criteria; None if unrated."""
        if not self.ratings:
            return None
        return sum(r.mean for r in self.ratings.values()) / len(self.ratings)


@dataclass(frozen=True, slots=True)
class JudgeItem:
    """A question, its reference answer, the responses to judge, and an optional reference rationale."""

    id: str
    question: str
    reference: str
    responses: tuple[Response, ...]
    rationale: str | None = None
    source: str = ""
    """Where it was read (``file:line``), for messages."""
    context: str = ""
    """The record or notes the question is about, when the answers were made from one (a run's
    sample context): shown to physicians beside the answers in ``clinieval review``."""

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(r.model for r in self.responses)

    def human_scores(self) -> list[float | None]:
        return [r.human_score() for r in self.responses]
