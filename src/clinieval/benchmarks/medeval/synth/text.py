"""Sentence forms shared by the synthetic sentences and reports: stated, hedged, contradictory,
run-on. Each ambiguous form comes with its faithful rewrite, written from the same parts, so the
rewrite keeps the finding (and the normal/abnormal label) and only removes the ambiguity.

A :class:`Context` sets a sentence in its examination: a comparison with a dated earlier one
("Compared with the radiograph of March 3, 2019, ...") and where in the images it looks ("... on
the lateral view"). It changes no finding, so no label; it is what keeps the synthetic sentences
distinct from one another (a copy of a test sentence in train would leak its label).
"""

from __future__ import annotations

import functools
import random
import re
import string
from dataclasses import dataclass

from clinieval.benchmarks.medeval.synth.domains import SLOTS, Domain, Finding

__all__ = [
    "COMPARISONS",
    "CONTRADICTIONS",
    "HEDGED_FORMS",
    "MONTHS",
    "NEGATION_LISTS",
    "STATED_FORMS",
    "YEARS",
    "Context",
    "Phrase",
    "cap",
    "context",
    "contradiction",
    "decap",
    "fill",
    "hedged",
    "negated_noun",
    "negation_list",
    "pick_phrase",
    "prior_study",
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


COMPARISONS = (
    ("Compared with the {study} of {date}, ", ", compared with the {study} of {date}"),
    ("As on the {study} of {date}, ", ", as on the {study} of {date}"),
    ("In comparison with the {study} from {date}, ", " in comparison with the {study} from {date}"),
)
"""A comparison with an earlier examination, as the sentence's opening or its end."""

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
YEARS = tuple(range(2009, 2024))

NEGATION_LISTS = (
    "No {list}.",
    "There is no {list}.",
    "No {list} seen.",
    "No {list} identified.",
    "No evidence of {list}.",
)
"""How two or three negated findings are written in one sentence ("No a, b or c is seen.")."""


def decap(text: str) -> str:
    """``text`` with its first letter in lower case, unless its first word is an abbreviation or
    a level ("CT", "L4-L5", "T12 ...") that keeps its capital."""
    if len(text) > 1 and (text[1].islower() or text[1] == " "):
        return text[:1].lower() + text[1:]
    return text


@dataclass(frozen=True, slots=True)
class Context:
    """What a sentence gets around it: an opening (before its first word) and an ending (before its
    final period). Neither states, hedges nor negates a finding."""

    opening: str = ""
    ending: str = ""

    def apply(self, sentence: str) -> str:
        """``sentence`` (one or more sentences, the last ending in a period) in this context."""
        body = sentence[:-1] if sentence.endswith(".") else sentence
        if self.opening:
            body = self.opening + decap(body)
        return f"{body}{self.ending}."


def context(domain: Domain, rng: random.Random, *, ending: bool = True) -> Context:
    """A comparison with an earlier, dated examination of ``domain`` and, a third of the time, a
    view; the comparison opens the sentence or (when ``ending``) closes it. Without ``ending``
    only an opening is given (for sentences whose rewrite is two sentences: the opening then
    covers both)."""
    view = fill(rng.choice(domain.views), rng) if ending and domain.views and rng.random() < 0.35 else ""
    opening, closing = rng.choice(COMPARISONS)
    date = f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, {rng.choice(YEARS)}"
    parts = {"study": rng.choice(domain.studies), "date": date}
    if ending and rng.random() < 0.5:
        return Context(ending=(f" {view}" if view else "") + closing.format_map(parts))
    return Context(opening=opening.format_map(parts), ending=f" {view}" if view else "")


_NEGATED = re.compile(r"No (?P<noun>[a-z][^,.]*)\.")


@functools.cache
def negated_noun(finding: Finding) -> str | None:
    """The noun a finding's first plain "No ..." negation names, for negation lists; None when it
    has none (nouns with an "or" of their own or an "evidence of" would not list cleanly)."""
    for text in finding.negations if finding.pathology else ():
        m = _NEGATED.fullmatch(text)
        if m and " or " not in m["noun"] and "evidence" not in m["noun"]:
            return m["noun"]
    return None


def prior_study(domain: Domain, rng: random.Random) -> str:
    """An earlier, dated examination of ``domain`` ("the chest radiograph of March 3, 2019")."""
    date = f"{rng.choice(MONTHS)} {rng.randint(1, 28)}, {rng.choice(YEARS)}"
    return f"the {rng.choice(domain.studies)} of {date}"


def negation_list(nouns: list[str], rng: random.Random) -> str:
    """Two or three negated findings in one sentence ("No pneumothorax or pleural effusion.")."""
    listed = nouns[0] if len(nouns) == 1 else ", ".join(nouns[:-1]) + " or " + nouns[-1]
    return rng.choice(NEGATION_LISTS).format(list=listed)
