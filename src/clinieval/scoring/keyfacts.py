"""Key-fact scoring: which of a sample's short answer keys a free-text answer states.

Built for sets whose gold is computed from structured data (the synthetic MedAlign set of
:mod:`clinieval.benchmarks.medalign.synth`): each sample lists in ``metadata["answer_keys"]`` the
values, dates and words a correct answer must contain ("7.2", "03/04/2021", "metformin"). Text
overlap metrics reward paraphrase of the gold sentence; this scorer asks only whether the facts
are there, deterministically, so its numbers can be checked by hand.

Matching, case-insensitive after Unicode NFKC and whitespace normalisation:

* a **date** key (``MM/DD/YYYY``, ``M/D/YYYY`` or ``YYYY-MM-DD``) matches the same calendar day
  written in any of those forms, or with the month's name ("March 4, 2021", "4 Mar 2021");
* a **number** key ("7.2", "3") matches a number token of equal value ("7.20" matches "7.2"),
  never part of a longer number ("17.25" does not match "7.2") nor a piece of a date;
* any other key matches as a whole phrase: not inside a longer word, any run of whitespace
  matching any other, spaces allowed around ``/`` ("130 / 85" matches "130/85").

Keys are facts, not prose: a count is matched in digits only ("2", not "two"), and a word key
("increased") is found even in a sentence that also says the opposite. A failed model call is
unscored (value None), never a miss.
"""

from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from decimal import Decimal

from clinieval.errors import UserError
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.scorers import AnswerScorer, Needs
from clinieval.types import Sample, Score

__all__ = [
    "KEYFACTS_SCORERS",
    "KEYS_FIELD",
    "KEY_FACTS",
    "KEY_FACTS_ALL",
    "KeyFacts",
    "KeyFactsAll",
    "answer_keys",
    "find_keys",
    "key_found",
]

KEYS_FIELD = "answer_keys"

_MONTHS: dict[str, int] = {}
for _i, _name in enumerate(
    (
        "january",
        "february",
        "march",
        "april",
        "may",
        "june",
        "july",
        "august",
        "september",
        "october",
        "november",
        "december",
    ),
    1,
):
    _MONTHS[_name] = _MONTHS[_name[:3]] = _i
_MONTHS["sept"] = 9
_MONTH = "|".join(sorted(_MONTHS, key=len, reverse=True))
_ORD = r"(?:st|nd|rd|th)?"

_KEY_DATE = re.compile(r"^(?:(\d{1,2})/(\d{1,2})/(\d{4})|(\d{4})-(\d{1,2})-(\d{1,2}))$")
_KEY_NUMBER = re.compile(r"^\d+(?:\.\d+)?$")
# Answer dates: (pattern, group numbers of year, month, day); a month-name group holds a name.
_ANSWER_DATES: tuple[tuple[re.Pattern[str], tuple[int, int, int]], ...] = (
    (re.compile(r"(?<!\d)(\d{1,2})/(\d{1,2})/(\d{4})(?!\d)"), (3, 1, 2)),
    (re.compile(r"(?<!\d)(\d{4})-(\d{1,2})-(\d{1,2})(?!\d)"), (1, 2, 3)),
    (re.compile(rf"\b({_MONTH})\.?\s+(\d{{1,2}}){_ORD},?\s+(\d{{4}})(?!\d)"), (3, 1, 2)),
    (re.compile(rf"(?<!\d)(\d{{1,2}}){_ORD}\s+(?:of\s+)?({_MONTH})\.?,?\s+(\d{{4}})(?!\d)"), (3, 2, 1)),
)
# A number token: not glued to a word before it, nor part of a longer number on either side.
_ANSWER_NUMBER = re.compile(r"(?<!\w)(?<!\d[.,])\d+(?:\.\d+)?(?![.,]?\d)")


def _normalise(text: str) -> str:
    return " ".join(unicodedata.normalize("NFKC", text).casefold().split())


def _as_date(year: str, month: str, day: str) -> date | None:
    m = _MONTHS.get(month.rstrip(".")) if not month.isdigit() else int(month)
    try:
        return None if m is None else date(int(year), m, int(day))
    except ValueError:
        return None


