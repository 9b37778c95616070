"""The reading corpus's figures, for whichever readers the imported clinieval has.

    .venv/bin/python bench/reading_corpus.py                       # the readers of this checkout
    git worktree add /tmp/base 9c12728                             # the readers before the policy
    PYTHONPATH=/tmp/base/src .venv/bin/python bench/reading_corpus.py

Runs every reply of ``tests/data/reading-corpus/`` (frozen.jsonl, later.jsonl) through its reader
the way that checkout's production code calls it: with the reading policy (issue 34), the
readers of ``tests/test_reading_corpus.py`` (choice extraction with the prompt the model was sent,
judges with the material their prompt quoted masked); before it, the plain parsers
(``extract_choice``, ``Rubric.parse``, ``parse_scores``), which that test cannot call.
Prints, per half: replies read right, silent misreads, unparsed as the writers expected (and
with the same reason), readable replies left unparsed. docs/reliability.md records the figures.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

CORPUS = Path(__file__).resolve().parents[1] / "tests" / "data" / "reading-corpus"


class Unparsed(Exception):
    def __init__(self, reason: str | None) -> None:
        super().__init__(reason)
        self.reason = reason


def _yes_no(value: float) -> str:
    return "yes" if value == 1.0 else "no"


Readers = dict[str, Callable[[dict[str, Any]], Any]]


def readers() -> tuple[str, Readers, type[Exception]]:
    """(which readers, the reader of each corpus name, the exception they raise besides
    ``VerdictParseError`` for a reply they leave unparsed) for the clinieval on the path."""
    from clinieval.benchmarks.automedeval.verdict import parse_scores
    from clinieval.benchmarks.ehrnoteqa.scoring import ChoiceJudgeRubric, FreeTextJudgeRubric
    from clinieval.benchmarks.medalign.scoring import MedAlignRubric
    from clinieval.benchmarks.medeval.parsing import LABELS, read_label
    from clinieval.judge.reference import ReferenceRubric
    from clinieval.judge.rubric import parse_score, parse_yes_no

    def label(c: dict[str, Any], *sent: str) -> Any:
        found = read_label(c["reply"], LABELS[c["task"]], "paper", *([list(sent)] if sent else []))
        if found is None:
            raise Unparsed(None)
        return found

    if importlib.util.find_spec("clinieval.judge.quoted") is None:  # before the reading policy
        from clinieval.scoring.scorers import extract_choice

        def choice(c: dict[str, Any]) -> Any:
            found = extract_choice(c["reply"], tuple(c["choices"]), lettered=c.get("lettered", False))
            if found is None:
                raise Unparsed(None)
            return found

        return (
            "before the reading policy",
            {
                "choice": choice,
                "automedeval": lambda c: parse_scores(c["reply"], c.get("k", 3)),
                "ehrnoteqa_mc": lambda c: _yes_no(ChoiceJudgeRubric().parse(c["reply"]).values["correct"]),
                "ehrnoteqa_free": lambda c: FreeTextJudgeRubric().parse(c["reply"]).values["correct"],
                "medalign": lambda c: MedAlignRubric().parse(c["reply"]).values,
                "reference": lambda c: _yes_no(ReferenceRubric().parse(c["reply"]).values["correct"]),
                "yes_no": lambda c: "yes" if parse_yes_no(c["reply"]) else "no",
                "score_1_5": lambda c: parse_score(c["reply"], 1, 5),
                "medeval_label": label,
            },
            Unparsed,
        )
    import sys

    sys.path.insert(0, str(CORPUS.parents[2]))
    from tests.test_reading_corpus import READERS  # the policy's readers: the test's own
    from tests.test_reading_corpus import Unparsed as PolicyUnparsed

    return "the reading policy", dict(READERS), PolicyUnparsed


def read(reader: Callable[[dict[str, Any]], Any], case: dict[str, Any], unparsed: type[Exception]) -> Any:
    """The reader's value, or ``{"unparsed": reason}``."""
    from clinieval.judge.rubric import VerdictParseError

    try:
        return reader(case)
    except VerdictParseError as e:
        return {"unparsed": getattr(e, "reason", None)}
    except unparsed as e:
        return {"unparsed": getattr(e, "reason", None)}


def _unparsed(value: Any) -> bool:
    return isinstance(value, dict) and set(value) == {"unparsed"}


def tally(cases: list[dict[str, Any]], by_name: Readers, unparsed: type[Exception]) -> Counter[str]:
    out: Counter[str] = Counter()
    for case in cases:
        got, want = read(by_name[case["reader"]], case, unparsed), case["expect"]
        if _unparsed(want):
            out["unparsed_as_expected" if _unparsed(got) else "misread"] += 1
            out["same_reason"] += _unparsed(got) and got["unparsed"] == want["unparsed"]
        elif _unparsed(got):
            out["readable_left_unparsed"] += 1
        else:
            out["right" if got == want else "misread"] += 1
    return out


def main() -> None:
    argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    ).parse_args()
    which, by_name, unparsed = readers()
    shown = ("right", "misread", "unparsed_as_expected", "same_reason", "readable_left_unparsed")
    print(f"readers: {which}")
    for half in ("frozen", "later"):
        path = CORPUS / f"{half}.jsonl"
        cases = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
        counts = tally(cases, by_name, unparsed)
        print(f"{half}: {len(cases)} replies, " + ", ".join(f"{k} {counts[k]}" for k in shown))


if __name__ == "__main__":
    main()
