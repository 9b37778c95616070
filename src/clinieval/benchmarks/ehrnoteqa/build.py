"""Build an EHRNoteQA-style dataset: two-step question generation, checks, clinician review.

EHRNoteQA (Kweon et al., NeurIPS 2024 D&B) wrote its 1,000 draft questions with an LLM in two
steps, then had clinicians review every one. This module reproduces that pipeline over the user's
own MIMIC-IV-Note ``discharge.csv(.gz)``:

1. **Question** (:data:`QUESTION_PROMPT`, temperature 1): the paper's instruction, a blank line,
   then the patient's notes exactly as the benchmark formats them
   (:func:`clinieval.ehr.notes.format_notes`: first three by chart time, whitespace normalised,
   a header per note, ``[note i start]`` markers). The reply is ``- Question : … - Answer : … -
   Reason : …`` (:func:`parse_question_reply`).
2. **Choices** (:data:`CHOICES_PROMPT`): the paper's instruction, a blank line, the same notes, a
   blank line, then the step-1 result under ``Doctor's question :`` (question, answer and reason,
   one labelled line each; see :func:`choices_messages`). The reply is five options, the correct
   letter and a rationale (:func:`parse_choices_reply`).
3. **Checks** (:func:`check_item`), each recorded by name and never used to drop an item:
   ``five_options`` (exactly A-E, none empty), ``distinct_options`` (no two options equal after
   case, whitespace and punctuation are normalised), ``valid_answer`` (the correct letter is one of
   the options), ``answer_not_longest`` (the paper's rule: the correct option is not strictly the
   longest) and ``question_unchanged`` (step 2 kept the step-1 question "without modification").
4. **Review**: ``review.csv`` lists every parsed item with empty reviewer columns;
   :func:`import_review` reads it back once filled, applies the revisions, re-checks, and writes
   the final QA jsonl in the PhysioNet EHRNoteQA format with review statistics in the paper's terms
   (items removed, questions, correct answers and distractors revised).

Every model call goes through a :class:`~clinieval.cache.RequestCache` in ``OUT/cache.sqlite``
(via :meth:`clinieval.runner.CachedCalls.through`), so a killed build resumes without repeating a
finished call and a complete rerun makes none. A reply that cannot be parsed is kept with the
reason (``generated.jsonl``, ``build_summary.json``): never dropped silently, never guessed.
Patient text is logged at DEBUG only.
"""

from __future__ import annotations

import csv
import json
import logging
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from clinieval.cache import RequestCache
from clinieval.ehr.notes import (
    DischargeNote,
    format_notes,
    iter_discharge_notes,
    read_discharge_notes,
    select_notes,
)
from clinieval.errors import UserError
from clinieval.fsutil import atomic_open, atomic_write_json
from clinieval.models.base import Model
from clinieval.runner import CachedCalls, CallTally, ProgressBar, cached_generate, run_each
from clinieval.types import JSON, GenerationConfig, Message, ModelOutput

log = logging.getLogger(__name__)

__all__ = [
    "BLOCKING_CHECKS",
    "CHECKS",
    "CHOICES_PROMPT",
    "FINAL_FIELDS",
    "QUESTION_PROMPT",
    "REVIEWER_COLUMNS",
    "REVIEW_COLUMNS",
    "BuildResult",
    "BuildSettings",
    "ChoicesReply",
    "GeneratedItem",
    "ImportResult",
    "Patient",
    "QuestionReply",
    "ReplyParseError",
    "ReviewStats",
    "StepRecord",
    "check_item",
    "choices_messages",
    "failed_checks",
    "generate_dataset",
    "import_review",
    "load_patients",
    "normalize_option",
    "parse_choices_reply",
    "parse_question_reply",
    "question_messages",
    "read_patient_ids",
    "sample_patient_ids",
    "tiny_model_warning",
]

# ---------------------------------------------------------------------------------------------
# The paper's prompts (shared/spec/ehrnoteqa.md, character for character) and what is sent
# ---------------------------------------------------------------------------------------------

QUESTION_PROMPT = (
    "Situation : When a patient is admitted to the hospital, important clinical records are "
    "summarized in a 'discharge summary'. On the patient's subsequent visit, the previous 'discharge "
    "summaries' serve as essential reference for the doctor's clinical decision making. Objective : "
    "Please formulate one question that a doctor might actually ask based on the provided 'discharge "
    "summaries'. The questions should have clear answer, and these answer should be found within the "
    "provided 'discharge summaries'. Note : 1. The 'discharge summary' is provided between [note 1 "
    "start] and [note 1 end]. If there are multiple notes, they are labeled as [note 1 start], [note "
    "2 start], etc. 2. The 'discharge summaries' are provided in chronological order. This means "
    "note1 is a record from before note2. At the beginning of each note, there is an admission ID "
    "and the date it was written, so please refer to that. 3. Please refrain from formulating "
    "questions that can be answered without referring to a note. 4. Do not create question that is "
    "too easy to answer. To answer your question, someone should have the clinical expertise "
    "equivalent to a doctor and must fully understand all provided discharge summaries. 5. Your "
    "answer should also contain short rationale behind the answer. 6. When explaining the answer and "
    "its rationale, utilize the chart date of the note. In other words, instead of saying the first "
    "note or the second note, phrase it as 'as per the note charted on [specific date], …'. 7. "
    "Arrange your output in the following format: - Question : [Your Question] - Answer : [Your "
    "Answer] - Reason : [Explanation for your answer]"
)
CHOICES_PROMPT = (
    "Objective : Please generate a multiple-choice question answering data with five possible "
    "answers (A-E) based on the doctor's question derived from the provided 'discharge summary'. "
    "Ensure that one answer is correct, and the remaining four are incorrect answers. Note : 1. Use "
    "the provided doctor's question as the basis for the multiple-choice question without "
    "modification. 2. The 'discharge summary' is enclosed within [note 1 start] and [note 1 end], "
    "with additional notes being similarly labeled. 3. All distractors (incorrect answer choices) "
    "should contain contents that appear in the provided discharge summary but should be wrong "
    "answer to the question. 4. After choosing all five choices, paraphrase them so that all choices "
    "are consistent with the format and length. Ensure that longest length answer choice is not an "
    "answer. 5. The correct answer should be clearly indicated, and the rationale should explain why "
    "this is the answer and why the other options are not correct but are good distractors. 6. "
    "Arrange your output in the following format: - Question: [The doctor's question] - Answer "
    "Choices: A: [First option] B: [Second option] C: [Third option] D: [Fourth option] E: [Fifth "
    "option] - Correct Answer: [The letter of the correct choice] - Reason: [Explanation behind your "
    "answer and why each other options are incorrect but can be good distractors]"
)

OPTION_LETTERS = "ABCDE"

GENERATED_FILE = "generated.jsonl"
REVIEW_FILE = "review.csv"
SUMMARY_FILE = "build_summary.json"
CACHE_FILE = "cache.sqlite"

