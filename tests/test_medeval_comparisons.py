"""MedEval's comparisons: settings chosen on validation (never test), rows on the same items with n
and CIs, no average across metrics, per-observation credit beside the paper's all-or-nothing codes.

Arms are real run folders written by ``write_baseline_arm`` (the answers are scripted) and read
back with ``read_arm``; their model and shot setting are then set as a prompted model's would be.
"""

from __future__ import annotations

import dataclasses
import inspect
from pathlib import Path
from typing import Any

import pytest

from clinieval.benchmarks.medeval import analysis, arm_metrics, comparisons
from clinieval.benchmarks.medeval.analysis import Arm, Settings, medeval_analysis, read_arm
from clinieval.benchmarks.medeval.baselines.train import answer_text, write_baseline_arm
from clinieval.benchmarks.medeval.items import (
    CHEST,
    CHEXPERT_OBSERVATIONS,
    ReportItem,
    SentenceItem,
    Split,
    TaskName,
)
from clinieval.benchmarks.medeval.task import MedEvalSettings

FAST = Settings(resamples=200)


def sentences(n: int = 40) -> list[SentenceItem]:
    out = []
    for i in range(n):
        split: Split = "validation" if i % 4 == 3 else "test" if i % 4 == 2 else "train"
        out.append(
            SentenceItem(
                f"s{i}", f"finding number {i}.", CHEST, abnormal=i % 2 == 0, ambiguous=False, split=split
            )
        )
    return out


def arm(
    tmp: Path,
    task: TaskName,
    items: list[SentenceItem] | list[ReportItem],
    right: float,
    *,
    model: str = "openai:http://127.0.0.1:1/v1@m",
    shots: int = 0,
    split: Split = "test",
    limit: int | None = None,
) -> Arm:
    """An arm answering the first ``limit`` items of ``split``, the first ``right`` share correctly."""
    asked = [x for x in items if x.split == split][:limit]
    answers = {}
    for k, x in enumerate(asked):
        ok = k < round(right * len(asked))
        assert isinstance(x, SentenceItem)
        gold = "abnormal" if x.abnormal else "normal"
        answers[x.id] = gold if ok else ("normal" if gold == "abnormal" else "abnormal")
    kept = [x for x in items if x.split != split or x in asked]
    name = f"{model.rsplit('@', 1)[-1]}-{task}-{shots}-{split}-{len(list(tmp.iterdir()))}"
    folder = write_baseline_arm(task, kept, answers, model, {}, tmp / name, split=split)
    return dataclasses.replace(read_arm(folder), model=model, shots=shots)


def test_the_few_shot_setting_is_chosen_on_validation_and_reported_on_test(tmp_path: Path) -> None:
    """Two few-shot settings: 3-shot is better on test, 1-shot on validation. The validation split
    chooses (1-shot) and its *test* score is what the comparison shows; before, the best test arm
    was picked."""
    items = sentences()
    arms = [
        arm(tmp_path, "abnormality", items, 0.5, shots=0),
        arm(tmp_path, "abnormality", items, 0.6, shots=1),
        arm(tmp_path, "abnormality", items, 0.9, shots=3),
        arm(tmp_path, "abnormality", items, 0.2, shots=0, split="validation"),
        arm(tmp_path, "abnormality", items, 0.8, shots=1, split="validation"),
        arm(tmp_path, "abnormality", items, 0.4, shots=3, split="validation"),
    ]
    result = medeval_analysis(arms, FAST)
    assert len(result["arms"]) == 3 and len(result["validation_arms"]) == 3  # validation is not reported
    row = result["zero_vs_few"][0]
    assert (
        row["few_shot"]["setting"] == "1-shot (drawn, seed 0)"
        and row["few_shot"]["chosen_by"] == "best validation score"
    )
    assert row["sides"]["few-shot"]["value"] == pytest.approx(60.0)  # its test score, not the best test
    assert row["sides"]["zero-shot"]["value"] == pytest.approx(50.0)
    assert row["difference"]["value"] == pytest.approx(10.0) and row["n"] == 10
    chosen = {c["task"]: c for c in result["chosen"]}["abnormality"]
    assert chosen["setting"] == "1-shot (drawn, seed 0)" and chosen["validation"][
        "zero-shot"
    ] == pytest.approx(20.0)


