"""The synthetic EHRNoteQA set.

The files are read back the way a user's own copy is (``read_discharge_notes``, the jsonl lines,
``format_notes``), and every answer is derived again here from the note *text* with plain string
parsing, never from the generator's timeline: if the builder (which works from coded events) and
these parsers agree, the answer is what a model reading the notes can find, and no distractor is
also right.
"""

from __future__ import annotations

import csv
import json
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import clinieval.benchmarks.ehrnoteqa.synth.writer as synth_set
from clinieval.benchmarks.ehrnoteqa.synth.question_kinds import CATEGORIES, KINDS
from clinieval.benchmarks.ehrnoteqa.synth.questions import SOURCES, questions_for
from clinieval.benchmarks.ehrnoteqa.synth.summaries import build_case
from clinieval.benchmarks.ehrnoteqa.synth.writer import CSV_COLUMNS, build_synthetic_set
from clinieval.context.tokenizers import tokenizer_from_spec
from clinieval.ehr.notes import (
    DischargeNote,
    format_notes,
    level_for,
    normalize_whitespace,
    read_discharge_notes,
)
from clinieval.ehr.synth import patient
from clinieval.errors import UserError

TOKENIZER = "tiktoken:cl100k_base"
REQUIRED = ("patient_id", "num_notes", "question", "choice_A", "choice_B", "choice_C", "choice_D", "choice_E")
MULTI_NOTE = {"prior_admission_diagnosis", "first_prescribed", "lab_change"}
DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass(frozen=True)
class Built:
    root: Path
    notes: dict[str, list[DischargeNote]]
    items: list[dict[str, Any]]
    manifest: dict[str, Any]

    def shown(self, pid: str) -> list[DischargeNote]:
        """The notes the model sees: the first three by chart time."""
        return sorted(self.notes[pid], key=lambda n: n.charttime)[:3]


def _load(root: Path) -> Built:
    notes = read_discharge_notes(root / "discharge.csv")
    items = [json.loads(line) for line in (root / "qa.jsonl").read_text(encoding="utf-8").splitlines()]
    manifest = json.loads((root / "manifest.json").read_text(encoding="utf-8"))
    return Built(root, notes, items, manifest)


@pytest.fixture(scope="module")
def default_set(tmp_path_factory: pytest.TempPathFactory) -> Built:
    root = tmp_path_factory.mktemp("ehrnoteqa") / "default"
    build_synthetic_set(root)
    return _load(root)


@pytest.fixture(scope="module")
def every_kind(tmp_path_factory: pytest.TempPathFactory) -> Built:
    """Every question that applies, over enough patients to hold one with four admissions."""
    root = tmp_path_factory.mktemp("ehrnoteqa") / "all"
    build_synthetic_set(root, patients=60, per_patient=None)
    return _load(root)


def _choices(item: dict[str, Any]) -> dict[str, str]:
    return {x: item[f"choice_{x}"] for x in "ABCDE"}


def _answer(item: dict[str, Any]) -> str:
    return str(item[f"choice_{item['answer']}"])


def _distractors(item: dict[str, Any]) -> list[str]:
    return [t for x, t in _choices(item).items() if x != item["answer"]]


# ------------------------------------------------------------------------------ note parsing


def _block(text: str, title: str) -> list[str]:
    """The lines of the blank-line separated section that starts with ``title``."""
    for block in text.split("\n\n"):
        if block.startswith(title):
            return block.splitlines()[1:]
    raise AssertionError(f"no {title} section")


def _line(text: str, prefix: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(prefix))


def _principal(text: str) -> str:
    return _line(text, "PRINCIPAL DIAGNOSIS: ").removeprefix("PRINCIPAL DIAGNOSIS: ").split(" (")[0]


def _discharge_meds(text: str) -> list[str]:
    return [re.sub(r"^\d+\. ", "", line).split(": ")[0] for line in _block(text, "DISCHARGE MEDICATIONS:")]


def _results(line: str) -> dict[str, str]:
    """``glucose 94 mg/dL; creatinine 1.04 mg/dL (high); ...`` as {name: "value unit"}."""
    out = {}
    for part in line.rstrip(".").split("; "):
        m = re.fullmatch(r"(.+?) (\d+(?:\.\d+)?) (\S+)(?: \((?:high|low)\))?", part.strip())
        assert m, part
        out[m[1]] = f"{m[2]} {m[3]}"
    return out


