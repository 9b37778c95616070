"""Build a MedAlign-style dataset: drop near-duplicate instructions, match instructions to EHRs.

MedAlign (Fleming et al., AAAI 2024) built its benchmark in steps this module reproduces:

1. **Near-duplicate removal** (:func:`dedupe_instructions`). An instruction is dropped when its
   ROUGE-L F-measure with an earlier *kept* instruction exceeds 0.7. ROUGE-L is rouge-score's
   ``RougeScorer(["rougeL"])`` F-measure to the last bit: rouge-score's own tokeniser, the same LCS
   length (:func:`clinieval.scoring.text.overlap.lcs_length`) and the same F-measure arithmetic. Comparing
   all pairs exactly is quadratic in slow Python steps, so every instruction is first compared with
   all earlier ones through an upper bound that one sparse matrix product gives for a whole block
   of pairs at once: an LCS is never longer than the two token sequences' multiset overlap (the
   tokens they share, repeats counted), hence ``F = 2·LCS/(m+n) ≤ 2·overlap/(m+n) ≤ 2·min(m,n)/(m+n)``
   (the last being the length-ratio bound, which the overlap bound therefore subsumes). The exact
   LCS runs only for pairs whose bound exceeds the threshold, best bound first, and stops as soon as
   no remaining bound can beat the best similarity found.

2. **Instruction→EHR matching** (:func:`match_instructions`). The query is the instruction plus the
   patient characteristics and clinical context its author gave; BM25Okapi ranks the cohort's
   patients (one document per patient XML file) and the top K are the candidates. K patients drawn
   uniformly at random (seeded) are the baseline. Reviewers judge relevance without knowing where a
   candidate came from: :func:`write_review` lists an instruction's candidates in a seeded shuffled
   order with no source, and writes the key that un-blinds them to a separate file.

3. **Scoring the review** (:func:`score_matching`): success@K (a relevant EHR among the first K) and
   MRR@K (1/rank of the first relevant EHR within K, else 0), averaged over instructions, for BM25
   in rank order and for the random baseline in draw order.

File formats (all UTF-8 CSV with a header line; a byte-order mark from Excel is accepted):

* instructions: ``instruction_id``, ``question``, optionally ``patient_characteristics`` and
  ``clinical_context``; other columns are carried along untouched.
* review (:data:`REVIEW_COLUMNS`): one row per candidate; reviewers fill ``relevant`` with 1 or 0.
* key (:data:`KEY_COLUMNS`): one row per candidate; ``source`` is ``bm25``, ``random`` or
  ``bm25+random`` (possible only with ``random_pool="cohort"``).
* removed near-duplicates (:data:`REMOVED_COLUMNS`), written beside the kept instructions.
"""

from __future__ import annotations

import csv
import functools
import random
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import numpy as np

from clinieval.ehr.medalign_xml import read_xml
from clinieval.ehr.retrieval import BM25Index, Document, patient_document
from clinieval.errors import UserError
from clinieval.fsutil import atomic_open
from clinieval.scoring.text.overlap import RougeTokenizer, lcs_length

__all__ = [
    "DEFAULT_K",
    "DEFAULT_THRESHOLD",
    "KEY_COLUMNS",
    "REMOVED_COLUMNS",
    "REVIEW_COLUMNS",
    "Dedupe",
    "Duplicate",
    "Instruction",
    "Match",
    "MatchSummary",
    "MatchingScores",
    "MethodScores",
    "build_cohort_index",
    "dedupe_file",
    "dedupe_instructions",
    "key_path",
    "match_file",
    "match_instructions",
    "read_instructions",
    "removed_path",
    "rouge_l",
    "rouge_tokens",
    "score_matching",
    "write_review",
]

DEFAULT_THRESHOLD = 0.7
"""MedAlign's near-duplicate cut-off: ROUGE-L F-measure above it means a duplicate."""

DEFAULT_K = 5
"""MedAlign's number of BM25 candidates per instruction (and of random ones)."""

