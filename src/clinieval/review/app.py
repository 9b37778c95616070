"""The review web app: :func:`create_app` wires the pages, the sessions, the CSRF check and the
error pages around one database engine; :func:`serve` runs it on the loopback interface.

Why these defaults: the data is patient records and the people are clinicians on a hospital
network. The app binds to 127.0.0.1 unless told otherwise, pages are never cached by the browser
(``Cache-Control: no-store``), the Content-Security-Policy allows only the app's own files (no
CDN, no inline script), and the access log keeps the path but drops the query string, where a
record search term would otherwise be logged.
"""

from __future__ import annotations

import ipaddress
import logging
from collections.abc import Awaitable, Callable
from typing import Final
from urllib.parse import quote

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, RedirectResponse, Response
from fastapi.staticfiles import StaticFiles
from sqlalchemy import Engine
from starlette.exceptions import HTTPException as StarletteHTTPException

from clinieval.errors import UserError
from clinieval.review.sessions import SessionKey, SessionPolicy, ThrottlePolicy
from clinieval.review.web import admin, auth, chart, context, reviewer
from clinieval.review.web.render import STATIC, render
from clinieval.review.web.security import (
    CookieJar,
    Forbidden,
    LoginRequired,
    NotFound,
    WebSettings,
    csrf_guard,
)

DEFAULT_HOST: Final = "127.0.0.1"
DEFAULT_PORT: Final = 8000

HEADERS: Final = {
    "Cache-Control": "no-store",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",
    "Content-Security-Policy": (
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    ),
}


def create_app(
    engine: Engine,
    *,
    secure_cookies: bool = False,
    session_policy: SessionPolicy | None = None,
    throttle: ThrottlePolicy | None = None,
    trusted_proxies: frozenset[str] = frozenset(),
) -> FastAPI:
    """The app over ``engine``. Every route depends on :func:`csrf_guard` (a no-op for GET), so a
    POST without the session's token never reaches a handler.

    ``secure_cookies`` marks the cookie ``Secure`` on every answer (it is anyway on a request that
    came over HTTPS): what ``serve --allow-remote`` sets, as the app then sits behind an HTTPS
    proxy while seeing plain HTTP itself. ``session_policy`` sets the idle and absolute session
    lifetimes, ``throttle`` the failed sign-ins allowed (their defaults: 30 minutes, 12 hours; 5
    per name and 20 per address in 15 minutes). ``trusted_proxies``: the peers whose
    ``X-Forwarded-Proto``/``X-Forwarded-For`` are believed (:mod:`clinieval.review.web.security`).
    The session key is read from its file beside the
    database (made here when missing, e.g. for a copied database)."""
    from fastapi import Depends

    app = FastAPI(
        title="clinieval review",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=[Depends(csrf_guard)],
    )
    app.state.engine = engine
    app.state.web = WebSettings(
        key=SessionKey.for_url(engine.url),
        policy=session_policy or SessionPolicy(),
        throttle=throttle or ThrottlePolicy(),
        secure_cookies=secure_cookies,
        trusted_proxies=trusted_proxies,
    )
    for module in (auth, reviewer, context, chart, admin):
        app.include_router(module.router)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    _install_errors(app)
    app.middleware("http")(_headers)
    app.add_middleware(CookieJar)
    return app


async def _headers(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
    """Security headers on every answer."""
    response = await call_next(request)
    for name, value in HEADERS.items():
        if name == "Cache-Control" and request.url.path.startswith("/static/"):
            continue
        response.headers.setdefault(name, value)
    return response


def _install_errors(app: FastAPI) -> None:
    """Every refusal is one plain sentence; nothing echoes the request (which may hold patient
    text) and nothing says whether another user's assignment exists."""

    async def forbidden(request: Request, exc: Exception) -> Response:
        message = exc.message if isinstance(exc, Forbidden) else "Forbidden."
        if request.method != "GET":
            return PlainTextResponse(message, status_code=403)
        return render(request, "error.html", {"title": "Forbidden", "message": message}, status=403)

    async def not_found(request: Request, exc: Exception) -> Response:
        message = exc.message if isinstance(exc, NotFound) else "Not found."
        return render(request, "error.html", {"title": "Not found", "message": message}, status=404)

    async def login_required(request: Request, exc: Exception) -> Response:
        if request.method != "GET":
            return PlainTextResponse("You are not logged in. Nothing was saved.", status_code=401)
        return RedirectResponse(f"/login?next={quote(request.url.path)}", status_code=303)

    async def http_error(request: Request, exc: Exception) -> Response:
        status = exc.status_code if isinstance(exc, StarletteHTTPException) else 500
        if status == 404:
            return await not_found(request, exc)
        return PlainTextResponse(
            _STATUS_TEXT.get(status, "The request could not be handled."), status_code=status
        )

    async def bad_request(request: Request, exc: Exception) -> Response:
        # only path parameters are declared (an assignment id); a malformed one names nothing
        return await not_found(request, exc)

    app.add_exception_handler(Forbidden, forbidden)
    app.add_exception_handler(NotFound, not_found)
    app.add_exception_handler(LoginRequired, login_required)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, bad_request)


_STATUS_TEXT: Final = {
    400: "Bad request.",
    405: "This page does not accept that kind of request.",
    413: "The form is too large.",
}


# --- serving -----------------------------------------------------------------------------------------


class _NoQuery(logging.Filter):
    """Drop the query string from uvicorn's access log lines: ``/a/3/search?q=<a diagnosis>``
    is logged as ``/a/3/search``."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and len(args) >= 3 and isinstance(args[2], str):
            record.args = (*args[:2], args[2].split("?", 1)[0], *args[3:])
        return True


def check_host(host: str, allow_remote: bool) -> None:
    """Refuse a non-loopback address unless the user said so: a review server on all interfaces
    shows patient records to the whole network."""
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback and not allow_remote:
        raise UserError(
            f"refusing to listen on {host}: the review app binds to the loopback address by default; "
            "put it behind your hospital's HTTPS proxy and pass --allow-remote to listen elsewhere"
        )


def serve(
    engine: Engine,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    *,
    allow_remote: bool = False,
    session_policy: SessionPolicy | None = None,
    trusted_proxies: frozenset[str] = frozenset(),
) -> None:
    """Run the app with uvicorn until interrupted (what ``clinieval review serve`` calls). With
    ``allow_remote`` (only behind an HTTPS proxy) the cookie is always ``Secure``; behind
    ``trusted_proxies`` it is whenever the browser is on HTTPS. uvicorn's own proxy-header
    handling stays off: the app reads the headers itself, from those peers only."""
    import uvicorn

    check_host(host, allow_remote)
    app = create_app(
        engine, secure_cookies=allow_remote, session_policy=session_policy, trusted_proxies=trusted_proxies
    )
    config = uvicorn.Config(app, host=host, port=port, server_header=False, proxy_headers=False)
    logging.getLogger("uvicorn.access").addFilter(_NoQuery())  # after Config, which sets up logging
    uvicorn.Server(config).run()
