"""Which field of a user's file is which part of a question: the shapes recognised from their
fields, and ``--field NAME=COLUMN`` for the rest.

A file is read through one :class:`Layout`. The layout is chosen from the fields of the file's
lines (a CSV file's header), because the published files are read as they come: MedQA's
``question``/``options``/``answer_idx`` and MedMCQA's ``question``/``opa``..``opd``/``cop`` are
each converted by hand otherwise, and the obvious conversion (``options`` kept as an object) used
to send the model ``A. A``. ``--field`` then replaces single entries of the chosen layout, so a
file that is nearly one of the shapes needs one option, not a converter.
"""

from __future__ import annotations

import dataclasses
import string
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from clinieval.errors import UserError

FIELD_NAMES = ("id", "question", "context", "choices", "target", "targets", "metadata", "numbering")
"""The loader's own fields, the NAMEs ``--field NAME=COLUMN`` accepts (``input`` and ``answer``
are accepted for ``question`` and ``target``)."""

ALIASES = {"input": "question", "answer": "target"}

EXPECTED = {
    "id": "a string or number, unique in the file",
    "question": "the question's text",
    "context": "text (the record the question is about)",
    "choices": "an object of letter -> option text, or a list of option texts",
    "target": "the answer: an option's letter, its text or its number",
    "targets": "a list of acceptable answers",
}
"""What each loader field should hold, as a problem with it says."""


@dataclass(frozen=True, slots=True)
class Layout:
    """Where each part of a question is in one line of a file: a column name per loader field
    (None: not in the file). ``id`` None numbers the questions by their line (a CSV file's
    spreadsheet row). ``choices`` is one column holding an object or a list, or one column per
    option. A field in ``required`` must be on every line."""

    shape: str
    question: str
    id: str | None = None
    context: str | None = None
    choices: tuple[str, ...] = ()
    target: str | None = None
    targets: str | None = None
    metadata: tuple[str, ...] = ()
    answer_text: str | None = None
    """MedQA's ``answer``: the right option's text, checked against the letter in ``target``."""
    numbering: int | None = None
    """What number a numbered answer gives the first option (0 or 1); None: read from the file."""
    unanswered: tuple[object, ...] = ()
    """Answer values meaning "no answer given" (MedMCQA's hidden test answers, ``cop`` -1)."""
    required: frozenset[str] = frozenset({"question"})
    described: str = ""
    """The shape's fields as the console names them."""

    def columns(self, name: str) -> tuple[str, ...]:
        """The columns loader field ``name`` is read from."""
        value = getattr(self, name)
        if value is None:
            return ()
        return value if isinstance(value, tuple) else (value,)

    def mapping_shown(self) -> str:
        """Each loader field and the column it is read from, as ``--field`` would write it."""
        shown = [f"{n}={','.join(self.columns(n))}" for n in FIELD_NAMES[:-1] if self.columns(n)]
        if self.id is None:
            shown.insert(0, "id=the line number")
        return ", ".join(shown)

    def required_columns(self) -> list[str]:
        return [c for name in sorted(self.required) for c in self.columns(name)]

    def numbering_word(self) -> str:
        """How the console names this layout's numbered answers: ``cop`` for MedMCQA."""
        return f"'{self.target}'" if self.target else "the answer"


CLINIEVAL = Layout(
    shape="clinieval's own shape",
    question="input",
    id="id",
    context="context",
    choices=("choices",),
    target="target",
    targets="targets",
    metadata=("metadata",),
    required=frozenset({"id", "question"}),
    described="id, input, context, choices, target, targets, metadata",
)
"""clinieval's own JSONL shape."""

MEDQA = Layout(
    shape="MedQA",
    question="question",
    choices=("options",),
    target="answer_idx",
    answer_text="answer",
    metadata=("meta_info",),
    required=frozenset({"question", "choices", "target"}),
    described="question, options {letter: text}, answer_idx, answer; ids are line numbers",
)
"""MedQA (jind11/MedQA, US 4- and 5-option files): no id, so questions are numbered by line."""

