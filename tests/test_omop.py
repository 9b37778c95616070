"""OMOP CDM reader on the real Synthea27Nj extract (../shared), plus hand-made edge cases."""

from __future__ import annotations

import csv
import gzip
import shutil
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from clinieval.ehr.omop import source as omop
from clinieval.ehr.omop.rows import format_number
from clinieval.ehr.omop.source import OmopSource, _passes
from clinieval.ehr.omop.tables import TABLES
from clinieval.ehr.timeline import Timeline
from clinieval.errors import UserError
from tests.conftest import need_shared

Read = tuple[OmopSource, list[Timeline]]
DOMAIN_FILES = {
    "condition_occurrence": "CONDITION_OCCURRENCE.csv",
    "drug_exposure": "DRUG_EXPOSURE.csv",
    "measurement": "MEASUREMENT.csv",
    "procedure_occurrence": "PROCEDURE_OCCURRENCE.csv",
    "observation": "OBSERVATION.csv",
    "visit_detail": "VISIT_DETAIL.csv",
    "device_exposure": "DEVICE_EXPOSURE.csv",
    "death": "DEATH.csv",
}


@pytest.fixture(scope="module")
def synthea() -> Path:
    return need_shared("omop-synthea27nj")


@pytest.fixture(scope="module")
def read(synthea: Path) -> Read:
    src = OmopSource.open(synthea)
    timelines = list(src.iter_timelines())
    src.close()
    return src, timelines


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def per_person(path: Path) -> Counter[str]:
    return Counter(r["person_id"] for r in rows(path))


def test_one_timeline_per_person(read: Read, synthea: Path) -> None:
    src, tls = read
    assert len(tls) == 28 == src.timelines
    assert [t.person.person_id for t in tls] == [r["person_id"] for r in rows(synthea / "PERSON.csv")]
    assert src.missing_tables == ()
    assert src.orphans == Counter() and src.duplicate_persons == 0


def test_event_and_visit_counts_match_the_tables(read: Read, synthea: Path) -> None:
    _, tls = read
    for domain, name in DOMAIN_FILES.items():
        expected = per_person(synthea / name)
        got = Counter({t.person.person_id: sum(e.domain == domain for e in t.events) for t in tls})
        assert +got == expected, domain
    visits = per_person(synthea / "VISIT_OCCURRENCE.csv")
    assert {t.person.person_id: len(t.visits) for t in tls} == dict(visits)
    assert sum(visits.values()) == 1791
    assert sum(len(t.events) for t in tls) == 470 + 883 + 10040 + 1649 + 8099 + 1791 + 1 + 3


def test_known_measurement_row(read: Read) -> None:
    # MEASUREMENT.csv row 1: person 1, 2013-05-17, concept 3025315 (LOINC 29463-7), 48.1, unit 9529 "kg",
    # visit 38.
    _, tls = read
    p1 = tls[0]
    hits = [
        e
        for e in p1.events
        if e.domain == "measurement" and e.time == datetime(2013, 5, 17) and e.code == "29463-7"
    ]
    assert len(hits) == 1
    e = hits[0]
    assert e.code_line() == "[LOINC/29463-7] Body weight 48.1 kg"
    assert (e.value, e.unit, e.visit_id) == ("48.1", "kg", "38")
    assert "38" in {v.visit_id for v in p1.visits}


def test_concepts_resolved(read: Read, synthea: Path) -> None:
    src, tls = read
    assert not any(e.name.startswith(("Unknown concept", "No matching")) for t in tls for e in t.events)
    assert all(e.vocabulary and e.code for t in tls for e in t.events)
    assert {v.type for t in tls for v in t.visits} <= {
        "Outpatient Visit",
        "Inpatient Visit",
        "Emergency Room Visit",
    }
    assert {"Outpatient Visit", "Inpatient Visit"} <= {v.type for t in tls for v in t.visits}
    p1 = tls[0].person
    assert (p1.sex, p1.race, p1.ethnicity) == ("MALE", "White", "Not Hispanic or Latino")
    assert p1.birth == datetime(1998, 4, 9)
    # race_concept_id 0: the source value stands in.
    by_id = {t.person.person_id: t.person for t in tls}
    for r in rows(synthea / "PERSON.csv"):
        if r["race_concept_id"] == "0":
            assert by_id[r["person_id"]].race == r["race_source_value"]
    dead = {r["person_id"]: r["death_date"] for r in rows(synthea / "DEATH.csv")}
    assert {k: v.death.date().isoformat() for k, v in by_id.items() if v.death} == dead
    death = next(e for t in tls if t.person.person_id == "7" for e in t.events if e.domain == "death")
    assert death.code_line() == "[SNOMED/26929004] Alzheimer's disease"
    assert src.issues.get("concept_0", 0) == src.issues.get("unknown_concept", 0) == 0


