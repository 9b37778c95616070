"""A :class:`~clinieval.report.document.Document` as Markdown, as one self-contained HTML page,
and written beside its JSON.

Escaping happens here and only here: Markdown through :func:`clinieval.analysis.markdown.md_escape`
(table cells with the table rule; running text, which may sit beside ``**`` the renderer adds,
with the strict one), HTML through :func:`html_escape` for every piece of text, attributes
included. Only :class:`~clinieval.report.document.Raw` markup, which code builds, is copied as is.

The HTML page has no script and loads nothing: the styles are inline, figures are inline SVG, so
the file can be mailed or archived with a run and opened offline.
"""

from __future__ import annotations

import html
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval.analysis.markdown import md_escape
from clinieval.fsutil import atomic_write_json, atomic_write_text
from clinieval.report.document import (
    Block,
    BulletList,
    Cell,
    Document,
    Inline,
    Link,
    Paragraph,
    Section,
    Strong,
    Table,
)

MAX_HEADING = 6


def html_escape(value: object) -> str:
    """Text (or a number) as HTML text or an attribute value: ``& < > " '`` escaped."""
    return html.escape(str(value), quote=True)


# --- Markdown ------------------------------------------------------------------------------------


def _md_part(p: Inline, *, strict: bool = True) -> str:
    if isinstance(p, Strong):
        return f"**{md_escape(p.text, strict=True)}**"
    if isinstance(p, Link):
        # the href is a checked relative path; spaces and parentheses are percent-encoded for Markdown
        href = p.href.replace(" ", "%20").replace("(", "%28").replace(")", "%29")
        return f"[{md_escape(p.text, strict=True)}]({href})"
    return md_escape(p, strict=strict)


def _md_inline(parts: Sequence[Inline]) -> str:
    return "".join(_md_part(p) for p in parts)


def _md_table(t: Table) -> list[str]:
    lines = ["| " + " | ".join(md_escape(h) for h in t.header) + " |", "|" + "---|" * len(t.header)]
    lines += ["| " + " | ".join(_md_part(c, strict=False) for c in row) + " |" for row in t.rows]
    return [*lines, ""]


def _md_block(block: Block, depth: int) -> list[str]:
    if isinstance(block, Section):
        heading = "#" * min(depth, MAX_HEADING) + " " + md_escape(block.title, strict=True)
        return [heading, "", *_md_blocks(block.blocks, depth + 1)]
    if isinstance(block, Paragraph):
        text = _md_inline(block.parts())
        if block.style == "warning":
            return [f"> **Warning:** {text}", ""]
        return [f"_{text}_" if block.style == "note" else text, ""]
    if isinstance(block, Table):
        return _md_table(block)
    if isinstance(block, BulletList):
        return [*(f"- {md_escape(i, strict=True)}" for i in block.items), ""]
    fallback = block.fallback
    if isinstance(fallback, str):
        return [f"_{md_escape(fallback, strict=True)}_", ""]
    return _md_blocks(fallback, depth)


def _md_blocks(blocks: Sequence[Block], depth: int) -> list[str]:
    return [line for b in blocks for line in _md_block(b, depth)]


def render_markdown(doc: Document) -> str:
    """The document as Markdown: ``#`` title, warnings as quotes, sections as deeper headings."""
    lines = [f"# {md_escape(doc.title, strict=True)}", ""]
    lines += _md_blocks([Paragraph(w, "warning") for w in doc.warnings], 2)
    lines += _md_blocks(doc.blocks, 2)
    return "\n".join(lines).rstrip() + "\n"


# --- HTML ----------------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; padding: 0 1rem;
  color: #222; line-height: 1.4; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 2px solid #ccc; margin-top: 2.5rem; }
h3 { margin-top: 1.8rem; } h4, h5, h6 { margin-bottom: .3rem; }
.table-wrap { max-width: 100%; overflow-x: auto; margin: .5rem 0 1rem; }
table { border-collapse: collapse; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: left; vertical-align: top;
  overflow-wrap: break-word; }
