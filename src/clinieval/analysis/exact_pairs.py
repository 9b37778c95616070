"""The leaderboard's pair test: exact wherever it is feasible, so "A is ahead of B" holds at any n.

A shifted-null bootstrap p-value is an approximation that is too small exactly where a leaderboard
is most tempted to over-claim: with few items or few patients. Fifteen PubMedQA items with 4 vs 0
discordant pairs gave a bootstrap p of 0.033, where exact McNemar gives 0.125; four patients gave
0.0025, where no test that exchanges patients can go below 2 / 2^4 = 0.125. So:

- **binary scores, items independent**: exact McNemar, the two-sided binomial test of the
  discordant items (:func:`clinieval.analysis.uncertainty.mcnemar` with ``exact=True``), at any n;
- **otherwise** (graded scores, or items clustered by patient): the sign-flip permutation test of
  the mean difference over the exchangeable units (items, or patients whole), exhaustive up to
  :data:`EXHAUSTIVE_UNITS` units (2^20 arrangements) and Monte Carlo beyond, with the Monte Carlo
  standard error of the p-value stated.

The bootstrap stays where it is sound: the confidence intervals. :func:`smallest_pvalue` says how
small a p-value the test could ever give on the cell, which is what a reader needs when nothing
is significant on four patients.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

import numpy as np

from clinieval.analysis.uncertainty import mcnemar, paired_permutation_test

__all__ = ["EXHAUSTIVE_UNITS", "MONTE_CARLO_DRAWS", "PairTest", "exact_pair_test", "smallest_pvalue"]

EXHAUSTIVE_UNITS = 20
"""Sign-flip tests enumerate all 2^k arrangements up to k = 20 units (about a million)."""
MONTE_CARLO_DRAWS = 20_000
"""Random arrangements beyond that: a Monte Carlo error of at most 0.0016 at p = 0.05."""


@dataclass(frozen=True, slots=True)
class PairTest:
    """One pair's p-value and how it was obtained.

    ``units``: what the test exchanges (discordant items for McNemar, items or patients for the
    sign-flip); ``exhaustive``: every arrangement was counted (the p-value is exact);
    ``mc_error``: the Monte Carlo standard error of ``pvalue`` when it was not;
    ``smallest``: the smallest p-value this test can give on these units."""

    pvalue: float
    method: str
    units: int
    exhaustive: bool
    mc_error: float | None
    smallest: float


def _binary(values: Sequence[float]) -> bool:
    return all(v in (0.0, 1.0) for v in values)


def smallest_pvalue(units: int) -> float:
    """The smallest two-sided p-value a test can reach when ``units`` exchangeable units differ:
    2 / 2^k, the observed arrangement and its mirror image among all 2^k (exact McNemar with m
    discordant items is the sign-flip of those m items); 1 when none differs. Written as
    2^(1 - k), which underflows to 0 on a large benchmark where 2 / 2^k overflowed (k > 1023)."""
    return 1.0 if units <= 0 else min(1.0, 2.0 ** (1 - units))


def _nonzero_units(x: Sequence[float], y: Sequence[float], clusters: Sequence[Hashable] | None) -> int:
    """Units whose difference is not 0: flipping the others changes nothing."""
    d = np.asarray(x, dtype=np.float64) - np.asarray(y, dtype=np.float64)
    if clusters is None:
        return int(np.count_nonzero(d))
    sums: dict[Hashable, float] = {}
    for c, v in zip(clusters, d, strict=True):
        sums[c] = sums.get(c, 0.0) + float(v)
    return sum(1 for v in sums.values() if v != 0.0)


def exact_pair_test(
    x: Sequence[float],
    y: Sequence[float],
    *,
    clusters: Sequence[Hashable] | None = None,
    seed: int = 0,
) -> PairTest:
    """Two-sided test of mean(x - y) = 0 on paired scores (see the module docstring for which)."""
    if clusters is None and _binary(x) and _binary(y):
        result = mcnemar(x, y, exact=True)
        discordant = result.b + result.c
        return PairTest(
            pvalue=result.pvalue,
            method="exact McNemar (binomial test of the discordant items)",
            units=discordant,
            exhaustive=True,
            mc_error=None,
            smallest=smallest_pvalue(discordant),
        )
    units = len(x) if clusters is None else len(set(clusters))
    exhaustive = units <= EXHAUSTIVE_UNITS
    test = paired_permutation_test(
        x, y, exact=exhaustive, resamples=MONTE_CARLO_DRAWS, seed=seed, clusters=clusters
    )
    over = "patients, each patient's items flipped together" if clusters is not None else "items"
    how = f"all 2^{units} arrangements" if exhaustive else f"{MONTE_CARLO_DRAWS:,} random arrangements"
    p = test.pvalue
    return PairTest(
        pvalue=p,
        method=f"sign-flip permutation test of the mean difference over {over} ({how})",
        units=units,
        exhaustive=exhaustive,
        mc_error=None if exhaustive else math.sqrt(max(p * (1.0 - p), 0.0) / test.resamples),
        smallest=max(smallest_pvalue(_nonzero_units(x, y, clusters)), 1.0 / (1 + test.resamples)),
    )
