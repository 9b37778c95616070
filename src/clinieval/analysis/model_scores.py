"""Per-model score tables as users bring them: one benchmark or clinician score per model.

:func:`read_scores` reads one table (CSV, TSV, JSON or JSON Lines; wide or long) into
:class:`ModelScores` and turns every problem into one :class:`~clinieval.errors.UserError` naming
the file, line or row, and column, because the tables are typed by hand from papers and
spreadsheets. :func:`split_columns` cuts one wide table into benchmarks and clinicians, for users
who keep both in the same spreadsheet. :mod:`clinieval.analysis.correlate` correlates them.

Not :class:`clinieval.analysis.rankings.ScoreTable`: that one is items x models (a model's score
on each item), this one is a file's score columns x models (a model's one score per benchmark or
clinician), and it remembers the file it came from.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clinieval.datasets import beyond_json_limits, json_lines
from clinieval.errors import UserError

__all__ = ["LONG_LABELS", "LONG_SCORE", "ModelScores", "quoted", "read_scores", "split_columns"]

JSON = dict[str, Any]
Layout = Literal["wide", "long"]

#: Names of the column that says which benchmark or clinician a long-format row belongs to.
LONG_LABELS = ("benchmark", "clinician")
LONG_SCORE = "score"

_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none"})
_DELIMITED = {".csv": ",", ".tsv": "\t", ".txt": None}  # None: sniffed from the header line
_JSON = (".json", ".jsonl", ".ndjson")


@dataclass(frozen=True, slots=True)
class _Row:
    where: str  # "file:line" or "file: row N", for error messages
    cells: dict[str, object]


@dataclass(frozen=True, slots=True)
class _Raw:
    path: Path
    sha256: str
    header: str  # where the column names come from, for errors about the header
    columns: tuple[str, ...]
    rows: tuple[_Row, ...]


@dataclass(frozen=True)
class ModelScores:
    """Per-model scores: ``scores[column][model]`` for each benchmark (or clinician) column.

    Missing cells are absent from ``scores``; ``models`` lists every model named in the file (in
    file order) even when all its cells are blank, so a model that only one table scores can be
    reported rather than silently dropped. ``path`` and ``sha256`` identify the input in the output.
    """

    path: Path
    sha256: str
    layout: Layout
    model_column: str
    columns: tuple[str, ...]
    models: tuple[str, ...]
    scores: Mapping[str, Mapping[str, float]] = field(repr=False)

    def source(self) -> JSON:
        """The input's identity for the JSON output: the file as given, its hash and layout."""
        return {"file": str(self.path), "sha256": self.sha256, "layout": self.layout}


def read_scores(path: Path, *, model_column: str = "model", role: str = "score") -> ModelScores:
    """Read a per-model score table; ``role`` ("benchmark", "clinician") only words the errors.

    Wide layout: a ``model_column`` plus one numeric column per benchmark or clinician, one row per
    model. Long layout, recognised when the columns are exactly the model column, ``score`` and
    ``benchmark`` or ``clinician``: one row per (model, name) pair. Blank cells (or NA, null, none)
    are missing. Formats by extension: ``.csv``, ``.tsv``, ``.txt`` (tab-separated if its header
    line has a tab, else comma), ``.json`` (an array of row objects, an object mapping each model to
    its scores, or JSON Lines) and ``.jsonl``/``.ndjson``.
    """
    if not model_column.strip():
        raise UserError("the model column name is empty; name the column that holds the model names")
    raw = _read_raw(path, model_column)
    if model_column not in raw.columns:
        raise UserError(
            f"{raw.header}: no column {model_column!r} naming the models; the columns are "
            f"{quoted(raw.columns)} (name the model column with --model-column)"
        )
    labels = _long_labels(raw, model_column)
    if labels is not None:
        return _long_table(raw, model_column, labels)
    return _wide_table(raw, model_column, role)


def quoted(names: Sequence[str]) -> str:
    """Names for an error message: each quoted, comma-separated."""
    return ", ".join(repr(n) for n in names)


