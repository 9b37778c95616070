"""Radiology report text: its sections (FINDINGS, IMPRESSION) and its sentences.

MedEval's report tasks need a report's findings (the input of summarization) and its impression
(the gold summary); its sentence tasks need the sentences of a section. Real reports (MIMIC-CXR's
``sNNNNNNNN.txt`` files) are wrapped at about 80 characters, open with a ``FINAL REPORT`` title,
name their sections in upper case followed by a colon (``FINDINGS:``, ``IMPRESSION:``), vary the
names (``FINDING``, ``IMPRESSIONS``, ``CONCLUSION``) and often lack one section or both. These
functions are plain regular expressions, with no NLP dependency, so that reading 200,000 reports
stays a matter of seconds and gives the same result on every machine.

Section rules. A header is a line that starts (after indentation) with an upper-case name of at
least three letters (letters, digits, spaces and ``/&(),'-``) followed by a colon; the text after
the colon on that line belongs to the section. Title-case names of the findings and impression
(``Findings:``) count too. Inside FINDINGS or IMPRESSION only a known section name
(:data:`SECTION_NAMES`) opens a new section: structured reports label organs there ("LUNGS:
Clear.", "ETT: tip 4 cm above the carina"), and those lines stay findings. Text before the first
header is the preamble (a lone ``FINAL REPORT`` title is dropped). A section's lines are
unwrapped: every run of whitespace becomes one space.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = [
    "FINDINGS_NAMES",
    "IMPRESSION_NAMES",
    "SECTION_NAMES",
    "Sections",
    "normalize_space",
    "parse_sections",
    "split_sentences",
]

FINDINGS_NAMES = frozenset({"FINDINGS", "FINDING", "FINDINGS AND IMPRESSION", "FINDINGS/IMPRESSION"})
"""Section names read as the findings. A combined "findings and impression" section is the
findings only: the report then has no separate summary, so it cannot be a summarization item."""

IMPRESSION_NAMES = frozenset({"IMPRESSION", "IMPRESSIONS", "CONCLUSION", "CONCLUSIONS", "SUMMARY"})
"""Section names read as the impression (the report's own summary of its findings)."""

SECTION_NAMES = (
    FINDINGS_NAMES
    | IMPRESSION_NAMES
    | frozenset(
        {
            "EXAMINATION",
            "EXAM",
            "TYPE OF EXAMINATION",
            "INDICATION",
            "INDICATIONS",
            "CLINICAL INDICATION",
            "HISTORY",
            "CLINICAL HISTORY",
            "CLINICAL INFORMATION",
            "REASON FOR EXAM",
            "REASON FOR EXAMINATION",
            "TECHNIQUE",
            "COMPARISON",
            "COMPARISONS",
            "WET READ",
            "NOTIFICATION",
            "NOTIFICATIONS",
            "RECOMMENDATION",
            "RECOMMENDATIONS",
            "RECOMMENDATION(S)",
            "ADDENDUM",
            "PROVISIONAL FINDINGS IMPRESSION (PFI)",
        }
    )
)
"""Section names that end a FINDINGS or IMPRESSION section (any upper-case header ends the others)."""

_TITLES = frozenset({"FINAL REPORT", "PRELIMINARY REPORT", "ADDENDUM"})
"""Title lines without a colon, dropped from the preamble."""

_UPPER_HEADER = re.compile(r"^\s*(?P<name>[A-Z][A-Z0-9 ,/&()'-]*[A-Z)])[ \t]*:(?P<rest>.*)$")
_ANY_HEADER = re.compile(r"^\s*(?P<name>[A-Za-z][A-Za-z /]*[A-Za-z])[ \t]*:(?P<rest>.*)$")
_SPACE = re.compile(r"\s+")


def normalize_space(text: str) -> str:
    """``text`` unwrapped: every run of whitespace (line breaks included) as one space, trimmed."""
    return _SPACE.sub(" ", text).strip()


def _header(line: str) -> tuple[str, str] | None:
    """``(NAME, rest of the line)`` when ``line`` opens a section, else None."""
    m = _UPPER_HEADER.match(line)
    if m is not None and sum(c.isalpha() for c in m["name"]) >= 3:
        return normalize_space(m["name"]), m["rest"]
    m = _ANY_HEADER.match(line)
    if m is not None:
        name = normalize_space(m["name"]).upper()
        if name in FINDINGS_NAMES or name in IMPRESSION_NAMES:
            return name, m["rest"]
    return None


@dataclass(frozen=True, slots=True)
class Sections:
    """A report cut into ``(NAME, unwrapped text)`` parts, in order; NAME is "" for the preamble."""

    parts: tuple[tuple[str, str], ...]

    def named(self, names: frozenset[str]) -> str:
        """The text of every part whose name is in ``names``, joined (a repeated section, as in an
        addendum, adds to the first)."""
        return " ".join(text for name, text in self.parts if name in names and text)

    @property
    def findings(self) -> str:
        return self.named(FINDINGS_NAMES)

    @property
    def impression(self) -> str:
        return self.named(IMPRESSION_NAMES)

    def text(self) -> str:
        """The whole report, one ``NAME: text`` line per section (the preamble bare): what a model
        reads as "the report", without the file's indentation and line wrapping."""
        lines = [f"{name}: {text}" if name else text for name, text in self.parts]
        return "\n".join(line.rstrip() for line in lines if line.strip())


def parse_sections(text: str) -> Sections:
    """``text`` cut at its section headers (see the module's rules), each section unwrapped."""
    parts: list[tuple[str, list[str]]] = [("", [])]
    inside = FINDINGS_NAMES | IMPRESSION_NAMES
    for line in text.splitlines():
        head = _header(line)
        if head is not None and (parts[-1][0] not in inside or head[0] in SECTION_NAMES):
            parts.append((head[0], [head[1]]))
        elif parts[-1][0] or normalize_space(line).upper() not in _TITLES:
            parts[-1][1].append(line)
    joined = tuple((name, normalize_space(" ".join(lines))) for name, lines in parts)
    return Sections(tuple(p for p in joined if p[0] or p[1]))


# ------------------------------------------------------------------------------ sentences

_NEVER_ENDS = frozenset(
    {"approx", "appr", "eg", "ie", "vs", "v", "dr", "mr", "mrs", "ms", "prof", "st", "fig", "figs", "cf"}
    | {"incl", "esp", "resp", "viz", "al", "ca", "cm2", "sq", "no"}
)
"""Words whose period never ends a sentence ("approx. 3 cm", "e.g. the", "Dr. Smith"). ``no`` is
here for "No. 2"; a sentence that ends in a bare "no." is rare in reports."""

_ENDS_BEFORE_CAPITAL = frozenset({"etc", "am", "pm"})
"""Words whose period ends a sentence only when a capital letter follows ("at 10 a.m. The ...")."""

_BOUNDARY = re.compile(r"[.!?]+[\"')\]]*(?=\s+\S)")
_LIST_LINE = re.compile(r"^\s*\d{1,2}[.)]\s+")
_LEADING_MARKER = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022])(?:\s+|$)")
_WORD_BEFORE = re.compile(r"(\S+)$")


