"""Line and bar charts as inline SVG, for reports that show a curve or a comparison.

A chart is trusted markup built here from numbers; every label that comes from data (a model
name, a domain) is escaped. Each point or bar carries its value as text and in a tooltip, so the
figure never hides a number; the report shows the same numbers as a table in Markdown.

The layout is worked out from the labels (their widths estimated by :mod:`clinieval.report.svgtext`)
so that no label is cut or drawn over another, and the SVG grows to hold them:

- category labels under an upright chart wrap onto up to three lines within their slot, and the
  chart widens (up to :data:`MAX_WIDTH`) to give them room;
- when that is not enough, a bar chart turns sideways (a bar per row, its label wrapped to the left
  of it) and a line chart turns its labels upright (wrapped, read bottom to top);
- the legend sits under the plot, its entries flowing into rows, each wrapped to the figure's width.

Every label is shown whole; its tooltip repeats it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

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

PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#7f7f7f")
FONT = 10
"""Font size (px) of every label, tick and legend entry."""
PAD, GAP = 8, 6
TOP = 16
"""Room above the plot for the top tick label or a value written above a bar."""
PLOT_H = 200
MIN_PLOT = 380
"""Width (px) of an upright chart's plot area when its labels need no more."""
MAX_WIDTH = 720
"""Widest figure (px) the layout aims at: it fits the page at an 800-px-wide window."""
SIDE_WIDTH = 640
MAX_LINES = 3
"""Lines a category label under an upright chart may wrap onto before the chart turns sideways."""
MAX_LABEL = 220
"""Width (px) a sideways chart's labels wrap within."""
ROTATED_MAX = 160
"""Length (px) past which a label turned upright breaks its words rather than grow longer."""
ASCENT = 0.95
"""Height above the baseline (in ems) that a line of text may reach."""
STEP = FONT * LINE_HEIGHT


@dataclass(frozen=True)
class _Scale:
    """Values ``low``..``high`` onto pixels ``start``..``start + length`` (upwards when ``up``)."""

    low: float
    high: float
    start: float
    length: float
    up: bool

    def at(self, value: float) -> float:
        span = (self.high - self.low) or 1.0
        t = (min(max(value, min(self.low, self.high)), max(self.low, self.high)) - self.low) / span
        return self.start + self.length * (1 - t) if self.up else self.start + self.length * t


def _ticks(low: float, high: float) -> list[tuple[float, str]]:
    """Low, middle and high, written with as many decimals as the range needs (0.5, not 0)."""
    span = abs(high - low)
    decimals = 0 if span >= 20 else 1 if span >= 2 else 2

    def shown(v: float) -> str:
        text = f"{v:.{decimals}f}"
        return text.rstrip("0").rstrip(".") if "." in text else text

    return [(v, shown(v)) for v in (low, (low + high) / 2, high)]


def _open(title: str, width: float, height: float) -> str:
    w, h = round(width), round(height)
    return (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" '
        f'viewBox="0 0 {w} {h}" role="img" aria-label="{_e(title)}">'
    )


def _figure(title: str, width: float, height: float, parts: Sequence[str]) -> str:
    svg = _open(title, width, height) + "".join(parts) + "</svg>"
    return f"<figure>{svg}<figcaption>{_e(title)}</figcaption></figure>"


def _legend(names: Sequence[str], x0: float, y0: float, width: float) -> tuple[list[str], float]:
    """Colour swatches and names flowing left to right under the plot, a name wrapped when it is
    wider than the figure; the markup and the height it takes."""
    parts: list[str] = []
    avail = width - x0 - PAD
    x, y, row = x0, y0, 0.0
    for i, name in enumerate(names):
        lines = wrap(name, avail - 14, FONT)
        item = 14 + block_width(lines, FONT)
        if x > x0 and x + item > x0 + avail:
            x, y, row = x0, y + row + GAP, 0.0
        parts.append(
            f'<rect x="{x:.1f}" y="{y + 1:.1f}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
        )
        parts.append(multiline_text(lines, x + 14, y + ASCENT * FONT, size=FONT, css_class="legend"))
        row = max(row, lines_height(len(lines), FONT))
        x += item + 16
    return parts, (y + row - y0) if names else 0.0


