"""MedEval's rule-based report labeller: CheXpert's public sample reproduced byte for byte, the
negation / uncertainty / unmention / No Finding rules on hand-written reports, the foot/ankle rules
file, and every bad input (rules files, phrase lists, report CSVs) as one error naming the place."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
import warnings
from pathlib import Path

import pytest

from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS, FOOT_ANKLE_CODES, CodeValue
from clinieval.benchmarks.medeval.labeller import Labeller, label_csv, load_rules_file, read_reports, rules
from clinieval.benchmarks.medeval.labeller.rules import RULES_DIR
from clinieval.errors import UserError
from tests.conftest import need_shared


@pytest.fixture(scope="module")
def chexpert_dir() -> Path:
    return need_shared("chexpert-labeler")


@pytest.fixture(scope="module")
def chest(chexpert_dir: Path) -> Labeller:
    return Labeller("chest x-ray", chexpert=chexpert_dir)


@pytest.fixture(scope="module")
def foot() -> Labeller:
    return Labeller("foot/ankle x-ray")


def found(labeller: Labeller, report: str) -> dict[str, CodeValue]:
    """The codes the report mentions (absent ones left out, to keep the expectations short)."""
    (labels,) = labeller.label([report])
    return {code: value for code, value in labels.items() if value != "absent"}


# --- the CheXpert labeler's public sample --------------------------------------------------


def test_reproduces_labeled_reports_exactly(chexpert_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "labels.csv"
    assert label_csv(chexpert_dir / "sample_reports.csv", out, chexpert=chexpert_dir) == 4
    gold = chexpert_dir / "labeled_reports.csv"
    with out.open(newline="", encoding="utf-8") as f, gold.open(newline="", encoding="utf-8") as g:
        assert list(csv.reader(f)) == list(csv.reader(g))  # a readable diff first, then the bytes
    assert out.read_bytes() == gold.read_bytes()
    assert [p.name for p in tmp_path.iterdir()] == ["labels.csv"]


def test_a_header_row_named_reports_is_not_a_report(chexpert_dir: Path, tmp_path: Path) -> None:
    sample = chexpert_dir / "sample_reports.csv"
    with_header = tmp_path / "with_header.csv"
    with_header.write_bytes(b"Reports\n" + sample.read_bytes())
    assert read_reports(with_header) == read_reports(sample)
    assert len(read_reports(sample)) == 4


# --- the rules, on hand-written chest reports -----------------------------------------------


@pytest.mark.parametrize(
    "report",
    ["No pneumothorax.", "There is no pneumothorax.", "Pneumothorax is not seen.", "Without pneumothorax."],
)
def test_negation(chest: Labeller, report: str) -> None:
    assert found(chest, report) == {"No Finding": "positive", "Pneumothorax": "negative"}


def test_negation_stops_at_but_and_at_a_blank_line(chest: Labeller) -> None:
    expected = {"Pneumothorax": "negative", "Pleural Effusion": "positive"}
    assert found(chest, "No pneumothorax, but there is a small left pleural effusion.") == expected
    assert found(chest, "No pneumothorax\n\nSmall left pleural effusion") == expected
    # a single line break is a wrapped line, the same sentence
    assert found(chest, "No pneumothorax or pleural\neffusion.")["Pleural Effusion"] == "negative"


@pytest.mark.parametrize(
    "report", ["May represent pneumonia.", "Possible left lower lobe pneumonia.", "Pneumonia is suspected."]
)
def test_uncertainty(chest: Labeller, report: str) -> None:
    assert found(chest, report) == {"Pneumonia": "unknown"}


@pytest.mark.parametrize("report", ["Pneumonia cannot be excluded.", "Cannot rule out pneumonia."])
def test_uncertainty_that_holds_a_negation_is_uncertain(chest: Labeller, report: str) -> None:
    assert found(chest, report) == {"Pneumonia": "unknown"}


def test_normal_negates_the_structure_it_describes_only(chest: Labeller) -> None:
    assert found(chest, "Heart size normal.")["Cardiomegaly"] == "negative"
    assert found(chest, "The heart is normal in size.")["Cardiomegaly"] == "negative"
    assert found(chest, "Cardiomegaly with normal pulmonary vasculature.") == {"Cardiomegaly": "positive"}


def test_stable_makes_a_structure_uncertain_but_not_a_finding(chest: Labeller) -> None:
    assert found(chest, "Stable cardiac silhouette.") == {"Cardiomegaly": "unknown"}
    assert found(chest, "Stable mild cardiomegaly.") == {"Cardiomegaly": "positive"}


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("Calcified nodule in the right upper lobe.", {}),  # lung_lesion unmention
        ("Massive left pleural effusion.", {"Pleural Effusion": "positive"}),  # "mass" in "massive"
        ("Small pericardial effusion.", {"No Finding": "positive"}),  # pleural_effusion unmention
        ("Pacer leads over the heart.", {"No Finding": "positive", "Support Devices": "positive"}),
    ],
)
def test_unmention_phrases_cancel_what_looks_like_a_mention(
    chest: Labeller, report: str, expected: dict[str, CodeValue]
) -> None:
    assert found(chest, report) == expected


def test_no_finding(chest: Labeller) -> None:
    # nothing affirmed but support devices: No Finding
    assert found(chest, "Endotracheal tube in place. No effusion.")["No Finding"] == "positive"
    # an uncertain observation, or a finding without a column of its own, rules it out
    assert "No Finding" not in found(chest, "Possible small effusion.")
    assert found(chest, "Emphysema.") == {}
    assert found(chest, "No emphysema.") == {"No Finding": "positive"}


def test_a_code_mentioned_twice_takes_its_strongest_value(chest: Labeller) -> None:
    report = "No pneumothorax on the left. Small right apical pneumothorax."
    assert found(chest, report)["Pneumothorax"] == "positive"
    assert (
        found(chest, "No effusion on the left. Possible effusion on the right.")["Pleural Effusion"]
        == "unknown"
    )


def test_heart_failure_raises_the_question_of_cardiomegaly(chest: Labeller) -> None:
    assert found(chest, "Findings consistent with CHF.") == {"Edema": "positive", "Cardiomegaly": "unknown"}
    assert found(chest, "Mild pulmonary vascular congestion.") == {"Edema": "unknown"}  # a hedged phrase


def test_indication_and_comparison_sections_state_no_findings(chest: Labeller) -> None:
    report = (
        "INDICATION: Fever, evaluate for pneumonia.\n\nCOMPARISON: Prior study showing pneumothorax.\n\n"
        "FINDINGS: No pleural effusion.\n\nIMPRESSION: Mild cardiomegaly."
    )
    assert found(chest, report) == {"Pleural Effusion": "negative", "Cardiomegaly": "positive"}


def test_building_a_labeller_leaves_warnings_on(chest: Labeller) -> None:
    """medspaCy switches every warning off when imported; the labeller undoes that."""
    with pytest.warns(UserWarning, match="still heard"):
        warnings.warn("still heard", UserWarning, stacklevel=1)


def test_importing_the_labeller_loads_neither_spacy_nor_medspacy() -> None:
    code = (
        "import sys, clinieval.benchmarks.medeval.labeller; "
        "print(sorted(m for m in ('spacy', 'medspacy') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


# --- the foot/ankle rules file ------------------------------------------------------------------


def test_foot_ankle_rules_have_medevals_codes(foot: Labeller) -> None:
    assert foot.codes == FOOT_ANKLE_CODES


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        (
            "No acute fracture or dislocation.",
            {"Fracture": "negative", "Dislocation": "negative", "No Finding": "positive"},
        ),
        (
            "Hallux valgus. Moderate first MTP osteoarthritis.",
            {"Hallux Valgus": "positive", "Arthritis": "positive"},
        ),
        ("Status post ORIF with plate and screws.", {"Hardware": "positive", "No Finding": "positive"}),
        ("Open growth plates. No fracture.", {"Fracture": "negative", "No Finding": "positive"}),
        (
            "Soft tissue swelling concerning for osteomyelitis.",
            {"Swelling": "positive", "Osteomyelitis": "unknown"},
        ),
        ("Joint space narrowing at the first MTP joint.", {"Arthritis": "unknown"}),  # hedged
        ("Hammer-toe deformities of the lesser toes.", {"Hammer Toe": "positive"}),
        ("Mild osteopenia.", {}),  # another finding: no column, but no No Finding either
    ],
)
def test_foot_ankle_rules(foot: Labeller, report: str, expected: dict[str, CodeValue]) -> None:
    assert found(foot, report) == expected


# --- bad rules files and phrase lists -----------------------------------------------------

KNEE_CODES = {"Effusion": {"mention": ["effusion*"]}, "Hardware": {"mention": ["screw*"]}, "No Finding": {}}


def effusion(entry: object) -> dict[str, object]:
    """The knee codes with Effusion's entry replaced."""
    return {"codes": {**KNEE_CODES, "Effusion": entry}}


