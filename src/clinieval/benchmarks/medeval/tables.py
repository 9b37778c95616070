"""Reading MedEval-shaped tables: radiology sentences, reports and their codes, cell by cell.

MedEval's own data is not public, so a user brings radiology sentences and reports of the same
shape (or MIMIC-CXR, :mod:`.mimic_cxr`, or Open-i, :mod:`.openi`; or the synthetic corpus,
:mod:`.synth`). Two tables, each CSV, TSV or JSON Lines (read with
:func:`clinieval.analysis.table.read_table`, so every row keeps its ``file:line``):

* **sentences**: ``id``, ``sentence``, ``domain`` (body part x modality, "chest x-ray"), and
  optionally ``abnormal`` (normal/abnormal, 0/1, true/false), ``ambiguous`` (unambiguous/ambiguous,
  0/1, true/false), ``rewrite`` (an ambiguous sentence's faithful rewrite), ``ambiguity_kind``
  (jargon/contradiction/grammar), ``split`` (train/validation/test) and ``report_id`` (or
  ``report``: the source report, which keeps a report's sentences in one split). An empty cell is
  "unlabelled"; other columns are ignored.
* **reports**: ``id``, ``report`` (or ``text``), ``domain``, optionally ``findings``,
  ``impression`` and ``split``, and the codes: either a ``codes`` column holding a JSON object
  (``{"Edema": "positive"}``) or one column per observation; then *every other column* is an
  observation. Values are positive/negative/unknown/absent or CheXpert's 1.0/0.0/-1.0/blank.
  Absent values are not stored (:class:`~.items.ReportItem`: not listed means absent).

Every bad cell is one :class:`~clinieval.errors.UserError` "file:line: field 'x' is 'y'; expected
...", and a repeated id names both lines (a row whose quoted cell spans lines is named by its last
line, as :func:`~clinieval.analysis.table.read_table` counts). ``observations.json``
(``{"domain": ["observation", ...]}``) declares each domain's full code set, so codes absent
everywhere still count. Finding the tables in a folder, and splitting what they hold, is
:mod:`.data`'s and :mod:`.splits`' work.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path

from clinieval.analysis.table import LongTable, Row, read_table
from clinieval.benchmarks.medeval.items import (
    CHEST,
    CHEXPERT_OBSERVATIONS,
    FOOT_ANKLE_CODES,
    SPLITS,
    AmbiguityKind,
    CodeValue,
    ReportItem,
    SentenceItem,
    Split,
)
from clinieval.benchmarks.medeval.sections import normalize_space
from clinieval.datasets import read_json
from clinieval.errors import UserError, shown

FOOT_ANKLE = "foot/ankle x-ray"
"""The miscellaneous domain whose codes MedEval's Table 1 lists (:data:`~.items.FOOT_ANKLE_CODES`)."""

KNOWN_OBSERVATIONS: Mapping[str, tuple[str, ...]] = {
    CHEST: CHEXPERT_OBSERVATIONS,
    FOOT_ANKLE: FOOT_ANKLE_CODES,
}
"""The code sets the paper fixes. A code of these domains must be one of them (any letter case);
other domains take the observations their data names."""

SENTENCE_STEMS = ("sentences", "synthetic-sentences")
REPORT_STEMS = ("reports", "synthetic-reports")
"""File names (before ``.csv``, ``.tsv`` or ``.jsonl``) :func:`load_folder` looks for; the
``synthetic-`` ones are what :mod:`.synth` writes, so a synthetic file never passes for real data."""

SUFFIXES = (".csv", ".tsv", ".jsonl")

REPORT_COLUMNS = frozenset({"id", "report", "text", "domain", "findings", "impression", "split", "codes"})
"""Report columns that are not observations."""

