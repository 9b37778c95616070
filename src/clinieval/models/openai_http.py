"""OpenAI-compatible HTTP backend (vLLM, llama.cpp server, TGI, Ollama, Azure-style gateways).

Why it looks the way it does:
- async with a bounded number of requests in flight, so one process keeps a batching server busy
  without flooding it;
- retries with exponential backoff (honouring ``Retry-After``) on 429, 5xx and dropped
  connections, because long clinical runs meet all of them;
- a provider's content-filter refusal is its own error kind and is never retried: MedAlign lost
  44 of 303 answers to one and reported results with and without them;
- a small keep-alive HTTP/1.1 client (models/http1.py) and orjson underneath: against a server
  that answers at once, httpx spent ~2 ms of CPU per request and aiohttp ~95 µs, this ~30 µs; a
  serving cluster answers thousands of requests a second, and the client must not be what limits
  it. Connections belong to the running event loop (a model may outlive one ``asyncio.run``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import logging
import random
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

import orjson

from clinieval.errors import UserError
from clinieval.models.base import render_plain, split_continuation
from clinieval.models.concurrency import AdaptiveLimit
from clinieval.models.http1 import (
    ConnectError,
    ConnectOptions,
    CutShort,
    Http1Client,
    ProtocolError,
    Response,
    TransportError,
    split_url,
)
from clinieval.models.http_diagnosis import (
    MAX_REDIRECTS,
    REDIRECTS,
    NotJson,
    azure_without_api_version,
    html_title,
    location,
    not_json,
    proxy_refusal,
    read_json,
    redirected,
    same_origin,
)
from clinieval.models.http_proxy import check_proxy, proxy_for
from clinieval.models.server import ServerInfo, ServerKind, detect_server, echo_probe
from clinieval.privacy import check_endpoint
from clinieval.types import (
    JSON,
    ErrorKind,
    GenerationConfig,
    LoglikOutput,
    Message,
    ModelOutput,
    TokenLogprob,
)

log = logging.getLogger(__name__)

Api = Literal["chat", "completions"]

_FILTER_MARKERS = ("content_filter", "content management policy", "responsibleaipolicyviolation")
_CONTEXT_MARKERS = ("context_length_exceeded", "maximum context length", "exceed context window")


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """How hard to try before recording a transient failure as the sample's outcome."""

    max_retries: int = 4
    base_delay_s: float = 0.5
    max_delay_s: float = 20.0

    def delay(self, attempt: int, retry_after: str | None) -> float:
        if retry_after is not None:
            try:
                return min(float(retry_after), self.max_delay_s)
            except ValueError:
                pass
        backoff = self.base_delay_s * (2**attempt)
        return float(min(backoff, self.max_delay_s) * (0.5 + random.random() / 2))


