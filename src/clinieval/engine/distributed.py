"""One run over many machines: :class:`RayExecutor` evaluates the pending items on Ray actors.

Why the work is split this way (docs/distributed.md has the user's side):

* Only the driver (the ``clinieval run`` process) writes. Workers never see the run folder or the
  driver's request cache; each item comes back as its record and the cache entries its requests
  produced, and the driver hands both to the run's writer exactly as a local run would. So
  resume, caching and kill semantics are the local ones: a killed driver loses only the items in
  flight, and the next run asks for exactly the items without a record.
* Each worker builds its own model from the model spec string, on its own machine, so
  ``openai:http://127.0.0.1:8000/v1@m`` means every node's own server (and the loopback-only
  egress rule holds per node), and an embedded model loads on the node that runs it.
* Tasks are not pickled (they may hold tokenizers with native handles): a worker rebuilds the
  task *definition* from a small :class:`TaskRecipe`, and the driver ships the samples with the
  items, so a data file need not be on every machine (a benchmark's data folder must be: it is
  looked for as the task is built). Before any item is sent the driver checks
  that every worker built the same task (its spec and generation settings) and the same model
  identity, because the cache keys and the run's fingerprint rest on them.
* The driver keeps a bounded window of items in flight per worker (``n_workers`` each, the
  run's concurrency) and refills a worker as soon as one of its items returns, so a faster node
  takes more items, memory stays flat, and a kill loses at most the window.

``ray`` is imported only when a Ray executor is opened (``--executor ray``). Starting or joining
Ray, placing actors on nodes and the wording of their errors are shared with the other commands'
``--executor ray`` (request-level, :mod:`clinieval.models.ray_model`) and live there.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from collections import deque
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from clinieval.datasets import ENV_DATA_DIR
from clinieval.engine.runner import Executor, ItemLoop, ItemWork
from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.models.ray_model import (
    RAY_LOGS,
    Placed,
    RayChoice,
    RayCluster,
    WorkerFailure,
    failure_of,
    first_line,
    setup_failed,
)
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.records.cache import RequestStore
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.scorers import Scorer
from clinieval.task import PromptTemplate, Task
from clinieval.types import JSON, GenerationConfig, Sample

log = logging.getLogger(__name__)

__all__ = ["RayExecutor", "TaskRecipe", "WorkerJob", "open_executor"]

WAIT_POLL_S = 1.0
"""The longest one ``ray.wait`` blocks a thread, so an interrupted run stops promptly."""
RESUME = "everything finished before it is written: run the same command again to resume"

TaskBuilder = Callable[
    [str, Path | None, str | None, list[Scorer] | None, tuple[str | None, int | None], PromptTemplate | None],
    Task,
]
"""``clinieval.cli._build_task``: name, data, split, scorers, (budget tokenizer, max context), the
prompt that replaces the task's own (None: its own)."""
ScorerPicker = Callable[[list[str] | None], list[Scorer] | None]
"""``clinieval.cli._pick_scorers``: scorer names to scorers (None: the task's own)."""


