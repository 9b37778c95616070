"""The ConText modifiers: which words around a mention make it negative or uncertain, and how far.

CheXpert decides with dependency-parse patterns, in three passes: uncertainty that must win over
negation ("cannot exclude"), then negation, then the remaining uncertainty ("may reflect"). No
parser is used here (spaCy's blank English pipeline has none and no model may be downloaded), so
the same vocabulary is written as medspaCy ConText rules: a trigger phrase, the direction of its
scope in the sentence, and how many tokens it reaches. The three passes become three categories
ranked in that order (:data:`PRECEDENCE`).

Plain data, so that reading it needs no spaCy; :mod:`.pipeline` turns it into ``ConTextRule``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, TypeAlias

Direction: TypeAlias = Literal["FORWARD", "BACKWARD", "BIDIRECTIONAL", "TERMINATE", "PSEUDO"]
Check: TypeAlias = Literal["", "after_or_adjacent", "structure"]

UNCERTAIN_FIRST = "UNCERTAIN_FIRST"
"""CheXpert's pre-negation uncertainty: phrases holding a negation that still mean "maybe"."""
NEGATED = "NEGATED_EXISTENCE"
UNCERTAIN = "POSSIBLE_EXISTENCE"
TERMINATE = "TERMINATE"
PSEUDO = "PSEUDO"

PRECEDENCE = (UNCERTAIN_FIRST, NEGATED, UNCERTAIN)
"""The first category among a mention's modifiers decides its value (none: positive)."""

STRUCTURE_WORDS = (
    "cardiomediastinal", "pericardial", "mediastinal", "mediastinum", "cardiomediastinum", "contour",
    "configuration", "silhouette", "size", "heart", "shadow",
)  # fmt: skip
"""Words that name a structure, not a finding: "stable heart size" says nothing about whether the
heart is enlarged, so it is uncertain, while "stable cardiomegaly" is positive (CheXpert's rule)."""


@dataclass(frozen=True, slots=True)
class Modifier:
    """One trigger phrase. ``check`` narrows what it modifies: ``after_or_adjacent`` reaches
    forward freely but backward only a mention directly before it ("heart size normal", not
    "cardiomegaly, normal vasculature"); ``structure`` only mentions named by a structure word."""

    literal: str
    category: str
    direction: Direction
    max_scope: int | None = None
    check: Check = ""


def _many(
    category: str, direction: Direction, literals: str, max_scope: int | None = None, check: Check = ""
) -> list[Modifier]:
    return [Modifier(w.strip(), category, direction, max_scope, check) for w in literals.split("|")]


MODIFIERS: tuple[Modifier, ...] = (
    # -- uncertainty that wins over negation (CheXpert's pre-negation pass)
    *_many(UNCERTAIN_FIRST, "FORWARD",
           "cannot exclude|can not exclude|cannot rule out|can not rule out|difficult to exclude|"
           "no new|no evidence to rule out"),
    *_many(UNCERTAIN_FIRST, "BACKWARD",
           "cannot be excluded|can not be excluded|not excluded|not be excluded|is not excluded|"
           "cannot be ruled out|can not be ruled out|not ruled out|not be ruled out", 8),
    # -- negation
    *_many(NEGATED, "FORWARD",
           "no|not|without|negative for|free of|clear of|absence of|rather than|resolution of|"
           "interval resolution of|removal of|interval removal of|disappearance of|drainage of|clearing of|"
           "history of|no longer|no evidence of|without evidence of"),
    *_many(NEGATED, "BACKWARD",
           "not seen|not identified|not present|not demonstrated|not detected|not noted|not evident|"
           "not enlarged|no longer seen|no longer present|no longer visualized|no longer evident|"
           "absent|is absent|are absent|resolved|has resolved|have resolved|cleared|has cleared|have cleared|"
           "removed|ruled out|has been ruled out|excluded|is excluded", 8),
    *_many(NEGATED, "BACKWARD",
           "is normal|are normal|appears normal|appear normal|remains normal|remain normal|is unremarkable|"
           "are unremarkable|appears unremarkable|appear unremarkable|normal in size|is normal in size|"
           "are normal in size|within normal limits|is within normal limits|are within normal limits|"
           "upper limits of normal|upper limit of normal|at the upper limits of normal|is top normal|"
           "is top-normal|is upper normal|is high normal|is low normal", 6),
    *_many(NEGATED, "BIDIRECTIONAL",
           "normal|unremarkable|normal size|top normal|top-normal|upper normal|high normal|low normal",
           4, "after_or_adjacent"),
    # -- uncertainty
    *_many(UNCERTAIN, "FORWARD",
           "may|might|could|would|possible|possibly|probable|probably|presumably|presumed|"
           "questionable|question of|suspect|suspected|suspicious for|suspicion for|suspicion of|"
           "concern for|concerning for|worrisome for|suggestive of|suggesting|suggests|suggest|"
           "suggestion of|consider|considered|favor|favored|differential diagnosis|"
           "differential includes|secondary to|borderline|indeterminate|equivocal|rule out|"
           "evaluate for|evaluation for|assess for|correlate for|clinical correlation for"),
    *_many(UNCERTAIN, "BACKWARD",
           "is possible|are possible|is suspected|are suspected|is questioned|may be present|"
           "could be present|might be present|can be present|not well visualized|not well seen|"
           "not clearly seen|not visualized|not well evaluated|not evaluated|poorly evaluated|"
           "incompletely evaluated|poorly visualized|not appreciated|is obscured|are obscured|"
           "obscured|is not well assessed|is unlikely|unlikely", 8),
    *_many(UNCERTAIN, "BIDIRECTIONAL", "versus|vs|vs.|less likely|obscuring", 4),
    *_many(UNCERTAIN, "BIDIRECTIONAL", "or", 3),
    *_many(UNCERTAIN, "BIDIRECTIONAL",
           "stable|unchanged|not changed|no change|no significant change|no interval change|"
           "without change|similar to prior|similar to the prior|similar to previous|similar|grossly stable",
           5, "structure"),
    # -- words that look like a trigger but are not one, and words that end a trigger's reach
    *_many(PSEUDO, "PSEUDO",
           "no increase|no decrease|not only|no further|gram negative|not necessarily"),
    # A terminator's own scope is one token each side: medspaCy only lets it cut a trigger whose
    # scope overlaps its own without lying inside it, and a whole-sentence scope would contain them.
    *_many(TERMINATE, "TERMINATE",
           "but|however|although|though|which|while|whereas|except|aside from|apart from|other than|"
           "there is|there are|there has been|there have been|there remains|;", 1),
)  # fmt: skip
