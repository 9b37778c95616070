"""AutoMedEval's quality classifier (e), judge training and knowledge introspection (g) (issue 15).

Real parts only: the installed MiniLM and scikit-learn for the classifier; TRL's SFTTrainer on a
tiny randomly initialised Llama built here (no download) for training, which is a wiring test,
not a judge; real local OpenAI-compatible servers scripting judge, teacher and reviewer replies,
and a real BM25 knowledge base, for introspection.
"""

from __future__ import annotations

import asyncio
import csv
import json
import math
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from clinieval.benchmarks.automedeval.build.instances import (
    Answer,
    Evaluation,
    Instance,
    Quality,
    read_instances,
    write_instances,
)
from clinieval.benchmarks.automedeval.build.introspect import read_review, read_suggestion, with_suggestion
from clinieval.benchmarks.automedeval.build.quality import (
    QualityPlan,
    read_labelled,
    split,
    wilson_interval,
)
from clinieval.benchmarks.automedeval.cli import app as automedeval_app
from clinieval.errors import UserError


def cli() -> typer.Typer:
    """The commands as `clinieval automedeval` mounts them (docs/automedeval-train.md)."""
    return automedeval_app


def invoke(*args: object) -> str:
    result = CliRunner().invoke(cli(), [str(a) for a in args])
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def write_rows(path: Path, header: list[str], rows: list[list[str]]) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


# --- (e) the quality classifier -------------------------------------------------------------

DRUGS = {"hypertension": "labetalol", "asthma": "salbutamol", "diabetes": "metformin",
         "pneumonia": "amoxicillin", "migraine": "sumatriptan", "gout": "allopurinol",
         "angina": "nitroglycerin", "sepsis": "ceftriaxone", "anemia": "ferrous sulfate",
         "psoriasis": "methotrexate"}  # fmt: skip
VAGUE = ["all good", "fine answers", "ok", "they are similar", "not sure, looks fine"]


def careful(n: int) -> str:
    """A high-quality evaluation: a rationale grounded in the reference, then the scores."""
    condition = list(DRUGS)[n % len(DRUGS)]
    return (
        f"Analyze: Step 1: The reference states that {DRUGS[condition]} treats {condition}. Step 2: Doctor 1 "
        f"names {DRUGS[condition]} correctly and explains the dose; Doctor 2 omits monitoring; Doctor 3 is "
        "wrong.\nScore: Doctor 1: 5 points. Doctor 2: 3 points. Doctor 3: 2 points."
    )


def sloppy(n: int) -> str:
    """A low-quality evaluation: no rationale to speak of."""
    return f"{VAGUE[n % len(VAGUE)]}.\nScore: Doctor 1: {1 + n % 5} points. Doctor 2: 3 points."


def test_wilson_interval_by_hand_and_against_statsmodels() -> None:
    from statsmodels.stats.proportion import proportion_confint

    # 10/10 at 95 %: z = 1.959964; centre = (1 + z²/20) / (1 + z²/10) = 0.861234; half = (z²/20) / (1 + z²/10)
    low, high = wilson_interval(10, 10)
    assert low == pytest.approx(0.722467, abs=1e-6) and high == 1.0
    for right, n in ((91, 100), (3, 7), (0, 5)):
        assert wilson_interval(right, n) == pytest.approx(proportion_confint(right, n, method="wilson"))


