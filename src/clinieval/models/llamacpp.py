"""Embedded llama.cpp backend: a GGUF model evaluated in-process, no server and no network.

llama_cpp is imported only when a model is loaded, so the rest of clinieval stays importable
(and fast to start) without it. One llama.cpp context is not thread-safe, so calls are
serialised behind a lock and run in a worker thread to keep the event loop responsive.

**Every answer is a fresh model's.** llama.cpp's arithmetic depends on how a prompt is cut into
batches: a token evaluated alone (SmolLM2) or in a batch whose size is not a multiple of 4
(Gemma-3's repacked Q4_K kernels) gets logits up to 0.4-0.8 apart from the same token inside a
batch. llama-cpp-python's own prefix reuse re-evaluates the last prompt token alone, so an answer
used to depend on what the model was asked before (a judge's first repeat differed from the other
four on 2-3 items per arm of the EHRNoteQA demo; a log-likelihood's second continuation was scored
from other logits than its first). Here every prompt is evaluated in the batches a fresh context
would use, 512 tokens from position 0, and the KV cache is reused only up to a batch boundary that
a fresh evaluation shares; the logits of a prompt's last token are kept, so the continuations of a
log-likelihood request are all scored from them.

Three things make it fast on a small, shared CPU machine, none of which changes an answer:

* **OpenMP threads spin briefly, then sleep.** The llama.cpp wheel is built with OpenMP, whose
  threads wait at every barrier (hundreds per token), by default spinning up to 300,000 times
  first. On a machine whose cores are also busy with other work a spinning thread burns the time
  slice its partner needs: decoding took 1.8-2.8x as long as with sleeping threads under 3-6
  competing processes (``bench/omp_wait.py``), and 38-193 s instead of 2.5-3.5 s for 64 tokens in a
  helper's measurement on a machine loaded 3-5. Sleeping at once (``OMP_WAIT_POLICY=PASSIVE``)
  fixes that but costs 1.7x on a quiet machine; a spin of 20,000 (``GOMP_SPINCOUNT``) is as fast
  as the default when quiet and as sleeping when busy. Importing this module sets it unless the
  environment sets ``OMP_WAIT_POLICY`` or ``GOMP_SPINCOUNT`` itself; it takes effect only if no
  OpenMP runtime is loaded yet (llama_cpp's, or torch's, which llama_cpp then shares).
* **Saved prompt states** (:class:`PrefixStates`). Runs come back to a long prefix after other
  prompts: the free-text arm asks about the notes the multiple-choice arm read, a second judging
  pass re-reads the notes the first one read. Before a call throws away a long evaluated prefix,
  llama.cpp's sequence state is copied out (``llama_state_seq_get_data``); a later call that shares
  more of it than of the live state copies it back instead of evaluating those tokens again. The
  pool is shared by every model object of the same file and window in the process, so it outlives
  one arm.
* **Greedy repeats are answered once.** At temperature 0 llama.cpp samples greedily, so the same
  prompt with the same settings (a judge's repeats differ only in seed) gives the same reply; the
  previous reply is returned instead of decoding it again.
"""

from __future__ import annotations

import asyncio
import ctypes
import dataclasses
import itertools
import os
import threading
import time
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clinieval.cpus import usable_cpus
from clinieval.errors import UserError
from clinieval.models.base import render_plain, split_continuation
from clinieval.models.catalog import file_fingerprint
from clinieval.models.shutdown import release_at_exit
from clinieval.types import (
    JSON,
    ErrorKind,
    GenerationConfig,
    LoglikOutput,
    Message,
    ModelOutput,
    TokenLogprob,
)

OMP_SPIN_COUNT = "20000"
"""Spins before an OpenMP thread sleeps at a barrier (libgomp's default: 300,000); see above."""

# Before llama_cpp (or torch) loads the OpenMP runtime, which reads it once; see the module docstring.
if "OMP_WAIT_POLICY" not in os.environ and "GOMP_SPINCOUNT" not in os.environ:
    os.environ["GOMP_SPINCOUNT"] = OMP_SPIN_COUNT

