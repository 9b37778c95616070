"""Step 3 of the build: success@K and MRR@K of the BM25 matching and of the random baseline.

success@K (a relevant EHR among the first K) and MRR@K (1/rank of the first relevant EHR within K,
else 0) are averaged over instructions, for BM25 in rank order and for the random baseline in draw
order, from a filled review and its key as :mod:`.review` reads and checks them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from clinieval.benchmarks.medalign.build.review import (
    KeyEntry,
    check_same_candidates,
    read_key,
    read_review,
)
from clinieval.errors import UserError

__all__ = ["MatchingScores", "MethodScores", "score_matching"]


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
    key: Mapping[str, list[KeyEntry]],
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
    key = read_key(keyf)
    judged = read_review(review)
    check_same_candidates(review, keyf, key, judged)
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
