"""Open-i's chest X-ray reports (Indiana University, ``ecgen-radiology``), read into reports.

MedEval's chest reports come partly from Open-i. Its download is a folder of XML files, one per
report (``ecgen-radiology/1.xml``): an ``<eCitation>`` whose ``<uId id="CXR1"/>`` names the report
and whose ``MedlineCitation/Article/Abstract`` holds ``<AbstractText Label="COMPARISON">``,
``INDICATION``, ``FINDINGS`` and ``IMPRESSION`` (often empty), with MeSH terms under
``<MeSH><major>`` and ``<automatic>``. Open-i has no CheXpert codes: reports come without codes
(all absent) unless a labels table is attached (:func:`~.tables.attach_codes`).

The files are parsed with the standard library's expat, refusing any DOCTYPE or ENTITY
declaration: Open-i's files have none, and a declared entity is how XML makes a small file expand
into gigabytes or pull in a local file. A report without any FINDINGS or IMPRESSION text is left
out and counted (nothing to classify or summarize).

One bad file does not stop the load. Hidden files (a name starting with ``.``, such as the
``._1.xml`` AppleDouble files macOS leaves beside copied files) are skipped and counted; a report
that cannot be read (a byte that is not UTF-8, malformed XML, another root element, a declared
entity, a read error) is left out and named in the notes (:func:`unreadable_note`), or, with
``strict``, is the one error of the load.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn
from xml.parsers import expat

from clinieval.benchmarks.medeval.items import CHEST, ReportItem
from clinieval.benchmarks.medeval.sections import normalize_space
from clinieval.errors import UserError

__all__ = [
    "SECTION_ORDER",
    "OpenI",
    "OpenIReport",
    "find_xml_folder",
    "load_openi",
    "parse_xml",
    "problem",
    "read_openi_xml",
    "strict_error",
    "unreadable_note",
]

SECTION_ORDER = ("COMPARISON", "INDICATION", "FINDINGS", "IMPRESSION")
"""The order of the sections in a report's text (others, if any, follow in file order)."""

XML_FOLDER = "ecgen-radiology"
_NUMBER = re.compile(r"(\d+)")
NAMED = 3
"""How many skipped or unreadable files a note names before "and N more"."""


def _some(names: Sequence[str]) -> str:
    more = len(names) - NAMED
    return ", ".join(names[:NAMED]) + (f", and {more} more" if more > 0 else "")


def unreadable_note(problems: Sequence[str], what: str = "report") -> str:
    """One load note for the files that could not be read: how many, and the first few, each as
    ``name: what was wrong`` (``10.xml:4: malformed XML (...)``)."""
    return f"{len(problems)} unreadable {what}{'' if len(problems) == 1 else 's'} left out: {_some(problems)}"


def strict_error(error: UserError | OSError, path: Path) -> UserError:
    """The error a strict load stops with: the file, what was wrong with it, and what --strict did."""
    what = (
        str(error) if isinstance(error, UserError) else f"{path}: cannot be read ({error.strerror or error})"
    )
    return UserError(f"{what}; --strict stops at an unreadable report (without it, it is left out and named)")


def problem(error: UserError | OSError, path: Path, name: str) -> str:
    """``error`` for a note: the file's short ``name``, then what was wrong."""
    if isinstance(error, OSError):
        return f"{name}: cannot be read ({error.strerror or error})"
    text = str(error)
    return name + text.removeprefix(str(path)) if text.startswith(str(path)) else f"{name}: {text}"


def parse_xml(data: bytes, where: str) -> ET.Element:
    """``data`` as an element tree, refusing DOCTYPE and ENTITY declarations (module docstring)."""
    parser = expat.ParserCreate()
    parser.buffer_text = True
    builder = ET.TreeBuilder()

    def refuse(*_: object) -> NoReturn:
        raise UserError(
            f"{where}: the XML declares a DOCTYPE or an entity; Open-i reports have none, refusing it"
        )

    def start(tag: str, attrib: dict[str, str]) -> None:
        builder.start(tag, attrib)

    parser.StartDoctypeDeclHandler = refuse
    parser.EntityDeclHandler = refuse
    parser.StartElementHandler = start
    parser.EndElementHandler = builder.end
    parser.CharacterDataHandler = builder.data
    try:
        parser.Parse(data, True)
    except expat.ExpatError as e:
        msg = expat.ErrorString(e.code) if e.code else str(e)
        raise UserError(f"{where}:{e.lineno}: malformed XML ({msg})") from None
    except LookupError as e:  # an encoding that Python does not know, named by the XML declaration
        raise UserError(f"{where}:1: the XML declaration names an {e}") from None
    return builder.close()


