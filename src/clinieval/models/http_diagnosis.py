"""What an HTTP answer that is not the API's means, in words a user can act on.

The backend's transport (:mod:`.http1`) returns whatever came back; these functions tell apart
the answers that look alike from outside and call for different fixes (issue 35, item 3):

- a 407, or a 401 the forward proxy wrote itself, wants the *proxy's* credentials (the
  ``user:password@`` of ``HTTP_PROXY``), not ``CLINIEVAL_API_KEY``;
- a 200 that is not the API's JSON: JSON in a declared charset other than UTF-8 is read in that
  charset; JSON that is not valid UTF-8 says where; an HTML page (a gateway's login page) says so,
  with its title;
- a redirect names where it points (``Location``): a GET is followed on the same origin only,
  and a POST never (it would send the prompt, patient text, to a place the user did not name);
- an Azure-style URL without ``?api-version=`` is answered 404 "Resource not found" by Azure,
  which once read "the URL usually ends in /v1".

Nothing here quotes an answer's body beyond an HTML page's title: a 200's body may hold the
model's answer, which the error messages (and the console line that shows one) must not carry.
"""

from __future__ import annotations

import codecs
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urljoin, urlsplit

import orjson

from clinieval.models.http_proxy import Proxy

REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_REDIRECTS = 5
"""Same-origin redirects a GET follows (a trailing-slash fix, a moved route): more is a loop."""

_CHARSET = re.compile(r";\s*charset\s*=\s*\"?([\w.:-]+)", re.IGNORECASE)
_TITLE = re.compile(rb"<title[^>]*>(.*?)</title", re.IGNORECASE | re.DOTALL)


class NotJson(Exception):
    """A 200 whose body is not the API's JSON; the message says what it is instead."""


def read_json(body: bytes, headers: Mapping[str, str]) -> Any:
    """A 200 answer's JSON, read in the charset its ``Content-Type`` declares (UTF-8 unless it
    declares another); :class:`NotJson` with what the body is instead."""
    charset = declared_charset(headers)
    try:
        if charset is None:
            return orjson.loads(body)
        return orjson.loads(body.decode(charset))
    except (orjson.JSONDecodeError, UnicodeDecodeError):
        raise NotJson(not_json(body, headers)) from None


def declared_charset(headers: Mapping[str, str]) -> str | None:
    """The charset ``Content-Type`` declares when it is one Python knows and not UTF-8; else None
    (JSON is UTF-8, RFC 8259; a declared latin-1 is the server saying what its bytes are)."""
    found = _CHARSET.search(headers.get("content-type", ""))
    if found is None:
        return None
    try:
        name = codecs.lookup(found.group(1)).name
    except LookupError:
        return None
    return None if name in {"utf-8", "ascii"} else name


def not_json(body: bytes, headers: Mapping[str, str]) -> str:
    """What a 200 body that is not the API's JSON is, for a message (never its text)."""
    kind = headers.get("content-type", "") or "none"
    title = html_title(body, headers)
    if title is not None:
        return (
            f"an HTML page ({title!r}, Content-Type {kind}), not the API's JSON: a gateway's login "
            "page or a proxy's notice is in the way, or the URL is a web page; check the URL (it "
            "usually ends in /v1) and that the gateway lets API clients through with CLINIEVAL_API_KEY"
        )
    bad = _utf8_error(body)
    if bad is not None and _is_json(body.decode("latin-1")):
        return (
            f"JSON that is not valid UTF-8 ({bad}; Content-Type {kind}); JSON must be UTF-8: fix the "
            "server's encoding, or have it declare its charset in Content-Type"
        )
    return f"no JSON ({len(body)} bytes, Content-Type {kind})"


