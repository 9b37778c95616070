"""Drive a task over a model: concurrent, cached, resumable, with a progress bar.

A pool of workers (as many as the model can usefully take in flight) pulls (sample, repeat)
pairs from a queue; every model request goes through the run's request cache; finished records
and answers are written in group commits (clinieval.records.run_writer), and a worker moves on only once
its record is written, so a kill at any moment loses at most the requests that were in flight.

Who evaluates the items is an :class:`Executor`: this process (:class:`LocalExecutor`), or
workers elsewhere (clinieval.engine.distributed) that send back records and answers for this process
alone to write, so resume, caching and kill semantics do not depend on where the work ran. The
work on one item is written once, :class:`ItemLoop`, and every executor runs it: the local one
over the run's request store, a Ray worker over a store that collects the answers for the driver.
"""

from __future__ import annotations

import asyncio
import functools
import json
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.records.cache import RequestStore, request_key
from clinieval.records.run_writer import RunWriter
from clinieval.records.runs import RunDir
from clinieval.records.sample_record import SampleRecord
from clinieval.task import MultiStepPolicy, Task
from clinieval.types import JSON, ErrorKind, GenerationConfig, LoglikOutput, Message, ModelOutput, Sample

log = logging.getLogger(__name__)
_T = TypeVar("_T")
_R = TypeVar("_R")


@dataclass(slots=True)
class RunStats:
    total: int
    already_done: int
    finished: int
    retried: int
    """Items asked again because their last record held a transient failure."""
    cache_hits: int
    requests: int
    elapsed_s: float
    changed: int = 0
    """Items asked again because their sample changed since they were recorded (--rerun-changed)."""
    removed: int = 0
    """Recorded samples no longer in the data: kept in the file, left out of every summary."""
    records: list[SampleRecord] = field(default_factory=list, repr=False)
    """The latest record of every (sample, repeat) in the run folder after this pass, in
    first-seen order, as :meth:`RunDir.records` would read them back (kept, so the summary does
    not read and decode the whole results file again). Left out of ``repr``: Python 3.11's
    ``asyncio.run`` formats its main task's result (through the SIGINT handler's repr) when it
    finishes, which for 10,000 records took a second."""

    @property
    def items_per_s(self) -> float:
        return self.finished / self.elapsed_s if self.elapsed_s > 0 else 0.0


class CachedCalls:
    """Model calls through the request cache."""

    def __init__(self, model: Model, cache: RequestStore) -> None:
        self.model = model
        self.identity = model.identity  # read once: backends build it afresh on every access
        self.cache = cache
        self.requests = 0

    async def through(
        self, kind: str, settings: JSON, prompt: Any, repeat: int, call: Callable[[], Awaitable[JSON]]
    ) -> JSON:
        key = request_key(kind, self.identity, settings, prompt, repeat)
        hit = self.cache.get(key)
        if hit is not None:
            return hit
        self.requests += 1
        value = await call()
        error = value.get("error_kind")
        if error is None or not ErrorKind(error).transient:
            self.cache.put(key, kind, value)
        return value

    async def generate(self, task: Task, messages: list[Message], repeat: int) -> ModelOutput:
        prompt = [{"role": m.role, "content": m.content} for m in messages]

        async def call() -> JSON:
            return (await self.model.generate(messages, task.generation)).to_dict()

        value = await self.through("generate", _settings(task.generation), prompt, repeat, call)
        return ModelOutput.from_dict(value)

    async def loglikelihood(
        self, record: SampleRecord, continuations: Sequence[str] | None = None
    ) -> LoglikOutput:
        """Score ``continuations`` (default: the sample's choices) after the rendered prompt."""
        prompt = self.model.render(record.messages)
        choices = list(record.sample.choices if continuations is None else continuations)

        async def call() -> JSON:
            return (await self.model.loglikelihood(prompt, choices)).to_dict()

        value = await self.through("loglikelihood", {"choices": choices}, prompt, record.repeat, call)
        return LoglikOutput.from_dict(value)


