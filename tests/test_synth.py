"""The synthetic patient generator: determinism, realism, OMOP CSV output, atomic writes."""

from __future__ import annotations

import csv
import re
import types
from pathlib import Path

import duckdb
import pytest

from clinieval.ehr import synth
from clinieval.ehr.timeline import Timeline
from clinieval.errors import UserError
from tests.conftest import need_shared

OMOP_FILES = sorted(f"{t}.csv" for t in synth.OMOP_COLUMNS)


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def test_same_seed_same_bytes_and_patient_i_independent_of_n(tmp_path: Path) -> None:
    a = files(synth.write_omop(12, 42, tmp_path / "a"))
    b = files(synth.write_omop(12, 42, tmp_path / "b"))
    assert sorted(a) == OMOP_FILES and a == b
    c = files(synth.write_omop(12, 43, tmp_path / "c"))
    assert c["NOTE.csv"] != a["NOTE.csv"]
    five = [t.to_dict() for t in synth.generate(5, 42)]
    ten = [t.to_dict() for t in synth.generate(10, 42)]
    assert five == ten[:5]
    assert synth.patient(7, 42).to_dict() == ten[7]
    assert isinstance(synth.generate(10**9, 1), types.GeneratorType)  # streams


def test_values_codes_and_units_are_realistic() -> None:
    cond_codes = {c.snomed.code for c in synth.CONDITIONS.values()}
    drug_codes = {d.concept.code for d in synth.DRUGS.values()}
    proc_codes = {p.code for p in synth.PROCEDURES.values()}
    visit_types = {v.name for v in synth.VISIT_TYPES.values()}
    seen_labs: set[str] = set()
    n_discharge = 0
    for tl in synth.generate(40, 9):
        visits = {v.visit_id: v for v in tl.visits}
        assert tl.person.birth is not None and tl.person.sex in ("MALE", "FEMALE")
        assert len(tl.visits) >= 1 and all(v.type in visit_types for v in tl.visits)
        starts = [v.start for v in tl.visits if v.start is not None]
        assert starts == sorted(starts)
        for v in tl.visits:
            assert v.start is not None and v.end is not None and v.start < v.end
            if v.type == "Inpatient Visit":
                assert (v.end.date() - v.start.date()).days >= 2  # multi-day stays
        for e in tl.events:
            assert e.time is not None
            if e.domain == "death":
                continue
            v = visits[e.visit_id or ""]
            assert v.start is not None and v.end is not None and v.start <= e.time <= v.end
            if e.domain == "measurement":
                lab = synth.LABS[e.code or ""]
                assert e.vocabulary == "LOINC" and e.name == lab.concept.name
                assert e.unit == lab.unit.code and e.value is not None
                assert lab.low <= float(e.value) <= lab.high, (e.code, e.value)
                assert e.value == lab.fmt(float(e.value))
                seen_labs.add(lab.concept.code)
            elif e.domain == "condition_occurrence":
                assert e.vocabulary == "SNOMED" and e.code in cond_codes
            elif e.domain == "drug_exposure":
                assert e.vocabulary == "RxNorm" and e.code in drug_codes
            elif e.domain == "procedure_occurrence":
                assert e.vocabulary == "SNOMED" and e.code in proc_codes
            else:
                assert e.domain == "observation" and e.value in synth.SMOKING_VALUES
        inpatient = [v for v in tl.visits if v.type == "Inpatient Visit"]
        summaries = [n for n in tl.notes if n.type == "discharge summary"]
        assert [n.visit_id for n in summaries] == [v.visit_id for v in inpatient]
        for note in summaries:
            n_discharge += 1
            text = note.text
            assert len(text.split("\n\n")) >= 8  # multi-paragraph
            stay = [e for e in tl.events if e.visit_id == note.visit_id]
            principal = next(e for e in stay if e.domain == "condition_occurrence")
            cd = next(c for c in synth.CONDITIONS.values() if c.snomed.code == principal.code)
            assert f"PRINCIPAL DIAGNOSIS: {cd.snomed.name} (ICD-10-CM {cd.icd10.code}" in text
            # discharge prescriptions are the last drug events of the stay; all are in the summary
            last_rx = max(e.time for e in stay if e.domain == "drug_exposure" and e.time is not None)
            for e in stay:
                if e.domain == "drug_exposure" and e.time == last_rx:
                    assert e.name in text
            glucose = [e.value for e in stay if e.code == "2345-7"]
            assert f"glucose {glucose[0]} mg/dL" in text and f"glucose {glucose[-1]} mg/dL" in text
    assert n_discharge >= 3
    assert {"2345-7", "718-7", "2160-0", "8480-6", "8462-4", "8867-4", "29463-7"} <= seen_labs


