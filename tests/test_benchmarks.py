"""The benchmark list: every benchmark is one package the CLI mounts, and ``clinieval run NAME``
works for each single-arm task (pubmedqa, medalign, ehrnoteqa, a .jsonl path) against a real
local OpenAI-compatible server started here."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinieval.benchmark import TaskRequest, find_benchmark
from clinieval.benchmarks import BENCHMARKS
from clinieval.errors import UserError
from tests.conftest import run_cli
from tests.fault_server import FaultServer
from tests.test_cli_errors import assert_one_line_error

CHOICES = ["Aspirin", "Metoprolol 25 mg", "Heparin drip", "Warfarin", "Aspirin and clopidogrel"]


def _records(run: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (run / "samples.jsonl").read_text().splitlines()]


def _manifest_task(run: Path) -> dict[str, object]:
    task = json.loads((run / "manifest.json").read_text())["spec"]["task"]
    assert isinstance(task, dict)
    return task


def test_names_are_unique_and_each_name_finds_its_own_benchmark() -> None:
    names = [b.name for b in BENCHMARKS]
    assert sorted(names) == ["automedeval", "ehrnoteqa", "jsonl", "medalign", "medeval", "pubmedqa"]
    for benchmark in BENCHMARKS:
        if benchmark.name != "jsonl":
            assert find_benchmark(BENCHMARKS, benchmark.name) is benchmark
    assert find_benchmark(BENCHMARKS, "mine.jsonl").name == "jsonl"
    assert find_benchmark(BENCHMARKS, "medeval-codes").name == "medeval"
    with pytest.raises(UserError, match="unknown task 'medqa'"):
        find_benchmark(BENCHMARKS, "medqa")


def test_scorer_names_do_not_clash() -> None:
    from clinieval.scoring.catalog import SHARED_SCORERS, scorer_mapping

    known = scorer_mapping([*SHARED_SCORERS, *(s for b in BENCHMARKS for s in b.scorers())])
    assert {"exact_match", "key_facts", "letter_extract", "loglik_letter"} <= set(known)
    with pytest.raises(UserError, match="two scorers are named 'exact_match'"):
        scorer_mapping([known["exact_match"], known["exact_match"]])


def test_cli_mounts_every_benchmark_with_commands_and_lists_them() -> None:
    listed = run_cli("benchmarks")
    assert listed.returncode == 0, listed.stderr
    for benchmark in BENCHMARKS:
        assert f"{benchmark.name}\t{benchmark.description}" in listed.stdout
    helped = run_cli("--help")
    for benchmark in BENCHMARKS:
        assert (benchmark.commands() is not None) == (benchmark.name in helped.stdout.split())


def test_run_medalign_on_a_synthetic_folder(tmp_path: Path) -> None:
    from clinieval.benchmarks.medalign.synth import build_synthetic_set

    build_synthetic_set(tmp_path / "data", patients=2, per_patient=1)
    out = tmp_path / "run"
    with FaultServer(answer="The patient takes metformin.") as server:
        proc = run_cli(
            "run", "medalign", "--data", str(tmp_path / "data"), "-m", f"openai:{server.url}@fault",
            "--tokenizer", "tiktoken:cl100k_base", "--max-context", "2048", "--limit", "1",
            "--max-tokens", "8", "--out", str(out), "--no-progress",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    task = _manifest_task(out)
    assert task["name"] == "medalign-keep-recent"
    assert task["scorers"] == ["answered", "key_facts", "key_facts_all", "key_facts_f1"]
    [record] = _records(out)
    assert record["output"]["text"] == "The patient takes metformin."  # type: ignore[index]


def test_run_medalign_refuses_a_folder_of_neither_layout_and_a_split(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("run", "medalign", "--data", str(tmp_path)), "instructions.csv and ehrs/")
    assert_one_line_error(
        run_cli("run", "medalign", "--data", str(tmp_path), "--split", "test"), "--split does not apply"
    )


def _inline(tmp_path: Path) -> Path:
    path = tmp_path / "qa.jsonl"
    item = {
        "id": "q1",
        "patient_id": "1",
        "question": "Which rate-control drug was the patient discharged on?",
        "choices": CHOICES,
        "answer": "B",
        "category": "Treatment",
        "notes": ["DISCHARGE SUMMARY\nDISCHARGE MEDICATIONS:\n- Metoprolol 25 mg by mouth twice daily"],
    }
    path.write_text(json.dumps(item) + "\n", encoding="utf-8")
    return path


def test_run_ehrnoteqa_with_a_benchmark_scorer(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FaultServer(answer="B. Metoprolol 25 mg") as server:
        proc = run_cli(
            "run", "ehrnoteqa", "--data", str(_inline(tmp_path)), "-m", f"openai:{server.url}@fault",
            "--scorer", "letter_extract", "--out", str(out), "--no-progress",
        )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    task = _manifest_task(out)
    assert (task["name"], task["scorers"]) == ("ehrnoteqa-mc", ["letter_extract"])
    summary = json.loads((out / "summary.json").read_text())
    assert "letter_extract" in json.dumps(summary) and "1.0" in json.dumps(summary)


def test_run_ehrnoteqa_needs_data(tmp_path: Path) -> None:
    assert_one_line_error(run_cli("run", "ehrnoteqa"), "ehrnoteqa needs --data")
    assert_one_line_error(
        run_cli("run", "ehrnoteqa", "--data", str(tmp_path)), "expected qa.jsonl and discharge.csv"
    )


def test_run_a_jsonl_file_and_refuse_a_split_on_it(tmp_path: Path) -> None:
    items = tmp_path / "mine.jsonl"
    items.write_text(json.dumps({"id": "a", "input": "Say yes.", "target": "yes"}) + "\n")
    out = tmp_path / "run"
    with FaultServer(answer="Yes") as server:
        model = f"openai:{server.url}@fault"
        proc = run_cli("run", str(items), "-m", model, "--out", str(out), "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert _manifest_task(out)["name"] == "jsonl:mine.jsonl"
    assert_one_line_error(run_cli("run", str(items), "--split", "all"), "--data and --split do not apply")


def test_pubmedqa_split_is_checked_before_any_data_is_read() -> None:
    pubmedqa = find_benchmark(BENCHMARKS, "pubmedqa")
    with pytest.raises(UserError, match="pubmedqa has splits test, all"):
        pubmedqa.task(TaskRequest(name="pubmedqa", split="dev"))
