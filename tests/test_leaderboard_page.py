"""The leaderboard page (clinieval.suite.leaderboard): written through the report layer, read back
in a real browser (Debian's Chromium through tests/browser.py).

The page is built from a hand-made but realistic table (the shapes of the seed benchmarks and
PubMedQA: patients behind MedAlign's and EHRNoteQA's items, five judge repeats on EHRNoteQA, a
failed call here and there), with link targets written as files into tmp. Chromium opens it from
``file://`` and the test checks that every link resolves to a file that loads (or to a section of
the page), that every number in every table and figure equals leaderboard.json, that the page asks
for nothing but itself (no model call, no network, no other file), and that it runs without console
errors. A model named ``<script>alert(1)</script>`` stays text in every format.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

import numpy as np
import pytest

from clinieval.analysis.leaderboard import BenchmarkScores, build_leaderboard
from clinieval.errors import UserError
from clinieval.suite.leaderboard import BenchmarkLinks, write_leaderboard

if TYPE_CHECKING:
    from playwright.sync_api import Page

# the browser fixtures skip without Chromium or Playwright, and fail instead under CI=true
pytest_plugins = ["tests.browser"]

MODELS = ("SmolLM2-135M", "Gemma-3-270M", "pool:gemma-3-270m×2")
NOTES = (
    "The demo models are tiny (135M and 270M parameters) and the data synthetic: these numbers say"
    " nothing clinical.",
    "pubmedqa has 40 items: differences smaller than about 0.25 cannot be told apart at this size.",
)


def _binary(rng: np.random.Generator, items: list[str], p: float) -> dict[str, float]:
    return {i: float(rng.random() < p) for i in items}


def realistic_benchmarks(seed: int = 29) -> list[BenchmarkScores]:
    """Four benchmarks over three models: one clear leader, one pair indistinguishable with a third
    behind both, judge repeats that reorder the models, a benchmark the pool did not run."""
    rng = np.random.default_rng(seed)
    smol, gemma, pool = MODELS
    ma = [f"ma-{k:03d}" for k in range(60)]
    medalign = BenchmarkScores(
        "medalign",
        "clinician-style correctness (judge)",
        {smol: _binary(rng, ma, 0.35), gemma: _binary(rng, ma, 0.55), pool: _binary(rng, ma[:-3], 0.52)},
        clusters={i: f"patient-{int(i[3:]) // 5}" for i in ma},
        failed={pool: 3},
        scale=(0.0, 1.0),
    )
    eq = [f"eq-{k:03d}" for k in range(50)]
    repeats = {
        m: [_binary(rng, eq, p) for _ in range(5)] for m, p in ((smol, 0.42), (gemma, 0.46), (pool, 0.44))
    }
    ehrnoteqa = BenchmarkScores(
        "ehrnoteqa",
        "accuracy, mean of 5 judge runs",
        {m: {i: float(np.mean([r[i] for r in runs])) for i in eq} for m, runs in repeats.items()},
        clusters={i: f"patient-{int(i[3:]) // 2}" for i in eq},
        judge_runs=repeats,
        scale=(0.0, 1.0),
    )
    me = [f"me-{k:03d}" for k in range(80)]
    means = {smol: 0.31, gemma: 0.52, pool: 0.50}
    f1 = {m: {i: float(np.clip(rng.normal(mu, 0.2), 0, 1)) for i in me} for m, mu in means.items()}
    medeval = BenchmarkScores("medeval", "finding-label F1 per report", f1, scale=(0.0, 1.0))
    pq = [f"pq-{k:03d}" for k in range(40)]
    pubmedqa = BenchmarkScores(
        "pubmedqa",
        "accuracy",
        {smol: _binary(rng, pq[:-1], 0.4), gemma: _binary(rng, pq, 0.8)},
        failed={smol: 1},
        scale=(0.0, 1.0),
    )
    return [medalign, ehrnoteqa, medeval, pubmedqa]


def link_targets(root: Path) -> dict[str, BenchmarkLinks]:
    """Report and results-browser files for every benchmark but pubmedqa (it has none), as the suite
    lays them out: DIR/report/<benchmark>/, DIR/report/view/<benchmark>/index.html."""
    links: dict[str, BenchmarkLinks] = {}
    for name in ("medalign", "ehrnoteqa", "medeval"):
        for rel in (f"{name}/report.html", f"view/{name}/index.html"):
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(f"<!DOCTYPE html><title>{name}</title><p>{rel}</p>", encoding="utf-8")
        links[name] = BenchmarkLinks(report=f"{name}/report.html", view=f"view/{name}/index.html")
    links["pubmedqa"] = BenchmarkLinks(report=None, view=None)
    return links


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Any]]:
    root = tmp_path_factory.mktemp("suite") / "report"
    root.mkdir()
    board = build_leaderboard(realistic_benchmarks(), resamples=1000, seed=0)
    paths = write_leaderboard(
        board, link_targets(root), root, title="Clinical leaderboard (demo)", notes=NOTES
    )
    assert [p.name for p in paths] == ["leaderboard.json", "leaderboard.md", "leaderboard.html"]
    return root / "leaderboard.html", json.loads((root / "leaderboard.json").read_text(encoding="utf-8"))


# --- files ---------------------------------------------------------------------------------------


def test_the_json_holds_the_board_the_links_and_the_notes(written: tuple[Path, dict[str, Any]]) -> None:
    html, data = written
    assert set(data) >= {"title", "notes", "links", "benchmarks", "overall", "level", "resamples", "seed"}
    assert data["links"]["pubmedqa"] == {"report": None, "view": None}
    assert data["links"]["medalign"]["view"] == "view/medalign/index.html"
    assert [b["name"] for b in data["benchmarks"]] == ["medalign", "ehrnoteqa", "medeval", "pubmedqa"]
    assert data["benchmarks"][1]["judge"]["repeats"] == 5
    md = html.with_suffix(".md").read_text(encoding="utf-8")
    assert "> **Warning:** The demo models are tiny" in md
    for b in data["benchmarks"]:
        assert b["verdict"] in md.replace("\\", "")
    assert not [p for p in html.parent.iterdir() if p.name.startswith(".")]  # no temporary file left


def test_a_benchmark_without_links_shows_none_and_bad_links_are_refused(
    written: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    html, _ = written
    text = html.read_text(encoding="utf-8")
    section = text[text.index('id="bench-pubmedqa"') :]
    assert "<a " not in section  # no report, no results browser: nothing to click
    board = build_leaderboard(realistic_benchmarks()[3:], resamples=50)
    with pytest.raises(UserError, match="not a relative path"):
        write_leaderboard(
            board, {"pubmedqa": BenchmarkLinks("javascript:alert(1)", None)}, tmp_path, title="t"
        )
    with pytest.raises(UserError, match=r"\['nope'\], which are not on the leaderboard"):
        write_leaderboard(board, {"nope": BenchmarkLinks(None, None)}, tmp_path, title="t")
    assert list(tmp_path.iterdir()) == []  # refused before anything was written


def test_every_figure_is_well_formed_svg(written: tuple[Path, dict[str, Any]]) -> None:
    """A stray "<" (a "<1%" written unescaped) is forgiven by a browser but breaks the SVG as XML."""
    from xml.etree import ElementTree

    text = written[0].read_text(encoding="utf-8")
    figures = re.findall(r"<svg\b.*?</svg>", text, flags=re.S)
    assert len(figures) == 1 + 1 + 4 * 2  # overall strip, win rates, a forest plot and a strip per benchmark
    for svg in figures:
        ElementTree.fromstring(svg)
    assert "&lt;1%" in text  # a share that rounds to 0 but is not 0 says so


EVIL = "<script>alert(1)</script>"


def test_names_from_the_data_stay_text(tmp_path: Path) -> None:
    bench = BenchmarkScores(
        f"b{EVIL}",
        f"m{EVIL}",
        {
            EVIL: {"i0": 1.0, "i1": 1.0, "i2": 0.0},
            'x" onmouseover="alert(2)': {"i0": 0.0, "i1": 1.0, "i2": 0.0},
        },
    )
    write_leaderboard(build_leaderboard([bench], resamples=50), {}, tmp_path, title=EVIL, notes=[EVIL])
    html = (tmp_path / "leaderboard.html").read_text(encoding="utf-8")
    assert "<script" not in html and 'x" onmouseover' not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    md = (tmp_path / "leaderboard.md").read_text(encoding="utf-8")
    assert "<script>" not in md


# --- in Chromium --------------------------------------------------------------------------------

READ_TABLES = """() => [...document.querySelectorAll('table')].map(t => ({
  section: t.closest('section[id]') ? t.closest('section[id]').id : null,
  heading: t.closest('section').querySelector('h2, h3, h4').textContent,
  header: [...t.querySelectorAll('thead th')].map(c => c.textContent),
  rows: [...t.querySelectorAll('tbody tr')].map(r => [...r.cells].map(c => c.textContent)),
}))"""


def num(text: str) -> float:
    return float(text.replace("\u2212", "-").rstrip("%"))


def same_share(shown: str, p: float, digits: int) -> bool:
    """A percentage as the page writes it (``<0.1%`` and ``>99.9%`` for shares that are neither 0 nor 1)."""
    step = 10.0**-digits
    if shown.startswith("<"):
        return 0 < 100 * p < step / 2 + 1e-9 and num(shown[1:]) == step
    if shown.startswith(">"):
        return 100 - step / 2 - 1e-9 < 100 * p < 100 and num(shown[1:]) == 100 - step
    return abs(num(shown) - 100 * p) <= step / 2 + 1e-9


def pair(text: str) -> tuple[float, float]:
    low, high = text.strip("[]").split(", ")
    return num(low), num(high)


def close(shown: str, value: float, digits: int) -> bool:
    return abs(num(shown) - value) <= 0.5 * 10**-digits + 1e-12


def same_p(shown: str, value: float) -> bool:
    return abs(num(shown) - value) <= 0.005 * value + 1e-15  # 3 significant digits


def check_benchmark(b: Mapping[str, Any], tables: list[dict[str, Any]]) -> int:
    """Every number of one benchmark's tables against its JSON; how many cells were compared."""
    d, checked = b["digits"], 0
    scores = {s["model"]: s for s in b["scores"]}
    ranks = {r["model"]: r for r in b["ranks"]}
    main, probs = tables[0], tables[1]
    assert [r[0] for r in main["rows"]] == b["models"]
    for row in main["rows"]:
        s, r = scores[row[0]], ranks[row[0]]
        assert close(row[1], s["mean"], d)
        ci = row[2].removesuffix(" (zero width)")
        assert (ci != row[2]) == (s["ci"][0] == s["ci"][1])
        assert all(close(x, y, d) for x, y in zip(ci.strip("[]").split(", "), s["ci"], strict=True))
        assert (int(row[3]), int(row[4])) == (s["n"], s["failed"])
        interval = row[7].removesuffix("*")
        assert (interval != row[7]) == r["widened_to_the_tests"]
        assert (num(row[5]), num(row[6]), pair(interval)) == (r["rank"], r["median"], tuple(r["interval"]))
        checked += 8
    for row in probs["rows"]:
        assert all(same_share(x, p, 1) for x, p in zip(row[1:], ranks[row[0]]["probabilities"], strict=True))
        checked += len(row) - 1
    pairs = next((t for t in tables if t["heading"] == "Pairwise differences"), None)
    assert (pairs is None) == (not b["pairs"])
    for row, p in zip(pairs["rows"] if pairs else [], b["pairs"], strict=True):
        assert (row[0], row[1], int(row[2])) == (p["a"], p["b"], p["n"])
        assert close(row[3], p["mean_difference"], d) and all(
            close(x, y, d) for x, y in zip(row[4].strip("[]").split(", "), p["ci"], strict=True)
        )
        assert (
            same_p(row[5].split(" ± ")[0], p["p"])
            and same_p(row[6], p["p_holm"])
            and row[7] == ("yes" if p["significant"] else "no")
        )
        assert row[8] in {"exact McNemar", "sign-flip, exact", "sign-flip, Monte Carlo"}
        assert (row[8] == "exact McNemar") == p["test"].startswith("exact McNemar")
        checked += 7
    judge = next((t for t in tables if t["heading"] == "Judge-run rank stability"), None)
    assert (judge is None) == (b["judge"] is None)
    if judge is not None:
        j = b["judge"]
        for i, row in enumerate(judge["rows"]):
            m = j["models"][i]
            assert row[0] == m and num(row[1]) == j["gold_ranks"][m] and num(row[2]) == j["per_model"][m]
            assert [int(x) for x in row[3:-1]] == j["rank_counts"][m]
            assert [num(x) for x in row[-1].split(", ")] == [rr[i] for rr in j["ranks"]]
            checked += len(row) - 1
    return checked