def _value_axis(scale: _Scale, x: float, bottom: float) -> list[str]:
    """The upright value axis: its line and its tick labels, right-aligned to the left of it."""
    parts = [f'<line x1="{x:.1f}" y1="{scale.start:.1f}" x2="{x:.1f}" y2="{bottom:.1f}" stroke="#999"/>']
    parts += [
        f'<text class="tick" x="{x - 5:.1f}" y="{scale.at(v) + 0.35 * FONT:.1f}" font-size="{FONT}" '
        f'text-anchor="end">{label}</text>'
        for v, label in _ticks(scale.low, scale.high)
    ]
    return parts


def _tick_width(low: float, high: float) -> float:
    return max(text_width(label, FONT) for _, label in _ticks(low, high))


@dataclass(frozen=True)
class _Upright:
    """An upright chart's frame: categories along the bottom in equal slots."""

    width: float
    left: float
    slot: float
    labels: list[list[str]]
    rotated: bool
    label_h: float

    def centre(self, i: int) -> float:
        return self.left + (i + 0.5) * self.slot

    @property
    def bottom(self) -> float:
        return TOP + PLOT_H


def _upright(
    labels: Sequence[str], least_slot: float, low: float, high: float, *, rotate: bool
) -> _Upright | None:
    """Slots wide enough for every label wrapped onto at most :data:`MAX_LINES` lines (the chart
    widened up to :data:`MAX_WIDTH`); else, when ``rotate``, labels turned upright; else None."""
    n = max(len(labels), 1)
    left = PAD + _tick_width(low, high) + 6
    need = max([least_slot, *(narrowest_wrap(label, FONT, MAX_LINES) + GAP for label in labels)])
    plot = max(MIN_PLOT, n * need)
    if left + plot + PAD <= MAX_WIDTH:
        slot = plot / n
        wrapped = [wrap(label, slot - GAP, FONT) for label in labels]
        height = max((lines_height(len(lines), FONT) for lines in wrapped), default=0.0)
        return _Upright(left + plot + PAD, left, slot, wrapped, False, height)
    if not rotate:
        return None
    plot = max(MAX_WIDTH - left - PAD, n * max(least_slot, STEP + GAP))
    slot = plot / n
    fit = max(1, int((slot - GAP - 1.2 * FONT) // STEP) + 1)
    lengths = [_upright_length(label, fit) for label in labels]
    length = max(lengths)
    wrapped = []
    for label, own in zip(labels, lengths, strict=True):
        lines = wrap(label, length, FONT)  # as long as the longest; its own length if that needs more lines
        wrapped.append(lines if len(lines) <= fit else wrap(label, own, FONT))
    return _Upright(left + plot + PAD, left, slot, wrapped, True, length)


def _upright_length(label: str, lines: int) -> float:
    """How long (px) a label turned upright is, wrapped onto at most ``lines`` lines: words kept
    whole unless that makes it longer than :data:`ROTATED_MAX`."""
    whole = narrowest_wrap(label, FONT, lines)
    return (
        whole
        if whole <= ROTATED_MAX
        else max(narrowest_wrap(label, FONT, lines, split_words=True), ROTATED_MAX)
    )


def _category_labels(frame: _Upright, labels: Sequence[str]) -> list[str]:
    parts: list[str] = []
    top = frame.bottom + GAP
    for i, (label, lines) in enumerate(zip(labels, frame.labels, strict=True)):
        cx = frame.centre(i)
        if not frame.rotated:
            parts.append(
                multiline_text(lines, cx, top + ASCENT * FONT, size=FONT, anchor="middle", title=label)
            )
            continue
        # rotated a quarter turn back: each line's baseline is one step right of the one before
        ax = cx - ((len(lines) - 1) * STEP - 0.7 * FONT) / 2
        parts.append(
            multiline_text(
                lines,
                ax,
                top,
                size=FONT,
                anchor="end",
                title=label,
                transform=f"rotate(-90 {ax:.1f} {top:.1f})",
            )
        )
    return parts


def _upright_chart(
    title: str,
    frame: _Upright,
    low: float,
    high: float,
    labels: Sequence[str],
    body: Sequence[str],
    legend: Sequence[str],
) -> str:
    scale = _Scale(low, high, TOP, PLOT_H, up=True)
    left, right, bottom = frame.left, frame.width - PAD, frame.bottom
    parts = [
        f'<line x1="{left:.1f}" y1="{bottom}" x2="{right:.1f}" y2="{bottom}" stroke="#999"/>',
        *_value_axis(scale, frame.left, frame.bottom),
        *body,
        *_category_labels(frame, labels),
    ]
    y = frame.bottom + GAP + frame.label_h + 2 * GAP
    keys, keys_h = _legend(legend, PAD, y, frame.width)
    parts += keys
    return _figure(title, frame.width, y + keys_h + PAD, parts)


def line_chart_svg(
    title: str,
    x_labels: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    y_range: tuple[float, float],
) -> str:
    """One line per series over the same x positions; a None value leaves a gap."""
    low, high = y_range
    frame = _upright(x_labels, 24.0, low, high, rotate=True)
    assert frame is not None
    scale = _Scale(low, high, TOP, PLOT_H, up=True)
    body: list[str] = []
    for k, (name, values) in enumerate(series.items()):
        colour = PALETTE[k % len(PALETTE)]
        points = [(frame.centre(i), scale.at(v), v) for i, v in enumerate(values) if v is not None]
        runs: list[list[str]] = [[]]  # the line breaks at a missing value
        for i, v in enumerate(values):
            if v is None:
                runs.append([])
            else:
                runs[-1].append(f"{frame.centre(i):.1f},{scale.at(v):.1f}")
        body += [
            f'<polyline points="{" ".join(run)}" fill="none" stroke="{colour}" stroke-width="2"/>'
            for run in runs
            if len(run) > 1
        ]
        body += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}">'
            f"<title>{_e(name)}: {v:.1f}</title></circle>"
            for x, y, v in points
        ]
    return _upright_chart(title, frame, low, high, x_labels, body, list(series))


