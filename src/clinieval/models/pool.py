"""Several OpenAI-compatible servers that serve the same model, used as one model.

A site with a few GPUs runs one vLLM or llama.cpp server per GPU; a run should keep all of them
busy and survive one of them dying. Why it works the way it does:

- least in flight, relative to each server's own ``concurrency``: a server that answers faster
  frees its slots sooner and so gets more work, with no latency model to tune;
- failover here, not inside each server's client: every endpoint is an :class:`OpenAIModel` with
  no retries of its own, so a dead server fails at once and the pool re-sends the same request
  to another one; the pool spends the user's :class:`RetryPolicy` (attempts and backoff) across
  the whole pool, and each call still returns exactly one outcome;
- a server that failed (connection, timeout, 5xx) leaves the pool and is health-checked in the
  background (its ``check()``: ``GET /models``) until it answers, then rejoins; a 429 only backs
  the request off, since a busy server is not a broken one;
- the identity names the model and the API, never the URLs: the servers serve the same model, so
  adding or removing one keeps the request cache valid. A single :class:`OpenAIModel`'s identity
  does include its URL; the two therefore never share cache entries.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol, TypeVar, cast

from clinieval.errors import UserError
from clinieval.fsutil import read_user_text
from clinieval.models.http1 import ConnectOptions
from clinieval.models.openai_http import OpenAIModel, RetryPolicy
from clinieval.models.server import ServerInfo, ServerKind
from clinieval.privacy import check_endpoint
from clinieval.types import JSON, ErrorKind, GenerationConfig, LoglikOutput, Message, ModelOutput

log = logging.getLogger(__name__)

PoolApi = Literal["chat", "completions"]
DEFAULT_CONCURRENCY = 16
PROBE_INTERVAL_S = 2.0
ENDPOINT_FILE_SUFFIXES = (".yaml", ".yml")

_Out = TypeVar("_Out", ModelOutput, LoglikOutput)


@dataclass(frozen=True, slots=True)
class EndpointConfig:
    """One server of a pool, as the user listed it."""

    url: str
    concurrency: int | None = None
    """Requests this server may have in flight; None takes the pool's default."""


@dataclass(frozen=True, slots=True)
class PoolConfig:
    """What an endpoints file says: the model, optionally the API, and the servers."""

    model: str
    endpoints: tuple[EndpointConfig, ...]
    api: PoolApi | None = None


@dataclass(eq=False, slots=True)
class _Endpoint:
    """One server and what the pool knows about it right now."""

    url: str
    model: OpenAIModel
    concurrency: int
    in_flight: int = 0
    healthy: bool = True
    requests: int = 0
    failures: int = 0
    probe: asyncio.Task[None] | None = None

    @property
    def load(self) -> float:
        return self.in_flight / self.concurrency

    @property
    def free(self) -> bool:
        return self.healthy and self.in_flight < self.concurrency


