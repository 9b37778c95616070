"""MedEval data: sections and sentences, MedEval-shaped tables, MIMIC-CXR, Open-i, splits, and the
synthetic corpus (synthetic — not MedEval's data).

Every input here is built in ``tmp_path`` from text written for these tests (no MIMIC-CXR or
Open-i data ships with clinieval). Each bad-input case asserts the exact ``file:line`` and field
the error names, since that line is all a user gets.
"""

from __future__ import annotations

import gzip
import json
import random
import re
import time
from dataclasses import replace
from pathlib import Path

import pytest

from clinieval.benchmarks.medeval.data import MedEvalData, detect_source, load_folder, report_sentences
from clinieval.benchmarks.medeval.items import (
    CHEST,
    CHEXPERT_OBSERVATIONS,
    FOOT_ANKLE_CODES,
    ReportItem,
    SentenceItem,
)
from clinieval.benchmarks.medeval.mimic_cxr import load_mimic_cxr
from clinieval.benchmarks.medeval.openi import load_openi, read_openi_xml
from clinieval.benchmarks.medeval.sections import parse_sections, split_sentences
from clinieval.benchmarks.medeval.splits import assign_splits
from clinieval.benchmarks.medeval.synth.corpus import build_corpus
from clinieval.benchmarks.medeval.synth.domains import DOMAINS
from clinieval.benchmarks.medeval.synth.writer import write_corpus, write_synthetic
from clinieval.benchmarks.medeval.tables import attach_codes, load_reports, load_sentences
from clinieval.errors import UserError

# ------------------------------------------------------------------------ report texts

MIMIC_STANDARD = """                                 FINAL REPORT
 EXAMINATION:  CHEST (PA AND LAT)
 \n INDICATION:  ___ with cough and fever, evaluate for infiltrate.
 \n COMPARISON:  Chest radiograph from ___.
 \n FINDINGS: \n \n PA and lateral views of the chest were obtained.  There is a small left
 pleural effusion with adjacent basilar opacity.  The heart size is normal.  No
 pneumothorax is seen.
 \n IMPRESSION: \n \n Small left pleural effusion with adjacent opacity, possibly atelectasis,
 though infection is not excluded.
"""

MIMIC_IMPRESSION_ONLY = """                                 FINAL REPORT
 INDICATION:  Intubated patient, assess tube position.
 \n IMPRESSION: \n \n 1. Endotracheal tube terminates approx. 4.5 cm above the carina.
 2. Stable mild pulmonary edema.
"""

MIMIC_VARIANT_NAMES = """ FINAL REPORT
 HISTORY:  Shortness of breath.
 FINDING:  Lungs are clear.  Heart size is normal.
 IMPRESSIONS:  No acute cardiopulmonary process.
"""

MIMIC_NO_SECTIONS = """                                 FINAL REPORT
 PORTABLE CHEST RADIOGRAPH
 \n Lungs are hyperinflated but clear.  No effusion.
"""

MIMIC_CONCLUSION = """ EXAMINATION:  CHEST (PORTABLE AP)
 \n Findings:  Right internal jugular line ends in the
 mid SVC.
 \n CONCLUSION:  Line in good position.
"""


def test_sections_of_a_wrapped_report_with_a_title() -> None:
    s = parse_sections(MIMIC_STANDARD)
    assert s.findings == (
        "PA and lateral views of the chest were obtained. There is a small left pleural effusion with "
        "adjacent basilar opacity. The heart size is normal. No pneumothorax is seen."
    )
    assert s.impression == (
        "Small left pleural effusion with adjacent opacity, possibly atelectasis, "
        "though infection is not excluded."
    )
    text = s.text()
    assert "FINAL REPORT" not in text
    assert text.splitlines()[0] == "EXAMINATION: CHEST (PA AND LAT)"
    assert [name for name, _ in s.parts] == [
        "EXAMINATION",
        "INDICATION",
        "COMPARISON",
        "FINDINGS",
        "IMPRESSION",
    ]


@pytest.mark.parametrize(
    ("text", "findings", "impression"),
    [
        (
            MIMIC_IMPRESSION_ONLY,
            "",
            "1. Endotracheal tube terminates approx. 4.5 cm above the carina. "
            "2. Stable mild pulmonary edema.",
        ),
        (MIMIC_VARIANT_NAMES, "Lungs are clear. Heart size is normal.", "No acute cardiopulmonary process."),
        (MIMIC_NO_SECTIONS, "", ""),
        (MIMIC_CONCLUSION, "Right internal jugular line ends in the mid SVC.", "Line in good position."),
    ],
    ids=["impression-only", "variant-names", "no-sections", "title-case-and-conclusion"],
)
def test_section_variations(text: str, findings: str, impression: str) -> None:
    s = parse_sections(text)
    assert (s.findings, s.impression) == (findings, impression)


def test_organ_labels_inside_findings_stay_findings() -> None:
    text = (
        " EXAMINATION:  CT HEAD\n TECHNIQUE:  Axial images.\n FINDINGS:\n BRAIN: No hemorrhage.\n"
        " ETT: tip 4 cm above the\n carina.\n IMPRESSION:  No acute process.\n NOTIFICATION:  Called.\n"
    )
    s = parse_sections(text)
    assert s.findings == "BRAIN: No hemorrhage. ETT: tip 4 cm above the carina."
    assert s.impression == "No acute process."
    assert [name for name, _ in s.parts] == [
        "EXAMINATION",
        "TECHNIQUE",
        "FINDINGS",
        "IMPRESSION",
        "NOTIFICATION",
    ]