DEFAULT_MAX_TOKENS = 1024
"""Room for a step-2 reply: five options and a rationale for each (about 300-600 tokens)."""

_CACHE_KIND = "ehrnoteqa_build"


def question_messages(notes: str) -> list[Message]:
    """Step 1: :data:`QUESTION_PROMPT`, a blank line, then the ``{notes}`` block, as one user turn.

    The paper quotes the instruction only; its public code sent the instruction followed by the
    notes, which is what this does (the backend applies the model's chat template).
    """
    return [Message("user", f"{QUESTION_PROMPT}\n\n{notes}")]


def choices_messages(notes: str, source: QuestionReply) -> list[Message]:
    """Step 2: :data:`CHOICES_PROMPT`, a blank line, the notes, a blank line, then the step-1 result::

        Doctor's question :
        - Question : {question}
        - Answer : {answer}
        - Reason : {reason}

    The answer and reason go along so that the one correct option says what step 1 found in the
    notes (the prompt asks for "one answer [that] is correct"); the ``Reason`` line is left out
    when step 1 gave none.
    """
    lines = ["Doctor's question :", f"- Question : {source.question}", f"- Answer : {source.answer}"]
    if source.reason:
        lines.append(f"- Reason : {source.reason}")
    return [Message("user", f"{CHOICES_PROMPT}\n\n{notes}\n\n" + "\n".join(lines))]


# ---------------------------------------------------------------------------------------------
# Parsing the replies
# ---------------------------------------------------------------------------------------------


