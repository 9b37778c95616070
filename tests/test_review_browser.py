"""`clinieval review` in a real browser: Debian's Chromium, driven by Playwright, against the real
app served by uvicorn on 127.0.0.1 over a real SQLite database built with ``clinieval.review.store``
(argon2 logins, four studies: rank, rate, question, sentence; every item given to both reviewers).

What must hold: a reviewer logs in (a wrong password is refused) and completes one item of each
kind with the page's own controls (drag, ▲/▼, radios, checkboxes, the copy button), and the
database holds exactly what was chosen; a draft survives closing the browser; two reviewers work
at once without touching each other's work; a save from a stale tab is refused with 409, the
stored values untouched and the typed ones still in the form; a POST without the CSRF token is
refused and changes nothing; a reviewer cannot open an admin page or another reviewer's item;
the record opens as a chart and its Raw tab pages and searches a long record; no page source names
a model; the export of two reviewers' rankings goes through ``clinieval analyze`` to numbers worked
out by hand.

Screenshots: with ``CLINIEVAL_SCREENSHOTS=1`` the tests save each screen (1280x900) to
``docs/review/*.png`` for docs/review-guide.md. The data and the assignment seed are fixed, so a
rerun shows the same content; without the variable nothing is written (``make test`` leaves the
tracked files alone).
"""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import random
import re
import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import pytest
from sqlalchemy import Engine, select

from clinieval.review import accounts, assigning, importing, reviewing, store
from clinieval.review.app import create_app
from clinieval.review.db import ACTIONS, Assignment, Audit, User, read_session
from clinieval.review.export import submitted_rows
from clinieval.review.items import AnswerIn, ReviewItem
from tests.conftest import missing

try:
    from playwright.sync_api import expect
except ImportError:  # the browser fixture says how to install it; CI must have it
    missing("playwright is not installed in the virtualenv (`make install`)", module=True)

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Dialog, Page, Route

pytest_plugins = ["tests.browser"]

REPO: Final = Path(__file__).resolve().parents[1]
SHOTS: Final = REPO / "docs" / "review"
VIEWPORT: Final = {"width": 1280, "height": 900}
SEED: Final = 7

PASSWORDS: Final = {"admin": "admin-pass-2026", "dr-lee": "lee-pass-2026", "dr-ng": "ng-pass-2026"}

# --- the studies ----------------------------------------------------------------------------------

LLAMA, GPT, MEDITRON = "llama-3.1-70b-instruct", "gpt-4o-2024-08-06", "meditron-70b"
BIOMISTRAL, CAMEL = "biomistral-7b-dare", "clinical-camel-70b"
SOURCES: Final = (LLAMA, GPT, MEDITRON, BIOMISTRAL, CAMEL)
"""Every answer's model: none of these may appear in any page the browser receives."""

RANK, RATE, QUESTION, SENTENCE = "medalign-pilot", "automedeval-pilot", "ehrnoteqa-build", "medeval-sentences"

RANK_ANSWERS: Final = {
    "q01": {
        LLAMA: "Apixaban 5 mg twice daily since March 2021 for paroxysmal atrial fibrillation"
        " (CHA2DS2-VASc 4); warfarin before that, stopped after labile INRs. No bleeding recorded.",
        GPT: "On apixaban for atrial fibrillation since 2021, previously on warfarin.",
        MEDITRON: "Rivaroxaban 20 mg daily for a deep vein thrombosis diagnosed in 2023.",
    },
    "q02": {
        LLAMA: "Amlodipine 10 mg daily and lisinopril 20 mg daily.",
        GPT: "Hydrochlorothiazide 25 mg daily only.",
        MEDITRON: "Amlodipine and lisinopril (doses as in the medication list).",
    },
    "q03": {
        LLAMA: "HbA1c 7.9 % on 2 May 2026.",
        GPT: "The last HbA1c was 7.9 % on 2 May 2026, up from 7.1 % in January.",
        MEDITRON: "HbA1c has not been measured this year.",
    },
}
RANK_PROMPTS: Final = {
    "q01": "Summarise the patient's anticoagulation history.",
    "q02": "Which antihypertensives is the patient taking now?",
    "q03": "When was the last HbA1c, and what was it?",
}
RATE_ANSWERS: Final = {
    BIOMISTRAL: "Hold the next warfarin dose, recheck the INR in 24-48 hours and restart at a lower dose once"
    " it is in range; vitamin K is not needed without bleeding.",
    CAMEL: "Give intravenous vitamin K 10 mg and fresh frozen plasma now.",
}
TEXT_MODEL: Final = {
    text: model for answers in (*RANK_ANSWERS.values(), RATE_ANSWERS) for model, text in answers.items()
}
QUESTION_FIELDS: Final = {
    "question": "Which anticoagulant was the patient taking at discharge?",
    "options": ["Warfarin", "Apixaban", "Rivaroxaban", "Enoxaparin"],
    "answer": "B",
}
SENTENCE_TEXT: Final = "There is a possible small left pleural effusion."
SEARCH_TERM: Final = "Apixaban"


def long_record() -> str:
    """A synthetic record of about 50,000 characters (three pages of the record pane): apixaban
    once near the start (page 1) and twice in the last lines (page 3), nowhere else."""
    rng = random.Random(SEED)
    lines = [
        "PROGRESS NOTES (synthetic record for the review app's tests)",
        "2021-03-02 Cardiology: paroxysmal atrial fibrillation, CHA2DS2-VASc 4. Warfarin stopped after"
        " labile INRs; apixaban 5 mg twice daily started.",
    ]
    templates = (
        "{d} Vitals: BP {a}/{b} mmHg, HR {c} bpm, SpO2 {e} % on room air.",
        "{d} Labs: haemoglobin 13.{a} g/dL, creatinine 0.{c} mg/dL, potassium 4.{b} mmol/L.",
        "{d} Nursing: mobilising independently, tolerating diet, no chest pain or palpitations.",
        "{d} Clinic: blood pressure reviewed; amlodipine 10 mg and lisinopril 20 mg daily continued.",
    )
    day = date(2021, 3, 3)
    while sum(len(line) + 1 for line in lines) < 49_000:
        template = templates[len(lines) % len(templates)]
        values = {
            "a": rng.randint(1, 9),
            "b": rng.randint(1, 9),
            "c": rng.randint(60, 99),
            "e": rng.randint(94, 99),
        }
        if "BP" in template:
            values.update(a=rng.randint(118, 152), b=rng.randint(68, 94))
        lines.append(template.format(d=day.isoformat(), **values))
        day += timedelta(days=3)
    lines += [
        "2026-04-18 Anticoagulation review: apixaban continued, no bleeding, renal function stable.",
        "2026-05-02 Discharge medications: apixaban 5 mg twice daily, amlodipine 10 mg, lisinopril 20 mg.",
    ]
    return "".join(line + "\n" for line in lines)