def _chunks(text: str) -> list[str]:
    """``text`` unwrapped into chunks that no sentence crosses: a blank line or a line opening with
    a list number ("2. ...") starts a new chunk, any other line break is wrapping."""
    chunks: list[list[str]] = [[]]
    for line in text.splitlines():
        if not line.strip() or _LIST_LINE.match(line):
            chunks.append([])
        chunks[-1].append(line)
    return [normalize_space(" ".join(c)) for c in chunks if normalize_space(" ".join(c))]


def _list_items(chunk: str) -> list[str]:
    """A chunk that opens with "1." cut before "2.", "3.", ... in turn (an inline numbered list
    whose items may lack periods: "1. No effusion 2. Stable cardiomegaly"); else the chunk."""
    m = re.match(r"1[.)]\s+", chunk)
    if m is None:
        return [chunk]
    items: list[str] = []
    pos, n = m.end(), 2
    while (nxt := re.compile(rf"(?<=\s){n}[.)]\s+(?=\S)").search(chunk, pos)) is not None:
        items.append(chunk[pos : nxt.start()])
        pos, n = nxt.end(), n + 1
    items.append(chunk[pos:])
    return items


def _ends_sentence(text: str, boundary: re.Match[str]) -> bool:
    """Whether the punctuation at ``boundary`` ends a sentence, judged by the word before it."""
    if boundary.group().startswith(("!", "?")):
        return True
    m = _WORD_BEFORE.search(text, 0, boundary.start())
    word = (m.group(1) if m else "").lstrip("([\"'").lower().replace(".", "")
    if word in _NEVER_ENDS:
        return False
    if word in _ENDS_BEFORE_CAPITAL:
        after = text[boundary.end() :].lstrip()
        return after[:1].isupper()
    return True


def _cut(item: str) -> list[str]:
    pieces: list[str] = []
    start = 0
    for boundary in _BOUNDARY.finditer(item):
        if _ends_sentence(item, boundary):
            pieces.append(item[start : boundary.end()])
            start = boundary.end()
    pieces.append(item[start:])
    return pieces


def split_sentences(text: str) -> list[str]:
    """The sentences of a report section, in order, unwrapped and without list numbers.

    A sentence ends at ``.``, ``!`` or ``?`` followed by white space, unless the word before the
    period is an abbreviation (``approx.``, ``e.g.``, ``vs.``, ``Dr.``); decimals ("2.5 cm") and
    "r/o" never end one because no space follows the mark. Lower-case text is split too (MedEval's
    sentences are lower case). Numbered lists ("1. ... 2. ...") are cut at their numbers, on one
    line or on several, with or without periods. A missing period between two sentences ("no
    effusion the heart is normal") is *not* repaired: that is one of MedEval's ambiguity kinds.
    """
    out: list[str] = []
    for chunk in _chunks(text):
        for item in _list_items(chunk):
            for piece in _cut(item):
                sentence = _LEADING_MARKER.sub("", piece).strip()
                if any(c.isalnum() for c in sentence):
                    out.append(sentence)
    return out
