"""Synthetic patients as an OMOP CDM 5.4 folder of CSV tables, like the Synthea27Nj sample.

:func:`write_omop` streams the generator's timelines into one CSV file per table (column names as
in the Synthea27Nj OMOP sample, :data:`OMOP_COLUMNS`), patient by patient so memory does not grow
with the number of patients, and atomically (a temporary sibling folder renamed into place).
Kept apart from the generator because it is a file format: it maps timeline events back to the
catalogue's concepts, numbers rows per table and writes the concept table of what was used.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from clinieval.ehr.synth.catalog import CONDITIONS, DRUGS, ConditionDef, DrugDef, all_concepts
from clinieval.ehr.synth.concepts import (
    ETHNICITIES,
    GENDERS,
    NOTE_CLASSES,
    RACES,
    TYPE_EHR,
    VISIT_TYPES,
    Concept,
)
from clinieval.ehr.synth.generator import generate
from clinieval.ehr.synth.labs import LABS
from clinieval.ehr.timeline import Event, Timeline
from clinieval.errors import UserError
from clinieval.fsutil import staged_dir

OMOP_COLUMNS: dict[str, tuple[str, ...]] = {
    "PERSON": (
        "person_id",
        "gender_concept_id",
        "year_of_birth",
        "month_of_birth",
        "day_of_birth",
        "birth_datetime",
        "race_concept_id",
        "ethnicity_concept_id",
        "location_id",
        "provider_id",
        "care_site_id",
        "person_source_value",
        "gender_source_value",
        "gender_source_concept_id",
        "race_source_value",
        "race_source_concept_id",
        "ethnicity_source_value",
        "ethnicity_source_concept_id",
    ),
    "VISIT_OCCURRENCE": (
        "visit_occurrence_id",
        "person_id",
        "visit_concept_id",
        "visit_start_date",
        "visit_start_datetime",
        "visit_end_date",
        "visit_end_datetime",
        "visit_type_concept_id",
        "provider_id",
        "care_site_id",
        "visit_source_value",
        "visit_source_concept_id",
        "admitted_from_concept_id",
        "admitted_from_source_value",
        "discharged_to_concept_id",
        "discharged_to_source_value",
        "preceding_visit_occurrence_id",
    ),
    "CONDITION_OCCURRENCE": (
        "condition_occurrence_id",
        "person_id",
        "condition_concept_id",
        "condition_start_date",
        "condition_start_datetime",
        "condition_end_date",
        "condition_end_datetime",
        "condition_type_concept_id",
        "condition_status_concept_id",
        "stop_reason",
        "provider_id",
        "visit_occurrence_id",
        "visit_detail_id",
        "condition_source_value",
        "condition_source_concept_id",
        "condition_status_source_value",
    ),
    "DRUG_EXPOSURE": (
        "drug_exposure_id",
        "person_id",
        "drug_concept_id",
        "drug_exposure_start_date",
        "drug_exposure_start_datetime",
        "drug_exposure_end_date",
        "drug_exposure_end_datetime",
        "verbatim_end_date",
        "drug_type_concept_id",
        "stop_reason",
        "refills",
        "quantity",
        "days_supply",
        "sig",
        "route_concept_id",
        "lot_number",
        "provider_id",
        "visit_occurrence_id",
        "visit_detail_id",
        "drug_source_value",
        "drug_source_concept_id",
        "route_source_value",
        "dose_unit_source_value",
    ),
    "MEASUREMENT": (
        "measurement_id",
        "person_id",
        "measurement_concept_id",
        "measurement_date",
        "measurement_datetime",
        "measurement_time",
        "measurement_type_concept_id",
        "operator_concept_id",
        "value_as_number",
        "value_as_concept_id",
        "unit_concept_id",
        "range_low",
        "range_high",
        "provider_id",
        "visit_occurrence_id",
        "visit_detail_id",
        "measurement_source_value",
        "measurement_source_concept_id",
        "unit_source_value",
        "unit_source_concept_id",
        "value_source_value",
        "measurement_event_id",
        "meas_event_field_concept_id",
    ),
    "PROCEDURE_OCCURRENCE": (
        "procedure_occurrence_id",
        "person_id",
        "procedure_concept_id",
        "procedure_date",
        "procedure_datetime",
        "procedure_end_date",
        "procedure_end_datetime",
        "procedure_type_concept_id",
        "modifier_concept_id",
        "quantity",
        "provider_id",
        "visit_occurrence_id",
        "visit_detail_id",
        "procedure_source_value",
        "procedure_source_concept_id",
        "modifier_source_value",
    ),
    "OBSERVATION": (
        "observation_id",
        "person_id",
        "observation_concept_id",
        "observation_date",
        "observation_datetime",
        "observation_type_concept_id",
        "value_as_number",
        "value_as_string",
        "value_as_concept_id",
        "qualifier_concept_id",
        "unit_concept_id",
        "provider_id",
        "visit_occurrence_id",
        "visit_detail_id",
        "observation_source_value",
        "observation_source_concept_id",
        "unit_source_value",
        "qualifier_source_value",
        "value_source_value",
        "observation_event_id",
        "obs_event_field_concept_id",
    ),
    "NOTE": (
        "note_id",
        "person_id",
        "note_date",
        "note_datetime",
        "note_type_concept_id",
        "note_class_concept_id",
        "note_title",
        "note_text",
        "encoding_concept_id",
        "language_concept_id",
        "provider_id",
        "visit_occurrence_id",
        "visit_detail_id",
        "note_source_value",
        "note_event_id",
        "note_event_field_concept_id",
    ),
    "DEATH": (
        "person_id",
        "death_date",
        "death_datetime",
        "death_type_concept_id",
        "cause_concept_id",
        "cause_source_value",
        "cause_source_concept_id",
    ),
    "CONCEPT": (
        "concept_id",
        "concept_name",
        "domain_id",
        "vocabulary_id",
        "concept_class_id",
        "standard_concept",
        "concept_code",
        "valid_start_date",
        "valid_end_date",
        "invalid_reason",
    ),
}

# (vocabulary, code) -> concept, for turning timeline events back into OMOP rows
_BY_CODE: dict[tuple[str, str], Concept] = {(c.vocabulary, c.code): c for c in all_concepts()}
_COND_BY_SNOMED: dict[str, ConditionDef] = {c.snomed.code: c for c in CONDITIONS.values()}
_DRUG_BY_CODE: dict[str, DrugDef] = {d.concept.code: d for d in DRUGS.values()}
_VISIT_BY_NAME: dict[str, Concept] = {c.name: c for c in VISIT_TYPES.values()}

_DOMAIN_TABLE = {
    "condition_occurrence": "CONDITION_OCCURRENCE",
    "drug_exposure": "DRUG_EXPOSURE",
    "measurement": "MEASUREMENT",
    "procedure_occurrence": "PROCEDURE_OCCURRENCE",
    "observation": "OBSERVATION",
}


def _d(t: datetime | date | None) -> str:
    return "" if t is None else f"{t:%Y-%m-%d}"


def _dt(t: datetime | None) -> str:
    return "" if t is None else f"{t:%Y-%m-%d %H:%M:%S}"


def _span(start: datetime | None, end: datetime | None) -> tuple[str, str, str, str]:
    """Start date, start datetime, end date, end datetime: the four columns every dated table has."""
    return _d(start), _dt(start), _d(end), _dt(end)


@dataclass(frozen=True, slots=True)
class _EventRef:
    """An event's row number in its table, its person, concept and visit."""

    n: int
    pid: int
    cid: int
    code: str
    vid: int | str

    def head(self) -> tuple[int, int, int]:
        """The row id, person id and concept id that open every event row."""
        return self.n, self.pid, self.cid

    def source(self, code: str | None = None, cid: int | None = None) -> tuple[int | str, str, str, int]:
        """Visit, visit detail, source value and source concept (the event's own unless given)."""
        return self.vid, "", self.code if code is None else code, self.cid if cid is None else cid


