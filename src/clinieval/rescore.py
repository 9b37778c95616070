"""Re-score a finished run with other scorers, never calling the model under test."""

from __future__ import annotations

import json
from collections.abc import Sequence

from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_text
from clinieval.records import SampleRecord
from clinieval.runs import SCORES, RunDir
from clinieval.scoring.scorers import Scorer
from clinieval.summary import ScorerSummary, summarize


def rescore(run: RunDir, scorers: Sequence[Scorer]) -> list[ScorerSummary]:
    """Apply ``scorers`` to every record; write ``scores/NAME.jsonl`` atomically per scorer."""
    records = run.records()
    if not records:
        raise UserError(f"{run.path}: the run has no finished samples to score")
    rescored: list[SampleRecord] = []
    for rec in records:
        rec.scores = {s.name: s.score(rec) for s in scorers}
        rescored.append(rec)
    for scorer in scorers:
        lines = [
            json.dumps(
                {"sample_id": r.sample.id, "repeat": r.repeat, **r.scores[scorer.name].to_dict()},
                ensure_ascii=False,
            )
            for r in rescored
        ]
        atomic_write_text(run.path / SCORES / f"{scorer.name}.jsonl", "\n".join(lines) + "\n")
    return summarize(rescored, [s.name for s in scorers])