MEDMCQA = Layout(
    shape="MedMCQA",
    question="question",
    id="id",
    choices=("opa", "opb", "opc", "opd"),
    target="cop",
    metadata=("exp", "subject_name", "topic_name", "choice_type"),
    unanswered=(-1, "-1", None, ""),
    required=frozenset({"id", "question", "choices"}),
    described="id, question, opa..opd, cop",
)
"""MedMCQA: ``cop`` numbers the right option, from 1 in the released files and from 0 in the
Hugging Face copy; the test split's ``cop`` is -1 or absent (hidden answers)."""


def recognise(fields: Collection[str], csv: bool) -> Layout:
    """The layout of a file whose lines (a CSV file's header) have ``fields``."""
    keys = set(fields)
    if "input" in keys and not csv:
        return CLINIEVAL
    if keys & {"opa", "opb", "opc", "opd"}:
        return MEDMCQA
    if not csv and keys & {"options", "answer_idx"}:
        # a copy without answer_idx: the answer's text names the option
        return (
            MEDQA if "answer_idx" in keys else dataclasses.replace(MEDQA, target="answer", answer_text=None)
        )
    return spreadsheet(keys) if csv else CLINIEVAL


def spreadsheet(header: Collection[str]) -> Layout:
    """A CSV table's layout: ``input`` (or ``question``), one column per option named A, B, C, ...,
    and ``id``, ``context``, ``target`` (or ``answer``) where the header has them; without an
    ``id`` column the questions are numbered by their spreadsheet row."""
    letters: list[str] = []
    for letter in string.ascii_uppercase:  # A, B, C, ... up to the first letter missing
        if letter not in header:
            break
        letters.append(letter)
    target = next((c for c in ("target", "answer") if c in header), None)
    has_id = "id" in header
    return Layout(
        shape="spreadsheet",
        question="question" if "question" in header and "input" not in header else "input",
        id="id" if has_id else None,
        context="context" if "context" in header else None,
        choices=tuple(letters),
        target=target,
        required=frozenset({"question", "id"} if has_id else {"question"}),
        described="input or question, A, B, C, ... (one column per option), target or answer, id, context",
    )


def parse_fields(specs: Sequence[str]) -> dict[str, tuple[str, ...]]:
    """``--field NAME=COLUMN`` options as loader field -> columns; every mistake is one error
    saying what is accepted."""
    mapping: dict[str, tuple[str, ...]] = {}
    for spec in specs:
        name, sep, value = (part.strip() for part in spec.partition("="))
        name = ALIASES.get(name, name)
        if not sep or not name or not value:
            raise UserError(f"--field {spec!r}: expected NAME=COLUMN, e.g. --field question=stem")
        if name not in FIELD_NAMES:
            raise UserError(f"--field {spec!r}: NAME is one of {', '.join(FIELD_NAMES)}")
        if name in mapping:
            raise UserError(f"--field {spec!r}: {name} is mapped twice")
        columns = tuple(c.strip() for c in value.split(","))
        if any(not c for c in columns):
            raise UserError(f"--field {spec!r}: an empty column name")
        if len(columns) > 1 and name not in ("choices", "metadata"):
            raise UserError(f"--field {spec!r}: only choices and metadata take several columns")
        if name == "numbering" and columns not in (("0",), ("1",)):
            raise UserError(
                f"--field {spec!r}: numbering=0 when a numbered answer gives the first option 0, "
                "numbering=1 when it gives it 1"
            )
        mapping[name] = columns
    return mapping


def with_fields(layout: Layout, mapping: dict[str, tuple[str, ...]]) -> Layout:
    """``layout`` with the ``--field`` entries replacing its own; a mapped field is required."""
    if not mapping:
        return layout
    changes: dict[str, object] = {}
    for name, columns in mapping.items():
        if name == "numbering":
            changes[name] = int(columns[0])
        elif name in ("choices", "metadata"):
            changes[name] = columns
        else:
            changes[name] = columns[0]
    if "target" in mapping:
        changes["answer_text"] = None  # MedQA's check of the text against the letter it replaces
    required = set(layout.required) | {n for n in mapping if n not in ("metadata", "numbering")}
    changes.update(shape=f"{layout.shape} with --field", required=frozenset(required))
    mapped = dataclasses.replace(layout, **changes)  # type: ignore[arg-type]
    return dataclasses.replace(mapped, described=mapped.mapping_shown())
