"""The question kinds: what each asks of a patient, its answer, distractor candidates and evidence.

Each kind (:data:`KINDS`) turns a :class:`~.summaries.Case` into a :class:`Draft`, or None when it
does not apply: the question text, the answer (a fact from :mod:`.facts`), candidate distractors
in order of preference with where each came from, and the note lines that show the answer.
Picking the four options and placing the answer is :mod:`.questions`' work.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

from clinieval.benchmarks.ehrnoteqa.synth.facts import (
    admission_value,
    catalog_values,
    condition_key,
    discharge_drugs,
    discharge_value,
    drug_events,
    maintenance_drugs,
    measurements,
    patient_values,
    principal,
    quantity,
    symptoms,
)
from clinieval.benchmarks.ehrnoteqa.synth.summaries import SECTION_RESULTS, Admission, Case, fmt_time
from clinieval.ehr.synth import (
    BMP,
    CBC,
    CONDITIONS,
    DRUGS,
    ER_REASONS,
    IP_REASONS,
    LABS,
    PROCEDURES,
)
from clinieval.ehr.timeline import Visit

__all__ = [
    "CATEGORIES",
    "KINDS",
    "Ask",
    "Candidate",
    "Cite",
    "Draft",
    "Kind",
]

CATEGORIES: tuple[str, ...] = (
    "Treatment",
    "Assessment",
    "Problem",
    "Etiology",
    "Sign/Symptom",
    "Vitals",
    "Others",
)
"""The question categories of the EHRNoteQA paper."""


_EMERGENCY = "Emergency Room Visit"

_PROC_KEY_BY_SNOMED = {c.code: k for k, c in PROCEDURES.items()}
# Studies done to find out what is wrong (the generator's other procedures, medication
# reconciliation and oxygen, are not studies, and as options would give themselves away).
_DIAGNOSTIC_PROCEDURES = ("ecg", "cxr", "echo")
# Diagnostic studies the generator never performs, as distractors when a stay had all of its
# own. None is a study a discharge summary would leave out for these four admission reasons.
_EXTRA_STUDIES = (
    "Upper gastrointestinal endoscopy",
    "Colonoscopy",
    "Lumbar puncture",
    "Bone densitometry",
    "Spirometry",
    "Abdominal ultrasonography",
)
# Reasons for admission the generator never produces, as the last distractors for a diagnosis:
# the catalog's longest name is the heart-failure admission's own, which the paper's rule
# (the answer is never strictly the longest option) would otherwise leave without options.
_EXTRA_CONDITIONS = (
    "Chronic obstructive pulmonary disease with acute exacerbation",
    "Upper gastrointestinal hemorrhage",
    "Acute diverticulitis of the sigmoid colon",
)
_LAB_PANEL = BMP + CBC  # drawn on admission and every hospital morning, shown in each summary
_WEIGHT, _BMI = "29463-7", "39156-5"
_TEMPERATURE, _HEART_RATE, _SPO2, _SYSTOLIC = "8310-5", "8867-4", "59408-5", "8480-6"
# (LOINC, highest or lowest, words) for the vital-sign extremes of a long note's results table
_EXTREMES: tuple[tuple[str, bool, str], ...] = (
    (_TEMPERATURE, True, "the highest temperature"),
    (_HEART_RATE, True, "the highest heart rate"),
    (_SPO2, False, "the lowest oxygen saturation"),
    (_SYSTOLIC, True, "the highest systolic blood pressure"),
)
# Presenting complaints that overlap in meaning: one is never a distractor for the other.
_OVERLAPPING_SYMPTOMS = frozenset({("pneumonia", "bronchitis"), ("heart_failure", "dyspnea")})
_LENGTHS_OF_STAY = tuple(range(2, 15))


# ------------------------------------------------------------------------------ question drafts


@dataclass(frozen=True, slots=True)
class Candidate:
    """A possible distractor and where it came from (``patient`` is resolved to notes/record)."""

    text: str
    origin: str  # "patient", "same_patient_notes", "generator_catalog" or "module_list"


@dataclass(frozen=True, slots=True)
class Cite:
    """Evidence to find: the first line of ``admission``'s note that ``start`` (a regular
    expression) matches at its beginning and that holds every needle (case-insensitive)."""

    admission: Admission
    start: str
    needles: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class Draft:
    """A question before its options are picked. ``spans`` must all be visible in the notes."""

    question: str
    answer: str
    candidates: tuple[Candidate, ...]
    cites: tuple[Cite, ...]
    spans: tuple[str, ...]


Ask = Callable[[Case, random.Random], Draft | None]


@dataclass(frozen=True, slots=True)
class Kind:
    """A question kind: its EHRNoteQA category, whether it needs several notes, and its asker."""

    name: str
    category: str
    multi_note: bool
    ask: Ask


def _patient(texts: Iterable[str]) -> list[Candidate]:
    return [Candidate(t, "patient") for t in texts]


def _pick_admission(case: Case, rng: random.Random) -> Admission:
    return case.admissions[rng.randrange(len(case.admissions))]


def _condition_candidates(case: Case, skip: Admission | None) -> list[Candidate]:
    """Other conditions, best first: other admissions' reasons, then the patient's other coded
    conditions (the secondary diagnoses every summary lists), then the generator's catalog."""
    others = [p.name for a in case.admissions if a is not skip and (p := principal(a))]
    record = [e.name for e in case.timeline.events if e.domain == "condition_occurrence"]
    catalog = [CONDITIONS[k].snomed.name for k in IP_REASONS]
    catalog += [c.snomed.name for c in CONDITIONS.values()]
    return [
        *_patient(others + record),
        *(Candidate(t, "generator_catalog") for t in catalog),
        *(Candidate(t, "module_list") for t in _EXTRA_CONDITIONS),
    ]


