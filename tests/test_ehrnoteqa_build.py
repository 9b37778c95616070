"""EHRNoteQA dataset building: the paper's two prompts, reply parsing, checks, the build over real
HTTP (and the embedded model), the clinician review export and its re-import."""

from __future__ import annotations

import csv
import json
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from typer.testing import CliRunner

from clinieval.benchmarks.ehrnoteqa.build.checks import check_item, failed_checks
from clinieval.benchmarks.ehrnoteqa.build.cli import app
from clinieval.benchmarks.ehrnoteqa.build.parsing import (
    ChoicesReply,
    QuestionReply,
    ReplyParseError,
    parse_choices_reply,
    parse_question_reply,
)
from clinieval.benchmarks.ehrnoteqa.build.pipeline import load_patients, read_patient_ids, sample_patient_ids
from clinieval.benchmarks.ehrnoteqa.build.prompts import (
    CHOICES_PROMPT,
    QUESTION_PROMPT,
    choices_messages,
    question_messages,
)
from clinieval.benchmarks.ehrnoteqa.build.review import REVIEW_COLUMNS
from clinieval.ehr.notes import DISCHARGE_HEADER
from clinieval.errors import UserError
from tests.conftest import REPO, missing
from tests.fault_server import FaultServer

SPEC = REPO.parent / "shared" / "spec" / "ehrnoteqa.md"


# ---------------------------------------------------------------------------------------------
# The prompts are the spec's, character for character


def spec_block(after: str) -> str:
    """The first fenced block after the line starting with ``after`` in the EHRNoteQA spec."""
    if not SPEC.is_file():
        missing(f"{SPEC} is missing: the shared spec sits beside the checkout")
    text = SPEC.read_text(encoding="utf-8")
    start = text.index(after)
    m = re.compile(r"```\n(.*?)\n```", re.S).search(text, start)
    assert m is not None
    return m.group(1)


def test_question_prompt_is_the_spec_text() -> None:
    assert spec_block("- Step 1 (question)") == QUESTION_PROMPT


def test_choices_prompt_is_the_spec_text() -> None:
    assert spec_block("- Step 2 (choices)") == CHOICES_PROMPT


def test_what_each_step_sends() -> None:
    notes = "[note 1 start]\nPatient ID : 1\nAdmission ID : 2\nChartdate : 2150-01-01\nx\n[note 1 end]"
    (m1,) = question_messages(notes)
    assert m1.role == "user" and m1.content == QUESTION_PROMPT + "\n\n" + notes
    (m2,) = choices_messages(notes, QuestionReply("Which drug?", "Aspirin", "per the note"))
    assert m2.content == (
        f"{CHOICES_PROMPT}\n\n{notes}\n\nDoctor's question :\n- Question : Which drug?\n"
        "- Answer : Aspirin\n- Reason : per the note"
    )
    (m3,) = choices_messages(notes, QuestionReply("Which drug?", "Aspirin"))
    assert m3.content.endswith("- Answer : Aspirin")


# ---------------------------------------------------------------------------------------------
# Parsing replies

Q = "What anticoagulant was started after the admission charted on 2150-03-02?"


@pytest.mark.parametrize(
    ("reply", "expected"),
    [
        (
            f"- Question : {Q}\n- Answer : Apixaban\n- Reason : As per the note charted on 2150-03-02, …",
            QuestionReply(Q, "Apixaban", "As per the note charted on 2150-03-02, …"),
        ),
        (  # the format line as the prompt writes it: all on one line
            f"- Question : {Q} - Answer : Apixaban 5 mg twice daily - Reason : new atrial fibrillation",
            QuestionReply(Q, "Apixaban 5 mg twice daily", "new atrial fibrillation"),
        ),
        (  # bold labels, no dashes, prose before, multi-line reason
            f"Here is a question based on the notes:\n\n**Question:** {Q}\n**Answer:** Apixaban\n"
            "**Reason:** Line one.\nLine two.",
            QuestionReply(Q, "Apixaban", "Line one.\nLine two."),
        ),
        (  # "a question:" in the preamble is not the item
            f"Here is a question:\n- Question : {Q}\n- Answer : Apixaban\n- Reason : r",
            QuestionReply(Q, "Apixaban", "r"),
        ),
        (  # any case, spaces, no reason
            f"QUESTION   :   {Q}\nanswer:Apixaban",
            QuestionReply(Q, "Apixaban", ""),
        ),
        (  # the template echoed first, then the real item
            "- Question : [Your Question] - Answer : [Your Answer] - Reason : [Explanation for your answer]\n"
            f"- Question : {Q} - Answer : Apixaban - Reason : r",
            QuestionReply(Q, "Apixaban", "r"),
        ),
        ("## Question\n**Question**: [What is X?]\n**Answer**: Y", QuestionReply("What is X?", "Y", "")),
    ],
)
def test_question_replies(reply: str, expected: QuestionReply) -> None:
    assert parse_question_reply(reply) == expected


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("", "empty"),
        ("   \n ", "empty"),
        ("I am sorry, I cannot help with that.", "no_question"),
        (f"Question: {Q}", "no_answer"),
        ("Question:\nAnswer: yes", "empty_question"),
        (f"Question: {Q}\nAnswer:\nReason: none", "empty_answer"),
        ("- Question : [Your Question] - Answer : [Your Answer]", "empty_question"),
    ],
)
def test_unreadable_question_replies(reply: str, code: str) -> None:
    with pytest.raises(ReplyParseError) as e:
        parse_question_reply(reply)
    assert e.value.code == code and str(e.value)