def check_overall(data: Mapping[str, Any], table: dict[str, Any]) -> int:
    o, names, checked = data["overall"], [b["name"] for b in data["benchmarks"]], 0
    assert [r[0] for r in table["rows"]] == [m["model"] for m in o["models"]]
    for row, m in zip(table["rows"], o["models"], strict=True):
        k = len(m["probabilities"])
        assert close(row[1], m["mean_rank"], 2) and num(row[2]) == m["rank"] and num(row[3]) == m["median"]
        assert pair(row[4]) == tuple(m["interval"])
        assert all(same_share(x, p, 1) for x, p in zip(row[5 : 5 + k], m["probabilities"], strict=True))
        for shown, name in zip(row[5 + k :], names, strict=True):
            assert shown == "—" if name not in m["ranks"] else num(shown) == m["ranks"][name]
        checked += len(row) - 1
    return checked


def test_the_page_in_chromium(page: Page, written: tuple[Path, dict[str, Any]]) -> None:
    html, data = written
    requests: list[str] = []
    console_errors: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.on("console", lambda m: console_errors.append(m.text) if m.type == "error" else None)
    page.set_viewport_size({"width": 1200, "height": 900})
    response = page.goto(html.as_uri())
    assert response is not None and response.ok
    page.wait_for_load_state("load")
    # self-contained: the page is the only thing it asked for (no model, no network, no other file)
    assert requests == [html.as_uri()]
    assert page.title() == data["title"]

    tables: list[dict[str, Any]] = page.evaluate(READ_TABLES)
    checked = check_overall(
        data, next(t for t in tables if t["section"] == "overall" and t["header"][0] == "Model")
    )
    for b in data["benchmarks"]:
        checked += check_benchmark(b, [t for t in tables if t["section"] == f"bench-{b['name']}"])
    assert checked > 200
    # the plain-words line is the JSON's, in bold under each benchmark's heading
    shown = page.eval_on_selector_all(
        "section[id^=bench-] > p > strong", "els => els.map(e => e.textContent)"
    )
    assert shown == [b["verdict"] for b in data["benchmarks"]]
    # the forest plots write the JSON's means and CIs
    values = page.eval_on_selector_all("svg.forest text.value", "els => els.map(e => e.textContent)")
    want = [s for b in data["benchmarks"] for s in b["scores"]]
    digits = [b["digits"] for b in data["benchmarks"] for _ in b["scores"]]
    assert len(values) == len(want)
    for text, s, d in zip(values, want, digits, strict=True):
        mean, rest = text.split(" ", 1)
        assert close(mean, s["mean"], d) and all(
            close(x, y, d) for x, y in zip(rest.strip("[]").split(", "), s["ci"], strict=True)
        )
    # the rank strips write each P(rank) as a whole percentage; the win-rate heatmap its rates
    strips = page.eval_on_selector_all("svg.rank-strip g text", "els => els.map(e => e.textContent)")
    probs = [p for m in data["overall"]["models"] for p in m["probabilities"]]
    probs += [p for b in data["benchmarks"] for r in b["ranks"] for p in r["probabilities"]]
    assert len(strips) == len(probs)
    assert all(same_share(t, p, 0) for t, p in zip(strips, probs, strict=True))
    rates = page.eval_on_selector_all("svg.heatmap g text", "els => els.map(e => e.textContent)")
    want_rates = [r for row in data["overall"]["win_rates"]["rates"] for r in row]
    assert [t == "—" if r is None else close(t, r, 2) for t, r in zip(rates, want_rates, strict=True)] == [
        True
    ] * 9
    # warnings at the top
    assert page.eval_on_selector_all("p.warning", "els => els.length") == len(NOTES)

    hrefs: list[str] = page.eval_on_selector_all("a[href]", "els => els.map(e => e.href)")
    own = [h for h in hrefs if h.split("#")[0] == html.as_uri()]
    files = sorted({h for h in hrefs if h not in own})
    for h in own:
        assert page.query_selector(f"[id='{h.split('#', 1)[1]}']") is not None, f"{h} points nowhere"
    assert len(files) == 6  # a report and a results browser for each of three benchmarks
    for h in files:
        target = Path(unquote(urlsplit(h).path))
        assert target.is_file(), f"{h} does not resolve"
        assert page.goto(h).ok and page.title() in ("medalign", "ehrnoteqa", "medeval")
    assert not console_errors, console_errors


