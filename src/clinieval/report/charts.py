"""Line and bar charts as inline SVG, for reports that show a curve or a comparison.

A chart is trusted markup built here from numbers; every label that comes from data (a model
name, a domain) is escaped. Each point or bar carries its value as text and in a tooltip, so the
figure never hides a number; the report shows the same numbers as a table in Markdown.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from clinieval.report.render import html_escape as _e

WIDTH, HEIGHT, LEFT, RIGHT, TOP, BOTTOM = 560, 260, 48, 180, 16, 40
PALETTE = ("#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#17becf", "#8c564b", "#7f7f7f")


def _y(value: float, low: float, high: float) -> float:
    plot = HEIGHT - TOP - BOTTOM
    return TOP + plot * (1 - (value - low) / ((high - low) or 1.0))


def _axes(title: str, x_labels: Sequence[str], low: float, high: float) -> list[str]:
    step = (WIDTH - LEFT - RIGHT) / max(len(x_labels) - 1, 1)
    parts = [
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{HEIGHT}" '
        f'viewBox="0 0 {WIDTH} {HEIGHT}" role="img" aria-label="{_e(title)}">',
        f'<line x1="{LEFT}" y1="{HEIGHT - BOTTOM}" x2="{WIDTH - RIGHT}" y2="{HEIGHT - BOTTOM}" '
        'stroke="#999"/>',
        f'<line x1="{LEFT}" y1="{TOP}" x2="{LEFT}" y2="{HEIGHT - BOTTOM}" stroke="#999"/>',
    ]
    for value in (low, (low + high) / 2, high):
        parts.append(
            f'<text x="{LEFT - 6}" y="{_y(value, low, high) + 4:.1f}" font-size="10" text-anchor="end">'
            f"{value:.0f}</text>"
        )
    for i, label in enumerate(x_labels):
        parts.append(
            f'<text x="{LEFT + i * step:.1f}" y="{HEIGHT - BOTTOM + 16}" font-size="10" '
            f'text-anchor="middle">{_e(label)}</text>'
        )
    return parts


def _legend(names: Sequence[str]) -> list[str]:
    x = WIDTH - RIGHT + 12
    return [
        f'<rect x="{x}" y="{TOP + 16 * i}" width="10" height="10" fill="{PALETTE[i % len(PALETTE)]}"/>'
        f'<text x="{x + 14}" y="{TOP + 16 * i + 9}" font-size="10">{_e(name[:26])}</text>'
        for i, name in enumerate(names)
    ]


def line_chart_svg(
    title: str,
    x_labels: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    y_range: tuple[float, float],
) -> str:
    """One line per series over the same x positions; a None value leaves a gap."""
    low, high = y_range
    step = (WIDTH - LEFT - RIGHT) / max(len(x_labels) - 1, 1)
    parts = _axes(title, x_labels, low, high)
    for k, (name, values) in enumerate(series.items()):
        colour = PALETTE[k % len(PALETTE)]
        points = [(LEFT + i * step, _y(v, low, high), v) for i, v in enumerate(values) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y, _ in points)
            parts.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>')
        parts += [
            f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3.5" fill="{colour}">'
            f"<title>{_e(name)}: {v:.1f}</title></circle>"
            for x, y, v in points
        ]
    parts += _legend(list(series))
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{_e(title)}</figcaption></figure>"


def grouped_bar_chart_svg(
    title: str,
    groups: Sequence[str],
    series: Mapping[str, Sequence[float | None]],
    y_range: tuple[float, float],
) -> str:
    """Bars grouped by ``groups`` (on the x axis), one colour per series; a None value leaves a gap."""
    low, high = y_range
    names = list(series)
    slot = (WIDTH - LEFT - RIGHT) / max(len(groups), 1)
    bar = slot * 0.8 / max(len(names), 1)
    parts = _axes(title, [], low, high)
    for g, group in enumerate(groups):
        x0 = LEFT + g * slot + slot * 0.1
        parts.append(
            f'<text x="{x0 + slot * 0.4:.1f}" y="{HEIGHT - BOTTOM + 14}" font-size="9" '
            f'text-anchor="middle">{_e(group[:14])}<title>{_e(group)}</title></text>'
        )
        for k, name in enumerate(names):
            value = series[name][g]
            if value is None:
                continue
            top = _y(value, low, high)
            parts.append(
                f'<rect x="{x0 + k * bar:.1f}" y="{top:.1f}" width="{bar * 0.9:.1f}" '
                f'height="{HEIGHT - BOTTOM - top:.1f}" fill="{PALETTE[k % len(PALETTE)]}">'
                f"<title>{_e(name)}, {_e(group)}: {value:.1f}</title></rect>"
            )
    parts += _legend(names)
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{_e(title)}</figcaption></figure>"


def bar_chart_svg(title: str, bars: Mapping[str, float], y_range: tuple[float, float]) -> str:
    """One bar per label, its value written above it."""
    low, high = y_range
    labels = list(bars)
    slot = (WIDTH - LEFT - RIGHT) / max(len(labels), 1)
    parts = _axes(title, [], low, high)
    for i, label in enumerate(labels):
        value = bars[label]
        x, top = LEFT + i * slot + slot * 0.15, _y(value, low, high)
        parts.append(
            f'<rect x="{x:.1f}" y="{top:.1f}" width="{slot * 0.7:.1f}" height="{HEIGHT - BOTTOM - top:.1f}" '
            f'fill="{PALETTE[i % len(PALETTE)]}"><title>{_e(label)}: {value:.1f}</title></rect>'
            f'<text x="{x + slot * 0.35:.1f}" y="{top - 3:.1f}" font-size="10" '
            f'text-anchor="middle">{value:.1f}</text>'
        )
    parts += _legend(labels)
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{_e(title)}</figcaption></figure>"
