"""A patient as a timeline: the one in-memory shape every EHR source and writer meets at.

OMOP CDM tables, MedAlign's two XML dialects, discharge summaries and the synthetic generator all
read into (or write from) :class:`Timeline`, so a reader and a writer never know about each other.
Values are kept as the strings the source held ("38", "120.5"), because re-formatting numbers
would change the record a model sees.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

JSON = dict[str, Any]

# OMOP CDM clinical event tables, in the order the MedAlign writer lists same-time events.
EVENT_DOMAINS: tuple[str, ...] = (
    "condition_occurrence",
    "visit_detail",
    "measurement",
    "procedure_occurrence",
    "observation",
    "drug_exposure",
    "device_exposure",
    "death",
)


def _iso(t: datetime | None) -> str | None:
    return None if t is None else t.isoformat()


def _dt(s: str | None) -> datetime | None:
    return None if s is None else datetime.fromisoformat(s)


@dataclass(slots=True)
class Person:
    person_id: str
    birth: datetime | None = None
    sex: str | None = None
    race: str | None = None
    ethnicity: str | None = None
    death: datetime | None = None

    def age_at(self, when: datetime) -> tuple[int, int] | None:
        """(age in days, age in whole years) on ``when``; None without a birth date."""
        if self.birth is None:
            return None
        days = (when.date() - self.birth.date()).days
        years = when.year - self.birth.year - ((when.month, when.day) < (self.birth.month, self.birth.day))
        return days, years

    def to_dict(self) -> JSON:
        return {
            "person_id": self.person_id,
            "birth": _iso(self.birth),
            "sex": self.sex,
            "race": self.race,
            "ethnicity": self.ethnicity,
            "death": _iso(self.death),
        }

    @classmethod
    def from_dict(cls, d: JSON) -> Person:
        return cls(
            person_id=str(d["person_id"]),
            birth=_dt(d.get("birth")),
            sex=d.get("sex"),
            race=d.get("race"),
            ethnicity=d.get("ethnicity"),
            death=_dt(d.get("death")),
        )


@dataclass(slots=True)
class Visit:
    visit_id: str
    type: str
    start: datetime | None
    end: datetime | None = None

    def to_dict(self) -> JSON:
        return {
            "visit_id": self.visit_id,
            "type": self.type,
            "start": _iso(self.start),
            "end": _iso(self.end),
        }

    @classmethod
    def from_dict(cls, d: JSON) -> Visit:
        return cls(str(d["visit_id"]), d["type"], _dt(d.get("start")), _dt(d.get("end")))


@dataclass(slots=True)
class Event:
    """One coded fact: a condition, drug, measurement, procedure, observation, device, death."""

    domain: str
    time: datetime | None
    name: str
    vocabulary: str | None = None
    code: str | None = None
    value: str | None = None
    unit: str | None = None
    visit_id: str | None = None

    def code_line(self) -> str:
        """MedAlign's ``[VOCAB/CODE] name value unit`` line."""
        head = f"[{self.vocabulary or 'UNKNOWN'}/{self.code or '0'}] {self.name}"
        tail = " ".join(x for x in (self.value, self.unit) if x)
        return f"{head} {tail}" if tail else head

    def to_dict(self) -> JSON:
        return {
            "domain": self.domain,
            "time": _iso(self.time),
            "name": self.name,
            "vocabulary": self.vocabulary,
            "code": self.code,
            "value": self.value,
            "unit": self.unit,
            "visit_id": self.visit_id,
        }

    @classmethod
    def from_dict(cls, d: JSON) -> Event:
        return cls(
            domain=d["domain"],
            time=_dt(d.get("time")),
            name=d["name"],
            vocabulary=d.get("vocabulary"),
            code=d.get("code"),
            value=d.get("value"),
            unit=d.get("unit"),
            visit_id=d.get("visit_id"),
        )


@dataclass(slots=True)
class Note:
    time: datetime | None
    type: str
    text: str
    visit_id: str | None = None
    note_id: str | None = None

    def to_dict(self) -> JSON:
        return {
            "time": _iso(self.time),
            "type": self.type,
            "text": self.text,
            "visit_id": self.visit_id,
            "note_id": self.note_id,
        }

    @classmethod
    def from_dict(cls, d: JSON) -> Note:
        return cls(_dt(d.get("time")), d["type"], d["text"], d.get("visit_id"), d.get("note_id"))


@dataclass(slots=True)
class Timeline:
    """One patient's record.

    ``issues`` counts what a reader had to work around (concept id 0, missing datetimes, events
    without a visit, unknown concepts, ...) so nothing is dropped or patched silently.
    """

    person: Person
    visits: list[Visit] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    notes: list[Note] = field(default_factory=list)
    issues: Counter[str] = field(default_factory=Counter)

    def items(self) -> Iterator[Event | Note]:
        """Events and notes in time order (undated last, source order kept among equals)."""
        both: list[Event | Note] = [*self.events, *self.notes]
        order = {id(x): i for i, x in enumerate(both)}
        return iter(sorted(both, key=lambda x: (x.time is None, x.time or datetime.min, order[id(x)])))

    def to_dict(self) -> JSON:
        return {
            "person": self.person.to_dict(),
            "visits": [v.to_dict() for v in self.visits],
            "events": [e.to_dict() for e in self.events],
            "notes": [n.to_dict() for n in self.notes],
            "issues": dict(self.issues),
        }

    @classmethod
    def from_dict(cls, d: JSON) -> Timeline:
        return cls(
            person=Person.from_dict(d["person"]),
            visits=[Visit.from_dict(v) for v in d.get("visits", [])],
            events=[Event.from_dict(e) for e in d.get("events", [])],
            notes=[Note.from_dict(n) for n in d.get("notes", [])],
            issues=Counter(d.get("issues", {})),
        )
