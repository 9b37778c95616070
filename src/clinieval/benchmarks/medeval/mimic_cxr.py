"""MIMIC-CXR as a credentialed user holds it after PhysioNet access, read into chest reports.

MedEval's chest reports come partly from MIMIC-CXR (the rest from Open-i, :mod:`.openi`). The
data cannot ship with clinieval; a user downloads it and points clinieval at the folder:

* the report tree of ``mimic-cxr-reports.zip``: ``files/pNN/pNNNNNNNN/sNNNNNNNN.txt``, where the
  patient folder holds the 8-digit ``subject_id`` and sits under ``p`` + its first two digits, and
  the report file is named after the 8-digit ``study_id``;
* optionally ``mimic-cxr-2.0.0-chexpert.csv`` (MIMIC-CXR-JPG; ``.csv.gz`` as downloaded is fine):
  ``subject_id``, ``study_id`` and the 14 CheXpert observations as 1.0 / 0.0 / -1.0 / blank, read
  as positive / negative / unknown / absent. A study without a row has no codes (all absent);
* optionally ``mimic-cxr-2.0.0-split.csv``: ``dicom_id``, ``study_id``, ``subject_id``, ``split``
  (train / validate / test), one row per image; a study's split is its images' split, and
  "validate" is read as "validation". A study without a row gets a seeded split later
  (:func:`~.splits.assign_splits`).

The two CSVs are looked for beside ``files/`` (or named explicitly). Reports are cut into sections
by :func:`~.sections.parse_sections`; a report's id is its file name without ``.txt``
(``s50414267``). Other files in the tree (``index.html`` left by a recursive download, image
folders of MIMIC-CXR-JPG) are ignored. A report file that cannot be read (bytes that are not
UTF-8, an empty file, a read error) is left out and named in the notes, or, with ``strict``, is
the one error of the load.
"""

from __future__ import annotations

import csv
import gzip
import os
import re
import zlib
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from clinieval.benchmarks.medeval.items import CHEST, CHEXPERT_OBSERVATIONS, CodeValue, ReportItem, Split
from clinieval.benchmarks.medeval.openi import problem, strict_error, unreadable_note
from clinieval.benchmarks.medeval.sections import parse_sections
from clinieval.datasets import not_utf8, utf8_lines
from clinieval.errors import UserError

__all__ = [
    "CHEXPERT_FILE",
    "SPLIT_FILE",
    "MimicCxr",
    "find_files_root",
    "load_mimic_cxr",
    "read_chexpert",
    "read_report",
    "read_split",
    "report_paths",
]

CHEXPERT_FILE = "mimic-cxr-2.0.0-chexpert.csv"
SPLIT_FILE = "mimic-cxr-2.0.0-split.csv"

_GROUP = re.compile(r"p\d{2}")
_SUBJECT = re.compile(r"p\d{8}")
_STUDY_FILE = re.compile(r"s(\d{8})\.txt")
_ID = re.compile(r"\d{8}")

_CHEXPERT_VALUES: Mapping[str, CodeValue] = {
    "1.0": "positive",
    "1": "positive",
    "0.0": "negative",
    "0": "negative",
    "-1.0": "unknown",
    "-1": "unknown",
    "": "absent",
}
_SPLIT_VALUES: Mapping[str, Split] = {"train": "train", "validate": "validation", "test": "test"}


def find_files_root(folder: Path) -> Path | None:
    """The ``files`` folder of a MIMIC-CXR tree: ``folder/files`` or ``folder`` itself when it
    holds ``pNN`` folders; None when neither does."""
    for candidate in (folder / "files", folder):
        if candidate.is_dir() and any(_GROUP.fullmatch(p.name) and p.is_dir() for p in candidate.iterdir()):
            return candidate
    return None


def _sorted_dirs(path: str | Path, pattern: re.Pattern[str]) -> list[os.DirEntry[str]]:
    with os.scandir(path) as it:
        return sorted((e for e in it if pattern.fullmatch(e.name) and e.is_dir()), key=lambda e: e.name)


