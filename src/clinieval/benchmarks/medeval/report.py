"""The MedEval analysis as a report: Markdown, one self-contained HTML page and the JSON, built only
from :func:`clinieval.benchmarks.medeval.analysis.medeval_analysis` (``—`` marks an undefined value).

Per task, a table of every arm (model x shot setting) with both views of the paper's metrics and
the qualified rate; the k-shot curve of each task and each arm's per-domain score as figures (with
the same numbers as tables in Markdown); then every answer of every arm (input, gold, answer,
qualified, correct) so a reader can see what the numbers count.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clinieval import report
from clinieval.benchmarks.medeval.analysis import MAIN_METRIC, Arm
from clinieval.benchmarks.medeval.answers import ci_cell, number_cell
from clinieval.benchmarks.medeval.items import TaskName
from clinieval.benchmarks.medeval.task_table import TASK_TABLE
from clinieval.report import Block, Document, Link, Paragraph, Section, Table
from clinieval.report.charts import grouped_bar_chart_svg, line_chart_svg
from clinieval.report.document import Cell

JSON = dict[str, Any]

SYNTHETIC_WARNING = (
    "These numbers are on clinieval's synthetic radiology corpus, not on MedEval's data (which is not "
    "public): they exercise the method end to end and are not comparable with the paper's."
)
ANSWER_CELL = 160


def _task_table(task: TaskName, arms: Sequence[JSON]) -> Table:
    rows, header = [], ["model", "setting", "items", "failed", "qualified rate"]
    for arm in arms:
        names, cells = TASK_TABLE[task].answers.columns(arm["metrics"])
        rows.append(
            [
                arm["model"],
                arm["setting"],
                str(arm["items"]),
                str(arm["failed"]),
                number_cell(100 * arm["qualified_rate"]),
                *cells,
            ]
        )
        header = ["model", "setting", "items", "failed", "qualified rate", *names]
    return Table(header, rows)


def _curve(task: TaskName, curves: JSON) -> Block | None:
    by_model: JSON = curves.get(task) or {}
    settings = sorted({s for v in by_model.values() for s in v}, key=_setting_order)
    if len(settings) < 2:
        return None
    series = {m: [v.get(s) for s in settings] for m, v in by_model.items()}
    title = f"{TASK_TABLE[task].title}: {result_metric({'task': task})} by shot setting"
    rows = [[m, *(number_cell(x) for x in values)] for m, values in series.items()]
    return report.Raw(
        line_chart_svg(title, settings, series, (0.0, 100.0)),
        [Paragraph(title, "note"), Table(["model", *settings], rows)],
    )


def _setting_order(setting: str) -> tuple[int, str]:
    head = setting.split("-")[0]
    return (0 if setting.startswith("zero-shot") else int(head) if head.isdigit() else 99, setting)


def _domains(task: TaskName, arms: Sequence[JSON]) -> Block | None:
    """Every arm's headline score per domain, as one grouped bar chart (a table in Markdown)."""
    shown = [a for a in arms if len(a.get("by_domain") or {}) >= 2]
    if not shown:
        return None
    domains = sorted({d for a in shown for d in a["by_domain"]})
    series = {
        f"{a['model']}, {a['setting']}": [(a["by_domain"].get(d) or {}).get("value") for d in domains]
        for a in shown
    }
    title = f"{TASK_TABLE[task].title}: {result_metric({'task': task})} by domain"
    rows = [[name, *(number_cell(v) for v in values)] for name, values in series.items()]
    return report.Raw(
        grouped_bar_chart_svg(title, domains, series, (0.0, 100.0)),
        [Paragraph(title, "note"), Table(["arm", *domains], rows)],
    )


def result_metric(arm: JSON) -> str:
    """The headline metric's name for an arm result (its task read from the JSON)."""
    return dict(MAIN_METRIC).get(arm["task"], "score")


def _answers_table(arm: Arm, view: str | None = None) -> Table:
    """Every answer of an arm; with ``view`` (the results site, relative to the report), each id
    links to that sample's page there."""
    from clinieval.view.urls import item_href

    rows: list[list[Cell]] = []
    for r in arm.records:
        score = r.scores.get(f"medeval_{arm.task}")
        meta = dict(score.metadata or {}) if score is not None else {}
        shown = r.sample.metadata.get("sentence") or r.sample.metadata.get("findings") or r.sample.input
        answer = r.output.text if r.output is not None and r.output.ok else f"(failed: {r.error_kind()})"
        gold = r.sample.target if r.sample.target is not None else "(14 codes)"
        value = "—" if score is None or score.value is None else number_cell(score.value, 2)
        rows.append(
            [
                r.sample.id if view is None else Link(r.sample.id, f"{view}/{item_href(r.sample.id)}"),
                _cut(str(shown)),
                _cut(str(gold)),
                _cut(answer),
                str(bool(meta.get("qualified"))),
                value,
            ]
        )
    return Table(["id", "input", "gold", "answer", "qualified", "score"], rows)


