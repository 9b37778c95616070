"""A small HTTP/1.1 client for the OpenAI-compatible backend: keep-alive connections, one request
at a time on each, nothing else.

Why not a general client: against a server that answers at once, aiohttp spends 2.8-3.2x the
CPU per request of this one (212 against 75 µs, bench/transport_cost.py) on machinery this
backend never uses (cookies, redirects, streaming, tracing hooks), and a client that must keep a
serving cluster busy from one Python process is bound by exactly that (docs/architecture.md,
"Talking to model servers"). What it does support is what servers, reverse proxies and gateways
answer with: ``Content-Length`` bodies,
``Transfer-Encoding: chunked``, bodies that end when the connection closes (HTTP/1.0 style),
``Connection: close``, gzip, deflate and brotli bodies (asked for with ``Accept-Encoding``), bare ``\\n``
line ends (read as browsers read them), TLS for an allowlisted host (the system's CAs, plus
``--ca-bundle``'s), and the HTTP proxy the environment names for a non-loopback host
(:mod:`.http_proxy`: CONNECT for https).

What it promises the caller: :meth:`Http1Client.request` returns a whole :class:`Response` or
raises one of five things, each with a message that names the server: :class:`ConnectError`
(no connection: refused, unresolvable, an untrusted certificate, a proxy that said no),
:class:`ProtocolError` (something answered, but not valid HTTP, or a service that greets first:
the message says what was wrong), :class:`NotAnswered` (the connection closed after the request,
before any answer), :class:`CutShort` (an answer began, then the connection closed) or
:class:`TransportTimeout` (no whole answer in time: the message says what was still awaited).
A connection is reused only after a complete answer that allows it; one that fails, times out
or is cancelled is closed, never put back. An idle connection whose close (a keep-alive timeout)
arrived before the next request is skipped, never written to.

A request whose bytes were all written is never sent again by this client, with one exception:
a GET or HEAD on a reused connection that closed before any byte of the answer. Why: when the
connection closes after the request and before the answer, the client cannot tell a keep-alive
timeout that crossed the request on the wire (the server never read it) from a server that read
it, began the work and then failed or reset (the issue-35 measurement: 61 POSTs for 60 items).
A POST carries patient text and costs the server a generation; sending it again is the run's
decision (its ``--retries``, logged and counted, with backoff), not a silent one down here, and
``--retries 0`` then means what it says: each item is sent at most once. RFC 9110 section 9.2.2
says the same of methods that are not idempotent. The caller gets :class:`NotAnswered`, which
says the request may have been received.
"""

from __future__ import annotations

import asyncio
import os
import socket
import ssl
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from clinieval.models.http_encoding import ACCEPT_ENCODING, UndecodableBody, decode_body
from clinieval.models.http_proxy import open_tunnel, proxy_for
from clinieval.models.http_wire import (
    BLANK_LINE,
    LINE_END,
    MAX_HEAD,
    ConnectError,
    CutShort,
    ProtocolError,
    TransportError,
    TransportTimeout,
    authority,
)

__all__ = [
    "ConnectError",
    "ConnectOptions",
    "CutShort",
    "Http1Client",
    "NotAnswered",
    "ProtocolError",
    "Response",
    "TransportError",
    "TransportTimeout",
    "check_ca_bundle",
    "split_url",
]


class NotAnswered(TransportError):
    """The connection closed after the request was written and before any byte of the answer:
    the server may or may not have received the request (see the module docstring)."""


class _Malformed(Exception):
    """What was wrong with an answer, before the connection adds where it came from."""


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
        _tls_context(str(path))  # as every connection will load it
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
        return self.authority if self.port != default else self.authority.rpartition(":")[0]

    @property
    def authority(self) -> str:
        """``host:port`` always (CONNECT needs the port even when it is the scheme's default)."""
        return authority(self.host, self.port)


