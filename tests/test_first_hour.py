"""Issue 23: a newcomer's first hour tells the truth.

What a server is decides the default scorers and the requests in flight; requests in flight follow
what the server can take; a run that left items failed says so in its exit status; the summary
never cuts a number and never counts an unscorable sample as a failure.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from clinieval.models.concurrency import AdaptiveLimit
from clinieval.models.openai_http import OpenAIModel
from clinieval.records.sample_record import SampleRecord
from clinieval.records.summary import summarize
from clinieval.scoring.scorers import ChoiceExtraction, ChoiceLoglik, ExactMatch
from clinieval.types import LoglikOutput, Message, ModelOutput, Sample

from .conftest import run_cli
from .fault_server import FaultServer

# --- what each server says about itself ------------------------------------------------------------
# vLLM, TGI, Ollama and llama-server cannot run on this machine: FaultServer stands in for each,
# answering with the fields their documentation gives. llama-cpp-python's server is real (below).
STAND_INS: list[tuple[str, dict[str, Any], dict[str, Any], dict[str, str], tuple[Any, ...]]] = [
    ("vllm", {}, {"owned_by": "vllm", "max_model_len": 8192}, {}, ("vllm", 8192, None, "ok")),
    (
        "llama-server",
        {"/props": {"total_slots": 2, "default_generation_settings": {"n_ctx": 4096}}},
        {"owned_by": "llamacpp"},
        {},
        ("llama.cpp", 4096, 2, "missing"),
    ),
    (
        "llama-server by its header",
        {"/props": {"total_slots": 4, "default_generation_settings": {"n_ctx": 2048}}},
        {},
        {"Server": "llama.cpp"},
        ("llama.cpp", 2048, 4, "missing"),
    ),
    (
        "tgi",
        {"/info": {"model_id": "m", "max_total_tokens": 3000, "max_concurrent_requests": 128}},
        {},
        {},
        ("tgi", 3000, 128, "missing"),
    ),
    (
        "ollama",
        {"/api/version": {"version": "0.5.7"}},
        {"owned_by": "library"},
        {},
        ("ollama", None, None, "missing"),
    ),
    ("generic", {}, {}, {}, ("generic", None, None, "unknown")),
]


@pytest.mark.parametrize(
    ("name", "routes", "fields", "headers", "expected"), STAND_INS, ids=[s[0] for s in STAND_INS]
)
def test_server_kind_context_and_slots_are_read_where_each_server_says_them(
    name: str,
    routes: dict[str, Any],
    fields: dict[str, Any],
    headers: dict[str, str],
    expected: tuple[Any, ...],
) -> None:
    with FaultServer(routes=routes, model_fields=fields, headers=headers) as server:
        model = OpenAIModel(server.url, "fault")

        async def go() -> None:
            await model.check()
            await model.aclose()

        asyncio.run(go())
    info = model.server_info
    assert info is not None
    assert (info.kind, info.context_size, info.slots, info.prompt_logprobs) == expected
    assert model.context_length == expected[1]


def test_a_stated_server_kind_wins_over_detection() -> None:
    with FaultServer(model_fields={"owned_by": "vllm"}) as server:
        model = OpenAIModel(server.url, "fault", server_kind="llama-cpp-python")
        asyncio.run(model.check())
    assert model.server_info is not None
    assert (model.server_info.kind, model.server_info.slots, model.server_info.evidence) == (
        "llama-cpp-python",
        1,
        "--server-kind",
    )


def test_the_real_llama_cpp_python_server_is_recognised(llama_server: str) -> None:
    model = OpenAIModel(llama_server, "smol")
    asyncio.run(model.check())
    info = model.server_info
    assert info is not None
    assert (info.kind, info.slots, info.prompt_logprobs) == ("llama-cpp-python", 1, "shifted")


def test_pubmedqa_defaults_leave_out_loglik_and_use_one_slot_on_llama_cpp_python(
    llama_server: str, pubmedqa_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    p = run_cli(
        "run",
        "pubmedqa",
        "-m",
        f"openai:{llama_server}@smol",
        "--limit",
        "3",
        "--out",
        str(out),
        "--no-progress",
    )
    assert p.returncode == 0, p.stderr
    assert "choice_loglik left out of the default scorers" in p.stderr
    assert "shifted by one token" in p.stderr
    assert "1 in flight instead of 16" in p.stderr
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["spec"]["task"]["scorers"] == ["choice_extract"]
    assert manifest["server"]["kind"] == "llama-cpp-python"
    summary = json.loads((out / "summary.json").read_text())
    assert [s["scorer"] for s in summary["summaries"]] == ["choice_extract"]
    assert summary["run"]["concurrency"]["ceiling"] == 1


def test_asking_for_loglik_on_a_shifting_server_is_refused_before_anything_is_written(
    llama_server: str, pubmedqa_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    p = run_cli(
        "run",
        "pubmedqa",
        "-m",
        f"openai:{llama_server}@smol",
        "--scorer",
        "choice_loglik",
        "--limit",
        "2",
        "--out",
        str(out),
    )
    assert p.returncode == 2
    assert p.stderr.count("error:") == 1
    assert "shifted by one token" in p.stderr and "--scorer choice_extract" in p.stderr
    assert not out.exists()


# --- requests in flight follow the server --------------------------------------------------------------


def test_adaptive_limit_halves_once_per_flood_and_climbs_back() -> None:
    async def go() -> None:
        limit = AdaptiveLimit(16)
        rounds = [await limit.acquire() for _ in range(16)]
        for sent_in in rounds:  # the whole flood times out: one halving, not sixteen
            limit.release(sent_in, overloaded=True)
        assert (limit.limit, limit.stats.decreases) == (8, 1)
        for _ in range(8):  # a full window of answers raises it by one
            limit.release(await limit.acquire(), overloaded=False)
        assert limit.limit == 9
        slow = AdaptiveLimit(4, slow_after_s=1.0)
        slow.release(await slow.acquire(), overloaded=False, latency_s=1.5)
        assert slow.limit == 2  # an answer near the timeout is a warning too

    asyncio.run(go())


def test_a_request_waits_for_the_load_to_drop_below_a_lowered_limit() -> None:
    async def go() -> None:
        limit = AdaptiveLimit(4)
        held = [await limit.acquire() for _ in range(4)]
        limit.release(held.pop(), overloaded=True)  # -> limit 2 with 3 still in flight
        waiter = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0.01)
        assert not waiter.done()
        limit.release(held.pop(), overloaded=False)  # 2 in flight: still not below 2
        await asyncio.sleep(0.01)
        assert not waiter.done()
        limit.release(held.pop(), overloaded=False)  # 1 in flight: the retry may go
        await asyncio.wait_for(waiter, 1.0)

    asyncio.run(go())


def _questions(path: Path, n: int, marker: str = "") -> Path:
    lines = [
        json.dumps(
            {"id": f"q{i}", "input": f"Question {i} {marker if i == 0 else ''}".strip(), "target": "yes"}
        )
        for i in range(n)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_one_slot_server_is_not_flooded_into_timeouts(tmp_path: Path) -> None:
    """16 requests in flight against a server that works on one at a time (0.3 s each) with a 1.5 s
    timeout: a fixed limit times out most of the first flood and again on retries; the adaptive one
    backs off and every item is answered."""
    task = _questions(tmp_path / "q.jsonl", 12)
    out = tmp_path / "run"
    with FaultServer(delay_s=0.3, slots=1) as server:
        p = run_cli(
            "run",
            str(task),
            "-m",
            f"openai:{server.url}@fault",
            "--timeout",
            "1.5",
            "--retries",
            "6",
            "--out",
            str(out),
            "--no-progress",
            timeout=240,
        )
        sent = len(server.log.received)
    assert p.returncode == 0, p.stderr
    run = json.loads((out / "summary.json").read_text())["run"]
    assert run["failed_items"]["count"] == 0
    assert run["concurrency"]["decreases"] >= 1 and run["concurrency"]["lowest"] <= 4
    assert sent < 12 * 3  # not the same prompts again and again


# --- a run that left items failed says so -------------------------------------------------------------


def test_failed_items_give_exit_3_with_kinds_and_fixes_unless_accepted(tmp_path: Path) -> None:
    task = _questions(tmp_path / "q.jsonl", 4, marker="FAULT:500x99")
    with FaultServer() as server:
        spec = f"openai:{server.url}@fault"
        common = ["--retries", "0", "--no-progress"]
        p = run_cli("run", str(task), "-m", spec, "--out", str(tmp_path / "a"), *common)
        assert p.returncode == 3, p.stderr
        assert "1 of 4 items failed after retries (25%)" in p.stderr
        assert "server_error: 1" in p.stderr and "server's log" in p.stderr
        loose = run_cli(
            "run", str(task), "-m", spec, "--out", str(tmp_path / "b"), "--allow-failures", *common
        )
        assert loose.returncode == 0, loose.stderr
        assert "warning: 1 of 4 items failed" in loose.stderr
        tight = run_cli(
            "run", str(task), "-m", spec, "--out", str(tmp_path / "c"), "--allow-failures", "0.1", *common
        )
        assert tight.returncode == 3
        enough = run_cli(
            "run", str(task), "-m", spec, "--out", str(tmp_path / "d"), "--allow-failures", "0.5", *common
        )
        assert enough.returncode == 0
        bad = run_cli(
            "run", str(task), "-m", spec, "--out", str(tmp_path / "e"), "--allow-failures", "1.5", *common
        )
        assert bad.returncode == 2 and "--allow-failures '1.5'" in bad.stderr
        assert not (tmp_path / "e").exists()


def test_a_content_filter_refusal_is_an_outcome_not_a_failed_item(tmp_path: Path) -> None:
    task = _questions(tmp_path / "q.jsonl", 3, marker="FAULT:FILTER")
    with FaultServer() as server:
        p = run_cli(
            "run",
            str(task),
            "-m",
            f"openai:{server.url}@fault",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
        )
    assert p.returncode == 0, p.stderr
    assert "content_filter=1" in p.stdout


# --- output that fits where it is read ----------------------------------------------------------------


def test_a_piped_summary_is_a_plain_table_with_every_number_and_json_on_request(tmp_path: Path) -> None:
    task = _questions(tmp_path / "q.jsonl", 3, marker="FAULT:500x99")
    with FaultServer() as server:
        spec = f"openai:{server.url}@fault"
        p = run_cli(
            "run",
            str(task),
            "-m",
            spec,
            "--scorer",
            "choice_extract",
            "--scorer",
            "exact_match",
            "--retries",
            "0",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
            "--allow-failures",
        )
        assert p.returncode == 2  # choice_extract needs choices: refused first
        p = run_cli(
            "run",
            str(task),
            "-m",
            spec,
            "--scorer",
            "exact_match",
            "--retries",
            "0",
            "--out",
            str(tmp_path / "r"),
            "--no-progress",
            "--allow-failures",
        )
        js = run_cli("summary", str(tmp_path / "r"), "--format", "json")
    assert p.returncode == 0, p.stderr
    assert "…" not in p.stdout
    header = next(line for line in p.stdout.splitlines() if line.startswith("scorer"))
    assert header.split() == [
        "scorer",
        "n",
        "score",
        "95%",
        "CI",
        "strict",
        "unparsed",
        "truncated",
        "unscored",
        "errors",
    ]
    row = next(line for line in p.stdout.splitlines() if line.startswith("exact_match"))
    assert row.split()[1] == "2/3" and row.split()[-1] == "server_error=1"
    data = json.loads(js.stdout)
    assert data["summaries"][0]["errors"] == {"server_error": 1}
    assert data["failed_items"] == {"count": 1, "of": 3, "kinds": {"server_error": 1}}


def test_help_fits_80_columns() -> None:
    import os
    import subprocess

    from .conftest import BIN

    env = {**os.environ, "COLUMNS": "80", "TERM": "dumb"}
    p = subprocess.run([str(BIN / "clinieval"), "run", "--help"], capture_output=True, text=True, env=env)
    assert p.returncode == 0
    assert max(len(line) for line in p.stdout.splitlines()) <= 80
    assert "…" not in p.stdout  # wrapped, never cut
    assert "--allow-failures" in p.stdout and "--server-kind" in p.stdout
    assert "openai:URL1,URL2@NAME (a" in p.stdout  # the --model help, whole


# --- what a summary counts -------------------------------------------------------------------------------


def _record(
    sid: str, output: ModelOutput | None, target: str | None, loglik: LoglikOutput | None = None
) -> SampleRecord:
    sample = Sample(id=sid, input="q", choices=("yes", "no"), target=target)
    return SampleRecord(
        sample=sample, repeat=0, messages=[Message("user", "q")], output=output, loglik=loglik
    )


def test_a_sample_without_reference_is_unscored_not_a_failure() -> None:
    recs = [
        _record("a", ModelOutput(text="yes"), "yes"),
        _record("b", ModelOutput(text="no"), "yes"),
        _record("c", ModelOutput(text="yes"), None),  # an instruction without a reference
    ]
    for r in recs:
        r.scores = {"exact_match": ExactMatch().score(r), "choice_extract": ChoiceExtraction().score(r)}
    for s in summarize(recs, ["exact_match", "choice_extract"]):
        assert (s.samples, s.scored, s.unscored, s.errors) == (3, 2, 1, {})
        assert s.mean == s.mean_failures_as_wrong == 0.5


def test_a_cut_answer_is_strictly_wrong_only_for_scorers_that_read_it() -> None:
    ll = LoglikOutput(logliks=[-1.0, -3.0], token_counts=[1, 1])
    cut = ModelOutput(text="yes", finish_reason="length")
    recs = [_record("a", cut, "yes", ll), _record("b", ModelOutput(text="yes"), "yes", ll)]
    for r in recs:
        r.scores = {"choice_extract": ChoiceExtraction().score(r), "choice_loglik": ChoiceLoglik().score(r)}
    text, loglik = summarize(recs, ["choice_extract", "choice_loglik"], reads_text={"choice_extract"})
    assert (text.truncated, text.mean, text.mean_failures_as_wrong) == (1, 1.0, 0.5)
    assert (loglik.truncated, loglik.mean, loglik.mean_failures_as_wrong) == (0, 1.0, 1.0)


def test_a_server_of_unknown_kind_is_checked_for_shifted_echoes(
    llama_server: str, pubmedqa_dir: Path, tmp_path: Path
) -> None:
    """Told nothing about the server (--server-kind generic), two tiny requests still show that
    llama-cpp-python's echoed log-probability of a token differs from the one it generated it with."""
    out = tmp_path / "run"
    p = run_cli(
        "run", "pubmedqa", "-m", f"openai:{llama_server}@smol", "--server-kind", "generic",
        "--scorer", "choice_loglik", "--limit", "2", "--out", str(out),
    )  # fmt: skip
    assert p.returncode == 2, p.stderr
    assert "checked with two tiny requests" in p.stderr
    assert not out.exists()


