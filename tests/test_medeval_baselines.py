"""MedEval's trained baselines: fitted on the train split, tested, saved with a card, reloaded
with the same predictions, and written as arms the analysis reads beside the prompted LLMs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinieval.benchmarks.medeval.analysis import medeval_analysis, read_arm
from clinieval.benchmarks.medeval.baselines.classifiers import load_classifier
from clinieval.benchmarks.medeval.baselines.train import lead_sentence_arm, train_baseline
from clinieval.benchmarks.medeval.items import CHEST, ReportItem, SentenceItem
from clinieval.errors import UserError

NORMAL = ["lungs are clear", "no acute abnormality", "heart size is normal", "no effusion is seen"]
ABNORMAL = [
    "right lower lobe opacity",
    "moderate pleural effusion",
    "displaced rib fracture",
    "large pneumothorax",
]


def sentences() -> list[SentenceItem]:
    out = []
    for i in range(48):
        abnormal = i % 2 == 1
        text = (ABNORMAL if abnormal else NORMAL)[i % 4] + f" on view {i}."
        split = "test" if i % 6 == 0 or i % 6 == 1 else "train"
        out.append(SentenceItem(f"s{i}", text, CHEST, abnormal=abnormal, ambiguous=False, split=split))
    return out


def reports() -> list[ReportItem]:
    out = []
    for i in range(30):
        effusion = i % 3 == 0
        findings = "Small left pleural effusion." if effusion else "Lungs are clear."
        findings += " Heart normal."
        codes = {"Pleural Effusion": "positive"} if effusion else {"No Finding": "positive"}
        out.append(
            ReportItem(
                f"r{i}",
                f"FINDINGS: {findings} IMPRESSION: {'Effusion.' if effusion else 'Normal.'}",
                CHEST,
                findings=findings,
                impression="Effusion." if effusion else "Normal.",
                codes=codes,  # type: ignore[arg-type]
                split="test" if i % 5 == 0 else "train",
            )
        )
    return out


def test_tfidf_baseline_learns_saves_reloads_and_writes_an_arm(tmp_path: Path) -> None:
    items = sentences()
    trained = train_baseline("tfidf", "abnormality", items, tmp_path, seed=0)
    card = json.loads((trained.model_dir / "card.json").read_text())
    assert card["kind"] == "tfidf-logreg" and card["split"]["train"] == 32 and card["split"]["test"] == 16
    assert card["metrics"]["accuracy"] == 100.0  # the words separate the classes
    assert len(card["data_sha256"]) == 64 and card["training_seconds"] >= 0
    classifier, _ = load_classifier(trained.model_dir)
    test = [x for x in items if x.split == "test"]
    assert [p[0] for p in classifier.predict([x.sentence for x in test])] == [
        "abnormal" if x.abnormal else "normal" for x in test
    ]
    arm = read_arm(trained.arm_dir)
    assert arm.model == "baseline:tfidf" and arm.task == "abnormality" and len(arm.records) == 16
    result = medeval_analysis([arm])
    assert result["arms"][0]["metrics"]["accuracy"]["counted_wrong"]["value"] == 100.0
    assert result["arms"][0]["qualified_rate"] == 1.0


def test_multi_label_codes_and_the_lead_sentence_summary(tmp_path: Path) -> None:
    items = reports()
    trained = train_baseline("tfidf", "codes", items, tmp_path, seed=0)
    assert trained.card["metrics"]["exact_match"] == 100.0
    arm = read_arm(trained.arm_dir)
    record = arm.records[0]
    assert record.scores["medeval_codes"].metadata["qualified"] is True  # answers in the LLM format
    lead = read_arm(lead_sentence_arm(items, tmp_path / "lead"))
    assert lead.records[0].output is not None
    assert lead.records[0].output.text in ("Small left pleural effusion.", "Lungs are clear.")
    with pytest.raises(UserError, match="no trained baseline for summarization"):
        train_baseline("tfidf", "summarization", items, tmp_path)


@pytest.mark.slow
def test_the_encoder_fine_tunes_on_cpu_and_reloads_to_the_same_predictions(tmp_path: Path) -> None:
    items = sentences()
    trained = train_baseline("encoder", "abnormality", items, tmp_path, seed=0, epochs=2)
    card = trained.card
    assert card["kind"] == "minilm-finetuned" and card["hyperparameters"]["learning_rate"] == 1e-4
    assert card["hyperparameters"]["batch_size"] == 64 and card["hyperparameters"]["max_length"] == 256
    test = [x.sentence for x in items if x.split == "test"]
    first, _ = load_classifier(trained.model_dir)
    second, _ = load_classifier(trained.model_dir)
    assert first.predict(test) == second.predict(test)
    assert card["metrics"]["accuracy"] >= 75.0  # two epochs on 32 sentences separate these words


def test_rewriting_deltas_come_from_the_trained_classifiers(tmp_path: Path) -> None:
    """ΔAcc_am and ΔAcc_ab of rewrites, measured by classifiers trained here. The "answers" are the
    clinician rewrites themselves (a stand-in for a model that rewrites perfectly): they stop reading
    as ambiguous (ΔAcc_am = 100) and keep every finding (ΔAcc_ab = 0)."""
    from clinieval.benchmarks.medeval.baselines.train import write_baseline_arm
    from clinieval.benchmarks.medeval.rewriting import classifier_deltas

    organs = ["lungs", "heart", "mediastinum", "bones", "abdomen", "pleura"]
    items: list[SentenceItem] = []
    for i in range(60):
        organ = organs[i % 6]
        ambiguous = i % 2 == 0
        plain = f"the {organ} are normal." if i % 4 == 1 else f"the {organ} are normal in size."
        text = f"the {organ} are unremarkable." if ambiguous else plain
        rewrite = f"the {organ} are normal." if ambiguous else None
        split = "test" if i % 5 == 0 else "train"
        items.append(
            SentenceItem(
                f"s{i}", text, CHEST, abnormal=False, ambiguous=ambiguous, rewrite=rewrite, split=split
            )
        )
    items += [
        SentenceItem(f"a{i}", f"large {o} mass.", CHEST, abnormal=True, ambiguous=False, split="train")
        for i, o in enumerate(organs)
    ]
    am = train_baseline("tfidf", "ambiguity", items, tmp_path / "b", seed=0)
    ab = train_baseline("tfidf", "abnormality", items, tmp_path / "b", seed=0)
    tested = [x for x in items if x.split == "test" and x.ambiguous]
    answers = {x.id: str(x.rewrite) for x in tested}
    arm = write_baseline_arm("rewriting", items, answers, "stand-in:clinician-rewrites", {}, tmp_path / "arm")
    deltas = classifier_deltas(read_arm(arm).records, am.model_dir, ab.model_dir, resamples=200)
    assert deltas["delta_acc_am"]["original_accuracy"] == 100.0
    assert deltas["delta_acc_am"]["delta"] == 100.0
    assert deltas["delta_acc_ab"]["delta"] == 0.0
    assert deltas["classifiers"]["ambiguity"]["test_metrics"] == am.card["metrics"]
    with pytest.raises(UserError, match="a classifier for 'abnormality', not 'ambiguity'"):
        classifier_deltas(read_arm(arm).records, ab.model_dir, ab.model_dir)


def test_a_failed_or_empty_rewrite_counts_as_no_disambiguation(tmp_path: Path) -> None:
    """A rewrite that never came (a failed call, an empty answer) achieved nothing: it is measured as
    the original sentence, adds 0 to both deltas and is counted in ``rewrites_failed``. Classified as
    the empty string, TF-IDF answered with the majority class ("unambiguous"), so every failure
    raised ΔAcc_am as if the sentence had been disambiguated."""
    from clinieval.benchmarks.medeval.baselines.train import write_baseline_arm
    from clinieval.benchmarks.medeval.rewriting import classifier_deltas

    items = _rewriting_corpus()
    am = train_baseline("tfidf", "ambiguity", items, tmp_path / "b", seed=0)
    ab = train_baseline("tfidf", "abnormality", items, tmp_path / "b", seed=0)
    am_model, _ = load_classifier(am.model_dir)
    assert am_model.predict([""])[0][0] == "unambiguous"  # the trap: "" reads as disambiguated
    tested = [x for x in items if x.split == "test" and x.ambiguous]
    answers = {x.id: "" for x in tested}  # every call failed or came back empty
    arm = write_baseline_arm("rewriting", items, answers, "stand-in:silent-model", {}, tmp_path / "arm")
    deltas = classifier_deltas(read_arm(arm).records, am.model_dir, ab.model_dir, resamples=200)
    assert deltas["delta_acc_am"]["original_accuracy"] == 100.0  # the originals read as ambiguous
    assert deltas["delta_acc_am"]["delta"] == 0.0
    assert deltas["delta_acc_ab"]["delta"] == 0.0
    assert deltas["rewrites_failed"] == deltas["rewrites"] == len(tested)


def _rewriting_corpus() -> list[SentenceItem]:
    """Ambiguous jargon sentences with clinician rewrites, unambiguous ones the majority class (so a
    classifier reads a text with no known word as "unambiguous"), and abnormal masses."""
    organs = ["lungs", "heart", "mediastinum", "bones", "abdomen", "pleura"]
    items: list[SentenceItem] = []
    for i in range(90):
        organ = organs[i % 6]
        ambiguous = i % 2 == 0  # unambiguous (with the masses below) is the majority class
        text = f"the {organ} are unremarkable." if ambiguous else f"the {organ} are normal in size {i}."
        rewrite = f"the {organ} are normal." if ambiguous else None
        split = "test" if i % 10 == 0 else "train"
        items.append(
            SentenceItem(
                f"s{i}", text, CHEST, abnormal=False, ambiguous=ambiguous, rewrite=rewrite, split=split
            )
        )
    return items + [
        SentenceItem(f"a{i}", f"large {o} mass.", CHEST, abnormal=True, ambiguous=False, split="train")
        for i, o in enumerate(organs)
    ]


NO_CONTENT = [".", "Normal", "Diagnostic: Normal.", "AMBIGUOUS", "Lungs fine.", "It is fine."]
"""Rewrites that say nothing clinical: punctuation, the label alone (any case), fewer than three
words, and three words none of which is the sentence's finding."""


