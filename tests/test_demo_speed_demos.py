"""The demos' sizing for speed keeps what each demo shows: the AutoMedEval demo's stop sequence
changes no parsed verdict, and the smaller EHRNoteQA demo set still has both levels."""

from __future__ import annotations

from pathlib import Path

from clinieval.benchmarks.automedeval.demo import DEMO_STOP
from clinieval.benchmarks.automedeval.prompts import EXAMPLE_REPLY
from clinieval.benchmarks.automedeval.verdict import parse_scores, rationale


def test_the_automedeval_demo_stop_cuts_only_an_invented_next_item() -> None:
    """Gemma-3 writes its verdict, then a new item of its own (with scores of its own)."""
    invented = (
        "\n\n[Patient Question]\nI have a fever and a cough. What should I do?\n\n[Reference Answer]\n"
        "Rest.\n\n[Doctors' Answers]\nDoctor 1: rest.\nScore: Doctor 1: 1 points. Doctor 2: 1 points."
    )
    verdict = EXAMPLE_REPLY.replace("Doctor 1: 5 points", "Doctor 1: 4 points")  # its own, not a copy
    reply = verdict + invented
    cut = reply.split(DEMO_STOP[0])[0]
    assert cut.rstrip() == verdict
    assert parse_scores(cut, 3) == parse_scores(reply, 3) == [4, 3, 1]
    assert rationale(cut) == rationale(reply)


def test_the_ehrnoteqa_demo_set_has_both_levels(tmp_path: Path) -> None:
    from clinieval.benchmarks.ehrnoteqa.demo import DemoPlan
    from clinieval.benchmarks.ehrnoteqa.synth.writer import build_synthetic_set

    plan = DemoPlan(out=tmp_path)
    built = build_synthetic_set(
        tmp_path / "data",
        patients=plan.patients,
        seed=plan.seed,
        per_patient=plan.per_patient,
        long_fraction=plan.long_fraction,
    )
    described = built.describe()
    assert described.startswith("5 patients (level 1: 4, level 2: 1)"), described
    assert "10 questions" in described