class ReplyParseError(ValueError):
    """A generator reply that could not be read; ``code`` is the short reason counted in the summary.

    Not a UserError: nothing the user typed is wrong. The item is kept with the reason.
    """

    def __init__(self, code: str, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class QuestionReply:
    """What step 1 wrote: a free-text question, its answer and the rationale ('' when absent)."""

    question: str
    answer: str
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ChoicesReply:
    """What step 2 wrote. ``choices`` holds every lettered option found, in letter order (a reply
    with four or six options parses; the ``five_options`` check then fails). ``answer`` is the
    letter read from ``answer_raw``, or None when no letter could be read from it."""

    question: str
    choices: dict[str, str]
    answer: str | None
    answer_raw: str
    reason: str = ""


def _label(words: str) -> re.Pattern[str]:
    """A ``Label :`` marker: not inside a word, any case, spaces or leftover ``*``/``_`` before the colon."""
    return re.compile(rf"(?<![\w'])(?:{words})[ \t]*[*_]*[ \t]*:", re.IGNORECASE)


_QUESTION = _label(r"question")
_ANSWER = _label(r"answer")
_REASON = _label(r"reason(?:ing)?|rationale|explanation")
_CHOICES = _label(r"(?:answer[ \t]+)?(?:choices|options)")
_CORRECT = _label(r"(?:correct[ \t]+)?(?:answer|choice|option)")
_BOLD = re.compile(r"\*\*|__")
_HEADING = re.compile(r"(?m)^[ \t]*#{1,6}[ \t]*")
_TRAILING = re.compile(r"[\s*_\-–—•]+$")  # the dashes models put between items
_LEADING = re.compile(r"^[\s*_:]+")
_PLACEHOLDER = re.compile(
    r"^\[?\s*(?:your question|your answer|the doctor's question|explanation for your answer|"
    r"(?:first|second|third|fourth|fifth) option|the letter of the correct choice)\s*\]?$",
    re.IGNORECASE,
)


def _markup_free(text: str) -> str:
    """The reply without bold/underline markers and heading marks, with Unix line ends."""
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return _HEADING.sub("", _BOLD.sub("", text))


def _value(text: str, *, one_line: bool = True) -> str:
    """A field's value: separators and stray markup trimmed, a ``[...]`` wrapper removed, and
    (``one_line``) inner whitespace collapsed to single spaces."""
    text = _LEADING.sub("", _TRAILING.sub("", text))
    if text.startswith("[") and text.endswith("]") and text.count("[") == 1 and text.count("]") == 1:
        text = text[1:-1].strip()
    return re.sub(r"\s+", " ", text) if one_line else text.strip()


def _is_placeholder(value: str) -> bool:
    return bool(_PLACEHOLDER.match(value))


def parse_question_reply(text: str) -> QuestionReply:
    """Read step 1's ``- Question : … - Answer : … - Reason : …``.

    Tolerates any case, spacing around the colon, ``**bold**`` labels, the items on one line or
    several, and missing dashes. The question is the first non-empty one that is not the
    prompt's own ``[Your Question]`` echoed; the answer runs to the ``Reason`` label (optional:
    a missing reason is ''), the reason to the end. Raises :class:`ReplyParseError` otherwise.
    """
    if not text.strip():
        raise ReplyParseError("empty", "the reply is empty")
    t = _markup_free(text)
    code, detail = "no_question", "no 'Question :' label in the reply"
    for q in _QUESTION.finditer(t):
        a = _ANSWER.search(t, q.end())
        if a is None:
            code, detail = "no_answer", "no 'Answer :' label after the question"
            break
        if _QUESTION.search(t, q.end(), a.start()):
            continue  # "Here is a question: - Question : …": the later label is the item
        question = _value(t[q.end() : a.start()])
        if not question or _is_placeholder(question):
            code, detail = "empty_question", "the 'Question :' label has no question after it"
            continue
        r = _REASON.search(t, a.end())
        answer = _value(t[a.end() : r.start() if r else len(t)])
        if not answer or _is_placeholder(answer):
            code, detail = "empty_answer", "the 'Answer :' label has no answer after it"
            continue
        reason = _value(t[r.end() :], one_line=False) if r else ""
        return QuestionReply(question, answer, reason)
    raise ReplyParseError(code, detail)


_OPTION_STYLES: dict[str, str] = {
    "colon": r"(?<![\w(\[]){L}[ \t]*:",
    "dot": r"(?<![\w(\[.]){L}\.(?=\s)",
    "paren": r"(?<![\w(\[]){L}\)",
    "wrapped": r"\({L}\)[ \t]*[:.]?",
    "bracket": r"\[{L}\][ \t]*[:.]?",
}
_LINE_START = r"(?:^|(?<=\n))[ \t]*(?:[-*•][ \t]*)?"


def _option_pattern(style: str, letter: str, anchored: bool) -> re.Pattern[str]:
    body = _OPTION_STYLES[style].replace("{L}", letter)
    return re.compile((_LINE_START if anchored else "") + body)


def _option_labels(block: str, style: str, anchored: bool) -> list[tuple[str, int, int]]:
    """``(letter, start, end)`` of the option labels A, B, C, … found one after another."""
    found: list[tuple[str, int, int]] = []
    pos = 0
    for letter in "ABCDEFGHIJ":
        m = _option_pattern(style, letter, anchored).search(block, pos)
        if m is None:
            break
        found.append((letter, m.start(), m.end()))
        pos = m.end()
    return found


def _find_options(block: str) -> tuple[dict[str, str], int]:
    """The lettered options of a choices block and where the first label starts (-1 if none).

    The label style (``A:``, ``A.``, ``A)``, ``(A)``, ``[A]``) is the one of the first ``A`` label
    and every later label must use it, so ``A: Hepatitis B. B: …`` splits right. Labels at line
    starts are preferred when they find at least as many options, so an option whose text holds
    ``B.`` mid-line is not cut there.
    """
    starts = {s: m.start() for s in _OPTION_STYLES if (m := _option_pattern(s, "A", False).search(block))}
    if not starts:
        return {}, -1
    style = min(starts, key=lambda s: starts[s])
    inline = _option_labels(block, style, anchored=False)
    lined = _option_labels(block, style, anchored=True)
    labels = lined if len(lined) >= max(2, len(inline)) else inline
    options: dict[str, str] = {}
    for i, (letter, _, end) in enumerate(labels):
        stop = labels[i + 1][1] if i + 1 < len(labels) else len(block)
        options[letter] = _value(block[end:stop])
    return options, labels[0][1]


_LETTER_TOKEN = re.compile(r"^[^\w(]*(?:(?i:option|choice|answer)[ \t]+)?\(?([A-Z])\)?(?=$|[\s.:,;)\]-])")
_LOWER_LETTER = re.compile(r"^[^\w(]*\(?([a-e])(?:\)|[.:]|\s*$)")


def normalize_option(text: str) -> str:
    """An option compared for sameness: lower case, punctuation as spaces, whitespace collapsed."""
    return " ".join(re.sub(r"[\W_]+", " ", text.lower()).split())


def _answer_letter(raw: str, choices: Mapping[str, str]) -> str | None:
    """The letter a ``Correct Answer`` value names: ``C``, ``C. text``, ``(C)``, ``Option C``, ``c)``,
    or the exact text of exactly one option. None when it names none of these (never a guess)."""
    m = _LETTER_TOKEN.match(raw) or _LOWER_LETTER.match(raw)
    if m:
        return m.group(1).upper()
    wanted = normalize_option(raw)
    same = [k for k, v in choices.items() if wanted and normalize_option(v) == wanted]
    return same[0] if len(same) == 1 else None


def parse_choices_reply(text: str) -> ChoicesReply:
    """Read step 2's ``- Question: … - Answer Choices: A: … E: … - Correct Answer: X - Reason: …``.

    Tolerates what :func:`parse_question_reply` does, plus option labels ``A:``, ``A.``, ``A)``,
    ``(A)`` on one line or on separate lines, a missing ``Answer Choices:`` label (the options
    then start at the first ``A`` label), and correct answers such as ``C``, ``C. text`` or
    ``(C)``. A ``Correct Answer`` whose letter cannot be read still parses (``answer`` None: the
    ``valid_answer`` check fails and reviewers see the raw value); no question, no options or no
    ``Correct Answer`` label raise :class:`ReplyParseError`.
    """
    if not text.strip():
        raise ReplyParseError("empty", "the reply is empty")
    t = _markup_free(text)
    code, detail = "no_question", "no 'Question:' label in the reply"
    for q in _QUESTION.finditer(t):
        ca = _CORRECT.search(t, q.end())
        if ca is None:
            code, detail = "no_correct_answer", "no 'Correct Answer:' label after the question"
            break
        if _QUESTION.search(t, q.end(), ca.start()):
            continue  # a later 'Question:' label is the item's
        c = _CHOICES.search(t, q.end(), ca.start())
        start = c.end() if c else q.end()
        choices, first = _find_options(t[start : ca.start()])
        if not choices:
            code, detail = "no_options", "no lettered options (A: … E: …) before 'Correct Answer:'"
            continue
        question = _value(t[q.end() : c.start() if c else start + first])
        if not question or _is_placeholder(question):
            code, detail = "empty_question", "the 'Question:' label has no question after it"
            continue
        r = _REASON.search(t, ca.end())
        segment = t[ca.end() : r.start() if r else len(t)].strip()
        first_line, _, rest = segment.partition("\n")
        answer_raw = _value(first_line)
        reason = _value(t[r.end() :], one_line=False) if r else rest.strip()
        return ChoicesReply(question, choices, _answer_letter(answer_raw, choices), answer_raw, reason)
    raise ReplyParseError(code, detail)


# ---------------------------------------------------------------------------------------------
# Checks
# ---------------------------------------------------------------------------------------------

CHECKS = ("five_options", "distinct_options", "valid_answer", "answer_not_longest", "question_unchanged")
"""Every check, in the order they are reported."""

BLOCKING_CHECKS = ("five_options", "distinct_options", "valid_answer")
"""Checks a reviewed item must pass to be imported (unless ``allow_failed_checks``): an item
without five distinct options or a valid correct letter is not a usable five-option question."""


def _same_question(a: str, b: str) -> bool:
    """Equal up to case, whitespace and surrounding quotes (what "without modification" can mean
    for a model that re-types the question)."""

    def norm(s: str) -> str:
        return " ".join(s.strip().strip("\"'“”‘’").lower().split())

    return norm(a) == norm(b)


def check_item(
    choices: Mapping[str, str],
    answer: str | None,
    *,
    question: str | None = None,
    source_question: str | None = None,
) -> dict[str, bool | None]:
    """Each check's outcome: True passed, False failed, None not applicable.

    ``answer_not_longest`` needs a valid answer; ``question_unchanged`` needs both the step-2
    ``question`` and the step-1 ``source_question`` (at re-import there is no step 1).
    Lengths are characters of the option text as written.
    """
    texts = {k: v.strip() for k, v in choices.items()}
    five = sorted(texts) == list(OPTION_LETTERS) and all(texts.values())
    normal = [normalize_option(v) for v in texts.values()]
    valid = answer is not None and answer in OPTION_LETTERS and bool(texts.get(answer))
    out: dict[str, bool | None] = {
        "five_options": five,
        "distinct_options": len(set(normal)) == len(normal),
        "valid_answer": valid,
        "answer_not_longest": None,
        "question_unchanged": None,
    }
    if valid and answer is not None and len(texts) > 1:
        others = max(len(v) for k, v in texts.items() if k != answer)
        out["answer_not_longest"] = len(texts[answer]) <= others
    if question is not None and source_question is not None:
        out["question_unchanged"] = _same_question(question, source_question)
    return out


def failed_checks(checks: Mapping[str, bool | None]) -> list[str]:
    """The names of the checks that failed, in :data:`CHECKS` order."""
    return [name for name in CHECKS if checks.get(name) is False]


# ---------------------------------------------------------------------------------------------
# Patients and their notes
# ---------------------------------------------------------------------------------------------

_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*$")
_ID_HEADERS = frozenset({"subject_id", "patient_id"})


@dataclass(frozen=True, slots=True)
class Patient:
    """A patient to write questions about: the notes the prompt shows (first three by chart time)
    and, when the patient came from a ``--patients`` file, the line that named them."""

    patient_id: str
    notes: tuple[DischargeNote, ...]
    line: int | None = None

    @property
    def num_notes(self) -> int:
        return len(self.notes)

    @property
    def chart_dates(self) -> list[str]:
        return [n.charttime[:10] for n in self.notes]

    @property
    def admission_ids(self) -> list[str]:
        return [n.hadm_id for n in self.notes]

    def notes_block(self) -> str:
        """The ``{notes}`` block exactly as the benchmark formats it."""
        return format_notes(self.notes)


def read_patient_ids(path: str | Path) -> list[tuple[int, str]]:
    """``(line, subject_id)`` from a file with one id per line, in file order.

    Blank lines and ``#`` comments are skipped, and so is a first line ``subject_id`` or
    ``patient_id`` (a one-column CSV). Anything that is not an id (a comma, a space inside) or an
    id given twice is a UserError naming the file and line.
    """
    source = Path(path)
    if not source.is_file():
        raise UserError(f"patients file {source} {'is not a file' if source.exists() else 'not found'}")
    try:
        lines = source.read_text(encoding="utf-8-sig").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{source}: cannot read the patients file ({e})") from None
    out: list[tuple[int, str]] = []
    seen: dict[str, int] = {}
    for n, raw in enumerate(lines, 1):
        text = raw.strip()
        if not text or text.startswith("#") or (n == 1 and text.lower() in _ID_HEADERS):
            continue
        if not _ID.match(text):
            raise UserError(f"{source}:{n}: {text[:40]!r} is not a subject_id (one id per line)")
        if text in seen:
            raise UserError(f"{source}:{n}: subject_id {text} repeats line {seen[text]}")
        seen[text] = n
        out.append((n, text))
    if not out:
        raise UserError(f"{source}: no subject_id in the file (one MIMIC-IV subject_id per line)")
    return out


def sample_patient_ids(notes_path: str | Path, n: int, seed: int) -> list[str]:
    """``n`` subject_ids drawn uniformly without replacement (seeded) among the patients of the
    notes file that have a non-empty note, returned sorted.

    The draw is from the ids in sorted order, so it does not depend on the file's row order.
    """
    if n < 1:
        raise UserError(f"--sample must be at least 1, got {n}")
    path = Path(notes_path)
    ids = sorted({note.subject_id for note in iter_discharge_notes(path) if note.text.strip()})
    if n > len(ids):
        raise UserError(f"{path}: only {len(ids)} patients have discharge notes; --sample {n} is too many")
    return sorted(random.Random(seed).sample(ids, n))


def load_patients(
    notes_path: str | Path,
    *,
    patients_file: str | Path | None = None,
    sample: int | None = None,
    seed: int = 0,
) -> list[Patient]:
    """The patients to build questions for, each with the notes the prompts show.

    Exactly one of ``patients_file`` (:func:`read_patient_ids`) and ``sample``
    (:func:`sample_patient_ids`). An id with no row in the notes file, or whose notes are all
    empty, is a UserError naming the patients file and line.
    """
    if (patients_file is None) == (sample is None):
        raise UserError("say which patients: --patients FILE (one subject_id per line) or --sample N")
    path = Path(notes_path)
    if not path.is_file():
        raise UserError(f"{path}: discharge notes file not found (MIMIC-IV-Note discharge.csv or .csv.gz)")
    if patients_file is not None:
        wanted = read_patient_ids(patients_file)
    else:
        assert sample is not None
        wanted = [(0, pid) for pid in sample_patient_ids(path, sample, seed)]
    found = read_discharge_notes(path, [pid for _, pid in wanted])
    patients: list[Patient] = []
    for line, pid in wanted:
        where = f"{patients_file}:{line}: " if patients_file is not None else ""
        notes = found.get(pid, [])
        if not notes:
            missing = sum(p not in found for _, p in wanted)
            raise UserError(
                f"{where}subject_id {pid} has no discharge note in {path} "
                f"({missing} of the {len(wanted)} ids have none); check the id and the notes file"
            )
        if not any(n.text.strip() for n in notes):
            raise UserError(
                f"{where}subject_id {pid}: every discharge note of the patient in {path} is empty"
            )
        patients.append(Patient(pid, tuple(select_notes(notes)), line or None))
    return patients


# ---------------------------------------------------------------------------------------------
# Generation
# ---------------------------------------------------------------------------------------------

REVIEWER_COLUMNS: tuple[str, ...] = (
    "keep",
    "revised_question",
    *(f"revised_choice_{x}" for x in OPTION_LETTERS),
    "revised_answer",
    "reviewer_note",
    "category",
)
"""The columns reviewers fill (``category`` is optional: one of the paper's question types)."""

REVIEW_COLUMNS: tuple[str, ...] = (
    "item_id",
    "patient_id",
    "num_notes",
    "chart_dates",
    "admission_ids",
    "question",
    *(f"choice_{x}" for x in OPTION_LETTERS),
    "answer",
    "reason",
    "failed_checks",
    *REVIEWER_COLUMNS,
)
"""``review.csv``: what was generated, then the empty reviewer columns."""

TINY_MODEL_WARNING = (
    "{name} is a tiny embedded model: it exercises the build end to end, but it cannot write "
    "usable clinical questions (expect unparseable replies). Build with a capable model behind a "
    "local OpenAI-compatible server."
)


@dataclass(frozen=True, slots=True)
class BuildSettings:
    """How the questions are generated; every field that changes a reply is in its cache key.

    Step ``k`` (0-based) of a patient uses seed ``seed + k`` in both steps, so the questions of one
    patient differ on a seeded backend and a rerun reproduces them where the backend allows.
    The spec gives temperature 1 for step 1 only; step 2 defaults to 1 as well.
    """

    per_patient: int = 1
    seed: int = 0
    temperature: float = 1.0
    choices_temperature: float = 1.0
    max_tokens: int = DEFAULT_MAX_TOKENS
    concurrency: int | None = None
    progress: bool = True
    overwrite_review: bool = False

    def config(self, step: str, repeat: int) -> GenerationConfig:
        temperature = self.temperature if step == "question" else self.choices_temperature
        return GenerationConfig(temperature=temperature, max_tokens=self.max_tokens, seed=self.seed + repeat)

    def check(self) -> None:
        if self.per_patient < 1:
            raise UserError(f"--per-patient must be at least 1, got {self.per_patient}")
        if self.max_tokens < 1:
            raise UserError(f"--max-tokens must be at least 1, got {self.max_tokens}")
        for name, t in (
            ("--temperature", self.temperature),
            ("--choices-temperature", self.choices_temperature),
        ):
            if not 0.0 <= t <= 2.0:
                raise UserError(f"{name} must be between 0 and 2, got {t}")


@dataclass(slots=True)
class StepRecord:
    """One model call of an item as ``generated.jsonl`` keeps it: the raw reply in full, how it
    ended, tokens, and whether it came from the cache."""

    raw: str
    finish_reason: str | None
    error_kind: str | None
    error_message: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    cached: bool

    @classmethod
    def of(cls, out: ModelOutput, asked: bool) -> StepRecord:
        return cls(
            raw=out.text,
            finish_reason=out.finish_reason,
            error_kind=None if out.error_kind is None else out.error_kind.value,
            error_message=out.error_message,
            prompt_tokens=out.prompt_tokens,
            completion_tokens=out.completion_tokens,
            cached=not asked,
        )


@dataclass(slots=True)
class GeneratedItem:
    """One generation attempt: a patient, a repeat, both steps' replies, what was read from them
    and the checks. ``failure`` says which step went wrong and why (``kind`` ``call_failed`` or
    ``unparsed``, ``reason`` the error kind or parse code); such an item is kept, not dropped."""

    item_id: str
    patient_id: str
    repeat: int
    num_notes: int
    chart_dates: list[str]
    admission_ids: list[str]
    question_step: StepRecord | None = None
    choices_step: StepRecord | None = None
    source: QuestionReply | None = None
    parsed: ChoicesReply | None = None
    failure: dict[str, str] | None = None
    checks: dict[str, bool | None] = field(default_factory=dict)

    @property
    def status(self) -> str:
        return "ok" if self.failure is None else self.failure["kind"]

    @property
    def failed_checks(self) -> list[str]:
        return failed_checks(self.checks)

    def fail(self, step: str, kind: str, reason: str, detail: str) -> None:
        self.failure = {"step": step, "kind": kind, "reason": reason, "detail": detail}

    def to_dict(self) -> JSON:
        return {
            "item_id": self.item_id,
            "patient_id": self.patient_id,
            "repeat": self.repeat,
            "num_notes": self.num_notes,
            "chart_dates": self.chart_dates,
            "admission_ids": self.admission_ids,
            "status": self.status,
            "failure": self.failure,
            "step1": None if self.source is None else asdict(self.source),
            "step2": None if self.parsed is None else asdict(self.parsed),
            "checks": self.checks,
            "failed_checks": self.failed_checks,
            "question_call": None if self.question_step is None else asdict(self.question_step),
            "choices_call": None if self.choices_step is None else asdict(self.choices_step),
        }

    def review_row(self) -> dict[str, object]:
        """The item's ``review.csv`` row (only for parsed items), reviewer columns empty."""
        assert self.parsed is not None
        p = self.parsed
        row: dict[str, object] = {
            "item_id": self.item_id,
            "patient_id": self.patient_id,
            "num_notes": self.num_notes,
            "chart_dates": "; ".join(self.chart_dates),
            "admission_ids": "; ".join(self.admission_ids),
            "question": p.question,
            **{f"choice_{x}": p.choices.get(x, "") for x in OPTION_LETTERS},
            "answer": p.answer or p.answer_raw,
            "reason": p.reason,
            "failed_checks": "; ".join(self.failed_checks),
        }
        row.update({c: "" for c in REVIEWER_COLUMNS})
        return row


@dataclass(slots=True)
class _Tally(CallTally):
    """Calls made or read from the cache during one build, also counted per step."""

    calls: Counter[str] = field(default_factory=Counter)

    def add_step(self, step: str, out: ModelOutput, asked: bool) -> None:
        self.calls[step] += 1
        self.add(out, asked)


@dataclass(slots=True)
class BuildResult:
    """The items of a build in patient order, its summary, and where everything was written."""

    items: list[GeneratedItem]
    summary: JSON
    generated: Path
    review: Path
    summary_path: Path

    def to_text(self) -> str:
        s = self.summary
        lines = [
            f"{s['patients']} patients, {s['items']} items: {s['parsed']} parsed, "
            f"{sum(s['parse_failures'].values())} unparsed, {sum(s['call_failures'].values())} failed calls; "
            f"{s['items_passing_checks']} pass every check",
            f"{s['calls']['total']} model calls: {s['requests']} requests, {s['cache_hits']} from the cache",
        ]
        for title, key in (
            ("unparsed", "parse_failures"),
            ("failed calls", "call_failures"),
            ("failed checks", "check_failures"),
        ):
            if s[key]:
                lines.append(f"{title}: " + ", ".join(f"{k} {v}" for k, v in sorted(s[key].items())))
        lines.append(f"review -> {self.review}  (fill it in, then: ehrnoteqa build import {self.review})")
        return "\n".join(lines)


def tiny_model_warning(model: Model) -> str | None:
    """The cannot-write-questions note when ``model`` is one of the embedded catalog's tiny models."""
    from clinieval.models.catalog import is_embedded

    return TINY_MODEL_WARNING.format(name=model.name) if is_embedded(model) else None


def _review_has_input(path: Path) -> bool:
    """Whether ``review.csv`` already holds reviewers' work (or cannot be read to tell)."""
    if not path.exists():
        return False
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return any(any((row.get(c) or "").strip() for c in REVIEWER_COLUMNS) for row in csv.DictReader(f))
    except (OSError, UnicodeDecodeError, csv.Error):
        return True


def _prepare_out(out: Path, settings: BuildSettings) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the build")
    review = out / REVIEW_FILE
    if not settings.overwrite_review and _review_has_input(review):
        raise UserError(
            f"{review} already holds reviewer input; move it away before rebuilding "
            "(or rebuild with --overwrite-review to replace it)"
        )


async def _step(
    calls: CachedCalls, step: str, messages: list[Message], repeat: int, settings: BuildSettings
) -> tuple[ModelOutput, bool]:
    """One step's request through the build's cache, keyed by its settings and the step's name."""
    config = settings.config(step, repeat)
    keyed = {**config.to_dict(), "step": step}
    return await cached_generate(calls, _CACHE_KIND, keyed, messages, repeat, config)


_Reply = TypeVar("_Reply", "QuestionReply", "ChoicesReply")


@dataclass(slots=True)
class _StepRun:
    """Runs the steps of one item: the cached call, the tally, and the parse, where a failed call
    or an unreadable reply is recorded on the item (which then stops) rather than raised."""

    calls: CachedCalls
    item: GeneratedItem
    repeat: int
    settings: BuildSettings
    tally: _Tally

    async def run(
        self, step: str, messages: list[Message], parse: Callable[[str], _Reply]
    ) -> tuple[_Reply | None, StepRecord]:
        log.debug("item %s %s prompt: %r", self.item.item_id, step, messages)
        out, asked = await _step(self.calls, step, messages, self.repeat, self.settings)
        self.tally.add_step(step, out, asked)
        record = StepRecord.of(out, asked)
        if out.error_kind is not None:
            self.item.fail(step, "call_failed", out.error_kind.value, out.error_message or "")
            return None, record
        try:
            return parse(out.text), record
        except ReplyParseError as e:
            self.item.fail(step, "unparsed", e.code, e.detail)
            return None, record


async def _build_item(
    calls: CachedCalls, patient: Patient, repeat: int, settings: BuildSettings, tally: _Tally
) -> GeneratedItem:
    """Both steps for one (patient, repeat); stops at the first failed call or unreadable reply."""
    item = GeneratedItem(
        item_id=f"{patient.patient_id}-{repeat + 1}",
        patient_id=patient.patient_id,
        repeat=repeat,
        num_notes=patient.num_notes,
        chart_dates=patient.chart_dates,
        admission_ids=patient.admission_ids,
    )
    notes = patient.notes_block()
    step = _StepRun(calls, item, repeat, settings, tally)
    item.source, item.question_step = await step.run(
        "question", question_messages(notes), parse_question_reply
    )
    if item.source is None:
        return item
    messages = choices_messages(notes, item.source)
    item.parsed, item.choices_step = await step.run("choices", messages, parse_choices_reply)
    if item.parsed is None:
        return item
    p = item.parsed
    item.checks = check_item(p.choices, p.answer, question=p.question, source_question=item.source.question)
    return item


def _summarize(
    patients: Sequence[Patient],
    items: Sequence[GeneratedItem],
    model: Model,
    settings: BuildSettings,
    tally: _Tally,
    elapsed: float,
    warning: str | None,
) -> JSON:
    failures = [i.failure for i in items if i.failure is not None]
    parsed = [i for i in items if i.status == "ok"]
    checks = Counter(name for i in parsed for name in i.failed_checks)
    return {
        "model": model.name,
        "model_identity": model.identity,
        "settings": {
            "per_patient": settings.per_patient,
            "seed": settings.seed,
            "question": settings.config("question", 0).to_dict(),
            "choices": settings.config("choices", 0).to_dict(),
            "seed_per_repeat": "seed + repeat index (0-based) in both steps",
        },
        "patients": len(patients),
        "items": len(items),
        "calls": {
            "question": tally.calls["question"],
            "choices": tally.calls["choices"],
            "total": sum(tally.calls.values()),
        },
        "requests": tally.requests,
        "cache_hits": tally.cache_hits,
        "parsed": len(parsed),
        "parse_failures": dict(
            Counter(f"{f['step']}:{f['reason']}" for f in failures if f["kind"] == "unparsed")
        ),
        "call_failures": dict(
            Counter(f"{f['step']}:{f['reason']}" for f in failures if f["kind"] == "call_failed")
        ),
        "check_failures": {name: checks[name] for name in CHECKS if checks[name]},
        "items_passing_checks": sum(not i.failed_checks for i in parsed),
        "review_rows": len(parsed),
        "tokens": {
            "prompt": tally.prompt_tokens,
            "completion": tally.completion_tokens,
            "new_prompt": tally.new_prompt_tokens,
            "new_completion": tally.new_completion_tokens,
        },
        "elapsed_s": round(elapsed, 3),
        "warning": warning,
    }


def _write_csv(path: Path, columns: Sequence[str], rows: Iterable[Mapping[str, object]]) -> None:
    """A UTF-8 CSV written atomically: a crash leaves the old file or the complete new one."""
    with atomic_open(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), lineterminator="\n")
        writer.writeheader()
        writer.writerows(rows)