def test_the_echo_probe_accepts_a_server_whose_echo_matches_its_generation() -> None:
    """The probe's arithmetic, over scripted answers shaped as vLLM's (which cannot run here)."""
    from clinieval.models.server import echo_probe

    def answer(body: dict[str, Any], echoed: float) -> tuple[int, bytes, dict[str, str]]:
        if not body.get("echo"):
            lp = {"tokens": [" patient"], "token_logprobs": [-1.15], "text_offset": [49]}
        else:
            n = len(body["prompt"]) - len(" patient")
            lp = {"tokens": ["The", " patient"], "token_logprobs": [None, echoed], "text_offset": [n - 3, n]}
        return 200, json.dumps({"choices": [{"text": "", "logprobs": lp}]}).encode(), {}

    def fetch_with(echoed: float) -> Any:
        async def fetch(method: str, url: str, body: dict[str, Any] | None) -> Any:
            assert body is not None
            return answer(body, echoed)

        return fetch

    assert asyncio.run(echo_probe(fetch_with(-1.16), "u", "m")) == "ok"
    assert asyncio.run(echo_probe(fetch_with(-13.0), "u", "m")) == "shifted"


def test_counting_tokens_with_a_gguf_vocabulary_prints_no_llama_cpp_noise() -> None:
    """Loading a vocabulary alone made llama.cpp print "n_ctx_seq (512) > n_ctx_train (0) --
    possible training context overflow" on every run that budgets with a GGUF tokenizer."""
    import subprocess
    import sys

    code = (
        "from clinieval.context.tokenizers import tokenizer_from_spec;"
        "print(len(tokenizer_from_spec('llamacpp:smollm2-135m-instruct').encode('heparin drip')))"
    )
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert int(p.stdout) > 0
    assert "n_ctx" not in p.stderr and "llama_context" not in p.stderr


