"""Synthetic MedEval sentences: normal or abnormal, unambiguous or ambiguous (with a rewrite).

Each sentence is drawn on its own random stream (seed and index), so the first N sentences are
the same whatever the corpus size. The mix, by design: 35% normal, 35% abnormal (a fifth of them
hedged), and 10% each of the three ambiguity kinds:

* jargon: a normal sentence using "unremarkable", "low normal", "grossly", "anatomic"; the rewrite
  says "normal" (or "in the lower range of normal") plainly; normal;
* contradiction: a "normal" claim and a finding in one sentence; the rewrite states the finding,
  then confines the "normal" to the rest; abnormal;
* grammar: two sentences (about two findings) without the period between them; the rewrite puts
  the period back; abnormal if either sentence is.

A normal sentence negates one finding, two or three at once ("No pneumothorax or pleural
effusion."), or is a plain normal statement. Nearly every sentence is set in a
:class:`~.text.Context` (a dated comparison, a view), applied alike to the sentence and its
rewrite: it changes no label and keeps the sentences distinct, so a split holds (almost) no copy
of a test sentence in train.
"""

from __future__ import annotations

import random
from dataclasses import replace

from clinieval.benchmarks.medeval.items import AmbiguityKind, SentenceItem
from clinieval.benchmarks.medeval.synth.domains import Domain
from clinieval.benchmarks.medeval.synth.text import (
    Context,
    context,
    contradiction,
    hedged,
    negated_noun,
    negation_list,
    pick_phrase,
    run_on,
    stated,
)

__all__ = ["IN_CONTEXT", "KIND_WEIGHTS", "sentence_item"]

KIND_WEIGHTS = {"normal": 35, "abnormal": 35, "jargon": 10, "contradiction": 10, "grammar": 10}
IN_CONTEXT = 0.95
"""The share of sentences set in a :class:`~.text.Context` (each part of a run-on: half); a
sentence of fixed wording (a single negation, a plain normal statement, jargon) always is."""


def _negated_nouns(domain: Domain) -> list[str]:
    """The findings a "No ..." sentence negates, one per finding, for negation lists."""
    return [noun for finding in domain.findings if (noun := negated_noun(finding)) is not None]


def _situated(sentence: str, domain: Domain, rng: random.Random, share: float = IN_CONTEXT) -> str:
    return context(domain, rng).apply(sentence) if rng.random() < share else sentence


def _normal(domain: Domain, rng: random.Random) -> str:
    """An unambiguous normal sentence: one finding's negation, two or three negated at once, or a
    plain normal statement."""
    nouns = _negated_nouns(domain)
    draw = rng.random()
    if draw < 0.35 and len(nouns) >= 2:
        text = negation_list(rng.sample(nouns, rng.choice((2, 2, 3)) if len(nouns) >= 3 else 2), rng)
        return _situated(text, domain, rng)
    if draw < 0.7:
        text = rng.choice([n for f in domain.findings if f.pathology for n in f.negations])
    else:
        text = rng.choice([n.text for n in domain.normals if n.rewrite is None])
    return _situated(text, domain, rng, 1.0)


def _abnormal(domain: Domain, rng: random.Random) -> str:
    """An unambiguous abnormal sentence: a pathology stated, or (one in five) hedged."""
    phrase = pick_phrase(rng.choice([f for f in domain.findings if f.pathology]), rng)
    return _situated(hedged(phrase, rng) if rng.random() < 0.2 else stated(phrase, rng), domain, rng)


def _grammar(domain: Domain, rng: random.Random) -> tuple[str, str, bool]:
    """Two sentences about two different findings, each stated, hedged or negated, run together.
    Negations rather than general normal sentences, so the two never contradict each other."""
    first, second = rng.sample([f for f in domain.findings if f.pathology and f.negations], 2)
    parts: list[str] = []
    abnormal = False
    for finding in (first, second):
        if rng.random() < 0.5:
            parts.append(_situated(rng.choice(finding.negations), domain, rng, IN_CONTEXT / 2))
            continue
        abnormal = True
        phrase = pick_phrase(finding, rng)
        part = hedged(phrase, rng) if rng.random() < 0.2 else stated(phrase, rng)
        parts.append(_situated(part, domain, rng, IN_CONTEXT / 2))
    sentence, rewrite = run_on(parts[0], parts[1], rng)
    return sentence, rewrite, abnormal


def sentence_item(item_id: str, domain: Domain, rng: random.Random) -> SentenceItem:
    """One labelled sentence of ``domain``; its kind is drawn by :data:`KIND_WEIGHTS`."""
    kind = rng.choices(list(KIND_WEIGHTS), weights=list(KIND_WEIGHTS.values()))[0]
    base = SentenceItem(id=item_id, sentence="", domain=domain.name, ambiguous=False)
    if kind == "normal":
        return _with(base, _normal(domain, rng), abnormal=False)
    if kind == "abnormal":
        return _with(base, _abnormal(domain, rng), abnormal=True)
    if kind == "jargon":
        text, rewrite = rng.choice([(n.text, n.rewrite) for n in domain.normals if n.rewrite is not None])
        around = context(domain, rng)
        return _with(base, around.apply(text), abnormal=False, rewrite=around.apply(rewrite), kind="jargon")
    if kind == "contradiction":
        phrase = pick_phrase(rng.choice([f for f in domain.findings if f.pathology]), rng)
        sentence, rewrite = contradiction(phrase, domain, rng)
        around = context(domain, rng, ending=False) if rng.random() < IN_CONTEXT else Context()
        return _with(
            base, around.apply(sentence), abnormal=True, rewrite=around.apply(rewrite), kind="contradiction"
        )
    sentence, rewrite, abnormal = _grammar(domain, rng)
    return _with(base, sentence, abnormal=abnormal, rewrite=rewrite, kind="grammar")


def _with(
    base: SentenceItem,
    sentence: str,
    *,
    abnormal: bool,
    rewrite: str | None = None,
    kind: AmbiguityKind | None = None,
) -> SentenceItem:
    """``base`` with its text and labels; an ambiguity kind makes it ambiguous."""
    if kind is None:
        return replace(base, sentence=sentence, abnormal=abnormal)
    return replace(
        base, sentence=sentence, abnormal=abnormal, ambiguous=True, rewrite=rewrite, ambiguity_kind=kind
    )
