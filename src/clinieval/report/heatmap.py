"""Head-to-head win-rate matrices as inline SVG heatmaps, with the matrix as a Markdown table.

Reads the ``head_to_head`` JSON of :func:`clinieval.analysis.analyze.analyze` (``models``,
``rates[i][j]`` = share of battles row i won against column j, ``battles``). Every cell shows its
number, so the figure never hides one; names are escaped (they are free text) and shown whole on
the axes (wrapped onto several lines when long), with the name in a tooltip as well.
"""

from __future__ import annotations

from typing import Any

from clinieval.analysis.markdown import md_number
from clinieval.report.document import Block, Paragraph, Raw, Table
from clinieval.report.render import html_escape as _e
from clinieval.report.svgtext import (
    LINE_HEIGHT,
    block_width,
    lines_height,
    multiline_text,
    narrowest_wrap,
    text_width,
    wrap,
)

JSON = dict[str, Any]

CELL_W, CELL_H, FONT, PAD, GAP = 64, 30, 11, 8, 6
MAX_LABEL = 220
"""Width (px) the row labels wrap within."""
LEGEND_STEPS, LEGEND_BOX = 11, 14
LEGEND_W = LEGEND_STEPS * LEGEND_BOX + 80
LOW, MID, HIGH = (215, 48, 39), (247, 247, 247), (33, 102, 172)
STEP = FONT * LINE_HEIGHT
COLUMN_LINES = int((CELL_W - GAP - 1.2 * FONT) // STEP) + 1
"""Lines a column's label, turned upright, may take within the column's width."""


def _colour(rate: float) -> str:
    """Diverging scale: red (0) through light grey (0.5) to blue (1)."""
    t = min(max(rate, 0.0), 1.0)
    a, b, f = (LOW, MID, t * 2) if t <= 0.5 else (MID, HIGH, (t - 0.5) * 2)
    r, g, bl = (round(x + (y - x) * f) for x, y in zip(a, b, strict=True))
    return f"rgb({r},{g},{bl})"


def heatmap_svg(title: str, h2h: JSON) -> str:
    """One matrix as a ``<figure>`` holding an SVG heatmap: rows beat columns, the rate in each cell.

    Names are shown whole: a row's name wraps on the left (the row grows to hold it), a column's
    name is turned upright above it, wrapped onto the lines the column's width holds; the SVG grows
    to hold them."""
    models: list[str] = h2h["models"]
    n = len(models)
    row_w = min(max(text_width(m, FONT) for m in models), MAX_LABEL)
    rows = [wrap(m, row_w, FONT) for m in models]
    left = PAD + max(block_width(lines, FONT) for lines in rows) + GAP
    # upright labels grow the figure's top, not the column: a word is broken only when it alone is
    # longer than a row label may be ("smol" was shown as "sm" / "ol" to save a few pixels)
    col_len = max(min(narrowest_wrap(m, FONT, COLUMN_LINES), MAX_LABEL) for m in models)
    cols = [wrap(m, col_len, FONT) for m in models]
    top = PAD + max(block_width(lines, FONT) for lines in cols) + GAP
    heights = [max(CELL_H, lines_height(len(lines), FONT) + 2 * GAP) for lines in rows]
    width = round(left + max(n * CELL_W, LEGEND_W) + PAD)
    height = round(top + sum(heights) + 10 + 36 + PAD)
    parts = [
        f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">'
    ]
    for j, (m, lines) in enumerate(zip(models, cols, strict=True)):
        # turned a quarter back, read bottom to top from just above the column; each further line
        # one step to the right
        x = left + j * CELL_W + CELL_W / 2 - ((len(lines) - 1) * STEP - 0.7 * FONT) / 2
        parts.append(
            multiline_text(
                lines, x, top - GAP, size=FONT, title=m, transform=f"rotate(-90 {x:.1f} {top - GAP:.1f})"
            )
        )
    y = top
    for i, (row, lines, h) in enumerate(zip(models, rows, heights, strict=True)):
        first = y + (h - lines_height(len(lines), FONT)) / 2 + 0.95 * FONT
        parts.append(multiline_text(lines, left - GAP, first, size=FONT, anchor="end", title=row))
        parts += [_cell(h2h, i, j, left + j * CELL_W, y, h) for j in range(n)]
        y += h
    parts.append(_legend(left, y + 10))
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{_e(title)}</figcaption></figure>"


def _cell(h2h: JSON, i: int, j: int, x: float, y: float, h: float) -> str:
    rate, battles = h2h["rates"][i][j], h2h["battles"][i][j]
    row, col = h2h["models"][i], h2h["models"][j]
    fill = "#e6e6e6" if rate is None else _colour(rate)
    ink = "#fff" if rate is not None and abs(rate - 0.5) > 0.35 else "#222"
    tip = f"{row} vs {col}: " + ("no battle" if rate is None else f"{rate:.3f} of {battles} battles")
    shown = "—" if rate is None else f"{rate:.2f}"
    return (
        f'<g><title>{_e(tip)}</title><rect x="{x:.1f}" y="{y:.1f}" width="{CELL_W}" height="{h:.1f}" '
        f'fill="{fill}" stroke="#fff"/><text x="{x + CELL_W / 2:.1f}" y="{y + h / 2 + 4:.1f}" '
        f'font-size="12" text-anchor="middle" fill="{ink}">{shown}</text></g>'
    )


def _legend(x: float, y: float) -> str:
    last = LEGEND_STEPS - 1
    boxes = "".join(
        f'<rect x="{x + k * LEGEND_BOX:.1f}" y="{y:.1f}" width="{LEGEND_BOX}" height="10" '
        f'fill="{_colour(k / last)}"/>'
        for k in range(LEGEND_STEPS)
    )
    labels = "".join(
        f'<text x="{x + k * LEGEND_BOX + LEGEND_BOX // 2:.1f}" y="{y + 24:.1f}" font-size="10" '
        f'text-anchor="middle">{v}</text>'
        for k, v in ((0, "0"), (last // 2, "0.5"), (last, "1"))
    )
    caption = (
        f'<text x="{x + LEGEND_STEPS * LEGEND_BOX + 8:.1f}" y="{y + 9:.1f}" font-size="10">share won</text>'
    )
    return boxes + labels + caption


def matrix_table(h2h: JSON) -> Table:
    """The same matrix as a table: one row per model, its win rate against each column."""
    models: list[str] = h2h["models"]
    rows = [[m, *(md_number(v) for v in rates)] for m, rates in zip(models, h2h["rates"], strict=True)]
    return Table(["", *models], rows)


def head_to_head(what: str, section: JSON) -> list[Block]:
    """The all-items and non-tied matrices of one analyze section (a score column or the human
    ranking) side by side as heatmaps; Markdown shows the two matrices as tables instead.

    Nothing when the section has no matrix (fewer than two models).
    """
    pairs = [
        (f"{what}: head-to-head, all items (row beats column)", section.get("head_to_head")),
        (f"{what}: head-to-head, non-tied battles only", section.get("head_to_head_non_tied")),
    ]
    shown = [(title, h) for title, h in pairs if h is not None]
    if not shown:
        return []
    fallback: list[Block] = []
    for title, h in shown:
        fallback += [Paragraph(f"{title}:"), matrix_table(h)]
    figures = "".join(heatmap_svg(title, h) for title, h in shown)
    return [Raw(f'<div class="figures">{figures}</div>', fallback)]