def _write_jsonl(path: Path, records: Iterable[JSON]) -> None:
    with atomic_open(path) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


async def generate_dataset(
    patients: Sequence[Patient],
    model: Model,
    out: str | Path,
    settings: BuildSettings | None = None,
) -> BuildResult:
    """Generate ``settings.per_patient`` items per patient with ``model``; write ``OUT/generated.jsonl``,
    ``OUT/review.csv`` and ``OUT/build_summary.json`` (each atomically) and return them.

    Items run concurrently (as many as the model takes in flight, or ``settings.concurrency``);
    every call goes through ``OUT/cache.sqlite``, so a rerun after a kill asks only what had not
    been answered, and a rerun of a finished build asks nothing. Transient failures (timeouts,
    5xx) are not cached: a rerun asks again. The three files are rewritten from the cache at the
    end of every run; ``review.csv`` is never overwritten once reviewers wrote in it.
    """
    opts = settings or BuildSettings()
    opts.check()
    if not patients:
        raise UserError("no patients to build questions for")
    dest = Path(out)
    _prepare_out(dest, opts)
    await model.check()
    warning = tiny_model_warning(model)
    if warning:
        log.warning("%s", warning)
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the build folder {dest}: {e.strerror or e}") from None
    units = [(i, k) for i in range(len(patients)) for k in range(opts.per_patient)]
    results: dict[tuple[int, int], GeneratedItem] = {}
    tally = _Tally()
    cache = RequestCache(dest / CACHE_FILE)
    calls = CachedCalls(model, cache)
    bar = ProgressBar(opts.progress, len(units), 0, f"ehrnoteqa build {model.name}")
    start = time.perf_counter()

    async def build_one(unit: tuple[int, int]) -> None:
        index, repeat = unit
        results[index, repeat] = await _build_item(calls, patients[index], repeat, opts, tally)
        bar.advance()

    try:
        with bar:
            await run_each(units, opts.concurrency or model.max_concurrency, build_one)
    finally:
        cache.close()
    items = [results[u] for u in units]
    summary = _summarize(patients, items, model, opts, tally, time.perf_counter() - start, warning)
    generated, review, summary_path = dest / GENERATED_FILE, dest / REVIEW_FILE, dest / SUMMARY_FILE
    _write_jsonl(generated, (i.to_dict() for i in items))
    _write_csv(review, REVIEW_COLUMNS, (i.review_row() for i in items if i.status == "ok"))
    atomic_write_json(summary_path, summary)
    log.info(
        "built %d items for %d patients: %d parsed, %d requests, %d cache hits",
        len(items),
        len(patients),
        summary["parsed"],
        tally.requests,
        tally.cache_hits,
    )
    return BuildResult(items, summary, generated, review, summary_path)