def _pertinent(text: str, which: str) -> dict[str, str]:
    return _results(_line(text, f"{which}: ").removeprefix(f"{which}: "))


def _table(text: str) -> list[dict[str, str]]:
    rows = [line for line in text.splitlines() if re.match(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2} \| ", line)]
    return [_results(row.split(" | ", 1)[1]) for row in rows]


def _note_on(built: Built, pid: str, date: str) -> tuple[int, DischargeNote]:
    shown = built.shown(pid)
    hits = [(i, n) for i, n in enumerate(shown) if n.charttime[:10] == date]
    assert len(hits) == 1, (pid, date)
    return hits[0]


def _one_date(item: dict[str, Any]) -> str:
    dates = DATE.findall(item["question"])
    assert len(dates) == 1, item["question"]
    return str(dates[0])


# Each checker derives the answer from the note text and checks that no distractor is also right.


def _check_principal(built: Built, item: dict[str, Any]) -> None:
    _, note = _note_on(built, str(item["patient_id"]), _one_date(item))
    assert _answer(item) == _principal(note.text)


def _check_prior(built: Built, item: dict[str, Any]) -> None:
    pid = str(item["patient_id"])
    i, _ = _note_on(built, pid, _one_date(item))
    assert i >= 1
    assert _answer(item) == _principal(built.shown(pid)[i - 1].text)


def _check_symptoms(built: Built, item: dict[str, Any]) -> None:
    _, note = _note_on(built, str(item["patient_id"]), _one_date(item))
    m = re.search(r"who presented with (.+?)\. On examination", note.text)
    assert m
    assert m[1].startswith(_answer(item))
    assert not any(d in m[1] for d in _distractors(item))


def _check_discharge_med(built: Built, item: dict[str, Any]) -> None:
    _, note = _note_on(built, str(item["patient_id"]), _one_date(item))
    meds = _discharge_meds(note.text)
    assert _answer(item) in meds
    assert not set(_distractors(item)) & set(meds)


def _check_first_prescribed(built: Built, item: dict[str, Any]) -> None:
    m = re.search(r" was (.+?) first ", item["question"])
    assert m
    drug = m[1]
    first = next(n for n in built.shown(str(item["patient_id"])) if drug in _discharge_meds(n.text))
    assert _answer(item) == first.charttime[:10]


def _check_lab_value(built: Built, item: dict[str, Any]) -> None:
    q = item["question"]
    m = re.search(r"patient's (.+?) (on admission|at discharge)\?", q) or re.search(
        r"What (.+?) value was documented (on admission|at discharge)", q
    )
    assert m
    _, note = _note_on(built, str(item["patient_id"]), _one_date(item))
    values = _pertinent(note.text, "Admission" if m[2] == "on admission" else "Discharge")
    assert _answer(item) == values[m[1]]
    assert values[m[1]] not in _distractors(item)


def _check_lab_change(built: Built, item: dict[str, Any]) -> None:
    m = re.search(r"How did the (.+?) at discharge change", item["question"])
    assert m
    pid = str(item["patient_id"])
    d1, d2 = DATE.findall(item["question"])
    x = _pertinent(_note_on(built, pid, d1)[1].text, "Discharge")[m[1]]
    y = _pertinent(_note_on(built, pid, d2)[1].text, "Discharge")[m[1]]
    a, b = float(x.split()[0]), float(y.split()[0])
    want = f"Unchanged at {x}" if a == b else f"{'Increased' if b > a else 'Decreased'} from {x} to {y}"
    assert _answer(item) == want


def _check_study(built: Built, item: dict[str, Any]) -> None:
    _, note = _note_on(built, str(item["patient_id"]), _one_date(item))
    done = [line.removeprefix("- ") for line in _block(note.text, "PROCEDURES:")]
    assert _answer(item) in done
    assert not set(_distractors(item)) & set(done)


EXTREMES = {
    "the highest temperature": ("temperature", max),
    "the highest heart rate": ("heart rate", max),
    "the lowest oxygen saturation": ("oxygen saturation", min),
    "the highest systolic blood pressure": ("systolic blood pressure", max),
}


def _check_vital(built: Built, item: dict[str, Any]) -> None:
    _, note = _note_on(built, str(item["patient_id"]), _one_date(item))
    q = item["question"]
    words = next((w for w in EXTREMES if w in q), None)
    if words is None:
        name = "weight" if "weight" in q else "BMI"
        assert _answer(item) == _pertinent(note.text, "Admission")[name]
        return
    name, pick = EXTREMES[words]
    values = [row[name] for row in _table(note.text) if name in row]
    best = pick(float(v.split()[0]) for v in values)
    assert float(_answer(item).split()[0]) == best
    assert all(float(d.split()[0]) != best for d in _distractors(item) if d in values)


def _check_stay(built: Built, item: dict[str, Any]) -> None:
    _, note = _note_on(built, str(item["patient_id"]), _one_date(item))
    assert _line(note.text, "Length of stay: ") == f"Length of stay: {_answer(item)}"


CHECKS: dict[str, Callable[[Built, dict[str, Any]], None]] = {
    "principal_diagnosis": _check_principal,
    "prior_admission_diagnosis": _check_prior,
    "presenting_symptoms": _check_symptoms,
    "discharge_medication": _check_discharge_med,
    "first_prescribed": _check_first_prescribed,
    "lab_value": _check_lab_value,
    "lab_change": _check_lab_change,
    "diagnostic_study": _check_study,
    "vital_sign": _check_vital,
    "length_of_stay": _check_stay,
}


# ------------------------------------------------------------------------------------- tests


def test_discharge_csv_is_mimic_layout(default_set: Built) -> None:
    with (default_set.root / "discharge.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
        assert tuple(rows[0].keys()) == CSV_COLUMNS
    assert {r["note_type"] for r in rows} == {"DS"}
    assert len({r["note_id"] for r in rows}) == len(rows)
    for r in rows:
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}", r["charttime"])
        assert r["storetime"] > r["charttime"]
        assert r["text"].startswith("DISCHARGE SUMMARY")
    assert (
        sum(len(v) for v in default_set.notes.values()) == len(rows) == default_set.manifest["notes_written"]
    )


def test_qa_lines_have_the_physionet_fields(default_set: Built) -> None:
    items = default_set.items
    assert items
    assert len({i["id"] for i in items}) == len(items)
    for item in items:
        for key in (*REQUIRED, "answer", "id", "category", "kind", "evidence", "distractor_sources"):
            assert key in item, key
        assert isinstance(item["patient_id"], int) and isinstance(item["num_notes"], int)
        assert item["answer"] in "ABCDE" and len(item["answer"]) == 1
        assert item["category"] in CATEGORIES
        pid = str(item["patient_id"])
        assert pid in default_set.notes
        assert item["num_notes"] == min(len(default_set.notes[pid]), 3)


def test_every_answer_is_in_the_notes_the_model_sees(every_kind: Built) -> None:
    for item in every_kind.items:
        shown = every_kind.shown(str(item["patient_id"]))
        text = format_notes(shown).lower()
        if item["kind"] == "lab_change":
            for value in re.findall(r"\d+(?:\.\d+)? \S+", _answer(item)):
                assert value.lower() in text
        else:
            assert _answer(item).lower() in text, item["id"]
        by_hadm = {n.hadm_id: n for n in shown}
        for ev in item["evidence"]:
            note = by_hadm[ev["hadm_id"]]
            assert ev["chartdate"] == note.charttime[:10]
            assert ev["note_id"].startswith(f"{item['patient_id']}-DS-")
            assert ev["text"] in note.text
            assert normalize_whitespace(ev["text"]).lower() in text


def test_answers_derived_again_from_the_text(every_kind: Built) -> None:
    kinds = Counter(item["kind"] for item in every_kind.items)
    assert set(kinds) == {k.name for k in KINDS}
    assert {item["category"] for item in every_kind.items} == set(CATEGORIES)
    for item in every_kind.items:
        CHECKS[item["kind"]](every_kind, item)


def test_options_distinct_and_answer_never_strictly_longest(every_kind: Built) -> None:
    for item in every_kind.items:
        texts = list(_choices(item).values())
        assert len({t.strip().lower() for t in texts}) == 5, item["id"]
        assert all(t.strip() for t in texts)
        assert len(_answer(item)) <= max(len(d) for d in _distractors(item)), item["id"]


def test_answer_letters_are_balanced(default_set: Built, every_kind: Built) -> None:
    for built in (default_set, every_kind):
        letters = Counter(item["answer"] for item in built.items)
        assert set(letters) == set("ABCDE")
        assert max(letters.values()) - min(letters.values()) <= 1
        assert built.manifest["answer_letters"] == {x: letters[x] for x in "ABCDE"}


def test_both_levels_present_and_manifest_counts_match(default_set: Built) -> None:
    tok = tokenizer_from_spec(TOKENIZER)
    levels: Counter[int] = Counter()
    questions: Counter[int] = Counter()
    per_patient = {str(p["subject_id"]): p for p in default_set.manifest["patients"]}
    assert set(per_patient) == set(default_set.notes)
    for pid in default_set.notes:
        tokens = tok.count(format_notes(default_set.notes[pid]))
        level = level_for(tokens)
        assert level in (1, 2)
        assert per_patient[pid]["tokens"] == tokens and per_patient[pid]["level"] == level
        levels[level] += 1
    for item in default_set.items:
        questions[per_patient[str(item["patient_id"])]["level"]] += 1
    assert levels[1] >= 5 and levels[2] >= 5
    m = default_set.manifest
    assert m["tokenizer"] == TOKENIZER
    for level in (1, 2):
        assert m["by_level"][str(level)]["patients"] == levels[level]
        assert m["by_level"][str(level)]["questions"] == questions[level]
    assert m["patients_used"] == len(default_set.notes) == 40
    assert m["patients_used"] + sum(m["skipped"]["patients"].values()) == m["patients_scanned"]
    assert m["skipped"]["patients"]["no_inpatient_stay"] > 0
    assert m["skipped"]["questions"] == {}
    assert (
        m["questions"]
        == len(default_set.items)
        == sum(m["by_kind"].values())
        == sum(m["by_category"].values())
    )


def test_distractor_provenance(default_set: Built, every_kind: Built) -> None:
    for built in (default_set, every_kind):
        sources: Counter[str] = Counter()
        for item in built.items:
            src = item["distractor_sources"]
            assert set(src) == set("ABCDE") - {item["answer"]}
            assert set(src.values()) <= set(SOURCES)
            text = format_notes(built.shown(str(item["patient_id"]))).lower()
            for letter, where in src.items():
                if where == "same_patient_notes" and item["kind"] != "lab_change":
                    assert item[f"choice_{letter}"].lower() in text
            sources.update(src.values())
        same = sources["same_patient_notes"] + sources["same_patient_record"]
        assert same > sum(sources.values()) / 2
        assert built.manifest["distractor_sources"] == {s: sources[s] for s in SOURCES}


def test_multi_note_questions_for_multi_admission_patients(default_set: Built) -> None:
    by_patient: dict[str, list[dict[str, Any]]] = {}
    for item in default_set.items:
        by_patient.setdefault(str(item["patient_id"]), []).append(item)
    multi = [pid for pid in default_set.notes if len(default_set.notes[pid]) >= 2]
    assert multi
    for pid in multi:
        asked = [i for i in by_patient[pid] if i["kind"] in MULTI_NOTE]
        assert asked, pid
        shown_dates = set(re.findall(r"Chartdate : (\S+)", format_notes(default_set.notes[pid])))
        for item in asked:
            assert set(DATE.findall(item["question"])) <= shown_dates
            if item["kind"] != "first_prescribed":
                assert len({e["hadm_id"] for e in item["evidence"]}) == 2
    for items in by_patient.values():
        assert len(items) <= 2


def test_only_the_first_three_notes_are_used(every_kind: Built) -> None:
    four = [pid for pid, notes in every_kind.notes.items() if len(notes) > 3]
    assert four
    for pid in four:
        hidden = {n.charttime[:10] for n in sorted(every_kind.notes[pid], key=lambda n: n.charttime)[3:]}
        hadms = {n.hadm_id for n in every_kind.shown(pid)}
        for item in (i for i in every_kind.items if str(i["patient_id"]) == pid):
            assert item["num_notes"] == 3
            assert not set(DATE.findall(item["question"])) & hidden
            assert {e["hadm_id"] for e in item["evidence"]} <= hadms


def test_long_mode_reaches_level_2_and_stays_within_it(tmp_path: Path) -> None:
    short = build_synthetic_set(tmp_path / "short", patients=20, long_fraction=0.0)
    long = build_synthetic_set(tmp_path / "long", patients=20, long_fraction=1.0)
    assert short.by_level[2] == 0 and short.by_level[1] == short.patients_used == 20
    assert long.by_level[2] > 0
    assert "HOSPITAL COURSE BY DAY" not in (tmp_path / "short" / "discharge.csv").read_text(encoding="utf-8")
    manifest = json.loads(long.manifest_json.read_text(encoding="utf-8"))
    assert all(p["long"] and p["tokens"] <= 7500 for p in manifest["patients"])
    notes = read_discharge_notes(long.discharge_csv)
    for p in manifest["patients"]:
        text = [n.text for n in notes[str(p["subject_id"])]][:3]
        dropped = {t.split(":")[1] for t in p["trimmed"]}
        if "course" not in dropped:
            assert all("HOSPITAL COURSE BY DAY:" in t for t in text)


def test_same_arguments_give_identical_files(tmp_path: Path) -> None:
    a = build_synthetic_set(tmp_path / "a", patients=25, seed=3)
    b = build_synthetic_set(tmp_path / "b", patients=25, seed=3)
    for name in ("discharge.csv", "qa.jsonl", "manifest.json"):
        assert (a.root / name).read_bytes() == (b.root / name).read_bytes()
    c = build_synthetic_set(tmp_path / "c", patients=25, seed=4)
    assert (c.root / "qa.jsonl").read_bytes() != (a.root / "qa.jsonl").read_bytes()


def test_failure_leaves_no_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = 0
    real = synth_set.build_case

    def failing(*args: Any, **kwargs: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls == 10:
            raise RuntimeError("boom")
        return real(*args, **kwargs)

    monkeypatch.setattr(synth_set, "build_case", failing)
    with pytest.raises(RuntimeError, match="boom"):
        build_synthetic_set(tmp_path / "out", patients=20)
    assert list(tmp_path.iterdir()) == []


def test_failed_rebuild_keeps_the_old_set(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    out = tmp_path / "out"
    build_synthetic_set(out, patients=10)
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def failing(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("boom")

    monkeypatch.setattr(synth_set, "build_case", failing)
    with pytest.raises(RuntimeError):
        build_synthetic_set(out, patients=10, seed=1, overwrite=True)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert [p.name for p in tmp_path.iterdir()] == ["out"]


@pytest.mark.parametrize(
    "kwargs",
    [
        {"patients": 0},
        {"patients": -3},
        {"patients": True},
        {"patients": "5"},
        {"per_patient": 0},
        {"long_fraction": 1.5},
        {"long_fraction": -0.1},
        {"tokenizer": "nope:thing"},
        {"tokenizer": "tiktoken:p50k_base"},
        {"tokenizer": "cl100k"},
    ],
)
def test_bad_arguments_are_one_user_error(tmp_path: Path, kwargs: dict[str, Any]) -> None:
    with pytest.raises(UserError):
        build_synthetic_set(tmp_path / "out", **kwargs)
    assert not (tmp_path / "out").exists()


def test_existing_folder_is_replaced_only_when_asked(tmp_path: Path) -> None:
    out = tmp_path / "out"
    build_synthetic_set(out, patients=5)
    with pytest.raises(UserError, match="already exists"):
        build_synthetic_set(out, patients=5)
    build_synthetic_set(out, patients=6, overwrite=True)
    other = tmp_path / "other"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(UserError, match="not a synthetic EHRNoteQA set"):
        build_synthetic_set(other, patients=5, overwrite=True)
    assert (other / "keep.txt").read_text() == "x"


def test_describe_and_small_sets(tmp_path: Path) -> None:
    built = build_synthetic_set(tmp_path / "small", patients=8)
    assert built.patients_used == 8 and built.patients_scanned > 8
    assert built.by_level[1] > 0 and built.by_level[2] > 0
    line = built.describe()
    assert line.startswith("8 patients (level 1: ")
    assert f"of {built.patients_scanned} scanned" in line and "no_inpatient_stay" in line


def test_questions_for_one_patient() -> None:
    tok = tokenizer_from_spec(TOKENIZER)
    case = build_case(patient(19, 0), tok, long_fraction=1.0)  # subject 20: three admissions
    assert case is not None and len(case.admissions) == 3 and case.long
    items = questions_for(case, per_patient=None)
    assert {i.kind for i in items} == {k.name for k in KINDS}
    assert [i.kind for i in items] == [k.name for k in KINDS]
    two = questions_for(case, per_patient=2)
    assert len(two) == 2 and any(i.kind in MULTI_NOTE for i in two)
    assert build_case(patient(1, 0), tok) is None  # subject 2 was never admitted