def test_without_validation_runs_the_papers_setting_is_used_never_the_best_test_one(tmp_path: Path) -> None:
    items = sentences()
    arms = [
        arm(tmp_path, "abnormality", items, 0.9, shots=0),
        arm(tmp_path, "abnormality", items, 0.5, shots=2),  # the paper's 2-shot, worse on test
        arm(tmp_path, "abnormality", items, 1.0, model="baseline:tfidf"),
    ]
    result = medeval_analysis(arms, FAST)
    chosen = {c["model"]: c for c in result["chosen"]}
    llm = chosen["openai:http://127.0.0.1:1/v1@m"]
    assert llm["setting"] == "2-shot (drawn, seed 0)" and llm["chosen_by"].startswith(
        "the paper's setting, fixed in advance"
    )
    fam = result["families"]["abnormality"]
    assert fam["sides"]["prompted LLM"]["value"] == pytest.approx(50.0)


def test_families_are_compared_on_the_same_items_with_n_and_intervals(tmp_path: Path) -> None:
    """The baseline answers the whole test split (10 items), the LLM 6: the comparison is on those 6,
    paired, and says how many each side lost."""
    items = sentences()
    arms = [
        arm(tmp_path, "abnormality", items, 0.5, limit=6),
        arm(tmp_path, "abnormality", items, 1.0, model="baseline:tfidf"),
        arm(tmp_path, "abnormality", items, 0.0, model="baseline:encoder"),
    ]
    fam = medeval_analysis(arms, FAST)["families"]["abnormality"]
    assert fam["n"] == 6 and fam["dropped"] == {"prompted LLM": 0, "adapted PLM": 4}
    assert fam["metric"] == "accuracy" and fam["split"] == "test"
    # the PLM family is the mean of its two models on those items: 100 and 0
    assert fam["sides"]["adapted PLM"]["value"] == pytest.approx(50.0)
    assert fam["sides"]["prompted LLM"]["value"] == pytest.approx(50.0)
    low, high = fam["sides"]["prompted LLM"]["ci"]
    assert low < 50.0 < high
    assert fam["difference"]["of"] == "prompted LLM minus adapted PLM" and "p" in fam["difference"]
    assert {m["model"] for m in fam["members"]["adapted PLM"]} == {"baseline:tfidf", "baseline:encoder"}


def test_levels_never_average_different_metrics(tmp_path: Path) -> None:
    """Sentence level: abnormality and ambiguity accuracy may be averaged; rewriting's BLEU-4 may not
    join them (before, one "sentence tasks" mean held all three)."""
    results = [
        {"model": "m", "setting": "zero-shot", "task": t, "split": "test", "metrics": metrics}
        for t, metrics in [
            ("abnormality", {"accuracy": {"counted_wrong": {"value": 80.0}}}),
            ("ambiguity", {"accuracy": {"counted_wrong": {"value": 60.0}}}),
            ("rewriting", {"counted_wrong": {"bleu4": 5.0}}),
            ("summarization", {"counted_wrong": {"rougeL": {"value": 30.0}}}),
        ]
    ]
    levels = analysis.by_level(results)
    assert levels == [
        {
            "model": "m",
            "setting": "zero-shot",
            "level": "sentence",
            "metric": "accuracy",
            "tasks": ["abnormality", "ambiguity"],
            "value": 70.0,
        }
    ]


def _report(i: int, split: Split = "test") -> ReportItem:
    return ReportItem(
        f"r{i}",
        "FINDINGS: Clear. IMPRESSION: Normal.",
        CHEST,
        findings="Clear.",
        impression="Normal.",
        codes={"No Finding": "positive"},
        split=split,
    )