def _principal_diagnosis(case: Case, rng: random.Random) -> Draft | None:
    """The principal diagnosis of one admission."""
    adm = _pick_admission(case, rng)
    p = principal(adm)
    if p is None:
        return None
    question = rng.choice(
        (
            f"As per the note charted on {adm.chartdate}, what was the principal diagnosis of this "
            "admission?",
            f"What was the main diagnosis of the hospitalization documented in the note charted on "
            f"{adm.chartdate}?",
            f"According to the discharge summary charted on {adm.chartdate}, which condition was the "
            "patient primarily treated for?",
        )
    )
    cite = Cite(adm, "PRINCIPAL DIAGNOSIS:", (p.name,))
    return Draft(question, p.name, tuple(_condition_candidates(case, adm)), (cite,), (p.name,))


def _prior_admission_diagnosis(case: Case, rng: random.Random) -> Draft | None:
    """The reason for the admission before a later one: needs two notes."""
    if len(case.admissions) < 2:
        return None
    j = rng.randrange(1, len(case.admissions))
    prior, later = case.admissions[j - 1], case.admissions[j]
    p = principal(prior)
    if p is None:
        return None
    question = rng.choice(
        (
            f"Which condition led to the admission before the one charted on {later.chartdate}?",
            f"What was the patient hospitalized for in the admission preceding the note charted on "
            f"{later.chartdate}?",
        )
    )
    cites = (
        Cite(prior, "PRINCIPAL DIAGNOSIS:", (p.name,)),
        Cite(later, "Discharge date:", (later.chartdate,)),
    )
    return Draft(
        question, p.name, tuple(_condition_candidates(case, prior)), cites, (p.name, later.chartdate)
    )


def _presenting_symptoms(case: Case, rng: random.Random) -> Draft | None:
    """The complaint that brought the patient in, as the summary's history states it."""
    adm = _pick_admission(case, rng)
    p = principal(adm)
    key = None if p is None else condition_key(p)
    if key is None or key not in IP_REASONS:
        return None
    answer = symptoms(IP_REASONS[key].hpi)

    def fits(other: str | None) -> bool:
        return other is not None and (key, other) not in _OVERLAPPING_SYMPTOMS and other != key

    others = [k for a in case.admissions if a is not adm and (q := principal(a)) and (k := condition_key(q))]
    emergency = {v.visit_id for v in case.timeline.visits if v.type == _EMERGENCY}
    er = [
        k
        for e in case.timeline.events
        if e.domain == "condition_occurrence" and e.visit_id in emergency and (k := condition_key(e))
    ]
    reasons = {**IP_REASONS, **ER_REASONS}
    mine = [symptoms(reasons[k].hpi) for k in [*others, *er] if fits(k) and k in reasons]
    catalog = [symptoms(r.hpi) for k, r in reasons.items() if fits(k)]
    question = rng.choice(
        (
            f"As per the note charted on {adm.chartdate}, what symptoms did the patient present with?",
            "What complaints brought the patient to the hospital for the admission charted on "
            f"{adm.chartdate}?",
        )
    )
    cands = [*_patient(mine), *(Candidate(t, "generator_catalog") for t in catalog)]
    cite = Cite(adm, "", ("who presented with " + answer,))
    return Draft(question, answer, tuple(cands), (cite,), (answer,))