def test_labels_are_read_with_one_error_per_bad_row(tmp_path: Path) -> None:
    good = write_rows(tmp_path / "ok.csv", ["id", "text", "label"], [["a", "x", "High"], ["b", "y", "low"]])
    assert [(x.id, x.label, x.where) for x in read_labelled(good)] == [
        ("a", "high", f"{good}:2"),
        ("b", "low", f"{good}:3"),
    ]
    cases = {
        "bad label": ([["a", "x", "good"]], r":2: field 'label' is 'good'; expected high or low"),
        "empty text": ([["a", "x", "low"], ["b", "", "high"]], r":3: field 'text' is empty"),
        "repeated id": ([["a", "x", "low"], ["a", "y", "high"]], r":3: field 'id': 'a' repeats .*:2"),
    }
    for name, (rows, message) in cases.items():
        path = write_rows(tmp_path / f"{name}.csv", ["id", "text", "label"], rows)
        with pytest.raises(UserError, match=re.escape(str(path)) + message):
            read_labelled(path)
    # id,label plus an instances file: the text is the instance's evaluation
    instances = tmp_path / "instances.jsonl"
    write_instances(instances, [
        Instance("a", "Q?", "R.", (Answer("m", "t"),), Evaluation("teacher", careful(0), (5,))),
        Instance("b", "Q?", "R."),
    ])  # fmt: skip
    labels = write_rows(tmp_path / "ids.csv", ["id", "label"], [["a", "high"]])
    assert read_labelled(labels, instances)[0].text == careful(0)
    with pytest.raises(UserError, match="no column 'text'"):
        read_labelled(labels)
    with pytest.raises(UserError, match=r"ids2.csv:2: instance 'b' .* has no evaluation"):
        read_labelled(write_rows(tmp_path / "ids2.csv", ["id", "label"], [["b", "low"]]), instances)
    # too few of a label for the held-out part and the 5-fold search
    few = [[f"h{i}", careful(i), "high"] for i in range(20)] + [[f"l{i}", sloppy(i), "low"] for i in range(5)]
    examples = read_labelled(write_rows(tmp_path / "few.csv", ["id", "text", "label"], few))
    with pytest.raises(UserError, match=r"4 example\(s\) labelled 'low' in the training part \(5 in all\)"):
        split(examples, QualityPlan())
    train_part, held_out = split(examples, QualityPlan(folds=3))
    assert (len(train_part), len(held_out)) == (19, 6)  # round(25 / 4) held out, stratified


NOISY = {"h4", "h12"}
"""Careful evaluations deliberately labelled low: wherever they land, they are known."""


def test_quality_classifier_held_out_accuracy_and_apply(tmp_path: Path) -> None:
    rows = [
        [f"h{i}", careful(i), "low" if f"h{i}" in NOISY else "high"]
        if i % 2 == 0
        else [f"l{i}", sloppy(i), "low"]
        for i in range(40)
    ]
    labels = write_rows(tmp_path / "labels.csv", ["id", "text", "label"], rows)
    said = invoke("build", "quality", "train", labels, "--out", tmp_path / "clf")
    meta = json.loads((tmp_path / "clf" / "quality.json").read_text())
    assert (meta["train"], meta["test"], meta["labels"]) == (30, 10, {"high": 18, "low": 22})
    # the SVM learns the style; a careful evaluation labelled low is predicted high, so each noisy
    # example that was held out costs exactly one held-out case
    noisy_held_out = len(NOISY & set(meta["test_ids"]))
    assert noisy_held_out >= 1  # the seeded split holds one out: the count below is a real check
    assert meta["test_correct"] == 10 - noisy_held_out
    assert meta["test_accuracy"] == pytest.approx((10 - noisy_held_out) / 10)
    assert meta["test_ci"] == pytest.approx(list(wilson_interval(10 - noisy_held_out, 10)))
    assert meta["confusion"]["low"]["high"] == noisy_held_out and meta["confusion"]["high"]["low"] == 0
    assert meta["best_params"]["kernel"] in ("linear", "rbf") and meta["best_params"]["C"] in (
        0.1,
        1,
        10,
        100,
    )
    assert f"({10 - noisy_held_out}/10, Wilson 95%" in said
    assert {p.name for p in (tmp_path / "clf").iterdir()} == {"svm.pkl", "quality.json"}

    instances = tmp_path / "instances.jsonl"
    write_instances(instances, [
        Instance("new-careful", "Q?", "R.", (Answer("m", "t"),), Evaluation("t", careful(3), (5,))),
        Instance("new-sloppy", "Q?", "R.", (Answer("m", "t"),), Evaluation("t", sloppy(3), None)),
        Instance("untaught", "Q?", "R.", (Answer("m", "t"),)),
    ])  # fmt: skip
    said = invoke(
        "build", "quality", "apply", tmp_path / "clf", instances, "--out", tmp_path / "labelled.jsonl"
    )
    assert "2 of 3 instances labelled (1 high, 1 low); 1 without an evaluation" in said
    careful_one, sloppy_one, untaught = read_instances(tmp_path / "labelled.jsonl")
    assert careful_one.quality == "high" and careful_one.quality_score is not None
    assert careful_one.quality_score > 0
    assert sloppy_one.quality == "low" and sloppy_one.quality_score is not None
    assert sloppy_one.quality_score < 0
    assert untaught.quality is None and untaught.quality_score is None


