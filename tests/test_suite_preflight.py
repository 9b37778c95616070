"""A suite plan that passes is a run that starts every cell (issue 38, deliverable 4).

`suite plan` passed a suite whose MedAlign cell, a completions model whose tokenizer cannot be
read, failed 19 minutes into the run, where `clinieval medalign run` refuses the same model before
any call. Here one suite is built per refusal the benchmark commands make before their first model
call (the model unreachable, not served, not allowed; the tokenizer and context size unknown; no
room for the record; log-likelihoods from a server that cannot serve them; the judge unreachable),
and `suite plan` and `suite run` must each refuse it in one line naming the cell, before any model
is asked for an answer and before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.conftest import free_port, run_cli
from tests.fault_server import FaultServer
from tests.suite_helpers import pubmedqa_folder

OLLAMA = {"routes": {"/api/version": {"version": "0.5.7"}}, "model_fields": {"owned_by": "library"}}
"""What an Ollama server says about itself (tests/test_first_hour.py): prompt log-probabilities missing."""


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every benchmark's small synthetic set, written by its own suite part, and PubMedQA items."""
    from clinieval.cli.suite import suite_parts

    root = tmp_path_factory.mktemp("preflight-data")
    pubmedqa_folder(root / "pqa")
    for part in suite_parts():
        if part.name in {"medalign", "ehrnoteqa", "automedeval"}:
            part.synthetic(root / part.name, 0)
    return root


@pytest.fixture
def server() -> Iterator[FaultServer]:
    with FaultServer() as s:
        yield s


@pytest.fixture
def ollama() -> Iterator[FaultServer]:
    with FaultServer(**OLLAMA) as s:  # type: ignore[arg-type]
        yield s


def _suite(
    tmp_path: Path, data: Path, model: str, benchmark: str, options: str = "", judge: str = ""
) -> Path:
    lines = ["[models]", f'm = "{model}"', "", "[endpoints]", "retries = 0", "timeout = 10", ""]
    if judge:
        lines += ["[judge]", f'model = "{judge}"', "repeats = 1", ""]
    lines += [
        f"[benchmarks.{benchmark}]",
        f'data = "{data / benchmark if benchmark != "pubmedqa" else data / "pqa"}"',
    ]
    lines += ["limit = 2", options]
    path = tmp_path / "suite.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _refused_everywhere(path: Path, tmp_path: Path, cell: str, *expected: str) -> str:
    """`suite plan` and `suite run` both refuse ``path`` in one line naming ``cell`` and every
    ``expected`` text; the run writes nothing."""
    out = tmp_path / "out"
    line = ""
    for command in (["plan", str(path)], ["run", str(path), "--out", str(out), "--no-progress"]):
        done = run_cli("suite", *command)
        assert done.returncode == 2, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith(
            f"error: {path}: 1 cell would be refused before the first model call: {cell}: "
        )
        for text in expected:
            assert text in line, (text, line)
    assert not out.exists()
    return line


def test_an_unreachable_model(data: Path, tmp_path: Path) -> None:
    dead = f"openai:http://127.0.0.1:{free_port()}/v1@m"
    for benchmark, options in (("pubmedqa", ""), ("automedeval", "")):
        path = _suite(tmp_path, data, dead, benchmark, options)
        _refused_everywhere(path, tmp_path, f"{benchmark} × m", "cannot reach http://127.0.0.1:")


def test_a_model_the_server_does_not_serve(server: FaultServer, data: Path, tmp_path: Path) -> None:
    path = _suite(tmp_path, data, f"openai:{server.url}@other", "pubmedqa")
    _refused_everywhere(path, tmp_path, "pubmedqa × m", "serves fault, not 'other'")
    assert not server.log.received


def test_an_embedded_model_file_that_is_not_there(data: Path, tmp_path: Path) -> None:
    path = _suite(tmp_path, data, f"llamacpp:{tmp_path / 'missing.gguf'}", "pubmedqa")
    out = tmp_path / "out"
    for command in (["plan", str(path)], ["run", str(path), "--out", str(out), "--no-progress"]):
        done = run_cli("suite", *command)
        assert done.returncode == 2 and "missing.gguf" in done.stderr and "Traceback" not in done.stderr
    assert not out.exists()


