"""AutoMedEval's suite part (issue 29): the models under test judge the set. Bad data fails before
any model call with one error naming the file; the plan counts exactly the judge requests of a
fresh cell and a rerun makes none; the per-item headline averages to the benchmark's own
agreement figures (the paper's per-run estimator), per run too; a failed call is left out and
counted while an unparsed reply counts wrong, as in the paper; the report is AutoMedEval's own.
The counting cells talk to a local OpenAI-compatible server started by the test; one cell runs
the real embedded model. About 15 s on 2 cores, most of it the embedded model's cell.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path

import pytest

from clinieval.benchmarks.automedeval import BENCHMARK
from clinieval.benchmarks.automedeval.convert import set_line
from clinieval.benchmarks.automedeval.data import load_set
from clinieval.benchmarks.automedeval.judge_set import JudgeItem
from clinieval.benchmarks.automedeval.overlap_judge import SPEC as OVERLAP
from clinieval.benchmarks.automedeval.suite_part import AutoMedEvalOptions, AutoMedEvalPart
from clinieval.benchmarks.automedeval.synth import synthetic_set
from clinieval.errors import UserError
from clinieval.models.catalog import DEMO_MODELS
from clinieval.models.spec import BackendOptions
from clinieval.suite.part import Cell, Prepared, Shared, SuiteModel
from tests.fault_server import FaultServer

PART = AutoMedEvalPart()
QUIET = Shared(progress=False, backend=BackendOptions(max_retries=0))


def _reply(prompt: str) -> str:
    """A judge's reply in the paper's format, scores varied by the answers; one prompt in five
    gets a reply with no score line (unparsed)."""
    answers = re.findall(r"^Doctor (\d+): (.*)$", prompt.split("[Doctors' Answers]")[-1], re.MULTILINE)
    if sum(map(ord, prompt)) % 5 == 0:
        return "Analyze: Step 1: the answers differ. I cannot decide."
    scores = " ".join(f"Doctor {i}: {1 + len(text) % 5} points." for i, text in answers)
    return f"Analyze: Step 1: compared with the reference.\nScore: {scores}"


def _oracle(items: list[JudgeItem]) -> Callable[[str], str]:
    """A judge that reproduces the physicians' ordering (their mean scores' dense ranks, 1-5)."""
    human = {r.text: r.human_score() for item in items for r in item.responses}

    def reply(prompt: str) -> str:
        answers = re.findall(r"^Doctor (\d+): (.*)$", prompt.split("[Doctors' Answers]")[-1], re.MULTILINE)
        means = [human[text] for _, text in answers]
        ranks = {v: n for n, v in enumerate(sorted(set(means)), 1)}
        scores = " ".join(f"Doctor {i}: {ranks[m]} points." for (i, _), m in zip(answers, means, strict=True))
        return f"Analyze: Step 1: as the physicians.\nScore: {scores}"

    return reply


def _set(tmp_path: Path, n: int = 6, *, fault: bool = False) -> Path:
    items = synthetic_set(n, seed=3)
    lines = [set_line(x) for x in items]
    if fault:
        lines[1]["question"] = "FAULT:500x99 " + str(lines[1]["question"])
    path = tmp_path / "set.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return path


def _prepared(tmp_path: Path, shared: Shared = QUIET, **options: object) -> Prepared:
    opts = AutoMedEvalOptions(data=Path("set.jsonl"), **options)  # type: ignore[arg-type]
    return PART.prepare(opts, shared, tmp_path)


def _cell(root: Path, name: str, spec: str, shared: Shared = QUIET) -> Cell:
    return Cell(SuiteModel(name, spec), root / name, shared)


def test_the_benchmark_offers_its_part() -> None:
    part = BENCHMARK.suite()
    assert isinstance(part, AutoMedEvalPart) and part.options is AutoMedEvalOptions


def test_bad_data_is_one_error_naming_the_file_before_any_model(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="automedeval needs `data`"):
        PART.prepare(AutoMedEvalOptions(), QUIET, tmp_path)
    with pytest.raises(UserError, match=r"missing\.jsonl: automedeval\.data not found"):
        PART.prepare(AutoMedEvalOptions(data=Path("missing.jsonl")), QUIET, tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"empty: automedeval\.data is a folder, so it must hold exactly one"):
        PART.prepare(AutoMedEvalOptions(data=Path("empty")), QUIET, tmp_path)
    good = json.loads(_set(tmp_path).read_text().splitlines()[0])
    broken = dict(good, responses=good["responses"][:1])
    (tmp_path / "set.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(broken) + "\n")
    with pytest.raises(UserError, match=r"set\.jsonl:2"):
        _prepared(tmp_path)
    unrated = [dict(r, ratings={}) for r in good["responses"]]
    (tmp_path / "set.jsonl").write_text(json.dumps(dict(good, responses=unrated)) + "\n")
    with pytest.raises(UserError, match=r"set\.jsonl: no item has every response rated"):
        _prepared(tmp_path)
    (tmp_path / "set.jsonl").write_text(
        json.dumps(dict(good, id="q0", responses=unrated)) + "\n" + json.dumps(good) + "\n"
    )
    with pytest.raises(
        UserError, match=r"none of the first 1 items \(the suite's limit\) has every response"
    ):
        _prepared(tmp_path, dataclasses.replace(QUIET, limit=1))


def test_plan_counts_the_requests_of_a_fresh_cell_and_a_rerun_asks_nothing(tmp_path: Path) -> None:
    _set(tmp_path)
    shared = Shared(limit=5, progress=False, backend=BackendOptions(max_retries=0))
    prepared = _prepared(tmp_path, shared, repeats=2)
    assert prepared.items == 5
    with FaultServer(responder=_reply) as server:
        cell = _cell(tmp_path / "cells", "scripted", f"openai:{server.url}@fault", shared)
        steps = PART.plan(prepared, cell)
        asyncio.run(PART.run(prepared, cell))
        assert len(server.log.received) == sum(s.calls for s in steps) == 5 * 2
        asyncio.run(PART.run(prepared, cell))
        assert len(server.log.received) == 10  # every judge call came from the cell's cache
    assert [s.what for s in steps] == ["judge x2"]


@pytest.mark.parametrize("agreement", ["triple", "2-tuple"])
def test_headline_equals_the_benchmark_agreement_per_run_and_overall(tmp_path: Path, agreement: str) -> None:
    from clinieval.benchmarks.automedeval.analysis import AnalysisSettings, analyze, read_judge_runs

    _set(tmp_path)
    prepared = _prepared(tmp_path, repeats=2, agreement=agreement, order="balanced", rationale=False)
    items = load_set(tmp_path / "set.jsonl")
    with FaultServer(responder=_reply) as server, FaultServer(responder=_oracle(items)) as oracle:
        cells = [
            _cell(tmp_path / "cells", "scripted", f"openai:{server.url}@fault"),
            _cell(tmp_path / "cells", "overlap", OVERLAP),
            _cell(tmp_path / "cells", "oracle", f"openai:{oracle.url}@fault"),
        ]
        for cell in cells:
            asyncio.run(PART.run(prepared, cell))
    result = analyze(items, read_judge_runs([c.out for c in cells]), AnalysisSettings(rationale=False))
    key = "accuracy_triple" if agreement == "triple" else "accuracy_2tuple"
    figures = []
    for cell, block in zip(cells, result["judges"], strict=True):
        headline = PART.headline(prepared, cell)
        assert headline.failed == 0 and set(headline.scores) == {x.id for x in items}
        mean = sum(headline.scores.values()) / len(headline.scores)
        assert mean == pytest.approx(block["agreement"][key])
        per_run = [sum(run.values()) / len(run) for run in headline.judge_runs]
        assert per_run == pytest.approx(block["agreement"]["spread"][key]["values"])
        figures.append(mean)
    assert figures[2] == 1.0 and figures[0] < 1.0  # the physicians' own ordering agrees fully
    if agreement != "triple":
        return
    page = PART.report(prepared, cells, tmp_path / "report")
    assert page == tmp_path / "report" / "automedeval.html" and page.is_file()
    written = json.loads((tmp_path / "report" / "automedeval.json").read_text())
    assert [b["judge"] for b in written["judges"]] == ["scripted", "overlap", "oracle"]  # the suite's names


def test_a_failed_call_is_left_out_and_counted_while_an_unparsed_reply_counts_wrong(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.judging import read_verdicts

    _set(tmp_path, fault=True)
    prepared = _prepared(tmp_path, repeats=2)
    with FaultServer(responder=_reply) as server:
        cell = _cell(tmp_path / "cells", "scripted", f"openai:{server.url}@fault")
        asyncio.run(PART.run(prepared, cell))
    headline = PART.headline(prepared, cell)
    assert headline.failed == 1 and "synth-0001" not in headline.scores and len(headline.scores) == 5
    verdicts = read_verdicts(cell.out)
    unparsed = {e.item for e in verdicts if e.scores is None and e.item != "synth-0001"}
    assert unparsed  # the scripted judge leaves some replies without a score line
    assert all(headline.scores[i] == 0.0 for i in unparsed)


def test_the_synthetic_set_reads_back_and_the_embedded_model_judges_quietly(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    table = PART.synthetic(tmp_path / "data", seed=0)
    assert table["repeats"] == 1 and table["one_shot"] is True
    # shorter than the demo's (no worked example, 24 tokens): the test checks the wiring, not the judge
    options = AutoMedEvalOptions(
        data=Path(table["data"]), max_tokens=24, stop=tuple(table["stop"]), repeats=1
    )
    prepared = PART.prepare(options, Shared(limit=1), tmp_path)
    assert prepared.payload.synthetic and prepared.items == 1
    cell = _cell(tmp_path / "cells", "smollm2", DEMO_MODELS[0], Shared(limit=1))
    capfd.readouterr()
    asyncio.run(PART.run(prepared, cell))
    assert capfd.readouterr() == ("", "")  # the suite draws the only progress view
    headline = PART.headline(prepared, cell)
    assert headline.failed + len(headline.scores) == 1 and len(headline.judge_runs) == 1
    page = PART.report(prepared, [cell], tmp_path / "report")
    assert page is not None and "synthetic" in page.read_text()