def test_a_report_without_sections_keeps_its_text_as_preamble() -> None:
    s = parse_sections(MIMIC_NO_SECTIONS)
    assert s.parts == (("", "PORTABLE CHEST RADIOGRAPH Lungs are hyperinflated but clear. No effusion."),)


@pytest.mark.parametrize(
    ("text", "sentences"),
    [
        ("No effusion. Heart size is normal.", ["No effusion.", "Heart size is normal."]),
        ("1. No acute process. 2. Stable cardiomegaly.", ["No acute process.", "Stable cardiomegaly."]),
        ("1. No effusion 2. Stable cardiomegaly", ["No effusion", "Stable cardiomegaly"]),
        ("1. Small effusion.\n2. Mild edema,\nimproved.", ["Small effusion.", "Mild edema, improved."]),
        ("Stable 2.5 cm nodule. New opacity.", ["Stable 2.5 cm nodule.", "New opacity."]),
        (
            "Tube tip approx. 3 cm above the carina. Lines unchanged.",
            ["Tube tip approx. 3 cm above the carina.", "Lines unchanged."],
        ),
        (
            "Clinical question r/o pneumonia. No consolidation.",
            ["Clinical question r/o pneumonia.", "No consolidation."],
        ),
        (
            "Findings discussed with Dr. Smith at 10 a.m. the same day.",
            ["Findings discussed with Dr. Smith at 10 a.m. the same day."],
        ),
        (
            "Small effusion, e.g. at the base, vs. atelectasis.",
            ["Small effusion, e.g. at the base, vs. atelectasis."],
        ),
        (
            "there is likely left basilar opacity. unchanged exam.",
            ["there is likely left basilar opacity.", "unchanged exam."],
        ),
        ("The heart is enlarged. The\nlungs are clear.", ["The heart is enlarged.", "The lungs are clear."]),
        ("No effusion the heart size is normal.", ["No effusion the heart size is normal."]),
        ("Pneumothorax? Not seen. Effusion!", ["Pneumothorax?", "Not seen.", "Effusion!"]),
        ("No change. 2. ___.", ["No change."]),
        ("", []),
    ],
    ids=lambda v: v[:30] if isinstance(v, str) else None,
)
def test_split_sentences(text: str, sentences: list[str]) -> None:
    assert split_sentences(text) == sentences


# ------------------------------------------------------------------ MedEval-shaped tables


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


SENTENCES_CSV = """id,sentence,domain,abnormal,ambiguous,rewrite,ambiguity_kind,split
s1,Lungs are unremarkable.,Chest X-Ray,normal,ambiguous,Lungs are normal.,jargon,train
s2,There is likely left basilar opacity.,chest xray,1,0,,,
s3,No fracture.,foot/ankle x-ray,false,unambiguous,,,test
s4,Small effusion,chest x-ray,,,,,validate
"""


def test_sentences_csv(tmp_path: Path) -> None:
    items = load_sentences(_write(tmp_path / "sentences.csv", SENTENCES_CSV))
    assert items[0] == SentenceItem(
        "s1",
        "Lungs are unremarkable.",
        CHEST,
        abnormal=False,
        ambiguous=True,
        rewrite="Lungs are normal.",
        ambiguity_kind="jargon",
        split="train",
        source=f"{tmp_path / 'sentences.csv'}:2",
    )
    assert (items[1].domain, items[1].abnormal, items[1].ambiguous, items[1].split) == (
        CHEST,
        True,
        False,
        None,
    )
    assert (items[2].abnormal, items[2].split) == (False, "test")
    assert (items[3].abnormal, items[3].ambiguous, items[3].split) == (None, None, "validation")


def test_sentences_jsonl_takes_json_types(tmp_path: Path) -> None:
    rows = [
        {"id": 7, "sentence": "No effusion.", "domain": "chest x-ray", "abnormal": False, "ambiguous": 0},
        {"id": "b", "sentence": "x", "domain": "knee x-ray", "abnormal": True, "ambiguous": None},
    ]
    path = _write(tmp_path / "s.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    items = load_sentences(path)
    assert [(i.id, i.abnormal, i.ambiguous) for i in items] == [("7", False, False), ("b", True, None)]


HEADER = "id,sentence,domain,abnormal,ambiguous,rewrite,ambiguity_kind,split\n"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            "s9,x,chest x-ray,maybe,,,,",
            "field 'abnormal' is 'maybe'; expected normal/abnormal, 0/1 or true/false",
        ),
        (
            "s9,x,chest x-ray,,sometimes,,,",
            "field 'ambiguous' is 'sometimes'; expected unambiguous/ambiguous",
        ),
        ("s9,x,chest x-ray,,,,,dev", "field 'split' is 'dev'; expected train, validation or test"),
        ("s9,x,chest x-ray,,ambiguous,,slang,", "field 'ambiguity_kind' is 'slang'; expected jargon"),
        (
            "s9,x,chest x-ray,,unambiguous,y,,",
            "field 'rewrite' is given but the sentence is not marked ambiguous",
        ),
        (
            "s9,x,chest x-ray,,0,,jargon,",
            "field 'ambiguity_kind' is 'jargon' but the sentence is not marked ambiguous",
        ),
        ("s9, ,chest x-ray,,,,,", "field 'sentence' is empty"),
        ("s9,x,,,,,,", "field 'domain' is empty"),
        (",x,chest x-ray,,,,,", "field 'id' is empty"),
        ("s1,x,chest x-ray,,,,,", "field 'id' is 's1', which {path}:2 already uses"),
        ("s9,x,chest x-ray", "3 cells but the header has 8 columns"),
    ],
)
def test_bad_sentence_rows_name_file_line_and_field(tmp_path: Path, row: str, message: str) -> None:
    path = _write(tmp_path / "sentences.csv", HEADER + "s1,Fine.,chest x-ray,normal,,,,\n" + row + "\n")
    with pytest.raises(UserError) as err:
        load_sentences(path)
    assert str(err.value).startswith(f"{path}:3: " + message.format(path=path))