_CODE_TEXT: Mapping[str, CodeValue] = {
    "positive": "positive",
    "negative": "negative",
    "unknown": "unknown",
    "absent": "absent",
    "uncertain": "unknown",
    "1": "positive",
    "1.0": "positive",
    "0": "negative",
    "0.0": "negative",
    "-1": "unknown",
    "-1.0": "unknown",
    "": "absent",
}
AMBIGUITY_KINDS: tuple[AmbiguityKind, ...] = ("jargon", "contradiction", "grammar")

_CODE_EXPECTED = "positive, negative, unknown, absent, 1.0, 0.0, -1.0 or blank"


def _shown(value: object) -> str:
    """A cell for an error message: quoted, escaped, at most 60 characters."""
    text = str(value)
    return repr(text if len(text) <= 60 else text[:57] + "...")


def normalize_domain(text: str) -> str:
    """A domain as written by users ("Chest X-Ray", "chest xray") in one form ("chest x-ray")."""
    out = normalize_space(text).lower()
    for variant in ("x ray", "xray"):
        out = out.replace(variant, "x-ray")
    return out


def code_value(raw: object, where: str, fld: str) -> CodeValue:
    """One observation's value as read from a cell or a JSON value; anything else is an error."""
    if raw is None:
        return "absent"
    if isinstance(raw, int | float) and not isinstance(raw, bool) and raw in (1, 0, -1):
        return _CODE_TEXT[str(int(raw))]
    if isinstance(raw, str) and raw.strip().lower() in _CODE_TEXT:
        return _CODE_TEXT[raw.strip().lower()]
    raise UserError(f"{where}: field {fld!r} is {_shown(raw)}; expected {_CODE_EXPECTED}")


def _observation(name: str, domain: str, where: str, fld: str) -> str:
    """``name`` as its domain spells it: the known code set's name for chest and foot/ankle."""
    text = normalize_space(name)
    known = KNOWN_OBSERVATIONS.get(domain)
    if known is None:
        if not text:
            raise UserError(f"{where}: field {fld!r} names an empty observation")
        return text
    for canonical in known:
        if canonical.lower() == text.lower():
            return canonical
    raise UserError(
        f"{where}: field {fld!r} names observation {_shown(name)}, which is not one of the {len(known)} "
        f"{domain} codes ({', '.join(known)})"
    )


def _codes_json(raw: object, domain: str, where: str) -> dict[str, CodeValue]:
    """A ``codes`` cell: a JSON object (or its text in a CSV) of observation -> value."""
    value = raw
    if isinstance(raw, str):
        try:
            value = json.loads(raw) if raw.strip() else {}
        except (ValueError, RecursionError):
            value = None
    if not isinstance(value, dict):
        raise UserError(
            f'{where}: field \'codes\' is {_shown(raw)}; expected a JSON object like {{"Edema": "positive"}}'
        )
    out: dict[str, CodeValue] = {}
    for name, cell in value.items():
        code = code_value(cell, where, f"codes.{name}")
        if code != "absent":
            out[_observation(str(name), domain, where, f"codes.{name}")] = code
    return out


def _codes_columns(row: Row, columns: Sequence[str], domain: str) -> dict[str, CodeValue]:
    """The codes of a table with one column per observation (blank cells are absent)."""
    out: dict[str, CodeValue] = {}
    for col in columns:
        code = code_value(row.cells.get(col), row.where, col)
        if code != "absent":
            out[_observation(col, domain, row.where, col)] = code
    return out


# ---------------------------------------------------------------------------------- cells


def _text(row: Row, col: str, *, required: bool = False) -> str:
    """A text cell, unwrapped ("" when empty or missing, an error when ``required``)."""
    raw = row.cells.get(col)
    if raw is not None and not isinstance(raw, str | int | float):
        raise UserError(f"{row.where}: field {col!r} is {_shown(raw)}; expected text")
    text = "" if raw is None else str(raw).strip()
    if required and not text:
        raise UserError(f"{row.where}: field {col!r} is empty; expected text")
    return text


