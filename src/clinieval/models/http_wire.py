"""What the HTTP client and a proxy tunnel both read HTTP/1.1 by: its line ends (read leniently,
a bare ``\\n`` as ``\\r\\n``, as browsers do), the longest head accepted, and the errors a request
ends in. A module of its own so :mod:`.http_proxy` (the CONNECT tunnel) and :mod:`.http1` (the
client, which opens tunnels) share them without importing each other.
"""

from __future__ import annotations

import re

LINE_END = re.compile(r"\r?\n")
BLANK_LINE = re.compile(rb"\r?\n\r?\n")


def authority(host: str, port: int) -> str:
    """``host:port`` as a request line, a CONNECT and a message write it (an IPv6 host in brackets)."""
    name = f"[{host}]" if ":" in host else host
    return f"{name}:{port}"


MAX_HEAD = 64 * 1024
"""Longest status line and headers accepted: a server sending more is not an API server."""


class TransportError(Exception):
    """The exchange failed below HTTP; one of the subclasses says how."""


class ConnectError(TransportError):
    """No connection to talk over: refused, unreachable, a name that does not resolve, a TLS
    handshake that failed, or a proxy that would not connect us. ``hint`` says what to check."""

    def __init__(self, message: str, hint: str = "is the server running and is the URL right?") -> None:
        super().__init__(message)
        self.hint = hint


class ProtocolError(TransportError):
    """Connected, and something answered, but not with valid HTTP: the message names what was wrong."""


class CutShort(TransportError):
    """The server began to answer, then the connection closed before the answer was whole: a
    lost connection (a crash, a restart, a proxy timing out), though the server did answer."""


class TransportTimeout(TimeoutError):
    """No whole answer in time; the message says what was still awaited, and for how long."""
