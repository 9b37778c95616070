"""A judging pass's failures by kind, each with the likely fix, for the console.

``scores/NAME.summary.json`` counts every failure, but a count in a file nobody opens hides
them: a pass once printed "0/3 answers scored; 1 unparsed judge replies" and exited 0 while two
judge calls had failed because the prompt did not fit the judge's context. So every command that
judges prints these lines under its summary line, and :func:`pass_failed` is the one rule for
whether the pass counts as failed:

* a **failed judge call** (``judge_errors``: timeout, context length, refusal, ...) means some
  items were not judged for a reason the user can usually fix; the command exits with
  :data:`clinieval.errors.EXIT_FAILED_ITEMS` unless told failures are acceptable;
* an **unparsed reply** is the judge's own outcome: the judge was asked and answered, just not
  in the rubric's format. It is reported with its fix but does not fail the pass by itself (a tiny
  judge that misses the format now and then is the demo's normal case, and its count is in the
  scores) — unless the pass scored nothing at all (:func:`scored_nothing`: "0/10 answers
  scored" is no result) or more of it than ``--allow-failures FRACTION`` accepts
  (:func:`unscored_share`);
* an **answer that failed in the run** was never sent to the judge; it is listed so the unscored
  count adds up, and fixing it is the run's business, not the judge's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.judge.run import JudgeSummary
from clinieval.types import ErrorKind

_RETRY = "run the same command again: finished calls come from the cache"

CALL_FIXES: Mapping[ErrorKind, str] = {
    ErrorKind.CONTENT_FILTER: (
        "the judge's provider refused the prompt: use a judge without that filter (a local one)"
    ),
    ErrorKind.RATE_LIMIT: (
        f"the judge server is rate-limiting: lower --concurrency or raise --retries, then {_RETRY}"
    ),
    ErrorKind.SERVER_ERROR: f"the judge server failed (see its log); {_RETRY}",
    ErrorKind.TIMEOUT: f"raise --timeout or lower --concurrency, then {_RETRY}",
    ErrorKind.CONNECTION: f"is the judge server running and reachable at the --judge URL? {_RETRY}",
    ErrorKind.BAD_REQUEST: (
        "the judge server refused the request: check the model name in --judge and the server's log"
    ),
    ErrorKind.CONTEXT_LENGTH: "use a longer-context judge (--n-ctx for an embedded judge)",
    ErrorKind.BACKEND: f"the embedded judge failed (memory?): lower --n-ctx, then {_RETRY}",
    ErrorKind.NO_CONTENT: (
        "the judge's reply held no text (a reasoning model out of budget?): raise --max-tokens"
    ),
}
"""The likely fix of each kind of failed judge call, as a user would apply it on the command line."""

UNPARSED_FIX = (
    "the judge did not answer in the rubric's format: a larger or instruction-tuned judge model follows it"
)
AT_LIMIT_FIX = (
    "{n} stopped unfinished, at the reply limit or the end of the judge's context: raise --max-tokens "
    "(or --n-ctx for an embedded judge)"
)
ANSWER_FAILED_FIX = "the model under test failed these in the run, so they were not judged"


@dataclass(frozen=True, slots=True)
class Failure:
    """One kind of failure in a pass: what it is, how many, and what to do about it."""

    kind: str
    count: int
    unit: str
    fix: str

    def line(self) -> str:
        return f"  {self.kind}: {self.count} {self.unit} — {self.fix}"


def call_fix(kind: str, *, shrink: str | None = None) -> str:
    """The fix for a failed judge call of ``kind``. ``shrink`` names the option that makes this
    rubric's prompt shorter (``--snippets``), which is the cheaper fix for a prompt too long."""
    try:
        known = ErrorKind(kind)
    except ValueError:
        return "see error_kind and the messages in the scores file"
    fix = CALL_FIXES[known]
    if known is ErrorKind.CONTEXT_LENGTH:
        shorter = f"lower {shrink} or " if shrink else ""
        return f"the judge prompt did not fit the judge's context: {shorter}{fix}"
    return fix


def failures(
    summary: JudgeSummary, *, shrink: str | None = None, scores: Path | None = None
) -> list[Failure]:
    """Every kind of failure in the pass, failed calls first (they fail it), most common first.
    ``scores``: the pass's scores file, where each unparsed reply's ``parse_error`` says why."""
    calls = sorted(summary.judge_errors.items(), key=lambda kv: (-kv[1], kv[0]))
    out = [Failure(kind, n, "judge calls", call_fix(kind, shrink=shrink)) for kind, n in calls]
    if summary.parse_failures:
        fix = UNPARSED_FIX
        if summary.unparsed_at_limit:
            fix = f"{fix}; {AT_LIMIT_FIX.format(n=summary.unparsed_at_limit)}"
        why = sorted(summary.unparsed_reasons.items(), key=lambda kv: (-kv[1], kv[0]))
        if why:
            fix = f"{fix} (why: {', '.join(f'{k} {n}' for k, n in why)})"
        if scores is not None:
            fix = f"{fix}; see parse_error in {scores}"
        out.append(Failure("unparsed", summary.parse_failures, "judge replies", fix))
    for kind, n in sorted(summary.answer_failures.items(), key=lambda kv: (-kv[1], kv[0])):
        out.append(Failure(kind, n, "answers", ANSWER_FAILED_FIX))
    return out


def pass_failed(summary: JudgeSummary) -> bool:
    """Whether any judge call failed: the pass finished, but some items were not judged."""
    return summary.failed_calls > 0


def scored_nothing(summary: JudgeSummary) -> bool:
    """Whether the pass sent answers to the judge and scored none of them, whatever the reason
    (failed calls, unreadable replies): no result, which no ``--allow-failures`` accepts."""
    return summary.judged > 0 and summary.scored == 0


def unscored_share(summaries: Sequence[JudgeSummary]) -> tuple[int, int]:
    """(unscored, judged): answers sent to the judge that got no score (failed calls and unparsed
    replies alike), and all answers sent, over the passes; what ``--allow-failures FRACTION`` bounds."""
    judged = sum(s.judged for s in summaries)
    return judged - sum(min(s.scored, s.judged) for s in summaries), judged


__all__ = [
    "ANSWER_FAILED_FIX",
    "CALL_FIXES",
    "UNPARSED_FIX",
    "Failure",
    "call_fix",
    "failures",
    "pass_failed",
    "scored_nothing",
    "unscored_share",
]
