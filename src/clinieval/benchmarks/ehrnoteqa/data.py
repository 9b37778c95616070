"""EHRNoteQA: five-option questions about one patient, answered from 1-3 discharge summaries.

Spec: ``shared/spec/ehrnoteqa.md``. Two inputs are read:

* the PhysioNet release: the QA jsonl (``patient_id``, ``num_notes``, ``question``,
  ``choice_A`` .. ``choice_E``, ``answer``) plus the user's own MIMIC-IV-Note ``discharge.csv``
  or ``.csv.gz``, preprocessed exactly as the public code does (:mod:`clinieval.ehr.notes`: the
  first three notes by chart time, whitespace normalised, a header per note);
* a generic jsonl with the notes inline, for any other source.

Each question becomes one :class:`~clinieval.types.Sample` whose ``context`` is the ``{notes}``
block of the prompts, ``choices`` the five option texts and ``metadata`` the answer letter, the
level, the number of notes and the category. Levels are assigned by the total token count of
the patient's notes with a configurable tokenizer (Level 1 up to 3,500, Level 2 up to 7,500);
longer patients are excluded and counted, as in the paper.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS
from clinieval.datasets import json_objects, require
from clinieval.ehr.notes import (
    DischargeNote,
    format_notes,
    level_for,
    normalize_whitespace,
    read_discharge_notes,
    select_notes,
)
from clinieval.errors import UserError
from clinieval.types import Sample

CHOICE_FIELDS = tuple(f"choice_{letter}" for letter in OPTION_LETTERS)

DEFAULT_LEVEL_TOKENIZER = "tiktoken:cl100k_base"
"""Levels count tokens with cl100k by default: it ships with clinieval, so levels are the same on
every machine whatever model is evaluated. ``--level-tokenizer`` picks another (a model's own)."""

CATEGORIES = ("Treatment", "Assessment", "Problem", "Etiology", "Sign/Symptom", "Vitals", "Others")
"""The paper's question categories (its 100-question sample); only informative here."""


@dataclass(slots=True)
class LoadedSet:
    """The samples kept, and what was left out and why (counted, never silent)."""

    samples: list[Sample]
    excluded: Counter[str] = field(default_factory=Counter)
    warnings: list[str] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    tokenizer: str = DEFAULT_LEVEL_TOKENIZER

    @property
    def levels(self) -> Counter[int]:
        return Counter(int(s.metadata["level"]) for s in self.samples)

    def describe(self) -> str:
        """One line: how many questions per level, and how many were excluded for what."""
        lv = self.levels
        parts = [f"{len(self.samples)} questions (level 1: {lv.get(1, 0)}, level 2: {lv.get(2, 0)})"]
        if self.excluded:
            parts.append("excluded: " + ", ".join(f"{k} {v}" for k, v in sorted(self.excluded.items())))
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class _Question:
    """One QA line, checked."""

    id: str
    question: str
    choices: tuple[str, ...]
    answer: str  # letter
    category: str | None
    extra: dict[str, Any]


def _answer_letter(value: object, choices: Sequence[str], where: str) -> str:
    """The answer as a letter A-E; an answer given as an option's exact text is accepted too."""
    if isinstance(value, str):
        text = value.strip()
        letter = text.rstrip(".):").lstrip("(").upper()
        if len(letter) == 1 and letter in OPTION_LETTERS[: len(choices)]:
            return letter
        matches = [OPTION_LETTERS[i] for i, c in enumerate(choices) if c.strip() == text]
        if len(matches) == 1:
            return matches[0]
    raise UserError(f"{where}: field 'answer' should be a letter A-E, got {str(value)[:40]!r}")


def _choices(item: dict[str, Any], where: str) -> tuple[str, ...]:
    """``choice_A`` .. ``choice_E`` (the release) or a ``choices`` list of five (the generic form)."""
    if "choices" in item and not any(f in item for f in CHOICE_FIELDS):
        raw = require(item, "choices", where, list)
        if len(raw) != 5:
            raise UserError(f"{where}: field 'choices' should hold 5 options, got {len(raw)}")
        values = [str(c) for c in raw]
    else:
        values = [str(require(item, f, where, (str, int, float))) for f in CHOICE_FIELDS]
    blank = [OPTION_LETTERS[i] for i, v in enumerate(values) if not v.strip()]
    if blank:
        raise UserError(f"{where}: option {blank[0]} is empty")
    return tuple(v.strip() for v in values)


def _question(item: dict[str, Any], where: str, fallback_id: str) -> _Question:
    question = str(require(item, "question", where, str)).strip()
    if not question:
        raise UserError(f"{where}: field 'question' is empty")
    choices = _choices(item, where)
    if "answer" not in item:
        raise UserError(f"{where}: missing field 'answer'")
    answer = _answer_letter(item["answer"], choices, where)
    qid = str(item.get("id", item.get("question_id", fallback_id)))
    category = item.get("category")
    known = {"id", "question_id", "question", "answer", "category", "choices", "notes", *CHOICE_FIELDS}
    extra = {k: v for k, v in item.items() if k not in known}
    return _Question(qid, question, choices, answer, None if category is None else str(category), extra)


def _sample(q: _Question, notes: str, num_notes: int, tokens: int, level: int, tokenizer: str) -> Sample:
    index = OPTION_LETTERS.index(q.answer)
    metadata: dict[str, Any] = {
        "answer": q.answer,
        "num_notes": num_notes,
        "note_tokens": tokens,
        "level": level,
        "level_tokenizer": tokenizer,
        "category": q.category,
        **q.extra,
    }
    return Sample(
        id=q.id,
        input=q.question,
        context=notes,
        choices=q.choices,
        target=q.choices[index],
        metadata=metadata,
    )


def _count(tokenizer: str) -> Any:
    from clinieval.context.tokenizers import tokenizer_from_spec

    return tokenizer_from_spec(tokenizer).count


def _check_levels(levels: Collection[int] | None) -> frozenset[int]:
    wanted = frozenset(levels or (1, 2))
    bad = sorted(wanted - {1, 2})
    if bad:
        raise UserError(f"level {bad[0]} does not exist; EHRNoteQA has levels 1 and 2")
    return wanted


def _unique_ids(samples: list[Sample], path: Path) -> None:
    seen = Counter(s.id for s in samples)
    dup = next((k for k, n in seen.items() if n > 1), None)
    if dup is not None:
        raise UserError(f"{path}: question id {dup!r} appears {seen[dup]} times; ids must be unique")


def _place(
    out: LoadedSet, q: _Question, notes: str, num_notes: int, count: Any, wanted: frozenset[int]
) -> None:
    """Level the question's patient and keep it, or count why it is left out."""
    tokens = int(count(notes))
    level = level_for(tokens)
    if level is None:
        out.excluded["longer_than_level_2"] += 1
    elif level not in wanted:
        out.excluded[f"level_{level}_not_selected"] += 1
    else:
        out.samples.append(_sample(q, notes, num_notes, tokens, level, out.tokenizer))


QA_FILE = "qa.jsonl"
NOTES_FILE = "discharge.csv"
"""A set as one folder: the QA jsonl beside the notes (``.csv`` or ``.csv.gz``), the layout
``clinieval ehrnoteqa demo`` writes and ``clinieval run ehrnoteqa --data FOLDER`` reads."""


def load_folder(
    folder: Path, *, tokenizer: str = DEFAULT_LEVEL_TOKENIZER, levels: Collection[int] | None = None
) -> LoadedSet:
    """:func:`load_physionet` over a folder holding :data:`QA_FILE` and :data:`NOTES_FILE`."""
    notes = next((n for n in (folder / NOTES_FILE, folder / f"{NOTES_FILE}.gz") if n.is_file()), None)
    if notes is None or not (folder / QA_FILE).is_file():
        raise UserError(f"{folder}: expected {QA_FILE} and {NOTES_FILE} (or {NOTES_FILE}.gz) in it")
    return load_physionet(folder / QA_FILE, notes, tokenizer=tokenizer, levels=levels)


def load_physionet(
    qa: Path,
    notes: Path,
    *,
    tokenizer: str = DEFAULT_LEVEL_TOKENIZER,
    levels: Collection[int] | None = None,
) -> LoadedSet:
    """The PhysioNet QA jsonl over MIMIC-IV-Note discharge notes, preprocessed as the paper did.

    A question whose patient has no discharge note is an error (the two files do not belong
    together); a ``num_notes`` that differs from the notes found is kept and counted as a
    warning (a different MIMIC-IV-Note version changes what the model sees).
    """
    if not qa.is_file():
        raise UserError(f"{qa}: QA file not found (the EHRNoteQA jsonl from PhysioNet)")
    wanted = _check_levels(levels)
    rows = [(where, item) for where, item in json_objects(qa)]
    if not rows:
        raise UserError(f"{qa}: no questions")
    patients = {str(require(item, "patient_id", where, (str, int))) for where, item in rows}
    by_patient = read_discharge_notes(notes, patients)
    out = LoadedSet([], files=[qa, notes], tokenizer=tokenizer)
    count = _count(tokenizer)
    blocks: dict[str, tuple[str, int]] = {}
    mismatched = 0
    for n, (where, item) in enumerate(rows, 1):
        pid = str(item["patient_id"])
        q = _question(item, where, fallback_id=f"{pid}-{n}")
        if pid not in by_patient:
            raise UserError(f"{where}: patient {pid} has no note in {notes}; is it the right discharge file?")
        if pid not in blocks:
            kept = select_notes(by_patient[pid])
            blocks[pid] = (format_notes(kept), len(kept))
        block, num = blocks[pid]
        given = item.get("num_notes")
        if given is not None and str(given) != str(num):
            mismatched += 1
        _place(out, q, block, num, count, wanted)
    if mismatched:
        out.warnings.append(
            f"{mismatched} question(s) give a num_notes that differs from the notes found in {notes.name}; "
            "a different MIMIC-IV-Note version changes what the model reads"
        )
    _unique_ids(out.samples, qa)
    return out


def _inline_note(value: object, where: str, pid: str, i: int) -> DischargeNote | str:
    """A note given inline: plain text, or an object with ``text`` and optional ids and chart time."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        text = require(value, "text", f"{where} note {i}", str)
        return DischargeNote(
            subject_id=str(value.get("subject_id", pid)),
            hadm_id=str(value.get("hadm_id", "")),
            charttime=str(value.get("charttime", "")),
            text=text,
        )
    raise UserError(f"{where}: note {i} should be text or an object with 'text', got {type(value).__name__}")


def inline_notes_block(notes: list[object], where: str, pid: str) -> tuple[str, int]:
    """The ``{notes}`` block of inline notes and how many it holds.

    Objects carrying a ``charttime`` go through the release's preprocessing (order, cap of three,
    header); plain strings are kept in the order given, whitespace-normalised, without a header
    (there are no ids to print), and capped at three as well.
    """
    if not notes:
        raise UserError(f"{where}: field 'notes' is empty")
    parsed = [_inline_note(v, where, pid, i) for i, v in enumerate(notes, 1)]
    if all(isinstance(p, DischargeNote) for p in parsed):
        structured = [p for p in parsed if isinstance(p, DischargeNote)]
        kept = select_notes(structured)
        return format_notes(kept), len(kept)
    if any(isinstance(p, DischargeNote) for p in parsed):
        raise UserError(f"{where}: field 'notes' mixes plain text and note objects; use one form")
    texts = [normalize_whitespace(str(p)) for p in parsed][:3]
    block = "\n\n".join(f"[note {i} start]\n{t}\n[note {i} end]" for i, t in enumerate(texts, 1))
    return block, len(texts)


def load_inline(
    path: Path, *, tokenizer: str = DEFAULT_LEVEL_TOKENIZER, levels: Collection[int] | None = None
) -> LoadedSet:
    """A jsonl with the notes inline: ``question``, ``choice_A``..``choice_E`` (or ``choices``),
    ``answer``, ``notes`` (a list), and optional ``id``, ``patient_id`` and ``category``."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    wanted = _check_levels(levels)
    out = LoadedSet([], files=[path], tokenizer=tokenizer)
    count = _count(tokenizer)
    for n, (where, item) in enumerate(json_objects(path), 1):
        pid = str(item.get("patient_id", ""))
        q = _question(item, where, fallback_id=str(n))
        block, num = inline_notes_block(require(item, "notes", where, list), where, pid)
        _place(out, q, block, num, count, wanted)
    if not out.samples and not out.excluded:
        raise UserError(f"{path}: no questions")
    _unique_ids(out.samples, path)
    return out
