"""The generate step: patients, the two cached model calls per item, and the build folder.

:func:`load_patients` picks the patients (a ``--patients`` file or a seeded ``--sample``) with the
notes the prompts show; :func:`generate_dataset` asks the question step then the choices step for
each (patient, repeat), parses and checks the replies, and writes ``generated.jsonl``,
``review.csv`` and ``build_summary.json``.

Every model call goes through a :class:`~clinieval.records.cache.RequestCache` in ``OUT/cache.sqlite``
(via :meth:`clinieval.engine.runner.CachedCalls.through`), so a killed build resumes without repeating a
finished call and a complete rerun makes none. A reply that cannot be parsed is kept with the
reason (``generated.jsonl``, ``build_summary.json``): never dropped silently, never guessed.
Patient text is logged at DEBUG only.
"""

from __future__ import annotations

import logging
import random
import re
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TypeVar

from clinieval.benchmarks.ehrnoteqa.build.checks import CHECKS, check_item, failed_checks
from clinieval.benchmarks.ehrnoteqa.build.parsing import (
    ChoicesReply,
    QuestionReply,
    ReplyParseError,
    parse_choices_reply,
    parse_question_reply,
)
from clinieval.benchmarks.ehrnoteqa.build.prompts import choices_messages, question_messages
from clinieval.benchmarks.ehrnoteqa.build.review import (
    REVIEW_FILE,
    REVIEWER_COLUMNS,
    review_has_input,
    write_review,
)
from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS
from clinieval.ehr.notes import (
    DischargeNote,
    format_notes,
    iter_discharge_notes,
    read_discharge_notes,
    select_notes,
)
from clinieval.engine.runner import CachedCalls, CallTally, ProgressBar, cached_generate, map_each
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, atomic_write_jsonl
from clinieval.models.base import Model
from clinieval.records.cache import RequestCache
from clinieval.types import JSON, GenerationConfig, Message, ModelOutput

log = logging.getLogger(__name__)

__all__ = [
    "CACHE_FILE",
    "DEFAULT_MAX_TOKENS",
    "GENERATED_FILE",
    "SUMMARY_FILE",
    "BuildResult",
    "BuildSettings",
    "GeneratedItem",
    "Patient",
    "StepRecord",
    "generate_dataset",
    "load_patients",
    "read_patient_ids",
    "sample_patient_ids",
    "tiny_model_warning",
]

GENERATED_FILE = "generated.jsonl"
SUMMARY_FILE = "build_summary.json"
CACHE_FILE = "cache.sqlite"

DEFAULT_MAX_TOKENS = 1024
"""Room for a step-2 reply: five options and a rationale for each (about 300-600 tokens)."""

_CACHE_KIND = "ehrnoteqa_build"


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


def _prepare_out(out: Path, settings: BuildSettings) -> None:
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} is a file; give a folder for the build")
    review = out / REVIEW_FILE
    if not settings.overwrite_review and review_has_input(review):
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
    tally = _Tally()
    cache = RequestCache(dest / CACHE_FILE)
    calls = CachedCalls(model, cache)
    bar = ProgressBar(opts.progress, len(units), 0, f"ehrnoteqa build {model.name}")
    start = time.perf_counter()

    async def build_one(unit: tuple[int, int]) -> GeneratedItem:
        index, repeat = unit
        return await _build_item(calls, patients[index], repeat, opts, tally)

    try:
        items = await map_each(units, opts.concurrency or model.max_concurrency, build_one, bar)
    finally:
        cache.close()
    summary = _summarize(patients, items, model, opts, tally, time.perf_counter() - start, warning)
    generated, review, summary_path = dest / GENERATED_FILE, dest / REVIEW_FILE, dest / SUMMARY_FILE
    atomic_write_jsonl(generated, (i.to_dict() for i in items))
    write_review(review, (i.review_row() for i in items if i.status == "ok"))
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
