"""Locating and reading local dataset files, with errors that name the file and the item.

Also the one reader of hand-edited CSV tables (a build's review file, MedAlign's instructions):
it keeps each record's file line and spreadsheet row, so a benchmark can point its user at the
cell to fix, in that benchmark's own words (:class:`CsvMessages`).
"""

from __future__ import annotations

import csv
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

from clinieval.errors import UserError

T = TypeVar("T")

ENV_DATA_DIR = "CLINIEVAL_DATA_DIR"


def data_root_candidates() -> list[Path]:
    """Where a dataset folder may live, most specific first.

    ``CLINIEVAL_DATA_DIR`` wins; otherwise the ``shared/data`` folder beside the working
    directory or beside the source checkout (the layout of the project's own checkouts).
    """
    out: list[Path] = []
    env = os.environ.get(ENV_DATA_DIR)
    if env:
        out.append(Path(env))
    out.append(Path.cwd().parent / "shared" / "data")
    out.append(Path(__file__).resolve().parents[3] / "shared" / "data")
    return out


def find_dataset_dir(name: str, explicit: Path | None) -> Path:
    """The folder holding dataset ``name``: ``explicit`` if given, else the first candidate."""
    if explicit is not None:
        if not explicit.is_dir():
            raise UserError(f"--data {explicit}: not a folder")
        return explicit
    for root in data_root_candidates():
        if (root / name).is_dir():
            return root / name
    tried = ", ".join(str(r / name) for r in data_root_candidates())
    raise UserError(f"dataset {name!r} not found (looked in {tried}); pass --data FOLDER")


UNDECODABLE = re.compile("[\udc80-\udcff]")
"""What ``surrogateescape`` decodes bytes that are not UTF-8 to; valid UTF-8 never decodes to these."""


def not_utf8(source: object, line: int) -> UserError:
    """The one error for a line holding bytes that are not UTF-8."""
    return UserError(f"{source}:{line}: the line is not UTF-8 text; save the file as UTF-8")


def read_json(path: Path) -> Any:
    """A whole-document JSON file (PubMedQA's layout); every way it can be unreadable is one
    UserError naming the file (and the line, where one is known)."""
    try:
        with path.open(encoding="utf-8", errors="surrogateescape") as f:
            text = f.read()
    except FileNotFoundError:
        raise UserError(f"{path}: file not found") from None
    bad = UNDECODABLE.search(text)
    if bad is not None:
        raise not_utf8(path, text.count("\n", 0, bad.start()) + 1)
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise UserError(f"{path}:{e.lineno}: not valid JSON ({e.msg})") from None
    except (RecursionError, ValueError) as e:
        raise beyond_json_limits(path, text, e) from None


def beyond_json_limits(path: Path, text: str, error: RecursionError | ValueError) -> UserError:
    """The error for JSON that parses in principle but not in Python: nesting deeper than the
    recursion limit, or an integer of over 4,300 digits (Python's limit; not a usable value anyway)."""
    if isinstance(error, RecursionError):
        return UserError(f"{path}: not readable JSON (arrays or objects nested too deep)")
    long = re.search(r"[0-9]{4301,}", text)
    line = 1 if long is None else text.count("\n", 0, long.start()) + 1
    return UserError(f"{path}:{line}: not readable JSON (a number with over 4,300 digits)")


def json_lines(lines: Iterable[str], source: object) -> Iterator[tuple[str, dict[str, Any]]]:
    """``(source:line, object)`` for each non-blank line; a line that is not a JSON object is one
    UserError naming it. For text already in memory (split it on "\\n" only) and for files."""
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        where = f"{source}:{n}"
        try:
            item = json.loads(line)
        except json.JSONDecodeError as e:
            raise UserError(f"{where}: not valid JSON ({e.msg})") from None
        except (ValueError, RecursionError):  # an integer of over 4,300 digits, or nesting too deep
            raise UserError(f"{where}: not readable JSON (a number too long or nesting too deep)") from None
        if not isinstance(item, dict):
            raise UserError(f"{where}: expected a JSON object per line, got {type(item).__name__}")
        yield where, item


def utf8_lines(lines: Iterable[str], source: object) -> Iterator[str]:
    """The lines of a file opened with ``errors="surrogateescape"``, or one UserError naming the
    first line holding bytes that are not UTF-8 (decoding the file strictly would fail a whole
    chunk ahead of the line being read, so the error could not say which line). Also for
    ``csv.reader``, whose ``line_num`` counts the same lines."""
    for n, line in enumerate(lines, 1):
        if UNDECODABLE.search(line):
            raise not_utf8(source, n)
        yield line


