"""The MedAlign analysis entry point: both views, each view's sections, and its headline numbers.

:func:`medalign_analysis` is what callers use; it validates the table (:mod:`.view`), builds the
two views, and assembles each view's JSON from the sections of :mod:`.breakdowns`,
:mod:`.lengths` and :mod:`.comparisons`, plus the headline per-arm numbers (correct %, mean
reference rank, provider errors) kept here because every view starts with them. The layout of
that JSON is what :mod:`clinieval.benchmarks.medalign.report` reads.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import asdict

from clinieval.analysis import uncertainty
from clinieval.analysis.table import LongTable
from clinieval.benchmarks.medalign.analysis.breakdowns import breakdowns, easy_hard
from clinieval.benchmarks.medalign.analysis.columns import LengthCounter, MedAlignColumns
from clinieval.benchmarks.medalign.analysis.comparisons import (
    MDD_ALPHA,
    MDD_POWER,
    generic_analysis,
    kendall_per_instruction,
    minimum_detectable_differences,
)
from clinieval.benchmarks.medalign.analysis.lengths import WORD_COUNTER, response_lengths, word_count
from clinieval.benchmarks.medalign.analysis.view import (
    ERROR_RULE,
    JSON,
    Settings,
    View,
    error_items,
    error_kind,
    impute_errors,
    make_view,
    table_items,
    validate,
)

__all__ = ["medalign_analysis"]


def medalign_analysis(
    table: LongTable,
    columns: MedAlignColumns,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    length_counter: LengthCounter | None = None,
) -> JSON:
    """Every MedAlign statistic the table's columns allow, for all items and without error items.

    Raises UserError for input that is wrong (a missing instruction/model/metric column, a cell
    that is not a number, correctness other than 0/1, two rows for one instruction and arm);
    statistics the data cannot define are listed under ``undefined`` instead.
    """
    validate(table, columns)
    settings = Settings(
        level,
        resamples,
        seed,
        length_counter or word_count,
        WORD_COUNTER if length_counter is None else _callable_name(length_counter),
    )
    errors = error_items(table, columns)
    imputed_table, imputed = impute_errors(table, columns)
    kept = tuple(r for r in table.rows if table.text(r, columns.instruction) not in errors)
    views = {
        "all": _view_json(
            make_view("all", imputed_table, columns),
            settings,
            f"All {len(table_items(table, columns))} instructions. Rule: {ERROR_RULE}; "
            f"applied to {imputed} row(s).",
        ),
        "without_errors": _view_json(
            make_view("without_errors", LongTable(table.path, table.columns, kept), columns),
            settings,
            f"Instructions where no arm had a provider error: the {len(errors)} instruction(s) with an"
            " error are dropped for every arm.",
        ),
    }
    views["all"]["imputed_incorrect"] = imputed
    views["without_errors"]["dropped_items"] = list(errors)
    return {
        "input": {
            "table": str(table.path),
            "rows": len(table.rows),
            "items": len(table_items(table, columns)),
            "models": list(dict.fromkeys(str(table.text(r, columns.model)) for r in table.rows)),
        },
        "reference_label": columns.reference_label,
        "columns": _columns_json(columns),
        "options": {
            "level": level,
            "resamples": resamples,
            "seed": seed,
            "length_counter": settings.counter_name,
            "error_rule": ERROR_RULE,
            "mdd": {"alpha": MDD_ALPHA, "power": MDD_POWER, "method": "z (normal approximation)"},
        },
        "error_items": [{"instruction": item, "arms": arms} for item, arms in errors.items()],
        "views": views,
        "undefined": [f"{name}: {u}" for name, v in views.items() for u in v["undefined"]],
    }


def _callable_name(fn: LengthCounter) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


def _columns_json(columns: MedAlignColumns) -> JSON:
    out = asdict(columns)
    out["groups"], out["metrics"] = list(columns.groups), list(columns.metrics)
    return out


def _view_json(view: View, s: Settings, description: str) -> JSON:
    """All sections of one view; sections that cannot be computed are None, with a reason."""
    out: JSON = {
        "description": description,
        "rows": len(view.table.rows),
        "items": len(view.items),
        "models": view.models,
    }
    sections = (
        "per_model",
        "breakdowns",
        "easy_hard",
        "response_length",
        "minimum_detectable_difference",
        "kendall_per_instruction",
        "analyze",
    )
    out["errors"] = _errors(view)
    out["clustering"] = view.clustering
    if not view.primary:
        why = "the table has no rows" if view.name == "all" else "every instruction had a provider error"
        view.undefined.append(f"no instruction in this view: {why}")
        return {**out, **dict.fromkeys(sections), "undefined": view.undefined}
    out["per_model"] = _per_model(view, s)
    out["breakdowns"] = breakdowns(view)
    out["easy_hard"] = easy_hard(view)
    out["response_length"] = response_lengths(view, s)
    out["minimum_detectable_difference"] = minimum_detectable_differences(view)
    out["kendall_per_instruction"] = kendall_per_instruction(view)
    out["analyze"] = generic = generic_analysis(view, s)
    out["undefined"] = view.undefined + [f"analyze: {u}" for u in (generic or {}).get("undefined", [])]
    return out


def _errors(view: View) -> JSON:
    """Provider errors per arm and kind (the responses the paper counted as incorrect)."""
    per_model: dict[str, dict[str, int]] = {m: {} for m in view.models}
    totals: Counter[str] = Counter()
    items: set[str] = set()
    for row, (item, model) in zip(view.primary, view.keys, strict=True):
        kind = error_kind(view.table, view.cols, row)
        if kind is not None:
            per_model[model][kind] = per_model[model].get(kind, 0) + 1
            totals[kind] += 1
            items.add(item)
    return {
        "per_model": per_model,
        "total": dict(totals),
        "responses": sum(totals.values()),
        "items": len(items),
    }


def _percent_ci(values: Sequence[float], patients: Sequence[str] | None, s: Settings) -> list[float] | None:
    """A percent CI over instructions, a patient's instructions drawn together when clustered."""
    if patients is None:
        low, high = uncertainty.bootstrap_ci(values, level=s.level, resamples=s.resamples, seed=s.seed)
    elif len(set(patients)) < 2:
        return None
    else:
        low, high = uncertainty.cluster_bootstrap_ci(
            values, patients, level=s.level, resamples=s.resamples, seed=s.seed
        )
    return [100.0 * low, 100.0 * high]