def test_a_sentence_table_without_a_required_column(tmp_path: Path) -> None:
    path = _write(tmp_path / "sentences.csv", "id,text,domain\n1,a,b\n")
    with pytest.raises(UserError, match=r"no column 'sentence'"):
        load_sentences(path)


REPORTS_CSV = (
    "id,report,domain,findings,impression,split,"
    + ",".join(CHEXPERT_OBSERVATIONS)
    + "\n"
    + 'r1,"FINDINGS: Small left effusion.\nIMPRESSION: Effusion.",chest x-ray,'
    + "Small left effusion.,Effusion.,train,"
    + ",".join(["", "", "", "", "", "", "", "", "", "0.0", "1.0", "", "", "-1.0"])
    + "\n"
    + "r2,IMPRESSION: Normal.,Chest X-ray,,Normal.,,"
    + ",".join(["1", "", "", "", "", "", "", "", "", "", "", "", "", ""])
    + "\n"
)


def test_reports_csv_with_one_column_per_observation(tmp_path: Path) -> None:
    path = _write(tmp_path / "reports.csv", REPORTS_CSV)
    r1, r2 = load_reports(path)
    assert r1.text == "FINDINGS: Small left effusion.\nIMPRESSION: Effusion."
    assert dict(r1.codes) == {
        "Pneumothorax": "negative",
        "Pleural Effusion": "positive",
        "Support Devices": "unknown",
    }
    assert (r1.findings, r1.impression, r1.split) == ("Small left effusion.", "Effusion.", "train")
    assert dict(r2.codes) == {"No Finding": "positive"}
    # read_table names a row by the line where it ends: r1's quoted report spans lines 2-3
    assert (r1.source, r2.source) == (f"{path}:3", f"{path}:4")


def test_reports_jsonl_with_a_codes_object(tmp_path: Path) -> None:
    rows = [
        {
            "id": "a",
            "text": "t",
            "domain": "foot/ankle x-ray",
            "codes": {"fracture": "positive", "Gout": None},
        },
        {"id": "b", "text": "t", "domain": "knee x-ray", "codes": {"Joint Effusion": -1, "Loose Body": 0}},
    ]
    path = _write(tmp_path / "reports.jsonl", "".join(json.dumps(r) + "\n" for r in rows))
    a, b = load_reports(path)
    assert dict(a.codes) == {"Fracture": "positive"}  # the known spelling; null is absent
    assert dict(b.codes) == {"Joint Effusion": "unknown", "Loose Body": "negative"}


REPORT_HEADER = "id,report,domain,Edema,Pneumothorax\n"


@pytest.mark.parametrize(
    ("row", "message"),
    [
        (
            "r9,t,chest x-ray,2.0,",
            "field 'Edema' is '2.0'; expected positive, negative, unknown, absent, 1.0, 0.0, -1.0",
        ),
        ("r9,t,chest x-ray,,yes", "field 'Pneumothorax' is 'yes'; expected positive"),
        ("r9,,chest x-ray,,", "field 'report' is empty"),
        ("r1,t,chest x-ray,,", "field 'id' is 'r1', which {path}:2 already uses"),
    ],
)
def test_bad_report_rows(tmp_path: Path, row: str, message: str) -> None:
    path = _write(tmp_path / "reports.csv", REPORT_HEADER + "r1,ok,chest x-ray,1.0,\n" + row + "\n")
    with pytest.raises(UserError) as err:
        load_reports(path)
    assert str(err.value).startswith(f"{path}:3: " + message.format(path=path))


@pytest.mark.parametrize(
    ("codes", "message"),
    [
        ('{"Edema": "maybe"}', "field 'codes.Edema' is 'maybe'; expected positive"),
        (
            '{"Lung Cancer": "positive"}',
            "field 'codes.Lung Cancer' names observation 'Lung Cancer', which is not one",
        ),
        ("not json", "field 'codes' is 'not json'; expected a JSON object"),
        ('["Edema"]', "field 'codes' is '[\"Edema\"]'; expected a JSON object"),
    ],
)
def test_bad_codes_cells(tmp_path: Path, codes: str, message: str) -> None:
    row = {"id": "r", "report": "t", "domain": "chest x-ray", "codes": codes}
    path = _write(tmp_path / "reports.jsonl", "\n" + json.dumps(row) + "\n")
    with pytest.raises(UserError) as err:
        load_reports(path)
    assert str(err.value).startswith(f"{path}:2: " + message)


