"""How well a judge agrees with physicians, and how well physicians agree with each other.

* **Order agreement** (the paper's headline): Accuracy_2-tuple and Accuracy_triple with the spec's
  tie rules; an item the judge could not be read on counts all its pairs wrong, an item without
  physician ratings is skipped. Computed, with the pooled response-level correlations, by the
  shared :class:`clinieval.analysis.judge_vs_human.ScoredResponses` (``clinieval analyze
  --human-score`` uses the same), so the two never disagree on what the figures mean.
* **Response-level correlation**: Spearman and Pearson between the judge's scores and the
  physicians' mean scores over every response both scored. The responses of one item are not
  independent (same question, same reference, same judge reply), so the CI and p-value that go
  with the figure (:func:`clustered_correlation`) resample and permute whole items; the pooled
  p-value and Fisher-z CI, which treat every response as independent, are kept as a labelled
  secondary.
* **Repeats** (:func:`per_run_agreement`, the paper's estimator): every metric on each run's own
  verdicts (a failed reply counts its pairs wrong in that run), averaged over the runs, with their
  spread (sample SD, min-max).
* **Physician reliability**: ICC (two-way, absolute agreement, pingouin's ICC2 and ICC2k) over the
  responses every physician rated, and Krippendorff's alpha (interval) over all ratings, missing
  allowed; the paper had 5 doctors with ICC 0.712 and alpha 0.725.

A statistic the data cannot define (fewer than 3 responses, a constant column, one physician) is
None with its reason in ``undefined``, never NaN.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from itertools import permutations
from typing import Any, NamedTuple

import numpy as np
from numpy.typing import NDArray

from clinieval.analysis._validation import UndefinedStatisticError
from clinieval.benchmarks.automedeval.judge_set import JudgeItem
from clinieval.errors import UserError

JSON = dict[str, Any]


def _reference(item: JudgeItem) -> list[float] | None:
    """The physicians' mean score of each response; None unless every response was rated."""
    from clinieval.analysis.judge_vs_human import complete

    return complete(item.human_scores())


def judge_agreement(items: Sequence[JudgeItem], judged: Mapping[str, Sequence[float] | None]) -> JSON:
    """A judge's scores (item id -> one score per response in the item's order, or None when its
    reply was unparsed) against the physicians' mean scores: the ordering accuracies and the
    pooled response-level correlations of :class:`clinieval.analysis.judge_vs_human.ScoredResponses`,
    the one implementation ``clinieval analyze --human-score`` uses too."""
    from clinieval.analysis.judge_vs_human import CORRELATIONS, ScoredResponses

    reference, judge = [], []
    for item in items:
        scores = judged.get(item.id)
        if scores is not None and len(scores) != len(item.responses):
            raise UserError(
                f"item {item.id!r}: {len(scores)} judge scores for {len(item.responses)} responses"
            )
        reference.append(_reference(item))
        judge.append(None if scores is None else [float(s) for s in scores])
    scored = ScoredResponses(reference, judge)
    oa = scored.order()
    out: JSON = {
        "accuracy_2tuple": oa.accuracy_2tuple,
        "accuracy_triple": oa.accuracy_triple,
        "items": oa.items,
        "judge_missing": oa.judge_missing,
        "skipped_no_reference": oa.skipped_no_reference,
        "undefined": [],
    }
    out["responses"] = len(scored.pairs()[0])
    for name in CORRELATIONS:
        try:
            r = scored.correlation(name)
            out[name] = {"r": r.statistic, "pvalue": r.pvalue, "n": r.n}
        except (UndefinedStatisticError, UserError) as e:
            out[name] = None
            out["undefined"].append(f"{name}: {e}")
    return out


def _spread(values: Sequence[float | None]) -> JSON:
    """The per-run values, their sample SD (None with fewer than 2), min and max."""
    got = [v for v in values if v is not None]
    mean = sum(got) / len(got) if got else None
    sd = (
        math.sqrt(sum((v - mean) ** 2 for v in got) / (len(got) - 1))
        if mean is not None and len(got) >= 2
        else None
    )
    return {
        "values": list(values),
        "sd": sd,
        "min": min(got) if got else None,
        "max": max(got) if got else None,
    }


