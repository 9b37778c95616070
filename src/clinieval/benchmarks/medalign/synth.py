"""A synthetic MedAlign-shaped set whose gold answers are computed from the record itself.

MedAlign (spec: ``shared/spec/medalign.md``) pairs clinician instructions with long XML EHRs;
the real data is credentialed, and free-text gold cannot be checked mechanically. This module
writes a set of the same shape over the project's synthetic patients
(:mod:`clinieval.ehr.synth`) in which every instruction asks for facts that structured data
decides: the latest value of a lab, the medications of the last clinic visit, a count of
emergency visits, the date a chronic condition was first recorded, the latest blood pressure,
whether a lab went up or down, the smoking status. Each gold response is a sentence holding
short *answer keys* (values, dates, drug ingredients, a direction word) that
:mod:`clinieval.scoring.keyfacts` looks for in a model's answer.

Facts are computed from the XML as written and read back (:func:`read_xml`), never from the
generator's internals, so a key is exactly what a model reading the record can see. As in the
paper, "most recent" is relative to the time anchor: the latest timestamp in the record. Dates
in keys use the record's ``MM/DD/YYYY`` so a model copying from it can match.

The output folder (``ehrs/<person_id>.xml`` and ``instructions.csv``) loads with
:func:`clinieval.benchmarks.medalign.data.load_generic`. It is built under a temporary name beside the
target and renamed into place, so a failure never leaves half a set. Everything is a pure
function of ``(patients, seed, per_patient)``: the same arguments give byte-identical files.
"""

from __future__ import annotations

import csv
import json
import random
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from clinieval.benchmarks.medalign.data import EHR_FOLDER, INSTRUCTIONS_FILE
from clinieval.ehr.medalign_xml import format_time, read_xml, write_xml
from clinieval.ehr.synth.catalog import CONDITIONS, SMOKING
from clinieval.ehr.synth.generator import generate
from clinieval.ehr.synth.labs import LABS
from clinieval.ehr.timeline import Event, Timeline, Visit
from clinieval.errors import UserError
from clinieval.fsutil import staged_dir
from clinieval.types import Sample

__all__ = [
    "COLUMNS",
    "KINDS",
    "Kind",
    "Question",
    "SyntheticSet",
    "build_synthetic_set",
    "drug_ingredients",
    "key_date",
    "questions_for",
    "time_anchor",
]

COLUMNS: tuple[str, ...] = (
    "instruction_id",
    "question",
    "person_id",
    "filename",
    "gold_response",
    "answer_keys",
    "category",
    "subcategory",
    "kind",
    "evidence",
    "time_anchor",
)
"""``instructions.csv`` header; the first four plus ``gold_response`` are what ``load_generic`` reads."""

_LOINC_SYSTOLIC = "8480-6"
_LOINC_DIASTOLIC = "8462-4"
_LOINC_CREATININE = "2160-0"
_LOINC_SMOKING = "72166-2"
_EMERGENCY_VISIT = "Emergency Room Visit"
_OUTPATIENT_VISIT = "Outpatient Visit"
_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")

# Labs (not vital signs) the questions may ask about, by LOINC code, with the name a clinician uses.
_LAB_NAMES: dict[str, str] = {
    code: lab.short for code, lab in LABS.items() if lab.concept.concept_class == "Lab Test"
}
# The everyday name a clinician writes for each chronic condition of the generator.
_CHRONIC_PHRASES: dict[str, str] = {
    "diabetes": "type 2 diabetes",
    "hypertension": "hypertension",
    "hyperlipidemia": "hyperlipidemia",
    "heart_failure": "heart failure",
    "atrial_fibrillation": "atrial fibrillation",
    "cad": "coronary artery disease",
    "asthma": "asthma",
    "ckd": "chronic kidney disease",
    "depression": "depression",
}
# Chronic conditions by SNOMED code (the code the records carry), with that name.
_CHRONIC: dict[str, str] = {
    c.snomed.code: _CHRONIC_PHRASES.get(c.key, c.snomed.name.lower())
    for c in CONDITIONS.values()
    if c.chronic
}
# Words of RxNorm clinical drug names that are salts or forms, not the ingredient a clinician names.
_SALT_WORDS = frozenset(
    [
        "hydrochloride",
        "hcl",
        "sodium",
        "potassium",
        "calcium",
        "magnesium",
        "propionate",
        "sulfate",
        "tartrate",
        "succinate",
        "besylate",
        "maleate",
        "citrate",
        "acetate",
        "mesylate",
        "hyclate",
        "bromide",
        "chloride",
        "monohydrate",
        "macrocrystals",
    ]
)
_SMOKING_KEYS = ("never", "former", "current")


