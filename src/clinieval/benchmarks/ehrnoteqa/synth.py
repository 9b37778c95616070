"""A synthetic EHRNoteQA-shaped set: discharge summaries and five-option questions, no credentials.

EHRNoteQA (spec: ``shared/spec/ehrnoteqa.md``) asks multiple-choice questions about one patient's
MIMIC-IV discharge summaries; both the questions and the notes sit behind PhysioNet credentials.
This module writes the same two files a user brings (``discharge.csv`` in the MIMIC-IV-Note
layout and ``qa.jsonl`` in the PhysioNet question format) over the project's synthetic patients
(:mod:`clinieval.ehr.synth`), so the whole pipeline (reading, note selection, levels, prompts,
scoring) can run end to end on any machine. A score on it says nothing about clinical ability.

The notes are the generator's own template-written discharge summaries, one per inpatient stay.
They are short (about 630 to 1,050 cl100k tokens each), so on their own every patient would be
Level 1. In *long* mode, drawn per patient with probability ``long_fraction``, each summary is
extended with sections built from the same stay's data: a day-by-day hospital course (the stay's
daily progress notes), every medication given or prescribed, and the full table of the stay's
labs and vital signs. Two or three long summaries land in Level 2 (3,500 to 7,500 tokens); a
patient over 7,500 tokens loses extension sections (last note first) until it fits, so no patient
is excluded by construction (one still over the limit would be excluded and counted).

Answers come from the timeline's coded events tied to each admission (principal diagnosis,
discharge prescriptions, procedures, lab and vital values, dates), never from free text, and
every question names the evidence line that shows its answer; a question whose answer cannot be
found in the notes the model sees is skipped and counted (it would be a bug). Distractors are the
same patient's other facts of the same type first, the generator's catalog only when the patient
has too few, and each item records where each distractor came from. As in the paper, the correct
option is never strictly the longest.

Everything is a pure function of the arguments: the same call gives byte-identical files, and the
folder is built under a temporary name and renamed into place, so a failure leaves nothing.
"""

from __future__ import annotations

import csv
import json
import random
import re
import statistics
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from clinieval.context.tokenizers import Tokenizer, tokenizer_from_spec
from clinieval.ehr.notes import (
    DISCHARGE_HEADER,
    MAX_NOTES,
    DischargeNote,
    format_notes,
    level_for,
    normalize_whitespace,
)
from clinieval.ehr.synth import (
    BMP,
    CBC,
    CONDITIONS,
    DRUGS,
    ER_REASONS,
    IP_REASONS,
    LABS,
    PROCEDURES,
    VITALS,
    patient,
)
from clinieval.ehr.timeline import Event, Note, Timeline, Visit
from clinieval.errors import UserError
from clinieval.fsutil import staged_dir

__all__ = [
    "CATEGORIES",
    "CSV_COLUMNS",
    "KINDS",
    "MANIFEST_FILE",
    "NOTES_FILE",
    "PAPER_SHARES",
    "QA_FILE",
    "SOURCES",
    "Admission",
    "Case",
    "Item",
    "Kind",
    "LetterDeck",
    "Posed",
    "SyntheticSet",
    "build_case",
    "build_synthetic_set",
    "questions_for",
    "select",
]

NOTES_FILE = "discharge.csv"
QA_FILE = "qa.jsonl"
MANIFEST_FILE = "manifest.json"
FORMAT = "clinieval-ehrnoteqa-synthetic/1"

CSV_COLUMNS = DISCHARGE_HEADER
"""MIMIC-IV-Note ``discharge.csv`` header."""

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

SOURCES: tuple[str, ...] = ("same_patient_notes", "same_patient_record", "generator_catalog", "module_list")
"""Where a distractor came from, in order of preference: a fact of the same patient shown in the
notes, a fact of the same patient elsewhere in the record (clinic or emergency visits, a fourth
admission), the generator's catalog (:mod:`clinieval.ehr.synth`), and a short list in this module
(used where the generator's catalog has too few entries of a type)."""

LETTERS = "ABCDE"
SECTION_COURSE = "course"
SECTION_MEDICATIONS = "medications"
SECTION_RESULTS = "results"
# Extension sections in the order they are written, and (reversed) the order trimming drops them.
SECTIONS: tuple[str, ...] = (SECTION_COURSE, SECTION_MEDICATIONS, SECTION_RESULTS)
_TRIM_ORDER: tuple[str, ...] = (SECTION_MEDICATIONS, SECTION_RESULTS, SECTION_COURSE)
_INSERT_BEFORE = "\n\nDISCHARGE MEDICATIONS:"

_INPATIENT = "Inpatient Visit"
_EMERGENCY = "Emergency Room Visit"
_OUTPATIENT = "Outpatient Visit"
_DISCHARGE_SUMMARY = "discharge summary"
_PROGRESS_NOTE = "progress note"