OPTS = {"A": "Warfarin", "B": "Apixaban", "C": "Heparin drip", "D": "Aspirin", "E": "Clopidogrel"}


@pytest.mark.parametrize(
    ("reply", "choices", "answer", "raw"),
    [
        (  # the prompt's own one-line format
            f"- Question: {Q} - Answer Choices: A: Warfarin B: Apixaban C: Heparin drip D: Aspirin "
            "E: Clopidogrel - Correct Answer: B - Reason: per the note",
            OPTS,
            "B",
            "B",
        ),
        (  # bold, options on separate lines with "A." labels, "(B)"
            f"**Question:** {Q}\n**Answer Choices:**\nA. Warfarin\nB. Apixaban\nC. Heparin drip\n"
            "D. Aspirin\nE. Clopidogrel\n**Correct Answer:** (B)\n**Reason:** per the note",
            OPTS,
            "B",
            "(B)",
        ),
        (  # "(A)" labels, no "Answer Choices" label, "B. text" answer
            f"Question: {Q}\n(A) Warfarin\n(B) Apixaban\n(C) Heparin drip\n(D) Aspirin\n(E) Clopidogrel\n"
            "Correct Answer: B. Apixaban\nReason: r",
            OPTS,
            "B",
            "B. Apixaban",
        ),
        (  # "A)" labels, dashes, lower-case answer letter
            f"- Question: {Q}\n- Answer Choices:\n  - A) Warfarin\n  - B) Apixaban\n  - C) Heparin drip\n"
            "  - D) Aspirin\n  - E) Clopidogrel\n- Correct Answer: b\n- Reason: r",
            OPTS,
            "B",
            "b",
        ),
        (  # an option holding the next label's letter: "Hepatitis B." stays whole
            f"Question: {Q} Answer Choices: A: Hepatitis B. B: Apixaban C: Vitamin K D: Aspirin "
            "E: Clopidogrel Correct Answer: Option B",
            {"A": "Hepatitis B.", "B": "Apixaban", "C": "Vitamin K", "D": "Aspirin", "E": "Clopidogrel"},
            "B",
            "Option B",
        ),
        (  # the answer given as an option's text
            f"Question: {Q}\nChoices:\nA: Warfarin\nB: Apixaban\nC: Heparin drip\nD: Aspirin\n"
            "E: Clopidogrel\nCorrect Answer: apixaban",
            OPTS,
            "B",
            "apixaban",
        ),
        (  # four options parse; the five_options check fails later
            f"Question: {Q}\nAnswer Choices: A: Warfarin B: Apixaban C: Heparin drip D: Aspirin\n"
            "Correct Answer: B",
            {k: v for k, v in OPTS.items() if k != "E"},
            "B",
            "B",
        ),
        (  # an unreadable answer is kept raw, not guessed
            f"Question: {Q}\nAnswer Choices: A: Warfarin B: Apixaban C: Heparin drip D: Aspirin "
            "E: Clopidogrel\nCorrect Answer: the anticoagulant",
            OPTS,
            None,
            "the anticoagulant",
        ),
    ],
)
def test_choices_replies(reply: str, choices: dict[str, str], answer: str | None, raw: str) -> None:
    parsed = parse_choices_reply(reply)
    assert parsed.question == Q
    assert parsed.choices == choices
    assert (parsed.answer, parsed.answer_raw) == (answer, raw)


def test_choices_reply_reason() -> None:
    parsed = parse_choices_reply(
        f"Question: {Q}\nA: a\nB: b\nC: c\nD: d\nE: e\nCorrect Answer: C\nExplanation: C is right.\nA is not."
    )
    assert parsed == ChoicesReply(
        Q, dict(zip("ABCDE", "abcde", strict=True)), "C", "C", "C is right.\nA is not."
    )


