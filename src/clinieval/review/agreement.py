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
``None`` and its reason is listed under ``undefined``, and in plain words under the section's
``why`` (``why.alpha``, ``why.icc``, ``why.kappa``; the ranking's under the top level's
``why.kendall_tau``): a live page must never fail or show NaN. Each alpha comes with ``alpha``:
its 95 % CI (a percentile bootstrap over items, seeded), the units it rests on (answers or items
reviewed by two or more reviewers) and the reviewers who rated them. The mean pairwise Cohen's
kappa gets the same bootstrap (same items drawn, same seed, resamples and level). A CI that cannot
be estimated is None with its reason beside it (``ci_why``): over one item a bootstrap draws that
item every time and its "interval" is the point estimate twice, which reads as certainty.

:func:`disagreements` lists the items where reviewers differ most on one measure (a scale, a label
set, the ranking...), their values side by side with each reviewer's written reason (rationale,
comment or rewrite), for the admin to see what the numbers come from and adjudicate.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass
from functools import partial
from itertools import combinations
from typing import Any, Final, TypeVar

import numpy as np
from sqlalchemy import Engine, func, select

from clinieval.analysis import agreement as stats
from clinieval.analysis.rank_agreement import inter_rater_kendall
from clinieval.analysis.rankings import ScoreTable
from clinieval.errors import UserError
from clinieval.fsutil import finite_json
from clinieval.review.db import Answer, Assignment, Item, User, read_session
from clinieval.review.items import excerpt
from clinieval.review.store import get_study, submitted_reviews
from clinieval.review.study_kinds import Measure, get_kind

T = TypeVar("T")
Unit = tuple[str, str]
"""(item key, model) for per-answer values; (item key, "") for per-item values."""
Ratings = dict[str, dict[Unit, Any]]
"""reviewer -> unit -> value."""

Submission = tuple[str, str, dict[str, Any], dict[str, str]]
"""(reviewer, item key, payload, answer key -> model) of one submitted review."""

RESAMPLES = 1000
"""Bootstrap resamples for the tau, alpha and kappa CIs: enough for a live view, cheap enough to recompute
per page (alpha's are summed from per-item coincidence matrices, not recomputed from the data)."""


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
        rows = s.execute(submitted_reviews(row, User.name, Item.key, Assignment.payload, Item.id)).all()
        sources: dict[int, dict[str, str]] = defaultdict(dict)
        for item_id, key, source in s.execute(
            select(Answer.item_id, Answer.key, Answer.source)
            .join(Item, Answer.item_id == Item.id)
            .where(Item.study_id == row.id)
        ).all():
            sources[item_id][key] = source
        return row.kind, row.config, [(r, k, p or {}, sources[i]) for r, k, p, i in rows]


def _ratings(subs: list[Submission], measure: Measure) -> Ratings:
    """Each reviewer's values of ``measure``: per answer (unit: item and the answer's model) or
    per item (unit: item and "")."""
    out: Ratings = defaultdict(dict)
    for reviewer, item, payload, sources in subs:
        for unit, value in measure.values(payload).items():
            out[reviewer][(item, sources[unit] if measure.per_answer else "")] = value
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


def _shared(ratings: Ratings) -> list[Unit]:
    """The units rated by two or more reviewers: all that agreement rests on."""
    counts = Counter(u for r in ratings.values() for u in r)
    return sorted(u for u, n in counts.items() if n >= 2)


def _raters(ratings: Ratings, units: Sequence[Unit]) -> int:
    wanted = set(units)
    return sum(1 for r in ratings.values() if wanted & set(r))


def _word(value: object) -> str:
    """A stored value in a sentence (the only true/false a kind stores is MedAlign's correct mark)."""
    if isinstance(value, bool):
        return "correct" if value else "incorrect"
    return str(value)


def why_undefined(ratings: Ratings) -> str | None:
    """Why these ratings cannot measure agreement yet, in plain words; None when they can."""
    reviewers = sum(1 for r in ratings.values() if r)
    if reviewers == 0:
        return "no review has been submitted yet"
    if reviewers == 1:
        return "only one reviewer has submitted so far; agreement needs two who reviewed the same items"
    shared = _shared(ratings)
    if not shared:
        return "no item has been reviewed by two reviewers yet"
    values = {ratings[r][u] for r in ratings for u in shared if u in ratings[r]}
    if len(values) == 1:
        return (
            f"every rating is the same ({_word(next(iter(values)))}), so there is no variation to"
            " measure agreement on (this is not disagreement)"
        )
    return None


