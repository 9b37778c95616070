"""The project's own synthetic patients: realistic timelines over real code systems.

Every patient is drawn from its own random stream, seeded from ``(seed, index)``, so patient *i*
is the same whether 5 or 100,000 patients are generated, and the same seed gives byte-identical
output. A patient has demographics, a few chronic conditions (type 2 diabetes, hypertension,
heart failure, ...) that decide which drugs are prescribed and which labs are drawn, several
visits (outpatient follow-ups, emergency visits, inpatient stays of several days) and notes
written from templates: progress notes, emergency department notes, admission history and
physicals, and multi-paragraph discharge summaries that cite the patient's actual diagnoses,
medications and lab values.

Codes are real: SNOMED CT and ICD-10-CM conditions, RxNorm drugs, LOINC labs and vitals, UCUM
units, and the OMOP concept ids of the public OMOP vocabulary where the Synthea27Nj sample holds
them. Concepts that sample lacks (ICD-10-CM source codes, LOINC note classes) get ids from the
local range OMOP reserves for site concepts (above 2,000,000,000).

Two outputs: :func:`generate` streams :class:`~clinieval.ehr.timeline.Timeline` objects, and
:func:`write_omop` writes an OMOP CDM 5.4 folder of CSV files with the Synthea27Nj column names,
streaming rows so any number of patients fits in bounded memory, and atomically (a temporary
sibling folder renamed into place; nothing is left behind on failure).
"""

from __future__ import annotations

import csv
import os
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

from clinieval.ehr.timeline import Event, Note, Person, Timeline, Visit
from clinieval.errors import UserError
from clinieval.fsutil import staged_dir

# ---------------------------------------------------------------------------------------------
# Embedded vocabulary
# ---------------------------------------------------------------------------------------------

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


@dataclass(frozen=True, slots=True)
class ConditionDef:
    """A condition with its standard SNOMED concept and the ICD-10-CM code a source would bill."""

    key: str
    snomed: Concept
    icd10: Concept
    chronic: bool


@dataclass(frozen=True, slots=True)
class DrugDef:
    concept: Concept
    sig: str
    days_supply: int
    quantity: int


@dataclass(frozen=True, slots=True)
class LabDef:
    """A LOINC measurement: values are drawn around ``mean`` and always kept in ``[low, high]``.

    ``ref_low``/``ref_high`` is the reference (normal) interval written to OMOP ``range_low`` and
    ``range_high`` and used to flag results in notes.
    """

    concept: Concept
    short: str
    unit: Concept
    low: float
    high: float
    ref_low: float
    ref_high: float
    mean: float
    sd: float
    decimals: int

    def fmt(self, value: float) -> str:
        return f"{value:.{self.decimals}f}"


def _snomed(cid: int, name: str, code: str, domain: str = "Condition") -> Concept:
    klass = "Clinical Finding" if domain == "Condition" else "Procedure"
    return Concept(cid, name, domain, "SNOMED", klass, code)


_icd_count = 0


def _icd(code: str, name: str) -> Concept:
    global _icd_count
    _icd_count += 1
    chars = len(code.replace(".", ""))
    return Concept(
        LOCAL_CONCEPT_BASE + _icd_count, name, "Condition", "ICD10CM", f"{chars}-char billing code", code, ""
    )


def _cond(key: str, snomed: Concept, icd10: Concept, chronic: bool) -> ConditionDef:
    return ConditionDef(key, snomed, icd10, chronic)


CONDITIONS: dict[str, ConditionDef] = {
    c.key: c
    for c in (
        # chronic
        _cond(
            "diabetes",
            _snomed(201826, "Type 2 diabetes mellitus", "44054006"),
            _icd("E11.9", "Type 2 diabetes mellitus without complications"),
            True,
        ),
        _cond(
            "hypertension",
            _snomed(320128, "Essential hypertension", "59621000"),
            _icd("I10", "Essential (primary) hypertension"),
            True,
        ),
        _cond(
            "hyperlipidemia",
            _snomed(432867, "Hyperlipidemia", "55822004"),
            _icd("E78.5", "Hyperlipidemia, unspecified"),
            True,
        ),
        _cond(
            "heart_failure",
            _snomed(4229440, "Chronic congestive heart failure", "88805009"),
            _icd("I50.9", "Heart failure, unspecified"),
            True,
        ),
        _cond(
            "atrial_fibrillation",
            _snomed(313217, "Atrial fibrillation", "49436004"),
            _icd("I48.91", "Unspecified atrial fibrillation"),
            True,
        ),
        _cond(
            "cad",
            _snomed(317576, "Coronary arteriosclerosis", "53741008"),
            _icd("I25.10", "Atherosclerotic heart disease of native coronary artery without angina pectoris"),
            True,
        ),
        _cond(
            "asthma",
            _snomed(317009, "Asthma", "195967001"),
            _icd("J45.909", "Unspecified asthma, uncomplicated"),
            True,
        ),
        _cond(
            "ckd",
            _snomed(443597, "Chronic kidney disease stage 3", "433144002"),
            _icd("N18.30", "Chronic kidney disease, stage 3 unspecified"),
            True,
        ),
        _cond(
            "depression",
            _snomed(4152280, "Major depressive disorder", "370143000"),
            _icd("F32.9", "Major depressive disorder, single episode, unspecified"),
            True,
        ),
        # acute
        _cond(
            "pneumonia",
            _snomed(255848, "Pneumonia", "233604007"),
            _icd("J18.9", "Pneumonia, unspecified organism"),
            False,
        ),
        _cond(
            "bronchitis",
            _snomed(260139, "Acute bronchitis", "10509002"),
            _icd("J20.9", "Acute bronchitis, unspecified"),
            False,
        ),
        _cond(
            "strep",
            _snomed(28060, "Streptococcal sore throat", "43878008"),
            _icd("J02.0", "Streptococcal pharyngitis"),
            False,
        ),
        _cond(
            "cystitis",
            _snomed(195588, "Cystitis", "38822007"),
            _icd("N30.90", "Cystitis, unspecified without hematuria"),
            False,
        ),
        _cond(
            "ankle_sprain",
            _snomed(81151, "Sprain of ankle", "44465007"),
            _icd("S93.409A", "Sprain of unspecified ligament of unspecified ankle, initial encounter"),
            False,
        ),
        _cond(
            "dyspnea", _snomed(312437, "Dyspnea", "267036007"), _icd("R06.00", "Dyspnea, unspecified"), False
        ),
        _cond(
            "mi",
            _snomed(4329847, "Myocardial infarction", "22298006"),
            _icd("I21.9", "Acute myocardial infarction, unspecified"),
            False,
        ),
        _cond(
            "stroke",
            _snomed(381316, "Cerebrovascular accident", "230690007"),
            _icd("I63.9", "Cerebral infarction, unspecified"),
            False,
        ),
    )
}


def _rx(cid: int, name: str, code: str, sig: str, days: int, qty: int) -> DrugDef:
    return DrugDef(Concept(cid, name, "Drug", "RxNorm", "Clinical Drug", code), sig, days, qty)


