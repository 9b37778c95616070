"""EHRNoteQA: loading and preprocessing, the prompts against the spec, the three scoring modes,
verdict parsing, and the analysis on hand-built arms with hand-computed values."""

from __future__ import annotations

import csv
import dataclasses
import gzip
import json
import re
from pathlib import Path

import pytest

from clinieval.benchmarks.ehrnoteqa.analysis import (
    ArmAnswers,
    Item,
    analyze_arms,
    item_verdict,
    repeat_scores,
)
from clinieval.benchmarks.ehrnoteqa.data import load_inline, load_physionet
from clinieval.benchmarks.ehrnoteqa.prompts import FREE_PROMPT, MC_PROMPT
from clinieval.benchmarks.ehrnoteqa.report import render_markdown
from clinieval.benchmarks.ehrnoteqa.scoring import (
    CHOICE_JUDGE_PROMPT,
    ChoiceJudgeRubric,
    FreeTextJudgeRubric,
    LetterExtraction,
    OptionLoglik,
    extract_letter,
    option_continuations,
)
from clinieval.context.tokenizers import tokenizer_from_spec
from clinieval.errors import UserError
from clinieval.judge.rubric import VerdictParseError
from clinieval.records.sample_record import SampleRecord
from clinieval.types import LoglikOutput, Message, ModelOutput, Sample
from tests.conftest import need_shared

HEADER = ["note_id", "subject_id", "hadm_id", "note_type", "note_seq", "charttime", "storetime", "text"]
CHOICES = {
    "choice_A": "Aspirin",
    "choice_B": "Metoprolol 25 mg",
    "choice_C": "Heparin drip",
    "choice_D": "Warfarin",
    "choice_E": "Aspirin and clopidogrel",
}


def _write_notes(path: Path, rows: list[tuple[str, str, str, str]]) -> None:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "wt", encoding="utf-8", newline="") as f:  # type: ignore[operator]
        w = csv.writer(f)
        w.writerow(HEADER)
        for i, (subject, hadm, charttime, text) in enumerate(rows):
            w.writerow([f"{subject}-DS-{i}", subject, hadm, "DS", i, charttime, charttime, text])


def _write_qa(path: Path, items: list[dict[str, object]]) -> None:
    path.write_text("".join(json.dumps(i) + "\n" for i in items), encoding="utf-8")


def _qa(pid: str, answer: str = "B", **extra: object) -> dict[str, object]:
    return {
        "patient_id": pid,
        "num_notes": extra.pop("num_notes", 1),
        "question": f"Q about {pid}?",
        **CHOICES,
        "answer": answer,
        **extra,
    }


@pytest.fixture()
def release(tmp_path: Path) -> tuple[Path, Path]:
    notes = tmp_path / "discharge.csv.gz"
    _write_notes(
        notes,
        [
            ("1", "104", "2180-09-01 10:00:00", "fourth"),
            ("1", "102", "2180-06-01 10:00:00", "second  \n\n   visit"),
            ("1", "101", "2180-05-07 00:00:00", " Name:  ___\n\n Sex:   F \n"),
            ("1", "103", "2180-07-01 10:00:00", "third\t\tnote"),
            ("2", "201", "2181-01-01 00:00:00", "alpha " * 4000),
            ("3", "301", "2182-01-01 00:00:00", "alpha " * 8000),
            ("9", "901", "2182-01-01 00:00:00", "someone else"),
        ],
    )
    qa = tmp_path / "qa.jsonl"
    _write_qa(
        qa, [_qa("1", num_notes=3, category="Treatment"), _qa("2", "E"), _qa("3"), _qa("1", "A", num_notes=2)]
    )
    return qa, notes


