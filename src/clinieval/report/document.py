"""The document model every report is built as, before it is rendered to Markdown or HTML.

A report is a :class:`Document`: a title, warnings shown right under it, and blocks. A block is
running text (:class:`Paragraph`), a :class:`Table`, a :class:`BulletList`, a nested
:class:`Section` (its heading level is its depth) or :class:`Raw` markup that only HTML can show
(an inline SVG figure), with the blocks Markdown shows in its place.

Every string in the model is plain text exactly as it came from the data: the renderers escape
it for their format, so a builder never escapes anything (and cannot forget to).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, TypeAlias

ParagraphStyle = Literal["plain", "note", "warning"]


@dataclass(frozen=True)
class Strong:
    """Emphasised text inside a paragraph (``**…**`` in Markdown, ``<strong>`` in HTML)."""

    text: str


@dataclass(frozen=True)
class Link:
    """Text that links to another page (``[…](…)`` in Markdown, ``<a href>`` in HTML).

    ``href`` must be a relative path (a page of a results site beside the report): a scheme such as
    ``javascript:`` or ``http:`` is refused, so a report never runs script or reaches another host.
    """

    text: str
    href: str

    def __post_init__(self) -> None:
        head = self.href.split("/", 1)[0].split("#", 1)[0]
        if ":" in head or self.href.startswith("//") or any(c in self.href for c in '"<>\n\r'):
            raise ValueError(f"a report link must be a relative path, got {self.href!r}")


Inline: TypeAlias = str | Strong | Link
Cell: TypeAlias = str | Link
"""A table cell: text, or text linking to another page (numbers already formatted by the builder)."""


@dataclass(frozen=True)
class Paragraph:
    """Running text: one string, or pieces of which some are :class:`Strong`.

    ``note`` is secondary text (settings, how something was counted); ``warning`` is something
    a reader must see before trusting the numbers.
    """

    content: str | Sequence[Inline]
    style: ParagraphStyle = "plain"

    def parts(self) -> tuple[Inline, ...]:
        return (self.content,) if isinstance(self.content, str) else tuple(self.content)


@dataclass(frozen=True)
class Table:
    """A header and rows of cells: text (numbers already formatted by the builder) or links."""

    header: Sequence[str]
    rows: Sequence[Sequence[Cell]]

    def __post_init__(self) -> None:
        for i, row in enumerate(self.rows):
            if len(row) != len(self.header):
                raise ValueError(
                    f"table row {i} has {len(row)} cells but the header has {len(self.header)}: {row!r}"
                )


@dataclass(frozen=True)
class BulletList:
    items: Sequence[str]


@dataclass(frozen=True)
class Raw:
    """Trusted HTML (an inline SVG figure built by code, never text from the data unescaped).

    Markdown cannot show it and renders ``fallback`` instead: blocks carrying the same numbers
    (a figure's matrix as a table), or a short text when the figure only illustrates.
    """

    html: str
    fallback: str | Sequence[Block]


@dataclass(frozen=True)
class Section:
    """A heading and its blocks; a section inside a section is one heading level deeper.

    ``anchor`` becomes the HTML ``id`` of the section, for links into a long page.
    """

    title: str
    blocks: Sequence[Block]
    anchor: str | None = None


Block: TypeAlias = Paragraph | Table | BulletList | Raw | Section


@dataclass(frozen=True)
class Document:
    """A whole report: the title (Markdown ``#``, HTML ``<h1>`` and page title), warnings, blocks."""

    title: str
    blocks: Sequence[Block]
    warnings: Sequence[str] = ()