def study_items() -> dict[tuple[str, str], list[ReviewItem]]:
    """(study, kind) → items. Answer ids are neutral (a1, a2, ...); the models are in ``source``."""

    def answers(by_model: dict[str, str]) -> tuple[AnswerIn, ...]:
        return tuple(AnswerIn(f"a{i}", model, text) for i, (model, text) in enumerate(by_model.items(), 1))

    short = (
        "Medication list (2026-05-02): amlodipine 10 mg daily, lisinopril 20 mg daily, metformin 1 g bd.\n"
    )
    rank = [
        ReviewItem(
            item=key,
            prompt=RANK_PROMPTS[key],
            context=long_record()
            if key == "q01"
            else short + "HbA1c 7.1 % (2026-01-10), 7.9 % (2026-05-02).\n",
            answers=answers(RANK_ANSWERS[key]),
        )
        for key in RANK_ANSWERS
    ]
    rate = ReviewItem(
        item="t01",
        prompt="A 67-year-old on warfarin has an INR of 4.2 and no bleeding. What should be done?",
        context="Anticoagulation clinic note: INR 4.2, no bleeding, no recent dose change.\n",
        reference="Omit one or two doses, recheck the INR and restart at a reduced dose; consider oral"
        " vitamin K only if the bleeding risk is high.",
        answers=answers(RATE_ANSWERS),
    )
    question = ReviewItem(
        item="g01",
        prompt="Check this generated question against the discharge summary.",
        context="Discharge summary: atrial fibrillation, discharged on apixaban 5 mg twice daily.\n",
        fields=dict(QUESTION_FIELDS),
    )
    sentence = ReviewItem(item="s01", prompt=SENTENCE_TEXT, context="CHEST X-RAY, PA and lateral.\n")
    return {
        (RANK, "rank"): rank,
        (RATE, "rate"): [rate],
        (QUESTION, "question"): [question],
        (SENTENCE, "sentence"): [sentence],
    }


# --- what each reviewer decides on the rank items -------------------------------------------------

ORDERS: Final = {
    "dr-lee": {"q01": (LLAMA, GPT, MEDITRON), "q02": (LLAMA, MEDITRON, GPT), "q03": (GPT, LLAMA, MEDITRON)},
    "dr-ng": {"q01": (LLAMA, GPT, MEDITRON), "q02": (LLAMA, GPT, MEDITRON), "q03": (MEDITRON, LLAMA, GPT)},
}
"""Best first; the last answer of each is marked incorrect. Worked out by hand for the export test:
dr-lee (the primary rater: first by name) gives mean ranks llama 4/3, gpt 2, meditron 8/3; the
reviewers' per-item Kendall tau-b is 1 (q01), 1/3 (q02: one pair of three swapped), -1 (q03: every
pair swapped), mean 1/9; correct answers are always ranks 1-2 and incorrect rank 3, so the
point-biserial r between correctness and rank is -3/sqrt(2 * 6) = -sqrt(3)/2; on correct/incorrect
the reviewers agree on 5 of 9 answers, which is exactly chance for two raters marking 3 of 9
incorrect (5/9), so Cohen's kappa is 0."""


@dataclass(frozen=True)
class Verdict:
    rank: int
    correct: bool
    reasons: tuple[str, ...] = ()
    rationale: str = ""

    def stored(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "correct": self.correct,
            "reasons": list(self.reasons),
            "rationale": self.rationale,
        }


def verdicts(reviewer: str, item: str) -> dict[str, Verdict]:
    order = ORDERS[reviewer][item]
    reasons = ("C1", "C2") if (reviewer, item) == ("dr-lee", "q03") else ("C2",)
    out = {model: Verdict(i, True) for i, model in enumerate(order[:-1], 1)}
    out[order[-1]] = Verdict(len(order), False, reasons, f"{reviewer}: contradicts the record ({item}).")
    return out


# --- the database and the server ------------------------------------------------------------------


@pytest.fixture(scope="module")
def template_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One database built once (three argon2 hashes, four studies, every item to both reviewers);
    each test serves its own copy."""
    path = tmp_path_factory.mktemp("review") / "template.sqlite"
    engine = store.init_db(path)
    for name, password in PASSWORDS.items():
        accounts.add_user(engine, name, "admin" if name == "admin" else "reviewer", password)
    for (study, kind), items in study_items().items():
        importing.import_items(engine, study, kind, {}, items)
        assigning.assign(engine, study, per_item=2, seed=SEED)
    engine.dispose()  # the last close checkpoints the WAL into the file
    return path


@dataclass
class Site:
    """A running server over one test's database, and what the test reads back from that database."""

    base: str
    engine: Engine
    db: Path

    def url(self, path: str) -> str:
        return self.base + path

    def aid(self, user: str, study: str, item: str) -> int:
        with read_session(self.engine) as s:
            uid = s.scalars(select(User.id).where(User.name == user)).one()
        return next(e.id for e in reviewing.reviewer_queue(self.engine, uid, study) if e.item == item)

    def stored(self, aid: int) -> tuple[int, str, dict[str, Any] | None]:
        with read_session(self.engine) as s:
            row = s.get(Assignment, aid)
            assert row is not None
            return row.version, row.status, row.payload

    def audits(self) -> list[tuple[int, str, str, int, int]]:
        """(assignment, user, action, old version, new version) of every audit row of a save or a
        submission, oldest first (the trail also records sign-ins and administrative changes)."""
        with read_session(self.engine) as s:
            rows = s.execute(
                select(Audit.assignment_id, User.name, Audit.action, Audit.old_version, Audit.new_version)
                .join(User, User.id == Audit.user_id)
                .where(Audit.action.in_(ACTIONS))
                .order_by(Audit.id)
            ).all()
        return [tuple(r) for r in rows]  # type: ignore[misc]

    def exported(self, study: str, reviewer: str, item: str) -> dict[str, Any]:
        """The submitted payload with answers keyed by model (the export's mapping back)."""
        rows = [
            r for r in submitted_rows(self.engine, study) if (r["reviewer"], r["item"]) == (reviewer, item)
        ]
        assert len(rows) == 1, f"{reviewer} has no submitted review of {item}"
        payload: dict[str, Any] = rows[0]["payload"]
        return payload


@pytest.fixture
def site(template_db: Path, tmp_path: Path) -> Iterator[Site]:
    from tests.browser import serve_asgi

    db = tmp_path / "review.sqlite"
    shutil.copy(template_db, db)
    engine = store.connect(db)
    try:
        with serve_asgi(create_app(engine)) as base:
            yield Site(base, engine, db)
    finally:
        engine.dispose()


# --- browsers ---------------------------------------------------------------------------------------


class Browsing:
    """Contexts (separate browsers as far as cookies go) at 1280x900, offline like tests.browser's
    ``page``: a request off this machine or an uncaught script error fails the test at teardown."""

    def __init__(self, browser: Browser) -> None:
        self.browser = browser
        self.contexts: list[BrowserContext] = []
        self.blocked: list[str] = []
        self.script_errors: list[str] = []

    def _guard(self, route: Route) -> None:
        from tests.browser import is_local  # imported by pytest as a plugin first (assertion rewriting)

        if is_local(route.request.url):
            route.continue_()
        else:
            self.blocked.append(route.request.url)
            route.abort("internetdisconnected")

    def page(self) -> Page:
        """A new page in a new context."""
        context = self.browser.new_context(viewport=VIEWPORT)  # type: ignore[arg-type]
        context.set_default_timeout(10_000)
        context.route("**/*", self._guard)
        self.contexts.append(context)
        return self.tab(context)

    def tab(self, context: BrowserContext) -> Page:
        """Another page in ``context`` (a second tab: same session)."""
        opened = context.new_page()
        opened.on("pageerror", lambda error: self.script_errors.append(str(error)))
        return opened

    def close(self) -> None:
        for context in self.contexts:
            context.close()


