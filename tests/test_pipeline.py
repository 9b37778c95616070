"""PubMedQA on the embedded default model, both scorers, through the CLI, and re-scoring."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from clinieval.runs import RunDir
from clinieval.scoring.scorers import ChoiceLoglik
from tests.conftest import BIN


def test_pubmedqa_embedded_both_scorers_and_rescore(pubmedqa_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    cmd = [
        str(BIN / "clinieval"),
        "run",
        "pubmedqa",
        "--limit",
        "3",
        "--out",
        str(out),
        "--no-progress",
        "--data",
        str(pubmedqa_dir),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "tiny embedded model" in done.stderr
    truth = json.loads((pubmedqa_dir / "test_ground_truth.json").read_text())
    records = RunDir.open(out).records()
    assert [r.sample.id for r in records] == list(truth)[:3]
    for r in records:
        assert r.sample.target == truth[r.sample.id]
        assert r.output is not None and r.output.ok
        assert r.loglik is not None and len(r.loglik.logliks) == 3
        extract, loglik = r.scores["choice_extract"], r.scores["choice_loglik"]
        assert loglik.answer == ["yes", "no", "maybe"][max(range(3), key=lambda i: r.loglik.logliks[i])]
        assert loglik.value == float(loglik.answer == r.sample.target)
        assert extract.value == float(extract.answer == r.sample.target)
    summary = json.loads((out / "summary.json").read_text())["summaries"]
    assert {s["scorer"] for s in summary} == {"choice_extract", "choice_loglik"}
    mean = sum(r.scores["choice_loglik"].value or 0 for r in records) / 3
    assert next(s for s in summary if s["scorer"] == "choice_loglik")["mean"] == mean

    rescored = subprocess.run(
        [str(BIN / "clinieval"), "score", str(out), "--scorer", "choice_loglik_norm"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert rescored.returncode == 0, rescored.stderr
    rows = [json.loads(x) for x in (out / "scores" / "choice_loglik_norm.jsonl").read_text().splitlines()]
    norm = ChoiceLoglik(name="n", normalize=True)
    assert [row["answer"] for row in rows] == [norm.score(r).answer for r in records]


def test_changed_settings_refuse_to_mix_into_an_existing_run(pubmedqa_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    base = [
        str(BIN / "clinieval"),
        "run",
        "pubmedqa",
        "--limit",
        "1",
        "--out",
        str(out),
        "--no-progress",
        "--data",
        str(pubmedqa_dir),
        "--scorer",
        "choice_loglik",
    ]
    assert subprocess.run(base, capture_output=True, timeout=300).returncode == 0
    before = (out / "samples.jsonl").read_text()
    other = subprocess.run([*base, "--temperature", "0.7"], capture_output=True, text=True, timeout=300)
    assert other.returncode == 2 and "holds a different run" in other.stderr
    assert "generation.temperature" in other.stderr
    assert (out / "samples.jsonl").read_text() == before