def split_url(url: str) -> tuple[_Origin, str]:
    """The origin and request target of an http(s) URL; ValueError if it is not one (a bad port)."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise ValueError(f"not an http(s) URL: {url!r}")
    port = parts.port or (443 if parts.scheme == "https" else 80)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    return _Origin(parts.scheme, parts.hostname, port), target


class _Connection(asyncio.Protocol):
    """One TCP (or TLS) connection and the parser of the answer it is waiting for.

    Line ends are read leniently, as browsers read them: a bare ``\\n`` ends a line as ``\\r\\n``
    does (a server that sends them is broken, but its answer is unambiguous)."""

    def __init__(self, label: str) -> None:
        self.label = label
        """``host:port`` of the server, for messages."""
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
        self._unasked = b""
        """The first bytes the server sent when no request was waiting (a greeting), for messages."""

    # --- asyncio.Protocol ------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self._waiter is None or self._waiter.done():
            # unasked: a greeting before the first request (an SSH or SMTP banner), or garbage
            # on an idle connection; either way the connection is not HTTP's any more
            self._unasked = self._unasked or bytes(data[:200])
            self.close()
            return
        self._buf += data
        try:
            if self._head is None:
                _check_status_start(self._buf)
            self._advance()
        except _Malformed as e:
            self._fail(self._invalid(str(e)))

    def eof_received(self) -> bool | None:
        return False  # close our side too

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        if self._head is not None and self._mode == "eof":
            try:
                self._finish(bytes(self._body) + bytes(self._buf))
            except _Malformed as e:
                waiter.set_exception(self._invalid(str(e)))
            return
        if self._head is None and not self._buf:
            waiter.set_exception(NotAnswered(self._not_answered(exc)))
            return
        reason = f" ({exc})" if exc else ""
        waiter.set_exception(
            CutShort(f"the answer from {self.label} was cut short: {self._cut_short()}{reason}")
        )

    def _not_answered(self, exc: Exception | None) -> str:
        how = "reset" if isinstance(exc, ConnectionResetError) else "closed"
        if self.used == 1:
            return f"{self.label} {how} the connection without answering"
        return (
            f"{self.label} {how} the connection after the request was sent, before any answer "
            f"(request {self.used} on that connection); the server may have received it, so it "
            "was not sent again"
        )

    def _cut_short(self) -> str:
        if self._head is None:
            return "the connection closed in the middle of its headers"
        if self._mode == "length":
            return (
                f"the connection closed after {len(self._buf)} of the {self._length} body bytes "
                "its Content-Length announced"
            )
        return "the connection closed in the middle of its chunked body"

    def _invalid(self, what: str) -> ProtocolError:
        return ProtocolError(f"not a valid HTTP answer from {self.label}: {what}")

    @property
    def waiting_for(self) -> str:
        """What the exchange in progress still waits for, for a timeout's message."""
        if self._head is None:
            return f"the answer's headers from {self.label}"
        got = len(self._body) + len(self._buf)
        return f"the rest of the answer from {self.label} ({got} body bytes so far)"

    # --- one exchange --------------------------------------------------------------------------

    def send(self, data: bytes, *, expect_body: bool) -> asyncio.Future[Response]:
        assert self.transport is not None
        self._waiter = asyncio.get_running_loop().create_future()
        self._head, self._mode, self._body, self._buf = None, "", bytearray(), bytearray()
        self._expect_body = expect_body
        self.used += 1
        if self.closed or self.transport.is_closing():  # it spoke first, or hung up, before this
            self._waiter.set_exception(self._closed_before_sending())
            return self._waiter
        self.transport.write(data)
        return self._waiter

    def _closed_before_sending(self) -> TransportError:
        """Why a fresh connection was already gone when the request was to be written."""
        if self._unasked:
            first = self._unasked.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")
            return self._invalid(f"it spoke first, before any request: {first[:80]!r}")
        return NotAnswered(f"{self.label} closed the connection without answering")

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
                    raise _Malformed(f"more body bytes than its Content-Length ({self._length})")
                self._finish(bytes(self._buf))
        elif self._mode == "chunked":
            self._read_chunks()

    def _read_head(self) -> bool:
        head = self._head_lines()
        if head is None:
            return False
        lines, stop = head
        del self._buf[:stop]
        version, _, rest = lines[0].partition(" ")
        code = rest[:3]
        if not version.startswith("HTTP/1.") or not code.isdigit():
            raise _Malformed(f"it does not start with an HTTP status line: {lines[0][:80]!r}")
        status = int(code)
        if 100 <= status < 200:  # an interim answer (none is asked for): wait for the real one
            return self._read_head() if self._buf else False
        headers = _parse_headers(lines[1:])
        self._head = (status, headers)
        self._choose_mode(version, status, headers)
        return True

    def _head_lines(self) -> tuple[list[str], int] | None:
        """The status and header lines of a complete head, and where the body starts; None while
        the head is still arriving. Every line ends in CRLF almost always, which plain ``find`` and
        ``split`` read at a tenth of the regular expressions' cost; a head with a bare LF anywhere
        (or one still without its end) goes the lenient way."""
        buf = self._buf
        end = buf.find(b"\r\n\r\n")
        if 0 <= end <= MAX_HEAD and buf.count(b"\n", 0, end) == buf.count(b"\r\n", 0, end):
            return bytes(buf[:end]).decode("latin-1").split("\r\n"), end + 4
        found = BLANK_LINE.search(buf)
        end = len(buf) if found is None else found.start()
        if end > MAX_HEAD:  # however it arrived: all at once, or in pieces with no end yet
            raise _Malformed(f"headers longer than {MAX_HEAD // 1024} KiB")
        if found is None:
            return None
        return LINE_END.split(bytes(buf[:end]).decode("latin-1")), found.end()

    def _choose_mode(self, version: str, status: int, headers: dict[str, str]) -> None:
        connection = headers.get("connection", "").lower()
        keep = "close" not in connection if version == "HTTP/1.1" else "keep-alive" in connection
        if not self._expect_body or status in {204, 304}:
            self._mode, self._reusable = "length", keep
            self._length = 0
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            self._mode, self._reusable = "chunked", keep
        elif "content-length" in headers:
            self._length = _content_length(headers["content-length"])
            self._mode, self._reusable = "length", keep
        else:
            self._mode, self._reusable = "eof", False

    def _read_chunks(self) -> None:
        while True:
            line_end = self._buf.find(b"\n")
            if line_end < 0:
                if len(self._buf) > MAX_HEAD:
                    raise _Malformed("a chunk-size line with no end")
                return
            size_text = bytes(self._buf[:line_end]).split(b";", 1)[0].strip()
            try:
                size = int(size_text, 16)
            except ValueError:
                raise _Malformed(f"a bad chunk size: {size_text[:40]!r}") from None
            start = line_end + 1
            if size == 0:  # the last chunk; then optional trailer lines and an empty line
                rest = self._buf[start:]
                if rest.startswith((b"\r\n", b"\n")) or BLANK_LINE.search(rest):
                    self._finish(bytes(self._body))
                return
            stop = start + size
            after = bytes(self._buf[stop : stop + 2])
            if after in {b"", b"\r"}:
                return  # the chunk or its line end is still on its way
            if after.startswith(b"\n"):
                end = stop + 1
            elif after == b"\r\n":
                end = stop + 2
            else:
                raise _Malformed(f"a chunk of {size} bytes not followed by a line end")
            self._body += self._buf[start:stop]
            del self._buf[:end]

    def _finish(self, body: bytes) -> None:
        assert self._head is not None and self._waiter is not None
        status, headers = self._head
        self._head = None
        encoding = headers.get("content-encoding")
        if encoding is not None:
            try:
                body = decode_body(body, encoding)
            except UndecodableBody as e:
                raise _Malformed(str(e)) from None
        if not self._waiter.done():
            self._waiter.set_result(Response(status, headers, body))


