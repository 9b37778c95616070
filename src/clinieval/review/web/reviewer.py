"""The reviewer's pages: the queue ``/`` and one assignment ``/a/{id}`` (GET shows, POST saves).

A save runs in this order, and each step can stop it with a page that keeps what was typed:
the study's kind turns the form into a payload and validates it (422 with the
kind's message), then :func:`clinieval.review.reviewing.save` writes it, committed before we answer,
or refuses it as stale (409: the page shows what is stored now and keeps the reviewer's values in
the form, with the form's version moved to the stored one, so a second click saves them over it
knowingly). Only then does the browser get a redirect to the saved page.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.datastructures import UploadFile

from clinieval.errors import UserError
from clinieval.review import reviewing, store
from clinieval.review.db import ACTIONS, User
from clinieval.review.study_kinds import DECISIONS, REASONS, SCALE_RANGE, get_kind
from clinieval.review.study_kinds.form_fields import FormData, one
from clinieval.review.web import data, record
from clinieval.review.web.render import render
from clinieval.review.web.security import current_user, engine_of, found

router = APIRouter()

FLASH = {
    "save": "Draft saved (version {v}). You can come back to it later.",
    "submit": "Submitted (version {v}). You can still change it and submit again.",
}


STATUS_WORDS = {"pending": "Not started", "draft": "Draft saved", "submitted": "Submitted"}
"""A status as the queue says it."""


@router.get("/", response_class=HTMLResponse)
def queue_page(request: Request, user: User = Depends(current_user)) -> Response:
    """The reviewer's queue: a preview of every question, in the data's order, what is done, and
    a button to the first unfinished item of each study."""
    studies = data.queue(engine_of(request), user.id)
    done, total = data.queue_totals(studies)
    values = {"user": user, "studies": studies, "done": done, "total": total, "status_words": STATUS_WORDS}
    return render(request, "queue.html", values)


def owned(request: Request, assignment_id: int, user: User) -> reviewing.AssignmentView:
    """The assignment when it is ``user``'s; anything else is the same 404, admins included
    (an admin follows progress on the study pages, not inside a reviewer's response)."""
    return found(data.assignment_view(engine_of(request), assignment_id, user.id))


@router.post("/keepalive")
def keepalive(request: Request, user: User = Depends(current_user)) -> Response:
    """Renew the session's idle timer while a page is being edited (``review.js`` pings here on
    input, at most every 2 minutes): a clinician typing a long rationale makes no request, and
    30 idle minutes would end their session mid-sentence. Looking the session up renews it
    (:func:`clinieval.review.sessions.lookup`), which also enforces the absolute lifetime: a
    session past it gets 401 here like anywhere else."""
    return Response(status_code=204)


@router.get("/a/{assignment_id}", response_class=HTMLResponse)
def item_page(request: Request, assignment_id: int, user: User = Depends(current_user)) -> Response:
    view = owned(request, assignment_id, user)
    action = request.query_params.get("done")
    flash = FLASH[action].format(v=view.version) if action in FLASH else None
    state = get_kind(view.kind).form_state(view, view.payload)
    return item_response(request, user, view, state, view.version, flash=flash)


@router.post("/a/{assignment_id}", response_class=HTMLResponse)
async def save_item(request: Request, assignment_id: int, user: User = Depends(current_user)) -> Response:
    view = owned(request, assignment_id, user)
    form = await _form(request)
    action, version = one(form, "action"), _version(one(form, "version"))
    if action not in ACTIONS or version is None:
        return PlainTextResponse("Bad request: the form is incomplete. Reload the page.", status_code=400)
    kind = get_kind(view.kind)
    raw = kind.parse_form(view, form)
    state = kind.form_state(view, raw)
    try:
        payload = kind.validate(raw, view, view.config, partial=action == "save", names=view.names)
        reviewing.save(engine_of(request), view.id, user, payload, version, submit=action == "submit")
    except store.StaleSave:
        return _stale(request, user, view, state)
    except UserError as e:
        return item_response(request, user, view, state, version, error=str(e), status=422)
    return RedirectResponse(f"/a/{view.id}?done={action}", status_code=303)


def _stale(request: Request, user: User, view: reviewing.AssignmentView, state: dict[str, Any]) -> Response:
    """409: what is stored now, read-only, above the reviewer's own values still in the form."""
    now = data.assignment_view(engine_of(request), view.id, user.id) or view
    saved = get_kind(now.kind).summary(now, now.payload)
    stale = {"version": now.version, "status": now.status, "saved": saved}
    return item_response(request, user, now, state, now.version, stale=stale, status=409)


async def _form(request: Request) -> FormData:
    """The posted form as name → values; a file upload (never part of our forms) is ignored."""
    posted = await request.form()
    out: dict[str, list[str]] = {}
    for name, value in posted.multi_items():
        if not isinstance(value, UploadFile):
            out.setdefault(name, []).append(value)
    return out


def _version(raw: str | None) -> int | None:
    try:
        return int(raw) if raw is not None else None
    except ValueError:
        return None


def _record_tab(request: Request) -> str:
    """The record tab the page opens on: Raw when a raw page or the Raw tab was asked for by URL
    (the links a browser without script follows), else the chart."""
    query = request.query_params
    return "raw" if "page" in query or query.get("view") == "raw" else "chart"


def item_response(
    request: Request,
    user: User,
    view: reviewing.AssignmentView,
    state: dict[str, Any],
    version: int,
    *,
    flash: str | None = None,
    error: str | None = None,
    stale: dict[str, Any] | None = None,
    status: int = 200,
) -> Response:
    """The assignment's page (the kind's template, ``kind_<kind>.html``) with the record's first page, or the
    page named by ``?page=`` when the browser runs without script."""
    engine = engine_of(request)
    kind = get_kind(view.kind)
    text = data.assignment_context(engine, view.id, user.id) or ""
    starts = record.page_starts(text)
    page = record.clamp_page(request.query_params.get("page"), len(starts))
    context = {
        "user": user,
        "view": view,
        "assignment_id": view.id,
        "state": state,
        "version": version,
        "flash": flash,
        "error": error,
        "stale": stale,
        "status_words": STATUS_WORDS,
        "record_text": record.page_text(text, starts, page),
        "record_page": page,
        "record_pages": len(starts),
        "record_chars": len(text),
        "record_tab": _record_tab(request),
        "next_id": data.next_open(engine, user.id, view.id),
        "reasons": REASONS,
        "decisions": DECISIONS,
        "scale_values": list(range(SCALE_RANGE[0], SCALE_RANGE[1] + 1)),
        **kind.page_values(view.config),
    }
    return render(request, kind.template, context, status=status)
