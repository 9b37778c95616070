"""Atomic file and folder writes: a crash leaves the old version or the new one, never a mix.

Also the one way to read a small text file the user named (a prompt, an endpoints list): every way
it can be unreadable is one UserError naming the file and what it was meant to be.
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, NoReturn, TextIO

from clinieval.errors import UserError


def raise_named(error: OSError, path: str | os.PathLike[str]) -> NoReturn:
    """Raise ``error`` with ``path`` as its file name when it had none: a write through an open
    file object (a full disk met by ``write`` or ``flush``) does not say which file it was writing."""
    if error.filename is not None or error.errno is None:
        raise error
    raise OSError(error.errno, error.strerror, str(path)) from error


def read_user_text(path: Path, what: str, *, missing: str, folder: str | None = None) -> str:
    """The UTF-8 text of the file ``path`` the user named as ``what`` ("the prompt file").

    ``missing`` says that the file does not exist, ``folder`` that it is a folder (None: a folder
    is reported as any other unreadable file, with the system's reason).
    """
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UserError(f"{path}: {missing}") from None
    except IsADirectoryError as e:
        raise UserError(f"{path}: {folder or f'cannot read {what} ({e.strerror})'}") from None
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; save {what} as UTF-8") from None
    except OSError as e:
        raise UserError(f"{path}: cannot read {what} ({e.strerror})") from None


@contextmanager
def atomic_open(path: str | os.PathLike[str]) -> Iterator[TextIO]:
    """A text file that appears at ``path`` only once everything written to it is on disk."""
    dest = Path(path)
    dest.parent.mkdir(parents=True, exist_ok=True)
    try:
        fd, tmp = tempfile.mkstemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent)
    except OSError as e:  # named after the file the user knows, not the temporary one
        raise OSError(e.errno, e.strerror, str(dest)) from e
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, dest)
    except OSError as e:
        Path(tmp).unlink(missing_ok=True)
        raise_named(e, dest)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def atomic_write_text(path: str | os.PathLike[str], text: str) -> None:
    with atomic_open(path) as f:
        f.write(text)


def finite_json(data: Any) -> Any:
    """``data`` with every NaN or infinite float replaced by None: JSON has no NaN, and strict
    parsers (other languages, ``jq``) reject Python's ``NaN`` token. None reads as "undefined"."""
    if isinstance(data, float):
        return data if math.isfinite(data) else None
    if isinstance(data, dict):
        return {k: finite_json(v) for k, v in data.items()}
    if isinstance(data, list | tuple):
        return [finite_json(v) for v in data]
    return data


def atomic_write_json(path: str | os.PathLike[str], data: Any) -> None:
    """Strict JSON (no NaN or Infinity tokens), written atomically."""
    text = json.dumps(finite_json(data), indent=2, ensure_ascii=False, allow_nan=False)
    atomic_write_text(path, text + "\n")


def atomic_write_jsonl(path: str | os.PathLike[str], records: Iterable[Any]) -> None:
    """One JSON object per line (UTF-8 kept as is), written atomically: results files that other
    tools read back line by line (scores, verdicts, generated items)."""
    with atomic_open(path) as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False) + "\n")


FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")
"""A spreadsheet runs a cell that starts with one of these as a formula (OWASP's CSV injection)."""


def spreadsheet_cell(value: object) -> object:
    """``value`` made inert for a spreadsheet: text that would start a formula gets a leading
    apostrophe (shown as text, never run). Text that already starts with apostrophes before such a
    character gets one more, so :func:`spreadsheet_text` restores every value exactly."""
    if isinstance(value, str) and value.lstrip("'").startswith(FORMULA_STARTS):
        return "'" + value
    return value


def spreadsheet_text(cell: str) -> str:
    """A cell read back from a file written with ``spreadsheet_safe``: the inverse of
    :func:`spreadsheet_cell` (a spreadsheet that kept the apostrophe as text, as LibreOffice and
    Excel do on re-export, round-trips too)."""
    if cell.startswith("'") and cell.lstrip("'").startswith(FORMULA_STARTS):
        return cell[1:]
    return cell


def atomic_write_csv(
    path: str | os.PathLike[str],
    columns: Sequence[str],
    rows: Iterable[Mapping[str, object]],
    *,
    spreadsheet_safe: bool = False,
    delimiter: str = ",",
) -> None:
    """A UTF-8 CSV with a header row and ``\\n`` line ends, written atomically. With
    ``spreadsheet_safe`` (files people open in a spreadsheet, holding model-written text) every
    cell goes through :func:`spreadsheet_cell`; read them back with :func:`spreadsheet_text`.
    ``delimiter="\\t"`` writes the same table as TSV."""
    with atomic_open(path) as f:
        writer = csv.DictWriter(f, fieldnames=list(columns), lineterminator="\n", delimiter=delimiter)
        writer.writeheader()
        for row in rows:
            writer.writerow({k: spreadsheet_cell(v) for k, v in row.items()} if spreadsheet_safe else row)


def publish_dir(tmp: Path, out: Path) -> None:
    """Move the finished folder ``tmp`` to ``out``, replacing an old ``out`` only at the end."""
    if out.exists():
        old = out.with_name(f".{out.name}.{os.getpid()}.old")
        out.rename(old)
        tmp.rename(out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        tmp.rename(out)


@contextmanager
def staged_dir(out: Path, what: str = "the folder") -> Iterator[Path]:
    """A temporary folder beside ``out`` to fill; when the block finishes it replaces ``out``
    (:func:`publish_dir`), and when the block raises it is removed and ``out`` is left as it was.

    ``what`` names the folder in the error when the temporary one cannot even be created.
    """
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise UserError(f"cannot create {what} {out}: {exc.strerror or exc}") from exc
    try:
        yield tmp
        publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def inside(folder: Path, name: str, where: str) -> Path:
    """``folder / name`` for a file name read from a data file, refusing one that leaves the folder
    (an absolute path, or ``..`` that climbs above it): a table must not make clinieval read, and
    send to a model, a file the user never pointed it at. Symbolic links inside the folder are the
    user's own and are followed."""
    parts = Path(name).parts
    if not name.strip() or Path(name).is_absolute() or "\\" in name:
        raise UserError(f"{where}: {name!r} is not a file name inside {folder}")
    depth = 0
    for part in parts:
        depth += -1 if part == ".." else 0 if part == "." else 1
        if depth < 0:
            raise UserError(f"{where}: {name!r} points outside {folder}; name a file inside it")
    return folder / name


def slug(text: str) -> str:
    """``text`` as a safe file or folder name (letters, digits, ``._-``; at most 60 characters)."""
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text).strip("-")[:60] or "x"
