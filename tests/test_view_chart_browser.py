"""The patient chart in `clinieval view`'s static pages works from file://, with no server: the
same script as the review app's, opened the way a results browser is (issue 37). The review app's
chart is driven in tests/test_review_chart_browser.py; this drives the static site's copy."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clinieval.ehr.chart import build_chart
from clinieval.ehr.chart_html import ASSETS, asset_text, render_chart
from clinieval.view.html import page as view_page
from tests.test_ehr_chart import RECORD

pytest_plugins = ["tests.browser"]


def _site(folder: Path) -> Path:
    """An item page as `clinieval view` writes one (its page shell, the chart's two assets)."""
    folder.mkdir(parents=True, exist_ok=True)
    for name in ASSETS:
        (folder / name).write_text(asset_text(name), encoding="utf-8")
    (folder / "view.css").write_text("", encoding="utf-8")
    (folder / "view.js").write_text("", encoding="utf-8")
    body = f'<div class="record-chart">{render_chart(build_chart(RECORD), prefix="record-chart")}</div>'
    path = folder / "item.html"
    path.write_text(view_page("Sample", body, root=""), encoding="utf-8")
    return path


def test_search_jump_and_fold_work_in_the_static_page(tmp_path: Path, page: Any) -> None:
    page.goto(_site(tmp_path / "site").as_uri())
    days = page.locator("details.encounter").evaluate_all("els => els.map(e => e.dataset.day)")
    assert days == sorted(days, reverse=True) and len(days) == 2  # newest first
    page.fill("#record-chart-search", "lisinopril")
    page.press("#record-chart-search", "Enter")
    assert page.text_content("#record-chart-search-count") == "1 of 1 matches"
    hit = page.locator("mark.chart-hit.current")
    assert hit.text_content() == "lisinopril" and hit.is_visible()  # its encounter was opened
    page.fill("#record-chart-search", "<script>")
    page.press("#record-chart-search", "Enter")
    assert page.text_content("#record-chart-search-count") == "1 of 1 matches"  # shown as text
    assert page.evaluate("document.querySelectorAll('.chart script').length") == 0
    page.click("#record-chart-collapse")
    assert page.evaluate("[...document.querySelectorAll('details.encounter')].every(d => !d.open)")
    page.fill("#record-chart-date", "2020-06-01")  # before the second visit: the first one
    page.dispatch_event("#record-chart-date", "change")
    jumped = page.locator("details.encounter.jumped")
    assert jumped.get_attribute("data-day") == min(days) and jumped.evaluate("d => d.open")
