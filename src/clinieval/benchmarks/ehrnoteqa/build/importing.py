"""Re-import of the clinician review: apply it, check again, write the final QA jsonl and statistics.

:func:`import_review` reads a filled ``review.csv`` (:mod:`.review`), applies the revisions,
re-checks every kept item (:mod:`.checks`), and writes the final questions in the PhysioNet
EHRNoteQA format (:data:`FINAL_FIELDS`) with review statistics in the paper's terms (items
removed, questions, correct answers and distractors revised). When ``generated.jsonl`` is beside
the review, the generated columns are checked against it, so edits made in place are caught.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from clinieval.benchmarks.ehrnoteqa.build.checks import BLOCKING_CHECKS, CHECKS, check_item, failed_checks
from clinieval.benchmarks.ehrnoteqa.build.pipeline import GENERATED_FILE
from clinieval.benchmarks.ehrnoteqa.build.review import Review, read_review
from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS
from clinieval.datasets import CsvRow
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, atomic_write_jsonl
from clinieval.types import JSON

__all__ = ["FINAL_FIELDS", "ImportResult", "ReviewStats", "import_review"]

FINAL_FIELDS: tuple[str, ...] = (
    "patient_id",
    "num_notes",
    "question",
    *(f"choice_{x}" for x in OPTION_LETTERS),
    "answer",
)
"""The PhysioNet EHRNoteQA jsonl fields; ``id`` and ``category`` follow when known."""

_YES = frozenset({"yes", "y", "true", "1"})
_NO = frozenset({"no", "n", "false", "0"})


def _keep(review: Review, row: CsvRow) -> bool:
    text = row.cells["keep"].strip().lower()
    if text in _YES:
        return True
    if text in _NO:
        return False
    what = "is empty" if not text else f"is {row.cells['keep'].strip()[:30]!r}"
    raise UserError(
        f"{review.at(row, 'keep')} {what}: write yes to keep the item or no to remove it "
        "(y/n, true/false and 1/0 are read too)"
    )


def _as_letter(text: str) -> str | None:
    """``B``, ``b``, ``(B)``, ``B.`` as ``B``; None for anything else."""
    letter = text.strip("().:[] ").upper()
    return letter if len(letter) == 1 and letter in OPTION_LETTERS else None


def _letter(review: Review, row: CsvRow, column: str) -> str | None:
    text = row.cells[column].strip()
    if not text:
        return None
    letter = _as_letter(text)
    if letter is not None:
        return letter
    raise UserError(f"{review.at(row, column)} is {text[:30]!r}: write one letter A-E, or leave it empty")


def _num_notes(review: Review, row: CsvRow) -> int:
    text = row.cells["num_notes"].strip()
    if not (text.isascii() and text.isdigit()) or int(text) < 1:  # isdigit alone takes '²'
        raise UserError(
            f"{review.at(row, 'num_notes')} is {text[:30]!r}: expected the number of notes (1, 2 or 3)"
        )
    return int(text)


def _same(a: str, b: str) -> bool:
    return " ".join(a.split()) == " ".join(b.split())


def _read_generated(path: Path) -> dict[str, JSON]:
    """``item_id`` → the parsed item, from ``generated.jsonl`` (to check the review's originals)."""
    out: dict[str, JSON] = {}
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as e:
        raise UserError(f"{path}: cannot read it ({e})") from None
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            d = json.loads(line)
            item_id, step2 = str(d["item_id"]), d.get("step2")
        except (json.JSONDecodeError, KeyError, TypeError) as e:
            raise UserError(f"{path}:{n}: not a generated item ({e})") from None
        if isinstance(step2, dict):
            out[item_id] = {**step2, "patient_id": str(d.get("patient_id")), "num_notes": d.get("num_notes")}
    return out


def _check_originals(review: Review, row: CsvRow, generated: Mapping[str, JSON], source: Path) -> None:
    """The generated columns must be as generated: revisions go in the ``revised_*`` columns, so the
    statistics can tell what reviewers changed."""
    item_id = row.cells["item_id"].strip()
    gen = generated.get(item_id)
    if gen is None:
        raise UserError(
            f"{review.at(row, 'item_id')}: item {item_id!r} is not among the parsed items of {source}"
        )
        return
    expected: dict[str, str] = {
        "patient_id": str(gen["patient_id"]),
        "num_notes": str(gen["num_notes"]),
        "question": str(gen["question"]),
        **{f"choice_{x}": str(gen["choices"].get(x, "")) for x in OPTION_LETTERS},
        "answer": str(gen["answer"] or gen["answer_raw"]),
    }
    for column, value in expected.items():
        if not _same(row.cells[column], value):
            fix = "" if column in ("patient_id", "num_notes") else f" and write changes in 'revised_{column}'"
            raise UserError(
                f"{review.at(row, column)} differs from what was generated ({source}); restore it{fix}"
            )


@dataclass(slots=True)
class ReviewStats:
    """The review in the paper's terms: items removed, and among kept items the questions, correct
    answers and distractors revised, out of all reviewed items (distractors: four per item), as the
    paper counts them (38 of 1,000 removed; 206 questions, 338 correct answers, 962 of 4,000
    distractors revised). ``failing_checks`` counts kept items still failing each check (only the
    non-blocking ones, unless ``allow_failed_checks`` let blocking ones through)."""

    items: int = 0
    removed: int = 0
    kept: int = 0
    questions_revised: int = 0
    correct_answers_revised: int = 0
    distractors_revised: int = 0
    failing_checks: dict[str, int] = field(default_factory=dict)

    @property
    def distractors_total(self) -> int:
        return 4 * self.items

    def to_dict(self) -> JSON:
        return {**asdict(self), "distractors_total": self.distractors_total}

    def to_text(self) -> str:
        n = self.items
        lines = [
            f"{n} items reviewed: {self.removed} removed, {self.kept} kept",
            f"revised: {self.questions_revised} of {n} questions, {self.correct_answers_revised} of {n} "
            f"correct answers, {self.distractors_revised} of {self.distractors_total} distractors",
        ]
        if self.failing_checks:
            lines.append(
                "kept items failing checks: " + ", ".join(f"{k} {v}" for k, v in self.failing_checks.items())
            )
        return "\n".join(lines)


@dataclass(slots=True)
class ImportResult:
    """The final items (PhysioNet EHRNoteQA jsonl records), the statistics, and the files written."""

    items: list[JSON]
    stats: ReviewStats
    out: Path
    stats_path: Path


def _final_item(review: Review, row: CsvRow) -> tuple[JSON, dict[str, bool | None], tuple[bool, bool, int]]:
    """A kept row with its revisions applied, its checks, and (question revised, correct answer
    revised, distractors revised)."""
    c = row.cells
    original = {x: c[f"choice_{x}"].strip() for x in OPTION_LETTERS}
    choices = {x: c[f"revised_choice_{x}"].strip() or original[x] for x in OPTION_LETTERS}
    question = c["revised_question"].strip() or c["question"].strip()
    old_answer = _as_letter(c["answer"]) or c["answer"].strip()  # the raw reply when no letter was read
    answer = _letter(review, row, "revised_answer") or old_answer
    if not question:
        raise UserError(
            f"{review.at(row, 'question')}: the item has no question; write one in 'revised_question'"
        )
    checks = check_item(choices, answer)
    q_revised = not _same(question, c["question"])
    a_revised = answer != old_answer or not _same(choices.get(answer, ""), original.get(answer, ""))
    d_revised = sum(not _same(choices[x], original[x]) for x in OPTION_LETTERS if x != answer)
    pid = c["patient_id"].strip()
    if not pid:
        raise UserError(f"{review.at(row, 'patient_id')} is empty")
    item: JSON = {
        "patient_id": int(pid) if pid.isascii() and pid.isdigit() else pid,
        "num_notes": _num_notes(review, row),
        "question": question,
        **{f"choice_{x}": choices[x] for x in OPTION_LETTERS},
        "answer": answer,
        "id": c["item_id"].strip(),
    }
    category = c.get("category", "").strip()
    if category:
        item["category"] = category
    return item, checks, (q_revised, a_revised, d_revised)


def _stats_path(out: Path) -> Path:
    return out.with_name(f"{out.stem if out.suffix == '.jsonl' else out.name}.review_stats.json")


def import_review(
    review_csv: str | Path,
    out: str | Path,
    *,
    generated: str | Path | None = None,
    allow_failed_checks: bool = False,
    stats_out: str | Path | None = None,
) -> ImportResult:
    """Read a filled ``review.csv``, apply it, and write the final QA jsonl and its statistics.

    ``keep`` must be yes/no (y/n, true/false, 1/0, any case) on every row: a blank is an error,
    not a default. Non-empty ``revised_*`` cells replace the originals; ``revised_answer`` must be
    a letter A-E. Kept items are checked again and an item failing one of
    :data:`BLOCKING_CHECKS` is refused (every such row listed) unless ``allow_failed_checks``.
    When ``generated`` (default: ``generated.jsonl`` beside the review, if there) is available,
    the original columns must be unchanged, so edits made in place are caught rather than
    counted as unrevised. Nothing is written unless everything passes; both files are atomic.
    ``stats_out`` defaults to ``OUT.review_stats.json`` beside ``out``.
    """
    source, dest = Path(review_csv), Path(out)
    if dest.exists() and dest.resolve() == source.resolve():
        raise UserError(f"{dest} is the review file; write the final jsonl somewhere else")
    review = read_review(source)
    if not review.rows:
        raise UserError(f"{source}: no items below the header")
    _unique_ids(review)
    gen_path = Path(generated) if generated is not None else source.parent / GENERATED_FILE
    if generated is not None and not gen_path.is_file():
        raise UserError(f"--generated {gen_path}: not found")
    known = _read_generated(gen_path) if gen_path.is_file() else None
    if known is not None:
        for row in review.rows:
            _check_originals(review, row, known, gen_path)
        _check_complete(review, known, gen_path)
    applied = _Applied(ReviewStats(items=len(review.rows)))
    for row in review.rows:
        applied.add(review, row, allow_failed_checks)
    applied.finish(source)
    stats_path = Path(stats_out) if stats_out is not None else _stats_path(dest)
    atomic_write_jsonl(dest, applied.items)
    atomic_write_json(stats_path, {"review": str(source), "out": str(dest), **applied.stats.to_dict()})
    return ImportResult(applied.items, applied.stats, dest, stats_path)


def _unique_ids(review: Review) -> None:
    seen: dict[str, int] = {}
    for row in review.rows:
        item_id = row.cells["item_id"].strip()
        if not item_id:
            raise UserError(f"{review.at(row, 'item_id')} is empty")
        if item_id in seen:
            raise UserError(f"{review.at(row, 'item_id')}: item {item_id!r} repeats row {seen[item_id]}")
        seen[item_id] = row.number


def _check_complete(review: Review, known: Mapping[str, JSON], gen_path: Path) -> None:
    """Every parsed item must keep its row: a deleted row would drop out of "removed"."""
    listed = {row.cells["item_id"].strip() for row in review.rows}
    lost = [item_id for item_id in known if item_id not in listed]
    if lost:
        raise UserError(
            f"{review.path}: {len(lost)} generated item(s) have no row, first {lost[0]!r} (see {gen_path}); "
            "restore the rows and set keep to no to remove items, so the statistics count them"
        )


@dataclass(slots=True)
class _Applied:
    """The review applied row by row: the final items, the statistics, and the refused rows."""

    stats: ReviewStats
    items: list[JSON] = field(default_factory=list)
    failing: Counter[str] = field(default_factory=Counter)
    refused: list[str] = field(default_factory=list)

    def add(self, review: Review, row: CsvRow, allow_failed_checks: bool) -> None:
        if not _keep(review, row):
            self.stats.removed += 1
            return
        item, checks, (q_rev, a_rev, d_rev) = _final_item(review, row)
        bad = failed_checks(checks)
        blocking = [name for name in bad if name in BLOCKING_CHECKS]
        if blocking and not allow_failed_checks:
            self.refused.append(f"row {row.number} (item {item['id']!r}): {', '.join(blocking)}")
        self.failing.update(bad)
        self.stats.kept += 1
        self.stats.questions_revised += q_rev
        self.stats.correct_answers_revised += a_rev
        self.stats.distractors_revised += d_rev
        self.items.append(item)

    def finish(self, source: Path) -> None:
        """Refuse the import when a kept item fails a blocking check (every such row listed)."""
        if self.refused:
            shown = "; ".join(self.refused[:10]) + ("; ..." if len(self.refused) > 10 else "")
            raise UserError(
                f"{source}: {len(self.refused)} kept item(s) fail a required check ({shown}); revise the "
                "choices or the answer, set keep to no, or import with --allow-failed-checks"
            )
        self.stats.failing_checks = {name: self.failing[name] for name in CHECKS if self.failing[name]}
