"""The patients as the synthetic set shows them: their inpatient stays and discharge summaries.

The notes are the generator's own template-written discharge summaries, one per inpatient stay.
They are short (about 630 to 1,050 cl100k tokens each), so on their own every patient would be
Level 1. In *long* mode, drawn per patient with probability ``long_fraction``, each summary is
extended with sections built from the same stay's data: a day-by-day hospital course (the stay's
daily progress notes), every medication given or prescribed, and the full table of the stay's
labs and vital signs. Two or three long summaries land in Level 2 (3,500 to 7,500 tokens); a
patient over 7,500 tokens loses extension sections (last note first) until it fits, so no patient
is excluded by construction (one still over the limit would be excluded and counted).

This module owns the text the model reads (:func:`build_case`) and the seeded streams every other
part draws from (:func:`seeded_rng`); the questions are asked of its :class:`Case`.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from clinieval.context.tokenizers import Tokenizer
from clinieval.ehr.notes import MAX_NOTES, DischargeNote, format_notes, level_for
from clinieval.ehr.synth import DRUGS, LABS
from clinieval.ehr.timeline import Event, Note, Timeline, Visit

__all__ = [
    "SECTIONS",
    "SECTION_COURSE",
    "SECTION_MEDICATIONS",
    "SECTION_RESULTS",
    "Admission",
    "Case",
    "build_case",
    "fmt_time",
    "seeded_rng",
]

SECTION_COURSE = "course"
SECTION_MEDICATIONS = "medications"
SECTION_RESULTS = "results"
# Extension sections in the order they are written, and (reversed) the order trimming drops them.
SECTIONS: tuple[str, ...] = (SECTION_COURSE, SECTION_MEDICATIONS, SECTION_RESULTS)
_TRIM_ORDER: tuple[str, ...] = (SECTION_MEDICATIONS, SECTION_RESULTS, SECTION_COURSE)
_INSERT_BEFORE = "\n\nDISCHARGE MEDICATIONS:"

_INPATIENT = "Inpatient Visit"
_DISCHARGE_SUMMARY = "discharge summary"
_PROGRESS_NOTE = "progress note"

_DRUG_BY_RXNORM = {d.concept.code: d for d in DRUGS.values()}


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


def fmt_time(t: datetime | None) -> str:
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
            lines.append(f"{fmt_time(e.time)} {e.name}{sig}.")
    return "MEDICATIONS GIVEN AND PRESCRIBED:\n" + "\n".join(lines) if lines else ""


def _results_section(adm: Admission) -> str:
    """The stay's labs and vital signs, one line per draw time."""
    by_time: dict[str, list[str]] = {}
    for e in adm.events:
        if e.domain == "measurement" and e.value is not None:
            by_time.setdefault(fmt_time(e.time), []).append(_flagged(e))
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


def seeded_rng(seed: int, subject_id: str, what: str) -> random.Random:
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
    store = seeded_rng(seed, pid, "storetime")
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
    long = seeded_rng(seed, pid, "long").random() < long_fraction
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
