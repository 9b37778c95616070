"""Which model answered: a fingerprint recorded in a run's manifest and checked when it resumes.

A run is named by its model spec, but a spec names an address and an alias, not weights: serve
Gemma where SmolLM2 was, under the same ``--model_alias``, and the resumed run would mix the two
models' answers into one score without a word (issue 34). So a run records what answered, and a
resume, a judging pass and a suite cell compare it before asking anything:

* **what the server reports about the model** (``reported``): the ``/v1/models`` entry's model
  fields (vLLM's ``root`` and ``max_model_len``, llama-server's ``meta``: parameters, size,
  ``n_ctx_train``), llama-server's ``/props`` ``model_path``, TGI's ``/info`` (``model_id``,
  ``model_sha``), Ollama's ``/api/tags`` digest. The alias itself, ``owned_by`` and timestamps
  are left out: they name the server or the moment, not the weights.
* **a probe** (``probe``): a fixed greedy completion of a few tokens at temperature 0. It is the
  only evidence a server that reports nothing (``python -m llama_cpp.server``) gives. That server
  reuses the KV cache of the previous prompt, and a prompt sent right after itself is decoded
  from its last token only, which changes the greedy answer; so a fixed flush prompt always goes
  first and only the answer to the second, different prompt counts (it always follows the flush,
  whatever came before, so it is the same after a restart). At record time it is asked twice; an
  answer that differed then is marked not deterministic and never decides anything.
* for an **embedded** model (``llamacpp:``): the GGUF file (name, size, a digest of its first and
  last MiB) and its metadata (architecture, name, size label, ``n_ctx_train``); no probe, since
  the file is the weights (and a probe would be a model call no plan counts).

What decides (``decides``), so that a hosted API whose answers vary is never refused spuriously:
the file for an embedded model; else what the server reports, when it reports anything; else the
probe, when it was deterministic when recorded (a mismatch is asked once more before it counts);
else nothing (the run can only trust the alias, and says so). A difference in a part that does not
decide is a warning. A generic server (a hosted API or a gateway: no server-specific route
answered) is not probed: its answers vary, each request is billed, and the weights behind a hosted
name change whatever a probe says.

``--fingerprint strict`` (default) refuses a changed model, ``warn`` logs it and goes on, ``off``
takes no fingerprint (no requests) and compares nothing; ``CLINIEVAL_FINGERPRINT`` sets the default
where a command has no such option (a suite). The URL is recorded for information only: the same
model at a new address resumes (see :func:`portable_spec`).
"""

from __future__ import annotations

import copy
import hashlib
import logging
import os
import time
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import orjson

from clinieval.errors import UserError
from clinieval.types import JSON

if TYPE_CHECKING:
    from clinieval.models.base import Model
    from clinieval.models.llamacpp import LlamaCppModel
    from clinieval.models.openai_http import OpenAIModel

log = logging.getLogger(__name__)

Mode = Literal["strict", "warn", "off"]
MODES: tuple[Mode, ...] = ("strict", "warn", "off")
ENV = "CLINIEVAL_FINGERPRINT"
VERSION = 1

FLUSH_PROMPT = "1, 2, 3, 4,"
"""Sent first, answer ignored: the probe proper never follows itself (see the module docstring)."""
PROBE_PROMPT = "Once upon a time in the town of Quillmere, the old clockmaker"
"""An odd story opening: models continue it in their own words (SmolLM2: ", Malcolm Blackstone,
had a dream."; Gemma-3-270M: ", Mr. Quillmere, was a busy man."), where a factual prompt would
get the same answer from many models."""
PROBE_TOKENS = 8
PROBED_KINDS = frozenset({"llama-cpp-python", "llama.cpp", "vllm", "tgi", "ollama"})
"""Self-hosted servers, whose greedy answers are worth comparing; a generic one is not probed."""
_REPORTED_FIELDS = ("root", "parent", "max_model_len", "meta")
"""``/v1/models`` entry fields that describe the weights (not the alias, owner or a timestamp)."""
_GGUF_KEYS = ("general.architecture", "general.name", "general.basename", "general.size_label")
_PROBE_TIMEOUT_S = 60.0


def resolve_mode(mode: str | None) -> Mode:
    """``--fingerprint`` as given, else ``CLINIEVAL_FINGERPRINT``, else strict."""
    chosen = mode if mode is not None else os.environ.get(ENV, "strict")
    for known in MODES:
        if chosen.strip().lower() == known:
            return known
    where = "--fingerprint" if mode is not None else ENV
    raise UserError(f"{where} {chosen!r}: expected one of {', '.join(MODES)}")


# --------------------------------------------------------------------------------------------
# The run's identity without the address


