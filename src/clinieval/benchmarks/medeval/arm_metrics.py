"""The paper's numbers of one MedEval arm, one function per kind of answer, in both views.

Kept apart from :mod:`.analysis` (which walks every arm, compares them and picks each task's
headline) so that each task's entry in :data:`~.task_table.TASK_TABLE` can name the function that
measures it without the table and the analysis importing each other:

* a label (abnormality, ambiguity): accuracy and macro-F1;
* the 14 codes: average accuracy over the observations, exact match rate, and the per-observation
  credit beside them;
* free text (summaries, rewrites): ROUGE-1, ROUGE-2, ROUGE-L (F, x100), their sum, corpus BLEU-4.

Each is computed over the qualified answers only and with unqualified answers (and failed calls)
counted wrong, as the paper's "qualified rate" demands. Intervals are seeded percentile bootstraps
over items.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from clinieval.errors import UserError
from clinieval.records.sample_record import SampleRecord

if TYPE_CHECKING:  # run folders (clinieval.records.runs) load only where arms are read
    from clinieval.benchmarks.medeval.arms import Arm, Settings

JSON = dict[str, Any]


def mean_ci(values: Sequence[float], s: Settings, scale: float = 1.0) -> JSON:
    """The mean of ``values`` (times ``scale``) with its bootstrap CI when ``s`` asks for one."""
    from clinieval.analysis.uncertainty import bootstrap_ci

    if not values:
        return {"value": None, "ci": None, "n": 0}
    mean = sum(values) / len(values)
    ci = None
    if s.intervals and len(values) > 1:
        low, high = bootstrap_ci(values, level=s.level, resamples=s.resamples, seed=s.seed)
        ci = [scale * low, scale * high]
    return {"value": scale * mean, "ci": ci, "n": len(values)}


def macro_f1(gold: Sequence[str], predicted: Sequence[str | None], classes: Sequence[str]) -> float:
    """Macro-F1 over ``classes`` with an unqualified answer (None) wrong for its item: the shared
    implementation in :mod:`clinieval.scoring.classification`, never a second one."""
    from clinieval.scoring.classification import precision_recall_f1

    f1 = precision_recall_f1(gold, predicted, average="macro", labels=classes).f1
    return 0.0 if f1 is None else f1


def score_of(arm: Arm, record: SampleRecord) -> tuple[float | None, JSON]:
    """A record's ``medeval_<task>`` score: its value and its metadata."""
    score = record.scores.get(f"medeval_{arm.task}")
    if score is None:
        raise UserError(f"{arm.path}: sample {record.sample.id} has no medeval_{arm.task} score")
    return score.value, dict(score.metadata or {})


def counts(arm: Arm) -> JSON:
    """Items, failed calls, qualified answers and the qualified rate."""
    failed = sum(1 for r in arm.records if r.output is None or not r.output.ok)
    qualified = sum(1 for r in arm.records if score_of(arm, r)[1].get("qualified"))
    n = len(arm.records)
    return {"items": n, "failed": failed, "qualified": qualified, "qualified_rate": qualified / n}


def label_metrics(arm: Arm, s: Settings, classes: Sequence[str]) -> JSON:
    """Accuracy (with CIs) and macro-F1 over ``classes``, in both views."""
    gold = [str(r.sample.target) for r in arm.records]
    meta = [score_of(arm, r)[1] for r in arm.records]
    predicted = [m.get("label") if m.get("qualified") else None for m in meta]
    right = [float(p == g) for p, g in zip(predicted, gold, strict=True)]
    keep = [i for i, p in enumerate(predicted) if p is not None]
    out: JSON = {
        "accuracy": {
            "counted_wrong": mean_ci(right, s, 100),
            "qualified": mean_ci([right[i] for i in keep], s, 100),
        },
        "macro_f1": {
            "counted_wrong": 100 * macro_f1(gold, predicted, classes),
            "qualified": 100 * macro_f1([gold[i] for i in keep], [predicted[i] for i in keep], classes)
            if keep
            else None,
        },
    }
    return out


def _observation_credit(arm: Arm) -> list[float]:
    """Per report, the share of the 14 observations the answer got right, counting every tuple it
    gave even when it is unqualified (13 right and one missing is 13/14 here, 0 in the paper's
    all-or-nothing figure). A failed call is 0."""
    from clinieval.scoring.classification import multilabel_scores

    gold = [dict(r.sample.metadata["codes"]) for r in arm.records]
    said = [
        dict(score_of(arm, r)[1].get("predictions") or {}) if r.output is not None and r.output.ok else None
        for r in arm.records
    ]
    shares = []
    for g, p in zip(gold, said, strict=True):
        shares.append(multilabel_scores([g], [p]).mean_item_accuracy)
    return shares


def code_metrics(arm: Arm, s: Settings) -> JSON:
    """Average accuracy and exact match in both views, and the per-observation credit."""
    values = [score_of(arm, r) for r in arm.records]
    accuracy = [v or 0.0 for v, _ in values]
    exact = [float(bool(m.get("exact"))) for _, m in values]
    keep = [i for i, (_, m) in enumerate(values) if m.get("qualified")]
    credit = _observation_credit(arm)
    return {
        "per_observation_credit": {
            "counted_wrong": mean_ci(credit, s, 100),
            "exact_match": mean_ci([float(c == 1.0) for c in credit], s, 100),
        },
        "average_accuracy": {
            "counted_wrong": mean_ci(accuracy, s, 100),
            "qualified": mean_ci([accuracy[i] for i in keep], s, 100),
        },
        "exact_match": {
            "counted_wrong": mean_ci(exact, s, 100),
            "qualified": mean_ci([exact[i] for i in keep], s, 100),
        },
    }


def _answers(arm: Arm) -> tuple[list[str], list[str], list[bool]]:
    """Each answer, reference and whether it qualified (as its score says: a rewrite without
    content does not). An unqualified answer is read as "" so the counted-wrong view scores it 0."""
    texts = [r.output.text.strip() if r.output is not None and r.output.ok else "" for r in arm.records]
    qualified = [
        bool(t) and bool(score_of(arm, r)[1].get("qualified"))
        for t, r in zip(texts, arm.records, strict=True)
    ]
    references = [str(r.sample.target or "") for r in arm.records]
    return [t if q else "" for t, q in zip(texts, qualified, strict=True)], references, qualified


def text_metrics(arm: Arm, s: Settings) -> JSON:
    """ROUGE-1/2/L (with CIs), their sum and corpus BLEU-4, per view (None for an empty view)."""
    from clinieval.scoring.text.registry import score_texts

    texts, refs, qualified = _answers(arm)
    out: JSON = {}
    for view, keep in (
        ("counted_wrong", list(range(len(texts)))),
        ("qualified", [i for i, q in enumerate(qualified) if q]),
    ):
        if not keep:
            out[view] = None
            continue
        preds, golds = [texts[i] for i in keep], [refs[i] for i in keep]
        metrics = score_texts(("rouge1", "rouge2", "rougeL", "bleu"), preds, golds)
        rouge = {k: [100 * v for v in metrics[k].values] for k in ("rouge1", "rouge2", "rougeL")}
        total = [a + b + c for a, b, c in zip(rouge["rouge1"], rouge["rouge2"], rouge["rougeL"], strict=True)]
        out[view] = {
            **{k: mean_ci(v, s) for k, v in rouge.items()},
            "rouge_sum": mean_ci(total, s),
            "bleu4": metrics["bleu"].corpus,
        }
    return out