class _OmopRows:
    """Turns generator timelines into OMOP rows, numbering events per table and recording concepts."""

    def __init__(self) -> None:
        self.counters = dict.fromkeys(_DOMAIN_TABLE.values(), 0)
        self.used: set[int] = {TYPE_EHR}

    def _c(self, c: Concept) -> int:
        self.used.add(c.concept_id)
        return c.concept_id

    def rows(self, tl: Timeline) -> Iterator[tuple[str, tuple[Any, ...]]]:
        p = tl.person
        pid = int(p.person_id)
        assert p.birth is not None
        gender = next(g for g in GENDERS.values() if g.name == p.sex)
        race_key, race = next((k, r) for k, r in RACES.items() if r.name == p.race)
        eth_key, eth = next((k, e) for k, e in ETHNICITIES.items() if e.name == p.ethnicity)
        yield (
            "PERSON",
            (
                pid,
                self._c(gender),
                p.birth.year,
                p.birth.month,
                p.birth.day,
                _dt(p.birth),
                self._c(race),
                self._c(eth),
                "",
                "",
                "",
                f"synthetic-{pid}",
                gender.code,
                0,
                race_key,
                0,
                eth_key,
                0,
            ),
        )
        prev = ""
        ends: dict[str, datetime | None] = {}
        for v in tl.visits:
            vc = _VISIT_BY_NAME[v.type]
            ends[v.visit_id] = v.end
            yield (
                "VISIT_OCCURRENCE",
                (
                    int(v.visit_id),
                    pid,
                    self._c(vc),
                    *_span(v.start, v.end),
                    TYPE_EHR,
                    "",
                    "",
                    vc.code,
                    0,
                    0,
                    "",
                    0,
                    "",
                    prev,
                ),
            )
            prev = v.visit_id
        for e in tl.events:
            if e.domain != "death":
                table = _DOMAIN_TABLE[e.domain]
                yield table, _EVENT_ROWS[table](self, self._ref(table, e, pid), e, ends)
        for note in tl.notes:
            nc = NOTE_CLASSES[note.type]
            yield (
                "NOTE",
                (
                    int(note.note_id or 0),
                    pid,
                    _d(note.time),
                    _dt(note.time),
                    TYPE_EHR,
                    self._c(nc),
                    nc.name,
                    note.text,
                    0,
                    0,
                    "",
                    int(note.visit_id) if note.visit_id else "",
                    "",
                    note.type,
                    "",
                    "",
                ),
            )
        for e in tl.events:
            if e.domain == "death":
                cause = _BY_CODE.get((e.vocabulary or "", e.code or ""))
                cc = self._c(cause) if cause else 0
                yield "DEATH", (pid, _d(e.time), _dt(e.time), TYPE_EHR, cc, e.code or "", cc)

    def _ref(self, table: str, e: Event, pid: int) -> _EventRef:
        """Number the event in its table and look its concept up."""
        self.counters[table] += 1
        c = _BY_CODE[(e.vocabulary or "", e.code or "")]
        return _EventRef(self.counters[table], pid, self._c(c), c.code, int(e.visit_id) if e.visit_id else "")

    def _condition(self, r: _EventRef, e: Event, ends: Mapping[str, datetime | None]) -> tuple[Any, ...]:
        cd = _COND_BY_SNOMED[r.code]
        end = None if cd.chronic else (ends.get(e.visit_id or "") or e.time)
        end = None if end is None else end + timedelta(days=10)
        source = r.source(cd.icd10.code, self._c(cd.icd10))
        return (*r.head(), *_span(e.time, end), TYPE_EHR, 0, "", "", *source, "")

    def _drug(self, r: _EventRef, e: Event, ends: Mapping[str, datetime | None]) -> tuple[Any, ...]:
        dd = _DRUG_BY_CODE[r.code]
        assert e.time is not None
        end = e.time + timedelta(days=dd.days_supply)
        dates = (*_span(e.time, end), _d(end))
        supply = ("", 0, dd.quantity, dd.days_supply, dd.sig, 0, "", "")
        return (*r.head(), *dates, TYPE_EHR, *supply, *r.source(), "", "")

    def _measurement(self, r: _EventRef, e: Event, ends: Mapping[str, datetime | None]) -> tuple[Any, ...]:
        lab = LABS[r.code]
        ref_range = (lab.fmt(lab.ref_low), lab.fmt(lab.ref_high))
        value = (e.value, 0, self._c(lab.unit), *ref_range)
        at = (_d(e.time), _dt(e.time), _d(e.time))
        return (*r.head(), *at, TYPE_EHR, 0, *value, "", *r.source(), e.unit, 0, e.value, "", "")

    def _procedure(self, r: _EventRef, e: Event, ends: Mapping[str, datetime | None]) -> tuple[Any, ...]:
        return (*r.head(), *_span(e.time, e.time), TYPE_EHR, 0, "", "", *r.source(), "")

    def _observation(self, r: _EventRef, e: Event, ends: Mapping[str, datetime | None]) -> tuple[Any, ...]:
        value = e.value or ""
        at = (_d(e.time), _dt(e.time))
        return (*r.head(), *at, TYPE_EHR, "", value, 0, 0, 0, "", *r.source(), "", "", value, "", "")


