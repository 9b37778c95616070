"""Every judge's reply parser against one shared corpus of adversarial replies.

``tests/data/judge-replies.jsonl`` holds replies a careful reader would not misread: a rationale
that quotes scores ("Doctor 1: 3 key facts"), quoted answers, echoed prompts and worked examples,
self-corrections, full-width colons, markdown, decimals, ranges, missing, extra and duplicated
doctors, a verdict before its rationale. Each case names the judges it is written for and the
answer a careful reader gives: the verdict, or ``{"unparsed": REASON}`` with the typed reason
(:data:`clinieval.judge.verdict.REASONS`). Every case also runs through every other judge, which
must either read a verdict in its own domain or raise :class:`VerdictParseError` with a reason:
never crash.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from difflib import SequenceMatcher
from functools import cache
from pathlib import Path
from typing import Any

import pytest

from clinieval.benchmarks.automedeval.prompts import EXAMPLE_REPLY
from clinieval.benchmarks.automedeval.verdict import parse_scores, rationale
from clinieval.benchmarks.ehrnoteqa.scoring import ChoiceJudgeRubric, FreeTextJudgeRubric
from clinieval.benchmarks.medalign.scoring import MedAlignRubric
from clinieval.judge.reference import ReferenceRubric
from clinieval.judge.rubric import VerdictParseError, parse_score, parse_yes_no
from clinieval.judge.verdict import REASONS
from clinieval.judge.verdict_numbered import ECHO_RUN

CORPUS = Path(__file__).parent / "data" / "judge-replies.jsonl"


@dataclass(frozen=True, slots=True)
class Read:
    """What one judge's parser made of a reply: an answer in the corpus's terms, and a rationale."""

    answer: Any
    rationale: str | None = None


def _yes_no(value: float) -> str:
    return "yes" if value == 1.0 else "no"


def _automedeval(reply: str, k: int) -> Read:
    return Read(parse_scores(reply, k), rationale(reply))


def _choice(reply: str, k: int) -> Read:
    return Read(_yes_no(ChoiceJudgeRubric().parse(reply).values["correct"]))


def _yes_no_generic(reply: str, k: int) -> Read:
    return Read("yes" if parse_yes_no(reply) else "no")


def _reference(reply: str, k: int) -> Read:
    verdict = ReferenceRubric().parse(reply)
    return Read(_yes_no(verdict.values["correct"]), verdict.rationale)


def _free(reply: str, k: int) -> Read:
    verdict = FreeTextJudgeRubric().parse(reply)
    return Read(verdict.values["correct"], verdict.rationale)


def _score_1_5(reply: str, k: int) -> Read:
    return Read(parse_score(reply, 1, 5))


def _medalign(reply: str, k: int) -> Read:
    verdict = MedAlignRubric().parse(reply)
    return Read(verdict.values, verdict.rationale)


JUDGES: dict[str, Callable[[str, int], Read]] = {
    "automedeval": _automedeval,  # verdict.parse_scores / verdict.rationale
    "ehrnoteqa_mc": _choice,  # ChoiceJudgeRubric: Appendix A.3's yes/no
    "ehrnoteqa_free": _free,  # FreeTextJudgeRubric: Score: 0|1, Reasoning:
    "medalign": _medalign,  # MedAlignRubric: one JSON object
    "reference": _reference,  # ReferenceRubric: Verdict: yes|no, Reason:
    "yes_no": _yes_no_generic,  # rubric.parse_yes_no
    "score_1_5": _score_1_5,  # rubric.parse_score(text, 1, 5)
}
"""Every judge's parser, under the name the corpus uses for it."""

DOMAINS: dict[str, Callable[[Any], bool]] = {
    "automedeval": lambda a: all(s in range(1, 6) for s in a),
    "ehrnoteqa_mc": lambda a: a in ("yes", "no"),
    "ehrnoteqa_free": lambda a: a in (0.0, 1.0),
    "medalign": lambda a: a["score"] in (1.0, 2.0, 3.0, 4.0, 5.0),
    "reference": lambda a: a in ("yes", "no"),
    "yes_no": lambda a: a in ("yes", "no"),
    "score_1_5": lambda a: a in (1.0, 2.0, 3.0, 4.0, 5.0),
}


@cache
def corpus() -> tuple[dict[str, Any], ...]:
    return tuple(json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line.strip())


def read(judge: str, case: dict[str, Any]) -> Read:
    """The judge's reading of the case: a verdict, or ``{"unparsed": reason}``."""
    try:
        return JUDGES[judge](case["reply"], case.get("k", 3))
    except VerdictParseError as e:
        return Read({"unparsed": getattr(e, "reason", None)})


def _expected() -> list[Any]:
    return [
        pytest.param(judge, case, id=f"{case['id']}-{judge}") for case in corpus() for judge in case["expect"]
    ]


def _others() -> list[Any]:
    return [
        pytest.param(judge, case, id=f"{case['id']}-{judge}")
        for case in corpus()
        for judge in JUDGES
        if judge not in case["expect"]
    ]


@pytest.mark.parametrize(("judge", "case"), _expected())
def test_each_judge_reads_what_a_careful_reader_reads(judge: str, case: dict[str, Any]) -> None:
    got = read(judge, case)
    assert got.answer == case["expect"][judge], case.get("note", case["category"])
    wanted = case.get("rationale", {}).get(judge)
    if wanted is not None:
        assert got.rationale == wanted


@pytest.mark.parametrize(("judge", "case"), _others())
def test_every_judge_reads_every_reply_without_crashing(judge: str, case: dict[str, Any]) -> None:
    got = read(judge, case)
    if isinstance(got.answer, dict) and "unparsed" in got.answer:
        assert got.answer["unparsed"] in REASONS
    else:
        assert DOMAINS[judge](got.answer), got.answer


def test_the_corpus_covers_every_judge_and_every_trap() -> None:
    cases = corpus()
    assert len(cases) >= 40
    assert len({c["id"] for c in cases}) == len(cases)
    for case in cases:
        assert set(case["expect"]) <= set(JUDGES), case["id"]
        for answer in case["expect"].values():
            if isinstance(answer, dict) and "unparsed" in answer:
                assert answer["unparsed"] in REASONS, case["id"]
    for judge in JUDGES:
        assert sum(judge in c["expect"] for c in cases) >= 5, judge
    categories = {c["category"] for c in cases}
    for trap in (
        "rationale quoting scores",
        "quoted answers",
        "echoed prompt",
        "echoed worked example",
        "self-correction",
        "full-width colons",
        "bold markup",
        "decimal",
        "range",
        "missing doctor",
        "extra doctor",
        "duplicated doctor",
        "verdict before rationale",
        "lowercase score:",
        "multiple-choice answer",
    ):
        assert trap in categories, trap
    # the echo cases copy the one-shot example's reply (whole, or its analysis in part): they go
    # stale if the example changes
    flat = " ".join(EXAMPLE_REPLY.split())
    for case in (c for c in cases if c["category"] == "echoed worked example"):
        reply = " ".join(case["reply"].split())
        matcher = SequenceMatcher(None, reply, flat, autojunk=False)
        run = matcher.find_longest_match(0, len(reply), 0, len(flat))
        assert run.size >= ECHO_RUN, case["id"]


def test_every_unparsed_reply_says_why() -> None:
    """A failure carries a typed reason and a message a person can read, for every judge."""
    for case in corpus():
        for judge in JUDGES:
            try:
                JUDGES[judge](case["reply"], case.get("k", 3))
            except VerdictParseError as e:
                assert e.reason in REASONS and str(e), (case["id"], judge)
