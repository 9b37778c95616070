"""Which HTTP proxy, if any, a request to an endpoint goes through, as the environment says.

A hospital often reaches an approved model gateway only through its forward proxy, and says so
the way every tool reads it: ``HTTPS_PROXY``/``HTTP_PROXY`` (or ``ALL_PROXY``; lower-case
spellings first, as curl and Python's urllib read them) and ``NO_PROXY``. The rules here, and why:

- loopback is never proxied, whatever the environment says: a local server is the default
  endpoint, and sending its patient text to a proxy would be exactly the leak the egress guard
  exists to stop (the guard, :mod:`clinieval.privacy`, has already decided that the endpoint host
  may be reached at all before any of this is asked);
- ``--no-proxy`` (``use_env=False``) ignores the environment entirely;
- ``NO_PROXY`` is a comma list of ``*``, host names (``example.org`` and ``.example.org`` both match
  the name and every name under it), IP addresses and CIDR blocks (``10.0.0.0/8``), each with an
  optional ``:port``;
- only ``http://`` proxies are spoken to (``CONNECT`` carries TLS to an https endpoint through
  them); an https or SOCKS proxy is refused with one clear error rather than silently bypassed;
- a proxy is a door too (:func:`check_proxy`): a plain-http endpoint's requests reach the proxy in
  clear, prompts and all, so for an http endpoint the proxy itself must be loopback or
  allowlisted, as the endpoint is. Through ``CONNECT`` the proxy sees the endpoint's host and port
  and then only TLS, so an https endpoint's proxy needs no allowlisting of its own.
"""

from __future__ import annotations

import asyncio
import base64
import ipaddress
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from urllib.parse import unquote, urlsplit

from clinieval.errors import UserError
from clinieval.models.http_wire import BLANK_LINE, LINE_END, MAX_HEAD, ConnectError, ProtocolError, authority
from clinieval.privacy import ENV_ALLOWED_HOSTS, allowed_hosts, is_loopback


@dataclass(frozen=True, slots=True)
class Proxy:
    """An HTTP proxy: where it listens, the credentials to show it, and which variable named it."""

    host: str
    port: int
    authorization: str | None
    """The ``Proxy-Authorization`` value (Basic) when the proxy URL carries ``user:password@``."""
    source: str
    """The environment variable it came from, for error messages."""

    @property
    def address(self) -> str:
        return authority(self.host, self.port)

    @property
    def named(self) -> str:
        """The proxy as error messages name it: where it is, and where the user set it."""
        return f"the proxy {self.address} (from {self.source})"

    def record(self, endpoint_scheme: str) -> dict[str, str]:
        """The proxy as a run's manifest records it: where it is, which variable named it, and
        what it sees (``connect``: the endpoint's host and port, then TLS; ``forward``: every
        request in clear). Never the credentials: the manifest is shared with the results."""
        return {
            "proxy": f"http://{self.address}",
            "source": self.source,
            "via": "connect" if endpoint_scheme == "https" else "forward",
        }


def proxy_for(
    scheme: str, host: str, port: int, *, use_env: bool, environ: Mapping[str, str] | None = None
) -> Proxy | None:
    """The proxy a request to ``scheme://host:port`` goes through, or None to go direct."""
    if not use_env:
        return None
    env = os.environ if environ is None else environ
    names = ("https_proxy", "HTTPS_PROXY") if scheme == "https" else ("http_proxy", "HTTP_PROXY")
    named = _first_set(env, *names, "all_proxy", "ALL_PROXY")
    # no proxy set (the usual case) costs no loopback lookup; a set one is read only if it is used
    if named is None or is_loopback(host):
        return None
    no_proxy = _first_set(env, "no_proxy", "NO_PROXY")
    if no_proxy is not None and bypassed(host, port, no_proxy[1]):
        return None
    return parse_proxy(named[1], named[0])


def check_proxy(proxy: Proxy | None, endpoint: str, allow: Iterable[str] = ()) -> None:
    """Refuse to send ``endpoint``'s requests through ``proxy`` when the proxy would read them
    and the user has not opened it: an http endpoint through a proxy that is neither loopback nor
    allowlisted (``--allow-host``, ``CLINIEVAL_ALLOWED_HOSTS``). The endpoint itself has passed
    :func:`clinieval.privacy.check_endpoint` already; an https endpoint's proxy sees only CONNECT."""
    if proxy is None or urlsplit(endpoint).scheme == "https":
        return
    if is_loopback(proxy.host) or proxy.host.lower() in allowed_hosts(allow):
        return
    host = urlsplit(endpoint).hostname or ""
    raise UserError(
        f"endpoint {endpoint!r} would be reached through {proxy.named}, which is neither loopback "
        "nor allowlisted, and over plain http the proxy reads every prompt; allow the proxy with "
        f"--allow-host {proxy.host} (or {ENV_ALLOWED_HOSTS}={proxy.host}), go direct with --no-proxy "
        f"(or NO_PROXY={host}), or use the endpoint's https URL (the proxy then sees only CONNECT)"
    )


