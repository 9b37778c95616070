"""How far rankings agree: with clinicians, between clinicians, across runs, with a reference.

Built on :class:`~clinieval.analysis.rankings.ScoreTable` and its rules (exact ties, missing
cells take no part, no NaN out, rank 1 is best), and kept apart from
:mod:`clinieval.analysis.rankings` because it answers a different question: not "how do the
models rank?" but "how much should we trust a ranking?". Each section is one paper's measure:

- Kendall tau-b between a metric's and the clinicians' per-item rankings, and between
  clinicians, with a bootstrap CI over items (MedAlign);
- rank instability of models over repeated judge runs (EHRNoteQA);
- Accuracy_2-tuple / Accuracy_triple of a judge's orderings against reference scores
  (AutoMedEval).

Correlations between two vectors of numbers (Kendall, Spearman, ICC, Krippendorff's alpha) are
in :mod:`clinieval.analysis.agreement`.
"""

from __future__ import annotations

import math
import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Literal

import numpy as np

from clinieval.analysis.rankings import FloatArray, ScoreTable, Ties, cell_value, check_ties, rank_table
from clinieval.analysis.uncertainty import bootstrap_ci
from clinieval.errors import UserError

__all__ = [
    "GOLD_RULES",
    "GoldRule",
    "KendallAgreement",
    "OrderAgreement",
    "RankInstability",
    "accuracy_2tuple",
    "accuracy_triple",
    "gold_rank",
    "inter_rater_kendall",
    "metric_human_kendall",
    "order_agreement",
    "rank_instability",
]


# --- Kendall tau agreement ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class KendallAgreement:
    """Mean per-item Kendall tau-b with a bootstrap CI over items.

    ``taus`` holds each item's tau (for inter-rater agreement, the mean over the item's rater
    pairs). Items where a tau is undefined because a ranking is constant are listed in
    ``skipped_constant``; items missing from one side or with fewer than two models ranked on
    both sides in ``skipped_incomplete``. ``mean`` and ``ci`` are ``None`` when no item is left.
    """

    mean: float | None
    ci: tuple[float, float] | None
    taus: dict[str, float]
    pairs: int
    skipped_constant: tuple[str, ...]
    skipped_incomplete: tuple[str, ...]

    @property
    def items(self) -> int:
        return len(self.taus)

    def as_json(self) -> dict[str, float | int | list[float] | None]:
        """The figures a report shows (the per-item taus left out; skipped items counted)."""
        return {
            "mean_tau_b": self.mean,
            "ci": list(self.ci) if self.ci else None,
            "items": self.items,
            "pairs": self.pairs,
            "skipped_constant": len(self.skipped_constant),
            "skipped_incomplete": len(self.skipped_incomplete),
        }


def _tau_b(x: FloatArray, y: FloatArray) -> float | None:
    """Kendall tau-b, which corrects for ties on either side; ``None`` when either side is constant.

    tau-b = (concordant - discordant) / sqrt(pairs untied in x * pairs untied in y), the variant
    scipy.stats.kendalltau computes by default; written out because rankings have a handful of
    models and one call per item, where scipy's per-call overhead dominates.
    """
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    untied_x = np.count_nonzero(dx)
    untied_y = np.count_nonzero(dy)
    if untied_x == 0 or untied_y == 0:
        return None
    return float((dx * dy).sum() / math.sqrt(untied_x * untied_y))


def _common(a: ScoreTable, b: ScoreTable, item: str) -> tuple[FloatArray, FloatArray]:
    """Goodness of the models both tables have a value for on ``item``, aligned."""
    cols_b = {m: j for j, m in enumerate(b.models)}
    ia = [i for i, m in enumerate(a.models) if m in cols_b]
    x = a.item_goodness(item)[ia]
    y = b.item_goodness(item)[[cols_b[a.models[i]] for i in ia]]
    keep = ~(np.isnan(x) | np.isnan(y))
    return x[keep], y[keep]


def _summary(
    taus: dict[str, float],
    pairs: int,
    constant: list[str],
    incomplete: list[str],
    level: float,
    resamples: int,
    seed: int,
) -> KendallAgreement:
    if not taus:
        return KendallAgreement(None, None, {}, 0, tuple(constant), tuple(incomplete))
    values = list(taus.values())
    return KendallAgreement(
        mean=sum(values) / len(values),
        ci=bootstrap_ci(values, level=level, resamples=resamples, seed=seed),
        taus=taus,
        pairs=pairs,
        skipped_constant=tuple(constant),
        skipped_incomplete=tuple(incomplete),
    )