def _read_raw(path: Path, model_column: str) -> _Raw:
    suffix = path.suffix.lower()
    if suffix not in _DELIMITED and suffix not in _JSON:
        raise UserError(
            f"{path}: expected a .csv, .tsv, .txt, .json or .jsonl file, not {suffix or 'no extension'}"
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise UserError(f"{path}: is a folder, expected a score table file") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read: {e.strerror or e}") from None
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: byte {e.start} is not UTF-8; save the table as UTF-8 text") from None
    if not text.strip():
        raise UserError(f"{path}: the file is empty; expected a header line and one row per model")
    digest = hashlib.sha256(data).hexdigest()
    if suffix in _JSON:
        columns, rows = _json_rows(path, text, model_column)
        header = str(path)
    else:
        header, columns, rows = _delimited_rows(path, text, _DELIMITED[suffix])
    if not rows:
        raise UserError(f"{header}: a header but no rows; expected one row per model")
    return _Raw(path, digest, header, columns, tuple(rows))


def _delimited_rows(path: Path, text: str, delimiter: str | None) -> tuple[str, tuple[str, ...], list[_Row]]:
    if delimiter is None:
        first = next(line for line in text.splitlines() if line.strip())
        delimiter = "\t" if "\t" in first else ","
    reader = csv.reader(io.StringIO(text, newline=""), delimiter=delimiter)
    header_cells: list[str] | None = None
    header_where = f"{path}:1"
    rows: list[_Row] = []
    for record in reader:
        if not any(cell.strip() for cell in record):
            continue
        where = f"{path}:{reader.line_num}"
        if header_cells is None:
            header_cells = [c.strip() for c in record]
            header_where = where
            _check_header(header_where, header_cells)
            continue
        if len(record) != len(header_cells):
            raise UserError(
                f"{where}: {len(record)} cells but the header has {len(header_cells)} columns "
                f"({quoted(header_cells)})"
            )
        rows.append(_Row(where, dict(zip(header_cells, record, strict=True))))
    if header_cells is None:  # not blank text, but only empty cells (",,," or a lone "")
        raise UserError(
            f"{path}: the file is empty (only empty cells); expected a header line and one row per model"
        )
    return header_where, tuple(header_cells), rows


def _check_header(where: str, names: Sequence[str]) -> None:
    if any(not n for n in names):
        column = names.index("") + 1
        raise UserError(f"{where}: column {column} of the header has no name; every column needs one")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"{where}: column(s) {quoted(dup)} appear more than once in the header")


def _json_rows(path: Path, text: str, model_column: str) -> tuple[tuple[str, ...], list[_Row]]:
    if path.suffix.lower() == ".json":
        try:
            document = json.loads(text)
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":  # several values: JSON Lines saved as .json
                raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
        except (RecursionError, ValueError) as e:
            raise beyond_json_limits(path, text, e) from None
        else:
            rows = _json_document(path, document, model_column)
            return _json_columns(rows), rows
    # split on "\n" only: str.splitlines would also split inside strings holding U+2028 and the like
    rows = [
        _Row(where, {str(k): v for k, v in item.items()})
        for where, item in json_lines(text.split("\n"), path)
    ]
    return _json_columns(rows), rows


def _json_document(path: Path, document: object, model_column: str) -> list[_Row]:
    expected = "an array of row objects, or an object mapping each model to an object of its scores"
    if isinstance(document, list):
        rows = []
        for i, item in enumerate(document, 1):
            if not isinstance(item, dict):
                raise UserError(f"{path}: row {i} is {type(item).__name__}; expected {expected}")
            rows.append(_Row(f"{path}: row {i}", {str(k): v for k, v in item.items()}))
        return rows
    if isinstance(document, dict) and all(isinstance(v, dict) for v in document.values()):
        # {"model-a": {"MedQA": 71.2, ...}, ...}: the key is the model, so it goes in the model column.
        rows = []
        for m, scores in document.items():
            where = f"{path}: model {m!r}"
            if model_column in scores:
                raise UserError(
                    f"{where}: has a {model_column!r} field, but the object's keys name the models"
                )
            rows.append(_Row(where, {model_column: m, **{str(k): v for k, v in scores.items()}}))
        return rows
    raise UserError(f"{path}: expected {expected}, got {type(document).__name__}")


def _json_columns(rows: Sequence[_Row]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(c for r in rows for c in r.cells))


def _long_labels(raw: _Raw, model_column: str) -> str | None:
    """The long layout's label column (``benchmark``/``clinician``), or None for the wide layout.

    Decided from the header alone: the long layout is exactly model, label and ``score``. A header
    with ``score`` and a label column plus other columns is an error rather than a wide table,
    whose text "benchmark" column would otherwise fail later with a puzzling "not a number".
    """
    others = [c for c in raw.columns if c != model_column]
    labels = [c for c in others if c.lower() in LONG_LABELS]
    scores = [c for c in others if c.lower() == LONG_SCORE]
    if not labels or not scores:
        return None
    if len(others) != 2:
        extra = [c for c in others if c not in (labels[0], scores[0])]
        raise UserError(
            f"{raw.header}: looks like the long layout ({model_column}, {labels[0]}, {scores[0]}) but also "
            f"has column(s) {quoted(extra)}; remove them, or use the wide layout (one column per name)"
        )
    return labels[0]


