"""Per-scorer summaries of a run: score with a 95 % CI, shown with and without failures."""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field

from clinieval.analysis.uncertainty import bootstrap_ci
from clinieval.records import SampleRecord
from clinieval.types import JSON, Score


@dataclass(slots=True)
class ScorerSummary:
    """How one scorer saw a run.

    ``mean`` excludes samples whose model call failed; ``mean_failures_as_wrong`` counts them
    as 0, the view MedAlign reported alongside (content-filter refusals counted as incorrect).
    """

    scorer: str
    samples: int
    scored: int
    mean: float
    ci_low: float
    ci_high: float
    mean_failures_as_wrong: float
    unparsed: int
    errors: dict[str, int] = field(default_factory=dict)
    truncated: int = 0
    """Scored answers the model stopped at the token limit (``finish_reason == "length"``): scored
    as written in ``mean``, counted as wrong in ``mean_failures_as_wrong``."""

    def to_dict(self) -> JSON:
        return asdict(self)


@dataclass(slots=True)
class _Tally:
    ok: list[float]
    wrong: list[float]
    errors: Counter[str]
    unparsed: int
    truncated: int


def _per_sample(scores: list[tuple[str, Score, bool]]) -> _Tally:
    """Average repeats within each sample; failures are kept apart, not averaged in, and a
    truncated answer counts as wrong in the failures-as-wrong view."""
    ok: dict[str, list[float]] = defaultdict(list)
    as_wrong: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    unparsed = truncated = 0
    for sample_id, s, cut in scores:
        if s.value is None:
            errors[str(s.metadata.get("error_kind") or "unscored")] += 1
            as_wrong[sample_id].append(0.0)
            continue
        ok[sample_id].append(s.value)
        as_wrong[sample_id].append(0.0 if cut else s.value)
        unparsed += bool(s.metadata.get("unparsed"))
        truncated += cut
    mean_ok = [sum(v) / len(v) for v in ok.values()]
    mean_wrong = [sum(v) / len(v) for v in as_wrong.values()]
    return _Tally(mean_ok, mean_wrong, errors, unparsed, truncated)


def _truncated(record: SampleRecord) -> bool:
    return record.output is not None and record.output.ok and record.output.finish_reason == "length"


def summarize(records: Sequence[SampleRecord], scorer_names: Sequence[str]) -> list[ScorerSummary]:
    out: list[ScorerSummary] = []
    for name in scorer_names:
        pairs = [(r.sample.id, r.scores[name], _truncated(r)) for r in records if name in r.scores]
        tally = _per_sample(pairs)
        ok, wrong, errors = tally.ok, tally.wrong, tally.errors
        # No scored sample: mean and CI are both shown as NaN, "no data", rather than an error.
        lo, hi = bootstrap_ci(ok) if ok else (float("nan"), float("nan"))
        out.append(
            ScorerSummary(
                scorer=name,
                samples=len(pairs),
                scored=len(pairs) - sum(errors.values()),
                mean=sum(ok) / len(ok) if ok else float("nan"),
                ci_low=lo,
                ci_high=hi,
                mean_failures_as_wrong=sum(wrong) / len(wrong) if wrong else float("nan"),
                unparsed=tally.unparsed,
                errors=dict(errors),
                truncated=tally.truncated,
            )
        )
    return out


def format_counts(counts: Mapping[str, int], empty: str = "-") -> str:
    """``a=1, b=2`` in key order, for error and issue counts on one line."""
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or empty


def render_table(summaries: Sequence[ScorerSummary], title: str) -> object:
    """A rich Table (imported lazily: only the CLI renders)."""
    from rich.table import Table

    caption = "fail=wrong: failed model calls and answers cut at the token limit counted as wrong"
    table = Table(title=title, caption=caption)
    for col in ("scorer", "n", "score", "95% CI", "fail=wrong", "unparsed", "truncated", "errors"):
        left = col in {"scorer", "errors"}
        table.add_column(col, justify="left" if left else "right", no_wrap=col != "errors")
    for s in summaries:
        errors = format_counts(s.errors)
        none = s.scored == 0  # nothing answered: no score, rather than "nan"
        table.add_row(
            s.scorer,
            f"{s.scored}/{s.samples}",
            "-" if none else f"{s.mean:.3f}",
            "-" if none else f"{s.ci_low:.3f}-{s.ci_high:.3f}",
            f"{s.mean_failures_as_wrong:.3f}",
            str(s.unparsed),
            str(s.truncated),
            errors,
        )
    return table
