"""Study kinds: what a reviewer's response is for each kind of study, and everything that follows
from it (agreement, export, the form), one module per kind.

Four kinds cover the papers' clinician work:

* ``rank`` (MedAlign, :mod:`.rank`): rank every answer, mark each correct or incorrect, reasons
  and a rationale for an incorrect one.
* ``rate`` (AutoMedEval, :mod:`.rate`): score every answer 1-5 on each of the config's scales.
* ``question`` (EHRNoteQA's build review, :mod:`.question`): keep, revise or discard a generated
  item, editing its fields when revising.
* ``sentence`` (MedEval, :mod:`.sentence`): label a sentence on each label set and rewrite it.

:class:`~.base.Kind` says what each kind must answer; :data:`KINDS` is the one registry, and the
rest of ``clinieval.review`` asks a study's kind (:func:`get_kind`) rather than branching on its name.
"""

from __future__ import annotations

from typing import Final

from clinieval.errors import UserError
from clinieval.review.study_kinds.base import MAX_TEXT, RESERVED_COLUMNS, ItemShape, Kind, Measure
from clinieval.review.study_kinds.question import DECISIONS, QuestionKind
from clinieval.review.study_kinds.rank import REASONS, RankKind
from clinieval.review.study_kinds.rate import DEFAULT_SCALES, SCALE_RANGE, RateKind
from clinieval.review.study_kinds.sentence import DEFAULT_LABELS, SentenceKind

__all__ = [
    "DECISIONS",
    "DEFAULT_LABELS",
    "DEFAULT_SCALES",
    "KINDS",
    "MAX_TEXT",
    "REASONS",
    "RESERVED_COLUMNS",
    "SCALE_RANGE",
    "ItemShape",
    "Kind",
    "Measure",
    "get_kind",
]

KINDS: Final[dict[str, Kind]] = {k.name: k for k in (RankKind(), RateKind(), QuestionKind(), SentenceKind())}


def get_kind(name: str) -> Kind:
    """The kind called ``name``, or one error listing the kinds."""
    kind = KINDS.get(name)
    if kind is None:
        raise UserError(f"study kind {name!r} is unknown; choose from {', '.join(KINDS)}")
    return kind