# ---------------------------------------------------------------------------------------------
# Re-import of the clinician review
# ---------------------------------------------------------------------------------------------

FINAL_FIELDS: tuple[str, ...] = (
    "patient_id",
    "num_notes",
    "question",
    *(f"choice_{x}" for x in OPTION_LETTERS),
    "answer",
)
"""The PhysioNet EHRNoteQA jsonl fields; ``id`` and ``category`` follow when known."""

_REQUIRED_REVIEW = (
    "item_id",
    "patient_id",
    "num_notes",
    "question",
    *(f"choice_{x}" for x in OPTION_LETTERS),
    "answer",
    "keep",
    "revised_question",
    *(f"revised_choice_{x}" for x in OPTION_LETTERS),
    "revised_answer",
)
_YES = frozenset({"yes", "y", "true", "1"})
_NO = frozenset({"no", "n", "false", "0"})


@dataclass(frozen=True, slots=True)
class _Row:
    number: int  # the spreadsheet row (the header is row 1)
    line: int  # the file line the record starts on
    cells: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Review:
    path: Path
    header: tuple[str, ...]
    rows: list[_Row]

    def at(self, row: _Row, column: str) -> str:
        """Where a cell is, in words a spreadsheet user and a text-editor user can both follow."""
        return f"{self.path}: row {row.number} (line {row.line}), column {column!r}"