@dataclass(frozen=True, slots=True)
class TaskRecipe:
    """How to build the task on a worker: the command line's task arguments and generation settings.

    The builders are module-level functions of the command line, passed in rather than imported
    (this module sits below the benchmarks and the CLI); pickle sends them by name, so a worker
    imports them from its own installed clinieval.

    A worker builds the task where the driver would: in the driver's working directory (when that
    folder exists on the worker's machine) and with the driver's ``CLINIEVAL_DATA_DIR``, because a
    benchmark looks for its data folder as its task is built (the samples themselves are shipped
    with the items). Relative paths are made absolute for the same reason.
    """

    name: str
    data: Path | None
    split: str | None
    scorers: tuple[str, ...]
    budget_tokenizer: str | None
    max_context: int | None
    generation: GenerationConfig
    build: TaskBuilder
    pick_scorers: ScorerPicker
    workdir: Path
    data_dir: str | None
    prompt: PromptTemplate | None = None
    """The prompt as the driver resolved it (``--prompt FILE``, or a default the driver chose from
    the data, which a worker without the data file could not choose)."""

    @classmethod
    def of(
        cls,
        name: str,
        data: Path | None,
        split: str | None,
        scorers: Sequence[str] | None,
        budget: tuple[str | None, int | None],
        generation: GenerationConfig,
        *,
        build: TaskBuilder,
        pick_scorers: ScorerPicker,
        prompt: PromptTemplate | None = None,
    ) -> TaskRecipe:
        named_file = Path(name)
        if named_file.suffix and named_file.is_file():  # a task of your own, named by its file
            name = str(named_file.resolve())
        return cls(
            name=name,
            data=None if data is None else data.resolve(),
            split=split,
            scorers=tuple(scorers or ()),
            budget_tokenizer=budget[0],
            max_context=budget[1],
            generation=generation,
            build=build,
            pick_scorers=pick_scorers,
            workdir=Path.cwd(),
            data_dir=_absolute(os.environ.get(ENV_DATA_DIR)),
            prompt=prompt,
        )

    def task(self) -> Task:
        with self._as_on_driver():
            scorers = self.pick_scorers(list(self.scorers) or None)
            built = self.build(
                self.name,
                self.data,
                self.split,
                scorers,
                (self.budget_tokenizer, self.max_context),
                self.prompt,
            )
        built.generation = self.generation
        return built

    @contextlib.contextmanager
    def _as_on_driver(self) -> Iterator[None]:
        """The driver's working directory (if this machine has it) and data folder setting."""
        saved = os.environ.get(ENV_DATA_DIR)
        with contextlib.ExitStack() as stack:
            if self.workdir.is_dir():
                stack.enter_context(contextlib.chdir(self.workdir))
            if self.data_dir is not None:
                os.environ[ENV_DATA_DIR] = self.data_dir
            try:
                yield
            finally:
                if saved is None:
                    os.environ.pop(ENV_DATA_DIR, None)
                else:
                    os.environ[ENV_DATA_DIR] = saved


def _absolute(path: str | None) -> str | None:
    return None if not path else str(Path(path).resolve())


@dataclass(frozen=True, slots=True)
class WorkerJob:
    """What every worker builds for itself: the task from its recipe, the model from its spec
    (with the backend options minus any executor: a worker asks its model in its own process)."""

    recipe: TaskRecipe
    model_spec: str
    backend: BackendOptions


@dataclass(frozen=True, slots=True)
class WorkerReady:
    """What a worker built, for the driver to compare with its own task and model."""

    task_spec: JSON
    generation: GenerationConfig
    identity: JSON


@dataclass(frozen=True, slots=True)
class ItemResult:
    """One evaluated item: its record (without the sample, which the driver has), the cache
    entries its requests produced, and how many requests it made."""

    record: JSON | None
    entries: tuple[tuple[str, str, JSON], ...] = ()
    requests: int = 0
    failure: WorkerFailure | None = None


class WorkerCrash(UserError):
    """A worker failed on an item or died: one line naming the item, the node and what to do."""


class _Collector:
    """A worker's request store for one item: nothing is cached on a worker (the driver's cache
    is the only one), but what this item asked is kept so the driver can store it, and a request
    the item repeats is answered once."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, JSON]] = {}

    def get(self, key: str) -> JSON | None:
        hit = self.entries.get(key)
        return None if hit is None else hit[1]

    def put(self, key: str, kind: str, value: JSON) -> None:
        self.entries[key] = (kind, value)


class Worker:
    """The Ray actor: builds the task and the model once, then evaluates the items it is sent.

    Its methods are coroutines, so Ray runs it as an async actor: the items the driver keeps in
    flight on it share one event loop and one model, as the coroutines of a local run do, and
    each goes through the runner's :class:`ItemLoop`, the per-item work a local run does."""

    def __init__(self, job: WorkerJob) -> None:
        self._job = job
        self._task: Task | None = None
        self._model: Model | None = None

    async def setup(self) -> WorkerReady | WorkerFailure:
        """Build and check the task and the model (a node-local server must answer)."""
        try:
            self._task = self._job.recipe.task()
            backend = replace(self._job.backend, executor=None)
            self._model = parse_model_spec(self._job.model_spec, backend)
            await self._model.check()
            return WorkerReady(self._task.spec(), self._task.generation, self._model.identity)
        except Exception as e:
            return failure_of(e, "building the task and the model")

    async def evaluate(self, sample: Sample, repeat: int) -> ItemResult:
        assert self._task is not None and self._model is not None, "setup() first"
        store = _Collector()
        loop = ItemLoop(self._task, self._model, store)
        try:
            record = await loop.record(sample, repeat)
        except Exception as e:
            return ItemResult(None, failure=failure_of(e, f"evaluating sample {sample.id!r} repeat {repeat}"))
        encoded = record.to_dict()
        del encoded["sample"]
        entries = tuple((key, kind, value) for key, (kind, value) in store.entries.items())
        return ItemResult(encoded, entries, loop.requests)

    async def close(self) -> None:
        if self._model is not None:
            await self._model.aclose()


