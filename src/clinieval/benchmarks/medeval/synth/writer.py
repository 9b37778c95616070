"""Writing the synthetic corpus as a MedEval-shaped folder that :func:`~..data.load_folder` reads.

The folder holds ``synthetic-sentences.jsonl`` and ``synthetic-reports.jsonl`` (or ``.csv``), the
tables of :mod:`..tables`; ``observations.json``, each domain's full code set; ``manifest.json``
(format, seed, counts, label balance, ``"synthetic": true``); and a ``README.md`` saying what it
is. The file names, the ids (``synthetic-s000001``), the manifest and the README all say
"synthetic", so the corpus cannot pass for MedEval's data. The folder is built beside its target
and renamed into place (a failure leaves nothing), and the bytes depend only on the corpus.
"""

from __future__ import annotations

import csv
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Literal, TextIO

from clinieval.benchmarks.medeval.data import MANIFEST_FILE, OBSERVATIONS_FILE
from clinieval.benchmarks.medeval.items import ReportItem, SentenceItem
from clinieval.benchmarks.medeval.synth.corpus import NOTE, SyntheticCorpus, build_corpus
from clinieval.errors import UserError
from clinieval.fsutil import staged_dir

__all__ = [
    "FORMAT",
    "README_FILE",
    "REPORT_COLUMNS",
    "SENTENCE_COLUMNS",
    "report_row",
    "sentence_row",
    "write_corpus",
    "write_synthetic",
]

FORMAT = "clinieval-medeval-synthetic/1"
README_FILE = "README.md"
SENTENCE_COLUMNS = ("id", "sentence", "domain", "abnormal", "ambiguous", "ambiguity_kind", "rewrite", "split")
REPORT_COLUMNS = ("id", "domain", "report", "findings", "impression", "codes", "split")

Fmt = Literal["jsonl", "csv"]


def _word(flag: bool | None, words: tuple[str, str]) -> str | None:
    return None if flag is None else words[flag]


def sentence_row(item: SentenceItem) -> dict[str, Any]:
    """A sentence as a table row (labels as words: "abnormal", "ambiguous"; None when unset)."""
    return {
        "id": item.id,
        "sentence": item.sentence,
        "domain": item.domain,
        "abnormal": _word(item.abnormal, ("normal", "abnormal")),
        "ambiguous": _word(item.ambiguous, ("unambiguous", "ambiguous")),
        "ambiguity_kind": item.ambiguity_kind,
        "rewrite": item.rewrite,
        "split": item.split,
    }


def report_row(item: ReportItem) -> dict[str, Any]:
    """A report as a table row, its codes as one JSON object (absent codes left out)."""
    return {
        "id": item.id,
        "domain": item.domain,
        "report": item.text,
        "findings": item.findings,
        "impression": item.impression,
        "codes": dict(item.codes),
        "split": item.split,
    }


def _write_table(f: TextIO, fmt: Fmt, columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> None:
    if fmt == "jsonl":
        for row in rows:
            f.write(json.dumps(row, ensure_ascii=False) + "\n")
        return
    writer = csv.writer(f, lineterminator="\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow(_csv_cell(row[c]) for c in columns)


def _csv_cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, dict):
        return json.dumps(value, ensure_ascii=False)
    return str(value)


def _readme(corpus: SyntheticCorpus, fmt: Fmt) -> str:
    return (
        "# Synthetic MedEval-shaped corpus — not MedEval's data\n\n"
        f"{NOTE[0].upper()}{NOTE[1:]}.\n\n"
        f"Written by clinieval: {corpus.describe()}.\n"
        f"Tables: synthetic-sentences.{fmt}, synthetic-reports.{fmt}; code sets: {OBSERVATIONS_FILE}; "
        f"counts: {MANIFEST_FILE}.\n"
    )


def _manifest(corpus: SyntheticCorpus, fmt: Fmt) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "synthetic": True,
        "note": NOTE,
        "seed": corpus.seed,
        "files": {"sentences": f"synthetic-sentences.{fmt}", "reports": f"synthetic-reports.{fmt}"},
        **corpus.summary(),
        "domains": {d: list(codes) for d, codes in corpus.observations.items()},
    }


def _check_target(out: Path, overwrite: bool) -> None:
    """Refuse a non-empty folder; with ``overwrite`` replace only an earlier synthetic corpus."""
    if not out.exists() or (out.is_dir() and not any(out.iterdir())):
        return
    if not overwrite:
        raise UserError(
            f"{out} already exists and is not empty; choose another folder or pass overwrite=True"
        )
    manifest = out / MANIFEST_FILE
    try:
        earlier = json.loads(manifest.read_text(encoding="utf-8")).get("format") == FORMAT
    except (OSError, ValueError, AttributeError):
        earlier = False
    if not earlier:
        raise UserError(
            f"{out} is not a synthetic MedEval corpus (no {MANIFEST_FILE} of {FORMAT}); not replacing it"
        )


def _json_text(data: Any) -> str:
    return json.dumps(data, indent=2, ensure_ascii=False) + "\n"


def write_corpus(corpus: SyntheticCorpus, out: Path, *, fmt: Fmt = "jsonl", overwrite: bool = False) -> Path:
    """Write ``corpus`` into the folder ``out`` (module docstring) and return ``out``."""
    if fmt not in ("jsonl", "csv"):
        raise UserError(f"format {fmt!r} is unknown; choose jsonl or csv")
    out = Path(out)
    _check_target(out, overwrite)
    tables: list[tuple[str, Sequence[str], Callable[[], Iterable[Mapping[str, Any]]]]] = [
        (f"synthetic-sentences.{fmt}", SENTENCE_COLUMNS, lambda: map(sentence_row, corpus.sentences)),
        (f"synthetic-reports.{fmt}", REPORT_COLUMNS, lambda: map(report_row, corpus.reports)),
    ]
    with staged_dir(out, "the synthetic MedEval folder") as tmp:
        for name, columns, rows in tables:
            with (tmp / name).open("w", encoding="utf-8", newline="") as f:
                _write_table(f, fmt, columns, rows())
        (tmp / OBSERVATIONS_FILE).write_text(_json_text(dict(corpus.observations)), encoding="utf-8")
        (tmp / MANIFEST_FILE).write_text(_json_text(_manifest(corpus, fmt)), encoding="utf-8")
        (tmp / README_FILE).write_text(_readme(corpus, fmt), encoding="utf-8")
    return out


def write_synthetic(
    out: Path,
    *,
    seed: int = 0,
    sentences: int = 2000,
    reports: int = 1000,
    fmt: Fmt = "jsonl",
    overwrite: bool = False,
) -> SyntheticCorpus:
    """:func:`~.corpus.build_corpus` then :func:`write_corpus`: the one call a command needs."""
    corpus = build_corpus(seed, sentences, reports)
    write_corpus(corpus, out, fmt=fmt, overwrite=overwrite)
    return corpus
