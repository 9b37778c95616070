"""The shared scorers by name, built in one place, for ``--scorer NAME`` on the command line.

Benchmarks add their own (``Benchmark.scorers``); the CLI merges both into one mapping with
:func:`scorer_mapping`, so a name means one scorer everywhere and a clash is an error, not a
silent override.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from clinieval.errors import UserError
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
    out: dict[str, Scorer] = {}
    for scorer in scorers:
        if scorer.name in out:
            raise UserError(f"two scorers are named {scorer.name!r}")
        out[scorer.name] = scorer
    return out


def pick_scorer(known: Mapping[str, Scorer], name: str) -> Scorer:
    """The scorer called ``name``, or one error listing every known name."""
    try:
        return known[name]
    except KeyError:
        raise UserError(f"unknown scorer {name!r}; known: {', '.join(known)}") from None
