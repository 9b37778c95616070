"""LLM-as-judge over a persisted run: repeats, one request cache, failures kept as data.

Judging is a step of its own. It reads a finished run directory (never the model under test),
asks a judge model about each recorded answer ``repeats`` times, and writes
``RUN/scores/<rubric>.jsonl`` plus ``RUN/scores/<rubric>.summary.json``. Swapping the judge or
the rubric, or adding repeats, only asks what has not been asked before:

* every judge request goes through the run's request cache (``RUN/cache.sqlite``), keyed by
  the judge's identity, the generation settings with the rubric's name, the full judge prompt
  and the repeat index — so repeats are distinct requests, a killed judging run resumes without
  repeating a finished request, and a second complete run makes none at all;
* a judge call that fails, or whose output the rubric cannot read, is recorded as unscored and
  counted — never as "no", 0 or the worst score; an item whose own answer failed is not sent to
  the judge at all and keeps the answer's error kind.

What is judged and how the reply is read is a :class:`Rubric` (prompt + parser), so MedAlign's
clinician criteria, EHRNoteQA's yes/no judge and AutoMedEval-style 1-5 scores share this core.
The parsers below are the building blocks rubrics compose.
"""

from __future__ import annotations

import ast
import json
import logging
import math
import re
import statistics
import time
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, atomic_write_text
from clinieval.models.base import Model
from clinieval.records import SampleRecord
from clinieval.runner import CachedCalls, CallTally, ProgressBar, cached_generate, run_each
from clinieval.runs import SCORES, RunDir
from clinieval.types import JSON, GenerationConfig, Message, ModelOutput, Score

log = logging.getLogger(__name__)

DEFAULT_JUDGE_GENERATION = GenerationConfig(temperature=0.0, seed=0, max_tokens=512)
"""Greedy and seeded: as reproducible as the judge allows (hosted judges still vary, hence repeats)."""

RAW_LIMIT = 2000
"""Characters of each raw judge reply kept in the scores file (the full text is in the cache)."""

UNPARSED = "unparsed"
"""Per-repeat error kind of a reply the rubric could not read."""

TINY_JUDGE_WARNING = (
    "{name} is a tiny embedded model: as a judge it exercises the judging code with real text, "
    "but its verdicts are not credible clinical judgements. Judge with a capable model behind an "
    "endpoint for real numbers."
)

_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


# --------------------------------------------------------------------------------------------
# Verdicts and rubrics


class VerdictParseError(ValueError):
    """The judge's reply could not be read as a verdict.

    Not a UserError: nothing the user typed is wrong. judge_run records the repeat as unscored
    with this message, so an unreadable reply is counted, never read as "no".
    """


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a rubric read from one judge reply; the raw reply is kept by the caller."""

    values: dict[str, float]
    rationale: str | None = None


class Rubric(Protocol):
    """A judging protocol: the prompt for one recorded answer and the parser for the reply."""

    @property
    def name(self) -> str:
        """File name of the scores (``scores/NAME.jsonl``) and part of every judge cache key."""
        ...

    @property
    def fields(self) -> tuple[str, ...]:
        """The numeric fields every verdict carries; the first is the score's ``value``."""
        ...

    def messages(self, record: SampleRecord) -> list[Message]:
        """The judge prompt for the answer in ``record`` (called only when the answer exists)."""
        ...

    def parse(self, text: str) -> Verdict:
        """Read a judge reply; raise VerdictParseError when it cannot be read."""
        ...


# --------------------------------------------------------------------------------------------
# Parsers rubrics compose


def _matching_brace(text: str, start: int) -> int | None:
    """Index of the ``}`` closing the ``{`` at ``start``; braces inside quoted strings are skipped."""
    depth = 0
    quote: str | None = None
    escaped = False
    for i in range(start, len(text)):
        ch = text[i]
        if quote is not None:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote = None
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i
    return None


def _balanced_objects(text: str) -> Iterator[str]:
    """Every balanced ``{...}`` span in reading order (an enclosing span before those inside it)."""
    start = text.find("{")
    while start != -1:
        end = _matching_brace(text, start)
        if end is not None:
            yield text[start : end + 1]
        start = text.find("{", start + 1)


