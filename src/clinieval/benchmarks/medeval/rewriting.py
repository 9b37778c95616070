"""MedEval's rewriting metrics that need trained classifiers: ΔAcc_am and ΔAcc_ab.

A good rewrite of an ambiguous sentence no longer reads as ambiguous, and keeps its finding. The
paper measures both with classifiers trained on the task data: an ambiguity classifier's accuracy
on the original sentences (all ambiguous) minus its accuracy on the rewrites, with the original
label kept as gold (**ΔAcc_am**, higher is better: the rewrites stopped looking ambiguous), and the
same for an abnormality classifier (**ΔAcc_ab**, lower is better: a faithful rewrite keeps the
normal/abnormal finding). Which classifiers were used, and their own test accuracy, are recorded
beside the numbers, as the paper asks.

A failed call or an unqualified (empty) rewrite achieved nothing, so it is measured as the original
sentence: it neither disambiguates nor distorts, and adds 0 to both deltas. (Classifying it as the
empty string, as an earlier version did, let a TF-IDF model answer with its intercept, the majority
class "unambiguous", so every failure counted as a successful disambiguation.) How many rewrites
failed is reported beside the deltas as ``rewrites_failed``.

So is a rewrite without clinical content (:mod:`.rewrite_content`: punctuation only, the label
alone, fewer than three words, none of the sentence's finding words): answering "." earned the
best ΔAcc_am there is (the ambiguity classifier calls it unambiguous) while saying nothing. It is
measured as the original too, and counted apart as ``rewrites_without_content`` (the call
succeeded; the answer was empty of findings).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval.benchmarks.medeval.baselines.classifiers import Classifier, load_classifier
from clinieval.benchmarks.medeval.rewrite_content import without_content
from clinieval.errors import UserError
from clinieval.records.sample_record import SampleRecord

JSON = dict[str, Any]


def _accuracy(classifier: Classifier, texts: Sequence[str], gold: Sequence[str]) -> list[float]:
    predicted = [p[0] for p in classifier.predict(texts)]
    return [float(p == g) for p, g in zip(predicted, gold, strict=True)]


def _load(folder: Path, task: str) -> tuple[Classifier, JSON]:
    classifier, card = load_classifier(folder)
    if card.get("task") != task:
        raise UserError(f"{folder}: a classifier for {card.get('task')!r}, not {task!r}")
    return classifier, card


def _delta(per_original: list[float], per_rewrite: list[float], resamples: int, seed: int) -> JSON:
    from clinieval.analysis.uncertainty import paired_bootstrap

    n = len(per_original)
    out: JSON = {
        "original_accuracy": 100 * sum(per_original) / n,
        "rewrite_accuracy": 100 * sum(per_rewrite) / n,
        "delta": 100 * (sum(per_original) - sum(per_rewrite)) / n,
        "ci": None,
    }
    if n > 1:
        boot = paired_bootstrap(per_original, per_rewrite, resamples=resamples, seed=seed)
        out["ci"] = [100 * boot.ci_low, 100 * boot.ci_high]
    return out


def _card_summary(folder: Path, card: JSON) -> JSON:
    return {
        "path": str(folder),
        "kind": card.get("kind"),
        "test_metrics": card.get("metrics"),
        "data_sha256": card.get("data_sha256"),
    }


def classifier_deltas(
    records: Sequence[SampleRecord],
    ambiguity: Path,
    abnormality: Path,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> JSON:
    """ΔAcc_am and ΔAcc_ab of one rewriting arm's answers, with the classifiers that measured them."""
    if not records:
        raise UserError("no rewriting answers to measure")
    am, am_card = _load(ambiguity, "ambiguity")
    ab, ab_card = _load(abnormality, "abnormality")
    originals = [str(r.sample.metadata.get("sentence") or "") for r in records]
    answers = [r.output.text.strip() if r.output is not None and r.output.ok else "" for r in records]
    hollow = [bool(a) and without_content(a, o) is not None for a, o in zip(answers, originals, strict=True)]
    rewrites = [a if a and not h else o for a, h, o in zip(answers, hollow, originals, strict=True)]
    failed = sum(1 for a in answers if not a)
    normal = ["abnormal" if r.sample.metadata.get("abnormal") else "normal" for r in records]
    ambiguous = ["ambiguous"] * len(records)
    return {
        "delta_acc_am": _delta(
            _accuracy(am, originals, ambiguous), _accuracy(am, rewrites, ambiguous), resamples, seed
        ),
        "delta_acc_ab": _delta(
            _accuracy(ab, originals, normal), _accuracy(ab, rewrites, normal), resamples, seed
        ),
        "rewrites": len(records),
        "rewrites_failed": failed,
        "rewrites_without_content": sum(hollow),
        "classifiers": {
            "ambiguity": _card_summary(ambiguity, am_card),
            "abnormality": _card_summary(abnormality, ab_card),
        },
    }