@pytest.fixture
def browsing(browser: Browser) -> Iterator[Browsing]:
    session = Browsing(browser)
    try:
        yield session
    finally:
        session.close()
    assert not session.blocked, f"a page tried to reach the network: {session.blocked}"
    assert not session.script_errors, f"a script on a page threw: {session.script_errors}"


SEEN: list[tuple[str, str]] = []
"""(url, page.content()) of every page any test visited: none may name a model."""


def seen(page: Page) -> str:
    """The page's source, checked at once for model names and kept for the final blinding test."""
    html = page.content()
    folded = html.casefold()
    leaked = [s for s in SOURCES if s.casefold() in folded]
    assert not leaked, f"{page.url} names {leaked}"
    SEEN.append((page.url, html))
    return html


def goto(page: Page, site: Site, path: str, status: int = 200) -> str:
    response = page.goto(site.url(path))
    assert response is not None and response.status == status, (path, response and response.status)
    return seen(page)


def shot(page: Page, name: str) -> None:
    """Save the viewport as docs/review/NAME.png, only when CLINIEVAL_SCREENSHOTS=1."""
    if os.environ.get("CLINIEVAL_SCREENSHOTS") != "1":
        return
    SHOTS.mkdir(parents=True, exist_ok=True)
    page.locator("#site-header").scroll_into_view_if_needed()
    png = page.screenshot(animations="disabled", caret="hide")
    path = SHOTS / f"{name}.png"
    try:
        from PIL import Image
    except ImportError:  # Pillow comes with the ML extras; without it the file is just larger
        path.write_bytes(png)
        return
    # 256 colours, no dithering: the same picture to the eye at a third of the size, and the same
    # bytes on every run
    with Image.open(io.BytesIO(png)) as shown:
        small = shown.convert("RGB").quantize(256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE)
    small.save(path, optimize=True)


def login(page: Page, site: Site, name: str, *, screenshot: bool = False) -> None:
    goto(page, site, "/login")
    page.fill("#login-name", name)
    page.fill("#login-password", PASSWORDS[name])
    if screenshot:
        shot(page, "login")
    page.click("#login-submit")
    expect(page.locator("#user-name")).to_have_text(name)
    seen(page)


def save(page: Page, action: str, version: int) -> None:
    """Press Save draft or Submit and wait for the saved page's notice."""
    page.click("#save-button" if action == "save" else "#submit-button")
    notice = "Draft saved" if action == "save" else "Submitted"
    expect(page.locator("#flash")).to_contain_text(f"{notice} (version {version})")
    seen(page)


def letters(page: Page) -> dict[str, str]:
    """Model → the letter the page shows its answer under, read off the answer texts (the page
    itself names no model)."""
    out: dict[str, str] = {}
    cards = page.locator("#answers .answer")
    for i in range(cards.count()):
        letter = cards.nth(i).get_attribute("data-letter")
        assert letter is not None
        out[TEXT_MODEL[page.locator(f"#answer-text-{letter}").inner_text().strip()]] = letter
    return out


def shown_order(page: Page) -> list[str]:
    cards = page.locator("#answers .answer")
    return [str(cards.nth(i).get_attribute("data-letter")) for i in range(cards.count())]


def fill_rank(page: Page, chosen: dict[str, Verdict], *, by: str) -> None:
    """Rank the answers as ``chosen`` (by model) with the ▲/▼ buttons (``by="buttons"``) or by
    typing the numbers (``by="typing"``), then mark them."""
    letter = letters(page)
    if by == "buttons":
        wanted = [letter[m] for m in sorted(chosen, key=lambda m: chosen[m].rank)]
        for position, target in enumerate(wanted):
            while shown_order(page).index(target) > position:
                page.click(f"#move-up-{target}")
        assert shown_order(page) == wanted
        page.click(f"#move-up-{wanted[0]}")  # the top one stays put; the boxes renumber even if nothing moved
    for model, verdict in chosen.items():
        rank = page.locator(f"#rank-{letter[model]}")
        if by == "buttons":
            expect(rank).to_have_value(str(verdict.rank))  # the buttons renumbered the boxes
        else:
            rank.fill(str(verdict.rank))
    for model, verdict in chosen.items():
        L = letter[model]
        page.check(f"#correct-{L}-{'yes' if verdict.correct else 'no'}")
        for reason in verdict.reasons:
            page.check(f"#reason-{L}-{reason}")
        if verdict.rationale:
            page.fill(f"#rationale-{L}", verdict.rationale)


def rank_payload(chosen: dict[str, Verdict]) -> dict[str, Any]:
    return {"answers": {model: v.stored() for model, v in chosen.items()}}


# --- the tests ----------------------------------------------------------------------------------------


def test_login_refuses_a_wrong_password_then_lets_the_reviewer_in(site: Site, browsing: Browsing) -> None:
    page = browsing.page()
    goto(page, site, "/", status=200)  # not logged in: redirected to the form
    assert page.url == site.url("/login?next=/")
    page.fill("#login-name", "dr-lee")
    page.fill("#login-password", "not-the-password")
    page.click("#login-submit")
    expect(page.locator("#login-error")).to_have_text("Wrong user name or password.")
    expect(page.locator("#login-name")).to_have_value("dr-lee")
    seen(page)
    login(page, site, "dr-lee", screenshot=True)
    assert page.url == site.url("/")
    expect(page.locator("tr.queue-row")).to_have_count(6)  # 3 rank items + 1 of each other kind
    expect(page.locator("#nav-admin")).to_have_count(0)


