"""A user's own questions: a JSON Lines file (clinieval's shape, MedQA's or MedMCQA's, as
published) or a spreadsheet's CSV export, with ``--field NAME=COLUMN`` for other names.

Every problem of every line (up to :data:`LINES_SHOWN` lines) is one error, each line named with
its problems and what was expected, because a file is fixed by hand and one problem per attempt
turns a typo into an afternoon. The shape the file was read as is said on the console (a file
read as the wrong shape shows as a wrong note, not as silently wrong questions).
"""

from __future__ import annotations

import csv
import sys
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from clinieval.benchmarks.jsonl.records import Draft, read_record
from clinieval.benchmarks.jsonl.shapes import (
    CLINIEVAL,
    FIELD_NAMES,
    MEDMCQA,
    Layout,
    parse_fields,
    recognise,
    with_fields,
)
from clinieval.datasets import json_objects, read_csv_rows
from clinieval.errors import UserError
from clinieval.types import Sample

LINES_SHOWN = 20
"""Lines with problems listed in one error; the rest are counted."""

SUFFIXES = (".jsonl", ".csv")


def say_note(text: str) -> None:
    """The console note naming the shape a file was read as (stderr: stdout is the results)."""
    print(f"note: {text}", file=sys.stderr)


def load_jsonl(path: Path, fields: Sequence[str] = (), say: Callable[[str], None] = say_note) -> list[Sample]:
    """The questions in ``path`` (``.jsonl`` or ``.csv``) read through the layout its fields
    (a CSV file's header) show, with ``fields`` (``--field NAME=COLUMN`` values) replacing entries of it."""
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    mapping = parse_fields(fields)
    if path.suffix.lower() == ".csv":
        layout, records, delimiter = _csv_records(path, mapping)
    else:
        layout, records, delimiter = _jsonl_records(path, mapping)
    drafts = _read_all(layout, records)
    numbering = _numbering(layout, drafts.drafts)
    problems = drafts.problems
    problems.update(_count_numbers(layout, drafts.drafts, numbering.first))
    _refuse(path, layout, problems, [numbering.problem] if numbering.problem else [])
    samples = [_sample(d) for d in drafts.drafts]
    if not samples:
        raise UserError(f"{path}: no samples")
    if layout is not CLINIEVAL or delimiter:
        say(_note(path, layout, len(samples), delimiter, numbering.note))
    return samples


class _Read:
    def __init__(self) -> None:
        self.drafts: list[Draft] = []
        self.problems: dict[int, list[str]] = {}


