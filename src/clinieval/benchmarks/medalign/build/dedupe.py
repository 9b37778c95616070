"""Step 1 of the build: remove near-duplicate instructions by ROUGE-L, fast enough for 10,000.

An instruction is dropped when its ROUGE-L F-measure with an earlier *kept* instruction exceeds 0.7
(MedAlign's cut-off). ROUGE-L is rouge-score's ``RougeScorer(["rougeL"])`` F-measure to the last
bit: rouge-score's own tokeniser, the same LCS length (:func:`clinieval.scoring.text.overlap.lcs_length`)
and the same F-measure arithmetic. Comparing all pairs exactly is quadratic in slow Python steps, so
every instruction is first compared with all earlier ones through an upper bound that one sparse
matrix product gives for a whole block of pairs at once: an LCS is never longer than the two token
sequences' multiset overlap (the tokens they share, repeats counted), hence
``F = 2·LCS/(m+n) ≤ 2·overlap/(m+n) ≤ 2·min(m,n)/(m+n)`` (the last being the length-ratio bound,
which the overlap bound therefore subsumes). The exact LCS runs only for pairs whose bound exceeds
the threshold, best bound first, and stops as soon as no remaining bound can beat the best
similarity found.

The removed near-duplicates (:data:`REMOVED_COLUMNS`) are written beside the kept instructions.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clinieval.benchmarks.medalign.build.instructions import read_instruction_table
from clinieval.benchmarks.medalign.build.tables import refuse_overwrite, sibling_path
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_csv
from clinieval.scoring.text.overlap import RougeTokenizer, lcs_length

__all__ = [
    "DEFAULT_THRESHOLD",
    "REMOVED_COLUMNS",
    "Dedupe",
    "Duplicate",
    "dedupe_file",
    "dedupe_instructions",
    "removed_path",
    "rouge_l",
    "rouge_tokens",
]

DEFAULT_THRESHOLD = 0.7
"""MedAlign's near-duplicate cut-off: ROUGE-L F-measure above it means a duplicate."""

REMOVED_COLUMNS = ("instruction_id", "duplicate_of", "rougeL", "question", "duplicate_of_question")

_EPS = 1e-9  # slack between a float bound and a float F-measure computed another way
_BLOCK = 256  # instructions per sparse product in the dedupe: ~10 MB of overlaps at 10k


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
    return sibling_path(Path(out), "removed")


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
    refuse_overwrite(source, dest, removed_path(dest))
    table, items = read_instruction_table(source)
    result = dedupe_instructions(
        [(x.instruction_id, x.question) for x in items], threshold, use_stemmer=use_stemmer
    )
    by_id = {x.instruction_id: x for x in items}
    header = [c for c in table.header if c]
    atomic_write_csv(dest, header, ({c: by_id[i].row[c] for c in header} for i in result.kept))
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
    atomic_write_csv(removed_path(dest), REMOVED_COLUMNS, removed_rows)
    return result
