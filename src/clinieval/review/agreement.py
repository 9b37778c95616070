"""Live inter-rater agreement of a study, from its submitted reviews, for the admin page.

Overlap is assigned so that agreement can be measured (``review assign --per-item 2`` or more);
these numbers tell an admin early whether reviewers read the instructions the same way. Every
statistic is the one in :mod:`clinieval.analysis` that the papers' analyses use, so the live
number equals what ``clinieval analyze`` later reports on the export:

* ``rank``: mean per-item Kendall tau-b between reviewers (MedAlign), and Krippendorff's alpha
  (nominal) plus pairwise Cohen's kappa on correct/incorrect.
* ``rate``: per scale, Krippendorff's alpha (ordinal, 1-5) and the ICC (AutoMedEval).
* ``question``: alpha and pairwise kappa on keep/revise/discard.
* ``sentence``: alpha and pairwise kappa per label set (MedEval).

A statistic the data does not define yet (one reviewer, no overlap, every rating equal) is
``None`` and its reason is listed under ``undefined``: a live page must never fail or show NaN.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping
from functools import partial
from itertools import combinations
from typing import Any, TypeVar

from sqlalchemy import Engine, select

from clinieval.analysis import agreement as stats
from clinieval.analysis.rank_agreement import inter_rater_kendall
from clinieval.analysis.rankings import ScoreTable
from clinieval.errors import UserError
from clinieval.fsutil import finite_json
from clinieval.review.db import Answer, Assignment, Item, User, read_session
from clinieval.review.store import get_study

T = TypeVar("T")
Unit = tuple[str, str]
"""(item key, model) for per-answer values; (item key, "") for per-item values."""
Ratings = dict[str, dict[Unit, Any]]
"""reviewer -> unit -> value."""

Submission = tuple[str, str, dict[str, Any], dict[str, str]]
"""(reviewer, item key, payload, answer key -> model) of one submitted review."""

RESAMPLES = 1000
"""Bootstrap resamples for the tau CI: enough for a live view, cheap enough to recompute per page."""


class _Undefined:
    """Collects why statistics are missing, so the page can say it."""

    def __init__(self) -> None:
        self.reasons: list[str] = []

    def guard(self, what: str, compute: Callable[[], T]) -> T | None:
        try:
            return compute()
        except UserError as e:  # UndefinedStatisticError is one: this data does not define it
            self.reasons.append(f"{what}: {e}")
            return None


def _submitted(engine: Engine, study: str) -> tuple[str, dict[str, Any], list[Submission]]:
    """The study's kind, config and (reviewer, item, payload, answer key -> model) per submission."""
    with read_session(engine) as s:
        row = get_study(s, study)
        rows = s.execute(
            select(User.name, Item.key, Assignment.payload, Item.id)
            .join(User, Assignment.user_id == User.id)
            .join(Item, Assignment.item_id == Item.id)
            .where(Assignment.study_id == row.id, Assignment.status == "submitted")
            .order_by(Item.id, User.name)
        ).all()
        sources: dict[int, dict[str, str]] = defaultdict(dict)
        for item_id, key, source in s.execute(
            select(Answer.item_id, Answer.key, Answer.source)
            .join(Item, Answer.item_id == Item.id)
            .where(Item.study_id == row.id)
        ).all():
            sources[item_id][key] = source
        return row.kind, row.config, [(r, k, p or {}, sources[i]) for r, k, p, i in rows]


def _per_answer(subs: list[Submission], field: str) -> Ratings:
    out: Ratings = defaultdict(dict)
    for reviewer, item, payload, sources in subs:
        for key, values in payload.get("answers", {}).items():
            if values.get(field) is not None:
                out[reviewer][(item, sources[key])] = values[field]
    return dict(out)


def _overlap(ratings: Ratings) -> int:
    counts = Counter(u for r in ratings.values() for u in r)
    return len({u[0] for u, n in counts.items() if n >= 2})


def _alpha(ratings: Ratings, level: stats.AlphaLevel, what: str, undefined: _Undefined) -> float | None:
    units = sorted({u for r in ratings.values() for u in r})
    data = [[r.get(u) for u in units] for r in ratings.values()]
    if len(data) < 2:
        undefined.reasons.append(f"{what}: needs submissions from two reviewers")
        return None
    return undefined.guard(what, lambda: stats.krippendorff_alpha(data, level_of_measurement=level))


def _kappas(ratings: Ratings, what: str, undefined: _Undefined) -> dict[str, Any]:
    """Cohen's kappa for every pair of reviewers on the units both labelled, and their mean."""
    pairs: list[dict[str, Any]] = []
    for a, b in combinations(sorted(ratings), 2):
        common = sorted(set(ratings[a]) & set(ratings[b]))
        if len(common) < 2:
            continue
        x: list[Hashable] = [ratings[a][u] for u in common]
        y: list[Hashable] = [ratings[b][u] for u in common]
        kappa = undefined.guard(f"{what} kappa {a} vs {b}", partial(stats.cohen_kappa, x, y))
        pairs.append({"a": a, "b": b, "n": len(common), "kappa": kappa})
    defined = [p["kappa"] for p in pairs if p["kappa"] is not None]
    if not pairs:
        undefined.reasons.append(f"{what} kappa: no two reviewers share two or more units yet")
    return {"mean": sum(defined) / len(defined) if defined else None, "pairs": pairs}