def test_a_completions_model_whose_tokenizer_and_context_cannot_be_read(
    server: FaultServer, data: Path, tmp_path: Path
) -> None:
    """The issue's case: MedAlign fits each record to the model's context with its tokenizer; a
    server that says neither is refused by `medalign run` before any call, and now by the plan,
    worded as the suite file's own keys."""
    model = f"openai:{server.url}@fault"
    path = _suite(tmp_path, data, model, "medalign", "max_tokens = 16\njudge = false")
    line = _refused_everywhere(
        path, tmp_path, "medalign × m", "[benchmarks.medalign] tokenizer", "[benchmarks.medalign] max_context"
    )
    assert "--tokenizer" not in line and "--max-context" not in line
    assert not server.log.received
    # the benchmark's own command refuses the same model for the same reason
    own = run_cli(
        "run", "medalign", "--data", str(data / "medalign"), "-m", model, "--out", str(tmp_path / "own")
    )
    assert own.returncode == 2 and "--tokenizer" in own.stderr and "--max-context" in own.stderr
    # set as the refusal says, the plan passes: every cell of that plan starts
    fixed = _suite(
        tmp_path,
        data,
        model,
        "medalign",
        'max_tokens = 16\njudge = false\ntokenizer = "tiktoken:cl100k_base"\nmax_context = 2048',
    )
    done = run_cli("suite", "plan", str(fixed))
    assert done.returncode == 0, done.stderr
    assert "checked: 1 cells to run pass their benchmarks' pre-flight (1 models opened)" in done.stdout
    assert not server.log.received  # the check asks no model for an answer


def test_a_record_with_no_room_beside_its_prompt(server: FaultServer, data: Path, tmp_path: Path) -> None:
    options = 'judge = false\ntokenizer = "tiktoken:cl100k_base"\nmax_context = 260\nreserve = 256'
    path = _suite(tmp_path, data, f"openai:{server.url}@fault", "medalign", options)
    _refused_everywhere(path, tmp_path, "medalign × m", "no room for any of the record")
    assert not server.log.received


def test_log_likelihoods_from_a_server_that_cannot_serve_them(
    ollama: FaultServer, data: Path, tmp_path: Path
) -> None:
    path = _suite(tmp_path, data, f"openai:{ollama.url}@fault", "ehrnoteqa", 'format = "mc"\nloglik = true')
    line = _refused_everywhere(
        path, tmp_path, "ehrnoteqa × m", "needs prompt log-probabilities", "Ollama server"
    )
    assert '[endpoints] server_kind = "vllm"' in line  # the suite's own key, not --server-kind
    assert not ollama.log.received


def test_a_judge_that_is_not_there(server: FaultServer, data: Path, tmp_path: Path) -> None:
    dead = f"openai:http://127.0.0.1:{free_port()}/v1@judge"
    path = _suite(
        tmp_path, data, f"openai:{server.url}@fault", "ehrnoteqa", 'format = "mc"\nloglik = false', judge=dead
    )
    _refused_everywhere(path, tmp_path, "ehrnoteqa × m", "cannot reach http://127.0.0.1:")
    assert not server.log.received


def test_one_unreachable_model_is_one_entry_for_all_its_cells(
    server: FaultServer, data: Path, tmp_path: Path
) -> None:
    """Two benchmarks over a dead model and a live one: one entry names both dead cells, the live
    model's cells pass, and --skip-refused runs them while recording the refused ones as failed."""
    dead = f"openai:http://127.0.0.1:{free_port()}/v1@m"
    text = "\n".join(
        [
            "[models]",
            f'dead = "{dead}"',
            f'live = "openai:{server.url}@fault"',
            "[endpoints]",
            "retries = 0",
            "[benchmarks.pubmedqa]",
            f'data = "{data / "pqa"}"',
            "limit = 2",
            "[benchmarks.automedeval]",
            f'data = "{data / "automedeval"}"',
            "limit = 1",
            "",
        ]
    )
    path = tmp_path / "two.toml"
    path.write_text(text, encoding="utf-8")
    done = run_cli("suite", "plan", str(path))
    assert done.returncode == 2
    assert "2 cells would be refused before the first model call: pubmedqa × dead, automedeval × dead: " in (
        done.stderr
    )
    assert "live" not in done.stderr
    out = tmp_path / "out"
    ran = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress", "--skip-refused")
    assert ran.returncode == 3, ran.stderr
    assert "2 cells run, 0 already complete, 2 failed" in ran.stderr
    assert "failed: pubmedqa × dead: cannot reach" in ran.stderr
    assert len(server.log.received) > 0  # the live model's cells ran
