"""Classification metrics over parsed model outputs: accuracy, precision/recall/F1, qualified rate.

Inputs are aligned sequences: ``gold[i]`` is the reference label of item ``i`` and
``predicted[i]`` the label parsed from the model's output, or ``None`` when the output was not
in the required format (MedEval's "unqualified" outputs; a failed call is unqualified too).
Labels are strings, compared exactly: map case and spelling variants in the parser, not here.

Unqualified outputs are reported, never silently scored (MedEval counts them in the qualified
rate; MedAlign reported content-filter refusals both as wrong and left out). Every metric
therefore takes ``unqualified``:

- ``"wrong"`` (default): the item stays in and its prediction matches no label, so it is a
  miss for accuracy and a false negative of its gold label (a false positive of nothing);
- ``"exclude"``: the item is dropped before scoring, which measures quality when the format
  was followed.

:func:`classification_report` computes both views at once.

Zero division follows scikit-learn's ``zero_division``: precision of a label never predicted,
recall of a label never in gold and F1 of a label with no true positive, false positive or
false negative are 0/0, replaced by ``zero_division`` (0.0 by default). ``"exclude"`` instead
leaves the value ``None`` and out of macro averages (scikit-learn's ``np.nan``). F1 is computed
from counts, ``2·TP / (2·TP + FP + FN)``, so a label with an undefined precision but gold
occurrences gets F1 = 0, as in scikit-learn. No function returns NaN.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Generic, Literal, TypeVar

from clinieval.errors import UserError

__all__ = [
    "PRF",
    "ClassificationReport",
    "ClassificationScores",
    "LabelScores",
    "MultiLabelReport",
    "MultiLabelScores",
    "QualifiedReport",
    "accuracy",
    "classification_report",
    "label_scores",
    "multilabel_report",
    "multilabel_scores",
    "precision_recall_f1",
    "qualified_rate",
]

Unqualified = Literal["wrong", "exclude"]
ZeroDivision = float | Literal["exclude"]


@dataclass(frozen=True, slots=True)
class PRF:
    """Precision, recall and F1; ``None`` only where 0/0 and ``zero_division="exclude"``."""

    precision: float | None
    recall: float | None
    f1: float | None


@dataclass(frozen=True, slots=True)
class LabelScores:
    """One label's counts and scores (one-vs-rest)."""

    label: str
    true_positives: int
    false_positives: int
    false_negatives: int
    precision: float | None
    recall: float | None
    f1: float | None

    @property
    def support(self) -> int:
        """How often the label occurs in gold."""
        return self.true_positives + self.false_negatives


@dataclass(frozen=True, slots=True)
class ClassificationScores:
    """Every single-label metric for one view (unqualified counted wrong, or left out)."""

    items: int
    accuracy: float
    macro: PRF
    micro: PRF
    per_label: dict[str, LabelScores]


_View = TypeVar("_View", "ClassificationScores", "MultiLabelScores")


@dataclass(frozen=True, slots=True)
class QualifiedReport(Generic[_View]):
    """Qualified rate plus both views of one kind of scores (single-label or multi-label);
    ``qualified_only`` is ``None`` when nothing qualified."""

    items: int
    qualified: int
    qualified_rate: float
    unqualified_as_wrong: _View
    qualified_only: _View | None


class ClassificationReport(QualifiedReport[ClassificationScores]):
    """What :func:`classification_report` returns."""

    __slots__ = ()


def _check_aligned(gold: Sequence[object], predicted: Sequence[object]) -> None:
    if len(gold) == 0:
        raise UserError("no items to score: gold and predicted labels are empty")
    if len(gold) != len(predicted):
        raise UserError(
            f"gold has {len(gold)} items but predicted has {len(predicted)}; give one prediction per item"
            " (None for an unparseable output)"
        )


def _check_mode(unqualified: str) -> None:
    if unqualified not in ("wrong", "exclude"):
        raise UserError(f"unqualified must be 'wrong' or 'exclude', not {unqualified!r}")


def _check_zero_division(zero_division: ZeroDivision) -> None:
    if zero_division == "exclude":
        return
    if isinstance(zero_division, str) or not 0.0 <= zero_division <= 1.0:
        raise UserError(f"zero_division must be a number in [0, 1] or 'exclude', not {zero_division!r}")


def qualified_rate(predicted: Sequence[object | None]) -> float:
    """Share of outputs that parsed into the required format (``None`` = unqualified)."""
    if len(predicted) == 0:
        raise UserError("no outputs given: the qualified rate needs at least one item")
    return sum(p is not None for p in predicted) / len(predicted)


def _kept(
    gold: Sequence[str], predicted: Sequence[str | None], unqualified: Unqualified
) -> tuple[list[str], list[str | None]]:
    """The items a view scores; an empty result means nothing qualified."""
    _check_aligned(gold, predicted)
    _check_mode(unqualified)
    if unqualified == "wrong":
        return list(gold), list(predicted)
    pairs = [(g, p) for g, p in zip(gold, predicted, strict=True) if p is not None]
    return [g for g, _ in pairs], [p for _, p in pairs]