@pytest.mark.parametrize(
    ("reply", "code"),
    [
        ("", "empty"),
        ("Sure! Here are five options about the patient.", "no_question"),
        (f"Question: {Q}\nAnswer Choices: A: x B: y", "no_correct_answer"),
        (f"Question: {Q}\nAnswer Choices: none\nCorrect Answer: B", "no_options"),
        ("Question:\nAnswer Choices: A: x B: y C: z D: w E: v\nCorrect Answer: B", "empty_question"),
    ],
)
def test_unreadable_choices_replies(reply: str, code: str) -> None:
    with pytest.raises(ReplyParseError) as e:
        parse_choices_reply(reply)
    assert e.value.code == code


# ---------------------------------------------------------------------------------------------
# Checks


def test_a_good_item_passes_every_check() -> None:
    checks = check_item(OPTS, "B", question=Q, source_question=" " + Q.upper())
    assert failed_checks(checks) == [] and all(checks.values())


@pytest.mark.parametrize(
    ("choices", "answer", "failed"),
    [
        ({**OPTS, "D": "warfarin."}, "B", ["distinct_options"]),  # same after case/punctuation
        ({**OPTS, "D": "  Warfarin  "}, "B", ["distinct_options"]),
        ({**OPTS, "B": "Apixaban 5 mg twice daily"}, "B", ["answer_not_longest"]),  # strictly longest
        ({**OPTS, "B": "Heparin, IV"}, "B", []),  # as long as the longest (12): a tie passes
        (OPTS, "F", ["valid_answer"]),
        (OPTS, None, ["valid_answer"]),
        ({k: v for k, v in OPTS.items() if k != "E"}, "B", ["five_options"]),
        ({**OPTS, "F": "Enoxaparin"}, "B", ["five_options"]),
        ({**OPTS, "C": " "}, "B", ["five_options"]),
    ],
)
def test_checks(choices: dict[str, str], answer: str | None, failed: list[str]) -> None:
    assert failed_checks(check_item(choices, answer)) == failed


def test_question_unchanged_check() -> None:
    checks = check_item(OPTS, "B", question=Q.rstrip("?") + " in 2150?", source_question=Q)
    assert failed_checks(checks) == ["question_unchanged"]
    assert check_item(OPTS, "B")["question_unchanged"] is None  # no step 1 to compare with


# ---------------------------------------------------------------------------------------------
# Patients and notes

NOTES: list[tuple[str, str, str, str]] = [  # subject_id, hadm_id, charttime, text
    (
        "101",
        "2001",
        "2150-03-02 00:00:00",
        "Name:  ___\n\n Admission for  atrial fibrillation.\nStarted apixaban.",
    ),
    ("101", "2000", "2149-11-20 00:00:00", "Prior admission:   pneumonia.\n  Treated with ceftriaxone."),
    ("102", "2010", "2151-05-01 00:00:00", "Heart failure exacerbation. Diuresed with furosemide."),
    ("103", "2020", "2152-01-01 00:00:00", "First: COPD flare."),
    ("103", "2021", "2152-02-01 00:00:00", "Second: COPD flare again."),
    ("103", "2022", "2152-03-01 00:00:00", "Third: intubated."),
    ("103", "2023", "2152-04-01 00:00:00", "Fourth: not shown."),
    ("104", "2030", "2153-07-07 00:00:00", "Appendicitis, laparoscopic appendectomy."),
    ("105", "2040", "2154-08-08 00:00:00", "Cellulitis of the left leg, cefazolin."),
    ("106", "2050", "2155-09-09 00:00:00", "Not selected in the HTTP test."),
]


def write_notes(path: Path, rows: list[tuple[str, str, str, str]] = NOTES) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(DISCHARGE_HEADER)
        for i, (sid, hadm, chart, text) in enumerate(rows):
            w.writerow([f"{sid}-DS-{i}", sid, hadm, "DS", i, chart, chart, text])
    return path


def write_lines(path: Path, *lines: str) -> Path:
    path.write_text("".join(f"{line}\n" for line in lines), encoding="utf-8")
    return path


def test_patients_get_the_benchmark_notes(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "discharge.csv")
    ids = write_lines(tmp_path / "ids.txt", "subject_id", "103", "", "# a comment", "101")
    patients = load_patients(notes, patients_file=ids)
    assert [(p.patient_id, p.line, p.num_notes) for p in patients] == [("103", 2, 3), ("101", 5, 2)]
    assert patients[0].chart_dates == ["2152-01-01", "2152-02-01", "2152-03-01"]
    assert patients[1].admission_ids == ["2000", "2001"]  # chart-time order, not file order
    assert patients[1].notes_block() == (
        "[note 1 start]\nPatient ID : 101\nAdmission ID : 2000\nChartdate : 2149-11-20\n"
        "Prior admission: pneumonia.\nTreated with ceftriaxone.\n[note 1 end]\n\n"
        "[note 2 start]\nPatient ID : 101\nAdmission ID : 2001\nChartdate : 2150-03-02\n"
        "Name: ___\nAdmission for atrial fibrillation.\nStarted apixaban.\n[note 2 end]"
    )