def test_embedded_concepts_match_the_public_omop_vocabulary() -> None:
    """Every concept id below the local range is the real OMOP id of that (vocabulary, code)."""
    real: dict[int, tuple[str, str, str]] = {}
    with (need_shared("omop-synthea27nj") / "CONCEPT.csv").open(encoding="utf-8") as f:
        for row in csv.DictReader(f):
            real[int(row["concept_id"])] = (row["vocabulary_id"], row["concept_code"], row["concept_name"])
    checked = 0
    for c in synth.all_concepts():
        if c.concept_id in real:
            assert real[c.concept_id] == (c.vocabulary, c.code, c.name), c
            checked += 1
        elif c.vocabulary in ("SNOMED", "RxNorm") or (c.vocabulary == "LOINC" and c.domain == "Measurement"):
            pytest.fail(f"{c} is not in the public sample vocabulary")
        elif c.vocabulary in ("ICD10CM",) or c.domain == "Note":
            assert c.concept_id > synth.LOCAL_CONCEPT_BASE
    assert checked >= 60


def test_omop_csvs_read_with_duckdb(tmp_path: Path) -> None:
    out = synth.write_omop(20, 3, tmp_path / "omop")
    timelines = list(synth.generate(20, 3))
    synthea = need_shared("omop-synthea27nj")
    con = duckdb.connect()
    for table, cols in synth.OMOP_COLUMNS.items():
        with (synthea / f"{table}.csv").open(encoding="utf-8") as f:
            assert tuple(next(csv.reader(f))) == cols, table
        rel = con.sql(f"select * from read_csv('{out / (table + '.csv')}', header=true, all_varchar=true)")
        assert tuple(rel.columns) == cols, table
        with (out / f"{table}.csv").open(encoding="utf-8", newline="") as f:
            assert all(len(row) == len(cols) for row in csv.reader(f)), table

    def count(table: str) -> int:
        return int(
            con.sql(f"select count(*) from read_csv('{out / table}.csv', header=true)").fetchall()[0][0]
        )

    def n_events(domain: str) -> int:
        return sum(1 for t in timelines for e in t.events if e.domain == domain)

    assert count("PERSON") == 20
    assert count("VISIT_OCCURRENCE") == sum(len(t.visits) for t in timelines)
    assert count("NOTE") == sum(len(t.notes) for t in timelines)
    assert count("DEATH") == sum(t.person.death is not None for t in timelines)
    for table in (
        "CONDITION_OCCURRENCE",
        "DRUG_EXPOSURE",
        "MEASUREMENT",
        "PROCEDURE_OCCURRENCE",
        "OBSERVATION",
    ):
        assert count(table) == n_events(table.lower()), table
    # every concept id used anywhere is in CONCEPT.csv (0 = "no matching concept", by convention)
    known = {
        r[0] for r in con.sql(f"select concept_id from read_csv('{out}/CONCEPT.csv', header=true)").fetchall()
    }
    for table, cols in synth.OMOP_COLUMNS.items():
        for col in cols:
            if col.endswith("concept_id") and table != "CONCEPT":
                src = f"read_csv('{out / table}.csv', header=true)"
                q = f"select distinct {col} from {src} where {col} is not null"
                used = {r[0] for r in con.sql(q).fetchall()} - {0}
                assert used <= known, (table, col, used - known)
    # numbers and notes survive the CSV round trip
    m = con.sql(
        "select value_as_number, unit_source_value, range_low, range_high "
        f"from read_csv('{out}/MEASUREMENT.csv', header=true) where measurement_source_value = '2345-7'"
    ).fetchall()
    assert m and all(60 <= v <= 400 and u == "mg/dL" and (lo, hi) == (70, 99) for v, u, lo, hi in m)
    texts = con.sql(
        f"select note_text from read_csv('{out}/NOTE.csv', header=true) order by note_id"
    ).fetchall()
    want = sorted((int(n.note_id or 0), n.text) for t in timelines for n in t.notes)
    assert [t for (t,) in texts] == [t for _, t in want]
    icd = con.sql(
        "select distinct condition_source_value "
        f"from read_csv('{out}/CONDITION_OCCURRENCE.csv', header=true, all_varchar=true)"
    ).fetchall()
    assert {c for (c,) in icd} <= {c.icd10.code for c in synth.CONDITIONS.values()}