_EventRow = Callable[[_OmopRows, "_EventRef", Event, Mapping[str, datetime | None]], tuple[Any, ...]]

_EVENT_ROWS: dict[str, _EventRow] = {
    "CONDITION_OCCURRENCE": _OmopRows._condition,
    "DRUG_EXPOSURE": _OmopRows._drug,
    "MEASUREMENT": _OmopRows._measurement,
    "PROCEDURE_OCCURRENCE": _OmopRows._procedure,
    "OBSERVATION": _OmopRows._observation,
}
"""The row builder of each event table (the values in :data:`OMOP_COLUMNS` order)."""


def write_omop(
    n: int,
    seed: int,
    out_dir: str | Path,
    *,
    overwrite: bool = False,
    on_patient: Callable[[int], None] | None = None,
) -> Path:
    """Write ``n`` synthetic patients as an OMOP CDM 5.4 folder of CSV files; return the folder.

    Files are named like the Synthea27Nj sample (``PERSON.csv``, ``VISIT_OCCURRENCE.csv``,
    ``CONDITION_OCCURRENCE.csv``, ``DRUG_EXPOSURE.csv``, ``MEASUREMENT.csv``,
    ``PROCEDURE_OCCURRENCE.csv``, ``OBSERVATION.csv``, ``NOTE.csv``, ``DEATH.csv``, ``CONCEPT.csv``)
    with the same lower-case columns. Rows are streamed patient by patient, so memory does not
    grow with ``n``. The folder is built under a temporary name beside ``out_dir`` and renamed
    into place at the end; if anything fails (or ``on_patient``, called after each patient with
    the number written so far, raises), the temporary folder is removed and ``out_dir`` is left
    as it was. An existing ``out_dir`` is replaced only with ``overwrite=True``.
    """
    out = Path(out_dir)
    if n < 0:
        raise UserError(f"the number of patients must be 0 or more, not {n}")
    if out.exists() and not overwrite:
        raise UserError(f"{out} already exists; choose another folder or pass overwrite")
    with staged_dir(out, "the OMOP folder") as tmp:
        files: dict[str, TextIO] = {}
        writers: dict[str, Any] = {}
        try:
            for table, cols in OMOP_COLUMNS.items():
                f = (tmp / f"{table}.csv").open("w", encoding="utf-8", newline="")
                files[table] = f
                writers[table] = csv.writer(f, lineterminator="\n")
                writers[table].writerow(cols)
            conv = _OmopRows()
            for i, tl in enumerate(generate(n, seed)):
                for table, row in conv.rows(tl):
                    writers[table].writerow(row)
                if on_patient is not None:
                    on_patient(i + 1)
            by_id = {c.concept_id: c for c in all_concepts()}
            for cid in sorted(conv.used):
                c = by_id[cid]
                writers["CONCEPT"].writerow(
                    (
                        c.concept_id,
                        c.name,
                        c.domain,
                        c.vocabulary,
                        c.concept_class,
                        c.standard,
                        c.code,
                        "1970-01-01",
                        "2099-12-31",
                        "",
                    )
                )
            for fh in files.values():
                fh.flush()
                os.fsync(fh.fileno())
        finally:
            for fh in files.values():
                fh.close()
    return out