def _labels(ratings: Ratings, what: str, undefined: _Undefined) -> dict[str, Any]:
    return {
        "krippendorff_alpha_nominal": _alpha(ratings, "nominal", what, undefined),
        "cohen_kappa": _kappas(ratings, what, undefined),
        "items_with_overlap": _overlap(ratings),
    }


def _kendall(ratings: Ratings, undefined: _Undefined) -> dict[str, Any] | None:
    tables = {
        r: ScoreTable.from_rows((i, m, float(v)) for (i, m), v in units.items())
        for r, units in ratings.items()
        if units
    }
    result = undefined.guard("Kendall's tau", lambda: inter_rater_kendall(tables, resamples=RESAMPLES))
    if result is None:
        return None
    return {
        "mean_tau_b": result.mean,
        "ci": list(result.ci) if result.ci else None,
        "items": result.items,
        "pairs": result.pairs,
        "skipped_constant": len(result.skipped_constant),
        "skipped_incomplete": len(result.skipped_incomplete),
    }


def _icc(ratings: Ratings, what: str, undefined: _Undefined) -> dict[str, Any] | None:
    """The ICC over units rated by the most common number k >= 2 of reviewers (the first k by
    name where more rated one). Two-way ICC(A,1)/ICC(A,k) when the same k reviewers rated every
    such unit (a crossed design); one-way ICC(1,1)/ICC(1,k) when reviewers vary between units, as
    overlap assignment makes them (the two-way model would misattribute rater effects)."""
    by_unit: dict[Unit, dict[str, float]] = defaultdict(dict)
    for reviewer, units in ratings.items():
        for unit, value in units.items():
            by_unit[unit][reviewer] = float(value)
    counts = Counter(len(v) for v in by_unit.values() if len(v) >= 2)
    if not counts:
        undefined.reasons.append(f"{what} ICC: no answer was rated by two reviewers yet")
        return None
    k = max(counts, key=lambda c: (counts[c], c))
    chosen = {u: dict(sorted(v.items())[:k]) for u, v in sorted(by_unit.items()) if len(v) >= k}
    crossed = len({tuple(v) for v in chosen.values()}) == 1
    matrix = [list(v.values()) for v in chosen.values()]
    result = undefined.guard(f"{what} ICC", lambda: stats.intraclass_correlation(matrix))
    if result is None:
        return None
    single: stats.ICCKind = "ICC2" if crossed else "ICC1"
    mean: stats.ICCKind = "ICC2k" if crossed else "ICC1k"
    return {
        "model": "two-way random, absolute agreement" if crossed else "one-way random",
        "raters_per_unit": k,
        "units": len(matrix),
        "single": result[single].icc,
        "average": result[mean].icc,
        "ci_single": [result[single].ci_low, result[single].ci_high],
    }


def _rank(subs: list[Submission], undefined: _Undefined) -> dict[str, Any]:
    ranks = _per_answer(subs, "rank")
    correct = _per_answer(subs, "correct")
    return {"kendall_tau": _kendall(ranks, undefined), "correct": _labels(correct, "correct", undefined)}


def _rate(subs: list[Submission], config: Mapping[str, Any], undefined: _Undefined) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for scale in config["scales"]:
        name = scale["name"]
        ratings = _per_answer(subs, name)
        out[name] = {
            "krippendorff_alpha_ordinal": _alpha(ratings, "ordinal", name, undefined),
            "icc": _icc(ratings, name, undefined),
            "items_with_overlap": _overlap(ratings),
        }
    return {"scales": out}


def _per_item(subs: list[Submission], get: Callable[[dict[str, Any]], Any]) -> Ratings:
    out: Ratings = defaultdict(dict)
    for reviewer, item, payload, _ in subs:
        value = get(payload)
        if value is not None:
            out[reviewer][(item, "")] = value
    return dict(out)


def _label(payload: dict[str, Any], name: str) -> Any:
    return payload.get("labels", {}).get(name)


def study_agreement(engine: Engine, study: str) -> dict[str, Any]:
    """Agreement between the reviewers of ``study`` over its submitted reviews (JSON-ready)."""
    kind, config, subs = _submitted(engine, study)
    undefined = _Undefined()
    out: dict[str, Any] = {
        "study": study,
        "kind": kind,
        "submitted": len(subs),
        "reviewers": len({s[0] for s in subs}),
    }
    if kind == "rank":
        out.update(_rank(subs, undefined))
    elif kind == "rate":
        out.update(_rate(subs, config, undefined))
    elif kind == "question":
        out["decision"] = _labels(_per_item(subs, lambda p: p.get("decision")), "decision", undefined)
    elif kind == "sentence":
        out["labels"] = {
            name: _labels(_per_item(subs, partial(_label, name=name)), name, undefined)
            for name in config["labels"]
        }
    out["undefined"] = undefined.reasons
    result: dict[str, Any] = finite_json(out)
    return result
