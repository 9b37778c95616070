"""Text inside the report's SVG figures: how wide a label will be drawn, wrapping it onto lines,
and the markup of a label of several lines.

A figure is built without a browser, so the layout cannot measure its text; it estimates each
label's width from per-character advance widths instead, and is laid out around those estimates
(an axis grows, a chart turns its bars sideways) so that no label is ever cut or drawn over
another. The widths are the larger of DejaVu Sans (what ``system-ui`` is on most Linux desktops,
one of the widest sans-serif faces) and Liberation Sans (Arial's metrics), with a margin on top,
so the estimate errs wide on other systems' fonts.

A label too wide for its line is wrapped: at spaces first, then after punctuation inside a long
word (a model spec such as ``openai:http://host:8080/v1@model`` breaks after ``/``, ``@``, ``:``,
``-``), then anywhere. Every character is kept, so a wrapped label reads as the whole label.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence

from clinieval.report.render import html_escape as _e

# advance widths of the printable ASCII characters, space to tilde, in thousandths of an em
_ASCII_WIDTHS = (
    318, 401, 460, 838, 636, 950, 780, 275, 390, 390, 500, 838, 318, 361, 318, 337, 636, 636, 636,
    636, 636, 636, 636, 636, 636, 636, 337, 337, 838, 838, 838, 556, 1015, 684, 686, 722, 770, 667,
    611, 778, 752, 295, 500, 667, 557, 863, 748, 787, 667, 787, 722, 667, 611, 732, 684, 989, 685,
    667, 685, 390, 337, 390, 838, 556, 500, 613, 635, 550, 635, 615, 352, 635, 634, 278, 278, 579,
    278, 974, 634, 612, 635, 635, 411, 521, 392, 634, 592, 818, 592, 592, 525, 636, 337, 636, 838,
)  # fmt: skip
OTHER_EM, WIDE_EM, MARGIN = 0.75, 1.0, 1.08
LINE_HEIGHT = 1.2
"""Distance between the baselines of a wrapped label's lines, in ems."""

# a long word may break after one of these (kept at the end of the line)
_PIECE = re.compile(r"[^/\-@:_,.;|+=&?]*[/\-@:_,.;|+=&?]?")


def _char_em(c: str) -> float:
    code = ord(c)
    if 32 <= code < 127:
        return _ASCII_WIDTHS[code - 32] / 1000
    if unicodedata.combining(c):
        return 0.0
    return WIDE_EM if unicodedata.east_asian_width(c) in ("W", "F") else OTHER_EM


def text_width(text: str, size: float) -> float:
    """Estimated width in px of ``text`` at font size ``size`` px (errs wide)."""
    return sum(_char_em(c) for c in text) * size * MARGIN


def _split_word(word: str, width: float, size: float) -> list[str]:
    """A word too wide for a line, in pieces that each fit: after punctuation, else anywhere."""
    if text_width(word, size) <= width:
        return [word]
    pieces: list[str] = []
    for part in (p for p in _PIECE.findall(word) if p):
        if text_width(part, size) <= width:
            pieces.append(part)
            continue
        chunk = ""
        for c in part:
            if chunk and text_width(chunk + c, size) > width:
                pieces.append(chunk)
                chunk = ""
            chunk += c
        pieces.append(chunk)
    return pieces


def wrap(text: str, width: float, size: float) -> list[str]:
    """``text`` as lines no wider than ``width`` px: broken at spaces, and inside a word only when
    the word alone is wider than a line. Nothing is dropped but the spaces lines break at."""
    lines: list[str] = []
    line = ""
    for word in text.split():
        for k, piece in enumerate(_split_word(word, width, size)):
            candidate = line + (" " if k == 0 and line else "") + piece
            if line and text_width(candidate, size) > width:
                lines.append(line)
                line = piece
            else:
                line = candidate
    return [*lines, line] if line or not lines else lines


def block_width(lines: Sequence[str], size: float) -> float:
    """Estimated width in px of the widest line."""
    return max((text_width(line, size) for line in lines), default=0.0)


def narrowest_wrap(text: str, size: float, max_lines: int, *, split_words: bool = False) -> float:
    """The narrowest line width (px) at which ``text`` wraps onto at most ``max_lines`` lines:
    without breaking a word, or (``split_words``) breaking the words too long for such a line."""
    if split_words:
        width = max(text_width(text, size) / max_lines, 2 * size)
    else:
        width = max((text_width(w, size) for w in text.split()), default=0.0)
    while len(wrap(text, width, size)) > max_lines:
        width += size / 2
    return width


def multiline_text(
    lines: Sequence[str],
    x: float,
    y: float,
    *,
    size: float,
    anchor: str = "start",
    title: str | None = None,
    transform: str | None = None,
    css_class: str = "label",
) -> str:
    """A ``<text>`` element of one ``<tspan>`` per line, the first baseline at ``y``; each further
    line one :data:`LINE_HEIGHT` lower. ``title`` (the whole label) becomes its tooltip."""
    step = size * LINE_HEIGHT
    where = f' transform="{transform}"' if transform else ""
    spans = "".join(
        f'<tspan x="{x:.1f}" {"y" if i == 0 else "dy"}="{y if i == 0 else step:.1f}">{_e(line)}</tspan>'
        for i, line in enumerate(lines)
    )
    tip = f"<title>{_e(title)}</title>" if title is not None else ""
    return f'<text class="{css_class}"{where} font-size="{size:g}" text-anchor="{anchor}">{tip}{spans}</text>'


def lines_height(count: int, size: float) -> float:
    """Height in px taken by ``count`` lines of a label, from the first line's top to the last
    line's bottom (ascent of the first, descent of the last)."""
    return (max(count, 1) - 1) * size * LINE_HEIGHT + size * 1.2
