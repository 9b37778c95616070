"""What an OpenAI-compatible server is, and what it can serve correctly.

The OpenAI API says nothing about a server's context size, how many requests it works on at
once, or whether its echoed prompt log-probabilities are right, yet all three decide whether a
run's numbers mean anything: llama-cpp-python's server returns prompt log-probabilities shifted
by one token (so log-likelihood scores are quietly wrong), serves one request at a time (so 16
requests in flight time out in its queue), and defaults to a 2,048-token context. Each server
says some of this in its own place (``/props``, ``/info``, ``/v1/models``, ``/openapi.json``,
``/api/version``); this module asks those places once, before a run, and says what it found.

Detection never decides anything the user stated: ``--server-kind`` names the kind, and
``--concurrency``/``--max-context`` win over what a server reports.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import orjson

ServerKind = Literal["llama-cpp-python", "llama.cpp", "vllm", "tgi", "ollama", "generic"]
SERVER_KINDS: tuple[ServerKind, ...] = ("llama-cpp-python", "llama.cpp", "vllm", "tgi", "ollama", "generic")

PromptLogprobs = Literal["ok", "shifted", "missing", "unknown"]
"""Whether ``/completions`` with ``echo`` and ``logprobs`` gives correct prompt log-probabilities."""

_LOGPROBS: Mapping[ServerKind, PromptLogprobs] = {
    "vllm": "ok",
    # llama-cpp-python issue #1983; verified here: " Paris" after "The capital of France is" comes
    # back as -8.45 where llama.cpp's own logits give -0.26
    "llama-cpp-python": "shifted",
    "llama.cpp": "missing",  # llama-server does not echo prompt log-probabilities
    "tgi": "missing",  # TGI's completions route has no echo
    "ollama": "missing",  # Ollama's OpenAI layer returns no prompt log-probabilities
    "generic": "unknown",
}

_WHY_NOT: Mapping[PromptLogprobs, str] = {
    "shifted": "returns echoed prompt log-probabilities shifted by one token (llama-cpp-python issue "
    "#1983), so log-likelihood scores would be wrong numbers",
    "missing": "does not return echoed prompt log-probabilities, so log-likelihood scores cannot be computed",
    "unknown": "did not answer a check of its echoed prompt log-probabilities",
}
_WHY_NOT_PROBED: Mapping[PromptLogprobs, str] = {
    **_WHY_NOT,
    "shifted": "echoes prompt log-probabilities that differ from the ones it gives the same token when "
    "generating it (checked with two tiny requests), so log-likelihood scores would be wrong numbers",
}

Fetch = Callable[
    [str, str, "dict[str, Any] | None"], Awaitable["tuple[int, bytes, Mapping[str, str]] | None"]
]
"""``(method, url, json_body)`` -> status, body and lower-cased headers, or None when unreachable."""


@dataclass(frozen=True, slots=True)
class ServerInfo:
    """What one server is and what it said about itself."""

    kind: ServerKind
    context_size: int | None = None
    """Tokens of context per request, where the server reports it."""
    slots: int | None = None
    """Requests the server works on at once, where it reports it (more only wait in its queue)."""
    evidence: str = ""
    """Where the kind was read (``/props``, ``--server-kind``...), for notes and the manifest."""
    probed: PromptLogprobs | None = None
    """For a server of no known kind: what :func:`echo_probe` found (None: not asked)."""

    @property
    def prompt_logprobs(self) -> PromptLogprobs:
        known = _LOGPROBS[self.kind]
        return self.probed if known == "unknown" and self.probed is not None else known

    @property
    def serves_loglikelihood(self) -> bool:
        return self.prompt_logprobs == "ok"

    def loglik_problem(self) -> str:
        """Why log-likelihood scores from this server would be wrong or missing ('' when they are fine)."""
        state = self.prompt_logprobs
        why = (_WHY_NOT_PROBED if self.probed is not None else _WHY_NOT)[state]
        return "" if state == "ok" else f"this {self.describe()} {why}"

    def describe(self) -> str:
        names = {
            "llama-cpp-python": "llama-cpp-python server (python -m llama_cpp.server)",
            "llama.cpp": "llama.cpp server (llama-server)",
            "vllm": "vLLM server",
            "tgi": "Text Generation Inference server",
            "ollama": "Ollama server",
            "generic": "OpenAI-compatible server",
        }
        return names[self.kind]

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "context_size": self.context_size,
            "slots": self.slots,
            "evidence": self.evidence,
            "prompt_logprobs": self.prompt_logprobs,
        }


def _json(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return None


def _positive_int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _model_entries(models_body: bytes | None) -> list[dict[str, Any]]:
    data = _json(models_body) if models_body else None
    entries = data.get("data") if isinstance(data, dict) else None
    return [m for m in entries if isinstance(m, dict)] if isinstance(entries, list) else []


def _entry_for(entries: list[dict[str, Any]], model: str) -> dict[str, Any]:
    return next((m for m in entries if m.get("id") == model), entries[0] if entries else {})


async def detect_server(
    fetch: Fetch,
    root: str,
    model: str,
    models_body: bytes | None,
    headers: Mapping[str, str],
    kind: ServerKind | None = None,
) -> ServerInfo:
    """Ask the server what it is (or take ``kind`` as given) and what it reports.

    ``root`` is the server's address without ``/v1``; ``models_body`` and ``headers`` are the
    ``/v1/models`` answer the caller already has. Every probe is one GET to a route the kind
    documents; an unreachable or odd answer is ignored, never fatal: detection informs defaults.
    """
    entry = _entry_for(_model_entries(models_body), model)
    owned = str(entry.get("owned_by", "")).lower()
    server_header = headers.get("server", "").lower()
    if kind is None:
        kind, evidence = await _guess_kind(fetch, root, owned, server_header)
    else:
        evidence = "--server-kind"
    match kind:
        case "vllm":
            return ServerInfo(kind, _positive_int(entry.get("max_model_len")), None, evidence)
        case "llama.cpp":
            return await _llama_server(fetch, root, evidence)
        case "tgi":
            return await _tgi(fetch, root, evidence)
        case "llama-cpp-python":
            # one request at a time: the server holds one llama.cpp context behind a lock
            return ServerInfo(kind, None, 1, evidence)
    return ServerInfo(kind, None, None, evidence)


async def _guess_kind(fetch: Fetch, root: str, owned: str, server_header: str) -> tuple[ServerKind, str]:
    if owned == "vllm":
        return "vllm", "/v1/models owned_by"
    if owned == "llamacpp" or "llama.cpp" in server_header:
        return "llama.cpp", "/v1/models owned_by" if owned == "llamacpp" else "Server header"
    openapi = await fetch("GET", f"{root}/openapi.json", None)
    if openapi is not None and openapi[0] == 200:
        info = _json(openapi[1])
        title = str((info.get("info") or {}).get("title", "")) if isinstance(info, dict) else ""
        if "llama.cpp python" in title.lower():
            return "llama-cpp-python", "/openapi.json title"
    props = await fetch("GET", f"{root}/props", None)
    if props is not None and props[0] == 200 and _is_llama_props(_json(props[1])):
        return "llama.cpp", "/props"
    tgi = await fetch("GET", f"{root}/info", None)
    if tgi is not None and tgi[0] == 200 and _is_tgi_info(_json(tgi[1])):
        return "tgi", "/info"
    ollama = await fetch("GET", f"{root}/api/version", None)
    if ollama is not None and ollama[0] == 200 and owned in {"library", "ollama", "system"}:
        return "ollama", "/api/version"
    version = await fetch("GET", f"{root}/version", None)
    if version is not None and version[0] == 200 and "vllm" in version[1].decode("utf-8", "replace").lower():
        return "vllm", "/version"
    return "generic", "no server-specific route answered"


def _is_llama_props(props: Any) -> bool:
    return isinstance(props, dict) and ("total_slots" in props or "default_generation_settings" in props)


def _is_tgi_info(info: Any) -> bool:
    return isinstance(info, dict) and "model_id" in info and "max_total_tokens" in info


async def _llama_server(fetch: Fetch, root: str, evidence: str) -> ServerInfo:
    """llama-server: ``/props`` holds the slots and each slot's context (``-c`` divided by ``-np``)."""
    answer = await fetch("GET", f"{root}/props", None)
    props = _json(answer[1]) if answer is not None and answer[0] == 200 else None
    if not isinstance(props, dict):
        return ServerInfo("llama.cpp", None, None, evidence)
    settings = props.get("default_generation_settings")
    n_ctx = _positive_int(settings.get("n_ctx")) if isinstance(settings, dict) else None
    return ServerInfo("llama.cpp", n_ctx, _positive_int(props.get("total_slots")), evidence)


