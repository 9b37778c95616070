"""The judge on the leaderboard page: who judged each cell, how often, how much of it was readable.

A judged benchmark's number is the judge's as much as the model's. EHRNoteQA's was once SmolLM2
grading its own answers: 1.000, where letter extraction on the same answers gave 0.30, and only
the console said so. So each judged cell's facts go on the page beside its score, read from the
judge summaries its runs wrote (``scores/<rubric>.summary.json``): the judge, its repeats, how
many of its replies gave a verdict and why the others did not, whether it judged its own answers
(decided by model fingerprint, :func:`clinieval.judge.run.same_model`), and, where the benchmark
has a deterministic scorer on the same answers, how often the two agree.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from clinieval.records.runs import SCORES

JSON = dict[str, Any]

__all__ = ["agreement", "judge_facts"]


def _summaries(runs: Sequence[Path]) -> list[JSON]:
    out = []
    for run in runs:
        for path in sorted((run / SCORES).glob("*.summary.json")):
            try:
                data = json.loads(path.read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict) and "judge" in data and "judge_calls" in data:
                out.append(data)
    return out


def judge_facts(runs: Sequence[Path]) -> JSON | None:
    """The judge facts of a cell's runs (None when no run was judged), summed over their summaries."""
    found = _summaries(runs)
    if not found:
        return None
    reasons: Counter[str] = Counter()
    errors: Counter[str] = Counter()
    for s in found:
        reasons.update({str(k): int(v) for k, v in (s.get("unparsed_reasons") or {}).items()})
        errors.update({str(k): int(v) for k, v in (s.get("judge_errors") or {}).items()})
    calls = sum(int(s.get("judge_calls", 0)) for s in found)
    parsed = sum(int(s.get("parsed", 0)) for s in found)
    return {
        "judge": ", ".join(sorted({str(s["judge"]) for s in found})),
        "repeats": max(int(s.get("repeats", 1)) for s in found),
        "replies": calls,
        "parsed": parsed,
        "parse_rate": None if calls == 0 else parsed / calls,
        "unparsed": sum(int(s.get("parse_failures", 0)) for s in found),
        "unparsed_reasons": dict(sorted(reasons.items())),
        "failed_calls": dict(sorted(errors.items())),
        "self_judged": any(bool(s.get("self_judged")) for s in found),
        "identical_repeats": sum(int(s.get("identical_repeats", 0)) for s in found),
    }


def agreement(judged: Mapping[str, float], deterministic: Mapping[str, float]) -> JSON | None:
    """How often the judge's verdict (rounded: right when at least half its repeats said so) and
    a deterministic scorer agree on the items both scored, and each one's mean there."""
    common = [i for i in judged if i in deterministic]
    if not common:
        return None
    same = sum((judged[i] >= 0.5) == (deterministic[i] >= 0.5) for i in common)
    return {
        "items": len(common),
        "agree": same / len(common),
        "judge_mean": sum(judged[i] for i in common) / len(common),
        "deterministic_mean": sum(deterministic[i] for i in common) / len(common),
    }
