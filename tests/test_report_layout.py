"""The report layer's charts and tables laid out by a real browser (Debian's Chromium, Playwright).

Adversarial inputs go through the layer's public functions: many long category labels (imaging
domains such as "foot/ankle x-ray"), legend entries that are long model specs, a line chart with
many long settings, a head-to-head heatmap of long model names, and tables of 15 long columns.
Each page is opened at a narrow viewport and measured from the DOM:

- no two text elements of a chart overlap (axis labels, legend entries, values, ticks);
- every text element lies inside its SVG's box (nothing runs off the edge of a figure);
- every label is shown in full (its visible text, tooltips aside, is the whole label);
- the page is never wider than the viewport, and every table and figure either fits the viewport
  or sits inside its own horizontal scroll box that does;
- a table scrolls only when even its wrapped cells cannot fit (MedAlign's per-arm table of long
  model specs fits whole at 800 px), and the header cells of a table that scrolls wrap;
- a figure is not shrunk to fit (its text keeps its size).

A screenshot of each page is saved to the test's tmp_path, so the test exercises painting too.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest

from clinieval.report import Document, Paragraph, Raw, Section, Table, render_html
from clinieval.report.charts import bar_chart_svg, grouped_bar_chart_svg, line_chart_svg
from clinieval.report.heatmap import head_to_head
from tests.conftest import missing

try:
    import playwright.sync_api  # noqa: F401
except ImportError:  # the browser fixture says how to install it; CI must have it
    missing("playwright is not installed in the virtualenv (`make install`)", module=True)

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytest_plugins = ["tests.browser"]

DOMAINS: Final = (
    "abdomen ultrasound",
    "chest x-ray",
    "foot/ankle x-ray",
    "head CT without contrast",
    "knee MRI",
    "lumbar spine MRI",
    "pelvis x-ray",
    "brain MRI with gadolinium",
    "echocardiography",
    "mammography screening",
    "thyroid ultrasound",
    "shoulder x-ray",
)
MODELS: Final = (
    "openai:http://127.0.0.1:8080/v1@some-long-model-name",
    "openai:http://127.0.0.1:8081/v1@meta-llama/Llama-3.1-70B-Instruct-Q4_K_M",
    "anthropic-compatible:http://localhost:9000/v1@clinical-camel-70b, 5-shot chain of thought",
    "gpt-4o-2024-08-06, zero-shot",
)
SETTINGS: Final = (
    "zero-shot",
    "1-shot",
    "3-shot",
    "5-shot",
    "10-shot",
    "zero-shot chain-of-thought",
    "5-shot chain-of-thought with rationale",
    "20-shot retrieval-augmented",
)
VIEWPORTS: Final = ({"width": 1024, "height": 768}, {"width": 800, "height": 600})


def _values(k: int, n: int) -> list[float | None]:
    return [None if (i + k) % 7 == 6 else float((17 * i + 29 * k) % 101) for i in range(n)]


def _h2h(models: list[str]) -> dict[str, Any]:
    n = len(models)
    rates = [[None if i == j else round(((i * 5 + j * 3) % 11) / 10, 2) for j in range(n)] for i in range(n)]
    battles = [[0 if i == j else 12 for j in range(n)] for i in range(n)]
    return {"models": models, "rates": rates, "battles": battles}


def _wide_table() -> Table:
    header = [f"{m} (column {c + 1}, higher is better)" for c, m in enumerate([*MODELS, *DOMAINS][:15])]
    rows = [
        [
            f"{MODELS[r % len(MODELS)]}" if c == 0 else f"{(r * 7 + c) % 100}.{c}% [{c}.0, {c + 9}.5]"
            for c in range(15)
        ]
        for r in range(5)
    ]
    return Table(header, rows)


def _document() -> tuple[Document, dict[str, list[str]]]:
    """The adversarial report, and for each figure (by its title) the labels it must show in full."""
    series = {m: _values(k, len(DOMAINS)) for k, m in enumerate(MODELS)}
    figures: list[tuple[str, str, list[str]]] = [
        (
            "MedEval-like accuracy by domain",
            grouped_bar_chart_svg("MedEval-like accuracy by domain", DOMAINS, series, (0.0, 100.0)),
            [*DOMAINS, *MODELS],
        ),
        (
            "Agreement by judge",
            grouped_bar_chart_svg(
                "Agreement by judge",
                list(MODELS),
                {"Accuracy_2-tuple": [0.61, 0.7, None, 0.55], "Accuracy_triple": [0.4, 0.52, 0.33, 0.3]},
                (0.0, 1.0),
            ),
            [*MODELS, "Accuracy_2-tuple", "Accuracy_triple"],
        ),
        (
            "A few domains",
            grouped_bar_chart_svg(
                "A few domains",
                DOMAINS[:5],
                {m: _values(k, 5) for k, m in enumerate(MODELS[:2])},
                (0.0, 100.0),
            ),
            [*DOMAINS[:5], *MODELS[:2]],
        ),
        (
            "Few short groups",
            grouped_bar_chart_svg("Few short groups", ["A", "B", "C"], {"x": [1.0, 2.0, 3.0]}, (0.0, 4.0)),
            ["A", "B", "C", "x"],
        ),
        (
            "One bar per domain",
            bar_chart_svg("One bar per domain", {d: 10.0 + 7 * i for i, d in enumerate(DOMAINS)}, (0, 100)),
            list(DOMAINS),
        ),
        (
            "One bar per model",
            bar_chart_svg("One bar per model", {m: 100.0 - 9 * i for i, m in enumerate(MODELS)}, (0, 100)),
            list(MODELS),
        ),
        (
            "Score by shot setting",
            line_chart_svg(
                "Score by shot setting",
                SETTINGS,
                {m: _values(k, len(SETTINGS)) for k, m in enumerate(MODELS)},
                (0.0, 100.0),
            ),
            [*SETTINGS, *MODELS],
        ),
        (
            "Score by many settings",
            line_chart_svg(
                "Score by many settings",
                [f"{s} ({d})" for s, d in zip(SETTINGS * 2, DOMAINS, strict=False)],
                {m: _values(k, len(DOMAINS)) for k, m in enumerate(MODELS[:2])},
                (0.0, 100.0),
            ),
            [f"{s} ({d})" for s, d in zip(SETTINGS * 2, DOMAINS, strict=False)],
        ),
        (
            "Score by model spec",
            line_chart_svg(
                "Score by model spec", MODELS, {"accuracy": [50.0, 60.0, None, 70.0]}, (0.0, 100.0)
            ),
            [*MODELS, "accuracy"],
        ),
    ]
    blocks: list[Paragraph | Table | Raw | Section] = [
        Section(title, [Raw(svg, "(figure)")]) for title, svg, _ in figures
    ]
    heat_models = [*MODELS, "meditron-70b", "biomistral-7b-dare"]
    blocks.append(Section("Head to head", head_to_head("rougeL", {"head_to_head": _h2h(heat_models)})))
    blocks.append(Section("A wide table", [_wide_table()]))
    arm_header = ["arm", "n", "mean", "95% CI", "SD", "mean rank", "win rate", "win rate (non-tied)"]
    arm_rows = [[m, "120", "0.412", "[0.391, 0.433]", "0.118", "2.25", "0.633", "0.701"] for m in MODELS]
    blocks.append(Section("Scores per arm (MedAlign-like)", [Table(arm_header, arm_rows)]))
    labels = {title: wanted for title, _, wanted in figures}
    labels["rougeL: head-to-head, all items (row beats column)"] = heat_models
    return Document("Layout under adversarial labels", blocks), labels


MEASURE = """
() => {
  const box = (r) => ({left: r.left, top: r.top, right: r.right, bottom: r.bottom,
                       width: r.width, height: r.height});
  const visible = (el) => {
    let s = "";
    for (const n of el.childNodes) {
      if (n.nodeType === Node.TEXT_NODE) s += n.textContent;
      else if (n.nodeType === Node.ELEMENT_NODE && n.tagName.toLowerCase() !== "title") s += visible(n);
    }
    return s;
  };
  const scrollBox = (a) => ({...box(a.getBoundingClientRect()), clientWidth: a.clientWidth,
                              scrollWidth: a.scrollWidth});
  const scroller = (el) => {
    for (let a = el.parentElement; a && a !== document.body; a = a.parentElement) {
      const o = getComputedStyle(a).overflowX;
      if (o === "auto" || o === "scroll") return scrollBox(a);
    }
    return null;
  };
  const minContent = (t) => {  // the table's width with every cell wrapped as far as it can be
    const holder = document.createElement("div");
    holder.style.cssText = "position: absolute; left: 0; top: 0; width: 0; visibility: hidden";
    const copy = t.cloneNode(true);
    copy.style.display = "table";
    holder.appendChild(copy);
    t.parentElement.appendChild(holder);
    const w = copy.getBoundingClientRect().width;
    holder.remove();
    return w;
  };
  const svgs = [...document.querySelectorAll("svg")].map((svg) => {
    const vb = svg.viewBox.baseVal;
    return {
      title: svg.getAttribute("aria-label"),
      box: box(svg.getBoundingClientRect()),
      scale: vb && vb.width ? svg.getBoundingClientRect().width / vb.width : 1,
      scroller: scroller(svg),
      texts: [...svg.querySelectorAll("text")].map((t) => ({
        text: visible(t), box: box(t.getBoundingClientRect()),
      })),
    };
  });
  const tables = [...document.querySelectorAll("table")].map((t) => ({
    box: box(t.getBoundingClientRect()),
    minContent: minContent(t),
    own: ["auto", "scroll"].includes(getComputedStyle(t).overflowX) ? scrollBox(t) : null,
    scroller: scroller(t),
    head: t.querySelector("th") ? t.querySelector("th").textContent : "",
    widestHeader: Math.max(0, ...[...t.querySelectorAll("th")].map((h) => h.getBoundingClientRect().width)),
  }));
  return {
    svgs, tables,
    scrollWidth: document.documentElement.scrollWidth,
    viewport: window.innerWidth,
  };
}
"""

EPS: Final = 0.5
MAX_HEADER: Final = 360


def _overlap(a: dict[str, float], b: dict[str, float]) -> bool:
    return (
        min(a["right"], b["right"]) - max(a["left"], b["left"]) > EPS
        and min(a["bottom"], b["bottom"]) - max(a["top"], b["top"]) > EPS
    )


def _inside(inner: dict[str, float], outer: dict[str, float]) -> bool:
    return (
        inner["left"] >= outer["left"] - EPS
        and inner["right"] <= outer["right"] + EPS
        and inner["top"] >= outer["top"] - EPS
        and inner["bottom"] <= outer["bottom"] + EPS
    )


def _fits(box: dict[str, float], viewport: int) -> bool:
    return box["left"] >= -EPS and box["right"] <= viewport + EPS


def _squash(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _render(page: Page, tmp_path: Path, viewport: dict[str, int]) -> dict[str, Any]:
    doc, _ = _document()
    html = tmp_path / "report.html"
    html.write_text(render_html(doc), encoding="utf-8")
    page.set_viewport_size({"width": viewport["width"], "height": viewport["height"]})
    page.goto(html.as_uri())
    shot = tmp_path / f"report-{viewport['width']}.png"
    page.screenshot(path=str(shot), full_page=True)
    assert shot.stat().st_size > 10_000  # a painted page, not a blank one
    measured: dict[str, Any] = page.evaluate(MEASURE)
    return measured


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v['width']}x{v['height']}")
def test_chart_text_never_overlaps_and_stays_inside_its_figure(
    page: Page, tmp_path: Path, viewport: dict[str, int]
) -> None:
    m = _render(page, tmp_path, viewport)
    assert len(m["svgs"]) == 10
    problems: list[str] = []
    for svg in m["svgs"]:
        texts = svg["texts"]
        for t in texts:
            if not _inside(t["box"], svg["box"]):
                problems.append(
                    f"{svg['title']}: {t['text']!r} runs off the figure: {t['box']} in {svg['box']}"
                )
        for i, a in enumerate(texts):
            for b in texts[i + 1 :]:
                if _overlap(a["box"], b["box"]):
                    problems.append(f"{svg['title']}: {a['text']!r} overlaps {b['text']!r}")
    assert not problems, "\n".join(problems[:40]) + f"\n({len(problems)} problems)"


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v['width']}x{v['height']}")
def test_every_label_and_legend_entry_is_shown_in_full(
    page: Page, tmp_path: Path, viewport: dict[str, int]
) -> None:
    m = _render(page, tmp_path, viewport)
    _, wanted = _document()
    by_title = {svg["title"]: svg for svg in m["svgs"]}
    missing: list[str] = []
    for title, labels in wanted.items():
        shown = {_squash(t["text"]) for t in by_title[title]["texts"]}
        missing += [f"{title}: {label!r}" for label in labels if _squash(label) not in shown]
    assert not missing, "labels cut or missing (a tooltip does not count):\n" + "\n".join(missing)
    for svg in m["svgs"]:  # a figure keeps its text size: it is never shrunk to fit the page
        assert svg["scale"] > 0.99, f"{svg['title']} is drawn at {svg['scale']:.2f} of its size"


@pytest.mark.parametrize("viewport", VIEWPORTS, ids=lambda v: f"{v['width']}x{v['height']}")
def test_wide_tables_and_figures_stay_inside_the_page(
    page: Page, tmp_path: Path, viewport: dict[str, int]
) -> None:
    m = _render(page, tmp_path, viewport)
    width = m["viewport"]
    assert width == viewport["width"]
    assert m["scrollWidth"] <= width, f"the page is {m['scrollWidth']} px wide in a {width} px viewport"
    assert len(m["tables"]) == 2
    for t in m["tables"]:
        name = f"the table headed {t['head'][:40]!r}"
        box = t["own"] or t["scroller"]  # the table scrolls itself, or a box around it does
        if box is None:
            assert _fits(t["box"], width), f"{name} is cut at {t['box']} (no scroll box)"
            continue
        assert _fits(box, width), f"the scroll box of {name} is cut: {box}"
        if box["scrollWidth"] <= box["clientWidth"] + 1:
            continue  # nothing hidden: fully visible
        # it scrolls: only when even its wrapped cells cannot fit
        assert t["minContent"] > box["clientWidth"], (
            f"{name} scrolls ({box['scrollWidth']} px in {box['clientWidth']}) although its cells "
            f"could wrap to {t['minContent']:.0f} px"
        )
        # and a long header wraps rather than making its column as wide as its whole text
        assert t["widestHeader"] <= MAX_HEADER, (
            f"{name} scrolls with a header {t['widestHeader']:.0f} px wide"
        )
    arm = next(t for t in m["tables"] if t["head"] == "arm")  # MedAlign's per-arm table fits whole
    box = arm["own"] or arm["scroller"]
    assert _fits(arm["box"], width), f"MedAlign's per-arm table is cut at {arm['box']}"
    assert box is None or box["scrollWidth"] <= box["clientWidth"] + 1, "the per-arm table scrolls"
    for svg in m["svgs"]:
        if _fits(svg["box"], width):
            continue
        box = svg["scroller"]
        assert box is not None, f"{svg['title']} is cut at {svg['box']} (no scroll box)"
        assert _fits(box, width), f"the scroll box of {svg['title']} is cut: {box}"