DRUGS: dict[str, DrugDef] = {
    "metformin": _rx(
        40163924,
        "24 HR metformin hydrochloride 500 MG Extended Release Oral Tablet",
        "860975",
        "Take 1 tablet by mouth twice daily with meals",
        90,
        180,
    ),
    "insulin_lispro": _rx(
        40166274,
        "insulin lispro 100 UNT/ML Injectable Solution [Humalog]",
        "865098",
        "Inject subcutaneously before meals per sliding scale",
        30,
        1,
    ),
    "lisinopril": _rx(
        19080128, "lisinopril 10 MG Oral Tablet", "314076", "Take 1 tablet by mouth daily", 90, 90
    ),
    "amlodipine": _rx(
        1332419, "amlodipine 5 MG Oral Tablet", "197361", "Take 1 tablet by mouth daily", 90, 90
    ),
    "hctz": _rx(
        19078106,
        "hydrochlorothiazide 25 MG Oral Tablet",
        "310798",
        "Take 1 tablet by mouth every morning",
        90,
        90,
    ),
    "atorvastatin": _rx(
        1545959, "atorvastatin 80 MG Oral Tablet", "259255", "Take 1 tablet by mouth at bedtime", 90, 90
    ),
    "simvastatin": _rx(
        1539411, "simvastatin 20 MG Oral Tablet", "312961", "Take 1 tablet by mouth at bedtime", 90, 90
    ),
    "furosemide": _rx(
        957136, "furosemide 40 MG Oral Tablet", "313988", "Take 1 tablet by mouth every morning", 90, 90
    ),
    "carvedilol": _rx(
        19022781,
        "carvedilol 25 MG Oral Tablet",
        "200033",
        "Take 1 tablet by mouth twice daily with food",
        90,
        180,
    ),
    "warfarin": _rx(
        40163554,
        "warfarin sodium 5 MG Oral Tablet",
        "855332",
        "Take 1 tablet by mouth daily, dose adjusted to INR",
        30,
        30,
    ),
    "aspirin": _rx(19059056, "aspirin 81 MG Oral Tablet", "243670", "Take 1 tablet by mouth daily", 90, 90),
    "clopidogrel": _rx(
        19075601, "clopidogrel 75 MG Oral Tablet", "309362", "Take 1 tablet by mouth daily", 90, 90
    ),
    "nitroglycerin": _rx(
        19126352,
        "nitroglycerin 0.4 MG/ACTUAT Mucosal Spray",
        "705129",
        "1 spray under the tongue every 5 minutes as needed for chest pain",
        30,
        1,
    ),
    "albuterol": _rx(
        1511248,
        "NDA020503 200 ACTUAT albuterol 0.09 MG/ACTUAT Metered Dose Inhaler",
        "2123111",
        "Inhale 2 puffs every 4 to 6 hours as needed for wheezing",
        30,
        1,
    ),
    "fluticasone": _rx(
        40169216,
        "120 ACTUAT fluticasone propionate 0.044 MG/ACTUAT Metered Dose Inhaler",
        "895994",
        "Inhale 2 puffs twice daily",
        30,
        1,
    ),
    "losartan": _rx(
        40185304, "losartan potassium 50 MG Oral Tablet", "979492", "Take 1 tablet by mouth daily", 90, 90
    ),
    "sertraline": _rx(
        739207, "sertraline 100 MG Oral Tablet", "312938", "Take 1 tablet by mouth daily", 90, 90
    ),
    "amoxicillin": _rx(
        19073188,
        "amoxicillin 500 MG Oral Tablet",
        "308192",
        "Take 1 tablet by mouth twice daily for 10 days",
        10,
        20,
    ),
    "amox_clav": _rx(
        1713671,
        "amoxicillin 250 MG / clavulanate 125 MG Oral Tablet",
        "562251",
        "Take 1 tablet by mouth three times daily for 7 days",
        7,
        21,
    ),
    "azithromycin": _rx(
        19073777,
        "azithromycin 250 MG Oral Tablet",
        "308460",
        "Take 2 tablets on day 1, then 1 tablet daily for 4 days",
        5,
        6,
    ),
    "nitrofurantoin": _rx(
        920334,
        "nitrofurantoin, macrocrystals 50 MG Oral Capsule",
        "311995",
        "Take 1 capsule by mouth four times daily for 5 days",
        5,
        20,
    ),
    "naproxen": _rx(
        19019273,
        "naproxen 500 MG Oral Tablet",
        "198014",
        "Take 1 tablet by mouth twice daily with food as needed for pain",
        10,
        20,
    ),
    "ibuprofen": _rx(
        19033893,
        "ibuprofen 400 MG Oral Tablet [Ibu]",
        "206905",
        "Take 1 tablet by mouth every 6 hours as needed for pain",
        7,
        28,
    ),
    "acetaminophen": _rx(
        1127433,
        "acetaminophen 325 MG Oral Tablet",
        "313782",
        "Take 2 tablets by mouth every 6 hours as needed for fever or pain",
        5,
        40,
    ),
    "prednisone": _rx(
        1551170, "prednisone 20 MG Oral Tablet", "312615", "Take 2 tablets by mouth daily for 5 days", 5, 10
    ),
    # inpatient
    "ceftriaxone": _rx(1777806, "ceftriaxone", "2193", "1 g intravenously every 24 hours", 1, 1),
    "enoxaparin": _rx(
        40160973,
        "0.4 ML enoxaparin sodium 100 MG/ML Prefilled Syringe",
        "854235",
        "40 mg subcutaneously daily for thromboprophylaxis",
        1,
        1,
    ),
    "furosemide_iv": _rx(
        35603224, "10 ML furosemide 10 MG/ML Injection", "1719286", "40 mg intravenously twice daily", 1, 1
    ),
    "alteplase": _rx(
        40220960, "alteplase 100 MG Injection", "1804799", "0.9 mg/kg intravenously over 60 minutes", 1, 1
    ),
    "morphine": _rx(
        35605858,
        "1 ML morphine sulfate 5 MG/ML Injection",
        "1732136",
        "2 mg intravenously every 4 hours as needed for pain",
        1,
        1,
    ),
    "ondansetron": _rx(
        35605482,
        "2 ML ondansetron 2 MG/ML Injection",
        "1740467",
        "4 mg intravenously every 8 hours as needed for nausea",
        1,
        1,
    ),
}


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


def _lab(
    cid: int,
    code: str,
    name: str,
    short: str,
    unit: Concept,
    low: float,
    high: float,
    ref: tuple[float, float],
    mean: float,
    sd: float,
    dec: int,
    klass: str = "Lab Test",
) -> LabDef:
    concept = Concept(cid, name, "Measurement", "LOINC", klass, code)
    return LabDef(concept, short, unit, low, high, ref[0], ref[1], mean, sd, dec)


_VS = "Clinical Observation"
LABS: dict[str, LabDef] = {
    lab.concept.code: lab
    for lab in (
        _lab(
            3004501,
            "2345-7",
            "Glucose [Mass/volume] in Serum or Plasma",
            "glucose",
            U_MGDL,
            60,
            400,
            (70, 99),
            92,
            9,
            0,
        ),
        _lab(
            3004410,
            "4548-4",
            "Hemoglobin A1c/Hemoglobin.total in Blood",
            "hemoglobin A1c",
            U_PCT,
            4.0,
            13.0,
            (4.0, 5.6),
            5.3,
            0.3,
            1,
        ),
        _lab(
            3000963,
            "718-7",
            "Hemoglobin [Mass/volume] in Blood",
            "hemoglobin",
            U_GDL,
            7.0,
            18.5,
            (12.0, 17.5),
            14.0,
            1.1,
            1,
        ),
        _lab(
            3000905,
            "6690-2",
            "Leukocytes [#/volume] in Blood by Automated count",
            "white blood cell count",
            U_KUL,
            2.0,
            25.0,
            (4.5, 11.0),
            7.2,
            1.5,
            1,
        ),
        _lab(
            3024929,
            "777-3",
            "Platelets [#/volume] in Blood by Automated count",
            "platelet count",
            U_KUL,
            80,
            550,
            (150, 400),
            260,
            50,
            0,
        ),
        _lab(
            3016723,
            "2160-0",
            "Creatinine [Mass/volume] in Serum or Plasma",
            "creatinine",
            U_MGDL,
            0.4,
            6.0,
            (0.6, 1.3),
            0.95,
            0.15,
            2,
        ),
        _lab(
            3013682,
            "3094-0",
            "Urea nitrogen [Mass/volume] in Serum or Plasma",
            "blood urea nitrogen",
            U_MGDL,
            5,
            80,
            (7, 20),
            14,
            3,
            0,
        ),
        _lab(
            3019550,
            "2951-2",
            "Sodium [Moles/volume] in Serum or Plasma",
            "sodium",
            U_MMOL,
            120,
            155,
            (135, 145),
            140,
            2,
            0,
        ),
        _lab(
            3023103,
            "2823-3",
            "Potassium [Moles/volume] in Serum or Plasma",
            "potassium",
            U_MMOL,
            2.8,
            6.5,
            (3.5, 5.1),
            4.2,
            0.3,
            1,
        ),
        _lab(
            3027114,
            "2093-3",
            "Cholesterol [Mass/volume] in Serum or Plasma",
            "total cholesterol",
            U_MGDL,
            100,
            320,
            (125, 200),
            180,
            20,
            0,
        ),
        _lab(
            3007070,
            "2085-9",
            "Cholesterol in HDL [Mass/volume] in Serum or Plasma",
            "HDL cholesterol",
            U_MGDL,
            20,
            100,
            (40, 60),
            52,
            8,
            0,
        ),
        _lab(
            3022192,
            "2571-8",
            "Triglyceride [Mass/volume] in Serum or Plasma",
            "triglycerides",
            U_MGDL,
            40,
            500,
            (40, 150),
            120,
            25,
            0,
        ),
        _lab(
            3004249,
            "8480-6",
            "Systolic blood pressure",
            "systolic blood pressure",
            U_MMHG,
            85,
            200,
            (90, 120),
            118,
            8,
            0,
            _VS,
        ),
        _lab(
            3012888,
            "8462-4",
            "Diastolic blood pressure",
            "diastolic blood pressure",
            U_MMHG,
            45,
            120,
            (60, 80),
            76,
            6,
            0,
            _VS,
        ),
        _lab(3027018, "8867-4", "Heart rate", "heart rate", U_MIN, 45, 150, (60, 100), 74, 8, 0, _VS),
        _lab(
            3024171,
            "9279-1",
            "Respiratory rate",
            "respiratory rate",
            U_MIN,
            10,
            32,
            (12, 20),
            15,
            1.5,
            0,
            _VS,
        ),
        _lab(
            3020891,
            "8310-5",
            "Body temperature",
            "temperature",
            U_CEL,
            35.5,
            40.5,
            (36.1, 37.5),
            36.8,
            0.25,
            1,
            _VS,
        ),
        _lab(
            40762499,
            "59408-5",
            "Oxygen saturation in Arterial blood by Pulse oximetry",
            "oxygen saturation",
            U_PCT,
            82,
            100,
            (95, 100),
            97.5,
            1.0,
            0,
            _VS,
        ),
        _lab(3025315, "29463-7", "Body weight", "weight", U_KG, 40, 180, (40, 180), 78, 14, 1, _VS),
        _lab(3036277, "8302-2", "Body height", "height", U_CM, 145, 200, (145, 200), 170, 9, 1, _VS),
        _lab(
            3038553,
            "39156-5",
            "Body mass index (BMI) [Ratio]",
            "BMI",
            U_KGM2,
            15,
            60,
            (18.5, 25),
            26,
            4,
            1,
            _VS,
        ),
    )
}