def test_one_item_of_each_kind_completed_in_the_browser(site: Site, browsing: Browsing) -> None:
    page = browsing.page()
    login(page, site, "dr-lee")

    # rank: drag the last answer to the top (a tall window keeps both ends on screen), order the
    # rest with ▲, mark them; save a draft, then submit
    page.locator(".queue-study", has_text=RANK).locator("tr.queue-row", has_text="q01").locator("a").click()
    expect(page.locator("#item-key")).to_have_text("q01")
    seen(page)
    before = shown_order(page)
    page.set_viewport_size({"width": 1280, "height": 2400})
    page.locator(f"#answer-{before[-1]} .drag-handle").drag_to(page.locator(f"#answer-{before[0]}"))
    expect(page.locator(f"#rank-{before[-1]}")).to_have_value("1")
    expect(page.locator(f"#rank-{before[0]}")).to_have_value("2")
    assert shown_order(page) == [before[-1], *before[:-1]]
    page.click(f"#move-down-{before[-1]}")  # and ▼ moves it back down one place
    expect(page.locator(f"#rank-{before[-1]}")).to_have_value("2")
    assert shown_order(page) == [before[0], before[-1], *before[1:-1]]
    page.set_viewport_size(VIEWPORT)  # type: ignore[arg-type]
    chosen = verdicts("dr-lee", "q01")
    fill_rank(page, chosen, by="buttons")
    save(page, "save", 1)
    assert site.stored(site.aid("dr-lee", RANK, "q01"))[:2] == (1, "draft")
    save(page, "submit", 2)
    assert site.exported(RANK, "dr-lee", "q01") == rank_payload(chosen)
    expect(page.locator("#submit-button")).to_have_text("Submit changes")
    expect(page.locator("#save-button")).to_have_count(0)
    shot(page, "rank")

    # rate: every scale of every answer; leaving half-way asks first
    goto(page, site, f"/a/{site.aid('dr-lee', RATE, 't01')}")
    letter = letters(page)
    scores = {BIOMISTRAL: (5, 5, 5), CAMEL: (3, 4, 1)}
    page.check(f"#score-{letter[BIOMISTRAL]}-relevancy-5")
    dialogs: list[str] = []

    def stay(dialog: Dialog) -> None:
        dialogs.append(dialog.type)
        dialog.dismiss()

    page.once("dialog", stay)
    page.click("text=Back to my queue")
    expect(page.locator("#item-key")).to_have_text("t01")  # still on the item
    assert dialogs == ["beforeunload"]
    expect(page.locator(f"#score-{letter[BIOMISTRAL]}-relevancy-5")).to_be_checked()
    for model, values in scores.items():
        for scale, value in zip(("relevancy", "fluency", "correctness"), values, strict=True):
            page.check(f"#score-{letter[model]}-{scale}-{value}")
    page.click("#reference summary")
    expect(page.locator("#reference .text")).to_be_visible()
    save(page, "submit", 1)
    assert site.exported(RATE, "dr-lee", "t01") == {
        "answers": {
            m: dict(zip(("relevancy", "fluency", "correctness"), v, strict=True)) for m, v in scores.items()
        }
    }
    shot(page, "rate")

    # question: revise the question's wording; the generated text is shown under the changed field
    goto(page, site, f"/a/{site.aid('dr-lee', QUESTION, 'g01')}")
    expect(page.locator("#field-options-3")).to_have_value("Enoxaparin")
    page.check("#decision-revise")
    page.fill("#field-question", "Which oral anticoagulant was the patient taking at discharge?")
    page.fill("#comment", "Say 'oral': enoxaparin is an anticoagulant too.")
    save(page, "submit", 1)
    expect(page.locator('.field[data-field="field-question"] .original')).to_have_text(
        f"Generated: {QUESTION_FIELDS['question']}"
    )
    expect(page.locator(".original")).to_have_count(1)
    assert site.exported(QUESTION, "dr-lee", "g01") == {
        "decision": "revise",
        "fields": {
            **QUESTION_FIELDS,
            "question": "Which oral anticoagulant was the patient taking at discharge?",
        },
        "comment": "Say 'oral': enoxaparin is an anticoagulant too.",
    }
    shot(page, "question")

    # sentence: both labels, and a rewrite started from the sentence with the copy button
    goto(page, site, f"/a/{site.aid('dr-lee', SENTENCE, 's01')}")
    page.check("#label-abnormality-2")
    page.check("#label-ambiguity-2")
    page.click("#copy-sentence")
    expect(page.locator("#rewrite")).to_have_value(SENTENCE_TEXT)
    page.fill("#rewrite", "There is a small left pleural effusion.")
    save(page, "submit", 1)
    assert site.exported(SENTENCE, "dr-lee", "s01") == {
        "labels": {"abnormality": "abnormal", "ambiguity": "ambiguous"},
        "rewrite": "There is a small left pleural effusion.",
    }
    shot(page, "sentence")

    # the queue shows the work done
    page.click("#nav-queue")
    expect(page.locator("tr.queue-row")).to_have_count(6)
    seen(page)
    statuses = {
        str(row.locator("td").first.inner_text()): row.get_attribute("data-status")
        for row in page.locator("tr.queue-row").all()
    }
    assert statuses == {"q01": "submitted", "q02": "pending", "q03": "pending", "t01": "submitted",
                        "g01": "submitted", "s01": "submitted"}  # fmt: skip
    expect(page.locator(".queue-study", has_text=RANK).locator(".study-progress")).to_contain_text(
        "1 of 3 submitted"
    )
    shot(page, "queue")
    assert [a[1:] for a in site.audits()] == [("dr-lee", "save", 0, 1)] + [
        ("dr-lee", "submit", v, v + 1) for v in (1, 0, 0, 0)
    ]


def test_a_draft_survives_closing_the_browser(site: Site, browsing: Browsing) -> None:
    first = browsing.page()
    login(first, site, "dr-ng")
    aid = site.aid("dr-ng", RANK, "q02")
    goto(first, site, f"/a/{aid}")
    letter = letters(first)[GPT]
    first.fill(f"#rank-{letter}", "3")
    first.check(f"#correct-{letter}-no")
    first.check(f"#reason-{letter}-C3")
    first.fill(f"#rationale-{letter}", "Names a drug the patient\nis not taking.")
    save(first, "save", 1)
    first.context.close()

    again = browsing.page()
    goto(again, site, "/")  # a new browser: no session, so the login form
    assert again.url.startswith(site.url("/login"))
    login(again, site, "dr-ng")
    row = again.locator(f'tr.queue-row[data-assignment="{aid}"]')
    expect(row).to_have_attribute("data-status", "draft")
    row.locator("a", has_text="Continue").click()
    expect(again.locator("#item-status")).to_have_text("Draft saved")
    seen(again)
    expect(again.locator(f"#rank-{letter}")).to_have_value("3")
    expect(again.locator(f"#correct-{letter}-no")).to_be_checked()
    expect(again.locator(f"#reason-{letter}-C3")).to_be_checked()
    expect(again.locator(f"#reason-{letter}-C1")).not_to_be_checked()
    expect(again.locator(f"#rationale-{letter}")).to_have_value("Names a drug the patient\nis not taking.")
    for other in (shown for shown in shown_order(again) if shown != letter):
        expect(again.locator(f"#rank-{other}")).to_have_value("")
    expect(again.locator("#form-version")).to_have_value("1")


def test_two_reviewers_at_once(site: Site, browsing: Browsing) -> None:
    pages = {name: browsing.page() for name in ("dr-lee", "dr-ng")}
    for name, page in pages.items():
        login(page, site, name)
    ids = {name: site.aid(name, RANK, "q03") for name in pages}
    assert ids["dr-lee"] != ids["dr-ng"]  # the same item, each reviewer's own assignment
    for name, page in pages.items():
        goto(page, site, f"/a/{ids[name]}")
    for name, page in pages.items():  # interleaved: lee types, ng types
        fill_rank(page, verdicts(name, "q03"), by="typing")

    # Both saves reach the server together: each page's POST is held until the other's is sent,
    # then both are let go. The buttons get a DOM click (Playwright's own click would wait for
    # the held answer).
    held: list[Route] = []

    def together(route: Route) -> None:
        if route.request.method != "POST":
            route.fallback()
            return
        held.append(route)
        if len(held) == len(pages):
            for waiting in held:
                waiting.fallback()  # on to the offline guard, then the server

    for page in pages.values():
        page.route("**/a/*", together)
    for page in pages.values():
        page.dispatch_event("#submit-button", "click")
    for name, page in pages.items():
        expect(page.locator("#flash")).to_contain_text("Submitted (version 1)")
        expect(page.locator("#user-name")).to_have_text(name)
        seen(page)
        assert site.exported(RANK, name, "q03") == rank_payload(verdicts(name, "q03"))
    assert len(held) == 2
    assert sorted(site.audits()) == sorted((ids[n], n, "submit", 0, 1) for n in pages)


