"""``/login`` and ``/logout``: the only pages open to someone not logged in.

A wrong name and a wrong password get the same message, so the form does not tell a stranger
which user names exist. Logging out is a POST (with the CSRF token), so a link on another site
cannot log a reviewer out in the middle of their work.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response

from clinieval.review import store
from clinieval.review.web.render import render
from clinieval.review.web.security import engine_of, new_session, optional_user

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


@router.post("/login", response_class=HTMLResponse)
async def login(request: Request) -> Response:
    form = await request.form()
    name, password, target = form.get("name"), form.get("password"), form.get("next")
    user = None
    if isinstance(name, str) and isinstance(password, str) and 0 < len(name) + len(password) <= MAX_FIELD:
        user = store.verify_user(engine_of(request), name.strip(), password)
    if user is None:
        shown = name.strip() if isinstance(name, str) and len(name) <= MAX_FIELD else ""
        context = {"error": "Wrong user name or password.", "name": shown, "next": target}
        return render(request, "login.html", {**context, "user": None}, status=401)
    new_session(request, user.id)
    default = "/admin" if user.is_admin else "/"
    return RedirectResponse(safe_next(target) if target else default, status_code=303)


@router.post("/logout")
def logout(request: Request) -> Response:
    request.session.clear()
    return RedirectResponse("/login", status_code=303)
