"""The record beside the answers, in pages: a 500k-token note must stay usable in a browser.

Why pages and not the whole text: a MedAlign record can run to millions of characters, and one
giant ``<pre>`` makes the page freeze, the form lag and Ctrl+F crawl. The server cuts the text into
pages of about :data:`PAGE_CHARS` characters (at a line break when one is near, so a line is not torn
in two), sends one page at a time, and answers a search over *all* pages with the page numbers that
hold the term. Pure functions over a string: the routes in :mod:`.context` call them.
"""

from __future__ import annotations

import bisect
import re
from dataclasses import dataclass

PAGE_CHARS = 20_000
"""Characters per page; a page is never longer, and shorter only to end at a line break."""

MAX_QUERY_CHARS = 200
"""A longer search term is refused: nobody types one, and it bounds the work per request."""

SNIPPETS_PER_PAGE = 3
SNIPPET_RADIUS = 50
"""Characters of text shown either side of a hit in a snippet."""


def page_starts(text: str, size: int = PAGE_CHARS) -> list[int]:
    """The offset where each page begins (the first is 0; an empty text is one empty page).

    A page ends after the last line break in its second half, else after the last space there,
    else exactly at ``size`` characters: near-even pages, lines kept whole when possible."""
    starts = [0]
    pos = 0
    while len(text) - pos > size:
        limit = pos + size
        floor = pos + size // 2
        cut = text.rfind("\n", floor, limit)
        if cut == -1:
            cut = text.rfind(" ", floor, limit)
        pos = cut + 1 if cut != -1 else limit
        starts.append(pos)
    return starts


def page_count(starts: list[int]) -> int:
    return len(starts)


def page_text(text: str, starts: list[int], page: int) -> str:
    """Page ``page`` (1-based; the caller has clamped it to ``1..len(starts)``)."""
    begin = starts[page - 1]
    end = starts[page] if page < len(starts) else len(text)
    return text[begin:end]


def clamp_page(raw: str | None, pages: int) -> int:
    """A page number from a query string: a bad or out-of-range value lands on the nearest page,
    because a stale link (the record changed, a typo in the URL) should still show something."""
    try:
        page = int(raw) if raw is not None else 1
    except ValueError:
        page = 1
    return min(max(page, 1), pages)


@dataclass(frozen=True)
class Snippet:
    """Text around one hit; the template escapes all three parts and marks ``match``."""

    before: str
    match: str
    after: str


@dataclass(frozen=True)
class PageHits:
    page: int
    count: int
    snippets: tuple[Snippet, ...]


def _flat(text: str) -> str:
    """Line breaks and tabs as spaces, so a snippet reads as one short line."""
    return re.sub(r"\s+", " ", text)


def _snippet(text: str, start: int, end: int) -> Snippet:
    before = text[max(0, start - SNIPPET_RADIUS) : start]
    after = text[end : end + SNIPPET_RADIUS]
    return Snippet(
        before=("…" if start > SNIPPET_RADIUS else "") + _flat(before).lstrip(),
        match=_flat(text[start:end]),
        after=_flat(after).rstrip() + ("…" if end + SNIPPET_RADIUS < len(text) else ""),
    )


def search(text: str, starts: list[int], query: str) -> list[PageHits]:
    """Every page holding ``query`` (case-insensitive, literal), in page order, with its number of
    hits and up to :data:`SNIPPETS_PER_PAGE` snippets. A hit that crosses a page break counts for
    the page it starts on. ``re`` with IGNORECASE rather than ``lower()``: lower-casing can change a
    string's length (``İ``), which would shift every offset after it."""
    counts: dict[int, int] = {}
    snippets: dict[int, list[Snippet]] = {}
    for hit in re.finditer(re.escape(query), text, re.IGNORECASE):
        page = bisect.bisect_right(starts, hit.start())
        counts[page] = counts.get(page, 0) + 1
        shown = snippets.setdefault(page, [])
        if len(shown) < SNIPPETS_PER_PAGE:
            shown.append(_snippet(text, hit.start(), hit.end()))
    return [PageHits(page, counts[page], tuple(snippets[page])) for page in sorted(counts)]


def clean_query(raw: str | None) -> tuple[str, str | None]:
    """The search term to use and, when it cannot be used, why (shown to the reviewer)."""
    query = (raw or "").strip()
    if not query:
        return "", "Type a word or phrase to search the record."
    if len(query) > MAX_QUERY_CHARS:
        return "", f"The search term is too long (at most {MAX_QUERY_CHARS} characters)."
    return query, None
