"""`clinieval analyze RUN_DIR...` and `clinieval export`: runs compared paired on sample ids.

Two kinds of real runs: PubMedQA on the embedded SmolLM2 (4 and 3 samples of one seeded slice,
the second sampled at temperature 1), and a task of our own answered by a scripted local server,
whose every score is known in advance (one item refused by a content filter in both runs, one
item only in the first run). Every number is checked against the records or a hand computation.
"""

from __future__ import annotations

import csv
import json
import math
import statistics
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clinieval.analysis.analyze import AnalyzeOptions, analyze
from clinieval.analysis.table import read_table
from clinieval.records.runs import RunDir
from tests.conftest import run_cli
from tests.fault_server import FaultServer

# -------------------------------------------------------------------------------------------------
# A scripted task: every answer, so every score, is known


ITEMS = [
    ("a", "yes", "p1"),
    ("b", "yes", "p1"),
    ("c", "no", "p2"),
    ("d", "no", "p2"),  # refused by the content filter in both runs
    ("e", "maybe", "p3"),
    ("f", "no", "p3"),  # only in the first run (the second has --limit 5)
]
ANSWERS = {
    "one": {"a": "yes", "b": "no", "c": "yes", "e": "maybe", "f": "yes"},
    "two": {"a": "yes", "b": "yes", "c": "no", "e": "no"},
}


