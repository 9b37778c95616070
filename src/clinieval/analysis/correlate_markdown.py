"""The benchmark-vs-clinician correlation of :mod:`clinieval.analysis.correlate` as Markdown, laid out
like EHRNoteQA's table, and written beside its JSON (``correlation.json``, ``correlation.md``).

Text from the data is escaped with :func:`clinieval.analysis.markdown.md_escape` in its strict
form, since this table adds bold of its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval.analysis.correlate import CLINICIAN_MEAN, KINDS
from clinieval.analysis.markdown import md_escape, md_number
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, atomic_write_text

__all__ = ["render_markdown", "write_outputs"]

JSON = dict[str, Any]


def _esc(text: str) -> str:
    return md_escape(text, strict=True)


def _p(value: float) -> str:
    return "p < 0.001" if value < 0.001 else f"p = {value:.3f}"


def _stat_cell(stat: JSON, n: int | None, bold: bool) -> str:
    if stat["statistic"] is None:
        return "—"
    value = md_number(stat["statistic"])
    value = f"**{value}**" if bold else value
    extra = _p(stat["pvalue"]) + (f", n = {n}" if n is not None else "")
    return f"{value} ({extra})"


def _mean_cell(mean: JSON, total: int, bold: bool) -> str:
    if mean["mean"] is None:
        return "—"
    value = md_number(mean["mean"])
    value = f"**{value}**" if bold else value
    used = len(mean["clinicians"])
    return value if used == total else f"{value} ({used} of {total})"


def _header(result: JSON) -> list[str]:
    header = ["benchmark"]
    for c in result["clinicians"]:
        header += [f"{_esc(c)} ρ", f"{_esc(c)} τ"]
    header += ["mean ρ", "mean τ"]
    if result["clinician_mean"] is not None:
        header += ["ρ vs clinician mean", "τ vs clinician mean"]
    return header


def _row(result: JSON, b: str, show_n: bool) -> list[str]:
    best, cells = result["best"], result["cells"][b]
    label = _esc(b) + (" (lower is better, negated)" if b in result["lower_is_better"] else "")
    row = [label]
    columns = list(result["clinicians"])
    for c in columns:
        for kind in KINDS:
            n = cells[c]["n"] if show_n else None
            row.append(_stat_cell(cells[c][kind], n, b in best[kind]["per_clinician"][c]))
    total = len(columns)
    for kind in KINDS:
        mean = result["mean_over_clinicians"][b][kind]
        row.append(_mean_cell(mean, total, b in best[kind]["mean_over_clinicians"]))
    if result["clinician_mean"] is not None:
        for kind in KINDS:
            n = cells[CLINICIAN_MEAN]["n"] if show_n else None
            row.append(
                _stat_cell(cells[CLINICIAN_MEAN][kind], n, b in best[kind]["per_clinician"][CLINICIAN_MEAN])
            )
    return row


def _ns(result: JSON) -> set[int]:
    return {cell["n"] for row in result["cells"].values() for cell in row.values()}


def _names_md(names: Sequence[str]) -> str:
    if not names:
        return "— (undefined)"
    return ", ".join(_esc(n) for n in names) + (" (tie)" if len(names) > 1 else "")


def _best_lines(result: JSON) -> list[str]:
    """A small table: for each clinician column and for the mean, the best benchmark by rho and tau."""
    best = result["best"]
    rows = [
        [_esc(c), *(_names_md(best[k]["per_clinician"][c]) for k in KINDS)]
        for c in best["spearman"]["per_clinician"]
    ]
    rows.append(
        ["**mean over clinicians**", *(f"**{_names_md(best[k]['mean_over_clinicians'])}**" for k in KINDS)]
    )
    lines = ["| compared with | best by Spearman ρ | best by Kendall τ-b |", "|---|---|---|"]
    return lines + ["| " + " | ".join(r) + " |" for r in rows]


def _undefined_lines(result: JSON) -> list[str]:
    lines = []
    for b, row in result["cells"].items():
        for c, cell in row.items():
            for kind in KINDS:
                reason = cell[kind]["undefined"]
                if reason is not None:
                    lines.append(f"- {_esc(b)} vs {_esc(c)}, {kind} (n = {cell['n']}): {_esc(reason)}")
    return lines


def render_markdown(result: JSON) -> str:
    """The result as the paper's table: benchmarks as rows, per clinician rho and tau, then the means.

    Only formats what is in the JSON (``—`` for an undefined value, never a made-up 0). Bold marks
    the best benchmark in each column (several when tied). n goes in every cell when the pairs
    use different numbers of models, otherwise once above the table.
    """
    inputs = result["inputs"]
    ns = _ns(result)
    lines = ["# Benchmark–clinician correlation", ""]
    for role in ("benchmarks", "clinicians"):
        src = inputs[role]
        lines.append(
            f"- {role.capitalize()}: {_esc(src['file'])} ({src['layout']}, sha256 {src['sha256'][:12]}…)"
        )
    models = result["models"]["shared"]
    lines.append(f"- Models in both tables ({len(models)}): {', '.join(_esc(m) for m in models)}")
    if len(ns) == 1:
        lines.append(f"- Every correlation is over n = {next(iter(ns))} models.")
    lines += [
        "",
        "Spearman ρ and Kendall τ-b between each benchmark's per-model scores and each clinician's, with "
        "two-sided p-values; bold = best (most positive) in the column. *mean* = mean of the coefficient "
        "over the clinicians.",
        "",
    ]
    header = _header(result)
    rows = [_row(result, b, show_n=len(ns) > 1) for b in result["benchmarks"]]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(r) + " |" for r in rows]
    lines.append("")
    if result["clinician_mean"] is not None:
        lines += [
            f"*vs clinician mean*: correlation with the mean of the clinicians' raw scores per model "
            f"({len(result['clinician_mean']['models'])} models scored by every clinician); not part of "
            "*mean*.",
            "",
        ]
    lines += ["## Best benchmark", "", *_best_lines(result), ""]
    undefined = _undefined_lines(result)
    if undefined:
        lines += ["## Undefined", "", *undefined, ""]
    if result["notes"]:
        lines += ["## Notes", "", *(f"- {_esc(n)}" for n in result["notes"]), ""]
    return "\n".join(lines)


def write_outputs(result: JSON, out: Path) -> tuple[Path, Path]:
    """Write ``correlation.json`` and ``correlation.md`` into ``out``, each atomically."""
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise UserError(f"cannot create the output folder {out}: {e.strerror or e}") from None
    json_path, md_path = out / "correlation.json", out / "correlation.md"
    try:
        atomic_write_json(json_path, result)
        atomic_write_text(md_path, render_markdown(result))
    except OSError as e:
        raise UserError(f"cannot write into {out}: {e.strerror or e}") from None
    return json_path, md_path
