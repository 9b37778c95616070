"""One sample's page: the question, the reference, every arm's answer and scores side by side, the
judges' verdicts with their rationales, and exactly what each arm's model was sent.

Why the prompt as sent and not the sample's context: a context policy may have cut the record,
and an answer can only be judged against what the model actually saw. The stored record is shown
too, with the parts the model never saw marked, so a reviewer sees how it was cut.
"""

from __future__ import annotations

import itertools
import json
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from clinieval.ehr.chart import build_chart
from clinieval.ehr.chart_html import render_chart
from clinieval.records.sample_record import SampleRecord
from clinieval.view.cut import CutRange, cut_ranges, describe_cut
from clinieval.view.html import esc, number, page, pre, table
from clinieval.view.paging import PAGE_CHARS, pager
from clinieval.view.results import Answer, Arm, Item, NamedScore, Results
from clinieval.view.urls import INDEX, arm_anchor, item_stem, row_anchor

Pager = Callable[..., str]


def _pagers(size: int) -> Pager:
    """A pager factory that numbers its pagers, so ids are unique on the page."""
    counter = itertools.count()

    def make(text: str, cut: Sequence[CutRange] = ()) -> str:
        return pager(text, f"p{next(counter)}", cut=cut, size=size)

    return make


def item_page(results: Results, position: int, *, page_chars: int = PAGE_CHARS) -> str:
    """The HTML of the page of ``results.items[position]``."""
    item = results.items[position]
    paged = _pagers(page_chars)
    title = f"Sample {item.sample.id}"
    body = "".join(
        [
            _nav(results, position),
            f"<h1>{esc(title)}</h1>",
            _differs(results.arms, item),
            _question(item, paged),
            _reference(item, paged),
            _score_table(results, item),
            _answers(results.arms, item, paged),
            _sent(results.arms, item, paged),
            _record(results.arms, item, paged),
            _metadata(item, paged),
        ]
    )
    return page(title, f'<main class="item">{body}</main>', root="../")


def _nav(results: Results, position: int) -> str:
    links = [f'<a href="../{INDEX}#{esc(row_anchor(results.items[position].sample.id))}">all samples</a>']
    if position > 0:
        prev = results.items[position - 1].sample.id
        links.append(f'<a rel="prev" href="{esc(item_stem(prev))}.html">previous: {esc(prev)}</a>')
    if position + 1 < len(results.items):
        nxt = results.items[position + 1].sample.id
        links.append(f'<a rel="next" href="{esc(item_stem(nxt))}.html">next: {esc(nxt)}</a>')
    return f"<nav>{' · '.join(links)}</nav>"


def _differs(arms: Sequence[Arm], item: Item) -> str:
    if not item.differs_in:
        return ""
    names = ", ".join(arms[i].name for i in item.differs_in)
    first = arms[min(item.answers)].name
    return (
        f'<p class="warning">The runs disagree on this sample: {esc(names)} hold another question, record '
        f"or reference under this id; shown above the answers is {esc(first)}'s.</p>"
    )


def _question(item: Item, paged: Pager) -> str:
    question = paged(item.sample.input)
    return f'<section id="question"><h2>Question or instruction</h2>{question}{_choices(item)}</section>'


def _choices(item: Item) -> str:
    """The sample's choices, said to be the data's: whether the model saw them is for the prompt
    as sent to show (a task that never put them in its prompt once looked here as if it had)."""
    choices = item.sample.choices
    if not choices:
        return ""
    listed = "".join(f"<li>{esc(c)}</li>" for c in choices)
    sent = [m.content for answers in item.answers.values() for m in answers[0].record.messages]
    prompt = '<a href="#prompt">prompt as sent</a>'
    if any(all(c in text for c in choices) for text in sent):
        note = f'<p class="note">Choices in the data; how the model was shown them is in the {prompt}.</p>'
    else:
        note = (
            f'<p class="warning">Choices in the data, but no {prompt} lists them: the model was not '
            "shown these options.</p>"
        )
    return f'{note}<ol class="choices">{listed}</ol>'


def _reference(item: Item, paged: Pager) -> str:
    targets = item.sample.all_targets
    if not targets:
        return '<section id="reference"><h2>Reference</h2><p class="note">No reference answer.</p></section>'
    shown = "".join(paged(t) for t in targets)
    heading = "Reference" if len(targets) == 1 else f"References ({len(targets)} accepted answers)"
    return f'<section id="reference"><h2>{heading}</h2>{shown}</section>'


def _metadata(item: Item, paged: Pager) -> str:
    if not item.sample.metadata:
        return ""
    rows = [[esc(k), paged(_as_text(v))] for k, v in item.sample.metadata.items()]
    return f'<section id="metadata"><h2>Sample metadata</h2>{table(["field", "value"], rows)}</section>'


def _as_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, indent=1)


# --- scores side by side -----------------------------------------------------------------------