CI_ONE_UNIT: Final = "not estimable (one unit)"
"""A bootstrap over one unit draws that unit every time: the interval has no width and says nothing."""
CI_NO_UNITS: Final = "not estimable (no unit rated by two reviewers)"
CI_UNSTABLE: Final = "not estimable (undefined on most resamples: too little variation)"


def _alpha_block(ratings: Ratings, level: stats.AlphaLevel) -> dict[str, Any]:
    shared = _shared(ratings)
    ci, why = _alpha_ci(ratings, level)
    return {"ci": ci, "ci_why": why, "units": len(shared), "raters": _raters(ratings, shared)}


def _item_draws(items: int, resamples: int = RESAMPLES) -> np.ndarray[Any, np.dtype[np.int64]]:
    """How often each item is drawn in each resample (resamples x items), seeded: every bootstrap
    of this module resamples items the same way, so their CIs are comparable."""
    rng = np.random.default_rng(0)
    return rng.multinomial(items, np.full(items, 1.0 / items), size=resamples)


def _percentile_ci(replicates: Sequence[float], resamples: int) -> tuple[list[float] | None, str | None]:
    """The 95 % percentile interval, or None and why when most resamples left it undefined."""
    if len(replicates) < resamples // 2:
        return None, CI_UNSTABLE
    low, high = np.percentile(replicates, [2.5, 97.5])
    return [float(low), float(high)], None


def _too_few(items: int) -> str | None:
    """Why a bootstrap over ``items`` items is not worth showing (None when it is)."""
    return CI_NO_UNITS if items == 0 else CI_ONE_UNIT if items == 1 else None


def _alpha_ci(
    ratings: Ratings, level: stats.AlphaLevel, resamples: int = RESAMPLES
) -> tuple[list[float] | None, str | None]:
    """The 95 % percentile bootstrap CI of Krippendorff's alpha, items drawn with replacement (an
    item's answers together, since they share a question and a reviewer), seeded, and None or why
    it is missing. Alpha depends on the data only through the coincidence matrix, a sum over units,
    so each item's share is summed once and a resample is a weighted sum of those. None when fewer
    than two items overlap or most resamples leave alpha undefined."""
    units = _shared(ratings)
    items = sorted({u[0] for u in units})
    if len(ratings) < 2 or len(items) < 2:
        return None, _too_few(len(items) if len(ratings) >= 2 else 0)
    try:
        # the analysis module's own coding and distances, so the CI is of the very same alpha
        codes, domain = stats._coded_units([[r.get(u) for u in units] for r in ratings.values()], level)
    except UserError as e:
        return None, f"not estimable ({e})"
    q = len(domain)
    counts = np.zeros((len(units), q))
    rater_idx, unit_idx = np.nonzero(codes >= 0)
    np.add.at(counts, (unit_idx, codes[rater_idx, unit_idx]), 1.0)
    m = counts.sum(axis=1)
    per_unit = counts[:, :, None] * counts[:, None, :]
    per_unit[:, np.arange(q), np.arange(q)] -= counts
    per_unit /= (m - 1.0)[:, None, None]
    index = {item: i for i, item in enumerate(items)}
    by_item = np.zeros((len(items), q, q))
    np.add.at(by_item, [index[u[0]] for u in units], per_unit)
    draws = _item_draws(len(items), resamples)
    replicates: list[float] = []
    for o in (draws @ by_item.reshape(len(items), q * q)).reshape(resamples, q, q):
        marginals = o.sum(axis=1)
        n = float(marginals.sum())
        d2 = stats._squared_distances(domain, marginals, level)
        expected = float((np.outer(marginals, marginals) * d2).sum())
        if n >= 2 and expected > 0:
            replicates.append(1.0 - (n - 1.0) * float((o * d2).sum()) / expected)
    return _percentile_ci(replicates, resamples)


def _pair_tables(ratings: Ratings, pairs: Sequence[tuple[str, str]], items: Sequence[str]) -> np.ndarray:
    """Per pair of reviewers and item, the joint label table of the units both labelled
    (pairs x items x q x q): Cohen's kappa depends on the data only through this table, summed over
    items, so a bootstrap resample is a weighted sum of these."""
    labels = sorted({_key(v) for r in ratings.values() for v in r.values()})
    code = {lab: i for i, lab in enumerate(labels)}
    index = {item: i for i, item in enumerate(items)}
    q = len(labels)
    out = np.zeros((len(pairs), len(items), q, q))
    for p, (a, b) in enumerate(pairs):
        for u in set(ratings[a]) & set(ratings[b]):
            out[p, index[u[0]], code[_key(ratings[a][u])], code[_key(ratings[b][u])]] += 1.0
    return out


