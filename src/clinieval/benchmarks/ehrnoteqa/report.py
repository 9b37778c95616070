"""The EHRNoteQA analysis as a report (Markdown and one self-contained HTML page), built only
from the JSON of :func:`clinieval.benchmarks.ehrnoteqa.analysis.analyze_arms` (``—`` marks an
undefined value, never a 0) as one :class:`clinieval.report.Document` that both formats render."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval import report
from clinieval.analysis.markdown import md_number
from clinieval.report import Block, Document, Inline, Paragraph, Section, Strong, Table

JSON = dict[str, Any]

FORMAT_TITLES = {"mc": "Multiple choice", "free": "Free text"}
MODE_TITLES = {
    "judge": "LLM judge",
    "letter_extract": "letter extraction",
    "loglik_letter": "log-likelihood, letters",
    "loglik_text": "log-likelihood, option texts",
}
BREAKDOWN_TITLES = {"level": "level", "num_notes": "number of notes", "category": "question category"}


def _mode(mode: str) -> str:
    return MODE_TITLES.get(mode, mode)


def _score(value: Any) -> str:
    return md_number(value, 1)


def _ci_text(entry: JSON | None) -> str:
    ci = (entry or {}).get("ci")
    return "" if not ci or ci[0] is None else f" [{ci[0]:.1f}–{ci[1]:.1f}]"


def _judge_cell(j: JSON | None) -> str:
    if not j or j.get("mean") is None:
        return "—"
    sd = j.get("sd")
    if sd is not None:
        cell = f"{j['mean']:.1f} ± {sd:.2f}"
    elif j.get("sd_not_measured"):
        cell = f"{j['mean']:.1f} ± not measured (identical repeats)"
    else:
        cell = f"{j['mean']:.1f}"
    flag = " ⚑ self-judged" if j.get("self_judged") else ""
    return cell + _ci_text(j) + flag


def _model_rows(section: JSON) -> tuple[list[str], list[list[str]]]:
    modes = section["modes"]
    header = [
        "model",
        "answered",
        *[_mode(m) + (" (mean ± SD over repeats)" if m == "judge" else "") + " [95% CI]" for m in modes],
    ]
    rows = []
    for label in section["models"]:
        entry = section["per_model"][label]
        fails = sum(entry["answer_failures"].values())
        row = [label, f"{entry['items'] - fails}/{entry['items']}"]
        for m in modes:
            row.append(
                _judge_cell(entry.get(m))
                if m == "judge"
                else _score((entry.get(m) or {}).get("score")) + _ci_text(entry.get(m))
            )
        rows.append(row)
    return header, rows


def _repeat_rows(section: JSON) -> list[list[str]]:
    rows = []
    for label in section["models"]:
        j = section["per_model"][label].get("judge") or {}
        per = j.get("per_repeat") or []
        rows.append([label, *[_score(x) for x in per], str(j.get("unscored_verdicts", "—"))])
    return rows


def _stability_blocks(st: JSON | None) -> list[Block]:
    if not st:
        return []
    if "undefined" in st:
        return [Paragraph(f"Ranking stability: undefined ({st['undefined']}).")]
    header = ["model", "ranks per repeat", "gold (mode) rank", "Σ|rank − gold|"]
    rows = [
        [m, ", ".join(f"{r:g}" for r in ranks), f"{st['gold_rank'][m]:g}", f"{st['instability'][m]:g}"]
        for m, ranks in st["ranks"].items()
    ]
    tied = st.get("tied_modes") or []
    rule = st.get("gold_rule", "smallest")
    total: list[Inline] = [
        "Total instability: ",
        Strong(f"{st['total']:g}"),
        f"; average judge SD: {md_number(st.get('average_sd'), 2)} points. "
        f"{len(tied)} of {len(st['ranks'])} models had tied modes (gold rank rule: {rule}"
        + (", the mode met first in repeat order, as EHRNoteQA's code" if rule == "first" else "")
        + ").",
    ]
    return [Paragraph("Ranking stability over judge repeats:"), Table(header, rows), Paragraph(total)]


def _agreement_blocks(agreement: Sequence[JSON]) -> list[Block]:
    if not agreement:
        return []
    header = ["mode A", "mode B", "answers", "% agreement", "Cohen's κ", "model-ranking τ-b"]
    rows = []
    for a in agreement:
        rank = a["ranking"]
        tau = f"— ({rank['undefined']})" if "undefined" in rank else md_number(rank["tau_b"])
        rows.append(
            [
                _mode(a["a"]),
                _mode(a["b"]),
                str(a["n_answers"]),
                _score(a["percent_agreement"]),
                md_number(a["kappa"]),
                tau,
            ]
        )
    return [
        Paragraph("Agreement between scoring modes (per answer; the judge's majority verdict):"),
        Table(header, rows),
    ]


def _breakdown_blocks(name: str, b: JSON | None, section: JSON) -> list[Block]:
    if not b:
        return []
    modes = section["modes"]
    header = [BREAKDOWN_TITLES[name], "model", "n", *[_mode(m) for m in modes]]
    rows = [
        [group, model, str(cell["n"]), *[_score(cell.get(m)) for m in modes]]
        for group, models in b.items()
        for model, cell in models.items()
    ]
    return [Paragraph(f"By {BREAKDOWN_TITLES[name]}:"), Table(header, rows)]


def _section(fmt: str, section: JSON) -> Section:
    header, rows = _model_rows(section)
    units = {
        (section["per_model"][m].get(mode) or {}).get("ci_resamples")
        for m in section["models"]
        for mode in section["modes"]
    } - {None}
    how = "a patient's questions resampled together" if units == {"patient"} else "questions resampled"
    blocks: list[Block] = [
        Table(header, rows),
        Paragraph(
            f"95% CIs: bootstrap over questions ({how}); the judge's repeats are averaged per "
            "question first, so its CI is sampling error over questions, while the SD is judge noise.",
            style="note",
        ),
    ]
    if "judge" in section["modes"]:
        n = max(
            (
                len((section["per_model"][m].get("judge") or {}).get("per_repeat") or [])
                for m in section["models"]
            ),
            default=0,
        )
        blocks += [
            Paragraph(
                "Judge score per repeat (100 × share judged correct; failed answers count as incorrect):"
            ),
            Table(
                ["model", *[f"repeat {i + 1}" for i in range(n)], "unscored verdicts"], _repeat_rows(section)
            ),
        ]
        blocks += _stability_blocks(section.get("stability"))
    blocks += _agreement_blocks(section.get("agreement") or [])
    for name in ("level", "num_notes", "category"):
        blocks += _breakdown_blocks(name, section["breakdowns"].get(name), section)
    return Section(FORMAT_TITLES.get(fmt, fmt), blocks, anchor=fmt)


def build_document(result: JSON) -> Document:
    """The report as a document: one section per answer format, then the formats compared."""
    blocks: list[Block] = [_section(fmt, section) for fmt, section in result["formats"].items()]
    cons = result.get("consistency") or {}
    if len(cons) == 2:
        rows = [
            [FORMAT_TITLES[f], "not measured", "not measured"]
            if c.get("not_measured")
            else [FORMAT_TITLES[f], md_number(c.get("average_sd"), 2), md_number(c.get("instability"))]
            for f, c in cons.items()
        ]
        header = ["format", "average judge SD (points)", "rank instability"]
        blocks.append(Section("Multiple choice vs free text", [Table(header, rows)], anchor="consistency"))
    return Document("EHRNoteQA report", blocks, warnings=result.get("warnings", []))


def render_markdown(result: JSON) -> str:
    return report.render_markdown(build_document(result))


def render_html(result: JSON) -> str:
    return report.render_html(build_document(result))


def write_report(result: JSON, out: Path) -> list[Path]:
    """``analysis.json``, ``report.md`` and ``report.html`` in ``out``, each written atomically."""
    return report.write_report(result, build_document(result), out, "report", json_stem="analysis")
