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

from clinieval.sample_record import SampleRecord
from clinieval.types import ErrorKind

OUTCOMES = frozenset({ErrorKind.CONTENT_FILTER.value})
"""Error kinds that are the model's (or its provider's) answer, not a failure of the run."""

FIXES: Mapping[str, str] = {
    ErrorKind.TIMEOUT.value: "raise --timeout, or lower --concurrency (requests wait in the server's queue)",
    ErrorKind.RATE_LIMIT.value: "lower --concurrency or raise --retries; run the same command again later",
    ErrorKind.SERVER_ERROR.value: "see the server's log; run the same command again to ask only these items",
    ErrorKind.CONNECTION.value: "is the server still running? then run the same command again",
    ErrorKind.BAD_REQUEST.value: "the server refused the request: see error_message in samples.jsonl",
    ErrorKind.CONTEXT_LENGTH.value: "lower --max-context (or pass the server's context size) so records are "
    "cut to fit, or use a longer-context model",
    ErrorKind.BACKEND.value: "the local model failed: see error_message in samples.jsonl; run again",
    ErrorKind.NO_CONTENT.value: "raise --max-tokens (a reasoning model spent its budget thinking)",
}


@dataclass(slots=True)
class FailureReport:
    """Items (sample, repeat) whose model calls failed, by kind of failure."""

    total: int
    failed: int = 0
    kinds: Counter[str] = field(default_factory=Counter)

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


def record_failure(record: SampleRecord) -> str | None:
    """The kind of the record's failed model call, if it failed (outcomes such as a content-filter
    refusal are not failures)."""
    for out in (record.output, record.loglik):
        kind = None if out is None else out.error_kind
        if kind is not None and kind.value not in OUTCOMES:
            return kind.value
    return None


def failure_report(records: Iterable[SampleRecord]) -> FailureReport:
    report = FailureReport(total=0)
    for record in records:
        report.total += 1
        kind = record_failure(record)
        if kind is not None:
            report.failed += 1
            report.kinds[kind] += 1
    return report


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
