"""The OMOP CDM tables the reader knows: which are required, which columns they cannot do without,
and how each event table maps onto a timeline event.

Data, not code: the SQL builders (:mod:`.sql`), the row decoder (:mod:`.rows`) and the source
(:mod:`.source`) all walk :data:`EVENT_TABLES`, so a table added here is read everywhere.
"""

from __future__ import annotations

from dataclasses import dataclass

from clinieval.ehr.timeline import EVENT_DOMAINS

TABLES: tuple[str, ...] = (
    "person",
    "visit_occurrence",
    "visit_detail",
    "condition_occurrence",
    "drug_exposure",
    "procedure_occurrence",
    "measurement",
    "observation",
    "device_exposure",
    "death",
    "note",
    "concept",
    "care_site",
)
REQUIRED_TABLES: tuple[str, ...] = ("person", "visit_occurrence", "concept")

# Columns a table cannot do without; every other column used is optional (NULL when absent).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "person": ("person_id",),
    "visit_occurrence": ("visit_occurrence_id", "person_id", "visit_concept_id", "visit_start_date"),
    "concept": ("concept_id", "concept_name", "vocabulary_id", "concept_code"),
    "visit_detail": ("person_id", "visit_detail_concept_id", "visit_detail_start_date"),
    "condition_occurrence": ("person_id", "condition_concept_id", "condition_start_date"),
    "drug_exposure": ("person_id", "drug_concept_id", "drug_exposure_start_date"),
    "procedure_occurrence": ("person_id", "procedure_concept_id", "procedure_date"),
    "measurement": ("person_id", "measurement_concept_id", "measurement_date"),
    "observation": ("person_id", "observation_concept_id", "observation_date"),
    "device_exposure": ("person_id", "device_concept_id", "device_exposure_start_date"),
    "death": ("person_id", "death_date"),
    "note": ("person_id", "note_date", "note_text"),
    "care_site": ("care_site_id",),
}


@dataclass(frozen=True, slots=True)
class EventTable:
    table: str
    id_col: str | None
    concept: str
    source_concept: str
    datetime: str
    date: str
    source_value: str
    visit: str | None = "visit_occurrence_id"
    value_num: str | None = None
    value_str: str | None = None
    value_concept: str | None = None
    value_source: str | None = None
    unit_concept: str | None = None
    unit_source: str | None = None


EVENT_TABLES: tuple[EventTable, ...] = (
    EventTable(
        "condition_occurrence",
        "condition_occurrence_id",
        "condition_concept_id",
        "condition_source_concept_id",
        "condition_start_datetime",
        "condition_start_date",
        "condition_source_value",
    ),
    EventTable(
        "visit_detail",
        "visit_detail_id",
        "visit_detail_concept_id",
        "visit_detail_source_concept_id",
        "visit_detail_start_datetime",
        "visit_detail_start_date",
        "visit_detail_source_value",
    ),
    EventTable(
        "measurement",
        "measurement_id",
        "measurement_concept_id",
        "measurement_source_concept_id",
        "measurement_datetime",
        "measurement_date",
        "measurement_source_value",
        value_num="value_as_number",
        value_concept="value_as_concept_id",
        value_source="value_source_value",
        unit_concept="unit_concept_id",
        unit_source="unit_source_value",
    ),
    EventTable(
        "procedure_occurrence",
        "procedure_occurrence_id",
        "procedure_concept_id",
        "procedure_source_concept_id",
        "procedure_datetime",
        "procedure_date",
        "procedure_source_value",
    ),
    EventTable(
        "observation",
        "observation_id",
        "observation_concept_id",
        "observation_source_concept_id",
        "observation_datetime",
        "observation_date",
        "observation_source_value",
        value_num="value_as_number",
        value_str="value_as_string",
        value_concept="value_as_concept_id",
        value_source="value_source_value",
        unit_concept="unit_concept_id",
        unit_source="unit_source_value",
    ),
    EventTable(
        "drug_exposure",
        "drug_exposure_id",
        "drug_concept_id",
        "drug_source_concept_id",
        "drug_exposure_start_datetime",
        "drug_exposure_start_date",
        "drug_source_value",
    ),
    EventTable(
        "device_exposure",
        "device_exposure_id",
        "device_concept_id",
        "device_source_concept_id",
        "device_exposure_start_datetime",
        "device_exposure_start_date",
        "device_source_value",
    ),
    EventTable(
        "death",
        None,
        "cause_concept_id",
        "cause_source_concept_id",
        "death_datetime",
        "death_date",
        "cause_source_value",
        visit=None,
    ),
)
assert tuple(t.table for t in EVENT_TABLES) == EVENT_DOMAINS
DOMAIN_ORDER = {d: i for i, d in enumerate(EVENT_DOMAINS)}
