"""Run folders as the long table ``clinieval analyze`` reads: one row per (sample, run).

Comparing models means pairing their runs on the same samples, so the table has one row per
sample id and run: ``item`` (the sample id), ``model`` (the arm), one column per scorer, ``error``
and the sample's metadata as ``meta.*`` columns (a ``--group`` or ``--cluster``, never a score).
``clinieval analyze RUN_DIR...`` analyses this table directly; ``clinieval export`` writes it, and
``clinieval analyze`` reads the written file back to the same numbers.

Rules, chosen so that no number is made up:

- **Scores**: a scorer's value per sample is the mean over the sample's repeats that have a value;
  a sample whose every repeat failed (or could not be scored) has an empty cell, never 0. Scores
  recorded during the run come first; ``scores/NAME.jsonl`` (``clinieval score``, text metrics,
  judges) add columns, and replace a recorded scorer of the same name, as they do in the viewer.
- **Errors**: ``error`` lists the kinds of failed model calls of the sample's repeats (``a;b``).
- **Arms**: ``model`` is the run's model as a person names it (the alias after ``@``, the
  embedded model, the GGUF's stem); runs with the same name (two prompts, two temperatures, two
  servers with one alias) are told apart by their folder name, ``NAME [FOLDER]``. The full spec is
  under ``run_folders`` in the analysis.
- **One task**: runs of different tasks, or of one task over different data files (their hashes
  in the manifest differ), are refused: their sample ids would pair unrelated questions.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.analysis.analyze import AnalyzeOptions, analyze
from clinieval.analysis.table import ATTRIBUTE_PREFIX, LongTable, Row
from clinieval.datasets import json_objects
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_csv, atomic_write_jsonl
from clinieval.records.runs import SCORES, RunDir, find_run_dirs
from clinieval.records.sample_record import SampleRecord
from clinieval.types import JSON, Score

ITEM, MODEL, ERROR = "item", "model", "error"
TABLE_SUFFIXES = {".csv": ",", ".tsv": "\t", ".jsonl": None}
"""What ``clinieval export --table`` writes, by suffix (the delimiter; None for JSON Lines)."""

_Scalar = (str, int, float, bool)


@dataclass(frozen=True, slots=True)
class Arm:
    """One run folder in the table: its ``model`` value and what it holds."""

    name: str
    path: Path
    task: str
    model_spec: str
    samples: int
    failed: int
    repeats: int

    def to_json(self) -> JSON:
        return {
            "model": self.name,
            "path": str(self.path),
            "task": self.task,
            "model_spec": self.model_spec,
            "samples": self.samples,
            "failed": self.failed,
            "repeats": self.repeats,
        }


@dataclass(frozen=True)
class RunTable:
    """The long table of some runs of one task, and the arms it came from."""

    arms: tuple[Arm, ...]
    table: LongTable
    scorers: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class _Run:
    path: Path
    task: str
    data: tuple[str, ...]
    model_spec: str
    records: list[SampleRecord]
    files: dict[str, dict[tuple[str, int], Score]]


def read_runs(paths: Sequence[str | os.PathLike[str]]) -> RunTable:
    """The long table of ``paths`` (run folders, or folders of run folders), checked to be one task."""
    runs = [_read_run(p) for p in _run_dirs(paths)]
    _check_one_task(runs)
    names = arm_names([r.model_spec for r in runs], [r.path for r in runs])
    scorers = _scorer_names(runs)
    rows: list[Row] = []
    arms: list[Arm] = []
    for run, name in zip(runs, names, strict=True):
        mine = [_row(run, name, sid, recs, scorers) for sid, recs in _by_sample(run.records).items()]
        rows += mine
        arms.append(_arm(run, name, mine))
    meta = list(dict.fromkeys(c for r in rows for c in r.cells if c.startswith(ATTRIBUTE_PREFIX)))
    columns = (ITEM, MODEL, *scorers, ERROR, *meta)
    source = Path(" + ".join(str(r.path) for r in runs))
    return RunTable(tuple(arms), LongTable(source, columns, tuple(rows)), scorers)


def analyze_runs(paths: Sequence[str | os.PathLike[str]], options: AnalyzeOptions) -> JSON:
    """:func:`clinieval.analysis.analyze.analyze` over the runs' table; the arms under ``run_folders``."""
    found = read_runs(paths)
    result = analyze(found.table, options)
    result["run_folders"] = [a.to_json() for a in found.arms]
    return result


