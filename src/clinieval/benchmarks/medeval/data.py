"""The folder a MedEval task reads: which kind it is, what it holds, and how it was split.

:func:`load_folder` is what a task calls: it recognises the folder (MedEval-shaped tables,
:mod:`.tables`; a MIMIC-CXR tree, :mod:`.mimic_cxr`; or Open-i's XML reports, :mod:`.openi`), reads
it, and gives every item without a split of its own a seeded 7:1:2 one, grouped by source report
and de-duplicated so that no text has a copy in another split (:func:`~.splits.assign_splits`),
recording how, and the leakage a split of the data's own has, in :attr:`MedEvalData.splits` for the
run manifest. A folder of tables holds one sentence table, one report table (either may be
missing, not both) and optionally ``observations.json`` (each domain's full code set) and the
synthetic corpus's ``manifest.json``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, TypeAlias

from clinieval.benchmarks.medeval.items import ReportItem, SentenceItem
from clinieval.benchmarks.medeval.mimic_cxr import find_files_root, load_mimic_cxr
from clinieval.benchmarks.medeval.openi import find_xml_folder, load_openi
from clinieval.benchmarks.medeval.sections import split_sentences
from clinieval.benchmarks.medeval.splits import SplitInfo, assign_splits
from clinieval.benchmarks.medeval.tables import (
    REPORT_STEMS,
    SENTENCE_STEMS,
    SUFFIXES,
    attach_codes,
    domain_observations,
    load_reports,
    load_sentences,
    read_observations,
    read_sentences,
)
from clinieval.benchmarks.medeval.task_table import task_entry
from clinieval.datasets import read_json
from clinieval.errors import UserError

__all__ = [
    "MANIFEST_FILE",
    "OBSERVATIONS_FILE",
    "MedEvalData",
    "detect_source",
    "load_folder",
    "load_reports",
    "load_sentences",
    "load_tables",
    "report_sentences",
]

Source: TypeAlias = Literal["medeval", "mimic-cxr", "open-i"]
OBSERVATIONS_FILE = "observations.json"
MANIFEST_FILE = "manifest.json"


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
        return self.sentences if task_entry(task).level == "sentence" else self.reports

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

    ``labels`` (a table of ``id`` and codes, :func:`~.tables.attach_codes`) gives codes to reports that have
    none of their own (Open-i). Items without a split of their own get a seeded 7:1:2 one grouped
    by source report and de-duplicated (:func:`~.splits.assign_splits`), each level separately;
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
