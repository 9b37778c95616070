"""Yes/no verdicts: the reply's last labelled ``Verdict:``/``Answer:`` line, or a bare yes or no.

Why a module of its own: the yes/no reader (EHRNoteQA's judges, the reference rubric) is the
most intricate of the readers under :mod:`clinieval.judge.verdict`'s principle (a verdict opens
*and* ends a block, "No doubt, ..." is not a "no", a hedge is unparsed), and it shares nothing with
the numbered and JSON readers but that module's tolerated markup and :class:`VerdictParseError`.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from clinieval.judge.verdict import (
    COLON,
    MARK,
    PLACEHOLDER,
    VerdictParseError,
    check_not_revised_later,
    check_revision_stated,
    refusal,
)
from clinieval.scoring.reading import REVISED_LABEL, is_refusal, revised_values, revises, settle

__all__ = ["VERDICT_LABELS", "label_line", "yes_no_value", "yes_no_verdict"]


_YN_MARKUP = re.compile(r"[*_`#>\"'\u201c\u201d\u2018\u2019]+")
_FIRST_WORD = re.compile(r"^\W*([A-Za-z]+)")
_NOT_A_VERDICT = re.compile(
    r"^(?:no\s+(?:doubt|way|one|matter|longer|problem|question|wonder|need|worries|more|less)"
    r"|yes\s+and|no\s+and|yes\s+or|no\s+or)\b",
    re.IGNORECASE,
)
_HEDGE = re.compile(
    r"\b(?:yes|no)\W{0,3}(?:and|or|but|/)\s*(?:yes|no)\b|\byes\s*[,/]\s*no\b|\bno\s*[,/]\s*yes\b"
    r"|\b(?:partial(?:ly)?|partly|somewhat|conditionally|mostly|half)\s+(?:yes|no)\b",
    re.IGNORECASE,
)
_FINAL_WORD = re.compile(r"(?<![\w\"'\u201c\u201d\u2018\u2019])(yes|no)[.!]?\s*$", re.IGNORECASE)
_YES_NO = re.compile(r"\b(?:yes|no)\b", re.IGNORECASE)
_BARE = re.compile(r"\W*(yes|no)\W*", re.IGNORECASE)
_RESTATED_OPTION = re.compile(r"(?i)(?<![\w])\(?[A-E][.):]\)?[ \t]*(?:yes|no)\b")
"""An option of a multiple-choice question restated ("B. No", "(A) Yes"): the question's words,
not the judge's verdict."""
_RESTATED_LINE = re.compile(rf"(?im)^.*{_RESTATED_OPTION.pattern[4:]}.*$")
_GOES_ON = re.compile(
    r"^\s+(?!(?:because|since|as|given|based|but|the|it|this|that|correct|incorrect|right|wrong|and)\b)[a-z]"
)
"""After a yes or no, a word that makes it part of a sentence ("yes would need the 5 mg dose"),
not a verdict ("yes because ...", "no, the dose differs")."""
_YES_NO_VALUE = r"(?i)\b(?:yes|no)\b"

VERDICT_LABELS = (
    r"(?:(?:final\s+)?(?:answer|verdict|conclusion|judg(?:e)?ment|decision|response)|yes\s*(?:/|or)\s*no)"
)
"""The labels a yes/no verdict line may carry when the prompt declares none."""


def label_line(labels: str) -> re.Pattern[str]:
    """A line ``LABEL: value`` (markup, any case, a colon of either width or ``-``); group 1 is
    the value."""
    quote = "[\"']?"  # a JSON key: {"answer": "yes"}
    start = r"^[^\w\n(\"'\u201c\u2018\[{]*(?:\{[ \t]*)?"  # not a label quoted or in brackets
    return re.compile(rf"(?im){start}{quote}{labels}{quote}{MARK}[ \t]*(?:{COLON}|-)[ \t]*(.*)$")


def _opening_word(text: str) -> bool | None:
    """The verdict a text opens with: ``Yes.``, ``no, because …`` — not ``No doubt, …``."""
    bare = _YN_MARKUP.sub("", text).lstrip()
    if _NOT_A_VERDICT.match(bare):
        return None
    m = _FIRST_WORD.match(bare)
    if m is None or _GOES_ON.match(bare, m.end()):
        return None
    word = m.group(1).lower()
    return True if word == "yes" else False if word == "no" else None