def spec_without_urls(spec: str) -> str:
    """``openai:URL@NAME`` (or a comma list of URLs) as ``openai:@NAME``: what a run is, wherever
    the model is served. Other specs (embedded models, endpoints files) are kept as they are."""
    prefix, sep, rest = spec.partition(":")
    if not sep or not prefix.startswith("openai"):
        return spec
    url, at, name = rest.rpartition("@")
    return f"{prefix}:@{name}" if at and url else spec


def portable_spec(spec: JSON) -> JSON:
    """A run spec with the model's address left out: two runs are the same run when these are
    equal (the fingerprint, not the URL, says whether the same model answers)."""
    out: JSON = copy.deepcopy(spec)
    model = out.get("model")
    if isinstance(model, dict):
        if isinstance(model.get("spec"), str):
            model["spec"] = spec_without_urls(model["spec"])
        identity = model.get("identity")
        if isinstance(identity, dict):
            identity.pop("base_url", None)
    normal: JSON = orjson.loads(orjson.dumps(out, option=orjson.OPT_SORT_KEYS))  # tuples as lists
    return normal


# --------------------------------------------------------------------------------------------
# Taking a fingerprint


async def take(model: Model, mode: Mode = "strict") -> JSON | None:
    """The fingerprint of ``model`` (checked already: an embedded model is loaded, a server was
    asked what it is); None with ``--fingerprint off``. Never raises for what a server says or
    fails to say: a fingerprint that could not be taken is recorded as such."""
    if mode == "off":
        return None
    from clinieval.models.llamacpp import LlamaCppModel
    from clinieval.models.openai_http import OpenAIModel
    from clinieval.models.pool import EndpointPool

    start = time.perf_counter()
    if isinstance(model, LlamaCppModel):
        found = await _embedded(model)
    elif isinstance(model, OpenAIModel):
        found = await _server(model)
    elif isinstance(model, EndpointPool) and (first := model.first_usable()) is not None:
        found = await _server(first)
        found["pool"] = True
    else:
        found = {"taken": False, "why": f"no fingerprint for a {type(model).__name__} model"}
    found["version"] = VERSION
    found["taken_at"] = time.strftime("%Y-%m-%dT%H:%M:%S%z")
    found["ms"] = round((time.perf_counter() - start) * 1000)
    if found.get("taken", True):
        found["taken"] = True
        found["decides"] = _decides(found)
    return found


def _decides(fp: Mapping[str, Any]) -> str:
    if fp.get("file"):
        return "file"
    if fp.get("reported"):
        return "reported"
    probe = fp.get("probe") or {}
    return "probe" if probe.get("deterministic") else "nothing"


async def _embedded(model: LlamaCppModel) -> JSON:
    size = model.path.stat().st_size
    file = {"name": model.path.name, "size": size, "digest": model.identity["fingerprint"]}
    meta = model.gguf_metadata()
    arch = meta.get("general.architecture", "")
    gguf = {k.removeprefix("general."): meta[k] for k in _GGUF_KEYS if k in meta}
    if f"{arch}.context_length" in meta:
        gguf["n_ctx_train"] = meta[f"{arch}.context_length"]
    # no probe: the file is the weights, and it decides; a probe would be a model call that no
    # plan counts (a suite's plan equals the calls its cells make)
    return {"url": None, "kind": "embedded", "file": file, "gguf": gguf, "probe": None}


async def _server(model: OpenAIModel) -> JSON:
    info = model.server_info
    kind = info.kind if info is not None else "generic"
    fp: JSON = {"url": model.base_url, "kind": kind, "model": model.model}
    reported = await _reported(model, kind)
    if reported:
        fp["reported"] = reported
    if kind in PROBED_KINDS:
        fp["probe"] = await _server_probe(model)
    return fp


async def _get_json(model: OpenAIModel, url: str) -> Any:
    answer = await model.fetch("GET", url, None)
    if answer is None or answer[0] != 200:
        return None
    try:
        return orjson.loads(answer[1])
    except orjson.JSONDecodeError:
        return None