def accuracy(
    gold: Sequence[str], predicted: Sequence[str | None], *, unqualified: Unqualified = "wrong"
) -> float:
    """Share of items whose prediction equals the gold label.

    With ``unqualified="exclude"`` the denominator is the qualified items only; if none
    qualified the accuracy is undefined and a UserError says so.
    """
    g, p = _kept(gold, predicted, unqualified)
    if not g:
        raise UserError("no qualified predictions: accuracy over qualified items is undefined")
    return sum(a == b for a, b in zip(g, p, strict=True)) / len(g)


def _ratio(num: int, den: int, zero_division: ZeroDivision) -> float | None:
    if den:
        return num / den
    return None if zero_division == "exclude" else float(zero_division)


def _prf(tp: int, fp: int, fn: int, zero_division: ZeroDivision) -> PRF:
    return PRF(
        precision=_ratio(tp, tp + fp, zero_division),
        recall=_ratio(tp, tp + fn, zero_division),
        f1=_ratio(2 * tp, 2 * tp + fp + fn, zero_division),
    )


def _label_set(
    gold: Sequence[str], predicted: Sequence[str | None], labels: Sequence[str] | None
) -> list[str]:
    """The labels scored: given ones (checked to cover the data) or the sorted union seen."""
    seen = set(gold) | {p for p in predicted if p is not None}
    if labels is None:
        return sorted(seen)
    if len(set(labels)) != len(labels):
        raise UserError("labels contains duplicates; list each label once")
    unknown = sorted(seen - set(labels))
    if unknown:
        raise UserError(
            f"label(s) {unknown} occur in gold or predictions but not in labels; add them to labels,"
            " or have the parser return None for outputs outside the label set"
        )
    return list(labels)


def label_scores(
    gold: Sequence[str],
    predicted: Sequence[str | None],
    *,
    labels: Sequence[str] | None = None,
    zero_division: ZeroDivision = 0.0,
    unqualified: Unqualified = "wrong",
) -> dict[str, LabelScores]:
    """Per-label precision, recall and F1, one-vs-rest, in ``labels`` order (default: sorted).

    ``labels`` may name labels absent from the data (they get zero counts and the zero-division
    value); a label in the data but missing from ``labels`` is a UserError, so no item is
    silently left out.
    """
    _check_zero_division(zero_division)
    g, p = _kept(gold, predicted, unqualified)
    out: dict[str, LabelScores] = {}
    for label in _label_set(g, p, labels):
        tp = sum(a == label and b == label for a, b in zip(g, p, strict=True))
        fp = sum(a != label and b == label for a, b in zip(g, p, strict=True))
        fn = sum(a == label and b != label for a, b in zip(g, p, strict=True))
        s = _prf(tp, fp, fn, zero_division)
        out[label] = LabelScores(label, tp, fp, fn, s.precision, s.recall, s.f1)
    return out


def _mean_defined(values: Sequence[float | None]) -> float | None:
    defined = [v for v in values if v is not None]
    return sum(defined) / len(defined) if defined else None


def _macro(per_label: Mapping[str, LabelScores]) -> PRF:
    rows = list(per_label.values())
    return PRF(
        precision=_mean_defined([r.precision for r in rows]),
        recall=_mean_defined([r.recall for r in rows]),
        f1=_mean_defined([r.f1 for r in rows]),
    )


def _micro(per_label: Mapping[str, LabelScores], zero_division: ZeroDivision) -> PRF:
    rows = list(per_label.values())
    return _prf(
        sum(r.true_positives for r in rows),
        sum(r.false_positives for r in rows),
        sum(r.false_negatives for r in rows),
        zero_division,
    )


def precision_recall_f1(
    gold: Sequence[str],
    predicted: Sequence[str | None],
    *,
    average: Literal["macro", "micro"],
    labels: Sequence[str] | None = None,
    zero_division: ZeroDivision = 0.0,
    unqualified: Unqualified = "wrong",
) -> PRF:
    """Macro (unweighted mean of per-label values) or micro (pooled counts) precision/recall/F1.

    Macro F1 is the mean of per-label F1, not the F1 of macro precision and recall (as in
    scikit-learn). Micro recall equals accuracy when every gold label is in the label set;
    micro precision differs from it when unqualified outputs count as wrong (they are misses,
    not false positives).
    """
    if average not in ("macro", "micro"):
        raise UserError(f"average must be 'macro' or 'micro', not {average!r}")
    per_label = label_scores(
        gold, predicted, labels=labels, zero_division=zero_division, unqualified=unqualified
    )
    return _macro(per_label) if average == "macro" else _micro(per_label, zero_division)


