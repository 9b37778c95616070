"""Every benchmark script that docs/benchmarks.md documents still runs from HEAD (issue 35).

A documented command broke silently once: a module rename left ``bench/medeval_labeller.py``
failing with ``ModuleNotFoundError`` while the figures it had recorded stayed in the docs. Each
script is too slow to run at full size here, so two cheap checks stand in for its first seconds:

* every ``clinieval`` import in every ``bench/*.py``, lazy ones inside functions included, names
  a module and a name that exist (read from the source with ``ast``, then imported);
* every documented script answers ``--help`` (its own imports, its argument parser).
"""

from __future__ import annotations

import ast
import importlib
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO

BENCH = REPO / "bench"
DOCUMENTED = sorted(set(re.findall(r"bench/([a-z0-9_]+)\.py", (REPO / "docs" / "benchmarks.md").read_text())))


def _clinieval_imports(path: Path) -> list[tuple[int, str, str | None]]:
    """(line, module, name) of every ``clinieval`` import in ``path``, at any depth."""
    found: list[tuple[int, str, str | None]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name, None) for a in node.names if a.name.split(".")[0] == "clinieval"]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and (node.module or "").split(".")[0] == "clinieval"
        ):
            found += [(node.lineno, node.module or "", a.name) for a in node.names]
    return found


def test_every_documented_script_exists() -> None:
    assert DOCUMENTED, "docs/benchmarks.md names no bench script"
    assert [s for s in DOCUMENTED if not (BENCH / f"{s}.py").is_file()] == []


@pytest.mark.parametrize("script", sorted(p.name for p in BENCH.glob("*.py")))
def test_every_clinieval_import_of_a_bench_script_resolves(script: str) -> None:
    broken = []
    for line, module, name in _clinieval_imports(BENCH / script):
        try:
            imported = importlib.import_module(module)
        except ImportError as e:
            broken.append(f"{script}:{line}: {module}: {e}")
            continue
        if name is not None and name != "*" and not hasattr(imported, name):
            try:
                importlib.import_module(f"{module}.{name}")
            except ImportError:
                broken.append(f"{script}:{line}: {module} has no {name}")
    assert broken == []


@pytest.mark.parametrize("script", [s for s in DOCUMENTED if not s.startswith("_")])
def test_every_documented_script_answers_help(script: str) -> None:
    done = subprocess.run(
        [sys.executable, str(BENCH / f"{script}.py"), "--help"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout.lower(), done.stdout[:500]


def test_the_labeller_worker_run_under_older_checkouts_imports_only_the_labeller() -> None:
    """``medeval_labeller.py --dev --before DIR`` runs its worker with an older checkout's ``src``
    on the path; any clinieval module the worker imports besides the labeller's own package may be
    missing or renamed there (``medeval.records`` became ``medeval.items`` and broke it once)."""
    modules = {module for _, module, _ in _clinieval_imports(BENCH / "_labeller_worker.py")}
    assert modules <= {"clinieval", "clinieval.benchmarks.medeval.labeller"}, modules
    assert "_labeller_worker.py" in (BENCH / "medeval_labeller.py").read_text(encoding="utf-8")
