"""Every benchmark that offers a suite part, together in one suite: the calls ``suite plan``
announces are the calls the server receives, every cell completes, and the report over all of
them asks nothing (issue 29: "plan() must return the model calls a full, fresh cell costs").

The suite is the demo's (each part's own synthetic data) with two models on two counting servers
on 127.0.0.1 that answer every call at once (the first one also judges), so the check costs seconds, not
the demo's minutes. Both servers serve the same model name, as two hospitals' vLLMs of one model
do: each benchmark's own report must still tell the suite's two models apart. MedAlign is given
the embedded SmolLM2's GGUF as its budget tokenizer, since
a server's own tokenizer cannot be read. Each part's own tests check its answers and scores;
this one checks that the parts and the suite agree on what is asked. About 20 s on 2 cores.
"""

from __future__ import annotations

import json
from pathlib import Path

from clinieval.cli.suite import suite_parts, write_demo_suite
from tests.conftest import run_cli
from tests.fault_server import FaultServer


def test_every_part_asks_what_it_planned_and_the_report_asks_nothing(
    tmp_path: Path, smollm2_path: Path
) -> None:
    with FaultServer(answer="A") as one, FaultServer(answer="A") as two:
        first, second = f"openai:{one.url}@fault", f"openai:{two.url}@fault"
        path = write_demo_suite(tmp_path / "demo", [first, second], seed=0)
        text = path.read_text(encoding="utf-8").replace('"llamacpp:smollm2-135m-instruct"', f'"{first}"')
        text = text.replace(
            "[benchmarks.medalign]\n", f'[benchmarks.medalign]\ntokenizer = "gguf:{smollm2_path}"\n'
        )
        path.write_text(text, encoding="utf-8")
        plan = run_cli("suite", "plan", str(path))
        assert plan.returncode == 0, plan.stderr
        [total] = [line for line in plan.stdout.splitlines() if "model calls in all" in line]
        planned = int(total.split(", ")[1].split()[0].replace(",", ""))

        out = tmp_path / "run"
        done = run_cli("suite", "run", str(path), "--out", str(out), "--no-progress")
        assert "failed:" not in done.stderr, done.stderr
        cells = json.loads((out / "suite.json").read_text(encoding="utf-8"))["cells"]
        assert {c["status"] for c in cells.values()} == {"complete"}
        assert {c["benchmark"] for c in cells.values()} == {p.name for p in suite_parts()}
        assert sum(c["planned_calls"] for c in cells.values()) == planned
        assert len(one.log.received) + len(two.log.received) == planned

        report = run_cli("suite", "report", str(out))
        assert report.returncode == 0, report.stderr
        assert len(one.log.received) + len(two.log.received) == planned  # the report asked nothing
    board = json.loads((out / "report" / "leaderboard.json").read_text(encoding="utf-8"))
    metrics = {b["name"]: b["metric"] for b in board["benchmarks"]}
    assert "pubmedqa" in metrics
    # what this suite scored (the demo's MedAlign has no judge), not the benchmark's generic line
    assert metrics["medalign"].startswith("key_facts_f1"), metrics["medalign"]
    for part in suite_parts():
        # the suite's names ("fault", "fault-2"), not the one name both servers report
        [page] = (out / "report" / part.name).glob("*.html")
        assert "fault-2" in page.read_text(encoding="utf-8"), f"{part.name}'s report lacks the second model"
