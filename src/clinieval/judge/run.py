"""Running a judge over a persisted run: repeats, one request cache, failures kept as data.

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

What is judged and how the reply is read is a :class:`~clinieval.judge.rubric.Rubric`; this
module runs one over a run, does the accounting, and reads the scores back.
"""

from __future__ import annotations

import json
import logging
import re
import statistics
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from clinieval.engine.runner import CachedCalls, CallTally, ProgressBar, cached_generate, map_each
from clinieval.engine.server_fit import fit_concurrency, proxies_used
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, atomic_write_jsonl
from clinieval.judge.quoted import quoted_material, read_masked
from clinieval.judge.rubric import Rubric, VerdictParseError, strip_echo
from clinieval.models.base import Model
from clinieval.models.fingerprint import check_unchanged, portable_spec, resolve_mode
from clinieval.models.fingerprint import same_model as same_fingerprint
from clinieval.models.fingerprint import take as take_fingerprint
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.records.runs import SCORES, RunDir
from clinieval.records.sample_record import SampleRecord
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
    identical_repeats: int = 0
    """Items whose every repeat got the same reply (with 2+ replies): repeats that add cost only."""
    self_judged: bool = False
    """The judge is the model whose answers it judged (:func:`same_model`)."""
    unparsed_at_limit: int = 0
    """Unparsed replies that stopped unfinished (``finish_reason`` "length": the reply limit, or an
    embedded judge's context filled up): the judge may have been cut off before its verdict, which
    more room fixes, unlike a judge that cannot follow the format."""
    unparsed_reasons: dict[str, int] = field(default_factory=dict)
    """Unparsed replies by why (echo, no_verdict, conflict, decimal, ...: judge/verdict.py)."""
    proxies: list[JSON] = field(default_factory=list)
    """The proxies the judge's requests went through (server_fit.proxies_used; empty: direct)."""

    @property
    def failed_calls(self) -> int:
        """Judge calls that returned no reply (timeouts, refusals, a prompt too long, ...)."""
        return sum(self.judge_errors.values())

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
        """One line for a person: how much was scored, which judge calls failed or could not be
        read (a failed call is never hidden behind the unparsed count), the cache."""
        s = self.summary
        return (
            f"{s.scored}/{s.items} answers scored; {s.failed_calls} failed judge calls, "
            f"{s.parse_failures} unparsed judge replies, "
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
    parse_reason: str | None = None
    """Why the reply was unparsed, as a kind (:data:`clinieval.judge.verdict.Reason`)."""

    def to_dict(self) -> JSON:
        return {
            "repeat": self.repeat,
            "values": self.values,
            "rationale": self.rationale,
            "error_kind": self.error_kind,
            "parse_error": self.parse_error,
            "parse_reason": self.parse_reason,
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


SELF_JUDGING_WARNING = (
    "{name} is judging answers written by the same model ({model}): a judge that grades its own "
    "answers tends to favour them, so its scores for this run are not comparable with other models'. "
    "Judge with a model that is not under test."
)


def same_model(a: JSON, b: JSON) -> bool:
    """Whether two model identities name the same model, whatever serves it: the same weights
    (an embedded model's fingerprint) or the same model name behind an OpenAI-compatible API (one
    name on two servers is still one model). Serving settings (context size, template) don't count."""
    if a.get("backend") != b.get("backend"):
        return False
    if a.get("backend") == "llamacpp":
        return bool(a.get("fingerprint")) and a.get("fingerprint") == b.get("fingerprint")
    return bool(a.get("model")) and a.get("model") == b.get("model")


def self_judging_warning(run: RunDir, judge: Model, judge_fingerprint: JSON | None = None) -> str | None:
    """The warning when ``run``'s answers come from the model that judges them, else None: the
    same identity, or (``judge_fingerprint``) the same model fingerprint as the run recorded, which
    finds one model behind two addresses or aliases (models/fingerprint.py)."""
    manifest = run.manifest()
    model = (manifest.get("spec") or {}).get("model")
    if not isinstance(model, dict):  # a run made without a model (e.g. answers brought as a file)
        return None
    identity = model.get("identity")
    same = isinstance(identity, dict) and same_model(identity, judge.identity)
    if not same and not same_fingerprint(manifest.get("model_fingerprint"), judge_fingerprint):
        return None
    return SELF_JUDGING_WARNING.format(name=judge.name, model=model.get("spec") or "the model under test")


async def judge_fingerprint(run: RunDir, judge: Model, rubric: str, mode: str | None) -> JSON | None:
    """The judge's fingerprint, compared with the one recorded when this judge (the same identity,
    wherever served) last judged ``run`` under ``rubric``: its replies are cached under that
    identity, so another model behind it is refused under strict. Recorded in the manifest."""
    chosen = resolve_mode(mode)
    new = await take_fingerprint(judge, chosen)
    if new is None:
        return None
    data = run.manifest()
    judges = data.setdefault("judge_fingerprints", {})
    recorded = judges.get(rubric)
    identity = portable_spec({"model": {"identity": judge.identity}})["model"]["identity"]
    if isinstance(recorded, dict) and recorded.get("identity") == identity:
        where = new.get("url") or judge.name
        new = await check_unchanged(
            judge,
            recorded.get("fingerprint"),
            new,
            chosen,
            f"the judge behind {where} changed since it judged {run.path} with rubric {rubric}",
            "Serve the new judge under another model name (its replies are cached apart)",
        )
        judges[rubric] = {**recorded, "last": new}
    else:
        judges[rubric] = {"identity": identity, "fingerprint": new}
    atomic_write_json(run.manifest_path, data)
    return new


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


def _read_reply(
    rubric: Rubric, repeat: int, out: ModelOutput, prompt: Sequence[Message], quoted: Sequence[str] = ()
) -> _Repeat:
    """Turn one judge reply into a repeat entry; only VerdictParseError means "unreadable".
    An echo of the prompt's last message is cut off, and copies of the ``quoted`` material (the
    answer judged, its prompt, the references: :mod:`clinieval.judge.quoted`) are masked, before
    the rubric reads the reply."""
    entry = _Repeat(repeat=repeat, raw=out.text, finish_reason=out.finish_reason)
    if out.error_kind is not None:
        entry.error_kind = out.error_kind.value
        return entry
    try:
        reply = strip_echo(out.text, prompt[-1].content) if prompt else out.text
        verdict = read_masked(rubric, reply, quoted, [m.content for m in prompt])
    except VerdictParseError as e:
        entry.error_kind, entry.parse_error, entry.parse_reason = UNPARSED, str(e), e.reason
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
    seed_per_repeat: bool | None = None,
    fingerprint: str | None = None,
) -> JudgeResult:
    """Judge every recorded answer of ``run`` ``repeats`` times; write and return the scores.

    ``limit`` judges only the first N records (latest per (sample, repeat), in run order).
    ``seed_per_repeat`` gives repeat r the seed ``seed + r`` (default: whenever ``repeats`` > 1):
    with temperature > 0 on a seeded backend the repeats then differ, where one seed would make
    them the same draw. At temperature 0 a local judge still answers every repeat alike; the
    summary counts such items and warns.
    """
    config = generation or DEFAULT_JUDGE_GENERATION
    if seed_per_repeat is None:
        seed_per_repeat = repeats > 1
    records = _check_arguments(run, rubric, repeats)[:limit]
    judged = [i for i, r in enumerate(records) if answer_failure(r) is None]
    # every prompt first: a sample the rubric cannot judge is one error, before any warning or call
    prompts = {i: rubric.messages(records[i]) for i in judged}
    warning = tiny_judge_warning(judge)
    if warning:
        log.warning("%s", warning)
    judge_fp = await judge_fingerprint(run, judge, rubric.name, fingerprint)  # --fingerprint
    self_judged = self_judging_warning(run, judge, judge_fp)
    if self_judged:
        log.warning("%s", self_judged)
        warning = f"{warning} {self_judged}" if warning else self_judged
    units = [(i, r) for i in judged for r in range(repeats)]
    entries: dict[int, list[_Repeat]] = {i: [] for i in range(len(records))}
    tally = CallTally()
    cache = run.cache()
    calls = CachedCalls(judge, cache)
    bar = ProgressBar(progress, len(units), 0, f"judge {judge.name}")
    start = time.perf_counter()

    async def judge_one(unit: tuple[int, int]) -> tuple[int, _Repeat]:
        index, repeat = unit
        log.debug("judge %s repeat %d prompt: %r", records[index].key, repeat, prompts[index])
        repeat_config = _repeat_config(config, repeat, seed_per_repeat)
        # runner.CachedCalls holds the one caching rule (transient failures are not stored) for
        # every model call; a judge request is keyed by its settings and rubric name too.
        settings = {**repeat_config.to_dict(), "rubric": rubric.name}
        messages = prompts[index]
        out, asked = await cached_generate(calls, "judge", settings, messages, repeat, repeat_config)
        tally.add(out, asked)
        return index, _read_reply(rubric, repeat, out, messages, quoted_material(records[index]))

    try:
        for index, entry in await map_each(units, concurrency or judge.max_concurrency, judge_one, bar):
            entries[index].append(entry)
    finally:
        cache.close()
    elapsed = time.perf_counter() - start
    judge_meta: JSON = {
        "judge": {"name": judge.name, "identity": judge.identity, "self_judged": bool(self_judged)}
    }
    if warning:
        judge_meta["judge_warning"] = warning
    scores = {
        rec.key: _item_score(rec, entries[i], rubric.fields, judge_meta) for i, rec in enumerate(records)
    }
    summary = _summarize(rubric, judge, config, repeats, records, entries, scores, tally, elapsed, warning)
    summary.self_judged = bool(self_judged)
    return _write(run, rubric.name, scores, summary)


async def judge_folder(
    run: RunDir,
    judge_spec: str,
    rubric: Rubric,
    *,
    backend: BackendOptions,
    repeats: int = 5,
    generation: GenerationConfig | None = None,
    concurrency: int | None = None,
    limit: int | None = None,
    progress: bool = True,
) -> JudgeResult:
    """:func:`judge_run` over ``run`` with the judge ``judge_spec`` names: the judge is checked
    before any request and closed afterwards, whatever happens."""
    judge = parse_model_spec(judge_spec, backend)
    try:
        await judge.check()
        # a one-slot judge server gets one request at a time, as a run's model does (with a note)
        for note in fit_concurrency(judge, typed=concurrency):
            log.warning("%s", note)
        return await judge_run(
            run,
            judge,
            rubric,
            repeats=repeats,
            generation=generation,
            concurrency=concurrency,
            progress=progress,
            limit=limit,
            fingerprint=backend.fingerprint,
        )
    finally:
        await judge.aclose()


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
    identical = identical_repeat_items(entries)
    if identical and repeats > 1:
        same = (
            f"{identical} of {sum(len(es) > 1 for es in entries.values())} items got the same reply in "
            f"every repeat (temperature {config.temperature}): those repeats add cost, not information; "
            "raise the judge temperature for a spread"
        )
        warning = f"{warning} {same}" if warning else same
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
        **asdict(tally),  # requests, cache_hits and the token totals, under the same names
        elapsed_s=round(elapsed, 3),
        warning=warning,
        identical_repeats=identical,
        unparsed_at_limit=sum(e.error_kind == UNPARSED and e.finish_reason == "length" for e in replies),
        unparsed_reasons=dict(Counter(e.parse_reason for e in replies if e.parse_reason)),
        proxies=proxies_used(judge),
    )


def identical_repeat_items(entries: Mapping[int, Sequence[_Repeat]]) -> int:
    """Items with two or more answered repeats whose replies are all the same text."""
    count = 0
    for es in entries.values():
        texts = [e.raw for e in es if e.error_kind in (None, UNPARSED)]
        if len(texts) > 1 and len(set(texts)) == 1:
            count += 1
    return count


def _write(
    run: RunDir, name: str, scores: dict[tuple[str, int], Score], summary: JudgeSummary
) -> JudgeResult:
    """Both files atomically: a judging run killed before this point leaves the old ones intact."""
    path, spath = scores_path(run, name), summary_path(run, name)
    atomic_write_jsonl(
        path, ({"sample_id": sid, "repeat": rep, **score.to_dict()} for (sid, rep), score in scores.items())
    )
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
    "answer_failure",
    "judge_run",
    "read_judge_scores",
    "same_model",
    "scores_path",
    "self_judging_warning",
    "summary_path",
    "tiny_judge_warning",
]
