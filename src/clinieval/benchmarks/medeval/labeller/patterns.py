"""The CheXpert labeler's negation and uncertainty patterns, read for their vocabulary.

CheXpert classifies a mention with Semgrex patterns over a dependency parse, in three files read in
three passes (``patterns/pre_negation_uncertainty.txt``, ``negation.txt``,
``post_negation_uncertainty.txt``). No parser runs here, so the patterns cannot be run; what they
are made of can be used. Each pattern names its words as lemmas (``{lemma:/normal|unremarkable/}``)
and some through a dependency label (``{dependency:/neg/}`` is "not", ``conj:or`` is "or",
``nmod:without`` is "without"). This module reads those words, per file, in place: which ConText
triggers are on, and in which of the three passes, is then decided by these words
(:func:`~.modifiers.context_for`); how each word is written in a report and which way its scope
runs is the lexicon's part (:data:`~.modifiers.LEXICON`).

One more thing is read from the files: the words that name a structure ("heart", "silhouette",
"contour", ...), which the post-negation file lists as the subject of its "stable / unchanged /
similar to prior" patterns. A stable structure is uncertain there; a stable finding is positive.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from clinieval.datasets import UNDECODABLE, not_utf8
from clinieval.errors import UserError

PRE_NEGATION_FILE = "pre_negation_uncertainty.txt"
NEGATION_FILE = "negation.txt"
POST_NEGATION_FILE = "post_negation_uncertainty.txt"
PATTERN_FILES = (PRE_NEGATION_FILE, NEGATION_FILE, POST_NEGATION_FILE)
"""In CheXpert's order of passes: uncertainty that wins over negation, negation, uncertainty."""

LEMMAS = re.compile(r"lemma:/([^/]*)/")
RELATIONS = re.compile(r"dependency:/([^/]*)/")
FIRST_NODE = re.compile(r"\{lemma:/([^/]*)/\}")

RELATION_WORDS: Mapping[str, str] = {"neg": "not"}
"""Dependency labels that stand for a word. A preposition or conjunction label with its word after
the colon (``nmod:without``, ``conj:or``) stands for that word; the others (``nsubj``, ``amod``,
``acl:relcl``, ...) for none."""
WORD_LABELS = frozenset({"nmod", "conj", "obl"})

STABLE_LEMMAS = frozenset({"stable", "unchanged", "similar", "change"})
"""The lemmas of CheXpert's "stable structure" patterns, whose subjects are the structure words."""


@dataclass(frozen=True, slots=True)
class Vocabulary:
    """The words of each pattern file, and the structure words."""

    words: Mapping[str, frozenset[str]]
    """Pattern file name -> the words its patterns use."""
    structures: frozenset[str]
    source: str


def lemma_words(alternation: str) -> list[str]:
    """``normal|unremarkable`` -> both; ``limit.*`` -> ``limit``; ``and.or`` -> ``and.or``."""
    words = []
    for raw in alternation.split("|"):
        word = raw.strip().lower().removesuffix(".*").removesuffix("*")
        if word:
            words.append(word)
    return words


def relation_words(alternation: str) -> list[str]:
    """``neg`` -> ``not``; ``nmod:without|nmod:of`` -> ``without``, ``of``; ``nsubj`` -> none."""
    words = []
    for raw in alternation.split("|"):
        label = raw.strip().lower()
        if label in RELATION_WORDS:
            words.append(RELATION_WORDS[label])
        elif label.partition(":")[0] in WORD_LABELS and label.partition(":")[2]:
            words.append(label.partition(":")[2])
    return words


def pattern_lines(path: Path) -> list[str]:
    """The patterns of one file: non-blank lines that are no ``#`` comment."""
    try:
        text = path.read_bytes().decode("utf-8", errors="surrogateescape")
    except OSError as e:
        raise UserError(f"{path}: cannot read ({e.strerror or e})") from None
    lines = []
    for n, line in enumerate(text.splitlines(), 1):
        if UNDECODABLE.search(line):
            raise not_utf8(path, n)
        if line.strip() and not line.lstrip().startswith("#"):
            lines.append(line.strip())
    return lines


def line_words(line: str) -> set[str]:
    words = {w for alt in LEMMAS.findall(line) for w in lemma_words(alt)}
    return words | {w for alt in RELATIONS.findall(line) for w in relation_words(alt)}


def read_vocabulary(folder: Path) -> Vocabulary:
    """The vocabulary of the three pattern files in ``folder`` (CheXpert's ``patterns``)."""
    missing = [name for name in PATTERN_FILES if not (folder / name).is_file()]
    if missing:
        raise UserError(f"{folder / missing[0]}: not found (the labeler's patterns folder has three files)")
    words: dict[str, frozenset[str]] = {}
    structures: set[str] = set()
    for name in PATTERN_FILES:
        found: set[str] = set()
        for line in pattern_lines(folder / name):
            these = line_words(line)
            found |= these
            first = FIRST_NODE.match(line)
            if name == POST_NEGATION_FILE and first is not None and these & STABLE_LEMMAS:
                structures.update(lemma_words(first.group(1)))
        words[name] = frozenset(found)
    return Vocabulary(words, frozenset(structures), str(folder))


def patterns_dir(phrases: Path) -> Path | None:
    """The ``patterns`` folder beside a CheXpert ``phrases`` folder, if there is one."""
    folder = phrases.parent / "patterns"
    return folder if folder.is_dir() else None
