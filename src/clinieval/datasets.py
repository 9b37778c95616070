"""Locating and reading local dataset files, with errors that name the file and the item."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from clinieval.errors import UserError

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


def require(item: dict[str, Any], fld: str, where: str, kind: type | tuple[type, ...]) -> Any:
    """``item[fld]``, or a UserError naming where it is missing and what was expected."""
    if fld not in item:
        raise UserError(f"{where}: missing field {fld!r}")
    value = item[fld]
    if not isinstance(value, kind):
        names = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise UserError(f"{where}: field {fld!r} should be {names}, got {type(value).__name__}")
    return value