@dataclass(frozen=True, slots=True)
class OpenIReport:
    """One Open-i report and its MeSH terms (kept for analysis; MedEval's codes are not MeSH)."""

    report: ReportItem
    mesh_major: tuple[str, ...] = ()
    mesh_automatic: tuple[str, ...] = ()


def _sections(root: ET.Element) -> list[tuple[str, str]]:
    found: list[tuple[str, str]] = []
    for node in root.iter("AbstractText"):
        label = normalize_space(node.get("Label", "")).upper()
        text = normalize_space("".join(node.itertext()))
        if label and text:
            found.append((label, text))
    order = {name: i for i, name in enumerate(SECTION_ORDER)}
    return sorted(found, key=lambda p: order.get(p[0], len(order)))


def _terms(root: ET.Element, tag: str) -> tuple[str, ...]:
    return tuple(t for node in root.iter(tag) if (t := normalize_space("".join(node.itertext()))))


def read_openi_xml(path: Path) -> OpenIReport:
    """One ``ecgen-radiology`` XML file; its id is ``<uId id>``, else the file name."""
    root = parse_xml(path.read_bytes(), str(path))
    if root.tag != "eCitation":
        raise UserError(f"{path}: the root element is <{root.tag}>, not <eCitation>; is it an Open-i report?")
    uid = root.find("uId")
    rid = normalize_space(uid.get("id", "")) if uid is not None else ""
    sections = _sections(root)
    named = dict(sections)
    report = ReportItem(
        id=rid or path.stem,
        text="\n".join(f"{name}: {text}" for name, text in sections),
        domain=CHEST,
        findings=named.get("FINDINGS", ""),
        impression=named.get("IMPRESSION", ""),
        source=str(path),
    )
    return OpenIReport(report, _terms(root, "major"), _terms(root, "automatic"))


def _is_xml(path: Path) -> bool:
    return path.suffix.lower() == ".xml"


def find_xml_folder(folder: Path) -> Path | None:
    """The folder holding Open-i's XML files: ``folder/ecgen-radiology`` or ``folder`` itself
    (hidden files do not count)."""
    for candidate in (folder / XML_FOLDER, folder):
        if candidate.is_dir() and any(_is_xml(p) and not p.name.startswith(".") for p in candidate.iterdir()):
            return candidate
    return None


@dataclass(frozen=True)
class OpenI:
    """The reports read (in file-number order), the folder, and what was left out."""

    reports: tuple[OpenIReport, ...]
    files: tuple[Path, ...]
    notes: tuple[str, ...]


def _natural(path: Path) -> tuple[object, ...]:
    """``2.xml`` before ``10.xml``."""
    return tuple(int(p) if p.isdigit() else p for p in _NUMBER.split(path.name))


def load_openi(folder: Path, *, strict: bool = False) -> OpenI:
    """Every Open-i report under ``folder``; a repeated id is an error naming both files. Hidden
    files are skipped and an unreadable report left out, both counted in the notes; with
    ``strict`` an unreadable report is an error (module docstring)."""
    xml_folder = find_xml_folder(folder)
    if xml_folder is None:
        raise UserError(f"{folder}: no Open-i XML reports (expected {XML_FOLDER}/1.xml ...)")
    found = sorted((p for p in xml_folder.iterdir() if _is_xml(p) and p.is_file()), key=_natural)
    hidden = [p.name for p in found if p.name.startswith(".")]
    kept: list[OpenIReport] = []
    seen: dict[str, Path] = {}
    empty = 0
    unreadable: list[str] = []
    for path in (p for p in found if not p.name.startswith(".")):
        try:
            item = read_openi_xml(path)
        except (UserError, OSError) as e:
            if strict:
                raise strict_error(e, path) from None
            unreadable.append(problem(e, path, path.name))
            continue
        first = seen.setdefault(item.report.id, path)
        if first != path:
            raise UserError(f"{path}: report id {item.report.id!r} is also the id of {first}")
        if item.report.findings or item.report.impression:
            kept.append(item)
        else:
            empty += 1
    notes = [
        f"{empty} reports without FINDINGS or IMPRESSION text left out",
        f"{sum(not r.report.findings for r in kept)} without FINDINGS",
        f"{sum(not r.report.impression for r in kept)} without IMPRESSION",
    ]
    if hidden:
        notes.append(f"{len(hidden)} hidden file{'' if len(hidden) == 1 else 's'} skipped ({_some(hidden)})")
    if unreadable:
        notes.append(unreadable_note(unreadable))
    return OpenI(tuple(kept), (xml_folder,), tuple(notes))
