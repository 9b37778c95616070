"""MedAlign loaders on release-shaped and generic fixtures written by the tests (both XML dialects)."""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import pytest

from clinieval.benchmarks.medalign.data import RESPONSES_FILE, load_generic, load_release
from clinieval.benchmarks.medalign.prompts import MEDALIGN_PROMPT
from clinieval.errors import UserError
from clinieval.types import Sample
from tests.conftest import need_shared

EVENTSTREAM = """<eventstream person_id="p2">
<encounter>
<entry timestamp="2019-03-01 09:30:00">
<event type="condition" name="ICD10CM/I10" note_id="">Essential hypertension</event>
</entry>
</encounter>
</eventstream>
"""

HEADER = [
    "instruction_id",
    "question",
    "person_id",
    "filename",
    "clinician_response",
    "annotator_num",
    "submitter_specialty",
    "evidence",
]


def write_tsv(path: Path, rows: list[list[str]], header: list[str] = HEADER) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f, delimiter="\t")
        w.writerow(header)
        w.writerows(rows)


@pytest.fixture
def release(tmp_path: Path) -> Path:
    root = tmp_path / "medalign"
    (root / "ehrs").mkdir(parents=True)
    shutil.copy(need_shared("medalign") / "sample-ehr-clean.xml", root / "ehrs" / "p1.xml")  # paper dialect
    (root / "ehrs" / "p2.xml").write_text(EVENTSTREAM)  # release dialect
    write_tsv(
        root / RESPONSES_FILE,
        [
            [
                "1",
                "What strokes did the patient have?",
                "p1",
                "p1.xml",
                "An ischemic stroke.",
                "Annotator_1",
                "Neurology",
                "stroke note",
            ],
            [
                "1",
                "What strokes did the patient have?",
                "p1",
                "p1.xml",
                "Cerebral infarction.",
                "Annotator_2",
                "Neurology",
                "",
            ],
            [
                "2",
                "Is blood pressure controlled?",
                "p2",
                "p2.xml",
                "Hypertension since 2019.",
                "Annotator_1",
                "Cardiology",
                "",
            ],
            ["3", "No gold here", "p2", "p2.xml", "Only a second opinion.", "Annotator_2", "", ""],
            ["4", "Never paired", "", "", "", "Annotator_1", "", ""],
        ],
    )
    return root


def test_release_gold_from_annotator_1(release: Path) -> None:
    samples = load_release(release)
    assert [s.id for s in samples] == ["1", "2"]
    first = samples[0]
    assert first.target == "An ischemic stroke."
    assert first.context.startswith("<record>") and "Cerebral infarction" in first.context
    assert first.metadata["submitter_specialty"] == "Neurology" and first.metadata["filename"] == "p1.xml"
    assert samples[1].context.startswith("<eventstream")


def test_release_other_annotator_and_all_instructions(release: Path) -> None:
    assert [s.target for s in load_release(release, gold_annotator="Annotator_2")] == [
        "Cerebral infarction.",
        "Only a second opinion.",
    ]
    every = load_release(release, require_gold=False)
    assert [s.id for s in every] == ["1", "2", "3"]  # 4 has no patient file
    assert every[2].target is None


def test_prompt_is_figure_s9_and_keeps_question() -> None:
    sample = Sample(id="x", input="Summarize the strokes", context="<record/>")
    (msg,) = MEDALIGN_PROMPT.messages(sample, sample.context)
    assert msg.content == (
        "Instruction: Answer the following question based on the EHR:\n###\n"
        'Question: """Summarize the strokes"""\nEHR: """<record/>"""'
    )


@pytest.mark.parametrize(
    ("breakage", "message"),
    [
        ("no_tsv", "clinician-instruction-responses.tsv: file not found"),
        ("no_column", "missing column(s) annotator_num"),
        ("no_ehrs", "no ehrs/ folder"),
        ("missing_file", "EHR file"),
        ("bad_xml", "p2.xml"),
    ],
)
def test_release_errors_name_the_problem(release: Path, breakage: str, message: str) -> None:
    if breakage == "no_tsv":
        (release / RESPONSES_FILE).unlink()
    elif breakage == "no_column":
        write_tsv(release / RESPONSES_FILE, [["1", "q", "p1", "p1.xml", "a"]], HEADER[:5])
    elif breakage == "no_ehrs":
        shutil.rmtree(release / "ehrs")
    elif breakage == "missing_file":
        (release / "ehrs" / "p1.xml").unlink()
    else:
        (release / "ehrs" / "p2.xml").write_text("<notes><n>not an EHR</n></notes>")
    with pytest.raises(UserError, match=message.replace("(", r"\(").replace(")", r"\)")):
        load_release(release)