class RayExecutor:
    """Evaluates on Ray actors, one per node unless ``workers`` says how many (spread over the
    nodes in turn); see the module docstring for why the work is split as it is.

    Use it as a context manager: entering connects to ``address`` (or starts a local Ray, which
    leaving shuts down) and starts and checks the workers, before the run folder exists, so a bad
    address or a node without its model server leaves nothing behind.
    """

    def __init__(self, job: WorkerJob, *, address: str | None = None, workers: int | None = None) -> None:
        self.job = job
        self.address = address
        self.workers = workers
        self._cluster = RayCluster(address)
        self._ray: Any = self._cluster.ray
        self._ready: list[WorkerReady] = []

    # --- lifecycle -------------------------------------------------------------------------------

    def __enter__(self) -> RayExecutor:
        self._cluster.connect()
        try:
            self._start_workers()
        except BaseException:
            self._cluster.disconnect()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._cluster.disconnect()

    @property
    def _placed(self) -> list[Placed]:
        return self._cluster.placed

    def _start_workers(self) -> None:
        n_nodes = self._cluster.place(Worker, self.workers, self.job)
        answers = self._cluster.setups("their task and model")
        self._ready = [self._check_setup(p, r) for p, r in zip(self._placed, answers, strict=True)]
        log.info("%d Ray workers on %d nodes", len(self._placed), n_nodes)

    @staticmethod
    def _check_setup(placed: Placed, answer: WorkerReady | WorkerFailure) -> WorkerReady:
        if isinstance(answer, WorkerReady):
            return answer
        raise setup_failed(placed.node, answer, "the task or the model")

    # --- the Executor protocol ---------------------------------------------------------------------

    async def evaluate(self, work: ItemWork) -> int:
        """Send the items to the workers, ``work.n_workers`` in flight on each; as results stream
        back, store their answers and write their records, and only then refill the workers, so a
        kill loses at most the items in flight. A worker's failure stops the run once every item
        that came back with it is written."""
        self._check_same(work.task, work.model)
        window = _Window(self._ray, self._placed, max(1, work.n_workers), deque(work.items))
        requests = 0
        try:
            while window.busy:
                window.fill()
                returned = window.take(await window.ready())
                good = [(sample, result) for sample, result, error in returned if error is None]
                requests += await _finish_all(good, work.store, work.finish)
                failure = next((error for _, _, error in returned if error is not None), None)
                if failure is not None:
                    raise failure
        finally:
            window.cancel()
        return requests

    def _check_same(self, task: Task, model: Model) -> None:
        """Every worker built the task and model this run is recorded under, or nothing is sent:
        the cache keys and the run's fingerprint rest on them."""
        for placed, ready in zip(self._placed, self._ready, strict=True):
            if ready.task_spec != task.spec() or ready.generation != task.generation:
                raise UserError(
                    f"the Ray worker on {placed.node} built task {task.name} differently from this machine; "
                    "install the same clinieval version (and any tokenizer the task uses) on every node"
                )
            if ready.identity != model.identity:
                raise UserError(
                    f"the Ray worker on {placed.node} built the model as {ready.identity}, this machine as "
                    f"{model.identity}; install the same model files and clinieval version on every node"
                )


@dataclass(slots=True)
class _Flight:
    worker: int
    sample: Sample
    repeat: int