def test_codes_column_and_observation_columns_together(tmp_path: Path) -> None:
    path = _write(tmp_path / "reports.csv", "id,report,domain,codes,Edema\nr,t,chest x-ray,{},\n")
    with pytest.raises(UserError, match="there is a 'codes' column and observation columns \\(Edema\\)"):
        load_reports(path)
    with pytest.raises(UserError, match="there is a 'codes' column and observation columns \\(Edema\\)"):
        attach_codes([ReportItem("r", "t", CHEST)], path)


def test_a_report_table_without_report_text(tmp_path: Path) -> None:
    path = _write(tmp_path / "reports.csv", "id,domain,body\nr,chest x-ray,t\n")
    with pytest.raises(
        UserError, match=re.escape(f"{path}: no column 'report' (or 'text') holding the report")
    ):
        load_reports(path)


def test_attach_codes(tmp_path: Path) -> None:
    reports = [ReportItem("CXR1", "t", CHEST), ReportItem("CXR2", "t", CHEST)]
    labels = _write(tmp_path / "labels.csv", "id,Edema,Cardiomegaly\nCXR2,1.0,0.0\n")
    out = attach_codes(reports, labels)
    assert [dict(r.codes) for r in out] == [{}, {"Edema": "positive", "Cardiomegaly": "negative"}]
    bad = _write(tmp_path / "bad.csv", "id,Edema\nCXR2,1.0\nCXR9,1.0\n")
    with pytest.raises(
        UserError, match=re.escape(f"{bad}:3: field 'id' is 'CXR9', which is not a report id")
    ):
        attach_codes(reports, bad)


# ------------------------------------------------------------------------------ MIMIC-CXR

CHEXPERT_HEADER = "subject_id,study_id," + ",".join(CHEXPERT_OBSERVATIONS) + "\n"


def _chexpert_row(subject: str, study: str, values: dict[str, str]) -> str:
    return f"{subject},{study}," + ",".join(values.get(o, "") for o in CHEXPERT_OBSERVATIONS) + "\n"


def _mimic_tree(root: Path) -> Path:
    """Five studies of three patients in two pNN groups, the two CSVs, and download debris."""
    reports = {
        ("10000032", "50414267"): MIMIC_STANDARD,
        ("10000032", "53189527"): MIMIC_IMPRESSION_ONLY,
        ("10000764", "57375967"): MIMIC_VARIANT_NAMES,
        ("11000011", "51029426"): MIMIC_NO_SECTIONS,
        ("11000011", "52000001"): MIMIC_CONCLUSION,
    }
    for (subject, study), text in reports.items():
        folder = root / "files" / f"p{subject[:2]}" / f"p{subject}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"s{study}.txt").write_text(text, encoding="utf-8")
    (root / "files" / "p10" / "index.html").write_text("<html></html>", encoding="utf-8")
    (root / "files" / "p10" / "p10000032" / "s50414267").mkdir()  # an image folder of MIMIC-CXR-JPG
    chexpert = CHEXPERT_HEADER + _chexpert_row(
        "10000032", "50414267", {"Pleural Effusion": "1.0", "Pneumothorax": "0.0", "Pneumonia": "-1.0"}
    )
    chexpert += _chexpert_row("10000032", "53189527", {"Edema": "1.0", "Support Devices": "1.0"})
    chexpert += _chexpert_row("10000764", "57375967", {"No Finding": "1.0"})
    chexpert += _chexpert_row("19999999", "59999999", {"No Finding": "1.0"})  # a study not downloaded
    _write(root / "mimic-cxr-2.0.0-chexpert.csv", chexpert)
    split = "dicom_id,study_id,subject_id,split\n"
    split += "d1,50414267,10000032,train\nd2,50414267,10000032,train\n"
    split += "d3,53189527,10000032,validate\nd4,57375967,10000764,test\n"
    _write(root / "mimic-cxr-2.0.0-split.csv", split)
    return root


def test_mimic_cxr_tree(tmp_path: Path) -> None:
    root = _mimic_tree(tmp_path / "mimic")
    loaded = load_mimic_cxr(root)
    by_id = {r.id: r for r in loaded.reports}
    assert list(by_id) == ["s50414267", "s53189527", "s57375967", "s51029426", "s52000001"]
    first = by_id["s50414267"]
    assert first.domain == CHEST
    assert first.findings.startswith("PA and lateral views of the chest were obtained. There is a small left")
    assert dict(first.codes) == {
        "Pneumonia": "unknown",
        "Pneumothorax": "negative",
        "Pleural Effusion": "positive",
    }
    assert first.split == "train"
    assert by_id["s53189527"].split == "validation"
    assert by_id["s53189527"].findings == ""
    assert by_id["s57375967"].impression == "No acute cardiopulmonary process."
    assert (by_id["s51029426"].codes, by_id["s51029426"].split) == ({}, None)
    assert by_id["s52000001"].impression == "Line in good position."
    assert first.source == str(root / "files" / "p10" / "p10000032" / "s50414267.txt")
    assert "2 reports without FINDINGS" in loaded.notes
    assert "2 reports without a CheXpert row (codes absent)" in loaded.notes
    assert "1 CheXpert rows without a report file" in loaded.notes


