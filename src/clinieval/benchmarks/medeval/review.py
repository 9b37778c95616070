"""MedEval sentences to clinician labelling in the browser, and the labels back as a sentence table.

MedEval's clinicians labelled report sentences normal/abnormal and ambiguous/unambiguous, and
rewrote the ambiguous ones. A sentence table (:func:`.data.load_sentences`: ``id``, ``sentence``,
``domain``...) becomes one ``sentence`` item per sentence: the sentence is the item's prompt,
because the review page shows the prompt under "Sentence" and copies it into the rewrite box, and
it is also kept as the field ``sentence``; the domain ("chest x-ray") is the context. The table's
own labels are not carried over: the reviewers label blind.

    clinieval review import sentences.csv --study NAME
    clinieval review export --study NAME EXPORT
    clinieval medeval review-labels EXPORT/sentences.csv --sentences sentences.csv --out labelled.csv

The study's label sets are the review app's defaults, which are MedEval's: ``abnormality``
(normal, abnormal) and ``ambiguity`` (unambiguous, ambiguous); :func:`labelled_sentences` reads
them back into the table's ``abnormal`` and ``ambiguous`` columns (the study's label sets are
:data:`.parsing.LABELS`, false word first).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING

from clinieval.benchmarks.medeval.parsing import LABELS
from clinieval.errors import UserError, shown
from clinieval.review.sources import Converted, ExportRow, ReviewSource, has_columns

if TYPE_CHECKING:
    from clinieval.benchmarks.medeval.items import SentenceItem

_COLUMNS = ("id", "sentence", "domain")


def sentence_table(path: Path) -> Path | None:
    """``path`` when it is a sentence table, the folder's one sentence table when it is a MedEval
    folder (``sentences.csv``, ``synthetic-sentences.jsonl``...), else None."""
    from clinieval.benchmarks.medeval.tables import SENTENCE_STEMS, SUFFIXES

    if path.is_dir():
        found = [path / f"{s}{x}" for s in SENTENCE_STEMS for x in SUFFIXES if (path / f"{s}{x}").is_file()]
        if len(found) != 1:
            return None
        path = found[0]
    return path if path.is_file() and has_columns(path, *_COLUMNS) else None


def accepts(paths: Sequence[Path]) -> bool:
    """One MedEval sentence table, or a MedEval folder holding one."""
    return len(paths) == 1 and sentence_table(paths[0]) is not None


def convert(paths: Sequence[Path]) -> Converted:
    """One ``sentence`` item per sentence, in the table's order."""
    from clinieval.benchmarks.medeval.tables import load_sentences
    from clinieval.review.items import ReviewItem

    table = sentence_table(paths[0]) if len(paths) == 1 else None
    if table is None:
        raise UserError(
            f"give one MedEval sentence table (id, sentence, domain) or a folder holding one; got"
            f" {', '.join(map(str, paths))}"
        )
    items = [
        ReviewItem(
            item=s.id,
            prompt=s.sentence,
            context=f"Domain: {s.domain}",
            fields={"sentence": s.sentence},
            meta={"domain": s.domain} | ({"split": s.split} if s.split else {}),
        )
        for s in load_sentences(table)
    ]
    return Converted(items)


REVIEW_SOURCE = ReviewSource(
    name="medeval-sentences",
    kind="sentence",
    describe="a MedEval sentence table (id, sentence, domain) or its folder, to label and rewrite",
    accepts=accepts,
    convert=convert,
)


# --- the way back -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Labelled:
    """What :func:`labelled_sentences` wrote and left out."""

    out: Path
    sentences: int
    not_reviewed: int
    rewrites_dropped: int


def _flag(row: ExportRow, column: str) -> bool:
    """A label set's value as MedEval's flag; a study made with other label words is refused
    here, naming the cell, rather than read as unlabelled."""
    words = LABELS[column]
    value = row.cells[column].strip()
    if value not in words:
        raise UserError(f"{row.where}: column {column!r} is {shown(value)}; expected {' or '.join(words)}")
    return value == words[1]


def _labelled(original: SentenceItem, rows: Sequence[ExportRow]) -> tuple[SentenceItem, bool]:
    """The sentence with the verdict's labels and rewrite; whether a rewrite was dropped (MedEval
    keeps rewrites of ambiguous sentences only, and its loader refuses any other)."""
    from clinieval.benchmarks.medeval.sections import normalize_space

    v = rows[0]
    abnormal, ambiguous = _flag(v, "abnormality"), _flag(v, "ambiguity")
    rewrite = normalize_space(v.cells["rewrite"]) or None
    item = replace(
        original,
        abnormal=abnormal,
        ambiguous=ambiguous,
        rewrite=rewrite if ambiguous else None,
        ambiguity_kind=original.ambiguity_kind if ambiguous else None,
    )
    return item, rewrite is not None and not ambiguous


def labelled_sentences(export: Path, sentences: Path, out: Path, prefer: Sequence[str] = ()) -> Labelled:
    """The reviewed sentences of ``sentences`` with the clinicians' labels and rewrites (and a
    ``reviewer`` column), written atomically to ``out`` (``.csv`` or ``.jsonl``) and read back
    with MedEval's own loader. Reviewers of one sentence must agree unless ``prefer`` says whose
    labels win; a sentence the export lacks is left out (counted), one the table lacks is refused."""
    from clinieval.benchmarks.medeval.synth.writer import SENTENCE_COLUMNS, sentence_row
    from clinieval.benchmarks.medeval.tables import load_sentences
    from clinieval.fsutil import atomic_write_csv, atomic_write_jsonl
    from clinieval.review.sources import export_verdicts, refuse_strangers

    table = sentence_table(sentences)
    if table is None:
        raise UserError(f"--sentences {sentences}: not a MedEval sentence table (id, sentence, domain)")
    if out.suffix.lower() not in (".csv", ".jsonl"):
        raise UserError(f"--out {out}: give a .csv or .jsonl file (MedEval reads both)")
    if out.exists() and out.resolve() in (table.resolve(), export.resolve()):
        raise UserError(f"--out {out} is an input; write the labelled table to a new file")
    columns = (*LABELS, "rewrite")
    verdicts = export_verdicts(export, columns, prefer)
    originals = load_sentences(table)
    known = {s.id for s in originals}
    refuse_strangers(export, verdicts, known, noun="sentence", source=table, named="sentence table")
    rows: list[dict[str, object]] = []
    dropped = 0
    for original in originals:
        chosen = verdicts.get(original.id)
        if chosen is None:
            continue
        item, lost = _labelled(original, chosen)
        dropped += lost
        rows.append(sentence_row(item) | {"reviewer": "; ".join(r.reviewer for r in chosen)})
    names = [*SENTENCE_COLUMNS, "reviewer"]
    if out.suffix.lower() == ".csv":
        atomic_write_csv(out, names, rows)
    else:
        atomic_write_jsonl(out, rows)
    load_sentences(out)  # reads back under MedEval's own rules, or says which row does not
    return Labelled(out, len(rows), len(originals) - len(rows), dropped)
