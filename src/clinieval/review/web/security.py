"""Who is asking, and may they: the session's user, the CSRF token, and the role checks.

Every rule here runs on the server for every request; the browser is never trusted to hide a
button. The session is Starlette's signed cookie holding only the user's id and the CSRF token;
the role is read from the database on each request, so demoting an admin takes effect at once.

CSRF: one random token per session, put in every form (``csrf_token``) or sent by the page's
script as the ``X-CSRF-Token`` header, and compared on every POST by :func:`csrf_guard`, which the
app installs as a dependency of *every* route, so a route added later cannot forget it. The
``SameSite=Strict`` cookie already keeps other sites' forms out; the token is the second lock.
"""

from __future__ import annotations

import hmac
import secrets
from typing import Final

from fastapi import Request
from sqlalchemy import Engine

from clinieval.review.db import User, read_session

CSRF_FIELD: Final = "csrf_token"
CSRF_HEADER: Final = "x-csrf-token"
SAFE_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS"})

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


class NotFound(Exception):
    """Nothing here *for this user*: also what a reviewer gets for someone else's assignment, so
    the answer never tells whether it exists."""

    def __init__(self, message: str = "Not found.") -> None:
        super().__init__(message)
        self.message = message


class LoginRequired(Exception):
    """No one is logged in: a page sends the browser to the login form."""


def csrf_token(request: Request) -> str:
    """The session's CSRF token, made on first use (the login form needs one before any login)."""
    token = request.session.get("csrf")
    if not isinstance(token, str) or not token:
        token = secrets.token_urlsafe(32)
        request.session["csrf"] = token
    return token


def new_session(request: Request, user_id: int) -> None:
    """Start a fresh session for ``user_id``: whatever the session held before (an anonymous CSRF
    token, another user) is dropped, so a token seen before login is useless after it."""
    request.session.clear()
    request.session["uid"] = user_id
    request.session["csrf"] = secrets.token_urlsafe(32)


async def csrf_guard(request: Request) -> None:
    """Refuse any unsafe request whose token is missing or differs from the session's.

    The token is read from the header first, then from the form; Starlette keeps the parsed form
    on the request, so the route reads the same form again without a second parse."""
    if request.method in SAFE_METHODS:
        return
    expected = request.session.get("csrf")
    supplied: object = request.headers.get(CSRF_HEADER)
    if supplied is None and _is_form(request):
        form = await request.form()
        supplied = form.get(CSRF_FIELD)
    if not isinstance(expected, str) or not isinstance(supplied, str) or not expected:
        raise Forbidden(CSRF_MESSAGE)
    if not hmac.compare_digest(expected.encode(), supplied.encode()):
        raise Forbidden(CSRF_MESSAGE)


def _is_form(request: Request) -> bool:
    kind = request.headers.get("content-type", "").split(";", 1)[0].strip().lower()
    return kind in ("application/x-www-form-urlencoded", "multipart/form-data")


def engine_of(request: Request) -> Engine:
    engine: Engine = request.app.state.engine
    return engine


def optional_user(request: Request) -> User | None:
    """The logged-in user, or None (no session, or the user was deleted since)."""
    uid = request.session.get("uid")
    if not isinstance(uid, int):
        return None
    with read_session(engine_of(request)) as session:
        return session.get(User, uid)


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
