"""The shared report layer (clinieval.report) and EHRNoteQA's report through it.

One document renders to Markdown and to one self-contained HTML page; text from the data is
escaped in both, and only code-built Raw markup reaches the page as markup.
"""

from __future__ import annotations

import dataclasses
import json
import re
from html.parser import HTMLParser
from pathlib import Path

import pytest

from clinieval.analysis.markdown import md_escape
from clinieval.benchmarks.ehrnoteqa.analysis import analyze_arms
from clinieval.benchmarks.ehrnoteqa.report import render_markdown as ehrnoteqa_markdown
from clinieval.benchmarks.ehrnoteqa.report import write_report as ehrnoteqa_report
from clinieval.report import (
    BulletList,
    Document,
    Paragraph,
    Raw,
    Section,
    Strong,
    Table,
    render_html,
    render_markdown,
    write_report,
)
from clinieval.report.heatmap import head_to_head
from tests.test_ehrnoteqa import _arms

EVIL = "<script>alert('x')</script>|*m*"


class _Page(HTMLParser):
    """Tags and text of a page, as a browser would see them."""

    def __init__(self, page: str) -> None:
        super().__init__()
        self.tags: list[str] = []
        self.attrs: list[tuple[str, str | None]] = []
        self.text: list[str] = []
        self.feed(page)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        self.attrs += attrs

    def handle_data(self, data: str) -> None:
        self.text.append(data)

    def joined(self) -> str:
        return "".join(self.text)


def _self_contained(page: str) -> _Page:
    parsed = _Page(page)
    assert not {"script", "link", "img", "iframe", "object", "embed"} & set(parsed.tags)
    # nothing is loaded: no URL anywhere except the SVG namespace, which is a name, not a request
    assert not re.search(r"https?://", page.replace('xmlns="http://www.w3.org/2000/svg"', ""))
    assert not any(name.startswith("on") for name, _ in parsed.attrs)  # no event handlers
    assert "<style>" in page  # the styles are inline
    return parsed


def _doc(name: str = EVIL) -> Document:
    return Document(
        f"Report on {name}",
        [
            Paragraph(["Total: ", Strong("2"), f" for {name}."]),
            Section(
                f"Model {name}",
                [
                    Table(["model", "score"], [[name, "0.500"], ["b", "[0.1, 0.2]"]]),
                    BulletList([f"undefined for {name}"]),
                    Paragraph("how it was counted", "note"),
                    Section("deeper", [Raw('<svg class="fig"></svg>', "a figure")]),
                ],
                anchor="m",
            ),
        ],
        warnings=[f"judge {name} is not credible"],
    )


def test_markdown_escapes_text_and_keeps_structure() -> None:
    md = render_markdown(_doc())
    assert "<script>" not in md and "\\<script\\>" in md
    lines = md.splitlines()
    assert lines[0] == "# Report on \\<script\\>alert('x')\\</script\\>\\|\\*m\\*"
    assert "## Model " in md and "### deeper" in md  # a nested section is one level deeper
    # a table cell: the pipe cannot add a column, the interval keeps its brackets
    row = next(line for line in lines if line.startswith("| \\<script"))
    assert row.count(" | ") == 1 and "| [0.1, 0.2] |" in md
    # running text beside the renderer's own ** is escaped strictly
    assert "Total: **2** for \\<script\\>alert('x')\\</script\\>\\|\\*m\\*." in md
    assert md.count("> **Warning:** judge") == 1
    assert "_a figure_" in md and "<svg" not in md  # Raw shows its fallback, never its markup
    assert "_how it was counted_" in md


def test_html_escapes_text_and_is_self_contained() -> None:
    page = render_html(_doc())
    parsed = _self_contained(page)
    assert parsed.tags.count("svg") == 1  # the Raw block, copied as built
    assert "&lt;script&gt;alert(&#x27;x&#x27;)&lt;/script&gt;|*m*" in page
    assert EVIL in parsed.joined()  # and reads back as the name in a browser
    assert '<section id="m"><h2>' in page and "<h3>deeper</h3>" in page
    assert '<p class="warning"><strong>Warning:</strong> judge' in page
    assert '<td class="num">0.500</td>' in page and "<strong>2</strong>" in page
    assert page.startswith("<!DOCTYPE html>") and "<title>Report on &lt;script&gt;" in page


