"""The record as a chart in `clinieval review`, in Chromium, on a real 224k-character record.

The record is what ``clinieval ehr omop2xml`` writes for the largest-but-two patient of the public
Synthea OMOP set (``16.xml``, 159 visits, oldest first in the XML). What must hold: the chart opens
with the newest encounter on top and every encounter after it older; a search finds a drug deep in
the record and shows the hit; jump-to-date opens the encounter of that date; the raw text (the
existing paged view) is one click away; at 1280 px the record sits beside the answers, at 800 px it
stays on screen above them while the Submit button is scrolled to, and folds away on demand.

Screenshots (``CLINIEVAL_SCREENSHOTS=1``): docs/review/record-chart.png and record-chart-narrow.png.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Final

import pytest

from clinieval.review import accounts, assigning, importing, reviewing, store
from clinieval.review.app import create_app
from clinieval.review.db import User, read_session
from clinieval.review.items import AnswerIn, ReviewItem
from tests.conftest import missing, need_shared, run_cli
from tests.test_review_browser import Browsing, shot

try:
    from playwright.sync_api import expect
except ImportError:
    missing("playwright is not installed in the virtualenv (`make install`)", module=True)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, Page

pytest_plugins = ["tests.browser"]

PATIENT: Final = "16"
PASSWORD: Final = "chart-pass-2026"
SEARCH_TERM: Final = "lisinopril"


@pytest.fixture(scope="module")
def record(tmp_path_factory: pytest.TempPathFactory) -> str:
    out = tmp_path_factory.mktemp("omop") / "xml"
    done = run_cli("ehr", "omop2xml", str(need_shared("omop-synthea27nj")), str(out), "--no-progress")
    assert done.returncode == 0, done.stderr
    text = (out / f"{PATIENT}.xml").read_text(encoding="utf-8")
    assert len(text) > 200_000  # the long record of issue 37 (224,665 characters when written)
    return text


@pytest.fixture(scope="module")
def template(record: str, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("review") / "chart.sqlite"
    engine = store.init_db(path)
    accounts.add_user(engine, "dr-lee", "reviewer", PASSWORD)
    item = ReviewItem(
        item="c01",
        prompt="Which antihypertensive is the patient taking now?",
        context=record,
        answers=(AnswerIn("a1", "m1", "Lisinopril 10 mg daily."), AnswerIn("a2", "m2", "Amlodipine.")),
    )
    importing.import_items(engine, "chart", "rate", {}, [item])
    assigning.assign(engine, "chart", per_item=1, seed=7)
    engine.dispose()
    return path


@pytest.fixture
def opened(template: Path, tmp_path: Path, browser: Browser) -> Iterator[Page]:
    """dr-lee logged in, on the item's page at 1280x900."""
    from tests.browser import serve_asgi

    db = tmp_path / "review.sqlite"
    shutil.copy(template, db)
    engine = store.connect(db)
    session = Browsing(browser)
    try:
        with serve_asgi(create_app(engine)) as base:
            page = session.page()
            page.goto(base + "/login")
            page.fill("#login-name", "dr-lee")
            page.fill("#login-password", PASSWORD)
            page.click("#login-submit")
            expect(page.locator("#user-name")).to_have_text("dr-lee")
            with read_session(engine) as s:
                uid = s.scalars(User.__table__.select().with_only_columns(User.id)).one()
            aid = reviewing.reviewer_queue(engine, uid, "chart")[0].id
            page.goto(f"{base}/a/{aid}")
            yield page
    finally:
        session.close()
        engine.dispose()
    assert not session.script_errors, session.script_errors


def days(page: Page) -> list[str]:
    return [
        d
        for d in page.locator("#chart details.encounter").evaluate_all("els => els.map(e => e.dataset.day)")
        if d
    ]


