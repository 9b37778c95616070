"""Judging a set: every item, ``repeats`` times, in the order design asked for, through the
request cache, with the knowledge completion chain when a knowledge base is given.

The order design (:func:`shown_order`): ``fixed``, the paper's protocol and the default (every
repeat shows the responses in their given order); ``shuffled`` (each repeat an independent seeded
permutation); ``balanced`` (counterbalanced: repeat r shows the item's seeded base order rotated by
r, a Latin square, so over k repeats each response is shown in each position once). Position bias
can only be measured under the last two (:mod:`bias`).

Each (item, repeat) is one or more judge calls: the prompt with the responses in the repeat's
order (each cut to 1,000 characters); while the reply asks a ``[Question]`` and fewer than 3
lookups were made, the lookup is appended and the judge continues; the last reply is read for the
scores, which are mapped back to the original order. Every call goes through the folder's request
cache (distinct per repeat, seed + repeat), so a killed pass resumes without asking again, and a
second pass asks nothing. The verdicts (one line per item and repeat: order shown, scores, the
rationale, every lookup, or why the reply was unparsed) and a summary (parse rate, calls and tokens,
the order design, agreement with physicians when the set has ratings, the bias figures) are
written at the end, atomically.

Repeat r is the paper's run r. The default estimator (``per-run``, the paper's) computes every
agreement metric on each run's own verdicts, a failed reply counting its pairs wrong in that run,
and averages the runs (with their spread); ``mean-scores`` averages each response's score over the
parsed repeats first and scores the means (more flattering: means rarely tie).
"""

from __future__ import annotations

import random
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from clinieval.benchmarks.automedeval.judge_set import JudgeItem
from clinieval.benchmarks.automedeval.knowledge import (
    MAX_ROUNDS,
    KnowledgeBase,
    Lookup,
    knowledge_line,
    question_of,
)
from clinieval.benchmarks.automedeval.prompts import judge_messages, one_shot_messages
from clinieval.benchmarks.automedeval.verdict import (
    cut_response,
    parse_scores,
    permutation,
    rationale,
    to_original,
)
from clinieval.datasets import json_objects
from clinieval.engine.runner import CachedCalls, CallTally, ProgressBar, cached_generate, map_each
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, atomic_write_jsonl
from clinieval.judge.rubric import VerdictParseError
from clinieval.models.base import Model
from clinieval.records.cache import RequestCache
from clinieval.types import GenerationConfig, Message

JSON = dict[str, Any]

JUDGE_GENERATION = GenerationConfig(temperature=0.0, max_tokens=512, seed=0)

ORDERS = ("fixed", "shuffled", "balanced")
"""The order designs; ``fixed`` (the paper's protocol) is the default."""

ESTIMATORS = ("per-run", "mean-scores")
"""How repeats become one figure; ``per-run`` (the paper's) is the default."""


def shown_order(order: str, seed: int, item_id: str, repeat: int, k: int) -> tuple[int, ...]:
    """The order one repeat shows an item's k responses in (``shown[i]`` = the original index
    shown as Doctor i+1), under the design ``order``:

    * ``fixed``: the given order, every repeat (the paper's protocol);
    * ``shuffled``: an independent seeded permutation per repeat
      (:func:`~clinieval.benchmarks.automedeval.verdict.permutation`);
    * ``balanced``: the item's seeded base order rotated by the repeat, so k consecutive repeats
      form a Latin square (each response in each position once) and repeat r + k repeats repeat
      r's order (the same-order control of swap consistency).
    """
    if order == "fixed":
        return tuple(range(k))
    if order == "shuffled":
        return permutation(seed, item_id, repeat, k)
    if order == "balanced":
        base = list(range(k))
        random.Random(f"automedeval-balanced:{seed}:{item_id}").shuffle(base)
        return tuple(base[(repeat + i) % k] for i in range(k))
    raise ValueError(f"unknown order design {order!r}; use one of {', '.join(ORDERS)}")