def _discharge_medication(case: Case, rng: random.Random) -> Draft | None:
    """One drug prescribed at discharge; distractors are drugs on no list of this stay."""
    adm = _pick_admission(case, rng)
    prescribed = sorted({e.name for e in discharge_drugs(adm)})
    if not prescribed:
        return None
    answer = rng.choice(prescribed)
    in_stay = {e.code for e in drug_events(adm)}
    maintenance = maintenance_drugs(case)
    # Drugs given on this ward that no discharge list of the patient can hold (ceftriaxone, ...):
    ward_only = [e.name for e in drug_events(adm) if e.code not in maintenance]
    elsewhere = [
        e.name for e in case.timeline.events if e.domain == "drug_exposure" and e.code not in in_stay
    ]
    catalog = [d.concept.name for d in DRUGS.values() if d.concept.code not in in_stay]
    question = rng.choice(
        (
            f"As per the note charted on {adm.chartdate}, which of the following medications was the "
            "patient discharged on?",
            "Which medication appears on the discharge medication list of the note charted on "
            f"{adm.chartdate}?",
        )
    )
    cands = [*_patient(ward_only + elsewhere), *(Candidate(t, "generator_catalog") for t in catalog)]
    return Draft(question, answer, tuple(cands), (_med_line(adm, answer),), (answer,))


def _med_line(adm: Admission, drug: str) -> Cite:
    """The drug's numbered line of the DISCHARGE MEDICATIONS list (``1. name: directions.``)."""
    return Cite(adm, r"\d+\. ", (f"{drug}: ",))


def _first_prescribed(case: Case, rng: random.Random) -> Draft | None:
    """The chart date of the first note whose discharge list holds a drug: needs every note."""
    if len(case.admissions) < 2:
        return None
    found: list[tuple[str, Admission]] = []
    seen: set[str] = set()  # drugs with any event in an earlier admission
    for i, adm in enumerate(case.admissions):
        later = {e.code for a in case.admissions[i + 1 :] for e in drug_events(a)}
        for e in discharge_drugs(adm):
            if e.code not in seen and (i > 0 or e.code in later) and e.name not in (n for n, _ in found):
                found.append((e.name, adm))
        seen.update(e.code or "" for e in drug_events(adm))
    if not found:
        return None
    drug, adm = found[rng.randrange(len(found))]
    own_admission_date = f"{adm.visit.start:%Y-%m-%d}" if adm.visit.start else ""
    notes = [a.chartdate for a in case.admissions if a is not adm]
    notes += [f"{a.visit.start:%Y-%m-%d}" for a in case.admissions if a is not adm and a.visit.start]
    visits = [f"{v.start:%Y-%m-%d}" for v in case.timeline.visits if v.start]
    shifted = [
        f"{datetime.fromisoformat(a.chartdate) + timedelta(days=d):%Y-%m-%d}"
        for d in (30, -30, 90)
        for a in case.admissions
    ]
    cands = [
        Candidate(t, "patient") for t in [*notes, *visits] if t not in (own_admission_date, adm.chartdate)
    ]
    cands += [Candidate(t, "module_list") for t in shifted if t != own_admission_date]
    question = rng.choice(
        (
            f"On which chart date was {drug} first listed among the patient's discharge medications?",
            f"At which admission was {drug} first prescribed at discharge? Give the chart date of its note.",
        )
    )
    cites = (Cite(adm, "Discharge date:", (adm.chartdate,)), _med_line(adm, drug))
    return Draft(question, adm.chartdate, tuple(cands), cites, (adm.chartdate, drug))


