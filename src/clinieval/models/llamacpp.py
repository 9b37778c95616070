"""Embedded llama.cpp backend: a GGUF model evaluated in-process, no server and no network.

llama_cpp is imported only when a model is loaded, so the rest of clinieval stays importable
(and fast to start) without it. One llama.cpp context is not thread-safe, so calls are
serialised behind a lock and run in a worker thread to keep the event loop responsive.
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clinieval.errors import UserError
from clinieval.models.base import render_plain, split_continuation
from clinieval.models.catalog import file_fingerprint
from clinieval.models.native import release_at_exit
from clinieval.types import (
    JSON,
    ErrorKind,
    GenerationConfig,
    LoglikOutput,
    Message,
    ModelOutput,
    TokenLogprob,
)


class LlamaCppModel:
    """A GGUF model run by llama-cpp-python in this process.

    ``chat``: True applies the GGUF's chat template (an error if it has none), False prompts with
    raw text (base models), None uses the template when the file has one.
    """

    def __init__(
        self,
        path: Path,
        *,
        name: str | None = None,
        chat: bool | None = None,
        n_ctx: int = 4096,
        n_threads: int | None = None,
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
        self.n_threads = n_threads or max(1, os.cpu_count() or 1)
        self._fingerprint = file_fingerprint(path)
        self._llm: Any = None
        self._formatter: Any = None
        self._load_lock = threading.Lock()
        self._lock = asyncio.Lock()

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
            release_at_exit(self)
            return llm

    def render(self, messages: Sequence[Message]) -> str:
        self._load()
        if self._formatter is None:
            return render_plain(messages) + "\n\n"
        payload = [{"role": m.role, "content": m.content} for m in messages]
        return str(self._formatter(messages=payload).prompt)

    def _stops(self) -> list[str]:
        return [] if self._formatter is None else [str(self._formatter.eos_token)]

    def _prompt_tokens(self, text: str) -> list[int]:
        llm = self._load()
        tokens: list[int] = llm.tokenize(text.encode("utf-8"), add_bos=True, special=True)
        bos = llm.token_bos()
        if len(tokens) > 1 and tokens[0] == bos and tokens[1] == bos:
            tokens = tokens[1:]  # the template wrote a BOS and llama.cpp added another
        return tokens

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
        return ModelOutput(
            text=choice["text"],
            prompt_tokens=usage.get("prompt_tokens"),
            completion_tokens=usage.get("completion_tokens"),
            finish_reason=choice.get("finish_reason"),
            logprobs=logprobs,
        )

    def _last_logprobs(self) -> np.ndarray[Any, np.dtype[np.float64]]:
        llm = self._llm
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(llm.n_vocab(),))
        values: np.ndarray[Any, np.dtype[np.float64]] = logits.astype(np.float64)
        norm: np.ndarray[Any, np.dtype[np.float64]] = values - np.logaddexp.reduce(values)
        return norm

    def _score_tokens(self, prefix: list[int], continuation: list[int]) -> list[float]:
        """Log-probability of each continuation token, reusing the KV cache's common prefix."""
        llm = self._load()
        if len(prefix) + len(continuation) > self.n_ctx:
            raise ValueError(
                f"Requested tokens ({len(prefix) + len(continuation)}) exceed context window of {self.n_ctx}"
            )
        cached = list(llm.input_ids[: llm.n_tokens])
        keep = 0
        limit = min(len(cached), len(prefix) - 1)  # re-evaluate at least one token for its logits
        while keep < limit and cached[keep] == prefix[keep]:
            keep += 1
        llm.n_tokens = keep
        llm.eval(prefix[keep:])
        values: list[float] = []
        for i, tok in enumerate(continuation):
            values.append(float(self._last_logprobs()[tok]))
            if i < len(continuation) - 1:
                llm.eval([tok])
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
        self.release()

    def release(self) -> None:
        """Free the loaded model (the chat formatter's closure holds it too); it loads again on
        next use."""
        llm, self._llm, self._formatter = self._llm, None, None
        if llm is not None:
            llm.close()
