"""One evaluation from request to summary, in the order that keeps bad input harmless.

Everything that can fail because of the user's input (dataset, model spec, endpoint) is checked
before the run directory is created, so a mistake leaves no partial run behind.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.fsutil import atomic_write_json
from clinieval.models.base import Model
from clinieval.models.pool import EndpointPool
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.runner import Executor, RunStats, execute
from clinieval.runs import SUMMARY, RunDir, build_manifest, fingerprint
from clinieval.summary import ScorerSummary, summarize
from clinieval.task import Task
from clinieval.types import JSON, GenerationConfig


@dataclass(slots=True)
class RunRequest:
    task: Task
    model: Model
    model_spec: str
    out: Path | None
    default_out: Callable[[str], Path]
    limit: int | None = None
    shuffle: int | None = None
    repeats: int = 1
    concurrency: int | None = None
    overwrite: bool = False
    progress: bool = True
    rerun_changed: bool = False
    executor: Executor | None = None
    """Who evaluates the items: this process when None (see clinieval.runner.Executor)."""


@dataclass(slots=True)
class RunResult:
    run_path: Path
    stats: RunStats
    summaries: list[ScorerSummary]

    @property
    def stats_line(self) -> str:
        s = self.stats
        notes = [
            f"{s.retried} asked again after a transient failure" if s.retried else "",
            f"{s.changed} asked again because their sample changed" if s.changed else "",
        ]
        again = "".join(f" ({n})" for n in notes if n)
        if s.removed:
            again += f"; {s.removed} recorded samples are no longer in the data and are left out"
        return (
            f"{s.finished} new{again}, {s.already_done} resumed of {s.total}; {s.requests} model requests, "
            f"{s.cache_hits} cache hits; {s.elapsed_s:.1f}s ({s.items_per_s:.2f} items/s)"
        )


def run_spec(req: RunRequest) -> JSON:
    """What decides the results: a resumed run must match it exactly."""
    return {
        "task": req.task.spec(),
        "model": {"spec": req.model_spec, "identity": req.model.identity},
        "generation": req.task.generation.to_dict(),
        "repeats": req.repeats,
    }


async def run_evaluation(req: RunRequest) -> RunResult:
    try:
        samples = req.task.load()
        if req.shuffle is not None:
            # A seeded permutation before --limit: published orders can be sorted by label
            # (PubMedQA's first 20 test items are all "yes"), so a head slice can mislead.
            random.Random(req.shuffle).shuffle(samples)
        if req.limit is not None:
            samples = samples[: req.limit]
        req.task.check_samples(samples)
        if req.executor is None:
            # another executor checks each worker's own endpoint as it starts (RayExecutor does),
            # so the driver machine of a cluster run needs no model server of its own
            await req.model.check()
        spec = run_spec(req)
        path = req.out or req.default_out(fingerprint(spec))
        manifest = build_manifest(spec, req.task.data_files)
        manifest["samples"] = len(samples)
        manifest["limit"] = req.limit
        manifest["shuffle"] = req.shuffle
        run = RunDir.create_or_resume(path, manifest, overwrite=req.overwrite)
        stats = await execute(
            req.task,
            req.model,
            run,
            samples,
            repeats=req.repeats,
            concurrency=req.concurrency,
            progress=req.progress,
            rerun_changed=req.rerun_changed,
            executor=req.executor,
        )
    finally:
        await req.model.aclose()
    wanted = {s.id for s in samples}
    records = [r for r in stats.records if r.sample.id in wanted and r.repeat < req.repeats]
    summaries = summarize(records, [s.name for s in req.task.scorers])
    left = sum(1 for r in records if r.transient_failure)
    run_info: JSON = {
        "retried": stats.retried,
        "transient_failures_left": left,
        "changed": stats.changed,
        "removed": stats.removed,
    }
    if isinstance(req.model, EndpointPool):
        # which server answered how much, and what was re-sent (URLs and counts, no patient text)
        run_info["endpoints"] = req.model.stats()
    atomic_write_json(path / SUMMARY, {"summaries": [s.to_dict() for s in summaries], "run": run_info})
    # complete only when every item has a record and none of them waits to be asked again
    complete = len(records) == len(samples) * req.repeats and left == 0
    run.set_status("complete" if complete else "incomplete")
    return RunResult(run_path=path, stats=stats, summaries=summaries)


@dataclass(frozen=True, slots=True)
class ArmSettings:
    """How one arm runs, whatever the benchmark: generation settings, the backend, how many
    samples, requests in flight, and whether a different run at the folder may be discarded.
    A benchmark's own settings extend this with what its arms vary (a strategy, a format)."""

    generation: GenerationConfig = field(default_factory=GenerationConfig)
    backend: BackendOptions = field(default_factory=BackendOptions)
    limit: int | None = None
    concurrency: int | None = None
    overwrite: bool = False
    progress: bool = True
    rerun_changed: bool = False


async def run_arm(task: Task, model_spec: str, out: Path, settings: ArmSettings) -> RunResult:
    """Run ``task`` with the model ``model_spec`` names into exactly the folder ``out``: how a
    benchmark runs each of its arms (a model under a strategy or an answer format), resuming
    whatever ``out`` already holds."""
    request = RunRequest(
        task=task,
        model=parse_model_spec(model_spec, settings.backend),
        model_spec=model_spec,
        out=out,
        default_out=lambda _: out,
        limit=settings.limit,
        concurrency=settings.concurrency,
        overwrite=settings.overwrite,
        progress=settings.progress,
        rerun_changed=settings.rerun_changed,
    )
    return await run_evaluation(request)