async def _reported(model: OpenAIModel, kind: str) -> JSON:
    """What the server says about the weights, route by route (only what names the model)."""
    base = model.base_url.partition("?")[0].rstrip("/")
    root = base.removesuffix("/v1")
    out: JSON = {}
    listed = await _get_json(model, f"{base}/models")
    entries = listed.get("data") if isinstance(listed, dict) else None
    entry = next((m for m in entries or [] if isinstance(m, dict) and m.get("id") == model.model), None)
    if entry is not None:
        fields = {k: entry[k] for k in _REPORTED_FIELDS if entry.get(k) is not None}
        if fields:
            out["/v1/models"] = fields
    if kind == "llama.cpp":
        props = await _get_json(model, f"{root}/props")
        if isinstance(props, dict) and props.get("model_path"):
            out["/props"] = {"model_path": props["model_path"]}
    elif kind == "tgi":
        info = await _get_json(model, f"{root}/info")
        if isinstance(info, dict):
            kept = {k: info[k] for k in ("model_id", "model_sha", "model_dtype") if info.get(k) is not None}
            out.update({"/info": kept} if kept else {})
    elif kind == "ollama":
        tags = await _get_json(model, f"{root}/api/tags")
        for m in (tags.get("models") or []) if isinstance(tags, dict) else []:
            if isinstance(m, dict) and model.model in (m.get("name"), m.get("model")):
                out["/api/tags"] = {k: m[k] for k in ("digest", "size", "details") if k in m}
    return out


async def _server_probe(model: OpenAIModel) -> JSON:
    """The probe over raw ``/completions`` (the weights, not a chat template), or chat where the
    server offers no completions route."""
    base = model.base_url.partition("?")[0].rstrip("/")
    query = model.base_url.partition("?")[2]
    via = "completions"

    async def ask(prompt: str, tokens: int) -> tuple[str | None, str]:
        nonlocal via
        payload: JSON = {"model": model.model, "max_tokens": tokens, "temperature": 0.0, "seed": 0}
        if via == "completions":
            answer = await model.fetch(
                "POST",
                _with_query(f"{base}/completions", query),
                {**payload, "prompt": prompt},
                _PROBE_TIMEOUT_S,
            )
            if answer is None or answer[0] not in {404, 405}:
                return _text(answer, "text")
            via = "chat"
        chat = {**payload, "messages": [{"role": "user", "content": prompt}]}
        answer = await model.fetch(
            "POST", _with_query(f"{base}/chat/completions", query), chat, _PROBE_TIMEOUT_S
        )
        return _text(answer, "message")

    probe = await _probe(ask)
    probe["via"] = via  # "chat" where the server has no completions route
    return probe


def _with_query(url: str, query: str) -> str:
    return f"{url}?{query}" if query else url


def _text(answer: tuple[int, bytes, Mapping[str, str]] | None, field: str) -> tuple[str | None, str]:
    if answer is None:
        return None, "no answer"
    if answer[0] != 200:
        return None, f"HTTP {answer[0]}"
    try:
        choice = orjson.loads(answer[1])["choices"][0]
        text = choice["text"] if field == "text" else choice["message"]["content"]
    except (orjson.JSONDecodeError, KeyError, IndexError, TypeError):
        return None, "an answer of another shape"
    return (text, "") if isinstance(text, str) else (None, "no text in the answer")


async def _probe(ask: Any, times: int = 2) -> JSON:
    """Flush, then the probe, ``times`` times; deterministic when every answer was the same."""
    start = time.perf_counter()
    answers: list[str] = []
    for _ in range(times):
        await ask(FLUSH_PROMPT, 1)
        text, why = await ask(PROBE_PROMPT, PROBE_TOKENS)
        if text is None:
            return {"failed": why, "ms": round((time.perf_counter() - start) * 1000)}
        answers.append(text)
    return {
        "prompt": PROBE_PROMPT,
        "answer": answers[0],
        "sha256": hashlib.sha256(answers[0].encode()).hexdigest()[:16],
        "deterministic": len(set(answers)) == 1,
        "asked": times,
        "ms": round((time.perf_counter() - start) * 1000),
    }


async def probe_again(model: Model) -> JSON | None:
    """One more flush-and-probe (a mismatch is asked twice before it counts)."""
    from clinieval.models.openai_http import OpenAIModel
    from clinieval.models.pool import EndpointPool

    if isinstance(model, EndpointPool):
        first = model.first_usable()
        return None if first is None else await _server_probe(first)
    if isinstance(model, OpenAIModel):
        return await _server_probe(model)
    return None  # an embedded model has no probe: its file decides


# --------------------------------------------------------------------------------------------
# Comparing two fingerprints


