"""The per-item loop both executors run (clinieval.engine.runner.ItemLoop), checked without a server or Ray.

A local run and a Ray worker evaluate an item with the same loop: these tests pin what that loop
promises (one model request per distinct prompt, lasting answers kept in the store, transient
failures not, records scored) and that the two executors built on it hand back the same records
and the same cache entries for the same items. The Ray worker is driven as the plain class it is
(its actor methods are ordinary coroutines), so no Ray, no network namespace and no server.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from clinieval.engine import distributed
from clinieval.engine.distributed import ItemResult, TaskRecipe, Worker, WorkerJob, WorkerReady, _finish_all
from clinieval.engine.runner import ItemLoop, ItemWork, LocalExecutor
from clinieval.models.spec import BackendOptions
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.scorers import ExactMatch, Needs, Scorer
from clinieval.task import PromptTemplate, Task
from clinieval.types import (
    JSON,
    ErrorKind,
    GenerationConfig,
    LoglikOutput,
    Message,
    ModelOutput,
    Sample,
    Score,
)


class Echo:
    """A model that answers "yes" unless the question says otherwise, and records how many of its
    calls were in flight at once. "FLAKY" in a question is a rate limit (a transient failure)."""

    name = "echo"
    identity: JSON = {"backend": "echo", "version": 1}  # noqa: RUF012 (read-only)
    max_concurrency = 4

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.in_flight = 0
        self.most_in_flight = 0

    def render(self, messages: Sequence[Message]) -> str:
        return "\n\n".join(m.content for m in messages)

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        prompt = messages[-1].content
        self.asked.append(prompt)
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            for _ in range(3):  # let the other workers run while this call is "at the server"
                await asyncio.sleep(0)
        finally:
            self.in_flight -= 1
        if "FLAKY" in prompt:
            return ModelOutput.failure(ErrorKind.RATE_LIMIT, "429")
        text = "no" if "NO" in prompt else "yes"
        return ModelOutput(text=text, prompt_tokens=len(prompt), completion_tokens=1)

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        return LoglikOutput(logliks=[-1.0] * len(continuations), token_counts=[1] * len(continuations))

    async def tokenize(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    async def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


class Store:
    """A request store in a dict, as the run's cache is one in SQLite."""

    def __init__(self) -> None:
        self.entries: dict[str, tuple[str, JSON]] = {}

    def get(self, key: str) -> JSON | None:
        hit = self.entries.get(key)
        return None if hit is None else hit[1]

    def put(self, key: str, kind: str, value: JSON) -> None:
        self.entries[key] = (kind, value)


@dataclass(frozen=True)
class Explodes:
    """A scorer with a bug on one sample."""

    name: str = "explodes"
    needs: Needs = "generate"
    needs_choices: bool = False

    def score(self, record: SampleRecord) -> Score:
        if record.sample.id == "boom":
            raise RuntimeError("scorer bug")
        return ExactMatch().score(record)


SAMPLES = [
    Sample(id=f"s{i}", input=f"question {i}{' NO' if i % 3 == 0 else ''}?", target="yes") for i in range(9)
]


def make_task(name: str = "t", scorers: Sequence[Scorer] | None = None) -> Task:
    return Task(
        name=name,
        load=lambda: list(SAMPLES),
        prompt=PromptTemplate(user="{input}"),
        scorers=list(scorers or [ExactMatch()]),
    )


def build_task(
    name: str,
    data: Path | None,
    split: str | None,
    scorers: list[Scorer] | None,
    budget: tuple[str | None, int | None],
    prompt: PromptTemplate | None,
) -> Task:
    """What the command line's task builder is to a Ray worker."""
    return make_task(name, scorers)


def pick_scorers(names: list[str] | None) -> list[Scorer] | None:
    return None if not names else [Explodes()]


def comparable(record: SampleRecord) -> JSON:
    return record.to_dict()