def _value_text(value: float) -> str:
    return f"{value:.1f}"


def _sideways(
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    low: float,
    high: float,
    *,
    values: bool,
    colour_by_group: bool,
) -> str:
    """Bars drawn left to right, one row of bars per group, its label wrapped on the left."""
    names = list(series)
    label_w = min(max((text_width(g, FONT) for g in groups), default=0.0), MAX_LABEL)
    wrapped = [wrap(g, label_w, FONT) for g in groups]
    label_w = max((block_width(lines, FONT) for lines in wrapped), default=0.0)
    left = PAD + label_w + GAP
    shown = [v for vs in series.values() for v in vs if v is not None]
    value_w = max((text_width(_value_text(v), FONT) for v in shown), default=0.0) + GAP if values else 0.0
    right = max(value_w, _tick_width(low, high) / 2 + 2) + PAD
    width = max(SIDE_WIDTH, left + 200 + right)
    scale = _Scale(low, high, left, width - left - right, up=False)
    bar = 16.0 if len(names) == 1 else 11.0
    parts: list[str] = []
    y = float(PAD)
    for g, (group, lines) in enumerate(zip(groups, wrapped, strict=True)):
        band = max(len(names) * bar, lines_height(len(lines), FONT)) + 2 * GAP
        first = y + (band - lines_height(len(lines), FONT)) / 2 + ASCENT * FONT
        parts.append(multiline_text(lines, left - GAP, first, size=FONT, anchor="end", title=group))
        y0 = y + (band - len(names) * bar) / 2
        for k, name in enumerate(names):
            value = series[name][g]
            if value is None:
                continue
            colour = PALETTE[(g if colour_by_group else k) % len(PALETTE)]
            top, end = y0 + k * bar, scale.at(value)
            tip = f"{group}: {value:.1f}" if len(names) == 1 else f"{name}, {group}: {value:.1f}"
            parts.append(
                f'<rect x="{left:.1f}" y="{top:.1f}" width="{max(end - left, 0):.1f}" '
                f'height="{bar * 0.85:.1f}" '
                f'fill="{colour}"><title>{_e(tip)}</title></rect>'
            )
            if values:
                parts.append(
                    f'<text class="value" x="{end + 3:.1f}" y="{top + bar * 0.85 / 2 + 0.35 * FONT:.1f}" '
                    f'font-size="{FONT}">{_value_text(value)}</text>'
                )
        y += band
    parts.append(f'<line x1="{left:.1f}" y1="{PAD}" x2="{left:.1f}" y2="{y:.1f}" stroke="#999"/>')
    parts.append(f'<line x1="{left:.1f}" y1="{y:.1f}" x2="{scale.at(high):.1f}" y2="{y:.1f}" stroke="#999"/>')
    parts += [
        f'<text class="tick" x="{scale.at(v):.1f}" y="{y + 4 + ASCENT * FONT:.1f}" font-size="{FONT}" '
        f'text-anchor="middle">{label}</text>'
        for v, label in _ticks(low, high)
    ]
    y += 4 + lines_height(1, FONT) + 2 * GAP
    if not colour_by_group:
        keys, keys_h = _legend(names, PAD, y, width)
        parts += keys
        y += keys_h
    return _figure(title, width, y + PAD, parts)


