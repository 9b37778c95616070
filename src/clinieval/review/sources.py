"""Benchmarks' own files as review items, and review exports back into benchmarks' own files.

``clinieval review import`` reads more than the generic items file (:mod:`.items`): each benchmark
offers :class:`ReviewSource` objects (MedAlign's arm runs, EHRNoteQA's build ``review.csv``, an
AutoMedEval set, a MedEval sentence table) through ``Benchmark.review_sources()``, and the command
picks the one that recognises the paths given (:func:`pick_source`). The sources are passed in by
the top-level CLI, never looked up here by name: this package sits below the benchmarks and must
not import them, and there is no registry to fall out of step with them.

The way back shares two steps, also here: reading an exported table with every cell as the
reviewer wrote it (:func:`read_export`), and reducing the reviewers of an item to one verdict
(:func:`one_verdict_per_item`), because a benchmark's own file has one row per item while a
study usually has two reviewers per item for agreement.
"""

from __future__ import annotations

import csv
import gzip
import json
import zlib
from collections.abc import Callable, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.errors import UserError, shown
from clinieval.fsutil import spreadsheet_text
from clinieval.review.items import ReviewItem, read_items


@dataclass(frozen=True, slots=True)
class Converted:
    """What a source made of its paths: the items, and lines worth telling the admin (what was
    left out and why, what the reviewers will not see)."""

    items: list[ReviewItem]
    notes: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ReviewSource:
    """One kind of benchmark file that ``clinieval review import`` reads.

    ``kind`` is the study kind its items are made for (None: the user says, as for the generic
    items file). ``accepts`` must be cheap and must not raise for files it does not recognise: it
    is asked of every path given, to detect which source is meant; ``convert`` reads the files in
    full and raises one :class:`UserError` per problem. ``default_config`` is the study config a new
    study gets when ``--config`` is not given (None: the kind's defaults)."""

    name: str
    kind: str | None
    describe: str
    accepts: Callable[[Sequence[Path]], bool]
    convert: Callable[[Sequence[Path]], Converted]
    default_config: Mapping[str, Any] | None = None


# --- cheap detection ---------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[str]:
    """The lines of ``path`` as text, one at a time and each whole whatever its length (a JSON
    Lines item holding a long record can be megabytes), gzip-decompressed for ``.gz``. Detection
    stops at the first line it needs, so it never reads the rest of the file."""
    with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as f:
        for i, raw in enumerate(f):
            yield raw.decode("utf-8-sig" if i == 0 else "utf-8", errors="replace").rstrip("\r\n")


def first_line(path: Path, *, skip_blank: bool = False) -> str | None:
    """The first line of ``path`` (the first non-blank one with ``skip_blank``), None when the file
    is unreadable or has none."""
    try:
        for line in _lines(path):
            if line.strip() or not skip_blank:
                return line
    except (OSError, EOFError, zlib.error):
        return None
    return None


def is_blank(path: Path) -> bool:
    """Whether ``path`` is a readable file with nothing but white space in it (an empty file)."""
    if not path.is_file():
        return False
    try:
        return not any(line.strip() for line in _lines(path))
    except (OSError, EOFError, zlib.error):
        return False


def first_json_object(path: Path) -> dict[str, Any] | None:
    """The first non-blank line of a JSON Lines file as an object, None when it is not one."""
    line = first_line(path, skip_blank=True)
    if line is None:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    return value if isinstance(value, dict) else None


def table_columns(path: Path) -> tuple[str, ...] | None:
    """The column names of a table, read from its first line: a CSV or TSV header (also inside
    ``.csv.gz``), or a JSON Lines file's first object's keys. None when ``path`` is not a table."""
    if not path.is_file():
        return None
    suffixes = [s.lower() for s in path.suffixes[-2:]]
    last = suffixes[-1] if suffixes else ""
    if last == ".gz" and len(suffixes) == 2:
        last = suffixes[0]
    if last == ".jsonl":
        obj = first_json_object(path)
        return None if obj is None else tuple(obj)
    if last not in (".csv", ".tsv"):
        return None
    head = first_line(path)
    if not head:
        return None
    try:
        header = next(csv.reader([head], delimiter="\t" if last == ".tsv" else ","))
    except (csv.Error, StopIteration):
        return None
    return tuple(c.strip() for c in header)


def has_columns(path: Path, *names: str) -> bool:
    """Whether ``path`` is a table with every one of ``names`` among its columns."""
    columns = table_columns(path)
    return columns is not None and all(n in columns for n in names)


