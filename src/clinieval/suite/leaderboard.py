"""The suite's leaderboard written to disk: one self-contained HTML page, Markdown and JSON.

The statistics are :func:`clinieval.analysis.leaderboard.build_leaderboard`'s; this module adds
where each benchmark's own report and per-item results browser live (:class:`BenchmarkLinks`,
hrefs relative to the page) and writes ``leaderboard.{json,md,html}`` through the report layer,
each file atomically, so a reader never opens half a page. The JSON is the board's own plus the
title, the notes shown at the top and the links, so every number and every link on the page can
be traced to it. Opening the page runs no script and loads nothing: no model is asked, nothing
leaves the machine.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clinieval.analysis.leaderboard import BenchmarkScores, Leaderboard, build_leaderboard
from clinieval.errors import UserError
from clinieval.report import Link, write_report
from clinieval.suite.leaderboard_page import page

__all__ = ["BenchmarkLinks", "BenchmarkScores", "Leaderboard", "build_leaderboard", "write_leaderboard"]

STEM = "leaderboard"


@dataclass(frozen=True, slots=True)
class BenchmarkLinks:
    """Where a benchmark's pages are, relative to the leaderboard page (None: there is none).

    ``report``: the benchmark's own report; ``view``: the ``index.html`` of its per-item results
    browser (``clinieval view``'s static site)."""

    report: str | None
    view: str | None


def _checked(name: str, links: BenchmarkLinks | None) -> dict[str, str | None]:
    if links is None:
        return {"report": None, "view": None}
    out: dict[str, str | None] = {}
    for field, href in (("report", links.report), ("view", links.view)):
        if href:
            try:
                Link("", href)
            except ValueError:
                raise UserError(
                    f"benchmark {name!r}: the {field} link {href!r} is not a relative path; the leaderboard"
                    " links only pages beside it"
                ) from None
        out[field] = href or None
    return out


def leaderboard_json(
    board: Leaderboard,
    links: Mapping[str, BenchmarkLinks],
    *,
    title: str,
    notes: Sequence[str] = (),
    provenance: Sequence[tuple[str, str]] = (),
    judges: Mapping[str, Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """What ``leaderboard.json`` holds: the board's numbers, the title, the notes, the links and
    the provenance (what produced the numbers: code, data hashes, model fingerprints)."""
    names = [b.name for b in board.benchmarks]
    unknown = sorted(set(links) - set(names))
    if unknown:
        raise UserError(f"links given for {unknown}, which are not on the leaderboard (it has {names})")
    return {
        "title": title,
        "notes": list(notes),
        **board.to_json(),
        "links": {n: _checked(n, links.get(n)) for n in names},
        "provenance": [{"what": what, "value": value} for what, value in provenance],
        "judges": {n: dict((judges or {}).get(n, {})) for n in names if (judges or {}).get(n)},
    }


def write_leaderboard(
    board: Leaderboard,
    links: Mapping[str, BenchmarkLinks],
    out: Path,
    *,
    title: str,
    notes: Sequence[str] = (),
    provenance: Sequence[tuple[str, str]] = (),
    judges: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Path]:
    """Write ``out/leaderboard.json``, ``.md`` and ``.html`` (each atomically); their paths in that order.

    Both renderings are built before anything is written, so a bad link or name leaves ``out`` as
    it was."""
    data = leaderboard_json(board, links, title=title, notes=notes, provenance=provenance, judges=judges)
    doc = page(data, data["links"], title, notes)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the leaderboard folder {out}: {e.strerror or e}") from None
    return write_report(data, doc, out, STEM)
