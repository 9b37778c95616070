"""The suite demo's stand-in clinician: a fixed rule that rates a clinician sample through the
review app's own code, so the demo's calibration step goes the way real ratings go.

A demo cannot ask a clinician, yet ``clinieval suite demo`` should show the whole calibration:
a sample drawn (``suite sample``), ratings submitted into the review database as a reviewer's
reviews, read back and used (``suite report --clinicians``). So a reviewer account,
:data:`REVIEWER`, is given every item of the sample's studies (:func:`clinieval.review.assigning.assign`),
reads each as a reviewer's page shows it (:func:`clinieval.review.reviewing.assignment_view`:
blinded answers, the reference answer) and submits through
:func:`clinieval.review.reviewing.save`, which checks the review as the web form's Submit does.

It is a stand-in, named so everywhere: its rule (:data:`RULE`) reads the reference answer, as a
clinician checking a multiple-choice answer key would, not the record; the numbers it produces
say how the calibration machinery behaves, nothing clinical.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from clinieval.errors import UserError

REVIEWER = "demo-clinician"
RULE = (
    "an answer is correct when the first option letter it names (A-E, standing alone) is the reference's,"
    " or when it contains the reference's option text"
)
_LETTER = re.compile(r"(?<![A-Za-z])([A-E])(?![A-Za-z])")
_REFERENCE = re.compile(r"^\s*([A-E])[.)]\s*(.*)$", re.S)


@dataclass(frozen=True, slots=True)
class DemoReviews:
    """What the stand-in clinician did: reviews submitted now, and those already submitted."""

    submitted: int
    already: int


def correct_by_rule(answer: str, reference: str | None) -> bool:
    """:data:`RULE` for one answer."""
    if not reference:
        return False
    found = _REFERENCE.match(reference)
    letter, text = (found.group(1), found.group(2).strip()) if found else (None, reference.strip())
    named = _LETTER.search(answer)
    if letter is not None and named is not None and named.group(1) == letter:
        return True
    return bool(text) and text.casefold() in answer.casefold()


def review_as_demo_clinician(db: str, studies: Sequence[str]) -> DemoReviews:
    """Assign every item of ``studies`` (correctness studies) to :data:`REVIEWER` and submit a
    review of each by :data:`RULE`; already submitted reviews are left as they are, so running
    the demo again submits nothing new."""
    from sqlalchemy import select

    from clinieval.review.accounts import add_user
    from clinieval.review.assigning import assign
    from clinieval.review.db import User, read_session
    from clinieval.review.reviewing import assignment_view, reviewer_queue, save
    from clinieval.review.store import connect

    engine = connect(db)
    try:
        with read_session(engine) as s:
            user = s.scalars(select(User).where(User.name == REVIEWER)).first()
        if user is None:  # no one signs in as it: a password nobody knows
            user = add_user(engine, REVIEWER, "reviewer", secrets.token_urlsafe(24))
        submitted = already = 0
        for study in studies:
            assign(engine, study, 1, 0, [REVIEWER])
            for entry in reviewer_queue(engine, user, study):
                if entry.status == "submitted":
                    already += 1
                    continue
                view = assignment_view(engine, entry.id, user)
                if view.config.get("rank", True) is not False:
                    raise UserError(f"study {study!r}: the demo's clinician rates correctness studies only")
                save(engine, entry.id, user, _review(view.answers, view.reference), view.version, submit=True)
                submitted += 1
    finally:
        engine.dispose()
    return DemoReviews(submitted, already)


def _review(answers: Sequence[Any], reference: str | None) -> dict[str, Any]:
    """A correctness study's payload: each answer correct or not by :data:`RULE`; an incorrect
    one with the reason and rationale the form asks for."""
    out: dict[str, Any] = {}
    for a in answers:
        good = correct_by_rule(a.text, reference)
        out[a.key] = {
            "correct": good,
            "reasons": [] if good else ["C2"],
            "rationale": "" if good else "does not give the reference answer (the demo's stand-in rule)",
        }
    return {"answers": out}