def report_paths(files_root: Path) -> Iterator[tuple[str, str, Path]]:
    """``(subject_id, study_id, path)`` of every report file under ``files_root``, sorted."""
    for group in _sorted_dirs(files_root, _GROUP):
        for subject in _sorted_dirs(group.path, _SUBJECT):
            if subject.name[:3] != group.name:
                raise UserError(
                    f"{subject.path}: patient folder {subject.name} belongs under {subject.name[:3]}/, "
                    f"not {group.name}/ (MIMIC-CXR files by the first two digits of the subject id)"
                )
            with os.scandir(subject.path) as it:
                studies = sorted(
                    (e.name, e.path) for e in it if _STUDY_FILE.fullmatch(e.name) and e.is_file()
                )
            for name, path in studies:
                yield subject.name[1:], name[1:9], Path(path)


def read_report(path: Path) -> str:
    """One report file's text; bytes that are not UTF-8 or an empty file are an error."""
    data = path.read_bytes()
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise not_utf8(path, data.count(b"\n", 0, e.start) + 1) from None
    if not text.strip():
        raise UserError(f"{path}: the report is empty")
    return text


def _open_text(path: Path) -> TextIO:
    """A ``.csv`` or, by its suffix, a gzipped ``.csv.gz`` (MIMIC-CXR-JPG ships them gzipped)."""
    if path.suffix == ".gz":
        return gzip.open(path, "rt", encoding="utf-8-sig", errors="surrogateescape", newline="")
    return path.open(encoding="utf-8-sig", errors="surrogateescape", newline="")


def _csv_rows(path: Path, required: Sequence[str]) -> Iterator[tuple[str, dict[str, str]]]:
    """``(file:line, row)`` of a ``.csv`` or ``.csv.gz`` with the ``required`` columns."""
    try:
        with _open_text(path) as f:
            reader = csv.reader(utf8_lines(f, path))
            header = [h.strip() for h in next(reader, [])]
            missing = [c for c in required if c not in header]
            if missing:
                raise UserError(f"{path}:1: no column {', '.join(map(repr, missing))}; is it {path.name}?")
            for record in reader:
                where = f"{path}:{reader.line_num}"
                if not any(cell.strip() for cell in record):
                    continue
                if len(record) != len(header):
                    raise UserError(f"{where}: {len(record)} cells but the header has {len(header)} columns")
                yield where, dict(zip(header, record, strict=True))
    except (gzip.BadGzipFile, EOFError, zlib.error) as e:
        raise UserError(f"{path}: not a readable gzip file ({e})") from None
    except csv.Error as e:
        raise UserError(f"{path}: not readable CSV ({e})") from None


def _study_id(row: Mapping[str, str], fld: str, where: str) -> str:
    value = row[fld].strip()
    if not _ID.fullmatch(value):
        raise UserError(f"{where}: field {fld!r} is {value!r}; expected an 8-digit MIMIC-CXR id")
    return value


def _chexpert_codes(row: Mapping[str, str], where: str) -> dict[str, CodeValue]:
    codes: dict[str, CodeValue] = {}
    for name in CHEXPERT_OBSERVATIONS:
        value = _CHEXPERT_VALUES.get(row[name].strip())
        if value is None:
            raise UserError(f"{where}: field {name!r} is {row[name]!r}; expected 1.0, 0.0, -1.0 or blank")
        if value != "absent":
            codes[name] = value
    return codes


def read_chexpert(path: Path) -> dict[str, tuple[str, dict[str, CodeValue]]]:
    """``mimic-cxr-2.0.0-chexpert.csv``: study id -> (subject id, its non-absent codes)."""
    out: dict[str, tuple[str, dict[str, CodeValue]]] = {}
    lines: dict[str, str] = {}
    for where, row in _csv_rows(path, ("subject_id", "study_id", *CHEXPERT_OBSERVATIONS)):
        study = _study_id(row, "study_id", where)
        if study in out:
            raise UserError(f"{where}: study {study} has a second row (the first is at {lines[study]})")
        lines[study] = where
        out[study] = (_study_id(row, "subject_id", where), _chexpert_codes(row, where))
    return out


