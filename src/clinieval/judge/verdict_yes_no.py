"""Yes/no verdicts: the reply's last labelled ``Verdict:``/``Answer:`` line, or a bare yes or no.

Why a module of its own: the yes/no reader (EHRNoteQA's judges, the reference rubric) is the
most intricate of the readers under :mod:`clinieval.judge.verdict`'s principle (a verdict opens
*and* ends a block, "No doubt, ..." is not a "no", a hedge is unparsed), and it shares nothing with
the numbered and JSON readers but that module's tolerated markup and :class:`VerdictParseError`.
"""

from __future__ import annotations

import re

from clinieval.judge.verdict import COLON, MARK, PLACEHOLDER, VerdictParseError

__all__ = ["VERDICT_LABELS", "label_line", "yes_no_value", "yes_no_verdict"]


_YN_MARKUP = re.compile(r"[*_`#>\"'\u201c\u201d\u2018\u2019]+")
_FIRST_WORD = re.compile(r"^\W*([A-Za-z]+)")
_NOT_A_VERDICT = re.compile(
    r"^(?:no\s+(?:doubt|way|one|matter|longer|problem|question|wonder|need|worries|more|less)"
    r"|yes\s+and|no\s+and|yes\s+or|no\s+or)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(r"\b(?:yes|no)\s*(?:and|or|/)\s*(?:yes|no)\b", re.IGNORECASE)
_FINAL_WORD = re.compile(r"(?<![\w\"'\u201c\u201d\u2018\u2019])(yes|no)[.!]?\s*$", re.IGNORECASE)
_YES_NO = re.compile(r"\b(?:yes|no)\b", re.IGNORECASE)
_BARE = re.compile(r"\W*(yes|no)\W*", re.IGNORECASE)

VERDICT_LABELS = r"(?:final\s+)?(?:answer|verdict|conclusion|judg(?:e)?ment|decision|response)"
"""The labels a yes/no verdict line may carry when the prompt declares none."""


def label_line(labels: str) -> re.Pattern[str]:
    """A line ``LABEL: value`` (markup, any case, a colon of either width or ``-``); group 1 is
    the value."""
    return re.compile(rf"(?im)^[^\w\n]*{labels}{MARK}[ \t]*(?:{COLON}|-)[ \t]*(.*)$")


def _opening_word(text: str) -> bool | None:
    """The verdict a text opens with: ``Yes.``, ``no, because …`` — not ``No doubt, …``."""
    bare = _YN_MARKUP.sub("", text).lstrip()
    if _NOT_A_VERDICT.match(bare):
        return None
    m = _FIRST_WORD.match(bare)
    if m is None:
        return None
    word = m.group(1).lower()
    return True if word == "yes" else False if word == "no" else None


def _opening_and_final(block: str, tail: str) -> set[bool]:
    """The verdicts a block opens with and ``tail`` (the block as the final word is read in it)
    ends with; a hedge anywhere in the block ("yes or no") is unparsed."""
    if _HEDGE.search(_YN_MARKUP.sub("", block)):
        raise VerdictParseError("the output hedges between yes and no", "conflict")
    found: set[bool] = set()
    first = _opening_word(block)
    if first is not None:
        found.add(first)
    final = _FINAL_WORD.search(tail.rstrip())
    if final is not None:
        found.add(final.group(1).lower() == "yes")
    return found


def _one_yes_no(found: set[bool], where: str) -> bool:
    if len(found) == 1:
        return found.pop()
    if found:
        raise VerdictParseError(f"{where} says both yes and no", "conflict")
    raise VerdictParseError(f"no yes/no verdict in {where}", "no_verdict")


def yes_no_value(value: str) -> bool:
    """The yes or no of one verdict block (a labelled line's value): read where it opens and
    where it ends, which must agree; the format echoed (``<yes or no>``) or a hedge is unparsed."""
    if PLACEHOLDER.search(value) and _YES_NO.search(value):
        raise VerdictParseError(f"the verdict {value.strip()[:40]!r} is the format, echoed", "not_a_verdict")
    found = _opening_and_final(value, _YN_MARKUP.sub("", value))
    if not found:
        raise VerdictParseError(f"the verdict {value.strip()[:40]!r} is not yes or no", "not_a_verdict")
    return _one_yes_no(found, "the verdict")


def _whole_reply_yes_no(text: str) -> bool:
    """A reply without a labelled verdict is one block: its opening word, lines that are only
    yes or no, and an unquoted final word must agree."""
    found = _opening_and_final(text, text)
    for line in text.splitlines():
        if _BARE.fullmatch(line):
            verdict = _opening_word(line)
            if verdict is not None:
                found.add(verdict)
    return _one_yes_no(found, "the output")


def yes_no_verdict(
    text: str, labels: str = VERDICT_LABELS, *, unlabelled: bool = True, name: str = "Verdict"
) -> bool:
    """A yes/no verdict: the value of the reply's last labelled line that holds a yes or no.

    Earlier labelled lines (an echoed format, a verdict corrected later) are not read. Without a
    labelled line, ``unlabelled`` reads the whole reply as one block (a prompt that asks for a bare
    "yes" or "no"); otherwise only a reply that is just "yes" or "no" is a verdict.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output", "empty")
    values = [m.group(1) for m in label_line(labels).finditer(text)]
    worded = [v for v in values if _YES_NO.search(v)]
    if worded:
        return yes_no_value(worded[-1])
    if unlabelled:
        try:
            return _whole_reply_yes_no(text)
        except VerdictParseError as e:
            if e.reason != "no_verdict" or not values:
                raise
            # a labelled line without yes or no ("Answer: (B)"), and no verdict anywhere else
            raise VerdictParseError(
                f"the verdict {values[-1].strip()[:40]!r} is not yes or no", "not_a_verdict"
            ) from e
    if values:
        raise VerdictParseError(f"the verdict {values[-1].strip()[:40]!r} is not yes or no", "not_a_verdict")
    bare = _BARE.fullmatch(text.strip())
    if bare is None:
        raise VerdictParseError(f"no '{name}: yes|no' line in the output", "no_verdict")
    return bare.group(1).lower() == "yes"
