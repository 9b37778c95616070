"""Reading MedEval answers, with the paper's "qualified rate": did the answer follow the format?

The paper reports how many outputs follow the required format and does not silently score the
rest. A label answer is *qualified* only when it is exactly one allowed label, case, surrounding
whitespace and final punctuation aside ("Abnormal." is qualified; "The sentence is abnormal" and
"normal or abnormal" are not). A code-prediction answer is qualified when it gives each of the 14
observations exactly once as an ``(observation, prediction)`` tuple with prediction positive,
negative or unknown; the prompt's own misspelling "Cardiomeastinum" is read as Cardiomediastinum.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from clinieval.benchmarks.medeval.records import CHEXPERT_OBSERVATIONS

LABELS: dict[str, tuple[str, str]] = {
    "abnormality": ("normal", "abnormal"),
    "ambiguity": ("unambiguous", "ambiguous"),
}
"""Each sentence-classification task's two labels: (negative class, positive class)."""

_FINAL_PUNCTUATION = ".!;:,"
PREDICTIONS = ("positive", "negative", "unknown")


def read_label(answer: str, allowed: tuple[str, ...]) -> str | None:
    """The label the answer is, or None when it is not exactly one allowed label (unqualified)."""
    text = answer.strip().rstrip(_FINAL_PUNCTUATION).strip().strip("\"'`*").strip().lower()
    return text if text in allowed else None


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