def test_release_preprocessing_order_cap_headers_and_levels(release: tuple[Path, Path]) -> None:
    qa, notes = release
    loaded = load_physionet(qa, notes)
    assert [s.id for s in loaded.samples] == ["1-1", "2-2", "1-4"]
    first = loaded.samples[0]
    header = "Patient ID : 1\nAdmission ID : {}\nChartdate : {}\n"
    # "second  \n\n   visit": the public code's two regexes leave "\n   " for the second one,
    # which turns it into a space (its quirk, kept)
    assert first.context == (
        f"[note 1 start]\n{header.format('101', '2180-05-07')}Name: ___\nSex: F\n[note 1 end]\n\n"
        f"[note 2 start]\n{header.format('102', '2180-06-01')}second visit\n[note 2 end]\n\n"
        f"[note 3 start]\n{header.format('103', '2180-07-01')}third note\n[note 3 end]"
    )
    assert first.metadata["num_notes"] == 3
    assert first.metadata["category"] == "Treatment"
    assert first.metadata["answer"] == "B" and first.target == "Metoprolol 25 mg"
    count = tokenizer_from_spec("tiktoken:cl100k_base").count
    assert first.metadata["note_tokens"] == count(first.context)
    assert first.metadata["level"] == 1
    long = loaded.samples[1]
    assert 3_500 < long.metadata["note_tokens"] <= 7_500 and long.metadata["level"] == 2
    assert long.target == "Aspirin and clopidogrel"
    assert loaded.excluded == {"longer_than_level_2": 1}
    # the fourth question says num_notes 2 while three notes are found: kept, and warned about
    assert len(loaded.warnings) == 1 and "num_notes" in loaded.warnings[0]
    only_2 = load_physionet(qa, notes, levels=[2])
    assert [s.id for s in only_2.samples] == ["2-2"]
    assert only_2.excluded["level_1_not_selected"] == 2