def _as_mapping(span: str) -> dict[str, Any] | None:
    """A span read as a JSON object, or as a Python dict literal (single quotes, True/False)."""
    try:
        value = json.loads(span, strict=False)  # strict=False: raw newlines inside strings
    except json.JSONDecodeError:
        if len(span) > 20_000:
            return None
        try:
            value = ast.literal_eval(span)
        except (ValueError, SyntaxError, MemoryError, RecursionError):
            return None
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        return None
    return value


def _norm_key(key: str) -> str:
    return key.strip().lower()


def extract_json_object(text: str, required: Sequence[str] = ()) -> dict[str, Any]:
    """The first object in ``text`` that parses and has every ``required`` key (any case).

    Judges wrap JSON in ```json fences, prose before and after, or echo the requested format
    first; scanning every balanced ``{...}`` in order and taking the first complete one reads all
    of these. A Python-style dict (single quotes, True/False) is accepted as well.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output")
    wanted = {_norm_key(k) for k in required}
    found_any = False
    for span in _balanced_objects(text):
        obj = _as_mapping(span)
        if obj is None:
            continue
        found_any = True
        if wanted <= {_norm_key(k) for k in obj}:
            return obj
    if not found_any:
        raise VerdictParseError("no JSON object in the output")
    raise VerdictParseError(f"no JSON object with all of {', '.join(required)}")


def json_field(obj: Mapping[str, Any], name: str) -> Any:
    """``obj[name]`` matched case-insensitively; VerdictParseError when absent."""
    wanted = _norm_key(name)
    for key, value in obj.items():
        if _norm_key(key) == wanted:
            return value
    raise VerdictParseError(f"missing field {name!r}")


_TRUE = frozenset({"true", "yes", "y", "1"})
_FALSE = frozenset({"false", "no", "n", "0"})


def as_bool(value: Any, name: str) -> bool:
    """A boolean verdict field: true/false, 1/0, or the strings yes/no/true/false (any case)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        word = value.strip().strip(".!*`'\" ").lower()
        if word in _TRUE:
            return True
        if word in _FALSE:
            return False
    raise VerdictParseError(f"field {name!r} is not true/false: {str(value)[:40]!r}")


_NUMBER = re.compile(r"^\s*(-?\d+(?:\.\d+)?)\s*(?:/\s*(\d+(?:\.\d+)?))?\s*$")


def check_range(value: float, low: float, high: float, name: str, *, integral: bool = True) -> float:
    """``value`` if it lies in [low, high] (and is whole when ``integral``); never clipped."""
    if not math.isfinite(value):
        raise VerdictParseError(f"{name} is not a finite number")
    if integral and value != int(value):
        raise VerdictParseError(f"{name} {value:g} is not a whole number")
    if not low <= value <= high:
        raise VerdictParseError(f"{name} {value:g} is outside {low:g}-{high:g}")
    return float(value)


def as_score(value: Any, low: float, high: float, name: str, *, integral: bool = True) -> float:
    """A numeric verdict field: a number, or a string such as ``"4"`` or ``"4/5"``, in range."""
    if isinstance(value, bool):
        raise VerdictParseError(f"field {name!r} is a boolean, not a score")
    if isinstance(value, int | float):
        return check_range(float(value), low, high, name, integral=integral)
    if isinstance(value, str):
        m = _NUMBER.match(value)
        if m:
            if m.group(2) is not None and float(m.group(2)) != high:
                raise VerdictParseError(f"{name} {value.strip()!r} is not out of {high:g}")
            return check_range(float(m.group(1)), low, high, name, integral=integral)
    raise VerdictParseError(f"field {name!r} is not a number: {str(value)[:40]!r}")


_MARKUP = re.compile(r"[*_`#>\"']+")
_VERDICT_LABEL = re.compile(
    r"^\s*(?:final\s+)?(?:answer|verdict|conclusion|judg(?:e)?ment|decision|response)\s*[:\-]\s*(.*)$",
    re.IGNORECASE,
)
_FIRST_WORD = re.compile(r"^\W*([A-Za-z]+)")