def test_a_stale_save_is_refused_and_loses_nothing(site: Site, browsing: Browsing) -> None:
    one = browsing.page()
    login(one, site, "dr-lee")
    two = browsing.tab(one.context)  # a second tab of the same browser: same session
    aid = site.aid("dr-lee", RANK, "q02")
    goto(one, site, f"/a/{aid}")
    goto(two, site, f"/a/{aid}")
    L = letters(one)

    mine = {LLAMA: Verdict(1, True), MEDITRON: Verdict(2, True), GPT: Verdict(3, False, ("C2",), "first tab")}
    one.bring_to_front()  # a background tab gets no animation frames: actions on it crawl
    fill_rank(one, mine, by="typing")
    save(one, "save", 1)
    stored = site.stored(aid)

    theirs = {
        GPT: Verdict(1, True),
        LLAMA: Verdict(2, True),
        MEDITRON: Verdict(3, False, ("C3",), "second tab"),
    }
    two.bring_to_front()
    fill_rank(two, theirs, by="typing")
    with two.expect_response(lambda r: r.request.method == "POST") as posted:
        two.click("#save-button")
    assert posted.value.status == 409
    expect(two.locator("#stale-notice")).to_contain_text("someone saved this item since you opened it")
    expect(two.locator("#stale-notice")).to_contain_text("version 1")
    expect(two.locator("#stale-saved")).to_contain_text("rationale: first tab")
    seen(two)
    assert site.stored(aid) == stored and len(site.audits()) == 1  # the first tab's save stands
    for model, verdict in theirs.items():  # the second tab's values are still in its form
        expect(two.locator(f"#rank-{L[model]}")).to_have_value(str(verdict.rank))
    expect(two.locator(f"#correct-{L[MEDITRON]}-no")).to_be_checked()
    expect(two.locator(f"#reason-{L[MEDITRON]}-C3")).to_be_checked()
    expect(two.locator(f"#rationale-{L[MEDITRON]}")).to_have_value("second tab")
    expect(two.locator("#form-version")).to_have_value("1")
    shot(two, "stale")

    save(two, "save", 2)  # saving again from the notice is a deliberate overwrite
    assert site.stored(aid)[2] == {
        "answers": {
            key: {
                "rank": theirs[model].rank,
                "correct": theirs[model].correct,
                "reasons": list(theirs[model].reasons),
                "rationale": theirs[model].rationale,
            }
            for key, model in zip(("a1", "a2", "a3"), RANK_ANSWERS["q02"], strict=True)
        }
    }
    assert [a[2:] for a in site.audits()] == [("save", 0, 1), ("save", 1, 2)]


def test_a_post_without_the_csrf_token_is_refused(site: Site, browsing: Browsing) -> None:
    page = browsing.page()
    login(page, site, "dr-lee")
    aid = site.aid("dr-lee", RANK, "q01")
    goto(page, site, f"/a/{aid}")
    token = page.locator("#review-form input[name=csrf_token]").input_value()
    form = {"version": "0", "action": "save", "rank-A": "1", "rationale-A": "forged"}
    before = site.stored(aid)
    for extra in (
        {},
        {"csrf_token": "forged-token"},
        {"csrf_token": token[:-1] + ("x" if token[-1] != "x" else "y")},
    ):
        refused = page.request.post(site.url(f"/a/{aid}"), form={**form, **extra}, max_redirects=0)
        assert refused.status == 403
        assert "security token is missing or does not match" in refused.text()
    logout = page.request.post(site.url("/logout"), form={}, max_redirects=0)
    assert logout.status == 403
    assert site.stored(aid) == before == (0, "pending", None)
    assert site.audits() == []
    goto(page, site, "/")
    expect(page.locator("#user-name")).to_have_text("dr-lee")  # not logged out either
    # the same request with the page's token goes through: the token was all that was missing
    accepted = page.request.post(site.url(f"/a/{aid}"), form={**form, "csrf_token": token}, max_redirects=0)
    assert accepted.status == 303
    assert site.stored(aid)[:2] == (1, "draft")


def test_a_reviewer_cannot_open_admin_pages_or_another_reviewers_item(site: Site, browsing: Browsing) -> None:
    page = browsing.page()
    login(page, site, "dr-lee")
    expect(page.locator("#nav-admin")).to_have_count(0)
    for path in ("/admin", f"/admin/studies/{RANK}"):
        html = goto(page, site, path, status=403)
        expect(page.locator("#error-message")).to_have_text(
            "Forbidden: this page is for study administrators."
        )
        assert "study-row" not in html and "reviewer-row" not in html
    theirs = site.aid("dr-ng", RANK, "q01")
    before = site.stored(theirs)
    bodies: dict[int, list[str]] = {}
    for aid in (theirs, 99_999):  # someone else's item looks exactly like no item at all
        bodies[aid] = []
        for path in (f"/a/{aid}", f"/a/{aid}/context?page=2", f"/a/{aid}/search?q={SEARCH_TERM}"):
            bodies[aid].append(goto(page, site, path, status=404))
            expect(page.locator("#error-message")).to_have_text("Not found.")
    assert bodies[theirs] == bodies[99_999]
    goto(page, site, f"/a/{site.aid('dr-lee', RANK, 'q01')}")
    token = page.locator("#review-form input[name=csrf_token]").input_value()
    post = page.request.post(
        site.url(f"/a/{theirs}"),
        form={"csrf_token": token, "version": "0", "action": "save"},
        max_redirects=0,
    )
    assert post.status == 404
    assert site.stored(theirs) == before and site.audits() == []


def test_the_record_pane_pages_and_searches_a_long_record(site: Site, browsing: Browsing) -> None:
    page = browsing.page()
    login(page, site, "dr-ng")
    aid = site.aid("dr-ng", RANK, "q01")
    goto(page, site, f"/a/{aid}")
    expect(page.locator("#record-chart-panel")).to_be_visible()  # the chart opens first
    expect(page.locator("#record-raw-panel")).to_be_hidden()
    page.click("#record-tab-raw")  # the paged raw text, one click away
    expect(page.locator("#record-page-number")).to_have_text("1")
    expect(page.locator("#record-page-count")).to_have_text("3")
    expect(page.locator("#record-prev")).to_have_attribute("aria-disabled", "true")
    page.click("#record-next")
    expect(page.locator("#record-page-number")).to_have_text("2")
    expect(page.locator("#record-text")).not_to_contain_text("apixaban")

    page.fill("#record-search", SEARCH_TERM)
    page.press("#record-search", "Enter")
    expect(page.locator("#search-summary")).to_have_text("3 matches on 2 pages.")
    hits = page.locator("li.search-hit")
    expect(hits).to_have_count(2)
    assert [h.get_attribute("data-page") for h in hits.all()] == ["1", "3"]
    expect(page.locator("li.search-hit .count")).to_have_text(["(1)", "(2)"])
    expect(page.locator("#record-page-number")).to_have_text("1")  # the first page with a match
    expect(page.locator("#record-text mark.current")).to_have_text("apixaban")
    expect(page.locator("li.search-hit").first).to_have_class("search-hit current")
    for shown in (page.locator("#search-summary"), *page.locator("a.search-link").all()):
        expect(shown).to_be_in_viewport(ratio=1)  # on screen, not squeezed away by the long record
    seen(page)
    shot(page, "record-search")
    page.locator("a.search-link", has_text="Page 3").click()
    expect(page.locator("#record-page-number")).to_have_text("3")
    expect(page.locator("#record-text mark")).to_have_count(2)
    expect(page.locator("#record-next")).to_have_attribute("aria-disabled", "true")
    page.fill("#record-goto", "2")
    page.press("#record-goto", "Enter")
    expect(page.locator("#record-page-number")).to_have_text("2")
    page.fill("#record-search", "okapi")
    page.press("#record-search", "Enter")
    expect(page.locator("#search-none")).to_contain_text("No page of the record contains")
    seen(page)