def test_release_bad_input_names_file_and_field(release: tuple[Path, Path], tmp_path: Path) -> None:
    qa, notes = release
    bad = tmp_path / "bad.jsonl"
    _write_qa(bad, [_qa("1", "F")])
    with pytest.raises(UserError, match=r"bad\.jsonl:1: field 'answer' should be a letter A-E"):
        load_physionet(bad, notes)
    _write_qa(bad, [_qa("77")])
    with pytest.raises(UserError, match=r"bad\.jsonl:1: patient 77 has no note"):
        load_physionet(bad, notes)
    item = _qa("1")
    del item["choice_C"]
    _write_qa(bad, [item])
    with pytest.raises(UserError, match=r"bad\.jsonl:1: missing field 'choice_C'"):
        load_physionet(bad, notes)
    wrong = tmp_path / "radiology.csv"
    wrong.write_text("note_id,subject_id,text\n1,1,x\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"radiology\.csv: missing column\(s\) hadm_id, charttime"):
        load_physionet(qa, wrong)
    with pytest.raises(UserError, match="level 3 does not exist"):
        load_physionet(qa, notes, levels=[3])


def test_inline_notes_plain_and_structured(tmp_path: Path) -> None:
    path = tmp_path / "inline.jsonl"
    _write_qa(
        path,
        [
            {
                "id": "q1",
                "question": "Which?",
                "choices": list(CHOICES.values()),
                "answer": "Warfarin",
                "notes": ["first  note\n\n here", "second"],
            },
            {
                "id": "q2",
                "patient_id": "5",
                **CHOICES,
                "answer": "c",
                "question": "Which?",
                "notes": [
                    {"text": "later", "hadm_id": "2", "charttime": "2100-02-01"},
                    {"text": "earlier", "hadm_id": "1", "charttime": "2100-01-01"},
                ],
            },
        ],
    )
    loaded = load_inline(path)
    q1, q2 = loaded.samples
    assert q1.metadata["answer"] == "D" and q1.metadata["num_notes"] == 2
    assert (
        q1.context == "[note 1 start]\nfirst note\nhere\n[note 1 end]\n\n[note 2 start]\nsecond\n[note 2 end]"
    )
    assert q2.metadata["answer"] == "C"
    assert q2.context.index("earlier") < q2.context.index("later")
    assert q2.context.startswith("[note 1 start]\nPatient ID : 5\nAdmission ID : 1\nChartdate : 2100-01-01\n")
    _write_qa(path, [{"id": "x", "question": "Q", **CHOICES, "answer": "A", "notes": ["a", {"text": "b"}]}])
    with pytest.raises(UserError, match="mixes plain text and note objects"):
        load_inline(path)
    _write_qa(path, [{"id": "x", "question": "Q", **CHOICES, "answer": "A", "notes": ["a"]}] * 2)
    with pytest.raises(UserError, match="question id 'x' appears 2 times"):
        load_inline(path)


# --------------------------------------------------------------------------------------------
# Prompts, exactly as the spec prints them


def _spec_blocks() -> list[str]:
    text = (need_shared("..") / "spec" / "ehrnoteqa.md").read_text(encoding="utf-8")
    return re.findall(r"```\n(.*?)\n```", text, re.DOTALL)


def _placeholder_sample() -> Sample:
    choices = tuple(f"{{choice_{x}}}" for x in "ABCDE")
    return Sample(id="x", input="{question}", context="{notes}", choices=choices)


def test_prompts_equal_the_spec() -> None:
    blocks = _spec_blocks()
    [mc] = MC_PROMPT.messages(_placeholder_sample(), "{notes}")
    assert mc == Message("user", blocks[0])
    [free] = FREE_PROMPT.messages(_placeholder_sample(), "{notes}")
    assert free.content == re.sub(r"Choices :\n(?:[A-E]\. \{choice_[A-E]\}\n)+", "", blocks[0])
    assert blocks[1] == CHOICE_JUDGE_PROMPT


def _record(text: str = "B", *, error: bool = False, logliks: list[float] | None = None) -> SampleRecord:
    sample = Sample(
        id="s1",
        input="Which drug?",
        context="[note 1 start]\nnotes\n[note 1 end]",
        choices=tuple(CHOICES.values()),
        target="Metoprolol 25 mg",
        metadata={"answer": "B"},
    )
    out = ModelOutput.failure("timeout", "slow") if error else ModelOutput(text=text)  # type: ignore[arg-type]
    ll = None if logliks is None else LoglikOutput(logliks=logliks, token_counts=[1] * len(logliks))
    return SampleRecord(sample=sample, repeat=0, messages=[], output=out, loglik=ll)


def test_judge_prompt_is_filled_with_output_choices_and_answer() -> None:
    [m] = ChoiceJudgeRubric().messages(_record("  I think Metoprolol.  "))
    assert "Model Output: I think Metoprolol. Answer Choices: A. Aspirin\nB. Metoprolol 25 mg\n" in m.content
    assert "E. Aspirin and clopidogrel Correct Answer: B. Metoprolol 25 mg With the given" in m.content
    [f] = FreeTextJudgeRubric().messages(_record("Metoprolol"))
    assert "Discharge Summary :\n[note 1 start]\nnotes\n[note 1 end]" in f.content
    assert "Correct Answer : Metoprolol 25 mg\nModel Answer : Metoprolol" in f.content


# --------------------------------------------------------------------------------------------
# Verdict parsing on real-looking judge replies

CHOICE_REPLIES = [
    ("yes", 1.0),
    ("Yes.", 1.0),
    ("YES", 1.0),
    ("**Yes**", 1.0),
    ("no", 0.0),
    ("No.", 0.0),
    ("No, the model output selects option C.", 0.0),
    ("Answer: no", 0.0),
    ("The output names the same drug.\nyes", 1.0),
    ('"yes"', 1.0),
    ("", None),
    ("   ", None),
    ("I cannot determine this.", None),
    ("Verdict: yes\nOn a second reading the dose differs.\nVerdict: no", 0.0),  # the last verdict: corrected
    ("Verdict: yes\nVerdict: no", None),  # back to back, nothing between: an unexplained conflict
    ("The model is partially correct", None),
]


@pytest.mark.parametrize(("reply", "expected"), CHOICE_REPLIES)
def test_choice_judge_parsing(reply: str, expected: float | None) -> None:
    rubric = ChoiceJudgeRubric()
    if expected is None:
        with pytest.raises(VerdictParseError):
            rubric.parse(reply)
    else:
        assert rubric.parse(reply).values == {"correct": expected}


FREE_REPLIES = [
    (
        "Score: 1\nReasoning: The answer names metoprolol, as the notes do.",
        1.0,
        "The answer names metoprolol, as the notes do.",
    ),
    ("Score: 0\nReasoning: It claims the notes do not say.", 0.0, "It claims the notes do not say."),
    ("score:1", 1.0, None),
    ("**Score:** 0\n**Reasoning:** wrong drug", 0.0, "wrong drug"),
    ("Score: 1/1\nReasoning: ok", 1.0, "ok"),
    ("Score: 2\nReasoning: very good", None, None),
    ("Score: correct", None, None),
    ("yes", None, None),
    ("", None, None),
    ("Score: 0.5", None, None),
]


@pytest.mark.parametrize(("reply", "expected", "why"), FREE_REPLIES)
def test_free_text_judge_parsing(reply: str, expected: float | None, why: str | None) -> None:
    rubric = FreeTextJudgeRubric()
    if expected is None:
        with pytest.raises(VerdictParseError):
            rubric.parse(reply)
    else:
        verdict = rubric.parse(reply)
        assert verdict.values == {"correct": expected}
        assert verdict.rationale == why


# --------------------------------------------------------------------------------------------
# Letter extraction and log-likelihood

OPTIONS = tuple(CHOICES.values())
LETTER_CASES = [
    ("B", "B"),
    ("B.", "B"),
    (" (C) Heparin drip", "C"),
    ("D) Warfarin", "D"),
    ("**E. Aspirin and clopidogrel**", "E"),
    ("[A]", "A"),
    ("The answer is B.", "B"),
    ("Answer: C", "C"),
    ("answer: (D)", "D"),
    ("I think the correct option is E because of the stent.", "E"),
    ("She was discharged on warfarin.", "D"),
    ("Aspirin and clopidogrel were started.", "E"),
    ("Aspirin or warfarin", None),
    ("A 65-year-old man with chest pain.", None),
    ("a", None),
    ("Based on the notes, the patient improved.", None),
    ("", None),
]


@pytest.mark.parametrize(("answer", "letter"), LETTER_CASES)
def test_letter_extraction(answer: str, letter: str | None) -> None:
    assert extract_letter(answer, OPTIONS)[0] == letter


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        ("A or C", "several_options"),
        (
            "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(OPTIONS)),
            "several_options",
        ),  # read as A before
        ("The answer is B. Wait, no: the answer is C, as on reflection the notes say.", None),  # B before
        ("The correct choice is B.\n\nAnswer: D", "conflict"),  # read as B before
        ("I'm sorry, I cannot determine this from the notes.", "refusal"),
    ],
)
def test_letter_extraction_follows_the_reading_policy(answer: str, reason: str | None) -> None:
    letter, how = extract_letter(answer, OPTIONS)
    assert (letter is None and how == reason) or (reason is None and letter == "C")


