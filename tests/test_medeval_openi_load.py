"""Loading Open-i (and MIMIC-CXR) report folders that hold a bad file (issue 24): macOS's hidden
files are skipped and counted, an unreadable report is left out and named in the load notes, and
``--strict`` makes it one clear error (exit 2). Every folder is built in ``tmp_path`` from text
written for these tests."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinieval.benchmarks.medeval.data import detect_source, load_folder
from clinieval.benchmarks.medeval.mimic_cxr import load_mimic_cxr
from clinieval.benchmarks.medeval.openi import load_openi
from clinieval.errors import UserError
from tests.conftest import run_cli

APPLE_DOUBLE = (
    b"\x00\x05\x16\x07\x00\x02\x00\x00Mac OS X        \x00\x02\x00\x00\x00\t\x00\x00\x00\x32\xff\xfe"
)


def _xml(uid: str, findings: str) -> bytes:
    return (
        '<?xml version="1.0" encoding="utf-8"?>\n<eCitation>\n  <uId id="' + uid + '"/>\n'
        "  <MedlineCitation><Article><Abstract>\n"
        f'    <AbstractText Label="FINDINGS">{findings}</AbstractText>\n'
        '    <AbstractText Label="IMPRESSION">No acute disease.</AbstractText>\n'
        "  </Abstract></Article></MedlineCitation>\n</eCitation>\n"
    ).encode()


def _openi(root: Path, *, bad: int = 0) -> Path:
    """Three good reports, macOS's ``._1.xml`` and ``.DS_Store`` beside them, and ``bad`` reports
    that cannot be read: a byte that is not UTF-8, then XML cut short, then a foreign root."""
    folder = root / "ecgen-radiology"
    folder.mkdir(parents=True)
    for n in (1, 2, 3):
        (folder / f"{n}.xml").write_bytes(_xml(f"CXR{n}", f"Finding of report {n}."))
    (folder / "._1.xml").write_bytes(APPLE_DOUBLE)
    (folder / ".DS_Store").write_bytes(b"\x00\x00\x00\x01Bud1\x00\x00\x10\x00")
    for n in range(bad):
        name = folder / f"{10 + n}.xml"
        if n % 3 == 0:
            name.write_bytes(
                _xml(f"CXR{10 + n}", "Heart size normal \xff here.").replace(b"\xc3\xbf", b"\xff")
            )
        elif n % 3 == 1:
            name.write_bytes(_xml(f"CXR{10 + n}", "Cut short.")[:120])
        else:
            name.write_bytes(b"<record/>\n")
    return root


def test_hidden_and_apple_double_files_are_skipped_and_counted(tmp_path: Path) -> None:
    root = _openi(tmp_path / "openi")
    loaded = load_openi(root)
    assert [r.report.id for r in loaded.reports] == ["CXR1", "CXR2", "CXR3"]
    assert "1 hidden file skipped (._1.xml)" in loaded.notes
    data = load_folder(root)
    assert data.source == "open-i" and len(data.reports) == 3
    assert "1 hidden file skipped (._1.xml)" in data.describe()


def test_a_folder_of_hidden_xml_files_only_is_not_open_i(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    folder.mkdir()
    (folder / "._1.xml").write_bytes(APPLE_DOUBLE)
    assert detect_source(folder) == "medeval"


def test_unreadable_reports_are_left_out_and_named(tmp_path: Path) -> None:
    root = _openi(tmp_path / "openi", bad=1)
    loaded = load_openi(root)
    assert [r.report.id for r in loaded.reports] == ["CXR1", "CXR2", "CXR3"]
    [note] = [n for n in loaded.notes if "unreadable" in n]
    assert note == "1 unreadable report left out: 10.xml:5: malformed XML (not well-formed (invalid token))"
    assert note in load_folder(root).describe()


def test_many_unreadable_reports_are_named_up_to_three(tmp_path: Path) -> None:
    loaded = load_openi(_openi(tmp_path / "openi", bad=5))
    [note] = [n for n in loaded.notes if "unreadable" in n]
    assert note.startswith("5 unreadable reports left out: 10.xml:5: malformed XML (not well-formed")
    assert "11.xml:5: malformed XML (unclosed token)" in note
    assert "12.xml: the root element is <record>, not <eCitation>" in note
    assert note.endswith(", and 2 more")
    assert len(loaded.reports) == 3


def test_strict_makes_an_unreadable_report_one_error(tmp_path: Path) -> None:
    root = _openi(tmp_path / "openi", bad=2)
    bad = root / "ecgen-radiology" / "10.xml"
    with pytest.raises(UserError) as caught:
        load_folder(root, strict=True)
    message = str(caught.value)
    assert message.startswith(f"{bad}:5: malformed XML (not well-formed (invalid token))")
    assert "--strict" in message and "\n" not in message
    assert load_openi(_openi(tmp_path / "quiet"), strict=True).notes  # hidden files stay skipped


def test_the_cli_strict_option_exits_2_with_one_message(tmp_path: Path) -> None:
    root = _openi(tmp_path / "openi", bad=1)
    bad = root / "ecgen-radiology" / "10.xml"
    done = run_cli("medeval", "train", "--data", str(root), "--out", str(tmp_path / "out"), "--strict")
    assert done.returncode == 2, done.stderr
    lines = [line for line in done.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and str(bad) in lines[0] and "malformed XML" in lines[0], done.stderr
    done = run_cli(
        "medeval", "run", "--data", str(root), "-m", "openai:http://127.0.0.1:9/v1@m",
        "--out", str(tmp_path / "arms"), "--strict",
    )  # fmt: skip
    assert done.returncode == 2 and str(bad) in done.stderr, done.stderr
    assert not (tmp_path / "arms").exists()


def _mimic(root: Path) -> Path:
    subject = root / "files" / "p10" / "p10000032"
    subject.mkdir(parents=True)
    (subject / "s50000001.txt").write_text(
        "FINDINGS: No effusion.\n\nIMPRESSION: Normal.\n", encoding="utf-8"
    )
    (subject / "s50000002.txt").write_bytes(b"FINDINGS: Heart \xff normal.\n\nIMPRESSION: Normal.\n")
    (subject / "s50000003.txt").write_text("   \n", encoding="utf-8")
    (subject / "._s50000001.txt").write_bytes(APPLE_DOUBLE)
    return root


def test_mimic_cxr_unreadable_reports_are_left_out_and_named(tmp_path: Path) -> None:
    root = _mimic(tmp_path / "mimic")
    subject = root / "files" / "p10" / "p10000032"
    loaded = load_mimic_cxr(root)
    assert [r.id for r in loaded.reports] == ["s50000001"]
    [note] = [n for n in loaded.notes if "unreadable" in n]
    assert note.startswith("2 unreadable reports left out: p10/p10000032/s50000002.txt:1: ")
    assert "p10/p10000032/s50000003.txt: the report is empty" in note
    with pytest.raises(UserError, match=rf"^{subject / 's50000002.txt'}:1: .*--strict"):
        load_folder(root, strict=True)