def test_every_score_cell_links_its_report_and_its_answers(
    page: Page, written: tuple[Path, dict[str, Any]]
) -> None:
    html, data = written
    page.goto(html.as_uri())
    for b in data["benchmarks"]:
        link = data["links"][b["name"]]
        rows = page.evaluate(
            """name => [...document.getElementById('bench-' + name).querySelector('table').tBodies[0].rows]
                 .map(r => [...r.cells].map(c => { const a = c.querySelector('a');
                   return a ? a.getAttribute('href') : null; }))""",
            b["name"],
        )
        assert len(rows) == len(b["scores"])
        for cells in rows:
            assert cells[1] == link["report"] and cells[-1] == link["view"]
            assert all(c is None for c in cells[2:-1])


def test_a_script_name_does_not_run_in_the_browser(page: Page, tmp_path: Path) -> None:
    bench = BenchmarkScores("bench", "acc", {EVIL: {"i0": 1.0, "i1": 0.0}, "plain": {"i0": 0.0, "i1": 0.0}})
    write_leaderboard(build_leaderboard([bench], resamples=50), {}, tmp_path, title=EVIL, notes=[EVIL])
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto((tmp_path / "leaderboard.html").as_uri())
    assert page.title() == EVIL and not dialogs
    assert page.query_selector("script") is None
    assert EVIL in page.inner_text("body")
    assert re.search(r"<script", page.content().replace("&lt;script", "")) is None
