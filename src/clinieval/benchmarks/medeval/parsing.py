"""Reading MedEval answers, with the paper's "qualified rate": did the answer follow the format?

The paper reports how many outputs follow the required format and does not silently score the
rest. Its rule for a label answer (Appendix, Table 9) is that the answer includes *only one* of the
allowed label words: "The sentence is abnormal." and "Label: abnormal" qualify, "normal or
abnormal" does not. Words are matched as words, so "abnormal" never counts as "normal" and
"unambiguous" never as "ambiguous". That is the default (``QualifiedRule`` "paper"); the stricter
reading, where the answer must be the label and nothing else (case, surrounding whitespace, quotes
and final punctuation aside), is the named option "strict".

A code-prediction answer is qualified when it gives each of the 14 observations exactly once as an
``(observation, prediction)`` tuple with prediction positive, negative or unknown; the prompt's own
misspelling "Cardiomeastinum" is read as Cardiomediastinum. The tuples it does give are kept even
when it is unqualified, for the per-observation credit the analysis reports beside the paper's
all-or-nothing figures.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS
from clinieval.scoring.echo import mask_copies

ABNORMALITY_LABELS: tuple[str, str] = ("normal", "abnormal")
AMBIGUITY_LABELS: tuple[str, str] = ("unambiguous", "ambiguous")
LABELS: dict[str, tuple[str, str]] = {"abnormality": ABNORMALITY_LABELS, "ambiguity": AMBIGUITY_LABELS}
"""Each sentence-classification task's two labels: (negative class, positive class); also the
review study's label sets (:mod:`.review`), whose columns are named after the tasks."""

_FINAL_PUNCTUATION = ".!;:,"
PREDICTIONS = ("positive", "negative", "unknown")


QualifiedRule: TypeAlias = Literal["paper", "strict"]
QUALIFIED_RULES: tuple[QualifiedRule, ...] = ("paper", "strict")
"""How a label answer qualifies: "paper" (exactly one of the label words appears in it, as a word;
the default) or "strict" (the answer is the label and nothing else)."""


def read_label(
    answer: str, allowed: tuple[str, ...], rule: QualifiedRule = "paper", sent: Sequence[str] = ()
) -> str | None:
    """The label the answer gives, or None when it is unqualified under ``rule``.

    Under the paper's rule the label words are looked for in what the model wrote itself: a copy
    of ``sent`` (the prompt: a few-shot example, the sentence asked about) is masked first, as
    every reader does (docs/judge.md, "Reading policy"), so an answer that repeats an example's
    "Label: ambiguous." is not that label. The strict rule needs no masking: a copy is never
    the label and nothing else."""
    if rule == "strict":
        text = answer.strip().rstrip(_FINAL_PUNCTUATION).strip().strip("\"'`*").strip().lower()
        return text if text in allowed else None
    own = mask_copies(answer, sent) if sent else answer
    words = set(re.findall(r"[a-z]+", own.lower()))
    named = [label for label in allowed if label in words]
    return named[0] if len(named) == 1 else None


def _observation_key(name: str) -> str:
    return re.sub(r"[^a-z]", "", name.lower())


_OBSERVATIONS = {_observation_key(o): o for o in CHEXPERT_OBSERVATIONS}
_OBSERVATIONS[_observation_key("Enlarged Cardiomeastinum")] = "Enlarged Cardiomediastinum"
_TUPLE = re.compile(r"\(\s*([^(),]+?)\s*,\s*([^(),]+?)\s*\)")


@dataclass(frozen=True, slots=True)
class CodeAnswer:
    """A parsed code-prediction answer: the predictions read, and why it is unqualified (if so)."""

    predictions: dict[str, str] = field(default_factory=dict)
    problems: tuple[str, ...] = ()

    @property
    def qualified(self) -> bool:
        return not self.problems


def read_codes(answer: str) -> CodeAnswer:
    """Every ``(observation, prediction)`` tuple of the answer; unqualified when an observation is
    missing, given twice or unknown, or a prediction is not positive/negative/unknown."""
    found: dict[str, str] = {}
    problems: list[str] = []
    for raw_name, raw_value in _TUPLE.findall(answer):
        name = _OBSERVATIONS.get(_observation_key(raw_name))
        value = raw_value.strip().strip("\"'").strip().lower()
        if name is None:
            problems.append(f"unknown observation {raw_name[:40]!r}")
        elif value not in PREDICTIONS:
            problems.append(f"{name}: prediction {raw_value[:20]!r} is not positive, negative or unknown")
        elif name in found:
            problems.append(f"{name} given twice")
        else:
            found[name] = value
    missing = [o for o in CHEXPERT_OBSERVATIONS if o not in found]
    if missing:
        problems.append(f"{len(missing)} observation(s) missing, first {missing[0]}")
    return CodeAnswer(found, tuple(problems))
