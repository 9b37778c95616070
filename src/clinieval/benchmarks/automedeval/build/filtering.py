"""Step (a): QA pairs become instances, minus the items that are not medical by pattern.

The paper started from 10,000 medical-meadow-wikidoc pairs and dropped 126 whose content was not
medical by pattern matching (its example pattern: "rephras"). The patterns live in a data file
(``non_medical.txt`` beside this module, or the user's own with ``--patterns``), so a reviewer
can read why each is there and a user can change them without changing code. Every dropped item
is written out with the pattern and field that dropped it: a pattern that drops medical content
is found by reading that file, not by guessing.

Input: JSON Lines, a JSON array (medical-meadow-wikidoc's own file), CSV or TSV, with either
wikidoc's fields (``instruction``, ``input``, ``output``: the question is ``input``, or
``instruction`` when ``input`` is empty; the reference is ``output``) or ``id``, ``question`` and
``answer`` (or ``reference``). An item without an id gets ``line-N`` (``item-N`` in a JSON array),
stable as long as the file is.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from clinieval.benchmarks.automedeval.build.instances import Instance, write_instances
from clinieval.datasets import once_each
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, atomic_write_jsonl

PATTERNS_FILE = "non_medical.txt"
DROPPED_FILE = "dropped.jsonl"
SUMMARY_FILE = "filter-summary.json"
SEARCHED = ("question", "reference")
"""The fields the patterns are searched in, in this order."""


@dataclass(frozen=True, slots=True)
class Pattern:
    """One pattern of the file: as written, compiled, and where it is (for counts and errors)."""

    text: str
    regex: re.Pattern[str]
    where: str


@dataclass
class Filtered:
    """What filtering kept and dropped; ``dropped`` holds (instance, pattern, field)."""

    source: Path
    patterns_source: str
    patterns: list[Pattern]
    kept: list[Instance] = field(default_factory=list)
    dropped: list[tuple[Instance, Pattern, str]] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """Items dropped per pattern (each under the first that matched), every pattern listed."""
        by = Counter(p.text for _, p, _ in self.dropped)
        return {p.text: by.get(p.text, 0) for p in self.patterns}

    def summary(self) -> dict[str, Any]:
        read = len(self.kept) + len(self.dropped)
        return {
            "source": str(self.source),
            "patterns": self.patterns_source,
            "read": read,
            "kept": len(self.kept),
            "dropped": len(self.dropped),
            "dropped_rate": len(self.dropped) / read if read else None,
            "dropped_by_pattern": self.counts(),
            "dropped_by_field": dict(Counter(f for _, _, f in self.dropped)),
            "paper": {"read": 10000, "dropped": 126, "example_pattern": "rephras"},
        }


# --- patterns -------------------------------------------------------------------------------


def default_patterns_text() -> str:
    """The shipped pattern file's text (package data)."""
    package = __name__.rpartition(".")[0]
    return resources.files(package).joinpath(PATTERNS_FILE).read_text(encoding="utf-8")


