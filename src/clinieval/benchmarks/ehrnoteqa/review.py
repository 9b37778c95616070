"""EHRNoteQA's build review in the browser: ``review.csv`` to ``question`` items and back.

``clinieval ehrnoteqa build generate`` writes ``review.csv`` for clinicians to fill in a
spreadsheet; the review app is the other way to collect the same verdicts, blinded and audited.
Each parsed item becomes one ``question`` item whose fields are the generated question, its
options A-E and its answer letter, which the reviewer keeps, revises or discards. The notes the
generator saw are the context when the discharge file is given beside the review (the build
folder does not keep the notes: they stay in your MIMIC-IV-Note copy):

    clinieval review import BUILD/review.csv discharge.csv.gz --study NAME

The way back is :func:`fill_review`: the export's ``questions.csv`` written into the review CSV
as ``keep`` and ``revised_*`` cells, which ``clinieval ehrnoteqa build import`` then applies and
counts in the paper's terms, exactly as if the clinicians had filled the spreadsheet.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.errors import UserError, shown
from clinieval.review.sources import Converted, ExportRow, ReviewSource, has_columns

OPTION_LETTERS = ("A", "B", "C", "D", "E")
"""The options of a generated item (``prompts.OPTION_LETTERS``, not imported: ``clinieval`` reads
this module at start-up to list the review sources, and the prompts module is heavier)."""
PROMPT = "Review this generated question"
FIELDS = ("question", "options", "answer")
"""The item's editable fields, and the columns of the export's ``questions.csv`` read back."""
_REVIEW_MARKERS = ("item_id", "patient_id", "question", "choice_A", "answer", "keep")
_NOTES_COLUMNS = ("subject_id", "hadm_id", "charttime", "text")


def _review_file(path: Path) -> Path | None:
    """``path`` when it is a build review CSV, its ``review.csv`` when it is a build folder."""
    from clinieval.benchmarks.ehrnoteqa.build.review import REVIEW_FILE

    candidate = path / REVIEW_FILE if path.is_dir() else path
    return candidate if candidate.is_file() and has_columns(candidate, *_REVIEW_MARKERS) else None


def _is_notes(path: Path) -> bool:
    return path.is_file() and has_columns(path, *_NOTES_COLUMNS)


def _split(paths: Sequence[Path]) -> tuple[Path, Path | None] | None:
    """(the review CSV, the discharge notes or None), or None when ``paths`` are not that."""
    if not 1 <= len(paths) <= 2:
        return None
    reviews = [r for r in map(_review_file, paths) if r is not None]
    notes = [p for p in paths if _is_notes(p)]
    if len(reviews) != 1 or len(reviews) + len(notes) != len(paths):
        return None
    return reviews[0], notes[0] if notes else None


def accepts(paths: Sequence[Path]) -> bool:
    """A build's ``review.csv`` (or its folder), optionally with the discharge notes file."""
    return _split(paths) is not None


def _notes_context(rows: Sequence[Any], notes: Path) -> dict[str, str]:
    """Each patient's notes block exactly as the generator was shown it, checked against the
    admissions the review row lists (another notes file would show the reviewer the wrong notes)."""
    from clinieval.ehr.notes import format_notes, read_discharge_notes, select_notes

    pids = {r.cells["patient_id"].strip() for r in rows}
    found = read_discharge_notes(notes, pids)
    out: dict[str, str] = {}
    for row in rows:
        pid = row.cells["patient_id"].strip()
        chosen = select_notes(found.get(pid, []))
        if not chosen:
            raise UserError(
                f"{notes}: patient {shown(pid)} (item {shown(row.cells['item_id'])}) has no note here;"
                " give the discharge file the build read"
            )
        listed = [a.strip() for a in row.cells.get("admission_ids", "").split(";") if a.strip()]
        if listed and listed != [n.hadm_id for n in chosen]:
            raise UserError(
                f"{notes}: patient {shown(pid)}'s notes are admissions"
                f" {', '.join(n.hadm_id for n in chosen)}, but the build showed {', '.join(listed)}"
                f" (item {shown(row.cells['item_id'])}); give the discharge file the build read"
            )
        out[pid] = format_notes(chosen)
    return out


