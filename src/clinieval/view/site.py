"""Writing a results site: ``index.html``, one page per sample, the script and styles, a manifest.

The whole folder is built beside ``OUT`` and moved into place at the end
(:func:`clinieval.fsutil.staged_dir`): a site is complete or absent, never half-written. Because
publishing replaces ``OUT``, a folder that is not a site this command wrote (it has no
``view.json`` saying so) is never replaced.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from clinieval import __version__
from clinieval.ehr.chart_html import ASSETS as CHART_ASSETS
from clinieval.ehr.chart_html import asset_text as chart_asset
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, staged_dir
from clinieval.view.index_page import index_page
from clinieval.view.item_page import item_page
from clinieval.view.paging import PAGE_CHARS
from clinieval.view.results import Results, load_results
from clinieval.view.urls import INDEX, ITEMS, item_stem

SITE_MANIFEST = "view.json"
SITE_KIND = "clinieval-view"
ASSETS = ("view.js", "view.css")


@dataclass(frozen=True, slots=True)
class Site:
    """What was written: the folder, and how many samples and arms it shows."""

    path: Path
    items: int
    arms: int

    def describe(self) -> str:
        return f"{self.path / INDEX}: {self.items} samples x {self.arms} arms"


def build_site(runs: Sequence[Path], out: Path, *, page_chars: int = PAGE_CHARS) -> Site:
    """Read ``runs`` (each an arm; a folder of runs stands for all of them) and write the site to
    ``out``, replacing a site written there before."""
    _check_out(out, runs)
    results = load_results(runs)
    with staged_dir(out, "the results site") as tmp:
        _write(results, tmp, page_chars)
    return Site(out, len(results.items), len(results.arms))


def _check_out(out: Path, runs: Sequence[Path]) -> None:
    for run in runs:
        if run.resolve().is_relative_to(out.resolve()):
            raise UserError(f"{out}: would replace the run {run}; choose another --out")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out}: is a file; --out names the folder for the site")
    if out.is_dir() and any(out.iterdir()) and not is_site(out):
        raise UserError(f"{out}: exists and is not a site written by clinieval view; choose another --out")


def is_site(folder: Path) -> bool:
    """Whether ``folder`` holds a site this command wrote (its ``view.json`` says so)."""
    try:
        data = json.loads((folder / SITE_MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return isinstance(data, dict) and data.get("kind") == SITE_KIND


def _write(results: Results, folder: Path, page_chars: int) -> None:
    """Every file of the site into the staging ``folder``. Plain writes: the staged folder is the
    unit that appears atomically, and a run of thousands of samples should not pay an fsync per page."""
    (folder / ITEMS).mkdir()
    for position, item in enumerate(results.items):
        page = item_page(results, position, page_chars=page_chars)
        (folder / ITEMS / f"{item_stem(item.sample.id)}.html").write_text(page, encoding="utf-8")
    title = "Results: " + ", ".join(a.name for a in results.arms)
    (folder / INDEX).write_text(index_page(results, title), encoding="utf-8")
    static = resources.files("clinieval.view") / "static"
    for name in ASSETS:
        (folder / name).write_text((static / name).read_text(encoding="utf-8"), encoding="utf-8")
    for name in CHART_ASSETS:  # the patient chart's script and style, the same files the review app serves
        (folder / name).write_text(chart_asset(name), encoding="utf-8")
    atomic_write_json(
        folder / SITE_MANIFEST,
        {
            "kind": SITE_KIND,
            "clinieval_version": __version__,
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "runs": [{"name": a.name, "path": str(a.path), "model": a.model} for a in results.arms],
            "samples": len(results.items),
        },
    )
