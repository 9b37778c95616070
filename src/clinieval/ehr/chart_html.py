"""The chart of :mod:`clinieval.ehr.chart` as one HTML fragment, shared by ``review`` and ``view``.

One Python builder rather than two templates: the review app (Jinja) and the static results
browser (Python strings) must show the same chart, and a builder both can call is the one way to
keep them from drifting. Every piece of record text goes through :func:`html.escape` (text and
attribute values alike), so a record holding ``<script>`` shows as text; no inline script or style
is written (the review app's Content-Security-Policy allows neither). The behaviour -- in-page
search across every encounter, jump-to-date, expand/collapse -- is ``chart.js`` beside this
module, which each app serves as a file; without scripts the chart still reads, newest first.

Stable ids (``<p>`` is the ``prefix`` argument; tests rely on them): ``#<p>`` (``.chart``,
``data-kind``), ``#<p>-search`` (the find box), ``#<p>-search-prev`` / ``-next``,
``#<p>-search-count``, ``#<p>-date`` (jump to date), ``#<p>-expand`` / ``#<p>-collapse``,
``#<p>-problem`` (why the XML did not read); ``details.encounter[data-day=YYYY-MM-DD]`` newest first,
``div.chart-section[data-section]``, ``table.labs``, ``abbr.code[title]``, ``div.text-section``.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from html import escape
from importlib import resources

from clinieval.ehr.chart import Chart, ChartNote, Encounter, Fact, Lab, TextSection

__all__ = ["OPEN_ENCOUNTERS", "asset_text", "render_chart"]

OPEN_ENCOUNTERS = 3
"""Encounters shown open when the chart opens: the latest ones, which a reviewer reads first."""

ASSETS = ("chart.js", "chart.css")


def asset_text(name: str) -> str:
    """The text of ``chart.js`` or ``chart.css`` (package data beside this module)."""
    if name not in ASSETS:
        raise ValueError(f"no chart asset {name!r}")
    return (resources.files("clinieval.ehr") / "chart_static" / name).read_text(encoding="utf-8")


def _e(text: object) -> str:
    return escape(str(text), quote=True)


def _time(t: datetime | None) -> str:
    if t is None:
        return "undated"
    return (
        t.strftime("%Y-%m-%d") if (t.hour, t.minute, t.second) == (0, 0, 0) else t.strftime("%Y-%m-%d %H:%M")
    )


def _time_el(t: datetime | None) -> str:
    if t is None:
        return '<span class="when">undated</span>'
    return f'<time class="when" datetime="{_e(t.isoformat())}">{_e(_time(t))}</time>'


def _name(name: str, code: str | None) -> str:
    """A fact by its name; the code on hover (``title``), never in the line itself."""
    shown = _e(name or code or "(unnamed)")
    if code is None:
        return f'<span class="name">{shown}</span>'
    return f'<abbr class="code name" title="{_e(code)}">{shown}</abbr>'


def _fact(f: Fact) -> str:
    count = f' <span class="count">×{f.count}</span>' if f.count > 1 else ""
    return f"<li>{_name(f.name, f.code)}{count}</li>"


def _section(title: str, body: str) -> str:
    """One titled part of an encounter (conditions, labs, notes...): the markup search and tests find."""
    return f'<div class="chart-section" data-section="{_e(title)}"><h4>{_e(title)}</h4>{body}</div>'


def _facts_section(title: str, facts: Sequence[Fact]) -> str:
    return _section(title, f'<ul class="facts">{"".join(_fact(f) for f in facts)}</ul>')


def _lab_row(lab: Lab) -> str:
    flag = f'<span class="flag flag-{_e(lab.flag)}">{_e(lab.flag)}</span>' if lab.flag else ""
    return (
        f"<tr><td>{_e(_time(lab.time))}</td><td>{_name(lab.name, lab.code)}</td>"
        f'<td class="value">{_e(lab.value)}</td><td>{_e(lab.unit)}</td><td>{flag}</td></tr>'
    )


def _labs(labs: Sequence[Lab]) -> str:
    if not labs:
        return ""
    rows = "".join(_lab_row(x) for x in labs)
    return _section(
        "Labs and measurements",
        '<table class="labs"><thead><tr><th>Time</th><th>Test</th><th>Value</th><th>Unit</th><th>Flag</th>'
        f"</tr></thead><tbody>{rows}</tbody></table>",
    )


def _note(n: ChartNote) -> str:
    return (
        f'<article class="note"><h5>{_e(n.title)} · {_time_el(n.time)}</h5>'
        f'<div class="note-text">{_e(n.text)}</div></article>'
    )


def _notes(notes: Sequence[ChartNote]) -> str:
    if not notes:
        return ""
    return _section("Notes", "".join(_note(n) for n in notes))


def _summary_counts(enc: Encounter) -> str:
    parts = [
        f"{len(facts)} {title.split()[0].lower()}"
        for title, facts in enc.sections
        if title != "Care sites and visit details"
    ]
    if enc.labs:
        parts.append(f"{len(enc.labs)} labs")
    if enc.notes:
        parts.append(f"{len(enc.notes)} notes")
    return " · ".join(parts)


def _encounter(enc: Encounter, index: int, prefix: str) -> str:
    opened = " open" if index < OPEN_ENCOUNTERS else ""
    end = f" – {_e(_time(enc.end))}" if enc.end and enc.start and enc.end.date() != enc.start.date() else ""
    body = "".join(_facts_section(t, f) for t, f in enc.sections) + _labs(enc.labs) + _notes(enc.notes)
    body = body or '<p class="muted">Nothing recorded.</p>'
    return (
        f'<details class="encounter" id="{_e(prefix)}-enc-{index}" data-day="{_e(enc.day)}"{opened}>'
        f"<summary>{_time_el(enc.start)}{end} <strong>{_e(enc.title)}</strong>"
        f' <span class="counts">{_e(_summary_counts(enc))}</span></summary>'
        f'<div class="encounter-body">{body}</div></details>'
    )


def _text_section(s: TextSection, index: int) -> str:
    title = f"<h4>{_e(s.title)}</h4>" if s.title else ""
    text = f'<div class="note-text">{_e(s.text)}</div>'
    return f'<div class="text-section" data-index="{index}">{title}{text}</div>'


def _tools(chart: Chart, prefix: str) -> str:
    p = _e(prefix)
    dates = ""
    if chart.kind == "encounters":
        days = [e.day for e in chart.encounters if e.day]
        lo, hi = (min(days), max(days)) if days else ("", "")
        dates = (
            f'<label class="chart-date">Jump to date <input id="{p}-date" type="date"'
            f' min="{_e(lo)}" max="{_e(hi)}"></label>'
            f'<button type="button" id="{p}-expand">Expand all</button>'
            f'<button type="button" id="{p}-collapse">Collapse all</button>'
        )
    return (
        f'<div class="chart-tools" role="search"><label for="{p}-search">Find in record</label>'
        f'<input id="{p}-search" type="search" maxlength="200" autocomplete="off">'
        f'<button type="button" id="{p}-search-prev" aria-label="Previous match">‹</button>'
        f'<button type="button" id="{p}-search-next" aria-label="Next match">›</button>'
        f'<span id="{p}-search-count" class="search-count" aria-live="polite"></span>{dates}</div>'
    )


def _patient(chart: Chart) -> str:
    if not chart.patient:
        return ""
    rows = "".join(f"<dt>{_e(k)}</dt><dd>{_e(v)}</dd>" for k, v in chart.patient)
    return f'<dl class="chart-patient">{rows}</dl>'


def _head(chart: Chart, prefix: str) -> str:
    if chart.kind == "raw":
        return (
            f'<p id="{_e(prefix)}-problem" class="chart-problem" role="note">This record could not be read'
            f" as a chart, so it is shown as text. {_e(chart.problem or '')}</p>"
        )
    if chart.kind == "encounters":
        n = len(chart.encounters)
        return f'<p class="chart-summary">{n} encounter{"s" if n != 1 else ""}, newest first.</p>'
    return ""


def render_chart(chart: Chart, prefix: str = "chart") -> str:
    """The chart as an HTML fragment; ``prefix`` keeps ids unique when a page shows several charts."""
    if chart.kind == "encounters":
        body = "".join(_encounter(e, i, prefix) for i, e in enumerate(chart.encounters))
    else:
        body = "".join(_text_section(s, i) for i, s in enumerate(chart.sections))
    return (
        f'<div class="chart" id="{_e(prefix)}" data-kind="{_e(chart.kind)}">'
        f"{_tools(chart, prefix)}{_head(chart, prefix)}{_patient(chart)}"
        f'<div class="chart-body">{body}</div></div>'
    )
