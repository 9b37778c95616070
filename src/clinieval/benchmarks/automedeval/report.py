"""The AutoMedEval report: the analysis JSON as Markdown and HTML (``automedeval.{json,md,html}``).

Built from the analysis result alone, through the shared document model (which escapes every
string), so the three files can never disagree. It states the estimator first; the headline table
puts the judges side by side with their CIs, n and their test against the best judge; then the
spread across runs, the correlations (clustered by item, the pooled figure beside them), the
physicians, the win/tie rates per model pair by each judge and by the physicians on the same
items, the bias figures with their CIs and verdicts, the rationale quality and what could not be
computed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval import report
from clinieval.report.charts import grouped_bar_chart_svg
from clinieval.report.document import Block, Document, Paragraph, Raw, Section, Table

JSON = dict[str, Any]


def _n(value: float | None, digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def _with_ci(value: float | None, ci: Sequence[float] | None) -> str:
    if value is None:
        return "—"
    return _n(value) if not ci else f"{_n(value)} [{_n(ci[0])}, {_n(ci[1])}]"


def _corr(entry: JSON | None) -> str:
    if not entry:
        return "—"
    p = entry.get("pvalue")
    return _with_ci(entry["r"], entry.get("ci")) + ("" if p is None else f"; p={p:.3g}")


ESTIMATOR_TEXT = {
    "per-run": (
        "Estimator: per-run (the paper's). Every metric is computed on each run's own verdicts (a "
        "reply that failed in a run counts its item's pairs wrong in that run, and is missing from "
        "that run's correlations), then averaged over the runs; the spread across runs is shown as "
        "SD and min–max. CIs and tests are over items, each item's figure averaged over the runs."
    ),
    "mean-scores": (
        "Estimator: mean-scores (not the paper's). Each answer's judge score is its mean over the "
        "parsed repeats, and the metrics are computed once on the means; an item is unparsed only "
        "when every repeat failed. Means rarely tie, so this flatters Accuracy_2-tuple and differs "
        "from the paper's Table 2 (per-run, the default)."
    ),
}


def _vs_best(block: JSON, best: str | None) -> str:
    if block["judge"] == best:
        return "best"
    test = block.get("vs_best")
    if not test:
        return "—"
    t = test.get("t_test")
    diff = test.get("difference_2tuple")
    parts = []
    if diff:
        parts.append(f"Δ2-tuple {diff['mean']:+.3f} [{diff['ci'][0]:+.3f}, {diff['ci'][1]:+.3f}]")
    parts.append(f"t-test p={t['pvalue']:.3g}" if t else "t-test undefined")
    m = test.get("mcnemar_triple")
    if m:
        parts.append(f"McNemar (triple) p={m['pvalue']:.3g}")
    return "; ".join(parts)


def _items_n(result: JSON) -> str:
    counts = sorted({int(a["items"]) for b in result["judges"] if (a := b.get("agreement"))})
    return " / ".join(map(str, counts)) if counts else "0"


def _headline(result: JSON) -> list[Block]:
    rows = []
    for b in result["judges"]:
        a = b.get("agreement") or {}
        rows.append([
            b["judge"], f"{b['parsed']}/{b['verdicts']} ({_n(b['parse_rate'], 2)})", str(b.get("runs", "—")),
            _with_ci(a.get("accuracy_2tuple"), a.get("accuracy_2tuple_ci")),
            _with_ci(a.get("accuracy_triple"), a.get("accuracy_triple_ci")),
            _corr(a.get("spearman")), _corr(a.get("pearson")), _vs_best(b, result.get("best")),
        ])  # fmt: skip
    header = ["judge", "parsed", "runs", "Accuracy_2-tuple [95% CI]", "Accuracy_triple [95% CI]",
              "Spearman [CI]; p", "Pearson [CI]; p", "against the best"]  # fmt: skip
    blocks: list[Block] = [Table(header, rows)]
    same_items = (
        f"Every judge on the same items: n = {_items_n(result)} items the physicians rated (an unparsed "
        "verdict counts all the item's pairs wrong). "
        if result.get("rated")
        else ""
    )
    blocks.append(
        Paragraph(
            same_items + "Accuracy: percentile bootstrap over items; correlations: CI and p from a "
            "cluster bootstrap over items (the responses of one item are not independent; at least 10 "
            "items; the pooled figures are below). The best judge has the highest Accuracy_triple; the "
            "others are tested against it on the same items (paired t-test on each item's share of "
            "pairs ordered right, as the paper; McNemar on the triple outcomes, clustered by item when "
            "there are several runs).",
            "note",
        )
    )
    rated = [b for b in result["judges"] if b.get("agreement")]
    if rated:
        names = [b["judge"] for b in rated]
        series = {
            "Accuracy_2-tuple": [b["agreement"]["accuracy_2tuple"] for b in rated],
            "Accuracy_triple": [b["agreement"]["accuracy_triple"] for b in rated],
        }
        svg = grouped_bar_chart_svg("Agreement with physicians, by judge", names, series, (0.0, 1.0))
        blocks.append(Raw(svg, "(figure: the accuracies above, as bars)"))
    return blocks


def _spread(result: JSON) -> list[Block]:
    rows = []
    names = {"accuracy_2tuple": "Accuracy_2-tuple", "accuracy_triple": "Accuracy_triple",
             "spearman": "Spearman", "pearson": "Pearson"}  # fmt: skip
    identical = []
    for b in result["judges"]:
        spread = (b.get("agreement") or {}).get("spread") or {}
        same = bool(b.get("runs_identical"))
        if same and spread:
            identical.append(b["judge"])
        for key, label in names.items():
            x = spread.get(key)
            if not x:
                continue
            values = ", ".join(_n(v) for v in x["values"])
            if same:
                rows.append([b["judge"], label, "not measured (runs identical)", "not measured", values])
            else:
                rows.append([b["judge"], label, _n(x["sd"]), f"{_n(x['min'])}–{_n(x['max'])}", values])
    if not rows:
        return []
    blocks: list[Block] = [
        Table(["judge", "metric", "SD across runs", "min–max", "per run"], rows),
        Paragraph("Sample SD over the runs (— with a single run).", "note"),
    ]
    if identical:
        blocks.append(
            Paragraph(
                f"The runs of {', '.join(identical)} were identical (every item got the same verdict in "
                "every run: a deterministic judge, e.g. at temperature 0): their spread is 0 by "
                "construction, so it is reported as not measured, not as a stable judge.",
                "warning",
            )
        )
    return blocks


def _correlations(result: JSON) -> list[Block]:
    rows = []

    def p_of(value: float | None) -> str:
        return "—" if value is None else f"{value:.3g}"

    def ci_of(ci: Sequence[float] | None) -> str:
        return "—" if not ci else f"[{_n(ci[0])}, {_n(ci[1])}]"

    for b in result["judges"]:
        a = b.get("agreement") or {}
        for name in ("spearman", "pearson"):
            x = a.get(name)
            if not x or "items" not in x:
                continue
            pooled = x.get("pooled") or {}
            rows.append([
                b["judge"], name.capitalize(), _n(x["r"]), ci_of(x.get("ci")), p_of(x.get("pvalue")),
                p_of((x.get("item_permutation") or {}).get("pvalue")), f"{x['items']} / {x['n']}",
                ci_of(pooled.get("ci")), p_of(pooled.get("pvalue")),
            ])  # fmt: skip
    if not rows:
        return []
    header = ["judge", "", "r", "95% CI, items resampled", "p, items resampled", "item-permutation p",
              "n items / responses per run", "pooled: Fisher z CI", "pooled p"]  # fmt: skip
    return [
        Table(header, rows),
        Paragraph(
            "The CI and p-value resample whole items (cluster bootstrap: percentile CI, shifted-bootstrap "
            "p), so an item's responses stay together. Item-permutation p (one-sided): the items' judge "
            "scores permuted among the items; it asks whether the judge follows each item's answers "
            "beyond a pattern common to all items, and is 1 for a judge that scores every item alike "
            "(e.g. the first shown highest, under a fixed order). The pooled columns treat every "
            "response as independent (Fisher z, t-test on n - 2 df): a labelled secondary, narrower "
            "than the data support.",
            "note",
        ),
    ]


def _physicians(result: JSON) -> list[Block]:
    p = result.get("physicians")
    if not p:
        return [Paragraph("The set has no physician ratings: agreement cannot be measured.", "warning")]
    icc = p.get("icc") or {}
    rows = [
        ["physicians", str(p["physicians"])],
        ["responses", str(p["responses"])],
        ["ICC2 (single rater)", _with_ci(icc.get("ICC2", {}).get("icc"), icc.get("ICC2", {}).get("ci"))],
        ["ICC2k (mean of raters)", _with_ci(icc.get("ICC2k", {}).get("icc"), icc.get("ICC2k", {}).get("ci"))],
        ["Krippendorff's alpha (interval)", _n(p.get("alpha"))],
    ]
    blocks: list[Block] = [Table(["", "value"], rows)]
    means = result.get("model_means")
    if means:
        blocks.append(
            Table(["model", "mean physician score (1-5)"], [[m, _n(v, 2)] for m, v in means.items()])
        )
    blocks.append(Paragraph("The paper's five physicians: ICC 0.712, alpha 0.725.", "note"))
    return blocks


def _cell(o: JSON) -> str:
    if o["win_rate"] is None:
        return "—"
    return f"{_n(o['win_rate'], 2)} / {_n(o['tie_rate'], 2)} / {_n(1 - o['win_rate'] - o['tie_rate'], 2)}"


def _win_tie(result: JSON) -> list[Block]:
    blocks: list[Block] = []
    estimator = result.get("estimator", "per-run")
    for b in result["judges"]:
        w = b.get("win_tie")
        if not w or not w.get("judge"):
            continue
        human = w.get("physicians") or []
        header = ["pair", "physicians win / tie / loss", f"{b['judge']} win / tie / loss"]
        rows = [
            [f"{j['model']} vs {j['opponent']}", _cell(human[k]) if human else "—", _cell(j)]
            for k, j in enumerate(w["judge"])
        ]
        units = w.get("units")
        n = f"n = {w['items']} items" + (
            f", {units} (item, run) units" if units is not None and estimator == "per-run" else ""
        )
        blocks += [Paragraph(f"{b['judge']}: {n}, the same for both columns."), Table(header, rows)]
    if not blocks:
        return []
    everyone = result.get("physician_win_tie_items")
    blocks.append(
        Paragraph(
            "Rates of the first model against the second. Each table compares the judge and the "
            "physicians on the same units: the items every physician rated and the judge scored (per "
            "run under the per-run estimator: an item counts once per run its verdict parsed, in both "
            f"columns). The physicians alone, over all {everyone} fully rated items, are in "
            "automedeval.json (physician_win_tie).",
            "note",
        )
    )
    return blocks


def _figure(value: float | None, ci: Sequence[float] | None, signed: bool = True) -> str:
    if value is None:
        return "—"
    fmt = "{:+.3f}" if signed else "{:.3f}"
    text = fmt.format(value)
    return text if not ci else f"{text} [{fmt.format(ci[0])}, {fmt.format(ci[1])}]"


def _bias(result: JSON) -> list[Block]:
    rows = []
    for b in result["judges"]:
        x = b["bias"]
        swap, first, length = x["swap_consistency"], x["first_shown_wins"], x["length_preference"]
        control = swap["control"]
        diff = swap.get("difference") or {}
        rows.append([
            b["judge"], "swap consistency",
            f"{_with_ci(swap['rate'], swap['ci'])} ({swap['comparisons']} pairs)",
            f"same-order control {_with_ci(control['rate'], control['ci'])} ({control['comparisons']} pairs)",
            _figure(diff.get("value"), diff.get("ci")), swap["verdict"],
        ])  # fmt: skip
        rows.append([
            b["judge"], "first shown wins",
            f"{_n(first['rate'])} ({first['repeats']} repeats)",
            f"chance from its own scores, ties counted: {_n(first['chance'])}",
            _figure(first.get("excess"), first.get("ci")), first["verdict"],
        ])  # fmt: skip
        ldiff = length.get("difference") or {}
        physicians = length.get("physicians")
        reference = (
            f"physicians on the same items: {_n(physicians['rate'])} ({physicians['pairs']} pairs)"
            if physicians
            else "0.5 (no physician ratings)"
        )
        rows.append([
            b["judge"], "longer preferred",
            f"{_with_ci(length['rate'], length['ci'])} ({length['pairs']} pairs, "
            f"{length.get('items', '—')} items)",
            reference, _figure(ldiff.get("value"), ldiff.get("ci")), length["verdict"],
        ])  # fmt: skip
    header = [
        "judge",
        "figure",
        "judge's rate [95% CI] (n)",
        "compared with",
        "difference [95% CI]",
        "verdict",
    ]
    orders = sorted({str(b["bias"].get("order")) for b in result["judges"]})
    note = Paragraph(
        f"Order design: {', '.join(orders)} (fixed = the paper's protocol, every repeat in the given "
        "order; shuffled = an independent seeded order per repeat; balanced = a Latin square of "
        "rotations, each answer in each position equally often). Swap consistency: a pair's relation "
        "(<, =, >) survives two repeats that showed it in opposite orders, against the same share over "
        "two repeats in the identical order (the judge's run-to-run noise). First shown wins: the "
        "answer shown first scored strictly highest, against an order-blind judge with the same "
        "scores (1/k when one answer is strictly highest, 0 when the top is tied). Longer preferred: "
        "of pairs scored differently whose lengths differ, the longer won, against the physicians on "
        "the same items (longer answers may be better). CIs: percentile bootstrap over items; a "
        "verdict names a bias only when its CI excludes 0. Under fixed order the same answer is "
        "always first, so position bias is not measurable: run with --order balanced for it.",
        "note",
    )
    n = ", ".join(f"{b['judge']} {b['bias'].get('items', '—')}" for b in result["judges"])
    return [Table(header, rows), Paragraph(f"Items with a parsed verdict: {n}."), note]


def _rationale(result: JSON) -> list[Block]:
    rows = [
        [b["judge"], _n(r["bertscore_f1"]), str(r["items"]), str(r["verdicts"])]
        for b in result["judges"]
        if (r := b.get("rationale"))
    ]
    blocks: list[Block] = []
    if rows:
        header = ["judge", "BERTScore F1 (all-MiniLM-L6-v2)", "items", "rationales"]
        blocks.append(Table(header, rows))
    blocks.append(Paragraph(result["bartscore"], "note"))
    return blocks


def build_document(result: JSON) -> Document:
    """The report of an analysis result; its ``warnings`` (e.g. judges not credible) head the page."""
    estimator = result.get("estimator", "mean-scores")
    blocks: list[Block] = [
        Paragraph(
            f"{result['items']} items, {', '.join(map(str, result['responses_per_item']))} responses each."
        ),
        Paragraph(ESTIMATOR_TEXT.get(estimator, f"Estimator: {estimator}.")),
        Section("Judges side by side", _headline(result), anchor="judges"),
    ]
    spread = _spread(result)
    if spread:
        blocks.append(Section("Spread across runs", spread, anchor="spread"))
    correlations = _correlations(result)
    if correlations:
        blocks.append(Section("Correlations with the physicians", correlations, anchor="correlations"))
    blocks.append(Section("Physicians", _physicians(result), anchor="physicians"))
    win_tie = _win_tie(result)
    if win_tie:
        blocks.append(Section("Win/tie rates per model pair", win_tie, anchor="win-tie"))
    blocks.append(Section("Position and length bias", _bias(result), anchor="bias"))
    blocks.append(Section("Rationale quality", _rationale(result), anchor="rationale"))
    undefined = list(result.get("undefined") or [])
    for b in result["judges"]:
        undefined += [f"{b['judge']}: {u}" for u in (b.get("agreement") or {}).get("undefined", [])]
        undefined += [f"{b['judge']} vs best: {u}" for u in (b.get("vs_best") or {}).get("undefined", [])]
    if undefined:
        blocks.append(Section("Not computed", [report.BulletList(undefined)]))
    return Document(
        "AutoMedEval: judges against physicians", blocks, warnings=list(result.get("warnings", []))
    )


def write(result: JSON, out: Path) -> list[Path]:
    """``automedeval.json``, ``.md`` and ``.html`` in ``out``, each atomic."""
    out.mkdir(parents=True, exist_ok=True)
    return report.write_report(result, build_document(result), out, "automedeval")
