"""Running a planned suite: every cell through its benchmark's own code, resumable as a whole.

Cells run one after another (each keeps the endpoint's requests in flight itself), and the
manifest is updated as each starts and ends, so a ``kill -9`` anywhere leaves a suite the same
command finishes: complete cells are skipped without opening their model, the cell that was
running resumes through its benchmark's own resume (its runs skip what they recorded), and the
rest run. A cell whose settings changed since it ran is refused before anything is asked (its
folder holds results of the old settings), unless ``overwrite`` says to run it again. A cell that
fails is recorded with its error and the others still run; the caller reports them at the end.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.errors import UserError
from clinieval.records.failures import failed_kinds_under, fix_lines
from clinieval.records.summary import ECHO_KEY, EchoCount, echo_under
from clinieval.suite.layout import in_suite_terms
from clinieval.suite.manifest import SuiteManifest, cell_settings, data_hashes, jsonable
from clinieval.suite.plan import PlannedCell, SuitePlan
from clinieval.suite.preflight import find_refusals, refusal_text
from clinieval.suite.progress import suite_view

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class CellOutcome:
    """How one cell ended in this run: ``complete`` (``failed_items`` left out of its score),
    ``failed`` (with the error), or ``skipped`` (complete before this run)."""

    label: str
    status: str
    seconds: float = 0.0
    error: str | None = None
    failed_items: int = 0
    unparsed_items: int = 0
    """Items the judge answered without a verdict (:attr:`Headline.unparsed`): reported, not retried."""
    echo: EchoCount = field(default_factory=EchoCount)
    """Answers of the cell's runs that mostly repeat their prompt (read from their summaries)."""
    failed_kinds: Mapping[str, int] = field(default_factory=dict)
    """The failed items by kind, from the cell's runs' summaries: each gets its fix at the end."""


@dataclass(frozen=True, slots=True)
class SuiteOutcome:
    cells: tuple[CellOutcome, ...]

    @property
    def failed(self) -> list[CellOutcome]:
        return [c for c in self.cells if c.status == "failed"]

    @property
    def with_failed_items(self) -> list[CellOutcome]:
        return [c for c in self.cells if c.status != "failed" and c.failed_items]

    @property
    def echoing(self) -> list[CellOutcome]:
        return [c for c in self.cells if c.echo.warns]


def open_out(out: Path, keep: Collection[str] = ()) -> SuiteManifest:
    """The manifest of the suite at ``out``, or a new one when ``out`` is new or holds nothing but
    the names in ``keep`` (the demo's suite file and data); a folder that holds something else is
    refused."""
    found = SuiteManifest.read(out)
    if found is not None:
        return found
    if out.exists() and (not out.is_dir() or any(p.name not in keep for p in out.iterdir())):
        raise UserError(f"{out}: exists and is not a suite folder (no suite.json); choose another --out")
    return SuiteManifest.new(out)


def refuse_changed(
    planned: SuitePlan, manifest: SuiteManifest, hashes: Mapping[str, Mapping[str, str]], overwrite: bool
) -> list[PlannedCell]:
    """Cells whose settings or data differ from what they ran with: refused (one error naming the
    cell and the field, or the benchmark and the file) unless ``overwrite``, when they are
    returned to be run again from scratch. A cell that never started has nothing to protect."""
    again = []
    for c in planned.cells:
        diff = manifest.changed(c.key, cell_settings(c.entry, c.cell.model))
        where = (
            f"[benchmarks.{c.entry.name}] × model {c.cell.model.name}: {diff} since it ran into {c.cell.out}"
        )
        if diff is None and manifest.status(c.key) != "pending":
            diff = manifest.changed_data(c.entry.name, hashes[c.entry.name])
            old = c.cell.out.parent
            where = f"[benchmarks.{c.entry.name}] {diff}; its results in {old} belong to the old data"
        if diff is None:
            continue
        if not overwrite:
            raise UserError(
                f"{planned.suite.path}: {where}; set it back, use another --out, or pass --overwrite "
                "to run the changed cells again from scratch"
            )
        again.append(c)
    return again


def run_suite(
    planned: SuitePlan,
    out: Path,
    *,
    overwrite: bool = False,
    progress: bool = True,
    keep: Collection[str] = (),
    check: bool = True,
    skip_refused: bool = False,
) -> SuiteOutcome:
    """Run every cell of ``planned`` into ``out`` (see the module docstring; ``keep``: names a new
    ``out`` may already hold). Every cell still to run is checked first (``check``,
    :mod:`clinieval.suite.preflight`): one that its benchmark would refuse stops the suite before
    any cell runs, unless ``skip_refused``: such cells are then recorded as failed with their
    refusal, never opened again in this run, and the others run."""
    manifest = open_out(out, keep)
    hashes = data_hashes(planned.prepared)
    again = refuse_changed(planned, manifest, hashes, overwrite)
    refused: dict[str, str] = {}
    if check:  # before anything is written: a refused cell leaves no suite folder behind
        found, _ = find_refusals([c for c in planned.cells if c in again or not _finished(manifest, c)])
        if found and not skip_refused:
            raise UserError(f"{planned.suite.path}: {refusal_text(found)}")
        refused = {c.key: message for c, message in found}
    manifest.record(planned.suite, planned.prepared, hashes)
    for c in again:
        shutil.rmtree(c.cell.out, ignore_errors=True)
        manifest.set_cell(c.key, status="pending", failed_items=0, wall_s=0.0, attempts=0)
    for c in planned.cells:
        manifest.cells().setdefault(c.key, {"status": "pending"}).update(
            benchmark=c.entry.name,
            model=c.cell.model.name,
            folder=str(c.cell.out.relative_to(out)),
            settings=jsonable(cell_settings(c.entry, c.cell.model)),
            planned_calls=c.calls,
        )
    manifest.write()
    todo = [c for c in planned.cells if not _finished(manifest, c)]
    done_calls = sum(c.calls for c in planned.cells if c not in todo)
    view = suite_view(progress, planned.calls, done_calls, len(todo))
    outcomes = [CellOutcome(c.label, "skipped") for c in planned.cells if c not in todo]
    try:
        for c in todo:
            view.start(c.label, c.calls, c.cell.out)
            outcome = _refused(c, manifest, refused[c.key]) if c.key in refused else _run_cell(c, manifest)
            view.finish(c.label, c.calls, outcome.status, outcome.seconds)
            outcomes.append(outcome)
    finally:
        view.close()
    return SuiteOutcome(tuple(outcomes))


