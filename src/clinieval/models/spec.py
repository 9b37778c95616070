"""Model spec strings, as typed on the command line.

    llamacpp:smollm2-135m-instruct            an embedded model shipped in a PyPI package
    llamacpp:/models/x.gguf                   any GGUF file (chat template used if it has one)
    openai:http://127.0.0.1:8080/v1@NAME      chat completions on an OpenAI-compatible server
    openai-completions:URL@NAME               raw completions (base models, log-likelihoods)
    openai:URL1,URL2@NAME                     one model served by several servers (a pool)
    openai:/path/endpoints.yaml               a pool listed in a file (model name inside it)

Parsing is a plain ``match`` on the prefix: the backends are a closed, typed set, and each
factory imports its heavy dependencies only when called. One URL builds a plain OpenAIModel, as it
always has; a comma list or an endpoints file builds an EndpointPool (see models/pool.py and
docs/endpoints.md). A pool's identity leaves the URLs out, so cached replies stay valid as servers
come and go; a resumed run also needs the same spec string, which an endpoints file keeps.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypedDict

from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.privacy import check_endpoint

if TYPE_CHECKING:
    from clinieval.models.http1 import ConnectOptions
    from clinieval.models.openai_http import RetryPolicy
    from clinieval.models.pool import EndpointConfig, PoolApi
    from clinieval.models.ray_model import RayChoice
    from clinieval.models.server import ServerKind

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
    server_kind: ServerKind | None = None
    """What an HTTP server is, when the user says so (``--server-kind``); None: ask the server."""
    ca_bundle: str | None = None
    """A PEM file of CA certificates trusted for https endpoints besides the system's
    (``--ca-bundle``; ``SSL_CERT_FILE`` replaces the system's instead, as OpenSSL reads it)."""
    use_proxy: bool = True
    """Whether ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` apply to allowlisted hosts
    (``--no-proxy``: never); loopback is never proxied either way."""
    fingerprint: str | None = None
    """``--fingerprint``: strict, warn or off; None: ``CLINIEVAL_FINGERPRINT``, else strict
    (models/fingerprint.py)."""
    executor: RayChoice | None = None
    """``--executor ray``: requests are answered on Ray actors that build the spec on their own
    nodes (models/ray_model.py); None: in this process. The actors get these options without it."""

    @classmethod
    def from_cli(
        cls,
        n_ctx: int,
        timeout: float,
        retries: int,
        concurrency: int | None,
        allow_host: Sequence[str] | None,
        server_kind: str | None = None,
        *,
        ca_bundle: Path | None = None,
        no_proxy: bool = False,
        fingerprint: str | None = None,
    ) -> BackendOptions:
        """The options every command that opens a model spells the same way on the command line."""
        from clinieval.errors import one_of
        from clinieval.models.fingerprint import resolve_mode
        from clinieval.models.http1 import check_ca_bundle
        from clinieval.models.server import SERVER_KINDS

        return cls(
            concurrency=concurrency,
            timeout_s=timeout,
            max_retries=retries,
            n_ctx=n_ctx,
            allow_hosts=tuple(allow_host or ()),
            server_kind=None if server_kind is None else one_of(server_kind, SERVER_KINDS, "--server-kind"),
            ca_bundle=None if ca_bundle is None else check_ca_bundle(ca_bundle),
            use_proxy=not no_proxy,
            fingerprint=None if fingerprint is None else resolve_mode(fingerprint),
        )

    def connect_options(self) -> ConnectOptions:
        """How an HTTP backend opens its connections: the CA bundle and the proxy choice."""
        from clinieval.models.http1 import ConnectOptions

        return ConnectOptions(ca_bundle=self.ca_bundle, use_env_proxy=self.use_proxy)


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
    if opts.executor is not None:
        return _on_ray(spec, opts)
    match prefix:
        case "llamacpp":
            return _llamacpp(rest, opts)
        case "openai" | "openai-chat" | "openai-completions":
            return _openai(prefix, rest, spec, opts)
        case _:
            raise UserError(
                f"model spec {spec!r}: unknown backend {prefix!r}; use llamacpp, openai or "
                f"openai-completions, e.g. {EXAMPLES}"
            )


def _on_ray(spec: str, opts: BackendOptions) -> Model:
    """The spec answered on Ray actors; it is parsed here first (a Ray node would refuse a
    malformed spec only after Ray started), and the actors build it again on their nodes."""
    import functools

    from clinieval.models.ray_model import RayModel

    assert opts.executor is not None
    local = dataclasses.replace(opts, executor=None)  # the actors build the plain model
    if not spec.startswith("llamacpp:"):  # an embedded model's file need only be on the nodes
        parse_model_spec(spec, local)
    return RayModel(model_short_name(spec), functools.partial(parse_model_spec, spec, local), opts.executor)


def _openai(prefix: str, rest: str, spec: str, opts: BackendOptions) -> Model:
    """One server, a comma list of servers, or an endpoints file."""
    from clinieval.models.openai_http import OpenAIModel
    from clinieval.models.pool import is_endpoints_file

    if is_endpoints_file(rest):
        return _pool_from_file(prefix, rest, spec, opts)
    url, model = _split_url_model(rest, spec)
    if is_endpoints_file(url):
        raise UserError(
            f"model spec {spec!r}: the model name goes in the endpoints file (model: {model}); "
            f"write {prefix}:{url}"
        )
    if "," in url:
        return _pool_from_list(prefix, url, model, spec, opts)
    return OpenAIModel(
        url,
        model,
        api="completions" if prefix == "openai-completions" else "chat",
        max_concurrency=opts.concurrency or 16,
        **_http_settings(opts),
    )


class _HttpSettings(TypedDict):
    """What a single server and a pool of servers take alike from the options."""

    timeout_s: float
    retry: RetryPolicy
    api_key: str | None
    allow_hosts: Sequence[str]
    server_kind: ServerKind | None
    connect: ConnectOptions


def _http_settings(opts: BackendOptions) -> _HttpSettings:
    from clinieval.models.openai_http import RetryPolicy

    return _HttpSettings(
        timeout_s=opts.timeout_s,
        retry=RetryPolicy(max_retries=opts.max_retries),
        api_key=os.environ.get("CLINIEVAL_API_KEY"),
        allow_hosts=opts.allow_hosts,
        server_kind=opts.server_kind,
        connect=opts.connect_options(),
    )


def _pool_from_list(prefix: str, urls: str, model: str, spec: str, opts: BackendOptions) -> Model:
    from clinieval.models.pool import EndpointConfig

    listed = [u.strip() for u in urls.split(",")]
    if not all(listed):
        raise UserError(f"model spec {spec!r}: an empty URL in the comma-separated list")
    seen: set[str] = set()
    for url in listed:
        if url.rstrip("/") in seen:
            raise UserError(f"model spec {spec!r}: {url} is listed twice")
        seen.add(url.rstrip("/"))
        try:  # here, so the error names the spec as well as the URL at fault
            check_endpoint(url, opts.allow_hosts)
        except UserError as e:
            raise UserError(f"model spec {spec!r}: {e}") from None
    return _pool(model, [EndpointConfig(u) for u in listed], _prefix_api(prefix) or "chat", opts)


def _prefix_api(prefix: str) -> PoolApi | None:
    """The API a prefix insists on; None for plain ``openai:``, which lets an endpoints file say."""
    match prefix:
        case "openai-chat":
            return "chat"
        case "openai-completions":
            return "completions"
    return None


def _pool_from_file(prefix: str, target: str, spec: str, opts: BackendOptions) -> Model:
    from clinieval.models.pool import read_endpoints_file

    try:
        path = Path(target).expanduser()
    except RuntimeError:  # "~name/..." for a user this system does not know
        raise UserError(f"model spec {spec!r}: cannot expand {target.split(os.sep)[0]!r}") from None
    if not path.exists():
        raise UserError(f"model spec {spec!r}: no endpoints file at {path}")
    config = read_endpoints_file(path, opts.allow_hosts)
    wanted = _prefix_api(prefix)
    if wanted is not None and config.api is not None and config.api != wanted:
        raise UserError(
            f"model spec {spec!r}: {path} says api: {config.api}, but {prefix}: asks for {wanted}; "
            f"write openai:{target} to let the file decide"
        )
    return _pool(config.model, config.endpoints, wanted or config.api or "chat", opts)


def _pool(model: str, endpoints: Sequence[EndpointConfig], api: PoolApi, opts: BackendOptions) -> Model:
    from clinieval.models.pool import EndpointPool

    return EndpointPool(
        model,
        endpoints,
        api=api,
        default_concurrency=opts.concurrency or 16,
        **_http_settings(opts),
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
    """The model a spec names, as a reader knows it: for arm folders and table labels, which must
    not be named after a URL's path (``openai:http://h:8080/v1@smol`` was once ``v1@smol``).

    ``openai:URL@NAME`` and ``openai:URL1,URL2@NAME`` give NAME, ``openai:FILE.yaml`` the model the
    endpoints file names (its stem when the file cannot be read now), ``llamacpp:/m/x.gguf`` the
    file's stem ``x``, ``llamacpp:NAME`` the embedded model's name. Only the last ``/`` part of a
    name is kept (``meta-llama/Llama-3.1-8B`` gives ``Llama-3.1-8B``).
    """
    prefix, _, target = model_spec.partition(":")
    name = target or model_spec
    if prefix.startswith("openai"):
        name = _openai_model_name(target) or name
    elif prefix == "llamacpp" and target.endswith(".gguf"):
        name = target[: -len(".gguf")]
    return name.rstrip("/").rsplit("/", 1)[-1] or model_spec


def _openai_model_name(target: str) -> str | None:
    """NAME of ``URL@NAME``, or the model an endpoints file names; None when there is neither."""
    from clinieval.models.pool import is_endpoints_file

    if is_endpoints_file(target):
        path = Path(target)
        return _endpoints_file_model(path) or path.stem
    _, sep, name = target.rpartition("@")
    return name if sep else None


def _endpoints_file_model(path: Path) -> str | None:
    """The ``model:`` of an endpoints file, read leniently: a name is wanted here, not a check
    (running the spec checks the file; a report may be made where the file no longer is)."""
    try:
        import yaml
    except ImportError:
        return None
    try:
        data = yaml.safe_load(path.expanduser().read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, RuntimeError, yaml.YAMLError):
        return None
    model = data.get("model") if isinstance(data, dict) else None
    return model.strip() if isinstance(model, str) and model.strip() else None


def arm_dir_name(model_spec: str, variant: str) -> str:
    """A run-directory name for a model under one variant (a strategy, an answer format)."""
    from clinieval.fsutil import slug

    return f"{slug(model_short_name(model_spec))}-{variant}"