def html_title(body: bytes, headers: Mapping[str, str]) -> str | None:
    """The title of an HTML page (``''`` when it has none), or None when the body is not HTML."""
    start = body[:512].lstrip().lower()
    html = "html" in headers.get("content-type", "").lower()
    if not (html or start.startswith((b"<!doctype html", b"<html", b"<?xml"))):
        return None
    found = _TITLE.search(body[:65536])
    title = "" if found is None else found.group(1).decode("utf-8", "replace")
    return " ".join(re.sub(r"<[^>]+>", " ", title).split())[:80]


def _utf8_error(body: bytes) -> str | None:
    try:
        body.decode("utf-8")
    except UnicodeDecodeError as e:
        return f"byte 0x{body[e.start]:02x} at offset {e.start}"
    return None


def _is_json(text: str) -> bool:
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError:
        return False
    return True


def proxy_refusal(status: int, headers: Mapping[str, str], proxy: Proxy | None) -> str | None:
    """Why a forward proxy answered instead of the server, or None when the answer is the server's.

    A 407 is only ever a proxy's. A 401 through a forward proxy is the proxy's own when it carries
    ``Proxy-Authenticate`` or lacks the ``Via`` header a proxy adds to every answer it forwards
    (RFC 9110 section 7.6.3): tinyproxy answers wrong credentials with a 401 of its own. Only a
    plain-http endpoint's requests are forwarded; an https endpoint's proxy is met at CONNECT,
    whose refusals :mod:`.http_proxy` names."""
    if proxy is None:
        return None
    own = status == 407 or (status == 401 and ("proxy-authenticate" in headers or "via" not in headers))
    if not own:
        return None
    server = headers.get("server")
    said = f"HTTP {status}" + (f" from {server!r}" if server else "")
    sent = (
        f"the user:password in {proxy.source} were refused"
        if proxy.authorization
        else f"{proxy.source} carries none"
    )
    return (
        f"{proxy.named} wants credentials ({said}, its own answer, not the server's), and {sent}; "
        f"put them in {proxy.source}: http://USER:PASSWORD@{proxy.address} (CLINIEVAL_API_KEY is "
        "the server's key, never sent to the proxy)"
    )


def location(url: str, headers: Mapping[str, str]) -> str | None:
    """The absolute URL a redirect answer points to, or None when it names none."""
    where = headers.get("location", "").strip()
    return urljoin(url, where) if where else None


def same_origin(a: str, b: str) -> bool:
    """Whether two URLs share scheme, host and port: the only redirects a GET follows, since the
    client sends the API key with every request and was allowed to reach this origin only."""
    pa, pb = urlsplit(a), urlsplit(b)
    default = {"http": 80, "https": 443}
    try:
        ports = (pa.port or default.get(pa.scheme), pb.port or default.get(pb.scheme))
    except ValueError:
        return False
    return (pa.scheme, pa.hostname, ports[0]) == (pb.scheme, pb.hostname, ports[1])


def redirected(method: str, path: str, status: int, where: str | None) -> str:
    """A redirect that was not followed, named with where it points and why it stopped."""
    to = f"to {where}" if where else "with no Location"
    why = (
        "a POST is never sent on to another URL (it carries the prompt)"
        if method == "POST"
        else "a GET follows redirects only on the same scheme, host and port (it carries the key)"
    )
    endpoint = (
        "" if where is None else f"; if that is the API, use {endpoint_from(where, path)} as the endpoint"
    )
    return f"HTTP {status} on {method} {path} redirects {to}: not followed, since {why}{endpoint}"


def endpoint_from(where: str, path: str) -> str:
    """The endpoint a redirect suggests: its target without the route that was asked
    (``https://h/v1/models`` for ``/models`` gives ``https://h/v1``)."""
    base, sep, query = where.partition("?")
    return base.removesuffix(path).rstrip("/") + sep + query


def azure_without_api_version(url: str) -> bool:
    """Whether ``url`` is an Azure OpenAI deployment URL with no ``api-version`` query: Azure
    answers those 404 "Resource not found" on every route (its ``/openai/v1/`` routes need none)."""
    parts = urlsplit(url)
    return "/openai/deployments/" in parts.path and "api-version=" not in parts.query