def test_issue_counters_consistent(read: Read, synthea: Path) -> None:
    src, tls = read
    total: Counter[str] = Counter()
    for t in tls:
        assert all(v > 0 for v in t.issues.values())
        total.update(t.issues)
        no_visit = sum(e.visit_id is None for e in t.events if e.domain != "death")
        no_visit += sum(n.visit_id is None for n in t.notes)
        assert t.issues.get("no_visit", 0) == no_visit
    assert total == src.issues
    empty_visit = sum(
        r["visit_occurrence_id"] == ""
        for name in DOMAIN_FILES.values()
        for r in rows(synthea / name)
        if "visit_occurrence_id" in r
    )
    assert src.issues["no_visit"] == empty_visit == 5
    assert sum(src.rows.values()) == 1791 + sum(len(t.events) for t in tls)


def _copy_tables(synthea: Path, con: Any, target: str) -> None:
    for t in TABLES:
        f = synthea / f"{t.upper()}.csv"
        con.execute(target.format(t=t, src=f"read_csv('{f}', header = true)"))


def test_parquet_input_identical(read: Read, synthea: Path, tmp_path: Path) -> None:
    import duckdb

    con = duckdb.connect()
    _copy_tables(synthea, con, "COPY (SELECT * FROM {src}) TO '" + str(tmp_path) + "/{t}.parquet'")
    con.close()
    with OmopSource.open(tmp_path) as src:
        got = [t.to_dict() for t in src.iter_timelines()]
        assert src.tables["person"].endswith("person.parquet")
    assert got == [t.to_dict() for t in read[1]]


def test_duckdb_database_input(read: Read, synthea: Path, tmp_path: Path) -> None:
    import duckdb

    db = tmp_path / "synthea.duckdb"
    con = duckdb.connect(str(db))
    con.execute("CREATE SCHEMA cdm")
    _copy_tables(synthea, con, "CREATE TABLE cdm.{t} AS SELECT * FROM {src}")
    con.close()
    with OmopSource.open(db) as src:
        assert src.person_ids()[:3] == ["1", "2", "3"]
        got = [t.to_dict() for t in src.iter_timelines(["7", "3"])]
    want = {t.person.person_id: t.to_dict() for t in read[1]}
    assert got == [want["3"], want["7"]]


def test_person_filter_and_unknown_person(read: Read, synthea: Path) -> None:
    with OmopSource.open(synthea) as src:
        assert [t.person.person_id for t in src.iter_timelines(["12", "2"])] == ["2", "12"]
        with pytest.raises(UserError, match="person_id 999"):
            src.iter_timelines(["2", "999"])


def _minimal(synthea: Path, dst: Path, skip: str = "") -> Path:
    dst.mkdir()
    for name in ("PERSON.csv", "VISIT_OCCURRENCE.csv", "CONCEPT.csv"):
        if name != skip:
            shutil.copy(synthea / name, dst / name)
    return dst


def test_missing_required_table(synthea: Path, tmp_path: Path) -> None:
    folder = _minimal(synthea, tmp_path / "cdm", skip="CONCEPT.csv")
    with pytest.raises(UserError, match=r"concept is missing from folder .*cdm"):
        OmopSource.open(folder)


def test_missing_required_column(synthea: Path, tmp_path: Path) -> None:
    folder = _minimal(synthea, tmp_path / "cdm")
    table = rows(folder / "VISIT_OCCURRENCE.csv")
    with (folder / "VISIT_OCCURRENCE.csv").open("w", newline="") as f:
        fields = [k for k in table[0] if k != "visit_concept_id"]
        w = csv.DictWriter(f, fields, extrasaction="ignore")
        w.writeheader()
        w.writerows(table)
    with pytest.raises(
        UserError,
        match=r"visit_occurrence in folder .*cdm lacks required column visit_concept_id",
    ):
        OmopSource.open(folder)


def test_only_required_tables(synthea: Path, tmp_path: Path) -> None:
    folder = _minimal(synthea, tmp_path / "cdm")
    with OmopSource.open(folder) as src:
        tls = list(src.iter_timelines())
        assert "measurement" in src.missing_tables and "note" in src.missing_tables
    assert len(tls) == 28 and all(not t.events and t.visits for t in tls)


