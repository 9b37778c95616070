"""The record as a chart on the assignment page, and the chart's script and style as static files.

The chart is built by :mod:`clinieval.ehr.chart_html`, which escapes every piece of record text
itself; it reaches the Jinja template as :class:`markupsafe.Markup` made here, in Python, so no
template applies ``|safe`` to anything. The script and stylesheet are the same files the static
results browser ships, served under ``/static/chart/`` (the Content-Security-Policy allows only
this app's own files).
"""

from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response
from markupsafe import Markup

from clinieval.ehr.chart import build_chart
from clinieval.ehr.chart_html import ASSETS, asset_text, render_chart

router = APIRouter()

_TYPES = {"chart.js": "text/javascript; charset=utf-8", "chart.css": "text/css; charset=utf-8"}


def chart_markup(text: str) -> Markup:
    """The chart of ``text`` ('' when there is no record: the raw tab says so)."""
    if not text:
        return Markup("")
    return Markup(render_chart(build_chart(text), prefix="chart"))


@router.get("/static/chart/{name}", include_in_schema=False)
def chart_asset(name: str) -> Response:
    """``chart.js`` or ``chart.css``; anything else is 404 (no path reaches the disk from here)."""
    if name not in ASSETS:
        return Response("Not found.", status_code=404, media_type="text/plain")
    return Response(asset_text(name), media_type=_TYPES[name])
