"""MedAlign samples: the release layout, or a user's own instructions over an XML folder.

The release (credentialed; nothing of it ships here) is read in place: the instruction/response
TSV gives each instruction its patient file and its gold response (the row of ``Annotator_1``
unless configured), and ``ehrs/`` holds one XML file per patient in either dialect. A user's own
set is a CSV of instructions (``instruction_id``, ``question``, ``filename`` or ``person_id``,
optional ``gold_response``) over a folder of XML files, e.g. written by ``clinieval ehr
omop2xml``. Every problem a user can cause — a missing file, column or patient file, an XML
file in neither dialect — is one error naming it, before any model call.
"""

from __future__ import annotations

import csv
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from clinieval.errors import UserError
from clinieval.fsutil import inside
from clinieval.types import Sample

RESPONSES_FILE = "clinician-instruction-responses.tsv"
INSTRUCTIONS_FILE = "instructions.csv"
EHR_FOLDER = "ehrs"
"""A user's own set as one folder: the instructions CSV beside the folder of patient XML files
(the layout ``clinieval medalign demo`` writes and ``clinieval run medalign --data`` reads)."""
RELEASE_COLUMNS = (
    "instruction_id",
    "question",
    "person_id",
    "filename",
    "clinician_response",
    "annotator_num",
)
GENERIC_COLUMNS = ("instruction_id", "question")
_METADATA = (
    "submitter_id",  # who wrote the instruction: review assignment never gives it back to them
    "submitter_specialty",
    "human_assigned_subcategory_1",
    "category",
    "subcategory",
    "evidence",
    "kind",
)


@dataclass(frozen=True, slots=True)
class _Row:
    where: str
    cells: Mapping[str, str]

    def get(self, column: str) -> str:
        return (self.cells.get(column) or "").strip()


def _read_rows(path: Path, delimiter: str, required: tuple[str, ...]) -> Iterator[_Row]:
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    with path.open(newline="", encoding="utf-8-sig") as f:
        reader = csv.DictReader(f, delimiter=delimiter)
        header = [h.strip() for h in reader.fieldnames or ()]
        missing = [c for c in required if c not in header]
        if missing:
            raise UserError(
                f"{path}: missing column(s) {', '.join(missing)}; the header has {', '.join(header)}"
            )
        reader.fieldnames = header
        for record in reader:
            yield _Row(f"{path}:{reader.line_num}", {k: v for k, v in record.items() if isinstance(k, str)})


def _ehr_text(ehr_dir: Path, filename: str, where: str, cache: dict[str, str]) -> str:
    """The patient's XML as the model will read it, checked to be MedAlign XML in either dialect."""
    if filename not in cache:
        from clinieval.ehr.medalign_xml import read_xml

        path = inside(ehr_dir, filename, where)
        if not path.is_file():
            raise UserError(f"{where}: EHR file {path} not found")
        read_xml(path)  # a clear error (line, column, dialect) for anything but MedAlign XML
        cache[filename] = path.read_text(encoding="utf-8").strip()
    return cache[filename]


def _answer_keys(row: _Row) -> list[str] | None:
    """The optional ``answer_keys`` cell: a JSON list of strings a correct answer must contain,
    checked here so a malformed cell is reported with its file and line, before any model call."""
    from clinieval.scoring.keyfacts import parse_keys

    cell = row.get("answer_keys")
    return parse_keys(cell, row.where) if cell else None


def _sample(row: _Row, ehr: str, gold: str | None, extra: Mapping[str, str]) -> Sample:
    metadata: dict[str, object] = {k: row.get(k) for k in _METADATA if row.get(k)}
    metadata.update(extra)
    keys = _answer_keys(row)
    if keys is not None:
        metadata["answer_keys"] = keys
    return Sample(
        id=row.get("instruction_id"), input=row.get("question"), context=ehr, target=gold, metadata=metadata
    )


