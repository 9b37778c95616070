"""``clinieval.records``: the one documented place to read run folders from a script.

README and docs tell a user to read a run with ``clinieval.records.RunDir(path).records()``; a
path typed as a string is what a user has, so every entry point takes ``str`` as well as ``Path``
(``RunDir("runs/x").records()`` used to raise TypeError on ``str / "samples.jsonl"``). The run
read here is a real one: ``clinieval run`` against a scripted local server.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

import clinieval.records
from clinieval.records import RunDir, find_run_dirs, read_runs, summarize, write_table
from tests.conftest import run_cli
from tests.fault_server import FaultServer

ITEMS = [("a", "yes"), ("b", "no"), ("c", "yes")]


@pytest.fixture(scope="module")
def run_folder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One finished run of three items, every answer "yes": scores 1, 0, 1."""
    root = tmp_path_factory.mktemp("records_api")
    data = root / "items.jsonl"
    rows = [
        {"id": i, "input": f"Is item-{i} benign?", "choices": ["yes", "no"], "target": t} for i, t in ITEMS
    ]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    out = root / "runs" / "one"
    with FaultServer(answer="yes") as server:
        done = run_cli(
            *("run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(out), "--no-progress"),
            *("--scorer", "choice_extract", "--concurrency", "1"),
        )
    assert done.returncode == 0, done.stderr
    yield out


def test_a_run_folder_is_read_from_a_str_as_from_a_path(run_folder: Path) -> None:
    from_str = RunDir(str(run_folder)).records()
    assert [r.sample.id for r in from_str] == ["a", "b", "c"]
    assert [r.to_dict() for r in from_str] == [r.to_dict() for r in RunDir(run_folder).records()]
    assert RunDir(str(run_folder)).path == run_folder
    assert RunDir.open(str(run_folder)).manifest()["status"] == "complete"
    [summary] = summarize(from_str, ["choice_extract"])
    assert (summary.scored, summary.mean) == (3, pytest.approx(2 / 3))


def test_finding_and_tabling_runs_take_str(run_folder: Path, tmp_path: Path) -> None:
    assert find_run_dirs([str(run_folder.parent)]) == [run_folder]
    table = read_runs([str(run_folder)])
    assert [a.path for a in table.arms] == [run_folder]
    out = tmp_path / "results.csv"
    write_table(table, str(out))
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].split(",")[:3] == ["item", "model", "choice_extract"]
    assert len(lines) == 1 + len(ITEMS)


def test_each_documented_name_is_its_modules_own() -> None:
    for name in clinieval.records.__all__:
        value = getattr(clinieval.records, name)
        home = sys.modules[value.__module__]
        assert home.__name__.startswith("clinieval.records."), name
        assert getattr(home, name) is value
    assert set(clinieval.records.__all__) <= set(dir(clinieval.records))
    with pytest.raises(AttributeError, match="no attribute 'RunFolder'"):
        _ = clinieval.records.RunFolder  # type: ignore[attr-defined]


def test_importing_a_record_type_loads_no_run_folder_nor_analysis() -> None:
    """A scorer imports clinieval.records.sample_record; that must not load what sits above
    scoring (the summaries' numpy and analysis, the long table) through the package's names."""
    code = (
        "import sys, clinieval.records.sample_record\n"
        "print(sorted(m for m in sys.modules if m.startswith(('numpy', 'clinieval.'))))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = set(ast.literal_eval(done.stdout))
    assert "clinieval.records.sample_record" in loaded
    assert not {m for m in loaded if m.startswith(("numpy", "clinieval.analysis", "clinieval.scoring"))}
    assert not loaded & {f"clinieval.records.{m}" for m in ("runs", "summary", "run_table", "failures")}
