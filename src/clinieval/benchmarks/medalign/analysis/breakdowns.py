"""MedAlign's breakdowns of correctness and rank: by category, subcategory, specialty, EHR length.

Each breakdown groups instructions by an instruction-level label (or by EHR-length quartile) and
reports correct % and mean reference rank per arm within each group; easy and hard items (all arms
right, all wrong) are the same per-instruction reading of correctness across arms.
"""

from __future__ import annotations

import numpy as np

from clinieval.benchmarks.medalign.analysis.view import JSON, Cells, View

__all__ = ["MISSING_LABEL", "breakdowns", "easy_hard"]

MISSING_LABEL = "(none)"


def _group_stats(view: View, items: set[str], correct: Cells, rank: Cells) -> JSON:
    """Correct % and mean rank per arm over a set of instructions, and correct % pooled."""
    per_model: JSON = {}
    for model in view.models:
        judged = [v for (i, m), v in correct.items() if m == model and i in items]
        ranks = [v for (i, m), v in rank.items() if m == model and i in items]
        per_model[model] = {
            "reviewed": len(judged),
            "correct_percent": 100.0 * sum(judged) / len(judged) if judged else None,
            "ranked": len(ranks),
            "mean_rank": sum(ranks) / len(ranks) if ranks else None,
        }
    pooled = [v for (i, _), v in correct.items() if i in items]
    return {
        "items": len(items),
        "pooled": {
            "reviewed": len(pooled),
            "correct_percent": 100.0 * sum(pooled) / len(pooled) if pooled else None,
        },
        "per_model": per_model,
    }


def _outcomes(view: View) -> tuple[Cells, Cells]:
    c = view.cols
    return (
        view.cells(c.correct) if view.has(c.correct) else {},
        view.cells(c.rank) if view.has(c.rank) else {},
    )


def _label_breakdown(view: View, column: str) -> JSON | None:
    """Correctness and rank per value of an instruction-level label (category, specialty...)."""
    if not view.has(column):
        view.missing(f"breakdown by {column}", column)
        return None
    labels = view.item_labels(column)
    names = sorted({v for v in labels.values() if v is not None})
    if any(v is None for v in labels.values()):
        names.append(MISSING_LABEL)
    correct, rank = _outcomes(view)
    groups = []
    for name in names:
        members = {i for i, v in labels.items() if (v or MISSING_LABEL) == name}
        groups.append({"group": name, **_group_stats(view, members, correct, rank)})
    return {"column": column, "groups": groups}


def _quartile_breakdown(view: View) -> JSON | None:
    """Correctness and rank per EHR-length quartile; the edges are quartiles over instructions."""
    column = view.cols.ehr_tokens
    if not view.has(column):
        view.missing("breakdown by EHR-length quartile", column)
        return None
    lengths: dict[str, float] = {}
    for (item, _), value in view.cells(column).items():
        lengths.setdefault(item, value)
    values = np.array(list(lengths.values()))
    if values.size < 4 or np.unique(values).size < 2:
        view.undefined.append(
            f"breakdown by EHR-length quartile: needs 4+ instructions with differing {column!r}; "
            f"{values.size} instruction(s), {np.unique(values).size} distinct value(s)"
        )
        return None
    edges = [float(e) for e in np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])]
    quartile = {i: int(np.searchsorted(edges[1:4], v, side="left")) for i, v in lengths.items()}
    correct, rank = _outcomes(view)
    groups = [
        {
            "group": f"Q{q + 1}",
            "range": [edges[q], edges[q + 1]],
            **_group_stats(view, {i for i, k in quartile.items() if k == q}, correct, rank),
        }
        for q in range(4)
    ]
    return {
        "column": column,
        "edges": edges,
        "rule": "Q1 <= edge 1 < Q2 <= edge 2 < Q3 <= edge 3 < Q4; edges by linear interpolation",
        "items_without_length": len(view.items) - len(lengths),
        "groups": groups,
    }


def breakdowns(view: View) -> JSON:
    c = view.cols
    return {
        "category": _label_breakdown(view, c.category),
        "subcategory": _label_breakdown(view, c.subcategory),
        "specialty": _label_breakdown(view, c.specialty),
        "ehr_length_quartile": _quartile_breakdown(view),
    }


def easy_hard(view: View) -> JSON | None:
    """Instructions every arm got right (easy) and none did (hard), among those all arms judged."""
    c = view.cols
    if not view.has(c.correct):
        view.missing("easy and hard items", c.correct)
        return None
    models = view.models
    if len(models) < 2:
        view.undefined.append(f"easy and hard items: need 2+ arms, found {len(models)}")
        return None
    correct = view.cells(c.correct)
    easy, hard, judged = [], [], 0
    for item in view.items:
        values = [correct.get((item, m)) for m in models]
        if any(v is None for v in values):
            continue
        judged += 1
        if all(v == 1.0 for v in values):
            easy.append(item)
        elif all(v == 0.0 for v in values):
            hard.append(item)

    def share(ids: list[str]) -> JSON:
        return {"count": len(ids), "percent": 100.0 * len(ids) / judged if judged else None, "ids": ids}

    return {
        "judged_by_all_arms": judged,
        "incomplete": len(view.items) - judged,
        "easy": share(easy),
        "hard": share(hard),
    }