def json_objects(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """:func:`json_lines` over a JSON Lines file (a UTF-8 byte-order mark is skipped)."""
    with path.open(encoding="utf-8-sig", errors="surrogateescape") as f:
        yield from json_lines(utf8_lines(f, path), path)


def once_each(found: Iterable[tuple[str, T]], key: Callable[[T], str], what: str) -> list[T]:
    """The items of ``(where, item)`` pairs in order, or one UserError at the second place a key
    stands, naming the first (``what`` says what the key is, e.g. ``"item id"``). Every reader of
    items with ids refuses a repeat this way, so a user sees one message wherever it happens."""
    first: dict[str, str] = {}
    out: list[T] = []
    for where, item in found:
        k = key(item)
        if k in first:
            raise UserError(f"{where}: {what} {k!r} repeats {first[k]}")
        first[k] = where
        out.append(item)
    return out


def require(item: dict[str, Any], fld: str, where: str, kind: type | tuple[type, ...]) -> Any:
    """``item[fld]``, or a UserError naming where it is missing and what was expected."""
    if fld not in item:
        raise UserError(f"{where}: missing field {fld!r}")
    value = item[fld]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UserError(f"{where}: field {fld!r} should be {names}, got {type(value).__name__}")
    return value


@dataclass(frozen=True, slots=True)
class CsvRow:
    """One non-empty record of a CSV table and where it is."""

    number: int  # the spreadsheet row (the header is row 1; blank rows count)
    line: int  # the file line the record starts on (a quoted cell may span lines)
    cells: dict[str, str]


class CsvMessages(Protocol):
    """What each fault of a CSV table says: every reader of one names the place its own way
    (``file:line:column``, or a spreadsheet row), so :func:`read_csv_rows` asks for the words."""

    def unreadable(self, path: Path, line: int, in_header: bool, error: csv.Error) -> str: ...

    def empty(self, path: Path) -> str: ...

    def repeated(self, path: Path, columns: Sequence[str]) -> str: ...

    def missing(self, path: Path, columns: Sequence[str], header: tuple[str, ...]) -> str: ...

    def width(self, path: Path, number: int, line: int, cells: int, header: int) -> str: ...


def read_csv_rows(
    path: Path,
    what: str,
    required: Sequence[str],
    messages: CsvMessages,
    cell: Callable[[str], str] = str,
    delimiter: str = ",",
) -> tuple[tuple[str, ...], list[CsvRow]]:
    """The header and non-empty rows of a hand-edited CSV file (Excel's byte-order mark
    accepted; cells separated by ``delimiter``: a spreadsheet in a comma-decimal locale exports
    semicolons), each cell passed through ``cell``. A missing file or column, a repeated column, a
    row of the wrong width or text that is not UTF-8 or not CSV is one UserError; the words are
    ``messages``' except for the file itself (``{what} file PATH not found``) and its encoding."""
    if not path.is_file():
        raise UserError(f"{what} file {path} {'is not a file' if path.exists() else 'not found'}")
    try:
        with path.open(newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f, delimiter=delimiter)
            header = _csv_header(path, reader, required, messages)
            return header, list(_csv_body(path, reader, header, messages, cell))
    except UnicodeDecodeError as e:
        raise UserError(
            f"{path} is not UTF-8 text (bad byte at offset {e.start}); save it as UTF-8 CSV"
        ) from None


def _csv_record(path: Path, reader: Any, messages: CsvMessages, in_header: bool) -> list[str] | None:
    try:
        return next(reader, None)
    except csv.Error as e:
        raise UserError(messages.unreadable(path, reader.line_num, in_header, e)) from None


def _csv_header(path: Path, reader: Any, required: Sequence[str], messages: CsvMessages) -> tuple[str, ...]:
    first = _csv_record(path, reader, messages, in_header=True)
    if first is None or not any(c.strip() for c in first):
        raise UserError(messages.empty(path))
    header = tuple(c.strip() for c in first)
    repeated = sorted(c for c, n in Counter(header).items() if c and n > 1)
    if repeated:
        raise UserError(messages.repeated(path, repeated))
    missing = [c for c in required if c not in header]
    if missing:
        raise UserError(messages.missing(path, missing, header))
    return header


def _csv_body(
    path: Path, reader: Any, header: tuple[str, ...], messages: CsvMessages, cell: Callable[[str], str]
) -> Iterator[CsvRow]:
    number = 1
    while True:
        line = reader.line_num + 1
        record = _csv_record(path, reader, messages, in_header=False)
        if record is None:
            return
        number += 1
        if not any(c.strip() for c in record):
            continue  # blank lines and a spreadsheet's all-empty rows
        if len(record) != len(header):
            raise UserError(messages.width(path, number, line, len(record), len(header)))
        yield CsvRow(number, line, dict(zip(header, map(cell, record), strict=True)))
