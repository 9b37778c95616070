"""Per-scorer summaries of a run: score with a 95 % CI, shown with and without failures.

Three kinds of "no score" are kept apart, because they mean different things:

- a **failed model call** (timeout, server error...) is counted by kind, left out of the score and
  counted as wrong in the strict score;
- an **unscored** sample (no reference to compare with: ``Score.metadata["unscored"]``, or the
  older ``error_kind: "no_reference"``) is not a failure of anything: it is left out of both;
- an answer **cut at the token limit** is scored as written, and counted as wrong in the strict
  score only by scorers that read the generated text (a log-likelihood scorer never does).
"""

from __future__ import annotations

import itertools
from collections import Counter, defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path

from clinieval.analysis.uncertainty import bootstrap_ci
from clinieval.records.sample_record import SampleRecord
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
    """The strict score: failed calls (and cut answers, for scorers that read them) counted as 0."""
    unparsed: int
    errors: dict[str, int] = field(default_factory=dict)
    truncated: int = 0
    """Scored answers the model stopped at the token limit (``finish_reason == "length"``): scored
    as written in ``mean``, counted as wrong in ``mean_failures_as_wrong``. Zero for a scorer that
    does not read the generated text."""
    unscored: int = 0
    """Samples with nothing to score against (no reference): in neither mean, not a failure."""

    def to_dict(self) -> JSON:
        return asdict(self)


@dataclass(slots=True)
class _Tally:
    ok: list[float]
    wrong: list[float]
    errors: Counter[str]
    unparsed: int
    truncated: int
    unscored: int


NO_REFERENCE = "no_reference"


def unscored_reason(score: Score) -> str | None:
    """Why a score has no value although nothing failed (no reference), or None."""
    reason = score.metadata.get("unscored")
    if reason:
        return str(reason)
    return NO_REFERENCE if score.metadata.get("error_kind") == NO_REFERENCE else None


def _per_sample(scores: list[tuple[str, Score, bool]]) -> _Tally:
    """Average repeats within each sample; failures are kept apart, not averaged in, and a
    truncated answer counts as wrong in the strict view."""
    ok: dict[str, list[float]] = defaultdict(list)
    as_wrong: dict[str, list[float]] = defaultdict(list)
    errors: Counter[str] = Counter()
    unparsed = truncated = unscored = 0
    for sample_id, s, cut in scores:
        if s.value is None and unscored_reason(s) is not None:
            unscored += 1
            continue
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
    return _Tally(mean_ok, mean_wrong, errors, unparsed, truncated, unscored)


def _truncated(record: SampleRecord) -> bool:
    return record.output is not None and record.output.ok and record.output.finish_reason == "length"


def summarize(
    records: Sequence[SampleRecord], scorer_names: Sequence[str], reads_text: Collection[str] | None = None
) -> list[ScorerSummary]:
    """One summary per scorer name. ``reads_text`` names the scorers that read the generated text
    (only their strict score counts a cut answer as wrong); None: every scorer does."""
    out: list[ScorerSummary] = []
    for name in scorer_names:
        cuts = reads_text is None or name in reads_text
        pairs = [(r.sample.id, r.scores[name], cuts and _truncated(r)) for r in records if name in r.scores]
        tally = _per_sample(pairs)
        ok, wrong, errors = tally.ok, tally.wrong, tally.errors
        # No scored sample: mean and CI are both shown as NaN, "no data", rather than an error.
        lo, hi = bootstrap_ci(ok) if ok else (float("nan"), float("nan"))
        out.append(
            ScorerSummary(
                scorer=name,
                samples=len(pairs),
                scored=len(pairs) - sum(errors.values()) - tally.unscored,
                mean=sum(ok) / len(ok) if ok else float("nan"),
                ci_low=lo,
                ci_high=hi,
                mean_failures_as_wrong=sum(wrong) / len(wrong) if wrong else float("nan"),
                unparsed=tally.unparsed,
                errors=dict(errors),
                truncated=tally.truncated,
                unscored=tally.unscored,
            )
        )
    return out


ECHO_WARN_SHARE = 0.1
"""Share of a run's answers that may echo their prompt before the run warns: one echo in a long run
can be a model quoting the question; more than a tenth is a model that does not answer."""

ECHO_FIX = (
    "a base model behind a chat template answers this way; try the completions endpoint "
    "(`openai-completions:` spec) or a chat/instruct model"
)


