"""Where model requests may go.

Patient records must not leave the building by accident, so only loopback endpoints are
allowed unless the user names a host explicitly (``--allow-host`` or the
``CLINIEVAL_ALLOWED_HOSTS`` environment variable, comma-separated).
"""

from __future__ import annotations

import ipaddress
import os
import socket
from collections.abc import Iterable
from urllib.parse import urlsplit

from clinieval.errors import UserError

ENV_ALLOWED_HOSTS = "CLINIEVAL_ALLOWED_HOSTS"


LOOPBACK_NAMES = frozenset({"localhost", "localhost.localdomain"})


def is_loopback(host: str) -> bool:
    """True for an address in 127.0.0.0/8 or ::1, and for ``localhost`` when every address it
    resolves to is one (a hosts file can point the name anywhere, so the name alone proves
    nothing). Anything else, including spellings an HTTP client might still read as loopback
    (``2130706433``, ``127.1``, ``::ffff:127.0.0.1``), is not: refusing costs a user one
    ``--allow-host``; accepting a trick costs the patients."""
    literal = host.strip("[]")
    try:
        return ipaddress.ip_address(literal).is_loopback
    except ValueError:
        pass
    name = host.lower().rstrip(".")
    return name in LOOPBACK_NAMES and _resolves_to_loopback(name)


def _resolves_to_loopback(name: str) -> bool:
    try:
        infos = socket.getaddrinfo(name, None)
    except OSError:
        return False
    addresses = {info[4][0] for info in infos}
    return bool(addresses) and all(ipaddress.ip_address(str(a).split("%")[0]).is_loopback for a in addresses)


def allowed_hosts(extra: Iterable[str] = ()) -> frozenset[str]:
    """Hosts the user has allowlisted, from the environment and from ``extra``."""
    env = os.environ.get(ENV_ALLOWED_HOSTS, "")
    names = [h.strip().lower() for h in env.split(",") if h.strip()]
    names.extend(h.strip().lower() for h in extra if h.strip())
    return frozenset(names)


def check_endpoint(url: str, allow: Iterable[str] = ()) -> None:
    """Refuse ``url`` unless it is loopback or its host is allowlisted."""
    try:
        parts = urlsplit(url)
        host = parts.hostname
    except ValueError as e:  # an unclosed "[", or a bracketed host that is not an IP address
        raise UserError(
            f"endpoint {url!r}: {e}; expected an http(s) URL such as http://127.0.0.1:8080/v1"
        ) from None
    if parts.scheme not in {"http", "https"} or not host:
        raise UserError(f"endpoint {url!r}: expected an http(s) URL such as http://127.0.0.1:8080/v1")
    if is_loopback(host) or host.lower() in allowed_hosts(allow):
        return
    raise UserError(
        f"endpoint {url!r}: host {host!r} is not loopback; patient data stays local unless you "
        f"allowlist it with --allow-host {host} (or {ENV_ALLOWED_HOSTS}={host})"
    )