QUERY_COLUMNS = ("question", "patient_characteristics", "clinical_context")
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
REMOVED_COLUMNS = ("instruction_id", "duplicate_of", "rougeL", "question", "duplicate_of_question")

RandomPool = Literal["rest", "cohort"]
"""Where the random baseline draws from: the cohort minus the BM25 candidates, or all of it."""

_EPS = 1e-9  # slack between a float bound and a float F-measure computed another way
_BLOCK = 256  # instructions per sparse product in the dedupe: ~10 MB of overlaps at 10k


# ---------------------------------------------------------------------------------------------
# CSV tables with line numbers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Row:
    line: int  # the file line the record starts on (the header is line 1)
    cells: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Table:
    path: Path
    header: tuple[str, ...]
    rows: list[_Row]

    def at(self, row: _Row, column: str) -> str:
        """``file:line:column`` for a cell, so an error message points at what to fix."""
        return f"{self.path}:{row.line}:{self.header.index(column) + 1} (column {column!r})"


def _read_table(path: Path, required: Sequence[str], what: str) -> _Table:
    """A CSV file as rows of named cells; every problem is a UserError naming file and line."""
    if not path.is_file():
        state = "is not a file" if path.exists() else "not found"
        raise UserError(f"{what} file {path} {state}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return _parse_table(path, csv.reader(f), required, what)
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path} is not UTF-8 text (bad byte at offset {e.start}); save it as UTF-8 CSV"
        ) from None


def _next_record(path: Path, reader: Any) -> list[str] | None:
    try:
        record: list[str] = next(reader)
    except StopIteration:
        return None
    except csv.Error as e:
        raise UserError(f"{path}:{reader.line_num}: not readable as CSV ({e})") from None
    return record


def _parse_table(path: Path, reader: Any, required: Sequence[str], what: str) -> _Table:
    first = _next_record(path, reader)
    if first is None or not any(c.strip() for c in first):
        raise UserError(f"{path} is empty: the {what} CSV starts with a header naming {', '.join(required)}")
    header = tuple(c.strip() for c in first)
    repeated = sorted(c for c, n in Counter(header).items() if c and n > 1)
    if repeated:
        raise UserError(f"{path}:1: column(s) {', '.join(map(repr, repeated))} appear more than once")
    missing = [c for c in required if c not in header]
    if missing:
        raise UserError(
            f"{path}: no column {', '.join(map(repr, missing))} (the {what} CSV needs "
            f"{', '.join(required)}); its header is: {', '.join(header)}"
        )
    rows: list[_Row] = []
    while True:
        start = reader.line_num + 1
        record = _next_record(path, reader)
        if record is None:
            return _Table(path, header, rows)
        if not any(c.strip() for c in record):
            continue  # blank lines and Excel's all-empty rows
        if len(record) != len(header):
            raise UserError(f"{path}:{start}: {len(record)} fields, but the header has {len(header)}")
        rows.append(_Row(start, dict(zip(header, record, strict=True))))