def convert(paths: Sequence[Path]) -> Converted:
    """One ``question`` item per row of the review CSV."""
    from clinieval.benchmarks.ehrnoteqa.build.review import read_review
    from clinieval.review.items import ReviewItem

    split = _split(paths)
    if split is None:
        raise UserError(
            "give an EHRNoteQA build's review.csv (or its build folder), and optionally the discharge"
            f" notes file it was built from; got {', '.join(map(str, paths))}"
        )
    path, notes = split
    review = read_review(path)
    if not review.rows:
        raise UserError(f"{path}: no items below the header")
    context = _notes_context(review.rows, notes) if notes is not None else {}
    items: list[ReviewItem] = []
    seen: dict[str, int] = {}
    for row in review.rows:
        c = row.cells
        item_id = c["item_id"].strip()
        if not item_id:
            raise UserError(f"{review.at(row, 'item_id')} is empty")
        if item_id in seen:
            raise UserError(f"{review.at(row, 'item_id')}: item {item_id!r} repeats row {seen[item_id]}")
        seen[item_id] = row.number
        failed = c.get("failed_checks", "").strip()
        items.append(
            ReviewItem(
                item=item_id,
                prompt=PROMPT + (f" (it fails the checks: {failed})" if failed else ""),
                context=context.get(c["patient_id"].strip(), ""),
                fields={
                    "question": c["question"].strip(),
                    "options": {x: c[f"choice_{x}"].strip() for x in OPTION_LETTERS},
                    "answer": c["answer"].strip(),
                },
                meta={"patient_id": c["patient_id"].strip()},
            )
        )
    notes_line = () if notes is not None else (
        "no discharge notes given: reviewers will not see the notes the questions were written from;"
        " give the discharge.csv(.gz) the build read after the review.csv",
    )  # fmt: skip
    return Converted(items, notes_line)


REVIEW_SOURCE = ReviewSource(
    name="ehrnoteqa-build",
    kind="question",
    describe="an EHRNoteQA build's review.csv (or its folder) [+ discharge notes] to keep/revise/discard",
    accepts=accepts,
    convert=convert,
)


# --- the way back -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Filled:
    """What :func:`fill_review` wrote: the file, and the items by decision."""

    out: Path
    decisions: dict[str, int]


def _options(row: ExportRow) -> dict[str, str]:
    """The exported ``options`` cell (a JSON object, as the export writes non-text fields)."""
    try:
        value = json.loads(row.cells["options"])
    except ValueError:
        value = None
    if (
        not isinstance(value, dict)
        or set(value) != set(OPTION_LETTERS)
        or not all(isinstance(v, str) for v in value.values())
    ):
        raise UserError(f"{row.where}: column 'options' should be a JSON object of the options A-E")
    return value


def _verdict_cells(original: dict[str, str], rows: Sequence[ExportRow]) -> dict[str, str]:
    """The reviewer columns of one review row from its verdict (``rows`` agree, or are one)."""
    v = rows[0]
    where = f"{v.where} (item {shown(v.item)}, {shown(v.reviewer)})"
    decision = v.cells["decision"].strip()
    comments = [
        f"{r.reviewer}: {r.cells.get('comment', '').strip()}"
        for r in rows
        if r.cells.get("comment", "").strip()
    ]
    cells = {"keep": "no" if decision == "discard" else "yes", "reviewer_note": "; ".join(comments)}
    cells.update(
        {f"revised_{x}": "" for x in ("question", "answer", *(f"choice_{y}" for y in OPTION_LETTERS))}
    )
    if decision in ("keep", "discard"):
        return cells
    if decision != "revise":
        raise UserError(f"{where}: decision {decision!r} should be keep, revise or discard")
    question, options, answer = v.cells["question"].strip(), _options(v), v.cells["answer"].strip()
    if question != original["question"].strip():
        if not question:
            raise UserError(
                f"{where}: the revised question is empty; an empty cell would keep the generated one"
            )
        cells["revised_question"] = question
    for x in OPTION_LETTERS:
        text = options[x].strip()
        if text != original[f"choice_{x}"].strip():
            if not text:
                raise UserError(
                    f"{where}: option {x} was emptied; an empty cell would keep the generated one"
                )
            cells[f"revised_choice_{x}"] = text
    if answer != original["answer"].strip():
        letter = answer.strip("().:[] ").upper()
        if letter not in OPTION_LETTERS:
            raise UserError(f"{where}: the revised answer is {answer[:30]!r}; it should be one letter A-E")
        cells["revised_answer"] = letter
    return cells


