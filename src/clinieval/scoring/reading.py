"""The reading policy every reader of model text shares, in words a reader can test for.

Every place the project turns a model's free text into a number or a choice (choice extraction,
every judge reader, AutoMedEval's, MedEval's label reader) follows one policy, stated in
docs/judge.md ("Reading policy"):

* a value is read only when the reply commits to exactly one;
* a stated revision ("on reflection", "Corrected:", "Final score:") replaces what it revises; an
  unexplained conflict is unparsed (``conflict``), a hedge is unparsed (``hedged``);
* a reply that names several options without choosing is unparsed (``several_options``);
* refusals and offers are unparsed (``refusal``);
* text that occurs in what the model was sent is never read as its verdict
  (:mod:`clinieval.scoring.echo`), and an answer that mostly repeats its prompt is unscored
  (``echoed_prompt``).

This module holds the cues those rules are written in, so the readers cannot drift apart on
what counts as a revision, a hedge or a refusal. Nothing here reads a verdict.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

_SECOND_LOOK = (
    r"on\s+(?:a\s+)?second\s+(?:thoughts?|reading|look)"
    r"|(?:on|after|having)\s+re-?(?:reading|read|checking|checked)"
)

REVISION = re.compile(
    rf"(?i)\b(?:on\s+(?:further\s+)?reflection|{_SECOND_LOOK}|actually|(?:upon|after)\s+reconsideration"
    r"|correction|corrected|revised|revising|I\s+was\s+wrong|I\s+made\s+(?:a|an)\s+(?:mistake|error)"
    r"|let\s+me\s+(?:re-?consider|revise|correct)|wait\b|make\s+(?:that|it)|changed?\s+to|rather|I\s+mean"
    r"|scratch\s+that|instead)\b|(?:^|[.!;]\s*)no\s*[:\u2014\u2013]"
)
"""A stated revision: what follows replaces the value before it."""

HEDGE = re.compile(
    r"(?i)(?:\b(?:maybe|perhaps|possibly|probably|or|either|could\s+be|might\s+be|arguably|between"
    r"|borderline|somewhere)\b|[~?])"
)
"""A hedge between values: a second value after one of these is not a decision."""

_REFUSAL = re.compile(
    r"(?is)^[\W_]*(?:"
    # "No, I cannot evaluate ..." / "Yes, I can help with that ..." : an offer or a refusal, not a verdict
    r"(?:yes|no|sure|certainly|of\s+course|absolutely)\b[\W_]{0,4}"
    r"(?:I|we)(?:\s+|')(?:cannot|can\s*not|can't|could\s+not|couldn't|am\s+(?:un|not\s+)able|m\s+(?:un|not\s+)able"
    r"|can\s+(?!confirm|see|say|verify|agree|tell\s+(?:that|you\s+that))|could\s+(?!say)|will\b|ll\b"
    r"|would\s+be|d\s+be|am\s+happy|m\s+happy|am\s+glad|m\s+glad|do\s+not\s+have|don't\s+have)"
    r"|(?:I'?m|I\s+am)\s+(?:sorry|afraid|unable|not\s+able)"
    r"|I\s+(?:cannot|can\s*not|can't|could\s+not|won't|will\s+not)\s+(?:evaluate|assess|judge|grade|score|rate"
    r"|determine|answer|provide|help|assist|compare|review|verify|make|give|do)"
    r"|as\s+an\s+(?:AI|artificial|language\s+model|assistant)"
    r"|(?:unfortunately|sorry)\b"
    r"|please\s+provide"
    r")"
)


REVISED_LABEL = r"(?:final|revised|corrected|updated|new)"
"""A label that states a revision itself ("Final answer:", "Corrected score:"): the verdict it
carries replaces an earlier one with no other words between them."""

STRONG_REVISION = re.compile(
    rf"(?i)\b(?:on\s+(?:further\s+)?reflection|{_SECOND_LOOK}|(?:upon|after)\s+reconsideration"
    r"|correction|corrected|revised|I\s+was\s+wrong|I\s+made\s+(?:a|an)\s+(?:mistake|error)"
    r"|let\s+me\s+(?:re-?consider|revise|correct)|wait\b|scratch\s+that)"
)
"""A revision stated after a verdict: unlike :data:`REVISION`'s "rather" or "instead", never prose."""


def revised_later(text: str, value: str) -> bool:
    """Whether ``text`` (what follows a reply's final verdict) states a revision that gives a new
    value (``value`` is a pattern for one: a digit, a yes or no, a JSON object's brace) within the
    sentence. The reader found no later verdict it can read, so the revision leaves the reply
    without one: unparsed ``conflict``, never the value it revised."""
    for cue in STRONG_REVISION.finditer(text):
        rest = re.split(r"(?<=[.!?])\s|\n\s*\n", text[cue.end() : cue.end() + 200], maxsplit=1)[0]
        if re.search(value, rest):
            return True
    return False


def revised_values(text: str, value: str) -> list[tuple[int, str]]:
    """Each value stated right after a revision cue ("On reflection: no.", "Actually, yes: ...",
    "Wait, the answer is maybe"), as (where it stands, what it says); ``value`` is a pattern whose
    first group is the value. A value that runs on into a sentence ("no one ...") is not one."""
    after = re.compile(
        rf"(?i)[\W_]{{0,6}}(?:(?:on\s+reflection|it\s+is|the\s+answer\s+is)[\W_]{{1,6}})?{value}(?!\s+[a-z])"
    )
    found = []
    for cue in REVISION.finditer(text):
        m = after.match(text, cue.end())
        if m is not None:
            found.append((m.start(1), m.group(1)))
    return found


def settle(said: Sequence[tuple[int, T]], text: str) -> T | None:
    """The last of the values a reply states (``said``: (position, value), in order), when the
    earlier ones agree with it or a revision stands between the nearest different one and it;
    None for an unexplained conflict (or nothing said)."""
    if not said:
        return None
    position, last = said[-1]
    for earlier, value in reversed(said[:-1]):
        if value != last:
            return last if revises(text[earlier:position]) else None
    return last


def is_refusal(text: str) -> bool:
    """Whether ``text`` opens by refusing the task or offering help instead of answering it
    ("No, I cannot evaluate this without the notes", "Yes, I can help with that", "I'm sorry, as
    an AI ..."). A reply that refuses and still gives a labelled verdict later is read by its
    verdict; this only says how it opens."""
    return _REFUSAL.match(text) is not None


_LEADS_TO = re.compile(r"(?i)\b(?:so|therefore|thus|hence|instead)\b[\W_]*$")


def revises(text: str) -> bool:
    """Whether ``text`` (what lies between two values) states a revision of the first: a cue
    ("on reflection", "wait", "Corrected:") anywhere in it, or reasons that end by leading to the
    new value ("..., so")."""
    return REVISION.search(text) is not None or _LEADS_TO.search(text) is not None


def hedges(text: str) -> bool:
    """Whether ``text`` (what lies between two values) hedges between them."""
    return HEDGE.search(text) is not None


__all__ = [
    "HEDGE",
    "REVISED_LABEL",
    "REVISION",
    "STRONG_REVISION",
    "hedges",
    "is_refusal",
    "revised_later",
    "revises",
]