def _per_model(view: View, s: Settings) -> JSON:
    """Correct % with a bootstrap CI over instructions, and the mean reference rank as given."""
    c = view.cols
    has_correct, has_rank = view.has(c.correct), view.has(c.rank)
    if not has_correct:
        view.missing("correct %", c.correct)
    if not has_rank:
        view.missing("mean rank", c.rank)
    correct, rank = view.cells(c.correct) if has_correct else {}, view.cells(c.rank) if has_rank else {}
    responses = Counter(m for _, m in view.keys)
    patients = view.patients()
    out: JSON = {}
    for model in view.models:
        # in instruction order, so the bootstrap CI equals analyze's for the same column
        judged_items = [i for i in view.items if (i, model) in correct]
        judged = [correct[(i, model)] for i in judged_items]
        ranks = [rank[(i, model)] for i in view.items if (i, model) in rank]
        ci = (
            _percent_ci(judged, None if patients is None else [patients[i] for i in judged_items], s)
            if judged
            else None
        )
        if judged and ci is None:
            view.undefined.append(f"correct % CI of {model}: its reviewed responses are about one patient")
        stats: JSON = {
            "responses": responses[model],
            "reviewed": len(judged),
            "correct": int(sum(judged)),
            "correct_percent": 100.0 * sum(judged) / len(judged) if judged else None,
            "ci": ci,
            "ranked": len(ranks),
            "mean_rank": sum(ranks) / len(ranks) if ranks else None,
        }
        if has_correct and not judged:
            view.undefined.append(f"correct % of {model}: no reviewed response")
        out[model] = stats
    return out