@functools.lru_cache(maxsize=64)
def _settings(config: GenerationConfig) -> JSON:
    """``config.to_dict()``, made once per config (``dataclasses.asdict`` deep-copies; callers
    only read the dict, which goes into the cache key)."""
    return config.to_dict()


_MULTI_STEP: dict[type, bool] = {}


def _multi_step(policy: object) -> bool:
    """Whether a policy is multi-step, decided once per policy class: a runtime Protocol check
    costs ~15 µs per call, which a run at thousands of items per second notices (and such a
    Protocol refuses ``issubclass``)."""
    kind = type(policy)
    known = _MULTI_STEP.get(kind)
    if known is None:
        known = _MULTI_STEP[kind] = isinstance(policy, MultiStepPolicy)
    return known


@dataclass(slots=True)
class CallTally:
    """Calls made or read from the cache during one pass (a judging pass, a dataset build).

    The token totals count every reply the results rest on, cached or not; the ``new_`` ones only
    those paid for in this pass.
    """

    requests: int = 0
    cache_hits: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    new_prompt_tokens: int = 0
    new_completion_tokens: int = 0

    def add(self, out: ModelOutput, asked: bool) -> None:
        prompt, completion = out.prompt_tokens or 0, out.completion_tokens or 0
        self.prompt_tokens += prompt
        self.completion_tokens += completion
        if asked:
            self.requests += 1
            self.new_prompt_tokens += prompt
            self.new_completion_tokens += completion
        else:
            self.cache_hits += 1


async def cached_generate(
    calls: CachedCalls,
    kind: str,
    settings: JSON,
    messages: list[Message],
    repeat: int,
    config: GenerationConfig,
) -> tuple[ModelOutput, bool]:
    """One generation request of ``kind`` (a judge, a dataset-building step) through the cache.

    ``settings`` is what, besides the prompt and the repeat, keys the request (the generation
    settings plus e.g. the rubric's name). Also says whether the model was really asked, for the
    caller's request and token accounting.
    """
    prompt = [{"role": m.role, "content": m.content} for m in messages]
    asked = False

    async def call() -> JSON:
        nonlocal asked
        asked = True
        return (await calls.model.generate(messages, config)).to_dict()

    value = await calls.through(kind, settings, prompt, repeat, call)
    return ModelOutput.from_dict(value), asked


async def run_each(items: Sequence[_T], n_workers: int, handle: Callable[[_T], Awaitable[None]]) -> None:
    """``handle`` every item, at most ``n_workers`` at a time (at least one worker, never more
    than items). On the first exception the other workers are cancelled, before the caller
    closes the cache they write to, and the exception is re-raised."""
    todo = deque(items)  # one event loop: popping between awaits needs no lock

    async def worker() -> None:
        while todo:
            await handle(todo.popleft())

    tasks = [asyncio.create_task(worker()) for _ in range(max(1, min(n_workers, len(todo) or 1)))]
    try:
        await asyncio.gather(*tasks)
    except BaseException:
        for t in tasks:
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        raise


async def map_each(
    units: Sequence[_T], n_workers: int, handle: Callable[[_T], Awaitable[_R]], bar: ProgressBar
) -> list[_R]:
    """``handle`` every unit as :func:`run_each` does, the bar advanced after each, and the results
    in the units' order (not the order they finished in). Written once for the judges and the
    dataset builders, which each ran a unit, kept its result and advanced their bar; closing a
    cache the units wrote to stays with the caller, after this returns or raises."""
    results: dict[int, _R] = {}

    async def one(index: int) -> None:
        results[index] = await handle(units[index])
        bar.advance()

    with bar:
        await run_each(range(len(units)), n_workers, one)
    return [results[i] for i in range(len(units))]