async def _tgi(fetch: Fetch, root: str, evidence: str) -> ServerInfo:
    """TGI: ``/info`` holds the total tokens per request and the requests its router accepts."""
    answer = await fetch("GET", f"{root}/info", None)
    info = _json(answer[1]) if answer is not None and answer[0] == 200 else None
    if not isinstance(info, dict):
        return ServerInfo("tgi", None, None, evidence)
    return ServerInfo(
        "tgi",
        _positive_int(info.get("max_total_tokens")),
        _positive_int(info.get("max_concurrent_requests")),
        evidence,
    )


_PROBE_TEXT = "The patient was given aspirin for chest pain. The"
_TOLERANCE = 0.1
"""Nats by which the echoed and the generated log-probability of one token may differ (batching
and kernels move logits by hundredths; a shift moves them by whole units)."""


async def echo_probe(fetch: Fetch, completions_url: str, model: str) -> PromptLogprobs:
    """Does an unknown server echo correct prompt log-probabilities? Asked with two tiny requests.

    The server first generates one greedy token after a short text, with its log-probability;
    then it is asked to echo the text with that token appended. A correct server reports the same
    log-probability for the token both times, whatever the model; a server whose echo is shifted
    (llama-cpp-python's: -13.0 echoed against -1.1 generated) or missing does not. Asked only when
    a run needs log-likelihoods from a server of no known kind.
    """
    base = {"model": model, "max_tokens": 1, "temperature": 0.0, "logprobs": 1}
    first = await fetch("POST", completions_url, {**base, "prompt": _PROBE_TEXT})
    generated = _generated_logprob(first)
    if generated is None:
        return "unknown" if first is None else "missing"
    token, value = generated
    second = await fetch("POST", completions_url, {**base, "prompt": _PROBE_TEXT + token, "echo": True})
    echoed = _echoed_at(second, len(_PROBE_TEXT))
    if echoed is None:
        return "unknown" if second is None else "missing"
    return "ok" if abs(echoed - value) <= _TOLERANCE else "shifted"