def write_items(path: Path) -> Path:
    rows = [
        {
            "id": sid,
            "input": f"Is item-{sid} benign?" + (" FAULT:FILTER" if sid == "d" else ""),
            "choices": ["yes", "no", "maybe"],
            "target": target,
            "metadata": {"patient": patient, "year": 2000 + i, "mesh": ["x"]},
        }
        for i, (sid, target, patient) in enumerate(ITEMS)
    ]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def scripted_run(server: FaultServer, data: Path, out: Path, *extra: str) -> None:
    done = run_cli(
        *("run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(out), "--no-progress"),
        *("--scorer", "choice_extract", "--concurrency", "1", *extra),
    )
    assert done.returncode == 0, done.stderr


@pytest.fixture(scope="module")
def scripted(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Runs ``one`` (6 items) and ``two`` (the first 5) of one task, and ``scores/answered.jsonl``
    beside each from ``clinieval score``."""
    root = tmp_path_factory.mktemp("scripted")
    data = write_items(root / "data" / "items.jsonl")
    phase = {"run": "one"}

    def answer(prompt: str) -> str:
        sid = next(s for s, _, _ in ITEMS if f"item-{s} " in prompt)
        return f"The answer is {ANSWERS[phase['run']][sid]}."

    with FaultServer(responder=answer) as server:
        scripted_run(server, data, root / "one")
        phase["run"] = "two"
        scripted_run(server, data, root / "two", "--limit", "5")
    for name in ("one", "two"):
        scored = run_cli("score", str(root / name), "--scorer", "answered")
        assert scored.returncode == 0, scored.stderr
    yield root


def analysis(root: Path, *args: str) -> dict[str, Any]:
    out = root / "analysis"
    done = run_cli("analyze", *args, "--out", str(out))
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads((out / "analysis.json").read_text())
    return data


def test_two_runs_are_compared_paired_on_sample_ids(scripted: Path, tmp_path: Path) -> None:
    result = analysis(tmp_path, str(scripted / "one"), str(scripted / "two"))
    one, two = result["models"]
    # the same model twice: each arm is its alias and its run folder (the spec is in run_folders)
    assert (one, two) == ("fault [one]", "fault [two]")
    assert [r["model_spec"].endswith("@fault") for r in result["run_folders"]] == [True, True]
    assert set(result["scores"]) == {"choice_extract", "answered"}
    extract = result["scores"]["choice_extract"]
    # one: a=1 b=0 c=0 e=1 f=0 (d refused: no value, not 0); two: a=1 b=1 c=1 e=0
    assert extract["per_model"][one]["n"] == 5 and extract["per_model"][one]["mean"] == pytest.approx(0.4)
    assert extract["per_model"][two]["n"] == 4 and extract["per_model"][two]["mean"] == pytest.approx(0.75)
    (pair,) = extract["pairs"]
    # paired on a, b, c, e; f is only in run one, d failed in both
    diffs = [0, -1, -1, 1]
    assert (pair["model"], pair["opponent"], pair["n"], pair["unpaired"]) == (one, two, 4, 1)
    assert pair["mean_difference"] == pytest.approx(statistics.fmean(diffs))
    assert pair["sigma_d"] == pytest.approx(statistics.stdev(diffs))
    # McNemar: e right only in one (b=1), b and c right only in two (c=2); exact p = 2 * 4/8
    assert (pair["mcnemar"]["b"], pair["mcnemar"]["c"]) == (1, 2)
    assert pair["mcnemar"]["pvalue"] == pytest.approx(1.0)
    # exact sign flips over the 3 non-zero differences: every pattern is at least as extreme
    assert pair["pvalue"] == pytest.approx(1.0)
    runs = {r["model"]: r for r in result["run_folders"]}
    assert (runs[one]["samples"], runs[one]["failed"], runs[two]["samples"], runs[two]["failed"]) == (
        6,
        1,
        5,
        1,
    )
    md = (tmp_path / "analysis" / "analysis.md").read_text()
    assert "## Runs" in md and "| unpaired |" in md


def test_scores_files_are_columns_and_failures_stay_empty(scripted: Path, tmp_path: Path) -> None:
    table = tmp_path / "t.csv"
    done = run_cli("export", str(scripted / "one"), str(scripted / "two"), "--table", str(table))
    assert done.returncode == 0, done.stderr
    with table.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    header = list(rows[0])
    assert header == ["item", "model", "choice_extract", "answered", "error", "meta.patient", "meta.year"]
    by_key = {(r["item"], r["model"].rsplit(" ", 1)[1]): r for r in rows}
    assert len(rows) == 11 and ("f", "[two]") not in by_key
    refused = by_key[("d", "[one]")]
    assert (refused["choice_extract"], refused["answered"], refused["error"]) == ("", "", "content_filter")
    assert (
        by_key[("e", "[one]")]["choice_extract"] == "1.0"
        and by_key[("e", "[two]")]["choice_extract"] == "0.0"
    )
    assert by_key[("a", "[two]")]["answered"] == "1.0" and by_key[("a", "[two]")]["error"] == ""
    assert by_key[("c", "[one]")]["meta.patient"] == "p2" and by_key[("c", "[one]")]["meta.year"] == "2002"


def test_the_exported_table_analyses_to_the_same_numbers(scripted: Path, tmp_path: Path) -> None:
    runs = [str(scripted / "one"), str(scripted / "two")]
    direct = analysis(tmp_path / "direct", *runs, "--cluster", "meta.patient")
    for suffix in ("csv", "tsv", "jsonl"):
        table = tmp_path / f"t.{suffix}"
        assert run_cli("export", *runs, "--table", str(table)).returncode == 0
        again = analysis(tmp_path / suffix, str(table), "--cluster", "meta.patient")
        # meta.year is numeric but an attribute, never a score; meta.patient clusters both
        assert again["scores"] == direct["scores"] and again["models"] == direct["models"]
        assert again["items"] == direct["items"] == 6 and again["rows"] == direct["rows"] == 11
    assert direct["scores"]["choice_extract"]["pairs"][0]["clusters"] == 3


def test_one_run_gives_cis_per_scorer(scripted: Path, tmp_path: Path) -> None:
    result = analysis(tmp_path, str(scripted / "one"))
    extract = result["scores"]["choice_extract"]
    (only,) = extract["per_model"].values()
    assert only["n"] == 5 and only["mean"] == pytest.approx(0.4) and only["ci"] is not None
    assert extract["pairs"] == []
    assert any("needs at least 2 models" in u for u in result["undefined"])


def test_a_folder_of_runs_stands_for_its_runs(scripted: Path, tmp_path: Path) -> None:
    result = analysis(tmp_path, str(scripted))
    assert len(result["models"]) == 2


# -------------------------------------------------------------------------------------------------
# Mistakes: one line, exit 2


def one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    for needle in needles:
        assert needle in lines[0], lines[0]


def test_runs_of_other_data_or_another_task_are_refused(scripted: Path, tmp_path: Path) -> None:
    data = write_items(tmp_path / "other" / "items.jsonl")  # same task name, one more line
    with data.open("a", encoding="utf-8") as f:
        f.write(
            json.dumps({"id": "g", "input": "Is item-g benign?", "choices": ["yes", "no"], "target": "yes"})
            + "\n"
        )
    with FaultServer(answer="yes") as server:
        scripted_run(server, data, tmp_path / "three", "--limit", "2")
        other_task = tmp_path / "q.jsonl"
        other_task.write_text(
            json.dumps({"id": "a", "input": "Is item-a x?", "choices": ["yes", "no"]}) + "\n"
        )
        scripted_run(server, other_task, tmp_path / "four")
    one = str(scripted / "one")
    one_line_error(run_cli("analyze", one, str(tmp_path / "three")), "over other data files", "three")
    one_line_error(
        run_cli("analyze", one, str(tmp_path / "four")), "only runs of one task", "'jsonl:q.jsonl'"
    )
    table = tmp_path / "t.csv"
    one_line_error(run_cli("export", one, str(tmp_path / "four"), "--table", str(table)), "one task")
    assert not table.exists()


@pytest.mark.parametrize(
    ("args", "needles"),
    [
        (["analyze", "{root}/one", "{tmp}/missing"], ["missing: not found", "run folder"]),
        (["analyze", "{root}/one", "{tmp}/empty"], ["empty: not a run directory"]),
        (["analyze", "{root}/one", "{root}/one"], ["named twice"]),
        (["analyze", "{root}/one", "{root}/one/manifest.json"], ["is a file", "one or more run folders"]),
        (["analyze", "{root}/one/samples.jsonl"], ["a file of the run folder", "clinieval analyze"]),
        (["export", "{root}/one", "--table", "{tmp}/t.xlsx"], ["expected a .csv, .tsv or .jsonl"]),
        (["export", "{tmp}/empty", "--table", "{tmp}/t.csv"], ["not a run directory"]),
    ],
)
def test_mistakes_give_one_line(scripted: Path, tmp_path: Path, args: list[str], needles: list[str]) -> None:
    (tmp_path / "empty").mkdir()
    filled = [a.format(root=scripted, tmp=tmp_path) for a in args]
    one_line_error(run_cli(*filled), *needles)
    assert not (tmp_path / "t.csv").exists() and not (tmp_path / "t.xlsx").exists()


# -------------------------------------------------------------------------------------------------
# Real runs of the embedded model


@pytest.fixture(scope="module")
def pubmedqa_runs(pubmedqa_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("pubmedqa")
    common = ("run", "pubmedqa", "--data", str(pubmedqa_dir), "--shuffle", "0", "--no-progress")
    greedy, sampled = root / "greedy", root / "sampled"
    for out, extra in (
        (greedy, ("--limit", "4")),
        (sampled, ("--limit", "3", "--temperature", "1.0", "--seed", "3")),
    ):
        done = run_cli(*common, *extra, "--out", str(out), timeout=600)
        assert done.returncode == 0, done.stderr
    return greedy, sampled


def per_sample(run: Path, scorer: str) -> dict[str, float | None]:
    return {r.sample.id: r.scores[scorer].value for r in RunDir.open(run).records()}


def test_embedded_runs_pair_as_the_records_say(pubmedqa_runs: tuple[Path, Path], tmp_path: Path) -> None:
    greedy, sampled = pubmedqa_runs
    result = analysis(tmp_path, str(greedy), str(sampled))
    assert result["models"] == [
        "smollm2-135m-instruct [greedy]",
        "smollm2-135m-instruct [sampled]",
    ]
    assert set(result["scores"]) == {"choice_extract", "choice_loglik"}
    for scorer in ("choice_extract", "choice_loglik"):
        a, b = per_sample(greedy, scorer), per_sample(sampled, scorer)
        shared = [s for s in a if s in b and a[s] is not None and b[s] is not None]
        diffs = [a[s] - b[s] for s in shared]
        (pair,) = result["scores"][scorer]["pairs"]
        assert (pair["n"], pair["unpaired"]) == (len(shared), 1)
        assert pair["mean_difference"] == pytest.approx(statistics.fmean(diffs))
        assert pair["sigma_d"] == pytest.approx(statistics.stdev(diffs))
        means = result["scores"][scorer]["per_model"]
        for model, values in zip(result["models"], (a, b), strict=True):
            scored = [v for v in values.values() if v is not None]
            assert means[model]["mean"] == pytest.approx(statistics.fmean(scored))
    # log-likelihoods do not depend on the sampling temperature: no difference at all
    assert result["scores"]["choice_loglik"]["pairs"][0]["mean_difference"] == 0


def test_embedded_export_reads_back_to_the_same_analysis(
    pubmedqa_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    greedy, sampled = pubmedqa_runs
    table = tmp_path / "t.csv"
    assert run_cli("export", str(greedy), str(sampled), "--table", str(table)).returncode == 0
    direct = analysis(tmp_path / "direct", str(greedy), str(sampled))
    again = analysis(tmp_path / "again", str(table))
    assert again["scores"] == direct["scores"]
    read = read_table(table)
    assert "meta.year" in read.columns and read.is_numeric("meta.year")  # an attribute, not a score
    values = per_sample(greedy, "choice_extract")
    for row in read.rows:
        if str(row.cells["model"]).endswith("[greedy]"):
            assert read.number(row, "choice_extract") == values[str(row.cells["item"])]


# -------------------------------------------------------------------------------------------------
# The two rules the run table relies on, on plain tables


def test_meta_columns_are_never_default_scores_and_unpaired_items_are_counted(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text(
        "item,model,s,meta.year\ni1,a,1,2001\ni1,b,0,2001\ni2,a,1,2002\ni2,b,1,2002\ni3,a,0,2003\n"
    )
    result = analyze(read_table(path), AnalyzeOptions())
    assert set(result["scores"]) == {"s"}
    (pair,) = result["scores"]["s"]["pairs"]
    assert (pair["n"], pair["unpaired"], pair["mean_difference"]) == (2, 1, 0.5)
    explicit = analyze(read_table(path), AnalyzeOptions(scores=("s", "meta.year")))
    assert explicit["scores"]["meta.year"]["per_model"]["a"]["mean"] == 2002
    assert not math.isnan(pair["sigma_d"])