_COND_BY_SNOMED = {c.snomed.code: c for c in CONDITIONS.values()}
_DRUG_BY_RXNORM = {d.concept.code: d for d in DRUGS.values()}
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


# ------------------------------------------------------------------------------------ the notes


@dataclass(frozen=True, slots=True)
class Admission:
    """One inpatient stay and its discharge summary as written to ``discharge.csv``.

    ``events`` are the timeline's coded events of the stay (its visit id) in time order;
    ``progress`` its daily progress notes; ``sections`` the extension sections ``text`` holds.
    """

    seq: int  # 1-based position among the patient's discharge summaries, by chart time
    visit: Visit
    note: Note
    events: tuple[Event, ...]
    progress: tuple[Note, ...]
    note_id: str
    charttime: str
    storetime: str
    sections: tuple[str, ...] = ()
    text: str = ""

    @property
    def chartdate(self) -> str:
        return self.charttime[:10]

    @property
    def hadm_id(self) -> str:
        return self.visit.visit_id

    def discharge_note(self, subject_id: str) -> DischargeNote:
        return DischargeNote(subject_id, self.hadm_id, self.charttime, self.text)


@dataclass(frozen=True, slots=True)
class Case:
    """One patient of the set: the timeline, its first three admissions, and their length.

    ``later`` holds admissions after the third: written to ``discharge.csv`` (as MIMIC-IV-Note
    holds every summary) but, as in EHRNoteQA, never shown to the model nor asked about.
    """

    timeline: Timeline
    admissions: tuple[Admission, ...]
    later: tuple[Admission, ...]
    long: bool
    tokens: int
    level: int | None
    notes_text: str  # the ``{notes}`` block the model sees (format_notes)
    trimmed: tuple[str, ...]  # "<note seq>:<section>" dropped to stay within Level 2

    @property
    def subject_id(self) -> str:
        return self.timeline.person.person_id


def _fmt_time(t: datetime | None) -> str:
    return "" if t is None else f"{t:%Y-%m-%d %H:%M}"


def _flagged(e: Event) -> str:
    """A result the way the generator's notes write one: ``short value unit (high)``."""
    lab = LABS.get(e.code or "")
    if lab is None or e.value is None:
        return f"{e.name} {e.value or ''} {e.unit or ''}".strip()
    v = float(e.value)
    flag = " (high)" if v > lab.ref_high else " (low)" if v < lab.ref_low else ""
    return f"{lab.short} {e.value} {e.unit}{flag}"


def _course_section(adm: Admission) -> str:
    """The stay's daily progress notes as a day-by-day hospital course."""
    days = []
    for note in adm.progress:
        body = " ".join(line.strip() for line in note.text.splitlines()[1:] if line.strip())
        head = note.text.splitlines()[0].removesuffix(" PROGRESS NOTE").capitalize()
        days.append(f"{head} ({note.time:%Y-%m-%d}): {body}" if note.time else f"{head}: {body}")
    return "HOSPITAL COURSE BY DAY:\n" + "\n".join(days) if days else ""


def _medications_section(adm: Admission) -> str:
    """Every drug event of the stay, with the generator's directions for it."""
    lines = []
    for e in adm.events:
        if e.domain == "drug_exposure":
            drug = _DRUG_BY_RXNORM.get(e.code or "")
            sig = f": {drug.sig}" if drug else ""
            lines.append(f"{_fmt_time(e.time)} {e.name}{sig}.")
    return "MEDICATIONS GIVEN AND PRESCRIBED:\n" + "\n".join(lines) if lines else ""


def _results_section(adm: Admission) -> str:
    """The stay's labs and vital signs, one line per draw time."""
    by_time: dict[str, list[str]] = {}
    for e in adm.events:
        if e.domain == "measurement" and e.value is not None:
            by_time.setdefault(_fmt_time(e.time), []).append(_flagged(e))
    lines = [f"{t} | {'; '.join(parts)}." for t, parts in by_time.items()]
    return "LABORATORY AND VITAL SIGN RESULTS:\n" + "\n".join(lines) if lines else ""


_SECTION_WRITERS: dict[str, Callable[[Admission], str]] = {
    SECTION_COURSE: _course_section,
    SECTION_MEDICATIONS: _medications_section,
    SECTION_RESULTS: _results_section,
}


def _render(adm: Admission, sections: Sequence[str]) -> Admission:
    """The admission with its summary extended by ``sections`` (before the medication list)."""
    blocks = [b for s in SECTIONS if s in sections and (b := _SECTION_WRITERS[s](adm))]
    base = adm.note.text
    if not blocks:
        return _replace(adm, (), base)
    extra = "\n\n".join(blocks)
    cut = base.find(_INSERT_BEFORE)
    text = f"{base}\n\n{extra}" if cut < 0 else f"{base[:cut]}\n\n{extra}{base[cut:]}"
    return _replace(adm, tuple(s for s in SECTIONS if s in sections), text)


