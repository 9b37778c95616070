"""From a kind's draft to the items of ``qa.jsonl``: evidence, distractors, answer letters, and
which questions a patient keeps.

Every question names the evidence line that shows its answer; a question whose answer cannot be
found in the notes the model sees is skipped and counted (it would be a bug). Distractors are the
same patient's other facts of the same type first, the generator's catalog only when the patient
has too few, and each item records where each distractor came from. As in the paper, the correct
option is never strictly the longest, and answer letters are dealt so that no letter is favoured.
"""

from __future__ import annotations

import random
import re
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS
from clinieval.benchmarks.ehrnoteqa.synth.question_kinds import KINDS, Candidate, Draft, Kind
from clinieval.benchmarks.ehrnoteqa.synth.summaries import Case, seeded_rng
from clinieval.ehr.notes import normalize_whitespace

__all__ = [
    "PAPER_SHARES",
    "SOURCES",
    "Asked",
    "Item",
    "LetterDeck",
    "Posed",
    "ask_all",
    "questions_for",
    "select",
]

SOURCES: tuple[str, ...] = ("same_patient_notes", "same_patient_record", "generator_catalog", "module_list")
"""Where a distractor came from, in order of preference: a fact of the same patient shown in the
notes, a fact of the same patient elsewhere in the record (clinic or emergency visits, a fourth
admission), the generator's catalog (:mod:`clinieval.ehr.synth`), and a short list in
:mod:`.question_kinds` (used where the generator's catalog has too few entries of a type)."""


# ---------------------------------------------------------------------------------- the items


@dataclass(frozen=True, slots=True)
class Item:
    """One line of ``qa.jsonl``."""

    id: str
    patient_id: str
    num_notes: int
    question: str
    choices: tuple[str, str, str, str, str]
    answer: str  # letter
    category: str
    kind: str
    evidence: tuple[dict[str, str], ...]
    distractor_sources: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "patient_id": int(self.patient_id) if self.patient_id.isdigit() else self.patient_id,
            "num_notes": self.num_notes,
            "question": self.question,
        }
        out.update(
            {f"choice_{letter}": text for letter, text in zip(OPTION_LETTERS, self.choices, strict=True)}
        )
        out.update(
            {
                "answer": self.answer,
                "id": self.id,
                "category": self.category,
                "kind": self.kind,
                "evidence": list(self.evidence),
                "distractor_sources": self.distractor_sources,
            }
        )
        return out


def _find_line(text: str, start: str, needles: Sequence[str]) -> str | None:
    low = [n.lower() for n in needles]
    pattern = re.compile(start)
    for raw in text.splitlines():
        line = raw.strip()
        if pattern.match(line) and all(n in line.lower() for n in low):
            return line
    return None


def _evidence(case: Case, draft: Draft) -> tuple[dict[str, str], ...] | None:
    """The cited lines, or None when one is missing or a span is not in the notes the model sees."""
    shown = case.notes_text.lower()
    if any(s.lower() not in shown for s in draft.spans):
        return None
    out = []
    for cite in draft.cites:
        line = _find_line(cite.admission.text, cite.start, cite.needles)
        if line is None or normalize_whitespace(line).lower() not in shown:
            return None
        a = cite.admission
        out.append({"note_id": a.note_id, "hadm_id": a.hadm_id, "chartdate": a.chartdate, "text": line})
    return tuple(out)


def _source(c: Candidate, shown: str) -> str:
    if c.origin == "patient":
        return "same_patient_notes" if c.text.lower() in shown else "same_patient_record"
    return c.origin


def _distractors(draft: Draft, shown: str, rng: random.Random) -> list[tuple[str, str]] | str:
    """Four distinct distractors with their sources (in a seeded order), or why there are none.

    Distractors are taken by source preference (:data:`SOURCES`), in the asker's order within a
    source. When the answer would be strictly the longest option, the least preferred distractor
    is swapped for the first unused one at least as long (EHRNoteQA: the longest choice is
    never the answer); without one the question is skipped.
    """
    seen = {draft.answer.strip().lower()}
    unique: list[tuple[str, str]] = []
    for c in draft.candidates:
        key = c.text.strip().lower()
        if key and key not in seen:
            seen.add(key)
            unique.append((c.text.strip(), _source(c, shown)))
    ranked = sorted(unique, key=lambda t: SOURCES.index(t[1]))
    if len(ranked) < 4:
        return "too_few_distractors"
    chosen, rest = ranked[:4], ranked[4:]
    if len(draft.answer) > max(len(t) for t, _ in chosen):
        longer = next((c for c in rest if len(c[0]) >= len(draft.answer)), None)
        if longer is None:
            return "answer_longest"
        chosen[-1] = longer
    rng.shuffle(chosen)
    return chosen