def _yes_no_word(text: str) -> bool | None:
    m = _FIRST_WORD.match(_MARKUP.sub("", text))
    if m is None:
        return None
    word = m.group(1).lower()
    return True if word == "yes" else False if word == "no" else None


def parse_yes_no(text: str) -> bool:
    """A yes/no verdict: ``Yes.``, ``no, because …``, ``**Yes**``, ``Answer: no`` and the like.

    Read from the reply's first word, then from labelled lines (``Verdict: yes``) and lines that
    are only yes or no. A "no" inside a sentence is never read as a verdict, and replies that
    state both verdicts are a parse failure rather than a guess.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output")
    first = _yes_no_word(text)
    if first is not None:
        return first
    found: set[bool] = set()
    for line in text.splitlines():
        m = _VERDICT_LABEL.match(_MARKUP.sub("", line))
        candidate = m.group(1) if m else line
        if m or re.fullmatch(r"\W*(yes|no)\W*", candidate, re.IGNORECASE):
            verdict = _yes_no_word(candidate)
            if verdict is not None:
                found.add(verdict)
    if len(found) == 1:
        return found.pop()
    if found:
        raise VerdictParseError("the output says both yes and no")
    raise VerdictParseError("no yes/no verdict in the output")


_SCORE_LABEL = (
    r"\b{label}\b\s*(?:is|of|[:=])?\s*[*_`]*\s*(-?\d+(?:\.\d+)?)(?:\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?))?"
)
_FRACTION = re.compile(r"(?<![\d.])(-?\d+(?:\.\d+)?)\s*(?:/|out\s+of)\s*(\d+(?:\.\d+)?)", re.IGNORECASE)


def parse_score(text: str, low: float, high: float, *, label: str = "score", integral: bool = True) -> float:
    """A numeric verdict: ``Score: 4``, ``score = 3/5``, ``4 out of 5`` or ``4/5``, in range.

    The labelled form wins over a bare fraction; a fraction out of anything but ``high`` and a
    value outside [low, high] are parse failures (a 7 on a 1-5 scale is a misread, not a 5).
    """
    if not text.strip():
        raise VerdictParseError("empty judge output")
    m = re.search(_SCORE_LABEL.format(label=re.escape(label)), text, re.IGNORECASE)
    if m is None:
        m = _FRACTION.search(text)
        if m is None:
            raise VerdictParseError(f"no {label} in the output")
    if m.group(2) is not None and float(m.group(2)) != high:
        raise VerdictParseError(f"{label} {m.group(0).strip()!r} is not out of {high:g}")
    return check_range(float(m.group(1)), low, high, label, integral=integral)


def labelled_text(text: str, label: str) -> str | None:
    """Everything after ``LABEL:`` on its line and below (e.g. a ``Reasoning:`` section)."""
    # markup closing the label ("**Reasoning:** ...") is not part of the text
    m = re.search(rf"(?im)^[\W_]*{re.escape(label)}[\W_]*?\s*:\s*[*_`]*\s*", text)
    if m is None:
        return None
    rest = text[m.end() :].strip()
    return rest or None


# --------------------------------------------------------------------------------------------
# Running a judge over a run


@dataclass(slots=True)
class JudgeSummary:
    """Token and call accounting of one judging pass (``scores/NAME.summary.json``).

    ``requests`` + ``cache_hits`` = ``judge_calls``; the token totals count every judge reply the
    scores rest on (cached or not), the ``new_`` ones only those paid for in this pass.
    """

    rubric: str
    fields: list[str]
    judge: str
    judge_identity: JSON
    generation: JSON
    repeats: int
    items: int
    judged: int
    scored: int
    unscored: int
    answer_failures: dict[str, int]
    judge_calls: int
    parsed: int
    parse_failures: int
    judge_errors: dict[str, int]
    requests: int
    cache_hits: int
    prompt_tokens: int
    completion_tokens: int
    new_prompt_tokens: int
    new_completion_tokens: int
    elapsed_s: float
    warning: str | None = None

    def to_dict(self) -> JSON:
        return asdict(self)


@dataclass(slots=True)
class JudgeResult:
    """Scores keyed by (sample_id, repeat), the accounting, and where both were written."""

    scores: dict[tuple[str, int], Score]
    summary: JudgeSummary
    scores_path: Path
    summary_path: Path

    def describe(self) -> str:
        """One line for a person: how much was scored, what the judge could not read, the cache."""
        s = self.summary
        return (
            f"{s.scored}/{s.items} answers scored; {s.parse_failures} unparsed judge replies, "
            f"{s.requests} requests, {s.cache_hits} cache hits -> {self.scores_path}"
        )


@dataclass(slots=True)
class _Repeat:
    """One judge repeat of one item, as stored in ``metadata.judge_repeats``."""

    repeat: int
    values: dict[str, float] | None = None
    rationale: str | None = None
    error_kind: str | None = None
    parse_error: str | None = None
    raw: str = ""
    finish_reason: str | None = None

    def to_dict(self) -> JSON:
        return {
            "repeat": self.repeat,
            "values": self.values,
            "rationale": self.rationale,
            "error_kind": self.error_kind,
            "parse_error": self.parse_error,
            "raw": self.raw[:RAW_LIMIT],
            "finish_reason": self.finish_reason,
        }


def scores_path(run: RunDir, name: str) -> Path:
    return run.path / SCORES / f"{name}.jsonl"


def summary_path(run: RunDir, name: str) -> Path:
    return run.path / SCORES / f"{name}.summary.json"


def tiny_judge_warning(judge: Model) -> str | None:
    """The not-credible note when ``judge`` is one of the tiny embedded models, else None."""
    from clinieval.models.catalog import is_embedded

    return TINY_JUDGE_WARNING.format(name=judge.name) if is_embedded(judge) else None


def answer_failure(record: SampleRecord) -> str | None:
    """Why the record has no answer to judge (``answer_failed:<kind>``), or None if it has one."""
    out = record.output
    if out is None:
        return "answer_failed:no_output"
    if out.error_kind is not None:
        return f"answer_failed:{out.error_kind.value}"
    return None


def _check_arguments(run: RunDir, rubric: Rubric, repeats: int) -> list[SampleRecord]:
    if repeats < 1:
        raise UserError(f"judge repeats must be at least 1, not {repeats}")
    if not rubric.fields:
        raise UserError(f"rubric {rubric.name}: declares no fields")
    if not _SAFE_NAME.match(rubric.name):
        raise UserError(f"rubric name {rubric.name!r}: use letters, digits, '.', '_' or '-' only")
    records = run.records()
    if not records:
        raise UserError(f"{run.path}: the run has no finished samples to judge")
    if all(r.output is None for r in records):
        raise UserError(f"{run.path}: the run holds no generated answers to judge; run it with generation")
    return records


def _read_reply(rubric: Rubric, repeat: int, out: ModelOutput) -> _Repeat:
    """Turn one judge reply into a repeat entry; only VerdictParseError means "unreadable"."""
    entry = _Repeat(repeat=repeat, raw=out.text, finish_reason=out.finish_reason)
    if out.error_kind is not None:
        entry.error_kind = out.error_kind.value
        return entry
    try:
        verdict = rubric.parse(out.text)
    except VerdictParseError as e:
        entry.error_kind, entry.parse_error = UNPARSED, str(e)
        return entry
    missing = [f for f in rubric.fields if f not in verdict.values]
    if missing:  # a bug in the rubric, not in the judge's reply: fail loudly
        raise ValueError(f"rubric {rubric.name}: parse returned no value for {', '.join(missing)}")
    entry.values = {k: float(v) for k, v in verdict.values.items()}
    entry.rationale = verdict.rationale
    return entry


def _item_error(entries: Sequence[_Repeat]) -> str:
    """Why no repeat of an item parsed: the most common cause, named for the summary's columns."""
    causes = Counter(
        "judge_unparsed" if e.error_kind == UNPARSED else f"judge_failed:{e.error_kind}" for e in entries
    )
    return causes.most_common(1)[0][0]