# ------------------------------------------------------------------------------------ the record


def key_date(t: datetime) -> str:
    """A date as the XML writes it (``MM/DD/YYYY``), so a model copying from the record matches."""
    return f"{t.month:02d}/{t.day:02d}/{t.year:04d}"


def time_anchor(tl: Timeline) -> datetime | None:
    """The latest timestamp in the record: the paper's "now" for every "most recent" question."""
    times = [e.time for e in tl.events if e.time is not None]
    times += [n.time for n in tl.notes if n.time is not None]
    times += [v.start for v in tl.visits if v.start is not None]
    return max(times, default=None)


def _coded(tl: Timeline, domain: str, vocabulary: str, code: str) -> list[Event]:
    """Dated events of one concept in time order (record order among equal times)."""
    hits = [
        e
        for e in tl.events
        if e.domain == domain and e.vocabulary == vocabulary and e.code == code and e.time is not None
    ]
    return sorted(hits, key=lambda e: e.time or datetime.min)


def _results(tl: Timeline, loinc: str) -> list[Event]:
    """Numeric results of one LOINC measurement in time order, one per timestamp.

    A timestamp holding two different values is dropped: no single answer would be right.
    """
    by_time: dict[datetime, list[Event]] = {}
    for e in _coded(tl, "measurement", "LOINC", loinc):
        if e.value is not None and _NUMBER.match(e.value) and e.time is not None:
            by_time.setdefault(e.time, []).append(e)
    return [es[0] for _, es in sorted(by_time.items()) if len({e.value for e in es}) == 1]


def _evidence(e: Event) -> str:
    when = "undated" if e.time is None else format_time(e.time)
    return f"{e.domain} {when}: {e.code_line()}"


def _quantity(e: Event) -> str:
    return f"{e.value} {e.unit}" if e.unit else str(e.value)


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} and {words[-1]}"


def drug_ingredients(name: str) -> list[str]:
    """The ingredient words of an RxNorm clinical drug name, the way a clinician names the drug.

    "24 HR metformin hydrochloride 500 MG Extended Release Oral Tablet" gives ["metformin"],
    "amoxicillin 250 MG / clavulanate 125 MG Oral Tablet" gives ["amoxicillin", "clavulanate"]:
    in each ``/``-separated part, the first run of lower-case words (RxNorm writes ingredients in
    lower case and quantities, units and dose forms otherwise), less salt words. A name with no
    such run is kept whole, lower-cased.
    """
    found: list[str] = []
    for part in name.split(" / "):
        words: list[str] = []
        for token in part.split():
            word = token.strip(",;")
            if re.fullmatch(r"[a-z][a-z-]*", word):
                words.append(word)
            elif words:
                break
        kept = [w for w in words if w not in _SALT_WORDS]
        if kept and " ".join(kept) not in found:
            found.append(" ".join(kept))
    return found or [name.strip().lower()]


# ------------------------------------------------------------------------------ question kinds


@dataclass(frozen=True, slots=True)
class Question:
    """One instruction about one patient, with its gold sentence and the keys the sentence holds.

    ``topic`` names the fact asked about (``"lab_latest:4548-4"``): two questions on one topic
    for one patient would be duplicates whatever their wording.
    """

    topic: str
    question: str
    gold: str
    keys: tuple[str, ...]
    evidence: str


