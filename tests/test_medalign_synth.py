"""The synthetic MedAlign set and the key-facts scorer.

Every gold answer is derived again here from the XML file as written (``read_xml``), with plain
loops and hand-written code tables, never with the generator's own functions: if the generator
and these tests agree, the keys are what a model reading the record can find.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest

from clinieval.benchmarks.medalign.data import load_generic
from clinieval.benchmarks.medalign.synth import COLUMNS, SyntheticSet, build_synthetic_set, questions_for
from clinieval.ehr.medalign_xml import format_time, read_xml
from clinieval.ehr.timeline import Event, Person, Timeline, Visit
from clinieval.errors import UserError
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.keyfacts import KEY_FACTS, KEY_FACTS_ALL, KeyFacts, KeyFactsAll, find_keys
from clinieval.types import ErrorKind, ModelOutput, Sample
from tests.conftest import need_shared

PATIENTS = 20

# Hand-written tables the derivations below rely on (not the generator's).
LAB_LOINC = {
    "glucose": "2345-7",
    "hemoglobin A1c": "4548-4",
    "hemoglobin": "718-7",
    "white blood cell count": "6690-2",
    "platelet count": "777-3",
    "creatinine": "2160-0",
    "blood urea nitrogen": "3094-0",
    "sodium": "2951-2",
    "potassium": "2823-3",
    "total cholesterol": "2093-3",
    "HDL cholesterol": "2085-9",
    "triglycerides": "2571-8",
}
CONDITION_SNOMED = {
    "type 2 diabetes": "44054006",
    "hypertension": "59621000",
    "hyperlipidemia": "55822004",
    "heart failure": "88805009",
    "atrial fibrillation": "49436004",
    "coronary artery disease": "53741008",
    "asthma": "195967001",
    "chronic kidney disease": "433144002",
    "depression": "370143000",
}
INGREDIENT_BY_RXNORM = {
    "860975": ["metformin"],
    "865098": ["insulin lispro"],
    "314076": ["lisinopril"],
    "197361": ["amlodipine"],
    "310798": ["hydrochlorothiazide"],
    "259255": ["atorvastatin"],
    "312961": ["simvastatin"],
    "313988": ["furosemide"],
    "200033": ["carvedilol"],
    "855332": ["warfarin"],
    "243670": ["aspirin"],
    "309362": ["clopidogrel"],
    "705129": ["nitroglycerin"],
    "2123111": ["albuterol"],
    "895994": ["fluticasone"],
    "979492": ["losartan"],
    "312938": ["sertraline"],
    "562251": ["amoxicillin", "clavulanate"],
}
SYSTOLIC, DIASTOLIC = "8480-6", "8462-4"
ALL_KINDS = {
    "lab_latest",
    "lab_trend",
    "clinic_medications",
    "emergency_visits",
    "first_diagnosis",
    "latest_blood_pressure",
    "smoking_status",
    "age",
}


def mdy(t: datetime) -> str:
    return t.strftime("%m/%d/%Y")


def rows_of(s: SyntheticSet) -> list[dict[str, str]]:
    with s.instructions_csv.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def keys_of(row: dict[str, str]) -> list[str]:
    keys = json.loads(row["answer_keys"])
    assert isinstance(keys, list) and all(isinstance(k, str) for k in keys)
    return keys


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> SyntheticSet:
    return build_synthetic_set(tmp_path_factory.mktemp("synth") / "set", patients=PATIENTS, seed=0)


@pytest.fixture(scope="module")
def records(built: SyntheticSet) -> dict[str, Timeline]:
    return {p.stem: read_xml(p) for p in sorted(built.ehr_dir.glob("*.xml"))}


# ------------------------------------------------------------------ straightforward re-derivation


def named(question: str, table: dict[str, str]) -> str:
    """The code of the longest table name the question mentions ("hemoglobin A1c" over "hemoglobin")."""
    hits = [name for name in table if name in question]
    assert hits, f"no known name in {question!r}"
    return table[max(hits, key=len)]


def results(tl: Timeline, loinc: str) -> list[Event]:
    """Dated results of one lab that carry a value. (``read_xml`` gives no value when the unit
    starts with a digit, as ``10*3/uL`` does, so white cell and platelet counts drop out here
    exactly as they do for the generator, which reads the same files.)"""
    out = [
        e
        for e in tl.events
        if e.domain == "measurement" and e.code == loinc and e.time is not None and e.value is not None
    ]
    out.sort(key=lambda e: e.time or datetime.min)
    return out


def anchor_of(tl: Timeline) -> datetime:
    times: list[datetime] = []
    for e in tl.events:
        if e.time is not None:
            times.append(e.time)
    for n in tl.notes:
        if n.time is not None:
            times.append(n.time)
    for v in tl.visits:
        if v.start is not None:
            times.append(v.start)
    return max(times)


def clinic_drugs(tl: Timeline) -> tuple[datetime, list[str]] | None:
    clinic = [v for v in tl.visits if v.type == "Outpatient Visit" and v.start is not None]
    if not clinic:
        return None
    last = clinic[0]
    for v in clinic:
        if v.start is not None and last.start is not None and v.start > last.start:
            last = v
    names: list[str] = []
    for e in tl.events:
        if e.domain == "drug_exposure" and e.visit_id == last.visit_id:
            for name in INGREDIENT_BY_RXNORM[str(e.code)]:
                if name not in names:
                    names.append(name)
    assert last.start is not None
    return (last.start, names) if names else None


def latest_bp(tl: Timeline) -> tuple[str, str] | None:
    systolic = {e.time: e.value for e in results(tl, SYSTOLIC)}
    best: tuple[datetime, str] | None = None
    for d in results(tl, DIASTOLIC):
        if d.time is not None and d.time in systolic and (best is None or d.time > best[0]):
            best = (d.time, f"{systolic[d.time]}/{d.value}")
    return None if best is None else (best[1], mdy(best[0]))


def smoking(tl: Timeline) -> str | None:
    seen = [e for e in tl.events if e.domain == "observation" and e.code == "72166-2"]
    if not seen:
        return None
    text = seen[-1].name.replace("Tobacco smoking status", "").strip()
    return text.split()[0].lower()


def moving_labs(tl: Timeline) -> list[str]:
    moving = []
    for loinc in LAB_LOINC.values():
        rs = results(tl, loinc)
        if len(rs) >= 2 and float(str(rs[-1].value)) != float(str(rs[-2].value)):
            moving.append(loinc)
    return moving


def expected_keys(kind: str, question: str, tl: Timeline) -> list[str]:
    """The keys of one instruction, computed from the record alone."""
    if kind == "lab_latest":
        last = results(tl, named(question, LAB_LOINC))[-1]
        assert last.time is not None
        return [str(last.value), mdy(last.time)]
    if kind == "lab_trend":
        before, last = results(tl, named(question, LAB_LOINC))[-2:]
        return ["increased" if float(str(last.value)) > float(str(before.value)) else "decreased"]
    if kind == "clinic_medications":
        found = clinic_drugs(tl)
        assert found is not None
        return found[1]
    if kind == "emergency_visits":
        return [str(sum(1 for v in tl.visits if v.type == "Emergency Room Visit"))]
    if kind == "first_diagnosis":
        code = named(question, CONDITION_SNOMED)
        dates = [e.time for e in tl.events if e.domain == "condition_occurrence" and e.code == code]
        return [mdy(min(t for t in dates if t is not None))]
    if kind == "latest_blood_pressure":
        bp = latest_bp(tl)
        assert bp is not None
        return list(bp)
    if kind == "smoking_status":
        return [str(smoking(tl))]
    if kind == "age":
        birth, now = tl.person.birth, anchor_of(tl)
        assert birth is not None
        return [str(now.year - birth.year - ((now.month, now.day) < (birth.month, birth.day)))]
    raise AssertionError(f"unknown kind {kind}")


def applicable_kinds(tl: Timeline) -> set[str]:
    kinds = {"age"} if tl.person.birth is not None else set()
    if any(results(tl, loinc) for loinc in LAB_LOINC.values()):
        kinds.add("lab_latest")
    if moving_labs(tl):
        kinds.add("lab_trend")
    if clinic_drugs(tl) is not None:
        kinds.add("clinic_medications")
    if any(v.type == "Emergency Room Visit" for v in tl.visits):
        kinds.add("emergency_visits")
    if any(e.domain == "condition_occurrence" and e.code in CONDITION_SNOMED.values() for e in tl.events):
        kinds.add("first_diagnosis")
    if latest_bp(tl) is not None:
        kinds.add("latest_blood_pressure")
    if smoking(tl) is not None:
        kinds.add("smoking_status")
    return kinds


# ----------------------------------------------------------------------------------- the set


def test_the_set_builds_with_its_files_and_columns(built: SyntheticSet) -> None:
    rows = rows_of(built)
    assert built.patients == PATIENTS
    assert sorted(p.name for p in built.ehr_dir.iterdir()) == sorted(f"{i}.xml" for i in range(1, 21))
    assert list(rows[0]) == list(COLUMNS)
    assert built.instructions == len(rows) and built.by_kind == {
        k: sum(r["kind"] == k for r in rows) for k in sorted({r["kind"] for r in rows})
    }
    assert {r["kind"] for r in rows} == ALL_KINDS, "20 patients exercise every question kind"
    assert len({r["instruction_id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["filename"] == f"{r['person_id']}.xml"
        assert (built.ehr_dir / r["filename"]).is_file()
    assert not [p for p in built.root.parent.iterdir() if p.name.startswith(".")], "no temp folder left"


def test_every_gold_is_rederived_from_the_written_xml(
    built: SyntheticSet, records: dict[str, Timeline]
) -> None:
    for r in rows_of(built):
        tl = records[r["person_id"]]
        assert keys_of(r) == expected_keys(r["kind"], r["question"], tl), r["instruction_id"]
        assert r["time_anchor"] == format_time(anchor_of(tl))


def test_each_patient_gets_every_kind_that_applies_once_per_topic(
    built: SyntheticSet, records: dict[str, Timeline]
) -> None:
    rows = rows_of(built)
    for pid, tl in records.items():
        mine = [r for r in rows if r["person_id"] == pid]
        assert {r["kind"] for r in mine} == applicable_kinds(tl), pid
        assert len(mine) >= 3, "several kinds per patient"
        assert len({r["question"] for r in mine}) == len(mine), "no duplicate questions"
        topics = [(r["kind"], tuple(keys_of(r)), r["question"]) for r in mine if r["kind"] == "lab_latest"]
        labs = [named(q, LAB_LOINC) for _, _, q in topics]
        assert len(set(labs)) == len(labs), "two lab questions never ask about the same lab"


def test_trend_asks_about_creatinine_whenever_it_moved(
    built: SyntheticSet, records: dict[str, Timeline]
) -> None:
    for r in rows_of(built):
        if r["kind"] == "lab_trend" and "2160-0" in moving_labs(records[r["person_id"]]):
            assert "creatinine" in r["question"]


def test_keys_are_in_the_record_as_written(built: SyntheticSet) -> None:
    """A model copying from the XML can match: values and dates appear there verbatim."""
    for r in rows_of(built):
        if r["kind"] not in ("lab_latest", "first_diagnosis", "latest_blood_pressure"):
            continue
        xml = (built.ehr_dir / r["filename"]).read_text(encoding="utf-8")
        for key in keys_of(r):
            if re.fullmatch(r"\d+/\d+", key):  # a blood pressure: two <code> lines of the XML
                systolic, diastolic = key.split("/")
                assert f"Systolic blood pressure {systolic} " in xml
                assert f"Diastolic blood pressure {diastolic} " in xml
            else:
                assert key in xml, (r["instruction_id"], key)


def test_categories_come_from_the_medalign_taxonomy(built: SyntheticSet) -> None:
    taxonomy = need_shared("medalign") / "instruction-taxonomy.csv"
    with taxonomy.open(newline="", encoding="utf-8") as f:
        known = {(t["category"], t["subcategory"]) for t in csv.DictReader(f)}
    assert {(r["category"], r["subcategory"]) for r in rows_of(built)} <= known


def test_gold_holds_every_key_and_scores_full_marks(built: SyntheticSet) -> None:
    for r in rows_of(built):
        keys = keys_of(r)
        assert keys and all(k in r["gold_response"] for k in keys), r["instruction_id"]
        rec = record(r["gold_response"], keys, sid=r["instruction_id"])
        assert KEY_FACTS.score(rec).value == 1.0
        assert KEY_FACTS_ALL.score(rec).value == 1.0


def files(root: Path) -> Iterator[tuple[str, bytes]]:
    for p in sorted(root.rglob("*")):
        if p.is_file():
            yield str(p.relative_to(root)), p.read_bytes()


def test_same_seed_gives_byte_identical_files_and_another_seed_differs(
    built: SyntheticSet, tmp_path: Path
) -> None:
    again = build_synthetic_set(tmp_path / "again", patients=PATIENTS, seed=0)
    assert list(files(again.root)) == list(files(built.root))
    other = build_synthetic_set(tmp_path / "other", patients=PATIENTS, seed=1)
    assert other.instructions_csv.read_bytes() != built.instructions_csv.read_bytes()
    assert (other.ehr_dir / "1.xml").read_bytes() != (built.ehr_dir / "1.xml").read_bytes()


def test_per_patient_caps_and_prefers_distinct_kinds(built: SyntheticSet, tmp_path: Path) -> None:
    capped = build_synthetic_set(tmp_path / "capped", patients=PATIENTS, seed=0, per_patient=3)
    full = rows_of(built)
    by_patient: dict[str, list[dict[str, str]]] = {}
    for r in rows_of(capped):
        by_patient.setdefault(r["person_id"], []).append(r)
    for pid, mine in by_patient.items():
        available = {r["kind"] for r in full if r["person_id"] == pid}
        assert len(mine) == min(3, sum(r["person_id"] == pid for r in full))
        assert len({r["kind"] for r in mine}) == min(3, len(available)), pid
        # a capped question is one of the full set's, unchanged
        full_q = {(r["question"], r["gold_response"]) for r in full if r["person_id"] == pid}
        assert {(r["question"], r["gold_response"]) for r in mine} <= full_q


def test_load_generic_reads_the_set(built: SyntheticSet) -> None:
    rows = rows_of(built)
    samples = load_generic(built.instructions_csv, built.ehr_dir)
    assert len(samples) == len(rows) == len(built.load())
    for s, r in zip(samples, rows, strict=True):
        assert (s.id, s.input, s.target) == (r["instruction_id"], r["question"], r["gold_response"])
        assert s.metadata["filename"] == r["filename"] and s.metadata["person_id"] == r["person_id"]
        assert s.metadata["category"] == r["category"] and s.metadata["subcategory"] == r["subcategory"]
        assert s.context.startswith("<record>")
        assert s.metadata["answer_keys"] == keys_of(r)
        gold = SampleRecord(sample=s, repeat=0, messages=[], output=ModelOutput(text=str(s.target)))
        assert KEY_FACTS.score(gold).value == 1.0


def test_refuses_to_replace_a_folder_and_bad_arguments(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    with pytest.raises(UserError, match="already exists"):
        build_synthetic_set(precious, patients=1)
    with pytest.raises(UserError, match="not a synthetic MedAlign set"):
        build_synthetic_set(precious, patients=1, overwrite=True)
    assert (precious / "notes.txt").read_text() == "keep me"
    first = build_synthetic_set(tmp_path / "set", patients=1)
    again = build_synthetic_set(tmp_path / "set", patients=2, overwrite=True)
    assert (first.root == again.root) and (again.ehr_dir / "2.xml").is_file()
    for bad in ({"patients": 0}, {"patients": 2, "per_patient": 0}):
        with pytest.raises(UserError):
            build_synthetic_set(tmp_path / "bad", **bad)  # type: ignore[arg-type]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["precious", "set"]


def test_kinds_on_a_hand_built_record() -> None:
    """Edge cases the generator rarely produces, with answers worked out by hand."""
    ev = Event
    t = datetime
    tl = Timeline(
        Person("p", birth=t(1950, 6, 15)),
        visits=[
            Visit("v1", "Outpatient Visit", t(2012, 1, 10, 9)),
            Visit("v2", "Emergency Room Visit", t(2013, 5, 5, 22)),
            Visit("v3", "Outpatient Visit", t(2015, 3, 4, 10)),
        ],
        events=[
            # recorded again later, listed first: the first diagnosis is still 2012
            ev("condition_occurrence", t(2015, 3, 4, 10), "Essential hypertension", "SNOMED", "59621000"),
            ev("condition_occurrence", t(2012, 1, 10, 9), "Essential hypertension", "SNOMED", "59621000"),
            # same value twice (1.10 = 1.1): no trend question
            ev("measurement", t(2012, 1, 10, 9), "Creatinine", "LOINC", "2160-0", "1.10", "mg/dL", "v1"),
            ev("measurement", t(2015, 3, 4, 10), "Creatinine", "LOINC", "2160-0", "1.1", "mg/dL", "v3"),
            ev("measurement", t(2015, 3, 4, 10, 15), "HbA1c", "LOINC", "4548-4", "7.2", "%", "v3"),
            ev("measurement", t(2012, 1, 10, 9), "HbA1c", "LOINC", "4548-4", "6.9", "%", "v1"),
            ev(
                "drug_exposure",
                t(2013, 5, 5, 23),
                "amoxicillin 500 MG Oral Tablet",
                "RxNorm",
                "308192",
                None,
                None,
                "v2",
            ),
            ev(
                "drug_exposure",
                t(2015, 3, 4, 10),
                "24 HR metformin hydrochloride 500 MG Extended Release Oral Tablet",
                "RxNorm",
                "860975",
                None,
                None,
                "v3",
            ),
            ev(
                "drug_exposure",
                t(2015, 3, 4, 10),
                "warfarin sodium 5 MG Oral Tablet",
                "RxNorm",
                "855332",
                None,
                None,
                "v3",
            ),
        ],
    )
    asked = {(kind.name, q.keys) for kind, q in questions_for(tl, seed=3)}
    kinds = {"lab_latest", "lab_trend", "clinic_medications", "emergency_visits", "first_diagnosis", "age"}
    assert {name for name, _ in asked} == kinds
    assert ("lab_trend", ("increased",)) in asked  # creatinine did not move; the A1c went 6.9 -> 7.2
    assert ("first_diagnosis", ("01/10/2012",)) in asked
    assert ("clinic_medications", ("metformin", "warfarin")) in asked
    assert ("emergency_visits", ("1",)) in asked
    assert ("age", ("64",)) in asked  # anchor 03/04/2015 10:15, before the June birthday
    assert {keys for name, keys in asked if name == "lab_latest"} <= {
        ("7.2", "03/04/2015"),
        ("1.1", "03/04/2015"),
    }


# ------------------------------------------------------------------------------------ the scorer


def record(answer: str | ModelOutput, keys: object = None, sid: str = "q1") -> SampleRecord:
    meta = {} if keys is None else {"answer_keys": keys}
    out = answer if isinstance(answer, ModelOutput) else ModelOutput(text=answer)
    return SampleRecord(sample=Sample(id=sid, input="q", metadata=meta), repeat=0, messages=[], output=out)


@dataclass(frozen=True)
class Case:
    keys: list[str]
    answer: str
    found: list[str]


CASES = [
    Case(["7.2", "03/04/2021"], "HbA1c was 17.25 on 3/4/2021.", ["03/04/2021"]),
    Case(["7.2", "03/04/2021"], "The latest A1c, 7.2 %, was drawn on 2021-03-04.", ["7.2", "03/04/2021"]),
    Case(["7.2", "03/04/2021"], "7.20% on March 4, 2021", ["7.2", "03/04/2021"]),
    Case(["7.2", "03/04/2021"], "7.2 on 04/03/2021", ["7.2"]),
    Case(["4"], "Seen on 03/04/2021 and 2021-04-01.", []),
    Case(["2"], "The patient had two emergency visits.", []),
    Case(["2"], "The patient had 2 emergency visits (01/02/2015, 03/02/2016).", ["2"]),
    Case(["130/85", "01/10/2019"], "BP 130 / 85 mm[Hg] on 1/10/2019", ["130/85", "01/10/2019"]),
    Case(["130/85"], "BP 1130/85", []),
    Case(["increased"], "Creatinine DECREASED slightly.", []),
    Case(
        ["insulin lispro", "metformin"], "Insulin  Lispro and metformin-ER.", ["insulin lispro", "metformin"]
    ),
    Case(["aspirin"], "no aspirinlike drugs", []),
]


@pytest.mark.parametrize("case", CASES, ids=[c.answer for c in CASES])
def test_hand_written_answers_score_as_computed_by_hand(case: Case) -> None:
    score = KEY_FACTS.score(record(case.answer, case.keys))
    missing = [k for k in case.keys if k not in case.found]
    assert score.value == pytest.approx(len(case.found) / len(case.keys))
    assert score.metadata == {"found": case.found, "missing": missing, "all_found": not missing}
    assert KEY_FACTS_ALL.score(record(case.answer, case.keys)).value == (0.0 if missing else 1.0)
    assert find_keys(case.keys, case.answer) == (case.found, missing)


def test_a_failed_call_is_unscored_not_wrong() -> None:
    failed = ModelOutput.failure(ErrorKind.CONTENT_FILTER, "filtered")
    for scorer in (KEY_FACTS, KEY_FACTS_ALL):
        score = scorer.score(record(failed, ["7.2"]))
        assert score.value is None and score.metadata["error_kind"] == "content_filter"


def test_samples_without_usable_keys_are_a_user_error_naming_them() -> None:
    for keys in (None, [], ["7.2", ""], "not json", [3]):
        with pytest.raises(UserError, match="'item-9'"):
            KEY_FACTS.score(record("7.2", keys, sid="item-9"))
    with pytest.raises(UserError, match="'item-9'"):  # even when the call failed
        KEY_FACTS.score(record(ModelOutput.failure(ErrorKind.TIMEOUT, "t"), None, sid="item-9"))
    assert KEY_FACTS.score(record("7.2", '["7.2"]')).value == 1.0  # a JSON cell is read
    assert (KeyFacts().name, KeyFactsAll().name, KeyFactsAll().needs) == (
        "key_facts",
        "key_facts_all",
        "generate",
    )
    assert KeyFactsAll().score(record("7.2 only", ["7.2", "8.1"])).value == 0.0


def test_a_record_dump_loses_to_the_right_short_answer() -> None:
    from clinieval.scoring.keyfacts import KEY_FACTS_F1, match_keys

    keys = ["1.4", "03/02/2021", "increased"]
    right = "The creatinine increased: 1.4 mg/dL on 03/02/2021 (from 1.1)."
    dump = (
        "Creatinine 0.9 mg/dL on 01/05/2019. Creatinine 1.0 mg/dL on 06/11/2019. Glucose 98 on "
        "06/11/2019. Creatinine 1.1 mg/dL on 02/02/2020. Potassium 4.1 on 02/02/2020. Creatinine 1.4 "
        "mg/dL on 03/02/2021. Sodium 139 on 03/02/2021. Values increased and decreased over time."
    )
    # recall alone cannot tell them apart: both state every key
    assert KEY_FACTS.score(record(right, keys)).value == KEY_FACTS.score(record(dump, keys)).value == 1.0
    # stated facts: right = {1.4, 1.1, the date} + "increased" = 4; the dump states 14
    assert match_keys(keys, right).stated == 4 and match_keys(keys, right).precision == 0.75
    short = KEY_FACTS_F1.score(record(right, keys)).value
    long = KEY_FACTS_F1.score(record(dump, keys)).value
    assert short is not None and long is not None
    assert short == pytest.approx(2 * 0.75 / 1.75) and long < 0.5 < short
    assert KEY_FACTS_F1.score(record("It went up.", keys)).value == 0.0  # nothing found
    assert KEY_FACTS_F1.score(record("Creatinine increased.", keys)).value == pytest.approx(0.5)  # p 1, r 1/3