def _stats(entries: Sequence[_Repeat], fields: Sequence[str]) -> tuple[JSON, JSON]:
    """Mean and sample SD (None below two parsed repeats) of each field over parsed repeats."""
    mean: JSON = {}
    sd: JSON = {}
    for name in fields:
        xs = [e.values[name] for e in entries if e.values is not None and name in e.values]
        mean[name] = statistics.fmean(xs) if xs else None
        sd[name] = statistics.stdev(xs) if len(xs) >= 2 else None
    return mean, sd


def _item_score(record: SampleRecord, entries: list[_Repeat], fields: Sequence[str], judge: JSON) -> Score:
    """The score line of one (sample, repeat): primary mean, every field's mean and SD, each repeat."""
    failed = answer_failure(record)
    parsed = [e for e in entries if e.values is not None]
    mean, sd = _stats(entries, fields)
    metadata: JSON = {
        **judge,
        "judge_repeats": [e.to_dict() for e in sorted(entries, key=lambda e: e.repeat)],
        "mean": mean,
        "sd": sd,
        "parsed": len(parsed),
        "failed": len(entries) - len(parsed),
    }
    if failed is not None:
        metadata["error_kind"] = failed
    elif not parsed:
        metadata["error_kind"] = _item_error(entries)
    rationale = next((e.rationale for e in sorted(parsed, key=lambda e: e.repeat) if e.rationale), None)
    answer = None if record.output is None or failed else record.output.text.strip()
    return Score(value=mean[fields[0]], answer=answer, explanation=rationale, metadata=metadata)


