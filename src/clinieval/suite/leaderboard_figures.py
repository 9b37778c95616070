"""The leaderboard's two figures, as inline SVG: a forest plot of scores with their CIs, and a
rank-probability heat strip.

A forest plot shows what a table of means hides: how far apart two models' intervals are. The heat
strip shows a rank interval at a glance: a model certain of its place is one dark cell, a model
that could be anywhere is a smear. Both write every number as text and in a tooltip, so a figure
never holds a number the tables beside it do not; names come from the data and are escaped and
wrapped (never cut) by the report layer's text helpers.
"""

from __future__ import annotations

from collections.abc import Sequence

from clinieval.analysis.leaderboard_words import format_number, format_percent
from clinieval.report.render import html_escape as _e
from clinieval.report.svgtext import block_width, lines_height, multiline_text, text_width, wrap

FONT, PAD, GAP = 11, 8, 6
MAX_LABEL = 200
"""Width (px) model names wrap within, to the left of a figure's rows."""
PLOT_W = 300
ROW_H = 24
CELL_W = 46


def _labels(models: Sequence[str]) -> tuple[list[list[str]], float]:
    width = min(max(text_width(m, FONT) for m in models), MAX_LABEL)
    wrapped = [wrap(m, width, FONT) for m in models]
    return wrapped, PAD + max(block_width(lines, FONT) for lines in wrapped) + GAP


def _rows(wrapped: Sequence[Sequence[str]]) -> list[float]:
    return [max(ROW_H, lines_height(len(lines), FONT) + GAP) for lines in wrapped]


def _label(lines: Sequence[str], name: str, right: float, top: float, height: float) -> str:
    first = top + (height - lines_height(len(lines), FONT)) / 2 + 0.95 * FONT
    return multiline_text(lines, right, first, size=FONT, anchor="end", title=name)


def _svg(kind: str, title: str, width: float, height: float, parts: Sequence[str]) -> str:
    w, h = round(width), round(height)
    svg = (
        f'<svg class="{kind}" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img" aria-label="{_e(title)}">' + "".join(parts) + "</svg>"
    )
    return f"<figure>{svg}<figcaption>{_e(title)}</figcaption></figure>"


def _range(
    lows: Sequence[float], highs: Sequence[float], scale: tuple[float, float] | None
) -> tuple[float, float]:
    if scale is not None and scale[1] > scale[0]:
        low, high = min(scale[0], *lows), max(scale[1], *highs)
    else:
        low, high = min(lows), max(highs)
    if high - low < 1e-9:
        low, high = low - 0.5, high + 0.5
    return low, high


def forest_svg(
    title: str,
    models: Sequence[str],
    means: Sequence[float],
    cis: Sequence[tuple[float, float]],
    digits: int,
    scale: tuple[float, float] | None = None,
    colours: Sequence[str] | None = None,
) -> str:
    """One row per model: its mean as a dot, its CI as a line, and both written at the right
    (``colours``: one per row, to tell two kinds of estimate apart; default all blue)."""
    wrapped, left = _labels(models)
    heights = _rows(wrapped)
    low, high = _range([c[0] for c in cis], [c[1] for c in cis], scale)

    def x(v: float) -> float:
        return left + (v - low) / (high - low) * PLOT_W

    texts = [
        f"{format_number(m, digits)} [{format_number(c[0], digits)}, {format_number(c[1], digits)}]"
        for m, c in zip(means, cis, strict=True)
    ]
    value_w = max(text_width(t, FONT) for t in texts)
    width = left + PLOT_W + GAP * 2 + value_w + PAD
    parts: list[str] = []
    y = float(PAD)
    inks = list(colours) if colours is not None else ["#1f77b4"] * len(models)
    rows = zip(models, wrapped, heights, means, cis, texts, inks, strict=True)
    for name, lines, h, mean, ci, text, ink in rows:
        mid = y + h / 2
        tip = f"{name}: {text}"
        parts.append(_label(lines, name, left - GAP, y, h))
        parts.append(
            f'<g><title>{_e(tip)}</title><line x1="{x(ci[0]):.1f}" y1="{mid:.1f}" x2="{x(ci[1]):.1f}" '
            f'y2="{mid:.1f}" stroke="{ink}" stroke-width="2"/><circle cx="{x(mean):.1f}" cy="{mid:.1f}" '
            f'r="4" fill="{ink}"/></g>'
        )
        parts.append(
            f'<text class="value" x="{left + PLOT_W + 2 * GAP:.1f}" y="{mid + 0.35 * FONT:.1f}" '
            f'font-size="{FONT}">{_e(text)}</text>'
        )
        y += h
    parts.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{left + PLOT_W:.1f}" y2="{y:.1f}" stroke="#999"/>')
    for v in (low, (low + high) / 2, high):
        parts.append(
            f'<line x1="{x(v):.1f}" y1="{PAD}" x2="{x(v):.1f}" y2="{y:.1f}" stroke="#ddd"/>'
            f'<text class="tick" x="{x(v):.1f}" y="{y + 4 + 0.95 * FONT:.1f}" font-size="{FONT}" '
            f'text-anchor="middle">{_e(format_number(v, digits))}</text>'
        )
    return _svg("forest", title, width, y + 4 + 1.2 * FONT + PAD, parts)


def _shade(p: float) -> tuple[str, str]:
    """White (0) to dark blue (1); white ink on the dark half."""
    t = min(max(p, 0.0), 1.0)
    r, g, b = (round(255 + (e - 255) * t) for e in (8, 69, 148))
    return f"rgb({r},{g},{b})", "#fff" if t > 0.5 else "#222"


def rank_strip_svg(title: str, models: Sequence[str], probabilities: Sequence[Sequence[float]]) -> str:
    """One row per model, one cell per rank: the share of bootstrap replicates that gave the model
    that rank, as a shade and as a percentage."""
    wrapped, left = _labels(models)
    heights = _rows(wrapped)
    k = len(models)
    top = PAD + 1.2 * FONT + GAP
    parts = [
        f'<text class="tick" x="{left + (r + 0.5) * CELL_W:.1f}" y="{PAD + 0.95 * FONT:.1f}" '
        f'font-size="{FONT}" text-anchor="middle">rank {r + 1}</text>'
        for r in range(k)
    ]
    y = top
    for name, lines, h, probs in zip(models, wrapped, heights, probabilities, strict=True):
        parts.append(_label(lines, name, left - GAP, y, h))
        for r, p in enumerate(probs):
            fill, ink = _shade(p)
            cx = left + r * CELL_W
            parts.append(
                f"<g><title>{_e(f'{name}: rank {r + 1} in {100 * p:.1f}% of replicates')}</title>"
                f'<rect x="{cx:.1f}" y="{y:.1f}" width="{CELL_W}" height="{h:.1f}" fill="{fill}" '
                f'stroke="#ccc"/><text x="{cx + CELL_W / 2:.1f}" y="{y + h / 2 + 0.35 * FONT:.1f}" '
                f'font-size="{FONT}" text-anchor="middle" fill="{ink}">{_e(format_percent(p, 0))}</text></g>'
            )
        y += h
    return _svg("rank-strip", title, left + k * CELL_W + PAD, y + PAD, parts)