class ItemLoop:
    """The per-item work of a run, written once for every executor: each (sample, repeat) goes
    through :func:`evaluate_item` over one request store, and the model requests that store did
    not answer are counted.

    :class:`LocalExecutor` runs one over the run's store (its writer, in front of the cache) for
    all its coroutines; a Ray worker (clinieval.engine.distributed) runs one per item over a store that
    collects the item's answers for the driver to keep. Either way the record, its scores and the
    cache keys are the same."""

    __slots__ = ("calls", "task")

    def __init__(self, task: Task, model: Model, store: RequestStore) -> None:
        self.task = task
        self.calls = CachedCalls(model, store)

    @property
    def requests(self) -> int:
        """Model requests made so far (answers the store already held are not requests)."""
        return self.calls.requests

    async def record(self, sample: Sample, repeat: int) -> SampleRecord:
        """The scored record of one (sample, repeat)."""
        return await evaluate_item(self.task, self.calls, sample, repeat)


async def evaluate_item(task: Task, calls: CachedCalls, sample: Sample, repeat: int) -> SampleRecord:
    """One (sample, repeat): fit the context, ask the model (through the cache), score."""
    policy = task.context_policy
    if _multi_step(policy) and task.needs_generation:
        assert isinstance(policy, MultiStepPolicy)
        record = await _refine(task, policy, calls, sample, repeat)
        record.scores = {s.name: s.score(record) for s in task.scorers}
        return record
    context, info = await policy.fit(sample, calls.model)
    record = SampleRecord(
        sample=sample, repeat=repeat, messages=task.prompt.messages(sample, context), context_info=info
    )
    log.debug("sample %s repeat %d prompt: %r", sample.id, repeat, record.messages)
    if info.get("dropped"):
        # The drop policy: the record does not fit and may not be cut. No model call; the sample
        # stays in the results as a counted context_length failure, never as a silent gap.
        why = str(info.get("reason") or "record exceeds the context budget")
        if task.needs_generation:
            record.output = ModelOutput.failure(ErrorKind.CONTEXT_LENGTH, f"dropped: {why}")
        if task.needs_loglikelihood and sample.choices:
            record.loglik = LoglikOutput(error_kind=ErrorKind.CONTEXT_LENGTH, error_message=f"dropped: {why}")
    else:
        await _ask(task, calls, record)
    record.scores = {s.name: s.score(record) for s in task.scorers}
    return record


async def _ask(task: Task, calls: CachedCalls, record: SampleRecord) -> None:
    if task.needs_generation:
        record.output = await calls.generate(task, record.messages, record.repeat)
    if task.needs_loglikelihood and record.sample.choices:
        record.loglik = await calls.loglikelihood(record, task.loglik_continuations(record.sample))


async def _refine(
    task: Task, policy: MultiStepPolicy, calls: CachedCalls, sample: Sample, repeat: int
) -> SampleRecord:
    """Multi-step refinement: one call per piece in order, each given the answer so far.

    A failed step keeps the previous answer and the next piece is still read; the record's output
    is the last successful answer (token counts and latency summed over every step), or the last
    failure when no step succeeded. ``context_info["steps"]`` lists every step's outcome.
    """
    pieces, info = await policy.plan(sample, calls.model)
    answer: ModelOutput | None = None
    failure: ModelOutput | None = None
    steps: list[JSON] = []
    shown: list[Message] = []
    totals = {"prompt_tokens": 0, "completion_tokens": 0, "latency_s": 0.0}
    for i, piece in enumerate(pieces):
        messages = policy.step_messages(sample, piece, i, len(pieces), answer.text if answer else None)
        out = await calls.generate(task, messages, repeat)
        totals["prompt_tokens"] += out.prompt_tokens or 0
        totals["completion_tokens"] += out.completion_tokens or 0
        totals["latency_s"] += out.latency_s
        steps.append(_step_json(i, messages, out, kept_previous=not out.ok and answer is not None))
        if out.ok:
            answer, shown = out, messages
        else:
            failure = out
            shown = shown or messages
    info["steps"] = steps
    info["model_calls"] = len(steps)
    info["failed_steps"] = [s["index"] for s in steps if s["error_kind"] is not None]
    final = answer if answer is not None else failure
    assert final is not None  # a plan always has at least one piece
    final.prompt_tokens = int(totals["prompt_tokens"])
    final.completion_tokens = int(totals["completion_tokens"])
    final.latency_s = float(totals["latency_s"])
    log.debug("sample %s repeat %d refined over %d pieces", sample.id, repeat, len(pieces))
    return SampleRecord(sample=sample, repeat=repeat, messages=shown, context_info=info, output=final)


