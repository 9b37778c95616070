"""Sentence forms shared by the synthetic sentences and reports: stated, hedged, contradictory,
run-on. Each ambiguous form comes with its faithful rewrite, written from the same parts, so the
rewrite keeps the finding (and the normal/abnormal label) and only removes the ambiguity.
"""

from __future__ import annotations

import random
import string
from dataclasses import dataclass

from clinieval.benchmarks.medeval.synth.domains import SLOTS, Domain, Finding

__all__ = [
    "CONTRADICTIONS",
    "HEDGED_FORMS",
    "STATED_FORMS",
    "Phrase",
    "cap",
    "contradiction",
    "fill",
    "hedged",
    "pick_phrase",
    "run_on",
    "stated",
]

STATED_FORMS = ("{NP}.", "{NP} noted.", "There is evidence of {np}.")
"""How a present finding is written (no hedge, no negation)."""

HEDGED_FORMS = ("Possible {np}.", "{NP} cannot be excluded.", "Likely {np}.", "Findings may represent {np}.")
"""How an uncertain finding is written: its code is "unknown"; the sentence is abnormal, as in the
paper's example "there is likely left basilar opacity. Label: abnormal."."""

CONTRADICTIONS = (
    ("No {acute}, {np}.", "{NP}. No other {acute}."),
    ("{NP} without {acute} identified.", "{NP}. Otherwise no {acute} is identified."),
    ("Normal examination with {np}.", "{NP}. The examination is otherwise normal."),
)
"""A sentence that says "normal" and states a finding at once, and its rewrite that states the
finding first and confines the "normal" to the rest (the paper's "Cardiomegaly and hiatal hernia.
Without an acute abnormality identified.")."""

_FIELDS = string.Formatter()


def cap(text: str) -> str:
    """``text`` with its first letter in upper case (the rest kept: "L4-L5", "Achilles")."""
    return text[:1].upper() + text[1:]


def fill(template: str, rng: random.Random) -> str:
    """``template`` with every ``{slot}`` replaced by a value of :data:`~.domains.SLOTS`."""
    names = [name for _, name, _, _ in _FIELDS.parse(template) if name]
    return template.format_map({name: rng.choice(SLOTS[name]) for name in dict.fromkeys(names)})


@dataclass(frozen=True, slots=True)
class Phrase:
    """One finding's noun phrase with its slots filled."""

    finding: Finding
    np: str


def pick_phrase(finding: Finding, rng: random.Random) -> Phrase:
    return Phrase(finding, fill(rng.choice(finding.phrases), rng))


def stated(phrase: Phrase, rng: random.Random) -> str:
    form = rng.choice(STATED_FORMS) if phrase.finding.pathology else "{NP}."
    return form.format(NP=cap(phrase.np), np=phrase.np)


def hedged(phrase: Phrase, rng: random.Random) -> str:
    return rng.choice(HEDGED_FORMS).format(NP=cap(phrase.np), np=phrase.np)


def contradiction(phrase: Phrase, domain: Domain, rng: random.Random) -> tuple[str, str]:
    """``(ambiguous sentence, rewrite)`` stating ``phrase`` beside a "normal" claim."""
    sentence, rewrite = rng.choice(CONTRADICTIONS)
    parts = {"NP": cap(phrase.np), "np": phrase.np, "acute": domain.acute}
    return sentence.format_map(parts), rewrite.format_map(parts)


def run_on(first: str, second: str, rng: random.Random) -> tuple[str, str]:
    """``(two sentences without the period between them, the two sentences)``; the second keeps
    its capital half of the time ("No effusion The heart ...", "No effusion the heart ...")."""
    joined = second if rng.random() < 0.5 else second[:1].lower() + second[1:]
    return f"{first.rstrip('.')} {joined}", f"{first} {second}"
