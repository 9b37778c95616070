"""Does a benchmark rank models the way clinicians do? Per-model score tables, correlated.

EHRNoteQA (Kweon et al., 2024) argues that a clinical benchmark is useful when the order in which
it ranks models agrees with the order clinicians give those same models on real work. Their table
reports, for every benchmark and every clinician, Spearman's rho and Kendall's tau-b between the
benchmark's per-model scores and that clinician's per-model scores, and the mean over clinicians.
This module reproduces that analysis for numbers users bring from anywhere:

* :func:`read_scores` reads one per-model table (CSV, TSV, JSON or JSON Lines; wide or long) and
  turns every problem into one :class:`~clinieval.errors.UserError` naming the file, line or row,
  and column, because the tables are typed by hand from papers and spreadsheets.
* :func:`split_columns` cuts one wide table into benchmarks and clinicians, for users who keep
  both in the same spreadsheet.
* :func:`correlate_scores` computes every (benchmark, clinician) cell over the models both score.
  A cell with no value (a constant column, fewer models than the statistic needs) is reported as
  undefined with its reason instead of failing the whole table.
* :func:`render_markdown` lays the result out like the paper's table; :func:`write_outputs`
  writes ``correlation.json`` and ``correlation.md`` atomically.

scipy is imported only by the statistics in :mod:`clinieval.analysis.agreement`.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import re
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clinieval.datasets import json_lines
from clinieval.errors import UserError

__all__ = [
    "CLINICIAN_MEAN",
    "SMALL_N",
    "ScoreTable",
    "correlate_scores",
    "read_scores",
    "render_markdown",
    "split_columns",
    "write_outputs",
]

JSON = dict[str, Any]
Layout = Literal["wide", "long"]
Kind = Literal["spearman", "kendall"]
KINDS: tuple[Kind, ...] = ("spearman", "kendall")

#: Label of the pseudo-clinician whose score is the mean of the real clinicians' scores.
CLINICIAN_MEAN = "clinician mean"
#: Below this many models a correlation is flagged as very uncertain (still computed).
SMALL_N = 5
#: Names of the column that says which benchmark or clinician a long-format row belongs to.
LONG_LABELS = ("benchmark", "clinician")
LONG_SCORE = "score"

_MISSING = frozenset({"", "na", "n/a", "nan", "null", "none"})
_DELIMITED = {".csv": ",", ".tsv": "\t", ".txt": None}  # None: sniffed from the header line
_JSON = (".json", ".jsonl", ".ndjson")


# --------------------------------------------------------------------------------------------
# Reading


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
class ScoreTable:
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


def read_scores(path: Path, *, model_column: str = "model", role: str = "score") -> ScoreTable:
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
            f"{_names(raw.columns)} (name the model column with --model-column)"
        )
    labels = _long_labels(raw, model_column)
    if labels is not None:
        return _long_table(raw, model_column, labels)
    return _wide_table(raw, model_column, role)


def _names(names: Sequence[str]) -> str:
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
                f"({_names(header_cells)})"
            )
        rows.append(_Row(where, dict(zip(header_cells, record, strict=True))))
    assert header_cells is not None  # the text is not blank, so some record has a non-blank cell
    return header_where, tuple(header_cells), rows


def _check_header(where: str, names: Sequence[str]) -> None:
    if any(not n for n in names):
        column = names.index("") + 1
        raise UserError(f"{where}: column {column} of the header has no name; every column needs one")
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise UserError(f"{where}: column(s) {_names(dup)} appear more than once in the header")


def _json_rows(path: Path, text: str, model_column: str) -> tuple[tuple[str, ...], list[_Row]]:
    if path.suffix.lower() == ".json":
        try:
            document = json.loads(text)
        except json.JSONDecodeError as e:
            if e.msg != "Extra data":  # several values: JSON Lines saved as .json
                raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
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
            f"has column(s) {_names(extra)}; remove them, or use the wide layout (one column per name)"
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
        number = float(value)
    if not math.isfinite(number):
        raise UserError(f"{row.where}: column {column!r} is {value!r}; expected a finite number")
    return number


def _wide_table(raw: _Raw, model_column: str, role: str) -> ScoreTable:
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
    return ScoreTable(raw.path, raw.sha256, "wide", model_column, columns, tuple(first), scores)


def _long_table(raw: _Raw, model_column: str, label: str) -> ScoreTable:
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
    return ScoreTable(raw.path, raw.sha256, "long", model_column, tuple(scores), tuple(models), scores)


def split_columns(table: ScoreTable, clinician_columns: Sequence[str]) -> tuple[ScoreTable, ScoreTable]:
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
            f"{table.path}: no column {_names(absent)} among the clinician columns; the score columns are "
            f"{_names(table.columns)}"
        )
    benchmarks = tuple(c for c in table.columns if c not in wanted)
    if not benchmarks:
        raise UserError(f"{table.path}: every score column is a clinician; expected at least one benchmark")

    def part(columns: Sequence[str]) -> ScoreTable:
        scores = {c: table.scores[c] for c in columns}
        return ScoreTable(
            table.path, table.sha256, table.layout, table.model_column, tuple(columns), table.models, scores
        )

    return part(benchmarks), part(tuple(c for c in table.columns if c in wanted))


# --------------------------------------------------------------------------------------------
# Correlating


_NEEDS = {"spearman": ("Spearman's rho", 3), "kendall": ("Kendall's tau-b", 2)}


def _undefined(reason: str) -> JSON:
    return {"statistic": None, "pvalue": None, "undefined": reason}


def _why_undefined(kind: Kind, x: Sequence[float], y: Sequence[float]) -> str | None:
    """The reason in the table's own words (agreement's errors speak of "x" and "y")."""
    name, minimum = _NEEDS[kind]
    n = len(x)
    if n < minimum:
        return f"only {n} model(s) have both scores; {name} needs at least {minimum}"
    for values, who in ((x, "the benchmark"), (y, "the clinician")):
        if len(set(values)) == 1:
            return f"{who} gives all {n} models the same score, so {name} is undefined"
    return None


def _statistic(kind: Kind, x: list[float], y: list[float]) -> JSON:
    """One coefficient as a JSON cell; an undefined one carries the reason instead of a value."""
    from clinieval.analysis.agreement import kendall_tau, spearman

    reason = _why_undefined(kind, x, y)
    if reason is not None:
        return _undefined(reason)
    try:
        r = spearman(x, y) if kind == "spearman" else kendall_tau(x, y)
    except UserError as e:  # UndefinedStatisticError not foreseen above: still one cell, not the table
        return _undefined(str(e))
    return {"statistic": r.statistic, "pvalue": r.pvalue, "undefined": None}


def _cell(
    benchmark: Mapping[str, float], clinician: Mapping[str, float], order: Sequence[str], sign: float
) -> JSON:
    models = [m for m in order if m in benchmark and m in clinician]
    x = [sign * benchmark[m] for m in models]
    y = [clinician[m] for m in models]
    cell: JSON = {"n": len(models), "models": models}
    for kind in KINDS:
        cell[kind] = _statistic(kind, x, y)
    return cell


def _clinician_mean(clinicians: ScoreTable, order: Sequence[str]) -> dict[str, float]:
    """Each model's mean over the clinicians, for models every clinician scored.

    A model some clinician did not score is left out rather than averaged over fewer clinicians:
    clinicians often use different scales, and a mean over a subset would not be comparable.
    """
    cols = [clinicians.scores[c] for c in clinicians.columns]
    return {m: math.fsum(c[m] for c in cols) / len(cols) for m in order if all(m in c for c in cols)}


def _close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def _best(values: Mapping[str, float | None]) -> list[str]:
    """The names with the highest value; several when tied (to rounding), none when all undefined."""
    defined = {k: v for k, v in values.items() if v is not None}
    if not defined:
        return []
    top = max(defined.values())
    return [k for k, v in defined.items() if _close(v, top)]


def _means(cells: Mapping[str, JSON], clinicians: Sequence[str], kind: str) -> JSON:
    used = [c for c in clinicians if cells[c][kind]["statistic"] is not None]
    values = [cells[c][kind]["statistic"] for c in used]
    return {"mean": math.fsum(values) / len(values) if values else None, "clinicians": used}


def _check_names(
    benchmarks: ScoreTable, clinicians: ScoreTable, lower: Collection[str], with_mean: bool
) -> None:
    unknown = sorted(set(lower) - set(benchmarks.columns))
    if unknown:
        raise UserError(
            f"lower-is-better names {_names(unknown)}, which is not a benchmark in {benchmarks.path}; "
            f"the benchmarks are {_names(benchmarks.columns)}"
        )
    if with_mean and CLINICIAN_MEAN in clinicians.columns:
        raise UserError(
            f"{clinicians.path}: a clinician is named {CLINICIAN_MEAN!r}, the name of the mean of the "
            "clinicians' scores; rename that column (or leave out the mean column)"
        )


def _models(benchmarks: ScoreTable, clinicians: ScoreTable) -> JSON:
    in_clinicians, in_benchmarks = set(clinicians.models), set(benchmarks.models)
    shared = [m for m in benchmarks.models if m in in_clinicians]
    if not shared:
        raise UserError(
            f"no model appears in both {benchmarks.path} ({_names(benchmarks.models[:5])}"
            f"{', ...' if len(benchmarks.models) > 5 else ''}) and {clinicians.path} "
            f"({_names(clinicians.models[:5])}{', ...' if len(clinicians.models) > 5 else ''}); "
            "model names must match exactly"
        )
    return {
        "shared": shared,
        "only_in_benchmarks": [m for m in benchmarks.models if m not in in_clinicians],
        "only_in_clinicians": [m for m in clinicians.models if m not in in_benchmarks],
    }


def correlate_scores(
    benchmarks: ScoreTable,
    clinicians: ScoreTable,
    *,
    lower_is_better: Collection[str] = (),
    clinician_mean: bool = True,
) -> JSON:
    """Spearman rho and Kendall tau-b of every benchmark against every clinician, as JSON.

    Each cell uses the models with a score in both columns (listed, with n). Benchmarks named in
    ``lower_is_better`` (a rank, an error rate) are negated first, so a positive correlation always
    means "agrees with the clinician". Per benchmark, the mean of each coefficient over the real
    clinicians whose cell is defined; ``best`` names the highest per clinician and by mean (ties
    listed together; best means most positive, since a negative correlation is disagreement). With
    two or more clinicians and ``clinician_mean``, an extra column correlates each benchmark with
    the clinicians' mean score (:data:`CLINICIAN_MEAN`); it is not part of the mean over clinicians.
    """
    with_mean = clinician_mean and len(clinicians.columns) >= 2
    _check_names(benchmarks, clinicians, lower_is_better, with_mean)
    models = _models(benchmarks, clinicians)
    targets: dict[str, Mapping[str, float]] = {c: clinicians.scores[c] for c in clinicians.columns}
    if with_mean:
        targets[CLINICIAN_MEAN] = _clinician_mean(clinicians, clinicians.models)
    cells: JSON = {}
    summary: JSON = {}
    for b in benchmarks.columns:
        sign = -1.0 if b in lower_is_better else 1.0
        cells[b] = {c: _cell(benchmarks.scores[b], t, benchmarks.models, sign) for c, t in targets.items()}
        summary[b] = {k: _means(cells[b], clinicians.columns, k) for k in KINDS}
    result: JSON = {
        "inputs": {"benchmarks": benchmarks.source(), "clinicians": clinicians.source()},
        "model_column": benchmarks.model_column,
        "benchmarks": list(benchmarks.columns),
        "clinicians": list(clinicians.columns),
        "clinician_mean": _mean_section(targets) if with_mean else None,
        "lower_is_better": [b for b in benchmarks.columns if b in lower_is_better],
        "models": models,
        "cells": cells,
        "mean_over_clinicians": summary,
        "best": _best_section(benchmarks.columns, list(targets), cells, summary),
    }
    result["notes"] = _notes(result)
    return result


def _mean_section(targets: Mapping[str, Mapping[str, float]]) -> JSON:
    return {
        "label": CLINICIAN_MEAN,
        "definition": (
            "each model's arithmetic mean of the clinicians' raw scores, over models that every "
            "clinician scored"
        ),
        "models": list(targets[CLINICIAN_MEAN]),
        "scores": dict(targets[CLINICIAN_MEAN]),
    }


def _best_section(benchmarks: Sequence[str], columns: Sequence[str], cells: JSON, summary: JSON) -> JSON:
    return {
        kind: {
            "per_clinician": {
                c: _best({b: cells[b][c][kind]["statistic"] for b in benchmarks}) for c in columns
            },
            "mean_over_clinicians": _best({b: summary[b][kind]["mean"] for b in benchmarks}),
        }
        for kind in KINDS
    }


def _small_n(cells: JSON) -> str | None:
    """Which pairs have fewer than SMALL_N models, said once when it is all of them."""
    pairs = [(b, c, cell["n"]) for b, row in cells.items() for c, cell in row.items()]
    small = [(b, c, n) for b, c, n in pairs if 0 < n < SMALL_N]
    if not small:
        return None
    if len(small) == len(pairs):
        ns = sorted({n for _, _, n in small})
        return f"every correlation here is over fewer than {SMALL_N} models (n = {', '.join(map(str, ns))})"
    listed = ", ".join(f"{b} vs {c} (n = {n})" for b, c, n in small)
    return f"fewer than {SMALL_N} models for {listed}"


def _notes(result: JSON) -> list[str]:
    """Warnings a reader needs before trusting the table: small n, dropped models, uneven means."""
    notes: list[str] = []
    small = _small_n(result["cells"])
    if small:
        notes.append(
            f"{small}: a rank correlation over so few models is very uncertain (one swapped pair moves it "
            "a lot); Spearman's p-value is a t approximation that is poor this small (0 for a perfect "
            "correlation), Kendall's is exact only without ties"
        )
    m = result["models"]
    for key, where in (("only_in_benchmarks", "benchmark"), ("only_in_clinicians", "clinician")):
        if m[key]:
            notes.append(
                f"model(s) {', '.join(m[key])} appear only in the {where} table and are not correlated; "
                "check the spelling if they should match"
            )
    for b in result["lower_is_better"]:
        notes.append(f"{b}: lower is better, so its scores were negated before correlating")
    sets = {
        tuple(s[k]["clinicians"])
        for s in result["mean_over_clinicians"].values()
        for k in KINDS
        if s[k]["mean"] is not None
    }
    if len(sets) > 1:
        notes.append(
            "some benchmarks' means are over fewer clinicians than others (an undefined cell is left "
            "out), so those means are not strictly comparable"
        )
    return notes


# --------------------------------------------------------------------------------------------
# Markdown


def _esc(text: str) -> str:
    """Markdown-safe text from the data, as in :mod:`clinieval.analysis.markdown` (``\\``, ``|``,
    ``<``, ``>``, newlines), plus the emphasis and link characters, since this table adds bold."""
    for raw in ("\\", "|", "<", ">", "*", "`", "[", "]"):
        text = text.replace(raw, "\\" + raw)
    # An underscore inside a word (gpt_4_turbo) is never emphasis; escape only the others.
    text = re.sub(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])", r"\\_", text)
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _num(value: float | None, digits: int = 3) -> str:
    if value is None:
        return "—"
    if value != 0 and abs(value) < 10**-digits:
        return f"{value:.1e}"
    return f"{value:.{digits}f}"


def _p(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _stat_cell(stat: JSON, n: int | None, bold: bool) -> str:
    if stat["statistic"] is None:
        return "—"
    value = _num(stat["statistic"])
    value = f"**{value}**" if bold else value
    extra = _p(stat["pvalue"]) + (f", n = {n}" if n is not None else "")
    return f"{value} ({extra})"


def _mean_cell(mean: JSON, total: int, bold: bool) -> str:
    if mean["mean"] is None:
        return "—"
    value = _num(mean["mean"])
    value = f"**{value}**" if bold else value
    used = len(mean["clinicians"])
    return value if used == total else f"{value} ({used} of {total})"


def _header(result: JSON) -> list[str]:
    header = ["benchmark"]
    for c in result["clinicians"]:
        header += [f"{_esc(c)} ρ", f"{_esc(c)} τ"]
    header += ["mean ρ", "mean τ"]
    if result["clinician_mean"] is not None:
        header += ["ρ vs clinician mean", "τ vs clinician mean"]
    return header


def _row(result: JSON, b: str, show_n: bool) -> list[str]:
    best, cells = result["best"], result["cells"][b]
    label = _esc(b) + (" (lower is better, negated)" if b in result["lower_is_better"] else "")
    row = [label]
    columns = list(result["clinicians"])
    for c in columns:
        for kind in KINDS:
            n = cells[c]["n"] if show_n else None
            row.append(_stat_cell(cells[c][kind], n, b in best[kind]["per_clinician"][c]))
    total = len(columns)
    for kind in KINDS:
        mean = result["mean_over_clinicians"][b][kind]
        row.append(_mean_cell(mean, total, b in best[kind]["mean_over_clinicians"]))
    if result["clinician_mean"] is not None:
        for kind in KINDS:
            n = cells[CLINICIAN_MEAN]["n"] if show_n else None
            row.append(
                _stat_cell(cells[CLINICIAN_MEAN][kind], n, b in best[kind]["per_clinician"][CLINICIAN_MEAN])
            )
    return row


def _ns(result: JSON) -> set[int]:
    return {cell["n"] for row in result["cells"].values() for cell in row.values()}


def _names_md(names: Sequence[str]) -> str:
    if not names:
        return "— (undefined)"
    return ", ".join(_esc(n) for n in names) + (" (tie)" if len(names) > 1 else "")


def _best_lines(result: JSON) -> list[str]:
    """A small table: for each clinician column and for the mean, the best benchmark by rho and tau."""
    best = result["best"]
    rows = [
        [_esc(c), *(_names_md(best[k]["per_clinician"][c]) for k in KINDS)]
        for c in best["spearman"]["per_clinician"]
    ]
    rows.append(
        ["**mean over clinicians**", *(f"**{_names_md(best[k]['mean_over_clinicians'])}**" for k in KINDS)]
    )
    lines = ["| compared with | best by Spearman ρ | best by Kendall τ-b |", "|---|---|---|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _undefined_lines(result: JSON) -> list[str]:
    lines = []
    for b, row in result["cells"].items():
        for c, cell in row.items():
            for kind in KINDS:
                reason = cell[kind]["undefined"]
                if reason is not None:
                    lines.append(f"- {_esc(b)} vs {_esc(c)}, {kind} (n = {cell['n']}): {_esc(reason)}")
    return lines


def render_markdown(result: JSON) -> str:
    """The result as the paper's table: benchmarks as rows, per clinician rho and tau, then the means.

    Only formats what is in the JSON (``—`` for an undefined value, never a made-up 0). Bold marks
    the best benchmark in each column (several when tied). n goes in every cell when the pairs
    use different numbers of models, otherwise once above the table.
    """
    inputs = result["inputs"]
    ns = _ns(result)
    lines = ["# Benchmark–clinician correlation", ""]
    for role in ("benchmarks", "clinicians"):
        src = inputs[role]
        lines.append(
            f"- {role.capitalize()}: {_esc(src['file'])} ({src['layout']}, sha256 {src['sha256'][:12]}…)"
        )
    models = result["models"]["shared"]
    lines.append(f"- Models in both tables ({len(models)}): {', '.join(_esc(m) for m in models)}")
    if len(ns) == 1:
        lines.append(f"- Every correlation is over n = {next(iter(ns))} models.")
    lines += [
        "",
        "Spearman ρ and Kendall τ-b between each benchmark's per-model scores and each clinician's, with "
        "two-sided p-values; bold = best (most positive) in the column. *mean* = mean of the coefficient "
        "over the clinicians.",
        "",
    ]
    header = _header(result)
    rows = [_row(result, b, show_n=len(ns) > 1) for b in result["benchmarks"]]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")
    if result["clinician_mean"] is not None:
        lines += [
            f"*vs clinician mean*: correlation with the mean of the clinicians' raw scores per model "
            f"({len(result['clinician_mean']['models'])} models scored by every clinician); not part of "
            "*mean*.",
            "",
        ]
    lines += ["## Best benchmark", "", *_best_lines(result), ""]
    undefined = _undefined_lines(result)
    if undefined:
        lines += ["## Undefined", "", *undefined, ""]
    if result["notes"]:
        lines += ["## Notes", "", *(f"- {_esc(n)}" for n in result["notes"]), ""]
    return "\n".join(lines)


def write_outputs(result: JSON, out: Path) -> tuple[Path, Path]:
    """Write ``correlation.json`` and ``correlation.md`` into ``out``, each atomically."""
    from clinieval.fsutil import atomic_write_json, atomic_write_text

    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the output folder {out}: {e.strerror or e}") from None
    json_path, md_path = out / "correlation.json", out / "correlation.md"
    try:
        atomic_write_json(json_path, result)
        atomic_write_text(md_path, render_markdown(result))
    except OSError as e:
        raise UserError(f"cannot write into {out}: {e.strerror or e}") from None
    return json_path, md_path