Ask = Callable[[Timeline, random.Random], Question | None]


@dataclass(frozen=True, slots=True)
class Kind:
    """A question kind: its MedAlign taxonomy place and the function that asks it.

    ``whole_record`` says whether the answer can lie anywhere in the record (so truncation that
    keeps only the recent end may lose it) rather than near its end. ``draws`` is how many
    questions of this kind a patient may get (distinct topics only).
    """

    name: str
    category: str
    subcategory: str
    ask: Ask
    whole_record: bool
    draws: int = 1


def _lab_latest(tl: Timeline, rng: random.Random) -> Question | None:
    """The latest result of one lab the patient has, and its date."""
    have = sorted(code for code in _LAB_NAMES if _results(tl, code))
    if not have:
        return None
    code = rng.choice(have)
    last = _results(tl, code)[-1]
    assert last.time is not None and last.value is not None
    lab, when = _LAB_NAMES[code], key_date(last.time)
    question = rng.choice(
        (
            f"What was the patient's most recent {lab}, and when was it measured?",
            f"Find the latest {lab} result in the chart and give the date it was drawn.",
            f"When was the patient's {lab} last checked, and what was the result?",
            f"Report the most recent {lab} value with its date.",
        )
    )
    gold = f"The most recent {lab} was {_quantity(last)} on {when}."
    return Question(f"lab_latest:{code}", question, gold, (last.value, when), _evidence(last))


def _lab_trend(tl: Timeline, rng: random.Random) -> Question | None:
    """Whether a lab's latest result is above or below the one before (creatinine when it can)."""
    moved = sorted(
        code
        for code in _LAB_NAMES
        if len(rs := _results(tl, code)) >= 2 and float(rs[-1].value or 0) != float(rs[-2].value or 0)
    )
    if not moved:
        return None
    code = _LOINC_CREATININE if _LOINC_CREATININE in moved else rng.choice(moved)
    before, last = _results(tl, code)[-2:]
    assert before.time is not None and last.time is not None
    direction = "increased" if float(last.value or 0) > float(before.value or 0) else "decreased"
    lab = _LAB_NAMES[code]
    question = rng.choice(
        (
            f"Has the patient's {lab} increased or decreased since the previous measurement?",
            f"Compared with the prior result, has the most recent {lab} increased or decreased?",
            f"Looking at the last two {lab} results, has it increased or decreased?",
        )
    )
    gold = (
        f"The {lab} {direction} from {_quantity(before)} on {key_date(before.time)} "
        f"to {_quantity(last)} on {key_date(last.time)}."
    )
    evidence = f"{_evidence(before)}; {_evidence(last)}"
    return Question(f"lab_trend:{code}", question, gold, (direction,), evidence)


def _last_visit(tl: Timeline, visit_type: str) -> Visit | None:
    dated = [v for v in tl.visits if v.type == visit_type and v.start is not None]
    return max(dated, key=lambda v: v.start or datetime.min, default=None)


def _clinic_medications(tl: Timeline, rng: random.Random) -> Question | None:
    """The drugs prescribed at the last outpatient visit, named by ingredient.

    The last *outpatient* visit, not the last visit: a clinic visit reconciles the standing
    medication list, while an emergency or inpatient stay mixes in one-off treatments.
    """
    visit = _last_visit(tl, _OUTPATIENT_VISIT)
    if visit is None or visit.start is None:
        return None
    drugs = [e for e in tl.events if e.domain == "drug_exposure" and e.visit_id == visit.visit_id]
    names = list(dict.fromkeys(w for e in drugs for w in drug_ingredients(e.name)))
    if not names:
        return None
    question = rng.choice(
        (
            "What medications was the patient prescribed at the most recent outpatient visit?",
            "List the medications documented at the patient's last clinic visit.",
            "Which medications was the patient taking as of the most recent outpatient appointment?",
        )
    )
    when = key_date(visit.start)
    gold = f"At the most recent outpatient visit, on {when}, the patient was prescribed {_join(names)}."
    evidence = "; ".join(_evidence(e) for e in drugs)
    return Question("clinic_medications", question, gold, tuple(names), evidence)


