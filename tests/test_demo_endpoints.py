"""The four demos take the endpoint options every command that asks a model takes (issue 28,
item 3: ``--n-ctx``, ``--timeout``, ``--retries``, ``--concurrency``, ``--executor`` ...), keep the
defaults they always had, and hand the options to every arm and judge they run.

Before, each demo opened its models with options of its own (``BackendOptions(n_ctx=...)``), so
``--concurrency`` or ``--executor`` were refused and nothing the user set reached the judge. The
checks here are the cheap ones: the plan each command builds (its ``run_demo`` replaced by one
that keeps the plan), a malformed ``--executor`` through the installed command, and each demo
run for real against two local servers, small: an arm server that answers at once and a judge
server slower than ``--timeout``. With the options reaching them, every arm records
``--concurrency`` as its ceiling (16 by default) and every judge call times out once and is not
retried (``--retries 0``); without, the judge would wait for the slow answer and score it.
About 25 s in all on 2 cores, most of it the MedAlign, EHRNoteQA and MedEval demos.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clinieval.models.ray_model import RayChoice
from clinieval.models.spec import BackendOptions
from tests.conftest import run_cli
from tests.fault_server import FaultServer

DEMOS = ("medalign", "ehrnoteqa", "medeval", "automedeval")
OPTIONS = ["--n-ctx", "1024", "--timeout", "7.5", "--retries", "1", "--concurrency", "3", "--no-proxy"]
runner = CliRunner()


def _invoke(*args: str) -> Any:
    from clinieval.cli import app

    return runner.invoke(app, list(args), catch_exceptions=False)


def _library_plan(name: str, out: Path) -> Any:
    """The demo's plan as a library caller gets it by default (what `make demo` ran before)."""
    import importlib

    plan = importlib.import_module(f"clinieval.benchmarks.{name}.demo").DemoPlan
    return plan(out) if name in ("medalign", "ehrnoteqa") else plan(out, ())


@pytest.fixture
def planned(monkeypatch: pytest.MonkeyPatch) -> Callable[[str], list[Any]]:
    """Replace a demo's ``run_demo`` with one that only keeps the plan it is given."""

    def keep(name: str) -> list[Any]:
        plans: list[Any] = []

        async def run_async(plan: Any) -> list[str]:
            plans.append(plan)
            return []

        def run_sync(plan: Any, echo: object) -> list[Path]:
            plans.append(plan)
            return []

        fake = run_async if name in ("medalign", "ehrnoteqa") else run_sync
        monkeypatch.setattr(f"clinieval.benchmarks.{name}.demo.run_demo", fake)
        return plans

    return keep


@pytest.mark.parametrize("name", DEMOS)
def test_each_demo_keeps_its_defaults_and_hands_its_endpoint_options_to_the_plan(
    name: str, tmp_path: Path, planned: Callable[[str], list[Any]]
) -> None:
    plans = planned(name)
    done = _invoke(name, "demo", "--out", str(tmp_path), "--no-progress")
    assert done.exit_code == 0, done.output
    default = _library_plan(name, tmp_path)
    # the command's defaults are the ones the demo always had (medalign 2k, ehrnoteqa 8k, 120 s)
    assert plans[0].backend == default.backend and plans[0].concurrency is None
    done = _invoke(name, "demo", "--out", str(tmp_path), "--no-progress", *OPTIONS)
    assert done.exit_code == 0, done.output
    given = BackendOptions(n_ctx=1024, timeout_s=7.5, max_retries=1, concurrency=3, use_proxy=False)
    assert plans[1].backend == given and plans[1].concurrency == 3
    done = _invoke(name, "demo", "--out", str(tmp_path), "--executor", "ray", "--ray-workers", "2")
    assert done.exit_code == 0, done.output
    # under Ray each worker keeps --concurrency in flight; the model sums them
    assert plans[2].backend.executor == RayChoice(None, 2) and plans[2].concurrency is None


@pytest.mark.parametrize("name", DEMOS)
def test_a_malformed_executor_stops_a_demo_before_it_writes_anything(name: str, tmp_path: Path) -> None:
    out = tmp_path / "demo"
    done = run_cli(name, "demo", "--out", str(out), "--executor", "spark")
    assert done.returncode != 0
    assert "--executor 'spark' is unknown; choose from local, ray" in done.stderr
    assert "Traceback" not in done.stderr and not out.exists()