def _repeat_config(generation: GenerationConfig, repeat: int, seed_per_repeat: bool) -> GenerationConfig:
    if seed_per_repeat and generation.seed is not None:
        return replace(generation, seed=generation.seed + repeat)
    return generation


async def judge_run(
    run: RunDir,
    judge: Model,
    rubric: Rubric,
    *,
    repeats: int = 5,
    generation: GenerationConfig | None = None,
    concurrency: int | None = None,
    progress: bool = True,
    limit: int | None = None,
    seed_per_repeat: bool = False,
) -> JudgeResult:
    """Judge every recorded answer of ``run`` ``repeats`` times; write and return the scores.

    ``limit`` judges only the first N records (latest per (sample, repeat), in run order).
    ``seed_per_repeat`` gives repeat r the seed ``seed + r``: with temperature > 0 on a seeded
    backend the repeats then differ, where otherwise they would be the same draw.
    """
    config = generation or DEFAULT_JUDGE_GENERATION
    records = _check_arguments(run, rubric, repeats)[:limit]
    warning = tiny_judge_warning(judge)
    if warning:
        log.warning("%s", warning)
    judged = [i for i, r in enumerate(records) if answer_failure(r) is None]
    prompts = {i: rubric.messages(records[i]) for i in judged}
    units = [(i, r) for i in judged for r in range(repeats)]
    entries: dict[int, list[_Repeat]] = {i: [] for i in range(len(records))}
    tally = CallTally()
    cache = run.cache()
    calls = CachedCalls(judge, cache)
    bar = ProgressBar(progress, len(units), 0, f"judge {judge.name}")
    start = time.perf_counter()

    async def judge_one(unit: tuple[int, int]) -> None:
        index, repeat = unit
        log.debug("judge %s repeat %d prompt: %r", records[index].key, repeat, prompts[index])
        repeat_config = _repeat_config(config, repeat, seed_per_repeat)
        # runner.CachedCalls holds the one caching rule (transient failures are not stored) for
        # every model call; a judge request is keyed by its settings and rubric name too.
        settings = {**repeat_config.to_dict(), "rubric": rubric.name}
        messages = prompts[index]
        out, asked = await cached_generate(calls, "judge", settings, messages, repeat, repeat_config)
        tally.add(out, asked)
        entries[index].append(_read_reply(rubric, repeat, out))
        bar.advance()

    try:
        with bar:
            await run_each(units, concurrency or judge.max_concurrency, judge_one)
    finally:
        cache.close()
    elapsed = time.perf_counter() - start
    judge_meta: JSON = {"judge": {"name": judge.name, "identity": judge.identity}}
    if warning:
        judge_meta["judge_warning"] = warning
    scores = {
        rec.key: _item_score(rec, entries[i], rubric.fields, judge_meta) for i, rec in enumerate(records)
    }
    summary = _summarize(rubric, judge, config, repeats, records, entries, scores, tally, elapsed, warning)
    return _write(run, rubric.name, scores, summary)