def per_run_agreement(
    items: Sequence[JudgeItem], runs: Sequence[Mapping[str, Sequence[float] | None]]
) -> JSON:
    """The paper's estimator: :func:`judge_agreement` on each run's own verdicts (item id -> the
    run's scores, None where its reply failed: all the item's pairs wrong in that run), averaged
    over the runs, with the spread across runs. A correlation undefined in some run (constant
    scores) is averaged over the runs where it is defined, and the others are named."""
    if not runs:
        raise UserError("no verdicts: the judge run has no repeat to score")
    per = [judge_agreement(items, run) for run in runs]
    out: JSON = {
        "estimator": "per-run",
        "runs": len(runs),
        "items": per[0]["items"],
        "skipped_no_reference": per[0]["skipped_no_reference"],
        "judge_missing": sum(p["judge_missing"] for p in per),
        "responses": [p["responses"] for p in per],
        "undefined": [],
        "spread": {},
    }
    for key in ("accuracy_2tuple", "accuracy_triple"):
        values = [float(p[key]) for p in per]
        out[key] = sum(values) / len(values)
        out["spread"][key] = _spread(values)
    for name in ("spearman", "pearson"):
        rs = [p[name]["r"] if p[name] else None for p in per]
        out["spread"][name] = _spread(rs)
        got = [(r, p[name]["n"]) for r, p in zip(rs, per, strict=True) if r is not None]
        if not got:
            out[name] = None
            out["undefined"].append(next(u for u in per[0]["undefined"] if u.startswith(name)))
            continue
        out[name] = {"r": sum(r for r, _ in got) / len(got), "n": round(sum(n for _, n in got) / len(got))}
        missing = [str(i) for i, r in enumerate(rs) if r is None]
        if missing:
            out["undefined"].append(
                f"{name}: undefined in run(s) {', '.join(missing)} (constant scores); "
                "averaged over the others"
            )
    return out


# --- correlations clustered by item --------------------------------------------------------------


MIN_CLUSTER_ITEMS = 10
"""Fewer items than this and the cluster bootstrap's CI and p are not given: resampling a handful
of items gives intervals that are far too narrow (with 2 items, p = 1/(1 + resamples) whatever
the data say). The item-permutation diagnostic, exact at any size, is still given."""

_CHUNK = 256
"""Resamples evaluated at once (bounded memory for large sets)."""


def _r_rows(x: NDArray[np.float64], y: NDArray[np.float64], method: str) -> NDArray[np.float64]:
    """Row-wise Pearson (or Spearman: Pearson of average ranks) r over the cells where both rows
    have a value (NaN elsewhere); NaN where fewer than 3 cells or a constant row."""
    from scipy.stats import rankdata

    both = np.isfinite(x) & np.isfinite(y)
    x, y = np.where(both, x, np.nan), np.where(both, y, np.nan)
    if method == "spearman":
        x = rankdata(x, axis=1, nan_policy="omit")
        y = rankdata(y, axis=1, nan_policy="omit")
    n = both.sum(axis=1, keepdims=True)
    with np.errstate(divide="ignore", invalid="ignore"):
        x, y = np.where(both, x, 0.0), np.where(both, y, 0.0)
        dx = np.where(both, x - x.sum(axis=1, keepdims=True) / n, 0.0)
        dy = np.where(both, y - y.sum(axis=1, keepdims=True) / n, 0.0)
        denominator = np.sqrt((dx * dx).sum(axis=1) * (dy * dy).sum(axis=1))
        r: NDArray[np.float64] = np.where(
            (n[:, 0] >= 3) & (denominator > 0), (dx * dy).sum(axis=1) / denominator, np.nan
        )
    return r


def _pooled(r: float, n: int) -> JSON:
    """The pooled figure's p-value (t on n - 2 df: scipy's for both coefficients) and Fisher-z CI,
    every response treated as independent."""
    from scipy import stats

    from clinieval.analysis.agreement import fisher_z_ci

    label = "pooled: responses treated as independent (understates the uncertainty)"
    out: JSON = {"n": n, "pvalue": None, "ci": None, "label": label}
    if n > 2:
        if abs(r) >= 1:
            out["pvalue"] = 0.0
        else:
            t = r * math.sqrt((n - 2) / (1 - r * r))
            out["pvalue"] = float(2 * stats.t.sf(abs(t), n - 2))
    if n > 3 and abs(r) < 1:
        out["ci"] = list(fisher_z_ci(r, n))
    return out


