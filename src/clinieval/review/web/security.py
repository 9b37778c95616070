"""Who is asking, and may they: the session's user, the CSRF token, and the role checks.

Every rule here runs on the server for every request; the browser is never trusted to hide a
button. The cookie holds one random id and nothing else (:mod:`clinieval.review.sessions`): a
visitor gets one with the login form, a sign-in replaces it with a new one that a row of the
``sessions`` table knows (by its keyed hash), and logging out deletes that row, so a copy of the
cookie stops working too. The user and role are read from the database on each request, so
demoting an admin, removing a user or revoking their sessions takes effect at once.

The cookie is ``HttpOnly`` and ``SameSite=Strict``, lasts no longer than a session may, and is
``Secure`` whenever the browser is on HTTPS, or the app was started with ``secure_cookies``
(``review serve --allow-remote``, which is only for use behind an HTTPS proxy).

Behind a proxy the app sees the proxy's address and plain HTTP. ``review serve --trusted-proxy
ADDR`` names the proxies whose ``X-Forwarded-Proto`` and ``X-Forwarded-For`` are believed: only a
request whose peer is one of them has its scheme and client address taken from those headers (the
client is the right-most address in ``X-Forwarded-For`` that is not itself a trusted proxy, so
what a browser writes into the header is never taken). From any other peer the headers are
ignored: anyone could send them. The throttle and the audit trail then see each clinician's own
address, and the cookie is ``Secure`` when the browser is on HTTPS.

CSRF: one token per cookie id, derived from it with the session key (never stored), put in every
form (``csrf_token``) or sent by the page's script as the ``X-CSRF-Token`` header, and compared on
every POST by :func:`csrf_guard`, which the app installs as a dependency of *every* route, so a
route added later cannot forget it. The ``SameSite=Strict`` cookie already keeps other sites'
forms out; the token is the second lock.
"""

from __future__ import annotations

import hmac
import ipaddress
from dataclasses import dataclass, field
from typing import Any, Final, TypeVar

from fastapi import Request
from sqlalchemy import Engine
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from clinieval.errors import UserError
from clinieval.review import sessions
from clinieval.review.db import User
from clinieval.review.sessions import SessionKey, SessionPolicy, ThrottlePolicy

COOKIE: Final = "clinieval_review"
_JAR: Final = "clinieval.set_cookie"
_TOKEN: Final = "clinieval.token"
_USER: Final = "clinieval.user"

CSRF_FIELD: Final = "csrf_token"
CSRF_HEADER: Final = "x-csrf-token"
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

PLAIN_HTTP_MESSAGE: Final = (
    "Forbidden: this page was opened over plain HTTP; sign-in needs HTTPS (the app marks its cookie "
    "Secure, so the browser does not keep it over HTTP). Put the app behind TLS (an HTTPS reverse proxy, "
    "named with `clinieval review serve --trusted-proxy ADDR`) and open it with https://, or open it on "
    "this machine at http://127.0.0.1."
)

CSRF_MESSAGE: Final = (
    "Forbidden: this form's security token is missing or does not match your session "
    "(you may have been logged out, or the page is from an older session). Nothing was saved. "
    "Use the browser's Back button to copy what you typed, then reload the page and try again."
)


class Forbidden(Exception):
    """A request the user may not make; answered 403 with :attr:`message` and nothing else."""

    def __init__(self, message: str = "Forbidden: you do not have access to this page.") -> None:
        super().__init__(message)
        self.message = message


_T = TypeVar("_T")


class NotFound(Exception):
    """Nothing here *for this user*: also what a reviewer gets for someone else's assignment, so
    the answer never tells whether it exists."""

    def __init__(self, message: str = "Not found.") -> None:
        super().__init__(message)
        self.message = message


def found(value: _T | None) -> _T:
    """``value``, or :class:`NotFound` when a lookup scoped to the caller found nothing (not theirs,
    or not there: the same 404 either way)."""
    if value is None:
        raise NotFound
    return value


class LoginRequired(Exception):
    """No one is logged in: a page sends the browser to the login form."""


@dataclass(frozen=True, slots=True)
class WebSettings:
    """What the app was started with (kept in ``app.state.web``)."""

    key: SessionKey
    policy: SessionPolicy
    throttle: ThrottlePolicy
    secure_cookies: bool
    trusted_proxies: frozenset[str] = field(default_factory=frozenset)
    """Peers whose ``X-Forwarded-Proto``/``X-Forwarded-For`` are believed (normalised addresses)."""


def proxy_addresses(values: list[str] | tuple[str, ...]) -> frozenset[str]:
    """``--trusted-proxy`` values as addresses; anything else is one clear error."""
    out = set()
    for value in values:
        try:
            out.add(ipaddress.ip_address(value.strip()).compressed)
        except ValueError:
            raise UserError(
                f"--trusted-proxy {value!r}: give the proxy's IP address as the app sees it (e.g. 127.0.0.1)"
            ) from None
    return frozenset(out)


def _normal(address: str) -> str:
    try:
        return ipaddress.ip_address(address).compressed
    except ValueError:
        return address


def web_settings(request: Request) -> WebSettings:
    settings: WebSettings = request.app.state.web
    return settings