def _write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> None:
    """Write a CSV atomically: a crash leaves the old file or the complete new one."""
    with atomic_open(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


# ---------------------------------------------------------------------------------------------
# Instructions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Instruction:
    """One clinician instruction, with the optional context MedAlign's matching query adds.

    ``row`` keeps every cell of the source CSV row so a filtered file can be written back as is.
    """

    instruction_id: str
    question: str
    patient_characteristics: str = ""
    clinical_context: str = ""
    line: int = 0
    row: Mapping[str, str] = field(default_factory=dict, compare=False, repr=False)

    def query(self) -> str:
        """The BM25 query: instruction, patient characteristics and clinical context."""
        parts = (self.question, self.patient_characteristics, self.clinical_context)
        return "\n".join(p for p in parts if p.strip())


def _read_instruction_table(path: Path) -> tuple[_Table, list[Instruction]]:
    table = _read_table(path, ("instruction_id", "question"), "instructions")
    seen: dict[str, int] = {}
    out: list[Instruction] = []
    for row in table.rows:
        iid = row.cells["instruction_id"].strip()
        if not iid:
            raise UserError(f"{table.at(row, 'instruction_id')}: empty instruction_id")
        if iid in seen:
            raise UserError(
                f"{table.at(row, 'instruction_id')}: instruction_id {iid!r} repeats line {seen[iid]}"
            )
        seen[iid] = row.line
        question = row.cells["question"].strip()
        if not question:
            raise UserError(f"{table.at(row, 'question')}: empty question for instruction {iid!r}")
        characteristics = row.cells.get("patient_characteristics", "").strip()
        context = row.cells.get("clinical_context", "").strip()
        out.append(Instruction(iid, question, characteristics, context, line=row.line, row=row.cells))
    if not out:
        raise UserError(f"{path}: no instructions below the header")
    return table, out


def read_instructions(path: str | Path) -> list[Instruction]:
    """The instructions of a CSV (``instruction_id``, ``question``, optional
    ``patient_characteristics`` and ``clinical_context``), in file order.

    A missing file or column, an empty id or question, or a repeated id is a UserError naming the
    file and line (and the header the file has, for a missing column).
    """
    return _read_instruction_table(Path(path))[1]


# ---------------------------------------------------------------------------------------------
# ROUGE-L and near-duplicate removal
# ---------------------------------------------------------------------------------------------


@functools.cache
def _tokenizer(use_stemmer: bool) -> RougeTokenizer:
    return RougeTokenizer(use_stemmer)


def rouge_tokens(text: str, *, use_stemmer: bool = False) -> list[str]:
    """rouge-score's tokens (lowercase ``[a-z0-9]`` runs; Porter stems of words over 3 characters
    with ``use_stemmer``), so similarities equal rouge-score's."""
    return _tokenizer(use_stemmer).tokenize(text)


def _f_measure(a: Sequence[str], b: Sequence[str], lcs: int | None = None) -> float:
    """rouge-score's ROUGE-L F with ``a`` as target, ``b`` as prediction: the same float operations
    (it is symmetric: doubling is exact and ``+`` and ``*`` commute)."""
    if not a or not b:
        return 0.0
    common = lcs_length(a, b) if lcs is None else lcs
    precision, recall = common / len(b), common / len(a)
    if precision + recall <= 0:
        return 0.0
    return 2 * precision * recall / (precision + recall)


def rouge_l(a: str, b: str, *, use_stemmer: bool = False) -> float:
    """ROUGE-L F-measure of two texts, equal to ``RougeScorer(["rougeL"]).score(a, b)["rougeL"].fmeasure``."""
    return _f_measure(rouge_tokens(a, use_stemmer=use_stemmer), rouge_tokens(b, use_stemmer=use_stemmer))


@dataclass(frozen=True, slots=True)
class Duplicate:
    """A removed instruction, the kept instruction it is most similar to, and that similarity."""

    instruction_id: str
    duplicate_of: str
    rouge_l: float


@dataclass(frozen=True, slots=True)
class Dedupe:
    """The outcome of :func:`dedupe_instructions`; ``exact_comparisons`` counts LCS computations
    (how much the bounds saved: all pairs would be n·(n-1)/2)."""

    kept: tuple[str, ...]
    removed: tuple[Duplicate, ...]
    threshold: float
    use_stemmer: bool
    exact_comparisons: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": self.threshold,
            "use_stemmer": self.use_stemmer,
            "n_instructions": len(self.kept) + len(self.removed),
            "n_kept": len(self.kept),
            "n_removed": len(self.removed),
            "exact_comparisons": self.exact_comparisons,
            "kept": list(self.kept),
            "removed": [
                {"instruction_id": d.instruction_id, "duplicate_of": d.duplicate_of, "rougeL": d.rouge_l}
                for d in self.removed
            ],
        }

    def summary(self) -> str:
        total = len(self.kept) + len(self.removed)
        return (
            f"{total} instructions: {len(self.kept)} kept, {len(self.removed)} removed as near-duplicates "
            f"(ROUGE-L F > {self.threshold:g} with an earlier kept instruction)"
        )