class _Window:
    """The items in flight: at most ``slots`` per worker, refilled from ``todo`` as they return."""

    def __init__(
        self, ray: Any, placed: Sequence[Placed], slots: int, todo: deque[tuple[Sample, int]]
    ) -> None:
        self._ray = ray
        self._placed = placed
        self._todo = todo
        self._free = [slots] * len(placed)
        self._flights: dict[Any, _Flight] = {}

    @property
    def busy(self) -> bool:
        return bool(self._todo or self._flights)

    def fill(self) -> None:
        """One item to each worker with a free slot in turn, so the first items spread evenly."""
        while self._todo and any(self._free):
            for i, placed in enumerate(self._placed):
                if self._free[i] and self._todo:
                    sample, repeat = self._todo.popleft()
                    ref = placed.actor.evaluate.remote(sample, repeat)
                    self._flights[ref] = _Flight(i, sample, repeat)
                    self._free[i] -= 1

    async def ready(self) -> list[Any]:
        """Every item that has come back, waiting (off the event loop, so the run's writer keeps
        flushing) until at least one has."""
        refs = list(self._flights)
        while True:
            done = await asyncio.to_thread(_ready, self._ray, refs)
            if done:
                return done

    def take(self, refs: Sequence[Any]) -> list[tuple[Sample, ItemResult, UserError | None]]:
        """Each returned item with its result, or the error it stands for; frees its slot."""
        returned = []
        for ref in refs:
            flight = self._flights.pop(ref)
            self._free[flight.worker] += 1
            result, error = self._result(ref, flight)
            returned.append((flight.sample, result, error))
        return returned

    def _result(self, ref: Any, flight: _Flight) -> tuple[ItemResult, UserError | None]:
        node = self._placed[flight.worker].node
        item = f"sample {flight.sample.id!r} (repeat {flight.repeat})"
        try:
            result: ItemResult = self._ray.get(ref)
        except self._ray.exceptions.RayError as e:
            return ItemResult(None), WorkerCrash(
                f"the Ray worker on {node} died while evaluating {item}: {first_line(e)}; {RESUME} "
                f"(Ray's logs: {RAY_LOGS})"
            )
        if result.failure is None:
            return result, None
        if result.failure.user_error:
            return result, UserError(f"on Ray node {node}, {item}: {result.failure.message}")
        return result, WorkerCrash(
            f"{item} failed on the Ray worker on {node}: {result.failure.message}; {RESUME} "
            f"(traceback: {RAY_LOGS} on that node)"
        )

    def cancel(self) -> None:
        """Stop what is still in flight (a failure or an interrupt): it is asked again on resume."""
        for ref in self._flights:
            with contextlib.suppress(Exception):
                self._ray.cancel(ref)
        self._flights.clear()


def _ready(ray: Any, refs: list[Any]) -> list[Any]:
    """The refs that are done: waits for the first (at most :data:`WAIT_POLL_S`), then takes every
    other one already done without waiting."""
    done, rest = ray.wait(refs, num_returns=1, timeout=WAIT_POLL_S)
    if done and rest:
        more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
        done = [*done, *more]
    return list(done)


async def _finish_all(
    returned: Sequence[tuple[Sample, ItemResult]],
    store: RequestStore,
    finish: Callable[[SampleRecord], Awaitable[None]],
) -> int:
    """Store the answers of the items that came back together, then write their records in one
    go (the run's writer commits everything queued in the same turn together); return their
    requests. Answers first: the writer commits them before the records that rest on them."""
    records = []
    for sample, result in returned:
        assert result.record is not None
        for key, kind, value in result.entries:
            store.put(key, kind, value)
        records.append(SampleRecord.from_dict({**result.record, "sample": sample.to_dict()}))
    await asyncio.gather(*(finish(record) for record in records))
    return sum(result.requests for _, result in returned)


@contextlib.contextmanager
def open_executor(choice: RayChoice | None, job: WorkerJob) -> Iterator[Executor | None]:
    """The executor ``--executor`` chose (:func:`clinieval.models.ray_model.ray_choice` read it),
    open for the length of the run: None for a local run (the runner's own), a started
    :class:`RayExecutor` for ``ray``."""
    if choice is None:
        yield None
        return
    with RayExecutor(job, address=choice.address, workers=choice.workers) as executor:
        yield executor
