"""The MedAlign analysis as a report: Markdown and one self-contained HTML page.

Both read only the JSON of :func:`clinieval.benchmarks.medalign.analysis.medalign_analysis`,
through one :class:`clinieval.report.Document` (:func:`build_document`) that
:mod:`clinieval.report` renders to both formats. In the HTML page the head-to-head matrices are
inline SVG heatmaps with the number in every cell (:mod:`clinieval.report.heatmap`); Markdown
shows the same matrices as tables. Text that came from the data (arm names, instruction ids,
categories) is escaped by the renderers, since arm names are free text.

The reference ranking is always printed with its label ("clinician", "computed reference"),
including in the generic statistics: a ranking computed from a metric must never read as
clinicians' judgement.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval import report
from clinieval.analysis.markdown import md_number as _num
from clinieval.report import Block, BulletList, Document, Paragraph, Section, Table
from clinieval.report.heatmap import head_to_head

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


# --- formatting and rows -------------------------------------------------------------------------


def _pct(value: Any) -> str:
    return "—" if value is None else f"{value:.1f}%"


def _ci(ci: Sequence[float] | None) -> str:
    return "—" if not ci else f"[{_num(ci[0])}, {_num(ci[1])}]"


def _pct_ci(ci: Sequence[float] | None) -> str:
    return "—" if not ci else f"[{ci[0]:.1f}, {ci[1]:.1f}]"


def _level(result: JSON) -> str:
    return f"{float(result['options']['level']):.0%}"


def _reference(result: JSON) -> str:
    return f"{result['reference_label']} ranking (column {result['columns']['rank']!r}, 1 = best)"


def _capital(label: str) -> str:
    return label[:1].upper() + label[1:]


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


def _clustering_note(view: JSON) -> str:
    """Which unit the intervals and paired tests resample, so a reader can judge their width."""
    c = view.get("clustering") or {}
    if c.get("by"):
        return (
            f"Intervals and paired tests resample patients ({c['patients']:,} patients, "
            f"{c['items']:,} instructions): a patient's instructions are drawn together."
        )
    why = c.get("why", "no patient column")
    return f"Intervals and paired tests resample instructions one by one ({why})."


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


# --- generic statistics (analyze's JSON for one view) --------------------------------------------


def _win_cells(section: JSON, m: str) -> list[str]:
    return [
        _num((section.get("win_rate") or {}).get(m)),
        _num((section.get("win_rate_non_tied") or {}).get(m)),
    ]


def _agreement_blocks(human: JSON, label: str, level: str) -> list[Block]:
    models = list(human["mean_rank"])
    rows = [
        [
            col,
            _num(a["mean_tau_b"]),
            _ci(a["ci"]),
            _num(a["items"]),
            _num(a["skipped_constant"]),
            _num(a["skipped_incomplete"]),
            _num(_mean_abs(a["win_rate_abs_error"])),
            *(_num(a["win_rate_abs_error"].get(m)) for m in models),
        ]
        for col, a in human["metric_agreement"].items()
    ]
    if not rows:
        return []
    header = ["column", "mean Kendall tau-b", f"{level} CI", "items", "skipped (constant)"]
    header += ["skipped (incomplete)", "mean |win-rate error|", *(f"|win-rate error| {m}" for m in models)]
    what = f"Agreement of each column with the {label} ranking (per-instruction Kendall tau-b, averaged):"
    return [Paragraph(what), Table(header, rows)]


def _mean_abs(errors: dict[str, float | None]) -> float | None:
    values = [abs(v) for v in errors.values() if v is not None]
    return sum(values) / len(values) if values else None


def _reference_section(human: JSON, label: str, level: str) -> Section:
    rows = [
        [m, _num(rank), _num((human.get("mean_rank_ties_averaged") or {}).get(m)), *_win_cells(human, m)]
        for m, rank in human["mean_rank"].items()
    ]
    header = ["arm", "mean rank (as given)", "mean rank (ties averaged)", "win rate", "win rate (non-tied)"]
    blocks: list[Block] = [Table(header, rows), *head_to_head(f"{label} ranking", human)]
    blocks += _agreement_blocks(human, label, level)
    if human["metric_comparison"]:
        rows = [
            [
                z["metric"],
                z["other"],
                _num(z["n"]),
                _num(z["z"]),
                _num(z["pvalue"]),
                _num(z.get("tau_difference")),
                _ci(z.get("tau_difference_ci")),
            ]
            for z in human["metric_comparison"]
        ]
        blocks += [
            Paragraph(
                "Comparison of two columns' agreement: Fisher-Z on the mean taus (the paper's) and a "
                "paired bootstrap over instructions of the per-instruction tau differences:"
            ),
            Table(["column", "vs", "n", "z", "p", "mean Δτ", "Δτ CI"], rows),
        ]
    pb = human.get("point_biserial_correct_vs_rank")
    if pb:
        blocks.append(
            Paragraph(
                f"Point-biserial correlation, correct vs rank: r = {_num(pb['r'])} "
                f"(p = {_num(pb['pvalue'])}, n = {_num(pb['n'])})."
            )
        )
    raters = human.get("raters")
    if raters:
        k = raters.get("inter_rater_kendall")
        text = f"Raters: {raters['raters']}. "
        if k:
            text += (
                f"Inter-rater mean Kendall tau-b: {_num(k['mean_tau_b'])} {_ci(k['ci'])} "
                f"over {k['items']} instruction(s). "
            )
        text += f"Krippendorff's alpha (ordinal): {_num(raters.get('krippendorff_alpha_ordinal'))}."
        blocks.append(Paragraph(text))
    title = f"{_capital(label)} ranking (column {human['column']!r}, rank 1 = best)"
    return Section(title, blocks)


def _score_section(col: str, s: JSON, level: str) -> Section:
    direction = "higher is better" if s["higher_is_better"] else "lower is better"
    rows = [
        [
            m,
            _num(p["n"]),
            _num(p["mean"]),
            _ci(p["ci"]),
            _num(p["sd"]),
            _num(s["mean_rank"].get(m)),
            *_win_cells(s, m),
        ]
        for m, p in s["per_model"].items()
    ]
    header = ["arm", "n", "mean", f"{level} CI", "SD", "mean rank", "win rate", "win rate (non-tied)"]
    blocks: list[Block] = [Table(header, rows), *head_to_head(col, s)]
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
                _num(p["sigma_d"]),
                _num(p["minimum_detectable_difference"]),
            ]
            for p in s["pairs"]
        ]
        header = ["pair", "n", "mean diff", f"{level} CI", "p (permutation)", "p (Bonferroni)", "p (McNemar)"]
        header += ["σ_d", "MDD (power 0.8, α 0.05)"]
        blocks += [Paragraph("Paired comparisons:"), Table(header, pair_rows)]
    return Section(f"{col} ({direction})", blocks)


def _subgroup_section(sub: JSON) -> Section | None:
    rows = [
        [
            m,
            t["attribute"],
            _num(len(t["groups"])),
            _num(t["chi2"]),
            _num(t["dof"]),
            _num(t["pvalue"]),
            _num(t["pvalue_bonferroni"]),
            _num(t["min_expected"], 1),
        ]
        for m, tests in sub.items()
        for t in tests
    ]
    if not rows:
        return None
    header = ["arm", "attribute", "groups", "χ²", "dof", "p", "p (Bonferroni)", "min expected"]
    return Section("Correctness by subgroup (chi-square, Bonferroni over attributes)", [Table(header, rows)])


def _generic_section(view: JSON, label: str, level: str) -> Section | None:
    """analyze's statistics for the view: the reference ranking, every score column, subgroups.

    MedAlign never asks analyze for judge-vs-human scores or repeated runs, so those sections of
    analyze's JSON never occur here; analyze's undefined statistics are in the view's own list.
    """
    generic = view.get("analyze")
    if generic is None:
        return None
    o = generic["options"]
    cluster = f", clustered by {o['cluster']}" if o.get("cluster") else ""
    blocks: list[Block] = [
        Paragraph(
            f"{generic['rows']:,} rows, {generic['items']:,} instructions, {len(generic['models'])} arms. "
            f"Bootstrap: {o['resamples']:,} resamples, seed {o['seed']}{cluster}.",
            "note",
        )
    ]
    if generic.get("human"):
        blocks.append(_reference_section(generic["human"], label, level))
    if generic["scores"]:
        scores = [_score_section(col, s, level) for col, s in generic["scores"].items()]
        blocks.append(Section("Scores per arm", scores))
    subgroups = _subgroup_section(generic.get("subgroups") or {})
    if subgroups:
        blocks.append(subgroups)
    return Section("Generic statistics (clinieval analyze)", blocks)


# --- the document --------------------------------------------------------------------------------


def _view_sections(view: JSON, level: str) -> list[Block]:
    out: list[Block] = []
    if view["errors"]["responses"]:
        table = Table(["arm", "errors", *_error_kinds(view)], _errors_rows(view))
        out.append(Section("Provider errors", [table]))
    if view["per_model"]:
        table = Table(_per_model_header(level), _per_model_rows(view))
        note = Paragraph(_clustering_note(view), "note")
        out.append(Section("Correctness and rank per arm", [note, table]))
    if view["easy_hard"]:
        out.append(Section("Easy and hard instructions", [BulletList(_easy_hard_lines(view["easy_hard"]))]))
    for key, b in (view["breakdowns"] or {}).items():
        if b is not None:
            header, rows = _breakdown_rows(b, view["models"])
            out.append(Section(f"By {BREAKDOWN_TITLES[key]}", [Table(header, rows)]))
    lengths = view["response_length"]
    if lengths:
        counted = Paragraph(f"Counted with {lengths['counter']}.", "note")
        out.append(Section("Response length", [counted, Table(LENGTH_HEADER, _length_rows(lengths))]))
    mdd = view["minimum_detectable_difference"]
    if mdd:
        out.append(Section("Minimum detectable difference", [Table(MDD_HEADER, _mdd_rows(mdd))]))
    return out


def _view(name: str, view: JSON, result: JSON) -> Section:
    level = _level(result)
    blocks: list[Block] = [
        Paragraph(view["description"]),
        Paragraph(f"{view['rows']:,} rows, {view['items']:,} instructions, {len(view['models'])} arms."),
    ]
    if view.get("dropped_items"):
        blocks.append(Paragraph(f"Dropped instructions: {', '.join(view['dropped_items'])}."))
    blocks += _view_sections(view, level)
    generic = _generic_section(view, result["reference_label"], level)
    if generic:
        blocks.append(generic)
    if view["undefined"]:
        blocks.append(Section("Undefined statistics", [BulletList(view["undefined"])]))
    return Section(VIEW_TITLES.get(name, name), blocks, anchor=name)


def build_document(result: JSON) -> Document:
    """The whole MedAlign analysis, both views, as one document."""
    inp, o = result["input"], result["options"]
    blocks: list[Block] = [
        Paragraph(
            f"Input {inp['table']}: {inp['rows']:,} rows, {inp['items']:,} instructions, "
            f"{len(inp['models'])} arms ({', '.join(inp['models'])})."
        ),
        Paragraph(f"Reference: {_reference(result)}."),
        Paragraph(
            f"Bootstrap: {o['resamples']:,} resamples, seed {o['seed']}, {_level(result)} intervals.", "note"
        ),
    ]
    if result["error_items"]:
        blocks.append(
            Paragraph(f"Instructions with a provider error in some arm ({len(result['error_items'])}):")
        )
        blocks.append(Table(["instruction", "arm: error"], _error_rows(result)))
    blocks += [_view(name, view, result) for name, view in result["views"].items()]
    warning = _computed_warning(result)
    return Document("MedAlign analysis", blocks, warnings=[warning] if warning else [])


def render_markdown(result: JSON) -> str:
    return report.render_markdown(build_document(result))


def render_html(result: JSON) -> str:
    """One self-contained HTML page: no script, no external resource, both views."""
    return report.render_html(build_document(result))


def write_report(result: JSON, out_dir: Path) -> list[Path]:
    """medalign.json, medalign.md and medalign.html in ``out_dir``, each written atomically."""
    return report.write_report(result, build_document(result), out_dir, "medalign")
