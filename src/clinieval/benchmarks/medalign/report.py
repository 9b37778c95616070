"""The MedAlign analysis as Markdown and as one self-contained HTML page.

Both renderings read only the JSON of :func:`clinieval.benchmarks.medalign.analysis.medalign_analysis`.
The HTML page has no script and loads nothing: styles are inline and the head-to-head matrices
are inline SVG heatmaps with the number in every cell, so the file can be mailed or archived
with a run and opened offline. Every piece of text that came from the data (arm names,
instruction ids, categories) is HTML-escaped, since arm names are free text.

The reference ranking is always printed with its label ("clinician", "computed reference"),
including in the generic statistics, where ``analyze`` says "clinician": a ranking computed
from a metric must never read as clinicians' judgement.
"""

from __future__ import annotations

import html
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from clinieval.analysis import markdown as generic_markdown
from clinieval.fsutil import atomic_write_json, atomic_write_text

JSON = dict[str, Any]

VIEW_TITLES = {
    "all": "All instructions (provider errors count as incorrect)",
    "without_errors": "Instructions without provider errors",
}
BREAKDOWN_TITLES = {
    "category": "category",
    "subcategory": "subcategory",
    "specialty": "submitting clinician's specialty",
    "ehr_length_quartile": "EHR-length quartile",
}
PERCENTILE_KEYS = ("p10", "p25", "p50", "p75", "p90")


# --- shared formatting ---------------------------------------------------------------------------


def _num(value: Any, digits: int = 3) -> str:
    """A number for a table; ``—`` for an undefined value, never a made-up 0."""
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:.{digits}f}"
    return str(value)


def _pct(value: Any) -> str:
    return "—" if value is None else f"{value:.1f}%"


def _ci(ci: Sequence[float] | None, digits: int = 3) -> str:
    return "—" if not ci else f"[{_num(ci[0], digits)}, {_num(ci[1], digits)}]"


def _pct_ci(ci: Sequence[float] | None) -> str:
    return "—" if not ci else f"[{ci[0]:.1f}, {ci[1]:.1f}]"


def _level(result: JSON) -> str:
    return f"{float(result['options']['level']):.0%}"


def _reference(result: JSON) -> str:
    return f"{result['reference_label']} ranking (column {result['columns']['rank']!r}, 1 = best)"


def _computed_warning(result: JSON) -> str | None:
    if result["reference_label"] == "clinician":
        return None
    return (
        f"The reference ranking is a {result['reference_label']}, not clinicians' judgement: "
        "wherever the statistics below say 'clinician', read this reference."
    )


def _error_rows(result: JSON) -> list[list[str]]:
    return [
        [e["instruction"], ", ".join(f"{arm}: {kind}" for arm, kind in e["arms"].items())]
        for e in result["error_items"]
    ]


def _error_kinds(view: JSON) -> list[str]:
    return sorted(view["errors"]["total"])


def _errors_rows(view: JSON) -> list[list[str]]:
    kinds = _error_kinds(view)
    return [
        [m, _num(sum(c.values())), *(_num(c.get(k, 0)) for k in kinds)]
        for m, c in view["errors"]["per_model"].items()
    ]


def _human(view: JSON) -> JSON | None:
    generic = view.get("analyze")
    return None if generic is None else generic.get("human")


def _per_model_rows(view: JSON) -> list[list[str]]:
    human = _human(view) or {}
    rows = []
    for m, p in (view["per_model"] or {}).items():
        rows.append(
            [
                m,
                _num(p["responses"]),
                _num(p["reviewed"]),
                _pct(p["correct_percent"]),
                _pct_ci(p["ci"]),
                _num(p["mean_rank"]),
                _num(human.get("mean_rank_ties_averaged", {}).get(m)),
                _num(human.get("win_rate", {}).get(m)),
                _num(human.get("win_rate_non_tied", {}).get(m)),
            ]
        )
    return rows


def _per_model_header(level: str) -> list[str]:
    return [
        "arm",
        "responses",
        "reviewed",
        "correct",
        f"{level} CI",
        "mean rank (as given)",
        "mean rank (ties averaged)",
        "win rate",
        "win rate (non-tied)",
    ]