def test_an_answer_that_repeats_its_prompt_is_unscored_not_read() -> None:
    prompt = (
        "Notes: the patient was discharged on warfarin.\nQuestion: What was she discharged on?\n"
        + "\n".join(f"{chr(65 + i)}. {o}" for i, o in enumerate(OPTIONS))
    )
    sample = Sample(id="q", input="What was she discharged on?", choices=OPTIONS, metadata={"answer": "D"})
    record = SampleRecord(sample, 0, [Message("user", prompt)], output=ModelOutput(text=prompt))
    score = LetterExtraction().score(record)
    assert score.value is None and score.metadata["unscored"] == "echoed_prompt"


def test_letter_scorer_and_failures() -> None:
    scorer = LetterExtraction()
    assert scorer.score(_record("B. Metoprolol 25 mg")).value == 1.0
    wrong = scorer.score(_record("Heparin drip"))
    assert wrong.value == 0.0 and wrong.answer == "C"
    unread = scorer.score(_record("no idea"))
    assert unread.value == 0.0 and unread.metadata["unparsed"] is True
    failed = scorer.score(_record(error=True))
    assert failed.value is None and failed.metadata["error_kind"] == "timeout"


def test_option_loglik_letters_then_texts() -> None:
    rec = _record(logliks=[-3.0, -1.0, -2.0, -4.0, -5.0, -9.0, -8.0, -7.0, -6.0, -2.5])
    assert option_continuations(rec.sample)[:6] == (" A", " B", " C", " D", " E", " Aspirin")
    letter = OptionLoglik("letter").score(rec)
    assert (letter.value, letter.answer) == (1.0, "B")
    text = OptionLoglik("text").score(rec)
    assert (text.value, text.answer) == (0.0, "E")
    with pytest.raises(UserError, match="expected 10"):
        OptionLoglik("text").score(_record(logliks=[-1.0] * 5))