class EndpointPool:
    """One model served by several OpenAI-compatible endpoints; implements the Model protocol."""

    def __init__(
        self,
        model: str,
        endpoints: Sequence[EndpointConfig],
        *,
        api: PoolApi = "chat",
        default_concurrency: int = DEFAULT_CONCURRENCY,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        api_key: str | None = None,
        allow_hosts: Sequence[str] = (),
        probe_interval_s: float = PROBE_INTERVAL_S,
        server_kind: ServerKind | None = None,
        connect: ConnectOptions | None = None,
    ) -> None:
        if not endpoints:
            raise ValueError("an endpoint pool needs at least one endpoint")
        for endpoint in endpoints:  # every URL passes the egress guard before any client exists
            check_endpoint(endpoint.url, allow_hosts)
        self.model = model
        self.api: PoolApi = api
        self.retry = retry or RetryPolicy()
        self.probe_interval_s = probe_interval_s
        self._failovers = 0
        self._server_kind = server_kind
        self._connect = connect
        self._changed = asyncio.Event()
        self._endpoints = [
            self._endpoint(e, default_concurrency, timeout_s, api_key, allow_hosts) for e in endpoints
        ]

    def _endpoint(
        self,
        config: EndpointConfig,
        default_concurrency: int,
        timeout_s: float,
        api_key: str | None,
        allow_hosts: Sequence[str],
    ) -> _Endpoint:
        concurrency = max(1, config.concurrency or default_concurrency)
        client = OpenAIModel(
            config.url,
            self.model,
            api=self.api,
            max_concurrency=concurrency,
            timeout_s=timeout_s,
            retry=RetryPolicy(max_retries=0),  # fail fast: the pool decides where to try again
            api_key=api_key,
            allow_hosts=allow_hosts,
            server_kind=self._server_kind,
            connect=self._connect,
        )
        return _Endpoint(url=config.url.rstrip("/"), model=client, concurrency=concurrency)

    # -- the Model protocol -------------------------------------------------------------------

    @property
    def name(self) -> str:
        return self.model

    @property
    def identity(self) -> JSON:
        return {"backend": "openai", "api": self.api, "model": self.model}

    @property
    def max_concurrency(self) -> int:
        return sum(e.concurrency for e in self._endpoints)

    def render(self, messages: Sequence[Message]) -> str:
        return self._endpoints[0].model.render(messages)

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        return await self._call(lambda m: m.generate(messages, config), ModelOutput.failure)

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        def failure(kind: ErrorKind, message: str) -> LoglikOutput:
            return LoglikOutput(error_kind=kind, error_message=message)

        return await self._call(lambda m: m.loglikelihood(prompt, continuations), failure)

    async def tokenize(self, text: str) -> list[int]:
        """The least busy healthy server's tokenizer; the next one if it cannot answer."""
        first: UserError | None = None
        for endpoint in self._by_preference():
            try:
                return await endpoint.model.tokenize(text)
            except UserError as e:
                first = first or e
        assert first is not None  # the pool has at least one endpoint
        raise first

    async def count_tokens(self, text: str) -> int:
        return len(await self.tokenize(text))

    async def check(self) -> None:
        """Fail only if no server can be used; a run goes ahead on the ones that can, and the
        others join as soon as a health check finds them answering."""
        results = await asyncio.gather(*(e.model.check() for e in self._endpoints), return_exceptions=True)
        problems: list[tuple[_Endpoint, str]] = []
        for endpoint, result in zip(self._endpoints, results, strict=True):
            if isinstance(result, UserError):
                problems.append((endpoint, str(result)))
            elif isinstance(result, BaseException):
                raise result
        if len(problems) == len(self._endpoints):
            raise _none_usable(problems)
        for endpoint, _ in problems:
            self._leave(endpoint)
        if problems:
            log.warning(
                "%d of %d endpoints cannot be used yet and join when a health check finds them answering: %s",
                len(problems),
                len(self._endpoints),
                " | ".join(reason for _, reason in problems),
            )

    @property
    def endpoint_models(self) -> list[OpenAIModel]:
        """The client of each endpoint, in the order listed (for what a run records of them)."""
        return [e.model for e in self._endpoints]

    @property
    def server_info(self) -> ServerInfo | None:
        """What the first usable server said about itself (the pool's servers serve one model)."""
        return next((e.model.server_info for e in self._endpoints if e.model.server_info is not None), None)

    def first_usable(self) -> OpenAIModel | None:
        """The first healthy server that answered :meth:`check` (the one a fingerprint asks:
        the pool's servers serve one model)."""
        return next((e.model for e in self._endpoints if e.healthy and e.model.server_info is not None), None)

    @property
    def context_length(self) -> int | None:
        """The smallest context any server reports: a prompt must fit wherever it is sent."""
        sizes = [e.model.context_length for e in self._endpoints if e.model.context_length is not None]
        return min(sizes) if sizes else None

    async def serves_loglikelihood(self) -> tuple[bool, str]:
        """True only if every server that answered can be trusted with log-likelihoods."""
        for endpoint in self._endpoints:
            if endpoint.model.server_info is None:
                continue
            ok, why = await endpoint.model.serves_loglikelihood()
            if not ok:
                return False, f"{endpoint.url}: {why}"
        return True, ""

    def limit_to_slots(self) -> None:
        """Each server's requests in flight no higher than the slots it reports."""
        for endpoint in self._endpoints:
            info = endpoint.model.server_info
            if info is not None and info.slots is not None and endpoint.concurrency > info.slots:
                endpoint.concurrency = info.slots
                endpoint.model.limit_concurrency(info.slots)

    def concurrency_status(self) -> str:
        return f"in flight {sum(e.in_flight for e in self._endpoints)}/{self.max_concurrency}"

    async def aclose(self) -> None:
        """Stop the health checks, close every server's connections, log the counters.

        Health is reset too: the checks belong to this event loop, so a pool used again on a later
        one starts with every server in, and the first failure there takes one out again."""
        probes = [e.probe for e in self._endpoints if e.probe is not None and not e.probe.done()]
        for probe in probes:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)
        await asyncio.gather(*(e.model.aclose() for e in self._endpoints))
        log.info("endpoint pool: %s", self.summary_line())
        for endpoint in self._endpoints:
            endpoint.healthy, endpoint.probe = True, None
        self._changed = asyncio.Event()

    # -- counters -------------------------------------------------------------------------------

    def stats(self) -> JSON:
        """Requests and transient failures per server, and how many requests were re-sent."""
        return {
            "endpoints": [
                {"url": e.url, "requests": e.requests, "failures": e.failures, "healthy": e.healthy}
                for e in self._endpoints
            ],
            "failovers": self._failovers,
        }

    def summary_line(self) -> str:
        """The counters on one line, for a run's log (URLs and counts only, never prompt text)."""
        parts = [f"{e.url} {e.requests} requests ({e.failures} failed)" for e in self._endpoints]
        return f"{'; '.join(parts)}; {self._failovers} re-sent after a failure"

    # -- choosing a server ----------------------------------------------------------------------

    async def _call(
        self, send: Callable[[OpenAIModel], Awaitable[_Out]], failure: Callable[[ErrorKind, str], _Out]
    ) -> _Out:
        """Send one request until it gets a lasting outcome or the retries are spent.

        Each try goes to a server this request has not failed on, if one has a free slot. When
        every server is down, a try waits one backoff for a health check to bring one back."""
        tried: set[int] = set()
        last: _Out | None = None
        attempt = 0
        while True:
            endpoint = await self._acquire(tried, self.retry.delay(attempt, None))
            kind: ErrorKind | None = None
            if endpoint is not None:
                out = await self._send(endpoint, send)
                if out.error_kind is None or not out.error_kind.transient:
                    return out
                last, kind = out, out.error_kind
                tried.add(id(endpoint))
            if attempt >= self.retry.max_retries:
                return last if last is not None else failure(ErrorKind.CONNECTION, self._all_down())
            if kind is ErrorKind.RATE_LIMIT:  # a busy server, not a broken one: back off, then ask
                await asyncio.sleep(self.retry.delay(attempt, None))
            if endpoint is not None:
                self._failovers += 1
            attempt += 1

    async def _acquire(self, tried: set[int], wait_s: float) -> _Endpoint | None:
        """Take a slot on the best server; wait for one to free up, or for up to ``wait_s`` for a
        server to come back when none is healthy (then None)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + wait_s
        while (endpoint := self._pick(tried)) is None:
            changed = self._changed
            if any(e.healthy for e in self._endpoints):
                await changed.wait()
                continue
            remaining = deadline - loop.time()
            if remaining <= 0:
                return None
            try:
                await asyncio.wait_for(changed.wait(), remaining)
            except TimeoutError:
                return None
        endpoint.in_flight += 1
        return endpoint

    def _pick(self, tried: set[int]) -> _Endpoint | None:
        """The healthy server with a free slot and the fewest requests in flight for its size,
        preferring one this request has not failed on; ties go to the first listed."""
        free = [e for e in self._endpoints if e.free]
        fresh = [e for e in free if id(e) not in tried] or free
        return min(fresh, key=lambda e: e.load, default=None)

    def _by_preference(self) -> list[_Endpoint]:
        """Every server, healthy and least busy first (for calls outside the slot accounting)."""
        return sorted(self._endpoints, key=lambda e: (not e.healthy, e.load))

    async def _send(self, endpoint: _Endpoint, send: Callable[[OpenAIModel], Awaitable[_Out]]) -> _Out:
        endpoint.requests += 1
        try:
            out = await send(endpoint.model)
        finally:
            endpoint.in_flight -= 1
            self._notify()
        if out.error_kind is not None and out.error_kind.transient:
            endpoint.failures += 1
            if out.error_kind is not ErrorKind.RATE_LIMIT and endpoint.healthy:
                log.warning(
                    "%s left the pool after a %s failure; its requests go to the other endpoints "
                    "until it answers a health check",
                    endpoint.url,
                    out.error_kind,
                )
                self._leave(endpoint)
        return out

    def _all_down(self) -> str:
        urls = ", ".join(e.url for e in self._endpoints)
        return f"no endpoint of the pool answered a health check in time ({urls})"

    # -- health ---------------------------------------------------------------------------------

    def _notify(self) -> None:
        """Wake every request waiting for a slot or a server (synchronous: safe in ``finally``)."""
        self._changed.set()
        self._changed = asyncio.Event()

    def _leave(self, endpoint: _Endpoint) -> None:
        endpoint.healthy = False
        if endpoint.probe is None or endpoint.probe.done():
            endpoint.probe = asyncio.get_running_loop().create_task(self._probe(endpoint))
        self._notify()

    async def _probe(self, endpoint: _Endpoint) -> None:
        """Health-check a server that left, at once and then every ``probe_interval_s``, until it
        answers; then it rejoins (said at the level its leaving was, so whoever saw one sees both)."""
        while not await self._answers(endpoint):
            await asyncio.sleep(self.probe_interval_s)
        endpoint.healthy = True
        log.warning("%s answers again and rejoins the pool", endpoint.url)
        self._notify()

    @staticmethod
    async def _answers(endpoint: _Endpoint) -> bool:
        try:
            await endpoint.model.check()
        except Exception as e:  # whatever the reason, it is not back yet; the next check asks again
            log.debug("health check of %s failed: %s", endpoint.url, type(e).__name__)
            return False
        return True


def _none_usable(problems: list[tuple[_Endpoint, str]]) -> UserError:
    if len(problems) == 1:
        return UserError(problems[0][1])
    reasons = " | ".join(reason for _, reason in problems)
    return UserError(f"none of the {len(problems)} endpoints can be used: {reasons}")


# -- the endpoints file -----------------------------------------------------------------------------

_FILE_FIELDS = ("model", "api", "endpoints")
_ENDPOINT_FIELDS = ("url", "concurrency")
_APIS: tuple[PoolApi, ...] = ("chat", "completions")
_EXAMPLE = "model: NAME and endpoints: a list of URLs or of {url: URL, concurrency: N}"


class _Node(Protocol):
    """The parts of a PyYAML node the reader uses (types-PyYAML types ``value`` loosely)."""

    id: str
    tag: str
    value: Any
    start_mark: Any


def is_endpoints_file(target: str) -> bool:
    """Whether a model spec's target names an endpoints file rather than URLs (a model served
    under a name ending in ``.yaml`` still works: ``URL@name.yaml`` holds a scheme)."""
    return target.lower().endswith(ENDPOINT_FILE_SUFFIXES) and "://" not in target


def read_endpoints_file(path: Path, allow_hosts: Sequence[str] = ()) -> PoolConfig:
    """Read and check an endpoints file; a mistake is one UserError naming the file, the line and
    what was expected there. Every URL passes the egress guard here, so its error has a line too."""
    root = _compose(path, read_user_text(path, "the endpoints file", missing="no such endpoints file"))
    fields = _mapping(path, root, _FILE_FIELDS, "the file")
    for name in ("model", "endpoints"):
        if name not in fields:
            raise UserError(f"{path}: no {name}: field; expected {_EXAMPLE}")
    api = fields.get("api")
    return PoolConfig(
        model=_text(path, fields["model"], "model", "the model name the servers serve"),
        endpoints=_endpoints(path, fields["endpoints"], allow_hosts),
        api=None if api is None else _api(path, api),
    )


def _compose(path: Path, text: str) -> _Node:
    """The YAML node tree: nodes keep their line numbers, which plain ``safe_load`` values lose."""
    try:
        import yaml
    except ImportError:  # a dependency; guard a trimmed install
        raise UserError(f"{path}: reading an endpoints file needs PyYAML (pip install pyyaml)") from None
    try:
        node = cast("_Node | None", yaml.compose(text, Loader=yaml.SafeLoader))
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        where = f":{mark.line + 1}" if mark is not None else ""
        what = "; ".join(str(part) for part in (e.context, e.problem) if part)
        raise UserError(f"{path}{where}: not valid YAML ({what})") from None
    except yaml.YAMLError as e:
        raise UserError(f"{path}: not valid YAML ({e})") from None
    if node is None:
        raise UserError(f"{path}: the file is empty; expected {_EXAMPLE}")
    return node


def _at(path: Path, node: _Node, message: str) -> UserError:
    return UserError(f"{path}:{node.start_mark.line + 1}: {message}")


def _mapping(path: Path, node: _Node, allowed: Sequence[str], what: str) -> dict[str, _Node]:
    """A mapping's fields by name; an unknown or repeated field is an error at its line."""
    if node.id != "mapping":
        raise _at(path, node, f"expected {what} to be a mapping of {', '.join(allowed)}")
    fields: dict[str, _Node] = {}
    lines: dict[str, int] = {}
    for key, value in node.value:
        name = str(key.value)
        if key.id != "scalar" or name not in allowed:
            raise _at(path, key, f"unknown field {name!r}; {what} takes {', '.join(allowed)}")
        if name in fields:
            raise _at(path, key, f"{name}: repeats line {lines[name]}")
        fields[name] = value
        lines[name] = key.start_mark.line + 1
    return fields


