"""Long text (a patient's record, a prompt) shown one page at a time.

A MedAlign record can run to hundreds of thousands of characters; laid out whole it makes a page
slow to open and impossible to navigate. So every long text is split into pages of about
:data:`PAGE_CHARS` characters: the first is written into the page as escaped text (readable with
scripts off), and all of them travel as JSON data that ``view.js`` swaps in, one at a time, with
previous / next buttons. Parts of the record the model never saw (see :mod:`clinieval.view.cut`)
are marked on every page they fall on.
"""

from __future__ import annotations

from collections.abc import Sequence

from clinieval.view.cut import CutRange
from clinieval.view.html import esc, script_json

PAGE_CHARS = 20_000
"""Characters per page; a page ends at a line break in its last fifth when there is one."""


def split_pages(text: str, size: int = PAGE_CHARS) -> list[tuple[int, str]]:
    """``text`` as ``(start offset, page)`` pairs that join back to it exactly; at least one page.

    A page ends just after the last line break in its final fifth, so lines are rarely cut in
    two; a text without one there is cut at exactly ``size`` characters."""
    if size < 1:
        raise ValueError("page size must be at least 1")
    pages: list[tuple[int, str]] = []
    start = 0
    while True:
        end = start + size
        if end >= len(text):
            pages.append((start, text[start:]))
            return pages
        newline = text.rfind("\n", start + size - size // 5, end)
        if newline >= 0:
            end = newline + 1
        pages.append((start, text[start:end]))
        start = end


def marked(text: str, start: int, cut: Sequence[CutRange]) -> str:
    """One page as HTML: escaped text with the parts inside ``cut`` in ``<span class="cut">``."""
    out: list[str] = []
    pos = 0
    for a, b in sorted(cut):
        lo, hi = max(a - start, pos), min(b - start, len(text))
        if lo >= hi:
            continue
        out.append(esc(text[pos:lo]))
        out.append(f'<span class="cut">{esc(text[lo:hi])}</span>')
        pos = hi
    out.append(esc(text[pos:]))
    return "".join(out)


def where(index: int, pages: Sequence[tuple[int, str]], total: int) -> str:
    """The pager's position line; ``view.js`` writes the same words when it turns the page."""
    start, text = pages[index]
    return f"page {index + 1} of {len(pages)} · characters {start + 1:,}–{start + len(text):,} of {total:,}"


def pager(text: str, pager_id: str, *, cut: Sequence[CutRange] = (), size: int = PAGE_CHARS) -> str:
    """``text`` as a ``<pre>``, with page controls and the pages as data when it is long."""
    pages = split_pages(text, size)
    first = f'<pre class="text">{marked(pages[0][1], 0, cut)}</pre>'
    if len(pages) == 1:
        return first
    data = {
        "pages": [p for _, p in pages],
        "starts": [s for s, _ in pages],
        "total": len(text),
        "cut": [list(c) for c in cut],
    }
    bar = (
        '<div class="pager-bar"><button type="button" data-step="-1" disabled>&#9664; previous</button> '
        f'<span class="pager-where">{esc(where(0, pages, len(text)))}</span> '
        '<button type="button" data-step="1">next &#9654;</button></div>'
    )
    return (
        f'<div class="pager" data-pager="{esc(pager_id)}">{bar}{first}'
        f"{script_json(data, pager_id + '-data')}</div>"
    )