def _breakdown_rows(b: JSON, models: Sequence[str]) -> tuple[list[str], list[list[str]]]:
    header = ["group", "items", "correct (pooled)"]
    header += [f"{m}: correct / mean rank" for m in models]
    rows = []
    for g in b["groups"]:
        label = g["group"]
        if "range" in g:
            label += f" ({_num(g['range'][0], 0)}–{_num(g['range'][1], 0)})"
        cells = [
            f"{_pct(g['per_model'][m]['correct_percent'])} / {_num(g['per_model'][m]['mean_rank'], 2)}"
            for m in models
        ]
        rows.append([label, _num(g["items"]), _pct(g["pooled"]["correct_percent"]), *cells])
    return header, rows


def _length_rows(lengths: JSON) -> list[list[str]]:
    rows = [
        [m, _num(d["count"]), _num(d["mean"], 1), *(_num(d[k], 1) for k in PERCENTILE_KEYS)]
        for m, d in lengths["per_model"].items()
    ]
    gold = lengths.get("gold")
    if gold:
        rows.append(
            ["gold (clinician)", _num(gold["count"]), _num(gold["mean"], 1)]
            + [_num(gold[k], 1) for k in PERCENTILE_KEYS]
        )
    return rows


LENGTH_HEADER = ["responses of", "count", "mean", "p10", "p25", "p50", "p75", "p90"]
MDD_HEADER = ["column", "pair", "n", "σ_d", "MDD (power 0.8, α 0.05)"]


def _mdd_rows(mdd: JSON) -> list[list[str]]:
    return [
        [col, f"{p['model']} vs {p['opponent']}", _num(p["n"]), _num(p["sigma_d"]), _num(p["mdd"])]
        for col, pairs in mdd.items()
        for p in pairs
    ]


def _easy_hard_lines(e: JSON) -> list[str]:
    out = [f"{e['judged_by_all_arms']} instruction(s) judged for every arm ({e['incomplete']} not)."]
    for key, what in (("easy", "Easy (every arm correct)"), ("hard", "Hard (no arm correct)")):
        s = e[key]
        ids = ", ".join(s["ids"]) if s["ids"] else "none"
        out.append(f"{what}: {s['count']} ({_pct(s['percent'])}): {ids}")
    return out


def _own_undefined(view: JSON) -> list[str]:
    """The view's undefined list without analyze's entries, which the generic part lists."""
    if view.get("analyze") is None:
        return list(view["undefined"])
    return [u for u in view["undefined"] if not u.startswith("analyze: ")]


# --- Markdown ------------------------------------------------------------------------------------


def _md_cell(text: str) -> str:
    """A table cell: pipes and angle brackets escaped, so an arm named like a tag stays text."""
    for raw in ("\\", "|", "<", ">"):
        text = text.replace(raw, "\\" + raw)
    return text.replace("\n", " ")


def _md_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    lines = ["| " + " | ".join(_md_cell(h) for h in header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_md_cell(c) for c in r) + " |" for r in rows]
    return [*lines, ""]


def _md_generic(view: JSON, label: str) -> list[str]:
    """analyze's own Markdown for this view, headings moved under the view (analyze names the
    reference ranking by ``label`` itself, passed as its ``human_label``)."""
    generic = view.get("analyze")
    if generic is None:
        return []
    lines = generic_markdown.render_markdown(generic).splitlines()
    lines[0] = "### Generic statistics (clinieval analyze)"
    return [("##" + line) if line.startswith("## ") else line for line in lines] + [""]


def _md_view(name: str, view: JSON, result: JSON) -> list[str]:
    level = _level(result)
    out = [f"## {VIEW_TITLES.get(name, name)}", "", view["description"], ""]
    out.append(f"{view['rows']:,} rows, {view['items']:,} instructions, {len(view['models'])} arms.")
    if view.get("dropped_items"):
        out.append(f"Dropped instructions: {', '.join(view['dropped_items'])}.")
    out.append("")
    if view["errors"]["responses"]:
        out += [
            "### Provider errors",
            "",
            *_md_table(["arm", "errors", *_error_kinds(view)], _errors_rows(view)),
        ]
    if view["per_model"]:
        out += ["### Correctness and rank per arm", ""]
        out += _md_table(_per_model_header(level), _per_model_rows(view))
    if view["easy_hard"]:
        out += [
            "### Easy and hard instructions",
            "",
            *(f"- {x}" for x in _easy_hard_lines(view["easy_hard"])),
            "",
        ]
    for key, b in (view["breakdowns"] or {}).items():
        if b is not None:
            header, rows = _breakdown_rows(b, view["models"])
            out += [f"### By {BREAKDOWN_TITLES[key]}", "", *_md_table(header, rows)]
    if view["response_length"]:
        out += [f"### Response length ({view['response_length']['counter']})", ""]
        out += _md_table(LENGTH_HEADER, _length_rows(view["response_length"]))
    if view["minimum_detectable_difference"]:
        out += ["### Minimum detectable difference", ""]
        out += _md_table(MDD_HEADER, _mdd_rows(view["minimum_detectable_difference"]))
    out += _md_generic(view, result["reference_label"])
    undefined = _own_undefined(view)
    if undefined:
        out += ["### Undefined MedAlign statistics", "", *(f"- {u}" for u in undefined), ""]
    return out