def _step_json(index: int, messages: list[Message], out: ModelOutput, *, kept_previous: bool) -> JSON:
    return {
        "index": index,
        "prompt_chars": sum(len(m.content) for m in messages),
        "prompt_tokens": out.prompt_tokens,
        "completion_tokens": out.completion_tokens,
        "error_kind": None if out.error_kind is None else out.error_kind.value,
        "error_message": out.error_message,
        "kept_previous_answer": kept_previous,
    }


def changed_samples(samples: Sequence[Sample], records: Iterable[SampleRecord]) -> list[str]:
    """Ids of samples whose content (input, context, choices, targets, metadata) differs from the
    sample a record holds: the data changed under a run, and its old answers no longer belong to
    it. Compared as JSON, the form a record keeps. Returned in the data's order, not the order the
    records were finished in (concurrent calls finish in any order), so messages are stable."""
    current = {s.id: s for s in samples}
    seen: dict[str, str] = {}
    out: list[str] = []
    for record in records:
        sid = record.sample.id
        now = current.get(sid)
        if now is None or sid in seen:
            continue
        text = seen[sid] = json.dumps(now.to_dict(), sort_keys=True, ensure_ascii=False)
        if json.dumps(record.sample.to_dict(), sort_keys=True, ensure_ascii=False) != text:
            out.append(sid)
    order = {s.id: i for i, s in enumerate(samples)}
    return sorted(out, key=order.__getitem__)


def pending_items(
    samples: list[Sample], repeats: int, done: set[tuple[str, int]]
) -> list[tuple[Sample, int]]:
    return [(s, r) for s in samples for r in range(repeats) if (s.id, r) not in done]


async def execute(
    task: Task,
    model: Model,
    run: RunDir,
    samples: list[Sample],
    *,
    repeats: int = 1,
    concurrency: int | None = None,
    progress: bool = True,
    rerun_changed: bool = False,
    executor: Executor | None = None,
) -> RunStats:
    """Evaluate every (sample, repeat) not yet done in ``run``; return what was done.

    Done means the latest record holds an answer or a lasting failure; a record whose call failed
    transiently (rate limit, 5xx, timeout, dropped connection) is asked again, and the new record
    supersedes it (:meth:`RunDir.records` keeps the latest per key)."""
    latest = {r.key: r for r in run.iter_records()}
    changed = changed_samples(samples, latest.values())
    if changed and not rerun_changed:
        where = task.data_files[0] if task.data_files else f"task {task.name}"
        raise UserError(
            f"{where}: sample {changed[0]!r} (and {len(changed) - 1} more) changed since it was recorded "
            f"in {run.path}; run with --rerun-changed to ask exactly the changed samples again, or "
            "use another --out"
        )
    stale = set(changed)
    done = {key for key, r in latest.items() if not r.transient_failure and key[0] not in stale}
    todo = pending_items(samples, repeats, done)
    retried = sum(1 for s, r in todo if (s.id, r) in latest and s.id not in stale)
    wanted = {s.id for s in samples}
    removed = len({sid for sid, _ in latest} - wanted)
    total = len(samples) * repeats
    start = time.perf_counter()
    n_workers = concurrency or model.max_concurrency
    status = model.concurrency_status if isinstance(model, ReportsConcurrency) else None
    bar = ProgressBar(progress, total, len(done), model.name, status)
    cache = run.cache()
    writer: RunWriter | None = None
    try:
        writer = RunWriter(run, cache)

        async def finish(record: SampleRecord) -> None:
            assert writer is not None
            await writer.write(record)
            latest[record.key] = record
            bar.advance()

        with bar:
            # On the first error the executor stops every worker before the writer closes:
            # nothing is written after a failure, and in-flight work is re-asked on the next run.
            work = ItemWork(task, model, writer, todo, n_workers, finish)
            requests = await (executor or LocalExecutor()).evaluate(work)
        writer.close()
    except BaseException:
        if writer is not None:
            writer.abandon()
        raise
    finally:
        cache.close()
    return RunStats(
        total=total,
        already_done=len(done),
        finished=writer.written,
        retried=retried,
        changed=sum(1 for s, r in todo if s.id in stale),
        removed=removed,
        cache_hits=writer.hits,
        requests=requests,
        elapsed_s=time.perf_counter() - start,
        records=list(latest.values()),
    )