PROCEDURES: dict[str, Concept] = {
    "ecg": _snomed(4163951, "Electrocardiographic procedure", "29303009", "Procedure"),
    "cxr": _snomed(4163872, "Plain chest X-ray", "399208008", "Procedure"),
    "echo": _snomed(4230911, "Echocardiography", "40701008", "Procedure"),
    "medrec": _snomed(4326177, "Medication Reconciliation", "430193006", "Procedure"),
    "oxygen": _snomed(4162736, "Oxygen administration by mask", "371908008", "Procedure"),
}

SMOKING = Concept(
    43054909, "Tobacco smoking status", "Observation", "LOINC", "Clinical Observation", "72166-2"
)
SMOKING_VALUES = ("Never smoker", "Former smoker", "Current every day smoker")

VISIT_TYPES: dict[str, Concept] = {
    "IP": Concept(9201, "Inpatient Visit", "Visit", "Visit", "Visit", "IP"),
    "OP": Concept(9202, "Outpatient Visit", "Visit", "Visit", "Visit", "OP"),
    "ER": Concept(9203, "Emergency Room Visit", "Visit", "Visit", "Visit", "ER"),
}
GENDERS: dict[str, Concept] = {
    "M": Concept(8507, "MALE", "Gender", "Gender", "Gender", "M"),
    "F": Concept(8532, "FEMALE", "Gender", "Gender", "Gender", "F"),
}
RACES: dict[str, Concept] = {
    "white": Concept(8527, "White", "Race", "Race", "Race", "5"),
    "black": Concept(8516, "Black or African American", "Race", "Race", "Race", "3"),
    "asian": Concept(8515, "Asian", "Race", "Race", "Race", "2"),
}
ETHNICITIES: dict[str, Concept] = {
    "hispanic": Concept(38003563, "Hispanic or Latino", "Ethnicity", "Ethnicity", "Ethnicity", "Hispanic"),
    "nonhispanic": Concept(
        38003564, "Not Hispanic or Latino", "Ethnicity", "Ethnicity", "Ethnicity", "Not Hispanic"
    ),
}
TYPE_CONCEPT = Concept(TYPE_EHR, "EHR", "Type Concept", "Type Concept", "Type Concept", "OMOP4976890")


def _note_class(n: int, name: str, code: str) -> Concept:
    return Concept(LOCAL_CONCEPT_BASE + 1000 + n, name, "Note", "LOINC", "Clinical Observation", code)


# Timeline note type -> LOINC document class
NOTE_CLASSES: dict[str, Concept] = {
    "progress note": _note_class(1, "Progress note", "11506-3"),
    "emergency department note": _note_class(2, "Emergency medicine Note", "34878-9"),
    "history and physical note": _note_class(3, "History and physical note", "34117-2"),
    "discharge summary": _note_class(4, "Discharge summary", "18842-5"),
}


def all_concepts() -> list[Concept]:
    """Every concept the generator can emit, sorted by concept id."""
    out: dict[int, Concept] = {TYPE_EHR: TYPE_CONCEPT, SMOKING.concept_id: SMOKING}
    for cd in CONDITIONS.values():
        out[cd.snomed.concept_id] = cd.snomed
        out[cd.icd10.concept_id] = cd.icd10
    for dd in DRUGS.values():
        out[dd.concept.concept_id] = dd.concept
    for lab in LABS.values():
        out[lab.concept.concept_id] = lab.concept
        out[lab.unit.concept_id] = lab.unit
    for table in (PROCEDURES, VISIT_TYPES, GENDERS, RACES, ETHNICITIES, NOTE_CLASSES):
        for c in table.values():
            out[c.concept_id] = c
    return [out[k] for k in sorted(out)]


# (vocabulary, code) -> concept, for turning timeline events back into OMOP rows
_BY_CODE: dict[tuple[str, str], Concept] = {(c.vocabulary, c.code): c for c in all_concepts()}
_COND_BY_SNOMED: dict[str, ConditionDef] = {c.snomed.code: c for c in CONDITIONS.values()}
_DRUG_BY_CODE: dict[str, DrugDef] = {d.concept.code: d for d in DRUGS.values()}
_VISIT_BY_NAME: dict[str, Concept] = {c.name: c for c in VISIT_TYPES.values()}

# ---------------------------------------------------------------------------------------------
# Clinical knowledge: what each chronic condition brings
# ---------------------------------------------------------------------------------------------