def _model_name(row: _Row, column: str) -> str:
    value = row.cells.get(column)
    if isinstance(value, dict | list | bool):
        raise UserError(f"{row.where}: column {column!r} is {value!r}; expected a model name")
    text = "" if value is None else str(value).strip()
    if not text:
        raise UserError(f"{row.where}: column {column!r} is empty; expected a model name")
    return text


def _number(row: _Row, column: str) -> float | None:
    """A score cell: None when blank or NA; anything not a finite number names the row and column."""
    value = row.cells.get(column)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise UserError(f"{row.where}: column {column!r} is {value!r}; expected a number (blank if missing)")
    if isinstance(value, str):
        if value.strip().lower() in _MISSING:
            return None
        try:
            number = float(value.strip())
        except ValueError:
            raise UserError(
                f"{row.where}: column {column!r} is {value!r}; expected a number (leave the cell blank if "
                "missing)"
            ) from None
    else:
        try:
            number = float(value)
        except OverflowError:  # a JSON integer with hundreds of digits
            number = math.inf
    if not math.isfinite(number):
        raise UserError(f"{row.where}: column {column!r} is {value!r}; expected a finite number")
    return number


def _wide_table(raw: _Raw, model_column: str, role: str) -> ModelScores:
    columns = tuple(c for c in raw.columns if c != model_column)
    if not columns:
        raise UserError(
            f"{raw.header}: only the model column {model_column!r}; expected one numeric column per {role}"
        )
    first: dict[str, str] = {}
    scores: dict[str, dict[str, float]] = {c: {} for c in columns}
    for row in raw.rows:
        model = _model_name(row, model_column)
        if model in first:
            raise UserError(
                f"{row.where}: model {model!r} appears again (first at {first[model]}); expected one row "
                "per model"
            )
        first[model] = row.where
        for column in columns:
            value = _number(row, column)
            if value is not None:
                scores[column][model] = value
    return ModelScores(raw.path, raw.sha256, "wide", model_column, columns, tuple(first), scores)


def _long_table(raw: _Raw, model_column: str, label: str) -> ModelScores:
    score = next(c for c in raw.columns if c.lower() == LONG_SCORE)
    first: dict[tuple[str, str], str] = {}
    models: dict[str, None] = {}
    scores: dict[str, dict[str, float]] = {}
    for row in raw.rows:
        model = _model_name(row, model_column)
        value = row.cells.get(label)
        name = "" if value is None or isinstance(value, dict | list) else str(value).strip()
        if not name:
            raise UserError(f"{row.where}: column {label!r} is {value!r}; expected a {label} name")
        if (model, name) in first:
            raise UserError(
                f"{row.where}: model {model!r} and {label} {name!r} appear again (first at "
                f"{first[model, name]}); expected one row per model and {label}"
            )
        first[model, name] = row.where
        models[model] = None
        column = scores.setdefault(name, {})
        number = _number(row, score)
        if number is not None:
            column[model] = number
    return ModelScores(raw.path, raw.sha256, "long", model_column, tuple(scores), tuple(models), scores)


def split_columns(table: ModelScores, clinician_columns: Sequence[str]) -> tuple[ModelScores, ModelScores]:
    """One table holding both kinds of column, cut into (benchmarks, clinicians).

    For a spreadsheet with one row per model and, side by side, the benchmark scores and the
    clinicians' scores; ``clinician_columns`` names the clinicians, every other column is a
    benchmark. Both halves keep the file's path and hash.
    """
    wanted = list(dict.fromkeys(c.strip() for c in clinician_columns))
    if not wanted or any(not c for c in wanted):
        raise UserError("the clinician column list is empty or has an empty name; give e.g. 'a,b,c'")
    absent = [c for c in wanted if c not in table.columns]
    if absent:
        raise UserError(
            f"{table.path}: no column {quoted(absent)} among the clinician columns; the score columns are "
            f"{quoted(table.columns)}"
        )
    benchmarks = tuple(c for c in table.columns if c not in wanted)
    if not benchmarks:
        raise UserError(f"{table.path}: every score column is a clinician; expected at least one benchmark")

    def part(columns: Sequence[str]) -> ModelScores:
        scores = {c: table.scores[c] for c in columns}
        return ModelScores(
            table.path, table.sha256, table.layout, table.model_column, tuple(columns), table.models, scores
        )

    return part(benchmarks), part(tuple(c for c in table.columns if c in wanted))