def test_the_chart_opens_newest_first_with_names_for_codes(opened: Page) -> None:
    page = opened
    expect(page.locator("#record-chart-panel")).to_be_visible()
    expect(page.locator("#chart")).to_have_attribute("data-kind", "encounters")
    shown = days(page)
    assert len(shown) > 100 and shown == sorted(shown, reverse=True)  # newest first, all of them
    first = page.locator("#chart details.encounter").first
    expect(first).to_have_attribute("open", "")
    expect(first.locator("summary time")).to_be_in_viewport()
    name = page.locator("#chart abbr.code").first
    assert (name.get_attribute("title") or "").count("/") == 1  # VOCAB/CODE on hover
    assert "[" not in name.inner_text()  # the name, not the code line
    assert "<code>" not in page.locator("#chart .chart-body").inner_text()
    labs = page.locator("#chart table.labs").first
    expect(labs.locator("thead th")).to_have_text(["Time", "Test", "Value", "Unit", "Flag"])
    shot(page, "record-chart")


def test_search_jump_to_date_and_the_raw_tab(opened: Page) -> None:
    page = opened
    page.fill("#chart-search", SEARCH_TERM)
    page.press("#chart-search", "Enter")
    expect(page.locator("#chart-search-count")).to_contain_text("1 of ")
    current = page.locator("#chart mark.chart-hit.current")
    expect(current).to_have_text(SEARCH_TERM, ignore_case=True)
    expect(current).to_be_in_viewport()
    total = page.locator("#chart mark.chart-hit").count()
    assert total > 10  # found in encounters whether open or folded
    page.press("#chart-search", "Enter")
    expect(page.locator("#chart-search-count")).to_contain_text(f"2 of {total}")

    oldest = days(page)[-1]
    page.fill("#chart-date", oldest)
    page.dispatch_event("#chart-date", "change")
    jumped = page.locator("#chart details.encounter.jumped")
    expect(jumped).to_have_attribute("data-day", oldest)
    expect(jumped).to_have_attribute("open", "")
    expect(jumped.locator("summary")).to_be_in_viewport()

    page.click("#record-tab-raw")
    expect(page.locator("#record-chart-panel")).to_be_hidden()
    expect(page.locator("#record-text")).to_be_visible()
    expect(page.locator("#record-page-count")).to_have_text("12")
    expect(page.locator("#record-text")).to_contain_text("<visit type=")
    page.click("#record-tab-chart")
    expect(page.locator("#chart details.encounter.jumped")).to_be_in_viewport()  # the place is kept


def test_the_record_beside_the_form_at_1280_and_above_it_at_800(opened: Page) -> None:
    page = opened
    pane, form = page.locator("#record-pane"), page.locator("#review-form")
    expect(pane).to_be_in_viewport()
    expect(page.locator("#score-A-relevancy-1")).to_be_in_viewport()
    rec, work = pane.bounding_box(), page.locator("#work-pane").bounding_box()
    assert rec and work and rec["x"] + rec["width"] <= work["x"]  # side by side
    page.locator("#submit-button").scroll_into_view_if_needed()
    expect(pane).to_be_in_viewport()  # sticky: still beside the answers

    page.set_viewport_size({"width": 800, "height": 900})
    page.evaluate("window.scrollTo(0, 0)")
    expect(pane).to_be_in_viewport()
    page.locator("#submit-button").scroll_into_view_if_needed()
    expect(page.locator("#submit-button")).to_be_in_viewport()
    expect(page.locator("#chart .chart-tools")).to_be_in_viewport()  # the record stays on screen
    page.check("#score-A-relevancy-4")  # a control under the record is still usable
    expect(page.locator("#score-A-relevancy-4")).to_be_checked()
    page.locator("#chart-search").fill("Outpatient")
    page.press("#chart-search", "Enter")
    expect(page.locator("#chart mark.chart-hit.current")).to_be_in_viewport()
    shot(page, "record-chart-narrow")
    page.click("#record-toggle")
    expect(page.locator("#record-panels")).to_be_hidden()
    expect(page.locator("#record-toggle")).to_have_text("Show record")
    box = pane.bounding_box()
    assert box and box["height"] < 80  # folded to its tab bar
    expect(form).to_be_visible()