@dataclass
class Entry:
    """One item's one repeat: what was shown, what came back, what was read."""

    item: str
    repeat: int
    shown: tuple[int, ...]
    cut: list[bool]
    scores: list[int] | None = None
    rationale: str | None = None
    error: str | None = None
    raw: str = ""
    lookups: list[JSON] = field(default_factory=list)
    parse_reason: str | None = None
    """Why the reply was unparsed, as a kind (:data:`clinieval.judge.verdict.Reason`)."""

    def to_dict(self) -> JSON:
        return {
            "item": self.item, "repeat": self.repeat, "shown": list(self.shown), "cut": self.cut,
            "scores": self.scores, "rationale": self.rationale, "error": self.error, "raw": self.raw[:2000],
            "lookups": self.lookups, "parse_reason": self.parse_reason,
        }  # fmt: skip

    @classmethod
    def from_dict(cls, d: JSON, where: str) -> Entry:
        """A line of verdicts.jsonl (``where``: file:line, for the error a damaged file gets)."""
        try:
            return cls(
                str(d["item"]), int(d["repeat"]), tuple(int(x) for x in d["shown"]),
                [bool(c) for c in d["cut"]],
                None if d.get("scores") is None else [int(x) for x in d["scores"]],
                d.get("rationale"), d.get("error"), str(d.get("raw", "")), list(d.get("lookups") or []),
                d.get("parse_reason"),
            )  # fmt: skip
        except (KeyError, TypeError, ValueError) as e:
            raise UserError(f"{where}: not a verdict written by `automedeval judge` ({e!r})") from None


def read_verdicts(folder: Path) -> list[Entry]:
    """The verdicts a judge run wrote into ``folder``."""
    path = folder / "verdicts.jsonl"
    if not path.is_file():
        raise UserError(
            f"{folder}: no verdicts.jsonl; run `clinieval automedeval judge ... --out {folder}` first"
        )
    return [Entry.from_dict(obj, where) for where, obj in json_objects(path)]


@dataclass
class Chained:
    """The last reply of a knowledge-chain conversation, every lookup made, or why a call failed."""

    text: str = ""
    lookups: list[Lookup] = field(default_factory=list)
    error: str | None = None


async def ask_with_knowledge(
    calls: CachedCalls,
    tally: CallTally,
    kind: str,
    settings: JSON,
    messages: list[Message],
    repeat: int,
    config: GenerationConfig,
    kb: KnowledgeBase | None,
) -> Chained:
    """The knowledge completion chain: ask; while the reply holds a ``[Question]`` line and fewer
    than :data:`MAX_ROUNDS` lookups were made, append the lookup and ask again. Every call goes
    through the cache (``kind``, ``settings``, ``repeat`` are its key), so a resumed pass replays the
    whole conversation from the cache. Shared by the judge, the teacher and introspection."""
    done = Chained()
    for round_ in range(MAX_ROUNDS + 1):
        out, asked = await cached_generate(calls, kind, settings, messages, repeat, config)
        tally.add(out, asked)
        if not out.ok:
            done.error = f"call failed: {out.error_kind}"
            return done
        done.text = out.text
        query = question_of(out.text) if kb is not None and round_ < MAX_ROUNDS else None
        if query is None:
            break
        found = kb.lookup(query)  # type: ignore[union-attr]
        done.lookups.append(found)
        messages = [*messages, Message("assistant", out.text), Message("user", knowledge_line(found))]
    return done


async def _judge_unit(
    item: JudgeItem, repeat: int, calls: CachedCalls, tally: CallTally, plan: JudgePlan
) -> Entry:
    shown = shown_order(plan.order, plan.seed, item.id, repeat, len(item.responses))
    cuts = [cut_response(item.responses[j].text) for j in shown]
    entry = Entry(item.id, repeat, shown, [c.cut for c in cuts])
    config = replace(plan.generation, seed=(plan.generation.seed or 0) + repeat)
    settings = {**config.to_dict(), "judge": "automedeval"} | (
        {"prompt": "one-shot-v1"} if plan.one_shot else {}
    )
    prompt = (one_shot_messages if plan.one_shot else judge_messages)(
        item, [c.text for c in cuts], knowledge=plan.kb is not None
    )
    chained = await ask_with_knowledge(
        calls, tally, "automedeval-judge", settings, prompt, repeat, config, plan.kb
    )
    entry.raw = chained.text
    entry.lookups = [{"query": f.query, "chunks": list(f.chunk_ids), "mode": f.mode} for f in chained.lookups]
    if chained.error is not None:
        entry.error = f"judge {chained.error}"
        return entry
    try:
        quoted = (item.question, item.reference, item.context or "", *(c.text for c in cuts))
        sent = [m.content for m in prompt]
        entry.scores = to_original(parse_scores(entry.raw, len(item.responses), quoted, sent), shown)
        entry.rationale = rationale(entry.raw)
    except VerdictParseError as e:
        entry.error, entry.parse_reason = f"unparsed: {e}", e.reason
    return entry


