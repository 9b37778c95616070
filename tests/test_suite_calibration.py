"""Calibration end to end (issue 39, deliverable 4): a suite judged by a biased judge, a clinician
sample rated by the demo's stand-in clinician through the review app's code, and the calibrated
leaderboard read back in Chromium.

Two models answer 40 EHRNoteQA questions (20 patients) on loopback servers: ``sharp`` gives the
answer key's option on 80% of them, ``lucky`` on 40%, but ``lucky`` words its wrong answers with
confidence and the scripted judge says yes to confident answers. So the judge alone ranks ``lucky``
first; the stand-in clinician's rule (the reference's option letter) ranks ``sharp`` first, and the
report calibrated by its 20 ratings per model must say so, with the judge's bias on ``lucky``
found. This is the step ``clinieval suite demo`` runs after its cells
(:func:`clinieval.cli.suite.calibrate_with_demo_clinician`), here on servers instead of the tiny
embedded models, so it takes seconds.
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from tests.conftest import run_cli
from tests.fault_server import FaultServer
from tests.suite_helpers import run_suite_file

if TYPE_CHECKING:
    from playwright.sync_api import Page

pytest_plugins = ["tests.browser"]

QUESTIONS = 40
CHOICES = ["Aspirin", "Metoprolol 25 mg", "Heparin", "Warfarin", "Amoxicillin"]


def answer(model: str, prompt: str) -> str:
    """``sharp`` right 4 times in 5, ``lucky`` 2 in 5; ``lucky``'s wrong answers sound sure."""
    roll = zlib.crc32(prompt.encode()) % 5
    right = roll < (4 if model == "sharp" else 2)
    if right:
        return "B. Metoprolol 25 mg"
    return "D. Warfarin" + (", without a doubt." if model == "lucky" else "")


def judge(prompt: str) -> str:
    """Yes to the key's option, and to any answer that sounds sure: biased towards ``lucky``.
    The model's output sits between "Model Output:" and "Answer Choices:" in the paper's prompt."""
    output = prompt.split("Model Output:", 1)[-1].split("Answer Choices:", 1)[0]
    return "Yes." if output.strip().startswith("B.") or "without a doubt" in output else "No."


