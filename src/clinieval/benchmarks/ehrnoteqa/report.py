"""The EHRNoteQA analysis as Markdown, rendered only from the JSON of
:func:`clinieval.benchmarks.ehrnoteqa.analysis.analyze_arms` (``—`` marks an undefined value, never a 0)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval.analysis.markdown import md_escape, md_number, md_table
from clinieval.fsutil import atomic_write_json, atomic_write_text

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


def _judge_cell(j: JSON | None) -> str:
    if not j or j.get("mean") is None:
        return "—"
    sd = j.get("sd")
    return f"{j['mean']:.1f} ± {sd:.2f}" if sd is not None else f"{j['mean']:.1f}"


def _model_rows(section: JSON) -> tuple[list[str], list[list[str]]]:
    modes = section["modes"]
    header = [
        "model",
        "answered",
        *[_mode(m) + (" (mean ± SD over repeats)" if m == "judge" else "") for m in modes],
    ]
    rows = []
    for label in section["models"]:
        entry = section["per_model"][label]
        fails = sum(entry["answer_failures"].values())
        row = [label, f"{entry['items'] - fails}/{entry['items']}"]
        for m in modes:
            row.append(
                _judge_cell(entry.get(m)) if m == "judge" else _score((entry.get(m) or {}).get("score"))
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


def _stability_lines(st: JSON | None) -> list[str]:
    if not st:
        return []
    if "undefined" in st:
        return [f"Ranking stability: undefined ({md_escape(st['undefined'])}).", ""]
    header = ["model", "ranks per repeat", "gold (mode) rank", "Σ|rank − gold|"]
    rows = [
        [m, ", ".join(f"{r:g}" for r in ranks), f"{st['gold_rank'][m]:g}", f"{st['instability'][m]:g}"]
        for m, ranks in st["ranks"].items()
    ]
    return [
        "Ranking stability over judge repeats:",
        "",
        *md_table(header, rows),
        f"Total instability: **{st['total']:g}**; "
        f"average judge SD: {md_number(st.get('average_sd'), 2)} points.",
        "",
    ]


def _agreement_lines(agreement: Sequence[JSON]) -> list[str]:
    if not agreement:
        return []
    header = ["mode A", "mode B", "answers", "% agreement", "Cohen's κ", "model-ranking τ-b"]
    rows = []
    for a in agreement:
        rank = a["ranking"]
        tau = md_escape(f"— ({rank['undefined']})") if "undefined" in rank else md_number(rank["tau_b"])
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
        "Agreement between scoring modes (per answer; the judge's majority verdict):",
        "",
        *md_table(header, rows),
    ]


def _breakdown_lines(name: str, b: JSON | None, section: JSON) -> list[str]:
    if not b:
        return []
    modes = section["modes"]
    header = [BREAKDOWN_TITLES[name], "model", "n", *[_mode(m) for m in modes]]
    rows = [
        [group, model, str(cell["n"]), *[_score(cell.get(m)) for m in modes]]
        for group, models in b.items()
        for model, cell in models.items()
    ]
    return [f"By {BREAKDOWN_TITLES[name]}:", "", *md_table(header, rows)]


def _section(fmt: str, section: JSON) -> list[str]:
    header, rows = _model_rows(section)
    lines = [f"## {FORMAT_TITLES.get(fmt, fmt)}", "", *md_table(header, rows)]
    if "judge" in section["modes"]:
        n = max(
            (
                len((section["per_model"][m].get("judge") or {}).get("per_repeat") or [])
                for m in section["models"]
            ),
            default=0,
        )
        lines += [
            "Judge score per repeat (100 × share judged correct; failed answers count as incorrect):",
            "",
            *md_table(
                ["model", *[f"repeat {i + 1}" for i in range(n)], "unscored verdicts"], _repeat_rows(section)
            ),
        ]
        lines += _stability_lines(section.get("stability"))
    lines += _agreement_lines(section.get("agreement") or [])
    for name in ("level", "num_notes", "category"):
        lines += _breakdown_lines(name, section["breakdowns"].get(name), section)
    return lines


def render_markdown(result: JSON) -> str:
    lines = ["# EHRNoteQA report", ""]
    for w in result.get("warnings", []):
        lines += [f"> **Warning:** {md_escape(w)}", ""]
    for fmt, section in result["formats"].items():
        lines += _section(fmt, section)
    cons = result.get("consistency") or {}
    if len(cons) == 2:
        rows = [
            [FORMAT_TITLES[f], md_number(c.get("average_sd"), 2), md_number(c.get("instability"))]
            for f, c in cons.items()
        ]
        lines += [
            "## Multiple choice vs free text",
            "",
            *md_table(["format", "average judge SD (points)", "rank instability"], rows),
        ]
    return "\n".join(lines).rstrip() + "\n"


def write_report(result: JSON, out: Path) -> tuple[Path, Path]:
    """``analysis.json`` and ``report.md`` in ``out``, each written atomically."""
    json_path, md_path = out / "analysis.json", out / "report.md"
    atomic_write_json(json_path, result)
    atomic_write_text(md_path, render_markdown(result))
    return json_path, md_path