STATE_BUDGET_ENV = "CLINIEVAL_LLAMACPP_STATE_MB"
"""Environment variable: MiB of saved prompt states kept in memory (0 turns saving off)."""

DEFAULT_STATE_BUDGET_MB = 768
"""Room for the EHRNoteQA demo's largest family of shared prefixes: its patients' notes, about
460 MB for SmolLM2 at 23 KB of KV cache per token (Gemma-3-270M: 18 KB)."""

SAVE_MIN_TOKENS = 512
"""A live state is saved only when a call would throw away at least this many reusable tokens
(one batch): anything shorter cannot be reused anyway."""


@dataclass(slots=True)
class ReuseStats:
    """What one model object evaluated and what it reused, for tests and benchmarks."""

    prompt_tokens: int = 0
    """Prompt tokens of every generation and log-likelihood context asked for."""
    reused_tokens: int = 0
    """Of those, the ones already in the KV cache (live or restored), not evaluated again."""
    states_saved: int = 0
    states_restored: int = 0
    greedy_repeats: int = 0
    """Generations answered from the previous identical greedy request."""


@dataclass(slots=True)
class _Saved:
    """A copy of sequence 0's KV cache holding exactly ``tokens``, all evaluated in full batches."""

    tokens: np.ndarray[Any, np.dtype[np.int32]]
    data: np.ndarray[Any, np.dtype[np.uint8]]


def _common_prefix(a: np.ndarray[Any, Any], b: np.ndarray[Any, Any]) -> int:
    """Length of the longest common prefix of two token arrays."""
    n = min(len(a), len(b))
    if n == 0:
        return 0
    diff = np.flatnonzero(a[:n] != b[:n])
    return int(diff[0]) if len(diff) else n


class PrefixStates:
    """Saved KV-cache states, per model key, least recently used dropped first once their size
    passes the budget. Shared by every model object in the process (thread-safe)."""

    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self._lock = threading.Lock()
        self._entries: OrderedDict[tuple[Any, int], _Saved] = OrderedDict()
        self._next = 0

    @property
    def size_bytes(self) -> int:
        with self._lock:
            return sum(e.data.nbytes for e in self._entries.values())

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()

    def best(self, key: Any, tokens: np.ndarray[Any, Any]) -> tuple[int, _Saved | None]:
        """The saved state of ``key`` sharing the longest prefix with ``tokens``, and that length."""
        found: tuple[int, _Saved | None, tuple[Any, int] | None] = (0, None, None)
        with self._lock:
            for k, entry in self._entries.items():
                if k[0] != key:
                    continue
                n = _common_prefix(entry.tokens, tokens)
                if n > found[0]:
                    found = (n, entry, k)
            if found[2] is not None:
                self._entries.move_to_end(found[2])
        return found[0], found[1]

    def covers(self, key: Any, tokens: np.ndarray[Any, Any]) -> bool:
        """Whether a saved state already holds all but less than a batch of ``tokens``."""
        n, _ = self.best(key, tokens)
        return n > len(tokens) - SAVE_MIN_TOKENS

    def put(self, key: Any, saved: _Saved) -> None:
        """Keep ``saved``, dropping the states it makes redundant (those it holds all but less
        than a batch of) and then the least recently used until the budget is met."""
        if saved.data.nbytes > self.budget_bytes:
            return
        with self._lock:
            for k in [
                k
                for k, e in self._entries.items()
                if k[0] == key and _common_prefix(e.tokens, saved.tokens) > len(e.tokens) - SAVE_MIN_TOKENS
            ]:
                del self._entries[k]
            self._entries[(key, self._next)] = saved
            self._next += 1
            total = sum(e.data.nbytes for e in self._entries.values())
            while total > self.budget_bytes and self._entries:
                _, dropped = self._entries.popitem(last=False)
                total -= dropped.data.nbytes