def _kappa_ci(
    ratings: Ratings, pairs: Sequence[tuple[str, str]], resamples: int = RESAMPLES
) -> tuple[list[float] | None, str | None]:
    """The 95 % percentile bootstrap CI of the mean pairwise Cohen's kappa, items drawn with
    replacement exactly as for alpha (same seed, resamples and level); in each resample the mean is
    over the pairs whose kappa that resample defines, as the point estimate's is."""
    items = sorted({u[0] for a, b in pairs for u in set(ratings[a]) & set(ratings[b])})
    if len(items) < 2:
        return None, _too_few(len(items))
    tables = _pair_tables(ratings, pairs, items)
    draws = _item_draws(len(items), resamples).astype(np.float64)
    resampled = np.einsum("ri,piab->rpab", draws, tables)
    kappas = stats.kappa_of_tables(resampled)  # NaN where undefined, as cohen_kappa raises
    defined = ~np.isnan(kappas)
    keep = defined.any(axis=1)
    means = np.nansum(kappas[keep], axis=1) / defined[keep].sum(axis=1)
    return _percentile_ci([float(m) for m in means], resamples)


def _kappas(ratings: Ratings, what: str, undefined: _Undefined) -> dict[str, Any]:
    """Cohen's kappa for every pair of reviewers on the units both labelled, their mean, and the
    mean's bootstrap CI (``ci``; None with ``ci_why`` saying why)."""
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
    ci, ci_why = _kappa_ci(ratings, [(p["a"], p["b"]) for p in pairs]) if defined else (None, None)
    return {
        "mean": sum(defined) / len(defined) if defined else None,
        "ci": ci,
        "ci_why": ci_why,
        "pairs": pairs,
    }


def _labels(ratings: Ratings, what: str, undefined: _Undefined) -> dict[str, Any]:
    alpha = _alpha(ratings, "nominal", what, undefined)
    kappa = _kappas(ratings, what, undefined)
    why = why_undefined(ratings)
    return {
        "krippendorff_alpha_nominal": alpha,
        "alpha": _alpha_block(ratings, "nominal"),
        "cohen_kappa": kappa,
        "items_with_overlap": _overlap(ratings),
        "why": _whys(why, undefined, what, alpha=alpha, kappa=kappa["mean"]),
    }


def _whys(why: str | None, undefined: _Undefined, what: str, **values: object) -> dict[str, str]:
    """For each statistic that is None, why, in words (the data's reason, else the statistic's)."""
    out: dict[str, str] = {}
    for name, value in values.items():
        if value is None:
            fallback = next((r.split(": ", 1)[1] for r in undefined.reasons if r.startswith(what)), None)
            out[name] = why or fallback or "not defined by these reviews"
    return out


def _kendall(ratings: Ratings, undefined: _Undefined) -> dict[str, Any] | None:
    tables = {
        r: ScoreTable.from_rows((i, m, float(v)) for (i, m), v in units.items())
        for r, units in ratings.items()
        if units
    }
    result = undefined.guard("Kendall's tau", lambda: inter_rater_kendall(tables, resamples=RESAMPLES))
    if result is None:
        return None
    out: dict[str, Any] = dict(result.as_json())
    why = _too_few(result.items)
    if why is not None:  # one item's tau bootstrapped is that tau every time: "0.33 to 0.33"
        out["ci"] = None
    out["ci_why"] = why
    return out


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
        "ci_average": [result[mean].ci_low, result[mean].ci_high],
        "name_single": "ICC(A,1)" if crossed else "ICC(1,1)",
        "name_average": f"ICC(A,{k})" if crossed else f"ICC(1,{k})",
    }


