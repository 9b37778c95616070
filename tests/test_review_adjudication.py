"""What an admin adjudicates with (issue 37): the agreement tables' CIs (Cohen's kappa gets a
bootstrap CI like alpha's; a CI over one unit is "not estimable (one unit)", never the value twice)
and the disagreements page's written rationales (masked, escaped, admins only). Real SQLite
databases, the real app through FastAPI's TestClient, real argon2 logins."""

from __future__ import annotations

import html
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from clinieval.analysis import agreement as stats
from clinieval.review import accounts, assigning, importing, reviewing, store
from clinieval.review.agreement import study_agreement
from clinieval.review.app import create_app
from clinieval.review.items import AnswerIn, ReviewItem

ONE_UNIT = "not estimable (one unit)"
PASSWORDS = {"boss": "boss-secret-0", "ann": "ann-secret-1", "bob": "bob-secret-2"}
MODELS = ("Zephyr-Clinical-7B", "Orca-Med-13B", "Falcon-Ward-40B")


def engine_with_users(tmp_path: Path) -> Engine:
    engine = store.init_db(tmp_path / "review.sqlite")
    for name, password in PASSWORDS.items():
        accounts.add_user(engine, name, "admin" if name == "boss" else "reviewer", password)
    return engine


def rank_study(engine: Engine, verdicts: dict[str, dict[str, tuple[tuple[int, bool, str], ...]]]) -> None:
    """The rank study "med": one item per key of ann's verdicts, answers a1-a3 from MODELS, both
    reviewers submitting (rank, correct, rationale) per answer."""
    keys = list(verdicts["ann"])
    items = [
        ReviewItem(
            item=k,
            prompt=f"Instruction {k}",
            answers=tuple(AnswerIn(f"a{i}", m, f"answer {i} of {k}") for i, m in enumerate(MODELS, 1)),
        )
        for k in keys
    ]
    importing.import_items(engine, "med", "rank", None, items)
    assigning.assign(engine, "med", per_item=2, seed=0, reviewers=["ann", "bob"])
    for name in ("ann", "bob"):
        who = accounts.verify_user(engine, name, PASSWORDS[name])
        assert who is not None
        for entry in reviewing.reviewer_queue(engine, who.id, "med"):
            answers = {
                f"a{i}": {"rank": r, "correct": ok, "reasons": [] if ok else ["C2"], "rationale": why}
                for i, (r, ok, why) in enumerate(verdicts[name][entry.item], 1)
            }
            reviewing.save(engine, entry.id, who.id, {"answers": answers}, 0, submit=True)


def marks(pattern: str) -> tuple[tuple[int, bool, str], ...]:
    """Ranks 1-3 in order, correct per letter (T/F); an incorrect answer gets a rationale."""
    return tuple((i, c == "T", "" if c == "T" else "wrong dose") for i, c in enumerate(pattern, 1))


@pytest.fixture
def clients() -> Iterator[list[TestClient]]:
    made: list[TestClient] = []
    yield made
    for c in made:
        c.close()


def logged_in(engine: Engine, name: str, made: list[TestClient]) -> TestClient:
    client = TestClient(create_app(engine), base_url="http://127.0.0.1")
    made.append(client)
    form = client.get("/login").text
    csrf = re.search(r'name="csrf_token" value="([^"]+)"', form)
    assert csrf
    page = client.post(
        "/login", data={"name": name, "password": PASSWORDS[name], "csrf_token": csrf.group(1)}
    )
    assert page.status_code == 200, page.text
    return client


def ci_cell(page: str, measure: str, stat: str) -> tuple[str, str | None]:
    """The text and title of one agreement row's CI cell."""
    table = re.search(rf'data-measure="{measure}">(.*?)</table>', page, re.S)
    assert table, measure
    row = re.search(rf'data-stat="{stat}">(.*?)</tr>', table.group(1), re.S)
    assert row, stat
    cell = re.search(r'<td class="ci[^"]*"(?: title="([^"]*)")?>(.*?)</td>', row.group(1), re.S)
    assert cell, f"no CI cell in {stat}"
    return html.unescape(cell.group(2)).strip(), cell.group(1) and html.unescape(cell.group(1))


# --- 2: a CI over one unit is not estimable, and says so -----------------------------------------


def test_tau_over_one_item_has_no_ci_and_says_why(tmp_path: Path, clients: list[TestClient]) -> None:
    engine = engine_with_users(tmp_path)
    # one item; bob swaps the first two answers: tau-b = (2 - 1) / 3 = 1/3
    rank_study(
        engine, {"ann": {"q1": marks("TTF")}, "bob": {"q1": ((2, True, ""), (1, True, ""), (3, True, ""))}}
    )
    result = study_agreement(engine, "med")
    tau = result["kendall_tau"]
    assert tau["mean_tau_b"] == pytest.approx(1 / 3) and tau["items"] == 1
    assert tau["ci"] is None and tau["ci_why"] == ONE_UNIT
    alpha = result["correct"]["alpha"]
    assert alpha["ci"] is None and alpha["ci_why"] == ONE_UNIT
    kappa = result["correct"]["cohen_kappa"]
    assert kappa["mean"] is not None and kappa["ci"] is None and kappa["ci_why"] == ONE_UNIT

    page = logged_in(engine, "boss", clients).get("/admin/studies/med").text
    text, title = ci_cell(page, "rank", "tau")
    assert text == "not estimable (one unit)" and title == "not estimable (one unit)"
    assert "0.33 to 0.33" not in page
    assert ci_cell(page, "correct", "kappa") == ("not estimable (one unit)", "not estimable (one unit)")


