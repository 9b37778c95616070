"""``/login`` and ``/logout``: the only pages open to someone not logged in.

A wrong name and a wrong password get the same message, so the form does not tell a stranger
which user names exist. Too many failures for one name or from one address within the window
(:class:`clinieval.review.sessions.ThrottlePolicy`) get 429 and "Too many failed sign-ins; try
again in N minutes." without the password being checked, the right one included; the count is
kept per name typed, known or not, so this does not tell which names exist either. Every attempt,
succeeded, failed or throttled, is also an audit row for good (the name as typed, the client
address, the outcome; never the password): the throttle's own counts are pruned. Logging out is
a POST (with the CSRF token), so a link on another site cannot log a reviewer out in the middle of
their work; it ends the session on the server, so a copy of the cookie stops working too.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from starlette.concurrency import run_in_threadpool

from clinieval.review import accounts, sessions
from clinieval.review.web.render import render
from clinieval.review.web.security import (
    client_address,
    end_session,
    engine_of,
    new_session,
    optional_user,
    web_settings,
)

router = APIRouter()

MAX_FIELD = 500
"""Longer names or passwords are refused without hashing them (argon2 on megabytes is slow)."""


def safe_next(raw: object) -> str:
    """Where to go after login: a path on this site only (``/a/3``), never ``//evil`` or a URL."""
    if isinstance(raw, str) and raw.startswith("/") and not raw.startswith("//") and "\\" not in raw:
        return raw
    return "/"


@router.get("/login", response_class=HTMLResponse)
def login_form(request: Request) -> Response:
    if optional_user(request) is not None:
        return RedirectResponse(safe_next(request.query_params.get("next")), status_code=303)
    return render(
        request, "login.html", {"error": None, "name": "", "next": request.query_params.get("next")}
    )


def throttled_message(minutes: int) -> str:
    return f"Too many failed sign-ins; try again in {minutes} minute{'' if minutes == 1 else 's'}."


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await request.form()
    # argon2 and the database off the event loop: other reviewers' requests go on meanwhile
    return await run_in_threadpool(_login, request, form.get("name"), form.get("password"), form.get("next"))


def _login(request: Request, name: object, password: object, target: object) -> Response:
    engine, settings = engine_of(request), web_settings(request)
    address = client_address(request)
    shown = name.strip() if isinstance(name, str) and len(name) <= MAX_FIELD else ""
    context = {"name": shown, "next": target, "user": None}
    user = None
    if isinstance(name, str) and isinstance(password, str) and 0 < len(name) + len(password) <= MAX_FIELD:
        until = sessions.refused_until(engine, name.strip(), address, settings.throttle)
        if until is not None:
            sessions.note_throttled(engine, name.strip(), address)
            minutes = sessions.minutes_until(until)
            page = render(request, "login.html", {**context, "error": throttled_message(minutes)}, status=429)
            page.headers["Retry-After"] = str(minutes * 60)
            return page
        user = accounts.verify_user(engine, name.strip(), password)
        if user is None:
            sessions.note_failure(engine, name.strip(), address, settings.throttle)
        else:
            sessions.note_success(engine, name.strip())
    else:
        sessions.note_malformed(engine, name.strip() if isinstance(name, str) else "", address)
    if user is None:
        return render(request, "login.html", {**context, "error": "Wrong user name or password."}, status=401)
    new_session(request, user)
    default = "/admin" if user.is_admin else "/"
    return RedirectResponse(safe_next(target) if target else default, status_code=303)


@router.post("/logout")
def logout(request: Request) -> Response:
    end_session(request)
    return RedirectResponse("/login", status_code=303)