class _Failure(Exception):
    """One failed attempt, classified."""

    def __init__(self, kind: ErrorKind, message: str, retry_after: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.retry_after = retry_after


def classify_http_error(status: int, body: str) -> ErrorKind:
    """Map an HTTP error response to an :class:`ErrorKind`."""
    low = body.lower()
    if any(m in low for m in _FILTER_MARKERS):
        return ErrorKind.CONTENT_FILTER
    if any(m in low for m in _CONTEXT_MARKERS):
        return ErrorKind.CONTEXT_LENGTH
    if status == 429:
        return ErrorKind.RATE_LIMIT
    if status >= 500:
        return ErrorKind.SERVER_ERROR
    return ErrorKind.BAD_REQUEST


class OpenAIModel:
    """A model behind an OpenAI-compatible ``/v1`` endpoint."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api: Api = "chat",
        max_concurrency: int = 16,
        timeout_s: float = 120.0,
        retry: RetryPolicy | None = None,
        api_key: str | None = None,
        allow_hosts: Sequence[str] = (),
        server_kind: ServerKind | None = None,
        connect: ConnectOptions | None = None,
    ) -> None:
        check_endpoint(base_url, allow_hosts)
        try:
            split_url(base_url)
        except ValueError as e:  # e.g. a port out of range
            raise UserError(
                f"endpoint {base_url!r}: {e}; expected a URL such as http://127.0.0.1:8080/v1"
            ) from None
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api: Api = api
        self._max_concurrency = max(1, max_concurrency)
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        # Bearer for OpenAI-style servers, api-key for Azure-style gateways.
        auth = {"Authorization": f"Bearer {api_key}", "api-key": api_key} if api_key else {}
        self._headers = {"Content-Type": "application/json", **auth}
        self._http: Http1Client | None = None
        self._limit: AdaptiveLimit | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server_kind = server_kind
        self._connect = connect or ConnectOptions()
        self._allow_hosts = tuple(allow_hosts)
        origin, _ = split_url(base_url)
        self.proxy = proxy_for(origin.scheme, origin.host, origin.port, use_env=self._connect.use_env_proxy)
        """The proxy the environment names for this endpoint (None: direct), checked here so that a
        proxy nobody opened is refused before anything is written or sent."""
        check_proxy(self.proxy, self.base_url, self._allow_hosts)
        self._models_headers: dict[str, str] = {}
        self.server_info: ServerInfo | None = None
        """What :meth:`check` learnt about the server (None before it ran)."""

    @property
    def name(self) -> str:
        return self.model

    @property
    def identity(self) -> JSON:
        return {"backend": "openai", "api": self.api, "base_url": self.base_url, "model": self.model}

    @property
    def max_concurrency(self) -> int:
        return self._max_concurrency

    @property
    def proxy_record(self) -> JSON | None:
        """The proxy requests go through, as the run's manifest records it (None: direct)."""
        if self.proxy is None:
            return None
        return {"endpoint": self.base_url, **self.proxy.record(split_url(self.base_url)[0].scheme)}

    @property
    def context_length(self) -> int | None:
        """The server's context size per request, where it reports one (after :meth:`check`)."""
        return None if self.server_info is None else self.server_info.context_size

    def limit_concurrency(self, ceiling: int) -> None:
        """Keep at most ``ceiling`` requests in flight (the server's slots), from now on."""
        self._max_concurrency = max(1, ceiling)
        if self._limit is not None:
            self._limit.set_ceiling(self._max_concurrency)

    def concurrency_status(self) -> str:
        """Requests in flight and the current limit, for the progress line."""
        limit = self._limit
        return f"in flight 0/{self._max_concurrency}" if limit is None else limit.status()

    def concurrency_stats(self) -> JSON:
        """How the adaptive limit moved during the run (for summary.json)."""
        limit = self._limit
        if limit is None:
            return {"ceiling": self._max_concurrency, "final": self._max_concurrency}
        stats = limit.stats
        return {
            "ceiling": limit.ceiling,
            "final": limit.limit,
            "lowest": stats.lowest,
            "decreases": stats.decreases,
            "increases": stats.increases,
        }

    def render(self, messages: Sequence[Message]) -> str:
        return render_plain(messages)

    def _client(self) -> Http1Client:
        """The connections (and the in-flight limit) of the running event loop, made on first use."""
        loop = asyncio.get_running_loop()
        if self._http is None or self._loop is not loop:
            self._loop = loop
            self._limit = AdaptiveLimit(self._max_concurrency, slow_after_s=self.timeout_s / 2)
            # the client reads the proxy from the environment again: an http endpoint's proxy
            # reads the prompts, so it goes through the same guard as in __init__ (check_proxy)
            http = Http1Client(
                self.base_url,
                timeout_s=self.timeout_s,
                connect_timeout_s=min(self.timeout_s, 10.0),
                headers=self._headers,
                max_idle=self._max_concurrency,
                connect=self._connect,
            )
            check_proxy(http.proxy, self.base_url, self._allow_hosts)
            self._http = http
        return self._http

    async def _request(
        self, method: str, url: str, payload: JSON | None = None, timeout_s: float | None = None
    ) -> Response:
        """One HTTP exchange; transport errors are raised as is."""
        data = None if payload is None else orjson.dumps(payload)
        return await self._client().request(method, url, data, timeout_s=timeout_s)

    async def _get(self, url: str, timeout_s: float) -> tuple[Response, str]:
        """A GET that follows redirects on this origin (a moved route, a trailing slash), with the
        URL that answered; a redirect elsewhere is returned as is, for the caller to name (the key
        goes with every request, and only this origin was allowed)."""
        response = await self._client().request("GET", url, None, timeout_s=timeout_s)
        for _ in range(MAX_REDIRECTS):
            where = location(url, response.headers) if response.status in REDIRECTS else None
            if where is None or not same_origin(where, self.base_url):
                break
            url = where
            response = await self._client().request("GET", url, None, timeout_s=timeout_s)
        return response, url

    def _proxy_says(self, response: Response) -> str | None:
        """The proxy's own refusal (a 407, or tinyproxy's 401), named as the proxy's: never
        "set CLINIEVAL_API_KEY", which is the server's key."""
        return proxy_refusal(response.status, response.headers, self._client().proxy)

    def _url(self, path: str) -> str:
        """``base_url`` + ``path``, keeping a query string (Azure-style ``?api-version=``) last."""
        base, sep, query = self.base_url.partition("?")
        return f"{base.rstrip('/')}{path}{sep}{query}"

    async def check(self) -> None:
        """Fail before a run starts if the server is unreachable, refuses us, or lacks the model.

        Otherwise every sample would be recorded as the same failure.
        """
        asked = self._url("/models")
        try:
            response, answered = await self._get(asked, 10.0)
            status, body = response.status, response.body
            self._models_headers = dict(response.headers)
        except (TransportError, TimeoutError) as e:
            raise UserError(self._unreachable(e)) from None
        self._check_models_answer(response, answered)
        if answered != asked:  # a moved route: do POSTs land, or are they redirected too?
            await self._probe(f"GET /models was redirected to {answered}")
        elif status in {404, 405} or _refused(status):
            await self._probe(f"HTTP {status} on GET /models: {_quoted(body)}")
        served = _served_models(status, body)
        if served and self.model not in served:
            raise UserError(
                f"{self.base_url}: serves {', '.join(sorted(served))}, not {self.model!r}; "
                "use one of those after '@' in the model spec"
            )
        root = self.base_url.partition("?")[0].rstrip("/").removesuffix("/v1")
        self.server_info = await detect_server(
            self._fetch,
            root,
            self.model,
            body if status == 200 else None,
            self._models_headers,
            self._server_kind,
        )

    def _check_models_answer(self, response: Response, answered: str) -> None:
        """Stop on a ``/models`` answer that no run could get past: credentials (the proxy's or the
        server's), a redirect elsewhere, or an HTML page (a gateway's login page) in place of JSON."""
        status, headers = response.status, response.headers
        refusal = self._proxy_says(response)
        if refusal is not None:
            raise UserError(f"{self.base_url}: {refusal}")
        if status in {401, 403}:
            raise UserError(
                f"{self.base_url}: the server refused the credentials (HTTP {status}); set CLINIEVAL_API_KEY"
            )
        if status in REDIRECTS:
            raise UserError(
                f"{self.base_url}: {redirected('GET', '/models', status, location(answered, headers))}"
            )
        if status == 200 and html_title(response.body, headers) is not None:
            via = "" if answered == self._url("/models") else f" (redirected to {answered})"
            raise UserError(
                f"{self.base_url}: GET /models{via} answered 200 with {not_json(response.body, headers)}"
            )

    def _unreachable(self, error: TransportError | TimeoutError) -> str:
        """Why the first request got no usable answer, told apart: no connection, an answer that
        is not HTTP, or none in time (each calls for a different fix)."""
        if isinstance(error, CutShort):
            return (
                f"{self.base_url} answered, but {error}; did it restart, or is a proxy in between timing out?"
            )
        if isinstance(error, ProtocolError):
            return (
                f"{self.base_url} answered, but {error}; is that an HTTP API server (and not "
                "another service on that port, or a proxy in between that garbles it)?"
            )
        if isinstance(error, TimeoutError):
            waited = str(error) or "no answer in time"
            return f"{self.base_url}: {waited}; is the server overloaded, or the URL right?"
        hint = (
            error.hint if isinstance(error, ConnectError) else "is the server running and is the URL right?"
        )
        return f"cannot reach {self.base_url}: {error}; {hint}"

    async def _fetch(
        self, method: str, url: str, payload: JSON | None
    ) -> tuple[int, bytes, dict[str, str]] | None:
        """One short request for server detection; None when it gets no answer."""
        return await self.fetch(method, url, payload)

    async def fetch(
        self, method: str, url: str, payload: JSON | None, timeout_s: float = 10.0
    ) -> tuple[int, bytes, dict[str, str]] | None:
        """One request outside the run's retries and in-flight limit (server detection, the model
        fingerprint: models/fingerprint.py); None when it gets no answer."""
        try:
            if method == "GET":  # a route moved on the same origin is followed, as the check's
                response, _ = await self._get(url, timeout_s)
            else:
                response = await self._request(method, url, payload, timeout_s=timeout_s)
        except (TransportError, TimeoutError):
            return None
        return response.status, response.body, dict(response.headers)

    async def serves_loglikelihood(self) -> tuple[bool, str]:
        """Whether this server's echoed prompt log-probabilities can be trusted, and why not.

        A server of known kind is answered from what that kind does; an unknown one is asked once
        with a tiny request (see :func:`clinieval.models.server.echo_probe`).
        """
        info = self.server_info
        if info is None:
            return True, ""
        if info.prompt_logprobs == "unknown":
            probed = await echo_probe(self._fetch, self._url("/completions"), self.model)
            info = self.server_info = dataclasses.replace(info, probed=probed)
        return info.serves_loglikelihood, info.loglik_problem()

    async def _probe(self, models_answer: str) -> None:
        """``/models`` did not answer with a list: one tiny request tells a gateway without that
        route from a wrong URL, and a request the server refuses (a 4xx such as an Azure-style
        gateway's missing ``api-version``, or plain HTTP sent to a TLS port) from one it takes;
        a refusal stops the command here, with the server's own words, rather than failing
        every item the same way."""
        path = "/chat/completions" if self.api == "chat" else "/completions"
        payload: JSON = {"model": self.model, "max_tokens": 1}
        if self.api == "chat":
            payload["messages"] = [{"role": "user", "content": "ping"}]
        else:
            payload["prompt"] = "ping"
        url = self._url(path)
        try:
            response = await self._request("POST", url, payload, timeout_s=60.0)
        except (TransportError, TimeoutError):
            return  # reachable a moment ago; let the run's retries deal with it
        status, body = response.status, response.body
        if status in REDIRECTS:
            where = location(url, response.headers)
            raise UserError(f"{self.base_url}: {redirected('POST', path, status, where)}; {models_answer}")
        if status in {404, 405} and azure_without_api_version(self.base_url):
            raise UserError(
                f"{self.base_url}: HTTP {status} on POST {path} ({_quoted(body)}): an Azure OpenAI "
                "deployment URL needs ?api-version= (Azure answers 404 without it); add it, e.g. "
                f"'{self.base_url}?api-version=2024-06-01' (quoted for the shell)"
            )
        if status in {404, 405}:
            raise UserError(
                f"{self.base_url}: no OpenAI-compatible API there (HTTP {status} on {path}); "
                "the URL usually ends in /v1"
            )
        if _refused(status):
            raise UserError(
                f"{self.base_url}: the server refuses requests (HTTP {status} on POST {path}: "
                f"{_quoted(body)}; {models_answer}); check the URL (http or https, the path, an "
                "Azure-style gateway's ?api-version=) and CLINIEVAL_API_KEY"
            )

    async def _post(self, path: str, payload: JSON) -> JSON:
        """POST with retries; returns the JSON body or raises a classified _Failure."""
        url = self._url(path)
        self._client()
        limit = self._limit
        assert limit is not None
        attempt = 0
        while True:
            try:
                response = await self._limited(limit, url, payload)
                if response.status == 200:
                    return _answer_json(response)
                raise self._refusal(path, url, response)
            except TimeoutError as e:
                failure = _Failure(ErrorKind.TIMEOUT, str(e) or f"timed out after {self.timeout_s:g} s")
            except ProtocolError as e:  # it answered, badly: the server's (or a gateway's) fault
                failure = _Failure(ErrorKind.SERVER_ERROR, str(e))
            except TransportError as e:  # no connection, or it closed before answering
                failure = _Failure(ErrorKind.CONNECTION, str(e))
            except _Failure as f:
                failure = f
            if not failure.kind.transient or attempt >= self.retry.max_retries:
                raise failure
            delay = self.retry.delay(attempt, failure.retry_after)
            log.info("retrying %s after %s (attempt %d, %.2fs)", path, failure.kind, attempt + 1, delay)
            await asyncio.sleep(delay)
            attempt += 1

    def _refusal(self, path: str, url: str, response: Response) -> _Failure:
        """A POST's answer other than 200, classified: the proxy's refusal and a redirect (never
        followed: the prompt would go to another place) are named as such, not as the server's."""
        status, headers = response.status, response.headers
        said = self._proxy_says(response)
        if said is None and status in REDIRECTS:
            said = redirected("POST", path, status, location(url, headers))
        if said is not None:
            return _Failure(ErrorKind.BAD_REQUEST, said)
        text = response.body.decode("utf-8", "replace")
        return _Failure(
            classify_http_error(status, text), f"HTTP {status}: {text[:300]}", headers.get("retry-after")
        )

    async def _limited(self, limit: AdaptiveLimit, url: str, payload: JSON) -> Response:
        """One POST inside the adaptive limit, which learns from how it went: a timeout, 429 or
        503 lowers it (see models/concurrency.py)."""
        sent_in = await limit.acquire()
        start = time.perf_counter()
        overloaded = False
        try:
            response = await self._request("POST", url, payload)
            overloaded = response.status in {429, 503}
            return response
        except TimeoutError:
            overloaded = True
            raise
        finally:
            limit.release(sent_in, overloaded=overloaded, latency_s=time.perf_counter() - start)

    def _sampling(self, config: GenerationConfig) -> JSON:
        payload: JSON = {
            "model": self.model,
            "temperature": config.temperature,
            "max_tokens": config.max_tokens,
            "top_p": config.top_p,
        }
        if config.seed is not None:
            payload["seed"] = config.seed
        if config.top_k is not None:
            payload["top_k"] = config.top_k  # not OpenAI's, but vLLM's and llama.cpp's servers take it
        if config.stop:
            payload["stop"] = list(config.stop)
        return payload

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        payload = self._sampling(config)
        if self.api == "chat":
            path = "/chat/completions"
            payload["messages"] = [{"role": m.role, "content": m.content} for m in messages]
            if config.logprobs:
                payload["logprobs"] = True
        else:
            path = "/completions"
            payload["prompt"] = render_plain(messages)
            if config.logprobs:
                payload["logprobs"] = 1
        start = time.perf_counter()
        try:
            body = await self._post(path, payload)
        except _Failure as f:
            return ModelOutput.failure(f.kind, str(f), time.perf_counter() - start)
        return _parse_generation(body, self.api, time.perf_counter() - start)

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        """Score continuations with ``/completions`` echo + logprobs (what lm-eval does too)."""
        start = time.perf_counter()
        out = LoglikOutput()
        for cont in continuations:
            ctx, cont_text = split_continuation(prompt, cont)
            payload = {
                "model": self.model,
                "prompt": ctx + cont_text,
                "max_tokens": 1,
                "temperature": 0.0,
                "echo": True,
                "logprobs": 1,
            }
            try:
                body = await self._post("/completions", payload)
                total, n = _sum_echo_logprobs(body, len(ctx), len(ctx) + len(cont_text))
            except _Failure as f:
                return LoglikOutput(
                    latency_s=time.perf_counter() - start, error_kind=f.kind, error_message=str(f)
                )
            out.logliks.append(total)
            out.token_counts.append(n)
        out.latency_s = time.perf_counter() - start
        return out

    async def tokenize(self, text: str) -> list[int]:
        """Ask the server's tokenizer (llama.cpp server or vLLM ``/tokenize`` routes)."""
        root = self.base_url.removesuffix("/v1")
        attempts: list[tuple[str, JSON]] = [
            (f"{root}/extras/tokenize", {"input": text}),
            (f"{root}/tokenize", {"content": text, "model": self.model, "prompt": text}),
        ]
        for url, payload in attempts:
            try:
                response = await self._request("POST", url, payload)
                answer = read_json(response.body, response.headers) if response.status == 200 else None
            except (TransportError, TimeoutError, NotJson):
                continue
            tokens = answer.get("tokens") if isinstance(answer, dict) else None
            if isinstance(tokens, list):
                return [int(t) for t in tokens]
        raise UserError(
            f"{self.base_url}: the server offers no tokenize route; configure a local budget "
            "tokenizer instead"
        )

    async def count_tokens(self, text: str) -> int:
        return len(await self.tokenize(text))

    async def aclose(self) -> None:
        http, self._http = self._http, None
        if http is not None:
            http.close()


def _answer_json(response: Response) -> JSON:
    """A 200's JSON object, or a classified failure saying what came instead: an HTML page (a
    gateway's login page: asking again will not change it) or a body that is not JSON (the
    server's fault, perhaps passing)."""
    try:
        body = read_json(response.body, response.headers)
    except NotJson as e:
        html = html_title(response.body, response.headers) is not None
        kind = ErrorKind.BAD_REQUEST if html else ErrorKind.SERVER_ERROR
        raise _Failure(kind, f"server answered 200 with {e}") from None
    if not isinstance(body, dict):
        raise _Failure(ErrorKind.SERVER_ERROR, "server answered 200 with no JSON object")
    return body


def _refused(status: int) -> bool:
    """A 4xx that asking again will not change (not 404/405, which may only mean "no such route",
    nor 408/429, which mean "later")."""
    return 400 <= status < 500 and status not in {404, 405, 408, 429}


def _quoted(body: bytes, limit: int = 200) -> str:
    """The start of a server's error answer, on one line, for a message: its JSON ``message`` if
    it has one, else its text."""
    text = body.decode("utf-8", "replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    error = parsed.get("error") if isinstance(parsed, dict) else None
    message = error.get("message") if isinstance(error, dict) else error if isinstance(error, str) else None
    shown = " ".join((message if isinstance(message, str) else re.sub(r"<[^>]+>", " ", text)).split())
    return repr(shown[:limit]) if shown else "no message"


def _served_models(status: int, body: bytes) -> set[str]:
    """Model ids a ``/models`` answer lists; empty when it lists none or is not that shape."""
    if status != 200:
        return set()
    try:
        data = orjson.loads(body).get("data")
    except (orjson.JSONDecodeError, AttributeError):
        return set()
    if not isinstance(data, list):
        return set()
    return {str(m["id"]) for m in data if isinstance(m, dict) and "id" in m}


def _parse_generation(body: JSON, api: Api, latency: float) -> ModelOutput:
    try:
        choice = body["choices"][0]
    except (KeyError, IndexError, TypeError):
        return ModelOutput.failure(
            ErrorKind.SERVER_ERROR, f"unexpected response: {json.dumps(body)[:300]}", latency
        )
    finish = choice.get("finish_reason")
    usage = body.get("usage") or {}
    if api == "chat":
        content = (choice.get("message") or {}).get("content")
        logprobs = _chat_logprobs(choice.get("logprobs"))
    else:
        content = choice.get("text")
        logprobs = _completion_logprobs(choice.get("logprobs"))
    if finish == "content_filter":
        return ModelOutput.failure(
            ErrorKind.CONTENT_FILTER, "the provider's content filter withheld the answer", latency
        )
    if content is None:
        return ModelOutput.failure(
            ErrorKind.NO_CONTENT,
            f"the reply held no answer text (finish_reason {finish!r}); a reasoning model may have "
            "spent the whole budget thinking: raise --max-tokens",
            latency,
        )
    text = str(content)
    return ModelOutput(
        text=text,
        prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"),
        finish_reason=finish,
        latency_s=latency,
        logprobs=logprobs,
    )


def _chat_logprobs(lp: Any) -> list[TokenLogprob] | None:
    if not isinstance(lp, dict) or not isinstance(lp.get("content"), list):
        return None
    return [TokenLogprob(str(t["token"]), float(t["logprob"])) for t in lp["content"]]


def _completion_logprobs(lp: Any) -> list[TokenLogprob] | None:
    if not isinstance(lp, dict) or not isinstance(lp.get("tokens"), list):
        return None
    pairs = zip(lp["tokens"], lp.get("token_logprobs") or [], strict=False)
    return [TokenLogprob(str(t), float(p)) for t, p in pairs if p is not None]


def _sum_echo_logprobs(body: JSON, start: int, end: int) -> tuple[float, int]:
    """Sum the echoed logprobs of tokens whose text starts inside ``[start, end)``."""
    try:
        lp = body["choices"][0]["logprobs"]
        offsets, values = lp["text_offset"], lp["token_logprobs"]
    except (KeyError, IndexError, TypeError):
        raise _Failure(
            ErrorKind.BAD_REQUEST, "server did not echo prompt logprobs (needs echo+logprobs support)"
        ) from None
    total, n = 0.0, 0
    for off, val in zip(offsets, values, strict=False):
        if start <= off < end:
            if val is None:
                raise _Failure(ErrorKind.BAD_REQUEST, "server returned no logprob for a prompt token")
            total += float(val)
            n += 1
    return total, n