# --------------------------------------------------------------------------------------------
# The analysis on hand-built arms (values computed by hand in the comments)

ITEMS = {
    str(i): Item(str(i), 1 if i <= 2 else 2, i if i <= 3 else 3, "Treatment" if i % 2 else "Problem")
    for i in range(1, 5)
}


def _arm(
    label: str,
    verdicts: dict[str, list[float | None]],
    letters: dict[str, float | None],
    failed: dict[str, str] | None = None,
) -> ArmAnswers:
    return ArmAnswers(
        label=label,
        model=label,
        fmt="mc",
        path=None,
        items=dict(ITEMS),
        answer_failed=failed or {},
        modes={"letter_extract": letters},
        verdicts=verdicts,
        judge_repeats=5,
    )


def _arms() -> list[ArmAnswers]:
    a = _arm("A", {i: [1.0] * 5 for i in ITEMS}, {i: 1.0 for i in ITEMS})
    b = _arm(
        "B",
        {"1": [1.0] * 5, "2": [1.0, 1.0, 1.0, 0.0, 0.0], "3": [0.0] * 5, "4": []},
        {"1": 1.0, "2": 1.0, "3": 0.0, "4": None},
        failed={"4": "timeout"},
    )
    c = _arm(
        "C",
        {"1": [1.0] * 5, "2": [1.0] * 5, "3": [0.0, 0.0, 0.0, 1.0, 1.0], "4": [None, 0.0, 0.0, 0.0, 0.0]},
        {"1": 1.0, "2": 1.0, "3": 0.0, "4": 1.0},
    )
    return [a, b, c]


def test_repeat_scores_count_failed_answers_and_skip_missing_verdicts() -> None:
    a, b, c = _arms()
    assert repeat_scores(a) == [100.0] * 5
    assert repeat_scores(b) == [50.0, 50.0, 50.0, 25.0, 25.0]  # the failed answer counts as incorrect
    assert repeat_scores(c) == pytest.approx([200 / 3, 50.0, 50.0, 75.0, 75.0])  # repeat 1 over 3 verdicts
    assert item_verdict(b, "2") == 1.0 and item_verdict(c, "3") == 0.0 and item_verdict(b, "4") == 0.0


def test_analysis_hand_computed() -> None:
    result = analyze_arms(_arms())
    mc = result["formats"]["mc"]
    judge_b = mc["per_model"]["B"]["judge"]
    assert judge_b["mean"] == pytest.approx(40.0)
    assert judge_b["sd"] == pytest.approx(13.693, abs=1e-3)  # stdev(50, 50, 50, 25, 25)
    assert mc["per_model"]["C"]["judge"]["unscored_verdicts"] == 1
    # ranks per repeat (ties share the best): A 1 1 1 1 1; B 3 2 2 3 3 (mode 3); C 2 2 2 2 2
    st = mc["stability"]
    assert st["ranks"]["B"] == [3.0, 2.0, 2.0, 3.0, 3.0]
    assert st["gold_rank"] == {"A": 1.0, "B": 3.0, "C": 2.0}
    assert st["instability"] == {"A": 0.0, "B": 2.0, "C": 0.0} and st["total"] == 2.0
    # judge (majority) vs letters over 12 answers: 11 agree; kappa = (11/12 - 84/144) / (1 - 84/144) = 0.8
    [agree] = mc["agreement"]
    assert agree["n_answers"] == 12
    assert agree["percent_agreement"] == pytest.approx(100 * 11 / 12)
    assert agree["kappa"] == pytest.approx(0.8)
    assert mc["per_model"]["B"]["letter_extract"]["score"] == pytest.approx(50.0)
    # level 1 = items 1 and 2: B's judge repeats there are 100 100 100 50 50 -> 80
    assert mc["breakdowns"]["level"]["1"]["B"]["judge"] == pytest.approx(80.0)
    assert mc["breakdowns"]["level"]["2"]["C"]["letter_extract"] == pytest.approx(50.0)
    assert set(mc["breakdowns"]["category"]) == {"Treatment", "Problem"}
    md = render_markdown(result)
    assert "Total instability: **2**" in md and "40.0 ± 13.69" in md


