"""Whether a rewrite says anything clinical: a rewrite without content is counted as failed.

ΔAcc_am rewards a rewrite the ambiguity classifier no longer calls ambiguous, and a classifier calls
almost anything short "unambiguous": answering "." earned the best ΔAcc_am a run could get. A
rewrite has to keep the sentence's finding, so one that drops it did not disambiguate anything.
A rewrite is **without content** when it is

* punctuation only (no letter or digit);
* the label alone: every word is a label or prompt field word ("normal", "abnormal",
  "ambiguous", "unambiguous", "diagnostic", "label", "rewrite", "sentence"), e.g.
  "Diagnostic: Normal." (case does not matter);
* fewer than three words (a word is a run of letters or digits);
* sharing none of the original sentence's **finding words**: its lower-cased alphabetic tokens of
  three letters or more that are neither stop words nor label/prompt words. Two words match when
  they are equal, one is the start of the other ("lung"/"lungs"), or they share their first five
  letters ("opacity"/"opacities"); a few anatomical synonyms a rewrite may swap in (osseous/bone,
  cardiac/heart, pulmonary/lung, renal/kidney, ...) match too. A sentence with no finding word
  (only stop and label words) skips this check.

Such a rewrite is measured as the original sentence (it adds 0 to both deltas), as a failed call
is, and is counted apart from failed calls (``rewrites_without_content``); its answer is
unqualified, so it scores 0 in the counted-wrong view.
"""

from __future__ import annotations

import re

from clinieval.ehr.retrieval import ENGLISH_STOPWORDS

LABEL_WORDS = frozenset(
    {"normal", "abnormal", "ambiguous", "unambiguous", "diagnostic", "label", "rewrite", "sentence"}
)
"""The labels the rewriting prompt carries and its field names: a rewrite of only these (and stop
words) restates the prompt, not the finding."""

STOP_WORDS = ENGLISH_STOPWORDS | {"within", "without", "not", "nor", "also"}
STOP_WORDS |= {"seen", "noted", "identified", "appear", "appears", "appearing"}
"""The project's English function words (the BM25 retriever's list, :data:`ENGLISH_STOPWORDS`),
plus the negations it keeps on purpose and the few verbs radiology sentences use only to state a
finding ("seen", "noted", "identified", "appears"): none of them carries a finding here."""

_SYNONYMS = (
    ("osseous", "bone"),
    ("bony", "bone"),
    ("skeletal", "bone"),
    ("cardiac", "heart"),
    ("pulmonary", "lung"),
    ("renal", "kidney"),
    ("hepatic", "liver"),
    ("splenic", "spleen"),
)
_CANONICAL = dict(_SYNONYMS)
_WORD = re.compile(r"[A-Za-z0-9]+")
_ALPHA = re.compile(r"[a-z]+")
PREFIX = 5
"""Letters two words must share at the start to match ("effusion"/"effusions", "opacity"/"opacities")."""


def finding_words(text: str) -> set[str]:
    """The finding words of ``text`` (see the module docstring), each as its canonical synonym."""
    tokens = _ALPHA.findall(text.lower())
    kept = (t for t in tokens if len(t) >= 3 and t not in STOP_WORDS and t not in LABEL_WORDS)
    return {_CANONICAL.get(t, t) for t in kept}


def _same(a: str, b: str) -> bool:
    short, long = sorted((a, b), key=len)
    return long.startswith(short) or (a[:PREFIX] == b[:PREFIX] and len(short) >= PREFIX)


def without_content(rewrite: str, original: str) -> str | None:
    """Why a (non-empty) rewrite of ``original`` has no clinical content, None when it has some."""
    words = [w.lower() for w in _WORD.findall(rewrite)]
    if not words:
        return "punctuation only"
    if all(w in LABEL_WORDS for w in words):
        return "the label alone"
    if len(words) < 3:
        return "fewer than three words"
    asked = finding_words(original)
    if asked and not any(_same(a, b) for a in asked for b in finding_words(rewrite)):
        return "none of the sentence's finding words"
    return None