def _emergency_visits(tl: Timeline, rng: random.Random) -> Question | None:
    """How many emergency visits the record holds (asked only when there is at least one).

    The key is the count in digits; a patient without emergency visits is not asked, because a
    correct answer there ("none") has no digits to match.
    """
    visits = sorted(
        (v for v in tl.visits if v.type == _EMERGENCY_VISIT and v.start is not None),
        key=lambda v: v.start or datetime.min,
    )
    if not visits:
        return None
    n = str(len(visits))
    dates = [key_date(v.start) for v in visits if v.start is not None]
    question = rng.choice(
        (
            "How many emergency department visits does the patient have in the record?",
            "How many times has the patient been seen in the emergency department?",
            "Count the patient's emergency department visits documented in the chart.",
        )
    )
    noun = "visit" if len(visits) == 1 else "visits"
    gold = f"The record documents {n} emergency department {noun} ({', '.join(dates)})."
    evidence = "; ".join(f"visit {format_time(v.start)}: {v.type}" for v in visits if v.start is not None)
    return Question("emergency_visits", question, gold, (n,), evidence)


def _first_diagnosis(tl: Timeline, rng: random.Random) -> Question | None:
    """The date one of the patient's chronic conditions was first recorded."""
    have = sorted(code for code in _CHRONIC if _coded(tl, "condition_occurrence", "SNOMED", code))
    if not have:
        return None
    code = rng.choice(have)
    first = _coded(tl, "condition_occurrence", "SNOMED", code)[0]
    assert first.time is not None
    phrase, when = _CHRONIC[code], key_date(first.time)
    question = rng.choice(
        (
            f"When was the patient first diagnosed with {phrase}?",
            f"What is the date of the earliest documented diagnosis of {phrase}?",
            f"Since when has the patient had {phrase}? Give the date it was first recorded.",
        )
    )
    gold = f"The first recorded diagnosis of {phrase} ({first.name}) is dated {when}."
    return Question(f"first_diagnosis:{code}", question, gold, (when,), _evidence(first))


def _latest_blood_pressure(tl: Timeline, rng: random.Random) -> Question | None:
    """The latest systolic/diastolic pair taken at the same time, and its date."""
    systolic = {e.time: e for e in _results(tl, _LOINC_SYSTOLIC)}
    pairs = [(d.time, systolic[d.time], d) for d in _results(tl, _LOINC_DIASTOLIC) if d.time in systolic]
    if not pairs:
        return None
    t, sys_e, dia_e = max(pairs, key=lambda p: p[0] or datetime.min)
    assert t is not None
    bp, when = f"{sys_e.value}/{dia_e.value}", key_date(t)
    question = rng.choice(
        (
            "What was the patient's last recorded blood pressure, and on what date?",
            "Give the most recent blood pressure reading and the date it was taken.",
            "What was the blood pressure at the latest measurement in the chart, and when was it measured?",
        )
    )
    unit = f" {sys_e.unit}" if sys_e.unit else ""
    gold = f"The most recent blood pressure was {bp}{unit}, recorded on {when}."
    evidence = f"{_evidence(sys_e)}; {_evidence(dia_e)}"
    return Question("latest_blood_pressure", question, gold, (bp, when), evidence)


def _smoking_status(tl: Timeline, rng: random.Random) -> Question | None:
    """The latest tobacco smoking status, keyed by its first word (never / former / current)."""
    observed = _coded(tl, "observation", "LOINC", _LOINC_SMOKING)
    if not observed:
        return None
    last = observed[-1]
    # The writer puts a text value after the concept name and the reader cannot split it back off.
    status = (last.value or last.name.removeprefix(SMOKING.name)).strip()
    key = status.split()[0].lower() if status else ""
    if key not in _SMOKING_KEYS:
        return None
    assert last.time is not None
    question = rng.choice(
        (
            "What is the patient's smoking status?",
            "Does the patient smoke? Summarize the documented tobacco use.",
            "What tobacco use history is documented for this patient?",
        )
    )
    gold = f"The patient is documented as a {key} smoker ({status}, recorded on {key_date(last.time)})."
    return Question("smoking_status", question, gold, (key,), _evidence(last))


