"""The clinical code catalogues: conditions, drugs, procedures and smoking status, with real codes.

Conditions carry both their standard SNOMED CT concept and the ICD-10-CM code a source would
bill (ICD-10-CM concepts get local ids, numbered in the order below); drugs carry their RxNorm
concept and the prescription they are written with. :func:`all_concepts` gathers every concept
the generator can emit, from here, :mod:`.labs` and :mod:`.concepts`: the OMOP writer's concept
table, and the test that checks the ids against the public OMOP vocabulary.
"""

from __future__ import annotations

from dataclasses import dataclass

from clinieval.ehr.synth.concepts import (
    ETHNICITIES,
    GENDERS,
    LOCAL_CONCEPT_BASE,
    NOTE_CLASSES,
    RACES,
    TYPE_CONCEPT,
    TYPE_EHR,
    VISIT_TYPES,
    Concept,
)
from clinieval.ehr.synth.labs import LABS


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