def test_mimic_cxr_through_load_folder_gets_the_rest_split(tmp_path: Path) -> None:
    root = _mimic_tree(tmp_path / "mimic")
    assert detect_source(root) == "mimic-cxr"
    data = load_folder(root, seed=3)
    assert data.source == "mimic-cxr" and not data.synthetic
    assert all(r.split is not None for r in data.reports)
    info = data.split_info()["reports"]
    assert (info["from_data"], info["assigned"], info["method"]) == (
        3,
        2,
        "from the data, the rest grouped by report and de-duplicated, seeded 7:1:2",
    )
    assert data.observations == {CHEST: CHEXPERT_OBSERVATIONS}


def test_mimic_cxr_gzipped_csvs_and_the_files_folder_itself(tmp_path: Path) -> None:
    root = _mimic_tree(tmp_path / "mimic")
    for name in ("mimic-cxr-2.0.0-chexpert.csv", "mimic-cxr-2.0.0-split.csv"):
        plain = root / name
        (root / f"{name}.gz").write_bytes(gzip.compress(plain.read_bytes()))
        plain.unlink()
    loaded = load_mimic_cxr(root)
    assert dict(loaded.reports[2].codes) == {"No Finding": "positive"}
    inner = load_mimic_cxr(root / "files")  # the CSVs are beside files/, found from its parent
    assert [r.codes for r in inner.reports] == [r.codes for r in loaded.reports]


@pytest.mark.parametrize(
    ("name", "text", "line", "message"),
    [
        (
            "mimic-cxr-2.0.0-chexpert.csv",
            CHEXPERT_HEADER + _chexpert_row("10000032", "50414267", {"Edema": "2.0"}),
            2,
            "field 'Edema' is '2.0'; expected 1.0, 0.0, -1.0 or blank",
        ),
        (
            "mimic-cxr-2.0.0-chexpert.csv",
            CHEXPERT_HEADER + _chexpert_row("10000032", "5041426", {}),
            2,
            "field 'study_id' is '5041426'; expected an 8-digit MIMIC-CXR id",
        ),
        (
            "mimic-cxr-2.0.0-split.csv",
            "dicom_id,study_id,subject_id,split\nd1,50414267,10000032,train\nd2,50414267,10000032,test\n",
            3,
            "study 50414267 is in 'test' here but in 'train' at {path}:2",
        ),
        (
            "mimic-cxr-2.0.0-split.csv",
            "dicom_id,study_id,subject_id,split\nd1,50414267,10000032,holdout\n",
            2,
            "field 'split' is 'holdout'; expected train, validate or test",
        ),
    ],
)
def test_bad_mimic_csv_rows(tmp_path: Path, name: str, text: str, line: int, message: str) -> None:
    root = _mimic_tree(tmp_path / "mimic")
    path = _write(root / name, text)
    with pytest.raises(UserError) as err:
        load_mimic_cxr(root)
    assert str(err.value) == f"{path}:{line}: " + message.format(path=path)


def test_mimic_report_problems(tmp_path: Path) -> None:
    root = _mimic_tree(tmp_path / "mimic")
    report = root / "files" / "p11" / "p11000011" / "s51029426.txt"
    report.write_bytes(b"FINDINGS: ok\nIMPRESSION: caf\xe9\n")
    with pytest.raises(UserError, match=re.escape(f"{report}:2: the line is not UTF-8 text")):
        load_mimic_cxr(root, strict=True)  # without strict: left out and named in the notes
    report.write_text("  \n", encoding="utf-8")
    with pytest.raises(UserError, match=re.escape(f"{report}: the report is empty")):
        load_mimic_cxr(root, strict=True)
    report.unlink()
    misplaced = root / "files" / "p11" / "p10000099"
    misplaced.mkdir()
    with pytest.raises(UserError, match="patient folder p10000099 belongs under p10/, not p11/"):
        load_mimic_cxr(root)


def test_mimic_subject_mismatch_between_csv_and_tree(tmp_path: Path) -> None:
    root = _mimic_tree(tmp_path / "mimic")
    _write(root / "mimic-cxr-2.0.0-chexpert.csv", CHEXPERT_HEADER + _chexpert_row("10000099", "50414267", {}))
    with pytest.raises(
        UserError, match="the CheXpert row of study 50414267 names subject 10000099, not 10000032"
    ):
        load_mimic_cxr(root)


# -------------------------------------------------------------------------------- Open-i


def _openi_xml(uid: str | None, sections: dict[str, str], mesh: tuple[str, ...] = ()) -> str:
    texts = "".join(
        f'<AbstractText Label="{label}">{text}</AbstractText>' if text else f'<AbstractText Label="{label}"/>'
        for label, text in sections.items()
    )
    uid_el = f'<uId id="{uid}"/>' if uid else ""
    mesh_el = "".join(f"<major>{m}</major>" for m in mesh)
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<eCitation>\n  <meta type="rr"/>\n  '
        f"{uid_el}\n  <MedlineCitation><Article><Abstract>\n    {texts}\n"
        "  </Abstract></Article></MedlineCitation>\n"
        f"  <MeSH>{mesh_el}<automatic>auto term</automatic></MeSH>\n</eCitation>\n"
    )