def test_raw_fallback_blocks_and_heatmap() -> None:
    h2h = {"models": ["A", EVIL], "rates": [[None, 0.75], [0.25, None]], "battles": [[0, 4], [4, 0]]}
    section = {"head_to_head": h2h, "head_to_head_non_tied": h2h}
    doc = Document("h", head_to_head("rougeL", section))
    md = render_markdown(doc)
    assert "rougeL: head-to-head, all items (row beats column):" in md
    assert "| A | — | 0.750 |" in md and "| \\<script\\>alert('x')\\</script\\>\\|*m* | 0.250 | — |" in md
    page = render_html(doc)
    parsed = _self_contained(page)
    assert parsed.tags.count("svg") == 2 and "0.75" in page and "<script>" not in page
    assert head_to_head("x", {"head_to_head": None, "head_to_head_non_tied": None}) == []


def test_table_rows_must_match_the_header() -> None:
    with pytest.raises(ValueError, match="row 0 has 1 cells but the header has 2"):
        Table(["a", "b"], [["only one"]])


def test_md_escape_strict_adds_emphasis_characters() -> None:
    assert md_escape("a|b<c>\\d\ne") == "a\\|b\\<c\\>\\\\d e"
    assert md_escape("*x* [y] `z` _w_ gpt_4") == "*x* [y] `z` _w_ gpt_4"
    assert md_escape("*x* [y] `z` _w_ gpt_4", strict=True) == "\\*x\\* \\[y\\] \\`z\\` \\_w\\_ gpt_4"


def test_write_report_writes_three_files_atomically(tmp_path: Path) -> None:
    out = tmp_path / "r"
    paths = write_report({"n": 1}, _doc("m"), out, "report", json_stem="analysis")
    assert [p.name for p in paths] == ["analysis.json", "report.md", "report.html"]
    assert json.loads(paths[0].read_text()) == {"n": 1}
    assert paths[1].read_text() == render_markdown(_doc("m"))
    assert paths[2].read_text() == render_html(_doc("m"))
    assert not list(out.glob(".*.tmp"))
    assert [p.name for p in write_report({}, _doc("m"), out, "x")] == ["x.json", "x.md", "x.html"]


# --------------------------------------------------------------------------------------------
# EHRNoteQA's report: JSON, Markdown and HTML from one document


def test_ehrnoteqa_writes_a_self_contained_escaped_html_report(tmp_path: Path) -> None:
    arms = _arms()
    arms[2] = dataclasses.replace(arms[2], label=EVIL, model=EVIL, judge_warning=f"judge {EVIL} is tiny")
    result = analyze_arms(arms)
    paths = ehrnoteqa_report(result, tmp_path / "report")
    assert [p.name for p in paths] == ["analysis.json", "report.md", "report.html"]
    assert json.loads(paths[0].read_text()) == json.loads(json.dumps(result))
    assert paths[1].read_text() == ehrnoteqa_markdown(result)
    page = paths[2].read_text()
    parsed = _self_contained(page)
    text = parsed.joined()
    assert "<script>" not in page and "&lt;script&gt;" in page
    mc = result["formats"]["mc"]
    for model in ("A", "B", EVIL):
        assert model in text
        entry = mc["per_model"][model]
        assert f"{entry['letter_extract']['score']:.1f}" in text
        for repeat in entry["judge"]["per_repeat"]:
            assert f"{repeat:.1f}" in text
    assert "40.0 ± 13.69" in text  # B's judge mean ± SD over repeats, as in the Markdown
    assert f"Total instability: {mc['stability']['total']:g}" in text
    assert f"judge {EVIL} is tiny" in text  # the warning, escaped
    for title in ("EHRNoteQA report", "Multiple choice", "Ranking stability over judge repeats:"):
        assert title in text
    assert f"{mc['agreement'][0]['kappa']:.3f}" in text