def test_failed_generation_leaves_no_partial_folder(tmp_path: Path) -> None:
    def interrupt(done: int) -> None:
        if done == 3:
            raise KeyboardInterrupt  # what Ctrl-C does half-way through a long run

    with pytest.raises(KeyboardInterrupt):
        synth.write_omop(10, 1, tmp_path / "omop", on_patient=interrupt)
    assert list(tmp_path.iterdir()) == []

    # an existing folder is refused unless overwrite, and survives a failed overwrite untouched
    first = synth.write_omop(4, 1, tmp_path / "omop")
    before = files(first)
    with pytest.raises(UserError, match="already exists"):
        synth.write_omop(4, 2, first)
    with pytest.raises(KeyboardInterrupt):
        synth.write_omop(10, 2, first, overwrite=True, on_patient=interrupt)
    assert files(first) == before and [p.name for p in tmp_path.iterdir()] == ["omop"]
    synth.write_omop(5, 2, first, overwrite=True)
    assert files(first) != before and [p.name for p in tmp_path.iterdir()] == ["omop"]

    # a real OS failure (the parent is a file) is a UserError and writes nothing
    blocker = tmp_path / "file"
    blocker.write_text("x")
    with pytest.raises(UserError, match="cannot create"):
        synth.write_omop(2, 1, blocker / "omop")


def test_timeline_round_trips_through_dict() -> None:
    tl = synth.patient(0, 5)
    assert Timeline.from_dict(tl.to_dict()).to_dict() == tl.to_dict()


ACUTE_NOTE_SECTIONS = {
    "emergency department note": (
        r"EMERGENCY DEPARTMENT NOTE\nArrival: \d{4}-\d\d-\d\d \d\d:\d\d\n\nCHIEF COMPLAINT: [A-Z].*\.\n\n"
        r"HISTORY OF PRESENT ILLNESS:\n\d+-year-old (wo)?man with .+ presents with .+\.\n\n"
        r"PHYSICAL EXAMINATION:\nVital signs: .*\nExamination notable for .+\.\n\nRESULTS: "
    ),
    "history and physical note": (
        r"HISTORY AND PHYSICAL\nAdmission: \d{4}-\d\d-\d\d \d\d:\d\d\n\nCHIEF COMPLAINT: [A-Z].*\.\n\n"
        r"HISTORY OF PRESENT ILLNESS:\n\d+-year-old (wo)?man with .+ presents with .+\.\n\n"
        r"HOME MEDICATIONS:\n(.|\n)*\n\nSOCIAL HISTORY: .*\.\n\n"
        r"PHYSICAL EXAMINATION:\nVital signs: .*\nExamination notable for .+\.\n\n"
        r"ADMISSION LABORATORY RESULTS: "
    ),
}


def test_acute_notes_open_with_presentation_then_examination() -> None:
    """ED notes and H&Ps share their opening and examination (``NoteWriter._presentation`` and
    ``_examination``); each keeps its own sections around them, in this order."""
    seen = dict.fromkeys(ACUTE_NOTE_SECTIONS, 0)
    for timeline in synth.generate(30, 7):
        for note in timeline.notes:
            if note.type in ACUTE_NOTE_SECTIONS:
                assert re.match(ACUTE_NOTE_SECTIONS[note.type], note.text), note.text[:400]
                seen[note.type] += 1
    assert all(seen.values()), seen
