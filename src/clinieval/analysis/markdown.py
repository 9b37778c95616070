"""Markdown rendering of an :func:`clinieval.analysis.analyze.analyze` result.

Kept apart from the computation so the JSON stays the single source of the numbers: the report
only formats what is in it (``—`` for a value that is undefined, never a made-up 0).

Text that comes from the data (model names, column names, labels, reasons) is escaped wherever it
is rendered: ``|`` cannot add a table column and ``<b>`` stays text rather than becoming HTML.
The human reference is named by its label (``human_label``: "clinician" unless the caller said
otherwise, e.g. "computed reference"), never assumed to be clinicians.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

JSON = dict[str, Any]

DEFAULT_LABEL = "clinician"


_TABLE_SPECIALS = ("\\", "|", "<", ">")
_EMPHASIS_SPECIALS = ("*", "`", "[", "]")
# An underscore inside a word (gpt_4_turbo) is never emphasis; only the others are escaped.
_EDGE_UNDERSCORE = re.compile(r"(?<![0-9A-Za-z])_|_(?![0-9A-Za-z])")


def md_escape(text: str, *, strict: bool = False) -> str:
    """Markdown-safe text from the data, on one line: the one Markdown escaper of the package.

    Always: backslash, pipe and angle brackets backslash-escaped (``|`` cannot add a table column,
    ``<b>`` stays text) and newlines folded to spaces. ``strict`` also escapes the emphasis and
    link characters (``*``, the backtick, ``[``, ``]``, and ``_`` at a word's edge), for text placed
    beside emphasis the renderer adds itself; tables of numbers leave them alone, so a confidence
    interval stays ``[0.1, 0.2]`` in the raw text.
    """
    for raw in _TABLE_SPECIALS + (_EMPHASIS_SPECIALS if strict else ()):
        text = text.replace(raw, "\\" + raw)
    if strict:
        text = _EDGE_UNDERSCORE.sub(r"\\_", text)
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")


def _title(label: str) -> str:
    """The label at the start of a heading: first letter upper-cased, the rest as given."""
    return label[:1].upper() + label[1:]


def _f(value: Any, digits: int = 3) -> str:
    if value is None:
        return "—"
    if isinstance(value, bool):
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value != 0 and abs(value) < 10**-digits:
            return f"{value:.1e}"
        return f"{value:.{digits}f}"
    return str(value)


def _ci(ci: Sequence[float] | None) -> str:
    return "—" if not ci else f"[{_f(ci[0])}, {_f(ci[1])}]"


def _table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> list[str]:
    """A Markdown table; every header and cell is escaped here, so callers pass raw text."""
    lines = ["| " + " | ".join(map(md_escape, header)) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(map(md_escape, r)) + " |" for r in rows]
    return [*lines, ""]


def _h2h(h: JSON | None, title: str) -> list[str]:
    if h is None:  # fewer than two models: listed under undefined
        return []
    models = h["models"]
    rows = [[m, *(_f(v) for v in rates)] for m, rates in zip(models, h["rates"], strict=True)]
    return [f"{title} (row beats column):", "", *_table(["", *models], rows)]


def _win_rows(models: Sequence[str], section: JSON) -> list[list[str]]:
    win, non_tied = section.get("win_rate") or {}, section.get("win_rate_non_tied") or {}
    return [[_f(win.get(m)), _f(non_tied.get(m))] for m in models]


def _ranking_rows(models: Sequence[str], section: JSON) -> list[list[str]]:
    return [
        [_f(section["mean_rank"].get(m)), *w] for m, w in zip(models, _win_rows(models, section), strict=True)
    ]


def _score(col: str, s: JSON, level: float) -> list[str]:
    direction = "higher is better" if s["higher_is_better"] else "lower is better"
    out = [f"## {md_escape(col)} ({direction})", ""]
    models = list(s["per_model"])
    rows = [
        [m, _f(p["n"]), _f(p["mean"]), _ci(p["ci"]), _f(p["sd"]), *r]
        for (m, p), r in zip(s["per_model"].items(), _ranking_rows(models, s), strict=True)
    ]
    header = ["model", "n", "mean", f"{level:.0%} CI", "SD", "mean rank", "win rate", "win rate (non-tied)"]
    out += _table(header, rows)
    out += _h2h(s["head_to_head"], "Head-to-head, all items")
    out += _h2h(s["head_to_head_non_tied"], "Head-to-head, non-tied items only")
    if s["pairs"]:
        rows = [
            [
                f"{p['model']} − {p['opponent']}",
                _f(p["n"]),
                _f(p.get("unpaired")),
                _f(p["mean_difference"]),
                _ci(p["ci"]),
                _f(p["pvalue"]),
                _f(p["pvalue_bonferroni"]),
                _f(p["mcnemar"]["pvalue"]) if "mcnemar" in p else "—",
                _f(p["sigma_d"]),
                _f(p["minimum_detectable_difference"]),
            ]
            for p in s["pairs"]
        ]
        header = [
            "pair",
            "n",
            "unpaired",
            "mean diff",
            "CI",
            "p (permutation)",
            "p (Bonferroni)",
            "p (McNemar)",
            "σ_d",
            "MDD (power 0.8, α 0.05)",
        ]
        note = "n: items scored for both; unpaired: items scored for only one (missing or failed), left out"
        out += [f"Paired comparisons ({note}):", "", *_table(header, rows)]
    return out


def _runs_compared(runs: Sequence[JSON]) -> list[str]:
    """The run folders behind the table (``clinieval analyze RUN_DIR...``): which model each arm is."""
    rows = [[r["model"], r["path"], _f(r["samples"]), _f(r["failed"]), _f(r["repeats"])] for r in runs]
    header = ["model", "run folder", "samples", "with a failed call", "repeats"]
    return ["## Runs", "", f"Task {md_escape(str(runs[0]['task']))}.", "", *_table(header, rows)]


def _human(h: JSON, level: float) -> list[str]:
    label = str(h.get("label", DEFAULT_LABEL))
    out = [f"## {md_escape(_title(label))} ranking ({md_escape(h['column'])}, rank 1 = best)", ""]
    models = list(h["mean_rank"])
    averaged = h.get("mean_rank_ties_averaged") or {}
    rows = [
        [m, _f(h["mean_rank"].get(m)), _f(averaged.get(m)), *w]
        for m, w in zip(models, _win_rows(models, h), strict=True)
    ]
    header = ["model", "mean rank (as given)", "mean rank (ties averaged)", "win rate", "win rate (non-tied)"]
    out += _table(header, rows)
    out += _h2h(h["head_to_head"], "Head-to-head, all items")
    out += _h2h(h["head_to_head_non_tied"], "Head-to-head, non-tied items only")
    rows = [
        [
            col,
            _f(a["mean_tau_b"]),
            _ci(a["ci"]),
            _f(a["items"]),
            _f(a["skipped_constant"]),
            _f(a["skipped_incomplete"]),
            _f(_mean_abs(a["win_rate_abs_error"])),
        ]
        for col, a in h["metric_agreement"].items()
    ]
    if rows:
        header = [
            "metric",
            "mean Kendall tau-b",
            f"{level:.0%} CI",
            "items",
            "skipped (constant)",
            "skipped (incomplete)",
            "mean |win-rate error|",
        ]
        title = f"Metric–{md_escape(label)} agreement (per-item Kendall tau-b, averaged):"
        out += [title, "", *_table(header, rows)]
    if h["metric_comparison"]:
        rows = [
            [
                z["metric"],
                z["other"],
                _f(z["n"]),
                _f(z["z"]),
                _f(z["pvalue"]),
                _f(z.get("tau_difference")),
                _ci(z.get("tau_difference_ci")),
            ]
            for z in h["metric_comparison"]
        ]
        out += [
            "Comparison of metrics' agreement: Fisher-Z on the mean taus (the paper's) and a paired "
            "bootstrap over items of the per-item tau differences:",
            "",
            *_table(["metric", "vs", "n", "z", "p", "mean Δτ", "Δτ CI"], rows),
        ]
    pb = h.get("point_biserial_correct_vs_rank")
    if pb:
        out += [
            f"Point-biserial correlation, correct vs rank: r = {_f(pb['r'])} (p = {_f(pb['pvalue'])}, "
            f"n = {_f(pb['n'])})",
            "",
        ]
    return out


def _raters(section: JSON) -> list[str]:
    """The inter-rater figures a reference section carries with ``--rater`` (none without)."""
    if "raters" not in section:
        return []
    r = section["raters"]
    out = [f"Raters: {r['raters']}."]
    k = r.get("inter_rater_kendall")
    if k:
        out.append(
            f"Inter-rater mean Kendall tau-b: {_f(k['mean_tau_b'])} {_ci(k['ci'])} over {k['items']} items."
        )
    out += [f"Krippendorff's alpha (ordinal): {_f(r.get('krippendorff_alpha_ordinal'))}.", ""]
    return out


def _mean_abs(errors: dict[str, float | None]) -> float | None:
    vals = [abs(v) for v in errors.values() if v is not None]
    return sum(vals) / len(vals) if vals else None


def _judge(j: JSON, label: str) -> list[str]:
    name = md_escape(label)
    out = [f"## Judge scores vs {name} scores ({md_escape(j['column'])})", ""]
    cols = {k: v for k, v in j.items() if k not in ("column", "raters")}
    rows = [
        [
            col,
            _f(v["responses"]),
            _f((v["spearman"] or {}).get("r")),
            _f((v["pearson"] or {}).get("r")),
            _f(v["accuracy_2tuple"]),
            _f(v["accuracy_triple"]),
            _f(v["order_items"]),
            _f(v["judge_missing"]),
        ]
        for col, v in cols.items()
    ]
    header = [
        "judge",
        "responses",
        "Spearman",
        "Pearson",
        "Accuracy 2-tuple",
        "Accuracy triple",
        "items",
        "judge missing",
    ]
    out += _table(header, rows)
    for col, v in cols.items():
        rows = [
            [
                f"{w['model']} vs {w['opponent']}",
                _f(w["human"]["win"]),
                _f(w["human"]["tie"]),
                _f(w["judge"]["win"]),
                _f(w["judge"]["tie"]),
            ]
            for w in v["win_tie"]
        ]
        if not rows:  # fewer than two models: listed under undefined
            continue
        out += [
            f"Win/tie rates, {name} vs {md_escape(col)}:",
            "",
            *_table(["pair", f"{label} win", f"{label} tie", "judge win", "judge tie"], rows),
        ]
    return out


def _subgroups(s: JSON) -> list[str]:
    out = ["## Correctness by subgroup (chi-square, Bonferroni over attributes)", ""]
    rows = [
        [
            model,
            t["attribute"],
            _f(len(t["groups"])),
            _f(t["chi2"]),
            _f(t["dof"]),
            _f(t["pvalue"]),
            _f(t["pvalue_bonferroni"]),
            _f(t["min_expected"], 1),
        ]
        for model, tests in s.items()
        for t in tests
    ]
    return out + _table(
        ["model", "attribute", "groups", "χ²", "dof", "p", "p (Bonferroni)", "min expected"], rows
    )


def _runs(runs: JSON) -> list[str]:
    out = ["## Repeated runs", ""]
    for col, r in runs.items():
        rows = [
            [
                m,
                _f(p["runs"]),
                _f(p["mean"]),
                _f(p["sd"]),
                _f(r["gold_ranks"].get(m)),
                _f(r["rank_instability_per_model"].get(m)),
            ]
            for m, p in r["per_model"].items()
        ]
        out += [
            f"{md_escape(col)}: rank instability Σ\\|rank − mode rank\\| = {_f(r['rank_instability'])}",
            "",
            *_table(["model", "runs", "mean over runs", "SD over runs", "mode rank", "instability"], rows),
        ]
    return out


def render_markdown(result: JSON) -> str:
    """The whole analysis as a Markdown document."""
    o = result["options"]
    level = float(o["level"])
    lines = [
        f"# Analysis of {md_escape(str(result['table']))}",
        "",
        f"{result['rows']:,} rows, {result['items']:,} items, {len(result['models'])} models. "
        f"Bootstrap: {o['resamples']:,} resamples, seed {o['seed']}"
        + (f", clustered by {md_escape(o['cluster'])}" if o["cluster"] else "")
        + ".",
        "",
    ]
    if result.get("run_folders"):
        lines += _runs_compared(result["run_folders"])
    for col, s in result["scores"].items():
        lines += _score(col, s, level)
    if "human" in result:
        lines += _human(result["human"], level) + _raters(result["human"])
    if "judge_vs_human" in result:
        judge = result["judge_vs_human"]
        lines += _judge(judge, str(o.get("human_label", DEFAULT_LABEL))) + _raters(judge)
    if "subgroups" in result:
        lines += _subgroups(result["subgroups"])
    if "runs" in result:
        lines += _runs(result["runs"])
    if result["undefined"]:
        lines += ["## Undefined statistics", "", *(f"- {md_escape(u)}" for u in result["undefined"]), ""]
    return "\n".join(lines)


# Public names for other reports: one number format and one table layout for every Markdown table.
md_number = _f
md_table = _table