@pytest.fixture(scope="module")
def servers() -> Iterator[tuple[str, FaultServer]]:
    """An arm server answering at once, and a judge server slower than the demos' --timeout."""
    with FaultServer(answer="B") as arm, FaultServer(delay_s=6.0, answer="Score: 1") as judge:
        yield f"openai:{arm.url}@fault", judge


ASKED = ["--timeout", "2", "--retries", "0", "--concurrency", "3", "--no-progress"]


def _judged(arm: Path, rubric: str) -> dict[str, Any]:
    summary: dict[str, Any] = json.loads((arm / "scores" / f"{rubric}.summary.json").read_text())
    return summary


def _ceiling(arm: Path) -> int:
    return int(json.loads((arm / "summary.json").read_text())["run"]["concurrency"]["ceiling"])


def test_the_medalign_demo_asks_its_arms_and_judge_with_the_options(
    servers: tuple[str, FaultServer], tmp_path: Path, smollm2_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, judge = servers
    # the text metrics ask no model: one is enough here (BERTScore would load a model for 15 s)
    monkeypatch.setattr("clinieval.benchmarks.medalign.task.DEFAULT_METRICS", ("rougeL",))
    before = len(judge.log.received)
    done = _invoke("medalign", "demo", "--out", str(tmp_path), "--patients", "1", "--strategy",
                   "keep-recent", "--public", "0", "--model", model, "--judge", f"openai:{judge.url}@fault",
                   "--tokenizer", f"gguf:{smollm2_path}", "--max-context", "2048", *ASKED)  # fmt: skip
    assert done.exit_code == 0, done.output
    arm = tmp_path / "arms" / "fault-keep-recent"
    assert _ceiling(arm) == 3
    judged = _judged(arm, "medalign_judge")
    assert judged["judge_errors"] == {"timeout": 2} and judged["requests"] == 2  # 2 repeats, none retried
    assert len(judge.log.received) - before == 2


def test_the_ehrnoteqa_demo_asks_its_arms_and_judge_with_the_options(
    servers: tuple[str, FaultServer], tmp_path: Path
) -> None:
    model, judge = servers
    before = len(judge.log.received)
    done = _invoke("ehrnoteqa", "demo", "--out", str(tmp_path), "--patients", "1", "--per-patient", "1",
                   "--model", model, "--judge", f"openai:{judge.url}@fault", "--repeats", "2", "--no-loglik",
                   *ASKED)  # fmt: skip
    assert done.exit_code == 0, done.output
    for fmt, rubric in (("mc", "ehrnoteqa_judge"), ("free", "ehrnoteqa_free_judge")):
        arm = tmp_path / "arms" / f"fault-{fmt}"
        assert _ceiling(arm) == 3, fmt
        judged = _judged(arm, rubric)
        assert judged["judge_errors"] == {"timeout": 2} and judged["requests"] == 2, fmt
    assert len(judge.log.received) - before == 4


def test_the_medeval_demo_asks_every_arm_with_the_options(
    servers: tuple[str, FaultServer], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The arms only: the baselines after them ask no model and train for a minute and a half."""
    from clinieval.benchmarks.medeval import demo

    def arms_only(plan: demo.DemoPlan, echo: Callable[[str], None]) -> list[Path]:
        demo._run_arms(plan, demo._corpus(plan), echo)
        return []

    monkeypatch.setattr(demo, "run_demo", arms_only)
    model, _ = servers
    done = _invoke("medeval", "demo", "--out", str(tmp_path), "--model", model, "--items", "1", *ASKED)
    assert done.exit_code == 0, done.output
    arms = sorted((tmp_path / "arms").iterdir())
    assert len(arms) == 10 and {_ceiling(a) for a in arms} == {3}  # five tasks, zero- and few-shot


def test_the_automedeval_demo_asks_its_judges_with_the_options(
    servers: tuple[str, FaultServer], tmp_path: Path
) -> None:
    _, judge = servers
    before = len(judge.log.received)
    done = _invoke("automedeval", "demo", "--out", str(tmp_path), "--items", "2", "--repeats", "1",
                   "--judge", f"openai:{judge.url}@fault", *ASKED)  # fmt: skip
    assert done.exit_code == 0, done.output
    verdicts = [
        json.loads(line)
        for folder in (tmp_path / "judges").iterdir()
        if folder.name.startswith("openai")
        for line in (folder / "verdicts.jsonl").read_text().splitlines()
    ]
    assert [v["error"] for v in verdicts] == ["judge call failed: timeout"] * 2
    assert len(judge.log.received) - before == 2  # one call per item, none retried