PAPER_SHARES: dict[str, int] = {
    "Treatment": 19,
    "Assessment": 20,
    "Problem": 22,
    "Etiology": 10,
    "Sign/Symptom": 5,
    "Vitals": 9,
    "Others": 5,
}
"""Percent of each category in the paper's 100-question sample (spec); they steer the pick."""


def _kind_weight(kind: Kind) -> float:
    return PAPER_SHARES[kind.category] / sum(1 for k in KINDS if k.category == kind.category)


class LetterDeck:
    """Answer positions dealt from successive seeded shuffles of A-E.

    Over any run of questions no letter is used more than once beyond any other per five
    questions, so a model that always answers one letter scores about 20 %, and the positions
    are still unpredictable.
    """

    def __init__(self, seed: int, name: str) -> None:
        self._rng = random.Random(f"clinieval-ehrnoteqa-synth:{seed}:{name}:letters")
        self._hand: list[int] = []

    def draw(self) -> int:
        if not self._hand:
            self._hand = list(range(len(OPTION_LETTERS)))
            self._rng.shuffle(self._hand)
        return self._hand.pop()


@dataclass(frozen=True, slots=True)
class Posed:
    """A question with its evidence and distractors, before its answer gets a letter."""

    kind: Kind
    draft: Draft
    evidence: tuple[dict[str, str], ...]
    distractors: tuple[tuple[str, str], ...]  # (text, source), in option order

    def place(self, case: Case, pos: int) -> Item:
        """The item with the answer at option ``pos`` (0 = A)."""
        texts = [t for t, _ in self.distractors]
        texts.insert(pos, self.draft.answer)
        letters = [x for x in OPTION_LETTERS if x != OPTION_LETTERS[pos]]
        sources = {x: src for x, (_, src) in zip(letters, self.distractors, strict=True)}
        t1, t2, t3, t4, t5 = texts
        return Item(
            id=f"{case.subject_id}-{self.kind.name}",
            patient_id=case.subject_id,
            num_notes=len(case.admissions),
            question=self.draft.question,
            choices=(t1, t2, t3, t4, t5),
            answer=OPTION_LETTERS[pos],
            category=self.kind.category,
            kind=self.kind.name,
            evidence=self.evidence,
            distractor_sources=sources,
        )


@dataclass(slots=True)
class Asked:
    """Every question one patient can get, and why others were dropped (reason, kind)."""

    posed: list[Posed] = field(default_factory=list)
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)


def ask_all(case: Case, *, seed: int = 0) -> Asked:
    """Every kind that applies to the patient, posed (or skipped with its reason)."""
    out = Asked()
    shown = case.notes_text.lower()
    for kind in KINDS:
        rng = seeded_rng(seed, case.subject_id, kind.name)
        draft = kind.ask(case, rng)
        if draft is None:
            continue
        evidence = _evidence(case, draft)
        if evidence is None:
            out.skipped["answer_not_visible", kind.name] += 1
            continue
        picked = _distractors(draft, shown, rng)
        if isinstance(picked, str):
            out.skipped[picked, kind.name] += 1
            continue
        out.posed.append(Posed(kind, draft, evidence, tuple(picked)))
    return out


def select(case: Case, posed: Sequence[Posed], *, seed: int = 0, per_patient: int | None = 2) -> list[Posed]:
    """The questions one patient keeps, in :data:`KINDS` order.

    With ``per_patient``, at most that many: a seeded draw without replacement weighted so that
    categories follow the paper's shares (:data:`PAPER_SHARES`, split evenly among a category's
    kinds); a patient with two or more notes keeps a question that needs several notes first,
    when one applies (EHRNoteQA's multi-note questions).
    """
    if per_patient is None or len(posed) <= per_patient:
        return list(posed)
    rng = seeded_rng(seed, case.subject_id, "select")
    keys = [rng.random() ** (1.0 / _kind_weight(p.kind)) for p in posed]  # Efraimidis-Spirakis
    order = sorted(range(len(posed)), key=lambda i: -keys[i])
    multi = [i for i in order if posed[i].kind.multi_note]
    first = multi[:1] if len(case.admissions) > 1 else []
    preferred = [*first, *(i for i in order if i not in first)]
    return [posed[i] for i in sorted(preferred[:per_patient])]


def questions_for(
    case: Case, *, seed: int = 0, per_patient: int | None = 2, letters: LetterDeck | None = None
) -> list[Item]:
    """The items one patient gets. Letters come from ``letters`` (the set shares one deck across
    patients); without one, from a deck of the patient's own."""
    deck = letters or LetterDeck(seed, case.subject_id)
    chosen = select(case, ask_all(case, seed=seed).posed, seed=seed, per_patient=per_patient)
    return [p.place(case, deck.draw()) for p in chosen]