def _summarize(
    rubric: Rubric,
    judge: Model,
    config: GenerationConfig,
    repeats: int,
    records: Sequence[SampleRecord],
    entries: Mapping[int, Sequence[_Repeat]],
    scores: Mapping[tuple[str, int], Score],
    tally: CallTally,
    elapsed: float,
    warning: str | None,
) -> JudgeSummary:
    answer_failures = Counter(k for r in records if (k := answer_failure(r)) is not None)
    replies = [e for es in entries.values() for e in es]
    errors = Counter(e.error_kind for e in replies if e.error_kind not in (None, UNPARSED))
    scored = sum(s.value is not None for s in scores.values())
    return JudgeSummary(
        rubric=rubric.name,
        fields=list(rubric.fields),
        judge=judge.name,
        judge_identity=judge.identity,
        generation=config.to_dict(),
        repeats=repeats,
        items=len(records),
        judged=len(records) - sum(answer_failures.values()),
        scored=scored,
        unscored=len(records) - scored,
        answer_failures=dict(answer_failures),
        judge_calls=len(replies),
        parsed=sum(e.values is not None for e in replies),
        parse_failures=sum(e.error_kind == UNPARSED for e in replies),
        judge_errors={str(k): v for k, v in errors.items()},
        requests=tally.requests,
        cache_hits=tally.cache_hits,
        prompt_tokens=tally.prompt_tokens,
        completion_tokens=tally.completion_tokens,
        new_prompt_tokens=tally.new_prompt_tokens,
        new_completion_tokens=tally.new_completion_tokens,
        elapsed_s=round(elapsed, 3),
        warning=warning,
    )


def _write(
    run: RunDir, name: str, scores: dict[tuple[str, int], Score], summary: JudgeSummary
) -> JudgeResult:
    """Both files atomically: a judging run killed before this point leaves the old ones intact."""
    lines = [
        json.dumps({"sample_id": sid, "repeat": rep, **score.to_dict()}, ensure_ascii=False)
        for (sid, rep), score in scores.items()
    ]
    path, spath = scores_path(run, name), summary_path(run, name)
    atomic_write_text(path, "\n".join(lines) + "\n")
    atomic_write_json(spath, summary.to_dict())
    log.info(
        "judged %d items x %d repeats with %s: %d requests, %d cache hits, %d unparsed",
        summary.judged,
        summary.repeats,
        summary.judge,
        summary.requests,
        summary.cache_hits,
        summary.parse_failures,
    )
    return JudgeResult(scores=scores, summary=summary, scores_path=path, summary_path=spath)


def read_judge_scores(run: RunDir, name: str, field: str | None = None) -> dict[tuple[str, int], Score]:
    """Read ``scores/NAME.jsonl`` back as ``{(sample_id, repeat): Score}``.

    ``field`` picks another of the rubric's fields as the value (its mean over parsed repeats),
    so e.g. a ``judge_correct`` and a ``judge_score`` column both come from one judged file.
    """
    path = scores_path(run, name)
    if not path.is_file():
        raise UserError(f"{path}: no judge scores named {name!r}; judge the run first")
    out: dict[tuple[str, int], Score] = {}
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            score = Score.from_dict(d)
            key = (str(d["sample_id"]), int(d["repeat"]))
        except (json.JSONDecodeError, KeyError, TypeError, ValueError) as e:
            raise UserError(f"{path}:{n}: unreadable score line ({e})") from None
        if field is not None:
            means = score.metadata.get("mean") or {}
            if field not in means:
                raise UserError(f"{path}:{n}: no field {field!r}; it has {', '.join(means) or 'none'}")
            value = means[field]
            score = replace(score, value=None if value is None else float(value))
        out[key] = score
    return out


__all__ = [
    "DEFAULT_JUDGE_GENERATION",
    "JudgeResult",
    "JudgeSummary",
    "Rubric",
    "Verdict",
    "VerdictParseError",
    "answer_failure",
    "as_bool",
    "as_score",
    "check_range",
    "extract_json_object",
    "json_field",
    "judge_run",
    "labelled_text",
    "parse_score",
    "parse_yes_no",
    "read_judge_scores",
    "scores_path",
    "summary_path",
    "tiny_judge_warning",
]