def render_markdown(result: JSON) -> str:
    """The whole MedAlign analysis, both views, as one Markdown document."""
    inp, o = result["input"], result["options"]
    lines = [
        "# MedAlign analysis",
        "",
        f"Input {inp['table']}: {inp['rows']:,} rows, {inp['items']:,} instructions, "
        f"{len(inp['models'])} arms ({', '.join(inp['models'])}).",
        f"Reference: {_reference(result)}.",
        f"Bootstrap: {o['resamples']:,} resamples, seed {o['seed']}, {_level(result)} intervals.",
        "",
    ]
    warning = _computed_warning(result)
    if warning:
        lines += [f"> **{warning}**", ""]
    if result["error_items"]:
        lines += [f"Instructions with a provider error in some arm ({len(result['error_items'])}):", ""]
        lines += _md_table(["instruction", "arm: error"], _error_rows(result))
    for name, view in result["views"].items():
        lines += _md_view(name, view, result)
    return "\n".join(lines)


# --- HTML ----------------------------------------------------------------------------------------

CSS = """
body { font-family: system-ui, sans-serif; margin: 2rem auto; max-width: 1100px; color: #222; }
h1 { font-size: 1.6rem; } h2 { border-bottom: 2px solid #ccc; margin-top: 2.5rem; }
h3 { margin-top: 1.8rem; } h4 { margin-bottom: .3rem; }
table { border-collapse: collapse; margin: .5rem 0 1rem; font-size: .9rem; }
th, td { border: 1px solid #ccc; padding: .25rem .5rem; text-align: right; }
th:first-child, td:first-child { text-align: left; }
th { background: #f2f2f2; }
.warning { background: #fff3cd; border: 1px solid #e0c36c; padding: .6rem 1rem; }
.note { color: #555; }
.heatmaps { display: flex; flex-wrap: wrap; gap: 1.5rem; }
figure { margin: 0; } figcaption { font-size: .85rem; color: #444; }
svg text { font-family: system-ui, sans-serif; }
"""