def test_code_answers_get_per_observation_credit_beside_the_papers_all_or_nothing(tmp_path: Path) -> None:
    items = [_report(i) for i in range(4)] + [_report(9, "train")]
    full = answer_text(
        "codes", tuple("positive" if o == "No Finding" else "unknown" for o in CHEXPERT_OBSERVATIONS)
    )
    thirteen = full.rsplit(", (", 1)[0]  # the last observation missing: unqualified
    answers = {"r0": full, "r1": thirteen, "r2": thirteen, "r3": "I cannot tell."}
    folder = write_baseline_arm("codes", items, answers, "openai:http://127.0.0.1:1/v1@m", {}, tmp_path / "c")
    metrics = analysis.arm_result(read_arm(folder), FAST)["metrics"]
    assert metrics["average_accuracy"]["counted_wrong"]["value"] == pytest.approx(25.0)  # 1 of 4 reports
    credit = metrics["per_observation_credit"]["counted_wrong"]["value"]
    assert credit == pytest.approx(100 * (1 + 13 / 14 + 13 / 14 + 0) / 4)


def test_medeval_has_one_macro_f1_the_shared_one() -> None:
    """MedEval's analysis and baselines use :mod:`clinieval.scoring.classification`; no second F1."""
    from clinieval.scoring.classification import precision_recall_f1

    source = inspect.getsource(analysis) + inspect.getsource(arm_metrics)
    assert "2 * tp" not in source and "precision_recall_f1" in source
    gold = ["normal", "abnormal", "abnormal", "normal", "abnormal"]
    said: list[str | None] = ["normal", None, "abnormal", "abnormal", "abnormal"]
    expected = precision_recall_f1(gold, said, average="macro", labels=("normal", "abnormal")).f1
    assert analysis.macro_f1(gold, said, ("normal", "abnormal")) == expected
    # by hand: normal tp1 fp0 fn1 -> 2/3; abnormal tp2 fp1 fn1 (the None) -> 4/6
    assert expected == pytest.approx(2 / 3)


def test_per_item_values_are_on_0_to_100_for_every_task(tmp_path: Path) -> None:
    """Sentence BLEU comes on sacrebleu's 0-100 already, ROUGE and accuracy as shares: a perfect
    rewrite is 100, not 10,000 (the demo's first report showed 4562 for SmolLM2)."""
    items = [
        SentenceItem(f"s{i}", f"lungs are unremarkable {i}.", CHEST, abnormal=False, ambiguous=True,
                     rewrite=f"lungs are normal {i}.", split="test" if i < 3 else "train")
        for i in range(6)
    ]  # fmt: skip
    answers = {x.id: str(x.rewrite) for x in items if x.split == "test"}
    folder = write_baseline_arm(
        "rewriting", items, answers, "openai:http://127.0.0.1:1/v1@m", {}, tmp_path / "r"
    )
    assert list(comparisons.per_item(read_arm(folder)).values()) == pytest.approx([100.0] * 3)


def _ambiguous(n: int = 40) -> list[SentenceItem]:
    """Ambiguous sentences with clinician rewrites, over train, validation and test."""
    out = []
    for i in range(n):
        split: Split = "validation" if i % 4 == 3 else "test" if i % 4 == 2 else "train"
        organ = ("lungs", "heart", "bones", "pleura")[i % 4]
        out.append(
            SentenceItem(
                f"r{i}",
                f"the {organ} are unremarkable on view {i}.",
                CHEST,
                abnormal=False,
                ambiguous=True,
                rewrite=f"the {organ} are normal on view {i}.",
                split=split,
            )
        )
    return out


def rewriting_arm(
    tmp: Path, items: list[SentenceItem], right: float, *, split: Split = "test", **options: Any
) -> Arm:
    """A prompted model's rewriting arm run with ``options`` (MedEvalSettings fields) written as a
    real run folder: the first ``right`` share of its answers is the clinician's rewrite (sentence
    BLEU 100), the rest a rewrite of the same finding in other words (BLEU near 0)."""
    asked = [x for x in items if x.split == split]
    answers = {
        x.id: str(x.rewrite) if k < round(right * len(asked)) else f"{x.sentence.split()[1]} look fine to me"
        for k, x in enumerate(asked)
    }
    folder = tmp / f"rewriting-{len(list(tmp.iterdir()))}"
    settings = MedEvalSettings(**options)
    return read_arm(write_baseline_arm("rewriting", items, answers, MODEL, {}, folder, split, settings))