class CookieJar:
    """ASGI middleware that adds the ``Set-Cookie`` headers a request queued (:func:`_set_cookie`)
    to whatever response goes out, error pages included."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        jar: list[str] = []
        scope[_JAR] = jar

        async def send_with_cookies(message: Message) -> None:
            if message["type"] == "http.response.start" and jar:
                headers = [*message.get("headers", []), *((b"set-cookie", c.encode("latin-1")) for c in jar)]
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_cookies)


def _set_cookie(request: Request, value: str, max_age: int) -> None:
    settings = web_settings(request)
    parts = [f"{COOKIE}={value}", "Path=/", f"Max-Age={max_age}", "HttpOnly", "SameSite=Strict"]
    if settings.secure_cookies or request_scheme(request) == "https":
        parts.append("Secure")
    jar: Any = request.scope.get(_JAR)
    if isinstance(jar, list):
        jar[:] = [c for c in jar if not c.startswith(f"{COOKIE}=")]
        jar.append("; ".join(parts))


def _cookie_token(request: Request) -> str | None:
    value = request.cookies.get(COOKIE)
    return value if sessions.well_formed(value) else None


def browser_token(request: Request) -> str:
    """The id this browser holds (or is being given in this response): a new one when it has
    none, set as its cookie, so the login form has a CSRF token before anyone signs in."""
    token = request.scope.get(_TOKEN) or _cookie_token(request)
    if token is None:
        token = sessions.new_token()
        _set_cookie(request, token, int(web_settings(request).policy.absolute.total_seconds()))
    request.scope[_TOKEN] = token
    return str(token)


def csrf_token(request: Request) -> str:
    """The CSRF token of this browser's id (the login form's, before a sign-in; the session's
    after it: a sign-in replaces the id, so a token seen before login is useless after it)."""
    return sessions.csrf_for(web_settings(request).key.get(), browser_token(request))


def _trusted_peer(request: Request) -> bool:
    trusted = web_settings(request).trusted_proxies
    return bool(trusted) and request.client is not None and _normal(request.client.host) in trusted


def client_address(request: Request) -> str | None:
    """The browser's address: the peer's, or, when the peer is a trusted proxy, the right-most
    ``X-Forwarded-For`` entry that is not a trusted proxy (entries left of it are the browser's
    own claims, which anyone can forge)."""
    peer = request.client.host if request.client else None
    if peer is None or not _trusted_peer(request):
        return peer
    trusted = web_settings(request).trusted_proxies
    hops = [h.strip() for v in request.headers.getlist("x-forwarded-for") for h in v.split(",") if h.strip()]
    address = peer
    for hop in reversed(hops):
        address = hop
        if _normal(hop) not in trusted:
            break
    return address[:100]


def request_scheme(request: Request) -> str:
    """``https`` or ``http`` as the browser sees it: a trusted proxy's ``X-Forwarded-Proto`` (its
    last value, the one that proxy set), else the connection's own."""
    if _trusted_peer(request):
        values = [
            v.strip().lower() for h in request.headers.getlist("x-forwarded-proto") for v in h.split(",")
        ]
        if values and values[-1] in ("http", "https"):
            return values[-1]
    return request.url.scheme


def plain_http_without_cookie(request: Request) -> bool:
    """The browser holds no cookie because we sent it ``Secure`` over plain HTTP, where it is
    dropped (a browser keeps a ``Secure`` cookie from http only on its own machine)."""
    return (
        _cookie_token(request) is None
        and web_settings(request).secure_cookies
        and request_scheme(request) == "http"
    )


def new_session(request: Request, user: User) -> None:
    """Sign ``user`` in: a new id in a new ``sessions`` row and in the cookie; whatever the browser
    held before (an anonymous id, another user's session) no longer applies to it."""
    settings = web_settings(request)
    token = sessions.start(engine_of(request), settings.key.get(), user, client_address(request))
    _set_cookie(request, token, int(settings.policy.absolute.total_seconds()))
    request.scope[_TOKEN] = token
    request.scope[_USER] = user


def end_session(request: Request) -> None:
    """Log out: the session's row is deleted (every copy of the cookie stops working) and the
    browser is told to forget its cookie."""
    token = _cookie_token(request)
    if token is not None:
        sessions.end(engine_of(request), web_settings(request).key.get(), token)
    _set_cookie(request, "", 0)
    request.scope[_TOKEN] = None
    request.scope[_USER] = None


async def csrf_guard(request: Request) -> None:
    """Refuse any unsafe request whose token is missing or differs from the one its cookie's id
    gives.

    The token is read from the header first, then from the form; Starlette keeps the parsed form
    on the request, so the route reads the same form again without a second parse."""
    if request.method in SAFE_METHODS:
        return
    token = _cookie_token(request)
    expected = None if token is None else sessions.csrf_for(web_settings(request).key.get(), token)
    supplied: object = request.headers.get(CSRF_HEADER)
    if supplied is None and _is_form(request):
        form = await request.form()
        supplied = form.get(CSRF_FIELD)
    if not isinstance(expected, str) or not isinstance(supplied, str) or not expected:
        raise Forbidden(PLAIN_HTTP_MESSAGE if plain_http_without_cookie(request) else CSRF_MESSAGE)
    if not hmac.compare_digest(expected.encode(), supplied.encode()):
        raise Forbidden(CSRF_MESSAGE)


def _is_form(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind in ("application/x-www-form-urlencoded", "multipart/form-data")


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def optional_user(request: Request) -> User | None:
    """The logged-in user, or None (no session, or it ended, ran out or was revoked, or its user
    was removed). Looked up once per request."""
    if _USER in request.scope:
        cached: User | None = request.scope[_USER]
        return cached
    token = _cookie_token(request)
    settings = web_settings(request)
    user = None
    if token is not None:
        user = sessions.lookup(engine_of(request), settings.key.get(), token, settings.policy)
    request.scope[_USER] = user
    return user


def current_user(request: Request) -> User:
    """The logged-in user; anyone else is sent to the login form."""
    user = optional_user(request)
    if user is None:
        raise LoginRequired
    return user


def current_admin(request: Request) -> User:
    """The logged-in user when an admin; a reviewer gets 403 before anything is looked up."""
    user = current_user(request)
    if not user.is_admin:
        raise Forbidden("Forbidden: this page is for study administrators.")
    return user
