"""Every reader of model text against the independently written reading corpus.

``tests/data/reading-corpus/`` holds replies written by class for every reader (choice extraction,
the seven judge readers, MedEval's label reader) by someone who did not read the readers' code,
with what a careful reader reads: a value, or ``{"unparsed": REASON}``. ``frozen.jsonl`` was
written and frozen before the reading policy (docs/judge.md) was implemented; ``later.jsonl`` after,
by another writer who also never read the code. The policy's promises, measured on each half:

* **no silent misread**: a reader either reads what a careful reader reads, or leaves the reply
  unparsed; it never reads a value the reply does not commit to (every case, as its own test);
* **at most 10 % of readable replies left unparsed** (one test per half);
* every reader the project has is in :data:`READERS` and has cases in both halves, so a new
  reader joins the corpus or this test fails.

Each reader is called the way production calls it: judges through
:func:`clinieval.judge.quoted.read_masked` with the case's ``quoted`` material (what the judge
prompt carried from the data), AutoMedEval with its quoted material, choice extraction with the
prompt the answering model was sent.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from clinieval.benchmarks.automedeval.verdict import parse_scores
from clinieval.benchmarks.ehrnoteqa.scoring import ChoiceJudgeRubric, FreeTextJudgeRubric
from clinieval.benchmarks.medalign.scoring import MedAlignRubric
from clinieval.benchmarks.medeval.parsing import LABELS, read_label
from clinieval.judge.quoted import mask_for_judge, read_masked
from clinieval.judge.reference import ReferenceRubric
from clinieval.judge.rubric import VerdictParseError, parse_score, parse_yes_no
from clinieval.judge.verdict import REASONS
from clinieval.scoring.choices import read_choice

CORPUS = Path(__file__).parent / "data" / "reading-corpus"
HALVES = tuple(h for h in ("frozen", "later") if (CORPUS / f"{h}.jsonl").exists()) or ("frozen",)
UNPARSED_BUDGET = 0.10
"""The share of readable replies a reader may leave unparsed (issue 34)."""


class Unparsed(Exception):
    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


def _yes_no(value: float) -> str:
    return "yes" if value == 1.0 else "no"


def _quoted(case: dict[str, Any]) -> tuple[str, ...]:
    return tuple(case.get("quoted", ()))


def _prompt(case: dict[str, Any]) -> tuple[str, ...]:
    return (case["prompt"],) if case.get("prompt") else ()


def _choice(case: dict[str, Any]) -> Any:
    reading = read_choice(
        case["reply"], case["choices"], lettered=case.get("lettered", False), sent=_prompt(case)
    )
    if reading.index is None:
        raise Unparsed(reading.reason)
    return case["choices"][reading.index]


def _automedeval(case: dict[str, Any]) -> Any:
    return parse_scores(case["reply"], case.get("k", 3), _quoted(case), _prompt(case))


def _ehrnoteqa_mc(case: dict[str, Any]) -> Any:
    return _yes_no(
        read_masked(ChoiceJudgeRubric(), case["reply"], _quoted(case), _prompt(case)).values["correct"]
    )


def _ehrnoteqa_free(case: dict[str, Any]) -> Any:
    return read_masked(FreeTextJudgeRubric(), case["reply"], _quoted(case), _prompt(case)).values["correct"]


def _medalign(case: dict[str, Any]) -> Any:
    return read_masked(MedAlignRubric(), case["reply"], _quoted(case), _prompt(case)).values


def _reference(case: dict[str, Any]) -> Any:
    return _yes_no(
        read_masked(ReferenceRubric(), case["reply"], _quoted(case), _prompt(case)).values["correct"]
    )


def _generic_yes_no(case: dict[str, Any]) -> Any:
    return "yes" if parse_yes_no(mask_for_judge(case["reply"], _quoted(case), _prompt(case))) else "no"


def _score_1_5(case: dict[str, Any]) -> Any:
    return parse_score(mask_for_judge(case["reply"], _quoted(case), _prompt(case)), 1, 5)


def _medeval_label(case: dict[str, Any]) -> Any:
    labels = LABELS[case["task"]]
    label = read_label(case["reply"], labels, "paper", _prompt(case))
    if label is None:
        named = [w for w in labels if w in case["reply"].lower().split()]
        raise Unparsed("several_options" if len(named) > 1 else "no_verdict")
    return label


READERS: dict[str, Callable[[dict[str, Any]], Any]] = {
    "choice": _choice,  # scoring.choices.read_choice: choice_extract, the suite's PubMedQA
    "automedeval": _automedeval,  # automedeval.verdict.parse_scores
    "ehrnoteqa_mc": _ehrnoteqa_mc,  # ChoiceJudgeRubric: Appendix A.3's yes/no
    "ehrnoteqa_free": _ehrnoteqa_free,  # FreeTextJudgeRubric: Score: 0|1, Reasoning:
    "medalign": _medalign,  # MedAlignRubric: one JSON object
    "reference": _reference,  # ReferenceRubric: Verdict: yes|no, Reason:
    "yes_no": _generic_yes_no,  # rubric.parse_yes_no
    "score_1_5": _score_1_5,  # rubric.parse_score(text, 1, 5)
    "medeval_label": _medeval_label,  # medeval.parsing.read_label, the paper's qualified rule
}


@cache
def corpus(half: str) -> tuple[dict[str, Any], ...]:
    path = CORPUS / f"{half}.jsonl"
    return tuple(json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip())


def read(case: dict[str, Any]) -> Any:
    """The reader's value, or ``{"unparsed": reason}``."""
    try:
        return READERS[case["reader"]](case)
    except VerdictParseError as e:
        return {"unparsed": e.reason}
    except Unparsed as e:
        return {"unparsed": e.reason}


def _unparsed(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"unparsed"}


def _cases() -> list[Any]:
    return [pytest.param(case, id=f"{half}-{case['id']}") for half in HALVES for case in corpus(half)]


@pytest.mark.parametrize("case", _cases())
def test_no_silent_misread(case: dict[str, Any]) -> None:
    got = read(case)
    if _unparsed(got):
        assert got["unparsed"] in REASONS, got
        return
    assert got == case["expect"], f"{case['class']}: {case.get('note', '')}"


@pytest.mark.parametrize("half", HALVES)
def test_readable_replies_are_read(half: str) -> None:
    readable = [c for c in corpus(half) if not _unparsed(c["expect"])]
    left = [c["id"] for c in readable if _unparsed(read(c))]
    assert len(left) <= UNPARSED_BUDGET * len(readable), f"{len(left)}/{len(readable)} unparsed: {left}"


@pytest.mark.parametrize("half", HALVES)
def test_every_reader_is_in_the_corpus(half: str) -> None:
    counts = Counter(c["reader"] for c in corpus(half))
    assert set(counts) <= set(READERS), set(counts) - set(READERS)
    assert all(counts[name] >= 10 for name in READERS), counts