def _occurrence_matrix(token_lists: Sequence[Sequence[str]]) -> Any:
    """Binary CSR matrix with one column per (token, k-th occurrence): the dot product of two rows
    is then exactly the multiset overlap of the two token lists."""
    from scipy import sparse

    features: dict[tuple[str, int], int] = {}
    indptr, indices = [0], []
    for tokens in token_lists:
        counts: Counter[str] = Counter()
        for t in tokens:
            counts[t] += 1
            indices.append(features.setdefault((t, counts[t]), len(features)))
        indptr.append(len(indices))
    data = np.ones(len(indices), dtype=np.int32)
    shape = (len(token_lists), max(len(features), 1))
    return sparse.csr_matrix((data, np.asarray(indices, dtype=np.int64), indptr), shape=shape)


def _best_kept_match(
    i: int,
    overlap: np.ndarray,
    lengths: np.ndarray,
    kept: np.ndarray,
    tokens: Sequence[Sequence[str]],
    threshold: float,
) -> tuple[int, float, int]:
    """The earlier kept instruction most similar to ``i`` above ``threshold`` (ties: the earliest)
    as ``(index or -1, F, LCS computations)``; only pairs whose overlap bound allows it are exact."""
    if lengths[i] == 0:
        return -1, 0.0, 0
    bound = 2.0 * overlap[:i] / (lengths[:i] + lengths[i])
    cand = np.flatnonzero(kept[:i] & (overlap[:i] > 0) & (bound > threshold - _EPS))
    best, best_f, computed = -1, threshold, 0
    for j in cand[np.lexsort((cand, -bound[cand]))].tolist():
        if bound[j] < best_f - _EPS:
            break  # bounds only fall from here on: nothing left can reach the best
        f = _f_measure(tokens[j], tokens[i])
        computed += 1
        if f > best_f or (best >= 0 and f == best_f and j < best):
            best, best_f = j, f
    return best, best_f, computed


def dedupe_instructions(
    items: Sequence[tuple[str, str]],
    threshold: float = DEFAULT_THRESHOLD,
    *,
    use_stemmer: bool = False,
) -> Dedupe:
    """Drop near-duplicates: an instruction goes when its ROUGE-L F with any earlier *kept*
    instruction is above ``threshold`` (input order decides which of two duplicates stays).

    ``items`` are ``(instruction_id, text)``; ids must be unique. A removed instruction names the
    kept one it is most similar to. Each text is tokenised once; pairs are screened with the
    overlap bound (see the module docstring) a block of rows at a time, so 10,000 instructions
    take seconds, not the hours an all-pairs LCS would.
    """
    if not 0.0 <= threshold <= 1.0:
        raise UserError(f"the ROUGE-L threshold must be between 0 and 1, got {threshold}")
    ids = [iid for iid, _ in items]
    repeated = sorted(iid for iid, n in Counter(ids).items() if n > 1)
    if repeated:
        raise UserError(f"instruction ids must be unique; repeated: {', '.join(map(repr, repeated[:5]))}")
    tokens = [rouge_tokens(text, use_stemmer=use_stemmer) for _, text in items]
    lengths = np.array([len(t) for t in tokens], dtype=np.int64)
    matrix = _occurrence_matrix(tokens)
    kept = np.zeros(len(items), dtype=bool)
    removed: list[Duplicate] = []
    computed = 0
    for start in range(0, len(items), _BLOCK):
        stop = min(start + _BLOCK, len(items))
        overlaps = (matrix[start:stop] @ matrix[:stop].T).toarray()
        for i in range(start, stop):
            j, f, n = _best_kept_match(i, overlaps[i - start], lengths, kept, tokens, threshold)
            computed += n
            if j < 0:
                kept[i] = True
            else:
                removed.append(Duplicate(ids[i], ids[j], f))
    kept_ids = tuple(iid for iid, k in zip(ids, kept.tolist(), strict=True) if k)
    return Dedupe(kept_ids, tuple(removed), threshold, use_stemmer, computed)


