"""tools/move_engine.py: the re-runnable move of the run engine into ``engine/`` and ``records/``.

The script is run again after each merge of a branch that still imports the old modules, so what
matters is that it rewrites every form a reference takes, leaves alone what only looks like one,
and changes nothing the second time. The old names are built from pieces here (``OLD``): written
out whole, this file's own examples would be rewritten by the script it tests.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tools.move_engine import MOVES, Place, absolutize, rewrite

PKG = "clinieval"
OLD = f"{PKG}.runs"
"""The old dotted name of the run folder module, which moves to ``clinieval.records.runs``."""


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (f"from {OLD} import RunDir\n", "from clinieval.records.runs import RunDir\n"),
        (
            f"import {OLD}\nx = {OLD}.RunDir\n",
            "import clinieval.records.runs\nx = clinieval.records.runs.RunDir\n",
        ),
        (
            f'monkeypatch.setattr("{PKG}.runner.CachedCalls.through", f)\n',
            'monkeypatch.setattr("clinieval.engine.runner.CachedCalls.through", f)\n',
        ),
        (f"see src/{PKG}/session.py\n", "see src/clinieval/engine/session.py\n"),
        (
            f"    from {PKG} import errors, runs, session as s  # why\n",
            "    from clinieval import errors  # why\n"
            "    from clinieval.engine import session as s\n"
            "    from clinieval.records import runs\n",
        ),
        (
            f"from {PKG} import (\n    cache,\n    summary,\n)\n",
            "from clinieval.records import cache, summary\n",
        ),
    ],
)
def test_each_form_of_reference_is_rewritten(before: str, after: str) -> None:
    assert rewrite(before, None) == after
    assert rewrite(after, None) == after, "a second run must change nothing"


@pytest.mark.parametrize(
    "text",
    [
        "from clinieval import report\n",
        "from clinieval.records.runs import RunDir\n",
        f"from {PKG}.benchmarks.automedeval.cache import Cache\n",  # another module of the same name
        f"x = {PKG}.runs_extra\n",  # a longer name that starts like an old one
        f"see ~/.cache/{PKG}\n",
        "from .scoring import runs\n",
    ],
)
def test_what_only_looks_like_a_reference_is_left(text: str) -> None:
    assert rewrite(text, Place("clinieval.cli", True)) == text


def test_relative_imports_are_resolved_against_the_file() -> None:
    top = Place("clinieval.view.results", False)
    assert rewrite("from ..runs import RunDir\n", top) == "from clinieval.records.runs import RunDir\n"
    assert rewrite("from .. import errors, runs\n", top) == (
        "from .. import errors\nfrom clinieval.records import runs\n"
    )
    # a module that moves has its relative imports made absolute first: one folder down they would
    # name other modules
    moving = Place(f"{PKG}.runner", False)
    assert (
        absolutize("from .cache import RequestStore\n", moving) == f"from {PKG}.cache import RequestStore\n"
    )


def test_every_old_module_has_a_package() -> None:
    assert set(MOVES.values()) == {"engine", "records"}
    assert len(MOVES) == 13


def test_the_moved_tree_has_nothing_left_to_do() -> None:
    """On this repository the script finds nothing to move or rewrite (``--check`` exits 0)."""
    root = Path(__file__).resolve().parents[1]
    done = subprocess.run(
        [sys.executable, str(root / "tools" / "move_engine.py"), "--check", "--quiet"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "nothing to do" in done.stdout