_STATUS_START = b"HTTP/1."


def _check_status_start(buf: bytearray) -> None:
    """Refuse an answer as soon as its first bytes cannot begin an HTTP/1.x status line.

    Why at once: a service that greets first (SSH's ``SSH-2.0-...``, SMTP's ``220 ...``, a
    database's binary hello) sends a line and then waits or hangs up, and waiting for the blank
    line that ends HTTP headers read as "cut short: did it restart?" or as a timeout, when the
    answer is "that port is not an HTTP server"."""
    start = bytes(buf[:64])
    n = min(len(start), len(_STATUS_START))
    if start[:n] != _STATUS_START[:n]:
        first = start.split(b"\n", 1)[0].rstrip(b"\r").decode("latin-1")
        raise _Malformed(f"it does not start with an HTTP status line: {first[:80]!r}")


def _parse_headers(lines: list[str]) -> dict[str, str]:
    """Header lines to a dict of lower-cased names, repeats joined with ", ", folded lines joined."""
    headers: dict[str, str] = {}
    last = ""
    for line in lines:
        if line[:1] in " \t":  # an obsolete folded continuation of the header before
            if not last:
                raise _Malformed(f"a header line without a name and a colon: {line[:80]!r}")
            headers[last] = f"{headers[last]} {line.strip()}"
            continue
        name, sep, value = line.partition(":")
        key = name.strip().lower()
        if not sep or not key:
            raise _Malformed(f"a header line without a name and a colon: {line[:80]!r}")
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
        last = key
    return headers