@dataclass(frozen=True, slots=True)
class ItemWork:
    """What a run hands its executor: the pending (sample, repeat) items, the task and model
    they go through, the run's request store, how many items each worker may have in flight,
    and ``finish``, which writes a finished record (it returns once the record is written)."""

    task: Task
    model: Model
    store: RequestStore
    items: Sequence[tuple[Sample, int]]
    n_workers: int
    finish: Callable[[SampleRecord], Awaitable[None]]


class Executor(Protocol):
    """Evaluates a run's pending items and hands each finished record to ``work.finish``,
    awaiting it (it returns once the record is written) before taking on more work.

    Every model request goes through ``work.store`` (look up before asking, keep what was
    answered): an executor whose work runs elsewhere brings the answers back and puts them
    there, because only this process writes the run folder and the cache."""

    async def evaluate(self, work: ItemWork) -> int:
        """Evaluate ``work.items``, at most ``work.n_workers`` at a time per worker; return the
        model requests made."""
        ...


class LocalExecutor:
    """Evaluates in this process: ``n_workers`` coroutines sharing the model and one
    :class:`ItemLoop`, each writing its record before it takes the next item."""

    async def evaluate(self, work: ItemWork) -> int:
        loop = ItemLoop(work.task, work.model, work.store)

        async def one(item: tuple[Sample, int]) -> None:
            await work.finish(await loop.record(*item))

        await run_each(work.items, work.n_workers, one)
        return loop.requests


@runtime_checkable
class ReportsConcurrency(Protocol):
    """A model whose requests in flight move (an HTTP backend's adaptive limit)."""

    def concurrency_status(self) -> str: ...


class ProgressBar:
    """A rich progress bar with throughput and ETA on stderr (or nothing when disabled), and the
    requests in flight against their current limit when the model reports them (``status``)."""

    def __init__(
        self, enabled: bool, total: int, done: int, label: str, status: Callable[[], str] | None = None
    ) -> None:
        self._bar: Any = None
        self._task: Any = None
        if not enabled:
            return
        from rich.console import Console
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TaskProgressColumn,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        columns: list[Any] = [
            TextColumn("[bold]{task.description}"),
            BarColumn(),
            MofNCompleteColumn(),
            TaskProgressColumn(),
            TextColumn("{task.fields[rate]}"),
            TimeElapsedColumn(),
            TextColumn("ETA"),
            TimeRemainingColumn(),
        ]
        if status is not None:
            columns.append(_live_text(status))
        self._bar = Progress(*columns, console=Console(stderr=True))
        self._start = time.perf_counter()
        self._new = 0
        self._task = self._bar.add_task(label, total=total, completed=done, rate="")

    def advance(self) -> None:
        if self._bar is None:
            return
        self._new += 1
        rate = self._new / max(1e-9, time.perf_counter() - self._start)
        self._bar.update(self._task, advance=1, rate=f"{rate:.2f} items/s")

    def __enter__(self) -> ProgressBar:
        if self._bar is not None:
            self._bar.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._bar is not None:
            self._bar.stop()


def _live_text(status: Callable[[], str]) -> Any:
    """A progress column that asks ``status`` at every refresh (the limit moves between items)."""
    from rich.progress import ProgressColumn
    from rich.text import Text

    class LiveText(ProgressColumn):
        def render(self, task: Any) -> Text:
            return Text(status(), style="dim")

    return LiveText()