def _lab_value(case: Case, rng: random.Random) -> Draft | None:
    """A lab on admission or at discharge, as the summary's PERTINENT RESULTS list it."""
    adm = _pick_admission(case, rng)
    at_discharge = rng.random() < 0.5
    have = [
        c
        for c in _LAB_PANEL
        if (discharge_value(adm, c) if at_discharge else admission_value(adm, c)) is not None
    ]
    if not have:
        return None
    loinc = rng.choice(have)
    e = discharge_value(adm, loinc) if at_discharge else admission_value(adm, loinc)
    assert e is not None
    lab = LABS[loinc]
    answer = quantity(e)
    when = "at discharge" if at_discharge else "on admission"
    question = rng.choice(
        (
            f"As per the note charted on {adm.chartdate}, what was the patient's {lab.short} {when}?",
            f"What {lab.short} value was documented {when} in the note charted on {adm.chartdate}?",
        )
    )
    this_stay = [quantity(x) for x in measurements(adm.events, loinc)]
    cands = [
        *_patient(this_stay + patient_values(case.timeline, loinc)),
        *(Candidate(t, "generator_catalog") for t in catalog_values(loinc)),
    ]
    prefix = "Discharge: " if at_discharge else "Admission: "
    cite = Cite(adm, prefix, (f"{lab.short} {answer}",))
    return Draft(question, answer, tuple(cands), (cite,), (answer,))


def _change(before: str, after: str, unit: str) -> str:
    """``Increased from 0.94 mg/dL to 1.10 mg/dL`` (or decreased, or unchanged)."""
    a, b = float(before), float(after)
    if a == b:
        return f"Unchanged at {before} {unit}"
    word = "Increased" if b > a else "Decreased"
    return f"{word} from {before} {unit} to {after} {unit}"


def _lab_change(case: Case, rng: random.Random) -> Draft | None:
    """How a discharge lab moved between two admissions: needs both notes."""
    if len(case.admissions) < 2:
        return None
    pairs = [(i, j) for i in range(len(case.admissions)) for j in range(i + 1, len(case.admissions))]
    i, j = pairs[rng.randrange(len(pairs))]
    first, second = case.admissions[i], case.admissions[j]
    have = [c for c in _LAB_PANEL if discharge_value(first, c) and discharge_value(second, c)]
    if not have:
        return None
    loinc = "2160-0" if "2160-0" in have and rng.random() < 0.5 else rng.choice(have)
    lab = LABS[loinc]
    x, y = discharge_value(first, loinc), discharge_value(second, loinc)
    assert x is not None and y is not None and x.value is not None and y.value is not None
    unit = lab.unit.code
    answer = _change(x.value, y.value, unit)
    pool = [y.value, x.value]  # the reversed pair first, then admission values
    for adm in (first, second):
        a = admission_value(adm, loinc)
        if a is not None and a.value is not None:
            pool.append(a.value)
    pool = list(dict.fromkeys(pool))
    pairs_text = [_change(a, b, unit) for a in pool for b in pool if a != b]
    pairs_text += [_change(a, a, unit) for a in pool]
    catalog = [v.split()[0] for v in catalog_values(loinc)]
    extra = [_change(x.value, c, unit) for c in catalog] + [_change(c, y.value, unit) for c in catalog]
    question = (
        f"How did the {lab.short} at discharge change between the admissions charted on "
        f"{first.chartdate} and {second.chartdate}?"
    )
    cands = [Candidate(t, "same_patient_notes") for t in pairs_text]
    cands += [Candidate(t, "generator_catalog") for t in extra]
    cites = tuple(
        Cite(a, "Discharge: ", (f"{lab.short} {v.value} {unit}",)) for a, v in ((first, x), (second, y))
    )
    return Draft(question, answer, tuple(cands), cites, (f"{x.value} {unit}", f"{y.value} {unit}"))


