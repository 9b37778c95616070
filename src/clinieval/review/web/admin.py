"""The administrator's pages: ``/admin`` (every study's progress) and ``/admin/studies/{name}``
(progress per reviewer and the live inter-rater agreement).

Admins see counts and agreement, never a reviewer's individual answers and never a model name:
whatever the agreement module returns is rendered generically, so any text in it that names one of
the study's models is replaced before it reaches the page (blinding holds for admins too, who may
also review). A reviewer asking for these pages gets 403 before any study is looked up.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping
from typing import Final

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from sqlalchemy import Engine

from clinieval.errors import UserError
from clinieval.review import store
from clinieval.review.db import User
from clinieval.review.web import data
from clinieval.review.web.render import render
from clinieval.review.web.security import NotFound, current_admin, engine_of

router = APIRouter()

HIDDEN: Final = "[model hidden]"
MAX_ROWS: Final = 500
"""Agreement rows shown at most (a per-item breakdown of a large study would swamp the page)."""


@router.get("/admin", response_class=HTMLResponse)
def admin_home(request: Request, user: User = Depends(current_admin)) -> Response:
    engine = engine_of(request)
    studies = [store.progress(engine, s.name) for s in store.list_studies(engine)]
    users = store.list_users(engine)
    return render(request, "admin.html", {"user": user, "studies": studies, "users": users})


@router.get("/admin/studies/{name}", response_class=HTMLResponse)
def admin_study(request: Request, name: str, user: User = Depends(current_admin)) -> Response:
    engine = engine_of(request)
    try:
        progress = store.progress(engine, name)
    except store.NotFound:
        raise NotFound("No study of that name.") from None
    rows, note = agreement_rows(engine, name)
    values = {"user": user, "progress": progress, "agreement": rows, "agreement_note": note}
    return render(request, "admin_study.html", values)


def agreement_rows(engine: Engine, study: str) -> tuple[list[tuple[str, str]], str | None]:
    """The study's agreement as (measure, value) rows, or no rows and a note saying why."""
    try:
        from clinieval.review.agreement import study_agreement  # numpy and scipy: loaded on first use
    except ImportError:  # pragma: no cover - the module ships with this package
        return [], "Agreement: not available yet."
    try:
        result = study_agreement(engine, study)
    except UserError as e:
        return [], f"Agreement: not available yet ({e})."
    hide = redactor(data.study_sources(engine, study))
    rows = [(hide(k), hide(v)) for k, v in flatten(result)]
    if not rows:
        return [], "Agreement: not available yet (no submitted reviews overlap)."
    note = f"Showing the first {MAX_ROWS} of {len(rows)} rows." if len(rows) > MAX_ROWS else None
    return rows[:MAX_ROWS], note


def flatten(value: object, prefix: str = "") -> Iterator[tuple[str, str]]:
    """Nested mappings and lists as ``a / b / c`` → value rows, numbers shown to 3 decimals."""
    if isinstance(value, Mapping):
        for k, v in value.items():
            yield from flatten(v, f"{prefix} / {k}" if prefix else str(k))
    elif isinstance(value, list | tuple) and not all(_scalar(v) for v in value):
        for i, v in enumerate(value, 1):
            yield from flatten(v, f"{prefix} / {i}")
    else:
        yield prefix or "value", shown(value)


def _scalar(value: object) -> bool:
    return value is None or isinstance(value, str | int | float | bool)


def shown(value: object) -> str:
    if isinstance(value, bool) or value is None:
        return {True: "yes", False: "no", None: "—"}[value]
    if isinstance(value, float):
        return "—" if not math.isfinite(value) else f"{value:.3f}"
    if isinstance(value, list | tuple):
        return ", ".join(shown(v) for v in value)
    return str(value)


def redactor(sources: list[str]) -> Callable[[str], str]:
    """A function that replaces every model name in a text (longest first, so a name that holds
    another is hidden whole)."""
    names = sorted({s for s in sources if s}, key=len, reverse=True)

    def hide(text: str) -> str:
        for name in names:
            text = text.replace(name, HIDDEN)
        return text

    return hide
