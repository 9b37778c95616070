"""The record as a chart on the assignment page, and the chart's script and style as static files.

The chart is built by :mod:`clinieval.ehr.chart_html`, which escapes every piece of record text
itself; it reaches the Jinja template as :class:`markupsafe.Markup` made here, in Python, so no
template applies ``|safe`` to anything. The script and stylesheet are the same files the static
results browser ships, served under ``/static/chart/`` (the Content-Security-Policy allows only
this app's own files).
"""

from __future__ import annotations

from fastapi import APIRouter, Depends, Request
from fastapi.responses import HTMLResponse, Response
from markupsafe import Markup

from clinieval.ehr.chart import build_chart
from clinieval.ehr.chart_html import ASSETS, asset_text, render_chart
from clinieval.review.db import User
from clinieval.review.web import data
from clinieval.review.web.security import current_user, engine_of, found

router = APIRouter()

_TYPES = {"chart.js": "text/javascript; charset=utf-8", "chart.css": "text/css; charset=utf-8"}


CHART_MAX_CHARS = 5_000_000
"""A longer record is not charted (its HTML would hold the browser for seconds): Raw pages it."""


def chart_markup(text: str) -> Markup:
    """The chart of ``text`` ('' when there is no record: the raw tab says so)."""
    if not text:
        return Markup("")
    if len(text) > CHART_MAX_CHARS:
        return Markup(
            f'<p id="chart-too-long" class="muted">This record is {len(text):,} characters long, too long'
            " to show as a chart; read it on the Raw tab.</p>"
        )
    return Markup(render_chart(build_chart(text), prefix="chart"))


@router.get("/a/{assignment_id}/chart", response_class=HTMLResponse)
def chart_fragment(request: Request, assignment_id: int, user: User = Depends(current_user)) -> Response:
    """The record's chart as a fragment the page's script swaps in after the page (and its form)
    has shown: the item page stays a few kilobytes whatever the record's length. Checks that the
    assignment is the caller's before reading the record, like the raw pages."""
    text = found(data.assignment_context(engine_of(request), assignment_id, user.id))
    return HTMLResponse(str(chart_markup(text)))


@router.get("/static/chart/{name}", include_in_schema=False)
def chart_asset(name: str) -> Response:
    """``chart.js`` or ``chart.css``; anything else is 404 (no path reaches the disk from here)."""
    if name not in ASSETS:
        return Response("Not found.", status_code=404, media_type="text/plain")
    return Response(asset_text(name), media_type=_TYPES[name])