def _flag(row: Row, col: str, words: tuple[str, str]) -> bool | None:
    """A yes/no label: ``words`` (no-word, yes-word), 0/1 or true/false; empty is unlabelled."""
    raw = row.cells.get(col)
    if raw is None or isinstance(raw, bool):
        return raw
    text = str(raw).strip().lower()
    if text in (words[1], "1", "1.0", "true", "yes"):
        return True
    if text in (words[0], "0", "0.0", "false", "no"):
        return False
    if text == "":
        return None
    raise UserError(
        f"{row.where}: field {col!r} is {_shown(raw)}; expected {words[0]}/{words[1]}, 0/1 or true/false "
        "(or empty when unlabelled)"
    )


def _split(row: Row) -> Split | None:
    text = _text(row, "split").lower()
    if not text:
        return None
    if text == "validate":  # MIMIC-CXR's word
        return "validation"
    for split in SPLITS:
        if text == split:
            return split
    raise UserError(
        f"{row.where}: field 'split' is {_shown(row.cells['split'])}; expected train, validation or test"
    )


def _kind(row: Row, ambiguous: bool | None) -> AmbiguityKind | None:
    text = _text(row, "ambiguity_kind").lower()
    if not text:
        return None
    for kind in AMBIGUITY_KINDS:
        if text == kind:
            if ambiguous is not True:
                msg = f"field 'ambiguity_kind' is {_shown(text)} but the sentence is not marked ambiguous"
                raise UserError(f"{row.where}: {msg}")
            return kind
    raise UserError(
        f"{row.where}: field 'ambiguity_kind' is {_shown(row.cells['ambiguity_kind'])}; "
        "expected jargon, contradiction or grammar"
    )


def _unique(row: Row, item_id: str, seen: dict[str, str]) -> None:
    """Remember ``item_id``; a repeat names both places (splits and results are keyed by id)."""
    first = seen.setdefault(item_id, row.where)
    if first != row.where:
        raise UserError(
            f"{row.where}: field 'id' is {_shown(item_id)}, which {first} already uses; ids must be unique"
        )


# ----------------------------------------------------------------------------- the tables


def _sentence(row: Row) -> SentenceItem:
    ambiguous = _flag(row, "ambiguous", ("unambiguous", "ambiguous"))
    rewrite = _text(row, "rewrite") or None
    if rewrite is not None and ambiguous is not True:
        raise UserError(f"{row.where}: field 'rewrite' is given but the sentence is not marked ambiguous")
    return SentenceItem(
        id=_text(row, "id", required=True),
        sentence=normalize_space(_text(row, "sentence", required=True)),
        domain=normalize_domain(_text(row, "domain", required=True)),
        abnormal=_flag(row, "abnormal", ("normal", "abnormal")),
        ambiguous=ambiguous,
        rewrite=None if rewrite is None else normalize_space(rewrite),
        ambiguity_kind=_kind(row, ambiguous),
        split=_split(row),
        source=row.where,
    )


def read_sentences(path: Path) -> tuple[list[SentenceItem], dict[str, str]]:
    """The sentences of a MedEval-shaped table (module docstring), in file order, and each one's
    source report where the table names it (a ``report_id`` column, else ``report``; an empty
    cell names none), for :func:`assign_splits` to keep a report's sentences in one split."""
    table = read_table(path)
    table.require("id", "sentence", "domain")
    column = next((c for c in ("report_id", "report") if c in table.columns), None)
    seen: dict[str, str] = {}
    out: list[SentenceItem] = []
    reports: dict[str, str] = {}
    for row in table.rows:
        item = _sentence(row)
        _unique(row, item.id, seen)
        out.append(item)
        if column is not None and (report := _text(row, column)):
            reports[item.id] = report
    return out, reports


def load_sentences(path: Path) -> list[SentenceItem]:
    """The sentences of a MedEval-shaped table (module docstring), in file order."""
    return read_sentences(path)[0]


def _code_columns(table: LongTable) -> tuple[str, ...]:
    """The observation columns of a report table; a ``codes`` column excludes them."""
    columns = tuple(c for c in table.columns if c not in REPORT_COLUMNS)
    if "codes" in table.columns and columns:
        raise UserError(
            f"{table.path}: there is a 'codes' column and observation columns "
            f"({', '.join(map(shown, columns))}); give the codes one way"
        )
    return columns