def test_the_loop_asks_each_prompt_once_and_keeps_only_lasting_answers() -> None:
    model, store = Echo(), Store()
    loop = ItemLoop(make_task(), model, store)

    async def scenario() -> list[SampleRecord]:
        first = await loop.record(SAMPLES[1], 0)
        again = await loop.record(SAMPLES[1], 0)  # the same request: the store answers it
        other_repeat = await loop.record(SAMPLES[1], 1)
        no = await loop.record(SAMPLES[3], 0)
        return [first, again, other_repeat, no]

    first, again, other_repeat, no = asyncio.run(scenario())
    assert loop.requests == 3 and len(model.asked) == 3 and len(store.entries) == 3
    assert comparable(first) == comparable(again)
    assert (
        first.output is not None and first.output.text == "yes" and first.scores["exact_match"].value == 1.0
    )
    assert other_repeat.repeat == 1 and other_repeat.output is not None
    assert no.output is not None and no.output.text == "no" and no.scores["exact_match"].value == 0.0
    assert {kind for kind, _ in store.entries.values()} == {"generate"}

    flaky = Sample(id="f", input="FLAKY question?", target="yes")
    for _ in range(2):
        record = asyncio.run(loop.record(flaky, 0))
        assert record.output is not None and record.output.error_kind is ErrorKind.RATE_LIMIT
        assert record.transient_failure
    assert loop.requests == 5 and len(store.entries) == 3  # asked both times, never stored


def test_local_executor_keeps_n_workers_busy_and_writes_each_record_before_the_next() -> None:
    store = Store()
    written: list[SampleRecord] = []
    taken_unwritten = 0
    most_unwritten = 0
    items = [(s, r) for s in SAMPLES for r in range(2)]

    async def finish(record: SampleRecord) -> None:
        nonlocal taken_unwritten
        await asyncio.sleep(0)  # a write that yields, as the group-committing writer does
        written.append(record)
        taken_unwritten -= 1

    class Counting(Echo):
        async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
            nonlocal taken_unwritten, most_unwritten
            taken_unwritten += 1
            most_unwritten = max(most_unwritten, taken_unwritten)
            return await super().generate(messages, config)

    model = Counting()
    work = ItemWork(make_task(), model, store, items, 3, finish)
    requests = asyncio.run(LocalExecutor().evaluate(work))
    assert requests == len(items) == len(written)
    assert sorted(r.key for r in written) == sorted((s.id, r) for s, r in items)
    assert model.most_in_flight == 3
    assert most_unwritten == 3  # a worker takes its next item only once its record is written


def test_local_executor_stops_every_worker_on_the_first_failure() -> None:
    model, store = Echo(), Store()
    written: list[SampleRecord] = []
    boom = [(Sample(id="boom", input="q?", target="yes"), 0), *((s, 0) for s in SAMPLES)]

    async def finish(record: SampleRecord) -> None:
        written.append(record)

    async def scenario() -> list[asyncio.Task[Any]]:
        work = ItemWork(make_task(scorers=[Explodes()]), model, store, boom, 4, finish)
        with pytest.raises(RuntimeError, match="scorer bug"):
            await LocalExecutor().evaluate(work)
        await asyncio.sleep(0.05)
        return [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]

    assert asyncio.run(scenario()) == []
    assert "boom" not in {r.sample.id for r in written}
    assert len(written) < len(boom)  # the others were cancelled, not run to the end


def _worker(monkeypatch: pytest.MonkeyPatch, model: Echo, scorers: Sequence[str] = ()) -> Worker:
    """A Ray worker as Ray would build it on a node, with ``model`` as the model its spec names."""
    monkeypatch.setattr(distributed, "parse_model_spec", lambda spec, backend: model)
    recipe = TaskRecipe.of(
        "t",
        None,
        None,
        scorers,
        (None, None),
        GenerationConfig(),
        build=build_task,
        pick_scorers=pick_scorers,
    )
    return Worker(WorkerJob(recipe, "echo", BackendOptions()))