def removed_path(out: str | Path) -> Path:
    """Where :func:`dedupe_file` lists the removed instructions: ``kept.csv`` → ``kept.removed.csv``."""
    return _sibling(Path(out), "removed")


def _sibling(out: Path, tag: str) -> Path:
    stem = out.stem if out.suffix.lower() == ".csv" else out.name
    return out.with_name(f"{stem}.{tag}.csv")


def _refuse_overwrite(source: Path, *outputs: Path) -> None:
    for out in outputs:
        if out.exists() and out.resolve() == source.resolve():
            raise UserError(f"{out} is the input file; write the output somewhere else")


def dedupe_file(
    instructions: str | Path,
    out: str | Path,
    threshold: float = DEFAULT_THRESHOLD,
    *,
    use_stemmer: bool = False,
) -> Dedupe:
    """Dedupe an instructions CSV on its ``question`` column: write the kept rows (every column, as
    read) to ``out`` and the removed ones with their kept twin to :func:`removed_path` ``(out)``."""
    source, dest = Path(instructions), Path(out)
    _refuse_overwrite(source, dest, removed_path(dest))
    table, items = _read_instruction_table(source)
    result = dedupe_instructions(
        [(x.instruction_id, x.question) for x in items], threshold, use_stemmer=use_stemmer
    )
    by_id = {x.instruction_id: x for x in items}
    header = [c for c in table.header if c]
    _write_csv(dest, header, ({c: by_id[i].row[c] for c in header} for i in result.kept))
    removed_rows = (
        {
            "instruction_id": d.instruction_id,
            "duplicate_of": d.duplicate_of,
            "rougeL": repr(d.rouge_l),
            "question": by_id[d.instruction_id].question,
            "duplicate_of_question": by_id[d.duplicate_of].question,
        }
        for d in result.removed
    )
    _write_csv(removed_path(dest), REMOVED_COLUMNS, removed_rows)
    return result


# ---------------------------------------------------------------------------------------------
# Instruction -> EHR matching
# ---------------------------------------------------------------------------------------------


def _cohort_files(ehr_dir: Path) -> list[Path]:
    if not ehr_dir.is_dir():
        raise UserError(f"{ehr_dir} is not a folder: give the folder of patient XML files (one per patient)")
    files = sorted(p for p in ehr_dir.iterdir() if p.suffix.lower() == ".xml" and p.is_file())
    if not files:
        raise UserError(f"{ehr_dir} holds no .xml files: the cohort is one MedAlign XML EHR per patient")
    return files


def _ehr_document(path: Path) -> Document:
    """The patient's whole record as one document, identified by its file name (what reviewers open)."""
    doc = patient_document(read_xml(path))  # UserError (file, line, column) for a non-MedAlign XML
    return Document(path.name, doc.text, doc.start, {"person_id": doc.doc_id})


def build_cohort_index(ehr_dir: str | Path, *, stopwords: bool = False) -> tuple[BM25Index, list[str]]:
    """A BM25Okapi index over a folder of patient XML files (either MedAlign dialect), one document
    per file, and the file names (the document ids) in index order.

    Only ``*.xml`` directly in the folder count. The text is not kept in memory once indexed.
    """
    files = _cohort_files(Path(ehr_dir))
    index = BM25Index.build((_ehr_document(p) for p in files), stopwords=stopwords, keep_text=False)
    return index, [p.name for p in files]


@dataclass(frozen=True, slots=True)
class Match:
    """An instruction's candidates: BM25's top K ``(ehr, score)`` best first, the random draw in draw
    order, and ``shown``, the union in the shuffled order reviewers see."""

    instruction: Instruction
    bm25: tuple[tuple[str, float], ...]
    random: tuple[str, ...]
    shown: tuple[str, ...]


