"""The OpenAI-compatible backend against a real `python -m llama_cpp.server` on 127.0.0.1."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from clinieval.models.llamacpp import LlamaCppModel
from clinieval.models.openai_http import OpenAIModel
from clinieval.types import GenerationConfig, Message
from tests.conftest import run_cli

QUESTION = [Message("user", "What is the capital of France? Answer in one sentence.")]


def test_chat_generation_matches_the_embedded_model(llama_server: str, smollm2_path: Path) -> None:
    async def go() -> tuple[str, str, int | None]:
        http = OpenAIModel(llama_server, "smol")
        local = LlamaCppModel(smollm2_path, n_ctx=1024)
        try:
            cfg = GenerationConfig(max_tokens=24)
            a = await http.generate(QUESTION, cfg)
            b = await local.generate(QUESTION, cfg)
            assert a.ok, a.error_message
            return a.text, b.text, a.completion_tokens
        finally:
            await http.aclose()
            await local.aclose()

    served, embedded, n = asyncio.run(go())
    assert "Paris" in served and n and n > 0
    # Same GGUF, same chat template, greedy decoding: the same answer through both backends.
    assert served.strip() == embedded.strip()


def test_completions_api_and_server_tokenizer(llama_server: str, smollm2_path: Path) -> None:
    async def go() -> tuple[str, list[int], list[int]]:
        http = OpenAIModel(llama_server, "smol", api="completions")
        local = LlamaCppModel(smollm2_path, n_ctx=256)
        try:
            out = await http.generate([Message("user", "1, 2, 3, 4,")], GenerationConfig(max_tokens=4))
            text = "Troponin elevated; no ST changes."
            return out.text, await http.tokenize(text), await local.tokenize(text)
        finally:
            await http.aclose()
            await local.aclose()

    text, remote, local = asyncio.run(go())
    assert text.strip()
    assert remote == local


def test_pubmedqa_end_to_end_over_http_then_rescore_offline(
    llama_server: str, pubmedqa_dir: Path, tmp_path: Path
) -> None:
    out = tmp_path / "run"
    done = run_cli(
        *("run", "pubmedqa", "-m", f"openai:{llama_server}@smol", "--limit", "4"),
        *("--scorer", "choice_extract", "--out", str(out), "--no-progress", "--data", str(pubmedqa_dir)),
    )
    assert done.returncode == 0, done.stderr
    assert "choice_extract" in done.stdout and "4 new, 0 resumed of 4" in done.stdout
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["status"] == "complete"
    assert manifest["spec"]["model"]["identity"]["backend"] == "openai"
    assert set(manifest["data"]) == {
        str(pubmedqa_dir / "ori_pqal.json"),
        str(pubmedqa_dir / "test_ground_truth.json"),
    }
    records = [json.loads(x) for x in (out / "samples.jsonl").read_text().splitlines()]
    assert len(records) == 4 and all(r["output"]["text"] for r in records)
    # Re-scoring reads only the run directory: point it at nothing and it still works.
    rescored = run_cli("score", str(out), "--scorer", "exact_match")
    assert rescored.returncode == 0, rescored.stderr
    lines = (out / "scores" / "exact_match.jsonl").read_text().splitlines()
    assert len(lines) == 4
    no_loglik = run_cli("score", str(out), "--scorer", "choice_loglik")
    assert no_loglik.returncode == 2 and "no log-likelihoods" in no_loglik.stderr