@dataclass(frozen=True, slots=True)
class EchoCount:
    """How many of a run's answers mostly repeat what the model was sent.

    Why apart from the scorers: a base model served behind a chat template (``python -m
    llama_cpp.server`` falls back to llama-2's) answers with its own prompt, and a scorer that finds
    a choice in the prompt's "answer with yes, no or maybe" scores it. Counted from the records
    (answer text against the messages sent), so every command that runs a model warns the same way
    whatever its scorers read, and the count lands in the run's ``summary.json``."""

    echoed: int = 0
    answers: int = 0

    @property
    def share(self) -> float:
        return self.echoed / self.answers if self.answers else 0.0

    @property
    def warns(self) -> bool:
        """Whether more than :data:`ECHO_WARN_SHARE` of the answers echo their prompt."""
        return self.share > ECHO_WARN_SHARE

    def message(self) -> str:
        """The warning, with the count, the share and the likely cause (no patient text)."""
        return (
            f"{self.echoed} of {self.answers} answers ({self.share:.0%}) mostly repeat their prompt: "
            f"{ECHO_FIX}"
        )

    def __add__(self, other: EchoCount) -> EchoCount:
        return EchoCount(self.echoed + other.echoed, self.answers + other.answers)

    def to_dict(self) -> JSON:
        return {"count": self.echoed, "of": self.answers, "share": round(self.share, 4)}

    @classmethod
    def from_dict(cls, data: Mapping[str, object]) -> EchoCount:
        count, of = data.get("count", 0), data.get("of", 0)
        return cls(int(count) if isinstance(count, int) else 0, int(of) if isinstance(of, int) else 0)


def count_echoes(
    answers: Iterable[tuple[str, Sequence[str]]], options: Iterable[Sequence[str]] | None = None
) -> EchoCount:
    """Echoes among ``(answer text, texts the model was sent)`` pairs: the one count every command
    uses, whether its answers are run records or a benchmark's own (AutoMedEval's responses).
    ``options``, beside the pairs, are each question's choices: naming one, even as its whole
    lettered line, is an answer, not an echo (as the choice reader takes it)."""
    from clinieval.scoring.choices import option_phrases
    from clinieval.scoring.echo import echoes_prompt

    echoed = total = 0
    for (text, sent), choices in zip(answers, options or itertools.repeat(()), strict=False):
        total += 1
        echoed += echoes_prompt(text, sent, keep=option_phrases(choices))
    return EchoCount(echoed, total)


def echo_count(records: Iterable[SampleRecord]) -> EchoCount:
    """Echoes among a run's successful generated answers (a failed call or a log-likelihood-only
    record has no answer to echo)."""
    answered = [(r.output.text, r) for r in records if r.output is not None and r.output.ok]
    return count_echoes(
        ((text, [m.content for m in r.messages]) for text, r in answered),
        (r.sample.choices for _, r in answered),
    )


ECHO_KEY = "echoed_prompt"
"""Where ``summary.json`` keeps the count: ``{"run": {"echoed_prompt": {"count", "of", "share"}}}``."""


def echo_under(folder: Path) -> EchoCount:
    """Every run's echo count under ``folder`` (a suite cell holds one run per arm), summed; a run
    older than the count adds nothing."""
    from clinieval.records.runs import run_infos_under

    total = EchoCount()
    for info in run_infos_under(folder):
        found = info.get(ECHO_KEY)
        total += EchoCount.from_dict(found) if isinstance(found, dict) else EchoCount()
    return total


def format_counts(counts: Mapping[str, int], empty: str = "-") -> str:
    """``a=1, b=2`` in key order, for error and issue counts on one line."""
    return ", ".join(f"{k}={v}" for k, v in sorted(counts.items())) or empty


STRICT_NOTE = (
    "strict: the score with failed model calls counted as wrong, and answers cut at the token limit "
    "too for scorers that read the answer's text"
)
COLUMNS = ("scorer", "n", "score", "95% CI", "strict", "unparsed", "truncated", "unscored", "errors")


def table_rows(summaries: Sequence[ScorerSummary]) -> list[list[str]]:
    """The summary table's cells as text, numbers never shortened."""
    rows: list[list[str]] = []
    for s in summaries:
        none = s.scored == 0  # nothing answered: no score, rather than "nan"
        counted = s.samples - s.unscored
        rows.append(
            [
                s.scorer,
                f"{s.scored}/{counted}",
                "-" if none else f"{s.mean:.3f}",
                "-" if none else f"{s.ci_low:.3f}-{s.ci_high:.3f}",
                "-"
                if s.mean_failures_as_wrong != s.mean_failures_as_wrong
                else f"{s.mean_failures_as_wrong:.3f}",
                str(s.unparsed),
                str(s.truncated),
                str(s.unscored),
                format_counts(s.errors),
            ]
        )
    return rows


def plain_table(summaries: Sequence[ScorerSummary]) -> str:
    """The summary as aligned plain text of any width: for pipes, files and CI logs, where a
    terminal's 80 columns would otherwise cut numbers off."""
    rows = [list(COLUMNS), *table_rows(summaries)]
    widths = [max(len(row[i]) for row in rows) for i in range(len(COLUMNS))]
    left = {0, len(COLUMNS) - 1}
    lines = [
        "  ".join(
            cell.ljust(w) if i in left else cell.rjust(w)
            for i, (cell, w) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in rows
    ]
    return "\n".join([*lines, STRICT_NOTE])


def render_table(summaries: Sequence[ScorerSummary], title: str) -> object:
    """A rich Table for a terminal (imported lazily: only the CLI renders). Cells fold rather than
    end in an ellipsis, so a narrow terminal never hides a number."""
    from rich.table import Table

    table = Table(title=title, caption=STRICT_NOTE)
    for col in COLUMNS:
        left = col in {"scorer", "errors"}
        table.add_column(col, justify="left" if left else "right", overflow="fold")
    for row in table_rows(summaries):
        table.add_row(*row)
    return table
