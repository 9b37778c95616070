"""The AutoMedEval report: the analysis JSON as Markdown and HTML (``automedeval.{json,md,html}``).

Built from the analysis result alone, through the shared document model (which escapes every
string), so the three files can never disagree. The headline table puts the judges side by side
with their CIs and their test against the best judge; then the physicians, the win/tie rates per
model pair by physicians and by each judge, the bias rates, the rationale quality and what could
not be computed.
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
    return "—" if not entry else _with_ci(entry["r"], entry.get("ci"))


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


def _headline(result: JSON) -> list[Block]:
    rows = []
    for b in result["judges"]:
        a = b.get("agreement") or {}
        rows.append([
            b["judge"], f"{b['parsed']}/{b['verdicts']} ({_n(b['parse_rate'], 2)})",
            _with_ci(a.get("accuracy_2tuple"), a.get("accuracy_2tuple_ci")),
            _with_ci(a.get("accuracy_triple"), a.get("accuracy_triple_ci")),
            _corr(a.get("spearman")), _corr(a.get("pearson")), _vs_best(b, result.get("best")),
        ])  # fmt: skip
    header = ["judge", "parsed", "Accuracy_2-tuple [95% CI]", "Accuracy_triple [95% CI]",
              "Spearman [CI]", "Pearson [CI]", "against the best"]  # fmt: skip
    blocks: list[Block] = [Table(header, rows)]
    blocks.append(
        Paragraph(
            "Accuracy: percentile bootstrap over items; correlations: Fisher z. The best judge has the "
            "highest Accuracy_triple; the others are tested against it on the same items (paired t-test "
            "on each item's share of pairs ordered right, as the paper; McNemar on the items' triple "
            "outcomes). An unparsed verdict counts all the item's pairs wrong.",
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


def _win_tie(result: JSON) -> list[Block]:
    human = result.get("physician_win_tie")
    if not human:
        return []
    judges = [b for b in result["judges"] if b.get("win_tie")]
    header = ["pair", "physicians win / tie / loss"] + [f"{b['judge']} win / tie / loss" for b in judges]

    def cell(o: JSON) -> str:
        return (
            f"{_n(o['win_rate'], 2)} / {_n(o['tie_rate'], 2)} / {_n(1 - o['win_rate'] - o['tie_rate'], 2)}"
            if (o["win_rate"] is not None)
            else "—"
        )

    rows = []
    for k, h in enumerate(human):
        rows.append([f"{h['model']} vs {h['opponent']}", cell(h), *(cell(b["win_tie"][k]) for b in judges)])
    return [
        Table(header, rows),
        Paragraph("Rates of the first model against the second, over the items.", "note"),
    ]


def _bias(result: JSON) -> list[Block]:
    rows = []
    for b in result["judges"]:
        x = b["bias"]
        first = x["first_shown_wins"]
        rows.append([
            b["judge"],
            f"{_n(x['swap_consistency']['rate'], 2)} ({x['swap_consistency']['comparisons']})",
            f"{_n(first['rate'], 2)} ({first['repeats']}; chance {_n(first['chance'], 2)})",
            f"{_n(x['length_preference']['rate'], 2)} ({x['length_preference']['pairs']})",
        ])  # fmt: skip
    header = [
        "judge",
        "swap consistency (comparisons)",
        "first shown wins (repeats)",
        "longer preferred (pairs)",
    ]
    note = Paragraph(
        "Each repeat shows the responses in a seeded order. Swap consistency: a pair's verdict survives "
        "reversing its order (1 = no position effect); first shown wins: the first response scored "
        "strictly highest (chance = 1/k); longer preferred: of pairs scored differently, the longer won "
        "(0.5 = no length preference).",
        "note",
    )
    return [Table(header, rows), note]


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
    blocks: list[Block] = [
        Paragraph(
            f"{result['items']} items, {', '.join(map(str, result['responses_per_item']))} responses each."
        ),
        Section("Judges side by side", _headline(result), anchor="judges"),
        Section("Physicians", _physicians(result), anchor="physicians"),
    ]
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