def test_export_of_two_reviewers_goes_through_analyze(site: Site, browsing: Browsing, tmp_path: Path) -> None:
    from tests.conftest import run_cli

    for name, how in (("dr-lee", "buttons"), ("dr-ng", "typing")):
        page = browsing.page()
        login(page, site, name)
        for item in ("q01", "q02", "q03"):
            goto(page, site, f"/a/{site.aid(name, RANK, item)}")
            fill_rank(page, verdicts(name, item), by=how)
            save(page, "submit", 1)

    admin = browsing.page()
    login(admin, site, "admin")
    assert admin.url == site.url("/admin")
    row = admin.locator(f'tr.study-row[data-study="{RANK}"]')
    expect(row.locator("td.submitted")).to_have_text("6")
    expect(row.locator("td.complete")).to_have_text("3")
    expect(admin.locator("tr.user-row")).to_have_count(3)
    shot(admin, "admin")
    row.locator("a.study-link").click()
    expect(admin.locator("#study")).to_have_attribute("data-study", RANK)
    html = seen(admin)
    for name in ("dr-lee", "dr-ng"):
        expect(admin.locator(f'tr.reviewer-row[data-reviewer="{name}"] td.submitted')).to_have_text("3")

    def stat(measure: str, name: str, cell: str = "value") -> str:
        table = admin.locator(f'table.agreement-table[data-measure="{measure}"]')
        return str(table.locator(f'tr.agreement-row[data-stat="{name}"] td.{cell}').inner_text())

    # by hand (see ORDERS): tau 1/9; kappa 0; alpha 1 - 17 * 8 / (2 * 12 * 6) = 1/18 on correctness
    assert [stat("rank", "tau", cell) for cell in ("value", "units", "raters")] == ["0.11", "3", "2"]
    assert (stat("correct", "kappa"), stat("correct", "kappa", "band")) == ("0.00", "slight")
    assert (stat("correct", "alpha"), stat("correct", "alpha", "band")) == ("0.06", "unreliable")
    assert stat("correct", "alpha", "units") == "9"
    expect(admin.locator("table.agreement-table caption")).to_have_text(["Ranking", "Correct or incorrect"])
    expect(admin.locator("#agreement-legend")).to_contain_text("Landis & Koch (1977)")
    assert "contradicts the record" not in html  # counts and agreement, never a reviewer's answers
    shot(admin, "admin-study")
    # the items where the reviewers' rankings differ most: q03 (ranks 1 and 3 swapped), then q02
    admin.locator('a.disagreements-link[href$="on=rank"]').click()
    expect(admin.locator("#disagreements")).to_have_attribute("data-on", "rank")
    seen(admin)
    items = admin.locator("section.disagreement")
    expect(items).to_have_count(2)
    assert [(i.get_attribute("data-item"), i.get_attribute("data-gap")) for i in items.all()] == [
        ("q03", "2"), ("q02", "1")
    ]  # fmt: skip
    expect(items.first.locator("thead th")).to_have_text(["Answer", "dr-lee", "dr-ng"])
    answer_rows = items.first.locator("tbody tr")
    expect(answer_rows).to_have_count(3)
    by_text = {
        str(r.locator("th").inner_text()).strip("“”…"): [str(c) for c in r.locator("td").all_inner_texts()]
        for r in answer_rows.all()
    }
    lee, ng = ORDERS["dr-lee"]["q03"], ORDERS["dr-ng"]["q03"]
    for model, text in RANK_ANSWERS["q03"].items():
        ranks = [cell.split("\n")[0] for cell in by_text[text]]
        assert ranks == [str(lee.index(model) + 1), str(ng.index(model) + 1)], by_text
    # each reviewer's written rationale sits under their rank (issue 37: admins adjudicate with it)
    rationales = items.first.locator("p.rationale").all_inner_texts()
    assert any("contradicts the record (q03)" in r for r in rationales), rationales

    out = tmp_path / "export"
    done = run_cli("review", "export", "--study", RANK, str(out), "--db", str(site.db), timeout=120)
    assert done.returncode == 0, done.stderr
    with (out / "ranks.csv").open(encoding="utf-8", newline="") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 18  # 3 items x 2 reviewers x 3 models
    expected_rows = {
        (item, name, model): v
        for name in ORDERS
        for item in RANK_ANSWERS
        for model, v in verdicts(name, item).items()
    }
    assert {(r["item"], r["reviewer"], r["model"]) for r in rows} == set(expected_rows)
    for r in rows:
        v = expected_rows[(r["item"], r["reviewer"], r["model"])]
        assert (int(r["rank"]), r["correct"], r["reasons"], r["rationale"]) == (
            v.rank, "true" if v.correct else "false", ";".join(v.reasons), v.rationale
        )  # fmt: skip

    analysis = tmp_path / "analysis"
    args = ("--human-rank", "rank", "--correct", "correct", "--rater", "reviewer", "--out", str(analysis))
    done = run_cli("analyze", str(out / "ranks.csv"), *args, timeout=180)
    assert done.returncode == 0, done.stderr
    result = json.loads((analysis / "analysis.json").read_text(encoding="utf-8"))
    human = result["human"]
    assert result["rows"] == 18 and result["items"] == 3
    assert human["mean_rank"] == pytest.approx({LLAMA: 4 / 3, GPT: 2.0, MEDITRON: 8 / 3})
    assert human["point_biserial_correct_vs_rank"]["r"] == pytest.approx(-(3**0.5) / 2)
    assert human["point_biserial_correct_vs_rank"]["n"] == 9
    raters = human["raters"]
    assert raters["raters"] == 2
    assert raters["inter_rater_kendall"]["mean_tau_b"] == pytest.approx(1 / 9)
    assert (raters["inter_rater_kendall"]["items"], raters["inter_rater_kendall"]["pairs"]) == (3, 3)


