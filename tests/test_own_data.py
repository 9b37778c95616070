"""Issue 34, deliverable 5: a user's own multiple-choice file loads as published. MedQA's and
MedMCQA's JSONL shapes are recognised from their fields, options given as an object are read as
such (never ``A. A``), a spreadsheet's CSV and ``--field NAME=COLUMN`` cover the rest, and a bad
file is one error naming every problem of every line. Every fixture is written here: no real
dataset is copied into the repository."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from clinieval.benchmarks.jsonl.data import LINES_SHOWN, load_jsonl
from clinieval.benchmarks.jsonl.shapes import parse_fields
from clinieval.benchmarks.jsonl.task import CHOICE_PROMPT, jsonl_task
from clinieval.errors import UserError
from clinieval.records.runs import RunDir
from clinieval.types import Sample
from tests.conftest import run_cli

# MedQA (jind11/MedQA, data_clean/questions/US): 4_options/phrases_no_exclude_*.jsonl carry
# metamap_phrases, the 5-option US files do not. Invented questions in the published shape.
MEDQA_4: dict[str, object] = {
    "question": "A 23-year-old woman has dysuria and frequency. Which is the most appropriate treatment?",
    "answer": "Nitrofurantoin",
    "options": {"A": "Ampicillin", "B": "Ceftriaxone", "C": "Doxycycline", "D": "Nitrofurantoin"},
    "meta_info": "step2&3",
    "answer_idx": "D",
    "metamap_phrases": ["23 year old woman", "dysuria", "frequency"],
}
MEDQA_5: dict[str, object] = {
    "question": "Which enzyme is deficient in a child with a cherry-red macula and no hepatosplenomegaly?",
    "answer": "Hexosaminidase A",
    "options": {
        "A": "Glucocerebrosidase",
        "B": "Hexosaminidase A",
        "C": "Sphingomyelinase",
        "D": "Galactocerebrosidase",
        "E": "Arylsulfatase A",
    },
    "meta_info": "step1",
    "answer_idx": "B",
}
MEDQA_3: dict[str, object] = {
    "question": "Which drug reverses unfractionated heparin?",
    "answer": "Protamine sulfate",
    "options": {"A": "Vitamin K", "B": "Protamine sulfate", "C": "Idarucizumab", "D": "Andexanet alfa"},
    "meta_info": "step1",
    "answer_idx": "B",
}


def medmcqa(n: int, cop: int | str | None, **extra: object) -> dict[str, object]:
    """A MedMCQA line as published (the Hugging Face copy has the same fields)."""
    row: dict[str, object] = {
        "question": f"Question {n}: which nerve supplies the thenar muscles?",
        "exp": "The recurrent branch of the median nerve." if n % 2 else None,
        "cop": cop,
        "opa": "Ulnar",
        "opb": "Radial",
        "opc": "Median",
        "opd": "Axillary",
        "subject_name": "Anatomy",
        "topic_name": None,
        "id": f"mcqa-{n}",
        "choice_type": "single",
    }
    return row | extra


def write_jsonl(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def load(path: Path, *fields: str) -> tuple[list[Sample], list[str]]:
    notes: list[str] = []
    return load_jsonl(path, fields, say=notes.append), notes


def refusal(path: Path, *fields: str) -> str:
    with pytest.raises(UserError) as caught:
        load(path, *fields)
    return str(caught.value)


# --- MedQA ------------------------------------------------------------------------------------------


def test_medqa_4_and_5_option_lines_load_as_published(tmp_path: Path) -> None:
    samples, notes = load(write_jsonl(tmp_path / "medqa.jsonl", [MEDQA_4, MEDQA_5]))
    four, five = samples
    assert four.choices == ("Ampicillin", "Ceftriaxone", "Doxycycline", "Nitrofurantoin")
    assert four.target == "Nitrofurantoin" and four.input == MEDQA_4["question"]
    assert five.choices[4] == "Arylsulfatase A" and five.target == "Hexosaminidase A"
    assert [s.id for s in samples] == ["1", "2"]  # MedQA has no ids: its line numbers
    assert four.metadata == {"meta_info": "step2&3"}
    assert len(notes) == 1 and "read as MedQA" in notes[0] and "2 questions" in notes[0]
    sent = CHOICE_PROMPT.messages(five, "")[0].content
    assert "A. Glucocerebrosidase\nB. Hexosaminidase A\n" in sent and "E. Arylsulfatase A" in sent


def test_medqa_answer_text_must_be_the_option_its_letter_names(tmp_path: Path) -> None:
    wrong = MEDQA_4 | {"answer_idx": "A"}
    message = refusal(write_jsonl(tmp_path / "medqa.jsonl", [wrong]))
    assert f"{tmp_path / 'medqa.jsonl'}:1:" in message
    assert "'answer' is 'Nitrofurantoin' but 'answer_idx' names option 'Ampicillin'" in message


# --- options given as an object ------------------------------------------------------------------------


def test_choices_as_an_object_are_read_in_letter_order_never_as_their_keys(tmp_path: Path) -> None:
    rows = [
        {"id": "q1", "input": "Which test monitors heparin?", "target": "B",
         "choices": {"C": "Platelet count", "A": "Prothrombin time", "B": "aPTT", "D": "Anti-Xa level"}},
        {"id": "q2", "input": "Which drug reverses heparin?", "target": "Protamine sulfate",
         "choices": {"a": "Vitamin K", "b": "Protamine sulfate"}},
    ]  # fmt: skip
    samples, notes = load(write_jsonl(tmp_path / "own.jsonl", rows))
    assert samples[0].choices == ("Prothrombin time", "aPTT", "Platelet count", "Anti-Xa level")
    assert samples[0].target == "aPTT"  # the letter, as the option's text
    assert samples[1].choices == ("Vitamin K", "Protamine sulfate")
    assert samples[1].target == "Protamine sulfate"
    sent = CHOICE_PROMPT.messages(samples[0], "")[0].content
    assert "A. Prothrombin time\nB. aPTT\nC. Platelet count\nD. Anti-Xa level" in sent
    assert "A. A" not in sent
    assert notes == []  # clinieval's own shape: nothing to say


def test_a_list_of_choices_keeps_its_target_as_written(tmp_path: Path) -> None:
    """Files that already worked give the same samples (a resumed run must not see them changed)."""
    rows = [{"id": "q", "input": "Which test monitors warfarin?", "choices": ["INR", "aPTT"], "target": "A"}]
    samples, _ = load(write_jsonl(tmp_path / "own.jsonl", rows))
    assert samples == [Sample(id="q", input=rows[0]["input"], choices=("INR", "aPTT"), target="A")]  # type: ignore[arg-type]


# --- MedMCQA ------------------------------------------------------------------------------------------


def test_medmcqa_cop_counted_from_1_as_released(tmp_path: Path) -> None:
    samples, notes = load(write_jsonl(tmp_path / "dev.json.jsonl", [medmcqa(1, 3), medmcqa(2, 4)]))
    assert [s.target for s in samples] == ["Median", "Axillary"]
    assert [s.id for s in samples] == ["mcqa-1", "mcqa-2"]
    assert samples[0].metadata["subject_name"] == "Anatomy" and "exp" in samples[0].metadata
    assert "read as MedMCQA" in notes[0]
    assert "'cop' counts the options from 1 (MedMCQA's own numbering)" in notes[0]


def test_medmcqa_cop_counted_from_0_as_in_the_hugging_face_copy(tmp_path: Path) -> None:
    samples, notes = load(write_jsonl(tmp_path / "hf.jsonl", [medmcqa(1, 2), medmcqa(2, 0)]))
    assert [s.target for s in samples] == ["Median", "Ulnar"]
    assert "'cop' counts the options from 0 (the Hugging Face copy's numbering): line 2 has 0" in notes[0]


def test_medmcqa_cop_that_could_count_either_way_is_refused_until_said(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "few.jsonl", [medmcqa(1, 1), medmcqa(2, 3)])
    message = refusal(path)
    assert "--field numbering=1 or --field numbering=0" in message and "MedMCQA" in message
    from_zero, notes = load(path, "numbering=0")
    assert [s.target for s in from_zero] == ["Radial", "Axillary"]
    assert "from 0 (--field numbering)" in notes[0]
    from_one, _ = load(path, "numbering=1")
    assert [s.target for s in from_one] == ["Ulnar", "Median"]


def test_medmcqa_cop_counting_both_ways_or_outside_the_options_is_refused(tmp_path: Path) -> None:
    both = refusal(write_jsonl(tmp_path / "both.jsonl", [medmcqa(1, 0), medmcqa(2, 4)]))
    assert "from 0 on line 1 (0) but from 1 on line 2" in both
    outside = refusal(write_jsonl(tmp_path / "out.jsonl", [medmcqa(1, 4), medmcqa(2, 5)]))
    assert f"{tmp_path / 'out.jsonl'}:2: 'cop' is 5, outside the 4 options (counted from 1: 1-4)" in outside


def test_medmcqa_test_split_without_answers_loads_unanswered(tmp_path: Path) -> None:
    rows = [medmcqa(1, -1), {k: v for k, v in medmcqa(2, None).items() if k not in ("cop", "exp")}]
    samples, _ = load(write_jsonl(tmp_path / "test.jsonl", rows))
    assert [s.target for s in samples] == [None, None] and samples[1].choices[2] == "Median"


# --- CSV and --field ----------------------------------------------------------------------------------


def test_a_spreadsheets_csv_with_bom_semicolons_and_crlf(tmp_path: Path) -> None:
    path = tmp_path / "sheet.csv"
    path.write_bytes(
        "\ufeffquestion;A;B;C;D;E;answer\r\n"
        "Which test monitors heparin?;Prothrombin time;aPTT;Platelet count;Anti-Xa level;;B\r\n"
        '"Which drug; if any, reverses heparin?";Vitamin K;Protamine sulfate;Idarucizumab;Andexanet;'
        "Ciraparantag;Protamine sulfate\r\n".encode()
    )
    samples, notes = load(path)
    assert samples[0].choices == ("Prothrombin time", "aPTT", "Platelet count", "Anti-Xa level")
    assert samples[0].target == "aPTT" and samples[0].id == "2"  # no id column: the spreadsheet row
    assert samples[1].input == "Which drug; if any, reverses heparin?" and len(samples[1].choices) == 5
    assert samples[1].target == "Protamine sulfate"
    assert "read as spreadsheet" in notes[0] and "cells separated by ';'" in notes[0]


def test_a_comma_csv_missing_columns_names_them_all(tmp_path: Path) -> None:
    path = tmp_path / "sheet.csv"
    path.write_text("id,stem,A,B\nq1,Which?,x,y\n", encoding="utf-8")
    message = refusal(path, "target=correct")
    assert "no column 'input', 'correct'" in message and "the header has 'id', 'stem', 'A', 'B'" in message


def test_field_mapping_reads_other_names_in_jsonl_and_csv(tmp_path: Path) -> None:
    rows = [{"qid": 7, "stem": "Which test monitors heparin?", "opt_a": "PT", "opt_b": "aPTT", "opt_c": "INR",
             "correct": "b", "source": "ward quiz"}]  # fmt: skip
    fields = ("question=stem", "choices=opt_a,opt_b,opt_c", "target=correct", "id=qid", "metadata=source")
    samples, notes = load(write_jsonl(tmp_path / "quiz.jsonl", rows), *fields)
    assert samples == [
        Sample(id="7", input="Which test monitors heparin?", choices=("PT", "aPTT", "INR"), target="aPTT",
               metadata={"source": "ward quiz"})
    ]  # fmt: skip
    assert "with --field (id=qid, question=stem," in notes[0]
    csv = tmp_path / "quiz.csv"
    csv.write_text("qid,stem,opt_a,opt_b,opt_c,correct\n7,Which test monitors heparin?,PT,aPTT,INR,aPTT\n")
    from_csv, _ = load(csv, *fields[:4])
    assert from_csv[0].choices == ("PT", "aPTT", "INR") and from_csv[0].target == "aPTT"
    assert from_csv[0].id == "7"


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("question", "expected NAME=COLUMN"),
        ("stem=question", "NAME is one of id, question"),
        ("target=a,b", "only choices and metadata take several columns"),
        ("numbering=2", "numbering=0 when"),
        ("choices=a,,b", "an empty column name"),
    ],
)
def test_a_bad_field_option_says_what_is_accepted(spec: str, says: str) -> None:
    with pytest.raises(UserError, match=says):
        parse_fields([spec])
    assert parse_fields(["input=stem", "answer=ok"]) == {"question": ("stem",), "target": ("ok",)}


# --- bad input: every problem at once ---------------------------------------------------------------


def test_every_problem_of_every_line_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "medqa.jsonl"
    rows: list[dict[str, object]] = [
        MEDQA_4,
        {"answer": "x", "options": {"A": "a", "B": "b"}, "meta_info": "step1"},  # question and answer_idx
        MEDQA_4 | {"options": "A. Ampicillin B. Ceftriaxone"},  # options as text
        MEDQA_4 | {"options": ["Ampicillin", "Nitrofurantoin"], "answer_idx": "E"},  # letter outside
        MEDQA_4 | {"question": "   "},  # empty question
        MEDQA_4 | {"options": {"A": "a", "C": "c"}},  # keys not A, B
    ]
    message = refusal(write_jsonl(path, rows))
    lines = message.splitlines()
    assert lines[0].startswith(f"{path}: 5 lines cannot be read; read as MedQA")
    assert lines[1] == (
        f"  {path}:2: missing fields 'question' (the question's text), "
        "'answer_idx' (the answer: an option's letter, its text or its number)"
    )
    assert lines[2] == (
        f"  {path}:3: 'options' should be an object of letter -> option text, or a list of option texts, "
        "got text"
    )
    assert lines[3] == f"  {path}:4: 'answer_idx' is 'E', a letter outside the options (A-B)"
    assert lines[4] == f"  {path}:5: 'question' is empty"
    assert lines[5] == f"  {path}:6: 'options' keys should be the letters A, B, got 'A', 'C'"
    assert "Ampicillin" not in message  # a user's text (a patient's, maybe) is never echoed


def test_a_long_list_of_bad_lines_is_cut_and_counted(tmp_path: Path) -> None:
    rows = [{"id": str(i), "choices": 3} for i in range(LINES_SHOWN + 5)]
    message = refusal(write_jsonl(tmp_path / "bad.jsonl", rows))
    assert message.count("missing field 'input'") == LINES_SHOWN
    assert "'choices' should be an object" in message and message.endswith("... and 5 more lines")
    assert "--field NAME=COLUMN" in message.splitlines()[0]  # no known shape: how to name fields


def test_duplicate_ids_are_line_problems(tmp_path: Path) -> None:
    rows = [{"id": "a", "input": "q"}, {"id": "a", "input": "r"}]
    path = write_jsonl(tmp_path / "d.jsonl", rows)
    assert f"{path}:2: id 'a' repeats line 1's" in refusal(path)


# --- the command line -------------------------------------------------------------------------------


def test_field_is_refused_for_a_published_benchmark_and_when_malformed(tmp_path: Path) -> None:
    done = run_cli("run", "pubmedqa", "--field", "question=stem", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "--field applies to your own .jsonl, .json or .csv file" in done.stderr
    data = write_jsonl(tmp_path / "medqa.jsonl", [MEDQA_4])
    done = run_cli("run", str(data), "--field", "stem", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "expected NAME=COLUMN" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "r").exists()


def test_a_medqa_file_runs_end_to_end_with_its_option_texts_in_the_prompt(tmp_path: Path) -> None:
    data = write_jsonl(tmp_path / "medqa.jsonl", [MEDQA_4, MEDQA_5, MEDQA_3])
    out = tmp_path / "run"
    done = run_cli("run", str(data), "--model", "llamacpp:smollm2-135m-instruct", "--limit", "2",
                   "--max-tokens", "4", "--out", str(out), "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert "note: medqa.jsonl: read as MedQA" in done.stderr and "choice_extract" in done.stdout
    records = {r.sample.id: r for r in RunDir(out).records()}
    assert set(records) == {"1", "2"}
    sent = next(m.content for m in records["1"].messages if m.role == "user")
    assert sent == (
        f"{MEDQA_4['question']}\n\nA. Ampicillin\nB. Ceftriaxone\nC. Doxycycline\nD. Nitrofurantoin\n\n"
        "Answer with the letter of the correct option."
    )
    assert records["2"].sample.target == "Hexosaminidase A"


def test_a_task_with_a_prompt_reads_the_fields_when_the_run_loads(tmp_path: Path) -> None:
    """With --prompt the file is read when the run loads its samples: --field goes with it, and
    a malformed one is refused before that."""
    from clinieval.task import PromptTemplate

    rows = [{"n": 1, "stem": "Which?", "choices": ["x", "y"], "target": "x"}]
    path = write_jsonl(tmp_path / "own.jsonl", rows)
    prompt = PromptTemplate(user="{input}\n{choices}")
    task = jsonl_task(path, prompt=prompt, fields=("id=n", "question=stem"))
    assert task.load()[0].input == "Which?"
    with pytest.raises(UserError, match="expected NAME=COLUMN"):
        jsonl_task(path, prompt=PromptTemplate(user="{input}"), fields=("stem",))