# drugs started at diagnosis (first) and added when the condition is not controlled (rest)
CHRONIC_DRUGS: dict[str, tuple[str, ...]] = {
    "diabetes": ("metformin", "insulin_lispro"),
    "hypertension": ("lisinopril", "amlodipine", "hctz"),
    "hyperlipidemia": ("atorvastatin",),
    "heart_failure": ("furosemide", "carvedilol"),
    "atrial_fibrillation": ("warfarin",),
    "cad": ("aspirin", "nitroglycerin"),
    "asthma": ("albuterol", "fluticasone"),
    "ckd": ("losartan",),
    "depression": ("sertraline",),
}
# labs drawn to follow the condition
CHRONIC_LABS: dict[str, tuple[str, ...]] = {
    "diabetes": ("2345-7", "4548-4", "2160-0"),
    "hypertension": ("2160-0", "2823-3", "2951-2"),
    "hyperlipidemia": ("2093-3", "2085-9", "2571-8"),
    "heart_failure": ("2951-2", "2823-3", "2160-0", "3094-0"),
    "atrial_fibrillation": ("718-7", "777-3"),
    "cad": ("2093-3", "2085-9"),
    "asthma": ("6690-2",),
    "ckd": ("2160-0", "3094-0", "2823-3", "718-7"),
    "depression": (),
}
# (mean, sd) a condition moves a lab to while untreated; treatment halves the distance to normal
LAB_EFFECTS: dict[str, dict[str, tuple[float, float]]] = {
    "diabetes": {"2345-7": (175, 35), "4548-4": (8.4, 1.0)},
    "hypertension": {"8480-6": (150, 10), "8462-4": (94, 6)},
    "hyperlipidemia": {"2093-3": (245, 25), "2085-9": (38, 6), "2571-8": (220, 50)},
    "heart_failure": {"2951-2": (134, 2.5), "8867-4": (88, 8), "3094-0": (26, 6)},
    "atrial_fibrillation": {"8867-4": (102, 14)},
    "ckd": {"2160-0": (1.9, 0.3), "3094-0": (34, 7), "2823-3": (5.0, 0.35), "718-7": (11.2, 0.9)},
    "asthma": {"59408-5": (95.5, 1.2)},
    "pneumonia": {
        "6690-2": (15.5, 3.0),
        "8310-5": (38.7, 0.5),
        "59408-5": (90, 2.5),
        "9279-1": (24, 3),
        "8867-4": (106, 10),
    },
    "bronchitis": {"8310-5": (37.8, 0.4), "9279-1": (19, 2)},
    "strep": {"8310-5": (38.6, 0.5), "6690-2": (13, 2.5), "8867-4": (98, 8)},
    "cystitis": {"6690-2": (10.5, 2.0)},
    "ankle_sprain": {"8867-4": (84, 8)},
    "dyspnea": {"59408-5": (92, 2), "9279-1": (22, 3), "8867-4": (96, 10)},
    "mi": {"8867-4": (98, 12), "8480-6": (152, 18), "6690-2": (11.5, 2), "2345-7": (160, 30)},
    "stroke": {"8480-6": (172, 14), "8462-4": (98, 8), "2345-7": (140, 25)},
}

# age-dependent yearly-ish prevalence used once per patient: base + slope * max(age - 40, 0)
CHRONIC_RISK: dict[str, tuple[float, float]] = {
    "hypertension": (0.12, 0.012),
    "hyperlipidemia": (0.10, 0.010),
    "diabetes": (0.06, 0.006),
    "cad": (0.01, 0.004),
    "heart_failure": (0.005, 0.003),
    "atrial_fibrillation": (0.005, 0.003),
    "ckd": (0.01, 0.003),
    "asthma": (0.08, 0.0),
    "depression": (0.09, 0.0),
}

VITALS = ("8480-6", "8462-4", "8867-4", "9279-1", "8310-5", "59408-5")
BMP = ("2345-7", "2160-0", "3094-0", "2951-2", "2823-3")
CBC = ("718-7", "6690-2", "777-3")


@dataclass(frozen=True, slots=True)
class Reason:
    """Why a patient came to the emergency department or was admitted."""

    condition: str
    complaint: str
    hpi: str
    exam: str
    labs: tuple[str, ...]
    procedures: tuple[str, ...]
    treat: tuple[str, ...]  # given during the visit
    discharge: tuple[str, ...]  # prescribed at discharge
    course: str


ER_REASONS: dict[str, Reason] = {
    "bronchitis": Reason(
        "bronchitis",
        "cough",
        "a productive cough for {d} days with chest tightness and low-grade fever",
        "scattered rhonchi without focal consolidation",
        ("6690-2",),
        ("cxr",),
        ("acetaminophen",),
        ("azithromycin",),
        "A chest X-ray showed no consolidation.",
    ),
    "strep": Reason(
        "strep",
        "sore throat",
        "a sore throat and painful swallowing for {d} days with fever",
        "tonsillar exudates and tender anterior cervical lymph nodes; rapid streptococcal antigen positive",
        ("6690-2",),
        (),
        ("acetaminophen",),
        ("amoxicillin",),
        "The rapid strep test was positive.",
    ),
    "cystitis": Reason(
        "cystitis",
        "burning on urination",
        "dysuria, urinary frequency and suprapubic discomfort for {d} days",
        "mild suprapubic tenderness, no costovertebral angle tenderness",
        ("6690-2", "2160-0"),
        (),
        (),
        ("nitrofurantoin",),
        "Urinalysis showed leukocyte esterase and nitrites.",
    ),
    "ankle_sprain": Reason(
        "ankle_sprain",
        "ankle pain",
        "an inversion injury of the ankle {d} days ago with swelling and pain on weight bearing",
        "lateral ankle swelling and tenderness over the anterior talofibular ligament",
        (),
        (),
        ("ibuprofen",),
        ("naproxen",),
        "Ottawa ankle rules were negative; no imaging was required.",
    ),
    "dyspnea": Reason(
        "dyspnea",
        "shortness of breath",
        "worsening shortness of breath for {d} days",
        "bibasilar crackles and mild expiratory wheeze",
        ("6690-2", "2951-2", "2160-0"),
        ("cxr", "ecg"),
        ("albuterol",),
        ("prednisone",),
        "Symptoms improved after bronchodilator treatment.",
    ),
}

IP_REASONS: dict[str, Reason] = {
    "pneumonia": Reason(
        "pneumonia",
        "fever and cough",
        "fever, productive cough and pleuritic chest pain for {d} days",
        "crackles over the right lower lobe with dullness to percussion",
        BMP + CBC,
        ("cxr", "oxygen"),
        ("ceftriaxone", "acetaminophen", "enoxaparin"),
        ("amox_clav",),
        "The chest X-ray showed a right lower lobe consolidation. {p} was started on intravenous ceftriaxone "
        "and supplemental oxygen, defervesced within 48 hours and was weaned to room air before discharge, "
        "then switched to oral amoxicillin-clavulanate to complete the course.",
    ),
    "mi": Reason(
        "mi",
        "chest pain",
        "substernal chest pressure radiating to the left arm for {d} hours with diaphoresis",
        "diaphoretic, regular rhythm, no murmur",
        BMP + CBC,
        ("ecg", "echo"),
        ("aspirin", "clopidogrel", "morphine", "nitroglycerin", "enoxaparin"),
        ("aspirin", "clopidogrel", "atorvastatin"),
        "The ECG showed ST-segment changes and troponin was elevated. {p} was treated for acute coronary "
        "syndrome with aspirin, clopidogrel and anticoagulation; the echocardiogram showed preserved "
        "systolic function with an inferior wall motion abnormality. Chest pain resolved and did not recur.",
    ),
    "stroke": Reason(
        "stroke",
        "right-sided weakness",
        "acute right arm and leg weakness with slurred speech that began {d} hours before arrival",
        "right hemiparesis and expressive aphasia",
        BMP + CBC,
        ("ecg", "echo"),
        ("alteplase", "enoxaparin"),
        ("aspirin", "clopidogrel", "atorvastatin"),
        "Imaging confirmed an acute ischemic stroke. {p} received intravenous alteplase within the treatment "
        "window and was monitored in the stroke unit. Weakness partially improved; physical and speech "
        "therapy were started and dual antiplatelet therapy was begun for secondary prevention.",
    ),
    "heart_failure": Reason(
        "heart_failure",
        "leg swelling and shortness of breath",
        "progressive dyspnea on exertion, orthopnea and a weight gain of about {d} kg over two weeks",
        "jugular venous distension, bibasilar crackles and pitting edema to the knees",
        BMP + CBC,
        ("cxr", "echo", "ecg"),
        ("furosemide_iv", "enoxaparin"),
        ("furosemide", "carvedilol"),
        "{p} was admitted with acute decompensated heart failure and diuresed with intravenous furosemide, "
        "with a net negative fluid balance and resolution of orthopnea. The echocardiogram showed a reduced "
        "ejection fraction. {P2} was transitioned to oral furosemide and carvedilol was continued.",
    ),
}