# --- training: a wiring test on a tiny random model, not a judge ----------------------------

TEMPLATE = (
    "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}<|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}"
)


def tiny_model(folder: Path, *, chat_template: bool = True) -> Path:
    """A 2-layer, 64-wide Llama with random weights and a byte-level BPE trained here: no download."""
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    bpe = Tokenizer(models.BPE(unk_token="<unk>"))
    bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    bpe.decoder = decoders.ByteLevel()
    specials = ["<unk>", "<pad>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<|end|>"]
    bpe.train_from_iterator(
        [careful(i) + sloppy(i) for i in range(10)],
        trainers.BpeTrainer(vocab_size=400, special_tokens=specials,
                            initial_alphabet=pre_tokenizers.ByteLevel.alphabet()),
    )  # fmt: skip
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=bpe, unk_token="<unk>", pad_token="<pad>", bos_token="<s>", eos_token="</s>"
    )
    if chat_template:
        tokenizer.chat_template = TEMPLATE
    tokenizer.save_pretrained(folder)
    config = LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=4096,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
    )  # fmt: skip
    torch.manual_seed(0)
    LlamaForCausalLM(config).save_pretrained(folder)
    return folder


def digest_of(folder: Path) -> str:
    from transformers import AutoModelForCausalLM

    from clinieval.benchmarks.automedeval.train import weights_digest

    return weights_digest(AutoModelForCausalLM.from_pretrained(folder))


