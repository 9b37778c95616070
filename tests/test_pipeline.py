"""PubMedQA on the embedded default model, both scorers, through the CLI, and re-scoring."""

from __future__ import annotations

import json
from pathlib import Path

from clinieval.records.runs import RunDir
from clinieval.scoring.scorers import ChoiceLoglik
from tests.conftest import run_cli


def test_pubmedqa_embedded_both_scorers_and_rescore(pubmedqa_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = run_cli(
        *("run", "pubmedqa", "--limit", "3", "--out", str(out), "--no-progress"),
        *("--data", str(pubmedqa_dir)),
    )
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

    rescored = run_cli("score", str(out), "--scorer", "choice_loglik_norm")
    assert rescored.returncode == 0, rescored.stderr
    rows = [json.loads(x) for x in (out / "scores" / "choice_loglik_norm.jsonl").read_text().splitlines()]
    norm = ChoiceLoglik(name="n", normalize=True)
    assert [row["answer"] for row in rows] == [norm.score(r).answer for r in records]


def test_changed_settings_refuse_to_mix_into_an_existing_run(pubmedqa_dir: Path, tmp_path: Path) -> None:
    out = tmp_path / "run"
    base = ["run", "pubmedqa", "--limit", "1", "--out", str(out), "--no-progress"]
    base += ["--data", str(pubmedqa_dir), "--scorer", "choice_loglik"]
    assert run_cli(*base).returncode == 0
    before = (out / "samples.jsonl").read_text()
    other = run_cli(*base, "--temperature", "0.7")
    assert other.returncode == 2 and "holds a different run" in other.stderr
    assert "generation.temperature" in other.stderr
    assert (out / "samples.jsonl").read_text() == before