def read_split(path: Path) -> dict[str, Split]:
    """``mimic-cxr-2.0.0-split.csv``: study id -> split. The rows are images; two images of one
    study in different splits is an error (the file is not the official one)."""
    out: dict[str, tuple[Split, str]] = {}
    for where, row in _csv_rows(path, ("study_id", "split")):
        study = _study_id(row, "study_id", where)
        split = _SPLIT_VALUES.get(row["split"].strip().lower())
        if split is None:
            raise UserError(f"{where}: field 'split' is {row['split']!r}; expected train, validate or test")
        first = out.setdefault(study, (split, where))
        if first[0] != split:
            raise UserError(f"{where}: study {study} is in {split!r} here but in {first[0]!r} at {first[1]}")
    return {study: split for study, (split, _) in out.items()}


def _beside(folder: Path, root: Path, name: str) -> Path | None:
    for place in dict.fromkeys((folder, root.parent)):
        for candidate in (place / name, place / f"{name}.gz"):
            if candidate.is_file():
                return candidate
    return None


@dataclass(frozen=True)
class MimicCxr:
    """The reports read, the files they came from, and counts worth reporting."""

    reports: tuple[ReportItem, ...]
    files: tuple[Path, ...]
    notes: tuple[str, ...]


def _notes(reports: Sequence[ReportItem], coded: int, codes_rows: int, have: tuple[bool, bool]) -> list[str]:
    notes = [
        f"{sum(not r.findings for r in reports)} reports without FINDINGS",
        f"{sum(not r.impression for r in reports)} without IMPRESSION",
    ]
    if not have[0]:
        notes.append(f"no {CHEXPERT_FILE}: every code absent")
    else:
        notes.append(f"{len(reports) - coded} reports without a CheXpert row (codes absent)")
        notes.append(f"{codes_rows - coded} CheXpert rows without a report file")
    if not have[1]:
        notes.append(f"no {SPLIT_FILE}: splits to be assigned")
    return notes


def _report(
    subject: str,
    study: str,
    path: Path,
    codes: Mapping[str, tuple[str, dict[str, CodeValue]]],
    split: Split | None,
    text: str,
) -> ReportItem:
    entry = codes.get(study)
    if entry is not None and entry[0] != subject:
        raise UserError(f"{path}: the CheXpert row of study {study} names subject {entry[0]}, not {subject}")
    sections = parse_sections(text)
    return ReportItem(
        id=f"s{study}",
        text=sections.text(),
        domain=CHEST,
        findings=sections.findings,
        impression=sections.impression,
        codes={} if entry is None else entry[1],
        split=split,
        source=str(path),
    )


def load_mimic_cxr(
    folder: Path, *, chexpert: Path | None = None, split: Path | None = None, strict: bool = False
) -> MimicCxr:
    """Every report under ``folder`` (which holds ``files/``, or is it), with the CheXpert codes
    and the official split when those CSVs are beside it or given. An unreadable report file is
    left out and named in the notes; with ``strict`` it is an error."""
    root = find_files_root(folder)
    if root is None:
        raise UserError(
            f"{folder}: no MIMIC-CXR report tree (expected files/p10/p10000032/s50414267.txt ...)"
        )
    chexpert = chexpert or _beside(folder, root, CHEXPERT_FILE)
    split = split or _beside(folder, root, SPLIT_FILE)
    for given in (chexpert, split):
        if given is not None and not given.is_file():
            raise UserError(f"{given}: file not found")
    codes = read_chexpert(chexpert) if chexpert else {}
    splits = read_split(split) if split else {}
    reports: list[ReportItem] = []
    unreadable: list[str] = []
    for subject, study, path in report_paths(root):
        try:
            text = read_report(path)
        except (UserError, OSError) as e:
            if strict:
                raise strict_error(e, path) from None
            unreadable.append(problem(e, path, path.relative_to(root).as_posix()))
            continue
        reports.append(_report(subject, study, path, codes, splits.get(study), text))
    if not reports:
        found = f"; {unreadable_note(unreadable)}" if unreadable else ""
        raise UserError(f"{root}: no readable report files (sNNNNNNNN.txt under pNN/pNNNNNNNN/){found}")
    coded = sum(1 for r in reports if r.id[1:] in codes)
    notes = _notes(reports, coded, len(codes), (chexpert is not None, split is not None))
    if unreadable:
        notes.append(unreadable_note(unreadable))
    files = tuple(p for p in (root, chexpert, split) if p is not None)
    return MimicCxr(tuple(reports), files, tuple(notes))