@dataclass(frozen=True, slots=True)
class _Stats:
    """The statistics a kind composes its agreement from (:class:`~clinieval.review.study_kinds.
    base.AgreementStats`), over one study's submissions; missing ones are noted in ``undefined``."""

    subs: list[Submission]
    undefined: _Undefined

    def ranking(self, rank: Measure, correct: Measure) -> dict[str, Any]:
        ranks = _ratings(self.subs, rank)
        tau = _kendall(ranks, self.undefined)
        return {
            "kendall_tau": tau,
            "correct": self.nominal(correct),
            "why": _whys(why_undefined(ranks), self.undefined, "Kendall's tau", kendall_tau=tau),
        }

    def ordinal(self, measure: Measure) -> dict[str, Any]:
        name = measure.key
        ratings = _ratings(self.subs, measure)
        alpha = _alpha(ratings, "ordinal", name, self.undefined)
        icc = _icc(ratings, name, self.undefined)
        return {
            "label": measure.label,
            "krippendorff_alpha_ordinal": alpha,
            "alpha": _alpha_block(ratings, "ordinal"),
            "icc": icc,
            "items_with_overlap": _overlap(ratings),
            "why": _whys(why_undefined(ratings), self.undefined, name, alpha=alpha, icc=icc),
        }

    def nominal(self, measure: Measure) -> dict[str, Any]:
        return _labels(_ratings(self.subs, measure), measure.key, self.undefined)


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
    out.update(get_kind(kind).agreement(config, _Stats(subs, undefined)))
    out["undefined"] = undefined.reasons
    result: dict[str, Any] = finite_json(out)
    return result


def measure_sections(result: Mapping[str, Any]) -> dict[str, Mapping[str, Any]]:
    """The parts of a :func:`study_agreement` result by measure key (the keys of the study kind's
    :meth:`~clinieval.review.study_kinds.Kind.measures`): what the admin page's tables read."""
    out: dict[str, Mapping[str, Any]] = {}
    if "kendall_tau" in result:
        out["rank"] = {
            "kendall_tau": result["kendall_tau"],
            "reviewers": result.get("reviewers"),
            "why": result.get("why") or {},
        }
    for key in ("correct", "decision"):
        if isinstance(result.get(key), Mapping):
            out[key] = result[key]
    for group in ("scales", "labels"):
        out.update(result.get(group) or {})
    return out


# --- where reviewers differ, item by item -----------------------------------------------------------

MAX_DISAGREEMENTS: Final = 200
"""Items listed at most (the largest gaps first): enough to see a pattern, small enough for a page."""
EXCERPT_CHARS: Final = 90


class UnknownMeasure(UserError):
    """The study's kind measures nothing by that name."""


@dataclass(frozen=True, slots=True)
class Disagreement:
    """One item where reviewers differ on a measure: its key, a preview of its question, the gap
    (ordered values: the largest difference between two reviewers on one answer; labels: how many
    answers, or whether the item, got different values), and the values side by side: one row per
    answer (named by the start of its text, never by its model) or one row for the item, one column
    per reviewer (``—`` where a reviewer gave none). ``written`` is parallel to ``rows``: each
    reviewer's written reason for that row (a rationale, a comment, a rewrite; "" when none), which
    the admin needs to adjudicate the disagreement."""

    item: str
    preview: str
    gap: int
    reviewers: tuple[str, ...]
    rows: tuple[tuple[str, tuple[str, ...]], ...]
    written: tuple[tuple[str, ...], ...] = ()


@dataclass(frozen=True, slots=True)
class Disagreements:
    study: str
    measure: Measure
    measures: tuple[Measure, ...]
    compared: int
    """Items with submitted reviews from two or more reviewers."""
    items: tuple[Disagreement, ...]
    """The items where they differ (at most :data:`MAX_DISAGREEMENTS`), the largest gap first."""
    differing: int
    """How many items differ in all (``items`` may be cut)."""


def _shown(value: object) -> str:
    return "—" if value is None else _word(value)


def _gaps(measure: Measure, by_reviewer: Mapping[str, Mapping[str, Any]]) -> dict[str, int]:
    """Each unit's gap between reviewers: the largest difference (ordered) or 1 when they differ."""
    units = sorted({u for values in by_reviewer.values() for u in values})
    out: dict[str, int] = {}
    for unit in units:
        given = [v[unit] for v in by_reviewer.values() if unit in v]
        if len(given) < 2:
            out[unit] = 0
        elif measure.ordered and all(isinstance(g, int | float) and not isinstance(g, bool) for g in given):
            out[unit] = int(max(given) - min(given))
        else:
            out[unit] = int(len({_key(g) for g in given}) > 1)
    return out