def _score_table(results: Results, item: Item) -> str:
    arms = sorted(item.answers)
    names = [n for n in results.score_names if any(_named(item.answers[a], n) for a in arms)]
    if not names:
        return ""
    header = ["score", *(f'<a href="#{arm_anchor(a)}">{esc(results.arms[a].name)}</a>' for a in arms)]
    rows = [[esc(n), *(_score_cell(_named(item.answers[a], n)) for a in arms)] for n in names]
    return f'<section id="scores-section"><h2>Scores</h2>{table(header, rows, element_id="scores")}</section>'


def _named(answers: Sequence[Answer], name: str) -> list[NamedScore]:
    return [s for a in answers for s in a.scores if s.name == name]


def _score_cell(scores: Sequence[NamedScore]) -> str:
    """Each repeat's value (``/`` between repeats); an unscored one shows why."""
    parts = []
    for s in scores:
        if s.score.value is not None:
            parts.append(esc(number(s.score.value)))
        else:
            why = s.score.metadata.get("error_kind")
            parts.append(f'<span class="unscored">— {esc(why)}</span>' if why else "—")
    return " / ".join(parts) or '<span class="note">not scored</span>'


# --- answers -----------------------------------------------------------------------------------


def _answers(arms: Sequence[Arm], item: Item, paged: Pager) -> str:
    columns = [_arm_column(i, arm, item.answers.get(i, []), paged) for i, arm in enumerate(arms)]
    return (
        f'<section id="answers"><h2>Answers</h2><div class="arms" style="--arms: {len(arms)}">'
        f"{''.join(columns)}</div></section>"
    )


def _arm_column(position: int, arm: Arm, answers: Sequence[Answer], paged: Pager) -> str:
    head = f'<h3>{esc(arm.name)}</h3><p class="note">model {esc(arm.model)} · task {esc(arm.task)}</p>'
    if not answers:
        body = '<p class="note">No record of this sample in this run.</p>'
    else:
        body = "".join(_repeat(a, len(answers) > 1, paged) for a in answers)
    attrs = f'class="arm" id="{arm_anchor(position)}" data-arm="{esc(arm.name)}"'
    return f"<article {attrs}>{head}{body}</article>"


def _repeat(answer: Answer, several: bool, paged: Pager) -> str:
    rec = answer.record
    heading = f"<h4>repeat {rec.repeat}</h4>" if several else ""
    said = rec.output.text.strip() if rec.output is not None else ""
    scores = "".join(_score_detail(s, paged, said) for s in answer.scores)
    return f'<div class="answer">{heading}{_output(rec, paged)}{scores}</div>'


def _output(rec: SampleRecord, paged: Pager) -> str:
    parts: list[str] = []
    out = rec.output
    if out is not None:
        if out.error_kind is not None:
            parts.append(
                f'<p class="error">The call failed: <b>{esc(out.error_kind.value)}</b> '
                f"{esc(out.error_message or '')}</p>"
            )
        else:
            parts.append(paged(out.text))
        facts = [
            f"finish {out.finish_reason}" if out.finish_reason else "",
            f"{out.prompt_tokens} prompt tokens" if out.prompt_tokens is not None else "",
            f"{out.completion_tokens} answer tokens" if out.completion_tokens is not None else "",
            f"{out.latency_s:.2f} s",
        ]
        parts.append(f'<p class="note">{esc(" · ".join(f for f in facts if f))}</p>')
    if rec.loglik is not None:
        parts.append(_loglik(rec))
    return "".join(parts) or '<p class="note">No answer recorded.</p>'


def _loglik(rec: SampleRecord) -> str:
    ll = rec.loglik
    assert ll is not None
    if ll.error_kind is not None:
        return f'<p class="error">Log-likelihood failed: <b>{esc(ll.error_kind.value)}</b></p>'
    choices = rec.sample.choices or tuple(str(i) for i in range(len(ll.logliks)))
    rows = [[esc(c), esc(f"{v:.3f}")] for c, v in zip(choices, ll.logliks, strict=False)]
    return table(["choice", "log-likelihood"], rows, cls="loglik")


def _score_detail(s: NamedScore, paged: Pager, said: str) -> str:
    """A score's value, why it has none, where it was read from, what the scorer read the answer as
    (when that is not simply the answer), its explanation, and a judge's every repeat."""
    sc = s.score
    facts = [f"<b>{esc(s.name)}</b>: {esc(number(sc.value))}"]
    if sc.value is None and sc.metadata.get("error_kind"):
        facts.append(f'<span class="unscored">{esc(sc.metadata["error_kind"])}</span>')
    facts.append(f'<span class="note">{esc(s.source)}</span>')
    lines = [f"<p>{' '.join(facts)}</p>"]
    if sc.answer is not None and sc.answer.strip() and sc.answer.strip() != said:
        lines.append(f'<p class="note">read as: {esc(sc.answer[:500])}</p>')
    if sc.explanation and not s.judge_repeats:  # a judge's rationales are in its repeats' table
        lines.append(f'<div class="rationale">{paged(sc.explanation)}</div>')
    if s.judge_repeats:
        lines.append(_verdicts(s, paged))
    return f'<div class="score" data-score="{esc(s.name)}">{"".join(lines)}</div>'


