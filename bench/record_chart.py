"""How fast the review app's record chart opens, searches and scrolls on a long record, in Chromium.

The record is what ``clinieval ehr omop2xml`` writes for one patient of the public Synthea OMOP set
(``--patient 16``: 224,665 characters, 159 visits), or any file given with ``--record``. A real
server (``clinieval.review.app.create_app`` under uvicorn on 127.0.0.1) serves a one-item rate study
holding it; Debian's Chromium, driven by Playwright at 1280x900, logs in and opens the item
``--runs`` times. Measured per run, in the page's own clock (``performance``):

* ``first_paint_ms``: navigation start to the first contentful paint;
* ``chart_ready_ms``: navigation start to the chart fetched, laid in and wired (``#chart[data-wired]``,
  seen by a MutationObserver): the chart usable;
* ``search_ms``: a search for ``--term`` across the whole chart (marks placed, the first hit shown),
  from the key press to the next frame;
* ``scroll_ms`` / ``worst_frame_ms``: every encounter expanded, then the chart scrolled from top
  to bottom 600 px per frame; the total and the longest frame.

Printed as a table of medians (and each run), JSON to bench/out/record_chart-<time>.json.

    .venv/bin/python bench/record_chart.py
    .venv/bin/python bench/record_chart.py --runs 5 --term lisinopril
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))  # tests.browser: the real-server helper the browser tests use
PASSWORD = "bench-pass-2026"

SEARCH_JS = """async (term) => {
  const input = document.getElementById("chart-search");
  input.value = term;
  const t0 = performance.now();
  input.dispatchEvent(new KeyboardEvent("keydown", {key: "Enter", bubbles: true}));
  await new Promise(r => requestAnimationFrame(() => setTimeout(r, 0)));
  return [performance.now() - t0, document.querySelectorAll("#chart mark.chart-hit").length];
}"""

SCROLL_JS = """async () => {
  document.getElementById("chart-expand").click();
  const body = document.querySelector("#chart .chart-body");
  body.scrollTop = 0;
  await new Promise(r => requestAnimationFrame(r));
  const t0 = performance.now();
  let last = t0, worst = 0;
  while (body.scrollTop + body.clientHeight < body.scrollHeight - 1) {
    body.scrollTop += 600;
    await new Promise(r => requestAnimationFrame(r));
    const now = performance.now();
    worst = Math.max(worst, now - last);
    last = now;
  }
  return [performance.now() - t0, worst, body.scrollHeight];
}"""


def build_record(patient: str, work: Path) -> str:
    from clinieval.cli.ehr import omop2xml

    out = work / "xml"
    omop2xml(REPO.parent / "shared" / "data" / "omop-synthea27nj", out, overwrite=False, progress=False,
             memory_limit="1GB")  # fmt: skip
    return (out / f"{patient}.xml").read_text(encoding="utf-8")


def build_db(record: str, path: Path) -> Any:
    from clinieval.review import accounts, assigning, importing, store
    from clinieval.review.items import AnswerIn, ReviewItem

    engine = store.init_db(path)
    accounts.add_user(engine, "bench", "reviewer", PASSWORD)
    answers = (AnswerIn("a1", "m1", "Lisinopril."), AnswerIn("a2", "m2", "None."))
    item = ReviewItem(item="c01", prompt="Which antihypertensive now?", context=record, answers=answers)
    importing.import_items(engine, "chart", "rate", {}, [item])
    assigning.assign(engine, "chart", per_item=1, seed=1)
    return engine


def one_run(browser: Any, base: str, aid: int, term: str) -> dict[str, float]:
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    page.goto(base + "/login")
    page.fill("#login-name", "bench")
    page.fill("#login-password", PASSWORD)
    page.click("#login-submit")
    page.wait_for_selector("#user-name")
    page.add_init_script(
        "new MutationObserver((_, obs) => { if (document.querySelector('#chart[data-wired]'))"
        " { window.__chartReady = performance.now(); obs.disconnect(); } })"
        ".observe(document, {subtree: true, childList: true, attributes: true});"
    )
    page.goto(f"{base}/a/{aid}", wait_until="load")
    page.wait_for_selector("#chart[data-wired]")  # not wait_for_function: the CSP forbids its eval
    paint = page.evaluate(
        "performance.getEntriesByType('paint').filter(e => e.name === 'first-contentful-paint')"
        ".map(e => e.startTime)[0] || null"
    )
    ready = page.evaluate("window.__chartReady")
    search_ms, hits = page.evaluate(SEARCH_JS, term)
    scroll_ms, worst, height = page.evaluate(SCROLL_JS)
    context.close()
    return {
        "first_paint_ms": paint,
        "chart_ready_ms": ready,
        "search_ms": search_ms,
        "hits": hits,
        "scroll_ms": scroll_ms,
        "worst_frame_ms": worst,
        "scroll_height_px": height,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog="See the module docstring.")
    parser.add_argument("--record", type=Path, help="a record file (default: omop2xml of --patient)")
    parser.add_argument("--patient", default="16", help="Synthea OMOP person id (default 16: 224,665 chars)")
    parser.add_argument("--term", default="lisinopril", help="the search term (default lisinopril)")
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)

    from playwright.sync_api import sync_playwright

    from clinieval.review.app import create_app
    from clinieval.review.reviewing import reviewer_queue
    from tests.browser import chromium_path, serve_asgi

    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        record = args.record.read_text(encoding="utf-8") if args.record else build_record(args.patient, work)
        engine = build_db(record, work / "bench.sqlite")
        from clinieval.review.db import User, read_session

        with read_session(engine) as s:
            uid = s.scalars(User.__table__.select().with_only_columns(User.id)).one()
        aid = reviewer_queue(engine, uid, "chart")[0].id
        runs = []
        with serve_asgi(create_app(engine)) as base, sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=str(chromium_path()))
            for _ in range(args.runs):
                runs.append(one_run(browser, base, aid, args.term))
            browser.close()
        engine.dispose()
    medians = {k: statistics.median(r[k] for r in runs) for k in runs[0]}
    print(f"record: {len(record):,} characters; {args.runs} runs; term {args.term!r}")
    for key, value in medians.items():
        print(f"  {key:18} median {value:10.1f}   runs: {', '.join(f'{r[key]:.1f}' for r in runs)}")
    out = REPO / "bench" / "out"
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"record_chart-{time.strftime('%Y%m%d-%H%M%S')}.json"
    meta = {"python": sys.version.split()[0], "machine": platform.machine(), "chars": len(record)}
    path.write_text(json.dumps({"meta": meta, "runs": runs, "medians": medians}, indent=1), encoding="utf-8")
    print(f"JSON: {path.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