def _cut(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= ANSWER_CELL else text[: ANSWER_CELL - 1] + "…"


def _deltas(task_arms: Sequence[JSON]) -> Block | None:
    rows = []
    for a in task_arms:
        d = a.get("classifier_deltas")
        if not d:
            continue
        am, ab, c = d["delta_acc_am"], d["delta_acc_ab"], d["classifiers"]
        used = f"{c['ambiguity']['kind']} / {c['abnormality']['kind']}"
        total = d.get("rewrites", len(a.get("records", [])) or "?")
        rows.append(
            [
                a["model"],
                a["setting"],
                ci_cell({"value": am["delta"], "ci": am["ci"]}),
                ci_cell({"value": ab["delta"], "ci": ab["ci"]}),
                f"{d.get('rewrites_failed', '?')} of {total}",
                f"{d.get('rewrites_without_content', '?')} of {total}",
                used,
            ]
        )
    if not rows:
        return None
    header = [
        "model",
        "setting",
        "ΔAcc_am (higher is better)",
        "ΔAcc_ab (lower is better)",
        "rewrites failed (measured as the original)",
        "rewrites without content (measured as the original)",
        "classifiers",
    ]
    note = Paragraph(
        "ΔAcc_am and ΔAcc_ab are read together: a rewrite that drops the finding stops reading as "
        "ambiguous (ΔAcc_am up) by distorting it (ΔAcc_ab up). A rewrite without clinical content "
        "(punctuation only, the label alone, fewer than three words, none of the sentence's finding "
        "words) is measured as the original sentence, as a failed call is, and counted apart.",
        "note",
    )
    return Section("Rewrites measured by trained classifiers", [note, Table(header, rows)])


def _classifier_note(task_arms: Sequence[JSON]) -> Block | None:
    for a in task_arms:
        d = a.get("classifier_deltas")
        if d:
            c = d["classifiers"]
            return Paragraph(
                f"Measured with the ambiguity classifier {c['ambiguity']['path']} (its own test metrics "
                f"{c['ambiguity']['test_metrics']}) and the abnormality classifier "
                f"{c['abnormality']['path']} ({c['abnormality']['test_metrics']}).",
                "note",
            )
    return None


def _pm(entry: JSON | None) -> str:
    """A paired difference with its CI and p-value."""
    if not entry:
        return "—"
    low, high = entry["ci"]
    p = "p<0.001" if entry["p"] < 0.001 else f"p={entry['p']:.3f}"
    return f"{entry['value']:+.1f} [{low:+.1f} to {high:+.1f}], {p}"


def _members(members: Sequence[JSON]) -> str:
    return "; ".join(f"{m['model']} ({m['setting']}: {m['chosen_by']})" for m in members)


def _families(result: JSON) -> Block | None:
    fam = result.get("families") or {}
    rows = []
    for task in TASK_TABLE:
        f = fam.get(task)
        if not f:
            continue
        sides = f["sides"]
        rows.append(
            [
                task,
                f["metric"],
                str(f["n"]),
                ci_cell(sides.get("adapted PLM")),
                ci_cell(sides.get("prompted LLM")),
                _pm(f["difference"]),
                _members(f["members"]["adapted PLM"]),
                _members(f["members"]["prompted LLM"]),
            ]
        )
    if not rows:
        return None
    header = [
        "task",
        "per-item metric",
        "n (same test items)",
        "adapted PLMs [95% CI]",
        "prompted LLMs [95% CI]",
        "LLMs minus PLMs [95% CI]",
        "PLM arms (how chosen)",
        "LLM arms (how chosen)",
    ]
    note = Paragraph(
        "Each family is the average of its models, each at the setting chosen on the validation split "
        "(or, without validation runs, the paper's setting fixed in advance: never a test score), "
        "compared on the test items every one of those arms answered; items only some arms answered "
        "are left out and counted in medeval.json (`dropped`).",
        "note",
    )
    return Section("Adapted PLMs vs prompted LLMs", [note, Table(header, rows)])


def _zero_few(result: JSON) -> Block | None:
    rows = [
        [
            r["model"],
            r["task"],
            r["metric"],
            str(r["n"]),
            ci_cell(r["sides"]["zero-shot"]),
            ci_cell(r["sides"]["few-shot"]),
            (r.get("zero_shot") or {}).get("setting", "zero-shot"),
            f"{r['few_shot']['setting']} ({r['few_shot']['chosen_by']})",
            _pm(r["difference"]),
        ]
        for r in result.get("zero_vs_few") or []
    ]
    if not rows:
        return None
    header = [
        "model",
        "task",
        "per-item metric",
        "n (same test items)",
        "zero-shot [95% CI]",
        "few-shot [95% CI]",
        "zero-shot setting",
        "few-shot setting (how chosen)",
        "few minus zero [95% CI]",
    ]
    return Section("Zero-shot vs few-shot", [Table(header, rows)])


def _levels(result: JSON) -> Block | None:
    rows = [
        [r["model"], r["setting"], r["level"], r["metric"], ", ".join(r["tasks"]), number_cell(r["value"])]
        for r in result.get("levels") or []
    ]
    if not rows:
        return None
    note = Paragraph(
        "The mean over the tasks of one level that share a metric (test split); tasks scored by different "
        "metrics are never averaged together.",
        "note",
    )
    header = ["model", "setting", "level", "metric", "tasks", "mean"]
    return Section("By level", [note, Table(header, rows)])


def _chosen(result: JSON) -> Block | None:
    chosen = result.get("chosen") or []
    if not chosen:
        return None
    rows = [
        [
            c["model"],
            c["task"],
            c["setting"],
            c["chosen_by"],
            ", ".join(f"{k} {number_cell(v)}" for k, v in c["validation"].items()) or "—",
        ]
        for c in chosen
    ]
    val = result.get("validation_arms") or []
    note = Paragraph(
        f"{len(val)} validation arm(s) read. A model's setting for the comparisons above is the one with "
        "the best validation score; test scores never choose.",
        "note",
    )
    return Section(
        "How each model's setting was chosen",
        [note, Table(["model", "task", "setting", "chosen by", "validation scores"], rows)],
    )


def _comparisons(result: JSON) -> list[Block]:
    out = [
        b for b in (_families(result), _levels(result), _zero_few(result), _chosen(result)) if b is not None
    ]
    if result.get("undefined"):
        out.append(Section("Not computed", [report.BulletList(result["undefined"])]))
    return out


def build_document(result: JSON, arms: Sequence[Arm], synthetic: bool, view: str | None = None) -> Document:
    """The whole report; ``arms`` (the records) feed only the per-answer tables."""
    blocks: list[Block] = [
        Paragraph(
            f"{len(result['arms'])} arms, each scored on the test split (n = its `items`; the "
            f"{len(result.get('validation_arms') or [])} validation arm(s) only choose settings). Metrics in "
            "two views: unqualified answers (and failed calls) counted wrong, and qualified answers only; "
            "the qualified rate is the share of answers in the required format. A code answer is scored "
            "all-or-nothing, as in the paper (an unqualified one scores 0 on all 14 observations); the "
            "per-observation credit beside it counts every observation the answer got right. "
            f"95% CIs: {result['options']['resamples']:,} bootstrap resamples over items, seed "
            f"{result['options']['seed']}.",
            "note",
        )
    ]
    for task in TASK_TABLE:
        task_arms = [a for a in result["arms"] if a["task"] == task]
        if not task_arms:
            continue
        parts: list[Block] = [_task_table(task, task_arms)]
        parts += [b for b in (_deltas(task_arms), _classifier_note(task_arms)) if b is not None]
        curve = _curve(task, result["curves"])
        parts += [curve] if curve is not None else []
        domains = _domains(task, task_arms)
        parts += [domains] if domains is not None else []
        blocks.append(Section(TASK_TABLE[task].title, parts, anchor=task))
    blocks += _comparisons(result)
    answers = [Section(f"{a.model}, {a.task}, {a.setting}", [_answers_table(a, view)]) for a in arms]
    blocks.append(Section("Every answer", answers, anchor="answers"))
    return Document("MedEval analysis", blocks, warnings=[SYNTHETIC_WARNING] if synthetic else [])


def write_medeval_report(
    result: JSON, arms: Sequence[Arm], out: Path, *, synthetic: bool, view: str | None = None
) -> list[Path]:
    """``medeval.json``, ``medeval.md`` and ``medeval.html`` in ``out``, written atomically; with
    ``view`` (a `clinieval view` site, relative to ``out``) every answer's id links to its page."""
    return report.write_report(result, build_document(result, arms, synthetic, view), out, "medeval")