@dataclass(frozen=True)
class JudgePlan:
    repeats: int = 3
    seed: int = 0
    generation: GenerationConfig = JUDGE_GENERATION
    kb: KnowledgeBase | None = None
    concurrency: int | None = None
    progress: bool = True
    one_shot: bool = False
    """Show the worked example (:data:`prompts.EXAMPLE`) first: for judges not trained on the format."""
    order: str = "fixed"
    """The order design (:data:`ORDERS`, :func:`shown_order`); fixed is the paper's protocol."""
    estimator: str = "per-run"
    """How the summary's agreement combines the repeats (:data:`ESTIMATORS`)."""

    def __post_init__(self) -> None:
        if self.order not in ORDERS:
            raise UserError(f"unknown order design {self.order!r}; use one of {', '.join(ORDERS)}")
        if self.estimator not in ESTIMATORS:
            raise UserError(f"unknown estimator {self.estimator!r}; use one of {', '.join(ESTIMATORS)}")


async def judge_set(items: Sequence[JudgeItem], judge: Model, out: Path, plan: JudgePlan) -> list[Entry]:
    """Judge every item ``plan.repeats`` times into ``out`` (verdicts.jsonl, summary.json)."""
    out.mkdir(parents=True, exist_ok=True)
    cache = RequestCache(out / "cache.sqlite")
    calls, tally = CachedCalls(judge, cache), CallTally()
    units = [(i, r) for i in range(len(items)) for r in range(plan.repeats)]
    bar = ProgressBar(plan.progress, len(units), 0, f"judge {judge.name}")
    started = time.perf_counter()

    async def one(unit: tuple[int, int]) -> Entry:
        return await _judge_unit(items[unit[0]], unit[1], calls, tally, plan)

    try:
        done = await map_each(units, plan.concurrency or judge.max_concurrency, one, bar)
    finally:
        cache.close()
    atomic_write_jsonl(out / "verdicts.jsonl", (e.to_dict() for e in done))
    atomic_write_json(
        out / "summary.json", summarize(items, done, judge, tally, time.perf_counter() - started, plan)
    )
    return done


async def judge_all(
    items: Sequence[JudgeItem], judges: Sequence[Model], folders: Sequence[Path], plan: JudgePlan
) -> None:
    """Each judge over the set into its folder, one after the other (each is checked first, so a
    wrong spec fails before any work; each is closed even when judging fails)."""
    for judge, folder in zip(judges, folders, strict=True):
        try:
            await judge.check()
            await judge_set(items, judge, folder, plan)
        finally:
            await judge.aclose()


def judge_folders(out: Path, names: Sequence[str], *, nested: bool = False) -> list[Path]:
    """Where each judge's verdicts go: ``out`` itself for a single judge (unless ``nested``),
    else ``out/<judge>`` for each."""
    from clinieval.fsutil import slug

    if len(names) == 1 and not nested:
        return [out]
    folders = [out / slug(n) for n in names]
    if len(set(folders)) != len(folders):
        raise UserError(f"two judges would share a folder: {', '.join(names)}; give each judge once")
    return folders


def by_item(entries: Sequence[Entry]) -> dict[str, list[Entry]]:
    """The verdicts grouped by item id, in their order (one pass, not one scan per item)."""
    out: dict[str, list[Entry]] = {}
    for e in entries:
        out.setdefault(e.item, []).append(e)
    return out