def _first_set(env: Mapping[str, str], *names: str) -> tuple[str, str] | None:
    """The first of ``names`` set to something, with its value (stripped); None if none is."""
    for name in names:
        value = env.get(name, "").strip()
        if value:
            return name, value
    return None


def parse_proxy(value: str, source: str) -> Proxy:
    """``http://[user:password@]host[:port]`` (the scheme may be left out) as a :class:`Proxy`."""
    parts = urlsplit(value if "://" in value else f"http://{value}")
    if parts.scheme != "http":
        raise UserError(
            f"{source}={value!r}: clinieval reaches endpoints through HTTP proxies only "
            "(http://HOST:PORT; an https endpoint is tunnelled through it with CONNECT); "
            "set another proxy or pass --no-proxy"
        )
    try:
        port = parts.port or 80
    except ValueError:
        raise UserError(f"{source}={value!r}: the port is not a number from 1 to 65535") from None
    if not parts.hostname:
        raise UserError(f"{source}={value!r}: no proxy host; expected http://HOST:PORT")
    authorization = None
    if parts.username is not None:
        pair = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        authorization = "Basic " + base64.b64encode(pair).decode("ascii")
    return Proxy(parts.hostname, port, authorization, source)


def bypassed(host: str, port: int, no_proxy: str) -> bool:
    """Whether ``NO_PROXY``'s value sends ``host:port`` direct."""
    host = host.lower().rstrip(".")
    for raw in no_proxy.replace(" ", ",").split(","):
        entry = raw.strip().lower()
        if not entry:
            continue
        if entry == "*":
            return True
        name, entry_port = _split_port(entry)
        if entry_port is not None and entry_port != port:
            continue
        if _matches(host, name):
            return True
    return False


def _split_port(entry: str) -> tuple[str, int | None]:
    """``host:port`` -> (host, port); an IPv6 address or CIDR block keeps its colons."""
    if entry.startswith("["):
        name, _, rest = entry[1:].partition("]")
        return name, int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if entry.count(":") == 1:
        name, _, port = entry.partition(":")
        return name, int(port) if port.isdigit() else None
    return entry, None


def _matches(host: str, name: str) -> bool:
    try:
        address = ipaddress.ip_address(host.strip("[]"))
    except ValueError:
        address = None
    if address is not None:
        try:
            return address in ipaddress.ip_network(name, strict=False)
        except ValueError:
            return False
    domain = name.lstrip("*").lstrip(".")
    return bool(domain) and (host == domain or host.endswith("." + domain))


# --- the CONNECT tunnel ------------------------------------------------------------------------


async def open_tunnel(proxy: Proxy, target: str) -> asyncio.Transport:
    """A connection to ``proxy`` that it has joined to ``target`` (``host:port``) with CONNECT,
    ready for TLS to the target; OSError if the proxy cannot be reached, ConnectError if it says no."""
    loop = asyncio.get_running_loop()
    raw, tunnel = await loop.create_connection(_Tunnel, proxy.host, proxy.port)
    auth = f"Proxy-Authorization: {proxy.authorization}\r\n" if proxy.authorization else ""
    raw.write(f"CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n{auth}\r\n".encode("latin-1"))
    try:
        status, reason = await tunnel.answer
    except BaseException:
        raw.close()
        raise
    if status != 200:
        raw.close()
        raise _proxy_refused(proxy, target, status, reason)
    return raw


def _proxy_refused(proxy: Proxy, target: str, status: int, reason: str) -> ConnectError:
    if status == 407:
        return ConnectError(
            f"{proxy.named} wants credentials to connect to {target} (HTTP 407)",
            f"put them in {proxy.source}: http://USER:PASSWORD@{proxy.address}",
        )
    return ConnectError(
        f"the proxy {proxy.address} refused to connect to {target} "
        f"(HTTP {f'{status} {reason}'.strip()}; the proxy is {proxy.source}'s)",
        "does the proxy allow this host and port? Ask its administrators, or pass --no-proxy",
    )


class _Tunnel(asyncio.Protocol):
    """A proxy's answer to CONNECT: its status line and headers, then nothing (TLS takes over)."""

    def __init__(self) -> None:
        self.answer: asyncio.Future[tuple[int, str]] = asyncio.get_running_loop().create_future()
        self._buf = bytearray()

    def data_received(self, data: bytes) -> None:
        if self.answer.done():
            return
        self._buf += data
        found = BLANK_LINE.search(self._buf)
        if found is None:
            if len(self._buf) > MAX_HEAD:
                self.answer.set_exception(ProtocolError("the proxy's answer to CONNECT is not HTTP"))
            return
        first = LINE_END.split(bytes(self._buf[: found.start()]).decode("latin-1"))[0]
        version, _, rest = first.partition(" ")
        code, _, reason = rest.partition(" ")
        if not version.startswith("HTTP/1.") or not code.isdigit():
            self.answer.set_exception(ProtocolError(f"the proxy answered CONNECT with {first[:80]!r}"))
            return
        self.answer.set_result((int(code), reason.strip()))

    def connection_lost(self, exc: Exception | None) -> None:
        if not self.answer.done():
            self.answer.set_exception(
                ConnectError("the proxy closed the connection instead of answering CONNECT")
            )