def _age(tl: Timeline, rng: random.Random) -> Question | None:
    """The patient's age in whole years at the time anchor (every ``<person>`` block shows it)."""
    anchor = time_anchor(tl)
    age = None if anchor is None else tl.person.age_at(anchor)
    if anchor is None or age is None:
        return None
    years = str(age[1])
    question = rng.choice(
        (
            "How old is the patient as of the most recent entry in the record?",
            "What is the patient's age at the time of the latest entry in the chart?",
        )
    )
    gold = f"As of the latest entry in the record ({key_date(anchor)}), the patient is {years} years old."
    birth = "unknown" if tl.person.birth is None else key_date(tl.person.birth)
    evidence = f"person: Birth {birth}; anchor {format_time(anchor)}"
    return Question("age", question, gold, (years,), evidence)


_IR = "information retrieval"
KINDS: tuple[Kind, ...] = (
    Kind("lab_latest", _IR, "retrieve laboratory studies", _lab_latest, whole_record=False, draws=2),
    Kind("lab_trend", _IR, "retrieve laboratory studies", _lab_trend, whole_record=False),
    Kind(
        "clinic_medications", _IR, "retrieve medication information", _clinic_medications, whole_record=False
    ),
    Kind("emergency_visits", _IR, "retrieve appointment information", _emergency_visits, whole_record=True),
    Kind("first_diagnosis", _IR, "retrieve medical history", _first_diagnosis, whole_record=True),
    Kind("latest_blood_pressure", _IR, "retrieve vitals", _latest_blood_pressure, whole_record=False),
    Kind("smoking_status", _IR, "retrieve social history", _smoking_status, whole_record=True),
    Kind("age", _IR, "retrieve demographics", _age, whole_record=False),
)
"""Every question kind, in the order a patient's instructions are listed."""


def _rng(seed: int, person_id: str, kind: str) -> random.Random:
    """One stream per (seed, patient, kind): adding a kind never changes another kind's questions."""
    return random.Random(f"clinieval-medalign-synth:{seed}:{person_id}:{kind}")


def questions_for(
    tl: Timeline, *, seed: int = 0, per_patient: int | None = None
) -> list[tuple[Kind, Question]]:
    """The questions one patient gets: every kind that applies, one per topic.

    With ``per_patient``, at most that many, chosen so distinct kinds come before second
    questions of a kind; the choice is seeded, and the kept questions stay in :data:`KINDS` order.
    """
    person_id = tl.person.person_id
    asked: list[tuple[Kind, Question]] = []
    topics: set[str] = set()
    for kind in KINDS:
        rng = _rng(seed, person_id, kind.name)
        for _ in range(kind.draws):
            q = kind.ask(tl, rng)
            if q is not None and q.topic not in topics:
                topics.add(q.topic)
                asked.append((kind, q))
    if per_patient is None or len(asked) <= per_patient:
        return asked
    order = list(range(len(asked)))
    _rng(seed, person_id, "select").shuffle(order)
    firsts: dict[str, int] = {}
    for i in order:
        firsts.setdefault(asked[i][0].name, i)
    preferred = [*firsts.values(), *(i for i in order if i not in firsts.values())]
    return [asked[i] for i in sorted(preferred[:per_patient])]


# ------------------------------------------------------------------------------------ the set


@dataclass(frozen=True, slots=True)
class SyntheticSet:
    """Where a built set lies and what it holds."""

    root: Path
    instructions_csv: Path
    ehr_dir: Path
    patients: int
    instructions: int
    by_kind: dict[str, int]

    def load(self) -> list[Sample]:
        """The set as samples, read the way a user's own set is (``load_generic``)."""
        from clinieval.benchmarks.medalign.data import load_generic

        return load_generic(self.instructions_csv, self.ehr_dir)