def test_not_a_source(tmp_path: Path) -> None:
    f = tmp_path / "person.csv"
    f.write_text("person_id\n1\n")
    with pytest.raises(UserError, match=r"person\.csv is not a folder"):
        OmopSource.open(f)
    with pytest.raises(UserError, match="nowhere does not exist"):
        OmopSource.open(tmp_path / "nowhere")
    (tmp_path / "PERSON.parquet").write_bytes(b"")
    with pytest.raises(UserError, match=r"person is in .* twice"):
        OmopSource.open(tmp_path)


def _write(path: Path, header: str, *lines: str) -> None:
    path.write_text("\n".join((header, *lines)) + "\n")


def test_workarounds_are_counted(tmp_path: Path) -> None:
    _write(
        tmp_path / "person.csv",
        "person_id,gender_concept_id,year_of_birth,month_of_birth,"
        "gender_source_value,race_concept_id,race_source_value",
        "10,8532,1970,3,F,0,martian",
        "2,999,1980,,X,,",
    )
    _write(
        tmp_path / "visit_occurrence.csv",
        "visit_occurrence_id,person_id,visit_concept_id,visit_start_date,visit_start_datetime",
        "5,10,9201,2020-01-01,2020-01-01 08:30:00",
        "6,2,0,2021-02-02,",
    )
    _write(
        tmp_path / "concept.csv",
        "concept_id,concept_name,vocabulary_id,concept_code",
        "9201,Inpatient Visit,Visit,IP",
        "3025315,Body weight,LOINC,29463-7",
        "9529,kilogram,UCUM,kg",
        "4181412,Positive,SNOMED,10828004",
        "45,Essential hypertension,ICD10CM,I10",
    )
    _write(
        tmp_path / "Measurement.CSV",
        "measurement_id,person_id,measurement_concept_id,measurement_date,measurement_datetime,"
        "value_as_number,value_as_concept_id,unit_concept_id,unit_source_value,visit_occurrence_id,"
        "measurement_source_value",
        "1,10,3025315,2020-01-01,2020-01-01 09:00:00,100.0,,9529,kg,5,x",
        "2,10,0,2020-01-02,,,4181412,,,,covid test",
        "3,10,77,,,1.25,,9529,,6,y",
        "4,99,3025315,2020-01-01,,1,,,,,z",
        "5,2,3025315,2021-02-02,not a date,0.1,,,,6,w",
    )
    _write(
        tmp_path / "condition_occurrence.csv",
        "condition_occurrence_id,person_id,condition_concept_id,condition_start_date,"
        "condition_source_concept_id,condition_source_value,visit_occurrence_id",
        "1,2,0,2021-02-02,45,I10,6",
    )
    with OmopSource.open(tmp_path, unit="name") as src:
        a, b = src.iter_timelines()
        assert src.orphans == Counter({"measurement": 1})
    assert [a.person.person_id, b.person.person_id] == ["2", "10"]
    # person 2: unknown sex concept, no race, birth from year only; concept-0 visit typed "Visit".
    assert (a.person.sex, a.person.race, a.person.birth) == ("X", None, datetime(1980, 1, 1))
    assert a.visits[0].type == "Visit" and a.visits[0].start == datetime(2021, 2, 2)
    cond, meas = sorted(a.events, key=lambda e: e.domain)
    assert cond.code_line() == "[ICD10CM/I10] Essential hypertension"
    assert (meas.time, meas.value, meas.visit_id) == (datetime(2021, 2, 2), "0.1", "6")
    assert a.issues == Counter(unknown_concept=1, concept_0=2, missing_datetime=3, bad_datetime=1)
    # person 10
    assert (b.person.sex, b.person.race, b.person.birth) == ("FEMALE", "martian", datetime(1970, 3, 1))
    assert b.visits[0].type == "Inpatient Visit" and b.visits[0].start == datetime(2020, 1, 1, 8, 30)
    m1, m2, m3 = b.events
    assert m1.code_line() == "[LOINC/29463-7] Body weight 100 kilogram" and m1.visit_id == "5"
    assert m2.code_line() == "[UNKNOWN/covid test] covid test Positive" and m2.visit_id is None
    assert m2.time == datetime(2020, 1, 2)
    assert m3.code_line() == "[UNKNOWN/y] Unknown concept 77 1.25 kilogram" and m3.time is None
    assert m3.visit_id is None  # visit 6 is person 2's
    assert b.issues == Counter(concept_0=1, unknown_concept=1, missing_datetime=1, missing_time=1, no_visit=2)
    assert src.issues == a.issues + b.issues


def test_format_number() -> None:
    assert [format_number(x) for x in (48.1, 100.0, 0.1 + 0.2, -3, None, 1e20, float("nan"))] == [
        "48.1",
        "100",
        "0.30000000000000004",
        "-3",
        None,
        "1e+20",
        "nan",
    ]