def _random_draw(rng: random.Random, ehrs: Sequence[str], exclude: set[str], k: int) -> tuple[str, ...]:
    """``k`` EHRs uniformly without replacement from ``ehrs`` minus ``exclude``, in draw order.

    The first ``k`` survivors of a uniform random ordering are a uniform draw from the rest, and
    only ``k + len(exclude)`` positions of that ordering are ever needed: O(k), not O(cohort)."""
    order = rng.sample(range(len(ehrs)), min(len(ehrs), k + len(exclude)))
    return tuple([ehrs[i] for i in order if ehrs[i] not in exclude][:k])


def _match_one(
    ins: Instruction, index: BM25Index, ehrs: Sequence[str], k: int, seed: int, pool: RandomPool
) -> Match:
    hits = tuple(index.search(ins.query(), k))
    top = {ehr for ehr, _ in hits}
    rng = random.Random(f"{seed}/{ins.instruction_id}")  # per instruction: stable under reordering
    drawn = _random_draw(rng, ehrs, top if pool == "rest" else set(), k)
    shown = [ehr for ehr, _ in hits] + [ehr for ehr in drawn if ehr not in top]
    rng.shuffle(shown)
    return Match(ins, hits, drawn, tuple(shown))


def match_instructions(
    instructions: Sequence[Instruction],
    index: BM25Index,
    *,
    k: int = DEFAULT_K,
    seed: int = 0,
    random_pool: RandomPool = "cohort",
) -> list[Match]:
    """BM25 top-``k`` and ``k`` uniformly random EHRs for every instruction.

    The query is :meth:`Instruction.query`. BM25 may return fewer than ``k`` when fewer patients
    share an informative word with the query. The random draw is seeded per instruction
    (``seed`` and the instruction id), so it does not change when instructions are added or
    reordered. ``random_pool="rest"`` draws from the patients BM25 did not return (no EHR is shown
    twice; this baseline slightly understates uniform pairing when BM25 finds the relevant ones);
    ``"cohort"`` draws from every patient, the paper's uniform-random pairing, and a patient that is
    both is shown once with both sources in the key.
    """
    if k < 1:
        raise UserError(f"k (candidates per instruction) must be at least 1, got {k}")
    if random_pool not in ("rest", "cohort"):
        raise UserError(f"random_pool must be 'rest' or 'cohort', got {random_pool!r}")
    ehrs = index.ids
    return [_match_one(ins, index, ehrs, k, seed, random_pool) for ins in instructions]


def key_path(review: str | Path) -> Path:
    """Where :func:`write_review` puts the un-blinding key: ``review.csv`` → ``review.key.csv``."""
    return _sibling(Path(review), "key")


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
    _write_csv(key, KEY_COLUMNS, _key_rows(matches))
    _write_csv(review, REVIEW_COLUMNS, _review_rows(matches))
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
    _refuse_overwrite(source, review, key_path(review))
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


# ---------------------------------------------------------------------------------------------
# Scoring the review
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _KeyEntry:
    ehr: str
    bm25_rank: int | None
    random_rank: int | None
    line: int


def _rank(table: _Table, row: _Row, column: str) -> int | None:
    text = row.cells[column].strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UserError(f"{table.at(row, column)}: {text!r} is not a rank (1, 2, ...) or empty")
    return int(text)


def _key_entry(table: _Table, row: _Row) -> _KeyEntry:
    bm25, drawn = _rank(table, row, "bm25_rank"), _rank(table, row, "random_rank")
    source = _source(bm25, drawn)
    if not source:
        raise UserError(f"{table.path}:{row.line}: neither bm25_rank nor random_rank is set")
    if row.cells["source"].strip() != source:
        raise UserError(
            f"{table.at(row, 'source')}: {row.cells['source']!r} disagrees with the ranks ({source})"
        )
    return _KeyEntry(row.cells["ehr"].strip(), bm25, drawn, row.line)