def _opening_and_final(block: str, tail: str) -> set[bool]:
    """The verdicts a block opens with and ``tail`` (the block as the final word is read in it)
    ends with; a hedge anywhere in the block ("yes or no") is unparsed."""
    if _HEDGE.search(_YN_MARKUP.sub("", block)):
        raise VerdictParseError("the output hedges between yes and no", "hedged")
    found: set[bool] = set()
    first = _opening_word(block)
    if first is not None:
        found.add(first)
    final = _FINAL_WORD.search(tail.rstrip())
    if final is not None:
        last = final.group(1).lower() == "yes"
        if first is not None and first != last and revises(tail[: final.start()]):
            return {last}  # "yes. On reflection, no.": the stated revision replaces what it revises
        found.add(last)
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
    if _restated(value):
        raise VerdictParseError(f"{value.strip()[:40]!r} restates an option, not a verdict", "not_a_verdict")
    found = _opening_and_final(value, _YN_MARKUP.sub("", value))
    if not found:
        raise VerdictParseError(f"the verdict {value.strip()[:40]!r} is not yes or no", "not_a_verdict")
    return _one_yes_no(found, "the verdict")


def _whole_reply_yes_no(text: str) -> bool:
    """A reply without a labelled verdict is one block: its opening word, lines that are only
    yes or no, and an unquoted final word must agree, unless a stated revision stands before the
    last of them ("Yes. Wait, ... Corrected: no")."""
    if is_refusal(text):
        raise refusal()
    text = _RESTATED_LINE.sub("", text)
    if _HEDGE.search(_YN_MARKUP.sub("", text)):
        raise VerdictParseError("the output hedges between yes and no", "hedged")
    said: list[tuple[int, bool]] = []
    first = _opening_word(text)
    if first is not None:
        said.append((0, first))
    offset = 0
    for line in text.splitlines(keepends=True):
        if _BARE.fullmatch(line.strip()) and (verdict := _opening_word(line)) is not None:
            said.append((offset, verdict))
        offset += len(line)
    final = _FINAL_WORD.search(text.rstrip())
    if final is not None:
        said.append((final.start(), final.group(1).lower() == "yes"))
    # "On reflection: no.", "Actually, on reflection, yes: ..."
    said += [(at, word.lower() == "yes") for at, word in revised_values(text, r"(yes|no)\b")]
    if not said:
        raise VerdictParseError("no yes/no verdict in the output", "no_verdict")
    verdict = settle(sorted(set(said)), text)
    if verdict is None:
        raise VerdictParseError("the output says both yes and no", "conflict")
    return verdict


_REVISED_LABEL = re.compile(rf"(?i)[\W_]*{REVISED_LABEL}\b")


def _unexplained_change(text: str, lines: list[re.Match[str]], verdict: bool) -> None:
    """A labelled verdict that changes an earlier one must say so: a revision stated between them
    ("Verdict: yes ... On a second reading ... Verdict: no") or in its label ("Final answer:").
    Otherwise the two are an unexplained conflict, and the later one is not read."""
    if _REVISED_LABEL.match(lines[-1].group(0)):
        return  # "Final answer: no" states the revision in its label

    def values() -> Iterator[tuple[object, int]]:
        for before in reversed(lines[:-1]):
            try:
                yield yes_no_value(before.group(1)), before.end()
            except VerdictParseError:
                continue

    check_revision_stated(text, values(), verdict, lines[-1].start())


def _restated(value: str) -> bool:
    return _RESTATED_OPTION.match(_YN_MARKUP.sub("", value).strip()) is not None


def yes_no_verdict(
    text: str, labels: str = VERDICT_LABELS, *, unlabelled: bool = True, name: str = "Verdict"
) -> bool:
    """A yes/no verdict: the value of the reply's last labelled line that holds a yes or no.

    Earlier labelled lines (an echoed format, a verdict corrected later) are not read, but one
    that says otherwise with no revision stated between is ``conflict`` (the reading policy,
    docs/judge.md). Without a labelled line, ``unlabelled`` reads the whole reply as one block (a
    prompt that asks for a bare "yes" or "no"): a refusal ("No, I cannot evaluate ...") is
    ``refusal``, restated options ("B. No") are not verdicts, a hedge is ``hedged``; otherwise only
    a reply that is just "yes" or "no" is a verdict.
    """
    if not text.strip():
        raise VerdictParseError("empty judge output", "empty")
    lines = list(label_line(labels).finditer(text))
    values = [m.group(1) for m in lines]
    worded = [m for m in lines if _YES_NO.search(m.group(1)) and not _restated(m.group(1))]
    if worded:
        verdict = yes_no_value(worded[-1].group(1))
        _unexplained_change(text, worded, verdict)
        check_not_revised_later(text[worded[-1].end() :], _YES_NO_VALUE)
        return verdict
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
