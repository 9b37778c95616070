"""Re-score a finished run with other scorers, never calling the model under test."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_jsonl
from clinieval.records.runs import SCORES, RunDir
from clinieval.records.sample_record import SampleRecord
from clinieval.records.summary import ScorerSummary, summarize
from clinieval.scoring.scorers import Scorer, no_reference
from clinieval.types import Score


def _finished(run: RunDir) -> list[SampleRecord]:
    records = run.records()
    if not records:
        raise UserError(f"{run.path}: the run has no finished samples to score")
    return records


def write_scores(run: RunDir, name: str, records: Sequence[SampleRecord]) -> Path:
    """``scores/NAME.jsonl`` (one line per record, from ``record.scores[name]``), written atomically."""
    path = run.path / SCORES / f"{name}.jsonl"
    atomic_write_jsonl(
        path, ({"sample_id": r.sample.id, "repeat": r.repeat, **r.scores[name].to_dict()} for r in records)
    )
    return path


def rescore(run: RunDir, scorers: Sequence[Scorer]) -> list[ScorerSummary]:
    """Apply ``scorers`` to every record; write ``scores/NAME.jsonl`` atomically per scorer."""
    rescored = _finished(run)
    for rec in rescored:
        rec.scores = {s.name: s.score(rec) for s in scorers}
    for scorer in scorers:
        write_scores(run, scorer.name, rescored)
    return summarize(
        rescored, [s.name for s in scorers], reads_text={s.name for s in scorers if s.needs == "generate"}
    )


def _unscorable(record: SampleRecord) -> Score | None:
    """Why a record gets no text-metric value: a failed answer, or no reference to compare with."""
    out = record.output
    if out is None:
        raise UserError("text metrics need generated answers; this run holds none")
    if out.error_kind is not None:
        return Score(value=None, explanation=out.error_message, metadata={"error_kind": out.error_kind.value})
    if not record.sample.all_targets:
        return no_reference()
    return None


def score_text_metrics(run: RunDir, metrics: Sequence[str]) -> list[ScorerSummary]:
    """Reference-based text metrics over a finished run, in one batch per metric (BERTScore loads
    its model once), each output written to ``scores/OUTPUT.jsonl`` (``rouge`` gives four files).

    Failed answers stay unscored with their error kind and answers without a reference are
    unscored as ``no_reference``: neither is turned into a 0.
    """
    from clinieval.scoring.text.registry import text_metric

    records = _finished(run)
    blocked = {r.key: _unscorable(r) for r in records}
    todo = [r for r in records if blocked[r.key] is None]
    answers = [r.output.text if r.output else "" for r in todo]
    names: list[str] = []
    for name in metrics:
        metric = text_metric(name)
        results = metric.compute(answers, [r.sample.all_targets for r in todo]) if todo else {}
        for output in metric.outputs:
            scored = dict(zip((r.key for r in todo), results[output].values, strict=True)) if todo else {}
            meta = dict(results[output].metadata) if todo else {}
            for r in records:
                why = blocked[r.key]
                r.scores[output] = why or Score(value=scored[r.key], metadata={"metric": meta})
            write_scores(run, output, records)
            names.append(output)
    return summarize(records, names)
