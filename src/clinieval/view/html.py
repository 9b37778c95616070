"""The few HTML pieces every page of a results site shares: the page shell, numbers, embedded data.

Every piece of run text reaches a page through :func:`esc` (element text and attribute values) or
:func:`script_json` (data for the script), so a sample holding ``<script>`` is shown as text. The
pages load only the site's own ``view.css`` and ``view.js`` (and the patient chart's ``chart.css`` and
``chart.js``, shared with the review app): no CDN, nothing from the network, and
they work from ``file://``.
"""

from __future__ import annotations

import json
import math
from typing import Any

from clinieval.fsutil import finite_json
from clinieval.report.render import html_escape

esc = html_escape


def number(value: float | None) -> str:
    """A score as a person reads it: ``1``, ``0.6667``, ``—`` when there is none."""
    if value is None or not math.isfinite(value):
        return "—"
    if value == int(value) and abs(value) < 1e15:
        return str(int(value))
    if abs(value) < 0.001:  # four decimals would show a small non-zero value as 0
        return f"{value:.3g}"
    return f"{value:.4f}".rstrip("0").rstrip(".")


def script_json(data: Any, element_id: str) -> str:
    """``data`` as a ``<script type="application/json">`` the page's script reads with
    ``JSON.parse``. ``<``, ``>`` and ``&`` are written as JSON escapes, so no text in the data can
    close the element or start markup, whatever the runs hold; NaN becomes null (JSON has none)."""
    text = json.dumps(finite_json(data), ensure_ascii=False, allow_nan=False)
    text = text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")
    return f'<script type="application/json" id="{esc(element_id)}">{text}</script>'


def page(title: str, body: str, *, root: str) -> str:
    """A whole page; ``root`` is the way back to the site folder from it (``""`` or ``"../"``)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        '<meta name="generator" content="clinieval view">'
        f'<title>{esc(title)}</title><link rel="stylesheet" href="{root}view.css">'
        f'<link rel="stylesheet" href="{root}chart.css"></head>'
        f'<body>{body}<script src="{root}view.js"></script>'
        f'<script src="{root}chart.js"></script></body></html>\n'
    )


def pre(text: str, cls: str = "text") -> str:
    return f'<pre class="{cls}">{esc(text)}</pre>'


def table(header: list[str], rows: list[list[str]], *, element_id: str = "", cls: str = "") -> str:
    """A table from cells that are already HTML (callers escape text with :func:`esc`)."""
    attrs = (f' id="{esc(element_id)}"' if element_id else "") + (f' class="{cls}"' if cls else "")
    head = "".join(f"<th>{h}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{c}</td>" for c in row) + "</tr>" for row in rows)
    return f"<table{attrs}><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"
