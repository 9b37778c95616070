"""A patient's record as a chart a clinician reads: newest encounter first, facts grouped by kind.

Why a chart and not the record's own text: a MedAlign record is written oldest visit first as
``<visit_detail>`` / ``<code>[SNOMED/…]`` lines, so on a 200k-character record the last admission,
the current medications and the recent labs sit at its very end, and every fact wears its code. A
clinician reads a chart: the latest encounter on top, problems, medications, procedures and labs
apart, codes as names (the code one hover away). This module builds that *model* from any record
text the apps show; :mod:`clinieval.ehr.chart_html` writes it as escaped HTML for both the review
app and the static results browser, so the two show one chart.

Three shapes come out of :func:`build_chart`:

* ``encounters`` -- MedAlign XML of either dialect (hand-written, released, or made by
  ``clinieval ehr omop2xml`` from OMOP tables), read through :func:`~clinieval.ehr.medalign_xml.read_xml`;
* ``text`` -- a plain note or report (EHRNoteQA discharge summaries, MedEval reports), cut into
  sections at its headings (``HISTORY:``, ``Discharge Diagnosis:`` on a line of its own, ...);
* ``raw`` -- XML that does not read (malformed, an unknown root): the text as it is, with the
  reader's one-line reason, because a record must never vanish behind a parser error.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from clinieval.ehr.timeline import Event, Note, Timeline
from clinieval.errors import UserError

__all__ = ["Chart", "ChartNote", "Encounter", "Fact", "Lab", "TextSection", "build_chart", "looks_like_xml"]

LAB_DOMAINS = frozenset({"measurement", "observation"})
"""Domains whose events with a value are labs/measurements (a row with value and unit)."""

SECTION_OF: dict[str, str] = {
    "condition_occurrence": "Problems",
    "drug_exposure": "Medications",
    "procedure_occurrence": "Procedures",
    "observation": "Observations",
    "device_exposure": "Devices",
    "visit_detail": "Care sites and visit details",
    "death": "Death",
}
"""The section a coded event without a value goes to; unknown domains go to ``Other``."""

SECTION_ORDER = (
    "Problems",
    "Medications",
    "Procedures",
    "Observations",
    "Devices",
    "Care sites and visit details",
    "Death",
    "Other",
)

_FLAGS = {
    "H": "H",
    "HH": "HH",
    "L": "L",
    "LL": "LL",
    "A": "A",
    "AA": "AA",
    "HIGH": "H",
    "LOW": "L",
    "ABNORMAL": "A",
    "CRITICAL": "C",
    "(H)": "H",
    "(L)": "L",
    "(A)": "A",
    "*": "A",
}
"""Reference flags a source may write after a value (``12.5 g/dL H``); shown in the Flag column."""


@dataclass(frozen=True)
class Fact:
    """One coded fact shown by name; ``code`` (``SNOMED/59621000``) goes in the hover title."""

    name: str
    code: str | None
    time: datetime | None
    count: int = 1


@dataclass(frozen=True)
class Lab:
    """One measurement row: the value as the source wrote it, its unit, and a reference flag."""

    name: str
    code: str | None
    time: datetime | None
    value: str
    unit: str
    flag: str


@dataclass(frozen=True)
class ChartNote:
    title: str
    time: datetime | None
    text: str


@dataclass(frozen=True)
class Encounter:
    """One visit (or one day of visit-less facts): its sections in :data:`SECTION_ORDER`, labs, notes."""

    title: str
    start: datetime | None
    end: datetime | None
    sections: tuple[tuple[str, tuple[Fact, ...]], ...]
    labs: tuple[Lab, ...]
    notes: tuple[ChartNote, ...]

    @property
    def day(self) -> str:
        """``YYYY-MM-DD`` of the start ('' when undated): the key jump-to-date compares."""
        return self.start.date().isoformat() if self.start else ""


@dataclass(frozen=True)
class TextSection:
    title: str
    text: str


@dataclass(frozen=True)
class Chart:
    """What the record view shows; ``kind`` is ``encounters``, ``text`` or ``raw``."""

    kind: str
    patient: tuple[tuple[str, str], ...] = ()
    encounters: tuple[Encounter, ...] = ()
    sections: tuple[TextSection, ...] = ()
    problem: str | None = None
    chars: int = 0
    counts: dict[str, int] = field(default_factory=dict)


def looks_like_xml(text: str) -> bool:
    """Whether the record is meant as XML (so a failure to read it is worth saying)."""
    head = text.lstrip("\ufeff \t\r\n")[:200]
    return head.startswith("<?xml") or bool(re.match(r"<(record|eventstream)\b", head))


def build_chart(text: str) -> Chart:
    """The chart of ``text``; never raises for a bad record (it falls back to ``raw``)."""
    if looks_like_xml(text):
        from clinieval.ehr.medalign_xml import read_xml  # the XML reader is only needed for XML

        try:
            timeline = read_xml(text)
        except UserError as e:
            return Chart(kind="raw", sections=(TextSection("Record", text),), problem=str(e), chars=len(text))
        return _from_timeline(timeline, len(text))
    return Chart(kind="text", sections=tuple(text_sections(text)), chars=len(text))


# ------------------------------------------------------------------------------- encounters


def _code(e: Event) -> str | None:
    if e.vocabulary is None and e.code is None:
        return None
    return f"{e.vocabulary or 'UNKNOWN'}/{e.code or '0'}"


def _split_flag(unit: str | None) -> tuple[str, str]:
    """``(unit, flag)``: a trailing reference flag token moved out of the unit."""
    tokens = (unit or "").split()
    if tokens and tokens[-1].upper() in _FLAGS:
        return " ".join(tokens[:-1]), _FLAGS[tokens[-1].upper()]
    return " ".join(tokens), ""


def _lab(e: Event) -> Lab:
    unit, flag = _split_flag(e.unit)
    return Lab(e.name, _code(e), e.time, e.value or "", unit, flag)


def _facts(events: Iterable[Event]) -> tuple[Fact, ...]:
    """One line per distinct fact (a drug listed on every day of a stay shows once, with a count)."""
    seen: dict[tuple[str, str | None], Fact] = {}
    for e in events:
        key = (e.name, _code(e))
        old = seen.get(key)
        seen[key] = (
            Fact(e.name, key[1], e.time) if old is None else Fact(old.name, old.code, old.time, old.count + 1)
        )
    return tuple(seen.values())


def _encounter(
    title: str, start: datetime | None, end: datetime | None, events: Sequence[Event], notes: Sequence[Note]
) -> Encounter:
    labs = [e for e in events if e.domain in LAB_DOMAINS and e.value]
    rest = [e for e in events if not (e.domain in LAB_DOMAINS and e.value)]
    grouped: dict[str, list[Event]] = {}
    for e in rest:
        grouped.setdefault(SECTION_OF.get(e.domain, "Other"), []).append(e)
    sections = tuple((name, _facts(grouped[name])) for name in SECTION_ORDER if name in grouped)
    return Encounter(
        title=title,
        start=start,
        end=end,
        sections=sections,
        labs=tuple(_lab(e) for e in labs),
        notes=tuple(ChartNote(n.type, n.time, n.text) for n in notes),
    )


def _when(x: Event | Note) -> tuple[bool, datetime]:
    return (x.time is None, x.time or datetime.min)


def _patient(tl: Timeline) -> tuple[tuple[str, str], ...]:
    p = tl.person
    rows = [
        ("Born", p.birth.date().isoformat() if p.birth else ""),
        ("Sex", p.sex or ""),
        ("Race", p.race or ""),
        ("Ethnicity", p.ethnicity or ""),
        ("Died", p.death.date().isoformat() if p.death else ""),
    ]
    return tuple((k, v) for k, v in rows if v)


def _from_timeline(tl: Timeline, chars: int) -> Chart:
    """Visits newest first; facts without a visit form one encounter per day ("No visit")."""
    by_visit: dict[str, tuple[list[Event], list[Note]]] = {v.visit_id: ([], []) for v in tl.visits}
    loose: dict[str, tuple[list[Event], list[Note]]] = {}
    both: list[Event | Note] = [*tl.events, *tl.notes]
    for x in sorted(both, key=_when):
        box = by_visit.get(x.visit_id) if x.visit_id else None
        if box is None:
            box = loose.setdefault(x.time.date().isoformat() if x.time else "", ([], []))
        if isinstance(x, Event):
            box[0].append(x)
        else:
            box[1].append(x)
    encounters = [_encounter(v.type, v.start, v.end, *by_visit[v.visit_id]) for v in tl.visits]
    for day, (events, notes) in loose.items():
        times = [x.time for x in events if x.time] + [n.time for n in notes if n.time]
        start = min(times, default=None)
        encounters.append(_encounter("No visit" if day else "Undated", start, None, events, notes))
    encounters.sort(key=lambda e: (e.start is not None, e.start or datetime.min), reverse=True)
    counts = {"encounters": len(encounters), "events": len(tl.events), "notes": len(tl.notes)}
    return Chart(
        kind="encounters", patient=_patient(tl), encounters=tuple(encounters), chars=chars, counts=counts
    )


# ------------------------------------------------------------------------------------- text

_HEADING = re.compile(
    r"^[ \t]*(?P<title>[A-Z][A-Z0-9 /&(),'-]{2,60}|[A-Z][A-Za-z0-9 /&(),'-]{2,60}(?=:[ \t]*$))"
    r":[ \t]*(?P<rest>.*)$"
)
"""A heading: an ALL-CAPS label and a colon (``FINDINGS: …``), or any capitalised label alone on
its line ending in a colon (``Discharge Diagnosis:``). ``Name: Jessica`` is not one."""


def text_sections(text: str) -> list[TextSection]:
    """``text`` cut at its headings; text before the first heading is an untitled section.
    Joining the sections' titles and texts back gives every character of the note's content."""
    sections: list[TextSection] = []
    title, lines = "", list[str]()
    for line in text.splitlines():
        m = _HEADING.match(line)
        if m:
            if title or "".join(lines).strip():
                sections.append(TextSection(title, "\n".join(lines).strip("\n")))
            title, lines = m["title"].strip(), ([m["rest"]] if m["rest"].strip() else [])
        else:
            lines.append(line)
    if title or "".join(lines).strip() or not sections:
        sections.append(TextSection(title, "\n".join(lines).strip("\n")))
    return sections
