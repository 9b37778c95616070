"""The leaderboard's plain-words line per benchmark, built only from Holm-controlled comparisons.

A reader skims the sentence before the table, so it must never claim an order the tests do not
support. It reads the pairwise results as a relation: "A is ahead of B" only where A - B is
positive and significant after Holm's adjustment; every other pair is "indistinguishable on this
data" (not "equal": the data cannot tell them apart). The models no other model is ahead of open
the line; each other model then gets one clause naming whom it is behind and whom it cannot be told
from, so every pair is described exactly once and no order is implied by position alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations
from typing import Protocol

__all__ = ["format_number", "format_percent", "margin_words", "verdict"]

MINUS = "\u2212"


class _Pair(Protocol):
    @property
    def a(self) -> str: ...
    @property
    def b(self) -> str: ...
    @property
    def mean_difference(self) -> float: ...
    @property
    def ci(self) -> tuple[float, float]: ...
    @property
    def significant(self) -> bool: ...


def format_number(value: float, digits: int) -> str:
    """``value`` rounded to ``digits`` decimals, with a true minus sign (and no negative zero)."""
    text = f"{value:.{digits}f}"
    if text.lstrip("-").strip("0.") == "":
        text = text.lstrip("-")
    return text.replace("-", MINUS)


def format_percent(p: float, digits: int = 1) -> str:
    """A probability as a percentage; never rounded to 0% or 100% unless it is exactly that (a model
    that lost rank 1 in a few replicates out of 2000 shows ">99.9%", not "100.0%")."""
    text = f"{100 * p:.{digits}f}"
    floor = 10.0**-digits
    if p > 0 and float(text) == 0:
        return f"<{floor:.{digits}f}%" if digits else "<1%"
    if p < 1 and float(text) == 100:
        return f">{100 - floor:.{digits}f}%" if digits else ">99%"
    return text + "%"


def _names(names: Sequence[str]) -> str:
    if len(names) <= 2:
        return " and ".join(names)
    return ", ".join(names[:-1]) + " and " + names[-1]


class _Relations:
    def __init__(self, pairs: Sequence[_Pair], digits: int, level: float) -> None:
        self.pairs = {(p.a, p.b): p for p in pairs}
        self.digits = digits
        self.level = level

    def difference(self, x: str, y: str) -> tuple[float, tuple[float, float]]:
        """x - y and its CI, whichever order the pair was computed in."""
        if (x, y) in self.pairs:
            p = self.pairs[(x, y)]
            return p.mean_difference, p.ci
        p = self.pairs[(y, x)]
        return -p.mean_difference, (-p.ci[1], -p.ci[0])

    def ahead(self, x: str, y: str) -> bool:
        """Whether x is significantly ahead of y after Holm."""
        p = self.pairs.get((x, y)) or self.pairs[(y, x)]
        d, _ = self.difference(x, y)
        return p.significant and d > 0

    def numbers(self, x: str, y: str) -> str:
        d, (lo, hi) = self.difference(x, y)
        f = self.digits
        pct = round(self.level * 100, 6)
        shown = f"{pct:g}"
        return (
            f"difference {format_number(d, f)}, {shown}% CI {format_number(lo, f)} to {format_number(hi, f)}"
        )


def _top_clause(top: Sequence[str], rel: _Relations) -> str:
    if len(top) == 1:
        return f"no model is ahead of {top[0]}"
    extra = f" ({rel.numbers(top[0], top[1])})" if len(top) == 2 else ""
    return f"{_names(top)} are indistinguishable on this data{extra}"


def _clause(model: str, before: Sequence[str], rel: _Relations) -> str:
    behind = [m for m in before if rel.ahead(m, model)]
    ahead_of = [m for m in before if rel.ahead(model, m)]
    same = [m for m in before if m not in behind and m not in ahead_of]
    parts: list[str] = []
    if behind:
        target = "both" if len(behind) == len(before) == 2 else _names(behind)
        extra = f" ({rel.numbers(model, behind[0])})" if len(before) == 1 else ""
        parts.append(f"is behind {target}{extra}")
    if ahead_of:
        parts.append(f"is ahead of {_names(ahead_of)}")
    if same:
        extra = f" ({rel.numbers(model, same[0])})" if len(same) == 1 else ""
        parts.append(f"is indistinguishable from {_names(same)}{extra}")
    return model + " " + ", and ".join(parts)


def _describe(models: Sequence[str], rel: _Relations, first: bool) -> list[str]:
    """Clauses for ``models`` (leaderboard order): a leader ahead of all the rest, then the rest the
    same way; else the models no other is ahead of, and one clause for each remaining model."""
    if len(models) < 2:
        return []
    top = [m for m in models if not any(rel.ahead(o, m) for o in models if o != m)]
    if len(top) == 1 and all(rel.ahead(top[0], m) for m in models if m != top[0]):
        leader = top[0]
        others = [m for m in models if m != leader]
        if len(others) == 1:
            clause = f"{leader} is ahead of {others[0]} ({rel.numbers(leader, others[0])})"
        else:
            clause = f"{leader} is ahead of " + ("every other model" if first else _names(others))
        return [clause, *_describe(others, rel, False)]
    if not top:  # a cycle of significant wins (possible with different items per pair): say each pair
        top = [models[0]]
    clauses = [_top_clause(top, rel)]
    before = list(top)
    for m in models:
        if m not in top:
            clauses.append(_clause(m, before, rel))
            before.append(m)
    return clauses


def verdict(models: Sequence[str], pairs: Sequence[_Pair], level: float, digits: int = 3) -> str:
    """One sentence on ``models`` (leaderboard order) from their pairwise comparisons."""
    if len(models) == 1:
        return f"Only {models[0]} was scored on this benchmark: there is nothing to compare."
    rel = _Relations(pairs, digits, level)
    if not any(p.significant for p in pairs):
        if len(models) == 2:
            return f"{models[0]} and {models[1]} are indistinguishable on this data ({rel.numbers(*models)})."
        return (
            f"All {len(models)} models are indistinguishable on this data: no difference between two of them"
            " is significant after Holm's correction."
        )
    if len(models) > 2 and all(rel.ahead(x, y) for x, y in combinations(models, 2)):
        return "Every pair differs: " + " ahead of ".join(models) + "."
    text = "; ".join(_describe(models, rel, True))
    return ("N" + text[1:] if text.startswith("no model") else text) + "."


class _MarginPair(Protocol):
    @property
    def a(self) -> str: ...
    @property
    def b(self) -> str: ...
    @property
    def margin_call(self) -> str | None: ...


def margin_words(pairs: Sequence[_MarginPair], margin: float | None, digits: int = 3) -> str:
    """The clinical margin's sentence (empty without a margin): which pairs are practically
    equivalent, which model is better by at least the margin, and where the data cannot say."""
    if margin is None or not pairs:
        return ""
    same = [f"{p.a} and {p.b}" for p in pairs if p.margin_call == "equivalent"]
    better = [f"{p.a} over {p.b}" for p in pairs if p.margin_call == "a better"]
    better += [f"{p.b} over {p.a}" for p in pairs if p.margin_call == "b better"]
    unsure = [f"{p.a} and {p.b}" for p in pairs if p.margin_call == "neither"]
    shown = format_number(margin, digits)
    parts = []
    if same:
        parts.append(f"practically equivalent (within ±{shown}): {'; '.join(same)}")
    if better:
        parts.append(f"better by at least {shown}: {'; '.join(better)}")
    if unsure:
        parts.append(f"neither equivalent nor {shown} apart on this data: {'; '.join(unsure)}")
    return f" With a clinical margin of {shown}, " + "; ".join(parts) + "."