# patient-facing phrases per chronic condition, for notes
HPI_LINES: dict[str, tuple[str, ...]] = {
    "diabetes": (
        "Checks blood sugars at home, mostly between 120 and 200.",
        "Denies polyuria or polydipsia.",
        "Reports occasional numbness in the feet.",
        "Admits to difficulty following the diabetic diet.",
    ),
    "hypertension": (
        "Home blood pressure readings have been in the 140s systolic.",
        "Denies headache or visual changes.",
        "Reports good adherence to antihypertensive medication.",
    ),
    "hyperlipidemia": (
        "Tolerating statin without myalgias.",
        "Has been trying to reduce dietary fat intake.",
    ),
    "heart_failure": (
        "Sleeps on two pillows.",
        "Reports stable exercise tolerance of about one block.",
        "Weighs self daily; no recent weight gain.",
    ),
    "atrial_fibrillation": ("Occasional palpitations, no syncope.", "INR checks have been mostly in range."),
    "cad": ("No exertional chest pain since the last visit.", "Uses nitroglycerin rarely."),
    "asthma": ("Uses rescue inhaler about twice a week.", "Symptoms worse with cold air and exercise."),
    "ckd": ("Avoids NSAIDs as advised.", "No change in urine output."),
    "depression": (
        "Mood improved on sertraline.",
        "Sleeping better; PHQ-9 score has decreased.",
        "Reports low energy and poor concentration.",
    ),
}
PLAN_LINES: dict[str, tuple[str, ...]] = {
    "diabetes": (
        "Reinforced diet and exercise counselling; annual retinal examination and foot care reviewed.",
        "Goal hemoglobin A1c below 7 percent.",
    ),
    "hypertension": (
        "Low-sodium diet advised; recheck blood pressure at next visit.",
        "Target blood pressure below 130/80 mm[Hg].",
    ),
    "hyperlipidemia": ("Continue high-intensity statin; repeat lipid panel in 12 months.",),
    "heart_failure": ("Daily weights, fluid restriction to 2 liters and sodium restriction discussed.",),
    "atrial_fibrillation": ("Continue anticoagulation; CHA2DS2-VASc reviewed.",),
    "cad": ("Continue antiplatelet therapy and statin; cardiac rehabilitation encouraged.",),
    "asthma": ("Inhaler technique reviewed; asthma action plan updated.",),
    "ckd": ("Monitor renal function and potassium every 3 to 6 months; avoid nephrotoxic drugs.",),
    "depression": ("Continue sertraline; safety screening negative; follow up with behavioral health.",),
}


# ---------------------------------------------------------------------------------------------
# One patient
# ---------------------------------------------------------------------------------------------


def patient_rng(seed: int, index: int) -> random.Random:
    """The random stream of patient ``index`` (0-based) under ``seed``; independent of how many are made."""
    return random.Random(f"clinieval-synth:{seed}:{index}")


@dataclass(slots=True)
class _Stay:
    """What happened during one visit, kept to write its note."""

    visit: Visit
    code: str  # OP / ER / IP
    reason: Reason | None = None
    labs: list[tuple[datetime, str, float]] = field(default_factory=list)
    new_conditions: list[str] = field(default_factory=list)
    drugs: list[str] = field(default_factory=list)
    procedures: list[str] = field(default_factory=list)