def _read_review(path: Path) -> _Review:
    """The review CSV's rows; a missing file or column, a repeated column or a row with the
    wrong number of cells is a UserError naming the file and row."""
    if not path.is_file():
        raise UserError(f"review file {path} {'is not a file' if path.exists() else 'not found'}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            return _parse_review(path, csv.reader(f))
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path} is not UTF-8 text (bad byte at offset {e.start}); save it as UTF-8 CSV"
        ) from None
    except csv.Error as e:
        raise UserError(f"{path}: not readable as CSV ({e})") from None


def _parse_review(path: Path, reader: Any) -> _Review:
    header_cells: list[str] | None = next(reader, None)
    if header_cells is None or not any(c.strip() for c in header_cells):
        raise UserError(f"{path} is empty: expected the review.csv written by `ehrnoteqa build generate`")
    header = tuple(c.strip() for c in header_cells)
    repeated = sorted(c for c, n in Counter(header).items() if c and n > 1)
    if repeated:
        raise UserError(
            f"{path}: row 1 (the header): column(s) {', '.join(map(repr, repeated))} appear twice"
        )
    missing = [c for c in _REQUIRED_REVIEW if c not in header]
    if missing:
        raise UserError(
            f"{path}: row 1 (the header) has no column {', '.join(map(repr, missing))}; a review file "
            f"has the columns {', '.join(REVIEW_COLUMNS)} (its header is: {', '.join(header)})"
        )
    rows: list[_Row] = []
    number = 1
    while True:
        line = reader.line_num + 1
        try:
            record: list[str] | None = next(reader, None)
        except csv.Error as e:
            raise UserError(f"{path}: line {reader.line_num}: not readable as CSV ({e})") from None
        if record is None:
            return _Review(path, header, rows)
        number += 1
        if not any(c.strip() for c in record):
            continue  # blank lines and a spreadsheet's all-empty rows
        if len(record) != len(header):
            raise UserError(
                f"{path}: row {number} (line {line}) has {len(record)} cells, "
                f"but the header has {len(header)}"
            )
        rows.append(_Row(number, line, dict(zip(header, record, strict=True))))