# --- the generic items file ------------------------------------------------------------------------


def _items_accepts(paths: Sequence[Path]) -> bool:
    """One file whose first line is an object with ``item`` (any name: items files were read
    whatever their suffix before benchmarks' files were)."""
    if len(paths) != 1 or not paths[0].is_file():
        return False
    obj = first_json_object(paths[0])
    return obj is not None and "item" in obj


def _items_convert(paths: Sequence[Path]) -> Converted:
    if len(paths) != 1:
        raise UserError(f"review items come in one JSON Lines file; {len(paths)} paths were given")
    return Converted(read_items(paths[0]))


ITEMS = ReviewSource(
    name="items",
    kind=None,
    describe="review items, JSON Lines with item and prompt (docs/review.md); needs --kind for a new study",
    accepts=_items_accepts,
    convert=_items_convert,
)
"""The generic items file: always available, and the only source without a kind of its own."""


# --- choosing ----------------------------------------------------------------------------------------


def check_sources(sources: Sequence[ReviewSource]) -> list[ReviewSource]:
    """:data:`ITEMS` then ``sources``, refusing two sources with one name (``--from`` names them)."""
    out = [ITEMS, *sources]
    names = [s.name for s in out]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"two review sources are called {dup[0]!r}")
    return out


def listing(sources: Sequence[ReviewSource]) -> str:
    """Every source as ``name (kind): what it reads``, for help texts and errors."""
    return "; ".join(f"{s.name} ({s.kind or '--kind'}): {s.describe}" for s in sources)


def _accepts(source: ReviewSource, paths: Sequence[Path]) -> bool:
    try:
        return source.accepts(paths)
    except (UserError, OSError):  # a detector that cannot read the files does not recognise them
        return False


def pick_source(sources: Sequence[ReviewSource], paths: Sequence[Path], name: str | None) -> ReviewSource:
    """The source named ``name`` (``--from``), else the one source that accepts ``paths``; none or
    several is one error listing the sources (``sources`` should come from :func:`check_sources`)."""
    if not paths:
        raise UserError("give the files to import")
    for p in paths:
        if not p.exists():
            raise UserError(f"{p}: not found")
        if is_blank(p):
            raise UserError(f"{p} is empty: nothing to import")
    if name is not None:
        for s in sources:
            if s.name == name:
                return s
        raise UserError(f"--from {name!r} is unknown; the sources are: {listing(sources)}")
    found = [s for s in sources if _accepts(s, paths)]
    if len(found) == 1:
        return found[0]
    given = ", ".join(str(p) for p in paths)
    if found:
        names = ", ".join(s.name for s in found)
        raise UserError(f"{given}: several sources read these files ({names}); choose one with --from NAME")
    raise UserError(
        f"{given}: no source recognises these files (force one with --from NAME to see what is wrong);"
        f" the sources are: {listing(sources)}"
    )


def study_kind(
    source: ReviewSource, kind: str | None, study: str | None = None, existing: str | None = None
) -> str:
    """The study kind of an import: the source's own, which ``--kind`` may repeat but not change;
    the generic items file needs ``--kind``, except into an existing study (``study``, of kind
    ``existing``), which keeps the kind it was made with: a different one is refused."""
    if source.kind is None:
        if kind is None and existing is None:
            raise UserError(
                f"{source.name}: say what reviewers do with --kind (rank, rate, question, sentence)"
            )
        wanted = kind or existing
    else:
        if kind is not None and kind != source.kind:
            raise UserError(
                f"these files are read by {source.name}, which makes a {source.kind} study; --kind {kind}"
                " conflicts with it: leave --kind out"
            )
        wanted = source.kind
    assert wanted is not None
    if existing is not None and wanted != existing:
        if source.kind is None:
            raise UserError(
                f"study {study!r} is a {existing} study; --kind {kind} would change it:"
                " leave --kind out to add these items to it, or import them into a new study"
            )
        raise UserError(
            f"study {study!r} is a {existing} study; these files are read by {source.name}, which"
            f" makes {wanted} studies: import them into a new study"
        )
    return wanted


# --- the way back ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ExportRow:
    """One row of an exported table, its cells as the reviewer wrote them, and ``file:line``."""

    where: str
    cells: dict[str, str]

    @property
    def item(self) -> str:
        return self.cells["item"]

    @property
    def reviewer(self) -> str:
        return self.cells["reviewer"]


