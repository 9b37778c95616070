"""Bad input: one clear error line, exit code 2, and no run files left behind."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from clinieval.errors import UserError
from clinieval.privacy import check_endpoint
from tests.conftest import free_port, run_cli
from tests.fault_server import FaultServer


def assert_one_line_error(proc: subprocess.CompletedProcess[str], *needles: str) -> None:
    assert proc.returncode == 2, proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: ")
    assert "Traceback" not in proc.stderr
    for needle in needles:
        assert needle in lines[0]


@pytest.fixture
def items(tmp_path: Path) -> Path:
    path = tmp_path / "items.jsonl"
    path.write_text(json.dumps({"id": "a", "input": "q?", "target": "yes"}) + "\n")
    return path


def test_unknown_backend(tmp_path: Path, items: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", str(items), "-m", "mystery:thing", "--out", str(out))
    assert_one_line_error(proc, "unknown backend 'mystery'", "llamacpp:")
    assert not out.exists()


def test_unknown_embedded_model(tmp_path: Path, items: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", str(items), "-m", "llamacpp:gpt-17", "--out", str(out))
    assert_one_line_error(proc, "unknown embedded model 'gpt-17'", "smollm2-135m-instruct")
    assert not out.exists()


def test_spec_without_model_name(tmp_path: Path, items: Path) -> None:
    proc = run_cli("run", str(items), "-m", "openai:http://127.0.0.1:8000/v1", "--out", str(tmp_path / "r"))
    assert_one_line_error(proc, "URL@model-name")


def test_unreachable_endpoint(tmp_path: Path, items: Path) -> None:
    out = tmp_path / "run"
    port = free_port()  # nothing listens there
    proc = run_cli("run", str(items), "-m", f"openai:http://127.0.0.1:{port}/v1@m", "--out", str(out))
    assert_one_line_error(proc, "cannot reach", str(port))
    assert not out.exists()


def test_non_loopback_host_refused_without_allowlist(tmp_path: Path, items: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", str(items), "-m", "openai:https://gateway.example.org/v1@gpt", "--out", str(out))
    assert_one_line_error(proc, "not loopback", "--allow-host gateway.example.org")
    assert not out.exists()


def test_allowlist_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    check_endpoint("http://127.0.0.5:80/v1")
    check_endpoint("http://[::1]:80/v1")
    check_endpoint("http://localhost:80/v1")
    with pytest.raises(UserError):
        check_endpoint("http://10.0.0.1/v1")
    check_endpoint("https://gw.example.org/v1", allow=["gw.example.org"])
    monkeypatch.setenv("CLINIEVAL_ALLOWED_HOSTS", "a.example, gw.example.org")
    check_endpoint("https://gw.example.org/v1")
    with pytest.raises(UserError):
        check_endpoint("ftp://127.0.0.1/v1")


def test_jsonl_missing_field_names_file_and_line(tmp_path: Path) -> None:
    data = tmp_path / "bad.jsonl"
    data.write_text(json.dumps({"id": "a", "input": "q"}) + "\n" + json.dumps({"id": "b"}) + "\n")
    out = tmp_path / "run"
    proc = run_cli("run", str(data), "--out", str(out))
    assert_one_line_error(proc, f"{data}:2", "missing field 'input'")
    assert not out.exists()


def test_pubmedqa_item_missing_question(tmp_path: Path, pubmedqa_dir: Path) -> None:
    bad = tmp_path / "pqa"
    bad.mkdir()
    items = json.loads((pubmedqa_dir / "ori_pqal.json").read_text())
    first = next(iter(items))
    del items[first]["QUESTION"]
    (bad / "ori_pqal.json").write_text(json.dumps(items))
    shutil.copy(pubmedqa_dir / "test_ground_truth.json", bad / "test_ground_truth.json")
    out = tmp_path / "run"
    proc = run_cli("run", "pubmedqa", "--data", str(bad), "--split", "all", "--out", str(out))
    assert_one_line_error(proc, f"item {first}", "missing field 'QUESTION'")
    assert not out.exists()


def test_unknown_task_and_scorer(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("run", "medqa-9000"), "unknown task 'medqa-9000'")
    assert_one_line_error(run_cli("run", "pubmedqa", "--scorer", "vibes"), "unknown scorer 'vibes'")


def test_score_on_a_folder_that_is_not_a_run(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("score", str(tmp_path), "--scorer", "exact_match"), "not a run directory")


def test_choice_scorer_on_samples_without_choices(tmp_path: Path, items: Path) -> None:
    out = tmp_path / "run"
    proc = run_cli("run", str(items), "--scorer", "choice_loglik", "--out", str(out))
    assert_one_line_error(proc, "choice_loglik needs choices", "sample 'a'")
    assert not out.exists()


def test_server_that_does_not_serve_the_model(tmp_path: Path, items: Path) -> None:
    out = tmp_path / "run"
    with FaultServer() as server:
        proc = run_cli("run", str(items), "-m", f"openai:{server.url}@gpt-99", "--out", str(out))
    assert_one_line_error(proc, "serves fault, not 'gpt-99'")
    assert not out.exists()


def test_url_without_v1_is_caught_before_the_run(tmp_path: Path, items: Path) -> None:
    out = tmp_path / "run"
    with FaultServer() as server:
        root = server.url.removesuffix("/v1")
        proc = run_cli("run", str(items), "-m", f"openai:{root}/wrong@fault", "--out", str(out))
    assert_one_line_error(proc, "no OpenAI-compatible API there", "/v1")
    assert not out.exists()


def test_a_run_where_every_call_failed_exits_non_zero(tmp_path: Path) -> None:
    data = tmp_path / "filtered.jsonl"
    data.write_text(
        "".join(json.dumps({"id": f"x{i}", "input": f"q{i} FAULT:FILTER"}) + "\n" for i in range(3))
    )
    out = tmp_path / "run"
    with FaultServer() as server:
        proc = run_cli(
            "run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(out), "--no-progress"
        )
    assert proc.returncode == 1
    assert "every model call failed (content_filter=3)" in proc.stderr
    assert "nan" not in proc.stdout
    assert json.loads((out / "manifest.json").read_text())["status"] == "complete"