def _report(row: Row, columns: Sequence[str], text_column: str) -> ReportItem:
    domain = normalize_domain(_text(row, "domain", required=True))
    raw_codes = row.cells.get("codes")
    codes = _codes_json(raw_codes, domain, row.where) if raw_codes is not None else None
    return ReportItem(
        id=_text(row, "id", required=True),
        text=_text(row, text_column, required=True),
        domain=domain,
        findings=normalize_space(_text(row, "findings")),
        impression=normalize_space(_text(row, "impression")),
        codes=_codes_columns(row, columns, domain) if codes is None else codes,
        split=_split(row),
        source=row.where,
    )


def load_reports(path: Path) -> list[ReportItem]:
    """The reports of a MedEval-shaped table (module docstring), in file order. The report text
    keeps its line breaks; findings and impression are unwrapped."""
    table = read_table(path)
    table.require("id", "domain")
    text_column = "report" if "report" in table.columns else "text"
    if text_column not in table.columns:
        have = ", ".join(map(repr, table.columns))
        raise UserError(f"{path}: no column 'report' (or 'text') holding the report; the columns are {have}")
    columns = _code_columns(table)
    seen: dict[str, str] = {}
    out: list[ReportItem] = []
    for row in table.rows:
        item = _report(row, columns, text_column)
        _unique(row, item.id, seen)
        out.append(item)
    return out


def attach_codes(reports: Sequence[ReportItem], labels: Path) -> list[ReportItem]:
    """``reports`` with the codes of a labels table (``id`` plus a ``codes`` column or one column
    per observation, as in a report table): how Open-i, which has no codes of its own, gets them.
    A label row for an id that is not among the reports is an error (the wrong file)."""
    table = read_table(labels)
    table.require("id")
    columns = _code_columns(table)
    by_id = {r.id: r for r in reports}
    found: dict[str, Mapping[str, CodeValue]] = {}
    seen: dict[str, str] = {}
    for row in table.rows:
        rid = _text(row, "id", required=True)
        _unique(row, rid, seen)
        if rid not in by_id:
            raise UserError(f"{row.where}: field 'id' is {_shown(rid)}, which is not a report id of the data")
        domain = by_id[rid].domain
        cell = row.cells.get("codes")
        found[rid] = (
            _codes_json(cell, domain, row.where) if cell is not None else _codes_columns(row, columns, domain)
        )
    return [replace(r, codes=found[r.id]) if r.id in found else r for r in reports]


def read_observations(path: Path) -> dict[str, tuple[str, ...]]:
    """``observations.json``: ``{"domain": ["observation", ...]}``."""
    data = read_json(path)
    if not isinstance(data, dict):
        raise UserError(f"{path}: expected a JSON object of domain -> list of observations")
    out: dict[str, tuple[str, ...]] = {}
    for domain, names in data.items():
        if not isinstance(names, list) or not all(isinstance(n, str) and n.strip() for n in names):
            raise UserError(f"{path}: domain {_shown(domain)} should map to a list of observation names")
        key = normalize_domain(domain)
        out[key] = tuple(_observation(n, key, str(path), domain) for n in names)
    return out


def domain_observations(
    reports: Sequence[ReportItem], declared: Mapping[str, Sequence[str]] | None = None
) -> dict[str, tuple[str, ...]]:
    """Each report domain's code set: the declared one, else the paper's (chest, foot/ankle), else
    the observations its reports name in first-seen order; names the data adds come last."""
    out: dict[str, list[str]] = {}
    for report in reports:
        default = (declared or {}).get(report.domain, KNOWN_OBSERVATIONS.get(report.domain, ()))
        names = out.setdefault(report.domain, list(default))
        names.extend(n for n in report.codes if n not in names)
    return {domain: tuple(names) for domain, names in out.items()}