def _jsonl_items(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for where, item in json_objects(path):
        yield int(where.rsplit(":", 1)[1]), item


def _jsonl_records(
    path: Path, mapping: dict[str, tuple[str, ...]]
) -> tuple[Layout, Iterator[tuple[int, dict[str, Any]]], str]:
    """The layout of a JSON Lines file, recognised from the fields its lines have (all of them:
    a first line that lacks one is a line to fix, not a different shape), and its lines."""
    items = list(_jsonl_items(path))
    fields = {key for _, item in items for key in item}
    return with_fields(recognise(fields, csv=False), mapping), iter(items), ""


def _read_all(layout: Layout, items: Iterator[tuple[int, dict[str, Any]]]) -> _Read:
    read = _Read()
    seen: dict[str, int] = {}
    for line, item in items:
        draft, problems = read_record(item, line, layout)
        if draft.id and draft.id in seen:
            problems.append(f"id {draft.id!r} repeats line {seen[draft.id]}'s")
        seen.setdefault(draft.id, line)
        if problems:
            read.problems[line] = problems
        else:
            read.drafts.append(draft)
    return read


class Numbering(NamedTuple):
    """What number numbered answers give the first option, how the console note says it was
    known, and the file's problem when it does not tell."""

    first: int = 1
    note: str = ""
    problem: str = ""


def _numbering(layout: Layout, drafts: list[Draft]) -> Numbering:
    """How the file's numbered answers count: as ``--field numbering`` says, else from 0 when
    one is 0, from 1 when one is its line's number of options; both, or neither, is refused
    (MedMCQA's own files count from 1, its Hugging Face copy from 0)."""
    numbered = [d for d in drafts if d.number is not None]
    word = layout.numbering_word()
    if not numbered:
        return Numbering()
    if layout.numbering is not None:
        return Numbering(
            layout.numbering, f"{word} counts the options from {layout.numbering} (--field numbering)"
        )
    zero = next((d for d in numbered if d.number == 0), None)
    top = next((d for d in numbered if d.number == len(d.choices)), None)
    medmcqa = layout.target == MEDMCQA.target
    if zero is not None and top is not None:
        return Numbering(
            problem=f"{word} counts the options from 0 on line {zero.line} (0) but from 1 on line {top.line} "
            f"({top.number} of {len(top.choices)} options); make them agree"
        )
    if zero is not None:
        origin = " (the Hugging Face copy's numbering)" if medmcqa else ""
        return Numbering(0, f"{word} counts the options from 0{origin}: line {zero.line} has 0")
    if top is not None:
        origin = " (MedMCQA's own numbering)" if medmcqa else ""
        return Numbering(
            1,
            f"{word} counts the options from 1{origin}: line {top.line} has {top.number} of {top.number} "
            "options",
        )
    return Numbering(
        problem=f"{word} holds numbers, but none is 0 or the last option's, so they may count the options "
        "from 1 (1 = the first; MedMCQA's own files) or from 0 (0 = the first; the Hugging Face copy); "
        "say which with --field numbering=1 or --field numbering=0"
    )


def _count_numbers(layout: Layout, drafts: list[Draft], first: int) -> dict[int, list[str]]:
    """Numbered answers made option indexes; a number outside the options is that line's problem."""
    problems: dict[int, list[str]] = {}
    kept: list[Draft] = []
    for d in drafts:
        if d.number is not None:
            index = d.number - first
            if not 0 <= index < len(d.choices):
                problems[d.line] = [
                    f"{layout.numbering_word()} is {d.number}, outside the {len(d.choices)} options "
                    f"(counted from {first}: {first}-{len(d.choices) - 1 + first})"
                ]
                continue
            d.index = index
        kept.append(d)
    drafts[:] = kept
    return problems


def _refuse(path: Path, layout: Layout, problems: dict[int, list[str]], whole_file: list[str]) -> None:
    """One error listing every line's problems (the first :data:`LINES_SHOWN` lines), or nothing:
    a single line with problems is one line of error, several are one line each under a heading.
    Both say which shape the file was read as; clinieval's own (what a file of no known shape is
    read as) also says how other shapes and names are read."""
    entries = [f"{path}:{n}: {'; '.join(p)}" for n, p in sorted(problems.items())[:LINES_SHOWN]]
    entries += [f"{path}: {p}" for p in whole_file]
    if not entries:
        return
    shape = f"read as {layout.shape} ({layout.described})"
    if layout is CLINIEVAL:
        shape += (
            "; a MedQA or MedMCQA file is recognised from its fields, other names need --field NAME=COLUMN "
            f"(NAME: {', '.join(FIELD_NAMES)})"
        )
    if len(entries) == 1:
        raise UserError(f"{entries[0]}; {shape}")
    more = [f"... and {len(problems) - LINES_SHOWN} more lines"] if len(problems) > LINES_SHOWN else []
    count = f"{len(problems)} lines" if len(problems) > 1 else "the file"
    raise UserError(
        f"{path}: {count} cannot be read; {shape}:\n" + "\n".join(f"  {e}" for e in entries + more)
    )


def _sample(d: Draft) -> Sample:
    target = d.free_target
    if d.index is not None and not (d.listed and d.number is None):
        target = d.choices[d.index]  # the option's text: right whether or not a prompt letters them
    return Sample(
        id=d.id,
        input=d.question,
        context=d.context,
        choices=d.choices,
        target=target,
        targets=d.targets,
        metadata=d.metadata,
    )


def _note(path: Path, layout: Layout, count: int, delimiter: str, numbering: str) -> str:
    parts = [f"{path.name}: read as {layout.shape} ({layout.described})"]
    if delimiter:
        parts.append(f"cells separated by {delimiter!r}")
    if numbering:
        parts.append(numbering)
    return "; ".join(parts) + f"; {count} question{'s' if count != 1 else ''}"


# --- CSV ------------------------------------------------------------------------------------------


class _CsvWords:
    """What each fault of a question table says (datasets.read_csv_rows asks)."""

    def __init__(self, layout: Layout) -> None:
        self.layout = layout

    def unreadable(self, path: Path, line: int, in_header: bool, error: csv.Error) -> str:
        return f"{path}:{line}: not readable CSV ({error})"

    def empty(self, path: Path) -> str:
        return f"{path}: no header row; the first row names the columns (input, A, B, C, D, target)"

    def repeated(self, path: Path, columns: Sequence[str]) -> str:
        return f"{path}: column {', '.join(repr(c) for c in columns)} appears twice in the header"

    def missing(self, path: Path, columns: Sequence[str], header: tuple[str, ...]) -> str:
        return (
            f"{path}: no column {', '.join(repr(c) for c in columns)} for {self.layout.shape} "
            f"({self.layout.described}); the header has {', '.join(repr(c) for c in header)}; "
            "other names need --field NAME=COLUMN"
        )

    def width(self, path: Path, number: int, line: int, cells: int, header: int) -> str:
        return (
            f"{path}:{line}: {cells} cells where the header has {header}; a cell holding the separator "
            "must be in double quotes"
        )


def _csv_records(
    path: Path, mapping: dict[str, tuple[str, ...]]
) -> tuple[Layout, Iterator[tuple[int, dict[str, Any]]], str]:
    """The layout of a CSV file (from its header), its rows as line -> cells (an empty cell is
    absent: null), and the separator (comma, semicolon or tab: what the header uses most)."""
    delimiter = _separator(path)
    with path.open(newline="", encoding="utf-8-sig", errors="replace") as f:
        header = next(csv.reader(f, delimiter=delimiter), [])
    layout = with_fields(recognise([c.strip() for c in header], csv=True), mapping)
    _, rows = read_csv_rows(
        path, "question", layout.required_columns(), _CsvWords(layout), delimiter=delimiter
    )
    items = ((r.line, {k: (v if v.strip() else None) for k, v in r.cells.items()}) for r in rows)
    return layout, items, delimiter


def _separator(path: Path) -> str:
    with path.open(encoding="utf-8-sig", errors="replace") as f:
        first = f.readline()
    counts = {d: first.count(d) for d in (",", ";", "\t")}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] > counts[","] else ","
