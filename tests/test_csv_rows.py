"""clinieval.datasets.read_csv_rows, the hand-edited CSV reader EHRNoteQA's review file and
MedAlign's build tables share: positions, blank rows, unescaping, and each fault in the
caller's own words."""

from __future__ import annotations

import csv
import re
from collections.abc import Sequence
from pathlib import Path

import pytest

from clinieval.datasets import CsvRow, read_csv_rows
from clinieval.errors import UserError


class _Words:
    def unreadable(self, path: Path, line: int, in_header: bool, error: csv.Error) -> str:
        return f"unreadable line={line} header={in_header}"

    def empty(self, path: Path) -> str:
        return "empty"

    def repeated(self, path: Path, columns: Sequence[str]) -> str:
        return f"repeated {list(columns)}"

    def missing(self, path: Path, columns: Sequence[str], header: tuple[str, ...]) -> str:
        return f"missing {list(columns)} of {header}"

    def width(self, path: Path, number: int, line: int, cells: int, header: int) -> str:
        return f"width row={number} line={line} {cells}/{header}"


def _read(
    tmp_path: Path, data: bytes, required: Sequence[str] = ("a",)
) -> tuple[tuple[str, ...], list[CsvRow]]:
    path = tmp_path / "t.csv"
    path.write_bytes(data)
    return read_csv_rows(path, "test", required, _Words(), cell=str.upper)


def test_rows_keep_spreadsheet_row_and_file_line(tmp_path: Path) -> None:
    header, rows = _read(tmp_path, b'\xef\xbb\xbf a ,b\r\nx,y\r\n\r\n,\r\n"multi\nline",z\r\n')
    assert header == ("a", "b")
    assert rows == [CsvRow(2, 2, {"a": "X", "b": "Y"}), CsvRow(5, 5, {"a": "MULTI\nLINE", "b": "Z"})]


@pytest.mark.parametrize(
    ("data", "said"),
    [
        (b"", "empty"),
        (b" , \n", "empty"),
        (b"a,a,b\n", "repeated ['a']"),
        (b"b,c\n", "missing ['a'] of ('b', 'c')"),
        (b"a,b\n1,2\n\n1\n", "width row=4 line=4 1/2"),
        (b"a\n\xff\n", "is not UTF-8 text (bad byte at offset 2)"),
    ],
)
def test_each_fault_in_the_callers_words(tmp_path: Path, data: bytes, said: str) -> None:
    with pytest.raises(UserError, match=re.escape(said)):
        _read(tmp_path, data)


def test_unreadable_csv_says_where_and_whether_in_header(tmp_path: Path) -> None:
    big = b"x" * (csv.field_size_limit() + 1)
    with pytest.raises(UserError, match="unreadable line=1 header=True"):
        _read(tmp_path, big + b"\n")
    with pytest.raises(UserError, match="unreadable line=2 header=False"):
        _read(tmp_path, b"a\n" + big + b"\n")


def test_missing_file_names_what_it_is(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"^test file .*nope\.csv not found$"):
        read_csv_rows(tmp_path / "nope.csv", "test", (), _Words())
    with pytest.raises(UserError, match=r"^test file .* is not a file$"):
        read_csv_rows(tmp_path, "test", (), _Words())
