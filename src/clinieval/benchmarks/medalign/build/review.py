"""The blinded relevance review of step 2: write it (with its key) and read it back, checked.

Reviewers judge relevance without knowing where a candidate came from: :func:`write_review` lists
an instruction's candidates in a seeded shuffled order with no source, and writes the key that
un-blinds them to a separate file. Reading the filled review back pairs it with that key and
refuses anything that does not fit (a row not in the key, a missing row, a judgement other than
1/0/empty), so :mod:`.evaluate` only ever scores a consistent pair.

File formats (UTF-8 CSV with a header line; a byte-order mark from Excel is accepted):

* review (:data:`REVIEW_COLUMNS`): one row per candidate; reviewers fill ``relevant`` with 1 or 0.
* key (:data:`KEY_COLUMNS`): one row per candidate; ``source`` is ``bm25``, ``random`` or
  ``bm25+random`` (possible only with ``random_pool="cohort"``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medalign.build.instructions import read_instructions
from clinieval.benchmarks.medalign.build.matching import (
    DEFAULT_K,
    Match,
    RandomPool,
    build_cohort_index,
    match_instructions,
)
from clinieval.benchmarks.medalign.build.tables import (
    CsvRow,
    CsvTable,
    read_table,
    refuse_overwrite,
    sibling_path,
)
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_csv, spreadsheet_text

__all__ = [
    "KEY_COLUMNS",
    "REVIEW_COLUMNS",
    "KeyEntry",
    "MatchSummary",
    "check_same_candidates",
    "key_path",
    "match_file",
    "read_key",
    "read_review",
    "write_review",
]

REVIEW_COLUMNS = (
    "instruction_id",
    "question",
    "patient_characteristics",
    "clinical_context",
    "candidate",
    "ehr",
    "relevant",
)
KEY_COLUMNS = ("instruction_id", "ehr", "source", "bm25_rank", "bm25_score", "random_rank")


def key_path(review: str | Path) -> Path:
    """Where :func:`write_review` puts the un-blinding key: ``review.csv`` → ``review.key.csv``."""
    return sibling_path(Path(review), "key")


def _review_rows(matches: Sequence[Match]) -> Iterator[dict[str, object]]:
    for m in matches:
        ins = m.instruction
        for n, ehr in enumerate(m.shown, 1):
            yield {
                "instruction_id": ins.instruction_id,
                "question": ins.question,
                "patient_characteristics": ins.patient_characteristics,
                "clinical_context": ins.clinical_context,
                "candidate": n,
                "ehr": ehr,
                "relevant": "",
            }


def _key_rows(matches: Sequence[Match]) -> Iterator[dict[str, object]]:
    for m in matches:
        bm25 = {ehr: (rank, score) for rank, (ehr, score) in enumerate(m.bm25, 1)}
        drawn = {ehr: rank for rank, ehr in enumerate(m.random, 1)}
        for ehr in sorted(m.shown, key=lambda e: (e not in bm25, bm25.get(e, (0, 0.0))[0], drawn.get(e, 0))):
            rank, score = bm25.get(ehr, (None, None))
            yield {
                "instruction_id": m.instruction.instruction_id,
                "ehr": ehr,
                "source": _source(rank, drawn.get(ehr)),
                "bm25_rank": "" if rank is None else rank,
                "bm25_score": "" if score is None else repr(score),
                "random_rank": drawn.get(ehr, ""),
            }


def _source(bm25_rank: int | None, random_rank: int | None) -> str:
    return "+".join(name for name, r in (("bm25", bm25_rank), ("random", random_rank)) if r is not None)


def write_review(matches: Sequence[Match], out: str | Path) -> Path:
    """Write the blinded review CSV to ``out`` and its key to :func:`key_path` ``(out)``; return the key.

    The review (:data:`REVIEW_COLUMNS`) shows each instruction's candidates once, in the seeded
    shuffled order, numbered from 1, with an empty ``relevant`` column to fill with 1 or 0, and
    nothing that tells BM25 from random. The key (:data:`KEY_COLUMNS`) holds the source, BM25 rank
    and score, and random draw order of every candidate. Both are written atomically.
    """
    review = Path(out)
    key = key_path(review)
    atomic_write_csv(key, KEY_COLUMNS, _key_rows(matches))  # read by clinieval only
    atomic_write_csv(review, REVIEW_COLUMNS, _review_rows(matches), spreadsheet_safe=True)
    return key


@dataclass(frozen=True, slots=True)
class MatchSummary:
    """What :func:`match_file` did, for the command line to print."""

    n_instructions: int
    n_ehrs: int
    k: int
    n_candidates: int
    n_short: int  # instructions for which BM25 returned fewer than k EHRs
    review: Path
    key: Path

    def summary(self) -> str:
        short = f"; BM25 found fewer than {self.k} for {self.n_short}" if self.n_short else ""
        return (
            f"{self.n_instructions} instructions x {self.n_ehrs} EHRs: {self.n_candidates} candidates "
            f"to judge (BM25 top {self.k} + {self.k} random, shuffled{short}) -> {self.review}; "
            f"key (keep it from reviewers) -> {self.key}"
        )


def match_file(
    instructions: str | Path,
    ehr_dir: str | Path,
    out: str | Path,
    *,
    k: int = DEFAULT_K,
    seed: int = 0,
    random_pool: RandomPool = "cohort",
    stopwords: bool = False,
) -> MatchSummary:
    """Read the instructions CSV, index the EHR folder, match, and write the review and its key."""
    source, review = Path(instructions), Path(out)
    refuse_overwrite(source, review, key_path(review))
    items = read_instructions(source)
    index, ehrs = build_cohort_index(ehr_dir, stopwords=stopwords)
    matches = match_instructions(items, index, k=k, seed=seed, random_pool=random_pool)
    key = write_review(matches, review)
    return MatchSummary(
        n_instructions=len(matches),
        n_ehrs=len(ehrs),
        k=k,
        n_candidates=sum(len(m.shown) for m in matches),
        n_short=sum(len(m.bm25) < k for m in matches),
        review=review,
        key=key,
    )


@dataclass(frozen=True, slots=True)
class KeyEntry:
    ehr: str
    bm25_rank: int | None
    random_rank: int | None
    line: int


def _rank(table: CsvTable, row: CsvRow, column: str) -> int | None:
    text = row.cells[column].strip()
    if not text:
        return None
    # isdigit alone takes '²'; over 18 digits is no rank (and over 4,300 int() refuses outright)
    if not (text.isascii() and text.isdigit()) or len(text) > 18 or int(text) < 1:
        shown = text if len(text) <= 40 else f"{text[:20]}... ({len(text)} characters)"
        raise UserError(f"{table.at(row, column)}: {shown!r} is not a rank (1, 2, ...) or empty")
    return int(text)


def _key_entry(table: CsvTable, row: CsvRow) -> KeyEntry:
    bm25, drawn = _rank(table, row, "bm25_rank"), _rank(table, row, "random_rank")
    source = _source(bm25, drawn)
    if not source:
        raise UserError(f"{table.path}:{row.line}: neither bm25_rank nor random_rank is set")
    if row.cells["source"].strip() != source:
        raise UserError(
            f"{table.at(row, 'source')}: {row.cells['source']!r} disagrees with the ranks ({source})"
        )
    return KeyEntry(row.cells["ehr"].strip(), bm25, drawn, row.line)


def _check_ranks(path: Path, iid: str, ranks: list[int], what: str) -> None:
    if sorted(ranks) != list(range(1, len(ranks) + 1)):
        raise UserError(f"{path}: instruction {iid!r}: {what} ranks {sorted(ranks)} are not 1..{len(ranks)}")


def read_key(path: Path) -> dict[str, list[KeyEntry]]:
    """The key by instruction (file order), validated so that ranks are exactly 1..n."""
    table = read_table(path, KEY_COLUMNS, "matching key")
    key: dict[str, list[KeyEntry]] = {}
    seen: dict[tuple[str, str], int] = {}
    for row in table.rows:
        iid, entry = row.cells["instruction_id"].strip(), _key_entry(table, row)
        if (iid, entry.ehr) in seen:
            raise UserError(f"{path}:{row.line}: {iid!r} / {entry.ehr!r} repeats line {seen[iid, entry.ehr]}")
        seen[iid, entry.ehr] = row.line
        key.setdefault(iid, []).append(entry)
    if not key:
        raise UserError(f"{path}: the key lists no candidates")
    for iid, entries in key.items():
        _check_ranks(path, iid, [e.bm25_rank for e in entries if e.bm25_rank is not None], "bm25")
        _check_ranks(path, iid, [e.random_rank for e in entries if e.random_rank is not None], "random")
    return key


def _judgement(table: CsvTable, row: CsvRow) -> bool | None:
    text = row.cells["relevant"].strip()
    if text in ("0", "1"):
        return text == "1"
    if not text:
        return None
    raise UserError(
        f"{table.at(row, 'relevant')}: {text!r} is not 1 (relevant), 0 (not relevant) "
        "or empty (not judged yet)"
    )


def read_review(path: Path) -> dict[tuple[str, str], tuple[int, bool | None]]:
    """``(instruction_id, ehr) → (line, judgement)``; None for a cell not filled in yet."""
    table = read_table(path, ("instruction_id", "ehr", "relevant"), "relevance review")
    out: dict[tuple[str, str], tuple[int, bool | None]] = {}
    for row in table.rows:
        iid, ehr = (spreadsheet_text(row.cells[c].strip()) for c in ("instruction_id", "ehr"))
        pair = (iid, ehr)
        if pair in out:
            raise UserError(f"{path}:{row.line}: {pair[0]!r} / {pair[1]!r} repeats line {out[pair][0]}")
        out[pair] = (row.line, _judgement(table, row))
    return out


def check_same_candidates(
    review_path: Path, key_path_: Path, key: dict[str, list[KeyEntry]], review: Mapping[tuple[str, str], Any]
) -> None:
    """The review and the key must list the same candidates: anything else is a mixed-up file."""
    listed = {(iid, e.ehr) for iid, entries in key.items() for e in entries}
    extra = [(line, pair) for pair, (line, _) in review.items() if pair not in listed]
    if extra:
        line, (iid, ehr) = min(extra)
        raise UserError(
            f"{review_path}:{line}: instruction {iid!r}, EHR {ehr!r} is not in the key {key_path_} "
            f"({len(extra)} such rows); is this the key written with this review?"
        )
    lost = [
        (e.line, iid, e.ehr) for iid, entries in key.items() for e in entries if (iid, e.ehr) not in review
    ]
    if lost:
        line, iid, ehr = min(lost)
        raise UserError(
            f"{review_path}: {len(lost)} candidates of the key are missing, first instruction {iid!r}, "
            f"EHR {ehr!r} ({key_path_}:{line}); restore those rows"
        )