def _logprobs(answer: tuple[int, bytes, Mapping[str, str]] | None) -> dict[str, Any] | None:
    if answer is None or answer[0] != 200:
        return None
    data = _json(answer[1])
    try:
        lp = data["choices"][0]["logprobs"]
    except (KeyError, IndexError, TypeError):
        return None
    return lp if isinstance(lp, dict) else None


def _generated_logprob(answer: tuple[int, bytes, Mapping[str, str]] | None) -> tuple[str, float] | None:
    lp = _logprobs(answer)
    if lp is None:
        return None
    tokens, values = lp.get("tokens"), lp.get("token_logprobs")
    if not isinstance(tokens, list) or not isinstance(values, list) or not tokens or not values:
        return None
    token, value = tokens[0], values[0]
    if not isinstance(token, str) or not token or not isinstance(value, int | float):
        return None
    return token, float(value)


def _echoed_at(answer: tuple[int, bytes, Mapping[str, str]] | None, offset: int) -> float | None:
    """The echoed log-probability of the token that starts at character ``offset``."""
    lp = _logprobs(answer)
    if lp is None:
        return None
    offsets, values = lp.get("text_offset"), lp.get("token_logprobs")
    if not isinstance(offsets, list) or not isinstance(values, list):
        return None
    for at, value in zip(offsets, values, strict=False):
        if at == offset and isinstance(value, int | float):
            return float(value)
    return None
