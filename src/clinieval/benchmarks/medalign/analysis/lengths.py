"""Response lengths per arm and of the gold responses, as MedAlign reports them.

Lengths are counted by a caller-chosen counter (words by default, see :data:`WORD_COUNTER`) and
summarised as count, mean and percentiles; responses with a provider error are left out.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from clinieval.benchmarks.medalign.analysis.view import JSON, Settings, View, error_kind
from clinieval.scoring.text.base import word_tokens

__all__ = ["PERCENTILES", "WORD_COUNTER", "response_lengths", "word_count"]

PERCENTILES = (10, 25, 50, 75, 90)
WORD_COUNTER = (
    "clinieval.scoring.text.base.word_tokens: runs of letters/digits (joined across internal "
    "apostrophes and hyphens) plus each punctuation mark"
)


def word_count(text: str) -> int:
    """The default length counter (:data:`WORD_COUNTER`)."""
    return len(word_tokens(text))


def _distribution(lengths: Sequence[int]) -> JSON:
    """Count, mean and percentiles (numpy's linear interpolation) of a list of lengths."""
    out: JSON = {"count": len(lengths), "mean": None, **{f"p{p}": None for p in PERCENTILES}}
    if lengths:
        arr = np.asarray(lengths, dtype=np.float64)
        out["mean"] = float(arr.mean())
        out.update(
            {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True)}
        )
    return out


def response_lengths(view: View, s: Settings) -> JSON | None:
    """Response length per arm and for the gold (clinician) responses.

    Responses with a provider error are left out: their text is an error message or nothing, not
    an answer. An empty response without an error is a real answer of length 0.
    """
    c, t = view.cols, view.table
    if c.response not in t.columns:
        view.missing("response length", c.response)
        return None
    per_model: JSON = {}
    for model in view.models:
        rows = view.rows_of(model)
        answered = [r for r in rows if error_kind(t, c, r) is None]
        lengths = [s.counter(t.text(r, c.response) or "") for r in answered]
        per_model[model] = {
            **_distribution(lengths),
            "empty": sum(1 for r in answered if t.text(r, c.response) is None),
            "errors_left_out": len(rows) - len(answered),
        }
    gold: JSON | None = None
    if view.has(c.gold_response):
        texts = [g for g in view.item_labels(c.gold_response).values() if g is not None]
        gold = _distribution([s.counter(g) for g in texts])
    else:
        view.missing("gold response length", c.gold_response)
    return {"counter": s.counter_name, "per_model": per_model, "gold": gold}