def load_release(
    root: Path, *, gold_annotator: str = "Annotator_1", require_gold: bool = True
) -> list[Sample]:
    """Samples from the MedAlign release folder: one per instruction with a patient file.

    ``require_gold`` (default) keeps the instructions that have a response from
    ``gold_annotator`` (the paper's 303); otherwise every instruction paired with a file is kept,
    with ``target`` None where there is no gold.
    """
    ehr_dir = root / "ehrs"
    if not ehr_dir.is_dir():
        raise UserError(f"{root}: no ehrs/ folder of patient XML files (is this the MedAlign release?)")
    rows: dict[str, list[_Row]] = {}
    for row in _read_rows(root / RESPONSES_FILE, "\t", RELEASE_COLUMNS):
        iid = row.get("instruction_id")
        if not iid:
            raise UserError(f"{row.where}: empty instruction_id")
        rows.setdefault(iid, []).append(row)
    cache: dict[str, str] = {}
    samples: list[Sample] = []
    for group in rows.values():
        gold_row = next((r for r in group if r.get("annotator_num") == gold_annotator), None)
        if gold_row is None and require_gold:
            continue
        row = gold_row or group[0]
        filename = row.get("filename")
        if not filename:
            continue  # an instruction never paired with a patient
        gold = gold_row.get("clinician_response") if gold_row else None
        extra = {"person_id": row.get("person_id"), "filename": filename, "gold_annotator": gold_annotator}
        samples.append(_sample(row, _ehr_text(ehr_dir, filename, row.where, cache), gold or None, extra))
    if not samples:
        raise UserError(
            f"{root / RESPONSES_FILE}: no instruction has a response from {gold_annotator!r} "
            "and a patient file"
        )
    return samples


def load_generic(instructions: Path, ehr_dir: Path) -> list[Sample]:
    """Samples from a CSV of instructions over a folder of patient XML files.

    Each row names its patient by ``filename`` (relative to ``ehr_dir``) or by ``person_id``
    (the file ``{person_id}.xml``, as ``clinieval ehr omop2xml`` writes); ``gold_response`` is
    optional.
    """
    if not ehr_dir.is_dir():
        raise UserError(f"{ehr_dir}: not a folder of patient XML files")
    cache: dict[str, str] = {}
    samples: list[Sample] = []
    seen: set[str] = set()
    for row in _read_rows(instructions, ",", GENERIC_COLUMNS):
        iid = row.get("instruction_id")
        if not iid or not row.get("question"):
            raise UserError(f"{row.where}: instruction_id and question must not be empty")
        if iid in seen:
            raise UserError(f"{row.where}: duplicate instruction_id {iid!r}")
        seen.add(iid)
        filename = row.get("filename") or (f"{row.get('person_id')}.xml" if row.get("person_id") else "")
        if not filename:
            raise UserError(f"{row.where}: give the patient as a filename or person_id column")
        extra = {"person_id": row.get("person_id") or Path(filename).stem, "filename": filename}
        ehr = _ehr_text(ehr_dir, filename, row.where, cache)
        samples.append(_sample(row, ehr, row.get("gold_response") or None, extra))
    if not samples:
        raise UserError(f"{instructions}: no instructions")
    return samples


def load_folder(root: Path) -> tuple[list[Sample], list[Path]]:
    """The samples of a folder in either layout, and the data file the run records: the release
    (:data:`RESPONSES_FILE` and ``ehrs/``) or a user's set (:data:`INSTRUCTIONS_FILE` and
    :data:`EHR_FOLDER`)."""
    if (root / RESPONSES_FILE).is_file():
        return load_release(root), [root / RESPONSES_FILE]
    if (root / INSTRUCTIONS_FILE).is_file():
        return load_generic(root / INSTRUCTIONS_FILE, root / EHR_FOLDER), [root / INSTRUCTIONS_FILE]
    raise UserError(
        f"{root}: neither the MedAlign release ({RESPONSES_FILE} and ehrs/) nor a folder with "
        f"{INSTRUCTIONS_FILE} and {EHR_FOLDER}/; pass --data FOLDER (`clinieval medalign demo` writes one)"
    )
