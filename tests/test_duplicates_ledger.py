"""tools/duplicates_ledger.py and docs/duplicates.md: the pairs of repeated lines read and kept.

The ``duplicates`` tool itself is not part of the repository, so these tests feed the script saved
rows in the tool's format; the last one checks the ledger as committed: well formed, and naming
only files that exist (a renamed file leaves a row that no run of the tool would ever match).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tools.duplicates_ledger import LEDGER, compare, ledger_pairs, listed_pairs, main

ROOT = Path(__file__).resolve().parent.parent

ROWS = """\
4 pairs of places (10 files read), each sharing runs of 6 or more identical or same-shape lines
D1 clinieval/b.py:10-24 ~ clinieval/a.py:40-54 shape (+1 more runs)
D2 clinieval/a.py:60-70 ~ clinieval/b.py:1-11 shape
D3 clinieval/c.py:1-8 ~ clinieval/d.py:3-10
D4 clinieval/e.py:1-8 ~ clinieval/f.py:3-10 shape boilerplate
left out: 2 runs of 6 lines that stand in more than 8 places each (too common to list)
"""


def test_rows_become_pairs_once_each_in_one_order_without_boilerplate() -> None:
    assert listed_pairs(ROWS.splitlines()) == [
        ("clinieval/a.py", "clinieval/b.py"),
        ("clinieval/c.py", "clinieval/d.py"),
    ]


def test_unmarked_and_gone_pairs_are_told_apart() -> None:
    kept = ledger_pairs(
        "| `clinieval/b.py` | `clinieval/a.py` | dataclass | x |\n| `x.py` | `y.py` | schema | y |\n"
    )
    result = compare(listed_pairs(ROWS.splitlines()), kept)
    assert result.marked == [("clinieval/a.py", "clinieval/b.py")]
    assert result.unmarked == [("clinieval/c.py", "clinieval/d.py")]
    assert result.gone == [("x.py", "y.py")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("| `a.py` | `b.py` | copy | why |\n", r"duplicates\.md:1: kind 'copy' is not one of"),
        (
            "\n| `a.py` | `b.py` | schema | x |\n| `b.py` | `a.py` | schema | y |\n",
            r":3: the pair a\.py ~ b\.py is listed twice",
        ),
    ],
)
def test_a_bad_ledger_row_is_named_by_line(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        ledger_pairs(text)


def test_an_unmarked_pair_fails_the_check(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    saved = tmp_path / "rows.txt"
    saved.write_text(ROWS + "D5 clinieval/new.py:1-9 ~ clinieval/other.py:5-13 shape\n")
    assert main(["--rows", str(saved)]) == 1
    assert "unmarked: clinieval/new.py ~ clinieval/other.py" in capsys.readouterr().out


def test_the_committed_ledger_is_well_formed_and_names_files_that_exist() -> None:
    kept = ledger_pairs(LEDGER.read_text(encoding="utf-8"))
    assert len(kept) >= 1
    missing = sorted({f for p in kept for f in p if not (ROOT / "src" / f).is_file()})
    assert missing == [], f"docs/duplicates.md names files that are gone: {missing}"
    # every kept pair, fed back as the tool's rows, is marked: the ledger agrees with itself
    rows = [f"D{i} {a}:1-6 ~ {b}:1-6 shape" for i, (a, b) in enumerate(kept, 1)]
    result = compare(listed_pairs(rows), kept)
    assert result.unmarked == [] and result.gone == []


def test_a_gone_entry_fails_the_check_too(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Every ledger row the tool no longer lists is named: the ledger is what the tool lists now."""
    saved = tmp_path / "rows.txt"
    saved.write_text("no duplicates (0 files read)\n")
    kept = ledger_pairs(LEDGER.read_text(encoding="utf-8"))
    assert main(["--rows", str(saved)]) == (1 if kept else 0)
    assert capsys.readouterr().out.count("gone: ") == len(kept)