def _scores(
    gold: list[str], predicted: list[str | None], labels: Sequence[str] | None, zero_division: ZeroDivision
) -> ClassificationScores:
    per_label = label_scores(gold, predicted, labels=labels, zero_division=zero_division)
    return ClassificationScores(
        items=len(gold),
        accuracy=accuracy(gold, predicted),
        macro=_macro(per_label),
        micro=_micro(per_label, zero_division),
        per_label=per_label,
    )


def classification_report(
    gold: Sequence[str],
    predicted: Sequence[str | None],
    *,
    labels: Sequence[str] | None = None,
    zero_division: ZeroDivision = 0.0,
) -> ClassificationReport:
    """Qualified rate and every metric, with unqualified outputs counted wrong and left out.

    Without ``labels`` both views use the label set of all the data, so a label only the
    unqualified items carry still appears (with zero counts) in the qualified-only view.
    """
    _check_aligned(gold, predicted)
    _check_zero_division(zero_division)
    label_list = _label_set(gold, predicted, labels)
    g_ok, p_ok = _kept(gold, predicted, "exclude")
    return ClassificationReport(
        items=len(gold),
        qualified=len(g_ok),
        qualified_rate=qualified_rate(predicted),
        unqualified_as_wrong=_scores(list(gold), list(predicted), label_list, zero_division),
        qualified_only=_scores(g_ok, p_ok, label_list, zero_division) if g_ok else None,
    )


# --- multi-label (MedEval report code prediction) ---------------------------------------------


@dataclass(frozen=True, slots=True)
class MultiLabelScores:
    """Multi-label metrics for one view.

    ``average_accuracy`` is MedEval's "average accuracy over all classes": per-class accuracy
    (over the items whose gold has that class), averaged over classes. ``mean_item_accuracy``
    is the per-item share of classes right, averaged over items; the two are equal when every
    item carries the same classes (e.g. the 14 CheXpert observations). ``exact_match_rate`` is
    the share of items with every gold class right.
    """

    items: int
    average_accuracy: float
    mean_item_accuracy: float
    exact_match_rate: float
    per_class_accuracy: dict[str, float]


class MultiLabelReport(QualifiedReport[MultiLabelScores]):
    """What :func:`multilabel_report` returns."""

    __slots__ = ()


def _check_multilabel(
    gold: Sequence[Mapping[str, str]], predicted: Sequence[Mapping[str, str | None] | None]
) -> None:
    _check_aligned(gold, predicted)
    for i, g in enumerate(gold):
        if not g:
            raise UserError(f"gold item {i} has no classes; every item needs at least one class label")


def multilabel_scores(
    gold: Sequence[Mapping[str, str]],
    predicted: Sequence[Mapping[str, str | None] | None],
    *,
    unqualified: Unqualified = "wrong",
) -> MultiLabelScores:
    """Average accuracy, per-class accuracy and exact-match rate of multi-label predictions.

    ``gold[i]`` maps each class (e.g. "Edema") to its value (e.g. "positive"/"negative"/
    "unknown"). ``predicted[i]`` is the parsed mapping or ``None`` when the whole output is
    unqualified. Classes the gold item has and the prediction lacks (or maps to ``None``) count
    wrong; classes the prediction adds beyond the gold item are ignored. A parser that requires
    every class (MedEval asks for exactly 14 tuples) should return ``None`` for partial outputs.
    """
    _check_multilabel(gold, predicted)
    _check_mode(unqualified)
    pairs = [(g, p) for g, p in zip(gold, predicted, strict=True) if unqualified == "wrong" or p is not None]
    if not pairs:
        raise UserError("no qualified predictions: multi-label accuracy over qualified items is undefined")
    right: dict[str, int] = {}
    seen: dict[str, int] = {}
    item_shares: list[float] = []
    exact = 0
    for g, p in pairs:
        hits = 0
        for cls, value in g.items():
            ok = p is not None and p.get(cls) == value
            seen[cls] = seen.get(cls, 0) + 1
            right[cls] = right.get(cls, 0) + ok
            hits += ok
        item_shares.append(hits / len(g))
        exact += hits == len(g)
    per_class = {cls: right[cls] / seen[cls] for cls in seen}
    return MultiLabelScores(
        items=len(pairs),
        average_accuracy=sum(per_class.values()) / len(per_class),
        mean_item_accuracy=sum(item_shares) / len(item_shares),
        exact_match_rate=exact / len(pairs),
        per_class_accuracy=per_class,
    )


def multilabel_report(
    gold: Sequence[Mapping[str, str]], predicted: Sequence[Mapping[str, str | None] | None]
) -> MultiLabelReport:
    """Qualified rate and multi-label metrics with unqualified outputs counted wrong and left out."""
    _check_multilabel(gold, predicted)
    qualified = sum(p is not None for p in predicted)
    return MultiLabelReport(
        items=len(gold),
        qualified=qualified,
        qualified_rate=qualified / len(gold),
        unqualified_as_wrong=multilabel_scores(gold, predicted),
        qualified_only=multilabel_scores(gold, predicted, unqualified="exclude") if qualified else None,
    )