class _Patient:
    def __init__(self, index: int, seed: int) -> None:
        self.rng = rng = patient_rng(seed, index)
        self.index = index
        sex = "F" if rng.random() < 0.52 else "M"
        race = rng.choices(("white", "black", "asian"), weights=(0.70, 0.18, 0.12))[0]
        ethnicity = "hispanic" if rng.random() < 0.17 else "nonhispanic"
        first = datetime(2010, 1, 1) + timedelta(days=rng.randrange(3650))
        age = rng.randint(20, 88)
        birth = datetime(first.year - age, rng.randint(1, 12), rng.randint(1, 28))
        self.person = Person(
            str(index + 1), birth, GENDERS[sex].name, RACES[race].name, ETHNICITIES[ethnicity].name
        )
        self.sex, self.race, self.ethnicity = sex, race, ethnicity
        self.age0 = age
        self.first = first
        self.timeline = Timeline(self.person)
        self.height = self._clip("8302-2", rng.gauss(176 if sex == "M" else 162, 7))
        self.weight = self._clip("29463-7", rng.gauss(86 if sex == "M" else 73, 14))
        self.smoking = rng.choices(SMOKING_VALUES, weights=(0.55, 0.3, 0.15))[0]
        self.chronic: list[str] = []  # diagnosed, in diagnosis order
        self.onset: dict[str, int] = {}
        self.meds: list[str] = []  # active chronic medication keys
        self.controlled: dict[str, bool] = {}
        self.stays: list[_Stay] = []

    # -- values ----------------------------------------------------------------------------

    def _clip(self, loinc: str, v: float) -> float:
        lab = LABS[loinc]
        v = min(max(v, lab.low), lab.high)
        return round(v, lab.decimals)

    def value(self, loinc: str, acute: str | None = None, acute_weight: float = 1.0) -> float:
        lab = LABS[loinc]
        mean, sd = lab.mean, lab.sd
        if loinc == "29463-7":
            mean, sd = self.weight, 0.8
        elif loinc == "8302-2":
            mean, sd = self.height, 0.3
        best = 0.0
        for key in self.chronic:
            eff = LAB_EFFECTS.get(key, {}).get(loinc)
            if eff is None:
                continue
            treated = 0.5 if any(m in self.meds for m in CHRONIC_DRUGS[key]) else 1.0
            m = lab.mean + (eff[0] - lab.mean) * treated
            if abs(m - lab.mean) > best:
                best, mean, sd = abs(m - lab.mean), m, eff[1]
        if acute is not None and (eff := LAB_EFFECTS.get(acute, {}).get(loinc)) is not None:
            mean = mean + (eff[0] - mean) * acute_weight
            sd = sd + (eff[1] - sd) * acute_weight
        return self._clip(loinc, self.rng.gauss(mean, sd))

    # -- events ----------------------------------------------------------------------------

    def _add(
        self,
        domain: str,
        time: datetime,
        c: Concept,
        visit: Visit,
        value: str | None = None,
        unit: str | None = None,
    ) -> None:
        self.timeline.events.append(
            Event(domain, time, c.name, c.vocabulary, c.code, value, unit, visit.visit_id)
        )

    def measure(
        self, stay: _Stay, time: datetime, loinc: str, acute: str | None = None, w: float = 1.0
    ) -> float:
        lab = LABS[loinc]
        v = self.value(loinc, acute, w)
        self._add("measurement", time, lab.concept, stay.visit, lab.fmt(v), lab.unit.code)
        stay.labs.append((time, loinc, v))
        return v

    def vitals(self, stay: _Stay, time: datetime, acute: str | None = None, w: float = 1.0) -> None:
        for loinc in VITALS:
            self.measure(stay, time, loinc, acute, w)

    def anthropometrics(self, stay: _Stay, time: datetime) -> None:
        self.weight = self._clip("29463-7", self.weight + self.rng.gauss(0, 1.2))
        w = self.measure(stay, time, "29463-7")
        h = self.measure(stay, time, "8302-2")
        bmi = self._clip("39156-5", w / (h / 100) ** 2)
        lab = LABS["39156-5"]
        self._add("measurement", time, lab.concept, stay.visit, lab.fmt(bmi), lab.unit.code)
        stay.labs.append((time, "39156-5", bmi))

    def prescribe(self, stay: _Stay, time: datetime, key: str) -> None:
        self._add("drug_exposure", time, DRUGS[key].concept, stay.visit)
        stay.drugs.append(key)

    def procedure(self, stay: _Stay, time: datetime, key: str) -> None:
        self._add("procedure_occurrence", time, PROCEDURES[key], stay.visit)
        stay.procedures.append(key)

    def diagnose(self, stay: _Stay, time: datetime, key: str) -> None:
        self._add("condition_occurrence", time, CONDITIONS[key].snomed, stay.visit)
        stay.new_conditions.append(key)

    # -- plan ------------------------------------------------------------------------------

    def plan_conditions(self, n_visits: int) -> None:
        rng = self.rng
        for key, (base, slope) in CHRONIC_RISK.items():
            p = base + slope * max(self.age0 - 40, 0)
            if key == "ckd" and ("diabetes" in self.onset or "hypertension" in self.onset):
                p *= 2.5
            if key in ("heart_failure", "cad") and "hypertension" in self.onset:
                p *= 1.8
            if key in ("asthma", "depression"):
                p *= 1.0 if self.age0 < 60 else 0.6
            if rng.random() < min(p, 0.85):
                self.onset[key] = 0 if rng.random() < 0.6 else rng.randrange(n_visits)
                self.controlled[key] = rng.random() < 0.6

    def choose_type(self, j: int) -> str:
        if j == 0 or j in self.onset.values():
            return "OP"  # chronic diagnoses are made in clinic
        r = self.rng.random()
        ip = 0.08 + 0.05 * len(self.chronic)
        return "IP" if r < ip else "ER" if r < ip + 0.16 else "OP"

    def choose_reason(self, code: str) -> Reason:
        rng = self.rng
        has = set(self.chronic)
        if code == "ER":
            w = {
                "bronchitis": 1.0,
                "strep": 1.2 if self.age0 < 45 else 0.4,
                "cystitis": 1.4 if self.sex == "F" else 0.2,
                "ankle_sprain": 0.8,
                "dyspnea": 2.0 if has & {"asthma", "heart_failure"} else 0.2,
            }
            return ER_REASONS[rng.choices(list(w), weights=list(w.values()))[0]]
        w = {
            "pneumonia": 1.0 + 0.02 * max(self.age0 - 60, 0),
            "mi": 2.0
            if "cad" in has
            else 0.4
            if has & {"hypertension", "hyperlipidemia", "diabetes"}
            else 0.1,
            "stroke": (1.5 if "atrial_fibrillation" in has else 0.3) + (0.4 if self.age0 > 65 else 0.0),
            "heart_failure": 3.0 if "heart_failure" in has else 0.0,
        }
        return IP_REASONS[rng.choices(list(w), weights=list(w.values()))[0]]

    # -- visits ----------------------------------------------------------------------------

    def build(self) -> Timeline:
        rng = self.rng
        n_visits = rng.randint(3, 12)
        self.plan_conditions(n_visits)
        when = self.first.replace(hour=0, minute=0)
        end_of_data = datetime(2024, 12, 31)
        for j in range(n_visits):
            if j:
                when = when + timedelta(days=rng.randint(20, 240))
            if when > end_of_data:
                break
            for key, k in self.onset.items():
                if k == j and key not in self.chronic:
                    self.chronic.append(key)
            code = self.choose_type(j)
            vid = str((self.index + 1) * 1000 + j)
            if code == "OP":
                self.outpatient(
                    vid, when.replace(hour=rng.randint(8, 16), minute=rng.choice((0, 15, 30, 45))), j
                )
            elif code == "ER":
                self.emergency(vid, when.replace(hour=rng.randrange(24), minute=rng.randrange(60)))
            else:
                self.inpatient(vid, when.replace(hour=rng.randrange(24), minute=rng.randrange(60)))
            when = self.stays[-1].visit.end or when
        self.maybe_death()
        return self.timeline

    def _visit(self, vid: str, code: str, start: datetime, end: datetime) -> _Stay:
        v = Visit(vid, VISIT_TYPES[code].name, start, end)
        self.timeline.visits.append(v)
        stay = _Stay(v, code)
        self.stays.append(stay)
        return stay

    def _note(self, stay: _Stay, time: datetime, kind: str, text: str) -> None:
        nid = str(
            int(stay.visit.visit_id) * 10
            + sum(1 for n in self.timeline.notes if n.visit_id == stay.visit.visit_id)
        )
        self.timeline.notes.append(Note(time, kind, text, stay.visit.visit_id, nid))

    def outpatient(self, vid: str, start: datetime, j: int) -> None:
        rng = self.rng
        stay = self._visit(vid, "OP", start, start + timedelta(minutes=rng.choice((30, 40, 45, 60))))
        t = start + timedelta(minutes=5)
        self.anthropometrics(stay, t)
        self.vitals(stay, t)
        if j == 0:
            self._add("observation", t, SMOKING, stay.visit, self.smoking)
        for key in self.chronic:
            if self.onset[key] == j:
                self.diagnose(stay, t + timedelta(minutes=10), key)
        tl = t + timedelta(minutes=15)
        draws: list[str] = []
        for key in self.chronic:
            if self.onset[key] == j or rng.random() < 0.6:
                draws.extend(x for x in CHRONIC_LABS[key] if x not in draws)
        for loinc in draws:
            self.measure(stay, tl, loinc)
        td = t + timedelta(minutes=20)
        for key in self.chronic:
            drugs = CHRONIC_DRUGS[key]
            wanted = drugs if not self.controlled[key] and self.onset[key] < j else drugs[:1]
            for d in wanted:
                if d not in self.meds:
                    self.meds.append(d)
        for d in self.meds:
            self.prescribe(stay, td, d)
        if self.meds and rng.random() < 0.5:
            self.procedure(stay, td, "medrec")
        if set(self.chronic) & {"atrial_fibrillation", "cad", "heart_failure"} and rng.random() < 0.3:
            self.procedure(stay, td, "ecg")
        self._note(stay, stay.visit.end or td, "progress note", self.progress_note(stay, j))

    def emergency(self, vid: str, start: datetime) -> None:
        rng = self.rng
        reason = self.choose_reason("ER")
        stay = self._visit(vid, "ER", start, start + timedelta(minutes=rng.randint(120, 420)))
        stay.reason = reason
        t = start + timedelta(minutes=10)
        self.vitals(stay, t, reason.condition)
        self.diagnose(stay, t + timedelta(minutes=30), reason.condition)
        for loinc in reason.labs:
            self.measure(stay, t + timedelta(minutes=40), loinc, reason.condition)
        for p in reason.procedures:
            self.procedure(stay, t + timedelta(minutes=50), p)
        for d in reason.treat:
            self.prescribe(stay, t + timedelta(minutes=60), d)
        end = stay.visit.end or t
        for d in reason.discharge:
            self.prescribe(stay, end - timedelta(minutes=10), d)
        self._note(stay, end, "emergency department note", self.ed_note(stay))

    def inpatient(self, vid: str, start: datetime) -> None:
        rng = self.rng
        reason = self.choose_reason("IP")
        los = rng.randint(2, 9)
        end = (start + timedelta(days=los)).replace(
            hour=rng.randint(10, 15), minute=rng.choice((0, 15, 30, 45))
        )
        stay = self._visit(vid, "IP", start, end)
        stay.reason = reason
        cond = reason.condition
        t = start + timedelta(minutes=15)
        self.vitals(stay, t, cond)
        self.anthropometrics(stay, t)
        self.diagnose(stay, t + timedelta(minutes=30), cond)
        for loinc in reason.labs:
            self.measure(stay, t + timedelta(minutes=45), loinc, cond)
        for p in reason.procedures:
            self.procedure(stay, t + timedelta(hours=2), p)
        for d in reason.treat:
            self.prescribe(stay, t + timedelta(hours=1), d)
        for d in self.meds:
            if d not in reason.treat:
                self.prescribe(stay, t + timedelta(hours=3), d)
        self._note(stay, t + timedelta(hours=3), "history and physical note", self.hp_note(stay))
        for day in range(1, los + 1):
            w = max(0.0, 1.0 - day / los) if day < los else 0.0
            morning = (start + timedelta(days=day)).replace(hour=6, minute=0)
            if morning >= end:
                break
            for loinc in BMP + CBC:
                self.measure(stay, morning, loinc, cond, w)
            self.vitals(stay, morning.replace(hour=8), cond, w)
            if day < los:
                self._note(
                    stay, morning.replace(hour=11), "progress note", self.hospital_progress(stay, day, w)
                )
        # a hospitalisation leaves a chronic trace
        if cond == "mi" and "cad" not in self.chronic:
            self.chronic.append("cad")
            self.onset["cad"] = len(self.stays) - 1
            self.controlled["cad"] = True
            self.diagnose(stay, end - timedelta(hours=1), "cad")
        for d in reason.discharge:
            if d not in self.meds and cond in ("mi", "stroke", "heart_failure"):
                self.meds.append(d)
            self.prescribe(stay, end - timedelta(minutes=30), d)
        self._note(stay, end, "discharge summary", self.discharge_summary(stay))

    def maybe_death(self) -> None:
        last = self.timeline.visits[-1]
        p = 0.01 + 0.02 * len(self.chronic) * (self.age0 > 70)
        if self.rng.random() >= p or last.end is None:
            return
        when = (last.end + timedelta(days=self.rng.randint(3, 200))).replace(hour=0, minute=0)
        cause = next((c for c in ("heart_failure", "cad", "ckd", "diabetes") if c in self.chronic), None)
        self.person.death = when
        c = CONDITIONS[cause].snomed if cause else Concept(0, "Death", "Observation", "None", "", "0", "")
        self.timeline.events.append(
            Event("death", when, c.name, c.vocabulary if cause else None, c.code if cause else None)
        )

    # -- notes -----------------------------------------------------------------------------

    def who(self, when: datetime) -> str:
        age = self.person.age_at(when)
        years = age[1] if age else self.age0
        return f"{years}-year-old {'woman' if self.sex == 'F' else 'man'}"

    def pronoun(self, cap: bool = True) -> str:
        p = "she" if self.sex == "F" else "he"
        return p.capitalize() if cap else p

    def pmh(self, exclude: str | None = None) -> str:
        names = [CONDITIONS[k].snomed.name.lower() for k in self.chronic if k != exclude]
        if not names:
            return "no significant past medical history"
        if len(names) == 1:
            return f"a history of {names[0]}"
        return f"a history of {', '.join(names[:-1])} and {names[-1]}"

    @staticmethod
    def result_line(labs: list[tuple[datetime, str, float]], keys: tuple[str, ...] | None = None) -> str:
        parts = []
        for _, loinc, v in labs:
            if keys is not None and loinc not in keys:
                continue
            lab = LABS[loinc]
            flag = " (high)" if v > lab.ref_high else " (low)" if v < lab.ref_low else ""
            parts.append(f"{lab.short} {lab.fmt(v)} {lab.unit.code}{flag}")
        return "; ".join(parts) + "." if parts else "none."

    @staticmethod
    def vitals_line(labs: list[tuple[datetime, str, float]]) -> str:
        last = {loinc: v for _, loinc, v in labs}
        f = {k: LABS[k].fmt(v) for k, v in last.items()}
        bits = []
        if "8480-6" in f and "8462-4" in f:
            bits.append(f"BP {f['8480-6']}/{f['8462-4']} mm[Hg]")
        for k, label, unit in (
            ("8867-4", "HR", "/min"),
            ("9279-1", "RR", "/min"),
            ("8310-5", "T", "Cel"),
            ("59408-5", "SpO2", "%"),
            ("29463-7", "weight", "kg"),
            ("39156-5", "BMI", "kg/m2"),
        ):
            if k in f:
                bits.append(f"{label} {f[k]} {unit}")
        return ", ".join(bits) + "."

    def drug_names(self, key: str) -> str:
        return ", ".join(DRUGS[d].concept.name for d in CHRONIC_DRUGS[key] if d in self.meds)

    def med_list(self, keys: list[str]) -> str:
        if not keys:
            return "None."
        return "\n".join(f"{i}. {DRUGS[k].concept.name}: {DRUGS[k].sig}." for i, k in enumerate(keys, 1))

    def progress_note(self, stay: _Stay, j: int) -> str:
        rng = self.rng
        v = stay.visit
        assert v.start is not None
        new = stay.new_conditions
        if j == 0:
            cc = "New patient visit to establish care."
        elif new:
            cc = f"Follow-up; concern for {CONDITIONS[new[0]].snomed.name.lower()}."
        else:
            cc = rng.choice(
                (
                    "Routine follow-up of chronic conditions.",
                    "Medication refill and review.",
                    "Annual wellness examination.",
                    "Follow-up of laboratory results.",
                )
            )
        hpi = [
            f"{self.who(v.start)} with {self.pmh()} presents for "
            f"{'an initial visit' if j == 0 else 'follow-up'}."
        ]
        for key in self.chronic:
            hpi.append(rng.choice(HPI_LINES[key]))
        if j == 0:
            hpi.append(f"Tobacco use: {self.smoking.lower()}.")
        non_vital = [
            x for x in stay.labs if x[1] not in VITALS and x[1] not in ("29463-7", "8302-2", "39156-5")
        ]
        plan = []
        for i, key in enumerate(self.chronic, 1):
            cd = CONDITIONS[key]
            status = (
                "newly diagnosed" if key in new else ("controlled" if self.controlled[key] else "not at goal")
            )
            drugs = [DRUGS[d].concept.name for d in CHRONIC_DRUGS[key] if d in self.meds]
            rx = (
                f" Continue {', '.join(drugs)}."
                if drugs and key not in new
                else (f" Start {', '.join(drugs)}." if drugs else "")
            )
            plan.append(
                f"{i}. {cd.snomed.name} ({cd.icd10.code}), {status}.{rx} {rng.choice(PLAN_LINES[key])}"
            )
        if not plan:
            plan.append("1. Health maintenance: age-appropriate screening reviewed; no chronic medications.")
        months = rng.choice((3, 6, 12))
        return (
            f"PROGRESS NOTE\nDate of service: {v.start:%Y-%m-%d}\n\n"
            f"CHIEF COMPLAINT: {cc}\n\n"
            f"HISTORY OF PRESENT ILLNESS:\n{' '.join(hpi)}\n\n"
            f"VITAL SIGNS: {self.vitals_line(stay.labs)}\n\n"
            f"RESULTS: {self.result_line(non_vital)}\n\n"
            f"ASSESSMENT AND PLAN:\n" + "\n".join(plan) + "\n\n"
            f"MEDICATIONS:\n{self.med_list(self.meds)}\n\n"
            f"Return to clinic in {months} months or sooner as needed."
        )

    def ed_note(self, stay: _Stay) -> str:
        r = stay.reason
        assert r is not None and stay.visit.start is not None
        cd = CONDITIONS[r.condition]
        days = self.rng.randint(2, 5)
        vit = [x for x in stay.labs if x[1] in VITALS]
        res = [x for x in stay.labs if x[1] not in VITALS]
        treat = ", ".join(DRUGS[d].concept.name for d in r.treat) or "supportive care"
        procs = ", ".join(PROCEDURES[p].name.lower() for p in r.procedures)
        return (
            f"EMERGENCY DEPARTMENT NOTE\nArrival: {stay.visit.start:%Y-%m-%d %H:%M}\n\n"
            f"CHIEF COMPLAINT: {r.complaint.capitalize()}.\n\n"
            f"HISTORY OF PRESENT ILLNESS:\n{self.who(stay.visit.start)} with {self.pmh()} presents with "
            f"{r.hpi.format(d=days)}.\n\n"
            f"PHYSICAL EXAMINATION:\nVital signs: {self.vitals_line(vit)}\n"
            f"Examination notable for {r.exam}.\n\n"
            f"RESULTS: {self.result_line(res)}{' Studies: ' + procs + '.' if procs else ''}\n\n"
            f"ED COURSE:\n{r.course} Treated with {treat}.\n\n"
            f"DIAGNOSIS: {cd.snomed.name} ({cd.icd10.code}).\n\n"
            f"DISPOSITION: Discharged home in stable condition.\n"
            f"Prescriptions:\n{self.med_list(list(r.discharge))}\n"
            f"Return precautions were discussed; follow up with primary care within one week."
        )

    def hp_note(self, stay: _Stay) -> str:
        r = stay.reason
        assert r is not None and stay.visit.start is not None
        cd = CONDITIONS[r.condition]
        vit = [x for x in stay.labs if x[1] in VITALS]
        res = [x for x in stay.labs if x[1] not in VITALS and x[1] not in ("29463-7", "8302-2", "39156-5")]
        return (
            f"HISTORY AND PHYSICAL\nAdmission: {stay.visit.start:%Y-%m-%d %H:%M}\n\n"
            f"CHIEF COMPLAINT: {r.complaint.capitalize()}.\n\n"
            f"HISTORY OF PRESENT ILLNESS:\n{self.who(stay.visit.start)} with {self.pmh(r.condition)} "
            f"presents with {r.hpi.format(d=self.rng.randint(2, 6))}.\n\n"
            f"HOME MEDICATIONS:\n{self.med_list(self.meds)}\n\n"
            f"SOCIAL HISTORY: {self.smoking}.\n\n"
            f"PHYSICAL EXAMINATION:\nVital signs: {self.vitals_line(vit)}\n"
            f"Examination notable for {r.exam}.\n\n"
            f"ADMISSION LABORATORY RESULTS: {self.result_line(res)}\n\n"
            f"ASSESSMENT: Admitted for {cd.snomed.name.lower()} ({cd.icd10.code}). "
            f"Plan: {', '.join(DRUGS[d].concept.name for d in r.treat)}; "
            f"{', '.join(PROCEDURES[p].name.lower() for p in r.procedures)}."
        )

    def hospital_progress(self, stay: _Stay, day: int, w: float) -> str:
        assert stay.reason is not None
        today = [x for x in stay.labs if x[0].date() == (stay.labs[-1][0]).date()]
        trend = "improving" if w < 0.6 else "slowly improving" if w < 0.9 else "unchanged"
        return (
            f"HOSPITAL DAY {day} PROGRESS NOTE\n"
            f"Subjective: {self.pronoun()} reports symptoms are {trend}.\n"
            f"Objective: {self.vitals_line([x for x in today if x[1] in VITALS])} "
            f"Labs: {self.result_line([x for x in today if x[1] not in VITALS])}\n"
            f"Assessment and plan: {CONDITIONS[stay.reason.condition].snomed.name}, {trend}. "
            f"Continue current management."
        )

    def discharge_summary(self, stay: _Stay) -> str:
        r = stay.reason
        v = stay.visit
        assert r is not None and v.start is not None and v.end is not None
        cd = CONDITIONS[r.condition]
        secondary = [CONDITIONS[k] for k in self.chronic if k != r.condition]
        sec = "\n".join(f"- {c.snomed.name} ({c.icd10.code})" for c in secondary) or "- None."
        first: dict[str, float] = {}
        last: dict[str, float] = {}
        for _, loinc, val in stay.labs:
            first.setdefault(loinc, val)
            last[loinc] = val
        trends = []
        for loinc in r.labs:
            if loinc in first and loinc in last and first[loinc] != last[loinc]:
                lab = LABS[loinc]
                trends.append(
                    f"The {lab.short} was {lab.fmt(first[loinc])} {lab.unit.code} on admission and "
                    f"{lab.fmt(last[loinc])} {lab.unit.code} at discharge."
                )
        chronic_course = " ".join(
            f"{c.snomed.name} was managed with {self.drug_names(c.key) or 'follow-up'}." for c in secondary
        )
        subj = self.pronoun()
        course = r.course.format(p="The patient", P2=subj)
        los = (v.end.date() - v.start.date()).days
        adm = [x for x in stay.labs if x[0] <= v.start + timedelta(hours=1) and x[1] not in VITALS]
        day_last = max((x[0] for x in stay.labs if x[1] not in VITALS), default=v.start)
        dis = [x for x in stay.labs if x[0] == day_last and x[1] not in VITALS]
        meds = list(dict.fromkeys([*self.meds, *r.discharge]))
        return (
            f"DISCHARGE SUMMARY\n\n"
            f"Admission date: {v.start:%Y-%m-%d}\nDischarge date: {v.end:%Y-%m-%d}\n"
            f"Length of stay: {los} days\n\n"
            f"PRINCIPAL DIAGNOSIS: {cd.snomed.name} (ICD-10-CM {cd.icd10.code}, {cd.icd10.name})\n\n"
            f"SECONDARY DIAGNOSES:\n{sec}\n\n"
            f"HISTORY OF PRESENT ILLNESS:\n{self.who(v.start)} with {self.pmh(r.condition)} "
            f"who presented with {r.hpi.format(d=self.rng.randint(2, 6))}. "
            f"On examination there was {r.exam}.\n\n"
            f"HOSPITAL COURSE:\n{course} {' '.join(trends)}\n\n"
            f"{chronic_course + chr(10) + chr(10) if chronic_course else ''}"
            f"PERTINENT RESULTS:\nAdmission: {self.result_line(adm)}\nDischarge: {self.result_line(dis)}\n\n"
            f"PROCEDURES:\n"
            + ("\n".join(f"- {PROCEDURES[p].name}" for p in r.procedures) or "- None.")
            + "\n\n"
            f"DISCHARGE MEDICATIONS:\n{self.med_list(meds)}\n\n"
            f"DISCHARGE CONDITION: {self.rng.choice(('Stable', 'Improved', 'Good'))}. "
            f"{subj} is ambulatory and tolerating a regular diet.\n\n"
            f"FOLLOW-UP: Primary care within {self.rng.choice((7, 10, 14))} days"
            f"{'; cardiology in 4 weeks' if r.condition in ('mi', 'heart_failure') else ''}"
            f"{'; neurology in 6 weeks' if r.condition == 'stroke' else ''}."
        )