def _replace(adm: Admission, sections: tuple[str, ...], text: str) -> Admission:
    return Admission(
        adm.seq,
        adm.visit,
        adm.note,
        adm.events,
        adm.progress,
        adm.note_id,
        adm.charttime,
        adm.storetime,
        sections,
        text,
    )


def _rng(seed: int, subject_id: str, what: str) -> random.Random:
    """One stream per (seed, patient, purpose): adding a kind never changes another's questions."""
    return random.Random(f"clinieval-ehrnoteqa-synth:{seed}:{subject_id}:{what}")


def _admissions(tl: Timeline, seed: int) -> list[Admission]:
    """Every inpatient stay that has a discharge summary, in chart-time order."""
    pid = tl.person.person_id
    visits = {v.visit_id: v for v in tl.visits if v.type == _INPATIENT}
    summaries = sorted(
        (n for n in tl.notes if n.type == _DISCHARGE_SUMMARY and n.visit_id in visits and n.time),
        key=lambda n: n.time or datetime.min,
    )
    store = _rng(seed, pid, "storetime")
    out = []
    for seq, note in enumerate(summaries, 1):
        assert note.time is not None and note.visit_id is not None
        vid = note.visit_id
        events = sorted(
            (e for e in tl.events if e.visit_id == vid and e.time is not None),
            key=lambda e: e.time or datetime.min,
        )
        progress = sorted(
            (n for n in tl.notes if n.visit_id == vid and n.type == _PROGRESS_NOTE and n.time),
            key=lambda n: n.time or datetime.min,
        )
        stored = note.time + timedelta(minutes=store.randint(5, 240))
        out.append(
            Admission(
                seq=seq,
                visit=visits[vid],
                note=note,
                events=tuple(events),
                progress=tuple(progress),
                note_id=f"{pid}-DS-{seq}",
                charttime=f"{note.time:%Y-%m-%d %H:%M:%S}",
                storetime=f"{stored:%Y-%m-%d %H:%M:%S}",
                text=note.text,
            )
        )
    return out


def build_case(
    tl: Timeline, tokenizer: Tokenizer, *, seed: int = 0, long_fraction: float = 0.5
) -> Case | None:
    """The patient as the set shows it, or None without an inpatient stay.

    Long mode is drawn from the patient's own stream, so patient *i* is long or short whatever
    the number of patients. Tokens are counted on the ``{notes}`` block the model sees
    (:func:`clinieval.ehr.notes.format_notes`: headers, markers and normalised text), the same
    text EHRNoteQA levels by; over Level 2, extension sections are dropped in
    :data:`_TRIM_ORDER` from the last note backwards until the patient fits.
    """
    every = _admissions(tl, seed)
    if not every:
        return None
    pid = tl.person.person_id
    long = _rng(seed, pid, "long").random() < long_fraction
    wanted = SECTIONS if long else ()
    kept = [_render(a, wanted) for a in every[:MAX_NOTES]]
    trimmed: list[str] = []

    def measure() -> tuple[str, int]:
        text = format_notes([a.discharge_note(pid) for a in kept])
        return text, tokenizer.count(text)

    text, tokens = measure()
    drops = [(i, s) for s in _TRIM_ORDER for i in reversed(range(len(kept)))]
    while level_for(tokens) is None and drops:
        i, section = drops.pop(0)
        if section in kept[i].sections:
            kept[i] = _render(kept[i], [s for s in kept[i].sections if s != section])
            trimmed.append(f"{kept[i].seq}:{section}")
            text, tokens = measure()
    return Case(
        timeline=tl,
        admissions=tuple(kept),
        later=tuple(every[MAX_NOTES:]),
        long=long,
        tokens=tokens,
        level=level_for(tokens),
        notes_text=text,
        trimmed=tuple(trimmed),
    )


# ------------------------------------------------------------------------------ facts of a stay


def _principal(adm: Admission) -> Event | None:
    """The condition the stay was coded for first: the reason for admission."""
    return next((e for e in adm.events if e.domain == "condition_occurrence"), None)


def _drug_events(adm: Admission) -> list[Event]:
    return [e for e in adm.events if e.domain == "drug_exposure"]


def _discharge_drugs(adm: Admission) -> list[Event]:
    """Drugs prescribed at discharge: the stay's drug events at its last drug time."""
    drugs = _drug_events(adm)
    last = max((e.time for e in drugs if e.time), default=None)
    return [e for e in drugs if e.time == last]


def _maintenance_drugs(case: Case) -> set[str]:
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
        codes.update(e.code or "" for e in _discharge_drugs(adm))
    return codes


def _measurements(events: Iterable[Event], loinc: str) -> list[Event]:
    return [e for e in events if e.domain == "measurement" and e.code == loinc and e.value is not None]