def _diagnostic_study(case: Case, rng: random.Random) -> Draft | None:
    """A diagnostic study of the stay's PROCEDURES list."""
    adm = _pick_admission(case, rng)
    codes = {e.code for e in adm.events if e.domain == "procedure_occurrence"}
    studies = [PROCEDURES[k] for k in _DIAGNOSTIC_PROCEDURES if PROCEDURES[k].code in codes]
    if not studies:
        return None
    answer = rng.choice(studies).name
    mine = [
        e.name
        for e in case.timeline.events
        if e.domain == "procedure_occurrence"
        and e.code not in codes
        and _PROC_KEY_BY_SNOMED.get(e.code or "") in _DIAGNOSTIC_PROCEDURES
    ]
    catalog = [PROCEDURES[k].name for k in _DIAGNOSTIC_PROCEDURES if PROCEDURES[k].code not in codes]
    question = rng.choice(
        (
            f"As per the note charted on {adm.chartdate}, which diagnostic study was performed during this "
            "admission?",
            f"Which of the following studies was done during the hospitalization charted on {adm.chartdate}?",
        )
    )
    cands = [
        *_patient(mine),
        *(Candidate(t, "generator_catalog") for t in catalog),
        *(Candidate(t, "module_list") for t in _EXTRA_STUDIES),
    ]
    return Draft(question, answer, tuple(cands), (Cite(adm, "- ", (answer,)),), (answer,))


def _vital_sign(case: Case, rng: random.Random) -> Draft | None:
    """An extreme vital sign of the stay where the note holds the results table, else the weight
    or BMI on admission (the only body measurements a short summary lists)."""
    adm = _pick_admission(case, rng)
    if SECTION_RESULTS in adm.sections:
        loinc, highest, words = rng.choice(_EXTREMES)
        values = measurements(adm.events, loinc)
        if not values:
            return None
        pick = (max if highest else min)(values, key=lambda e: float(e.value or 0))
        question = rng.choice(
            (
                f"As per the note charted on {adm.chartdate}, what was {words} recorded during this "
                "admission?",
                f"What was {words} documented during the hospitalization charted on {adm.chartdate}?",
            )
        )
        prefix = re.escape(fmt_time(pick.time) + " |")
    else:
        loinc = rng.choice((_WEIGHT, _BMI))
        got = admission_value(adm, loinc)
        if got is None:
            return None
        pick = got
        words = "weight" if loinc == _WEIGHT else "body mass index"
        question = f"As per the note charted on {adm.chartdate}, what was the patient's {words} on admission?"
        prefix = "Admission: "
    answer = quantity(pick)
    this_stay = [quantity(x) for x in measurements(adm.events, loinc)]
    cands = [
        *_patient(this_stay + patient_values(case.timeline, loinc)),
        *(Candidate(t, "generator_catalog") for t in catalog_values(loinc)),
    ]
    cite = Cite(adm, prefix, (f"{LABS[loinc].short} {answer}",))
    return Draft(question, answer, tuple(cands), (cite,), (answer,))


def _days(n: int) -> str:
    return f"{n} days" if n != 1 else "1 day"


def _length_of_stay(case: Case, rng: random.Random) -> Draft | None:
    """Days between admission and discharge, as the summary's header states."""
    adm = _pick_admission(case, rng)
    v = adm.visit
    if v.start is None or v.end is None:
        return None

    def los(visit: Visit) -> int:
        assert visit.start is not None and visit.end is not None
        return (visit.end.date() - visit.start.date()).days

    answer = _days(los(v))
    others = [_days(los(a.visit)) for a in (*case.admissions, *case.later) if a is not adm]
    question = rng.choice(
        (
            f"As per the note charted on {adm.chartdate}, how long was the patient hospitalized?",
            f"What was the length of stay of the admission charted on {adm.chartdate}?",
        )
    )
    order = list(_LENGTHS_OF_STAY)
    rng.shuffle(order)
    cands = [*_patient(others), *(Candidate(_days(n), "module_list") for n in order)]
    return Draft(question, answer, tuple(cands), (Cite(adm, "Length of stay:", (answer,)),), (answer,))


KINDS: tuple[Kind, ...] = (
    Kind("principal_diagnosis", "Problem", False, _principal_diagnosis),
    Kind("prior_admission_diagnosis", "Etiology", True, _prior_admission_diagnosis),
    Kind("presenting_symptoms", "Sign/Symptom", False, _presenting_symptoms),
    Kind("discharge_medication", "Treatment", False, _discharge_medication),
    Kind("first_prescribed", "Treatment", True, _first_prescribed),
    Kind("lab_value", "Assessment", False, _lab_value),
    Kind("lab_change", "Assessment", True, _lab_change),
    Kind("diagnostic_study", "Assessment", False, _diagnostic_study),
    Kind("vital_sign", "Vitals", False, _vital_sign),
    Kind("length_of_stay", "Others", False, _length_of_stay),
)
"""Every question kind, in the order a patient's questions are listed."""