def fill_review(export: Path, review: Path, out: Path, prefer: Sequence[str] = ()) -> Filled:
    """Write ``review`` with the reviewer columns filled from the export's ``questions.csv``
    (``keep`` from the decision, ``revised_*`` where a field changed, the comments as the note),
    atomically to ``out`` (which may be ``review`` itself). Every row of the review needs a
    submitted verdict, and every verdict a row: ``build import`` reads a blank ``keep`` as an
    error, and a verdict for an item the review lacks came from another build. Reviewers of one
    item must agree unless ``prefer`` says whose verdict wins."""
    from clinieval.benchmarks.ehrnoteqa.build.review import REVIEW_COLUMNS, read_review, write_review
    from clinieval.review.sources import export_verdicts, refuse_strangers

    if out.exists() and out.resolve() == export.resolve():
        raise UserError(f"{out} is the export; write the filled review somewhere else")
    verdicts = export_verdicts(export, ("decision", *FIELDS), prefer)
    table = read_review(review)
    ids = [r.cells["item_id"].strip() for r in table.rows]
    refuse_strangers(export, verdicts, ids, noun="item", source=review, named="review.csv")
    missing = [i for i in ids if i not in verdicts]
    if missing:
        raise UserError(
            f"{export}: {len(missing)} item(s) of {review} have no submitted review, first"
            f" {shown(missing[0])}; export again once every item is reviewed"
        )
    rows: list[dict[str, str]] = []
    decisions = dict.fromkeys(("keep", "revise", "discard"), 0)
    for row, item_id in zip(table.rows, ids, strict=True):
        chosen = verdicts[item_id]
        filled = {**row.cells, **_verdict_cells(row.cells, chosen)}
        decisions[chosen[0].cells["decision"].strip()] += 1
        rows.append({c: filled.get(c, "") for c in REVIEW_COLUMNS})
    write_review(out, rows)
    return Filled(out, decisions)


# --- answered arms, for a clinician sample of a suite ---------------------------------------------


def arm_items(
    paths: Sequence[Path], labels: Sequence[str], fmt: str, *, keep: Collection[str] | None = None
) -> Converted:
    """Review items from EHRNoteQA arms (run folders of one format, ``fmt``; each answer's
    ``source`` its arm's label): one per question every arm answered (only those in ``keep`` when
    given), showing what the models were shown: the question, with its lettered options in the
    multiple-choice format, and the patient's discharge notes as the record. The reference is the
    answer key (the correct option; what the paper's judge compares with). A failed call is left
    out of its item and counted in the notes."""
    from clinieval.review.arms import arm_answers, shared_records
    from clinieval.review.items import ReviewItem
    from clinieval.scoring.choices import option_lines

    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise UserError(f"two run folders are the same arm ({', '.join(dupes)}); give each arm once")
    shared = shared_records(paths, noun="question", keep=keep)
    items: list[ReviewItem] = []
    failed = 0
    for qid in shared.ids:
        records = shared.records[qid]
        sample = records[0].sample
        answers = arm_answers(labels, records)
        failed += len(records) - len(answers)
        if not answers:
            continue
        mc = fmt == "mc" and bool(sample.choices)
        prompt = f"{sample.input}\n\n{option_lines(sample.choices)}" if mc else sample.input
        key = str(sample.metadata.get("answer") or "")
        reference = f"{key}. {sample.target}" if mc and key else sample.target
        patient = sample.metadata.get("patient_id")
        items.append(
            ReviewItem(
                item=qid,
                prompt=prompt,
                context=sample.context,
                reference=reference,
                answers=answers,
                meta={"patient_id": str(patient)} if patient not in (None, "") else {},
            )
        )
    notes = [f"{failed} failed call(s) left out of their items"] if failed else []
    return Converted(items, tuple(notes))