def clustered_correlation(
    human: Sequence[Sequence[float]],
    runs: Sequence[Sequence[Sequence[float] | None]],
    method: str,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> JSON | None:
    """A judge-physician correlation whose CI and p-value respect clustering by item.

    ``human[g]``: the physicians' scores of item g's responses; ``runs[r][g]``: the judge's scores
    of them in run r (None: failed). The figure is the mean over runs of each run's response-level
    correlation (one run: the correlation itself; a run where it is undefined is left out).

    * CI: percentile bootstrap resampling whole items (a resample where the figure is undefined is
      left out); p-value of "the figure is 0" from the same resamples by the shifted bootstrap
      (as :func:`clinieval.analysis.uncertainty.paired_bootstrap`): p = (1 + resamples at least
      |r| from r) / (1 + resamples). Both None with fewer than :data:`MIN_CLUSTER_ITEMS` items.
    * ``item_permutation``: a diagnostic, one-sided: the items' judge score vectors are permuted
      among the items (of the same k), keeping each item's responses together; p = the share of
      arrangements whose figure reaches the observed one (every arrangement when there are at
      most ``resamples``, else ``resamples`` random ones, p = (1 + reached) / (1 + resamples)). It
      asks whether the judge follows each item's answers beyond a pattern common to all items: a
      judge that gives every item the same scores (say, the first shown the highest, under a fixed
      order that always shows the best model first) correlates with the physicians through the
      models and gets p = 1 here.

    None when the figure is undefined (constant scores, fewer than 3 responses)."""
    g, width = len(human), max((len(h) for h in human), default=0)
    h_pad = np.full((g, width), np.nan)
    j_pad = np.full((len(runs), g, width), np.nan)
    for i, h in enumerate(human):
        h_pad[i, : len(h)] = h
        for r, run in enumerate(runs):
            scores = run[i]
            if scores is not None:
                j_pad[r, i, : len(h)] = scores

    def figures(h_items: NDArray[np.int64], j_items: NDArray[np.int64]) -> NDArray[np.float64]:
        """The figure for each row of item indices (rows x g): humans of h_items[m] against the
        judge's scores of j_items[m]."""
        out = []
        for lo in range(0, h_items.shape[0], _CHUNK):
            hi, ji = h_items[lo : lo + _CHUNK], j_items[lo : lo + _CHUNK]
            y = h_pad[hi].reshape(hi.shape[0], -1)
            per_run = np.stack(
                [_r_rows(j_pad[r][ji].reshape(ji.shape[0], -1), y, method) for r in range(len(runs))]
            )
            with np.errstate(invalid="ignore"), warnings.catch_warnings():
                warnings.simplefilter("ignore", RuntimeWarning)  # all runs undefined: NaN, left out
                out.append(np.nanmean(per_run, axis=0))
        return np.concatenate(out)

    identity = np.arange(g, dtype=np.int64)[None, :]
    observed = float(figures(identity, identity)[0]) if g else math.nan
    if math.isnan(observed):
        return None
    rng = np.random.default_rng(seed)
    rows = rng.integers(0, g, (resamples, g))
    boot = figures(rows, rows)
    boot = boot[np.isfinite(boot)]
    tol = 1e-12 * max(1.0, abs(observed))
    ci = pvalue = None
    if boot.size and g >= MIN_CLUSTER_ITEMS:
        ci = [float(x) for x in np.quantile(boot, [0.025, 0.975])]
        pvalue = (1 + int(np.sum(np.abs(boot - observed) >= abs(observed) - tol))) / (1 + boot.size)
    arrangements = _arrangements([len(h) for h in human], resamples, rng)
    permuted = figures(
        np.repeat(identity, len(arrangements.draws), axis=0), np.array(arrangements.draws, dtype=np.int64)
    )
    reached = int(np.sum(permuted[np.isfinite(permuted)] >= observed - tol))
    permutation_p = (
        reached / len(arrangements.draws) if arrangements.exact else (1 + reached) / (1 + resamples)
    )
    responses = [int(np.isfinite(j_pad[r]).sum()) for r in range(len(runs))]
    return {
        "r": observed,
        "n": round(sum(responses) / len(responses)),
        "items": g,
        "ci": ci,
        "pvalue": pvalue,
        "ci_method": f"cluster bootstrap over items (percentile CI, shifted p; {resamples} resamples)",
        "item_permutation": {
            "pvalue": permutation_p,
            "method": (
                f"exact item permutation ({len(arrangements.draws)} arrangements), one-sided"
                if arrangements.exact
                else f"item permutation ({resamples} random arrangements), one-sided"
            ),
            "label": "does the judge follow each item beyond a pattern common to all items",
        },
    }


class _Arrangements(NamedTuple):
    draws: list[list[int]]
    exact: bool


def _arrangements(sizes: Sequence[int], resamples: int, rng: np.random.Generator) -> _Arrangements:
    """Permutations of the items that map each item to one with as many responses: all of them
    when there are at most ``resamples`` (the identity included), else ``resamples`` random ones."""
    groups: dict[int, list[int]] = {}
    for g, k in enumerate(sizes):
        groups.setdefault(k, []).append(g)
    if len(groups) == 1 and math.factorial(len(sizes)) <= resamples:
        return _Arrangements([list(p) for p in permutations(range(len(sizes)))], True)
    draws = []
    for _ in range(resamples):
        target = list(range(len(sizes)))
        for members in groups.values():
            for g, h in zip(members, rng.permutation(members), strict=True):
                target[g] = int(h)
        draws.append(target)
    return _Arrangements(draws, False)


def correlations_clustered(
    items: Sequence[JudgeItem],
    runs: Sequence[Mapping[str, Sequence[float] | None]],
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> dict[str, JSON | None]:
    """:func:`clustered_correlation` for Spearman and Pearson over the items every physician
    rated and the judge scored in some run, each with its pooled secondary."""
    rated = [(item, ref) for item in items if (ref := _reference(item)) is not None]
    rated = [(item, ref) for item, ref in rated if any(run.get(item.id) is not None for run in runs)]
    human = [ref for _, ref in rated]
    judged = [[run.get(item.id) for item, _ in rated] for run in runs]
    out: dict[str, JSON | None] = {}
    for name in ("spearman", "pearson"):
        found = clustered_correlation(human, judged, name, resamples=resamples, seed=seed) if rated else None
        if found is not None:
            found["pooled"] = _pooled(found["r"], found["n"])
            if found["ci"] is None:
                found["why_no_ci"] = (
                    f"{name}: no clustered CI or p with {found['items']} items (at least "
                    f"{MIN_CLUSTER_ITEMS} needed); the item-permutation p and the pooled figures are given"
                )
        out[name] = found
    return out


def physician_reliability(items: Sequence[JudgeItem]) -> JSON:
    """ICC over the responses every physician rated, and Krippendorff's alpha over all ratings."""
    from clinieval.analysis import agreement

    physicians = sorted({p for item in items for r in item.responses for p in r.ratings})
    units = [r for item in items for r in item.responses]
    out: JSON = {
        "physicians": len(physicians),
        "responses": len(units),
        "icc": None,
        "alpha": None,
        "undefined": [],
    }
    if len(physicians) < 2:
        out["undefined"].append(f"reliability: needs 2 or more physicians, found {len(physicians)}")
        return out
    table = [[u.ratings[p].mean if p in u.ratings else None for u in units] for p in physicians]
    try:
        out["alpha"] = agreement.krippendorff_alpha(table, level_of_measurement="interval")
    except (UndefinedStatisticError, UserError) as e:
        out["undefined"].append(f"Krippendorff's alpha: {e}")
    complete = [
        [u.ratings[p].mean for p in physicians] for u in units if all(p in u.ratings for p in physicians)
    ]
    try:
        iccs = agreement.intraclass_correlation(complete)
        out["icc"] = {
            kind: {"icc": v.icc, "ci": [v.ci_low, v.ci_high]}
            for kind, v in iccs.items()
            if kind in ("ICC2", "ICC2k")
        }
        out["icc_responses"] = len(complete)
    except (UndefinedStatisticError, UserError) as e:
        out["undefined"].append(f"ICC: {e}")
    return out