def rules_file(tmp_path: Path, **changes: object) -> Path:
    data: dict[str, object] = {
        "format": "clinieval-labeller-rules/1",
        "domain": "knee x-ray",
        "no_finding": {"code": "No Finding", "ignore": ["Hardware"]},
        "codes": KNEE_CODES,
    }
    data.update(changes)
    path = tmp_path / "knee.json"
    path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    return path


def test_a_rules_file_of_ones_own(tmp_path: Path) -> None:
    labeller = Labeller("knee x-ray", rules_file=rules_file(tmp_path))
    assert labeller.codes == ("Effusion", "Hardware", "No Finding")
    assert found(labeller, "Small joint effusion. Screw in the tibia.") == {
        "Effusion": "positive",
        "Hardware": "positive",
    }


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"format": "v0"}, "field 'format' should be 'clinieval-labeller-rules/1'"),
        (effusion({"mention": ["eff(usion"]}), "codes.Effusion.mention[0]: 'eff(usion'"),
        (effusion({"mention": [""]}), "codes.Effusion.mention[0]: a phrase must be a non-empty"),
        (effusion({"mentions": ["effusion"]}), "codes.Effusion: unknown field 'mentions'"),
        (effusion({"mention": "effusion"}), "codes.Effusion.mention: expected a list"),
        (effusion({}), "codes.Effusion has no mention phrases"),
        (effusion(["effusion"]), "codes.Effusion: expected an object"),
        ({"no_finding": {"code": "Normal"}}, "no_finding.code 'Normal' is not one of the codes"),
        ({"no_finding": {"code": "No Finding", "ignore": ["Pins"]}}, "no_finding.ignore names 'Pins'"),
        (
            {"codes": {**KNEE_CODES, "No Finding": {"mention": ["normal"]}}},
            "codes.No Finding must have no phrases",
        ),
    ],
)
def test_a_bad_rules_file_is_one_error_naming_the_field(
    tmp_path: Path, changes: dict[str, object], message: str
) -> None:
    path = rules_file(tmp_path, **changes)
    with pytest.raises(UserError) as e:
        load_rules_file(path)
    assert str(e.value).startswith(f"{path}: ") and message in str(e.value)
    assert "\n" not in str(e.value)


