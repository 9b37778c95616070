"""Every benchmark of a suite prepared, and every model x benchmark cell planned, before any model call.

Preparing reads and checks each benchmark's data (a bad folder is one error naming the table);
planning asks each benchmark what one cell costs in model calls. ``clinieval suite plan`` prints
that; ``clinieval suite run`` does the same first, so a mistake anywhere in the suite stops it
before the first model is asked anything, and the progress view weighs each cell by its calls.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.errors import UserError
from clinieval.suite.config import BenchmarkEntry, Suite
from clinieval.suite.layout import in_suite_terms
from clinieval.suite.manifest import SuiteManifest, cell_key
from clinieval.suite.part import Cell, Prepared, Step


@dataclass(frozen=True, slots=True)
class PlannedCell:
    """One model x benchmark: its part and options, its data, its cell and its steps."""

    entry: BenchmarkEntry
    prepared: Prepared
    cell: Cell
    steps: tuple[Step, ...]

    @property
    def key(self) -> str:
        return cell_key(self.entry.name, self.cell.model.name)

    @property
    def label(self) -> str:
        return f"{self.entry.name} × {self.cell.model.name}"

    @property
    def calls(self) -> int:
        return sum(s.calls for s in self.steps)


@dataclass(frozen=True, slots=True)
class SuitePlan:
    suite: Suite
    prepared: tuple[Prepared, ...]
    cells: tuple[PlannedCell, ...]

    @property
    def calls(self) -> int:
        return sum(c.calls for c in self.cells)


def prepare(suite: Suite) -> tuple[Prepared, ...]:
    """Each benchmark's options and data checked (no model opened), in the suite file's order."""
    out = []
    for entry in suite.benchmarks:
        try:
            out.append(entry.part.prepare(entry.options, entry.shared, suite.base))
        except UserError as e:
            raise UserError(f"{suite.path}: [benchmarks.{entry.name}] {in_suite_terms(str(e))}") from None
    return tuple(out)


def plan(suite: Suite, out: Path, prepared: Sequence[Prepared] | None = None) -> SuitePlan:
    """Every cell of ``suite`` with its folder under ``out`` (``DIR/<benchmark>/<model>``) and steps."""
    ready = tuple(prepared) if prepared is not None else prepare(suite)
    cells = []
    for entry, p in zip(suite.benchmarks, ready, strict=True):
        for model in suite.models:
            cell = Cell(model=model, out=out / entry.name / model.name, shared=entry.shared)
            cells.append(PlannedCell(entry, p, cell, tuple(entry.part.plan(p, cell))))
    return SuitePlan(suite, ready, tuple(cells))


def plan_lines(planned: SuitePlan, manifest: SuiteManifest | None = None) -> list[str]:
    """The plan as an aligned plain-text table (a pipe or a CI log keeps every word): one row per
    cell with its calls, its status where ``manifest`` records one, and its steps last (the one
    column that may run long)."""
    header = ["benchmark", "model", "model calls"] + (["done"] if manifest else []) + ["steps"]
    rows = []
    for c in planned.cells:
        row = [c.entry.name, c.cell.model.name, f"{c.calls:,}"]
        if manifest is not None:
            failed = manifest.cells().get(c.key, {}).get("failed_items")
            row.append(manifest.status(c.key) + (f" ({failed} failed)" if failed else ""))
        row.append("; ".join(f"{s.what} ({s.calls:,})" for s in c.steps) or "nothing to ask")
        rows.append(row)
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header) - 1)]
    lines = [_line(row, widths) for row in [header, *rows]]
    lines.insert(1, "  ".join("-" * w for w in [*widths, len(header[-1])]))
    models, benchmarks = len(planned.suite.models), len(planned.prepared)
    total = f"{len(planned.cells)} cells ({models} models x {benchmarks} benchmarks), "
    total += f"{planned.calls:,} model calls in all"
    if manifest is not None:
        left = sum(c.calls for c in planned.cells if manifest.status(c.key) != "complete")
        total += f", {left:,} still to ask (complete cells are not asked again)"
    lines += ["", total]
    for p in planned.prepared:
        lines.append(f"  {p.benchmark}: {p.describe}")
    return lines


def _line(row: list[str], widths: list[int]) -> str:
    """The columns padded to ``widths`` (the calls right-aligned), then the last one as it is."""
    padded = [
        v.rjust(w) if i == 2 else v.ljust(w) for i, (v, w) in enumerate(zip(row[:-1], widths, strict=True))
    ]
    return "  ".join([*padded, row[-1]])
