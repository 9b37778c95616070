"""Where model requests may go.

Patient records must not leave the building by accident, so only loopback endpoints are
allowed unless the user names a host explicitly (``--allow-host`` or the
``CLINIEVAL_ALLOWED_HOSTS`` environment variable, comma-separated).
"""

from __future__ import annotations

import ipaddress
import os
from collections.abc import Iterable
from urllib.parse import urlsplit

from clinieval.errors import UserError

ENV_ALLOWED_HOSTS = "CLINIEVAL_ALLOWED_HOSTS"


def is_loopback(host: str) -> bool:
    """True for ``localhost`` and any address in 127.0.0.0/8 or ::1."""
    if host.lower() in {"localhost", "localhost.localdomain"}:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def allowed_hosts(extra: Iterable[str] = ()) -> frozenset[str]:
    """Hosts the user has allowlisted, from the environment and from ``extra``."""
    env = os.environ.get(ENV_ALLOWED_HOSTS, "")
    names = [h.strip().lower() for h in env.split(",") if h.strip()]
    names.extend(h.strip().lower() for h in extra if h.strip())
    return frozenset(names)


def check_endpoint(url: str, allow: Iterable[str] = ()) -> None:
    """Refuse ``url`` unless it is loopback or its host is allowlisted."""
    parts = urlsplit(url)
    if parts.scheme not in {"http", "https"} or not parts.hostname:
        raise UserError(f"endpoint {url!r}: expected an http(s) URL such as http://127.0.0.1:8080/v1")
    host = parts.hostname
    if is_loopback(host) or host.lower() in allowed_hosts(allow):
        return
    raise UserError(
        f"endpoint {url!r}: host {host!r} is not loopback; patient data stays local unless you "
        f"allowlist it with --allow-host {host} (or {ENV_ALLOWED_HOSTS}={host})"
    )