def write_qa(path: Path) -> Path:
    items = [
        {
            "id": f"q{i:02d}",
            "patient_id": f"p{i // 2}",
            "question": f"Which drug was patient {i // 2} discharged on? ({i})",
            "choices": CHOICES,
            "answer": "B",
            "notes": [f"DISCHARGE SUMMARY {i}\nMEDICATIONS:\n- Metoprolol 25 mg daily"],
        }
        for i in range(QUESTIONS)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def suite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("calibration")
    write_qa(folder / "qa.jsonl")
    with (
        FaultServer(responder=lambda p: answer("sharp", p), model_fields={"id": "sharp-7b"}) as sharp,
        FaultServer(responder=lambda p: answer("lucky", p), model_fields={"id": "lucky-7b"}) as lucky,
        FaultServer(responder=judge) as judging,
    ):
        run = run_suite_file(
            folder,
            [
                'title = "Calibration end to end"',
                "[models]",
                f'sharp = "openai:{sharp.url}@sharp-7b"',
                f'lucky = "openai:{lucky.url}@lucky-7b"',
                "[judge]",
                f'model = "openai:{judging.url}@fault"',
                "repeats = 2",
                "[endpoints]",
                "retries = 0",
                "[benchmarks.ehrnoteqa]",
                'data = "qa.jsonl"',
                "loglik = false",
                "max_tokens = 16",
            ],
        )
    yield run


def _board(run: Path) -> dict[str, Any]:
    board: dict[str, Any] = json.loads((run / "report" / "leaderboard.json").read_text(encoding="utf-8"))
    return board


def test_the_judge_alone_ranks_the_flattered_model_first_and_calibration_corrects_it(suite: Path) -> None:
    from clinieval.cli.suite import calibrate_with_demo_clinician
    from clinieval.suite.demo_clinician import REVIEWER

    assert run_cli("suite", "report", str(suite)).returncode == 0
    (judged,) = _board(suite)["benchmarks"]
    assert judged["models"][0] == "lucky" and judged["calibration"] is None

    db = calibrate_with_demo_clinician(suite, seed=0, n=20)
    assert db == str(suite / "review.db")
    design = json.loads((suite / "calibration" / "sample.json").read_text(encoding="utf-8"))
    drawn = design["benchmarks"]["ehrnoteqa"]
    assert len(drawn["items"]) == 20 and len(drawn["patients"]) == 10  # whole patients
    done = run_cli("suite", "report", str(suite), "--clinicians", db)
    assert done.returncode == 0, done.stderr
    (calibrated,) = _board(suite)["benchmarks"]
    assert calibrated["models"] == ["sharp", "lucky"]
    assert calibrated["verdict"].startswith("sharp")
    assert all(s["estimator"] == "PPI++" and s["rated"] == 20 for s in calibrated["scores"])
    cal = {m["model"]: m for m in calibrated["calibration"]["models"]}
    assert cal["lucky"]["judge_bias"]["ci"][0] > 0.2  # the judge's kindness to lucky, found
    assert cal["lucky"]["judge_only"]["value"] == pytest.approx(1.0)
    assert calibrated["metric"].startswith("clinicians' correctness, calibrated (PPI++)")
    # the judge's weight fixed (plain PPI), as docs/calibration.md advises for small samples
    fixed = run_cli("suite", "report", str(suite), "--clinicians", db, "--lam", "1")
    assert fixed.returncode == 0, fixed.stderr
    (plain,) = _board(suite)["benchmarks"]
    assert plain["calibration"]["estimator"] == "PPI" and plain["metric"].startswith(
        "clinicians' correctness, calibrated (PPI) from"
    )
    assert all(m["calibrated"]["lam"] == 1.0 for m in plain["calibration"]["models"])
    assert all(s["estimator"] == "PPI" for s in plain["scores"])
    assert "Calibrated (PPI)" in (suite / "report" / "leaderboard.md").read_text(encoding="utf-8")

    # the stand-in clinician's reviews are ordinary submitted reviews of the review database
    from clinieval.review.export import submitted_rows
    from clinieval.review.store import connect

    engine = connect(db)
    rows = submitted_rows(engine, drawn["study"])
    engine.dispose()
    assert len(rows) == 20 and {r["reviewer"] for r in rows} == {REVIEWER}
    again = calibrate_with_demo_clinician(suite, seed=0, n=20)  # the demo run again: nothing new
    assert (
        again == db
        and len(json.loads((suite / "calibration" / "sample.json").read_text())["benchmarks"]) == 1
    )


def test_the_calibrated_leaderboard_in_chromium(suite: Path, page: Page) -> None:
    from clinieval.cli.suite import calibrate_with_demo_clinician

    db = calibrate_with_demo_clinician(suite, seed=0, n=20)
    assert db is not None and run_cli("suite", "report", str(suite), "--clinicians", db).returncode == 0
    data = _board(suite)
    (b,) = data["benchmarks"]
    page.goto((suite / "report" / "leaderboard.html").as_uri())
    assert page.eval_on_selector_all(
        "section[id^=bench-] > p > strong", "els => els.map(e => e.textContent)"
    ) == [b["verdict"]]
    header = page.eval_on_selector("section[id^=bench-] table thead tr", "r => r.textContent")
    assert "Calibrated (PPI++)" in header
    first = page.evaluate(
        """() => {
            const t = Array.from(document.querySelectorAll("section[id^=bench-] table"))
                .find(t => t.tHead.textContent.includes("Calibrated (PPI++)"));
            return Array.from(t.tBodies[0].rows, r => r.cells[0].textContent);
        }"""
    )
    assert first == ["sharp", "lucky"]
    rows = page.eval_on_selector_all(
        "section:has(> h3:text-is('Calibrated by clinicians')) table tbody tr",
        "rs => rs.map(r => Array.from(r.cells, c => c.textContent))",
    )
    cal = {m["model"]: m for m in b["calibration"]["models"]}
    assert [r[0] for r in rows] == list(cal)
    for row in rows:
        shown = float(row[3].split(" ")[0])
        assert shown == pytest.approx(cal[row[0]]["calibrated"]["value"], abs=5e-4)
    assert "the judge agrees with the clinicians on" in page.inner_text("body")


def test_the_stand_in_clinicians_rule() -> None:
    from clinieval.suite.demo_clinician import correct_by_rule

    ref = "B. Metoprolol 25 mg"
    assert correct_by_rule("B", ref) and correct_by_rule("(B) metoprolol", ref)
    assert correct_by_rule("The answer is B.", ref)
    assert correct_by_rule("She went home on metoprolol 25 mg daily", ref)  # the option's text
    assert not correct_by_rule("D. Warfarin", ref) and not correct_by_rule("D, not B", ref)
    assert not correct_by_rule("Metoprolol", ref)  # part of the option's text is not the option
    assert not correct_by_rule("B", None)


def test_bad_calibration_arguments_are_one_line_and_write_nothing(suite: Path, tmp_path: Path) -> None:
    from clinieval.cli.suite import calibrate_with_demo_clinician

    calibrate_with_demo_clinician(suite, seed=0, n=20)  # a sample exists; only the arguments are wrong
    before = (suite / "report" / "leaderboard.json").read_bytes() if (suite / "report").exists() else None
    cases = [
        (["--sample", "full"], "--sample goes with --clinicians DB_OR_EXPORT"),
        (["--clinicians", str(tmp_path / "nowhere.csv")], "nowhere.csv: file not found"),
        (
            ["--clinicians", str(suite / "review.db"), "--sample", "nope"],
            "nope.json: no clinician sample here",
        ),
        (["--lam", "1"], "--lam goes with --clinicians DB_OR_EXPORT"),
        (["--clinicians", str(suite / "review.db"), "--lam", "1.5"], "--lam 1.5: expected a weight from 0"),
        (["--clinicians", str(suite / "review.db"), "--lam", "nan"], "--lam nan: expected a weight from 0"),
    ]
    for args, message in cases:
        done = run_cli("suite", "report", str(suite), *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert line.startswith("error: ") and message in line, line
    after = (suite / "report" / "leaderboard.json").read_bytes() if (suite / "report").exists() else None
    assert after == before
