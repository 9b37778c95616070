"""MedAlign XML: the real paper-dialect sample, round trips, the release dialect, bad input."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest

from clinieval.ehr.medalign_xml import (
    NO_VISIT,
    format_time,
    parse_code_line,
    parse_time,
    read_xml,
    timeline_to_xml,
    write_xml,
)
from clinieval.ehr.timeline import Event, Note, Person, Timeline, Visit
from clinieval.errors import UserError
from tests.conftest import need_shared


@pytest.fixture(scope="module")
def sample_path() -> Path:
    return need_shared("medalign") / "sample-ehr-clean.xml"


@pytest.fixture(scope="module")
def sample(sample_path: Path) -> Timeline:
    return read_xml(sample_path)


def _raw_code_lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines()
    return [x.strip().removeprefix("<code>").removesuffix("</code>").strip() for x in lines if "<code>" in x]


def test_sample_shape(sample: Timeline) -> None:
    assert [v.type for v in sample.visits] == ["Emergency Room Visit", "Visit", "Neurology Clinic Visit"]
    assert sample.visits[0].start == datetime(2018, 10, 8, 20, 0)  # 24-hour "10/08/2018 20:00"
    assert sample.visits[1].start == datetime(2018, 10, 20, 11, 0)
    assert len(sample.notes) == 5
    assert len(sample.events) == 52
    assert all(e.visit_id for e in sample.events) and all(n.visit_id for n in sample.notes)
    p = sample.person
    assert (p.birth, p.race, p.sex, p.ethnicity) == (
        datetime(1966, 7, 19),
        "White",
        "FEMALE",
        "Hispanic or Latino",
    )
    assert p.person_id == "sample-ehr-clean"
    # The second visit's person block says 55 years on 10/20/2018 (she was 52).
    assert sample.issues["age_mismatch"] == 1


def test_sample_quirks_survive(sample: Timeline, sample_path: Path) -> None:
    codes = [(e.vocabulary, e.code) for e in sample.events if e.domain == "condition_occurrence"]
    assert codes == [("ICD", "163.5"), ("ICD", "I63.5"), ("ICD", "163.5")]
    notes = sample.notes
    assert notes[0].time == datetime(2018, 10, 8, 20, 10)  # "08:10 PM"
    assert notes[0].type == "emergency department note"
    assert notes[1].time == datetime(2018, 10, 8, 21, 0)  # "9:00 PM"
    assert notes[3].time == datetime(2018, 10, 20, 13, 45)  # "1:45 PM"
    assert [n.type for n in notes].count("NULL") == 2
    assert "dx\u2019d" in notes[2].text
    assert notes[4].text.splitlines()[1].startswith("MRI Brain 4/28/22")  # multi-line note kept
    weights = [e for e in sample.events if e.name == "Body weight"]
    assert [(e.value, e.unit) for e in weights] == [("80", "kg"), ("2432.51", None), ("75", "kg")]
    bp = next(e for e in sample.events if e.name == "Mean blood pressure")
    assert (bp.value, bp.unit) == ("122", "mm Hg")
    temp = next(e for e in sample.events if e.name == "Body temperature")
    assert (temp.value, temp.unit) == ("38", None)  # "Body temperature 38 " (trailing space)
    drug = next(e for e in sample.events if e.domain == "drug_exposure")
    assert (drug.name, drug.value) == ("alteplase 1 MG/ML Injectable Solution", None)
    # Every code line of the file reads back to the same text, whitespace around it aside.
    assert sorted(e.code_line() for e in sample.events) == sorted(_raw_code_lines(sample_path))


def test_sample_round_trip(sample: Timeline, tmp_path: Path) -> None:
    xml = timeline_to_xml(sample)
    out = write_xml(sample, tmp_path / "ehr.xml")
    assert out.read_text(encoding="utf-8") == xml
    assert not [p for p in tmp_path.iterdir() if p.name != "ehr.xml"]  # no temp file left
    again = read_xml(out)

    def events(tl: Timeline) -> list[tuple[object, ...]]:
        return sorted((e.time, e.domain, e.code_line()) for e in tl.events)

    def notes(tl: Timeline) -> list[tuple[object, ...]]:
        return sorted((n.time, n.type, n.text) for n in tl.notes)

    assert events(again) == events(sample)
    assert notes(again) == notes(sample)
    assert [(v.type, v.start) for v in again.visits] == [(v.type, v.start) for v in sample.visits]
    assert again.person.to_dict() | {"person_id": ""} == sample.person.to_dict() | {"person_id": ""}
    assert again.issues["age_mismatch"] == 0  # the writer computes ages
    assert timeline_to_xml(again) == xml
    assert xml.count("<code>") == 52 and xml.count("<note ") == 5
    assert xml.count("<measurement ") == 9  # same-time measurements share one element


def _hand_built() -> Timeline:
    person = Person("p1", birth=datetime(1980, 2, 29), sex="MALE", race="Asian & Other <x>")
    visits = [
        Visit("b", "Office Visit", datetime(2021, 3, 2, 9, 0)),
        Visit("a", 'ER "fast" <track>', datetime(2021, 1, 5, 23, 30)),
        Visit("empty", "Telephone", datetime(2021, 6, 1, 8, 0)),
    ]
    events = [
        Event("measurement", datetime(2021, 1, 5, 23, 45), "Glucose", "LOINC", "2345-7", "110", "mg/dL", "a"),
        Event("measurement", datetime(2021, 1, 5, 23, 45), "Na < 135 & K", "LOINC", "1-1", "4.1", None, "a"),
        Event("condition_occurrence", datetime(2021, 1, 6, 0, 10), "Sepsis", "ICD10", "A41.9", visit_id="a"),
        Event("drug_exposure", datetime(2021, 2, 1, 7, 5, 30), "aspirin 81 MG", "RxNorm", "243670"),
        Event("observation", None, "Smoker", "SNOMED", "77176002"),
        Event(
            "measurement", datetime(2021, 3, 2, 9, 15), "Heart rate", "LOINC", "8867-4", "72", visit_id="b"
        ),
        Event("procedure_occurrence", datetime(2021, 3, 2, 9, 20), "free text only", visit_id="b"),
    ]
    notes = [
        Note(datetime(2021, 1, 5, 23, 50), "ED note", 'Pt <70> & "stable"\n  - item\n\nend ', "a"),
        Note(datetime(2021, 2, 1, 7, 0), "NULL", "phone call, no visit"),
        Note(datetime(2021, 3, 2, 9, 20), "Office note", "", "b"),
    ]
    return Timeline(person, visits, events, notes)


def test_hand_built_round_trip(tmp_path: Path) -> None:
    tl = _hand_built()
    xml = timeline_to_xml(tl)
    assert timeline_to_xml(tl) == xml  # deterministic
    back = read_xml(xml)
    assert timeline_to_xml(back) == xml
    # Visits in time order; the visit-less items sit in synthetic blocks and stay visit-less.
    assert [v.type for v in back.visits] == ['ER "fast" <track>', "Office Visit", "Telephone"]
    assert xml.count(f'<visit type="{NO_VISIT}"') == 2  # 02/01/2021 and the undated block
    assert xml.index(NO_VISIT) > xml.index("ER &quot;fast&quot; &lt;track&gt;")
    assert xml.index(NO_VISIT) < xml.index("Office Visit")
    orphans = [e for e in back.events if e.visit_id is None]
    assert sorted(e.name for e in orphans) == ["Smoker", "aspirin 81 MG"]
    assert next(e for e in orphans if e.name == "Smoker").time is None
    assert next(e for e in orphans if e.name == "aspirin 81 MG").time == datetime(2021, 2, 1, 7, 5, 30)
    assert [n.visit_id is None for n in back.notes] == [False, True, False]
    # Escaping and exact texts.
    assert "Na &lt; 135 &amp; K" in xml
    by_name = {e.name: e for e in back.events}
    assert (by_name["Na < 135 & K"].value, by_name["Glucose"].unit) == ("4.1", "mg/dL")
    assert by_name["free text only"].vocabulary is None
    assert [n.text for n in back.notes] == [n.text for n in tl.notes]
    assert back.person.race == "Asian & Other <x>" and back.person.birth == datetime(1980, 2, 29)
    assert back.issues["age_mismatch"] == 0
    # Same-time same-domain events share one element.
    assert xml.count('<measurement start="01/05/2021 11:45 PM">') == 1
    # The atomic writer gives the same text.
    assert write_xml(tl, tmp_path / "x.xml").read_text(encoding="utf-8") == xml


def test_times_and_code_lines() -> None:
    assert parse_time("10/08/2018 20:00") == datetime(2018, 10, 8, 20, 0)
    assert parse_time("10/08/2018 08:00 PM") == datetime(2018, 10, 8, 20, 0)
    assert parse_time("10/08/2018 12:15 AM") == datetime(2018, 10, 8, 0, 15)
    assert parse_time("9:00 PM", datetime(2018, 10, 8).date()) == datetime(2018, 10, 8, 21, 0)
    assert parse_time("9:00 PM") is None  # no date to take
    assert parse_time("2013-10-10 19:08:00") == datetime(2013, 10, 10, 19, 8)
    assert parse_time("13/40/2018 10:00") is None and parse_time("yesterday") is None
    t = datetime(2020, 1, 2, 0, 5)
    assert format_time(t) == "01/02/2020 12:05 AM" and parse_time(format_time(t)) == t
    for line in ("[LOINC/8478-0] Mean blood pressure 122 mm Hg", "[LOINC/1] Body weight 2432.51", "[A/B]"):
        assert parse_code_line(line, "measurement").code_line().strip() == line
    e = parse_code_line("[RxNorm/6185] Labetalol 5mg IV x 1", "drug_exposure")
    assert (e.name, e.value) == ("Labetalol 5mg IV x 1", None)  # values only for measurement/observation


RELEASE = """<?xml version="1.0" encoding="UTF-8"?>
<eventstream person_id="2129690">
  <encounter start_timestamp="2013-10-10 19:08:00" end_timestamp="2013-10-12 10:00:00">
    <person>
      <birthdate>1970-05-01</birthdate>
      <age><days>15868</days><years>43</years></age>
      <demographics><ethnicity>Not Hispanic or Latino</ethnicity><gender>FEMALE</gender></demographics>
    </person>
    <events>
      <entry timestamp="2013-10-10 19:08:00">
        <event type="visit" code="Visit/ER" name="Emergency Room Visit"/>
        <event type="condition_occurrence" code="ICD10CM/R07.9" name="Chest pain, unspecified"/>
      </entry>
      <entry timestamp="2013-10-10 19:30:00">
        <event type="measurement" name="[LOINC/8867-4] Heart rate 104"/>
        <event type="measurement" code="LOINC/2345-7" name="Glucose">140</event>
        <event type="note" note_id="n-17" name="ED Triage Note">Chest pain &amp; SOB since 2 h.
