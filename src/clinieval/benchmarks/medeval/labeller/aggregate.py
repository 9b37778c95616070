"""From a report's classified mentions to one value per code: CheXpert's aggregation.

Kept apart from the pipeline (no spaCy here) because this is where the labels are decided, and it
is easiest to read and test on its own.

* A code mentioned more than once takes the strongest of its values: positive over unknown over
  negative. "No pneumothorax ... small apical pneumothorax" is positive; "no effusion ... possible
  effusion" is unknown.
* A phrase may imply another code (CheXpert: affirmed "chf" adds Cardiomegaly as unknown).
* The no-finding code is positive when no mention, other than of its ignored codes, is positive or
  unknown: mentions of other findings (CheXpert's ``no_finding.txt``) count, negatives do not. It is
  never negative: a report with findings leaves it blank, as CheXpert does.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from clinieval.benchmarks.medeval.items import CodeValue
from clinieval.benchmarks.medeval.labeller.rules import DomainRules, Phrase

STRENGTH: dict[CodeValue, int] = {"absent": 0, "negative": 1, "unknown": 2, "positive": 3}
"""How values combine for one code (CheXpert: negative and uncertain give uncertain, anything and
positive gives positive)."""

AFFIRMED: frozenset[CodeValue] = frozenset({"positive", "unknown"})


@dataclass(frozen=True, slots=True)
class Mention:
    """A phrase found in a report, classified in its context. ``code`` is a column or
    :data:`~.rules.OTHER_FINDING`; ``value`` is never absent."""

    code: str
    value: CodeValue
    phrase: Phrase


def combine(values: Iterable[CodeValue]) -> CodeValue:
    """The value of a code mentioned with these values."""
    return max(values, key=STRENGTH.__getitem__, default="absent")


def implied(mentions: Iterable[Mention], rules: DomainRules) -> list[Mention]:
    """The extra mentions that affirmed phrases imply (CheXpert's chf -> Cardiomegaly)."""
    extra = []
    for m in mentions:
        target = rules.implies.get(m.phrase.text)
        if target is not None and m.value in AFFIRMED:
            extra.append(Mention(target[0], target[1], m.phrase))
    return extra


def no_finding(mentions: Iterable[Mention], rules: DomainRules) -> CodeValue:
    """Positive unless something other than the ignored codes is positive or unknown."""
    blocking = (m for m in mentions if m.code not in rules.no_finding_ignores and m.value in AFFIRMED)
    return "absent" if any(True for _ in blocking) else "positive"


def aggregate(mentions: list[Mention], rules: DomainRules) -> dict[str, CodeValue]:
    """One value per code of ``rules``, in their order."""
    found = [*mentions, *implied(mentions, rules)]
    by_code: dict[str, list[CodeValue]] = {}
    for m in found:
        by_code.setdefault(m.code, []).append(m.value)
    labels = {code: combine(by_code.get(code, ())) for code in rules.codes}
    if rules.no_finding is not None:
        labels[rules.no_finding] = no_finding(found, rules)
    return labels