def parse_patterns(text: str, source: str) -> list[Pattern]:
    """Each non-blank, non-comment line as a case-insensitive regex; a bad one names its line."""
    out: list[Pattern] = []
    for n, raw in enumerate(text.splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        try:
            regex = re.compile(line, re.IGNORECASE)
        except re.error as e:
            raise UserError(f"{source}:{n}: {line!r} is not a valid regular expression ({e})") from None
        if regex.search(""):
            raise UserError(f"{source}:{n}: {line!r} matches empty text, so it would drop every item")
        out.append(Pattern(line, regex, f"{source}:{n}"))
    if not out:
        raise UserError(f"{source}: no patterns (one regular expression or word per line, # comments)")
    return out


def load_patterns(path: Path | None) -> tuple[list[Pattern], str]:
    """The user's pattern file, or the shipped one; also says which it was."""
    if path is None:
        return parse_patterns(default_patterns_text(), PATTERNS_FILE), f"built-in {PATTERNS_FILE}"
    if not path.is_file():
        raise UserError(f"{path}: pattern file not found")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError:
        raise UserError(f"{path}: not UTF-8 text; save the pattern file as UTF-8") from None
    return parse_patterns(text, str(path)), str(path)


def first_match(instance: Instance, patterns: Sequence[Pattern]) -> tuple[Pattern, str] | None:
    """The first pattern (in file order) found in the question, else in the reference."""
    for p in patterns:
        for name in SEARCHED:
            if p.regex.search(getattr(instance, name)):
                return p, name
    return None


def filter_instances(
    instances: Sequence[Instance], patterns: list[Pattern], source: Path, patterns_source: str
) -> Filtered:
    done = Filtered(source, patterns_source, patterns)
    for x in instances:
        hit = first_match(x, patterns)
        if hit is None:
            done.kept.append(x)
        else:
            done.dropped.append((x, *hit))
    return done


def write_filtered(done: Filtered, out: Path) -> None:
    """The kept instances at ``out``; ``dropped.jsonl`` and ``filter-summary.json`` beside it."""
    write_instances(out, done.kept)
    atomic_write_jsonl(
        out.parent / DROPPED_FILE,
        ({**x.to_dict(), "dropped_by": {"pattern": p.text, "field": f}} for x, p, f in done.dropped),
    )
    atomic_write_json(out.parent / SUMMARY_FILE, done.summary())


# --- QA input -------------------------------------------------------------------------------


def read_qa(path: Path) -> list[Instance]:
    """QA pairs from ``.jsonl``, ``.json`` (an array), ``.csv`` or ``.tsv``, as instances without
    responses; every bad row is one error naming the file, the line (or item) and the field."""
    if not path.is_file():
        raise UserError(f"{path}: QA file not found")
    rows = ((where, qa_instance(row, where, fallback_id)) for where, fallback_id, row in _rows(path))
    out = once_each(rows, lambda x: x.id, "field 'id':")
    if not out:
        raise UserError(f"{path}: no QA pairs")
    return out


def _rows(path: Path) -> Iterator[tuple[str, str, Mapping[str, object]]]:
    """(where, id if none given, row) for each row of the file."""
    if path.suffix.lower() == ".json":
        from clinieval.datasets import read_json

        data = read_json(path)
        if not isinstance(data, list):
            raise UserError(f"{path}: expected a JSON array of QA objects (or JSON Lines, one per line)")
        for i, obj in enumerate(data, 1):
            if not isinstance(obj, dict):
                raise UserError(f"{path}: item {i}: expected a JSON object, got {type(obj).__name__}")
            yield f"{path}: item {i}", f"item-{i}", obj
        return
    from clinieval.analysis.table import read_table

    for row in read_table(path).rows:
        yield row.where, f"line-{row.where.rpartition(':')[2]}", row.cells


def _cell(row: Mapping[str, object], name: str, where: str) -> str:
    value = row.get(name)
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UserError(f"{where}: field {name!r} should be text, got {type(value).__name__}")
    return value.strip()


def qa_instance(row: Mapping[str, object], where: str, fallback_id: str) -> Instance:
    """One QA row as an instance: wikidoc's fields when there is an ``output``, else
    ``question`` and ``answer`` (or ``reference``)."""
    raw_id = row.get("id")
    item_id = str(raw_id).strip() if isinstance(raw_id, str | int) and not isinstance(raw_id, bool) else ""
    if raw_id is not None and not isinstance(raw_id, str | int):
        raise UserError(f"{where}: field 'id' should be text, got {type(raw_id).__name__}")
    if "output" in row:
        question_field = "input" if _cell(row, "input", where) else "instruction"
        question, reference = _cell(row, question_field, where), _cell(row, "output", where)
        names = (question_field if question_field == "input" else "input' or 'instruction", "output")
    elif "question" in row:
        answer_field = "answer" if "answer" in row else "reference"
        question, reference = _cell(row, "question", where), _cell(row, answer_field, where)
        names = ("question", answer_field)
    else:
        raise UserError(
            f"{where}: expected the fields instruction, input, output (medical-meadow-wikidoc) "
            f"or question and answer (or reference); found {', '.join(map(repr, row)) or 'none'}"
        )
    for value, name in zip((question, reference), names, strict=True):
        if not value:
            raise UserError(f"{where}: field '{name}' is empty")
    return Instance(item_id or fallback_id, question, reference)