Troponin pending.</event>
      </entry>
    </events>
  </encounter>
</eventstream>
"""


def test_release_dialect() -> None:
    tl = read_xml(RELEASE)
    assert tl.person.person_id == "2129690"
    assert (tl.person.birth, tl.person.sex, tl.person.ethnicity) == (
        datetime(1970, 5, 1),
        "FEMALE",
        "Not Hispanic or Latino",
    )
    assert tl.issues["age_mismatch"] == 0
    [v] = tl.visits
    assert (v.type, v.start, v.end) == (
        "Emergency Room Visit",
        datetime(2013, 10, 10, 19, 8),
        datetime(2013, 10, 12, 10),
    )
    cond, hr, glu = tl.events
    assert (cond.domain, cond.vocabulary, cond.code, cond.name) == (
        "condition_occurrence",
        "ICD10CM",
        "R07.9",
        "Chest pain, unspecified",
    )
    assert (hr.vocabulary, hr.code, hr.name, hr.value, hr.time) == (
        "LOINC",
        "8867-4",
        "Heart rate",
        "104",
        datetime(2013, 10, 10, 19, 30),
    )
    assert (glu.code, glu.name, glu.value) == ("2345-7", "Glucose", "140")
    assert all(e.visit_id == v.visit_id for e in tl.events)
    [note] = tl.notes
    assert (note.type, note.note_id, note.text) == (
        "ED Triage Note",
        "n-17",
        "Chest pain & SOB since 2 h.\nTroponin pending.",
    )
    # It converts to the paper dialect and stays stable from there.
    xml = timeline_to_xml(tl)
    assert timeline_to_xml(read_xml(xml)) == xml


def test_malformed_xml(tmp_path: Path) -> None:
    bad = tmp_path / "bad.xml"
    bad.write_text("<record>\n  <visit type='x'>\n    <day>\n  </visit>\n</record>\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"bad\.xml.*line 4, column \d+"):
        read_xml(bad)


def test_unknown_root_and_missing_file(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"<html>.*<record>.*<eventstream>"):
        read_xml("<html><body/></html>")
    with pytest.raises(UserError, match="cannot read"):
        read_xml(tmp_path / "nope.xml")


def test_bad_visit_time() -> None:
    doc = '<record>\n<visit type="ER" start="next tuesday">\n</visit>\n</record>'
    with pytest.raises(UserError, match=r"line 2: .*<visit> start time 'next tuesday'"):
        read_xml(doc)
