"""MedEval-shaped data files, the folder a task reads, and the train/validation/test split.

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
  Absent values are not stored (:class:`~.records.ReportItem`: not listed means absent).

Every bad cell is one :class:`~clinieval.errors.UserError` "file:line: field 'x' is 'y'; expected
...", and a repeated id names both lines (a row whose quoted cell spans lines is named by its last
line, as :func:`~clinieval.analysis.table.read_table` counts). A folder of tables holds one
sentence table, one report table (either may be missing, not both) and optionally
``observations.json`` (``{"domain": ["observation", ...]}``: each domain's full code set, so codes
absent everywhere still count) and the synthetic corpus's ``manifest.json``.

:func:`load_folder` is what a task calls: it recognises the folder (tables, a MIMIC-CXR tree, or
Open-i's XML reports), reads it, and gives every item without a split of its own a seeded 7:1:2
one, grouped by source report and de-duplicated so that no text has a copy in another split
(:func:`assign_splits`), recording how, and the leakage a split of the data's own has, in
:attr:`MedEvalData.splits` for the run manifest.
"""

from __future__ import annotations

import hashlib
import json
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias, TypeVar

from clinieval.analysis.table import LongTable, Row, read_table
from clinieval.benchmarks.medeval.items import (
    CHEST,
    CHEXPERT_OBSERVATIONS,
    FOOT_ANKLE_CODES,
    SPLIT_SHARES,
    SPLITS,
    AmbiguityKind,
    CodeValue,
    ReportItem,
    SentenceItem,
    Split,
)
from clinieval.benchmarks.medeval.mimic_cxr import find_files_root, load_mimic_cxr
from clinieval.benchmarks.medeval.openi import find_xml_folder, load_openi
from clinieval.benchmarks.medeval.prompts import SENTENCE_TASKS
from clinieval.benchmarks.medeval.sections import normalize_space, split_sentences
from clinieval.datasets import read_json
from clinieval.errors import UserError, shown

__all__ = [
    "AMBIGUITY_KINDS",
    "FOOT_ANKLE",
    "KNOWN_OBSERVATIONS",
    "MANIFEST_FILE",
    "OBSERVATIONS_FILE",
    "REPORT_STEMS",
    "SENTENCE_STEMS",
    "MedEvalData",
    "SplitInfo",
    "assign_splits",
    "attach_codes",
    "code_value",
    "detect_source",
    "domain_observations",
    "leakage",
    "load_folder",
    "load_reports",
    "load_sentences",
    "load_tables",
    "normalize_domain",
    "read_observations",
    "read_sentences",
    "report_of",
    "report_sentences",
    "split_leakage",
    "text_key",
]

FOOT_ANKLE = "foot/ankle x-ray"
"""The miscellaneous domain whose codes MedEval's Table 1 lists (:data:`~.records.FOOT_ANKLE_CODES`)."""

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
Source: TypeAlias = Literal["medeval", "mimic-cxr", "open-i"]
OBSERVATIONS_FILE = "observations.json"
MANIFEST_FILE = "manifest.json"

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


# ---------------------------------------------------------------------------------- splits

Item = TypeVar("Item", SentenceItem, ReportItem)

_REPORT_SENTENCE = re.compile(r"(?P<report>.+)-[fi]\d+")
"""A sentence id as :func:`report_sentences` makes it: ``<report id>-f1`` (findings), ``-i2``."""
_ENDS = string.punctuation + string.whitespace
_BOILERPLATE_FLOOR = 50
"""A group of more items than this and than a tenth of the data is kept whole only by its text
copies, not by its reports (:func:`assign_splits`)."""


def text_key(text: str) -> str:
    """``text`` as duplicates are found: lower case, every run of whitespace one space, punctuation
    stripped at both ends ("No effusion." and "no  effusion" are one sentence)."""
    return normalize_space(text).lower().strip(_ENDS)


def _item_text(item: SentenceItem | ReportItem) -> str:
    return item.sentence if isinstance(item, SentenceItem) else item.text