def _budget_from_env() -> int:
    """The saved-state budget in bytes; anything but a finite number of MiB >= 0 is one error
    (``nan`` and ``inf`` parse as floats but have no byte count)."""
    raw = os.environ.get(STATE_BUDGET_ENV, "").strip()
    try:
        mb = float(raw) if raw else DEFAULT_STATE_BUDGET_MB
    except ValueError:
        mb = -1.0
    if not 0 <= mb < float("inf"):
        raise UserError(f"{STATE_BUDGET_ENV}={raw!r}: expected MiB, a number >= 0 (0 turns saving off)")
    return int(mb * 2**20)


SAVED_STATES = PrefixStates(_budget_from_env())
"""The process's saved prompt states (budget from ``CLINIEVAL_LLAMACPP_STATE_MB``)."""


class LlamaCppModel:
    """A GGUF model run by llama-cpp-python in this process.

    ``chat``: True applies the GGUF's chat template (an error if it has none), False prompts with
    raw text (base models), None uses the template when the file has one. ``states``: where long
    prompt states are saved for reuse (default: the process-wide :data:`SAVED_STATES`).
    """

    def __init__(
        self,
        path: Path,
        *,
        name: str | None = None,
        chat: bool | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
        states: PrefixStates | None = None,
    ) -> None:
        try:
            found = path.is_file()
        except OSError as e:  # a name too long for the file system
            raise UserError(f"model file {str(path)!r}: {e.strerror or e}") from None
        if not found:
            raise UserError(f"model file {str(path)!r}: not found")  # quoted: a spec may hold a line break
        if path.suffix != ".gguf":
            raise UserError(f"model file {str(path)!r}: expected a .gguf file")
        self.path = path
        self._name = name or path.stem
        self.chat = chat
        self.n_ctx = n_ctx
        self.n_threads = n_threads or usable_cpus()
        self._fingerprint = file_fingerprint(path)
        self._llm: Any = None
        self._formatter: Any = None
        self._load_lock = threading.Lock()
        self._lock = asyncio.Lock()
        self._states = SAVED_STATES if states is None else states
        self._state_key = (self._fingerprint, n_ctx)
        self._tokenized: OrderedDict[str, list[int]] = OrderedDict()
        self._last_greedy: tuple[Any, ModelOutput] | None = None
        self._canonical = 0
        """Leading positions of the live KV cache evaluated in the batches a fresh context uses."""
        self._prompt: (
            tuple[np.ndarray[Any, np.dtype[np.int32]], np.ndarray[Any, np.dtype[np.float32]]] | None
        ) = None
        """The last prompt evaluated and its last token's logits, while the cache still holds it."""
        self.stats = ReuseStats()

    @property
    def name(self) -> str:
        return self._name

    @property
    def identity(self) -> JSON:
        return {
            "backend": "llamacpp",
            "file": self.path.name,
            "fingerprint": self._fingerprint,
            "chat_template": self.chat,
            "n_ctx": self.n_ctx,
        }

    @property
    def max_concurrency(self) -> int:
        return 1

    def _load(self) -> Any:
        with self._load_lock:
            if self._llm is not None:
                return self._llm
            try:
                from llama_cpp import Llama
            except ImportError:
                raise UserError("the embedded backend needs llama-cpp-python; run `make install`") from None
            try:
                llm = Llama(
                    model_path=str(self.path),
                    n_ctx=self.n_ctx,
                    n_threads=self.n_threads,
                    n_threads_batch=self.n_threads,
                    seed=0,
                    verbose=False,
                )
            except (ValueError, RuntimeError) as e:
                raise UserError(f"model file {self.path}: llama.cpp could not load it ({e})") from None
            template = llm.metadata.get("tokenizer.chat_template")
            if self.chat is not False and template:
                from llama_cpp.llama_chat_format import Jinja2ChatFormatter

                def text(token: int) -> str:
                    return bytes(llm.detokenize([token], special=True)).decode("utf-8", "replace")

                self._formatter = Jinja2ChatFormatter(
                    template, eos_token=text(llm.token_eos()), bos_token=text(llm.token_bos())
                )
            elif self.chat is True:
                raise UserError(f"model file {self.path}: has no chat template; use it as a base model")
            self._llm = llm
            self._canonical, self._prompt = 0, None
            release_at_exit(self)
            return llm

    def gguf_metadata(self) -> dict[str, str]:
        """The GGUF file's metadata as llama.cpp read it (architecture, name, context length...),
        for the model fingerprint (models/fingerprint.py)."""
        return {str(k): str(v) for k, v in self._load().metadata.items()}

    def render(self, messages: Sequence[Message]) -> str:
        self._load()
        if self._formatter is None:
            return render_plain(messages) + "\n\n"
        payload = [{"role": m.role, "content": m.content} for m in messages]
        return str(self._formatter(messages=payload).prompt)

    def _stops(self) -> list[str]:
        return [] if self._formatter is None else [str(self._formatter.eos_token)]

    def _prompt_tokens(self, text: str) -> list[int]:
        """The prompt's tokens, BOS first. The last few are remembered: one request tokenises the
        same long prompt several times (the generation, then each continuation's context), and a
        30,000-character prompt takes 70-140 ms each time."""
        cached = self._tokenized.get(text)
        if cached is not None:
            self._tokenized.move_to_end(text)
            return list(cached)
        llm = self._load()
        tokens: list[int] = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        bos = llm.token_bos()
        if len(tokens) > 1 and tokens[0] == bos and tokens[1] == bos:
            tokens = tokens[1:]  # the template wrote a BOS and llama.cpp added another
        self._tokenized[text] = tokens
        while len(self._tokenized) > 8:
            self._tokenized.popitem(last=False)
        return list(tokens)

    # ----------------------------------------------------------------------------------------
    # The KV cache: evaluating prompts as a fresh context would, reusing what it would share

    @staticmethod
    def _truncate(llm: Any, n: int) -> None:
        llm._ctx.kv_cache_seq_rm(0, n, -1)
        llm.n_tokens = n

    def _batch_floor(self, llm: Any, n: int) -> int:
        step = int(llm.n_batch)
        return (n // step) * step

    def _save_live(self, llm: Any) -> bool:
        """Copy the live state's reusable part (cut to its full batches) into the pool, unless it
        is shorter than a batch or already there. Only called when that state is about to go."""
        keep = self._canonical
        if keep < SAVE_MIN_TOKENS or self._states.budget_bytes <= 0:
            return False
        tokens = np.array(llm.input_ids[:keep], dtype=np.int32)  # a copy: the live array changes
        if self._states.covers(self._state_key, tokens):
            return False
        import llama_cpp

        self._truncate(llm, keep)
        self._prompt = None
        ctx = llm._ctx.ctx
        size = llama_cpp.llama_state_seq_get_size(ctx, 0)
        if size <= 0 or size > self._states.budget_bytes:
            return False
        data = np.empty(size, dtype=np.uint8)
        written = llama_cpp.llama_state_seq_get_data(
            ctx, data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), size, 0
        )
        if written != size:
            return False
        self._states.put(self._state_key, _Saved(tokens, data))
        self.stats.states_saved += 1
        return True

    def _restore(self, llm: Any, saved: _Saved) -> bool:
        import llama_cpp

        self._truncate(llm, 0)
        self._canonical, self._prompt = 0, None
        done = llama_cpp.llama_state_seq_set_data(
            llm._ctx.ctx, saved.data.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), saved.data.nbytes, 0
        )
        if not done:  # the cache is empty again: evaluate from scratch
            self._truncate(llm, 0)
            return False
        n = len(saved.tokens)
        llm.input_ids[:n] = saved.tokens
        llm.n_tokens = n
        self._canonical = n
        self.stats.states_restored += 1
        return True

    def _eval_prompt(
        self, llm: Any, prompt: list[int], *, live_logits: bool = False
    ) -> np.ndarray[Any, np.dtype[np.float32]]:
        """Leave the KV cache holding exactly ``prompt``, evaluated as a fresh context would
        evaluate it (batches of ``n_batch`` from position 0), and return its last token's logits.

        Reused: the same prompt as last time, whole (its logits were kept), unless ``live_logits``
        asks for them in llama.cpp's own buffer (for sampling); else the longest run of full
        batches shared with the live state or with a saved one (copied back, the live state saved
        first when it is long). At least the last batch is evaluated again."""
        n = len(prompt)
        if n == 0:
            raise ValueError("the prompt has no tokens to condition on")
        tokens = np.asarray(prompt, dtype=np.int32)
        self.stats.prompt_tokens += n
        last = self._prompt
        if (
            not live_logits
            and last is not None
            and len(last[0]) == n
            and llm.n_tokens >= n
            and np.array_equal(last[0], tokens)
        ):
            self._truncate(llm, n)
            self.stats.reused_tokens += n
            return last[1]
        live = np.asarray(llm.input_ids[: llm.n_tokens], dtype=np.int32)
        reuse = self._batch_floor(llm, min(_common_prefix(live, tokens), self._canonical, n - 1))
        if self._states.budget_bytes > 0:
            shared, saved = self._states.best(self._state_key, tokens)
            from_saved = self._batch_floor(llm, min(shared, n - 1))
            if saved is not None and from_saved > reuse:
                self._save_live(llm)
                reuse = from_saved if self._restore(llm, saved) else 0
            elif self._canonical - reuse >= SAVE_MIN_TOKENS:
                self._save_live(llm)
        self._truncate(llm, reuse)
        self._prompt = None
        llm.eval(prompt[reuse:])
        self.stats.reused_tokens += reuse
        self._canonical = self._batch_floor(llm, n)
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),)).copy()
        self._prompt = (tokens, logits)
        return logits

    def park_state(self) -> None:
        """Save the live state for the next model object of this file (the next arm, the next
        judging pass), if it is worth keeping."""
        llm = self._llm
        if llm is not None:
            self._save_live(llm)

    # ----------------------------------------------------------------------------------------
    # Calls

    async def check(self) -> None:
        await asyncio.to_thread(self._load)

    async def _serial(self, fn: Any, *args: Any) -> Any:
        async with self._lock:
            return await asyncio.to_thread(fn, *args)

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        start = time.perf_counter()
        try:
            out: ModelOutput = await self._serial(self._generate_sync, messages, config)
        except ValueError as e:
            kind = ErrorKind.CONTEXT_LENGTH if "context window" in str(e) else ErrorKind.BACKEND
            return ModelOutput.failure(kind, str(e), time.perf_counter() - start)
        out.latency_s = time.perf_counter() - start
        return out

    def _generate_sync(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        llm = self._load()
        tokens = self._prompt_tokens(self.render(messages))
        if len(tokens) >= self.n_ctx:
            # Checked here: llama-cpp-python 0.3.36 fails with a numpy broadcast error instead.
            raise ValueError(f"Requested tokens ({len(tokens)}) exceed context window of {self.n_ctx}")
        # Greedy decoding ignores the seed: the same prompt and settings give the same reply.
        greedy = (tuple(tokens), dataclasses.replace(config, seed=None)) if config.temperature == 0 else None
        if greedy is not None and self._last_greedy is not None and self._last_greedy[0] == greedy:
            self.stats.greedy_repeats += 1
            self.stats.prompt_tokens += len(tokens)
            self.stats.reused_tokens += len(tokens)
            return ModelOutput.from_dict(self._last_greedy[1].to_dict())
        # The prompt is evaluated here, so llama-cpp-python finds it whole in the cache, with its
        # logits live, and samples at once instead of evaluating its last token again.
        self._eval_prompt(llm, tokens, live_logits=True)
        result = llm.create_completion(
            tokens,
            max_tokens=config.max_tokens,
            temperature=config.temperature,
            top_p=config.top_p,
            **({} if config.top_k is None else {"top_k": config.top_k}),
            seed=config.seed,
            stop=[*config.stop, *self._stops()] or None,
        )
        choice = result["choices"][0]
        usage = result.get("usage", {})
        logprobs = None
        if config.logprobs:
            generated = llm.tokenize(choice["text"].encode("utf-8"), add_bos=False, special=False)
            values = self._score_tokens(tokens, generated)
            logprobs = [
                TokenLogprob(llm.detokenize([t]).decode("utf-8", "replace"), v)
                for t, v in zip(generated, values, strict=True)
            ]
        out = ModelOutput(
            text=choice["text"],
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
            logprobs=logprobs,
        )
        self._last_greedy = None if greedy is None else (greedy, ModelOutput.from_dict(out.to_dict()))
        return out

    def _last_logprobs(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        llm = self._llm
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        return _log_softmax(logits)

    def _score_tokens(self, prefix: list[int], continuation: list[int]) -> list[float]:
        """Log-probability of each continuation token: the prefix as a fresh context evaluates
        it (reusing what that shares), then the continuation one token at a time."""
        llm = self._load()
        if len(prefix) + len(continuation) > self.n_ctx:
            raise ValueError(
                f"Requested tokens ({len(prefix) + len(continuation)}) exceed context window of {self.n_ctx}"
            )
        first = self._eval_prompt(llm, prefix)
        values: list[float] = [float(_log_softmax(first)[continuation[0]])]
        for prev, tok in itertools.pairwise(continuation):
            llm.eval([prev])
            values.append(float(self._last_logprobs()[tok]))
        return values

    def _loglik_sync(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        out = LoglikOutput()
        for cont in continuations:
            ctx, cont_text = split_continuation(prompt, cont)
            ctx_tokens = self._prompt_tokens(ctx)
            whole = self._prompt_tokens(ctx + cont_text)
            # Split the joint tokenisation where the context ends (as lm-eval does), so merges
            # across the boundary are scored the way the model would actually see them.
            cont_tokens = whole[len(ctx_tokens) :]
            if not cont_tokens:
                raise ValueError(f"continuation {cont!r} adds no tokens")
            values = self._score_tokens(whole[: len(ctx_tokens)], cont_tokens)
            out.logliks.append(sum(values))
            out.token_counts.append(len(cont_tokens))
        return out

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        start = time.perf_counter()
        try:
            out: LoglikOutput = await self._serial(self._loglik_sync, prompt, continuations)
        except ValueError as e:
            kind = ErrorKind.CONTEXT_LENGTH if "context window" in str(e) else ErrorKind.BACKEND
            return LoglikOutput(latency_s=time.perf_counter() - start, error_kind=kind, error_message=str(e))
        out.latency_s = time.perf_counter() - start
        return out

    async def tokenize(self, text: str) -> list[int]:
        llm = self._load()
        tokens: list[int] = llm.tokenize(text.encode("utf-8"), add_bos=False, special=False)
        return tokens

    async def count_tokens(self, text: str) -> int:
        return len(await self.tokenize(text))

    async def aclose(self) -> None:
        """Keep the live state for the next model object of this file, then free the model."""
        async with self._lock:
            await asyncio.to_thread(self.park_state)
        self.release()

    def release(self) -> None:
        """Free the loaded model (the chat formatter's closure holds it too); it loads again on
        next use."""
        llm, self._llm, self._formatter = self._llm, None, None
        self._tokenized.clear()
        self._last_greedy, self._prompt, self._canonical = None, None, 0
        if llm is not None:
            llm.close()


def _log_softmax(logits: np.ndarray[Any, Any]) -> np.ndarray[Any, np.dtype[np.float64]]:
    values: np.ndarray[Any, np.dtype[np.float64]] = logits.astype(np.float64)
    norm: np.ndarray[Any, np.dtype[np.float64]] = values - np.logaddexp.reduce(values)
    return norm