def test_analyze_in_a_pipe_prints_whole_names_and_numbers(tmp_path: Path) -> None:
    """Rich drew analyze's tables at 80 columns in a pipe: 'openai:http://127.0.0.1:53…',
    'unpair…'. In a pipe the report is its Markdown, and runs are named by their model's alias."""
    task = _questions(tmp_path / "q.jsonl", 4)
    with FaultServer(answer="yes") as server:
        for name in ("first", "second"):
            p = run_cli("run", str(task), "-m", f"openai:{server.url}@fault", "--out", str(tmp_path / name))
            assert p.returncode == 0, p.stderr
    p = run_cli("analyze", str(tmp_path / "first"), str(tmp_path / "second"))
    assert p.returncode == 0, p.stderr
    assert "…" not in p.stdout
    assert "| fault [first] − fault [second] | 4 | 0 |" in p.stdout


def test_a_judge_on_a_one_slot_server_gets_one_request_at_a_time(llama_server: str, tmp_path: Path) -> None:
    task = _questions(tmp_path / "q.jsonl", 2)
    with FaultServer(answer="yes") as server:
        p = run_cli("run", str(task), "-m", f"openai:{server.url}@fault", "--out", str(tmp_path / "r"))
        assert p.returncode == 0, p.stderr
    judged = run_cli(
        "judge", str(tmp_path / "r"), "--judge", f"openai:{llama_server}@smol",
        "--rubric", "reference_correct", "--repeats", "1", "--max-tokens", "8", "--no-progress",
    )  # fmt: skip
    # 8 tokens rarely hold SmolLM2's verdict: a pass that scored nothing exits 3 with its fix (issue 34)
    assert judged.returncode == 0 or (judged.returncode == 3 and "no answer could be scored" in judged.stderr)
    assert "1 in flight instead of 16" in judged.stderr