def report_of(item: SentenceItem | ReportItem, reports: Mapping[str, str] | None = None) -> str | None:
    """The source report of a sentence: its ``report_id`` (or ``report``) cell as ``reports`` maps
    it, else the report prefix of an id :func:`report_sentences` made (``s50414267-f2``); None for
    a report, or a sentence of no known report."""
    if not isinstance(item, SentenceItem):
        return None
    given = (reports or {}).get(item.id)
    if given:
        return given
    m = _REPORT_SENTENCE.fullmatch(item.id)
    return m["report"] if m else None


def leakage(items: Sequence[SentenceItem | ReportItem]) -> dict[str, int]:
    """How many test and validation items have a copy (:func:`text_key`) among the train items."""
    train = {text_key(_item_text(i)) for i in items if i.split == "train"} - {""}
    return {
        f"{split}_in_train": sum(1 for i in items if i.split == split and text_key(_item_text(i)) in train)
        for split in ("test", "validation")
    }


def split_leakage(
    train: Sequence[SentenceItem | ReportItem], test: Sequence[SentenceItem | ReportItem]
) -> int:
    """How many of ``test`` have a copy (:func:`text_key`) in ``train``: what a model card records
    of the very items a baseline was fitted and tested on."""
    seen = {text_key(_item_text(i)) for i in train} - {""}
    return sum(1 for i in test if text_key(_item_text(i)) in seen)


@dataclass(frozen=True)
class SplitInfo:
    """How a set was split, for the run manifest: the seed, the shares, the counts, how many items
    kept their source's split versus how many were assigned here, how many groups the assigned
    ones formed, and the leakage left: test and validation items with a copy in train, and source
    reports whose sentences lie in more than one split."""

    seed: int
    counts: Mapping[Split, int]
    from_data: int
    assigned: int
    shares: tuple[int, int, int] = SPLIT_SHARES
    groups: int = 0
    duplicates: Mapping[str, int] = field(
        default_factory=lambda: {"test_in_train": 0, "validation_in_train": 0}
    )
    reports_across_splits: int = 0

    @property
    def method(self) -> str:
        if not self.assigned:
            return "from the data"
        grouped = "grouped by report and de-duplicated, seeded 7:1:2"
        return grouped if not self.from_data else f"from the data, the rest {grouped}"

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "seed": self.seed,
            "shares": dict(zip(SPLITS, self.shares, strict=True)),
            "counts": {s: self.counts.get(s, 0) for s in SPLITS},
            "from_data": self.from_data,
            "assigned": self.assigned,
            "groups": self.groups,
            "duplicates_across_splits": dict(self.duplicates),
            "reports_across_splits": self.reports_across_splits,
        }

    def describe(self) -> str:
        counts = ", ".join(f"{s} {self.counts.get(s, 0)}" for s in SPLITS)
        test, val = self.duplicates.get("test_in_train", 0), self.duplicates.get("validation_in_train", 0)
        line = f"split {self.method} (seed {self.seed}): {counts}; "
        line += f"{test} test and {val} validation items have a copy in train"
        if self.reports_across_splits:
            line += f"; {self.reports_across_splits} reports have sentences in more than one split"
        return line


def _rank_key(seed: int, item_id: str) -> str:
    return hashlib.sha256(f"medeval-split:{seed}:{item_id}".encode()).hexdigest()


def _cuts(n: int) -> tuple[int, int]:
    """Where train ends and validation ends among ``n`` ranked items (rounded half up, 7:1:2)."""
    total = sum(SPLIT_SHARES)
    train = (2 * n * SPLIT_SHARES[0] + total) // (2 * total)
    val = (2 * n * (SPLIT_SHARES[0] + SPLIT_SHARES[1]) + total) // (2 * total)
    return train, val