def grouped_bar_chart_svg(
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    y_range: tuple[float, float],
) -> str:
    """Bars grouped by ``groups``, one colour per series; a None value leaves a gap.

    Groups run along the bottom when their labels fit under them, else down the side (bars drawn
    left to right)."""
    low, high = y_range
    names = list(series)
    frame = _upright(groups, len(names) * 7.0 + 10, low, high, rotate=False)
    if frame is None:
        return _sideways(title, groups, series, low, high, values=False, colour_by_group=False)
    scale = _Scale(low, high, TOP, PLOT_H, up=True)
    bar = frame.slot * 0.8 / max(len(names), 1)
    body: list[str] = []
    for g, group in enumerate(groups):
        x0 = frame.left + g * frame.slot + frame.slot * 0.1
        for k, name in enumerate(names):
            value = series[name][g]
            if value is None:
                continue
            top = scale.at(value)
            body.append(
                f'<rect x="{x0 + k * bar:.1f}" y="{top:.1f}" width="{bar * 0.9:.1f}" '
                f'height="{frame.bottom - top:.1f}" fill="{PALETTE[k % len(PALETTE)]}">'
                f"<title>{_e(name)}, {_e(group)}: {value:.1f}</title></rect>"
            )
    return _upright_chart(title, frame, low, high, groups, body, names)


def bar_chart_svg(title: str, bars: Mapping[str, float], y_range: tuple[float, float]) -> str:
    """One bar per label, its value written at its end; the label under it (or beside it, bars
    drawn sideways, when the labels do not fit under the bars)."""
    low, high = y_range
    labels = list(bars)
    value_w = max((text_width(_value_text(v), FONT) for v in bars.values()), default=0.0)
    frame = _upright(labels, max(value_w + GAP, 16.0), low, high, rotate=False)
    if frame is None:
        series = {"": [bars[label] for label in labels]}
        return _sideways(title, labels, series, low, high, values=True, colour_by_group=True)
    scale = _Scale(low, high, TOP, PLOT_H, up=True)
    body: list[str] = []
    for i, label in enumerate(labels):
        value = bars[label]
        cx, top = frame.centre(i), scale.at(value)
        body.append(
            f'<rect x="{cx - frame.slot * 0.35:.1f}" y="{top:.1f}" width="{frame.slot * 0.7:.1f}" '
            f'height="{frame.bottom - top:.1f}" fill="{PALETTE[i % len(PALETTE)]}">'
            f"<title>{_e(label)}: {value:.1f}</title></rect>"
            f'<text class="value" x="{cx:.1f}" y="{top - 3:.1f}" font-size="{FONT}" '
            f'text-anchor="middle">{_value_text(value)}</text>'
        )
    return _upright_chart(title, frame, low, high, labels, body, [])