def test_tau_over_three_items_keeps_its_ci(tmp_path: Path) -> None:
    engine = engine_with_users(tmp_path)
    flipped = ((3, True, ""), (2, True, ""), (1, False, "off"))
    rank_study(
        engine,
        {
            "ann": {"q1": marks("TTF"), "q2": marks("TTF"), "q3": marks("TFF")},
            "bob": {"q1": marks("TTF"), "q2": flipped, "q3": marks("TTF")},
        },
    )
    tau = study_agreement(engine, "med")["kendall_tau"]
    assert tau["items"] == 3 and tau["ci_why"] is None
    assert tau["ci"][0] <= tau["mean_tau_b"] <= tau["ci"][1] and tau["ci"][0] < tau["ci"][1]


# --- 3: Cohen's kappa gets a bootstrap CI -----------------------------------------------------------

ANN_OK = ("TTF", "TFF", "TTT")
BOB_OK = ("TFF", "TFT", "TTT")
"""Hand-computed (as in test_review_store): 7 of 9 marks agree, chance 5/9, kappa = 0.5."""


def kappa_of(tmp_path: Path, copies: int) -> dict[str, Any]:
    engine = engine_with_users(tmp_path)
    keys = [f"q{c}{i}" for c in range(copies) for i in range(3)]
    rank_study(
        engine,
        {
            "ann": {k: marks(ANN_OK[int(k[-1])]) for k in keys},
            "bob": {k: marks(BOB_OK[int(k[-1])]) for k in keys},
        },
    )
    kappa: dict[str, Any] = study_agreement(engine, "med")["correct"]["cohen_kappa"]
    return kappa


def test_kappa_has_a_bootstrap_ci_that_holds_it_and_narrows_with_more_items(tmp_path: Path) -> None:
    from statsmodels.stats.inter_rater import cohens_kappa

    small = kappa_of(tmp_path / "small", 1)
    assert small["mean"] == pytest.approx(0.5)
    ann = "".join(ANN_OK)
    bob = "".join(BOB_OK)
    table = [[sum(a == x and b == y for a, b in zip(ann, bob, strict=True)) for y in "TF"] for x in "TF"]
    assert small["mean"] == pytest.approx(cohens_kappa(table).kappa)
    assert small["mean"] == pytest.approx(stats.cohen_kappa(list(ann), list(bob)))
    low, high = small["ci"]
    assert low <= 0.5 <= high and small["ci_why"] is None
    large = kappa_of(tmp_path / "large", 8)  # the same 3 items 8 times over: 24 items
    assert large["mean"] == pytest.approx(0.5)
    assert large["ci"][0] <= 0.5 <= large["ci"][1]
    assert large["ci"][1] - large["ci"][0] < (high - low) * 0.75
    assert kappa_of(tmp_path / "again", 8)["ci"] == large["ci"]  # seeded


def test_the_kappa_row_shows_its_ci(tmp_path: Path, clients: list[TestClient]) -> None:
    engine = engine_with_users(tmp_path)
    rank_study(engine, {"ann": {f"q{i}": marks(ANN_OK[i]) for i in range(3)},
                        "bob": {f"q{i}": marks(BOB_OK[i]) for i in range(3)}})  # fmt: skip
    page = logged_in(engine, "boss", clients).get("/admin/studies/med").text
    text, title = ci_cell(page, "correct", "kappa")
    assert re.fullmatch(r"-?\d\.\d\d to -?\d\.\d\d", text) and title is None


# --- 4: the disagreements page shows the reviewers' rationales --------------------------------------


def test_the_disagreements_page_shows_rationales_masked_and_escaped(
    tmp_path: Path, clients: list[TestClient]
) -> None:
    engine = engine_with_users(tmp_path)
    sneaky = "<script>alert(1)</script> copied from Zephyr-Clinical-7B's style; wrong INR target"
    rank_study(
        engine,
        {
            "ann": {"q1": ((1, True, ""), (2, True, ""), (3, False, sneaky))},
            "bob": {"q1": ((1, True, ""), (2, False, "dose is doubled"), (3, True, ""))},
        },
    )
    admin = logged_in(engine, "boss", clients)
    page = admin.get("/admin/studies/med/disagreements?on=correct")
    assert page.status_code == 200
    notes = [html.unescape(n) for n in re.findall(r'<p class="rationale">(.*?)</p>', page.text, re.S)]
    assert "dose is doubled" in notes
    assert "<script>alert(1)</script> copied from [model hidden]'s style; wrong INR target" in notes
    assert (
        "<script>alert(1)</script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
    )
    for model in MODELS:
        assert model.casefold() not in page.text.casefold()
    # beside the ratings: ann's rationale sits in ann's cell of the row where she marked it incorrect
    row = re.search(r"<tr>\s*<th[^>]*>[^<]*answer 3 of q1[^<]*</th>(.*?)</tr>", page.text, re.S)
    assert row
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row.group(1), re.S)
    assert cells[0].startswith("incorrect") and "wrong INR target" in cells[0]
    assert cells[1] == "correct"
    # reviewers get 403, and the study page stays counts and agreement: no reviewer's text
    assert (
        logged_in(engine, "ann", clients).get("/admin/studies/med/disagreements?on=correct").status_code
        == 403
    )
    assert "dose is doubled" not in admin.get("/admin/studies/med").text