def test_sample_is_seeded_and_deterministic(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "discharge.csv")
    first = sample_patient_ids(notes, 3, seed=7)
    assert first == sample_patient_ids(notes, 3, seed=7) and len(set(first)) == 3
    assert first == sorted(first) and set(first) <= {s for s, *_ in NOTES}
    reversed_file = write_notes(tmp_path / "reversed.csv", NOTES[::-1])
    assert sample_patient_ids(reversed_file, 3, seed=7) == first  # row order does not matter
    assert {tuple(sample_patient_ids(notes, 3, seed=s)) for s in range(8)} != {tuple(first)}
    assert [p.patient_id for p in load_patients(notes, sample=3, seed=7)] == first


@pytest.mark.parametrize(
    ("lines", "message"),
    [
        (["101", "101"], "ids.txt:2: subject_id 101 repeats line 1"),
        (["101", "1,2"], "ids.txt:2: '1,2' is not a subject_id"),
        (["# only a comment"], "no subject_id in the file"),
        (["101", "999"], "ids.txt:2: subject_id 999 has no discharge note in"),
    ],
)
def test_bad_patients_file(tmp_path: Path, lines: list[str], message: str) -> None:
    notes = write_notes(tmp_path / "discharge.csv")
    with pytest.raises(UserError, match=re.escape(message)):
        load_patients(notes, patients_file=write_lines(tmp_path / "ids.txt", *lines))


def test_bad_patient_selection(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "discharge.csv")
    ids = write_lines(tmp_path / "ids.txt", "101")
    with pytest.raises(UserError, match="--patients FILE"):
        load_patients(notes)
    with pytest.raises(UserError, match="--patients FILE"):
        load_patients(notes, patients_file=ids, sample=2)
    with pytest.raises(UserError, match=r"only 6 patients have discharge notes; --sample 50"):
        load_patients(notes, sample=50)
    with pytest.raises(UserError, match=r"missing\.csv: discharge notes file not found"):
        load_patients(tmp_path / "missing.csv", patients_file=ids)
    with pytest.raises(UserError, match=r"nope\.txt not found"):
        load_patients(notes, patients_file=tmp_path / "nope.txt")
    empty = write_notes(tmp_path / "empty.csv", [("101", "1", "2150-01-01 00:00:00", "  \n ")])
    with pytest.raises(UserError, match=r"ids\.txt:1: subject_id 101: every discharge note .* is empty"):
        load_patients(empty, patients_file=ids)
    wrong = tmp_path / "wrong.csv"
    wrong.write_text("subject_id,hadm_id,text\n101,1,x\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"wrong\.csv: missing column\(s\) charttime"):
        load_patients(wrong, patients_file=ids)
    assert read_patient_ids(ids) == [(1, "101")]


# ---------------------------------------------------------------------------------------------
# The build over real HTTP, with scripted generator replies

R101 = "As per the note charted on 2150-03-02, apixaban."
STEP1: dict[str, str] = {
    "101": f"- Question : {Q}\n- Answer : Apixaban\n- Reason : {R101}",
    "102": "**Question:** Which diuretic treated the heart failure?\n**Answer:** Furosemide\n**Reason:** r",
    "103": "- Question : What happened at the third COPD admission? - Answer : Intubation - Reason : r",
    "104": "I'm sorry, but I can't write that.",
    "105": "Question: Which antibiotic was given for the cellulitis?\nAnswer: Cefazolin",
}


def step2(pid: str, question: str) -> str:
    if pid == "101":  # the prompt's one-line format; passes every check
        return (
            f"- Question: {question} - Answer Choices: A: Warfarin B: Apixaban C: Heparin drip D: Aspirin "
            "E: Clopidogrel - Correct Answer: B - Reason: per the note"
        )
    if pid == "102":  # two options the same after normalisation
        return (
            f"**Question:** {question}\n**Answer Choices:**\nA. Furosemide\nB. Torsemide\nC. furosemide.\n"
            "D. Spironolactone\nE. Metolazone\n**Correct Answer:** (A)\n**Reason:** r"
        )
    if pid == "103":  # the question reworded, and the answer strictly the longest option
        return (
            f"Question: {question} (2152)\n(A) Discharged home\n(B) Oxygen\n(C) Endotracheal intubation\n"
            "(D) BiPAP\n(E) Steroids\nCorrect Answer: C. Endotracheal intubation\nReason: r"
        )
    return "I cannot produce multiple-choice questions."


def responder(prompt: str) -> str:
    """What a generator might answer: step 1 by patient, step 2 built on the question it was sent."""
    m = re.search(r"Patient ID : (\w+)", prompt)
    assert m is not None, "every prompt carries the patient's notes"
    if prompt.startswith(QUESTION_PROMPT):
        return STEP1[m.group(1)]
    assert prompt.startswith(CHOICES_PROMPT)
    q = re.search(r"^- Question : (.*)$", prompt, re.M)
    assert q is not None
    return step2(m.group(1), q.group(1))


runner = CliRunner()


def invoke(*args: str) -> str:
    result = runner.invoke(app, [*args], catch_exceptions=True)
    assert result.exit_code == 0, (result.output, result.exception)
    return result.output


def cli_error(*args: str) -> str:
    """The UserError a command ends with (clinieval's main prints it on one line, exit 2)."""
    result = runner.invoke(app, [*args], catch_exceptions=True)
    assert result.exit_code != 0
    assert isinstance(result.exception, UserError), result.exception
    return str(result.exception)


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def write_review(path: Path, rows: list[dict[str, str]], columns: list[str] | None = None) -> Path:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=columns or list(REVIEW_COLUMNS))
        w.writeheader()
        w.writerows(rows)
    return path


