"""Reports a person reads: Markdown and self-contained HTML rendered from an analysis's JSON.

The JSON is the single source of every number; a report only formats and arranges it, so a
figure in a report can always be traced back to the JSON written beside it.

A benchmark builds its report once, as a :class:`Document` (:mod:`clinieval.report.document`),
from its JSON; :func:`render_markdown` and :func:`render_html` turn that one document into both
formats, and :func:`write_report` writes ``<stem>.json``, ``<stem>.md`` and ``<stem>.html``
atomically. Escaping lives only in the renderers (:mod:`clinieval.report.render`); head-to-head
heatmaps in :mod:`clinieval.report.heatmap`, line and bar charts in :mod:`clinieval.report.charts`.

Fitting is the layer's job, not a benchmark's: figures are laid out around their labels (widths
estimated in :mod:`clinieval.report.svgtext`), which wrap instead of being cut, and a table wraps its
cells and scrolls inside its own box only when it is still wider than the page.
"""

from clinieval.report.document import (
    Block,
    BulletList,
    Document,
    Inline,
    Link,
    Paragraph,
    Raw,
    Section,
    Strong,
    Table,
)
from clinieval.report.render import html_escape, render_html, render_markdown, write_report

__all__ = [
    "Block",
    "BulletList",
    "Document",
    "Inline",
    "Link",
    "Paragraph",
    "Raw",
    "Section",
    "Strong",
    "Table",
    "html_escape",
    "render_html",
    "render_markdown",
    "write_report",
]
