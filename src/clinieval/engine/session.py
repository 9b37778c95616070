"""One evaluation from request to summary, in the order that keeps bad input harmless.

Everything that can fail because of the user's input (dataset, model spec, endpoint, the token
budget of a long record) is checked before the run directory is created, so a mistake leaves no
partial run behind; a new run that still fails before its first record is removed again.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.engine.runner import Executor, RunStats, execute
from clinieval.engine.server_fit import fit_to_server, proxies_used, server_info
from clinieval.fsutil import atomic_write_json
from clinieval.models.base import Model
from clinieval.models.fingerprint import check_unchanged, resolve_mode
from clinieval.models.fingerprint import take as take_fingerprint
from clinieval.models.openai_http import OpenAIModel
from clinieval.models.pool import EndpointPool
from clinieval.models.ray_model import RayModel
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.records.failures import FailureReport, failure_report
from clinieval.records.runs import SUMMARY, RunDir, build_manifest, fingerprint, same_run
from clinieval.records.summary import ECHO_KEY, EchoCount, ScorerSummary, echo_count, summarize
from clinieval.task import Task
from clinieval.types import JSON, GenerationConfig, Sample


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
    """Who evaluates the items: this process when None (see clinieval.engine.runner.Executor)."""
    default_scorers: bool = False
    """The task's scorers are its own defaults (no ``--scorer``): one the server cannot serve
    correctly is left out with a note instead of refused (clinieval.engine.server_fit)."""
    fingerprint: str | None = None
    """``--fingerprint``: strict, warn or off (None: ``CLINIEVAL_FINGERPRINT``, else strict); see
    clinieval.models.fingerprint."""


@dataclass(slots=True)
class RunResult:
    run_path: Path
    stats: RunStats
    summaries: list[ScorerSummary]
    failures: FailureReport = field(default_factory=lambda: FailureReport(total=0))
    """Items whose model calls failed after every retry (outcomes such as refusals excluded)."""
    echo: EchoCount = field(default_factory=EchoCount)
    """Answers that mostly repeat their prompt (a base model behind a chat template)."""

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


def chosen_samples(task: Task, limit: int | None, shuffle: int | None) -> tuple[list[Sample], list[str]]:
    """The samples a run evaluates (a seeded shuffle before ``limit``, when asked), and the ids of
    all the task's samples in the data's order."""
    samples = task.load()
    data_order = [s.id for s in samples]
    if shuffle is not None:
        # A seeded permutation before --limit: published orders can be sorted by label
        # (PubMedQA's first 20 test items are all "yes"), so a head slice can mislead.
        random.Random(shuffle).shuffle(samples)
    if limit is not None:
        samples = samples[:limit]
    return samples, data_order


async def fit_checked_model(
    task: Task, model: Model, samples: list[Sample], *, default_scorers: bool, concurrency: int | None
) -> None:
    """The checks that need the model, after ``model.check()``: scorers and requests in flight
    fitted to the server, then the tokenizer, context size and room for the record, which the
    first item would otherwise refuse only after the run folder exists (a server reports its
    context size in check)."""
    await fit_to_server(task, model, default_scorers=default_scorers, typed_concurrency=concurrency)
    await task.context_policy.check(samples, model)


async def check_run(
    task: Task,
    model: Model,
    *,
    limit: int | None = None,
    shuffle: int | None = None,
    concurrency: int | None = None,
    default_scorers: bool = False,
) -> None:
    """Every check :func:`run_evaluation` makes before its first model call, against ``model``
    already opened and checked by the caller: what ``clinieval suite plan`` runs for each cell,
    so a plan that passes is a run whose every part starts (a suite checks each model once for
    all its cells, rather than loading it again per cell)."""
    samples, _ = chosen_samples(task, limit, shuffle)
    task.check_samples(samples)
    await fit_checked_model(task, model, samples, default_scorers=default_scorers, concurrency=concurrency)


async def check_arm(task: Task, model: Model, settings: ArmSettings) -> None:
    """:func:`check_run` for what :func:`run_arm` would run."""
    await check_run(task, model, limit=settings.limit, concurrency=settings.concurrency)


async def run_evaluation(req: RunRequest) -> RunResult:
    try:
        samples, data_order = chosen_samples(req.task, req.limit, req.shuffle)
        req.task.check_samples(samples)
        if req.executor is None:
            # another executor checks each worker's own endpoint as it starts (RayExecutor does),
            # so the driver machine of a cluster run needs no model server of its own
            await req.model.check()
            await fit_checked_model(
                req.task, req.model, samples, default_scorers=req.default_scorers, concurrency=req.concurrency
            )
        spec = run_spec(req)
        path = req.out or req.default_out(fingerprint(spec))
        manifest = build_manifest(spec, req.task.data_files)
        manifest["samples"] = len(samples)
        manifest["limit"] = req.limit
        manifest["shuffle"] = req.shuffle
        manifest["sample_order"] = in_data_order(data_order, samples)
        info = server_info(req.model)
        if info is not None:
            manifest["server"] = info.to_dict()
        if proxies := proxies_used(req.model):
            manifest["proxies"] = proxies
        model_fp = await run_fingerprint(req, path, manifest)
        manifest["model_fingerprint"] = model_fp
        run = RunDir.create_or_resume(path, manifest, overwrite=req.overwrite)
        # a resume may take other samples; what answered this time is kept beside what answered
        # first (a run from before fingerprints, or taken with off, gets its first one now)
        first = {} if run.manifest().get("model_fingerprint") else {"model_fingerprint": model_fp}
        run.set_status(
            "running", sample_order=manifest["sample_order"], model_fingerprint_last=model_fp, **first
        )
        try:
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
        except Exception:
            # a new run that failed before its first record leaves no folder to refuse the
            # corrected command as "a different run"
            run.discard_if_unused()
            raise
    finally:
        await req.model.aclose()
    wanted = {s.id for s in samples}
    records = [r for r in stats.records if r.sample.id in wanted and r.repeat < req.repeats]
    scorers = req.task.scorers
    summaries = summarize(
        records, [s.name for s in scorers], reads_text={s.name for s in scorers if s.needs == "generate"}
    )
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
    if isinstance(req.model, OpenAIModel):
        run_info["concurrency"] = req.model.concurrency_stats()
    if isinstance(req.model, RayModel):
        run_info["ray_workers"] = list(req.model.nodes)  # the node each worker asked from
    failures = failure_report(records)
    run_info["failed_items"] = {"count": failures.failed, "kinds": dict(failures.kinds)}
    echo = echo_count(records)
    run_info[ECHO_KEY] = echo.to_dict()
    atomic_write_json(path / SUMMARY, {"summaries": [s.to_dict() for s in summaries], "run": run_info})
    # complete only when every item has a record and none of them waits to be asked again
    complete = len(records) == len(samples) * req.repeats and left == 0
    run.set_status("complete" if complete else "incomplete")
    return RunResult(run_path=path, stats=stats, summaries=summaries, failures=failures, echo=echo)


async def run_fingerprint(req: RunRequest, path: Path, manifest: JSON) -> JSON | None:
    """The fingerprint of the model answering this run (models/fingerprint.py), compared with the
    one the run at ``path`` recorded when this resumes it: a different model is refused under
    ``--fingerprint strict`` before anything is asked or written."""
    mode = resolve_mode(req.fingerprint)
    if req.executor is not None:  # each worker opens its own model; this process asks nothing
        return None if mode == "off" else {"taken": False, "why": "items answered by another executor"}
    new = await take_fingerprint(req.model, mode)
    found = RunDir(path)
    old = found.manifest() if found.exists() and not req.overwrite else None
    if old is None or not same_run(old, manifest):
        return new  # a new run, or a different one create_or_resume refuses with its own words
    where = (new or {}).get("url") or req.model_spec
    return await check_unchanged(
        req.model,
        old.get("model_fingerprint"),
        new,
        mode,
        f"the model behind {where} changed since this run started",
        "Use a new --out, or --overwrite to start again",
    )


def in_data_order(data_order: list[str], chosen: list[Sample]) -> list[str]:
    """The ids of the samples a run evaluates, in the order of the task's data (not the order of
    --shuffle, nor the order they finish in): how the results browser lists them."""
    wanted = {s.id for s in chosen}
    return [sid for sid in data_order if sid in wanted]


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
        fingerprint=settings.backend.fingerprint,
    )
    return await run_evaluation(request)