th.num, td.num { text-align: right; } td.num { white-space: nowrap; }
th { background: #f2f2f2; }
tbody tr:nth-child(even) { background: #fafafa; }
.warning { background: #fff3cd; border: 1px solid #e0c36c; padding: .6rem 1rem; }
.note { color: #555; }
.figures { display: flex; flex-wrap: wrap; gap: 1.5rem; }
figure { margin: 0 0 1rem; max-width: 100%; min-width: 0; overflow-x: auto; }
figure > svg { display: block; max-width: none; }
figcaption { font-size: .85rem; color: #444; }
svg text { font-family: system-ui, sans-serif; }
.table-wrap::-webkit-scrollbar, figure::-webkit-scrollbar { height: 10px; }
.table-wrap::-webkit-scrollbar-track, figure::-webkit-scrollbar-track { background: #eee; }
.table-wrap::-webkit-scrollbar-thumb, figure::-webkit-scrollbar-thumb { background: #999;
  border-radius: 5px; }
"""
"""Wide content stays inside the page: a table sits in a box of its own that scrolls sideways when
even its wrapped cells are wider than the page, and so does a figure wider than the page (a figure
is never shrunk, which would shrink its text). The scroll bar is styled: browsers that honour
``::-webkit-scrollbar`` (Chromium, Safari) then draw it and give it room even where scroll bars are
otherwise hidden overlays, so a box that scrolls does not look cut at its right edge."""


def _html_part(p: Inline) -> str:
    if isinstance(p, Strong):
        return f"<strong>{html_escape(p.text)}</strong>"
    if isinstance(p, Link):
        return f'<a href="{html_escape(p.href)}">{html_escape(p.text)}</a>'
    return html_escape(p)


def _html_inline(parts: Sequence[Inline]) -> str:
    return "".join(_html_part(p) for p in parts)


def _text(cell: Cell) -> str:
    return cell.text if isinstance(cell, Link) else cell


# a cell that starts like a number: 0.5, -1.0e-04, 75.0%, [0.1, 0.2], 3/4, 40.0 ± 1.2; or "—"
_NUMBER = re.compile(r"^(—$|\[?[-−+]?\d)")


def _numeric_columns(t: Table) -> list[bool]:
    """Columns whose every cell is a number (or undefined): right-aligned, like a spreadsheet."""
    return [
        any(_text(row[j]) != "—" for row in t.rows) and all(_NUMBER.match(_text(row[j])) for row in t.rows)
        for j in range(len(t.header))
    ]


LONG_WORD = 16
"""A word longer than this (characters) in a table may wrap inside itself."""
_BREAK_AFTER = re.compile(r"(?<=[/@:_])(?=.)")


def _breakable(text: str) -> str:
    """Escaped text in which a long word (a model spec, a path) may wrap after ``/ @ : _``: a
    ``<wbr>`` marks each place, so a table cell wraps instead of pushing its table wider."""
    return " ".join(
        "<wbr>".join(html_escape(p) for p in _BREAK_AFTER.split(word))
        if len(word) > LONG_WORD
        else html_escape(word)
        for word in text.split(" ")
    )


def _html_cell(c: Cell) -> str:
    if isinstance(c, Link):
        return f'<a href="{html_escape(c.href)}">{_breakable(c.text)}</a>'
    return _breakable(c)


def _html_table(t: Table) -> str:
    cls = [' class="num"' if n else "" for n in _numeric_columns(t)]
    head = "".join(f"<th{c}>{_breakable(h)}</th>" for c, h in zip(cls, t.header, strict=True))
    body = "".join(
        "<tr>" + "".join(f"<td{c}>{_html_cell(v)}</td>" for c, v in zip(cls, row, strict=True)) + "</tr>"
        for row in t.rows
    )
    return f'<div class="table-wrap"><table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>'


def _html_block(block: Block, depth: int) -> str:
    if isinstance(block, Section):
        level = min(depth, MAX_HEADING)
        anchor = f' id="{html_escape(block.anchor)}"' if block.anchor else ""
        heading = f"<h{level}>{html_escape(block.title)}</h{level}>"
        return f"<section{anchor}>{heading}{_html_blocks(block.blocks, depth + 1)}</section>"
    if isinstance(block, Paragraph):
        text = _html_inline(block.parts())
        if block.style == "warning":
            return f'<p class="warning"><strong>Warning:</strong> {text}</p>'
        return f'<p class="note">{text}</p>' if block.style == "note" else f"<p>{text}</p>"
    if isinstance(block, Table):
        return _html_table(block)
    if isinstance(block, BulletList):
        return "<ul>" + "".join(f"<li>{html_escape(i)}</li>" for i in block.items) + "</ul>"
    return block.html


def _html_blocks(blocks: Sequence[Block], depth: int) -> str:
    return "".join(_html_block(b, depth) for b in blocks)


def render_html(doc: Document) -> str:
    """The document as one HTML page: no script, no external resource, text escaped."""
    body = f"<h1>{html_escape(doc.title)}</h1>"
    body += _html_blocks([Paragraph(w, "warning") for w in doc.warnings], 2)
    body += _html_blocks(doc.blocks, 2)
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html_escape(doc.title)}</title><style>{CSS}</style></head>"
        f"<body>{body}</body></html>\n"
    )


# --- files ---------------------------------------------------------------------------------------


def write_report(
    result: Any, doc: Document, out_dir: Path, stem: str, *, json_stem: str | None = None
) -> list[Path]:
    """``<stem>.json`` (``<json_stem>.json`` when given), ``<stem>.md`` and ``<stem>.html`` in
    ``out_dir``, each written atomically; the paths in that order.

    ``result`` is the JSON the document was built from (the single source of its numbers). Both
    renderings are produced before anything is written, so a rendering error leaves the folder
    as it was.
    """
    md, page = render_markdown(doc), render_html(doc)
    paths = [out_dir / f"{json_stem or stem}.json", out_dir / f"{stem}.md", out_dir / f"{stem}.html"]
    atomic_write_json(paths[0], result)
    atomic_write_text(paths[1], md)
    atomic_write_text(paths[2], page)
    return paths