def jsonl(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def built_once(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished build of patients 101-105 against the scripted server (its folder)."""
    tmp_path = tmp_path_factory.mktemp("built")
    notes = write_notes(tmp_path / "discharge.csv")
    ids = write_lines(tmp_path / "ids.txt", "101", "102", "103", "104", "105")
    out = tmp_path / "build"
    with FaultServer(responder=responder) as server:
        spec = f"openai:{server.url}@fault"
        args = ("generate", "--notes", str(notes), "--patients", str(ids), "--model", spec)
        text = invoke(*args, "--out", str(out), "--no-progress", "--concurrency", "3")
        assert "5 patients, 5 items: 3 parsed" in text and "review.csv" in text
        first = len(server.log.received)
        assert first == 9  # five questions, four sets of choices (104's question was unreadable)
        # what step 1 sent: the instruction, a blank line, the benchmark's notes block
        sent = [p for p in server.log.received if "Patient ID : 101" in p]
        patient = load_patients(notes, patients_file=write_lines(tmp_path / "one.txt", "101"))[0]
        assert QUESTION_PROMPT + "\n\n" + patient.notes_block() in sent
        assert any(
            p.startswith(CHOICES_PROMPT)
            and p.endswith(
                f"- Question : {Q}\n- Answer : Apixaban\n"
                "- Reason : As per the note charted on 2150-03-02, apixaban."
            )
            for p in sent
        )
        review_before = (out / "review.csv").read_bytes()
        # a rerun asks nothing: every call comes from the cache
        invoke(*args, "--out", str(out), "--no-progress")
        assert len(server.log.received) == first
    summary = json.loads((out / "build_summary.json").read_text(encoding="utf-8"))
    assert (summary["requests"], summary["cache_hits"]) == (0, 9)
    assert (out / "review.csv").read_bytes() == review_before
    return out


@pytest.fixture
def built(built_once: Path, tmp_path: Path) -> Path:
    """A copy of the finished build for one test to change, with the notes file beside it."""
    shutil.copy(built_once.parent / "discharge.csv", tmp_path / "discharge.csv")
    return Path(shutil.copytree(built_once, tmp_path / "build"))


def test_build_outputs(built: Path) -> None:
    summary = json.loads((built / "build_summary.json").read_text(encoding="utf-8"))
    assert summary["patients"] == 5 and summary["items"] == 5 and summary["parsed"] == 3
    assert summary["calls"] == {"question": 5, "choices": 4, "total": 9}
    assert summary["parse_failures"] == {"question:no_question": 1, "choices:no_question": 1}
    assert summary["call_failures"] == {}
    assert summary["check_failures"] == {
        "distinct_options": 1,
        "answer_not_longest": 1,
        "question_unchanged": 1,
    }
    assert summary["items_passing_checks"] == 1 and summary["review_rows"] == 3
    assert summary["tokens"]["prompt"] == 27 and summary["tokens"]["new_prompt"] == 0  # 9 calls x 3
    assert summary["settings"]["question"]["temperature"] == 1.0 and summary["warning"] is None

    items = {str(i["item_id"]): i for i in jsonl(built / "generated.jsonl")}
    assert list(items) == ["101-1", "102-1", "103-1", "104-1", "105-1"]
    assert items["104-1"]["status"] == "unparsed"
    assert items["104-1"]["failure"] == {
        "step": "question",
        "kind": "unparsed",
        "reason": "no_question",
        "detail": "no 'Question :' label in the reply",
    }
    assert items["104-1"]["question_call"]["raw"] == STEP1["104"]  # type: ignore[index]
    assert items["104-1"]["choices_call"] is None
    assert items["105-1"]["failure"]["step"] == "choices"  # type: ignore[index]
    assert items["101-1"]["step2"]["choices"] == OPTS  # type: ignore[index]
    assert items["103-1"]["failed_checks"] == ["answer_not_longest", "question_unchanged"]

    rows = read_csv(built / "review.csv")
    with (built / "review.csv").open(encoding="utf-8") as f:
        assert next(csv.reader(f)) == list(REVIEW_COLUMNS)
    assert [r["item_id"] for r in rows] == ["101-1", "102-1", "103-1"]
    r101, r102, r103 = rows
    assert (r101["patient_id"], r101["num_notes"], r101["chart_dates"]) == (
        "101",
        "2",
        "2149-11-20; 2150-03-02",
    )
    assert r101["question"] == Q and r101["choice_B"] == "Apixaban" and r101["answer"] == "B"
    assert r101["reason"] == "per the note" and r101["failed_checks"] == ""
    assert r102["failed_checks"] == "distinct_options"
    assert r103["num_notes"] == "3" and r103["failed_checks"] == "answer_not_longest; question_unchanged"
    assert all(
        r[c] == "" for r in rows for c in ("keep", "revised_question", "revised_answer", "reviewer_note")
    )


def fill(rows: list[dict[str, str]], cells: dict[str, dict[str, str]]) -> list[dict[str, str]]:
    """The review rows with the reviewer cells of ``cells[item_id]`` filled in."""
    return [{**r, **cells.get(r["item_id"], {})} for r in rows]


def test_review_import(built: Path, tmp_path: Path) -> None:
    revised_q = "Which anticoagulant was started in March 2150?"
    rows = fill(
        read_csv(built / "review.csv"),
        {
            "101-1": {"keep": "yes", "revised_question": revised_q, "category": "Treatment"},
            "102-1": {"keep": "No", "reviewer_note": "two options are the same"},
            "103-1": {"keep": "Y", "revised_answer": "d", "revised_choice_A": "Home"},
        },
    )
    review = write_review(built / "review.csv", rows)
    out = tmp_path / "final" / "ehrnoteqa.jsonl"
    text = invoke("import", str(review), "--out", str(out))
    assert "3 items reviewed: 1 removed, 2 kept" in text
    assert "revised: 1 of 3 questions, 1 of 3 correct answers, 1 of 12 distractors" in text
    final = jsonl(out)
    assert final == [
        {
            "patient_id": 101,
            "num_notes": 2,
            "question": revised_q,
            **{f"choice_{k}": v for k, v in OPTS.items()},
            "answer": "B",
            "id": "101-1",
            "category": "Treatment",
        },
        {
            "patient_id": 103,
            "num_notes": 3,
            "question": "What happened at the third COPD admission? (2152)",
            "choice_A": "Home",
            "choice_B": "Oxygen",
            "choice_C": "Endotracheal intubation",
            "choice_D": "BiPAP",
            "choice_E": "Steroids",
            "answer": "D",
            "id": "103-1",
        },
    ]
    stats = json.loads((tmp_path / "final" / "ehrnoteqa.review_stats.json").read_text(encoding="utf-8"))
    assert {k: stats[k] for k in ("items", "removed", "kept", "questions_revised")} == {
        "items": 3,
        "removed": 1,
        "kept": 2,
        "questions_revised": 1,
    }
    assert (stats["correct_answers_revised"], stats["distractors_revised"], stats["distractors_total"]) == (
        1,
        1,
        12,
    )
    assert stats["failing_checks"] == {}  # 103's answer is no longer the longest option


def test_import_refuses_failed_checks_unless_allowed(built: Path, tmp_path: Path) -> None:
    rows = [{**r, "keep": "yes"} for r in read_csv(built / "review.csv")]
    review = write_review(built / "review.csv", rows)
    out = tmp_path / "final.jsonl"
    message = cli_error("import", str(review), "--out", str(out))
    assert "1 kept item(s) fail a required check (row 3 (item '102-1'): distinct_options)" in message
    assert "--allow-failed-checks" in message and not out.exists()
    text = invoke("import", str(review), "--out", str(out), "--allow-failed-checks")
    assert "kept items failing checks: distinct_options 1, answer_not_longest 1" in text
    assert [i["id"] for i in jsonl(out)] == ["101-1", "102-1", "103-1"]


def edited(built: Path, item: str, **cells: str) -> Path:
    """The review with 101 and 103 kept, 102 removed, and ``cells`` written in ``item``'s row."""
    rows = [{**r, "keep": "no" if r["item_id"] == "102-1" else "yes"} for r in read_csv(built / "review.csv")]
    return write_review(built / "review.csv", [{**r, **cells} if r["item_id"] == item else r for r in rows])


@pytest.mark.parametrize(
    ("item", "cells", "message"),
    [
        ("103-1", {"keep": ""}, "review.csv: row 4 (line 4), column 'keep' is empty: write yes"),
        ("101-1", {"keep": "maybe"}, "review.csv: row 2 (line 2), column 'keep' is 'maybe'"),
        (
            "101-1",
            {"revised_answer": "F"},
            "row 2 (line 2), column 'revised_answer' is 'F': write one letter A-E",
        ),
        ("101-1", {"num_notes": "two"}, "row 2 (line 2), column 'num_notes' differs from what was generated"),
        (
            "101-1",
            {"question": "Edited in place?"},
            "row 2 (line 2), column 'question' differs from what was generated (",
        ),
        ("101-1", {"item_id": "999-1"}, "row 2 (line 2), column 'item_id': item '999-1' is not among"),
        ("103-1", {"item_id": "101-1"}, "row 4 (line 4), column 'item_id': item '101-1' repeats row 2"),
        ("101-1", {"revised_choice_A": "Apixaban"}, "row 2 (item '101-1'): distinct_options"),
        ("101-1", {"item_id": ""}, "row 2 (line 2), column 'item_id' is empty"),
    ],
)
def test_bad_review_cells(
    built: Path, tmp_path: Path, item: str, cells: dict[str, str], message: str
) -> None:
    review = edited(built, item, **cells)
    out = tmp_path / "final.jsonl"
    assert message in cli_error("import", str(review), "--out", str(out))
    assert not out.exists() and not (tmp_path / "final.review_stats.json").exists()


def test_a_deleted_row_is_refused(built: Path, tmp_path: Path) -> None:
    rows = [{**r, "keep": "yes"} for r in read_csv(built / "review.csv") if r["item_id"] != "102-1"]
    review = write_review(built / "review.csv", rows)
    message = cli_error("import", str(review), "--out", str(tmp_path / "final.jsonl"))
    assert "1 generated item(s) have no row, first '102-1'" in message and "set keep to no" in message


def test_bad_review_files(built: Path, tmp_path: Path) -> None:
    out = tmp_path / "final.jsonl"
    rows = [{**r, "keep": "yes"} for r in read_csv(built / "review.csv")]
    no_keep = [c for c in REVIEW_COLUMNS if c != "keep"]
    review = write_review(tmp_path / "a.csv", [{c: r[c] for c in no_keep} for r in rows], no_keep)
    assert "a.csv: row 1 (the header) has no column 'keep'" in cli_error(
        "import", str(review), "--out", str(out)
    )
    broken = tmp_path / "b.csv"
    broken.write_text(",".join(REVIEW_COLUMNS) + "\n101-1,101\n", encoding="utf-8")
    assert "b.csv: row 2 (line 2) has 2 cells, but the header has" in cli_error(
        "import", str(broken), "--out", str(out)
    )
    assert "c.csv not found" in cli_error("import", str(tmp_path / "c.csv"), "--out", str(out))
    latin = tmp_path / "d.csv"
    latin.write_bytes(",".join(REVIEW_COLUMNS).encode() + b"\n\xe9\n")
    assert "d.csv is not UTF-8" in cli_error("import", str(latin), "--out", str(out))
    assert "is the review file" in cli_error("import", str(review), "--out", str(review))
    assert not out.exists()
    # without generated.jsonl beside it, the review alone is imported (nothing to compare with)
    alone = write_review(tmp_path / "alone.csv", [r for r in rows if r["item_id"] != "102-1"])
    invoke("import", str(alone), "--out", str(out))
    assert [i["id"] for i in jsonl(out)] == ["101-1", "103-1"]


def test_rebuild_keeps_a_filled_review(built: Path, tmp_path: Path) -> None:
    rows = [{**r, "keep": "yes"} for r in read_csv(built / "review.csv")]
    write_review(built / "review.csv", rows)
    args = ["generate", "--notes", str(tmp_path / "discharge.csv"), "--sample", "1"]
    message = cli_error(*args, "--model", "openai:http://127.0.0.1:9/v1@x", "--out", str(built))
    assert "review.csv already holds reviewer input" in message and "--overwrite-review" in message


def test_bad_build_input_writes_nothing(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "discharge.csv")
    out = tmp_path / "build"
    base = ["generate", "--model", "openai:http://127.0.0.1:9/v1@x", "--out", str(out), "--no-progress"]
    assert "missing.csv.gz: discharge notes file not found" in cli_error(
        *base, "--notes", str(tmp_path / "missing.csv.gz"), "--sample", "1"
    )
    ids = write_lines(tmp_path / "ids.txt", "101", "77")
    assert "ids.txt:2: subject_id 77 has no discharge note in" in cli_error(
        *base, "--notes", str(notes), "--patients", str(ids)
    )
    assert "--patients FILE" in cli_error(*base, "--notes", str(notes))
    (tmp_path / "file").write_text("x", encoding="utf-8")
    file_out = ["--out", str(tmp_path / "file"), "--notes", str(notes), "--sample", "1"]
    assert "is a file; give a folder" in cli_error(*base, *file_out)
    # a server that is not there: refused before anything is written
    assert "cannot reach http://127.0.0.1:9/v1" in cli_error(*base, "--notes", str(notes), "--sample", "1")
    assert not out.exists()


def test_transient_failures_are_retried_on_rerun(tmp_path: Path) -> None:
    """A 500 is recorded as a failed call and not cached: a rerun asks again, and only that."""
    # The marker fails the first request of each distinct prompt: step 1, then step 2.
    notes = write_notes(
        tmp_path / "discharge.csv", [("101", "2001", "2150-03-02 00:00:00", "AF. FAULT:500x1")]
    )
    out = tmp_path / "build"

    def summary() -> dict[str, object]:
        return dict(json.loads((out / "build_summary.json").read_text(encoding="utf-8")))

    with FaultServer(responder=responder) as server:
        args = ["generate", "--notes", str(notes), "--sample", "1", "--model", f"openai:{server.url}@fault"]
        args += ["--out", str(out), "--no-progress", "--retries", "0"]
        assert "1 failed calls" in invoke(*args)
        assert summary()["call_failures"] == {"question:server_error": 1}
        invoke(*args)
        assert summary()["call_failures"] == {"choices:server_error": 1}
        assert (summary()["requests"], summary()["cache_hits"]) == (2, 0)
        assert "1 parsed" in invoke(*args)
        assert (summary()["requests"], summary()["cache_hits"]) == (1, 1)  # only the failed step again
        assert len(server.log.received) == 4
    assert [r["item_id"] for r in read_csv(out / "review.csv")] == ["101-1"]


def test_per_patient_items_use_distinct_requests(tmp_path: Path) -> None:
    notes = write_notes(tmp_path / "discharge.csv")
    ids = write_lines(tmp_path / "ids.txt", "101")
    seeds: list[int] = []
    with FaultServer(responder=responder) as server:
        original: Callable[[object, dict[str, object]], None] = server.handle  # type: ignore[assignment]

        def spy(h: object, body: dict[str, object]) -> None:
            seeds.append(int(body["seed"]))  # type: ignore[call-overload]
            original(h, body)

        server.handle = spy  # type: ignore[method-assign]
        invoke(
            "generate",
            "--notes",
            str(notes),
            "--patients",
            str(ids),
            "--model",
            f"openai:{server.url}@fault",
            "--out",
            str(tmp_path / "b"),
            "--no-progress",
            "--per-patient",
            "2",
            "--seed",
            "10",
        )
    assert sorted(seeds) == [10, 10, 11, 11]  # item k uses seed + k in both steps
    assert [r["item_id"] for r in read_csv(tmp_path / "b" / "review.csv")] == ["101-1", "101-2"]


# ---------------------------------------------------------------------------------------------
# The real embedded model: it cannot write usable questions, and nothing breaks


@pytest.mark.slow
def test_embedded_model_build_records_what_it_could_not_read(tmp_path: Path, smollm2_path: Path) -> None:
    assert smollm2_path.is_file()
    notes = write_notes(
        tmp_path / "discharge.csv",
        [
            ("201", "3001", "2160-01-01 00:00:00", "Admitted with pneumonia. Treated with ceftriaxone."),
            ("202", "3002", "2161-02-02 00:00:00", "Admitted with a hip fracture. Underwent repair."),
        ],
    )
    out = tmp_path / "build"
    model = ["--model", "llamacpp:smollm2-135m-instruct", "--n-ctx", "2048", "--max-tokens", "48"]
    args = ["generate", "--notes", str(notes), "--sample", "2", *model, "--out", str(out), "--no-progress"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, (result.output, result.exception)
    summary = json.loads((out / "build_summary.json").read_text(encoding="utf-8"))
    assert summary["warning"] and "cannot write usable clinical questions" in summary["warning"]
    items = jsonl(out / "generated.jsonl")
    assert len(items) == 2 and summary["calls"]["question"] == 2
    for item in items:
        assert item["question_call"]["raw"] or item["question_call"]["error_kind"]  # type: ignore[index]
        if item["status"] != "ok":
            failure = item["failure"]
            assert isinstance(failure, dict) and failure["reason"] and failure["detail"]
    failures = sum(summary["parse_failures"].values()) + sum(summary["call_failures"].values())
    assert failures + summary["parsed"] == 2
    assert len(read_csv(out / "review.csv")) == summary["parsed"]
    rerun = runner.invoke(app, args)
    assert rerun.exit_code == 0, (rerun.output, rerun.exception)
    again = json.loads((out / "build_summary.json").read_text(encoding="utf-8"))
    assert again["requests"] == 0 and again["cache_hits"] == summary["calls"]["total"]


def test_the_commands_mount_under_a_parent() -> None:
    import typer

    parent = typer.Typer()
    parent.add_typer(app, name="build")
    for command in ("generate", "import"):
        result = runner.invoke(parent, ["build", command, "--help"])
        assert result.exit_code == 0 and "Usage:" in result.output