def check_table_path(out: str | os.PathLike[str]) -> None:
    """A UserError unless ``out`` ends in a suffix :func:`write_table` writes: checked before any
    run is read, so a typo costs nothing."""
    out = Path(out)
    if out.suffix.lower() not in TABLE_SUFFIXES:
        raise UserError(f"{out}: expected a .csv, .tsv or .jsonl file name, not {out.suffix or 'no suffix'}")
    if out.is_dir():
        raise UserError(f"{out}: is a folder; name the table file, e.g. {out / 'results.csv'}")


def write_table(result: RunTable, out: str | os.PathLike[str]) -> None:
    """``result`` as CSV, TSV or JSON Lines (by ``out``'s suffix), written atomically; empty cells
    (a failed sample's score) are empty in CSV/TSV and null in JSON Lines."""
    out = Path(out)
    check_table_path(out)
    columns = result.table.columns
    rows = [{c: row.cells.get(c) for c in columns} for row in result.table.rows]
    delimiter = TABLE_SUFFIXES[out.suffix.lower()]
    if delimiter is None:
        atomic_write_jsonl(out, rows)
    else:
        atomic_write_csv(out, columns, rows, delimiter=delimiter)


def arm_names(specs: Sequence[str], paths: Sequence[Path]) -> list[str]:
    """Each run's model as a person names it (``smol`` for ``openai:http://host/v1@smol``, the
    embedded model's name, a GGUF's stem: the names arm folders use); a name shared by several runs
    gets its folder name (``NAME [FOLDER]``), and the whole path when the folder names are shared too."""
    from clinieval.models.spec import model_short_name

    short = [model_short_name(s) for s in specs]
    names = [f"{n} [{p.name}]" if short.count(n) > 1 else n for n, p in zip(short, paths, strict=True)]
    return [f"{s} [{p}]" if names.count(n) > 1 else n for s, p, n in zip(short, paths, names, strict=True)]


# --- reading runs ------------------------------------------------------------------------------


def _run_dirs(named: Sequence[str | os.PathLike[str]]) -> list[Path]:
    paths = [Path(p) for p in named]
    if not paths:
        raise UserError("name at least one run folder")
    for p in paths:
        if not p.exists():
            raise UserError(f"{p}: no such run folder")
    found = find_run_dirs(paths)
    resolved = [p.resolve() for p in found]
    twice = next((p for p, r in zip(found, resolved, strict=True) if resolved.count(r) > 1), None)
    if twice is not None:
        raise UserError(f"{twice}: the same run folder is named twice; give each run once")
    return found


def _read_run(path: Path) -> _Run:
    run = RunDir.open(path)
    manifest = run.manifest()
    task, model = _text(manifest, "spec", "task", "name"), _text(manifest, "spec", "model", "spec")
    if task is None or model is None:
        raise UserError(
            f"{run.manifest_path}: no spec.task.name or spec.model.spec; not written by clinieval run"
        )
    data = manifest.get("data")
    hashes = tuple(sorted(map(str, data.values()))) if isinstance(data, dict) else ()
    records = run.records()
    if not records:
        raise UserError(f"{path}: the run has no finished samples")
    return _Run(path, task, hashes, model, records, _score_files(run))


def _text(manifest: JSON, *keys: str) -> str | None:
    """``manifest[k1][k2]...`` when it is a non-empty string (a hand-made manifest may lack it)."""
    value: object = manifest
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