def _check_ranks(path: Path, iid: str, ranks: list[int], what: str) -> None:
    if sorted(ranks) != list(range(1, len(ranks) + 1)):
        raise UserError(f"{path}: instruction {iid!r}: {what} ranks {sorted(ranks)} are not 1..{len(ranks)}")


def _read_key(path: Path) -> dict[str, list[_KeyEntry]]:
    """The key by instruction (file order), validated so that ranks are exactly 1..n."""
    table = _read_table(path, KEY_COLUMNS, "matching key")
    key: dict[str, list[_KeyEntry]] = {}
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


def _judgement(table: _Table, row: _Row) -> bool | None:
    text = row.cells["relevant"].strip()
    if text in ("0", "1"):
        return text == "1"
    if not text:
        return None
    raise UserError(
        f"{table.at(row, 'relevant')}: {text!r} is not 1 (relevant), 0 (not relevant) "
        "or empty (not judged yet)"
    )


def _read_review(path: Path) -> dict[tuple[str, str], tuple[int, bool | None]]:
    """``(instruction_id, ehr) → (line, judgement)``; None for a cell not filled in yet."""
    table = _read_table(path, ("instruction_id", "ehr", "relevant"), "relevance review")
    out: dict[tuple[str, str], tuple[int, bool | None]] = {}
    for row in table.rows:
        pair = (row.cells["instruction_id"].strip(), row.cells["ehr"].strip())
        if pair in out:
            raise UserError(f"{path}:{row.line}: {pair[0]!r} / {pair[1]!r} repeats line {out[pair][0]}")
        out[pair] = (row.line, _judgement(table, row))
    return out


def _join(
    review_path: Path, key_path_: Path, key: dict[str, list[_KeyEntry]], review: Mapping[tuple[str, str], Any]
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


def _at_k(ranked: Sequence[bool | None], k: int) -> tuple[float, float] | None:
    """(success, reciprocal rank) within the first ``k``; None while an unjudged candidate comes
    before the first relevant one (the value could still go either way)."""
    for position, relevant in enumerate(ranked[:k], 1):
        if relevant is None:
            return None
        if relevant:
            return 1.0, 1.0 / position
    return 0.0, 0.0


@dataclass(frozen=True, slots=True)
class MethodScores:
    """success@K and MRR@K for K = 1..k_max, and ``n[K]``, the instructions each mean is over
    (all of them unless unjudged candidates leave some undecided). A mean over none is None."""

    success: dict[int, float | None]
    mrr: dict[int, float | None]
    n: dict[int, int]

    @classmethod
    def of(cls, rankings: Sequence[Sequence[bool | None]], k_max: int) -> MethodScores:
        success: dict[int, float | None] = {}
        mrr: dict[int, float | None] = {}
        n: dict[int, int] = {}
        for k in range(1, k_max + 1):
            decided = [v for v in (_at_k(r, k) for r in rankings) if v is not None]
            n[k] = len(decided)
            success[k] = sum(s for s, _ in decided) / len(decided) if decided else None
            mrr[k] = sum(rr for _, rr in decided) / len(decided) if decided else None
        return cls(success, mrr, n)

    def to_dict(self) -> dict[str, dict[str, Any]]:
        return {
            "success_at_k": {str(k): v for k, v in self.success.items()},
            "mrr_at_k": {str(k): v for k, v in self.mrr.items()},
            "n_at_k": {str(k): v for k, v in self.n.items()},
        }


@dataclass(frozen=True, slots=True)
class MatchingScores:
    """The matching's quality: BM25 against the random baseline, per K, with the counts behind it."""

    k_max: int
    bm25: MethodScores
    random: MethodScores
    n_instructions: int
    n_candidates: int
    n_relevant: int
    n_unjudged: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "k_max": self.k_max,
            "n_instructions": self.n_instructions,
            "n_candidates": self.n_candidates,
            "n_relevant": self.n_relevant,
            "n_unjudged": self.n_unjudged,
            "bm25": self.bm25.to_dict(),
            "random": self.random.to_dict(),
        }

    def to_text(self) -> str:
        """A plain table for the terminal (success and MRR as fractions, n per K)."""
        unjudged = f", {self.n_unjudged} unjudged and left out" if self.n_unjudged else ""
        lines = [
            f"{self.n_instructions} instructions, {self.n_candidates} candidates, "
            f"{self.n_relevant} judged relevant{unjudged}",
            f"{'K':>2}  {'BM25 success':>12}  {'BM25 MRR':>8}  {'n':>5}  "
            f"{'random success':>14}  {'random MRR':>10}  {'n':>5}",
        ]
        for k in range(1, self.k_max + 1):
            b, r = self.bm25, self.random
            lines.append(
                f"{k:>2}  {_fmt(b.success[k]):>12}  {_fmt(b.mrr[k]):>8}  {b.n[k]:>5}  "
                f"{_fmt(r.success[k]):>14}  {_fmt(r.mrr[k]):>10}  {r.n[k]:>5}"
            )
        return "\n".join(lines)