def _keep(review: _Review, row: _Row) -> bool:
    text = row.cells["keep"].strip().lower()
    if text in _YES:
        return True
    if text in _NO:
        return False
    what = "is empty" if not text else f"is {row.cells['keep'].strip()[:30]!r}"
    raise UserError(
        f"{review.at(row, 'keep')} {what}: write yes to keep the item or no to remove it "
        "(y/n, true/false and 1/0 are read too)"
    )


def _as_letter(text: str) -> str | None:
    """``B``, ``b``, ``(B)``, ``B.`` as ``B``; None for anything else."""
    letter = text.strip("().:[] ").upper()
    return letter if len(letter) == 1 and letter in OPTION_LETTERS else None


def _letter(review: _Review, row: _Row, column: str) -> str | None:
    text = row.cells[column].strip()
    if not text:
        return None
    letter = _as_letter(text)
    if letter is not None:
        return letter
    raise UserError(f"{review.at(row, column)} is {text[:30]!r}: write one letter A-E, or leave it empty")


def _num_notes(review: _Review, row: _Row) -> int:
    text = row.cells["num_notes"].strip()
    if not text.isdigit() or int(text) < 1:
        raise UserError(
            f"{review.at(row, 'num_notes')} is {text[:30]!r}: expected the number of notes (1, 2 or 3)"
        )
    return int(text)


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _read_generated(path: Path) -> dict[str, JSON]:
    """``item_id`` → the parsed item, from ``generated.jsonl`` (to check the review's originals)."""
    out: dict[str, JSON] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read it ({e})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            item_id, step2 = str(d["item_id"]), d.get("step2")
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise UserError(f"{path}:{n}: not a generated item ({e})") from None
        if isinstance(step2, dict):
            out[item_id] = {**step2, "patient_id": str(d.get("patient_id")), "num_notes": d.get("num_notes")}
    return out


def _check_originals(review: _Review, row: _Row, generated: Mapping[str, JSON], source: Path) -> None:
    """The generated columns must be as generated: revisions go in the ``revised_*`` columns, so the
    statistics can tell what reviewers changed."""
    item_id = row.cells["item_id"].strip()
    gen = generated.get(item_id)
    if gen is None:
        raise UserError(
            f"{review.at(row, 'item_id')}: item {item_id!r} is not among the parsed items of {source}"
        )
        return
    expected: dict[str, str] = {
        "patient_id": str(gen["patient_id"]),
        "num_notes": str(gen["num_notes"]),
        "question": str(gen["question"]),
        **{f"choice_{x}": str(gen["choices"].get(x, "")) for x in OPTION_LETTERS},
        "answer": str(gen["answer"] or gen["answer_raw"]),
    }
    for column, value in expected.items():
        if not _same(row.cells[column], value):
            fix = "" if column in ("patient_id", "num_notes") else f" and write changes in 'revised_{column}'"
            raise UserError(
                f"{review.at(row, column)} differs from what was generated ({source}); restore it{fix}"
            )


@dataclass(slots=True)
class ReviewStats:
    """The review in the paper's terms: items removed, and among kept items the questions, correct
    answers and distractors revised, out of all reviewed items (distractors: four per item), as the
    paper counts them (38 of 1,000 removed; 206 questions, 338 correct answers, 962 of 4,000
    distractors revised). ``failing_checks`` counts kept items still failing each check (only the
    non-blocking ones, unless ``allow_failed_checks`` let blocking ones through)."""

    items: int = 0
    removed: int = 0
    kept: int = 0
    questions_revised: int = 0
    correct_answers_revised: int = 0
    distractors_revised: int = 0
    failing_checks: dict[str, int] = field(default_factory=dict)

    @property
    def distractors_total(self) -> int:
        return 4 * self.items

    def to_dict(self) -> JSON:
        return {**asdict(self), "distractors_total": self.distractors_total}

    def to_text(self) -> str:
        n = self.items
        lines = [
            f"{n} items reviewed: {self.removed} removed, {self.kept} kept",
            f"revised: {self.questions_revised} of {n} questions, {self.correct_answers_revised} of {n} "
            f"correct answers, {self.distractors_revised} of {self.distractors_total} distractors",
        ]
        if self.failing_checks:
            lines.append(
                "kept items failing checks: " + ", ".join(f"{k} {v}" for k, v in self.failing_checks.items())
            )
        return "\n".join(lines)


