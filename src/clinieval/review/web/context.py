"""The record pane's endpoints: one page of the record, and a search over all its pages.

Both answer HTML fragments rendered by the same escaping templates as the full pages (the page's
script swaps them in), and both check that the assignment is the caller's before reading a byte
of the record: a reviewer cannot read another item's record by guessing an id.
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response

from clinieval.review.db import User
from clinieval.review.web import data, record
from clinieval.review.web.render import render
from clinieval.review.web.security import current_user, engine_of, found

router = APIRouter()


def _record(request: Request, assignment_id: int, user: User) -> str:
    return found(data.assignment_context(engine_of(request), assignment_id, user.id))


@router.get("/a/{assignment_id}/context", response_class=HTMLResponse)
def context_page(request: Request, assignment_id: int, user: User = Depends(current_user)) -> Response:
    """``?page=N`` (1-based; out of range lands on the nearest page): that page and the pager."""
    text = _record(request, assignment_id, user)
    starts = record.page_starts(text)
    page = record.clamp_page(request.query_params.get("page"), len(starts))
    values = {
        "user": user,
        "assignment_id": assignment_id,
        "record_text": record.page_text(text, starts, page),
        "record_page": page,
        "record_pages": len(starts),
        "record_chars": len(text),
    }
    return render(request, "_record_page.html", values)


@router.get("/a/{assignment_id}/search", response_class=HTMLResponse)
def context_search(request: Request, assignment_id: int, user: User = Depends(current_user)) -> Response:
    """``?q=term``: every page holding the term (case-insensitive), with short snippets."""
    text = _record(request, assignment_id, user)
    query, problem = record.clean_query(request.query_params.get("q"))
    hits = record.search(text, record.page_starts(text), query) if query else []
    values = {
        "user": user,
        "assignment_id": assignment_id,
        "query": query,
        "problem": problem,
        "hits": hits,
        "total": sum(h.count for h in hits),
    }
    return render(request, "_record_search.html", values)
