"""A run knows which model answered (issue 34): real ``python -m llama_cpp.server`` processes serving
the two embedded models, and the real ``clinieval`` command.

* Gemma served where SmolLM2 was, on the same port under the same alias: the resume is refused,
  naming what changed (before this, it printed "0 new, 10 resumed" and SmolLM2's score);
  ``--fingerprint warn`` goes on.
* SmolLM2 restarted five times (the last on a new port): every resume resumes, none is refused —
  the probe is asked after a fixed flush prompt, so llama_cpp.server's reuse of the previous
  prompt's KV cache cannot change its answer.
* A judge that is the answering model behind another port and alias is told as self-judging by
  its fingerprint.

About a minute on 2 cores (seven server starts of a 100-270 MB model).
"""

from __future__ import annotations

import json
import subprocess
from contextlib import AbstractContextManager
from pathlib import Path

import pytest

from clinieval.models.catalog import find_embedded
from clinieval.models.fingerprint import differences, portable_spec, same_model, spec_without_urls
from tests.conftest import free_port, llama_cpp_server, run_cli

ITEMS = 4


@pytest.fixture(scope="module")
def items(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("items") / "items.jsonl"
    lines = [{"id": f"s{i}", "input": f"Is {i} an even number?", "target": "yes"} for i in range(ITEMS)]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def gemma_path() -> Path:
    return find_embedded("gemma3-270m").locate()


def serving(model: Path, port: int, alias: str, log: Path) -> AbstractContextManager[str]:
    """A real llama_cpp.server on 127.0.0.1:``port``; yields its /v1 URL and stops it after."""
    return llama_cpp_server(model, port, log, alias=alias, n_ctx=1024)


def run(items: Path, url: str, alias: str, out: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return run_cli(
        "run", str(items), "-m", f"openai:{url}@{alias}", "--out", str(out), "--no-progress",
        "--max-tokens", "4", *extra,
    )  # fmt: skip


def manifest(out: Path) -> dict[str, object]:
    data: dict[str, object] = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    return data


def test_another_model_behind_the_same_port_and_alias_is_refused(
    items: Path, smollm2_path: Path, gemma_path: Path, tmp_path: Path
) -> None:
    port, out, log = free_port(), tmp_path / "run", tmp_path / "server.log"
    with serving(smollm2_path, port, "m", log) as url:
        first = run(items, url, "m", out, "--limit", "2")
        assert first.returncode == 0, first.stderr
    recorded = manifest(out)["model_fingerprint"]
    assert isinstance(recorded, dict)
    assert recorded["kind"] == "llama-cpp-python" and recorded["decides"] == "probe", recorded
    assert recorded["probe"]["deterministic"] and recorded["probe"]["asked"] == 2
    with serving(gemma_path, port, "m", log) as url:
        again = run(items, url, "m", out)
        assert again.returncode == 2, again.stdout + again.stderr
        assert f"the model behind {url} changed since this run started: probe answer differs" in again.stderr
        assert "Use a new --out, or --overwrite" in again.stderr and "--fingerprint warn" in again.stderr
        assert "resumed" not in again.stdout  # nothing was asked nor scored
        lines = (out / "samples.jsonl").read_text(encoding="utf-8").splitlines()
        assert len(lines) == 2  # the refusal wrote nothing

        warned = run(items, url, "m", out, "--fingerprint", "warn")
        assert warned.returncode == 0, warned.stderr
        assert "probe answer differs" in warned.stderr and "going on" in warned.stderr
        assert f"2 new, 2 resumed of {ITEMS}" in warned.stdout
    after = manifest(out)
    assert after["model_fingerprint"] == recorded  # what answered first is kept
    last = after["model_fingerprint_last"]
    assert isinstance(last, dict) and last["probe"]["answer"] != recorded["probe"]["answer"]


def test_the_same_model_restarted_five_times_always_resumes_even_on_a_new_port(
    items: Path, smollm2_path: Path, tmp_path: Path
) -> None:
    port, out, log = free_port(), tmp_path / "run", tmp_path / "server.log"
    answers = []
    for restart in range(5):
        if restart == 4:
            port = free_port()  # the same model moved to another address resumes too
        with serving(smollm2_path, port, "m", log) as url:
            done = run(items, url, "m", out, "--limit", str(min(restart + 1, ITEMS)))
        assert done.returncode == 0, f"restart {restart}: {done.stderr}"
        assert "changed since" not in done.stderr
        resumed = min(restart, ITEMS)
        new = min(restart + 1, ITEMS) - resumed
        assert f"{new} new, {resumed} resumed" in done.stdout, done.stdout
        last = manifest(out)["model_fingerprint_last"]
        assert isinstance(last, dict)
        answers.append(last["probe"]["answer"])
    assert len(set(answers)) == 1, answers
    final = manifest(out)
    assert final["model_fingerprint"]["url"] != final["model_fingerprint_last"]["url"]  # type: ignore[index]
    assert len((out / "samples.jsonl").read_text(encoding="utf-8").splitlines()) == ITEMS


def test_self_judging_is_told_by_fingerprint_at_another_address_and_alias(
    items: Path, smollm2_path: Path, tmp_path: Path
) -> None:
    out, log = tmp_path / "run", tmp_path / "server.log"
    with (
        serving(smollm2_path, free_port(), "answerer", log) as answering,
        serving(smollm2_path, free_port(), "judge", log) as judging,
    ):
        done = run(items, answering, "answerer", out, "--limit", "1")
        assert done.returncode == 0, done.stderr
        judged = run_cli(
            "judge", str(out), "--judge", f"openai:{judging}@judge", "--rubric", "reference_correct",
            "--repeats", "1", "--max-tokens", "8", "--no-progress",
        )  # fmt: skip
    # SmolLM2 seldom answers in the rubric's format (exit 3: nothing scored); what matters here is
    # that the pass ran, and said whose answers it judged
    assert judged.returncode in {0, 3} and "changed since" not in judged.stderr, judged.stderr
    assert "judging answers written by the same model" in judged.stderr
    summary = json.loads((out / "scores" / "reference_correct.summary.json").read_text(encoding="utf-8"))
    assert summary["self_judged"] is True
    recorded = manifest(out)["judge_fingerprints"]
    assert isinstance(recorded, dict) and recorded["reference_correct"]["fingerprint"]["url"] == judging


# --- the rules, on fingerprints as recorded (no server) -----------------------------------------------


def _fp(**parts: object) -> dict[str, object]:
    probe = {"via": "completions", "answer": "a", "deterministic": True}
    return {"taken": True, "decides": "probe", "probe": probe, **parts}


def test_a_probe_that_was_not_deterministic_never_refuses() -> None:
    varied = _fp(decides="nothing", probe={"via": "completions", "answer": "a", "deterministic": False})
    assert differences(varied, _fp(probe={"via": "completions", "answer": "b"})) == ([], [])
    assert differences(_fp(), _fp(probe={"via": "completions", "answer": "b"}))[0]


def test_what_the_server_reports_decides_over_the_probe() -> None:
    meta = {"/v1/models": {"meta": {"n_params": 134515008}}}
    old = _fp(decides="reported", reported=meta)
    other_probe = _fp(reported=meta, probe={"via": "completions", "answer": "b"})
    deciding, warned = differences(old, other_probe)
    assert deciding == [] and warned and warned[0].startswith("probe answer differs")
    swapped = _fp(reported={"/v1/models": {"meta": {"n_params": 268098176}}})
    [reason] = differences(old, swapped)[0]
    assert reason == 'server reports /v1/models meta {"n_params":268098176} (was {"n_params":134515008})'


def test_the_address_leaves_the_run_identity_and_the_same_model_is_one_model() -> None:
    assert spec_without_urls("openai:http://127.0.0.1:8080/v1@smol") == "openai:@smol"
    assert spec_without_urls("openai:http://a/v1,http://b/v1@smol") == "openai:@smol"
    assert spec_without_urls("llamacpp:/models/x.gguf") == "llamacpp:/models/x.gguf"
    a = {"model": {"spec": "openai:http://a:1/v1@m", "identity": {"base_url": "http://a:1/v1", "model": "m"}}}
    b = {"model": {"spec": "openai:http://b:2/v1@m", "identity": {"base_url": "http://b:2/v1", "model": "m"}}}
    assert portable_spec(a) == portable_spec(b)
    assert same_model(_fp(), _fp()) and not same_model(_fp(), _fp(probe={"via": "chat", "answer": "a"}))
