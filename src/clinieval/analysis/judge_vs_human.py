"""A judge's scores against a human reference's scores of the same responses.

Why a module of its own: two places ask how well a judge agrees with humans who scored the same
responses, and they must agree on what that means. ``clinieval analyze --human-score`` asks it of
any long table (:mod:`clinieval.analysis.analyze_human`); AutoMedEval asks it of its judges
against its physicians (:mod:`clinieval.benchmarks.automedeval.agreement`, which may not be
imported from here). Both hand over the scores item by item as :class:`ScoredResponses` and read
the two levels of agreement from it:

* **responses**: Spearman and Pearson between the judge's and the reference's score of every
  response both scored (:meth:`ScoredResponses.correlation`);
* **orderings**: per item, does the judge order the item's responses as the reference does
  (Accuracy_2-tuple and Accuracy_triple, :func:`clinieval.analysis.rank_agreement.order_agreement`):
  an item with a reference score missing is skipped, an item with a judge score missing counts all
  its pairs wrong (:meth:`ScoredResponses.order`).

Known limitation, kept on purpose so published numbers do not move: the correlations' p-values
pool the responses, treating every response as independent, although the responses to one item
share a question and a judge reply. AutoMedEval's analysis puts item-clustered CIs and p-values
beside its pooled figures (``automedeval.agreement.clustered_correlation``); ``clinieval
analyze`` reports the pooled p-values only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from clinieval.analysis.agreement import Correlation, pearson, spearman
from clinieval.analysis.rank_agreement import OrderAgreement, order_agreement

__all__ = ["CORRELATIONS", "CorrelationName", "ScoredResponses", "complete"]

CorrelationName = Literal["spearman", "pearson"]

CORRELATIONS: Mapping[CorrelationName, Callable[[Sequence[float], Sequence[float]], Correlation]] = {
    "spearman": spearman,
    "pearson": pearson,
}
"""The response-level correlations, in the order they are reported."""


def complete(values: Sequence[float | None] | None) -> list[float] | None:
    """An item's scores for ordering: None when the item, or any of its scores, is missing."""
    if values is None or any(v is None for v in values):
        return None
    return [float(v) for v in values if v is not None]


@dataclass(frozen=True)
class ScoredResponses:
    """Item by item, the reference's and the judge's scores of the item's responses.

    ``reference[i]`` and ``judge[i]`` list one score per response of item ``i``, in the same
    order; a score is None where that response was not scored, and a whole item None where that
    side has nothing for it (a judge reply that could not be read).
    """

    reference: Sequence[Sequence[float | None] | None]
    judge: Sequence[Sequence[float | None] | None]

    def pairs(self) -> tuple[list[float], list[float]]:
        """(reference scores, judge scores) of every response both scored, item by item."""
        ref: list[float] = []
        jud: list[float] = []
        for r_item, j_item in zip(self.reference, self.judge, strict=True):
            if r_item is None or j_item is None:
                continue
            for r, j in zip(r_item, j_item, strict=True):
                if r is not None and j is not None:
                    ref.append(float(r))
                    jud.append(float(j))
        return ref, jud

    def correlation(self, name: CorrelationName) -> Correlation:
        """One response-level correlation of the judge's scores with the reference's (the pooled
        p-value: see the module's note); raises as :func:`clinieval.analysis.agreement.spearman`
        does (fewer than 3 responses, a constant side)."""
        ref, jud = self.pairs()
        return CORRELATIONS[name](jud, ref)

    def order(self) -> OrderAgreement:
        """Accuracy_2-tuple and Accuracy_triple over the items (see the module's docstring)."""
        return order_agreement([complete(r) for r in self.reference], [complete(j) for j in self.judge])