@dataclass(slots=True)
class ImportResult:
    """The final items (PhysioNet EHRNoteQA jsonl records), the statistics, and the files written."""

    items: list[JSON]
    stats: ReviewStats
    out: Path
    stats_path: Path


def _final_item(review: _Review, row: _Row) -> tuple[JSON, dict[str, bool | None], tuple[bool, bool, int]]:
    """A kept row with its revisions applied, its checks, and (question revised, correct answer
    revised, distractors revised)."""
    c = row.cells
    original = {x: c[f"choice_{x}"].strip() for x in OPTION_LETTERS}
    choices = {x: c[f"revised_choice_{x}"].strip() or original[x] for x in OPTION_LETTERS}
    question = c["revised_question"].strip() or c["question"].strip()
    old_answer = _as_letter(c["answer"]) or c["answer"].strip()  # the raw reply when no letter was read
    answer = _letter(review, row, "revised_answer") or old_answer
    if not question:
        raise UserError(
            f"{review.at(row, 'question')}: the item has no question; write one in 'revised_question'"
        )
    checks = check_item(choices, answer)
    q_revised = not _same(question, c["question"])
    a_revised = answer != old_answer or not _same(choices.get(answer, ""), original.get(answer, ""))
    d_revised = sum(not _same(choices[x], original[x]) for x in OPTION_LETTERS if x != answer)
    pid = c["patient_id"].strip()
    if not pid:
        raise UserError(f"{review.at(row, 'patient_id')} is empty")
    item: JSON = {
        "patient_id": int(pid) if pid.isdigit() else pid,
        "num_notes": _num_notes(review, row),
        "question": question,
        **{f"choice_{x}": choices[x] for x in OPTION_LETTERS},
        "answer": answer,
        "id": c["item_id"].strip(),
    }
    category = c.get("category", "").strip()
    if category:
        item["category"] = category
    return item, checks, (q_revised, a_revised, d_revised)


def _stats_path(out: Path) -> Path:
    return out.with_name(f"{out.stem if out.suffix == '.jsonl' else out.name}.review_stats.json")


def import_review(
    review_csv: str | Path,
    out: str | Path,
    *,
    generated: str | Path | None = None,
    allow_failed_checks: bool = False,
    stats_out: str | Path | None = None,
) -> ImportResult:
    """Read a filled ``review.csv``, apply it, and write the final QA jsonl and its statistics.

    ``keep`` must be yes/no (y/n, true/false, 1/0, any case) on every row: a blank is an error,
    not a default. Non-empty ``revised_*`` cells replace the originals; ``revised_answer`` must be
    a letter A-E. Kept items are checked again and an item failing one of
    :data:`BLOCKING_CHECKS` is refused (every such row listed) unless ``allow_failed_checks``.
    When ``generated`` (default: ``generated.jsonl`` beside the review, if there) is available,
    the original columns must be unchanged, so edits made in place are caught rather than
    counted as unrevised. Nothing is written unless everything passes; both files are atomic.
    ``stats_out`` defaults to ``OUT.review_stats.json`` beside ``out``.
    """
    source, dest = Path(review_csv), Path(out)
    if dest.exists() and dest.resolve() == source.resolve():
        raise UserError(f"{dest} is the review file; write the final jsonl somewhere else")
    review = _read_review(source)
    if not review.rows:
        raise UserError(f"{source}: no items below the header")
    _unique_ids(review)
    gen_path = Path(generated) if generated is not None else source.parent / GENERATED_FILE
    if generated is not None and not gen_path.is_file():
        raise UserError(f"--generated {gen_path}: not found")
    known = _read_generated(gen_path) if gen_path.is_file() else None
    if known is not None:
        for row in review.rows:
            _check_originals(review, row, known, gen_path)
        _check_complete(review, known, gen_path)
    applied = _Applied(ReviewStats(items=len(review.rows)))
    for row in review.rows:
        applied.add(review, row, allow_failed_checks)
    applied.finish(source)
    stats_path = Path(stats_out) if stats_out is not None else _stats_path(dest)
    _write_jsonl(dest, applied.items)
    atomic_write_json(stats_path, {"review": str(source), "out": str(dest), **applied.stats.to_dict()})
    return ImportResult(applied.items, applied.stats, dest, stats_path)


def _unique_ids(review: _Review) -> None:
    seen: dict[str, int] = {}
    for row in review.rows:
        item_id = row.cells["item_id"].strip()
        if not item_id:
            raise UserError(f"{review.at(row, 'item_id')} is empty")
        if item_id in seen:
            raise UserError(f"{review.at(row, 'item_id')}: item {item_id!r} repeats row {seen[item_id]}")
        seen[item_id] = row.number


def _check_complete(review: _Review, known: Mapping[str, JSON], gen_path: Path) -> None:
    """Every parsed item must keep its row: a deleted row would drop out of "removed"."""
    listed = {row.cells["item_id"].strip() for row in review.rows}
    lost = [item_id for item_id in known if item_id not in listed]
    if lost:
        raise UserError(
            f"{review.path}: {len(lost)} generated item(s) have no row, first {lost[0]!r} (see {gen_path}); "
            "restore the rows and set keep to no to remove items, so the statistics count them"
        )


@dataclass(slots=True)
class _Applied:
    """The review applied row by row: the final items, the statistics, and the refused rows."""

    stats: ReviewStats
    items: list[JSON] = field(default_factory=list)
    failing: Counter[str] = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)

    def add(self, review: _Review, row: _Row, allow_failed_checks: bool) -> None:
        if not _keep(review, row):
            self.stats.removed += 1
            return
        item, checks, (q_rev, a_rev, d_rev) = _final_item(review, row)
        bad = failed_checks(checks)
        blocking = [name for name in bad if name in BLOCKING_CHECKS]
        if blocking and not allow_failed_checks:
            self.refused.append(f"row {row.number} (item {item['id']!r}): {', '.join(blocking)}")
        self.failing.update(bad)
        self.stats.kept += 1
        self.stats.questions_revised += q_rev
        self.stats.correct_answers_revised += a_rev
        self.stats.distractors_revised += d_rev
        self.items.append(item)

    def finish(self, source: Path) -> None:
        """Refuse the import when a kept item fails a blocking check (every such row listed)."""
        if self.refused:
            shown = "; ".join(self.refused[:10]) + ("; ..." if len(self.refused) > 10 else "")
            raise UserError(
                f"{source}: {len(self.refused)} kept item(s) fail a required check ({shown}); revise the "
                "choices or the answer, set keep to no, or import with --allow-failed-checks"
            )
        self.stats.failing_checks = {name: self.failing[name] for name in CHECKS if self.failing[name]}
