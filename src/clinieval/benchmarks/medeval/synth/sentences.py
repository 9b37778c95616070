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
"""

from __future__ import annotations

import random
from dataclasses import replace

from clinieval.benchmarks.medeval.records import AmbiguityKind, SentenceItem
from clinieval.benchmarks.medeval.synth.domains import Domain
from clinieval.benchmarks.medeval.synth.text import contradiction, hedged, pick_phrase, run_on, stated

__all__ = ["KIND_WEIGHTS", "sentence_item"]

KIND_WEIGHTS = {"normal": 35, "abnormal": 35, "jargon": 10, "contradiction": 10, "grammar": 10}


def _normal(domain: Domain, rng: random.Random) -> str:
    """An unambiguous normal sentence: a finding's negation or a plain normal statement."""
    pool = [n for f in domain.findings if f.pathology for n in f.negations]
    pool += [n.text for n in domain.normals if n.rewrite is None]
    return rng.choice(pool)


def _abnormal(domain: Domain, rng: random.Random) -> str:
    """An unambiguous abnormal sentence: a pathology stated, or (one in five) hedged."""
    phrase = pick_phrase(rng.choice([f for f in domain.findings if f.pathology]), rng)
    return hedged(phrase, rng) if rng.random() < 0.2 else stated(phrase, rng)


def _grammar(domain: Domain, rng: random.Random) -> tuple[str, str, bool]:
    """Two sentences about two different findings, each stated, hedged or negated, run together.
    Negations rather than general normal sentences, so the two never contradict each other."""
    first, second = rng.sample([f for f in domain.findings if f.pathology and f.negations], 2)
    parts: list[str] = []
    abnormal = False
    for finding in (first, second):
        if rng.random() < 0.5:
            parts.append(rng.choice(finding.negations))
            continue
        abnormal = True
        phrase = pick_phrase(finding, rng)
        parts.append(hedged(phrase, rng) if rng.random() < 0.2 else stated(phrase, rng))
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
        jargon = rng.choice([n for n in domain.normals if n.rewrite is not None])
        return _with(base, jargon.text, abnormal=False, rewrite=jargon.rewrite, kind="jargon")
    if kind == "contradiction":
        phrase = pick_phrase(rng.choice([f for f in domain.findings if f.pathology]), rng)
        sentence, rewrite = contradiction(phrase, domain, rng)
        return _with(base, sentence, abnormal=True, rewrite=rewrite, kind="contradiction")
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
