"""The named checks of a generated (or reviewed) item, each recorded by name.

``five_options`` (exactly A-E, none empty), ``distinct_options`` (no two options equal after
case, whitespace and punctuation are normalised), ``valid_answer`` (the correct letter is one of
the options), ``answer_not_longest`` (the paper's rule: the correct option is not strictly the
longest) and ``question_unchanged`` (step 2 kept the step-1 question "without modification").
Generation records them and never drops an item for one; the review import refuses kept items
failing a :data:`BLOCKING_CHECKS` one unless told otherwise.
"""

from __future__ import annotations

from collections.abc import Mapping

from clinieval.benchmarks.ehrnoteqa.build.parsing import normalize_option
from clinieval.benchmarks.ehrnoteqa.prompts import OPTION_LETTERS

__all__ = ["BLOCKING_CHECKS", "CHECKS", "check_item", "failed_checks"]

CHECKS = ("five_options", "distinct_options", "valid_answer", "answer_not_longest", "question_unchanged")
"""Every check, in the order they are reported."""

BLOCKING_CHECKS = ("five_options", "distinct_options", "valid_answer")
"""Checks a reviewed item must pass to be imported (unless ``allow_failed_checks``): an item
without five distinct options or a valid correct letter is not a usable five-option question."""


def _same_question(a: str, b: str) -> bool:
    """Equal up to case, whitespace and surrounding quotes (what "without modification" can mean
    for a model that re-types the question)."""

    def norm(s: str) -> str:
        return " ".join(s.strip().strip("\"'“”‘’").lower().split())

    return norm(a) == norm(b)


def check_item(
    choices: Mapping[str, str],
    answer: str | None,
    *,
    question: str | None = None,
    source_question: str | None = None,
) -> dict[str, bool | None]:
    """Each check's outcome: True passed, False failed, None not applicable.

    ``answer_not_longest`` needs a valid answer; ``question_unchanged`` needs both the step-2
    ``question`` and the step-1 ``source_question`` (at re-import there is no step 1).
    Lengths are characters of the option text as written.
    """
    texts = {k: v.strip() for k, v in choices.items()}
    five = sorted(texts) == list(OPTION_LETTERS) and all(texts.values())
    normal = [normalize_option(v) for v in texts.values()]
    valid = answer is not None and answer in OPTION_LETTERS and bool(texts.get(answer))
    out: dict[str, bool | None] = {
        "five_options": five,
        "distinct_options": len(set(normal)) == len(normal),
        "valid_answer": valid,
        "answer_not_longest": None,
        "question_unchanged": None,
    }
    if valid and answer is not None and len(texts) > 1:
        others = max(len(v) for k, v in texts.items() if k != answer)
        out["answer_not_longest"] = len(texts[answer]) <= others
    if question is not None and source_question is not None:
        out["question_unchanged"] = _same_question(question, source_question)
    return out


def failed_checks(checks: Mapping[str, bool | None]) -> list[str]:
    """The names of the checks that failed, in :data:`CHECKS` order."""
    return [name for name in CHECKS if checks.get(name) is False]
