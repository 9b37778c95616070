"""MedEval's rule-based labeller on its hand-written development set (tests/data/medeval-labeller-dev.jsonl,
conventions in tests/data/medeval-labeller-dev.md): agreement thresholds, one test per class of error
found on real reports (normal heart and mediastinum read as enlarged, "not significantly enlarged",
Open-i's XXXX, hedges read as certain, hedges reaching too far), and the CheXpert labeler's pattern
files driving which ConText triggers are on."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

import pytest

from clinieval.benchmarks.medeval.items import CHEXPERT_NUMBERS, CHEXPERT_OBSERVATIONS, CodeValue
from clinieval.benchmarks.medeval.labeller import Labeller
from tests.conftest import need_shared

DEV_SET = Path(__file__).parent / "data" / "medeval-labeller-dev.jsonl"
NUMBER = {None: "", 1.0: "1.0", 0.0: "0.0", -1.0: "-1.0"}
KNOWN_TAGS = {
    "mention", "neg", "neg-list", "neg-after", "normal", "normal-over-stable", "not-significant", "resolved",
    "xxxx", "hedge", "hedge-first", "hedge-or", "hedged-phrase", "chf", "stable-structure", "stable-finding",
    "strongest", "old-fracture", "likely-not-hedge", "nf", "nf-blocked", "nf-other", "no-phrase", "unmention",
    "place", "section",
}  # fmt: skip


def dev_items() -> list[dict[str, object]]:
    with DEV_SET.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def chexpert_dir() -> Path:
    return need_shared("chexpert-labeler")


@pytest.fixture(scope="module")
def chest(chexpert_dir: Path) -> Labeller:
    return Labeller("chest x-ray", chexpert=chexpert_dir)


def found(labeller: Labeller, report: str) -> dict[str, CodeValue]:
    (labels,) = labeller.label([report])
    return {code: value for code, value in labels.items() if value != "absent"}


# --- the development set ----------------------------------------------------------------------


def test_the_dev_set_is_well_formed() -> None:
    items = dev_items()
    assert len(items) >= 150
    assert len({i["id"] for i in items}) == len(items)
    for item in items:
        labels, why = item["labels"], item["why"]
        assert isinstance(labels, dict) and isinstance(why, dict)
        assert list(labels) == list(CHEXPERT_OBSERVATIONS), item["id"]
        assert all(v in NUMBER for v in labels.values()), item["id"]
        assert all(c in why for c, v in labels.items() if v is not None), (
            f"{item['id']}: a label without a why"
        )
        assert set(why.values()) <= KNOWN_TAGS, item["id"]
        # CheXpert's No Finding: 1 only when nothing but Support Devices is positive or uncertain
        affirmed = [
            c for c, v in labels.items() if v in (1.0, -1.0) and c not in ("No Finding", "Support Devices")
        ]
        assert labels["No Finding"] in (1.0, None), item["id"]
        assert not (labels["No Finding"] == 1.0 and affirmed), item["id"]


def cell_misses(
    items: list[dict[str, object]], predicted: list[dict[str, CodeValue]]
) -> tuple[list[str], int, int]:
    """Per report, every cell the labeller got wrong ("id: Cardiomegaly: 0.0 -> 1.0; ..."), with the
    cells right and the reports exact."""
    right = exact = 0
    wrong = []
    for item, labels in zip(items, predicted, strict=True):
        gold = item["labels"]
        assert isinstance(gold, dict)
        misses = [
            f"{code}: {NUMBER[gold[code]] or 'blank'} -> {CHEXPERT_NUMBERS[labels[code]] or 'blank'}"
            for code in CHEXPERT_OBSERVATIONS
            if CHEXPERT_NUMBERS[labels[code]] != NUMBER[gold[code]]
        ]
        right += len(CHEXPERT_OBSERVATIONS) - len(misses)
        exact += not misses
        if misses:
            wrong.append(f"{item['id']}: {'; '.join(misses)}")
    return wrong, right, exact


@pytest.fixture(scope="module")
def dev_predicted(chest: Labeller) -> list[dict[str, CodeValue]]:
    return chest.label([str(i["report"]) for i in dev_items()])


def test_dev_set_agreement(dev_predicted: list[dict[str, CodeValue]]) -> None:
    items = dev_items()
    wrong, right, exact = cell_misses(items, dev_predicted)
    cells = len(items) * len(CHEXPERT_OBSERVATIONS)
    detail = "\n".join(wrong)
    assert right / cells >= 0.995, f"{right}/{cells} cells\n{detail}"
    assert exact / len(items) >= 0.95, f"{exact}/{len(items)} reports exact\n{detail}"


def test_the_dev_set_cell_by_cell(dev_predicted: list[dict[str, CodeValue]]) -> None:
    """Every cell as labelled: a rule change that loses one, even above the thresholds, fails here
    and names it."""
    items = dev_items()
    wrong, right, exact = cell_misses(items, dev_predicted)
    cells = len(items) * len(CHEXPERT_OBSERVATIONS)
    assert not wrong, f"{right}/{cells} cells, {exact}/{len(items)} reports exact\n" + "\n".join(wrong)


def test_the_labeller_keeps_up_30_reports_a_second(chest: Labeller) -> None:
    reports = [str(i["report"]) for i in dev_items()]
    chest.label(reports[:20])
    start = time.perf_counter()
    chest.label(reports)
    assert len(reports) / (time.perf_counter() - start) >= 30


# --- the classes of error seen on real reports ------------------------------------------------


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("The cardiomediastinal silhouette is within normal limits for size and contour.",
         {"EC": "negative"}),
        ("Normal heart size and mediastinal contour.", {"CM": "negative", "EC": "negative"}),
        ("Normal heart size, mediastinal contours, and pulmonary vascularity.",
         {"CM": "negative", "EC": "negative"}),
        ("Heart size, mediastinal contour, and pulmonary vascularity are within normal limits.",
         {"CM": "negative", "EC": "negative"}),
        ("The heart is normal in size and contour.", {"CM": "negative", "EC": "negative"}),
        ("Mediastinal contour is stable and normal.", {"EC": "negative"}),
        ("The cardiomediastinal silhouette is unremarkable and unchanged.", {"EC": "negative"}),
        ("The heart size is borderline normal.", {"CM": "negative"}),
    ],
)  # fmt: skip
def test_a_normal_heart_and_mediastinum_is_negative_and_no_finding(
    chest: Labeller, report: str, expected: dict[str, CodeValue]
) -> None:
    names = {"CM": "Cardiomegaly", "EC": "Enlarged Cardiomediastinum"}
    assert found(chest, report) == {"No Finding": "positive", **{names[k]: v for k, v in expected.items()}}


@pytest.mark.parametrize(
    ("report", "code", "value"),
    [
        ("The heart is enlarged and the mediastinal contours are normal.", "Cardiomegaly", "positive"),
        ("Normal heart size with widening of the mediastinum.", "Enlarged Cardiomediastinum", "positive"),
        ("Lungs normal, heart size enlarged.", "Cardiomegaly", "positive"),
        ("Normal heart size with a small left pleural effusion.", "Pleural Effusion", "positive"),
        ("The heart size is stable, the mediastinal contour is normal.", "Cardiomegaly", "unknown"),
    ],
)
def test_a_normality_statement_stops_at_what_it_does_not_describe(
    chest: Labeller, report: str, code: str, value: CodeValue
) -> None:
    assert found(chest, report)[code] == value


@pytest.mark.parametrize(
    "report",
    [
        "The heart is not significantly enlarged.",
        "The cardiac silhouette is not appreciably enlarged.",
        "Heart size is not significantly increased.",
        "Heart size is not significantly changed and remains normal.",
    ],
)
def test_not_significantly_enlarged_is_negative(chest: Labeller, report: str) -> None:
    assert found(chest, report) == {"No Finding": "positive", "Cardiomegaly": "negative"}


def test_the_mediastinum_not_widened_is_negative(chest: Labeller) -> None:
    assert found(chest, "The mediastinum is not widened.") == {
        "No Finding": "positive",
        "Enlarged Cardiomediastinum": "negative",
    }


@pytest.mark.parametrize(
    ("report", "code"),
    [
        ("The lungs are clear XXXX focal airspace disease.", "Lung Opacity"),
        ("Lungs are clear XXXX focal consolidation.", "Consolidation"),
        ("Lungs are clear XXXX pneumothorax or effusion.", "Pneumothorax"),
    ],
)
def test_open_i_xxxx_after_clear_reads_as_without(chest: Labeller, report: str, code: str) -> None:
    labels = found(chest, report)
    assert labels[code] == "negative" and labels["No Finding"] == "positive"


@pytest.mark.parametrize(
    ("report", "code"),
    [
        ("Heart size is borderline.", "Cardiomegaly"),
        ("The heart is borderline enlarged.", "Cardiomegaly"),
        ("Lower lung opacity is questionable.", "Lung Opacity"),
        ("Pneumonia is considered less likely.", "Pneumonia"),
    ],
)
def test_a_hedge_after_its_mention_is_uncertain(chest: Labeller, report: str, code: str) -> None:
    assert found(chest, report) == {code: "unknown"}


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("Mild bibasilar atelectasis, with superimposed infection not excluded.",
         {"Atelectasis": "positive", "Pneumonia": "unknown"}),
        ("Persistent left retrocardiac opacity, atelectasis versus pneumonia.",
         {"Lung Opacity": "positive", "Atelectasis": "unknown", "Pneumonia": "unknown"}),
    ],
)  # fmt: skip
def test_a_hedge_reaches_its_own_mention_only(
    chest: Labeller, report: str, expected: dict[str, CodeValue]
) -> None:
    assert found(chest, report) == expected


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("Stable enlargement of the cardiac silhouette.", {"Cardiomegaly": "positive"}),
        ("Enlarged cardiac silhouette, unchanged from prior.", {"Cardiomegaly": "positive"}),
        ("No significant interval change in the cardiomediastinal silhouette.",
         {"Enlarged Cardiomediastinum": "unknown"}),
        ("Stable cardiomegaly without significant change in the small right pleural effusion.",
         {"Cardiomegaly": "positive", "Pleural Effusion": "positive"}),
    ],
)  # fmt: skip
def test_stable_with_a_stated_size_is_positive_and_no_change_is_no_negation(
    chest: Labeller, report: str, expected: dict[str, CodeValue]
) -> None:
    assert found(chest, report) == expected


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("Resolved right upper lobe pneumonia.", {"No Finding": "positive", "Pneumonia": "negative"}),
        ("Absent pneumothorax.", {"No Finding": "positive", "Pneumothorax": "negative"}),
        ("The left pleural effusion has resolved, chest tube remains in place.",
         {"No Finding": "positive", "Pleural Effusion": "negative", "Support Devices": "positive"}),
    ],
)  # fmt: skip
def test_resolved_before_or_after_its_mention(
    chest: Labeller, report: str, expected: dict[str, CodeValue]
) -> None:
    assert found(chest, report) == expected


@pytest.mark.parametrize(
    ("report", "expected"),
    [
        ("Pacer leads overlie the heart.", {"No Finding": "positive", "Support Devices": "positive"}),
        ("Platelike atelectasis in the left lower lobe.", {"Atelectasis": "positive"}),
        ("Linear plate-like atelectasis at the right base.", {"Atelectasis": "positive"}),
    ],
)
def test_look_alikes_are_no_mentions(chest: Labeller, report: str, expected: dict[str, CodeValue]) -> None:
    assert found(chest, report) == expected


@pytest.mark.parametrize(
    ("report", "value"),
    [
        ("No displaced rib fractures.", "negative"),
        ("No acute rib fracture is identified.", "negative"),
        ("Healed right rib fractures.", "positive"),
        ("Old right rib fracture. No acute fracture.", "positive"),
    ],
)
def test_fractures_negated_and_old(chest: Labeller, report: str, value: CodeValue) -> None:
    assert found(chest, report)["Fracture"] == value


# --- the pattern files drive the ConText triggers ---------------------------------------------


def test_every_word_of_the_pattern_files_has_a_lexicon_entry(chexpert_dir: Path) -> None:
    from clinieval.benchmarks.medeval.labeller.modifiers import unknown_words
    from clinieval.benchmarks.medeval.labeller.patterns import read_vocabulary

    vocabulary = read_vocabulary(chexpert_dir / "patterns")
    assert unknown_words(vocabulary) == {name: [] for name in vocabulary.words}
    assert {"heart", "silhouette", "contour", "mediastinum"} <= vocabulary.structures
    assert {"normal", "unremarkable", "limit", "not", "without"} <= vocabulary.words["negation.txt"]


def test_the_chest_labeller_reads_its_triggers_from_the_pattern_files(
    chest: Labeller, chexpert_dir: Path
) -> None:
    assert chest.rules.context.source == str(chexpert_dir / "patterns")


def test_one_literal_one_rule() -> None:
    """medspaCy keeps one of two triggers matching the same words: each literal is defined once."""
    from clinieval.benchmarks.medeval.labeller.modifiers import ADDITIONS, LEXICON

    rules: dict[tuple[str, str], object] = {}
    for table in LEXICON.values():
        for mods in table.values():
            for m in mods:
                assert rules.setdefault((m.literal.lower(), m.category), m) == m, m.literal
    literals = [m.literal.lower() for m in {*rules.values(), *ADDITIONS}]  # type: ignore[attr-defined]
    assert len(literals) == len(set(literals))


def copy_chexpert(src: Path, dst: Path) -> Path:
    shutil.copytree(src / "phrases", dst / "phrases")
    shutil.copytree(src / "patterns", dst / "patterns")
    return dst


def test_a_word_taken_out_of_the_negation_patterns_turns_its_triggers_off(
    chexpert_dir: Path, tmp_path: Path
) -> None:
    from clinieval.benchmarks.medeval.labeller.patterns import read_vocabulary

    root = copy_chexpert(chexpert_dir, tmp_path)
    negation = root / "patterns" / "negation.txt"
    text = negation.read_text(encoding="utf-8")
    negation.write_text(text.replace("|unremarkable", "").replace("unremarkable|", ""), encoding="utf-8")
    assert "unremarkable" not in read_vocabulary(root / "patterns").words["negation.txt"]
    report = "The cardiomediastinal silhouette is unremarkable."
    assert found(Labeller("chest x-ray", chexpert=root), report) == {"Enlarged Cardiomediastinum": "positive"}


def test_a_word_added_to_the_patterns_gets_a_trigger_of_its_own(chexpert_dir: Path, tmp_path: Path) -> None:
    root = copy_chexpert(chexpert_dir, tmp_path)
    post = root / "patterns" / "post_negation_uncertainty.txt"
    post.write_text(post.read_text(encoding="utf-8") + "\n{} > {} {lemma:/conceivable/}\n", encoding="utf-8")
    assert found(Labeller("chest x-ray", chexpert=root), "Conceivable small pneumothorax.") == {
        "Pneumothorax": "unknown"
    }


def test_without_the_patterns_folder_the_whole_lexicon_is_on(chexpert_dir: Path, tmp_path: Path) -> None:
    shutil.copytree(chexpert_dir / "phrases", tmp_path / "phrases")
    labeller = Labeller("chest x-ray", chexpert=tmp_path)
    assert labeller.rules.context.source == "the built-in lexicon"
    assert found(labeller, "Normal heart size and mediastinal contour.") == {
        "No Finding": "positive",
        "Cardiomegaly": "negative",
        "Enlarged Cardiomediastinum": "negative",
    }


def test_a_missing_pattern_file_is_named(chexpert_dir: Path, tmp_path: Path) -> None:
    from clinieval.errors import UserError

    root = copy_chexpert(chexpert_dir, tmp_path)
    (root / "patterns" / "negation.txt").unlink()
    with pytest.raises(UserError, match=r"negation\.txt: not found"):
        Labeller("chest x-ray", chexpert=root)