def test_a_ray_worker_and_a_local_run_hand_back_the_same_records_and_answers(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    items = [(s, r) for s in SAMPLES for r in range(2)]

    local_store, local_written = Store(), []

    async def local_finish(record: SampleRecord) -> None:
        local_written.append(record)

    work = ItemWork(make_task(), Echo(), local_store, items, 2, local_finish)
    local_requests = asyncio.run(LocalExecutor().evaluate(work))

    worker = _worker(monkeypatch, Echo())
    driver_store, driver_written = Store(), []

    async def driver_finish(record: SampleRecord) -> None:
        driver_written.append(record)

    async def over_ray() -> int:
        ready = await worker.setup()
        assert isinstance(ready, WorkerReady) and ready.task_spec == make_task().spec()
        returned: list[tuple[Sample, ItemResult]] = []
        for sample, repeat in items:
            result = await worker.evaluate(sample, repeat)
            assert result.failure is None
            returned.append((sample, result))
        return await _finish_all(returned, driver_store, driver_finish)

    ray_requests = asyncio.run(over_ray())
    assert ray_requests == local_requests == len(items)
    by_key = {r.key: comparable(r) for r in local_written}
    assert {r.key: comparable(r) for r in driver_written} == by_key
    assert driver_store.entries == local_store.entries  # the same cache keys and answers


def test_a_ray_worker_reports_an_items_failure_as_a_value(monkeypatch: pytest.MonkeyPatch) -> None:
    worker = _worker(monkeypatch, Echo(), scorers=["explodes"])

    async def scenario() -> tuple[ItemResult, ItemResult]:
        assert isinstance(await worker.setup(), WorkerReady)
        good = await worker.evaluate(SAMPLES[1], 0)
        bad = await worker.evaluate(Sample(id="boom", input="q?", target="yes"), 0)
        return good, bad

    good, bad = asyncio.run(scenario())
    assert good.failure is None and good.record is not None and good.requests == 1 and len(good.entries) == 1
    assert "sample" not in good.record  # the driver has the sample; it is not sent back
    assert bad.record is None and bad.failure is not None
    assert bad.failure.message == "RuntimeError: scorer bug" and not bad.failure.user_error


def test_map_each_keeps_the_units_order_advances_the_bar_and_stops_on_failure() -> None:
    """Units that finish out of order come back in the order given; the bar moves once per unit;
    a failing unit cancels the rest and the error reaches the caller."""
    import asyncio

    from clinieval.engine.runner import ProgressBar, map_each

    finished: list[int] = []

    async def slow_first(unit: int) -> str:
        await asyncio.sleep(0.02 * (3 - unit))
        finished.append(unit)
        return f"u{unit}"

    class CountingBar(ProgressBar):
        advanced = 0

        def advance(self) -> None:
            self.advanced += 1

    bar = CountingBar(False, 3, 0, "test")
    results = asyncio.run(map_each([0, 1, 2], 3, slow_first, bar))
    assert results == ["u0", "u1", "u2"]
    assert finished == [2, 1, 0]
    assert bar.advanced == 3

    async def fails(unit: int) -> int:
        if unit == 1:
            raise RuntimeError("unit 1")
        await asyncio.sleep(0.05)
        return unit

    with pytest.raises(RuntimeError, match="unit 1"):
        asyncio.run(map_each([0, 1, 2], 3, fails, ProgressBar(False, 3, 0, "test")))


def test_loaded_samples_are_taken_once_and_handed_out_fresh() -> None:
    """``task.loaded``: what the benchmarks' tasks load from samples already read. The caller's
    list changing later changes nothing, and a run reordering what it got changes the next load
    nothing either (MedEval's task once handed out the caller's list as it stood at each call)."""
    from clinieval.task import loaded
    from clinieval.types import Sample

    mine = [Sample(id="a", input="x"), Sample(id="b", input="y")]
    load = loaded(mine)
    mine.append(Sample(id="c", input="z"))
    first = load()
    first.reverse()
    assert [s.id for s in load()] == ["a", "b"]
    assert load() is not load()