def test_model_names_absent_from_every_page(site: Site, browsing: Browsing) -> None:
    """Every page this test visits, and every page the tests above visited (collected in SEEN),
    holds no answer's model; each was also checked as it was captured."""
    first = len(SEEN)
    page = browsing.page()
    login(page, site, "dr-ng")
    for study, item in ((RANK, "q01"), (RATE, "t01"), (QUESTION, "g01"), (SENTENCE, "s01")):
        aid = site.aid("dr-ng", study, item)
        goto(page, site, f"/a/{aid}")
        goto(page, site, f"/a/{aid}/context?page=3")
        goto(page, site, f"/a/{aid}/search?q={SEARCH_TERM}")
        goto(page, site, f"/a/{aid}/search?q=answer")
    admin = browsing.page()
    login(admin, site, "admin")
    for study in (RANK, RATE, QUESTION, SENTENCE):
        goto(admin, site, f"/admin/studies/{study}")
    goto(admin, site, "/admin/studies/no-such-study", status=404)
    mine = SEEN[first:]
    assert len(mine) == 2 + 16 + 2 + 4 + 1
    sources = [html for _, html in SEEN]
    for answer in (*RANK_ANSWERS["q01"].values(), *RATE_ANSWERS.values()):  # the answers are there...
        assert any(answer in html for html in sources), answer
    for url, html in SEEN:  # ...their models are not
        assert not [s for s in SOURCES if s.casefold() in html.casefold()], url


# --- sessions and sign-in throttling (issue 26) ---------------------------------------------------------


def test_a_copied_cookie_stops_working_when_its_session_logs_out(site: Site, browsing: Browsing) -> None:
    first = browsing.page()
    login(first, site, "dr-lee")
    cookies = first.context.cookies()
    assert [(c.get("name"), c.get("httpOnly"), c.get("sameSite")) for c in cookies] == [
        ("clinieval_review", True, "Strict")
    ]

    second = browsing.page()  # another browser, given a copy of the cookie
    second.context.add_cookies(cookies)  # type: ignore[arg-type]
    goto(second, site, "/")
    expect(second.locator("#user-name")).to_have_text("dr-lee")
    aid = site.aid("dr-lee", RANK, "q01")
    goto(second, site, f"/a/{aid}")
    token = second.locator("#review-form input[name=csrf_token]").input_value()

    first.click("#logout-button")
    expect(first.locator("#login-form")).to_be_visible()
    assert first.url == site.url("/login")

    goto(second, site, "/")  # the copy no longer works: back to the login form
    assert second.url == site.url("/login?next=/")
    expect(second.locator("#login-form")).to_be_visible()
    expect(second.locator("#user-name")).to_have_count(0)
    form: dict[str, str | float | bool] = {"csrf_token": token, "version": "0", "action": "save"}
    refused = second.request.post(site.url(f"/a/{aid}"), form=form, max_redirects=0)
    assert refused.status == 401
    assert site.stored(aid) == (0, "pending", None) and site.audits() == []


def test_repeated_failed_sign_ins_are_refused_with_a_message(site: Site, browsing: Browsing) -> None:
    page = browsing.page()
    goto(page, site, "/login")
    for _ in range(5):
        page.fill("#login-name", "dr-ng")
        page.fill("#login-password", "not-the-password")
        page.click("#login-submit")
        expect(page.locator("#login-error")).to_have_text("Wrong user name or password.")
    page.fill("#login-name", "dr-ng")
    page.fill("#login-password", PASSWORDS["dr-ng"])  # the right password, too late
    with page.expect_response(lambda r: r.url == site.url("/login") and r.request.method == "POST") as answer:
        page.click("#login-submit")
    assert answer.value.status == 429
    expect(page.locator("#login-error")).to_have_text("Too many failed sign-ins; try again in 15 minutes.")
    expect(page.locator("#user-name")).to_have_count(0)
    expect(page.locator("#login-name")).to_have_value("dr-ng")
    seen(page)

    other = browsing.page()  # another reviewer, from the same address, is not locked out
    login(other, site, "dr-lee")


# --- the queue, the agreement panel, the save bar, records from runs (issue 26, use) --------------------

LONG_PROMPT: Final = (
    "A 71-year-old with atrial fibrillation <img src=x onerror=alert(1)> on apixaban is scheduled for"
    " a colonoscopy with polypectomy next week: when should the last dose be taken, and when restarted?"
)


def test_the_queue_shows_a_preview_progress_and_where_to_start(site: Site, browsing: Browsing) -> None:
    importing.import_items(site.engine, "bridging", "rate", {}, [
        ReviewItem(item="b01", prompt=LONG_PROMPT, answers=(AnswerIn("a1", LLAMA, "Stop 48 hours before."),)),
    ])  # fmt: skip
    assigning.assign(site.engine, "bridging", per_item=1, seed=SEED, reviewers=["dr-lee"])
    page = browsing.page()
    login(page, site, "dr-lee")
    expect(page.locator("#queue-progress")).to_contain_text("0 of 7 submitted")
    studies = page.locator("section.queue-study")
    expect(studies).to_have_count(5)
    labels = {str(s.get_attribute("data-study")): s.locator("h2 .kind").inner_text() for s in studies.all()}
    assert labels == {RATE: "Rate answers", "bridging": "Rate answers", RANK: "Rank answers",
                      QUESTION: "Review a generated question", SENTENCE: "Label sentence"}  # fmt: skip
    rank = page.locator(f'section.queue-study[data-study="{RANK}"]')
    # each question previewed, in the data's order; the question study shows the question itself
    expect(rank.locator("td.queue-preview")).to_have_text([RANK_PROMPTS[k] for k in ("q01", "q02", "q03")])
    expect(page.locator(f'section.queue-study[data-study="{QUESTION}"] td.queue-preview')).to_have_text(
        QUESTION_FIELDS["question"]
    )
    long = page.locator('section.queue-study[data-study="bridging"] td.queue-preview')
    shown = long.inner_text()
    assert shown.endswith("…") and len(shown) <= 121 and LONG_PROMPT.startswith(shown[:-1])
    assert "<img src=x" in shown  # the prompt's markup is shown as text...
    expect(page.locator("#queue img")).to_have_count(0)  # ...and never made into an element
    expect(page.locator("#queue")).not_to_contain_text("Version")
    # where to start: each study's first item, highlighted, and a Start button to it
    expect(page.locator("tr.queue-row.next-up")).to_have_count(5)
    expect(rank.locator("tr.next-up td.queue-item")).to_have_text("q01")
    start = rank.locator("a.start-button")
    expect(start).to_have_text("Start")
    start.click()
    expect(page.locator("#item-key")).to_have_text("q01")
    seen(page)
    fill_rank(page, verdicts("dr-lee", "q01"), by="typing")
    save(page, "submit", 1)
    page.click("#nav-queue")
    seen(page)
    expect(page.locator("#queue-progress")).to_contain_text("1 of 7 submitted")
    expect(rank.locator(".study-progress")).to_contain_text("1 of 3 submitted")
    expect(rank.locator("tr.next-up td.queue-item")).to_have_text("q02")  # the next one now
    expect(rank.locator("a.start-button")).to_have_text("Continue")
    rank.locator("a.start-button").click()
    expect(page.locator("#item-key")).to_have_text("q02")
    seen(page)