def _openi_folder(root: Path) -> Path:
    folder = root / "ecgen-radiology"
    folder.mkdir(parents=True)
    sections = {
        "COMPARISON": "None.",
        "INDICATION": "Cough",
        "FINDINGS": "The heart is normal in size.\n   No focal consolidation.",
        "IMPRESSION": "Normal chest.",
    }
    _write(folder / "1.xml", _openi_xml("CXR1", sections, ("normal",)))
    _write(
        folder / "10.xml", _openi_xml("CXR10", {"COMPARISON": "", "FINDINGS": "", "IMPRESSION": "Stable."})
    )
    _write(folder / "2.xml", _openi_xml(None, {"FINDINGS": "Small right effusion.", "IMPRESSION": ""}))
    _write(folder / "3.xml", _openi_xml("CXR3", {"FINDINGS": "", "IMPRESSION": ""}))
    _write(folder / "readme.txt", "not a report")
    return root


def test_openi_reports(tmp_path: Path) -> None:
    loaded = load_openi(_openi_folder(tmp_path / "openi"))
    assert [r.report.id for r in loaded.reports] == ["CXR1", "2", "CXR10"]  # file-number order, 3.xml empty
    first = loaded.reports[0]
    assert first.report.findings == "The heart is normal in size. No focal consolidation."
    assert first.report.impression == "Normal chest."
    assert first.report.text.splitlines() == [
        "COMPARISON: None.",
        "INDICATION: Cough",
        "FINDINGS: The heart is normal in size. No focal consolidation.",
        "IMPRESSION: Normal chest.",
    ]
    assert (first.mesh_major, first.mesh_automatic, dict(first.report.codes)) == (
        ("normal",),
        ("auto term",),
        {},
    )
    assert loaded.reports[2].report.text == "IMPRESSION: Stable."
    assert "1 reports without FINDINGS or IMPRESSION text left out" in loaded.notes


def test_openi_with_a_labels_table_through_load_folder(tmp_path: Path) -> None:
    root = _openi_folder(tmp_path / "openi")
    labels = _write(tmp_path / "labels.csv", 'id,codes\nCXR1,"{""No Finding"": ""positive""}"\n')
    data = load_folder(root, labels=labels)
    assert data.source == "open-i"
    assert dict(data.reports[0].codes) == {"No Finding": "positive"}
    assert labels in data.files


@pytest.mark.parametrize(
    "xml",
    [
        '<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol"><!ENTITY lol2 "&lol;&lol;">]>\n'
        "<eCitation>&lol2;</eCitation>",
        '<?xml version="1.0"?>\n<!DOCTYPE eCitation SYSTEM "file:///etc/passwd">\n<eCitation/>',
    ],
    ids=["entity-expansion", "external-doctype"],
)
def test_openi_refuses_doctype_and_entities(tmp_path: Path, xml: str) -> None:
    path = _write(tmp_path / "1.xml", xml)
    with pytest.raises(UserError, match=re.escape(f"{path}: the XML declares a DOCTYPE or an entity")):
        read_openi_xml(path)


def test_openi_malformed_and_foreign_xml(tmp_path: Path) -> None:
    path = _write(tmp_path / "1.xml", "<eCitation>\n<uId id='x'>\n</eCitation>\n")
    with pytest.raises(UserError, match=re.escape(f"{path}:3: malformed XML (mismatched tag)")):
        read_openi_xml(path)
    path = _write(tmp_path / "2.xml", "<record/>")
    with pytest.raises(UserError, match=re.escape(f"{path}: the root element is <record>, not <eCitation>")):
        read_openi_xml(path)