def _content_length(value: str) -> int:
    """The one length a (possibly repeated) Content-Length header gives; two different ones are
    refused, since which one frames the body is exactly what request smuggling exploits."""
    length = value
    if "," in value:
        lengths = {v.strip() for v in value.split(",")}
        if len(lengths) > 1:
            raise _Malformed(f"Content-Length headers that disagree ({', '.join(sorted(lengths))})")
        (length,) = lengths
    if not length.isdigit():
        raise _Malformed(f"a Content-Length that is not a number: {length[:40]!r}")
    return int(length)


_IDEMPOTENT = frozenset({"GET", "HEAD"})
"""Methods sent again after a reused connection closed unanswered; never POST (patient text)."""


class Http1Client:
    """Keep-alive connections to one origin (scheme, host, port), one request at a time on each,
    directly or through the proxy the environment names for it (see :mod:`.http_proxy`).

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
        o = self._origin
        self.proxy = proxy_for(o.scheme, o.host, o.port, use_env=self._options.use_env_proxy)
        self.timeout_s = timeout_s
        self.connect_timeout_s = connect_timeout_s
        self.max_idle = max_idle
        fixed = {"Host": o.host_header, "Accept-Encoding": ACCEPT_ENCODING, **headers}
        if self.proxy is not None and o.scheme == "http" and self.proxy.authorization:
            fixed["Proxy-Authorization"] = self.proxy.authorization
        self._fixed = "".join(f"{k}: {v}\r\n" for k, v in fixed.items()).encode("latin-1")
        self._idle: list[_Connection] = []
        self._targets: dict[str, str] = {}
        self._ssl = _tls_context(self._options.ca_bundle) if o.scheme == "https" else None
        self._label = f"{o.host}:{o.port}"

    async def request(
        self, method: str, url: str, body: bytes | None = None, *, timeout_s: float | None = None
    ) -> Response:
        """One exchange with ``url`` (on this client's origin); see the module docstring."""
        data = self._message(method, self._target(url), body)
        limit = timeout_s or self.timeout_s
        conn: _Connection | None = None
        try:
            async with asyncio.timeout(limit):
                conn = self._idle_connection() or await self._connect()
                return await self._exchange(conn, data, method)
        except TransportTimeout:
            raise
        except TimeoutError:
            waiting = f"a connection to {self._label}" if conn is None else conn.waiting_for
            raise TransportTimeout(f"timed out after {limit:g} s waiting for {waiting}") from None

    async def _exchange(self, conn: _Connection, data: bytes, method: str) -> Response:
        """Send on ``conn`` and keep it for the next request if the answer allows. A GET or HEAD
        on a reused connection that closed before answering goes once more on a fresh one (it is
        idempotent: a keep-alive timeout crossing it is the likely cause); a POST never does (see
        the module docstring)."""
        try:
            return await self._exchange_once(conn, data, method)
        except NotAnswered:
            if conn.used == 1 or method not in _IDEMPOTENT:
                raise
            return await self._exchange_once(await self._connect(), data, method)

    def _idle_connection(self) -> _Connection | None:
        """The most recently used idle connection still open (the server may have closed some)."""
        while self._idle:
            conn = self._idle.pop()
            if not conn.closed:
                return conn
        return None

    async def _exchange_once(self, conn: _Connection, data: bytes, method: str) -> Response:
        """One request on ``conn``: kept for the next if the answer allows; closed if it failed,
        timed out or was cancelled (its state is then unknown)."""
        try:
            response = await conn.send(data, expect_body=method != "HEAD")
        except BaseException:
            conn.close()
            raise
        self._release(conn)
        return response

    def _target(self, url: str) -> str:
        target = self._targets.get(url)
        if target is None:
            origin, target = split_url(url)
            if origin != self._origin:
                raise ValueError(f"{url} is not on {self._origin.scheme}://{self._origin.host_header}")
            if self.proxy is not None and origin.scheme == "http":  # a proxy is sent the whole URL
                target = f"http://{origin.host_header}{target}"
            self._targets[url] = target
        return target

    def _message(self, method: str, target: str, body: bytes | None) -> bytes:
        length = b"" if body is None else b"Content-Length: %d\r\n" % len(body)
        head = f"{method} {target} HTTP/1.1\r\n".encode("latin-1") + self._fixed + length + b"\r\n"
        return head if body is None else head + body

    async def _connect(self) -> _Connection:
        try:
            async with asyncio.timeout(self.connect_timeout_s):
                if self.proxy is None:
                    return await self._open(self._origin.host, self._origin.port, tls=True)
                return await self._through_proxy()
        except TimeoutError:
            where = (
                self._label if self.proxy is None else f"{self._label} through the proxy {self.proxy.address}"
            )
            raise TransportTimeout(
                f"timed out after {self.connect_timeout_s:g} s waiting for a connection to {where}"
            ) from None

    async def _open(self, host: str, port: int, *, tls: bool) -> _Connection:
        """A connection to ``host:port`` (TLS for an https origin when ``tls``)."""
        loop = asyncio.get_running_loop()
        context = self._ssl if tls else None
        try:
            _, conn = await loop.create_connection(
                lambda: _Connection(self._label),
                host,
                port,
                ssl=context,
                server_hostname=self._origin.host if context else None,
            )
        except OSError as e:  # refused, unreachable, name not found, TLS refused
            raise self._connect_error(e, f"{host}:{port}" if tls or self.proxy is None else None) from None
        return conn

    async def _through_proxy(self) -> _Connection:
        """Through ``self.proxy``: plain HTTP goes to the proxy itself (the request names the whole
        URL); https is tunnelled with CONNECT and TLS is spoken to the origin inside the tunnel."""
        proxy = self.proxy
        assert proxy is not None
        if self._ssl is None:
            return await self._open(proxy.host, proxy.port, tls=False)
        loop = asyncio.get_running_loop()
        o = self._origin
        try:
            raw = await open_tunnel(proxy, o.authority)
        except OSError as e:
            raise self._connect_error(e, None) from None
        conn = _Connection(self._label)
        try:
            tls = await loop.start_tls(raw, conn, self._ssl, server_hostname=o.host)
        except (OSError, ssl.SSLError) as e:
            raw.close()
            raise self._connect_error(e, self._label) from None
        assert tls is not None
        conn.connection_made(tls)
        return conn

    def _connect_error(self, error: OSError, where: str | None) -> ConnectError:
        """Why a connection failed, named for the user: ``where`` is the server's ``host:port``, or
        None when it was the proxy that could not be reached."""
        if where is None:
            assert self.proxy is not None
            return ConnectError(
                f"cannot connect to {self.proxy.named}: {_reason(error)}",
                f"is the proxy right? Unset {self.proxy.source} or pass --no-proxy to go direct",
            )
        if isinstance(error, ssl.SSLCertVerificationError):
            return ConnectError(
                f"cannot connect to {where}: its TLS certificate is not trusted "
                f"({error.verify_message or error.reason})",
                "pass the CA certificate that signed it with --ca-bundle FILE (or set SSL_CERT_FILE)",
            )
        if isinstance(error, ssl.SSLError) or (self._ssl is not None and isinstance(error, ConnectionError)):
            # a plain-HTTP server hangs up on a TLS hello (nginx answers 400 and closes): a reset
            # here is the handshake failing, not a server that is down
            why = error.reason if isinstance(error, ssl.SSLError) else "the server closed the connection"
            return ConnectError(
                f"cannot connect to {where}: the TLS handshake failed ({why or error})",
                "does it speak https on that port? (http:// if not)",
            )
        return ConnectError(f"cannot connect to {where}: {_reason(error)}")

    def _release(self, conn: _Connection) -> None:
        """Keep ``conn`` for the next request if the answer allows. Not through a forward proxy
        (plain http): tinyproxy, for one, closes its side after each answer without saying so, and
        a POST that then meets the closed connection is never sent again (the module docstring),
        so every request through such a proxy opens its own connection."""
        forward = self.proxy is not None and self._origin.scheme == "http"
        if conn.reusable and not forward and len(self._idle) < self.max_idle:
            self._idle.append(conn)
        else:
            conn.close()

    def close(self) -> None:
        idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()


def _reason(error: OSError) -> str:
    """What went wrong with a connection, in words (a name that does not resolve says so)."""
    if isinstance(error, socket.gaierror):
        return f"the name does not resolve ({error.strerror})"
    if error.errno:  # asyncio words a refusal "Connect call failed (addr)"; the errno says why
        return os.strerror(error.errno)
    return error.strerror or str(error) or type(error).__name__


def _tls_context(ca_bundle: str | None) -> ssl.SSLContext:
    """The system's trusted CAs (``SSL_CERT_FILE`` replaces them, as OpenSSL reads it), plus
    ``--ca-bundle``'s."""
    context = ssl.create_default_context()
    if ca_bundle is not None:
        context.load_verify_locations(cafile=ca_bundle)
    return context
