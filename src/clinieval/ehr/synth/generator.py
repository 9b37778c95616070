"""The synthetic patient generator: one patient's random story, streamed as Timeline objects.

Each patient is drawn from its own random stream, seeded from ``(seed, index)`` (:func:`patient_rng`),
so patient *i* is the same whether 5 or 100,000 patients are generated. The story: demographics,
chronic conditions planned by age, 3 to 12 visits (outpatient follow-ups, emergency visits,
inpatient stays of several days) with their vitals, labs, diagnoses, prescriptions and
procedures, each visit's notes (written by :mod:`.narrative` from the same stream), and now and
then a death. The vocabulary comes from :mod:`.catalog` and :mod:`.labs`, the rules from
:mod:`.clinical`; turning timelines into OMOP tables is :mod:`.writer`'s job.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta

from clinieval.ehr.synth.catalog import CONDITIONS, DRUGS, PROCEDURES, SMOKING, SMOKING_VALUES
from clinieval.ehr.synth.clinical import (
    BMP,
    CBC,
    CHRONIC_DRUGS,
    CHRONIC_LABS,
    CHRONIC_RISK,
    ER_REASONS,
    IP_REASONS,
    LAB_EFFECTS,
    VITALS,
    Reason,
)
from clinieval.ehr.synth.concepts import ETHNICITIES, GENDERS, RACES, VISIT_TYPES, Concept
from clinieval.ehr.synth.labs import LABS
from clinieval.ehr.synth.narrative import NoteWriter, Stay
from clinieval.ehr.timeline import Event, Note, Person, Timeline, Visit
from clinieval.errors import UserError


def patient_rng(seed: int, index: int) -> random.Random:
    """The random stream of patient ``index`` (0-based) under ``seed``; independent of how many are made."""
    return random.Random(f"clinieval-synth:{seed}:{index}")


class _Patient(NoteWriter):
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
        self.stays: list[Stay] = []

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
        self, stay: Stay, time: datetime, loinc: str, acute: str | None = None, w: float = 1.0
    ) -> float:
        lab = LABS[loinc]
        v = self.value(loinc, acute, w)
        self._add("measurement", time, lab.concept, stay.visit, lab.fmt(v), lab.unit.code)
        stay.labs.append((time, loinc, v))
        return v

    def vitals(self, stay: Stay, time: datetime, acute: str | None = None, w: float = 1.0) -> None:
        for loinc in VITALS:
            self.measure(stay, time, loinc, acute, w)

    def anthropometrics(self, stay: Stay, time: datetime) -> None:
        self.weight = self._clip("29463-7", self.weight + self.rng.gauss(0, 1.2))
        w = self.measure(stay, time, "29463-7")
        h = self.measure(stay, time, "8302-2")
        bmi = self._clip("39156-5", w / (h / 100) ** 2)
        lab = LABS["39156-5"]
        self._add("measurement", time, lab.concept, stay.visit, lab.fmt(bmi), lab.unit.code)
        stay.labs.append((time, "39156-5", bmi))

    def prescribe(self, stay: Stay, time: datetime, key: str) -> None:
        self._add("drug_exposure", time, DRUGS[key].concept, stay.visit)
        stay.drugs.append(key)

    def procedure(self, stay: Stay, time: datetime, key: str) -> None:
        self._add("procedure_occurrence", time, PROCEDURES[key], stay.visit)
        stay.procedures.append(key)

    def diagnose(self, stay: Stay, time: datetime, key: str) -> None:
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

    def _visit(self, vid: str, code: str, start: datetime, end: datetime) -> Stay:
        v = Visit(vid, VISIT_TYPES[code].name, start, end)
        self.timeline.visits.append(v)
        stay = Stay(v, code)
        self.stays.append(stay)
        return stay

    def _note(self, stay: Stay, time: datetime, kind: str, text: str) -> None:
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


def patient(index: int, seed: int = 0) -> Timeline:
    """Patient ``index`` (0-based) of the cohort drawn with ``seed``."""
    return _Patient(index, seed).build()


def generate(n: int, seed: int = 0) -> Iterator[Timeline]:
    """Stream ``n`` synthetic patients; person ids are "1" .. str(n)."""
    if n < 0:
        raise UserError(f"the number of patients must be 0 or more, not {n}")
    for i in range(n):
        yield patient(i, seed)
