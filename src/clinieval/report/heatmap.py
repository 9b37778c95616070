"""Head-to-head win-rate matrices as inline SVG heatmaps, with the matrix as a Markdown table.

Reads the ``head_to_head`` JSON of :func:`clinieval.analysis.analyze.analyze` (``models``,
``rates[i][j]`` = share of battles row i won against column j, ``battles``). Every cell shows its
number, so the figure never hides one; names are escaped (they are free text) and shortened on
the axes, with the full name in a tooltip.
"""

from __future__ import annotations

from typing import Any

from clinieval.analysis.markdown import md_number
from clinieval.report.document import Block, Paragraph, Raw, Table
from clinieval.report.render import html_escape as _e

JSON = dict[str, Any]

CELL_W, CELL_H, CHAR_W, MAX_LABEL = 64, 30, 7, 24
LEGEND_STEPS, LEGEND_BOX = 11, 14
LEGEND_W = LEGEND_STEPS * LEGEND_BOX + 80
LOW, MID, HIGH = (215, 48, 39), (247, 247, 247), (33, 102, 172)


def _colour(rate: float) -> str:
    """Diverging scale: red (0) through light grey (0.5) to blue (1)."""
    t = min(max(rate, 0.0), 1.0)
    a, b, f = (LOW, MID, t * 2) if t <= 0.5 else (MID, HIGH, (t - 0.5) * 2)
    r, g, bl = (round(x + (y - x) * f) for x, y in zip(a, b, strict=True))
    return f"rgb({r},{g},{bl})"


def _short(name: str) -> str:
    return name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "…"


def heatmap_svg(title: str, h2h: JSON) -> str:
    """One matrix as a ``<figure>`` holding an SVG heatmap: rows beat columns, the rate in each cell."""
    models: list[str] = h2h["models"]
    n = len(models)
    label_w = min(max(len(m) for m in models), MAX_LABEL) * CHAR_W + 12
    top = int(label_w * 0.7) + 12
    # room for the last column's slanted label and for the legend
    width = max(label_w + n * CELL_W + int(label_w * 0.8), label_w + LEGEND_W)
    grid_h = n * CELL_H
    height = top + grid_h + 48
    parts = [
        f'<svg class="heatmap" xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" role="img" aria-label="{_e(title)}">'
    ]
    for j, m in enumerate(models):
        x = label_w + j * CELL_W + CELL_W // 2
        parts.append(
            f'<text transform="translate({x},{top - 6}) rotate(-40)" font-size="11">'
            f"<title>{_e(m)}</title>{_e(_short(m))}</text>"
        )
    for i, row in enumerate(models):
        y = top + i * CELL_H
        parts.append(
            f'<text x="{label_w - 6}" y="{y + CELL_H // 2 + 4}" font-size="11" text-anchor="end">'
            f"<title>{_e(row)}</title>{_e(_short(row))}</text>"
        )
        parts += [_cell(h2h, i, j, label_w + j * CELL_W, y) for j in range(n)]
    parts.append(_legend(label_w, top + grid_h + 10))
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{_e(title)}</figcaption></figure>"


def _cell(h2h: JSON, i: int, j: int, x: int, y: int) -> str:
    rate, battles = h2h["rates"][i][j], h2h["battles"][i][j]
    row, col = h2h["models"][i], h2h["models"][j]
    fill = "#e6e6e6" if rate is None else _colour(rate)
    ink = "#fff" if rate is not None and abs(rate - 0.5) > 0.35 else "#222"
    tip = f"{row} vs {col}: " + ("no battle" if rate is None else f"{rate:.3f} of {battles} battles")
    shown = "—" if rate is None else f"{rate:.2f}"
    return (
        f'<g><title>{_e(tip)}</title><rect x="{x}" y="{y}" width="{CELL_W}" height="{CELL_H}" '
        f'fill="{fill}" stroke="#fff"/><text x="{x + CELL_W // 2}" y="{y + CELL_H // 2 + 4}" '
        f'font-size="12" text-anchor="middle" fill="{ink}">{shown}</text></g>'
    )


def _legend(x: int, y: int) -> str:
    last = LEGEND_STEPS - 1
    boxes = "".join(
        f'<rect x="{x + k * LEGEND_BOX}" y="{y}" width="{LEGEND_BOX}" height="10" '
        f'fill="{_colour(k / last)}"/>'
        for k in range(LEGEND_STEPS)
    )
    labels = "".join(
        f'<text x="{x + k * LEGEND_BOX + LEGEND_BOX // 2}" y="{y + 24}" font-size="10" '
        f'text-anchor="middle">{v}</text>'
        for k, v in ((0, "0"), (last // 2, "0.5"), (last, "1"))
    )
    caption = f'<text x="{x + LEGEND_STEPS * LEGEND_BOX + 8}" y="{y + 9}" font-size="10">share won</text>'
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