def _text(path: Path, node: _Node, field: str, expected: str) -> str:
    if node.id != "scalar" or node.tag.endswith(":null") or not str(node.value).strip():
        raise _at(path, node, f"{field}: expected {expected}")
    return str(node.value).strip()


def _api(path: Path, node: _Node) -> PoolApi:
    value = _text(path, node, "api", "chat or completions")
    for api in _APIS:
        if value == api:
            return api
    raise _at(path, node, f"api: expected chat or completions, not {value!r}")


def _endpoints(path: Path, node: _Node, allow_hosts: Sequence[str]) -> tuple[EndpointConfig, ...]:
    if node.id != "sequence" or not node.value:
        raise _at(path, node, "endpoints: expected a list of at least one URL or {url, concurrency}")
    out: list[EndpointConfig] = []
    seen: dict[str, int] = {}
    for item in node.value:
        endpoint = _endpoint(path, item)
        line = item.start_mark.line + 1
        key = endpoint.url.rstrip("/")
        if key in seen:
            raise _at(path, item, f"endpoint {endpoint.url} repeats line {seen[key]}")
        seen[key] = line
        try:
            check_endpoint(endpoint.url, allow_hosts)
        except UserError as e:
            raise _at(path, item, str(e)) from None
        out.append(endpoint)
    return tuple(out)


def _endpoint(path: Path, node: _Node) -> EndpointConfig:
    if node.id == "scalar":
        return EndpointConfig(_text(path, node, "endpoint", "a URL such as http://127.0.0.1:8080/v1"))
    fields = _mapping(path, node, _ENDPOINT_FIELDS, "an endpoint")
    if "url" not in fields:
        raise _at(path, node, "endpoint: no url: field; expected {url: URL, concurrency: N}")
    url = _text(path, fields["url"], "url", "a URL such as http://127.0.0.1:8080/v1")
    concurrency = fields.get("concurrency")
    return EndpointConfig(url, None if concurrency is None else _concurrency(path, concurrency))


def _concurrency(path: Path, node: _Node) -> int:
    value = str(node.value).strip() if node.id == "scalar" else ""
    if not (value.isascii() and value.isdigit()) or int(value) < 1:
        shown = value or node.id
        raise _at(path, node, f"concurrency: expected a whole number of requests of 1 or more, not {shown!r}")
    return int(value)
