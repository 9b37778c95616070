"""The HTTP backend against a misbehaving local server: retried, or recorded as the right kind."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clinieval.models.openai_http import OpenAIModel, RetryPolicy
from clinieval.types import ErrorKind, GenerationConfig, Message, ModelOutput
from tests.fault_server import FaultServer


def ask(server: FaultServer, prompts: list[str], retries: int = 3) -> list:  # type: ignore[type-arg]
    async def go() -> list:  # type: ignore[type-arg]
        model = OpenAIModel(
            server.url, "fault", timeout_s=0.5, retry=RetryPolicy(max_retries=retries, base_delay_s=0.01)
        )
        try:
            return await asyncio.gather(
                *(model.generate([Message("user", p)], GenerationConfig(max_tokens=4)) for p in prompts)
            )
        finally:
            await model.aclose()

    return asyncio.run(go())


@pytest.mark.parametrize("fault", ["429x2", "500x3", "503x2", "DROPx2", "CUTx2", "HANGx1"])
def test_transient_faults_are_retried_until_answered(fault: str) -> None:
    with FaultServer() as server:
        [out] = ask(server, [f"q FAULT:{fault}"])
    assert out.ok, out.error_message
    assert out.text == "yes"
    times = int(fault.split("x")[1])
    assert server.log.seen[f"q FAULT:{fault}"] == times + 1


@pytest.mark.parametrize(
    ("fault", "kind"),
    [
        ("429x9", ErrorKind.RATE_LIMIT),
        ("500x9", ErrorKind.SERVER_ERROR),
        ("503x9", ErrorKind.SERVER_ERROR),
        ("DROPx9", ErrorKind.CONNECTION),
        ("CUTx9", ErrorKind.CONNECTION),
        ("HANGx9", ErrorKind.TIMEOUT),
    ],
)
def test_exhausted_retries_record_the_kind(fault: str, kind: ErrorKind) -> None:
    with FaultServer() as server:
        [out] = ask(server, [f"q FAULT:{fault}"], retries=2)
    assert out.error_kind is kind
    assert out.text == ""
    assert server.log.seen[f"q FAULT:{fault}"] == 3  # first try + 2 retries


@pytest.mark.parametrize("fault", ["FILTER", "FILTERFINISH"])
def test_content_filter_is_its_own_kind_and_not_retried(fault: str) -> None:
    with FaultServer() as server:
        [out] = ask(server, [f"q FAULT:{fault}"])
    assert out.error_kind is ErrorKind.CONTENT_FILTER
    assert server.log.seen[f"q FAULT:{fault}"] == 1


def test_mixed_batch_loses_nothing() -> None:
    prompts = [f"item {i} FAULT:{f}" for i, f in enumerate(["429x1", "500x1", "DROPx1", "FILTER"])]
    prompts += [f"plain {i}" for i in range(12)]
    with FaultServer() as server:
        outs = ask(server, prompts)
    assert len(outs) == len(prompts)
    kinds = [o.error_kind for o in outs]
    assert kinds[3] is ErrorKind.CONTENT_FILTER
    assert all(k is None for i, k in enumerate(kinds) if i != 3)


def test_query_string_of_azure_style_urls_is_kept_last() -> None:
    with FaultServer() as server:
        model = OpenAIModel(server.url + "?api-version=2024-02-01", "fault")
        assert model._url("/chat/completions") == server.url + "/chat/completions?api-version=2024-02-01"

        async def go() -> ModelOutput:
            try:
                return await model.generate([Message("user", "hi")], GenerationConfig(max_tokens=2))
            finally:
                await model.aclose()

        out = asyncio.run(go())
    assert out.ok and out.text == "yes"


def test_a_malformed_body_is_a_transient_server_error_retried_until_answered() -> None:
    with FaultServer() as server:
        [out] = ask(server, ["q FAULT:BADJSONx2"])
    assert out.ok and out.text == "yes"
    assert server.log.seen["q FAULT:BADJSONx2"] == 3  # two malformed bodies, then the answer


def test_empty_choices_is_recorded_as_a_server_error_and_never_cached(tmp_path: Path) -> None:
    import json

    from tests.conftest import run_cli

    data = tmp_path / "items.jsonl"
    data.write_text(json.dumps({"id": "a", "input": "q FAULT:NOCHOICESx1", "target": "yes"}) + "\n")
    out = tmp_path / "run"
    with FaultServer() as server:
        args = ["run", str(data), "-m", f"openai:{server.url}@fault", "--out", str(out), "--no-progress"]
        first = run_cli(*args)
        second = run_cli(*args)  # transient and not cached: asked again, and answered this time
    record = json.loads((out / "samples.jsonl").read_text().splitlines()[0])
    failed = record["output"]
    assert failed["error_kind"] == "server_error" and "unexpected response" in failed["error_message"]
    assert first.returncode == 3 and second.returncode == 0, (first.stderr, second.stderr)
    assert "1 new (1 asked again after a transient failure)" in second.stdout
    assert sum(server.log.seen.values()) == 2  # one empty reply, then one answer


def test_top_k_is_sent_only_when_set_and_keeps_old_cache_keys() -> None:
    """AutoMedEval's responses sample with top-k 50: the setting reaches the server's body; unset,
    the body and the cache key are what they were before the field existed."""

    async def go(config: GenerationConfig) -> None:
        model = OpenAIModel(server.url, "fault", timeout_s=2)
        try:
            await model.generate([Message("user", "q")], config)
        finally:
            await model.aclose()

    with FaultServer() as server:
        asyncio.run(go(GenerationConfig(temperature=0.5, top_k=50)))
        asyncio.run(go(GenerationConfig()))
    assert server.log.bodies[0]["top_k"] == 50 and "top_k" not in server.log.bodies[1]
    assert GenerationConfig().to_dict() == {
        "temperature": 0.0, "max_tokens": 256, "top_p": 1.0, "seed": 0, "stop": [], "logprobs": False,
    }  # fmt: skip
    assert GenerationConfig.from_dict(GenerationConfig(top_k=50).to_dict()).top_k == 50
