"""Position and length bias of a judge that scores several responses at once.

The paper shows the responses in a fixed order and does not measure order effects; LLM judges are
known to have them (MT-Bench, JudgeLM and AlpacaEval report the checks below). Which orders the
repeats show is the judge run's design (``automedeval judge --order``, see
:func:`clinieval.benchmarks.automedeval.judging.shown_order`): ``fixed`` (the paper's: every
repeat in the given order), ``shuffled`` (an independent seeded draw per repeat) or ``balanced``
(a Latin square: repeat r shows the item's seeded base order rotated by r, so over k repeats each
answer is shown in each position once). The figures, each with a cluster-bootstrap CI over items
and a plain verdict:

* **swap consistency**: for every pair of responses and every two repeats that showed the pair in
  opposite orders, does the judge's relation (<, =, >) stay the same? Beside it the **same-order
  control**: the same share over two repeats that showed the *whole* order identically (what the
  judge's run-to-run noise alone gives). The bias figure is swap minus control; without a control
  (no two repeats of an item in the same order) it is the swap rate against 1.
* **first shown wins**: the share of parsed repeats in which the response shown first got the
  strictly highest score, against the rate an order-blind judge gives *with its own scores*: the
  design shows each response first with probability 1/k, so a repeat whose top score is one
  response's has chance 1/k, and one whose top score is tied has chance 0. (Ties are common:
  comparing with 1/k calls an unbiased judge averse to the first position.) Under ``fixed`` the
  same answer is always first, so its quality and its position cannot be told apart: not
  measurable.
* **length preference**: over pairs of responses the judge scored differently and whose lengths
  differ, the share where the longer one scored higher, against the physicians' share over the
  same repeats' pairs when the set is rated (longer answers may simply be better), else against
  0.5.

An unparsed repeat takes part in none of these (it is counted by the judge run).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np
from numpy.typing import NDArray

JSON = dict[str, Any]
Counts = NDArray[np.float64]

NOT_MEASURABLE_FIXED = "not measurable under fixed order"
NO_EVIDENCE = "no evidence of bias"


@dataclass(frozen=True, slots=True)
class Judged:
    """One repeat of one item: the order shown (``shown[i]`` = original index shown as Doctor
    i+1) and the scores in the original order (None: the reply was unparsed)."""

    shown: tuple[int, ...]
    scores: tuple[float, ...] | None


def _sign(x: float) -> int:
    return (x > 0) - (x < 0)


def _position(shown: Sequence[int], original: int) -> int:
    return list(shown).index(original)


def _pair_consistency(repeats: Sequence[Judged], same_order: bool) -> tuple[int, int]:
    parsed = [r for r in repeats if r.scores is not None]
    consistent = compared = 0
    for a, b in combinations(parsed, 2):
        assert a.scores is not None and b.scores is not None
        if same_order and a.shown != b.shown:
            continue
        for i, j in combinations(range(len(a.shown)), 2):
            first_a = _position(a.shown, i) < _position(a.shown, j)
            first_b = _position(b.shown, i) < _position(b.shown, j)
            if (first_a == first_b) != same_order:
                continue
            compared += 1
            consistent += _sign(a.scores[i] - a.scores[j]) == _sign(b.scores[i] - b.scores[j])
    return consistent, compared


def swap_consistency(repeats: Sequence[Judged]) -> tuple[int, int]:
    """(consistent, compared) over the pairs of one item shown in opposite orders by two repeats."""
    return _pair_consistency(repeats, same_order=False)


def same_order_consistency(repeats: Sequence[Judged]) -> tuple[int, int]:
    """(consistent, compared) over the pairs of one item in two repeats that showed the whole
    order identically: the control for :func:`swap_consistency`."""
    return _pair_consistency(repeats, same_order=True)


def first_shown_wins(repeats: Sequence[Judged]) -> tuple[int, int]:
    """(wins, parsed repeats): how often the response shown first scored strictly highest."""
    wins = parsed = 0
    for r in repeats:
        if r.scores is None:
            continue
        parsed += 1
        first = r.shown[0]
        wins += all(r.scores[first] > s for j, s in enumerate(r.scores) if j != first)
    return wins, parsed


def first_shown_chance(repeats: Sequence[Judged]) -> float:
    """The wins an order-blind judge with these scores expects: per parsed repeat, 1/k when one
    response scored strictly highest (it is shown first with probability 1/k), else 0."""
    expected = 0.0
    for r in repeats:
        if r.scores is None:
            continue
        top = max(r.scores)
        expected += (1 / len(r.scores)) if list(r.scores).count(top) == 1 else 0.0
    return expected


def length_preference(repeats: Sequence[Judged], lengths: Sequence[int]) -> tuple[int, int]:
    """(longer preferred, pairs): pairs scored differently whose responses differ in length."""
    longer = pairs = 0
    for r in repeats:
        if r.scores is None:
            continue
        for i, j in combinations(range(len(lengths)), 2):
            if r.scores[i] == r.scores[j] or lengths[i] == lengths[j]:
                continue
            pairs += 1
            longer += (r.scores[i] > r.scores[j]) == (lengths[i] > lengths[j])
    return longer, pairs


def physicians_length_preference(
    repeats: Sequence[Judged], lengths: Sequence[int], human: Sequence[float]
) -> tuple[int, int]:
    """The physicians' :func:`length_preference` over the same parsed repeats (each parsed repeat
    counts the item's pairs once, so items weigh as in the judge's figure)."""
    parsed = sum(r.scores is not None for r in repeats)
    longer, pairs = length_preference([Judged((), tuple(human))], lengths)
    return longer * parsed, pairs * parsed


# --- CIs and verdicts ----------------------------------------------------------------------------


def _cluster_ci(
    counts: Counts, statistic: Callable[[Counts], NDArray[np.float64]], resamples: int, seed: int
) -> list[float] | None:
    """Percentile CI (95 %) of ``statistic`` over items resampled with replacement: ``counts`` is
    items x columns, the statistic reads the summed columns of each resample (resamples x
    columns). A resample where it is undefined (NaN) is left out; None with fewer than 2 items."""
    if counts.shape[0] < 2:
        return None
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, counts.shape[0], size=(resamples, counts.shape[0]))
    with np.errstate(divide="ignore", invalid="ignore"):
        values = statistic(counts[idx].sum(axis=1))
    values = values[np.isfinite(values)]
    if values.size == 0:
        return None
    low, high = np.quantile(values, [0.025, 0.975])
    return [float(low), float(high)]


def _ratio_difference(a: int, b: int, c: int, d: int) -> Callable[[Counts], NDArray[np.float64]]:
    """The statistic col[a]/col[b] - col[c]/col[d] (``c`` < 0: minus a constant, none)."""

    def stat(s: Counts) -> NDArray[np.float64]:
        out: NDArray[np.float64] = s[:, a] / s[:, b] - (s[:, c] / s[:, d] if c >= 0 else 0.0)
        return out

    return stat


def _points(x: float) -> str:
    return f"{100 * abs(x):.1f} points"


def _excludes_zero(ci: list[float] | None) -> bool:
    return ci is not None and (ci[0] > 0 or ci[1] < 0)


def _rate(hit: float, n: float) -> float | None:
    return hit / n if n else None


def _swap(rows: Counts, fixed: bool, resamples: int, seed: int) -> JSON:
    sc, sn, cc, cn = (float(x) for x in rows.sum(axis=0)) if rows.size else (0.0, 0.0, 0.0, 0.0)
    out: JSON = {
        "rate": _rate(sc, sn),
        "comparisons": int(sn),
        "ci": None,
        "control": {"rate": _rate(cc, cn), "comparisons": int(cn), "ci": None},
        "difference": None,
    }
    if sn:
        out["ci"] = _cluster_ci(rows, _ratio_difference(0, 1, -1, -1), resamples, seed)
    if cn:
        out["control"]["ci"] = _cluster_ci(rows, _ratio_difference(2, 3, -1, -1), resamples, seed)
    if fixed or not sn:
        out["verdict"] = NOT_MEASURABLE_FIXED if fixed else "not measurable: no pair was shown in both orders"
        return out
    if cn:
        ci = _cluster_ci(rows, _ratio_difference(0, 1, 2, 3), resamples, seed)
        value = sc / sn - cc / cn
        out["difference"] = {"value": value, "ci": ci, "against": "same-order control"}
        out["verdict"] = (
            f"order changes verdicts: {_points(value)} less consistent when a pair is swapped"
            if _excludes_zero(ci) and value < 0
            else NO_EVIDENCE
        )
        return out
    value = sc / sn - 1.0
    out["difference"] = {"value": value, "ci": None if out["ci"] is None else [x - 1 for x in out["ci"]],
                         "against": "1 (no same-order control)"}  # fmt: skip
    changed = out["ci"] is not None and out["ci"][1] < 1
    out["verdict"] = (
        f"verdicts changed in {_points(value)} of swapped pairs; no same-order control to tell order "
        "effects from run-to-run noise"
        if changed
        else NO_EVIDENCE
    )
    return out


def _first(rows: Counts, fixed: bool, resamples: int, seed: int) -> JSON:
    wins, n, chance = (float(x) for x in rows.sum(axis=0)) if rows.size else (0.0, 0.0, 0.0)
    out: JSON = {
        "rate": _rate(wins, n),
        "repeats": int(n),
        "chance": _rate(chance, n),
        "excess": None if not n else (wins - chance) / n,
        "ci": None,
    }
    if fixed:
        out["excess"] = None  # the first-shown answer is always the same one: not a position effect
        out["verdict"] = NOT_MEASURABLE_FIXED
        return out
    if not n:
        out["verdict"] = "not measurable: no parsed repeat"
        return out

    def excess(s: Counts) -> NDArray[np.float64]:
        value: NDArray[np.float64] = (s[:, 0] - s[:, 2]) / s[:, 1]
        return value

    ci = _cluster_ci(rows, excess, resamples, seed)
    out["ci"] = ci
    value = out["excess"]
    if _excludes_zero(ci):
        out["verdict"] = (
            f"favours first position, +{_points(value)}"
            if value > 0
            else f"disfavours first position, -{_points(value)}"
        )
    else:
        out["verdict"] = NO_EVIDENCE
    return out


def _length(rows: Counts, rated: bool, fixed: bool, resamples: int, seed: int) -> JSON:
    longer, pairs, h_longer, h_pairs = (float(x) for x in rows.sum(axis=0)) if rows.size else (0.0,) * 4
    out: JSON = {
        "rate": _rate(longer, pairs),
        "pairs": int(pairs),
        "ci": _cluster_ci(rows, _ratio_difference(0, 1, -1, -1), resamples, seed) if pairs else None,
        "physicians": {"rate": _rate(h_longer, h_pairs), "pairs": int(h_pairs)} if rated else None,
        "difference": None,
    }
    if not pairs:
        out["verdict"] = "not measurable: no pair of different lengths scored differently"
        return out
    if rated and h_pairs:
        value = longer / pairs - h_longer / h_pairs
        ci = _cluster_ci(rows, _ratio_difference(0, 1, 2, 3), resamples, seed)
        against = "over the physicians"
    else:
        value = longer / pairs - 0.5
        ci = None if out["ci"] is None else [x - 0.5 for x in out["ci"]]
        against = "over 0.5 (no physician ratings to compare: may be quality, not bias)"
    out["difference"] = {"value": value, "ci": ci, "against": against.split(" (")[0].removeprefix("over ")}
    if _excludes_zero(ci):
        if value > 0:
            out["verdict"] = f"favours longer answers, +{_points(value)} {against}"
        else:
            out["verdict"] = (
                f"favours shorter answers, {_points(value)} {against.replace('over', 'below', 1)}"
            )
        if fixed:
            out["verdict"] += "; under fixed order, not separable from position"
    else:
        out["verdict"] = NO_EVIDENCE
    return out


BiasItem = (
    tuple[Sequence[Judged], Sequence[int]] | tuple[Sequence[Judged], Sequence[int], Sequence[float] | None]
)


def bias_report(
    items: Sequence[BiasItem], *, order: str | None = None, resamples: int = 2000, seed: int = 0
) -> JSON:
    """The three figures over items (each: its repeats, its responses' lengths and, optionally,
    the physicians' scores of its responses), with counts, CIs and verdicts; a rate with nothing
    to count is None. ``order`` is the run's design (fixed, shuffled, balanced; None: inferred,
    fixed when every parsed repeat showed the given order)."""
    parsed = [r for entry in items for r in entry[0] if r.scores is not None]
    if order is None:
        order = (
            "fixed" if parsed and all(r.shown == tuple(range(len(r.shown))) for r in parsed) else "shuffled"
        )
    fixed = order == "fixed"
    swap: list[list[float]] = []
    first: list[list[float]] = []
    length: list[list[float]] = []
    humans = [entry[2] if len(entry) > 2 else None for entry in items]
    rated = any(h is not None for h in humans)
    for entry, human in zip(items, humans, strict=True):
        repeats, lengths = entry[0], entry[1]
        if not any(r.scores is not None for r in repeats):
            continue
        swap.append([*swap_consistency(repeats), *same_order_consistency(repeats)])
        wins, n = first_shown_wins(repeats)
        first.append([wins, n, first_shown_chance(repeats)])
        if human is not None:  # with ratings, judge and physicians over the same rated items
            length.append(
                [*length_preference(repeats, lengths), *physicians_length_preference(repeats, lengths, human)]
            )
        elif not rated:
            length.append([*length_preference(repeats, lengths), 0, 0])

    def array(rows: list[list[float]], width: int) -> Counts:
        return np.array(rows, dtype=np.float64).reshape(-1, width)

    return {
        "order": order,
        "items": len(swap),
        "swap_consistency": _swap(array(swap, 4), fixed, resamples, seed),
        "first_shown_wins": _first(array(first, 3), fixed, resamples, seed),
        "length_preference": {
            "items": len(length),
            **_length(array(length, 4), rated, fixed, resamples, seed),
        },
    }