def test_the_admin_reads_agreement_one_table_per_scale(site: Site, browsing: Browsing) -> None:
    """Two reviewers' 1-5 ratings of 6 items (tests.test_review_use's): a table per scale with the
    ICC and alpha, their CIs and bands; a scale without variation says so in words; the link under
    a table lists the items where the reviewers differ most, ratings side by side."""
    from tests.test_review_use import rated_study

    rated_study(site.engine, ("dr-lee", "dr-ng"), (BIOMISTRAL, CAMEL))
    admin = browsing.page()
    login(admin, site, "admin")
    goto(admin, site, "/admin/studies/rated")
    tables = admin.locator("table.agreement-table")
    expect(tables.locator("caption")).to_have_text(["Relevancy", "Fluency", "Knowledge correctness"])
    relevancy = admin.locator('table.agreement-table[data-measure="relevancy"]')
    expect(relevancy.locator("tbody tr")).to_have_count(3)
    expect(relevancy.locator('tr[data-stat="icc_single"] th')).to_contain_text("ICC(A,1)")
    expect(relevancy.locator('tr[data-stat="icc_single"] td.band')).to_have_text("good")
    alpha = relevancy.locator('tr[data-stat="alpha"]')
    expect(alpha.locator("td.ci")).to_have_text(re.compile(r"^0\.\d\d to [01]\.\d\d$"))
    expect(alpha.locator("td.units")).to_have_text("12")
    fluency = admin.locator('table.agreement-table[data-measure="fluency"]')
    expect(fluency.locator("td.why")).to_have_count(3)
    expect(fluency.locator('tr[data-stat="alpha"] td.why')).to_contain_text("every rating is the same (5)")
    expect(fluency.locator('tr[data-stat="alpha"] td.why')).to_be_visible()
    expect(admin.locator("#agreement-legend")).to_contain_text("Koo & Li (2016)")
    expect(admin.locator("#agreement")).not_to_contain_text("undefined")
    shot(admin, "admin-agreement")

    admin.locator("a.disagreements-link", has_text="Knowledge correctness").click()
    expect(admin.locator("#disagreements")).to_have_attribute("data-on", "correctness")
    seen(admin)
    items = admin.locator("section.disagreement")
    expect(items).to_have_count(2)
    assert [i.get_attribute("data-item") for i in items.all()] == ["t06", "t03"]
    worst = items.first
    expect(worst.locator("thead th")).to_have_text(["Answer", "dr-lee", "dr-ng"])
    expect(worst.locator("tbody tr").first.locator("td")).to_have_text(["5", "1"])
    expect(worst.locator("tbody tr").first.locator("th")).to_contain_text("Hold the next warfarin dose")
    shot(admin, "disagreements")


HEADER_BOXES: Final = """(table) => [...table.querySelectorAll("thead th")].map((th) => {
    const range = document.createRange();
    range.selectNodeContents(th);
    const text = range.getBoundingClientRect();
    const cell = th.getBoundingClientRect();
    return {text: th.textContent, left: text.left, right: text.right, cellRight: cell.right};
})"""
"""Each header cell's text box (the box around its laid-out text) and its cell's box, in pixels."""


def test_agreement_headers_fit_their_columns_at_800_px(site: Site, browsing: Browsing) -> None:
    """At 800 px wide no header's text runs out of its cell into the next ("Reviewers" used to
    overflow into "Reading"): each text box ends inside its own cell and before its neighbour's
    text begins; what does not fit scrolls inside the table's own container, not the page."""
    from tests.test_review_use import rated_study

    rated_study(site.engine, ("dr-lee", "dr-ng"), (BIOMISTRAL, CAMEL))
    admin = browsing.page()
    admin.set_viewport_size({"width": 800, "height": 900})
    login(admin, site, "admin")
    goto(admin, site, "/admin/studies/rated")
    tables = admin.locator("table.agreement-table")
    expect(tables).to_have_count(3)
    for table in tables.all():
        boxes = table.evaluate(HEADER_BOXES)
        names = [b["text"] for b in boxes]
        assert names == ["Statistic", "Value", "95 % CI", "Units", "Reviewers", "Reading"]
        for box, after in itertools.pairwise(boxes):
            assert box["right"] <= box["cellRight"] + 0.5, f"{box['text']!r} overflows its cell: {box}"
            assert box["right"] <= after["left"], f"{box['text']!r} runs into {after['text']!r}"
        assert boxes[-1]["right"] <= boxes[-1]["cellRight"] + 0.5
    page_width = admin.evaluate("document.documentElement.scrollWidth")
    assert page_width <= 800, f"the page scrolls sideways ({page_width} px)"


def test_the_save_bar_never_covers_the_form(site: Site, browsing: Browsing) -> None:
    """The Save/Submit bar stays at the bottom of the window while the form scrolls under it: a
    field reached with the keyboard, and the last answer's text box at the end of the page, sit
    whole above it."""
    page = browsing.page()
    login(page, site, "dr-lee")

    def above_the_bar(selector: str) -> None:
        box = page.locator(selector).bounding_box()
        bar = page.locator("#review-form .actions").bounding_box()
        assert box is not None and bar is not None
        assert box["y"] >= 0 and box["y"] + box["height"] <= bar["y"], (selector, box, bar)

    # rate: the last answer's scores end in the first screen, where the bar is
    goto(page, site, f"/a/{site.aid('dr-lee', RATE, 't01')}")
    last = shown_order(page)[-1]
    for value in (1, 5):
        page.focus(f"#score-{last}-correctness-{value}")  # as Tab reaches it
        above_the_bar(f"#scale-{last}-correctness")
    # rank: each rationale reached in turn, then the end of the page
    goto(page, site, f"/a/{site.aid('dr-lee', RANK, 'q01')}")
    order = shown_order(page)
    for letter in order:
        page.focus(f"#rationale-{letter}")
        above_the_bar(f"#rationale-{letter}")
    page.evaluate("window.scrollTo(0, document.documentElement.scrollHeight)")
    above_the_bar(f"#rationale-{order[-1]}")
    page.locator(f"#rationale-{order[-1]}").scroll_into_view_if_needed()
    above_the_bar(f"#rationale-{order[-1]}")


def test_an_item_built_from_runs_shows_its_record(site: Site, browsing: Browsing, tmp_path: Path) -> None:
    """The README's path: two runs -> `automedeval convert` -> `review import`; the reviewer reads
    the record the models were asked about beside the question."""
    from tests.conftest import run_cli
    from tests.test_review_use import QUESTIONS, RECORDS, make_runs

    runs = make_runs(tmp_path)
    judge_set = tmp_path / "set.jsonl"
    for args in (
        ("automedeval", "convert", *map(str, runs), "--out", str(judge_set)),
        ("review", "import", str(judge_set), "--study", "from-runs", "--db", str(site.db)),
    ):
        done = run_cli(*args)
        assert done.returncode == 0, done.stderr
    assigning.assign(site.engine, "from-runs", per_item=1, seed=SEED, reviewers=["dr-lee"])
    page = browsing.page()
    login(page, site, "dr-lee")
    goto(page, site, f"/a/{site.aid('dr-lee', 'from-runs', 'q1')}")
    expect(page.locator("#item-key")).to_have_text("q1")
    expect(page.locator("#prompt .text")).to_have_text(QUESTIONS["q1"])
    expect(page.locator("#record-empty")).to_have_count(0)
    expect(page.locator("#chart-empty")).to_have_count(0)
    expect(page.locator("#chart .chart-body")).to_be_visible()  # a plain note: the chart shows it as text
    for line in RECORDS["q1"].splitlines():
        expect(page.locator("#chart .chart-body")).to_contain_text(line)
    seen(page)
    shot(page, "rate-from-runs")
    page.click("#record-tab-raw")
    expect(page.locator("#record-text")).to_have_text(RECORDS["q1"])
    expect(page.locator("#record-text")).to_be_visible()
