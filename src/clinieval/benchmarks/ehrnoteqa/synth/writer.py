"""The set writer: ``discharge.csv``, ``qa.jsonl`` and ``manifest.json`` in one folder.

:func:`build_synthetic_set` scans the generator's patients in order, keeps those with an inpatient
stay within Level 2, writes their notes and chosen questions, and counts what it skipped.
Everything is a pure function of the arguments: the same call gives byte-identical files, and the
folder is built under a temporary name and renamed into place, so a failure leaves nothing.
"""

from __future__ import annotations

import csv
import json
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinieval.benchmarks.ehrnoteqa.data import NOTES_FILE, QA_FILE
from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS
from clinieval.benchmarks.ehrnoteqa.synth.question_kinds import CATEGORIES, KINDS
from clinieval.benchmarks.ehrnoteqa.synth.questions import SOURCES, Item, LetterDeck, ask_all, select
from clinieval.benchmarks.ehrnoteqa.synth.summaries import Admission, Case, build_case
from clinieval.context.tokenizers import Tokenizer, tokenizer_from_spec
from clinieval.ehr.notes import DISCHARGE_HEADER, MAX_NOTES
from clinieval.ehr.synth import patient
from clinieval.errors import UserError
from clinieval.fsutil import staged_dir

__all__ = [
    "CSV_COLUMNS",
    "MANIFEST_FILE",
    "NOTES_FILE",
    "QA_FILE",
    "SyntheticSet",
    "build_synthetic_set",
    "max_scan",
]

MANIFEST_FILE = "manifest.json"
FORMAT = "clinieval-ehrnoteqa-synthetic/1"

CSV_COLUMNS = DISCHARGE_HEADER
"""MIMIC-IV-Note ``discharge.csv`` header."""


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
            "answer_letters": {x: self.letters[x] for x in OPTION_LETTERS},
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