def test_a_rules_file_that_is_not_json_names_line_and_column(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text('{\n  "format": "clinieval-labeller-rules/1",\n  "codes": {,}\n}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.json:3:\d+: not valid JSON"):
        load_rules_file(path)
    with pytest.raises(UserError, match="rules file not found"):
        load_rules_file(tmp_path / "missing.json")


def test_the_packaged_rules_file_loads_and_covers_every_code() -> None:
    rules = load_rules_file(RULES_DIR / "foot_ankle.json")
    assert rules.domain == "foot/ankle x-ray"
    assert set(rules.mentions) >= set(FOOT_ANKLE_CODES) - {"No Finding"}


def phrase_lists(root: Path) -> Path:
    """A CheXpert-shaped phrases folder written here: each observation's own name as its phrase."""
    for name in CHEXPERT_OBSERVATIONS:
        path = root / "phrases" / "mention" / f"{name.lower().replace(' ', '_')}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(name.lower() + "\n", encoding="utf-8")
    return root


def test_phrase_lists_of_ones_own(tmp_path: Path) -> None:
    labeller = Labeller("chest x-ray", chexpert=phrase_lists(tmp_path))
    assert found(labeller, "No pneumothorax. Fracture of the left sixth rib.") == {
        "Pneumothorax": "negative",
        "Fracture": "positive",
    }


def test_a_bad_phrase_names_its_file_and_line(tmp_path: Path) -> None:
    bad = phrase_lists(tmp_path) / "phrases" / "mention" / "edema.txt"
    bad.write_text("edema\ninterstitial (edema\n", encoding="utf-8")
    with pytest.raises(
        UserError, match=r"edema\.txt:2: 'interstitial \(edema' is not a valid regular expression"
    ):
        Labeller("chest x-ray", chexpert=tmp_path)


def test_a_phrase_file_for_no_observation_is_named(tmp_path: Path) -> None:
    stray = phrase_lists(tmp_path) / "phrases" / "mention" / "pneumonitis.txt"
    stray.write_text("pneumonitis\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"pneumonitis\.txt: 'Pneumonitis' is not one of the 14"):
        Labeller("chest x-ray", chexpert=tmp_path)


def test_a_folder_without_phrase_lists_says_what_to_pass(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="no phrases/mention folder; point --chexpert at"):
        Labeller("chest x-ray", chexpert=tmp_path)


def test_without_phrase_lists_beside_the_checkout_the_error_says_what_to_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(rules, "DEFAULT_CHEXPERT", tmp_path / "nowhere")
    reports = tmp_path / "reports.csv"
    reports.write_text("No effusion.\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"no CheXpert phrase lists: pass --chexpert DIR"):
        label_csv(reports, tmp_path / "out.csv")
    assert not (tmp_path / "out.csv").exists()


def test_an_unknown_domain_lists_the_known_ones() -> None:
    with pytest.raises(UserError, match="known: chest x-ray, foot/ankle x-ray"):
        Labeller("brain mri")


# --- bad report CSVs: one error naming file and line, and no output --------------------------


@pytest.mark.parametrize(
    ("content", "message"),
    [
        (None, "reports file not found"),
        (b"", "no reports"),
        (b"Reports\n\n", "no reports"),
        (b"Reports\nNo effusion.\n,second column only\n", r":3: column 1 is empty"),
        (b"No effusion.\nNo pneumothorax \xff.\n", r":2: the line is not UTF-8"),
        (b'No effusion.\n"an open quote\n', r":2: not readable as CSV"),
    ],
)
def test_a_bad_reports_csv_is_one_error_and_writes_nothing(
    tmp_path: Path, content: bytes | None, message: str
) -> None:
    reports = tmp_path / "reports.csv"
    if content is not None:
        reports.write_bytes(content)
    out = tmp_path / "out" / "labels.csv"
    with pytest.raises(UserError, match=message) as e:
        label_csv(reports, out, chexpert=phrase_lists(tmp_path / "chexpert"))
    assert str(e.value).startswith(str(reports)) and "\n" not in str(e.value)
    assert not out.parent.exists() or not any(out.parent.iterdir())