CELL_W, CELL_H, CHAR_W, MAX_LABEL = 64, 30, 7, 24
LEGEND_STEPS, LEGEND_BOX = 11, 14
LEGEND_W = LEGEND_STEPS * LEGEND_BOX + 80
LOW, MID, HIGH = (215, 48, 39), (247, 247, 247), (33, 102, 172)


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _html_table(header: Sequence[str], rows: Iterable[Sequence[str]]) -> str:
    head = "".join(f"<th>{_e(h)}</th>" for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _p(text: str, cls: str | None = None) -> str:
    return f'<p class="{cls}">{_e(text)}</p>' if cls else f"<p>{_e(text)}</p>"


def _ul(items: Iterable[str]) -> str:
    return "<ul>" + "".join(f"<li>{_e(i)}</li>" for i in items) + "</ul>"


def _colour(rate: float) -> str:
    """Diverging scale: red (0) through light grey (0.5) to blue (1)."""
    t = min(max(rate, 0.0), 1.0)
    a, b, f = (LOW, MID, t * 2) if t <= 0.5 else (MID, HIGH, (t - 0.5) * 2)
    r, g, bl = (round(x + (y - x) * f) for x, y in zip(a, b, strict=True))
    return f"rgb({r},{g},{bl})"


def _short(name: str) -> str:
    return name if len(name) <= MAX_LABEL else name[: MAX_LABEL - 1] + "…"


def _heatmap(title: str, h2h: JSON) -> str:
    """One head-to-head matrix as an SVG heatmap: rows beat columns, the rate in each cell."""
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
        parts += [_heat_cell(h2h, i, j, label_w + j * CELL_W, y) for j in range(n)]
    parts.append(_legend(label_w, top + grid_h + 10))
    parts.append("</svg>")
    return f"<figure>{''.join(parts)}<figcaption>{_e(title)}</figcaption></figure>"


def _heat_cell(h2h: JSON, i: int, j: int, x: int, y: int) -> str:
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


def _heatmap_pair(what: str, section: JSON) -> str:
    return (
        '<div class="heatmaps">'
        + _heatmap(f"{what}: head-to-head, all items (row beats column)", section["head_to_head"])
        + _heatmap(f"{what}: head-to-head, non-tied battles only", section["head_to_head_non_tied"])
        + "</div>"
    )


def _html_reference(human: JSON, label: str, level: str) -> str:
    parts = [f"<h3>Reference ranking: {_e(label)} (column {_e(human['column'])}, 1 = best)</h3>"]
    parts.append(_heatmap_pair(f"{label} ranking", human))
    rows = [
        [
            col,
            _num(a["mean_tau_b"]),
            _ci(a["ci"]),
            _num(a["items"]),
            _num(a["skipped_constant"]),
            _num(a["skipped_incomplete"]),
            *(_num(a["win_rate_abs_error"].get(m)) for m in human["mean_rank"]),
        ]
        for col, a in human["metric_agreement"].items()
    ]
    if rows:
        header = ["column", "mean Kendall tau-b", f"{level} CI", "items", "skipped (constant)"]
        header += ["skipped (incomplete)", *(f"|WR error| {m}" for m in human["mean_rank"])]
        parts += [f"<h4>Agreement with the {_e(label)} ranking (per-instruction tau-b, averaged)</h4>"]
        parts.append(_html_table(header, rows))
    if human["metric_comparison"]:
        rows = [
            [z["metric"], z["other"], _num(z["n"]), _num(z["z"]), _num(z["pvalue"])]
            for z in human["metric_comparison"]
        ]
        parts += ["<h4>Fisher-Z comparison of two columns' agreement</h4>"]
        parts.append(_html_table(["column", "vs", "n", "z", "p"], rows))
    pb = human.get("point_biserial_correct_vs_rank")
    if pb:
        parts.append(
            _p(
                f"Point-biserial correlation, correct vs rank: r = {_num(pb['r'])} "
                f"(p = {_num(pb['pvalue'])}, n = {pb['n']})."
            )
        )
    raters = human.get("raters")
    if raters:
        k = raters.get("inter_rater_kendall") or {}
        parts.append(
            _p(
                f"Raters: {raters['raters']}. Inter-rater mean Kendall tau-b: {_num(k.get('mean_tau_b'))} "
                f"{_ci(k.get('ci'))} over {k.get('items', 0)} instruction(s). "
                f"Krippendorff's alpha (ordinal): {_num(raters.get('krippendorff_alpha_ordinal'))}."
            )
        )
    return "".join(parts)


def _html_score(col: str, s: JSON, level: str) -> str:
    direction = "higher is better" if s["higher_is_better"] else "lower is better"
    rows = [
        [
            m,
            _num(p["n"]),
            _num(p["mean"]),
            _ci(p["ci"]),
            _num(p["sd"]),
            _num(s["mean_rank"].get(m)),
            _num(s["win_rate"].get(m)),
            _num(s["win_rate_non_tied"].get(m)),
        ]
        for m, p in s["per_model"].items()
    ]
    header = ["arm", "n", "mean", f"{level} CI", "SD", "mean rank", "win rate", "win rate (non-tied)"]
    parts = [f"<h4>{_e(col)} ({direction})</h4>", _html_table(header, rows), _heatmap_pair(col, s)]
    if s["pairs"]:
        pair_rows = [
            [
                f"{p['model']} − {p['opponent']}",
                _num(p["n"]),
                _num(p["mean_difference"]),
                _ci(p["ci"]),
                _num(p["pvalue"]),
                _num(p["pvalue_bonferroni"]),
                _num(p["mcnemar"]["pvalue"]) if "mcnemar" in p else "—",
            ]
            for p in s["pairs"]
        ]
        header = ["pair", "n", "mean diff", f"{level} CI", "p (permutation)", "p (Bonferroni)", "p (McNemar)"]
        parts.append(_html_table(header, pair_rows))
    return "".join(parts)


def _html_subgroups(sub: JSON) -> str:
    rows = [
        [
            m,
            t["attribute"],
            _num(len(t["groups"])),
            _num(t["chi2"]),
            _num(t["dof"]),
            _num(t["pvalue"]),
            _num(t["pvalue_bonferroni"]),
        ]
        for m, tests in sub.items()
        for t in tests
    ]
    if not rows:
        return ""
    header = ["arm", "attribute", "groups", "χ²", "dof", "p", "p (Bonferroni)"]
    return "<h3>Correctness by subgroup (chi-square, Bonferroni over attributes)</h3>" + _html_table(
        header, rows
    )


def _html_generic(view: JSON, label: str, level: str) -> str:
    generic = view.get("analyze")
    if generic is None:
        return ""
    parts = []
    human = generic.get("human")
    if human:
        parts.append(_html_reference(human, label, level))
    if generic["scores"]:
        parts.append("<h3>Scores per arm</h3>")
        parts += [_html_score(col, s, level) for col, s in generic["scores"].items()]
    if generic.get("subgroups"):
        parts.append(_html_subgroups(generic["subgroups"]))
    return "".join(parts)


def _html_sections(view: JSON, level: str) -> list[str]:
    parts: list[str] = []
    if view["errors"]["responses"]:
        parts += [
            "<h3>Provider errors</h3>",
            _html_table(["arm", "errors", *_error_kinds(view)], _errors_rows(view)),
        ]
    if view["per_model"]:
        parts += [
            "<h3>Correctness and rank per arm</h3>",
            _html_table(_per_model_header(level), _per_model_rows(view)),
        ]
    if view["easy_hard"]:
        parts += ["<h3>Easy and hard instructions</h3>", _ul(_easy_hard_lines(view["easy_hard"]))]
    for key, b in (view["breakdowns"] or {}).items():
        if b is not None:
            header, rows = _breakdown_rows(b, view["models"])
            parts += [f"<h3>By {_e(BREAKDOWN_TITLES[key])}</h3>", _html_table(header, rows)]
    if view["response_length"]:
        parts.append(
            f"<h3>Response length</h3>{_p('Counted with ' + view['response_length']['counter'], 'note')}"
        )
        parts.append(_html_table(LENGTH_HEADER, _length_rows(view["response_length"])))
    if view["minimum_detectable_difference"]:
        parts.append("<h3>Minimum detectable difference</h3>")
        parts.append(_html_table(MDD_HEADER, _mdd_rows(view["minimum_detectable_difference"])))
    return parts


def _html_view(name: str, view: JSON, result: JSON) -> str:
    level = _level(result)
    parts = [f'<section id="{_e(name)}"><h2>{_e(VIEW_TITLES.get(name, name))}</h2>', _p(view["description"])]
    parts.append(_p(f"{view['rows']:,} rows, {view['items']:,} instructions, {len(view['models'])} arms."))
    if view.get("dropped_items"):
        parts.append(_p(f"Dropped instructions: {', '.join(view['dropped_items'])}."))
    parts += _html_sections(view, level)
    parts.append(_html_generic(view, result["reference_label"], level))
    if view["undefined"]:
        parts += ["<h3>Undefined statistics</h3>", _ul(view["undefined"])]
    parts.append("</section>")
    return "".join(parts)


def render_html(result: JSON) -> str:
    """One self-contained HTML page: no script, no external resource, both views."""
    inp, o = result["input"], result["options"]
    head = [
        "<h1>MedAlign analysis</h1>",
        _p(
            f"Input {inp['table']}: {inp['rows']:,} rows, {inp['items']:,} instructions, "
            f"{len(inp['models'])} arms ({', '.join(inp['models'])})."
        ),
        _p(f"Reference: {_reference(result)}."),
        _p(f"Bootstrap: {o['resamples']:,} resamples, seed {o['seed']}, {_level(result)} intervals.", "note"),
    ]
    warning = _computed_warning(result)
    if warning:
        head.append(_p(warning, "warning"))
    if result["error_items"]:
        head.append(_p(f"Instructions with a provider error in some arm ({len(result['error_items'])}):"))
        head.append(_html_table(["instruction", "arm: error"], _error_rows(result)))
    body = "".join(head) + "".join(_html_view(n, v, result) for n, v in result["views"].items())
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>MedAlign analysis</title><style>{CSS}</style></head><body>{body}</body></html>\n"
    )


def write_report(result: JSON, out_dir: Path) -> list[Path]:
    """medalign.json, medalign.md and medalign.html in ``out_dir``, each written atomically.

    Both renderings are produced before anything is written, so a rendering error leaves the
    folder as it was.
    """
    md, page = render_markdown(result), render_html(result)
    out = [out_dir / "medalign.json", out_dir / "medalign.md", out_dir / "medalign.html"]
    atomic_write_json(out[0], result)
    atomic_write_text(out[1], md + ("" if md.endswith("\n") else "\n"))
    atomic_write_text(out[2], page)
    return out