def test_generic_instructions_over_xml_folder(release: Path, tmp_path: Path) -> None:
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text(
        "instruction_id,question,person_id,gold_response\n"
        "a,When was hypertension first recorded?,p2,2019-03-01\n"
        "b,Any strokes?,p1,\n"
    )
    samples = load_generic(csv_path, release / "ehrs")
    assert [(s.id, s.target, s.metadata["filename"]) for s in samples] == [
        ("a", "2019-03-01", "p2.xml"),
        ("b", None, "p1.xml"),
    ]
    csv_path.write_text("instruction_id,question,person_id,submitter_id\na,q,p1,dr-lee\n")
    # the author travels with the sample, so `review assign` never gives dr-lee this instruction
    assert load_generic(csv_path, release / "ehrs")[0].metadata["submitter_id"] == "dr-lee"
    csv_path.write_text("instruction_id,question,person_id\na,q,p1\na,q2,p2\n")
    with pytest.raises(UserError, match="duplicate instruction_id 'a'"):
        load_generic(csv_path, release / "ehrs")
    csv_path.write_text("instruction_id,question,person_id\na,q,nobody\n")
    with pytest.raises(UserError, match=r"mine.csv:2: EHR file .*nobody.xml not found"):
        load_generic(csv_path, release / "ehrs")
    csv_path.write_text('instruction_id,question,person_id,answer_keys\na,q,p1,"[""7.2"", ""03/04/2021""]"\n')
    assert load_generic(csv_path, release / "ehrs")[0].metadata["answer_keys"] == ["7.2", "03/04/2021"]
    for bad in ("7.2", "[]", '"[1, 2]"'):
        csv_path.write_text(f"instruction_id,question,person_id,answer_keys\na,q,p1,{bad}\n")
        with pytest.raises(UserError, match=r"mine.csv:2: answer_keys"):
            load_generic(csv_path, release / "ehrs")


REVIEWED = [
    "instruction_id",
    "person_id",
    "model_name",
    "model_response",
    "model_rank",
    "binary_correct",
    "annotator",
]


def test_release_analysis_uses_the_clinicians_rankings(release: Path, tmp_path: Path) -> None:
    """The paper's analysis of the release: clinician ranks/correctness, metrics against the gold."""
    import json

    from tests.conftest import run_cli

    write_tsv(
        release / "clinician-reviewed-model-responses.tsv",
        [
            ["1", "p1", "gpt-4", "An ischemic stroke.", "1", "1", "A"],
            ["1", "p1", "vicuna", "No strokes.", "2", "0", "A"],
            ["2", "p2", "gpt-4", "Hypertension since 2019.", "1", "1", "B"],
            ["2", "p2", "vicuna", "", "2", "0", "B"],
            ["3", "p2", "gpt-4", "not in the analysed set (no Annotator_1 gold)", "1", "1", "B"],
        ],
        header=REVIEWED,
    )
    out = tmp_path / "report"
    done = run_cli("medalign", "analyze", "--release", str(release), "--metric", "rougeL", "--out", str(out))
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "medalign.json").read_text())
    assert result["reference_label"] == "clinician" and result["input"]["items"] == 2
    per_model = result["views"]["all"]["per_model"]
    assert per_model["gpt-4"]["correct_percent"] == 100.0 and per_model["vicuna"]["correct_percent"] == 0.0
    assert per_model["gpt-4"]["mean_rank"] == 1.0 and per_model["vicuna"]["mean_rank"] == 2.0
    assert result["columns"]["metrics"] == ["rougeL"]
    (release / "clinician-reviewed-model-responses.tsv").write_text("instruction_id\tmodel_name\n1\tx\n")
    broken = run_cli("medalign", "analyze", "--release", str(release), "--out", str(tmp_path / "r2"))
    assert broken.returncode == 2 and "model_rank" in broken.stderr and not (tmp_path / "r2").exists()


def test_release_run_records_the_release_file_in_the_manifest(release: Path, tmp_path: Path) -> None:
    import json

    from tests.conftest import run_cli
    from tests.fault_server import FaultServer

    with FaultServer(answer="An ischemic stroke.") as server:
        done = run_cli(
            "medalign", "run", "--release", str(release), "-m", f"openai:{server.url}@fault",
            "--tokenizer", "tiktoken:cl100k_base", "--max-context", "4096", "--strategy", "keep-recent",
            "--metric", "rougeL", "--out", str(tmp_path / "arms"), "--no-progress",
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    [arm] = list((tmp_path / "arms").iterdir())
    manifest = json.loads((arm / "manifest.json").read_text())
    assert list(manifest["data"]) == [str(release / RESPONSES_FILE)]
    assert manifest["samples"] == 2  # the two instructions with Annotator_1's gold


@pytest.mark.parametrize(
    "name", ["../secret.xml", "ehrs/../../secret.xml", "/etc/passwd", "a/../../secret.xml"]
)
def test_a_patient_file_outside_the_ehr_folder_is_refused(release: Path, tmp_path: Path, name: str) -> None:
    # a real MedAlign XML file beside the folder: without the check it would be read and sent to a model
    shutil.copy(release / "ehrs" / "p1.xml", release / "secret.xml")
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text(f"instruction_id,question,filename\na,q,{name}\n")
    with pytest.raises(UserError, match=r"mine.csv:2: .*(points outside|is not a file name inside)"):
        load_generic(csv_path, release / "ehrs")
    write_tsv(release / RESPONSES_FILE, [["1", "q", "p1", name, "a", "Annotator_1"]], HEADER)
    with pytest.raises(UserError, match=r"(points outside|is not a file name inside)"):
        load_release(release)


def test_a_file_in_a_subfolder_of_the_ehr_folder_is_fine(release: Path, tmp_path: Path) -> None:
    (release / "ehrs" / "site1").mkdir()
    shutil.copy(release / "ehrs" / "p1.xml", release / "ehrs" / "site1" / "p9.xml")
    csv_path = tmp_path / "mine.csv"
    csv_path.write_text("instruction_id,question,filename\na,q,site1/../site1/p9.xml\n")
    assert load_generic(csv_path, release / "ehrs")[0].metadata["filename"] == "site1/../site1/p9.xml"