def _admission_value(adm: Admission, loinc: str) -> Event | None:
    """The first result of the stay (drawn within an hour of arrival, as the summary lists)."""
    start = adm.visit.start
    hits = _measurements(adm.events, loinc)
    if start is None or not hits or (hits[0].time or datetime.max) > start + timedelta(hours=1):
        return None
    return hits[0]


def _discharge_value(adm: Admission, loinc: str) -> Event | None:
    """The result at the stay's last laboratory draw (what the summary lists at discharge)."""
    labs = [e for e in adm.events if e.domain == "measurement" and e.code not in VITALS]
    last = max((e.time for e in labs if e.time), default=None)
    return next((e for e in _measurements(adm.events, loinc) if e.time == last), None)


def _quantity(e: Event) -> str:
    return f"{e.value} {e.unit}" if e.unit else str(e.value)


def _patient_values(tl: Timeline, loinc: str) -> list[str]:
    return [_quantity(e) for e in _measurements(tl.events, loinc)]


def _catalog_values(loinc: str) -> list[str]:
    """Plausible values of a lab from the generator's catalog: its reference and outer bounds."""
    lab = LABS[loinc]
    points = (lab.ref_low, lab.ref_high, lab.mean, lab.low, lab.high, (lab.ref_high + lab.high) / 2)
    return [f"{lab.fmt(v)} {lab.unit.code}" for v in points]


def _symptoms(hpi: str) -> str:
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


