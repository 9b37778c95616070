"""A small HTTP/1.1 client for the OpenAI-compatible backend: keep-alive connections, one request
at a time on each, nothing else.

Why not a general client: against a server that answers at once, aiohttp spent ~95 µs of CPU per
request (httpx ~2 ms) on machinery this backend never uses (cookies, redirects, proxies,
streaming, tracing hooks); this one spends ~30 µs, and a client that must keep a serving cluster
busy from one Python process is bound by exactly that. What it does support is what servers
answer with: ``Content-Length`` bodies, ``Transfer-Encoding: chunked``, bodies that end when the
connection closes (HTTP/1.0 style), ``Connection: close``, and TLS for an allowlisted host.

What it promises the caller: :meth:`Http1Client.request` returns a whole :class:`Response` or
raises :class:`TransportError` (could not connect, connection lost or garbled mid-answer) or
``TimeoutError`` (no whole answer within the timeout). A connection is reused only after a
complete answer that allows it; one that fails, times out or is cancelled is closed, never put
back. A request sent on a reused connection that the server had already closed (an idle
keep-alive timeout) is sent again once on a fresh connection, as browsers do: the server never
saw it. No proxy is ever used, whatever the environment says.
"""

from __future__ import annotations

import asyncio
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

MAX_HEAD = 64 * 1024
"""Longest status line and headers accepted: a server sending more is not an API server."""


class TransportError(Exception):
    """The exchange failed below HTTP: refused, reset, closed early, or not HTTP at all."""


class _Stale(TransportError):
    """The connection was closed before any byte of the answer came back."""


@dataclass(frozen=True, slots=True)
class ConnectOptions:
    """How connections are opened: which CAs to trust, and whether the environment's proxies apply."""

    ca_bundle: str | None = None
    """A PEM file of CA certificates trusted besides the system's (``--ca-bundle``)."""
    use_env_proxy: bool = True
    """Read ``HTTPS_PROXY``/``HTTP_PROXY``/``NO_PROXY`` (``--no-proxy``: False); loopback never."""


def check_ca_bundle(path: Path) -> str:
    """``path`` as a CA bundle every TLS connection can load, or one UserError naming the file."""
    from clinieval.errors import UserError

    if not path.is_file():
        raise UserError(f"--ca-bundle {path}: no such file; expected a PEM file of CA certificates")
    try:
        ssl.create_default_context().load_verify_locations(cafile=str(path))
    except (ssl.SSLError, OSError, ValueError) as e:
        raise UserError(
            f"--ca-bundle {path}: cannot be read as PEM CA certificates ({e}); expected a file of "
            "-----BEGIN CERTIFICATE----- blocks"
        ) from None
    return str(path.resolve())


@dataclass(frozen=True, slots=True)
class Response:
    status: int
    headers: dict[str, str]
    """Lower-cased names; repeated headers joined with ", "."""
    body: bytes


@dataclass(frozen=True, slots=True)
class _Origin:
    scheme: str
    host: str
    port: int

    @property
    def host_header(self) -> str:
        default = 443 if self.scheme == "https" else 80
        name = f"[{self.host}]" if ":" in self.host else self.host
        return name if self.port == default else f"{name}:{self.port}"