def _components(keys: Sequence[Sequence[str]]) -> list[list[int]]:
    """The indices of ``keys`` joined when they share a key (union-find), each list ascending."""
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, own in enumerate(keys):
        for key in own:
            a, b = find(first.setdefault(key, i)), find(i)
            if a != b:
                parent[max(a, b)] = min(a, b)
    out: dict[int, list[int]] = {}
    for i in range(len(keys)):
        out.setdefault(find(i), []).append(i)
    return list(out.values())


def _groups(items: Sequence[Item], reports: Mapping[str, str] | None) -> list[list[int]]:
    """Items joined by source report and by every copy of their text; a group grown past a tenth
    of the items (and :data:`_BOILERPLATE_FLOOR`) through sentences that many reports share is cut
    back to its text copies, so that boilerplate cannot pull most of the data into one split."""
    texts: list[list[str]] = []
    joined: list[list[str]] = []
    for item in items:
        key, report = text_key(_item_text(item)), report_of(item, reports)
        texts.append([f"text:{key}"] if key else [])
        joined.append(texts[-1] + ([f"report:{report}"] if report is not None else []))
    cap = max(_BOILERPLATE_FLOOR, len(items) // 10)
    out: list[list[int]] = []
    for group in _components(joined):
        if len(group) <= cap:
            out.append(group)
            continue
        out += [[group[j] for j in sub] for sub in _components([texts[i] for i in group])]
    return out


def _draw(seed: int, key: str) -> float:
    """A number in [0, 1) fixed by the seed and a group's first id."""
    return int(_rank_key(seed, key)[:13], 16) / 16**13


def _place(sizes: Sequence[tuple[int, str]], seed: int) -> list[Split]:
    """A split for each group ``(size, first id)``, filling 7:1:2 of their items: largest groups
    first (then in seeded hash order), each drawn among the splits it still fits in, weighted by
    the room left there (into the emptiest split when it fits nowhere)."""
    train, val = _cuts(sum(n for n, _ in sizes))
    room = {"train": train, "validation": val - train, "test": sum(n for n, _ in sizes) - val}
    order = sorted(range(len(sizes)), key=lambda g: (-sizes[g][0], _rank_key(seed, sizes[g][1]), sizes[g][1]))
    out: list[Split] = ["train"] * len(sizes)
    for g in order:
        size, key = sizes[g]
        fits = [s for s in SPLITS if room[s] >= size]
        if fits:
            point = _draw(seed, key) * sum(room[s] for s in fits)
            chosen = fits[-1]
            for s in fits:
                if point < room[s]:
                    chosen = s
                    break
                point -= room[s]
        else:
            chosen = max(SPLITS, key=lambda s: room[s])
        room[chosen] -= size
        out[g] = chosen
    return out


def _reports_across(items: Sequence[Item], reports: Mapping[str, str] | None) -> int:
    seen: dict[str, set[Split | None]] = {}
    for item in items:
        report = report_of(item, reports)
        if report is not None:
            seen.setdefault(report, set()).add(item.split)
    return sum(1 for splits in seen.values() if len(splits) > 1)


def assign_splits(
    items: Sequence[Item], seed: int, *, reports: Mapping[str, str] | None = None
) -> tuple[list[Item], SplitInfo]:
    """``items`` (same order) each with a split, and how they were split.

    An item keeps its source's split (the user's split is theirs; its leakage is counted in the
    :class:`SplitInfo`). The others are split by group: the sentences of one source report
    (:func:`report_of`; ``reports`` maps sentence ids to a ``report_id`` column) and every copy of
    one text (:func:`text_key`) are one group, joined transitively, and a group goes to one split.
    A group that holds an item with a split of its own follows it (the most common one). The
    other groups fill 7:1:2 as closely as their sizes allow (:func:`_place`): the result depends
    on the ids, texts and seed only, not on the input order, and another seed gives another split.
    Ids must be unique.
    """
    dup = next((k for k, n in Counter(i.id for i in items).items() if n > 1), None)
    if dup is not None:
        raise UserError(f"id {dup!r} appears twice; a split needs unique ids")
    given: dict[int, Split] = {}
    free: list[list[int]] = []
    for group in _groups(items, reports):
        own = Counter(s for i in group if (s := items[i].split) is not None)
        if not own:
            free.append(group)
            continue
        follow = max(SPLITS, key=lambda s: (own[s], -SPLITS.index(s)))
        given.update({i: follow for i in group if items[i].split is None})
    sizes = [(len(g), min(items[i].id for i in g)) for g in free]
    for group, split in zip(free, _place(sizes, seed), strict=True):
        given.update(dict.fromkeys(group, split))
    out = [item if item.split is not None else replace(item, split=given[n]) for n, item in enumerate(items)]
    counts = Counter(i.split for i in out if i.split is not None)
    todo = sum(1 for i in items if i.split is None)
    info = SplitInfo(
        seed,
        {s: counts.get(s, 0) for s in SPLITS},
        len(items) - todo,
        todo,
        groups=len(free),
        duplicates=leakage(out),
        reports_across_splits=_reports_across(out, reports),
    )
    return out, info


# ---------------------------------------------------------------------------- the folder


@dataclass(frozen=True)
class MedEvalData:
    """What a task reads: sentences, reports, each domain's code set, where they came from, and
    how they were split."""

    source: Source
    sentences: tuple[SentenceItem, ...]
    reports: tuple[ReportItem, ...]
    observations: Mapping[str, tuple[str, ...]]
    files: tuple[Path, ...]
    synthetic: bool = False
    """True for :mod:`.synth`'s corpus: results on it say nothing about clinical ability."""
    notes: tuple[str, ...] = ()
    """Counts worth reporting (reports without an impression, without codes, skipped files)."""
    splits: Mapping[str, SplitInfo] = field(default_factory=dict)
    """``sentences`` / ``reports`` -> how that level was split (set by :func:`load_folder`)."""
    sentence_reports: Mapping[str, str] = field(default_factory=dict)
    """Sentence id -> its source report, where the sentence table names one (:func:`read_sentences`)."""

    def items_for(self, task: str) -> tuple[SentenceItem | ReportItem, ...]:
        """The items of ``task``'s level: sentences for the sentence tasks, reports otherwise."""
        return self.sentences if task in SENTENCE_TASKS else self.reports

    def split_info(self) -> dict[str, Any]:
        """The split of each level, as the run manifest records it."""
        return {level: info.to_json() for level, info in self.splits.items()}

    def describe(self) -> str:
        """One line for the console and the run manifest."""
        kind = "synthetic corpus (not MedEval's data)" if self.synthetic else self.source
        line = f"{kind}: {len(self.sentences)} sentences, {len(self.reports)} reports"
        parts = [f"{line} in {len(self.observations)} coded domains", *self.notes]
        parts += [f"{level} {info.describe()}" for level, info in self.splits.items()]
        return "; ".join(parts)


def _one_file(folder: Path, stems: Sequence[str]) -> Path | None:
    found = [folder / f"{stem}{suffix}" for stem in stems for suffix in SUFFIXES]
    found = [p for p in found if p.is_file()]
    if len(found) > 1:
        raise UserError(f"{folder}: {found[0].name} and {found[1].name} are both there; keep one")
    return found[0] if found else None


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


def _is_synthetic(folder: Path, files: Sequence[Path]) -> bool:
    if any(p.name.startswith("synthetic-") for p in files):
        return True
    manifest = folder / MANIFEST_FILE
    data = read_json(manifest) if manifest.is_file() else None
    return isinstance(data, dict) and data.get("synthetic") is True


def load_tables(folder: Path) -> MedEvalData:
    """A folder of MedEval-shaped tables (module docstring), as :mod:`.synth` writes one; the
    splits are as the tables give them."""
    sent_file, rep_file = _one_file(folder, SENTENCE_STEMS), _one_file(folder, REPORT_STEMS)
    if sent_file is None and rep_file is None:
        names = ", ".join(f"{s}{x}" for s in ("sentences", "reports") for x in SUFFIXES)
        raise UserError(
            f"{folder}: no sentence or report table (expected one of {names}), "
            "no MIMIC-CXR files/ tree and no Open-i XML reports"
        )
    files = [p for p in (sent_file, rep_file) if p is not None]
    reports = load_reports(rep_file) if rep_file else []
    sentences, sentence_reports = read_sentences(sent_file) if sent_file else ([], {})
    declared: dict[str, tuple[str, ...]] = {}
    if (folder / OBSERVATIONS_FILE).is_file():
        declared = read_observations(folder / OBSERVATIONS_FILE)
        files.append(folder / OBSERVATIONS_FILE)
    return MedEvalData(
        source="medeval",
        sentences=tuple(sentences),
        reports=tuple(reports),
        observations=domain_observations(reports, declared),
        files=tuple(files),
        synthetic=_is_synthetic(folder, files),
        sentence_reports=sentence_reports,
    )


def detect_source(folder: Path) -> Source:
    """Which kind of folder this is: MIMIC-CXR's ``files/pNN`` tree, Open-i's XML reports, or
    MedEval-shaped tables (the default, whose loader says what it expected)."""
    if find_files_root(folder) is not None:
        return "mimic-cxr"
    if find_xml_folder(folder) is not None:
        return "open-i"
    return "medeval"


def _read_source(folder: Path, strict: bool) -> MedEvalData:
    kind = detect_source(folder)
    if kind == "mimic-cxr":
        mimic = load_mimic_cxr(folder, strict=strict)
        return MedEvalData(kind, (), mimic.reports, {}, mimic.files, notes=mimic.notes)
    if kind == "open-i":
        openi = load_openi(folder, strict=strict)
        reports = tuple(r.report for r in openi.reports)
        return MedEvalData(kind, (), reports, {}, openi.files, notes=openi.notes)
    return load_tables(folder)


def load_folder(
    folder: Path, *, seed: int = 0, labels: Path | None = None, strict: bool = False
) -> MedEvalData:
    """Whatever ``folder`` holds (:func:`detect_source`), split: the entry point of the tasks.

    ``labels`` (a table of ``id`` and codes, :func:`attach_codes`) gives codes to reports that have
    none of their own (Open-i). Items without a split of their own get a seeded 7:1:2 one grouped
    by source report and de-duplicated (:func:`assign_splits`), each level separately;
    :meth:`MedEvalData.split_info` says how, and how many test items have a copy in train. An
    Open-i or MIMIC-CXR report file that cannot be read is left out and named in the notes, or,
    with ``strict``, is an error.
    """
    if not folder.is_dir():
        raise UserError(f"{folder}: not a folder")
    data = _read_source(folder, strict)
    reports = attach_codes(data.reports, labels) if labels is not None else list(data.reports)
    declared = {d: n for d, n in data.observations.items() if n}
    sentences, sentence_split = assign_splits(data.sentences, seed, reports=data.sentence_reports)
    reports, report_split = assign_splits(reports, seed)
    return replace(
        data,
        sentences=tuple(sentences),
        reports=tuple(reports),
        observations=domain_observations(reports, declared),
        files=data.files if labels is None else (*data.files, labels),
        splits={"sentences": sentence_split, "reports": report_split},
    )


def report_sentences(
    report: ReportItem, sections: Sequence[str] = ("findings", "impression")
) -> list[SentenceItem]:
    """The sentences of a report's sections, unlabelled, for the sentence tasks over reports that
    come without sentence labels. Ids are ``<report id>-f1`` (findings), ``-i1`` (impression) ...;
    each sentence keeps its report's split, so no report's sentences straddle train and test."""
    out: list[SentenceItem] = []
    for section in sections:
        text = {"findings": report.findings, "impression": report.impression}.get(section)
        if text is None:
            raise ValueError(f"unknown section {section!r}; choose findings or impression")
        for n, sentence in enumerate(split_sentences(text), 1):
            sid = f"{report.id}-{section[0]}{n}"
            out.append(SentenceItem(sid, sentence, report.domain, split=report.split, source=report.source))
    return out
