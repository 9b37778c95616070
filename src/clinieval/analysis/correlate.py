"""Does a benchmark rank models the way clinicians do? Per-model score tables, correlated.

EHRNoteQA (Kweon et al., 2024) argues that a clinical benchmark is useful when the order in which
it ranks models agrees with the order clinicians give those same models on real work. Their table
reports, for every benchmark and every clinician, Spearman's rho and Kendall's tau-b between the
benchmark's per-model scores and that clinician's per-model scores, and the mean over clinicians.
This analysis reproduces it for numbers users bring from anywhere, in three modules:

* :mod:`clinieval.analysis.model_scores` reads the per-model tables (:func:`read_scores`,
  :func:`split_columns`) into :class:`~clinieval.analysis.model_scores.ModelScores`.
* here, :func:`correlate_scores` computes every (benchmark, clinician) cell over the models both
  score. A cell with no value (a constant column, fewer models than the statistic needs) is
  reported as undefined with its reason instead of failing the whole table.
* :mod:`clinieval.analysis.correlate_markdown` lays the result out like the paper's table
  (``render_markdown``) and writes ``correlation.json`` and ``correlation.md`` (``write_outputs``).

scipy is imported only by the statistics in :mod:`clinieval.analysis.agreement`.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Literal

from clinieval.analysis.model_scores import ModelScores, quoted
from clinieval.errors import UserError

__all__ = ["CLINICIAN_MEAN", "KINDS", "SMALL_N", "correlate_scores"]

JSON = dict[str, Any]
Kind = Literal["spearman", "kendall"]
KINDS: tuple[Kind, ...] = ("spearman", "kendall")

#: Label of the pseudo-clinician whose score is the mean of the real clinicians' scores.
CLINICIAN_MEAN = "clinician mean"
#: Below this many models a correlation is flagged as very uncertain (still computed).
SMALL_N = 5


_NEEDS = {"spearman": ("Spearman's rho", 3), "kendall": ("Kendall's tau-b", 2)}


def _undefined(reason: str) -> JSON:
    return {"statistic": None, "pvalue": None, "undefined": reason}


def _why_undefined(kind: Kind, x: Sequence[float], y: Sequence[float]) -> str | None:
    """The reason in the table's own words (agreement's errors speak of "x" and "y")."""
    name, minimum = _NEEDS[kind]
    n = len(x)
    if n < minimum:
        return f"only {n} model(s) have both scores; {name} needs at least {minimum}"
    for values, who in ((x, "the benchmark"), (y, "the clinician")):
        if len(set(values)) == 1:
            return f"{who} gives all {n} models the same score, so {name} is undefined"
    return None


def _statistic(kind: Kind, x: list[float], y: list[float]) -> JSON:
    """One coefficient as a JSON cell; an undefined one carries the reason instead of a value."""
    from clinieval.analysis.agreement import kendall_tau, spearman

    reason = _why_undefined(kind, x, y)
    if reason is not None:
        return _undefined(reason)
    try:
        r = spearman(x, y) if kind == "spearman" else kendall_tau(x, y)
    except UserError as e:  # UndefinedStatisticError not foreseen above: still one cell, not the table
        return _undefined(str(e))
    return {"statistic": r.statistic, "pvalue": r.pvalue, "undefined": None}


def _cell(
    benchmark: Mapping[str, float], clinician: Mapping[str, float], order: Sequence[str], sign: float
) -> JSON:
    models = [m for m in order if m in benchmark and m in clinician]
    x = [sign * benchmark[m] for m in models]
    y = [clinician[m] for m in models]
    cell: JSON = {"n": len(models), "models": models}
    for kind in KINDS:
        cell[kind] = _statistic(kind, x, y)
    return cell


def _clinician_mean(clinicians: ModelScores, order: Sequence[str]) -> dict[str, float]:
    """Each model's mean over the clinicians, for models every clinician scored.

    A model some clinician did not score is left out rather than averaged over fewer clinicians:
    clinicians often use different scales, and a mean over a subset would not be comparable.
    """
    cols = [clinicians.scores[c] for c in clinicians.columns]
    return {m: math.fsum(c[m] for c in cols) / len(cols) for m in order if all(m in c for c in cols)}


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _best(values: Mapping[str, float | None]) -> list[str]:
    """The names with the highest value; several when tied (to rounding), none when all undefined."""
    defined = {k: v for k, v in values.items() if v is not None}
    if not defined:
        return []
    top = max(defined.values())
    return [k for k, v in defined.items() if _close(v, top)]


def _means(cells: Mapping[str, JSON], clinicians: Sequence[str], kind: str) -> JSON:
    used = [c for c in clinicians if cells[c][kind]["statistic"] is not None]
    values = [cells[c][kind]["statistic"] for c in used]
    return {"mean": math.fsum(values) / len(values) if values else None, "clinicians": used}


def _check_names(
    benchmarks: ModelScores, clinicians: ModelScores, lower: Collection[str], with_mean: bool
) -> None:
    unknown = sorted(set(lower) - set(benchmarks.columns))
    if unknown:
        raise UserError(
            f"lower-is-better names {quoted(unknown)}, which is not a benchmark in {benchmarks.path}; "
            f"the benchmarks are {quoted(benchmarks.columns)}"
        )
    if with_mean and CLINICIAN_MEAN in clinicians.columns:
        raise UserError(
            f"{clinicians.path}: a clinician is named {CLINICIAN_MEAN!r}, the name of the mean of the "
            "clinicians' scores; rename that column (or leave out the mean column)"
        )


def _models(benchmarks: ModelScores, clinicians: ModelScores) -> JSON:
    in_clinicians, in_benchmarks = set(clinicians.models), set(benchmarks.models)
    shared = [m for m in benchmarks.models if m in in_clinicians]
    if not shared:
        raise UserError(
            f"no model appears in both {benchmarks.path} ({quoted(benchmarks.models[:5])}"
            f"{', ...' if len(benchmarks.models) > 5 else ''}) and {clinicians.path} "
            f"({quoted(clinicians.models[:5])}{', ...' if len(clinicians.models) > 5 else ''}); "
            "model names must match exactly"
        )
    return {
        "shared": shared,
        "only_in_benchmarks": [m for m in benchmarks.models if m not in in_clinicians],
        "only_in_clinicians": [m for m in clinicians.models if m not in in_benchmarks],
    }


def correlate_scores(
    benchmarks: ModelScores,
    clinicians: ModelScores,
    *,
    lower_is_better: Collection[str] = (),
    clinician_mean: bool = True,
) -> JSON:
    """Spearman rho and Kendall tau-b of every benchmark against every clinician, as JSON.

    Each cell uses the models with a score in both columns (listed, with n). Benchmarks named in
    ``lower_is_better`` (a rank, an error rate) are negated first, so a positive correlation always
    means "agrees with the clinician". Per benchmark, the mean of each coefficient over the real
    clinicians whose cell is defined; ``best`` names the highest per clinician and by mean (ties
    listed together; best means most positive, since a negative correlation is disagreement). With
    two or more clinicians and ``clinician_mean``, an extra column correlates each benchmark with
    the clinicians' mean score (:data:`CLINICIAN_MEAN`); it is not part of the mean over clinicians.
    """
    with_mean = clinician_mean and len(clinicians.columns) >= 2
    _check_names(benchmarks, clinicians, lower_is_better, with_mean)
    models = _models(benchmarks, clinicians)
    targets: dict[str, Mapping[str, float]] = {c: clinicians.scores[c] for c in clinicians.columns}
    if with_mean:
        targets[CLINICIAN_MEAN] = _clinician_mean(clinicians, clinicians.models)
    cells: JSON = {}
    summary: JSON = {}
    for b in benchmarks.columns:
        sign = -1.0 if b in lower_is_better else 1.0
        cells[b] = {c: _cell(benchmarks.scores[b], t, benchmarks.models, sign) for c, t in targets.items()}
        summary[b] = {k: _means(cells[b], clinicians.columns, k) for k in KINDS}
    result: JSON = {
        "inputs": {"benchmarks": benchmarks.source(), "clinicians": clinicians.source()},
        "model_column": benchmarks.model_column,
        "benchmarks": list(benchmarks.columns),
        "clinicians": list(clinicians.columns),
        "clinician_mean": _mean_section(targets) if with_mean else None,
        "lower_is_better": [b for b in benchmarks.columns if b in lower_is_better],
        "models": models,
        "cells": cells,
        "mean_over_clinicians": summary,
        "best": _best_section(benchmarks.columns, list(targets), cells, summary),
    }
    result["notes"] = _notes(result)
    return result


def _mean_section(targets: Mapping[str, Mapping[str, float]]) -> JSON:
    return {
        "label": CLINICIAN_MEAN,
        "definition": (
            "each model's arithmetic mean of the clinicians' raw scores, over models that every "
            "clinician scored"
        ),
        "models": list(targets[CLINICIAN_MEAN]),
        "scores": dict(targets[CLINICIAN_MEAN]),
    }


def _best_section(benchmarks: Sequence[str], columns: Sequence[str], cells: JSON, summary: JSON) -> JSON:
    return {
        kind: {
            "per_clinician": {
                c: _best({b: cells[b][c][kind]["statistic"] for b in benchmarks}) for c in columns
            },
            "mean_over_clinicians": _best({b: summary[b][kind]["mean"] for b in benchmarks}),
        }
        for kind in KINDS
    }


def _small_n(cells: JSON) -> str | None:
    """Which pairs have fewer than SMALL_N models, said once when it is all of them."""
    pairs = [(b, c, cell["n"]) for b, row in cells.items() for c, cell in row.items()]
    small = [(b, c, n) for b, c, n in pairs if 0 < n < SMALL_N]
    if not small:
        return None
    if len(small) == len(pairs):
        ns = sorted({n for _, _, n in small})
        return f"every correlation here is over fewer than {SMALL_N} models (n = {', '.join(map(str, ns))})"
    listed = ", ".join(f"{b} vs {c} (n = {n})" for b, c, n in small)
    return f"fewer than {SMALL_N} models for {listed}"


def _notes(result: JSON) -> list[str]:
    """Warnings a reader needs before trusting the table: small n, dropped models, uneven means."""
    notes: list[str] = []
    small = _small_n(result["cells"])
    if small:
        notes.append(
            f"{small}: a rank correlation over so few models is very uncertain (one swapped pair moves it "
            "a lot); Spearman's p-value is a t approximation that is poor this small (0 for a perfect "
            "correlation), Kendall's is exact only without ties"
        )
    m = result["models"]
    for key, where in (("only_in_benchmarks", "benchmark"), ("only_in_clinicians", "clinician")):
        if m[key]:
            notes.append(
                f"model(s) {', '.join(m[key])} appear only in the {where} table and are not correlated; "
                "check the spelling if they should match"
            )
    for b in result["lower_is_better"]:
        notes.append(f"{b}: lower is better, so its scores were negated before correlating")
    sets = {
        tuple(s[k]["clinicians"])
        for s in result["mean_over_clinicians"].values()
        for k in KINDS
        if s[k]["mean"] is not None
    }
    if len(sets) > 1:
        notes.append(
            "some benchmarks' means are over fewer clinicians than others (an undefined cell is left "
            "out), so those means are not strictly comparable"
        )
    return notes