def token_counts(model: Path, stage: Path) -> tuple[int, int]:
    """(all tokens, evaluation tokens) of a stage file, by hand: the chat template rendered with
    and without the assistant's reply, tokenized."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(model)

    def count(messages: list[dict[str, str]], prompt: bool) -> int:
        text = tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=prompt)
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    rows = [json.loads(line)["messages"] for line in stage.read_text().splitlines()]
    full = [count(m, False) for m in rows]
    return sum(full), sum(f - count(m[:-1], True) for f, m in zip(full, rows, strict=True))


def taught(i: int, quality: Quality | None) -> Instance:
    answers = (Answer("a", f"Answer {i}: take labetalol."), Answer("b", "Rest."), Answer("c", "Nothing."))
    return Instance(f"q{i}", f"Question {i}? Which drug for a hypertensive emergency?", "Labetalol.", answers,
                    Evaluation("teacher", careful(i), (5, 3, 2)), quality=quality)  # fmt: skip


def test_train_wiring_on_a_tiny_random_model_not_a_judge(tmp_path: Path) -> None:
    """Three curriculum stages, two steps each: each stage starts from the previous stage's
    weights, checkpoints and train.json are written, and a rerun reuses what is finished."""
    from clinieval.benchmarks.automedeval.build.curriculum import write_curriculum

    base = tiny_model(tmp_path / "base")
    stages = tmp_path / "stages"
    instances = [taught(0, "low"), taught(1, "low"), taught(2, None), taught(3, "high"), taught(4, "high")]
    write_curriculum(instances, stages, "hf", "test")
    out = tmp_path / "judge"
    args = ("train", stages, "--model", base, "--out", out, "--lr", "1e-3", "--max-steps", "2",
            "--batch-size", "1", "--effective-batch", "1", "--no-progress")  # fmt: skip
    said = invoke(*args)
    report = json.loads((out / "train.json").read_text())
    s1, s2, s3 = report["stages"]
    assert [s["examples"] for s in (s1, s2, s3)] == [2, 1, 2] and all(s["steps"] == 2 for s in (s1, s2, s3))
    assert all(math.isfinite(s["final_loss"]) and s["final_loss"] > 0 for s in (s1, s2, s3))
    assert report["final"] == str(out / "stage3") and not any(s["reused"] for s in (s1, s2, s3))
    for s in (s1, s2, s3):
        assert {"config.json", "model.safetensors", "tokenizer.json", "stage.json"} <= {
            p.name for p in Path(s["checkpoint"]).iterdir()
        }
    # the weight chain: base -> stage 1 -> stage 2 -> stage 3, each trained (changed) and saved as trained
    assert s1["start_sha256"] == digest_of(base) != s1["end_sha256"]
    assert s2["start_sha256"] == digest_of(out / "stage1") == s1["end_sha256"] != s2["end_sha256"]
    assert s3["start_sha256"] == digest_of(out / "stage2") == s2["end_sha256"] != s3["end_sha256"]
    assert digest_of(out / "stage3") == s3["end_sha256"]
    assert "stage1: 2 examples, 2 steps, final loss" in said
    # the loss is on the evaluation's tokens only: the prompt's are masked
    assert (s1["tokens"], s1["trained_tokens"]) == token_counts(base, stages / "stage1.hf.jsonl")
    assert s1["dropped"] == 0

    # a rerun reuses every finished stage: nothing is trained or written again
    written = (out / "stage3" / "model.safetensors").stat().st_mtime_ns
    assert "stage3: 2 examples, 2 steps, final loss" in invoke(*args).splitlines()[2].split(";")[0]
    again = json.loads((out / "train.json").read_text())["stages"]
    assert [s["reused"] for s in again] == [True, True, True]
    assert (out / "stage3" / "model.safetensors").stat().st_mtime_ns == written
    # stage 3's data changes: stages 1-2 reused, stage 3 retrained from stage 2
    write_curriculum(instances[:4], stages, "hf", "test")
    invoke(*args)
    changed = json.loads((out / "train.json").read_text())["stages"]
    assert [s["reused"] for s in changed] == [True, True, False] and changed[2]["examples"] == 1
    assert changed[2]["start_sha256"] == s2["end_sha256"]
    # stage 3 emptied: skipped, said, its old checkpoint removed; the final model is stage 2's
    write_curriculum(instances[:3], stages, "hf", "test")
    assert "stage3: skipped (no examples)" in invoke(*args)
    assert not (out / "stage3").exists()
    assert json.loads((out / "train.json").read_text())["final"] == str(out / "stage2")


def test_the_papers_batch_is_the_default_on_any_number_of_devices() -> None:
    """The paper's script: 2 per device x 8 GPUs x 8 accumulation steps = 128 per update. On one CPU
    the same effective batch is 2 x 64 (the default was 1 x 1 before)."""
    from clinieval.benchmarks.automedeval.train import TrainPlan

    one = TrainPlan().settings(devices=1)
    assert (one["batch_size"], one["gradient_accumulation"], one["effective_batch"]) == (2, 64, 128)
    eight = TrainPlan().settings(devices=8)
    assert (eight["gradient_accumulation"], eight["effective_batch"]) == (8, 128)
    uneven = TrainPlan(batch_size=3).settings(devices=1)  # 128 / 3 rounds up, and says so
    assert (uneven["gradient_accumulation"], uneven["effective_batch"]) == (43, 129)
    given = TrainPlan(gradient_accumulation=4).settings(devices=1)
    assert given["effective_batch"] == 8


def test_train_refuses_bad_stages_and_models(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.train import TrainPlan, train_stages

    base = tiny_model(tmp_path / "base")
    stages = tmp_path / "stages"
    stages.mkdir()
    with pytest.raises(UserError, match=r"no training examples; expected stage1\.hf\.jsonl"):
        train_stages(stages, base, tmp_path / "out")
    good = {"messages": [{"role": "user", "content": "q"}, {"role": "assistant", "content": "a"}]}
    bad = {"messages": [{"role": "user", "content": "q"}, {"role": "bot", "content": "a"}]}
    (stages / "stage1.hf.jsonl").write_text(json.dumps(good) + "\n")
    (stages / "stage3.hf.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(UserError, match=r"stage3.hf.jsonl:2: field 'messages\[1\]'.role is 'bot'"):
        train_stages(stages, base, tmp_path / "out", TrainPlan(max_steps=1, progress=False))
    assert not (tmp_path / "out").exists()  # refused before stage 1 was trained
    (stages / "stage3.hf.jsonl").write_text(json.dumps({"messages": good["messages"][:1] * 2}) + "\n")
    with pytest.raises(UserError, match=r":1: field 'messages' should end with an assistant message"):
        train_stages(stages, base, tmp_path / "out")
    (stages / "stage3.hf.jsonl").unlink()
    (stages / "stage1.hf.jsonl").write_text(json.dumps({"messages": [
        {"role": "system", "content": careful(0)}, *good["messages"]]}) + "\n")  # fmt: skip
    with pytest.raises(UserError, match="stage1: every example's prompt alone fills --max-length 16"):
        train_stages(stages, base, tmp_path / "out", TrainPlan(max_length=16, progress=False))
    assert not (tmp_path / "out" / "stage1").exists()
    plain = tiny_model(tmp_path / "plain", chat_template=False)
    with pytest.raises(UserError, match="the tokenizer has no chat template"):
        train_stages(stages, plain, tmp_path / "out")
    with pytest.raises(UserError, match="not a model folder"):
        train_stages(stages, tmp_path / "stages", tmp_path / "out")


# --- (g) knowledge introspection ------------------------------------------------------------


def test_suggestions_and_reviews_are_read() -> None:
    assert read_suggestion("Sure.\nSuggestion:  Labetalol is\nfirst line.") == "Labetalol is first line."
    assert read_suggestion("Labetalol is first line.") == "Labetalol is first line."
    assert read_review("ACCEPT. Supported by the reference.") == (True, "Supported by the reference.")
    assert read_review("**Rejected**: wrong dose") == (False, "wrong dose")
    assert read_review("I think it is fine") == (False, "unclear review: I think it is fine")
    one = with_suggestion(taught(0, None), "S")
    assert with_suggestion(one, "S") is one and with_suggestion(one, "T").suggestions == ("S", "T")


def scores(*values: int) -> str:
    return " ".join(f"Doctor {n}: {v} points." for n, v in enumerate(values, 1))


JUDGE_SAYS = {
    "Question 1?": "Analyze: Step 1: as the teacher.\nScore: " + scores(5, 3, 1),  # right
    "Question 2?": "Analyze: Step 1: reversed.\nScore: " + scores(1, 3, 5),  # wrong
    "Question 3?": "Analyze: Step 1: no tie.\nScore: " + scores(4, 3, 2),  # wrong: the teacher tied 1 and 2
    "Question 4?": "Analyze: I cannot decide.",  # unparsed: wrong
    "Question 5?": "Analyze: unsure.\n[Question] labetalol dose",  # a lookup, then right
}
TEACHER = {1: (5, 3, 1), 2: (5, 3, 1), 3: (4, 4, 2), 4: (2, 5, 3), 5: (3, 3, 3)}
ACCEPTED = {"S2-1", "S3-2"}


def judge_reply(prompt: str) -> str:
    if prompt.startswith("According to the Reference"):
        return "Analyze: with the knowledge.\nScore: " + scores(3, 3, 3)
    return next(
        reply for question, reply in JUDGE_SAYS.items() if f"[Patient Question]\n{question}" in prompt
    )


def teacher_reply(prompt: str) -> str:
    """Round 1 names the case's first suggestion; a revision answers the reviewer's reason."""
    revise = re.search(r"Reason: (S\d)-(\d) is not supported", prompt)
    if revise:
        return f"Suggestion: {revise.group(1)}-{int(revise.group(2)) + 1} Labetalol is first line."
    case = re.search(r"\[Patient Question\]\nQuestion (\d)\?", prompt)
    assert case is not None and prompt.endswith("Write the revision suggestion.")
    return f"Here is my advice.\nSuggestion: S{case.group(1)}-1 Labetalol is first line."


def reviewer_reply(prompt: str) -> str:
    found = re.search(r"\[Suggestion\]\n(S\d-\d)", prompt)
    assert found is not None
    return (
        "ACCEPT. It is right." if found.group(1) in ACCEPTED else f"REJECT: {found.group(1)} is not supported"
    )


def test_introspection_rounds_deadlocks_and_the_next_iteration(tmp_path: Path) -> None:
    """Hand-counted: 5 instances in the training set (a 6th has no parsed evaluation); the judge is
    right on 1 and 5 (5 after one lookup), wrong on 2 (reversed), 3 (a tie broken) and 4
    (unparsed). Suggestions: 2 accepted in round 1, 3 rejected once then accepted in round 2, 4
    rejected three times, a deadlock. Judge calls 6, teacher 1 + 2 + 3 = 6, reviewer 6."""
    from clinieval.benchmarks.automedeval.knowledge import build_kb
    from tests.fault_server import FaultServer

    docs = tmp_path / "manual"
    docs.mkdir()
    for name, text in (
        ("bp", "Labetalol is first line in a hypertensive emergency, 20 mg IV."),
        ("asthma", "Salbutamol relieves an asthma attack."),
        ("gout", "Allopurinol prevents gout."),
    ):
        (docs / f"{name}.txt").write_text(text, encoding="utf-8")  # BM25 needs 3 documents for a positive idf
    build_kb([docs], tmp_path / "kb")
    instances = [taught(i, "low" if i < 3 else "high") for i in range(1, 6)]
    instances = [Instance(x.id, x.question, x.reference, x.responses,
                          Evaluation("teacher", f"Analyze: ok.\nScore: {scores(*TEACHER[i])}", TEACHER[i]),
                          quality=x.quality, suggestions=("Earlier.",) if i == 1 else ())
                 for i, x in enumerate(instances, 1)]  # fmt: skip
    instances.append(Instance("q6", "Question 6?", "R.", instances[0].responses, Evaluation("t", "?", None)))
    path = tmp_path / "instances.jsonl"
    write_instances(path, instances)
    out = tmp_path / "iter1"
    with (
        FaultServer(responder=judge_reply) as judge,
        FaultServer(responder=teacher_reply) as teacher,
        FaultServer(responder=reviewer_reply) as reviewer,
    ):
        args = ["build", "introspect", path, "--judge", f"openai:{judge.url}@fault", "--teacher",
                f"openai:{teacher.url}@fault", "--reviewer", f"openai:{reviewer.url}@fault",
                "--kb", tmp_path / "kb", "--out", out, "--format", "hf", "--no-progress"]  # fmt: skip
        said = invoke(*args)
        asked = (len(judge.log.received), len(teacher.log.received), len(reviewer.log.received))
        summary = json.loads((out / "introspect.json").read_text())
        next_instances = read_instances(out / "next" / "instances.jsonl")
        # the rerun asks nothing: every call comes from the cache
        invoke(*args)
        assert (len(judge.log.received), len(teacher.log.received), len(reviewer.log.received)) == asked
        again = json.loads((out / "introspect.json").read_text())["calls"]
        # a physician breaks the deadlock in deadlocks.jsonl; the rerun reads it back, asking nothing
        [row] = [json.loads(x) for x in (out / "deadlocks.jsonl").read_text().splitlines()]
        assert (row["id"], row["decision"], row["suggestion"]) == (
            "q4",
            None,
            "S4-3 Labetalol is first line.",
        )
        row.update(decision="accept", suggestion="Doctor 2 is right: labetalol, not rest.")
        (out / "deadlocks.jsonl").write_text(json.dumps(row) + "\n")
        invoke(*args, "--decisions", out / "deadlocks.jsonl")
        assert (len(judge.log.received), len(teacher.log.received), len(reviewer.log.received)) == asked
        first_teacher = teacher.log.bodies[0]["messages"]
        revision = next(b["messages"] for b in teacher.log.bodies if len(b["messages"]) == 4)
    assert asked == (6, 6, 6)
    assert {k: summary[k] for k in ("training_set", "judged", "wrong", "right", "unparsed", "accepted",
                                    "deadlocks", "awaiting_physician", "updated_instances")} == {
        "training_set": 5, "judged": 5, "wrong": 3, "right": 2, "unparsed": 1, "accepted": 2,
        "deadlocks": 1, "awaiting_physician": 1, "updated_instances": 2}  # fmt: skip
    assert summary["rounds"] == {"1": 1, "2": 1, "3": 0}
    assert {r: summary["calls"][r]["requests"] for r in ("judge", "teacher", "reviewer")} == {
        "judge": 6, "teacher": 6, "reviewer": 6}  # fmt: skip
    assert {r: (again[r]["requests"], again[r]["cache_hits"]) for r in again} == {
        r: (0, 6) for r in ("judge", "teacher", "reviewer")}  # fmt: skip
    assert "5 judged, 3 wrong; 2 suggestions accepted, 1 deadlocks" in said
    # the teacher saw the retrieved knowledge and both evaluations; a revision saw the reason
    ask = first_teacher[-1]["content"]
    assert "[Retrieved Knowledge]\nLabetalol is first line in a hypertensive emergency, 20 mg IV." in ask
    assert "[Judge's Evaluation]\n" in ask and "[Teacher's Evaluation]\nAnalyze: ok." in ask
    assert revision[2]["role"] == "assistant"
    assert re.search(r"Reason: S\d-1 is not supported", revision[3]["content"])

    after = {x.id: x for x in next_instances}
    assert after["q1"].suggestions == ("Earlier.",)  # right: unchanged
    assert after["q2"].suggestions == ("S2-1 Labetalol is first line.",)
    assert after["q3"].suggestions == ("S3-2 Labetalol is first line.",)
    assert after["q4"].suggestions == () and after["q6"] == instances[5]
    cases = {c["id"]: c for c in map(json.loads, (out / "cases.jsonl").read_text().splitlines())}
    assert [r["accepted"] for r in cases["q3"]["rounds"]] == [False, True]
    assert cases["q4"]["outcome"] == "deadlock" and len(cases["q4"]["rounds"]) == 3
    judged = {j["id"]: j for j in map(json.loads, (out / "judged.jsonl").read_text().splitlines())}
    assert judged["q5"]["lookups"][0]["query"] == "labetalol dose" and judged["q5"]["wrong"] is False
    assert set(judged) == {"q1", "q2", "q3", "q4", "q5"}
    # the next iteration's curriculum: q3 (high, stage 3) carries its revision before the scores
    stage3 = [json.loads(x) for x in (out / "next" / "stage3.hf.jsonl").read_text().splitlines()]
    reply = next(s["messages"][-1]["content"] for s in stage3 if s["id"] == "q3")
    assert reply == f"Analyze: ok.\nRevision: S3-2 Labetalol is first line.\nScore: {scores(4, 4, 2)}"

    # after the physician's decision: q4 takes the physician's suggestion, the file keeps the decision
    final = json.loads((out / "introspect.json").read_text())
    assert (final["physician_accepted"], final["awaiting_physician"], final["updated_instances"]) == (1, 0, 3)
    assert sum(final["calls"][r]["requests"] for r in final["calls"]) == 0
    decided = {x.id: x for x in read_instances(out / "next" / "instances.jsonl")}
    assert decided["q4"].suggestions == ("Doctor 2 is right: labetalol, not rest.",)
    [kept] = [json.loads(x) for x in (out / "deadlocks.jsonl").read_text().splitlines()]
    assert kept["decision"] == "accept" and kept["suggestion"] == row["suggestion"]


def test_introspection_needs_a_training_set(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.build.introspect import IntrospectPlan
    from clinieval.benchmarks.automedeval.build.introspect import introspect as run
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase, build_kb

    docs = tmp_path / "d.txt"
    docs.write_text("Some knowledge.", encoding="utf-8")
    build_kb([docs], tmp_path / "kb")
    untaught = [Instance("q", "Q?", "R.", (Answer("a", "x"),))]
    nobody: Any = None  # refused before any model is needed
    plan = IntrospectPlan(KnowledgeBase(tmp_path / "kb"))
    with pytest.raises(UserError, match="no instance has a parsed teacher evaluation"):
        asyncio.run(run(untaught, nobody, nobody, nobody, tmp_path / "o", plan))
