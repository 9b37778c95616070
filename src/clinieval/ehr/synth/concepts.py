"""The OMOP concept record and the small, fixed vocabularies every synthetic patient uses.

It exists so that the catalogues built on it (:mod:`.labs`, :mod:`.catalog`) share one
``Concept`` type and one local id range without importing each other: visit types, gender, race
and ethnicity (the OMOP standard concepts), the "EHR" type concept, UCUM units, and the LOINC
document classes of notes (local ids: the public sample vocabulary lacks them).
"""

from __future__ import annotations

from dataclasses import dataclass

LOCAL_CONCEPT_BASE = 2_000_000_000  # OMOP reserves ids above 2e9 for local (site) concepts
TYPE_EHR = 32817  # OMOP type concept "EHR"


@dataclass(frozen=True, slots=True)
class Concept:
    """One row of the OMOP ``concept`` table."""

    concept_id: int
    name: str
    domain: str
    vocabulary: str
    concept_class: str
    code: str
    standard: str = "S"


def _unit(cid: int, name: str, code: str) -> Concept:
    return Concept(cid, name, "Unit", "UCUM", "Unit", code)


U_MGDL = _unit(8840, "milligram per deciliter", "mg/dL")
U_PCT = _unit(8554, "percent", "%")
U_GDL = _unit(8713, "gram per deciliter", "g/dL")
U_KUL = _unit(8848, "thousand per microliter", "10*3/uL")
U_MMOL = _unit(8753, "millimole per liter", "mmol/L")
U_MMHG = _unit(8876, "millimeter mercury column", "mm[Hg]")
U_MIN = _unit(8541, "per minute", "/min")
U_CEL = _unit(586323, "degree Celsius", "Cel")
U_KG = _unit(9529, "kilogram", "kg")
U_CM = _unit(8582, "centimeter", "cm")
U_KGM2 = _unit(9531, "kilogram per square meter", "kg/m2")


def _standard(cid: int, name: str, domain: str, code: str) -> Concept:
    """An OMOP standard concept of a vocabulary named after its domain (visit, gender, race, ...)."""
    return Concept(cid, name, domain, domain, domain, code)


VISIT_TYPES: dict[str, Concept] = {
    "IP": _standard(9201, "Inpatient Visit", "Visit", "IP"),
    "OP": _standard(9202, "Outpatient Visit", "Visit", "OP"),
    "ER": _standard(9203, "Emergency Room Visit", "Visit", "ER"),
}
GENDERS: dict[str, Concept] = {
    "M": _standard(8507, "MALE", "Gender", "M"),
    "F": _standard(8532, "FEMALE", "Gender", "F"),
}
RACES: dict[str, Concept] = {
    "white": _standard(8527, "White", "Race", "5"),
    "black": _standard(8516, "Black or African American", "Race", "3"),
    "asian": _standard(8515, "Asian", "Race", "2"),
}
ETHNICITIES: dict[str, Concept] = {
    "hispanic": _standard(38003563, "Hispanic or Latino", "Ethnicity", "Hispanic"),
    "nonhispanic": _standard(38003564, "Not Hispanic or Latino", "Ethnicity", "Not Hispanic"),
}
TYPE_CONCEPT = _standard(TYPE_EHR, "EHR", "Type Concept", "OMOP4976890")


def _note_class(n: int, name: str, code: str) -> Concept:
    return Concept(LOCAL_CONCEPT_BASE + 1000 + n, name, "Note", "LOINC", "Clinical Observation", code)


# Timeline note type -> LOINC document class
NOTE_CLASSES: dict[str, Concept] = {
    "progress note": _note_class(1, "Progress note", "11506-3"),
    "emergency department note": _note_class(2, "Emergency medicine Note", "34878-9"),
    "history and physical note": _note_class(3, "History and physical note", "34117-2"),
    "discharge summary": _note_class(4, "Discharge summary", "18842-5"),
}
