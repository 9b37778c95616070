"""EHRNoteQA discharge-note preprocessing, checked against hand-computed outputs."""

from __future__ import annotations

import pytest

from clinieval.ehr.notes import (
    DischargeNote,
    format_note,
    format_notes,
    level_for,
    normalize_whitespace,
    select_notes,
)


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("a\n   b", "a\nb"),  # spaces after a newline collapse into it
        ("a  \nb", "a\nb"),  # spaces before a newline too
        # The first regex matches "  \n" and leaves "   b"; the second then turns "\n   " into
        # one space: the public code's quirk, kept on purpose.
        ("a  \n   b", "a b"),
        ("a\n\n\nb", "a\nb"),  # blank lines vanish
        ("a \t b", "a b"),  # other whitespace runs become one space
        ("  Name:  ___   Unit No: ___ \n", "Name: ___ Unit No: ___"),
        ("x\t\ny", "x\ny"),
        ("one two", "one two"),  # single spaces stay
        ("a\tb", "a\tb"),  # a single tab is not a run
        (" \n \n lead", "lead"),
    ],
)
def test_whitespace_normalisation(raw: str, expected: str) -> None:
    assert normalize_whitespace(raw) == expected


def _note(hadm: str, charttime: str, text: str) -> DischargeNote:
    return DischargeNote(subject_id="10000032", hadm_id=hadm, charttime=charttime, text=text)


def test_note_header_and_text() -> None:
    note = _note("22595853", "2180-05-07 00:00:00", " \nName:  ___\n\n Sex:   F \n")
    assert format_note(note) == (
        "Patient ID : 10000032\nAdmission ID : 22595853\nChartdate : 2180-05-07\nName: ___\nSex: F"
    )


def test_notes_sorted_first_three_joined() -> None:
    notes = [
        _note("4", "2180-09-01 00:00:00", "fourth"),
        _note("2", "2180-06-01 00:00:00", "second"),
        _note("1", "2180-05-07 00:00:00", "first"),
        _note("3", "2180-07-01 00:00:00", "third"),
    ]
    assert [n.hadm_id for n in select_notes(notes)] == ["1", "2", "3"]
    header = "Patient ID : 10000032\nAdmission ID : {}\nChartdate : {}\n"
    expected = "\n\n".join(
        f"[note {i} start]\n{header.format(h, d)}{t}\n[note {i} end]"
        for i, (h, d, t) in enumerate(
            [("1", "2180-05-07", "first"), ("2", "2180-06-01", "second"), ("3", "2180-07-01", "third")], 1
        )
    )
    assert format_notes(notes) == expected
    assert format_notes(notes[2:3]) == (
        "[note 1 start]\nPatient ID : 10000032\nAdmission ID : 1\nChartdate : 2180-05-07\nfirst\n[note 1 end]"
    )


def test_from_row() -> None:
    row = {"subject_id": 1, "hadm_id": 2, "charttime": "2180-05-07 00:00:00", "text": "t", "note_id": "x"}
    assert DischargeNote.from_row(row) == DischargeNote("1", "2", "2180-05-07 00:00:00", "t")


@pytest.mark.parametrize(
    ("tokens", "level"), [(0, 1), (3500, 1), (3501, 2), (7500, 2), (7501, None), (10**6, None)]
)
def test_levels(tokens: int, level: int | None) -> None:
    assert level_for(tokens) == level