def read_export(path: Path, *columns: str) -> list[ExportRow]:
    """The rows of a table ``clinieval review export`` wrote (``questions.csv``,
    ``sentences.csv``...), each cell with the spreadsheet guard undone, so text comes back exactly
    as the reviewer typed it. ``item``, ``reviewer`` and ``columns`` must be in the header."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            header = [h.strip() for h in next(reader, [])]
            missing = [c for c in ("item", "reviewer", *columns) if c not in header]
            if missing:
                raise UserError(
                    f"{path}:1: no column {', '.join(map(repr, missing))}; is this the table"
                    f" `clinieval review export` wrote? (its header is: {', '.join(map(shown, header))})"
                )
            rows: list[ExportRow] = []
            for record in reader:
                where = f"{path}:{reader.line_num}"
                if not any(c.strip() for c in record):
                    continue
                if len(record) != len(header):
                    raise UserError(f"{where}: {len(record)} cells but the header has {len(header)} columns")
                cells = {h: spreadsheet_text(c) for h, c in zip(header, record, strict=True)}
                if not cells["item"].strip() or not cells["reviewer"].strip():
                    raise UserError(f"{where}: item and reviewer must not be empty")
                rows.append(ExportRow(where, cells))
    except UnicodeDecodeError as e:
        raise UserError(f"{path}: not UTF-8 (bad byte at offset {e.start}); save it as UTF-8 CSV") from None
    except csv.Error as e:
        raise UserError(f"{path}: not readable as CSV ({e})") from None
    if not rows:
        raise UserError(f"{path}: no reviews below the header (were any submitted before the export?)")
    return rows


def one_verdict_per_item(
    rows: Sequence[ExportRow], compare: Sequence[str], prefer: Sequence[str] = ()
) -> dict[str, list[ExportRow]]:
    """Each item's verdict rows, in the export's item order.

    An item takes the row of the first reviewer in ``prefer`` who reviewed it (``--reviewer``);
    otherwise all its rows, which must agree on every column of ``compare`` (a benchmark's file
    holds one verdict per item, and choosing between two clinicians is the admin's call, not this
    function's). A name in ``prefer`` who reviewed nothing is refused as a likely typo."""
    reviewers = {r.reviewer for r in rows}
    unknown = [n for n in prefer if n not in reviewers]
    if unknown:
        raise UserError(
            f"--reviewer {unknown[0]!r} reviewed nothing in this export; the reviewers are"
            f" {', '.join(sorted(reviewers))}"
        )
    groups: dict[str, list[ExportRow]] = {}
    for row in rows:
        group = groups.setdefault(row.item, [])
        if any(r.reviewer == row.reviewer for r in group):
            raise UserError(f"{row.where}: {shown(row.reviewer)} reviewed item {shown(row.item)} twice")
        group.append(row)
    out: dict[str, list[ExportRow]] = {}
    rank = {name: i for i, name in enumerate(prefer)}
    for item, group in groups.items():
        preferred = sorted((r for r in group if r.reviewer in rank), key=lambda r: rank[r.reviewer])
        if preferred:
            out[item] = preferred[:1]
            continue
        first = group[0]
        for other in group[1:]:
            differs = next((c for c in compare if other.cells.get(c) != first.cells.get(c)), None)
            if differs is not None:
                raise UserError(
                    f"{other.where}: item {shown(item)}: {shown(other.reviewer)} and {shown(first.reviewer)}"
                    f" ({first.where}) differ on {differs!r}; say whose verdicts win with --reviewer NAME"
                    " (repeatable, the first listed who reviewed an item wins)"
                )
        out[item] = group
    return out


def export_verdicts(
    export: Path, columns: Sequence[str], prefer: Sequence[str] = ()
) -> dict[str, list[ExportRow]]:
    """Each item's verdict (:func:`one_verdict_per_item`, compared on ``columns``) from the
    export's table ``export``: how a benchmark's way back from review starts."""
    return one_verdict_per_item(read_export(export, *columns), columns, prefer)


def refuse_strangers(
    export: Path, verdicts: Iterable[str], known: Container[str], *, noun: str, source: Path, named: str
) -> None:
    """Refuse verdicts on items the benchmark's file ``source`` lacks (``noun``: what an item is
    there; ``named``: what the file is called): they come from a study made from another file."""
    strangers = [i for i in verdicts if i not in known]
    if strangers:
        raise UserError(
            f"{export}: {noun} {shown(strangers[0])} is not in {source} ({len(strangers)} such); give the"
            f" {named} the study was imported from"
        )
