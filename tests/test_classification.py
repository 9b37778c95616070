"""Classification metrics against scikit-learn and hand-computed values."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from sklearn.metrics import accuracy_score, precision_recall_fscore_support

from clinieval.errors import UserError
from clinieval.scoring.classification import (
    PRF,
    ClassificationScores,
    accuracy,
    classification_report,
    label_scores,
    multilabel_report,
    multilabel_scores,
    precision_recall_f1,
    qualified_rate,
)

UNQ = "<unqualified>"  # what the sklearn reference sees in place of None


def _random_case(seed: int, n: int = 60) -> tuple[list[str], list[str | None]]:
    rng = random.Random(seed)
    gold = [rng.choice("abc") for _ in range(n)]
    # "d" is predicted but never gold; None is an unqualified output.
    pred: list[str | None] = [rng.choice(["a", "b", "c", "d", None]) for _ in range(n)]
    return gold, pred


def _sk(gold: list[str], pred: list[str | None]) -> tuple[list[str], list[str]]:
    return gold, [UNQ if p is None else p for p in pred]


def _close(ours: float | None, ref: float) -> bool:
    if ours is None:
        return math.isnan(ref)
    return math.isclose(ours, ref, abs_tol=1e-12)


@pytest.mark.parametrize("seed", range(5))
def test_accuracy_matches_sklearn_both_views(seed: int) -> None:
    gold, pred = _random_case(seed)
    assert accuracy(gold, pred) == pytest.approx(accuracy_score(*_sk(gold, pred)))
    kept = [(g, p) for g, p in zip(gold, pred, strict=True) if p is not None]
    ref = accuracy_score([g for g, _ in kept], [p for _, p in kept])
    assert accuracy(gold, pred, unqualified="exclude") == pytest.approx(ref)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(("ours", "theirs"), [(0.0, 0.0), (1.0, 1.0), ("exclude", np.nan)])
def test_prf_matches_sklearn(seed: int, ours: float | str, theirs: float) -> None:
    """Unqualified counted wrong = sklearn with None as an extra label left out of ``labels``.

    "e" is a label that occurs nowhere (0/0 everywhere); "d" is predicted but never gold.
    """
    gold, pred = _random_case(seed)
    labels = ["a", "b", "c", "d", "e"]
    y_true, y_pred = _sk(gold, pred)
    zd = ours  # type: ignore[assignment]
    per = label_scores(gold, pred, labels=labels, zero_division=zd)  # type: ignore[arg-type]
    p, r, f, s = precision_recall_fscore_support(
        y_true, y_pred, labels=labels, average=None, zero_division=theirs
    )
    for k, label in enumerate(labels):
        row = per[label]
        assert row.support == s[k]
        assert _close(row.precision, p[k]) and _close(row.recall, r[k]) and _close(row.f1, f[k])
    for average in ("macro", "micro"):
        got = precision_recall_f1(gold, pred, average=average, labels=labels, zero_division=zd)  # type: ignore[arg-type]
        ref = precision_recall_fscore_support(
            y_true, y_pred, labels=labels, average=average, zero_division=theirs
        )
        assert _close(got.precision, ref[0]) and _close(got.recall, ref[1]) and _close(got.f1, ref[2])


@pytest.mark.parametrize("seed", range(3))
def test_qualified_only_view_matches_sklearn_on_kept_items(seed: int) -> None:
    gold, pred = _random_case(seed)
    kept = [(g, p) for g, p in zip(gold, pred, strict=True) if p is not None]
    yt, yp = [g for g, _ in kept], [p for _, p in kept]
    got = precision_recall_f1(gold, pred, average="macro", unqualified="exclude")
    ref = precision_recall_fscore_support(yt, yp, average="macro", zero_division=0.0)
    assert got == PRF(pytest.approx(ref[0]), pytest.approx(ref[1]), pytest.approx(ref[2]))


def test_hand_computed_example() -> None:
    gold = ["normal", "normal", "abnormal", "abnormal", "abnormal"]
    pred = ["normal", "abnormal", "abnormal", None, "abnormal"]
    # abnormal: tp 2, fp 1, fn 1 -> P 2/3, R 2/3, F1 4/6; normal: tp 1, fp 0, fn 1 -> P 1, R 1/2, F1 2/3.
    per = label_scores(gold, pred)
    assert list(per) == ["abnormal", "normal"]
    assert (per["abnormal"].precision, per["abnormal"].recall) == (pytest.approx(2 / 3), pytest.approx(2 / 3))
    assert (per["normal"].precision, per["normal"].recall, per["normal"].f1) == (
        1.0,
        0.5,
        pytest.approx(2 / 3),
    )
    macro = precision_recall_f1(gold, pred, average="macro")
    assert macro.precision == pytest.approx((2 / 3 + 1) / 2)
    assert macro.f1 == pytest.approx(2 / 3)
    micro = precision_recall_f1(gold, pred, average="micro")
    # 3 tp, 1 fp (the None is a miss, not a false positive), 2 fn.
    assert (micro.precision, micro.recall, micro.f1) == (0.75, 0.6, pytest.approx(6 / 9))
    assert micro.recall == accuracy(gold, pred)
    assert qualified_rate(pred) == 0.8
    assert accuracy(gold, pred) == 0.6
    assert accuracy(gold, pred, unqualified="exclude") == 0.75


def test_report_has_both_views_and_no_nan() -> None:
    gold = ["yes", "no", "maybe", "yes"]
    pred: list[str | None] = ["yes", None, None, "no"]
    rep = classification_report(gold, pred)
    assert (rep.items, rep.qualified, rep.qualified_rate) == (4, 2, 0.5)
    assert rep.unqualified_as_wrong.accuracy == 0.25
    assert rep.qualified_only is not None
    assert rep.qualified_only.accuracy == 0.5 and rep.qualified_only.items == 2
    # "maybe" only occurs on an unqualified item; it stays in the label set of both views.
    assert list(rep.qualified_only.per_label) == ["maybe", "no", "yes"]
    assert rep.qualified_only.per_label["maybe"].support == 0
    for view in (rep.unqualified_as_wrong, rep.qualified_only):
        assert isinstance(view, ClassificationScores)
        numbers = [view.accuracy, *vars_prf(view.macro), *vars_prf(view.micro)]
        for row in view.per_label.values():
            numbers += [row.precision, row.recall, row.f1]
        assert all(x is not None and not math.isnan(x) for x in numbers)


def vars_prf(prf: PRF) -> list[float | None]:
    return [prf.precision, prf.recall, prf.f1]


def test_nothing_qualified() -> None:
    rep = classification_report(["a", "b"], [None, None])
    assert rep.qualified_rate == 0.0 and rep.qualified_only is None
    assert rep.unqualified_as_wrong.accuracy == 0.0
    assert rep.unqualified_as_wrong.micro == PRF(0.0, 0.0, 0.0)  # precision 0/0 -> zero_division
    with pytest.raises(UserError, match="no qualified"):
        accuracy(["a"], [None], unqualified="exclude")


def test_single_item_and_exclude_zero_division() -> None:
    rep = classification_report(["a"], ["a"])
    assert rep.unqualified_as_wrong.accuracy == 1.0
    assert rep.unqualified_as_wrong.macro == PRF(1.0, 1.0, 1.0)
    # A label never seen anywhere: 0/0 everywhere -> zero_division, or None and left out of the mean.
    per = label_scores(["a"], ["a"], labels=["a", "b"], zero_division="exclude")
    assert (per["b"].precision, per["b"].recall, per["b"].f1) == (None, None, None)
    assert precision_recall_f1(
        ["a"], ["a"], average="macro", labels=["a", "b"], zero_division="exclude"
    ) == PRF(1.0, 1.0, 1.0)
    assert precision_recall_f1(["a"], ["a"], average="macro", labels=["a", "b"]) == PRF(0.5, 0.5, 0.5)
    assert precision_recall_f1(["a"], ["a"], average="macro", labels=["a", "b"], zero_division=1.0) == PRF(
        1.0, 1.0, 1.0
    )
    # Everything undefined and excluded: None, not NaN.
    assert precision_recall_f1(["a"], [None], average="macro", labels=["a"], zero_division="exclude") == PRF(
        None, 0.0, 0.0
    )


def test_all_one_class_and_ties_between_labels() -> None:
    gold = ["a", "a", "a"]
    pred = ["a", "a", "a"]
    y = precision_recall_fscore_support(gold, pred, average="macro", zero_division=0.0)
    got = precision_recall_f1(gold, pred, average="macro")
    assert (got.precision, got.recall, got.f1) == (y[0], y[1], y[2])


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: accuracy([], []), "no items"),
        (lambda: accuracy(["a", "b"], ["a"]), "gold has 2 items but predicted has 1"),
        (lambda: qualified_rate([]), "no outputs"),
        (lambda: label_scores(["a", "b"], ["a", "b"], labels=["a"]), r"\['b'\] occur"),
        (lambda: label_scores(["a"], ["a"], labels=["a", "a"]), "duplicates"),
        (lambda: label_scores(["a"], ["a"], zero_division=2.0), "zero_division"),
        (lambda: label_scores(["a"], ["a"], zero_division="warn"), "zero_division"),  # type: ignore[arg-type]
        (lambda: precision_recall_f1(["a"], ["a"], average="weighted"), "average"),  # type: ignore[arg-type]
        (lambda: accuracy(["a"], ["a"], unqualified="skip"), "unqualified"),  # type: ignore[arg-type]
        (lambda: classification_report([], []), "no items"),
        (lambda: multilabel_scores([], []), "no items"),
        (lambda: multilabel_scores([{"x": "1"}], [None, None]), "gold has 1 items"),
        (lambda: multilabel_scores([{}], [{}]), "no classes"),
        (lambda: multilabel_scores([{"x": "1"}], [None], unqualified="exclude"), "no qualified"),
    ],
)
def test_user_errors(call: object, message: str) -> None:
    with pytest.raises(UserError, match=message):
        call()  # type: ignore[operator]


CHEXPERT = ["No Finding", "Edema", "Pleural Effusion"]


def test_multilabel_hand_computed() -> None:
    gold = [
        {"No Finding": "negative", "Edema": "positive", "Pleural Effusion": "unknown"},
        {"No Finding": "positive", "Edema": "negative", "Pleural Effusion": "negative"},
        {"No Finding": "negative", "Edema": "unknown", "Pleural Effusion": "positive"},
        {"No Finding": "negative", "Edema": "positive", "Pleural Effusion": "positive"},
    ]
    pred: list[dict[str, str | None] | None] = [
        {"No Finding": "negative", "Edema": "positive", "Pleural Effusion": "unknown", "Extra": "x"},  # 3/3
        {"No Finding": "positive", "Edema": "positive"},  # 1/3: wrong edema, effusion missing
        None,  # unqualified: 0/3
        {"No Finding": "negative", "Edema": None, "Pleural Effusion": "positive"},  # 2/3
    ]
    s = multilabel_scores(gold, pred)
    assert s.per_class_accuracy == {"No Finding": 0.75, "Edema": 0.25, "Pleural Effusion": 0.5}
    assert s.average_accuracy == pytest.approx(0.5)
    assert s.mean_item_accuracy == pytest.approx((1 + 1 / 3 + 0 + 2 / 3) / 4)
    assert s.exact_match_rate == 0.25
    q = multilabel_scores(gold, pred, unqualified="exclude")
    assert q.items == 3
    assert q.per_class_accuracy == {
        "No Finding": 1.0,
        "Edema": pytest.approx(1 / 3),
        "Pleural Effusion": 2 / 3,
    }
    assert q.exact_match_rate == pytest.approx(1 / 3)
    rep = multilabel_report(gold, pred)
    assert (rep.items, rep.qualified, rep.qualified_rate) == (4, 3, 0.75)
    assert rep.unqualified_as_wrong == s and rep.qualified_only == q


def test_multilabel_matches_column_accuracy() -> None:
    """With one fixed class set, per-class accuracy is sklearn accuracy per column."""
    rng = random.Random(7)
    values = ["positive", "negative", "unknown"]
    gold = [{c: rng.choice(values) for c in CHEXPERT} for _ in range(40)]
    pred: list[dict[str, str | None] | None] = [{c: rng.choice(values) for c in CHEXPERT} for _ in range(40)]
    s = multilabel_scores(gold, pred)
    for c in CHEXPERT:
        assert s.per_class_accuracy[c] == pytest.approx(
            accuracy_score([g[c] for g in gold], [p[c] for p in pred if p is not None])
        )
    assert s.average_accuracy == pytest.approx(s.mean_item_accuracy)
    exact = np.mean([all(g[c] == p[c] for c in CHEXPERT) for g, p in zip(gold, pred, strict=True) if p])
    assert s.exact_match_rate == pytest.approx(exact)


def test_multilabel_different_class_sets() -> None:
    """Average over classes (MedEval) and over items differ when items carry different classes."""
    gold = [{"Fracture": "positive"}, {"Fracture": "negative", "Gout": "positive", "Gas": "negative"}]
    pred: list[dict[str, str | None] | None] = [
        {"Fracture": "positive"},
        {"Fracture": "positive", "Gout": "positive", "Gas": "negative"},
    ]
    s = multilabel_scores(gold, pred)
    assert s.per_class_accuracy == {"Fracture": 0.5, "Gout": 1.0, "Gas": 1.0}
    assert s.average_accuracy == pytest.approx(2.5 / 3)
    assert s.mean_item_accuracy == pytest.approx((1 + 2 / 3) / 2)
    assert s.exact_match_rate == 0.5