def test_notes_and_csv_dialects(tmp_path: Path) -> None:
    # UTF-8 BOM + CRLF, a tab-separated table, a gzipped concept table, a multi-line quoted note.
    (tmp_path / "PERSON.csv").write_bytes(b'\xef\xbb\xbfperson_id,gender_source_value\r\n1,F\r\n2,"M, x"\r\n')
    _write(
        tmp_path / "visit_occurrence.csv",
        "visit_occurrence_id\tperson_id\tvisit_concept_id\tvisit_start_date",
        "1\t1\t9201\t2020-01-01",
    )
    with gzip.open(tmp_path / "CONCEPT.csv.gz", "wt") as f:
        f.write('concept_id,concept_name,vocabulary_id,concept_code\n9201,"Inpatient Visit",Visit,IP\n')
    _write(
        tmp_path / "note.csv",
        "note_id,person_id,note_date,note_datetime,note_text,note_title,visit_occurrence_id",
        '7,2,2020-02-02,2020-02-02 10:15:00,"line one\nline ""two""",Discharge summary,',
        '8,1,2020-01-01,,"seen",,1',
    )
    with OmopSource.open(tmp_path) as src:
        a, b = src.iter_timelines()
    assert (a.person.sex, b.person.sex) == ("F", "M, x")
    assert a.visits[0].type == "Inpatient Visit"
    assert a.notes[0].to_dict() == {
        "time": "2020-01-01T00:00:00",
        "type": "note",
        "text": "seen",
        "visit_id": "1",
        "note_id": "8",
    }
    assert (b.notes[0].time, b.notes[0].type, b.notes[0].text) == (
        datetime(2020, 2, 2, 10, 15),
        "Discharge summary",
        'line one\nline "two"',
    )
    assert b.notes[0].visit_id is None and b.issues == Counter(no_visit=1)
    assert a.issues == Counter(missing_datetime=2)


def test_small_chunks_same_timelines(read: Read, synthea: Path, tmp_path: Path) -> None:
    src = OmopSource.open(synthea, chunk=5, memory_limit="500MB", work_dir=tmp_path)
    assert [t.to_dict() for t in src.iter_timelines()] == [t.to_dict() for t in read[1]]
    assert src.summary()["issues"] == dict(read[0].issues)
    assert list(tmp_path.iterdir())  # the work folder lives while the source is open ...
    src.close()
    assert not list(tmp_path.iterdir())  # ... and is removed by close()


def test_passes_group_whole_chunks() -> None:
    # (chunk index, rows): passes close once they reach 10 rows; empty chunks are simply spanned
    counts = [(0, 4), (1, 7), (2, 12), (5, 3), (6, 1)]
    assert _passes(counts, 10) == [(0, 1), (2, 2), (5, 6)]
    assert _passes(counts, 1000) == [(0, 6)]
    assert _passes([], 10) == []


def test_many_staging_passes_same_timelines(
    read: Read, synthea: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Passes of a few dozen rows: every table is copied in many passes, and chunks of 4 people
    # must still come back whole and in order.
    monkeypatch.setattr(omop, "_PASS_ROWS", 40)
    src = OmopSource.open(synthea, chunk=4, work_dir=tmp_path)
    assert [t.to_dict() for t in src.iter_timelines()] == [t.to_dict() for t in read[1]]
    assert src.orphans == read[0].orphans
    src.close()


def test_a_database_cannot_reach_outside_its_folder(synthea: Path, tmp_path: Path) -> None:
    """A .duckdb file whose view reads a file elsewhere (or a URL, through an extension DuckDB
    would download) is refused with one error; the connection never loads extensions itself."""
    import duckdb

    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(synthea / "PERSON.csv", elsewhere / "PERSON.csv")
    db = tmp_path / "db" / "omop.duckdb"
    db.parent.mkdir()
    con = duckdb.connect(str(db))
    _copy_tables(synthea, con, "CREATE TABLE {t} AS SELECT * FROM {src}")
    con.execute("DROP TABLE person")
    con.execute(f"CREATE VIEW person AS SELECT * FROM read_csv('{elsewhere / 'PERSON.csv'}', header = true)")
    con.close()
    with pytest.raises(UserError, match=r"OMOP table person in database .* cannot be read: Permission Error"):
        OmopSource.open(db)
    with OmopSource.open(synthea) as src:
        settings = src._con.execute(
            "SELECT name, value FROM duckdb_settings() WHERE name IN "
            "('autoinstall_known_extensions', 'autoload_known_extensions', 'enable_external_access')"
        ).fetchall()
    assert sorted(settings) == [
        ("autoinstall_known_extensions", "false"),
        ("autoload_known_extensions", "false"),
        ("enable_external_access", "false"),
    ]
