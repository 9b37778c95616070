"""Facts of one stay, read from the timeline's coded events tied to the admission.

Answers come from here (principal diagnosis, discharge prescriptions, procedures, lab and vital
values, dates), never from the notes' free text: the question kinds (:mod:`.question_kinds`) ask about
what these return, and the notes (:mod:`.summaries`) are written from the same events.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from clinieval.benchmarks.ehrnoteqa.synth.summaries import Admission, Case
from clinieval.ehr.synth import CONDITIONS, LABS, VITALS
from clinieval.ehr.timeline import Event, Timeline

__all__ = [
    "admission_value",
    "catalog_values",
    "condition_key",
    "discharge_drugs",
    "discharge_value",
    "drug_events",
    "maintenance_drugs",
    "measurements",
    "patient_values",
    "principal",
    "quantity",
    "symptoms",
]

_OUTPATIENT = "Outpatient Visit"

_COND_BY_SNOMED = {c.snomed.code: c for c in CONDITIONS.values()}


def principal(adm: Admission) -> Event | None:
    """The condition the stay was coded for first: the reason for admission."""
    return next((e for e in adm.events if e.domain == "condition_occurrence"), None)


def drug_events(adm: Admission) -> list[Event]:
    return [e for e in adm.events if e.domain == "drug_exposure"]


def discharge_drugs(adm: Admission) -> list[Event]:
    """Drugs prescribed at discharge: the stay's drug events at its last drug time."""
    drugs = drug_events(adm)
    last = max((e.time for e in drugs if e.time), default=None)
    return [e for e in drugs if e.time == last]


def maintenance_drugs(case: Case) -> set[str]:
    """RxNorm codes a discharge medication list can hold: every drug ever prescribed at a clinic
    visit or at an inpatient discharge.

    A summary lists the standing medications (started in clinic or at an earlier discharge) and
    the discharge prescriptions; a drug outside this set (an antibiotic given on the ward, an
    emergency prescription) is therefore on no discharge list of the patient.
    """
    tl = case.timeline
    clinic = {v.visit_id for v in tl.visits if v.type == _OUTPATIENT}
    codes = {e.code or "" for e in tl.events if e.domain == "drug_exposure" and e.visit_id in clinic}
    for adm in (*case.admissions, *case.later):
        codes.update(e.code or "" for e in discharge_drugs(adm))
    return codes


def measurements(events: Iterable[Event], loinc: str) -> list[Event]:
    return [e for e in events if e.domain == "measurement" and e.code == loinc and e.value is not None]


def admission_value(adm: Admission, loinc: str) -> Event | None:
    """The first result of the stay (drawn within an hour of arrival, as the summary lists)."""
    start = adm.visit.start
    hits = measurements(adm.events, loinc)
    if start is None or not hits or (hits[0].time or datetime.max) > start + timedelta(hours=1):
        return None
    return hits[0]


def discharge_value(adm: Admission, loinc: str) -> Event | None:
    """The result at the stay's last laboratory draw (what the summary lists at discharge)."""
    labs = [e for e in adm.events if e.domain == "measurement" and e.code not in VITALS]
    last = max((e.time for e in labs if e.time), default=None)
    return next((e for e in measurements(adm.events, loinc) if e.time == last), None)


def quantity(e: Event) -> str:
    return f"{e.value} {e.unit}" if e.unit else str(e.value)


def patient_values(tl: Timeline, loinc: str) -> list[str]:
    return [quantity(e) for e in measurements(tl.events, loinc)]


def catalog_values(loinc: str) -> list[str]:
    """Plausible values of a lab from the generator's catalog: its reference and outer bounds."""
    lab = LABS[loinc]
    points = (lab.ref_low, lab.ref_high, lab.mean, lab.low, lab.high, (lab.ref_high + lab.high) / 2)
    return [f"{lab.fmt(v)} {lab.unit.code}" for v in points]


def symptoms(hpi: str) -> str:
    """The presenting complaint of a generator reason, without its duration or article.

    "fever, productive cough and pleuritic chest pain for {d} days" gives "fever, productive
    cough and pleuritic chest pain" (the text before the duration, which every summary shows).
    """
    head = hpi.split("{d}")[0].rstrip()
    for tail in (" for", " that began", " and a weight gain of about"):
        head = head.removesuffix(tail)
    for article in ("a ", "an "):
        head = head.removeprefix(article)
    return head


def condition_key(e: Event) -> str | None:
    cd = _COND_BY_SNOMED.get(e.code or "")
    return cd.key if cd else None
