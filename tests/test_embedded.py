"""The real embedded models: generation, log-likelihoods against llama.cpp's own full-logits path,
tokenisation."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from clinieval.models.llamacpp import LlamaCppModel
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.types import ErrorKind, GenerationConfig, Message

QUESTION = [Message("user", "What is the capital of France? Answer in one sentence.")]


@pytest.fixture(scope="module")
def smol(smollm2_path: Path) -> Iterator[LlamaCppModel]:
    model = LlamaCppModel(smollm2_path, name="smol", n_ctx=1024)
    yield model
    asyncio.run(model.aclose())


def reference_logliks(path: Path, prompt: str, continuation: str) -> float:
    """Independent path: llama-cpp-python's logits_all mode and the full logits matrix."""
    from llama_cpp import Llama

    llm = Llama(model_path=str(path), n_ctx=256, logits_all=True, verbose=False)
    ctx = llm.tokenize(prompt.encode(), add_bos=True, special=True)
    whole = llm.tokenize((prompt + continuation).encode(), add_bos=True, special=True)
    llm.eval(whole)
    scores = np.asarray(llm.scores[: len(whole)], dtype=np.float64)
    total = 0.0
    for pos in range(len(ctx), len(whole)):
        row = scores[pos - 1]
        total += float(row[whole[pos]] - np.logaddexp.reduce(row))
    llm.close()
    return total


def test_generate_is_real_and_deterministic(smol: LlamaCppModel) -> None:
    cfg = GenerationConfig(max_tokens=24, temperature=0.0)
    first = asyncio.run(smol.generate(QUESTION, cfg))
    second = asyncio.run(smol.generate(QUESTION, cfg))
    assert first.ok and "Paris" in first.text
    assert first.text == second.text
    assert first.completion_tokens and 0 < first.completion_tokens <= 24
    assert first.prompt_tokens and first.prompt_tokens > 10
    assert first.finish_reason in {"stop", "length"}


def test_max_tokens_and_stop_are_honoured(smol: LlamaCppModel) -> None:
    out = asyncio.run(smol.generate(QUESTION, GenerationConfig(max_tokens=2)))
    assert out.completion_tokens == 2 and out.finish_reason == "length"
    stopped = asyncio.run(smol.generate(QUESTION, GenerationConfig(max_tokens=24, stop=("France",))))
    assert "France" not in stopped.text


def test_generation_logprobs_when_asked(smol: LlamaCppModel) -> None:
    out = asyncio.run(smol.generate(QUESTION, GenerationConfig(max_tokens=6, logprobs=True)))
    assert out.logprobs is not None and len(out.logprobs) >= 1
    assert all(lp.logprob <= 0 for lp in out.logprobs)
    # Greedy decoding picks likely tokens: the first one should be far from improbable.
    assert out.logprobs[0].logprob > -3


def test_loglikelihood_matches_full_logits_reference(smol: LlamaCppModel, smollm2_path: Path) -> None:
    prompt = "The capital of France is"
    conts = [" Paris", " London", " a city in Europe"]
    got = asyncio.run(smol.loglikelihood(prompt, conts))
    assert got.ok and got.token_counts[0] == 1 and got.token_counts[2] > 1
    for cont, value in zip(conts, got.logliks, strict=True):
        assert value == pytest.approx(reference_logliks(smollm2_path, prompt, cont), abs=0.02)
    assert got.logliks[0] > got.logliks[1]


def test_loglikelihood_is_independent_of_cache_state(smol: LlamaCppModel) -> None:
    a = asyncio.run(smol.loglikelihood("Aspirin is a", [" drug", " fruit"])).logliks
    asyncio.run(smol.generate(QUESTION, GenerationConfig(max_tokens=8)))
    asyncio.run(smol.loglikelihood("Completely different words here", [" now"]))
    b = asyncio.run(smol.loglikelihood("Aspirin is a", [" drug", " fruit"])).logliks
    assert a == pytest.approx(b, abs=1e-4)


def test_chat_template_is_applied(smol: LlamaCppModel) -> None:
    rendered = smol.render(QUESTION)
    assert rendered.startswith("<|im_start|>system") and rendered.endswith("<|im_start|>assistant\n")


def test_tokenize_and_count(smol: LlamaCppModel) -> None:
    tokens = asyncio.run(smol.tokenize("Patient denies chest pain."))
    assert len(tokens) == asyncio.run(smol.count_tokens("Patient denies chest pain.")) > 3
    assert asyncio.run(smol.count_tokens("")) == 0


def test_context_overflow_is_an_error_kind(smollm2_path: Path) -> None:
    small = LlamaCppModel(smollm2_path, n_ctx=64)
    out = asyncio.run(small.generate([Message("user", "word " * 200)], GenerationConfig(max_tokens=4)))
    assert out.error_kind is ErrorKind.CONTEXT_LENGTH
    ll = asyncio.run(small.loglikelihood("word " * 200, [" yes"]))
    assert ll.error_kind is ErrorKind.CONTEXT_LENGTH
    asyncio.run(small.aclose())


def test_gemma_base_model_raw_completion() -> None:
    model = parse_model_spec("llamacpp:gemma3-270m", BackendOptions(n_ctx=512))
    try:
        assert model.render([Message("user", "The capital of France is")]).startswith(
            "The capital of France is"
        )
        out = asyncio.run(
            model.generate([Message("user", "The capital of France is")], GenerationConfig(max_tokens=8))
        )
        assert out.ok and out.text.strip()
        ll = asyncio.run(model.loglikelihood("The capital of France is", [" Paris", " banana"]))
        assert ll.logliks[0] > ll.logliks[1]
    finally:
        asyncio.run(model.aclose())


def test_a_model_alive_at_exit_is_freed_without_teardown_tracebacks(smollm2_path: Path) -> None:
    """A model (or GGUF vocabulary) still referenced when the interpreter stops used to be freed
    after llama-cpp-python's globals were gone: "Exception ignored in Llama.__del__" after
    pytest's summary. Kept alive here by a module that is torn down late."""
    import subprocess
    import sys

    script = (
        "import abc\n"
        "from pathlib import Path\n"
        "from clinieval.models.llamacpp import LlamaCppModel\n"
        "from clinieval.context.tokenizers import tokenizer_for_gguf\n"
        f"m = LlamaCppModel(Path({str(smollm2_path)!r}), n_ctx=256)\n"
        "m._load()\n"
        f"t = tokenizer_for_gguf(Path({str(smollm2_path)!r}))\n"
        "abc._keep = (m, t)\n"
        "print(t.count('hello world'))\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert int(done.stdout.split()[-1]) > 0
    assert "Exception ignored" not in done.stderr, done.stderr[-2000:]