MODEL = "openai:http://127.0.0.1:1/v1@m"


def test_zero_shot_rewriting_arms_with_and_without_the_label_are_told_apart(tmp_path: Path) -> None:
    """The labelled (default) and the `--no-rewrite-label` zero-shot rewriting arms were both
    "zero-shot", so validation could not match either to its own validation arm (one score for two
    arms) and the choice fell back to arm order. Each is now its own setting, matched to its own."""
    items = _ambiguous()
    arms = [
        rewriting_arm(tmp_path, items, 1.0),  # labelled: best on test
        rewriting_arm(tmp_path, items, 0.5, rewrite_label=False),
        rewriting_arm(tmp_path, items, 0.2, split="validation"),
        rewriting_arm(tmp_path, items, 0.8, split="validation", rewrite_label=False),
    ]
    assert {a.setting for a in arms} == {"zero-shot", "zero-shot, no Diagnostic: label"}
    result = medeval_analysis(arms, FAST)
    [chosen] = result["chosen"]
    assert chosen["setting"] == "zero-shot, no Diagnostic: label"
    assert chosen["chosen_by"] == "best validation score"
    scores = chosen["validation"]  # each matched to its own validation arm: two scores, not one
    assert set(scores) == {"zero-shot", "zero-shot, no Diagnostic: label"}
    assert scores["zero-shot"] < 50.0 < scores["zero-shot, no Diagnostic: label"]
    shown = {a["setting"] for a in result["arms"]}  # the tables say which arm is which
    assert shown == {"zero-shot", "zero-shot, no Diagnostic: label"}
    # without validation arms, the paper's labelled query is its setting, in either order
    for order in (arms[:2], arms[1::-1]):
        assert comparisons.choose(order, []).arm.setting == "zero-shot"


def test_the_papers_own_examples_are_preferred_to_drawn_ones_in_either_order(tmp_path: Path) -> None:
    """Without validation arms, the paper's setting was the first arm with its number of examples:
    a drawn 3-shot arm read first beat the paper's own three examples."""
    items = _ambiguous()
    drawn = rewriting_arm(tmp_path, items, 0.9, shots=3, seed=4)
    own = rewriting_arm(tmp_path, items, 0.3, paper_examples=True)
    assert drawn.setting == "3-shot (drawn, seed 4)" and own.setting == "3-shot (paper's examples)"
    for order in ([drawn, own], [own, drawn]):
        choice = comparisons.choose(order, [])
        assert choice.arm is own and choice.how.startswith("the paper's setting, fixed in advance")


def test_zero_vs_few_pairs_the_few_shot_arm_with_the_zero_shot_arm_of_its_own_prompt(tmp_path: Path) -> None:
    """The few-shot arm ran label-free; of two zero-shot arms it is compared with the label-free
    one (only the examples differ), not with whichever zero-shot arm was read first."""
    items = _ambiguous()
    arms = [
        rewriting_arm(tmp_path, items, 0.2),
        rewriting_arm(tmp_path, items, 0.8, rewrite_label=False),
        rewriting_arm(tmp_path, items, 0.5, shots=3, rewrite_label=False),
    ]
    [row] = medeval_analysis(arms, FAST)["zero_vs_few"]
    assert row["few_shot"]["setting"] == "3-shot (drawn, seed 0), no Diagnostic: label"
    assert row["zero_shot"]["setting"] == "zero-shot, no Diagnostic: label"
    zero = comparisons.per_item(arms[1])
    assert row["sides"]["zero-shot"]["value"] == pytest.approx(sum(zero.values()) / len(zero))