def patient(index: int, seed: int = 0) -> Timeline:
    """Patient ``index`` (0-based) of the cohort drawn with ``seed``."""
    return _Patient(index, seed).build()


def generate(n: int, seed: int = 0) -> Iterator[Timeline]:
    """Stream ``n`` synthetic patients; person ids are "1" .. str(n)."""
    if n < 0:
        raise UserError(f"the number of patients must be 0 or more, not {n}")
    for i in range(n):
        yield patient(i, seed)


# ---------------------------------------------------------------------------------------------
# OMOP CDM CSV output (column names as in the Synthea27Nj OMOP sample)
# ---------------------------------------------------------------------------------------------

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
                    _d(v.start),
                    _dt(v.start),
                    _d(v.end),
                    _dt(v.end),
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
            if e.domain == "death":
                continue
            table = _DOMAIN_TABLE[e.domain]
            self.counters[table] += 1
            n = self.counters[table]
            c = _BY_CODE[(e.vocabulary or "", e.code or "")]
            cid = self._c(c)
            vid = int(e.visit_id) if e.visit_id else ""
            if table == "CONDITION_OCCURRENCE":
                cd = _COND_BY_SNOMED[c.code]
                end = None if cd.chronic else (ends.get(e.visit_id or "") or e.time)
                end = None if end is None else end + timedelta(days=10)
                yield (
                    table,
                    (
                        n,
                        pid,
                        cid,
                        _d(e.time),
                        _dt(e.time),
                        _d(end),
                        _dt(end),
                        TYPE_EHR,
                        0,
                        "",
                        "",
                        vid,
                        "",
                        cd.icd10.code,
                        self._c(cd.icd10),
                        "",
                    ),
                )
            elif table == "DRUG_EXPOSURE":
                dd = _DRUG_BY_CODE[c.code]
                assert e.time is not None
                end = e.time + timedelta(days=dd.days_supply)
                yield (
                    table,
                    (
                        n,
                        pid,
                        cid,
                        _d(e.time),
                        _dt(e.time),
                        _d(end),
                        _dt(end),
                        _d(end),
                        TYPE_EHR,
                        "",
                        0,
                        dd.quantity,
                        dd.days_supply,
                        dd.sig,
                        0,
                        "",
                        "",
                        vid,
                        "",
                        c.code,
                        cid,
                        "",
                        "",
                    ),
                )
            elif table == "MEASUREMENT":
                lab = LABS[c.code]
                yield (
                    table,
                    (
                        n,
                        pid,
                        cid,
                        _d(e.time),
                        _dt(e.time),
                        _d(e.time),
                        TYPE_EHR,
                        0,
                        e.value,
                        0,
                        self._c(lab.unit),
                        lab.fmt(lab.ref_low),
                        lab.fmt(lab.ref_high),
                        "",
                        vid,
                        "",
                        c.code,
                        cid,
                        e.unit,
                        0,
                        e.value,
                        "",
                        "",
                    ),
                )
            elif table == "PROCEDURE_OCCURRENCE":
                yield (
                    table,
                    (
                        n,
                        pid,
                        cid,
                        _d(e.time),
                        _dt(e.time),
                        _d(e.time),
                        _dt(e.time),
                        TYPE_EHR,
                        0,
                        "",
                        "",
                        vid,
                        "",
                        c.code,
                        cid,
                        "",
                    ),
                )
            else:
                yield (
                    table,
                    (
                        n,
                        pid,
                        cid,
                        _d(e.time),
                        _dt(e.time),
                        TYPE_EHR,
                        "",
                        e.value or "",
                        0,
                        0,
                        0,
                        "",
                        vid,
                        "",
                        c.code,
                        cid,
                        "",
                        "",
                        e.value or "",
                        "",
                        "",
                    ),
                )
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