def _finished(manifest: SuiteManifest, c: PlannedCell) -> bool:
    """Complete, with nothing failed to ask again, and its folder still there."""
    cell = manifest.cells().get(c.key, {})
    return cell.get("status") == "complete" and not cell.get("failed_items") and c.cell.out.exists()


def _run_cell(c: PlannedCell, manifest: SuiteManifest) -> CellOutcome:
    manifest.set_cell(c.key, status="running", started=time.strftime("%Y-%m-%dT%H:%M:%S%z"), error=None)
    start = time.perf_counter()
    failed_items = unparsed = 0
    try:
        asyncio.run(c.entry.part.run(c.prepared, c.cell))
        line = c.entry.part.headline(c.prepared, c.cell)
        failed_items, unparsed = line.failed, line.unparsed
    except UserError as e:  # worded for the suite file: a suite user has no --allow-host to pass
        return _failed(c, manifest, in_suite_terms(str(e), c.entry.name, c.entry.part.options), start)
    except Exception as e:  # a part's own fault must not stop the other cells
        log.debug("cell %s failed", c.key, exc_info=True)
        return _failed(c, manifest, f"{type(e).__name__}: {e}", start)
    seconds = time.perf_counter() - start
    echo = echo_under(c.cell.out)  # every run the cell wrote, through its benchmark's own code
    manifest.set_cell(
        c.key,
        status="complete",
        **_attempt(manifest, c.key, seconds),
        failed_items=failed_items,
        unparsed_items=unparsed,
        **{ECHO_KEY: echo.to_dict()},
    )
    kinds = failed_kinds_under(c.cell.out) if failed_items else {}
    return CellOutcome(
        c.label,
        "complete",
        seconds,
        failed_items=failed_items,
        unparsed_items=unparsed,
        echo=echo,
        failed_kinds=kinds,
    )


def _failed(c: PlannedCell, manifest: SuiteManifest, error: str, start: float) -> CellOutcome:
    seconds = time.perf_counter() - start
    manifest.set_cell(c.key, status="failed", **_attempt(manifest, c.key, seconds), error=error)
    return CellOutcome(c.label, "failed", seconds, error)


def _refused(c: PlannedCell, manifest: SuiteManifest, error: str) -> CellOutcome:
    """A cell its pre-flight refused: failed, with the refusal; not an attempt (nothing ran)."""
    manifest.set_cell(c.key, status="failed", error=error)
    return CellOutcome(c.label, "failed", 0.0, error)


def _attempt(manifest: SuiteManifest, key: str, seconds: float) -> dict[str, float | int]:
    """The cell's ``wall_s`` and ``attempts`` after one more attempt: the wall time over every
    attempt that worked on its results (a rerun that retries a few failed items, or finds nothing
    to ask, adds its seconds to the first run's rather than replacing the time the answers took
    with its own). A cell started afresh (changed settings, ``--overwrite``) starts from 0
    (:func:`run_suite` resets both)."""
    cell = manifest.cells().get(key, {})
    before = cell.get("wall_s")
    wall = round((float(before) if isinstance(before, int | float) else 0.0) + seconds, 3)
    return {"wall_s": wall, "attempts": int(cell.get("attempts", 0)) + 1}


def summary_lines(outcome: SuiteOutcome, out: Path) -> list[str]:
    """What a user reads at the end: counts, then each failed cell with its error."""
    counts = {s: sum(c.status == s for c in outcome.cells) for s in ("complete", "skipped", "failed")}
    lines = [
        f"suite {out}: {counts['complete']} cells run, {counts['skipped']} already complete, "
        f"{counts['failed']} failed"
    ]
    for c in outcome.failed:
        lines.append(f"  failed: {c.label}: {c.error}")
    for c in outcome.with_failed_items:
        lines.append(f"  {c.label}: {c.failed_items} items' model calls failed (left out of its score)")
        lines += [f"  {line}" for line in fix_lines(c.failed_kinds)]
    for c in outcome.cells:
        if c.unparsed_items:
            lines.append(
                f"  {c.label}: {c.unparsed_items} items got no verdict from the judge (left out of its score;"
                " the replies are kept, so a rerun reads the same: see the cell's judge report)"
            )
    for c in outcome.echoing:
        lines.append(f"  warning: {c.label}: {c.echo.message()}")
    if outcome.failed or outcome.with_failed_items:
        lines.append("run the same command again to retry them; finished cells are not asked again")
    return lines