def _dates(text: str) -> tuple[set[date], list[tuple[int, int]]]:
    """The calendar dates written in ``text`` (normalised) and where they are."""
    found: set[date] = set()
    spans: list[tuple[int, int]] = []
    for pattern, (y, m, d) in _ANSWER_DATES:
        for hit in pattern.finditer(text):
            day = _as_date(hit.group(y), hit.group(m), hit.group(d))
            if day is not None:
                found.add(day)
                spans.append(hit.span())
    return found, spans


def _numbers(text: str, date_spans: list[tuple[int, int]]) -> set[Decimal]:
    """The number tokens of ``text`` outside its dates, by value."""
    chars = list(text)
    for start, end in date_spans:
        chars[start:end] = " " * (end - start)
    return {Decimal(m.group()) for m in _ANSWER_NUMBER.finditer("".join(chars))}


def _phrase(key: str) -> re.Pattern[str]:
    """A whole-phrase pattern for a text key: flexible whitespace, no partial words or numbers."""
    body = r"\s*/\s*".join(r"\s+".join(re.escape(w) for w in part.split()) for part in key.split("/"))
    head = r"(?<!\w)(?<!\d[.,])" if key[0].isdigit() else r"(?<!\w)" if key[0].isalnum() else ""
    tail = r"(?![.,/]?\d)" if key[-1].isdigit() else r"(?!\w)" if key[-1].isalnum() else ""
    return re.compile(head + body + tail)


@dataclass(frozen=True, slots=True)
class _Answer:
    """An answer prepared once for all its keys."""

    text: str
    dates: set[date]
    numbers: set[Decimal]

    @classmethod
    def of(cls, raw: str) -> _Answer:
        text = _normalise(raw)
        dates, spans = _dates(text)
        return cls(text, dates, _numbers(text, spans))

    def has(self, key: str) -> bool:
        k = _normalise(key)
        if m := _KEY_DATE.match(k):
            y, mo, d = (m.group(3), m.group(1), m.group(2)) if m.group(3) else m.group(4, 5, 6)
            day = _as_date(y, mo, d)
            if day is not None:
                return day in self.dates
        if _KEY_NUMBER.match(k):
            return Decimal(k) in self.numbers
        return bool(_phrase(k).search(self.text))


def key_found(key: str, answer: str) -> bool:
    """Whether ``answer`` states ``key`` under the module's matching rules."""
    return _Answer.of(answer).has(key)


def find_keys(keys: Sequence[str], answer: str) -> tuple[list[str], list[str]]:
    """``(found, missing)``: the keys ``answer`` states and those it does not, in key order."""
    m = match_keys(keys, answer)
    return m.found, m.missing


@dataclass(frozen=True, slots=True)
class KeyFactMatch:
    """Recall, precision and their F-score of one answer against its keys.

    Recall is the share of keys found. Precision asks how much of what the answer states is a key:
    the answer's stated facts are its distinct dates and numbers (what a record dump is full of)
    plus the word keys it states, and precision is the share of those that are keys found. An
    answer that states no date or number and no word key has nothing wrong in it: precision 1.
    """

    found: list[str]
    missing: list[str]
    stated: int
    """Distinct dates and numbers in the answer, plus the word keys found."""

    @property
    def recall(self) -> float:
        return len(self.found) / (len(self.found) + len(self.missing))

    @property
    def precision(self) -> float:
        return 1.0 if self.stated == 0 else min(1.0, len(self.found) / self.stated)

    @property
    def f1(self) -> float:
        p, r = self.precision, self.recall
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)


def match_keys(keys: Sequence[str], answer: str) -> KeyFactMatch:
    """Which keys ``answer`` states, and how many facts it states in all (see :class:`KeyFactMatch`)."""
    prepared = _Answer.of(answer)
    found = [k for k in keys if prepared.has(k)]
    words = sum(1 for k in found if not _is_fact_key(k))
    stated = len(prepared.dates) + len(prepared.numbers) + words
    return KeyFactMatch(found, [k for k in keys if k not in found], stated)


def _is_fact_key(key: str) -> bool:
    """A date or number key (counted among the answer's dates and numbers), not a word key."""
    k = _normalise(key)
    return bool(_KEY_DATE.match(k) or _KEY_NUMBER.match(k))


