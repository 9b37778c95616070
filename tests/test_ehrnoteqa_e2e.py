"""EHRNoteQA end to end over real model calls: judging repeats as distinct cached requests over
HTTP (a local OpenAI-compatible server started by the test), resuming a half-judged run, and the
whole CLI path with the real embedded model."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from clinieval.benchmarks.ehrnoteqa.data import load_inline
from clinieval.benchmarks.ehrnoteqa.task import EHRNoteQASettings, judge_arm, run_format_arm
from clinieval.models.spec import BackendOptions
from tests.conftest import run_cli
from tests.fault_server import FaultServer

CHOICES = ["Aspirin", "Metoprolol 25 mg", "Heparin drip", "Warfarin", "Aspirin and clopidogrel"]
NOTES = [
    "DISCHARGE SUMMARY\nAdmission date: 2150-03-01\nPRINCIPAL DIAGNOSIS: atrial fibrillation.\n"
    "DISCHARGE MEDICATIONS:\n- Metoprolol 25 mg by mouth twice daily",
    "DISCHARGE SUMMARY\nAdmission date: 2151-06-02\nPRINCIPAL DIAGNOSIS: pneumonia.\n"
    "DISCHARGE MEDICATIONS:\n- Amoxicillin 500 mg",
]


def _inline(tmp_path: Path, n: int = 3) -> Path:
    path = tmp_path / "qa.jsonl"
    items = [
        {
            "id": f"q{i}",
            "patient_id": str(i),
            "question": f"Which rate-control drug was the patient discharged on? ({i})",
            # the paper's judge prompt holds no question: distinct options keep the prompts distinct
            "choices": [*CHOICES[:3], f"Warfarin {i + 1} mg", CHOICES[4]],
            "answer": "B",
            "category": "Treatment",
            "notes": NOTES[: 1 + i % 2],
        }
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    return path


def test_judge_repeats_are_distinct_requests_and_resume_repeats_nothing(tmp_path: Path) -> None:
    samples = load_inline(_inline(tmp_path)).samples
    arm = tmp_path / "arm"
    with FaultServer(answer="B. Metoprolol 25 mg") as model, FaultServer(answer="Yes.") as judge:
        settings = EHRNoteQASettings(loglik=False, progress=False)
        asyncio.run(run_format_arm(samples, f"openai:{model.url}@fault", "mc", arm, settings))
        spec = f"openai:{judge.url}@fault"
        backend = BackendOptions(max_retries=0)
        # half the run first (as if killed after two answers), then the whole run
        half = asyncio.run(judge_arm(arm, spec, repeats=5, backend=backend, limit=2, progress=False))
        assert half.summary.requests == 10 and half.summary.cache_hits == 0
        assert len(judge.log.received) == 10
        # five repeats of one answer are five requests with the same prompt
        assert len(set(judge.log.received)) == 2
        full = asyncio.run(judge_arm(arm, spec, repeats=5, backend=backend, progress=False))
        assert full.summary.requests == 5 and full.summary.cache_hits == 10
        assert len(judge.log.received) == 15
        again = asyncio.run(judge_arm(arm, spec, repeats=5, backend=backend, progress=False))
        assert again.summary.requests == 0 and len(judge.log.received) == 15
    assert again.summary.parsed == 15 and again.summary.parse_failures == 0
    lines = [json.loads(x) for x in (arm / "scores" / "ehrnoteqa_judge.jsonl").read_text().splitlines()]
    assert [len(x["metadata"]["judge_repeats"]) for x in lines] == [5, 5, 5]
    assert all(x["value"] == 1.0 for x in lines)
    # the judge saw the paper's prompt with the model's answer and the correct option
    assert "Model Output: B. Metoprolol 25 mg Answer Choices: A. Aspirin" in judge.log.received[0]


def test_unreadable_verdicts_are_unscored_not_no(tmp_path: Path) -> None:
    samples = load_inline(_inline(tmp_path, n=2)).samples
    arm = tmp_path / "arm"
    with FaultServer(answer="B") as model, FaultServer(answer="It depends on the context.") as judge:
        asyncio.run(
            run_format_arm(
                samples,
                f"openai:{model.url}@fault",
                "mc",
                arm,
                EHRNoteQASettings(loglik=False, progress=False),
            )
        )
        result = asyncio.run(judge_arm(arm, f"openai:{judge.url}@fault", repeats=3, progress=False))
    assert result.summary.parse_failures == 6 and result.summary.scored == 0
    assert sum(result.summary.unparsed_reasons.values()) == 6  # each with its typed reason
    assert all(
        s.value is None and s.metadata["error_kind"] == "judge_unparsed" for s in result.scores.values()
    )


def test_cli_end_to_end_with_the_embedded_model(tmp_path: Path) -> None:
    qa = _inline(tmp_path, n=3)
    out = tmp_path / "arms"
    common = ["--no-progress"]
    ran = run_cli(
        "ehrnoteqa",
        "run",
        "--inline",
        str(qa),
        "--model",
        "llamacpp:smollm2-135m-instruct",
        "--format",
        "mc",
        "--format",
        "free",
        "--max-tokens",
        "12",
        "--out",
        str(out),
        *common,
    )
    assert ran.returncode == 0, ran.stderr
    assert "3 questions (level 1: 3, level 2: 0)" in ran.stdout
    arms = sorted(p.name for p in out.iterdir())
    assert arms == ["smollm2-135m-instruct-free", "smollm2-135m-instruct-mc"]
    judged = run_cli(
        "ehrnoteqa", "judge", str(out), "--judge", "llamacpp:smollm2-135m-instruct", "--repeats", "2", *common
    )
    # the tiny judge may score nothing in an arm: that pass exits 3 with its fix (issue 34)
    assert judged.returncode == 0 or (judged.returncode == 3 and "no answer could be scored" in judged.stderr)
    assert "not credible" in judged.stderr
    assert "judging answers written by the same model" in judged.stderr  # smol judges smol
    report = tmp_path / "report"
    analyzed = run_cli("ehrnoteqa", "analyze", str(out), "--out", str(report))
    assert analyzed.returncode == 0, analyzed.stderr
    result = json.loads((report / "analysis.json").read_text())
    mc = result["formats"]["mc"]
    assert mc["modes"] == ["judge", "letter_extract", "loglik_letter", "loglik_text"]
    entry = mc["per_model"]["smollm2-135m-instruct"]
    for mode in ("letter_extract", "loglik_letter", "loglik_text"):
        assert entry[mode]["n"] == 3 and 0.0 <= entry[mode]["score"] <= 100.0
    assert entry["judge"]["repeats"] == 2
    # two greedy repeats of one judge give the same replies: no spread was measured, and the
    # report says so instead of printing SD 0.00 and instability 0
    assert entry["judge"]["sd"] is None and "not measured" in entry["judge"]["sd_not_measured"]
    assert entry["judge"]["self_judged"] is True
    assert result["formats"]["free"]["modes"] == ["judge"]
    assert any("not credible" in w for w in result["warnings"])
    assert any(w.startswith("Judge repeats were identical") for w in result["warnings"])
    assert any(w.startswith("Self-judging") for w in result["warnings"])
    md = (report / "report.md").read_text()
    assert "## Multiple choice" in md and "## Free text" in md and "not credible" in md
    assert "± not measured (identical repeats)" in md and "self-judged" in md
    # resuming the run makes no new model request
    again = run_cli(
        "ehrnoteqa",
        "run",
        "--inline",
        str(qa),
        "--model",
        "llamacpp:smollm2-135m-instruct",
        "--format",
        "mc",
        "--max-tokens",
        "12",
        "--out",
        str(out),
        *common,
    )
    assert again.returncode == 0 and "0 new, 3 resumed of 3; 0 model requests" in again.stdout


def test_cli_bad_input_is_one_clear_error(tmp_path: Path) -> None:
    bad = tmp_path / "qa.jsonl"
    bad.write_text('{"id": "1", "question": "Q", "choices": ["a"], "answer": "A", "notes": ["x"]}\n')
    r = run_cli(
        "ehrnoteqa",
        "run",
        "--inline",
        str(bad),
        "--model",
        "llamacpp:smollm2-135m-instruct",
        "--out",
        str(tmp_path / "o"),
    )
    assert r.returncode != 0
    assert "qa.jsonl:1: field 'choices' should hold 5 options, got 1" in r.stderr
    assert "Traceback" not in r.stderr
    assert not (tmp_path / "o").exists()
    r = run_cli("ehrnoteqa", "run", "--inline", str(bad), "--model", "m", "--format", "essay", "--out", "x")
    assert r.returncode != 0 and "format 'essay' is unknown" in r.stderr


def test_demo_on_the_synthetic_set_with_the_embedded_model(tmp_path: Path) -> None:
    from clinieval.benchmarks.ehrnoteqa.demo import DemoPlan, run_demo

    plan = DemoPlan(
        out=tmp_path / "demo",
        patients=2,
        per_patient=1,
        models=("llamacpp:smollm2-135m-instruct",),
        repeats=2,
        formats=("mc",),
        max_tokens=8,
        judge_max_tokens=4,
        progress=False,
    )
    lines = asyncio.run(run_demo(plan))
    assert lines[0].startswith("synthetic set: 2 patients")
    result = json.loads((plan.out / "report" / "analysis.json").read_text())
    entry = result["formats"]["mc"]["per_model"]["smollm2-135m-instruct"]
    assert entry["items"] == 2 and entry["judge"]["repeats"] == 2
    assert {"letter_extract", "loglik_letter", "loglik_text"} <= set(entry)
    assert any("not credible" in w for w in result["warnings"])
    # the synthetic set went through the release loader: levels and note counts are recorded
    rec = json.loads(
        (plan.out / "arms" / "smollm2-135m-instruct-mc" / "samples.jsonl").read_text().splitlines()[0]
    )
    assert rec["sample"]["metadata"]["level"] in (1, 2) and rec["sample"]["metadata"]["num_notes"] >= 1
    # a second demo rebuilds identical data and resumes: no new model or judge request
    again = asyncio.run(run_demo(plan))
    assert "0 new, 2 resumed of 2; 0 model requests" in "\n".join(again)
    assert "(0 requests, 4 cache hits)" in "\n".join(again)