def test_a_rewrite_without_clinical_content_counts_as_failed_not_as_a_disambiguation(tmp_path: Path) -> None:
    """Answering "." earned the best ΔAcc_am there is (the ambiguity classifier calls it
    unambiguous) and counted as qualified. Now every no-content form is measured as the original
    (ΔAcc_am 0, ΔAcc_ab 0), counted as ``rewrites_without_content`` beside ``rewrites_failed``,
    unqualified, and shown in the report's ΔAcc table; a real rewrite still counts."""
    from clinieval.benchmarks.medeval.baselines.train import write_baseline_arm
    from clinieval.benchmarks.medeval.report import write_medeval_report
    from clinieval.benchmarks.medeval.rewriting import classifier_deltas

    items = _rewriting_corpus()
    am = train_baseline("tfidf", "ambiguity", items, tmp_path / "b", seed=0)
    ab = train_baseline("tfidf", "abnormality", items, tmp_path / "b", seed=0)
    am_model, _ = load_classifier(am.model_dir)
    assert [p[0] for p in am_model.predict(NO_CONTENT)] == ["unambiguous"] * len(NO_CONTENT)  # the trap
    tested = [x for x in items if x.split == "test" and x.ambiguous]
    assert len(tested) >= len(NO_CONTENT)
    junk = {x.id: NO_CONTENT[k % len(NO_CONTENT)] for k, x in enumerate(tested)}
    arm = write_baseline_arm("rewriting", items, junk, "stand-in:dot-model", {}, tmp_path / "junk")
    deltas = classifier_deltas(read_arm(arm).records, am.model_dir, ab.model_dir, resamples=200)
    assert deltas["delta_acc_am"]["original_accuracy"] == 100.0
    assert deltas["delta_acc_am"]["delta"] == 0.0 and deltas["delta_acc_ab"]["delta"] == 0.0
    assert deltas["rewrites_without_content"] == len(tested) and deltas["rewrites_failed"] == 0

    # half real rewrites (in the wording the classifier learnt as unambiguous), half junk: the real
    # half still disambiguates
    real_rewrite = {x.id: x.sentence.replace("unremarkable", "normal in size") for x in tested}
    mixed = {x.id: real_rewrite[x.id] if k % 2 else junk[x.id] for k, x in enumerate(tested)}
    arm = write_baseline_arm("rewriting", items, mixed, "stand-in:half-model", {}, tmp_path / "mixed")
    result = medeval_analysis([read_arm(arm)], classifiers=(am.model_dir, ab.model_dir))
    [row] = result["arms"]
    real = len(tested) // 2
    assert row["qualified"] == real  # no-content rewrites are unqualified, as empty ones are
    d = row["classifier_deltas"]
    assert d["rewrites_without_content"] == len(tested) - real
    assert d["delta_acc_am"]["delta"] == pytest.approx(100.0 * real / len(tested))
    write_medeval_report(result, [read_arm(arm)], tmp_path / "report", synthetic=True)
    md = (tmp_path / "report" / "medeval.md").read_text()
    assert "ΔAcc_am (higher is better)" in md and "ΔAcc_ab (lower is better)" in md
    assert f"| {len(tested) - real} of {len(tested)} |" in md  # the without-content column
