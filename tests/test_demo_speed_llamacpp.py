"""The embedded backend answers every request as a fresh model would, whatever it was asked before,
and its speed-ups keep it so: reuse of the KV cache only up to a batch boundary a fresh context
shares, saved prompt states, greedy repeats answered once, remembered tokenisations, OpenMP threads
that spin briefly. Each test compares with a fresh model exactly (no tolerance) and checks that the
shortcut was actually taken (a counter, not a timing)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clinieval.models.llamacpp import OMP_SPIN_COUNT, SAVE_MIN_TOKENS, LlamaCppModel, PrefixStates, _Saved
from clinieval.types import GenerationConfig, Message
from tests.conftest import BIN, missing

GREEDY = GenerationConfig(max_tokens=12, temperature=0.0)
NOTES_A = " ".join(
    f"Day {i}: blood pressure {120 + i % 17}/{80 + i % 9}, pulse {70 + i % 13}." for i in range(36)
)
NOTES_B = " ".join(f"Visit {i}: glucose {90 + i % 23} mg/dL, creatinine 1.{i % 10}." for i in range(36))


def ask(notes: str, question: str) -> list[Message]:
    return [Message("user", f"Discharge Summary :\n{notes}\n\nQuestion : {question}\n\nAnswer :")]


A1, B1, A2 = (
    ask(NOTES_A, "What was the first pulse?"),
    ask(NOTES_B, "What was the first glucose?"),
    ask(NOTES_A, "What was the last blood pressure?"),
)


def model(path: Path, states: PrefixStates) -> LlamaCppModel:
    return LlamaCppModel(path, name="smol", n_ctx=2048, states=states)


def fresh_answer(path: Path, messages: list[Message]) -> str:
    m = model(path, PrefixStates(0))
    try:
        return asyncio.run(m.generate(messages, GREEDY)).text
    finally:
        asyncio.run(m.aclose())


def test_prompts_are_long_enough_to_be_saved(smollm2_path: Path) -> None:
    m = model(smollm2_path, PrefixStates(0))
    try:
        assert len(m._prompt_tokens(m.render(A1))) > SAVE_MIN_TOKENS + 64
    finally:
        asyncio.run(m.aclose())


def test_a_saved_state_is_restored_and_answers_as_a_fresh_model(smollm2_path: Path) -> None:
    """A, then B (which throws A's state away), then A again: A's notes come back from the saved
    state instead of being evaluated again, and every answer is a fresh model's."""
    states = PrefixStates(256 << 20)
    m = model(smollm2_path, states)
    try:
        answers = [asyncio.run(m.generate(q, GREEDY)).text for q in (A1, B1, A2)]
        notes_tokens = len(m._prompt_tokens(m.render([Message("user", f"Discharge Summary :\n{NOTES_A}")])))
    finally:
        asyncio.run(m.aclose())
    assert answers == [fresh_answer(smollm2_path, q) for q in (A1, B1, A2)]
    assert m.stats.states_saved >= 1 and m.stats.states_restored == 1
    # A2 reused the first full batch of A1's notes; without the saved state nothing of A2 was in
    # the cache after B1
    assert notes_tokens > 512 and m.stats.reused_tokens == 512


def test_a_saved_state_outlives_the_model_object(smollm2_path: Path) -> None:
    """The next arm (a new model object of the same file and window) starts from the last one's
    state; a different window does not share it."""
    states = PrefixStates(256 << 20)
    first = model(smollm2_path, states)
    asyncio.run(first.generate(A1, GREEDY))
    asyncio.run(first.aclose())
    assert len(states) == 1
    second = model(smollm2_path, states)
    other = LlamaCppModel(smollm2_path, name="smol", n_ctx=1024, states=states)
    try:
        answer = asyncio.run(second.generate(A2, GREEDY)).text
        asyncio.run(other.generate(A2, GREEDY))
    finally:
        asyncio.run(second.aclose())
        asyncio.run(other.aclose())
    assert second.stats.states_restored == 1 and second.stats.reused_tokens >= SAVE_MIN_TOKENS
    assert other.stats.states_restored == 0 and other.stats.reused_tokens == 0
    assert answer == fresh_answer(smollm2_path, A2)


def test_log_likelihoods_after_a_restore_equal_a_fresh_models(smollm2_path: Path) -> None:
    states = PrefixStates(256 << 20)
    m = model(smollm2_path, states)
    fresh = model(smollm2_path, PrefixStates(0))
    try:
        prompt = m.render(A2)
        asyncio.run(m.generate(A1, GREEDY))
        asyncio.run(m.generate(B1, GREEDY))
        got = asyncio.run(m.loglikelihood(prompt, [" 120", " 135/85"]))
        want = asyncio.run(fresh.loglikelihood(prompt, [" 120", " 135/85"]))
    finally:
        asyncio.run(m.aclose())
        asyncio.run(fresh.aclose())
    assert m.stats.states_restored == 1
    assert got.logliks == want.logliks and got.token_counts == want.token_counts


def test_every_continuation_is_scored_as_a_fresh_model_scores_it_alone(smollm2_path: Path) -> None:
    """The second continuation of a request used to be scored after evaluating the prompt's last
    token again on its own, which llama.cpp computes differently past about 1,000 tokens: with
    this prompt the old backend scored " 135/85" -14.601 together and -14.541 alone."""
    prompt = (
        "Discharge Summary :\n" + NOTES_A * 2 + "\n\nQuestion : What was the last blood pressure?\n\nAnswer :"
    )
    conts = [" 120/80", " 135/85", " normal"]

    def smol() -> LlamaCppModel:
        return LlamaCppModel(smollm2_path, name="smol", chat=False, n_ctx=2048, states=PrefixStates(0))

    m = smol()
    try:
        together = asyncio.run(m.loglikelihood(prompt, conts)).logliks
    finally:
        asyncio.run(m.aclose())
    assert m.stats.reused_tokens == 2 * m.stats.prompt_tokens // 3  # the prompt was evaluated once
    alone = []
    for cont in conts:
        f = smol()
        try:
            alone += asyncio.run(f.loglikelihood(prompt, [cont])).logliks
        finally:
            asyncio.run(f.aclose())
    assert together == alone


def test_gemma_answers_do_not_depend_on_the_previous_prompt() -> None:
    """Gemma-3's kernels give different numbers for a batch cut at another place: a prompt that
    shares part of the previous one is evaluated from the last shared batch boundary, as a fresh
    context would, not from wherever the shared part ends."""
    from clinieval.models.catalog import find_embedded

    path = find_embedded("gemma3-270m").locate()
    first = "Discharge Summary :\n" + NOTES_A + "\n\nQuestion : What was the first pulse?\n\nAnswer :"
    second = (
        "Discharge Summary :\n" + NOTES_A + "\n\nQuestion : What was the last blood pressure?\n\nAnswer :"
    )

    def gemma() -> LlamaCppModel:
        return LlamaCppModel(path, name="gemma", chat=False, n_ctx=2048, states=PrefixStates(0))

    m, f = gemma(), gemma()
    try:
        asyncio.run(m.loglikelihood(first, [" 70"]))
        after = asyncio.run(m.loglikelihood(second, [" 120/80", " 135/85"])).logliks
        fresh = asyncio.run(f.loglikelihood(second, [" 120/80", " 135/85"])).logliks
    finally:
        asyncio.run(m.aclose())
        asyncio.run(f.aclose())
    assert m.stats.reused_tokens >= 512  # the shared notes' first batch came from the cache
    assert after == fresh


def test_a_greedy_repeat_is_answered_once_and_sampling_is_not(smollm2_path: Path) -> None:
    m = model(smollm2_path, PrefixStates(0))
    try:
        first = asyncio.run(m.generate(A1, GenerationConfig(max_tokens=12, temperature=0.0, seed=0)))
        again = asyncio.run(m.generate(A1, GenerationConfig(max_tokens=12, temperature=0.0, seed=1)))
        assert m.stats.greedy_repeats == 1 and again.text == first.text
        assert again.completion_tokens == first.completion_tokens
        asyncio.run(m.generate(A1, GenerationConfig(max_tokens=8, temperature=0.0)))  # other limit: decoded
        assert m.stats.greedy_repeats == 1
        hot = GenerationConfig(max_tokens=12, temperature=0.9, seed=3)
        asyncio.run(m.generate(A1, hot))
        asyncio.run(m.generate(A1, hot))
        assert m.stats.greedy_repeats == 1
    finally:
        asyncio.run(m.aclose())


def test_one_requests_prompt_is_tokenised_once(smollm2_path: Path) -> None:
    m = model(smollm2_path, PrefixStates(0))
    try:
        llm = m._load()
        calls: list[bytes] = []
        real = llm.tokenize

        def counting(text: bytes, *args: object, **kwargs: object) -> list[int]:
            calls.append(text)
            return list(real(text, *args, **kwargs))

        llm.tokenize = counting
        prompt = m.render(A1)
        asyncio.run(m.generate(A1, GREEDY))
        asyncio.run(m.loglikelihood(prompt, [" 70", " 71", " 72"]))
        long_calls = [t for t in calls if len(t) > 1000]
        # the prompt once (shared by the generation and every continuation's context), and the
        # prompt with each continuation once
        assert len(long_calls) == 1 + 3
    finally:
        asyncio.run(m.aclose())


def saved(tokens: list[int], nbytes: int) -> _Saved:
    return _Saved(np.asarray(tokens, dtype=np.int32), np.zeros(nbytes, dtype=np.uint8))


def test_the_pool_keeps_to_its_budget_and_drops_what_a_new_state_covers() -> None:
    pool = PrefixStates(1000)
    long_a = list(range(2000))
    pool.put("m", saved(long_a, 400))
    pool.put("m", saved([7] * 2000, 400))
    n, best = pool.best("m", np.asarray([*long_a[:1500], 9, 9], dtype=np.int32))
    assert n == 1500 and best is not None and best.tokens[0] == 0
    assert pool.best("other model", np.asarray(long_a, dtype=np.int32)) == (0, None)
    pool.put("m", saved([*long_a, 5, 5], 400))  # holds all of long_a: replaces it
    assert len(pool) == 2
    pool.put("m", saved([8] * 2000, 400))  # over budget: the least recently used ([7]*2000) goes
    assert len(pool) == 2 and pool.size_bytes == 800
    assert pool.best("m", np.asarray([7] * 10, dtype=np.int32)) == (0, None)
    empty = PrefixStates(0)
    empty.put("m", saved(long_a, 1))
    assert len(empty) == 0


def test_a_zero_budget_saves_nothing(smollm2_path: Path) -> None:
    m = model(smollm2_path, PrefixStates(0))
    try:
        for q in (A1, B1, A2):
            asyncio.run(m.generate(q, GREEDY))
    finally:
        asyncio.run(m.aclose())
    assert m.stats.states_saved == 0 and m.stats.states_restored == 0


def _openmp_settings(env: dict[str, str]) -> str:
    script = (
        "import ctypes, clinieval.models.llamacpp, llama_cpp\n"
        "ctypes.CDLL('libgomp.so.1').omp_display_env(1)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, env=env
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout + done.stderr


def test_openmp_threads_spin_briefly_then_sleep_unless_the_environment_says_otherwise() -> None:
    """llama.cpp's OpenMP threads spinning at barriers made decoding 1.8-2.8x slower on a busy
    2-core machine (bench/omp_wait.py); importing the backend caps the spin at 20,000, and a
    policy or spin count the user set is left alone."""
    env = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    try:
        shown = _openmp_settings(env)
    except AssertionError as e:
        if "omp_display_env" in str(e):
            missing("this libgomp cannot display its settings")
        raise
    assert f"GOMP_SPINCOUNT = '{OMP_SPIN_COUNT}'" in shown, shown
    for users in ({"OMP_WAIT_POLICY": "ACTIVE"}, {"GOMP_SPINCOUNT": "7"}):
        theirs = _openmp_settings({**env, **users})
        assert f"GOMP_SPINCOUNT = '{OMP_SPIN_COUNT}'" not in theirs, theirs
    assert "GOMP_SPINCOUNT = '7'" in _openmp_settings({**env, "GOMP_SPINCOUNT": "7"})


@pytest.mark.parametrize("value", ["lots", "nan", "inf", "-5"])
def test_a_bad_state_budget_is_one_error_and_writes_nothing(value: str, tmp_path: Path) -> None:
    """The budget is read when the backend is imported; a value that is no finite, non-negative
    number of MiB stops the command with one line (nan and inf raised int()'s traceback, and a
    negative one silently turned saving off)."""
    out = tmp_path / "run"
    done = subprocess.run(
        [str(BIN / "clinieval"), "run", "pubmedqa", "-m", "llamacpp:smollm2-135m-instruct",
         "--limit", "1", "--out", str(out), "--no-progress"],
        capture_output=True, text=True, timeout=300, env={**os.environ, "CLINIEVAL_LLAMACPP_STATE_MB": value},
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stderr
    assert f"error: CLINIEVAL_LLAMACPP_STATE_MB={value!r}: expected MiB" in done.stderr
    assert not out.exists()
