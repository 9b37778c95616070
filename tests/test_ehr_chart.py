"""The chart model (clinieval.ehr.chart) and its HTML (clinieval.ehr.chart_html), on small records
written by hand, the public MedAlign sample and the release dialect."""

from __future__ import annotations

import re

from clinieval.ehr.chart import build_chart, text_sections
from clinieval.ehr.chart_html import asset_text, render_chart
from tests.conftest import need_shared

RECORD = """<record>
    <visit type="Outpatient Visit" start="01/05/2020 09:00 AM">
        <day start="01/05/2020 09:00 AM">
            <condition_occurrence start="01/05/2020 09:00 AM">
                <code>[SNOMED/59621000] Essential hypertension</code>
            </condition_occurrence>
            <drug_exposure start="01/05/2020 09:10 AM">
                <code>[RxNorm/314076] lisinopril 10 MG Oral Tablet</code>
            </drug_exposure>
        </day>
    </visit>
    <visit type="Inpatient Visit" start="03/10/2021 10:00 PM" end="03/14/2021 11:00 AM">
        <day start="03/10/2021 10:00 PM">
            <measurement start="03/10/2021 10:05 PM">
                <code>[LOINC/718-7] Hemoglobin 9.1 g/dL L</code>
                <code>[LOINC/2160-0] Creatinine 1.0 mg/dL</code>
            </measurement>
            <drug_exposure start="03/10/2021 11:00 PM">
                <code>[RxNorm/1] heparin &lt;b&gt;5000&lt;/b&gt; units</code>
            </drug_exposure>
            <drug_exposure start="03/11/2021 11:00 PM">
                <code>[RxNorm/1] heparin &lt;b&gt;5000&lt;/b&gt; units</code>
            </drug_exposure>
            <procedure_occurrence start="03/11/2021 08:00 AM">
                <code>[SNOMED/268400002] 12 lead ECG</code>
            </procedure_occurrence>
            <note type="discharge summary" start="03/14/2021 10:00 AM">
                Discharged home. XXXX follow-up in 2 weeks. &lt;script&gt;alert(1)&lt;/script&gt;
            </note>
        </day>
    </visit>
</record>
"""


def test_encounters_newest_first_with_sections_names_units_and_flags() -> None:
    chart = build_chart(RECORD)
    assert chart.kind == "encounters" and chart.problem is None
    assert [e.title for e in chart.encounters] == ["Inpatient Visit", "Outpatient Visit"]
    assert [e.day for e in chart.encounters] == ["2021-03-10", "2020-01-05"]
    latest, first = chart.encounters
    sections = dict(latest.sections)
    assert [f.name for f in sections["Medications"]] == ["heparin <b>5000</b> units"]
    assert sections["Medications"][0].count == 2  # the same drug on two days shows once, counted
    assert [(f.name, f.code) for f in sections["Procedures"]] == [("12 lead ECG", "SNOMED/268400002")]
    assert [(x.name, x.value, x.unit, x.flag) for x in latest.labs] == [
        ("Hemoglobin", "9.1", "g/dL", "L"),
        ("Creatinine", "1.0", "mg/dL", ""),
    ]
    assert [n.title for n in latest.notes] == ["discharge summary"]
    assert "XXXX follow-up" in latest.notes[0].text
    assert dict(first.sections)["Problems"][0].code == "SNOMED/59621000"


def test_the_html_is_escaped_names_codes_on_hover_and_newest_first() -> None:
    html = render_chart(build_chart(RECORD), prefix="c1")
    assert "<script>" not in html and "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    assert "<b>" not in html and "heparin &lt;b&gt;5000&lt;/b&gt; units" in html
    assert '<abbr class="code name" title="SNOMED/59621000">Essential hypertension</abbr>' in html
    assert "[SNOMED/" not in html  # the code is on hover only, never in the line
    assert re.findall(r'data-day="([0-9-]+)"', html) == ["2021-03-10", "2020-01-05"]
    assert 'id="c1-search"' in html and 'id="c1-date" type="date" min="2020-01-05" max="2021-03-10"' in html
    assert '<span class="flag flag-L">L</span>' in html
    assert " style=" not in html and "<script" not in html  # the review app's CSP allows neither


def test_malformed_xml_falls_back_to_the_raw_text_with_the_reason() -> None:
    broken = RECORD.replace("</visit>", "", 1)
    chart = build_chart(broken)
    assert chart.kind == "raw"
    assert chart.problem is not None and "malformed XML at line" in chart.problem
    assert chart.sections[0].text == broken  # nothing lost
    html = render_chart(chart)
    assert 'id="chart-problem"' in html and "&lt;record&gt;" in html
    unknown = build_chart('<?xml version="1.0"?><patient><x/></patient>')
    assert unknown.kind == "raw" and "not a MedAlign EHR" in (unknown.problem or "")


def test_release_dialect_events_without_a_visit_and_undated_ones() -> None:
    stream = """<eventstream person_id="p1">
      <encounter start_timestamp="2019-02-01 08:00" end_timestamp="2019-02-01 12:00">
        <entry timestamp="2019-02-01 08:30">
          <event type="condition_occurrence" name="Asthma" code="SNOMED/195967001"/></entry>
      </encounter>
      <encounter start_timestamp="2023-07-09 08:00" end_timestamp="2023-07-09 09:00">
        <entry timestamp="2023-07-09 08:15">
          <event type="measurement" name="Body weight" code="LOINC/29463-7">80 kg</event></entry>
      </encounter>
    </eventstream>"""
    chart = build_chart(stream)
    assert chart.kind == "encounters"
    assert [e.day for e in chart.encounters] == ["2023-07-09", "2019-02-01"]


def test_notes_and_reports_become_text_sections_at_their_headings() -> None:
    report = "\n".join(
        [
            "EXAMINATION: CHEST (PA AND LAT)",
            "FINDINGS: XXXX clear lungs.",
            "No effusion.",
            "IMPRESSION:",
            "Normal.",
        ]
    )
    assert [(s.title, s.text) for s in text_sections(report)] == [
        ("EXAMINATION", "CHEST (PA AND LAT)"),
        ("FINDINGS", "XXXX clear lungs.\nNo effusion."),
        ("IMPRESSION", "Normal."),
    ]
    note = "Name: Jane Doe\nChief Complaint:\nchest pain\nDischarge Diagnosis:\nNSTEMI"
    assert [(s.title, s.text) for s in text_sections(note)] == [
        ("", "Name: Jane Doe"),  # a field, not a heading: it has text after the colon and is not capitals
        ("Chief Complaint", "chest pain"),
        ("Discharge Diagnosis", "NSTEMI"),
    ]
    chart = build_chart(note)
    assert chart.kind == "text" and len(chart.sections) == 3
    assert build_chart("").sections[0].text == ""


def test_the_public_medalign_sample_reads_as_a_chart() -> None:
    sample = (need_shared("medalign") / "sample-ehr-clean.xml").read_text(encoding="utf-8")
    chart = build_chart(sample)
    assert chart.kind == "encounters" and len(chart.encounters) == 3
    shown = [e.day for e in chart.encounters]
    assert shown == sorted(shown, reverse=True)
    labs = [lab for e in chart.encounters for lab in e.labs]
    assert any(lab.name == "Mean blood pressure" and lab.unit == "mm Hg" for lab in labs)
    assert sum(len(e.notes) for e in chart.encounters) == 5


def test_the_chart_assets_ship_with_the_package() -> None:
    assert "function wire(chart)" in asset_text("chart.js")
    assert "details.encounter" in asset_text("chart.css")