def test_analysis_refuses_a_model_twice_in_one_format() -> None:
    a = _arms()[0]
    with pytest.raises(UserError, match="two runs of A in format mc"):
        analyze_arms([a, a])


def test_stability_undefined_with_one_model() -> None:
    result = analyze_arms(_arms()[:1])
    assert "undefined" in result["formats"]["mc"]["stability"]


def test_stability_takes_the_mode_met_first_as_ehrnoteqa_does() -> None:
    # Per repeat A scores 100, 100, 100, 100; B 0, 0, 100, 100; C 50 throughout. B ranks 3 3 1 1
    # and C 2 2 3 3: both have two modes, and the one met first (B 3, C 2) is the gold rank.
    a = _arm("A", {i: [1.0] * 4 for i in ITEMS}, {i: 1.0 for i in ITEMS})
    b = _arm("B", {i: [0.0, 0.0, 1.0, 1.0] for i in ITEMS}, {i: 1.0 for i in ITEMS})
    c = _arm("C", {i: [0.5, 0.5, 0.5, 0.5] for i in ITEMS}, {i: 1.0 for i in ITEMS})
    for arm in (a, b, c):
        arm.judge_repeats = 4
    st = analyze_arms([a, b, c])["formats"]["mc"]["stability"]
    assert st["ranks"]["B"] == [3.0, 3.0, 1.0, 1.0]  # ties share the best rank (A and B at 100)
    assert st["gold_rule"] == "first" and st["tied_modes"] == ["B", "C"]
    assert st["gold_rank"] == {"A": 1.0, "B": 3.0, "C": 2.0}
    assert st["instability"] == {"A": 0.0, "B": 4.0, "C": 2.0}


def test_question_cis_resample_a_patients_questions_together() -> None:
    from clinieval.analysis.uncertainty import bootstrap_ci, cluster_bootstrap_ci
    from clinieval.benchmarks.ehrnoteqa.analysis import judge_item_means

    a, b, c = _arms()
    result = analyze_arms([a, b, c])["formats"]["mc"]["per_model"]
    # no patient known: questions are resampled one by one
    letters_b = result["B"]["letter_extract"]
    assert letters_b["ci_resamples"] == "question"
    assert letters_b["ci"] == list(bootstrap_ci([100.0, 100.0, 0.0, 0.0]))  # item 4 failed: 0
    # the judge's CI is over per-question means of its repeats, not over repeats
    means = judge_item_means(c)
    assert means == {"1": 1.0, "2": 1.0, "3": 0.4, "4": 0.0}
    assert result["C"]["judge"]["ci"] == list(bootstrap_ci([100.0, 100.0, 40.0, 0.0]))
    # with patients known (questions 1-2 of one patient, 3-4 of another), whole patients are drawn
    patients = {"1": "p1", "2": "p1", "3": "p2", "4": "p2"}
    for arm in (a, b, c):
        arm.items = {i: dataclasses.replace(item, patient=patients[i]) for i, item in arm.items.items()}
    clustered = analyze_arms([a, b, c])["formats"]["mc"]["per_model"]["B"]["letter_extract"]
    assert clustered["ci_resamples"] == "patient"
    assert clustered["ci"] == list(cluster_bootstrap_ci([100.0, 100.0, 0.0, 0.0], ["p1", "p1", "p2", "p2"]))
    assert clustered["ci"] == [0.0, 100.0]  # two patients, all or nothing each
    md = render_markdown(analyze_arms([a, b, c]))
    assert "a patient's questions resampled together" in md and "[95% CI]" in md
    for arm in (a, b, c):
        arm.items = {i: dataclasses.replace(item, patient="p1") for i, item in arm.items.items()}
    one = analyze_arms([a, b, c])["formats"]["mc"]["per_model"]["B"]["letter_extract"]
    assert one["ci"] is None and one["ci_undefined"] == "every question is about one patient"
