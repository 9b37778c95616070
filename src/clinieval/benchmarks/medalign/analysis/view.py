"""The input side of the MedAlign analysis: check the table, then cut it into the paper's two views.

Every section of the analysis walks the rows of one view (all items with errors imputed as
incorrect, or items without errors) through :class:`View`, which reads keys, labels and numeric
cells once. Input mistakes are refused here, up front (:func:`validate`), so that anything a
section finds wrong later is a statistic the data cannot define, never bad input.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from clinieval.analysis.table import LongTable, Row
from clinieval.benchmarks.medalign.analysis.columns import LengthCounter, MedAlignColumns
from clinieval.errors import UserError

__all__ = [
    "ERROR_RULE",
    "JSON",
    "Cells",
    "Settings",
    "View",
    "error_items",
    "error_kind",
    "impute_errors",
    "make_view",
    "table_items",
    "validate",
]

JSON = dict[str, Any]
Cells = dict[tuple[str, str], float]
ERROR_RULE = (
    "a response with a provider error and no correctness judgement counts as incorrect "
    "(MedAlign counted its 44 content-filtered items as incorrect)"
)


@dataclass(frozen=True)
class Settings:
    """The caller's options, passed to every section that needs them."""

    level: float
    resamples: int
    seed: int
    counter: LengthCounter
    counter_name: str


@dataclass
class View:
    """One view's rows and the labels every section reads, plus its undefined statistics.

    ``keys[k]`` is (instruction, arm) of ``primary[k]``; keys and numeric columns are read once,
    since every section walks the same rows.
    """

    name: str
    table: LongTable
    cols: MedAlignColumns
    primary: list[Row]
    undefined: list[str] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(init=False)
    items: list[str] = field(init=False)
    models: list[str] = field(init=False)
    _cells: dict[str, Cells] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        t, c = self.table, self.cols
        self.keys = [(str(t.text(r, c.instruction)), str(t.text(r, c.model))) for r in self.primary]
        self.items = list(dict.fromkeys(i for i, _ in self.keys))
        self.models = list(dict.fromkeys(m for _, m in self.keys))

    def rows_of(self, model: str) -> list[Row]:
        return [r for r, (_, m) in zip(self.primary, self.keys, strict=True) if m == model]

    def has(self, column: str) -> bool:
        """The column exists and holds at least one value in this view."""
        return column in self.table.columns and any(
            self.table.text(r, column) is not None for r in self.primary
        )

    def cells(self, column: str) -> Cells:
        """(instruction, model) → value of a numeric column, present cells only."""
        if column not in self._cells:
            out: Cells = {}
            for row, key in zip(self.primary, self.keys, strict=True):
                value = self.table.number(row, column)
                if value is not None:
                    out[key] = value
            self._cells[column] = out
        return self._cells[column]

    def item_labels(self, column: str) -> dict[str, str | None]:
        """Instruction → its first non-empty value of an item-level column (category, ...)."""
        out: dict[str, str | None] = dict.fromkeys(self.items)
        for row, (item, _) in zip(self.primary, self.keys, strict=True):
            if out[item] is None:
                out[item] = self.table.text(row, column)
        return out

    @property
    def clustering(self) -> JSON:
        """How this view's intervals and paired tests resample: by patient when every instruction
        names one and there are 2+, else instruction by instruction (with the reason)."""
        column = self.cols.patient
        if column is None:
            return {"by": None, "why": "clustering turned off"}
        labels = self.item_labels(column) if column in self.table.columns else dict.fromkeys(self.items)
        unnamed = [i for i, p in labels.items() if p is None]
        if unnamed:
            return {"by": None, "why": f"instruction {unnamed[0]!r} names no patient in column {column!r}"}
        patients = len(set(labels.values()))
        if patients < 2:
            return {"by": None, "why": "every instruction is about one patient"}
        return {"by": column, "patients": patients, "items": len(labels)}

    def patients(self) -> dict[str, str] | None:
        """Instruction → patient when the view is clustered (see :attr:`clustering`), else None."""
        if self.clustering["by"] is None:
            return None
        return {i: str(p) for i, p in self.item_labels(str(self.cols.patient)).items()}

    def missing(self, what: str, column: str) -> None:
        self.undefined.append(f"{what}: no values in column {column!r}")


def validate(table: LongTable, cols: MedAlignColumns) -> None:
    """Refuse input errors up front, so that anything raised later is a degenerate statistic."""
    table.require(cols.instruction, cols.model, *cols.metrics)
    clash = sorted(set(cols.metrics) & set(cols.roles()))
    if clash:
        raise UserError(f"metric column(s) {', '.join(clash)} also have another role; name them once")
    numeric = [c for c in (*cols.metrics, cols.correct, cols.rank, cols.ehr_tokens) if c in table.columns]
    for row in table.rows:
        for role in (cols.instruction, cols.model):
            if table.text(row, role) is None:
                raise UserError(f"{row.where}: column {role!r} is empty")
        for column in numeric:
            value = table.number(row, column)
            if column == cols.correct and value not in (None, 0.0, 1.0):
                raise UserError(f"{row.where}: column {column!r} is {value!r}; correctness must be 1 or 0")


def table_items(table: LongTable, cols: MedAlignColumns) -> list[str]:
    return list(dict.fromkeys(str(table.text(r, cols.instruction)) for r in table.rows))


def error_kind(table: LongTable, cols: MedAlignColumns, row: Row) -> str | None:
    return table.text(row, cols.error_kind) if cols.error_kind in table.columns else None


def error_items(table: LongTable, cols: MedAlignColumns) -> dict[str, dict[str, str]]:
    """Instruction → {arm: error kind} for every instruction where some arm had a provider error."""
    out: dict[str, dict[str, str]] = {}
    for row in table.rows:
        kind = error_kind(table, cols, row)
        if kind is not None:
            arms = out.setdefault(str(table.text(row, cols.instruction)), {})
            arms.setdefault(str(table.text(row, cols.model)), kind)
    return out


def impute_errors(table: LongTable, cols: MedAlignColumns) -> tuple[LongTable, int]:
    """The paper's rule for the all-items view: an error row not judged counts as incorrect."""
    if cols.correct not in table.columns:
        return table, 0
    rows: list[Row] = []
    imputed = 0
    for row in table.rows:
        if error_kind(table, cols, row) is not None and table.number(row, cols.correct) is None:
            row = Row(row.where, {**row.cells, cols.correct: 0})
            imputed += 1
        rows.append(row)
    return LongTable(table.path, table.columns, tuple(rows)), imputed


def _primary_rows(table: LongTable, cols: MedAlignColumns) -> list[Row]:
    """One row per instruction and arm: the first-listed rater's (analyze's rule), all rows
    without a rater column. A repeated (instruction, arm) is an input error."""
    first: dict[str, str | None] = {}
    seen: dict[tuple[str, str], str] = {}
    out: list[Row] = []
    has_rater = cols.rater in table.columns
    for row in table.rows:
        item, model = str(table.text(row, cols.instruction)), str(table.text(row, cols.model))
        if has_rater and first.setdefault(item, table.text(row, cols.rater)) != table.text(row, cols.rater):
            continue
        if (item, model) in seen:
            raise UserError(
                f"{row.where}: instruction {item!r} and arm {model!r} already appear at "
                f"{seen[(item, model)]}; give one row per instruction and arm (per rater with a rater column)"
            )
        seen[(item, model)] = row.where
        out.append(row)
    return out


def make_view(name: str, table: LongTable, cols: MedAlignColumns) -> View:
    return View(name, table, cols, _primary_rows(table, cols))
