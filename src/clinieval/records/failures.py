"""What a finished run left failed, and what to do about it.

A run whose items failed after every retry (timeouts, a server error, a prompt over the context
window) has written true records, but its score is over fewer items than asked and may be biased
towards the easy ones. Before this module such a run exited 0 and the failures were visible only in
``summary.json``. Now the command ends with one line per failure kind, its count and the likely
fix, and exits with :data:`clinieval.errors.EXIT_FAILED_ITEMS` unless the user accepted failures
(``--allow-failures [FRACTION]``, as inspect_ai's ``fail_on_error``).

A provider's content-filter refusal is the model's answer, not a failure of the run: MedAlign
reports it as an outcome, and it is counted in the summary but never fails the command.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.records.sample_record import SampleRecord
from clinieval.types import ErrorKind

OUTCOMES = frozenset({ErrorKind.CONTENT_FILTER.value})
"""Error kinds that are the model's (or its provider's) answer, not a failure of the run."""

FIXES: Mapping[str, str] = {
    ErrorKind.TIMEOUT.value: "raise --timeout, or lower --concurrency (requests wait in the server's queue)",
    ErrorKind.RATE_LIMIT.value: "lower --concurrency or raise --retries; run the same command again later",
    ErrorKind.SERVER_ERROR.value: "see the server's log; run the same command again to ask only these items",
    ErrorKind.CONNECTION.value: "is the server still running? then run the same command again",
    ErrorKind.BAD_REQUEST.value: "the server, or a proxy, redirect or login page in front of it, refused the "
    "request: see error_message in samples.jsonl",
    ErrorKind.CONTEXT_LENGTH.value: "lower --max-context (or pass the server's context size) so records are "
    "cut to fit, or use a longer-context model",
    ErrorKind.BACKEND.value: "the local model failed: see error_message in samples.jsonl; run again",
    ErrorKind.NO_CONTENT.value: "raise --max-tokens (a reasoning model spent its budget thinking)",
}

REFUSED_FIX = (
    "the provider's content filter refused the prompts: use a model without that filter (a local one)"
)
"""The fix when every answer was a refusal: not a failure of the run, but no score either."""


@dataclass(slots=True)
class FailureReport:
    """Items (sample, repeat) whose model calls failed, by kind of failure."""

    total: int
    failed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    example: str | None = None
    """The first failure's error message, on one line and cleared of anything copied from the
    prompt (:func:`example_message`): what the transport said, which a kind alone does not."""

    @property
    def fraction(self) -> float:
        return self.failed / self.total if self.total else 0.0

    def accepted(self, allowed: float | None) -> bool:
        """Whether the failures are within what the user accepted (None: none accepted)."""
        if not self.failed:
            return True
        return allowed is not None and self.fraction <= allowed

    def lines(self) -> list[str]:
        """One line per kind: count, and the likely fix."""
        return [
            f"  {kind}: {count} — {FIXES.get(kind, 'see error_message in samples.jsonl')}"
            for kind, count in sorted(self.kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        ]

    def headline(self) -> str:
        return f"{self.failed} of {self.total} items failed after retries ({self.fraction:.0%})"

    @property
    def everything(self) -> bool:
        """Whether every item failed: no score at all, which no --allow-failures accepts."""
        return self.total > 0 and self.failed == self.total

    def example_line(self) -> str | None:
        """``  for example: MESSAGE`` for the console, or None when no message was recorded."""
        return None if self.example is None else f"  for example: {self.example}"


def record_failure(record: SampleRecord) -> str | None:
    """The kind of the record's failed model call, if it failed (outcomes such as a content-filter
    refusal are not failures)."""
    for out in (record.output, record.loglik):
        kind = None if out is None else out.error_kind
        if kind is not None and kind.value not in OUTCOMES:
            return kind.value
    return None


EXAMPLE_CHARS = 160


def example_message(record: SampleRecord) -> str | None:
    """The record's failure message fit for the console: its first line, cut to
    :data:`EXAMPLE_CHARS`, with any run of words copied from the messages sent blanked to ``[…]``.

    Why the blanking: a server's error body may quote the request (a 400 that repeats the prompt),
    and patient text never goes to the console; the transport's own words ("timed out after 2 s
    waiting for the answer's headers from 127.0.0.1:8080") are what tells the user what to fix."""
    from clinieval.scoring.echo import copied_spans

    for out in (record.output, record.loglik):
        message = None if out is None or out.error_kind is None else out.error_message
        if message:
            break
    else:
        return None
    line = next((x.strip() for x in message.splitlines() if x.strip()), "")
    spans = copied_spans(line, [m.content for m in record.messages])
    for start, end in reversed(spans):
        line = f"{line[:start]}[…]{line[end:]}"
    return line if len(line) <= EXAMPLE_CHARS else line[: EXAMPLE_CHARS - 1] + "…"


def failure_report(records: Iterable[SampleRecord]) -> FailureReport:
    report = FailureReport(total=0)
    refused: str | None = None  # a refusal's message, the example when nothing else failed
    for record in records:
        report.total += 1
        kind = record_failure(record)
        if kind is not None:
            report.failed += 1
            report.kinds[kind] += 1
            report.example = report.example or example_message(record)
        elif record.error_kind() is not None:
            refused = refused or example_message(record)
    report.example = report.example or refused
    return report


def failed_kinds_under(folder: Path) -> Counter[str]:
    """The failed items by kind that every run under ``folder`` recorded in its ``summary.json``
    (a suite cell holds one run per arm): what the suite's end lines give the fixes of."""
    from clinieval.records.runs import run_infos_under

    kinds: Counter[str] = Counter()
    for info in run_infos_under(folder):
        failed = info.get("failed_items", {})
        recorded = failed.get("kinds", {}) if isinstance(failed, dict) else {}
        kinds.update({str(k): int(v) for k, v in recorded.items() if isinstance(v, int)})
    return kinds


def fix_lines(kinds: Mapping[str, int]) -> list[str]:
    """One line per failure kind with its count and fix, as a run prints them."""
    return FailureReport(total=0, failed=sum(kinds.values()), kinds=Counter(kinds)).lines()


def parse_allowed(value: str | None) -> float | None:
    """``--allow-failures`` as given: None (not given), '' or 'all' (any number), or a fraction."""
    from clinieval.errors import UserError

    if value is None:
        return None
    if value in {"", "all"}:
        return 1.0
    try:
        fraction = float(value)
    except ValueError:
        fraction = -1.0
    if not 0.0 <= fraction <= 1.0:
        raise UserError(
            f"--allow-failures {value!r}: expected a fraction from 0 to 1 (0.05 accepts 5% failed items)"
        )
    return fraction
