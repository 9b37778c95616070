"""The site's front page: one row per sample, each arm's answer and scores in its own column, and
filters (arm, score range, error kind, category) that ``view.js`` applies in the browser.

The rows are written into the page, so it reads without scripts; the filters need only the small
JSON table embedded beside them (per sample and arm: mean score per name, error kinds), never the
answers' text again.
"""

from __future__ import annotations

from typing import Any

from clinieval.view.html import esc, number, page, script_json
from clinieval.view.results import Item, Results, category_value
from clinieval.view.urls import item_href, row_anchor

EXCERPT = 160
"""Characters of a question or an answer shown in the index; the item page has the rest."""


def excerpt(text: str, limit: int = EXCERPT) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def index_page(results: Results, title: str) -> str:
    """The HTML of ``index.html``."""
    n = len(results.items)
    body = (
        f"<h1>{esc(title)}</h1>"
        f'<p class="note">{n} samples × {len(results.arms)} arms. Read-only; '
        "each sample id opens its page.</p>"
        f"{_arms_list(results)}{_filters(results)}{_table(results)}"
        f"{script_json(_filter_data(results), 'view-data')}"
    )
    return page(title, f'<main class="index">{body}</main>', root="")


def _arms_list(results: Results) -> str:
    rows = "".join(
        f'<li><b>{esc(a.name)}</b> <span class="note">model {esc(a.model)} · task {esc(a.task)} · '
        f"{esc(a.path)}</span></li>"
        for a in results.arms
    )
    return f'<ul class="arm-list">{rows}</ul>'


def _options(values: list[str], first: list[tuple[str, str]]) -> str:
    pairs = [*first, *((v, v) for v in values)]
    return "".join(f'<option value="{esc(v)}">{esc(label)}</option>' for v, label in pairs)


def _filters(results: Results) -> str:
    arms = _options([a.name for a in results.arms], [("", "every arm")])
    scores = _options(results.score_names, [])
    errors = _options(results.error_kinds, [("", "any"), ("*", "any error"), ("-", "no error")])
    cats = "".join(
        f'<label>{esc(field)} <select class="f-cat" data-field="{esc(field)}">'
        f"{_options(values, [('', 'all')])}</select></label>"
        for field, values in results.categories.items()
    )
    score_range = (
        f'<label>score <select id="f-score">{scores}</select></label>'
        '<label>from <input id="f-min" type="number" step="any" size="6"></label>'
        '<label>to <input id="f-max" type="number" step="any" size="6"></label>'
        if results.score_names
        else ""
    )
    return (
        '<form id="filters" class="filters" onsubmit="return false">'
        f'<label>arm <select id="f-arm">{arms}</select></label>{score_range}'
        f'<label>error <select id="f-error">{errors}</select></label>{cats}'
        '<button type="reset" id="f-reset">clear</button> '
        f'<output id="shown">{len(results.items)} of {len(results.items)} samples</output></form>'
    )


def _table(results: Results) -> str:
    fields = list(results.categories)
    head = "".join(
        [
            "<th>sample</th><th>question</th>",
            *(f"<th>{esc(f)}</th>" for f in fields),
            *(f'<th class="arm-col" data-arm="{i}">{esc(a.name)}</th>' for i, a in enumerate(results.arms)),
        ]
    )
    body = "".join(_row(results, i, it, fields) for i, it in enumerate(results.items))
    return f'<table id="samples"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>'


def _row(results: Results, index: int, item: Item, fields: list[str]) -> str:
    sid = item.sample.id
    cells = [
        f'<td><a class="item-link" href="{esc(item_href(sid))}">{esc(sid)}</a></td>',
        f"<td>{esc(excerpt(item.sample.input))}</td>",
        *(f"<td>{esc(category_value(item.sample.metadata.get(f)) or '')}</td>" for f in fields),
        *(
            f'<td class="arm-col" data-arm="{arm}">{_arm_cell(results, item, arm)}</td>'
            for arm in range(len(results.arms))
        ),
    ]
    return f'<tr id="{esc(row_anchor(sid))}" data-row="{index}">{"".join(cells)}</tr>'


def _arm_cell(results: Results, item: Item, arm: int) -> str:
    answers = item.answers.get(arm)
    if not answers:
        return '<span class="note">no record</span>'
    out = answers[0].record.output
    text = "" if out is None or not out.ok else excerpt(out.text, 120)
    scores = "".join(
        f'<span class="badge">{esc(name)} {esc(number(value))}</span>'
        for name in results.score_names
        if (value := item.arm_score(arm, name)) is not None
    )
    errors = "".join(f'<span class="err">{esc(k)}</span>' for k in item.arm_errors(arm))
    shown = f'<div class="answer-excerpt">{esc(text)}</div>' if text else ""
    return f"{shown}<div>{scores}{errors}</div>"


def _filter_data(results: Results) -> dict[str, Any]:
    """What ``view.js`` filters on: per row, per arm (None without a record) the mean of each
    score and the error kinds; per row, its category values."""
    rows = []
    for item in results.items:
        arms: list[dict[str, Any] | None] = []
        for arm in range(len(results.arms)):
            if arm not in item.answers:
                arms.append(None)
                continue
            means = {n: item.arm_score(arm, n) for n in results.score_names}
            arms.append({"s": {n: v for n, v in means.items() if v is not None}, "e": item.arm_errors(arm)})
        cats = {f: category_value(item.sample.metadata.get(f)) for f in results.categories}
        rows.append({"arms": arms, "cat": {f: v for f, v in cats.items() if v is not None}})
    return {"arms": [a.name for a in results.arms], "rows": rows}
