"""The notes of a synthetic patient, written from templates over what happened at each visit.

Progress notes, emergency department notes, admission history and physicals, hospital day notes
and multi-paragraph discharge summaries that cite the patient's diagnoses, drugs and lab values.

Separate from the event simulation in :mod:`.generator` because it is a different job (clinical
prose from facts), but part of the same random stream: :class:`NoteWriter` is a mixin of the
generator's patient, so the template choices draw from that patient's generator in the order
they always have, and the output stays byte-identical for a seed.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from clinieval.ehr.synth.catalog import CONDITIONS, DRUGS, PROCEDURES, ConditionDef
from clinieval.ehr.synth.clinical import CHRONIC_DRUGS, HPI_LINES, PLAN_LINES, VITALS, Reason
from clinieval.ehr.synth.labs import LABS
from clinieval.ehr.timeline import Person, Visit

Measured = tuple[datetime, str, float]
"""A measurement of a stay: when, its LOINC code, its value."""

_BODY_SIZE = ("29463-7", "8302-2", "39156-5")
"""Body weight, height and BMI (LOINC): measured like vitals, left out of some notes' results."""


def _vitals_and_results(
    labs: list[Measured], *, body_size: bool = True
) -> tuple[list[Measured], list[Measured]]:
    """A stay's measurements split into vital signs and the rest (without body size if not ``body_size``)."""
    vitals = [x for x in labs if x[1] in VITALS]
    results = [x for x in labs if x[1] not in VITALS and (body_size or x[1] not in _BODY_SIZE)]
    return vitals, results


@dataclass(slots=True)
class Stay:
    """What happened during one visit, kept to write its note."""

    visit: Visit
    code: str  # OP / ER / IP
    reason: Reason | None = None
    labs: list[Measured] = field(default_factory=list)
    new_conditions: list[str] = field(default_factory=list)
    drugs: list[str] = field(default_factory=list)
    procedures: list[str] = field(default_factory=list)


class NoteWriter:
    """Mixin of the generator's patient: each method renders one note (or part of one).

    The attributes are the patient's, set by the generator; a note reads them and draws template
    choices from ``rng``, the patient's own random stream.
    """

    rng: random.Random
    person: Person
    sex: str
    age0: int
    smoking: str
    chronic: list[str]  # diagnosed, in diagnosis order
    meds: list[str]  # active chronic medication keys
    controlled: dict[str, bool]

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
    def result_line(labs: list[Measured], keys: tuple[str, ...] | None = None) -> str:
        parts = []
        for _, loinc, v in labs:
            if keys is not None and loinc not in keys:
                continue
            lab = LABS[loinc]
            flag = " (high)" if v > lab.ref_high else " (low)" if v < lab.ref_low else ""
            parts.append(f"{lab.short} {lab.fmt(v)} {lab.unit.code}{flag}")
        return "; ".join(parts) + "." if parts else "none."

    @staticmethod
    def vitals_line(labs: list[Measured]) -> str:
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

    def progress_note(self, stay: Stay, j: int) -> str:
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
        _, non_vital = _vitals_and_results(stay.labs, body_size=False)
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

    @staticmethod
    def _acute(stay: Stay) -> tuple[Reason, datetime, ConditionDef]:
        """An acute stay's reason, start and condition (an ED visit or an admission has all three)."""
        r = stay.reason
        assert r is not None and stay.visit.start is not None
        return r, stay.visit.start, CONDITIONS[r.condition]

    def _presentation(self, title: str, start: datetime, r: Reason, pmh: str, onset_days_max: int) -> str:
        """How an acute note opens (ED note, H&P): title and time, chief complaint, the HPI (its
        onset 2 to ``onset_days_max`` days back); ``title`` is the heading line and the time's
        label ("...NOTE\\nArrival")."""
        days = self.rng.randint(2, onset_days_max)
        return (
            f"{title}: {start:%Y-%m-%d %H:%M}\n\n"
            f"CHIEF COMPLAINT: {r.complaint.capitalize()}.\n\n"
            f"HISTORY OF PRESENT ILLNESS:\n{self.who(start)} with {pmh} "
            f"presents with {r.hpi.format(d=days)}.\n\n"
        )

    def _examination(self, r: Reason, vitals: list[Measured]) -> str:
        """An acute note's examination: the vital signs and what the reason for the visit shows."""
        return (
            f"PHYSICAL EXAMINATION:\nVital signs: {self.vitals_line(vitals)}\n"
            f"Examination notable for {r.exam}.\n\n"
        )

    def ed_note(self, stay: Stay) -> str:
        r, start, cd = self._acute(stay)
        vit, res = _vitals_and_results(stay.labs)
        treat = ", ".join(DRUGS[d].concept.name for d in r.treat) or "supportive care"
        procs = ", ".join(PROCEDURES[p].name.lower() for p in r.procedures)
        return (
            self._presentation("EMERGENCY DEPARTMENT NOTE\nArrival", start, r, self.pmh(), 5)
            + self._examination(r, vit)
            + f"RESULTS: {self.result_line(res)}{' Studies: ' + procs + '.' if procs else ''}\n\n"
            f"ED COURSE:\n{r.course} Treated with {treat}.\n\n"
            f"DIAGNOSIS: {cd.snomed.name} ({cd.icd10.code}).\n\n"
            f"DISPOSITION: Discharged home in stable condition.\n"
            f"Prescriptions:\n{self.med_list(list(r.discharge))}\n"
            f"Return precautions were discussed; follow up with primary care within one week."
        )

    def hp_note(self, stay: Stay) -> str:
        r, start, cd = self._acute(stay)
        vit, res = _vitals_and_results(stay.labs, body_size=False)
        return (
            self._presentation("HISTORY AND PHYSICAL\nAdmission", start, r, self.pmh(r.condition), 6)
            + f"HOME MEDICATIONS:\n{self.med_list(self.meds)}\n\n"
            f"SOCIAL HISTORY: {self.smoking}.\n\n"
            + self._examination(r, vit)
            + f"ADMISSION LABORATORY RESULTS: {self.result_line(res)}\n\n"
            f"ASSESSMENT: Admitted for {cd.snomed.name.lower()} ({cd.icd10.code}). "
            f"Plan: {', '.join(DRUGS[d].concept.name for d in r.treat)}; "
            f"{', '.join(PROCEDURES[p].name.lower() for p in r.procedures)}."
        )

    def hospital_progress(self, stay: Stay, day: int, w: float) -> str:
        assert stay.reason is not None
        today = [x for x in stay.labs if x[0].date() == (stay.labs[-1][0]).date()]
        trend = "improving" if w < 0.6 else "slowly improving" if w < 0.9 else "unchanged"
        vit, res = _vitals_and_results(today)
        return (
            f"HOSPITAL DAY {day} PROGRESS NOTE\n"
            f"Subjective: {self.pronoun()} reports symptoms are {trend}.\n"
            f"Objective: {self.vitals_line(vit)} "
            f"Labs: {self.result_line(res)}\n"
            f"Assessment and plan: {CONDITIONS[stay.reason.condition].snomed.name}, {trend}. "
            f"Continue current management."
        )

    def discharge_summary(self, stay: Stay) -> str:
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