def _score_files(run: RunDir) -> dict[str, dict[tuple[str, int], Score]]:
    """Every ``scores/NAME.jsonl`` as ``{NAME: {(sample id, repeat): Score}}``; a bad line is one
    error naming the file and line."""
    folder = run.path / SCORES
    out: dict[str, dict[tuple[str, int], Score]] = {}
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else ():
        scores: dict[tuple[str, int], Score] = {}
        for where, obj in json_objects(path):
            try:
                scores[(str(obj["sample_id"]), int(obj.get("repeat", 0)))] = Score.from_dict(obj)
            except (KeyError, TypeError, ValueError) as e:
                raise UserError(f"{where}: unreadable score line ({e})") from None
        out[path.stem] = scores
    return out


def _check_one_task(runs: Sequence[_Run]) -> None:
    first = runs[0]
    for run in runs[1:]:
        if run.task != first.task:
            raise UserError(
                f"{run.path}: a run of task {run.task!r}, but {first.path} is a run of {first.task!r}; "
                "only runs of one task can be compared"
            )
        if run.data != first.data:
            raise UserError(
                f"{run.path}: task {run.task!r} over other data files than {first.path} (their hashes "
                "in manifest.json differ); only runs over the same data can be paired on sample ids"
            )


def _scorer_names(runs: Sequence[_Run]) -> tuple[str, ...]:
    names = [n for r in runs for rec in r.records for n in rec.scores]
    names += [n for r in runs for n in r.files]
    found = tuple(dict.fromkeys(names))
    clash = sorted({ITEM, MODEL, ERROR} & set(found)) + [n for n in found if n.startswith(ATTRIBUTE_PREFIX)]
    if clash:
        raise UserError(
            f"a scorer is named {clash[0]!r}, which is a column of the table; rename its scores file"
        )
    return found


# --- rows --------------------------------------------------------------------------------------


def _by_sample(records: Iterable[SampleRecord]) -> dict[str, list[SampleRecord]]:
    out: dict[str, list[SampleRecord]] = {}
    for rec in records:
        out.setdefault(rec.sample.id, []).append(rec)
    return out


def _row(run: _Run, name: str, sample_id: str, records: list[SampleRecord], scorers: Sequence[str]) -> Row:
    cells: dict[str, object] = {ITEM: sample_id, MODEL: name}
    for scorer in scorers:
        cells[scorer] = _mean_value(_scores(run, records, scorer))
    kinds = dict.fromkeys(k for r in records if (k := r.error_kind()) is not None)
    cells[ERROR] = ";".join(kinds) or None
    cells.update(_metadata(records[0].sample.metadata))
    return Row(f"{run.path}: sample {sample_id!r}", cells)


def _scores(run: _Run, records: Sequence[SampleRecord], scorer: str) -> list[Score]:
    """The scorer's verdict on each repeat: from its scores file when the run has one, else recorded."""
    file = run.files.get(scorer)
    if file is not None:
        return [file[r.key] for r in records if r.key in file]
    return [r.scores[scorer] for r in records if scorer in r.scores]


def _mean_value(scores: Sequence[Score]) -> float | None:
    values = [s.value for s in scores if s.value is not None]
    return sum(values) / len(values) if values else None


def _metadata(metadata: JSON) -> dict[str, Any]:
    """Scalar metadata as ``meta.KEY`` cells; lists and objects (MeSH terms, a note) are left out."""
    return {f"{ATTRIBUTE_PREFIX}{k}": v for k, v in metadata.items() if isinstance(v, _Scalar)}


def _arm(run: _Run, name: str, rows: Sequence[Row]) -> Arm:
    return Arm(
        name=name,
        path=run.path,
        task=run.task,
        model_spec=run.model_spec,
        samples=len(rows),
        failed=sum(r.cells[ERROR] is not None for r in rows),
        repeats=len({r.repeat for r in run.records}),
    )
