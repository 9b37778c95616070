"""``fsutil.read_user_text``: the one reader of small files the user names (a prompt file, an
endpoints file). Each way a file can be unreadable is one UserError naming the file and saying what
it was meant to be, in the words its caller gives; callers' messages are pinned by these tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from clinieval.errors import UserError
from clinieval.fsutil import read_user_text
from clinieval.models.pool import read_endpoints_file
from clinieval.task import _read_prompt_file


def test_reads_utf8_text(tmp_path: Path) -> None:
    f = tmp_path / "p.txt"
    f.write_bytes("héllo\r\nworld\n".encode())
    assert read_user_text(f, "the prompt file", missing="gone") == "héllo\nworld\n"


def test_missing_file_uses_callers_words(tmp_path: Path) -> None:
    f = tmp_path / "nope.txt"
    with pytest.raises(UserError) as e:
        read_user_text(f, "the prompt file", missing="prompt file not found")
    assert str(e.value) == f"{f}: prompt file not found"


def test_folder_with_and_without_own_words(tmp_path: Path) -> None:
    with pytest.raises(UserError) as e:
        read_user_text(
            tmp_path, "the prompt file", missing="x", folder="is a folder; --prompt takes a text file"
        )
    assert str(e.value) == f"{tmp_path}: is a folder; --prompt takes a text file"
    with pytest.raises(UserError) as e:
        read_user_text(tmp_path, "the endpoints file", missing="x")
    assert str(e.value) == f"{tmp_path}: cannot read the endpoints file ({os.strerror(21)})"


def test_not_utf8(tmp_path: Path) -> None:
    f = tmp_path / "bad.txt"
    f.write_bytes(b"\xff\xfe bad")
    with pytest.raises(UserError) as e:
        read_user_text(f, "the endpoints file", missing="x")
    assert str(e.value) == f"{f}: not UTF-8 text; save the endpoints file as UTF-8"


def test_unreadable(tmp_path: Path) -> None:
    """Any other OSError is "cannot read" with the system's reason. A path through a file fails
    the same way for root (which a chmod 0 file would not stop)."""
    parent = tmp_path / "a-file"
    parent.write_text("x", encoding="utf-8")
    with pytest.raises(UserError) as e:
        read_user_text(parent / "prompt.txt", "the prompt file", missing="x")
    assert str(e.value) == f"{parent / 'prompt.txt'}: cannot read the prompt file ({os.strerror(20)})"


def test_callers_messages(tmp_path: Path) -> None:
    with pytest.raises(UserError, match=r"nope\.txt: prompt file not found$"):
        _read_prompt_file(tmp_path / "nope.txt")
    with pytest.raises(UserError, match=r": is a folder; --prompt takes a text file$"):
        _read_prompt_file(tmp_path)
    with pytest.raises(UserError, match=r"nope\.yaml: no such endpoints file$"):
        read_endpoints_file(tmp_path / "nope.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"\xff")
    with pytest.raises(UserError, match=r"bad\.yaml: not UTF-8 text; save the endpoints file as UTF-8$"):
        read_endpoints_file(bad)