def split_url(url: str) -> tuple[_Origin, str]:
    """The origin and request target of an http(s) URL; ValueError if it is not one (a bad port)."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Origin(parts.scheme, parts.hostname, port), target


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the parser of the answer it is waiting for."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.closed = False
        self.used = 0
        self._buf = bytearray()
        self._waiter: asyncio.Future[Response] | None = None
        self._head: tuple[int, dict[str, str]] | None = None
        self._mode = ""  # "length", "chunked" or "eof" once the head is read
        self._length = 0
        self._body = bytearray()
        self._reusable = False
        self._expect_body = True

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            self._fail(TransportError("the server sent data nobody asked for"))
            return
        self._buf += data
        try:
            self._advance()
        except TransportError as e:
            self._fail(e)

    def eof_received(self) -> bool | None:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._head is not None and self._mode == "eof":
            self._finish(bytes(self._body) + bytes(self._buf))
            return
        if self._head is None and not self._buf:
            waiter.set_exception(_Stale("the server closed the connection before answering"))
        else:
            reason = f" ({exc})" if exc else ""
            waiter.set_exception(TransportError(f"the connection closed in the middle of the answer{reason}"))

    # --- one exchange --------------------------------------------------------------------------

    def send(self, data: bytes, *, expect_body: bool) -> asyncio.Future[Response]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head, self._mode, self._body, self._buf = None, "", bytearray(), bytearray()
        self._expect_body = expect_body
        self.used += 1
        self.transport.write(data)
        return self._waiter

    @property
    def reusable(self) -> bool:
        return self._reusable and not self.closed

    def close(self) -> None:
        self.closed = True
        if self.transport is not None:
            self.transport.close()

    def _fail(self, error: TransportError) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(error)
        self.close()

    def _advance(self) -> None:
        if self._head is None and not self._read_head():
            return
        if self._mode == "length":
            if len(self._buf) >= self._length:
                if len(self._buf) > self._length:
                    raise TransportError("the server sent more than its Content-Length")
                self._finish(bytes(self._buf))
        elif self._mode == "chunked":
            self._read_chunks()

    def _read_head(self) -> bool:
        end = self._buf.find(b"\r\n\r\n")
        if end < 0:
            if len(self._buf) > MAX_HEAD:
                raise TransportError("the answer's headers are too long")
            return False
        lines = bytes(self._buf[:end]).decode("latin-1").split("\r\n")
        del self._buf[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise TransportError(f"not an HTTP answer: {lines[0][:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # an interim answer (none is asked for): wait for the real one
            return self._read_head() if self._buf else False
        headers: dict[str, str] = {}
        for line in lines[1:]:
            name, sep, value = line.partition(":")
            if not sep:
                raise TransportError(f"a malformed header line: {line[:80]!r}")
            key, value = name.strip().lower(), value.strip()
            headers[key] = f"{headers[key]}, {value}" if key in headers else value
        self._head = (status, headers)
        self._choose_mode(version, status, headers)
        return True

    def _choose_mode(self, version: str, status: int, headers: dict[str, str]) -> None:
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        if not self._expect_body or status in {204, 304}:
            self._mode, self._reusable = "length", keep
            self._length = 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode, self._reusable = "chunked", keep
        elif "content-length" in headers:
            try:
                self._length = int(headers["content-length"])
            except ValueError:
                raise TransportError(f"a bad Content-Length: {headers['content-length'][:40]!r}") from None
            self._mode, self._reusable = "length", keep
        else:
            self._mode, self._reusable = "eof", False

    def _read_chunks(self) -> None:
        while True:
            line_end = self._buf.find(b"\r\n")
            if line_end < 0:
                return
            size_text = bytes(self._buf[:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise TransportError(f"a bad chunk size: {size_text[:40]!r}") from None
            if size == 0:  # the last chunk; then optional trailer lines and an empty line
                rest = self._buf[line_end + 2 :]
                if rest.startswith(b"\r\n") or b"\r\n\r\n" in rest:
                    self._finish(bytes(self._body))
                return
            start, stop = line_end + 2, line_end + 2 + size
            if len(self._buf) < stop + 2:
                return
            self._body += self._buf[start:stop]
            del self._buf[: stop + 2]

    def _finish(self, body: bytes) -> None:
        assert self._head is not None and self._waiter is not None
        status, headers = self._head
        self._head = None
        if not self._waiter.done():
            self._waiter.set_result(Response(status, headers, body))


class Http1Client:
    """Keep-alive connections to one origin (scheme, host, port), one request at a time on each.

    ``max_idle`` connections are kept open between requests; more may be open at once if more
    requests are (the caller bounds that: the backend's own in-flight limit)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout_s: float,
        connect_timeout_s: float,
        headers: dict[str, str],
        max_idle: int,
        connect: ConnectOptions | None = None,
    ) -> None:
        self._origin, _ = split_url(base_url)
        self._options = connect or ConnectOptions()
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle
        fixed = {"Host": self._origin.host_header, **headers}
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._idle: list[_Connection] = []
        self._targets: dict[str, str] = {}
        https = self._origin.scheme == "https"
        self._ssl: ssl.SSLContext | None = ssl.create_default_context() if https else None

    async def request(
        self, method: str, url: str, body: bytes | None = None, *, timeout_s: float | None = None
    ) -> Response:
        """One exchange with ``url`` (on this client's origin); see the module docstring."""
        data = self._message(method, self._target(url), body)
        async with asyncio.timeout(timeout_s or self.timeout_s):
            conn = self._idle_connection() or await self._connect()
            try:
                response = await conn.send(data, expect_body=method != "HEAD")
            except _Stale:
                if conn.used == 1:  # a fresh connection: the server really hung up on us
                    conn.close()
                    raise
                conn.close()
                conn = await self._connect()
                response = await self._exchange_once(conn, data, method)
            except BaseException:
                conn.close()  # failed, timed out or cancelled: its state is unknown
                raise
            self._release(conn)
            return response

    def _idle_connection(self) -> _Connection | None:
        """The most recently used idle connection still open (the server may have closed some)."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    async def _exchange_once(self, conn: _Connection, data: bytes, method: str) -> Response:
        try:
            return await conn.send(data, expect_body=method != "HEAD")
        except BaseException:
            conn.close()
            raise

    def _target(self, url: str) -> str:
        target = self._targets.get(url)
        if target is None:
            origin, target = split_url(url)
            if origin != self._origin:
                raise ValueError(f"{url} is not on {self._origin.scheme}://{self._origin.host_header}")
            self._targets[url] = target
        return target

    def _message(self, method: str, target: str, body: bytes | None) -> bytes:
        length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._fixed + length + b"\r\n"
        return head if body is None else head + body

    async def _connect(self) -> _Connection:
        loop = asyncio.get_running_loop()
        o = self._origin
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                _, conn = await loop.create_connection(
                    _Connection, o.host, o.port, ssl=self._ssl, server_hostname=o.host if self._ssl else None
                )
        except OSError as e:  # refused, unreachable, name not found, TLS refused
            raise TransportError(f"cannot connect to {o.host_header}: {e.strerror or e}") from None
        return conn

    def _release(self, conn: _Connection) -> None:
        if conn.reusable and len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