def mean_scores(items: Sequence[JudgeItem], entries: Sequence[Entry]) -> dict[str, list[float] | None]:
    """Each item's judge score per response: the mean over its parsed repeats (None if none parsed)."""
    grouped = by_item(entries)
    out: dict[str, list[float] | None] = {}
    for item in items:
        parsed = [e.scores for e in grouped.get(item.id, []) if e.scores is not None]
        out[item.id] = (
            [sum(s[j] for s in parsed) / len(parsed) for j in range(len(item.responses))] if parsed else None
        )
    return out


def run_scores(items: Sequence[JudgeItem], entries: Sequence[Entry]) -> list[dict[str, list[float] | None]]:
    """Each run's own verdicts (run r = repeat r, for every repeat any item has): item id -> the
    scores in the item's order, or None where that run's reply failed or is missing."""
    runs = sorted({e.repeat for e in entries})
    found = {(e.item, e.repeat): e.scores for e in entries}
    out = []
    for r in runs:
        run: dict[str, list[float] | None] = {}
        for item in items:
            scores = found.get((item.id, r))
            run[item.id] = None if scores is None else [float(s) for s in scores]
        out.append(run)
    return out


def agreement_of(items: Sequence[JudgeItem], entries: Sequence[Entry], estimator: str = "per-run") -> JSON:
    """A judge's agreement with the physicians under ``estimator`` (:data:`ESTIMATORS`):
    ``per-run`` averages the metrics of each run's own verdicts (with their spread);
    ``mean-scores`` scores each response's mean over its parsed repeats."""
    from clinieval.benchmarks.automedeval.agreement import judge_agreement, per_run_agreement

    if estimator == "per-run":
        return per_run_agreement(items, run_scores(items, entries))
    if estimator == "mean-scores":
        return {"estimator": "mean-scores", **judge_agreement(items, mean_scores(items, entries))}
    raise UserError(f"unknown estimator {estimator!r}; use one of {', '.join(ESTIMATORS)}")


def judge_bias(
    items: Sequence[JudgeItem],
    entries: Sequence[Entry],
    order: str | None = None,
    *,
    resamples: int = 2000,
    seed: int = 0,
) -> JSON:
    """The position and length bias figures of a judge's verdicts (:mod:`bias`), per item's
    repeats, under the run's order design (None: inferred from the orders shown)."""
    from clinieval.benchmarks.automedeval.bias import Judged, bias_report

    grouped = by_item(entries)
    humans = [x.human_scores() for x in items]
    return bias_report(
        [
            ([Judged(e.shown, None if e.scores is None else tuple(map(float, e.scores)))
              for e in grouped.get(x.id, [])], [len(r.text) for r in x.responses],
             None if any(h is None for h in human) else [float(h) for h in human if h is not None])
            for x, human in zip(items, humans, strict=True)
        ],
        order=order, resamples=resamples, seed=seed,
    )  # fmt: skip


def summarize(
    items: Sequence[JudgeItem],
    entries: Sequence[Entry],
    judge: Model,
    tally: CallTally,
    seconds: float,
    plan: JudgePlan | None = None,
) -> JSON:
    from clinieval.judge.run import tiny_judge_warning

    plan = plan or JudgePlan()
    parsed = sum(e.scores is not None for e in entries)
    rated = any(r.ratings for item in items for r in item.responses)
    return {
        "judge": {"name": judge.name, "identity": judge.identity},
        "warning": tiny_judge_warning(judge),
        "items": len(items),
        "verdicts": len(entries),
        "parsed": parsed,
        "parse_rate": parsed / len(entries) if entries else None,
        "unparsed_or_failed": len(entries) - parsed,
        "unparsed_reasons": dict(Counter(e.parse_reason for e in entries if e.parse_reason)),
        "lookups": sum(len(e.lookups) for e in entries),
        "calls": {"requests": tally.requests, "cache_hits": tally.cache_hits,
                  "prompt_tokens": tally.prompt_tokens, "completion_tokens": tally.completion_tokens},
        "seconds": round(seconds, 3),
        "order": plan.order,
        "agreement": agreement_of(items, entries, plan.estimator) if rated else None,
        "bias": judge_bias(items, entries, plan.order, seed=plan.seed),
    }  # fmt: skip