def differences(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> tuple[list[str], list[str]]:
    """What changed between the recorded fingerprint and this one, as (deciding, other) phrases:
    a deciding difference refuses under ``strict``; the others are warnings."""
    if not old or not new or not old.get("taken") or not new.get("taken"):
        return [], []
    deciding: list[str] = []
    other: list[str] = []
    decides = str(old.get("decides", "nothing"))
    if old.get("file") and new.get("file") and _file_key(old) != _file_key(new):
        deciding.append(f"model file {_file(new)} (was {_file(old)})")
    if old.get("reported") and new.get("reported") and old["reported"] != new["reported"]:
        (deciding if decides == "reported" else other).append(
            _reported_change(old["reported"], new["reported"])
        )
    probe_change = _probe_change(old.get("probe"), new.get("probe"))
    if probe_change:
        (deciding if decides == "probe" else other).append(probe_change)
    return deciding, other


def _file_key(fp: Mapping[str, Any]) -> tuple[Any, Any]:
    return fp["file"].get("size"), fp["file"].get("digest")


def _file(fp: Mapping[str, Any]) -> str:
    f = fp["file"]
    return f"{f.get('name')} ({f.get('size')} bytes, digest {f.get('digest')})"


def _reported_change(old: Mapping[str, Any], new: Mapping[str, Any]) -> str:
    for route in sorted(set(old) | set(new)):
        a, b = old.get(route) or {}, new.get(route) or {}
        for key in sorted(set(a) | set(b)):
            if a.get(key) != b.get(key):
                shown = (orjson.dumps(a.get(key)).decode()[:120], orjson.dumps(b.get(key)).decode()[:120])
                return f"server reports {route} {key} {shown[1]} (was {shown[0]})"
    return "server reports the model differently"


def _probe_change(old: Any, new: Any) -> str | None:
    """The probe's answer changed (None when it did not, or cannot be compared: not taken, failed,
    not deterministic when recorded, or asked another way)."""
    if not isinstance(old, dict) or not isinstance(new, dict) or "answer" not in old or "answer" not in new:
        return None
    if not old.get("deterministic") or old.get("via") != new.get("via") or old["answer"] == new["answer"]:
        return None
    return f"probe answer differs ({new['answer']!r}, was {old['answer']!r})"


def same_model(a: Mapping[str, Any] | None, b: Mapping[str, Any] | None) -> bool:
    """Whether two fingerprints surely name one model, wherever and under whatever name it is
    served: the same GGUF file, or the same deterministic probe answer asked the same way with
    nothing reported that differs (how self-judging is told)."""
    if not a or not b or not a.get("taken") or not b.get("taken"):
        return False
    if a.get("file") and b.get("file"):
        return _file_key(a) == _file_key(b)
    pa, pb = a.get("probe") or {}, b.get("probe") or {}
    probed_alike = (
        "answer" in pa
        and "answer" in pb
        and pa.get("deterministic")
        and pb.get("deterministic")
        and pa.get("via") == pb.get("via")
        and pa["answer"] == pb["answer"]
    )
    both_report = a.get("reported") and b.get("reported")
    return bool(probed_alike) and (not both_report or a["reported"] == b["reported"])


def describe(fp: Mapping[str, Any] | None) -> str:
    """One line for a log: what decides and what it holds."""
    if not fp:
        return "not taken (--fingerprint off)"
    if not fp.get("taken"):
        return f"not taken ({fp.get('why')})"
    probe = fp.get("probe") or {}
    if not probe:
        said = "no probe"
    elif "answer" in probe:
        said = f"probe {probe['answer']!r}"
    else:
        said = f"probe failed ({probe.get('failed')})"
    if "answer" in probe and not probe.get("deterministic"):
        said += " (not deterministic)"
    parts = [_file(fp)] if fp.get("file") else []
    if fp.get("reported"):
        parts.append(f"reported {orjson.dumps(fp['reported']).decode()[:200]}")
    return f"decided by {fp.get('decides')}: " + "; ".join([*parts, said])


async def check_unchanged(
    model: Model, old: Mapping[str, Any] | None, new: JSON | None, mode: Mode, what: str, way_out: str
) -> JSON | None:
    """Compare the recorded fingerprint ``old`` with ``new`` (taken now from ``model``): refuse a
    deciding difference under strict (one error naming what changed and ``way_out``), log it under
    warn; a probe that alone differs is asked once more first. Returns ``new``, its probe replaced
    by the second answer when that was asked."""
    deciding, other = differences(old, new)
    if new is not None and any(p.startswith("probe ") for p in deciding):
        again = await probe_again(model)
        if again is not None:
            new = {**new, "probe": again}
            deciding, other = differences(old, new)
    for note in other:
        log.warning("%s: %s since it was recorded (not what decides; going on)", what, note)
    if not deciding:
        return new
    message = f"{what}: {'; '.join(deciding)}"
    if mode == "strict":
        raise ModelChanged(f"{message}. {way_out}, or --fingerprint warn to go on anyway")
    log.warning("%s (--fingerprint warn: going on)", message)
    return new


class ModelChanged(UserError):
    """A resumed run, judging pass or suite cell found another model behind its spec."""


__all__ = [
    "ENV",
    "MODES",
    "Mode",
    "ModelChanged",
    "check_unchanged",
    "describe",
    "differences",
    "portable_spec",
    "resolve_mode",
    "same_model",
    "spec_without_urls",
    "take",
]