def _check_args(patients: int, per_patient: int | None) -> None:
    if isinstance(patients, bool) or not isinstance(patients, int) or patients < 1:
        raise UserError(f"the number of patients must be a whole number of at least 1, not {patients!r}")
    if per_patient is not None and (
        isinstance(per_patient, bool) or not isinstance(per_patient, int) or per_patient < 1
    ):
        raise UserError(f"per_patient must be a whole number of at least 1 (or None), not {per_patient!r}")


def _rows(tl: Timeline, filename: str, seed: int, per_patient: int | None) -> Iterable[list[str]]:
    anchor = time_anchor(tl)
    pid = tl.person.person_id
    for n, (kind, q) in enumerate(questions_for(tl, seed=seed, per_patient=per_patient), 1):
        missing = [k for k in q.keys if k not in q.gold]
        assert not missing, f"gold of {kind.name} for patient {pid} lacks keys {missing}"
        yield [
            f"{pid}-{n:02d}",
            q.question,
            pid,
            filename,
            q.gold,
            json.dumps(list(q.keys), ensure_ascii=False),
            kind.category,
            kind.subcategory,
            kind.name,
            q.evidence,
            "" if anchor is None else format_time(anchor),
        ]


def _write_set(tmp: Path, patients: int, seed: int, per_patient: int | None) -> tuple[int, Counter[str]]:
    """Write patients and instructions into ``tmp``; the facts come from each file read back."""
    ehr_dir = tmp / EHR_FOLDER
    ehr_dir.mkdir()
    kinds: Counter[str] = Counter()
    with (tmp / INSTRUCTIONS_FILE).open("w", encoding="utf-8", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(COLUMNS)
        for tl in generate(patients, seed):
            filename = f"{tl.person.person_id}.xml"
            written = read_xml(write_xml(tl, ehr_dir / filename))
            for row in _rows(written, filename, seed, per_patient):
                writer.writerow(row)
                kinds[row[COLUMNS.index("kind")]] += 1
    return sum(kinds.values()), kinds


def _check_target(out: Path, overwrite: bool) -> None:
    """Refuse to replace anything but an earlier synthetic set, and that only when asked."""
    if not out.exists():
        return
    if not overwrite:
        raise UserError(f"{out} already exists; choose another folder or pass overwrite=True")
    if not (out.is_dir() and (out / INSTRUCTIONS_FILE).is_file() and (out / EHR_FOLDER).is_dir()):
        raise UserError(
            f"{out} exists and is not a synthetic MedAlign set (no {INSTRUCTIONS_FILE} and "
            f"{EHR_FOLDER}/); refusing to replace it"
        )


def build_synthetic_set(
    out_dir: Path,
    *,
    patients: int = 20,
    seed: int = 0,
    per_patient: int | None = None,
    overwrite: bool = False,
) -> SyntheticSet:
    """Write ``patients`` synthetic patients and their instructions to ``out_dir``.

    ``out_dir/ehrs/<person_id>.xml`` holds each record in the paper's XML dialect and
    ``out_dir/instructions.csv`` the instructions (columns :data:`COLUMNS`). ``per_patient``
    caps the instructions per patient (default: every kind that applies). The folder appears
    complete or not at all; an existing one is replaced only with ``overwrite=True`` and only if
    it is an earlier synthetic set.
    """
    _check_args(patients, per_patient)
    out = Path(out_dir)
    _check_target(out, overwrite)
    with staged_dir(out, "the synthetic MedAlign folder") as tmp:
        count, kinds = _write_set(tmp, patients, seed, per_patient)
    return SyntheticSet(
        root=out,
        instructions_csv=out / INSTRUCTIONS_FILE,
        ehr_dir=out / EHR_FOLDER,
        patients=patients,
        instructions=count,
        by_kind=dict(sorted(kinds.items())),
    )