def metric_human_kendall(
    metric: ScoreTable,
    human: ScoreTable,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> KendallAgreement:
    """MedAlign's metric-human agreement: per item, tau-b between the metric's and the human ranking.

    Per item, the models both tables have a value for are compared (each table read through its
    own ``higher_is_better``, so scores against ranks need no conversion); taus are averaged over
    items, and the CI is a seeded percentile bootstrap over items. The human table must hold one
    ranking per item: pick the primary reviewer first on multiply-reviewed items.
    """
    taus: dict[str, float] = {}
    constant: list[str] = []
    incomplete: list[str] = []
    for item in dict.fromkeys(human.items + metric.items):
        if not (human.has_item(item) and metric.has_item(item)):
            incomplete.append(item)
            continue
        x, y = _common(metric, human, item)
        if x.size < 2:
            incomplete.append(item)
            continue
        tau = _tau_b(x, y)
        if tau is None:
            constant.append(item)
        else:
            taus[item] = tau
    return _summary(taus, len(taus), constant, incomplete, level, resamples, seed)


def inter_rater_kendall(
    rankings: Mapping[str, ScoreTable],
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
) -> KendallAgreement:
    """Inter-rater reliability: mean pairwise tau-b between clinicians on multiply-reviewed items.

    ``rankings`` maps each clinician to their table. For every item at least two clinicians
    reviewed, tau-b is computed for each pair of them over the models both ranked; the item's
    value is the mean over its defined pairs, and the result the mean over items (each item
    weighs the same however many reviewers it had). Items one clinician reviewed are not
    counted anywhere.
    """
    if len(rankings) < 2:
        raise UserError("inter-rater agreement needs rankings from at least two clinicians")
    items = dict.fromkeys(i for t in rankings.values() for i in t.items)
    taus: dict[str, float] = {}
    constant: list[str] = []
    incomplete: list[str] = []
    pairs = 0
    for item in items:
        raters = [t for t in rankings.values() if t.has_item(item)]
        if len(raters) < 2:
            continue
        item_taus: list[float] = []
        saw_constant = False
        for a, b in combinations(raters, 2):
            x, y = _common(a, b, item)
            tau = _tau_b(x, y) if x.size >= 2 else None
            saw_constant |= x.size >= 2 and tau is None
            if tau is not None:
                item_taus.append(tau)
        if item_taus:
            taus[item] = sum(item_taus) / len(item_taus)
            pairs += len(item_taus)
        else:
            (constant if saw_constant else incomplete).append(item)
    return _summary(taus, pairs, constant, incomplete, level, resamples, seed)


# --- rank stability across repeated runs (EHRNoteQA) --------------------------------------------


@dataclass(frozen=True, slots=True)
class RankInstability:
    """EHRNoteQA's ranking stability over repeated judge runs.

    ``ranks`` is runs x models (1 = best within each run); ``gold_ranks`` the mode of each
    model's ranks, chosen by ``gold_rule`` among several modes (``tied_modes`` names the models
    where that choice was needed); ``per_model`` the sum over runs of |rank - gold rank|;
    ``total`` their sum.
    """

    total: float
    per_model: dict[str, float]
    gold_ranks: dict[str, float]
    ranks: ScoreTable
    gold_rule: GoldRule = "smallest"
    tied_modes: tuple[str, ...] = ()


GoldRule = Literal["first", "smallest", "median"]
GOLD_RULES: tuple[GoldRule, ...] = ("first", "smallest", "median")
"""How a model's gold rank is chosen when its ranks have several modes: ``first`` the mode that
occurs first in run order (EHRNoteQA's public code, which its published figures need),
``smallest`` the best of them, ``median`` the median of the tied modes."""


def gold_rank(ranks: Sequence[float], rule: GoldRule) -> tuple[float, bool]:
    """The gold rank of one model's per-run ranks, and whether several modes tied."""
    counts = Counter(ranks)
    top = max(counts.values())
    modes = [r for r in dict.fromkeys(ranks) if counts[r] == top]  # in order of first occurrence
    if rule == "first":
        chosen = modes[0]
    elif rule == "smallest":
        chosen = min(modes)
    elif rule == "median":
        chosen = float(statistics.median(modes))
    else:
        raise UserError(f"gold rank rule {rule!r} is unknown; choose from {', '.join(GOLD_RULES)}")
    return chosen, len(modes) > 1


def rank_instability(
    runs: ScoreTable, *, ties: Ties = "min", gold_rule: GoldRule = "smallest"
) -> RankInstability:
    """Instability = Σ over models Σ over runs |rank in run - gold rank|.

    ``runs`` has one row per judge run and one column per model; every cell must be present.
    Tied models share the best rank of their group by default (``ties="min"``, leaderboard
    style, so ranks stay integers); ``ties="average"`` is available. ``gold_rule`` picks the
    gold rank among several modes (:data:`GOLD_RULES`).
    """
    check_ties(ties)
    if not runs.items or not runs.models:
        raise UserError("rank instability needs at least one run and one model")
    missing = [
        (r, m)
        for r, row in zip(runs.items, runs.present(), strict=True)
        for m, ok in zip(runs.models, row, strict=True)
        if not ok
    ]
    if missing:
        run, model = missing[0]
        raise UserError(f"run {run!r} has no score for model {model!r}; every run must score every model")
    ranks = rank_table(runs, ties=ties)
    gold: dict[str, float] = {}
    per_model: dict[str, float] = {}
    tied: list[str] = []
    for j, model in enumerate(runs.models):
        col = [float(v) for v in ranks.values[:, j]]
        gold[model], several = gold_rank(col, gold_rule)
        if several:
            tied.append(model)
        per_model[model] = sum(abs(r - gold[model]) for r in col)
    return RankInstability(sum(per_model.values()), per_model, gold, ranks, gold_rule, tuple(tied))


# --- AutoMedEval: judge vs reference orderings ---------------------------------------------------


@dataclass(frozen=True, slots=True)
class OrderAgreement:
    """How often a judge reproduces reference orderings of the k responses to each item.

    ``accuracy_2tuple`` = correct pairs / all pairs of the scored items; ``accuracy_triple`` =
    items with every pair correct / scored items. Scored items are those with a reference;
    ``judge_missing`` of them had no judge output (all their pairs count wrong);
    ``skipped_no_reference`` items were left out.
    """

    accuracy_2tuple: float
    accuracy_triple: float
    pairs_correct: int
    pairs: int
    items_correct: int
    items: int
    judge_missing: int
    skipped_no_reference: int


def _relations(scores: Sequence[float], where: str) -> list[int]:
    """Sign of s_a - s_b for each pair a < b: +1 (a better), 0 (tie), -1 (b better)."""
    if any(s is None for s in scores):
        raise UserError(f"{where} has a missing score; pass None for the whole item instead")
    values = [cell_value(s, f"{where} score {k}") for k, s in enumerate(scores)]
    return [(a > b) - (a < b) for a, b in combinations(values, 2)]


def order_agreement(
    reference: Sequence[Sequence[float] | None], judge: Sequence[Sequence[float] | None]
) -> OrderAgreement:
    """AutoMedEval's Accuracy_2-tuple and Accuracy_triple, generalised to k ≥ 2 responses.

    ``reference[i]`` holds the reference (physician) scores of item ``i``'s k responses, or
    ``None`` when the item has none (skipped, counted); ``judge[i]`` the judge's scores, or
    ``None`` when its output was missing or unparseable (all the item's pairs wrong, the item
    wrong). Pairs are (1,2), (1,3), (2,3) for k = 3; a pair is right when the judge's relation
    (<, =, >) equals the reference's. An item is right when every pair is: this is exactly the
    Accuracy_triple rule (all-equal must stay all-equal; two equal must stay equal with the third
    on the same side; a strict order must be reproduced, and a judge tie there is wrong).
    """
    if len(reference) != len(judge):
        raise UserError(
            f"reference has {len(reference)} items but judge has {len(judge)}; give one judge output per"
            " item (None when it could not be parsed)"
        )
    pairs = pairs_correct = items = items_correct = missing = skipped = 0
    for i, (ref, jud) in enumerate(zip(reference, judge, strict=True)):
        if ref is None:
            skipped += 1
            continue
        if len(ref) < 2:
            raise UserError(
                f"item {i}: the reference scores {len(ref)} response(s); ordering needs at least 2"
            )
        want = _relations(ref, f"item {i}: reference")
        items += 1
        pairs += len(want)
        if jud is None:
            missing += 1
            continue
        if len(jud) != len(ref):
            raise UserError(
                f"item {i}: the judge scored {len(jud)} responses but the reference {len(ref)};"
                " pass None for an incomplete judge output"
            )
        got = _relations(jud, f"item {i}: judge")
        right = sum(a == b for a, b in zip(want, got, strict=True))
        pairs_correct += right
        items_correct += right == len(want)
    if items == 0:
        raise UserError("no item has reference scores; the judge's ordering accuracy is undefined")
    return OrderAgreement(
        accuracy_2tuple=pairs_correct / pairs,
        accuracy_triple=items_correct / items,
        pairs_correct=pairs_correct,
        pairs=pairs,
        items_correct=items_correct,
        items=items,
        judge_missing=missing,
        skipped_no_reference=skipped,
    )


def accuracy_2tuple(
    reference: Sequence[Sequence[float] | None], judge: Sequence[Sequence[float] | None]
) -> float:
    """Share of response pairs whose order the judge got right (see :func:`order_agreement`)."""
    return order_agreement(reference, judge).accuracy_2tuple


def accuracy_triple(
    reference: Sequence[Sequence[float] | None], judge: Sequence[Sequence[float] | None]
) -> float:
    """Share of items whose full ordering, ties included, the judge reproduced."""
    return order_agreement(reference, judge).accuracy_triple
