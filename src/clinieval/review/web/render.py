"""Rendering pages: one Jinja2 environment with autoescape always on, and one helper that hands
every template the things every page needs (the user, the CSRF token).

Autoescape is forced on for every template, not chosen by file extension: answers and records are
free text written by models and clinicians, and any of it could hold ``<script>``.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path
from typing import Any, Final

from fastapi import Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, FileSystemLoader, StrictUndefined

from clinieval.review.reviewing import letter
from clinieval.review.web.security import csrf_token, optional_user

TEMPLATES: Final = Path(__file__).resolve().parent.parent / "templates"
STATIC: Final = Path(__file__).resolve().parent.parent / "static"


@cache
def environment() -> Environment:
    env = Environment(
        loader=FileSystemLoader(str(TEMPLATES)),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.globals["letter"] = letter
    return env


def render(request: Request, template: str, context: dict[str, Any], status: int = 200) -> HTMLResponse:
    """``template`` filled with ``context`` plus ``request``, ``user`` and ``csrf_token``."""
    values: dict[str, Any] = {"user": None, **context}
    if "user" not in context:
        values["user"] = optional_user(request)
    values["request"] = request
    values["csrf_token"] = csrf_token(request)
    html = environment().get_template(template).render(values)
    return HTMLResponse(html, status_code=status)
