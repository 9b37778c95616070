"""The shared scorers by name, built in one place, for ``--scorer NAME`` on the command line.

Benchmarks add their own (``Benchmark.scorers``); the CLI merges both into one mapping with
:func:`scorer_mapping`, so a name means one scorer everywhere and a clash is an error, not a
silent override.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from clinieval.errors import by_name, pick_named
from clinieval.scoring.keyfacts import KEYFACTS_SCORERS
from clinieval.scoring.scorers import Answered, ChoiceExtraction, ChoiceLoglik, ExactMatch, Scorer

SHARED_SCORERS: tuple[Scorer, ...] = (
    Answered(),
    ChoiceExtraction(),
    ChoiceLoglik(),
    ChoiceLoglik(name="choice_loglik_norm", normalize=True),
    ExactMatch(),
    *KEYFACTS_SCORERS,
)


def scorer_mapping(scorers: Iterable[Scorer]) -> dict[str, Scorer]:
    """``name -> scorer``, refusing two scorers with one name."""
    return by_name(scorers, "scorer")


def pick_scorer(known: Mapping[str, Scorer], name: str) -> Scorer:
    """The scorer called ``name``, or one error listing every known name."""
    return pick_named(known, name, "scorer")