def test_openi_duplicate_ids(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    _write(folder / "1.xml", _openi_xml("CXR1", {"FINDINGS": "a"}))
    _write(folder / "2.xml", _openi_xml("CXR1", {"FINDINGS": "b"}))
    with pytest.raises(UserError, match=re.escape(f"{folder / '2.xml'}: report id 'CXR1' is also the id of")):
        load_openi(folder)


# -------------------------------------------------------------------------------- splits


def _sentences(n: int) -> list[SentenceItem]:
    return [SentenceItem(f"id{i}", f"s{i}", CHEST) for i in range(n)]  # distinct: copies share a split


def test_splits_are_7_1_2_deterministic_and_order_free() -> None:
    items = _sentences(1000)
    out, info = assign_splits(items, seed=5)
    assert dict(info.counts) == {"train": 700, "validation": 100, "test": 200}
    assert [i.id for i in out] == [i.id for i in items]
    shuffled = items[:]
    random.Random(1).shuffle(shuffled)
    again, _ = assign_splits(shuffled, seed=5)
    assert {i.id: i.split for i in again} == {i.id: i.split for i in out}
    other, _ = assign_splits(items, seed=6)
    assert [i.split for i in other] != [i.split for i in out]
    assert info.to_json() == {
        "method": "grouped by report and de-duplicated, seeded 7:1:2",
        "seed": 5,
        "shares": {"train": 7, "validation": 1, "test": 2},
        "counts": {"train": 700, "validation": 100, "test": 200},
        "from_data": 0,
        "assigned": 1000,
        "groups": 1000,
        "duplicates_across_splits": {"test_in_train": 0, "validation_in_train": 0},
        "reports_across_splits": 0,
        "boilerplate": {"more_than_reports": 5, "texts": 0, "items": 0},
        "reports_sharing_text_with_train": {"test": 0, "validation": 0},
        "shared_texts_cut": 0,
    }


@pytest.mark.parametrize(("n", "counts"), [(10, (7, 1, 2)), (3, (2, 0, 1)), (1, (1, 0, 0)), (0, (0, 0, 0))])
def test_split_rounding(n: int, counts: tuple[int, int, int]) -> None:
    _, info = assign_splits(_sentences(n), seed=0)
    assert tuple(info.counts.values()) == counts


def test_splits_keep_the_sources_own() -> None:
    items = [replace(i, split="test") for i in _sentences(4)]
    out, info = assign_splits(items, seed=0)
    assert [i.split for i in out] == ["test"] * 4
    assert (info.method, info.from_data, info.assigned) == ("from the data", 4, 0)
    with pytest.raises(UserError, match="id 'a' appears twice"):
        assign_splits([SentenceItem("a", "s", CHEST), SentenceItem("a", "t", CHEST)], seed=0)


def test_report_sentences_inherit_the_report_split() -> None:
    report = ReportItem(
        "r1", "t", CHEST, findings="No effusion. Heart normal.", impression="Normal.", split="test"
    )
    out = report_sentences(report)
    assert [(s.id, s.sentence, s.split) for s in out] == [
        ("r1-f1", "No effusion.", "test"),
        ("r1-f2", "Heart normal.", "test"),
        ("r1-i1", "Normal.", "test"),
    ]


# -------------------------------------------------------------- the synthetic corpus


def _without_source(data: MedEvalData) -> tuple[list[SentenceItem], list[ReportItem]]:
    return [replace(s, source="") for s in data.sentences], [replace(r, source="") for r in data.reports]


def test_synthetic_corpus_is_deterministic_by_seed() -> None:
    a, b, c = build_corpus(1, 300, 200), build_corpus(1, 300, 200), build_corpus(2, 300, 200)
    assert a == b
    assert a.sentences != c.sentences and a.reports != c.reports
    assert build_corpus(1, 50, 20).sentences == a.sentences[:50]  # a larger corpus starts with the smaller


@pytest.mark.parametrize("fmt", ["jsonl", "csv"])
def test_synthetic_files_are_byte_identical_and_round_trip(tmp_path: Path, fmt: str) -> None:
    corpus = build_corpus(7, 400, 250)
    one = write_corpus(corpus, tmp_path / "one", fmt=fmt)  # type: ignore[arg-type]
    two = write_corpus(build_corpus(7, 400, 250), tmp_path / "two", fmt=fmt)  # type: ignore[arg-type]
    other = write_corpus(build_corpus(8, 400, 250), tmp_path / "other", fmt=fmt)  # type: ignore[arg-type]
    names = sorted(p.name for p in one.iterdir())
    assert names == sorted(
        [
            "README.md",
            "manifest.json",
            "observations.json",
            f"synthetic-reports.{fmt}",
            f"synthetic-sentences.{fmt}",
        ]
    )
    for name in names:
        assert (one / name).read_bytes() == (two / name).read_bytes(), name
    assert (one / f"synthetic-reports.{fmt}").read_bytes() != (
        other / f"synthetic-reports.{fmt}"
    ).read_bytes()
    tables = load_folder(one, seed=7)
    assert tables.synthetic and "synthetic corpus (not MedEval's data)" in tables.describe()
    assert tables.observations == {d.name: d.codes for d in DOMAINS}
    sentences, reports = _without_source(tables)
    assert [replace(s, split=None) for s in sentences] == list(corpus.sentences)
    assert [replace(r, split=None) for r in reports] == list(corpus.reports)
    counts = tables.split_info()["sentences"]["counts"]
    # 7:1:2 within each domain (stratified), so rounding may move an item per domain
    assert sum(counts.values()) == 400
    wanted = {"train": 280, "validation": 40, "test": 80}
    assert all(abs(counts[s] - n) <= len(DOMAINS) for s, n in wanted.items())


def test_synthetic_folder_says_synthetic(tmp_path: Path) -> None:
    out = write_corpus(build_corpus(0, 20, 10), tmp_path / "synth")
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["synthetic"] is True and manifest["note"].startswith("synthetic — not MedEval's data")
    assert "not MedEval's data" in (out / "README.md").read_text(encoding="utf-8")
    assert all(s.id.startswith("synthetic-") for s in build_corpus(0, 20, 10).sentences)


def test_synthetic_writer_refuses_to_overwrite(tmp_path: Path) -> None:
    corpus = build_corpus(0, 20, 10)
    target = tmp_path / "data"
    target.mkdir()
    write_corpus(corpus, target)  # an empty folder is fine
    with pytest.raises(UserError, match="already exists and is not empty"):
        write_corpus(corpus, target)
    write_corpus(build_corpus(1, 20, 10), target, overwrite=True)
    assert json.loads((target / "manifest.json").read_text(encoding="utf-8"))["seed"] == 1
    mine = tmp_path / "mine"
    mine.mkdir()
    _write(mine / "notes.txt", "keep me")
    with pytest.raises(UserError, match="is not a synthetic MedEval corpus"):
        write_corpus(corpus, mine, overwrite=True)
    assert (mine / "notes.txt").read_text(encoding="utf-8") == "keep me"


def test_synthetic_label_balance() -> None:
    corpus = build_corpus(0, 3000, 1500)
    sentences = corpus.sentences
    share = lambda n: n / len(sentences)  # noqa: E731
    assert 0.4 < share(sum(1 for s in sentences if s.abnormal)) < 0.6
    assert 0.25 < share(sum(1 for s in sentences if s.ambiguous)) < 0.35
    for kind in ("jargon", "contradiction", "grammar"):
        assert 0.07 < share(sum(1 for s in sentences if s.ambiguity_kind == kind)) < 0.13, kind
    assert {s.domain for s in sentences} == {r.domain for r in corpus.reports} == {d.name for d in DOMAINS}
    assert len(DOMAINS) >= 6 and DOMAINS[0].name == CHEST
    for s in sentences:
        assert (s.rewrite is not None) == (s.ambiguity_kind is not None) == bool(s.ambiguous)
        assert s.rewrite != s.sentence and s.abnormal is not None
    chest = [r for r in corpus.reports if r.domain == CHEST]
    values = {v for r in chest for v in r.codes.values()}
    assert values == {"positive", "negative", "unknown"}
    normal = sum(1 for r in chest if r.codes.get("No Finding") == "positive")
    assert 0.2 < normal / len(chest) < 0.5


def test_synthetic_domains_are_consistent() -> None:
    assert DOMAINS[0].codes == CHEXPERT_OBSERVATIONS and DOMAINS[1].codes == FOOT_ANKLE_CODES
    for domain in DOMAINS:
        assert "No Finding" in domain.codes
        named = {f.code for f in domain.findings} | {n.negates for n in domain.normals if n.negates}
        named |= {c for n in domain.normals for c in n.excludes} | {c for g in domain.exclusive for c in g}
        assert named <= set(domain.codes), domain.name
        assert any(n.rewrite for n in domain.normals), domain.name


_PRIOR = r"(?P<prior>the [\w ]+ of [A-Z][a-z]+ \d+, \d{4})"
_COMPARED = re.compile(
    rf"(?:(?:Compared|In comparison) with {_PRIOR}, (?P<head>.+)"
    rf"|(?P<tail>.+), compared with {_PRIOR.replace('prior', 'p2')})\."
)
"""An impression item set against the prior study, either way :mod:`.synth.reports` writes it."""


def test_synthetic_reports_are_coded_and_summarized_faithfully() -> None:
    corpus = build_corpus(3, 0, 800)
    by_name = {d.name: d for d in DOMAINS}
    for report in corpus.reports:
        domain = by_name[report.domain]
        parsed = parse_sections(report.text)
        assert (parsed.findings, parsed.impression) == (report.findings, report.impression)
        pathology = {f.code for f in domain.findings if f.pathology}
        found = {c for c, v in report.codes.items() if v in ("positive", "unknown") and c in pathology}
        assert (report.codes.get("No Finding") == "positive") == (not found), report.id
        for sentence in split_sentences(report.impression):
            m = _COMPARED.fullmatch(sentence)
            if m:  # set against a prior study, which the findings name
                assert (m["prior"] or m["p2"]) in report.findings, (report.id, sentence)
                sentence = (m["head"] or m["tail"]) + "."
                sentence = sentence[:1].upper() + sentence[1:]
            if sentence == domain.clean:
                assert not found
                continue
            claim = sentence.removeprefix("Possible ").rstrip(".").lower()
            assert claim in report.findings.lower(), (report.id, sentence)
        for sentence in split_sentences(report.findings):
            assert sentence.endswith("."), (report.id, sentence)


@pytest.mark.parametrize(("sentences", "reports"), [(600, 300), (2000, 1000)], ids=["demo", "default"])
def test_synthetic_impressions_are_rarely_equal_across_splits(
    tmp_path: Path, sentences: int, reports: int
) -> None:
    """A test impression equal to a train one is a summary learnt by heart; it was 23 of 60 on
    the demo corpus when a third of the impressions were the domain's clean line."""
    write_synthetic(tmp_path / "synth", seed=0, sentences=sentences, reports=reports)
    data = load_folder(tmp_path / "synth", seed=0)
    key = lambda text: " ".join(text.lower().split()).strip(".")  # noqa: E731
    train = {key(r.impression) for r in data.reports if r.split == "train"}
    test = [r for r in data.reports if r.split == "test"]
    assert sum(key(r.impression) in train for r in test) < 0.05 * len(test)
    info = data.split_info()["reports"]
    assert info["reports_across_splits"] == 0 and info["boilerplate"]["texts"] > 0
    assert info["reports_sharing_text_with_train"]["test"] <= 0.2 * len(test)


def test_synthetic_corpus_is_fast() -> None:
    start = time.perf_counter()
    build_corpus(0, 3000, 2000)
    assert time.perf_counter() - start < 3.0  # about 0.2 s here; the bound leaves room for a busy machine