def _condition_key(e: Event) -> str | None:
    cd = _COND_BY_SNOMED.get(e.code or "")
    return cd.key if cd else None


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
    others = [p.name for a in case.admissions if a is not skip and (p := _principal(a))]
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
    p = _principal(adm)
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
    p = _principal(prior)
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
    p = _principal(adm)
    key = None if p is None else _condition_key(p)
    if key is None or key not in IP_REASONS:
        return None
    answer = _symptoms(IP_REASONS[key].hpi)

    def fits(other: str | None) -> bool:
        return other is not None and (key, other) not in _OVERLAPPING_SYMPTOMS and other != key

    others = [
        k for a in case.admissions if a is not adm and (q := _principal(a)) and (k := _condition_key(q))
    ]
    emergency = {v.visit_id for v in case.timeline.visits if v.type == _EMERGENCY}
    er = [
        k
        for e in case.timeline.events
        if e.domain == "condition_occurrence" and e.visit_id in emergency and (k := _condition_key(e))
    ]
    reasons = {**IP_REASONS, **ER_REASONS}
    mine = [_symptoms(reasons[k].hpi) for k in [*others, *er] if fits(k) and k in reasons]
    catalog = [_symptoms(r.hpi) for k, r in reasons.items() if fits(k)]
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
    prescribed = sorted({e.name for e in _discharge_drugs(adm)})
    if not prescribed:
        return None
    answer = rng.choice(prescribed)
    in_stay = {e.code for e in _drug_events(adm)}
    maintenance = _maintenance_drugs(case)
    # Drugs given on this ward that no discharge list of the patient can hold (ceftriaxone, ...):
    ward_only = [e.name for e in _drug_events(adm) if e.code not in maintenance]
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
        later = {e.code for a in case.admissions[i + 1 :] for e in _drug_events(a)}
        for e in _discharge_drugs(adm):
            if e.code not in seen and (i > 0 or e.code in later) and e.name not in (n for n, _ in found):
                found.append((e.name, adm))
        seen.update(e.code or "" for e in _drug_events(adm))
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
        if (_discharge_value(adm, c) if at_discharge else _admission_value(adm, c)) is not None
    ]
    if not have:
        return None
    loinc = rng.choice(have)
    e = _discharge_value(adm, loinc) if at_discharge else _admission_value(adm, loinc)
    assert e is not None
    lab = LABS[loinc]
    answer = _quantity(e)
    when = "at discharge" if at_discharge else "on admission"
    question = rng.choice(
        (
            f"As per the note charted on {adm.chartdate}, what was the patient's {lab.short} {when}?",
            f"What {lab.short} value was documented {when} in the note charted on {adm.chartdate}?",
        )
    )
    this_stay = [_quantity(x) for x in _measurements(adm.events, loinc)]
    cands = [
        *_patient(this_stay + _patient_values(case.timeline, loinc)),
        *(Candidate(t, "generator_catalog") for t in _catalog_values(loinc)),
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
    have = [c for c in _LAB_PANEL if _discharge_value(first, c) and _discharge_value(second, c)]
    if not have:
        return None
    loinc = "2160-0" if "2160-0" in have and rng.random() < 0.5 else rng.choice(have)
    lab = LABS[loinc]
    x, y = _discharge_value(first, loinc), _discharge_value(second, loinc)
    assert x is not None and y is not None and x.value is not None and y.value is not None
    unit = lab.unit.code
    answer = _change(x.value, y.value, unit)
    pool = [y.value, x.value]  # the reversed pair first, then admission values
    for adm in (first, second):
        a = _admission_value(adm, loinc)
        if a is not None and a.value is not None:
            pool.append(a.value)
    pool = list(dict.fromkeys(pool))
    pairs_text = [_change(a, b, unit) for a in pool for b in pool if a != b]
    pairs_text += [_change(a, a, unit) for a in pool]
    catalog = [v.split()[0] for v in _catalog_values(loinc)]
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
        values = _measurements(adm.events, loinc)
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
        prefix = re.escape(_fmt_time(pick.time) + " |")
    else:
        loinc = rng.choice((_WEIGHT, _BMI))
        got = _admission_value(adm, loinc)
        if got is None:
            return None
        pick = got
        words = "weight" if loinc == _WEIGHT else "body mass index"
        question = f"As per the note charted on {adm.chartdate}, what was the patient's {words} on admission?"
        prefix = "Admission: "
    answer = _quantity(pick)
    this_stay = [_quantity(x) for x in _measurements(adm.events, loinc)]
    cands = [
        *_patient(this_stay + _patient_values(case.timeline, loinc)),
        *(Candidate(t, "generator_catalog") for t in _catalog_values(loinc)),
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


# ---------------------------------------------------------------------------------- the items


@dataclass(frozen=True, slots=True)
class Item:
    """One line of ``qa.jsonl``."""

    id: str
    patient_id: str
    num_notes: int
    question: str
    choices: tuple[str, str, str, str, str]
    answer: str  # letter
    category: str
    kind: str
    evidence: tuple[dict[str, str], ...]
    distractor_sources: dict[str, str]

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "patient_id": int(self.patient_id) if self.patient_id.isdigit() else self.patient_id,
            "num_notes": self.num_notes,
            "question": self.question,
        }
        out.update({f"choice_{letter}": text for letter, text in zip(LETTERS, self.choices, strict=True)})
        out.update(
            {
                "answer": self.answer,
                "id": self.id,
                "category": self.category,
                "kind": self.kind,
                "evidence": list(self.evidence),
                "distractor_sources": self.distractor_sources,
            }
        )
        return out


def _find_line(text: str, start: str, needles: Sequence[str]) -> str | None:
    low = [n.lower() for n in needles]
    pattern = re.compile(start)
    for raw in text.splitlines():
        line = raw.strip()
        if pattern.match(line) and all(n in line.lower() for n in low):
            return line
    return None


def _evidence(case: Case, draft: Draft) -> tuple[dict[str, str], ...] | None:
    """The cited lines, or None when one is missing or a span is not in the notes the model sees."""
    shown = case.notes_text.lower()
    if any(s.lower() not in shown for s in draft.spans):
        return None
    out = []
    for cite in draft.cites:
        line = _find_line(cite.admission.text, cite.start, cite.needles)
        if line is None or normalize_whitespace(line).lower() not in shown:
            return None
        a = cite.admission
        out.append({"note_id": a.note_id, "hadm_id": a.hadm_id, "chartdate": a.chartdate, "text": line})
    return tuple(out)


def _source(c: Candidate, shown: str) -> str:
    if c.origin == "patient":
        return "same_patient_notes" if c.text.lower() in shown else "same_patient_record"
    return c.origin


def _distractors(draft: Draft, shown: str, rng: random.Random) -> list[tuple[str, str]] | str:
    """Four distinct distractors with their sources (in a seeded order), or why there are none.

    Distractors are taken by source preference (:data:`SOURCES`), in the asker's order within a
    source. When the answer would be strictly the longest option, the least preferred distractor
    is swapped for the first unused one at least as long (EHRNoteQA: the longest choice is
    never the answer); without one the question is skipped.
    """
    seen = {draft.answer.strip().lower()}
    unique: list[tuple[str, str]] = []
    for c in draft.candidates:
        key = c.text.strip().lower()
        if key and key not in seen:
            seen.add(key)
            unique.append((c.text.strip(), _source(c, shown)))
    ranked = sorted(unique, key=lambda t: SOURCES.index(t[1]))
    if len(ranked) < 4:
        return "too_few_distractors"
    chosen, rest = ranked[:4], ranked[4:]
    if len(draft.answer) > max(len(t) for t, _ in chosen):
        longer = next((c for c in rest if len(c[0]) >= len(draft.answer)), None)
        if longer is None:
            return "answer_longest"
        chosen[-1] = longer
    rng.shuffle(chosen)
    return chosen


PAPER_SHARES: dict[str, int] = {
    "Treatment": 19,
    "Assessment": 20,
    "Problem": 22,
    "Etiology": 10,
    "Sign/Symptom": 5,
    "Vitals": 9,
    "Others": 5,
}
"""Percent of each category in the paper's 100-question sample (spec); they steer the pick."""


def _kind_weight(kind: Kind) -> float:
    return PAPER_SHARES[kind.category] / sum(1 for k in KINDS if k.category == kind.category)


class LetterDeck:
    """Answer positions dealt from successive seeded shuffles of A-E.

    Over any run of questions no letter is used more than once beyond any other per five
    questions, so a model that always answers one letter scores about 20 %, and the positions
    are still unpredictable.
    """

    def __init__(self, seed: int, name: str) -> None:
        self._rng = random.Random(f"clinieval-ehrnoteqa-synth:{seed}:{name}:letters")
        self._hand: list[int] = []

    def draw(self) -> int:
        if not self._hand:
            self._hand = list(range(len(LETTERS)))
            self._rng.shuffle(self._hand)
        return self._hand.pop()


@dataclass(frozen=True, slots=True)
class Posed:
    """A question with its evidence and distractors, before its answer gets a letter."""

    kind: Kind
    draft: Draft
    evidence: tuple[dict[str, str], ...]
    distractors: tuple[tuple[str, str], ...]  # (text, source), in option order

    def place(self, case: Case, pos: int) -> Item:
        """The item with the answer at option ``pos`` (0 = A)."""
        texts = [t for t, _ in self.distractors]
        texts.insert(pos, self.draft.answer)
        letters = [x for x in LETTERS if x != LETTERS[pos]]
        sources = {x: src for x, (_, src) in zip(letters, self.distractors, strict=True)}
        t1, t2, t3, t4, t5 = texts
        return Item(
            id=f"{case.subject_id}-{self.kind.name}",
            patient_id=case.subject_id,
            num_notes=len(case.admissions),
            question=self.draft.question,
            choices=(t1, t2, t3, t4, t5),
            answer=LETTERS[pos],
            category=self.kind.category,
            kind=self.kind.name,
            evidence=self.evidence,
            distractor_sources=sources,
        )


@dataclass(slots=True)
class Asked:
    """Every question one patient can get, and why others were dropped (reason, kind)."""

    posed: list[Posed] = field(default_factory=list)
    skipped: Counter[tuple[str, str]] = field(default_factory=Counter)


def ask_all(case: Case, *, seed: int = 0) -> Asked:
    """Every kind that applies to the patient, posed (or skipped with its reason)."""
    out = Asked()
    shown = case.notes_text.lower()
    for kind in KINDS:
        rng = _rng(seed, case.subject_id, kind.name)
        draft = kind.ask(case, rng)
        if draft is None:
            continue
        evidence = _evidence(case, draft)
        if evidence is None:
            out.skipped["answer_not_visible", kind.name] += 1
            continue
        picked = _distractors(draft, shown, rng)
        if isinstance(picked, str):
            out.skipped[picked, kind.name] += 1
            continue
        out.posed.append(Posed(kind, draft, evidence, tuple(picked)))
    return out


def select(case: Case, posed: Sequence[Posed], *, seed: int = 0, per_patient: int | None = 2) -> list[Posed]:
    """The questions one patient keeps, in :data:`KINDS` order.

    With ``per_patient``, at most that many: a seeded draw without replacement weighted so that
    categories follow the paper's shares (:data:`PAPER_SHARES`, split evenly among a category's
    kinds); a patient with two or more notes keeps a question that needs several notes first,
    when one applies (EHRNoteQA's multi-note questions).
    """
    if per_patient is None or len(posed) <= per_patient:
        return list(posed)
    rng = _rng(seed, case.subject_id, "select")
    keys = [rng.random() ** (1.0 / _kind_weight(p.kind)) for p in posed]  # Efraimidis-Spirakis
    order = sorted(range(len(posed)), key=lambda i: -keys[i])
    multi = [i for i in order if posed[i].kind.multi_note]
    first = multi[:1] if len(case.admissions) > 1 else []
    preferred = [*first, *(i for i in order if i not in first)]
    return [posed[i] for i in sorted(preferred[:per_patient])]


def questions_for(
    case: Case, *, seed: int = 0, per_patient: int | None = 2, letters: LetterDeck | None = None
) -> list[Item]:
    """The items one patient gets. Letters come from ``letters`` (the set shares one deck across
    patients); without one, from a deck of the patient's own."""
    deck = letters or LetterDeck(seed, case.subject_id)
    chosen = select(case, ask_all(case, seed=seed).posed, seed=seed, per_patient=per_patient)
    return [p.place(case, deck.draw()) for p in chosen]


# ------------------------------------------------------------------------------------ the set


@dataclass(frozen=True, slots=True)
class SyntheticSet:
    """Where a built set lies and what it holds (the manifest has the details)."""

    root: Path
    discharge_csv: Path
    qa_jsonl: Path
    manifest_json: Path
    patients_scanned: int
    patients_used: int
    questions: int
    by_kind: dict[str, int]
    by_level: dict[int, int]  # patients per level
    skipped: dict[str, int]  # patients scanned but not used, by reason

    def describe(self) -> str:
        """One line: patients, levels, questions, and what was skipped."""
        levels = ", ".join(f"level {k}: {v}" for k, v in sorted(self.by_level.items()))
        line = (
            f"{self.patients_used} patients ({levels}) of {self.patients_scanned} scanned, "
            f"{self.questions} questions in {len(self.by_kind)} kinds"
        )
        if self.skipped:
            line += "; skipped " + ", ".join(f"{k} {v}" for k, v in sorted(self.skipped.items()))
        return line


def _check_args(patients: int, per_patient: int | None, long_fraction: float) -> None:
    if isinstance(patients, bool) or not isinstance(patients, int) or patients < 1:
        raise UserError(f"the number of patients must be a whole number of at least 1, not {patients!r}")
    if per_patient is not None and (
        isinstance(per_patient, bool) or not isinstance(per_patient, int) or per_patient < 1
    ):
        raise UserError(f"per_patient must be a whole number of at least 1 (or None), not {per_patient!r}")
    if (
        isinstance(long_fraction, bool)
        or not isinstance(long_fraction, int | float)
        or not (0.0 <= long_fraction <= 1.0)
    ):
        raise UserError(f"long_fraction must be a number from 0 to 1, not {long_fraction!r}")


def _check_target(out: Path, overwrite: bool) -> None:
    """Refuse to replace anything but an earlier synthetic set, and that only when asked."""
    if not out.exists():
        return
    if not overwrite:
        raise UserError(f"{out} already exists; choose another folder or pass overwrite=True")
    if not (out.is_dir() and (out / QA_FILE).is_file() and (out / NOTES_FILE).is_file()):
        raise UserError(
            f"{out} exists and is not a synthetic EHRNoteQA set (no {QA_FILE} and {NOTES_FILE}); "
            "refusing to replace it"
        )


def _csv_row(case: Case, adm: Admission) -> list[str]:
    return [
        adm.note_id,
        case.subject_id,
        adm.hadm_id,
        "DS",
        str(adm.seq),
        adm.charttime,
        adm.storetime,
        adm.text,
    ]


def _nested(counts: Counter[tuple[str, str]]) -> dict[str, dict[str, int]]:
    """``{(reason, kind): n}`` as ``{reason: {kind: n}}``, sorted."""
    out: dict[str, dict[str, int]] = {}
    for (reason, kind), n in sorted(counts.items()):
        out.setdefault(reason, {})[kind] = n
    return out


def _token_stats(tokens: list[int]) -> dict[str, int]:
    if not tokens:
        return {}
    return {"min": min(tokens), "median": round(statistics.median(tokens)), "max": max(tokens)}


@dataclass(slots=True)
class _Tally:
    """What the manifest reports, gathered while writing."""

    patients: list[dict[str, Any]] = field(default_factory=list)
    skipped_patients: Counter[str] = field(default_factory=Counter)
    skipped_questions: Counter[tuple[str, str]] = field(default_factory=Counter)
    kinds: Counter[str] = field(default_factory=Counter)
    categories: Counter[str] = field(default_factory=Counter)
    letters: Counter[str] = field(default_factory=Counter)
    sources: Counter[str] = field(default_factory=Counter)
    level_questions: Counter[int] = field(default_factory=Counter)
    notes_written: int = 0
    scanned: int = 0

    def add(self, case: Case, items: list[Item]) -> None:
        assert case.level is not None
        self.patients.append(
            {
                "subject_id": int(case.subject_id) if case.subject_id.isdigit() else case.subject_id,
                "num_notes": len(case.admissions),
                "notes_in_file": len(case.admissions) + len(case.later),
                "long": case.long,
                "tokens": case.tokens,
                "level": case.level,
                "trimmed": list(case.trimmed),
                "questions": len(items),
            }
        )
        for item in items:
            self.kinds[item.kind] += 1
            self.categories[item.category] += 1
            self.letters[item.answer] += 1
            self.sources.update(item.distractor_sources.values())
            self.level_questions[case.level] += 1

    def manifest(self, args: dict[str, Any]) -> dict[str, Any]:
        levels: dict[str, Any] = {}
        for level in (1, 2):
            rows = [p for p in self.patients if p["level"] == level]
            levels[str(level)] = {
                "patients": len(rows),
                "questions": self.level_questions[level],
                "tokens": _token_stats([p["tokens"] for p in rows]),
                "by_num_notes": {
                    str(n): sum(1 for p in rows if p["num_notes"] == n) for n in range(1, MAX_NOTES + 1)
                },
            }
        return {
            "format": FORMAT,
            **args,
            "patients_scanned": self.scanned,
            "patients_used": len(self.patients),
            "notes_written": self.notes_written,
            "questions": sum(self.kinds.values()),
            "by_kind": {k.name: self.kinds[k.name] for k in KINDS},
            "by_category": {c: self.categories[c] for c in CATEGORIES},
            "by_level": levels,
            "answer_letters": {x: self.letters[x] for x in LETTERS},
            "distractor_sources": {s: self.sources[s] for s in SOURCES},
            "long_patients": sum(1 for p in self.patients if p["long"]),
            "trimmed_patients": sum(1 for p in self.patients if p["trimmed"]),
            "skipped": {
                "patients": dict(sorted(self.skipped_patients.items())),
                "questions": _nested(self.skipped_questions),
            },
            "patients": self.patients,
        }


def max_scan(patients: int) -> int:
    """How many generator patients are tried for ``patients`` used: about half have an inpatient
    stay, so this bound is never reached unless the generator changes; then the set is smaller
    (the manifest says so) rather than the scan endless."""
    return 20 * patients + 1000


def _write_set(
    tmp: Path,
    tokenizer: Tokenizer,
    *,
    patients: int,
    seed: int,
    per_patient: int | None,
    long_fraction: float,
) -> _Tally:
    tally = _Tally()
    deck = LetterDeck(seed, "set")
    with (
        (tmp / NOTES_FILE).open("w", encoding="utf-8", newline="") as notes_file,
        (tmp / QA_FILE).open("w", encoding="utf-8", newline="\n") as qa_file,
    ):
        writer = csv.writer(notes_file, lineterminator="\n")
        writer.writerow(CSV_COLUMNS)
        for index in range(max_scan(patients)):
            if len(tally.patients) == patients:
                break
            tally.scanned += 1
            tl = patient(index, seed)
            case = build_case(tl, tokenizer, seed=seed, long_fraction=long_fraction)
            if case is None:
                tally.skipped_patients["no_inpatient_stay"] += 1
                continue
            if case.level is None:
                tally.skipped_patients["over_level_2"] += 1
                continue
            asked = ask_all(case, seed=seed)
            tally.skipped_questions.update(asked.skipped)
            chosen = select(case, asked.posed, seed=seed, per_patient=per_patient)
            if not chosen:
                tally.skipped_patients["no_question"] += 1
                continue
            for adm in (*case.admissions, *case.later):
                writer.writerow(_csv_row(case, adm))
                tally.notes_written += 1
            items = [p.place(case, deck.draw()) for p in chosen]
            for item in items:
                qa_file.write(json.dumps(item.to_json(), ensure_ascii=False) + "\n")
            tally.add(case, items)
    return tally


def build_synthetic_set(
    out_dir: Path,
    *,
    patients: int = 40,
    seed: int = 0,
    per_patient: int | None = 2,
    long_fraction: float = 0.5,
    tokenizer: str = "tiktoken:cl100k_base",
    overwrite: bool = False,
) -> SyntheticSet:
    """Write an EHRNoteQA-shaped set of ``patients`` synthetic patients.

    ``out_dir`` receives ``discharge.csv`` (MIMIC-IV-Note layout, :data:`CSV_COLUMNS`),
    ``qa.jsonl`` (one :class:`Item` a line) and ``manifest.json`` (counts, levels, skips).
    Generator patients are scanned in order (index 0, 1, ...) until ``patients`` are used;
    those without an inpatient stay (about half) are skipped and counted. ``per_patient`` caps
    questions per patient (None: every kind that applies); ``long_fraction`` is the share of
    patients whose summaries get long-mode sections; ``tokenizer`` (a
    :func:`~clinieval.context.tokenizers.tokenizer_from_spec` spec) decides levels. The folder appears
    complete or not at all; an existing one is replaced only with ``overwrite=True`` and only if
    it is an earlier synthetic set.
    """
    _check_args(patients, per_patient, long_fraction)
    tok = tokenizer_from_spec(tokenizer)
    out = Path(out_dir)
    _check_target(out, overwrite)
    args = {
        "seed": seed,
        "tokenizer": tokenizer,
        "long_fraction": long_fraction,
        "per_patient": per_patient,
    }
    with staged_dir(out, "the synthetic EHRNoteQA folder") as tmp:
        tally = _write_set(
            tmp, tok, patients=patients, seed=seed, per_patient=per_patient, long_fraction=long_fraction
        )
        manifest = tally.manifest(args)
        (tmp / MANIFEST_FILE).write_text(
            json.dumps(manifest, indent=2, ensure_ascii=False) + "\n", encoding="utf-8"
        )
    return SyntheticSet(
        root=out,
        discharge_csv=out / NOTES_FILE,
        qa_jsonl=out / QA_FILE,
        manifest_json=out / MANIFEST_FILE,
        patients_scanned=manifest["patients_scanned"],
        patients_used=manifest["patients_used"],
        questions=manifest["questions"],
        by_kind={k: v for k, v in manifest["by_kind"].items() if v},
        by_level={int(k): v["patients"] for k, v in manifest["by_level"].items()},
        skipped=dict(manifest["skipped"]["patients"]),
    )
