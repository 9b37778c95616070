"""Model spec strings, as typed on the command line.

    llamacpp:smollm2-135m-instruct            an embedded model shipped in a PyPI package
    llamacpp:/models/x.gguf                   any GGUF file (chat template used if it has one)
    openai:http://127.0.0.1:8080/v1@NAME      chat completions on an OpenAI-compatible server
    openai-completions:URL@NAME               raw completions (base models, log-likelihoods)

Parsing is a plain ``match`` on the prefix: the backends are a closed, typed set, and each
factory imports its heavy dependencies only when called.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.errors import UserError
from clinieval.models.base import Model

EXAMPLES = (
    "llamacpp:smollm2-135m-instruct, llamacpp:/path/model.gguf, openai:http://127.0.0.1:8080/v1@model-name"
)


@dataclass(frozen=True, slots=True)
class BackendOptions:
    """Settings that apply to whichever backend the spec names."""

    concurrency: int | None = None
    timeout_s: float = 120.0
    max_retries: int = 4
    n_ctx: int = 4096
    allow_hosts: Sequence[str] = ()
    chat: bool | None = None

    @classmethod
    def from_cli(
        cls,
        n_ctx: int,
        timeout: float,
        retries: int,
        concurrency: int | None,
        allow_host: Sequence[str] | None,
    ) -> BackendOptions:
        """The options every command that opens a model spells the same way on the command line."""
        return cls(
            concurrency=concurrency,
            timeout_s=timeout,
            max_retries=retries,
            n_ctx=n_ctx,
            allow_hosts=tuple(allow_host or ()),
        )


def _split_url_model(rest: str, spec: str) -> tuple[str, str]:
    url, sep, model = rest.rpartition("@")
    if not sep or not url or not model:
        raise UserError(f"model spec {spec!r}: expected URL@model-name, e.g. {EXAMPLES}")
    return url, model


def parse_model_spec(spec: str, options: BackendOptions | None = None) -> Model:
    """Build the model a spec string names; raise UserError on anything malformed."""
    opts = options or BackendOptions()
    prefix, sep, rest = spec.partition(":")
    if not sep or not rest:
        raise UserError(f"model spec {spec!r}: expected BACKEND:TARGET, e.g. {EXAMPLES}")
    match prefix:
        case "llamacpp":
            return _llamacpp(rest, opts)
        case "openai" | "openai-chat" | "openai-completions":
            from clinieval.models.openai_http import OpenAIModel, RetryPolicy

            url, model = _split_url_model(rest, spec)
            return OpenAIModel(
                url,
                model,
                api="completions" if prefix == "openai-completions" else "chat",
                max_concurrency=opts.concurrency or 16,
                timeout_s=opts.timeout_s,
                retry=RetryPolicy(max_retries=opts.max_retries),
                api_key=os.environ.get("CLINIEVAL_API_KEY"),
                allow_hosts=opts.allow_hosts,
            )
        case _:
            raise UserError(
                f"model spec {spec!r}: unknown backend {prefix!r}; use llamacpp, openai or "
                f"openai-completions, e.g. {EXAMPLES}"
            )


def _llamacpp(target: str, opts: BackendOptions) -> Model:
    from clinieval.models.catalog import find_embedded
    from clinieval.models.llamacpp import LlamaCppModel

    looks_like_path = target.endswith(".gguf") or os.sep in target
    if looks_like_path:
        try:
            path = Path(target).expanduser()
        except RuntimeError:  # "~name/..." for a user this system does not know
            spec = f"llamacpp:{target}"
            raise UserError(f"model spec {spec!r}: cannot expand {target.split(os.sep)[0]!r}") from None
        return LlamaCppModel(path, chat=opts.chat, n_ctx=opts.n_ctx)
    entry = find_embedded(target)
    chat = entry.chat if opts.chat is None else opts.chat
    return LlamaCppModel(entry.locate(), name=entry.name, chat=chat, n_ctx=opts.n_ctx)


def model_short_name(model_spec: str) -> str:
    """The model part of a spec without backend or folders (``llamacpp:/m/x.gguf`` -> ``x.gguf``)."""
    return model_spec.split(":", 1)[-1].rsplit("/", 1)[-1]


def arm_dir_name(model_spec: str, variant: str) -> str:
    """A run-directory name for a model under one variant (a strategy, an answer format)."""
    from clinieval.fsutil import slug

    return f"{slug(model_short_name(model_spec))}-{variant}"