WRITTEN: Final = (("rationale", ""), ("comment", ""), ("rewrite", "Rewritten: "))
"""The free-text fields a kind stores (rank: a rationale per answer; question: a comment; sentence:
a rewrite) and how each is introduced on the page (a rewrite is not a reason, so it says what it is)."""


def _written(entry: object) -> str:
    """The written text of one payload (per item) or one answer's entry (per answer)."""
    if not isinstance(entry, Mapping):
        return ""
    texts = [(lead, entry.get(k)) for k, lead in WRITTEN]
    return "\n".join(f"{lead}{t.strip()}" for lead, t in texts if isinstance(t, str) and t.strip())


def _written_by_unit(measure: Measure, payload: Mapping[str, Any]) -> dict[str, str]:
    """Each unit's written text in a stored payload, keyed like :meth:`Measure.values`."""
    if not measure.per_answer:
        return {"": _written(payload)}
    answers = payload.get("answers")
    return {k: _written(v) for k, v in answers.items()} if isinstance(answers, Mapping) else {}


def _key(value: object) -> str:
    """A value as a hashable key (labels are text; a stored value could in principle be a list)."""
    return repr(value)


def disagreements(engine: Engine, study: str, on: str | None = None) -> Disagreements:
    """The items of ``study`` where submitted reviews differ on the measure ``on`` (a key of the
    kind's :meth:`~clinieval.review.study_kinds.Kind.measures`; the first when None), the largest gap
    first (then the largest total, then the data's order). Items where every reviewer agrees, or
    that only one reviewer has submitted, are counted but not listed."""
    with read_session(engine) as s:
        row = get_study(s, study)
        measures = get_kind(row.kind).measures(row.config)
        measure = next((m for m in measures if on is None or m.key == on), None)
        if measure is None:
            names = ", ".join(m.key for m in measures)
            raise UnknownMeasure(f"study {study!r} has no measure {on!r}; it has {names}")
        start = func.substr(Item.prompt, 1, 4 * EXCERPT_CHARS)
        columns = (User.name, Item.id, Item.key, start, Assignment.payload)
        reviews = s.execute(submitted_reviews(row, *columns)).all()
        texts: dict[int, dict[str, str]] = defaultdict(dict)
        if measure.per_answer:
            for item_id, key, text in s.execute(
                select(Answer.item_id, Answer.key, func.substr(Answer.text, 1, 4 * EXCERPT_CHARS))
                .join(Item, Answer.item_id == Item.id)
                .where(Item.study_id == row.id)
            ).all():
                texts[item_id][key] = text or ""
    per_item: dict[int, tuple[str, str, dict[str, dict[str, Any]]]] = {}
    notes: dict[int, dict[str, dict[str, str]]] = defaultdict(dict)
    for reviewer, item_id, key, prompt, payload in reviews:
        entry = per_item.setdefault(item_id, (key, prompt or "", {}))
        entry[2][reviewer] = measure.values(payload or {})
        notes[item_id][reviewer] = _written_by_unit(measure, payload or {})
    found: list[tuple[int, int, int, Disagreement]] = []
    compared = 0
    for order, (item_id, (key, prompt, by_reviewer)) in enumerate(per_item.items()):
        if len(by_reviewer) < 2:
            continue
        compared += 1
        gaps = _gaps(measure, by_reviewer)
        gap = max(gaps.values(), default=0) if measure.ordered else sum(gaps.values())
        if gap <= 0:
            continue
        reviewers = tuple(sorted(by_reviewer))
        label = (
            {u: f"“{excerpt(texts[item_id].get(u, ''), EXCERPT_CHARS)}”" for u in gaps}
            if measure.per_answer
            else {}
        )
        units = sorted(gaps, key=lambda u: (-gaps[u], label.get(u, "")))
        rows = tuple(
            (label.get(u, measure.label), tuple(_shown(by_reviewer[r].get(u)) for r in reviewers))
            for u in units
        )
        written = tuple(tuple(notes[item_id][r].get(u, "") for r in reviewers) for u in units)
        shown = Disagreement(key, excerpt(prompt, EXCERPT_CHARS), gap, reviewers, rows, written)
        found.append((-gap, -sum(gaps.values()), order, shown))
    found.sort(key=lambda f: f[:3])
    return Disagreements(
        study=study,
        measure=measure,
        measures=measures,
        compared=compared,
        items=tuple(f[3] for f in found[:MAX_DISAGREEMENTS]),
        differing=len(found),
    )