def _verdicts(s: NamedScore, paged: Pager) -> str:
    """Every judge repeat: its values, rationale, why it failed, and the raw reply on demand."""
    rows = []
    for rep in s.judge_repeats:
        values = rep.get("values")
        shown = ", ".join(f"{k} {number(v)}" for k, v in values.items()) if isinstance(values, dict) else ""
        error = rep.get("error_kind") or ""
        if rep.get("parse_error"):
            error = f"{error}: {rep['parse_error']}"
        raw = f"<details><summary>raw reply</summary>{paged(str(rep.get('raw') or ''))}</details>"
        rationale = rep.get("rationale")
        rows.append(
            [esc(rep.get("repeat", "")), esc(shown), paged(rationale) if rationale else "", esc(error), raw]
        )
    judge = s.score.metadata.get("judge")
    name = judge.get("name") if isinstance(judge, dict) else None
    caption = f'<p class="note">judge {esc(name)}</p>' if name else ""
    return caption + table(["repeat", "verdict", "rationale", "error", "reply"], rows, cls="verdicts")


# --- what the model saw ------------------------------------------------------------------------


def _groups(item: Item) -> Iterator[tuple[list[int], SampleRecord]]:
    """Arms that sent the same prompt with the same context account, shown once for all of them."""
    groups: dict[str, tuple[list[int], SampleRecord]] = {}
    for arm, answers in sorted(item.answers.items()):
        rec = answers[0].record
        key = json.dumps([[m.role, m.content] for m in rec.messages] + [rec.context_info], sort_keys=True)
        groups.setdefault(key, ([], rec))[0].append(arm)
    yield from groups.values()


def _sent(arms: Sequence[Arm], item: Item, paged: Pager) -> str:
    blocks = []
    for positions, rec in _groups(item):
        names = ", ".join(arms[i].name for i in positions)
        how = describe_cut(rec.context_info)
        info = _context_info(rec.context_info)
        messages = "".join(
            f'<div class="message"><h4>{esc(m.role)}</h4>{paged(m.content)}</div>' for m in rec.messages
        )
        how_html = f'<p class="cut-how">{esc(how)}</p>' if how else ""
        blocks.append(f'<div class="sent"><h3>Sent by {esc(names)}</h3>{how_html}{info}{messages}</div>')
    heading = 'Prompt as sent <span class="note">(the messages exactly as the model received them)</span>'
    return f'<section id="prompt"><h2>{heading}</h2>{"".join(blocks)}</section>'


def _context_info(info: dict[str, Any]) -> str:
    if not info:
        return ""
    rows = [[esc(k), pre(_as_text(v))] for k, v in info.items()]
    return f"<details><summary>context account</summary>{table(['field', 'value'], rows)}</details>"


def _record_note(cut: Sequence[CutRange], info: dict[str, Any], names: str) -> str:
    """What the marks on the record below mean for the arms ``names``."""
    if cut:
        return f"Marked: the {sum(b - a for a, b in cut):,} characters {esc(names)} did not send."
    if "chunks" in info or "steps" in info:
        return f"Nothing marked: {esc(names)} read the record piece by piece (see above)."
    if info.get("truncated"):
        return f"Nothing marked: the run of {esc(names)} did not record which part was cut."
    return f"Nothing marked: {esc(names)} cut nothing from the record."


def _record(arms: Sequence[Arm], item: Item, paged: Pager) -> str:
    """The record as a chart (newest encounter first; the same one the review app shows), then, one
    click away, the stored text once per distinct way it was cut, the cut parts marked. Arms whose
    prompt holds the whole record word for word get a note instead of a second copy of it."""
    context = item.sample.context
    if not context:
        return ""
    by_cut: dict[tuple[CutRange, ...], list[int]] = {}
    whole: list[int] = []
    for arm, answers in sorted(item.answers.items()):
        rec = answers[0].record
        cut = tuple(cut_ranges(rec.context_info, len(context)))
        if not cut and any(context in m.content for m in rec.messages):
            whole.append(arm)
        else:
            by_cut.setdefault(cut, []).append(arm)
    blocks = []
    if whole:
        names = ", ".join(arms[i].name for i in whole)
        blocks.append(f'<p class="note">{esc(names)} sent the whole record: it is in the prompt above.</p>')
    for cut, positions in by_cut.items():
        names = ", ".join(arms[i].name for i in positions)
        info = item.answers[positions[0]][0].record.context_info
        note = _record_note(cut, info, names)
        blocks.append(f'<div class="record"><p class="note">{note}</p>{paged(context, cut)}</div>')
    return (
        f'<section id="record"><h2>The record ({len(context):,} characters)</h2>'
        f'<div class="record-chart">{render_chart(build_chart(context), prefix="record-chart")}</div>'
        f'<details id="record-raw"><summary>Raw text, as stored</summary>{"".join(blocks)}</details>'
        "</section>"
    )