def parse_keys(raw: object, where: str) -> list[str]:
    """Answer keys from a list of strings or that list JSON-encoded (as a CSV cell holds it); a
    UserError starting with ``where`` for anything else, an empty list included."""
    if isinstance(raw, str):
        text = raw
        try:
            raw = json.loads(text)
        except json.JSONDecodeError:
            raise UserError(f"{where}: {KEYS_FIELD} is not a JSON list of strings: {text[:80]!r}") from None
    if not isinstance(raw, list | tuple) or not all(isinstance(k, str) and k.strip() for k in raw):
        raise UserError(f"{where}: {KEYS_FIELD} must be a list of non-empty strings, not {raw!r}")
    if not raw:
        raise UserError(f"{where}: {KEYS_FIELD} is empty; there is nothing to look for")
    return list(raw)


def answer_keys(sample: Sample, scorer: str = "key_facts") -> list[str]:
    """The sample's answer keys, or a UserError naming the sample when they are absent or malformed."""
    raw = sample.metadata.get(KEYS_FIELD)
    where = f"scorer {scorer}: sample {sample.id!r}"
    if raw is None:
        raise UserError(
            f"{where} has no {KEYS_FIELD} in its metadata; key-fact scoring needs a list of the "
            "facts a correct answer states (e.g. the answer_keys column of a synthetic MedAlign set)"
        )
    return parse_keys(raw, where)


class _KeysScorer(AnswerScorer):
    """A scorer of the answer against the sample's answer keys: a set without keys is refused
    even when the model call failed, so the mistake shows on the first sample."""

    __slots__ = ()

    def check(self, record: SampleRecord) -> None:
        answer_keys(record.sample, self.name)


@dataclass(frozen=True, slots=True)
class KeyFacts(_KeysScorer):
    """Share of the sample's answer keys found in the answer; with ``require_all``, 1 only if all are."""

    name: str = "key_facts"
    needs: Needs = "generate"
    needs_choices: bool = False
    require_all: bool = False

    def score_text(self, record: SampleRecord, text: str) -> Score:
        keys = answer_keys(record.sample, self.name)
        found, missing = find_keys(keys, text)
        share = len(found) / len(keys)
        value = float(not missing) if self.require_all else share
        explanation = f"{len(found)} of {len(keys)} key facts found" + (
            f"; missing {', '.join(missing)}" if missing else ""
        )
        return Score(
            value=value,
            explanation=explanation,
            metadata={"found": found, "missing": missing, "all_found": not missing},
        )


@dataclass(frozen=True, slots=True)
class KeyFactsAll(KeyFacts):
    """All or nothing: 1 when every answer key is found, else 0 (``key_facts_all``)."""

    name: str = "key_facts_all"
    require_all: bool = True


@dataclass(frozen=True, slots=True)
class KeyFactsF1(_KeysScorer):
    """The F-score of key-fact recall and precision (``key_facts_f1``): an answer that copies the
    record states every key but is mostly other dates and numbers, and scores low; the right short
    answer scores 1. Recall and precision are kept in the metadata."""

    name: str = "key_facts_f1"
    needs: Needs = "generate"
    needs_choices: bool = False

    def score_text(self, record: SampleRecord, text: str) -> Score:
        keys = answer_keys(record.sample, self.name)
        m = match_keys(keys, text)
        return Score(
            value=m.f1,
            explanation=(
                f"{len(m.found)} of {len(keys)} key facts found among {m.stated} stated facts "
                f"(recall {m.recall:.2f}, precision {m.precision:.2f})"
            ),
            metadata={"found": m.found, "missing": m.missing, "recall": m.recall, "precision": m.precision},
        )


KEY_FACTS = KeyFacts()
KEY_FACTS_ALL = KeyFactsAll()
KEY_FACTS_F1 = KeyFactsF1()
KEYFACTS_SCORERS: tuple[KeyFacts | KeyFactsF1, ...] = (KEY_FACTS, KEY_FACTS_ALL, KEY_FACTS_F1)
"""The key-fact scorers: ``key_facts`` (share found), ``key_facts_all`` (all or 0) and
``key_facts_f1`` (recall and precision together, which does not reward copying the record)."""
