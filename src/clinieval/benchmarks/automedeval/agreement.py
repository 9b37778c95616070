"""How well a judge agrees with physicians, and how well physicians agree with each other.

* **Order agreement** (the paper's headline): Accuracy_2-tuple and Accuracy_triple with the spec's
  tie rules, from :func:`clinieval.analysis.rank_agreement.order_agreement`; an item the judge could
  not be read on counts all its pairs wrong, an item without physician ratings is skipped.
* **Response-level correlation**: Spearman and Pearson between the judge's scores and the
  physicians' mean scores over every response both scored.
* **Physician reliability**: ICC (two-way, absolute agreement, pingouin's ICC2 and ICC2k) over the
  responses every physician rated, and Krippendorff's alpha (interval) over all ratings, missing
  allowed; the paper had 5 doctors with ICC 0.712 and alpha 0.725.

A statistic the data cannot define (fewer than 3 responses, a constant column, one physician) is
None with its reason in ``undefined``, never NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from clinieval.analysis._validation import UndefinedStatisticError
from clinieval.benchmarks.automedeval.records import JudgeItem
from clinieval.errors import UserError

JSON = dict[str, Any]


def _reference(item: JudgeItem) -> list[float] | None:
    scores = item.human_scores()
    return None if any(s is None for s in scores) else [float(s) for s in scores if s is not None]


def judge_agreement(items: Sequence[JudgeItem], judged: Mapping[str, Sequence[float] | None]) -> JSON:
    """A judge's scores (item id -> one score per response in the item's order, or None when its
    reply was unparsed) against the physicians' mean scores."""
    from clinieval.analysis import agreement
    from clinieval.analysis.rank_agreement import order_agreement

    reference, judge = [], []
    for item in items:
        scores = judged.get(item.id)
        if scores is not None and len(scores) != len(item.responses):
            raise UserError(
                f"item {item.id!r}: {len(scores)} judge scores for {len(item.responses)} responses"
            )
        reference.append(_reference(item))
        judge.append(None if scores is None else [float(s) for s in scores])
    oa = order_agreement(reference, judge)
    out: JSON = {
        "accuracy_2tuple": oa.accuracy_2tuple,
        "accuracy_triple": oa.accuracy_triple,
        "items": oa.items,
        "judge_missing": oa.judge_missing,
        "skipped_no_reference": oa.skipped_no_reference,
        "undefined": [],
    }
    pairs = [
        (h, j)
        for ref, jud in zip(reference, judge, strict=True)
        if ref is not None and jud is not None
        for h, j in zip(ref, jud, strict=True)
    ]
    out["responses"] = len(pairs)
    for name, fn in (("spearman", agreement.spearman), ("pearson", agreement.pearson)):
        try:
            r = fn([p[1] for p in pairs], [p[0] for p in pairs])
            out[name] = {"r": r.statistic, "pvalue": r.pvalue, "n": r.n}
        except (UndefinedStatisticError, UserError) as e:
            out[name] = None
            out["undefined"].append(f"{name}: {e}")
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