def _fmt(v: float | None) -> str:
    return "-" if v is None else f"{v:.3f}"


def _rankings(
    key: Mapping[str, list[_KeyEntry]],
    judged: Mapping[tuple[str, str], tuple[int, bool | None]],
    method: Literal["bm25", "random"],
) -> list[list[bool | None]]:
    """Per instruction, the judgements in BM25 rank order or random draw order (ranks are 1..n)."""
    out = []
    for iid, entries in key.items():
        by_rank = {(e.bm25_rank if method == "bm25" else e.random_rank): e.ehr for e in entries}
        by_rank.pop(None, None)
        out.append([judged[iid, by_rank[r]][1] for r in sorted(k for k in by_rank if k is not None)])
    return out


def _unjudged_error(review: Path, lines: list[int]) -> UserError:
    shown = ", ".join(map(str, lines[:10])) + (", ..." if len(lines) > 10 else "")
    return UserError(
        f"{review}: {len(lines)} candidates have no 1/0 in column 'relevant' (lines {shown}); "
        "fill them in, or score without them (allow_unjudged / --allow-unjudged)"
    )


def score_matching(
    reviewed_csv: str | Path,
    key_file: str | Path,
    k_max: int | None = None,
    *,
    allow_unjudged: bool = False,
) -> MatchingScores:
    """success@K and MRR@K (K = 1..``k_max``) of BM25 and of the random baseline from a filled review.

    ``k_max`` defaults to the largest rank in the key (the ``k`` the matching used). Every
    ``relevant`` cell must be 1, 0 or empty; empty cells are an error listing where they are,
    unless ``allow_unjudged``: then they are left out and counted, and an instruction drops out of
    a K's mean only while an unjudged candidate precedes its first relevant one within K.
    """
    review, keyf = Path(reviewed_csv), Path(key_file)
    key = _read_key(keyf)
    judged = _read_review(review)
    _join(review, keyf, key, judged)
    largest = max((e.bm25_rank or 0) for es in key.values() for e in es)
    largest = max(largest, max((e.random_rank or 0) for es in key.values() for e in es))
    k_max = largest if k_max is None else k_max
    if not 1 <= k_max <= largest:
        raise UserError(f"k_max must be between 1 and {largest} (the largest rank in {keyf}), got {k_max}")
    unjudged = sorted(line for line, v in judged.values() if v is None)
    if unjudged and not allow_unjudged:
        raise _unjudged_error(review, unjudged)
    return MatchingScores(
        k_max=k_max,
        bm25=MethodScores.of(_rankings(key, judged, "bm25"), k_max),
        random=MethodScores.of(_rankings(key, judged, "random"), k_max),
        n_instructions=len(key),
        n_candidates=len(judged),
        n_relevant=sum(v is True for _, v in judged.values()),
        n_unjudged=len(unjudged),
    )
