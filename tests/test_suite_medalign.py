"""MedAlign's suite part (issue 29) over real model calls: the embedded SmolLM2 as the model under
test, and local OpenAI-compatible servers (tests/fault_server.py) as a scripted judge and as a
model whose provider refuses one instruction. The plan is checked against the calls made, a
second run against asking nothing, and the headline against the benchmark's own report."""

from __future__ import annotations

import asyncio
import csv
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinieval.benchmarks.medalign import BENCHMARK
from clinieval.benchmarks.medalign.suite_part import MedAlignOptions
from clinieval.benchmarks.medalign.synth import build_synthetic_set
from clinieval.errors import UserError
from clinieval.models.spec import BackendOptions
from clinieval.suite.part import Cell, Shared, SuiteJudge, SuiteModel, SuitePart
from tests.fault_server import FaultServer
from tests.suite_helpers import CountedCalls

MODEL = "llamacpp:smollm2-135m-instruct"
SERVER_FIT = {"tokenizer": "tiktoken:cl100k_base", "max_context": 1024}
"""A model on a server has no tokenizer of its own here: the record is budgeted in cl100k."""


def _part() -> SuitePart:
    part = BENCHMARK.suite()
    assert part is not None
    return part


@pytest.fixture(scope="module")
def data(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic set (2 patients, one instruction each); the second instruction carries the
    fault server's content-filter marker, so a model behind that server is refused on it."""
    root = tmp_path_factory.mktemp("suite-medalign") / "data"
    built = build_synthetic_set(root, patients=2, per_patient=1)
    with built.instructions_csv.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f))
    rows[2][1] += " FAULT:FILTER"
    with built.instructions_csv.open("w", newline="", encoding="utf-8") as f:
        csv.writer(f, lineterminator="\n").writerows(rows)
    return root


def _verdicts() -> Iterator[str]:
    """A judge that alternates correct and incorrect verdicts, so repeats differ."""
    for n in itertools.count():
        bad = "true" if n % 3 == 1 else "false"
        yield json.dumps({"rationale": "checked", "C1": False, "C2": False, "C3": bad == "true", "score": 3})


def test_prepare_refuses_bad_data_before_any_model(tmp_path: Path) -> None:
    part = _part()
    shared = Shared()
    with pytest.raises(UserError, match="MedAlign data folder not found"):
        part.prepare(MedAlignOptions(data=Path("nowhere")), shared, tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(UserError, match=r"empty: neither the MedAlign release"):
        part.prepare(MedAlignOptions(data=Path("empty")), shared, tmp_path)
    bad = tmp_path / "bad"
    (bad / "ehrs").mkdir(parents=True)
    (bad / "instructions.csv").write_text("instruction_id,filename\n1,1.xml\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"instructions.csv: missing column\(s\) question"):
        part.prepare(MedAlignOptions(data=Path("bad")), shared, tmp_path)
    with pytest.raises(UserError, match=r"\[benchmarks.medalign\] data"):
        part.prepare(MedAlignOptions(), shared, tmp_path)


def test_prepare_refuses_a_set_with_nothing_to_score(data: Path, tmp_path: Path) -> None:
    """The release has no answer keys: without a judge or a text metric nothing is scored."""
    rows = list(csv.DictReader((data / "instructions.csv").open(encoding="utf-8")))
    plain = tmp_path / "plain"
    (plain / "ehrs").mkdir(parents=True)
    lines = ["instruction_id,question,filename"]
    for r in rows:
        lines.append(f'{r["instruction_id"]},"{r["question"]}",{r["filename"]}')
        (plain / "ehrs" / r["filename"]).write_text((data / "ehrs" / r["filename"]).read_text())
    (plain / "instructions.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(UserError, match="nothing to score without a judge"):
        _part().prepare(MedAlignOptions(data=plain), Shared(), tmp_path)
    judged = _part().prepare(MedAlignOptions(data=plain), Shared(judge=SuiteJudge("x", 1)), tmp_path)
    assert judged.items == 2 and judged.clustered
    assert judged.data_files == [
        plain / "instructions.csv",
        plain / "ehrs" / "1.xml",
        plain / "ehrs" / "2.xml",
    ]


@pytest.mark.slow
def test_plan_equals_the_calls_and_a_rerun_asks_nothing(
    data: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part = _part()
    counted = CountedCalls(monkeypatch)
    verdicts = _verdicts()
    with FaultServer(responder=lambda _: next(verdicts)) as judge:
        shared = Shared(
            backend=BackendOptions(n_ctx=1024, max_retries=0),
            judge=SuiteJudge(f"openai:{judge.url}@fault", 2),
            limit=1,  # the first instruction (the second is for the refusal test)
        )
        prepared = part.prepare(
            MedAlignOptions(data=data, max_tokens=8, max_context=512, snippets=1, judge_max_tokens=64),
            shared,
            tmp_path,
        )
        assert prepared.items == 1
        cell = Cell(SuiteModel("smol", MODEL), tmp_path / "medalign" / "smol", shared)
        steps = part.plan(prepared, cell)
        assert [(s.asks, s.calls) for s in steps] == [(MODEL, 1), (f"openai:{judge.url}@fault", 2)]
        asyncio.run(part.run(prepared, cell))
        assert counted.calls == steps[0].calls
        assert len(judge.log.received) == steps[1].calls
        asyncio.run(part.run(prepared, cell))  # resumes: every answer and verdict is recorded
        assert counted.calls == steps[0].calls and len(judge.log.received) == steps[1].calls
    headline = part.headline(prepared, cell)
    assert headline.metric.startswith("judge_correct: correct per") and headline.failed == 0
    assert list(headline.scores) == ["1-01"] and headline.clusters == {"1-01": "1"}
    assert len(headline.judge_runs) == 2
    assert headline.runs == [cell.out / "keep-recent"]
    assert not any(p.name == "report" for p in cell.out.rglob("*"))  # run writes only its arm


def test_judge_replies_without_a_verdict_are_counted_apart_from_failed_calls(
    data: Path, tmp_path: Path
) -> None:
    """Issue 38: they were counted as failed model calls, and since the replies are cached every
    rerun of the suite exited 3 asking to retry what a retry cannot change."""
    from clinieval.suite.execute import CellOutcome, SuiteOutcome, summary_lines

    part = _part()
    with FaultServer(responder=lambda _: "I would need more context to decide.") as judge:
        shared = Shared(
            backend=BackendOptions(n_ctx=1024, max_retries=0),
            judge=SuiteJudge(f"openai:{judge.url}@fault", 2),
            limit=1,
        )
        opts = MedAlignOptions(data=data, max_tokens=8, max_context=512, snippets=1, judge_max_tokens=64)
        prepared = part.prepare(opts, shared, tmp_path)
        cell = Cell(SuiteModel("smol", MODEL), tmp_path / "medalign" / "smol", shared)
        asyncio.run(part.run(prepared, cell))
        headline = part.headline(prepared, cell)
    assert (headline.unparsed, headline.failed, dict(headline.scores)) == (1, 0, {})
    outcome = SuiteOutcome((CellOutcome("medalign × smol", "complete", 1.0, unparsed_items=1),))
    assert not outcome.with_failed_items  # so `suite run` exits 0, not 3
    lines = summary_lines(outcome, tmp_path)
    assert any("1 items got no verdict from the judge" in line for line in lines)
    assert not any("retry" in line for line in lines)


@pytest.mark.slow
def test_headline_is_the_reports_number_and_refusals_are_left_out(data: Path, tmp_path: Path) -> None:
    """Two models behind servers (one answers every key fact, one little), the scripted judge:
    the refused instruction is counted, not scored; each model's mean equals the report's."""
    part = _part()
    verdicts = _verdicts()
    full = "The creatinine decreased; the patient is 42."  # both instructions' key facts
    with (
        FaultServer(answer=full, model_fields={"id": "good"}) as good,
        FaultServer(answer="I do not know.", model_fields={"id": "poor"}) as poor,
        FaultServer(responder=lambda _: next(verdicts)) as judge,
    ):
        shared = Shared(
            backend=BackendOptions(max_retries=0), judge=SuiteJudge(f"openai:{judge.url}@fault", 3)
        )
        prepared = part.prepare(MedAlignOptions(data=data, max_tokens=16, **SERVER_FIT), shared, tmp_path)
        cells = [
            Cell(SuiteModel(name, f"openai:{server.url}@{name}"), tmp_path / "medalign" / name, shared)
            for name, server in (("good", good), ("poor", poor))
        ]
        for cell in cells:
            asyncio.run(part.run(prepared, cell))
        # the refused instruction was asked once per model and never judged
        assert sum("FAULT:FILTER" in p for p in good.log.received) == 1
        assert len(judge.log.received) == 2 * 3
    page = part.report(prepared, cells, tmp_path / "report")
    assert page is not None and page.name == "medalign.html" and page.is_file()
    result = json.loads((tmp_path / "report" / "medalign.json").read_text())
    # the paper's second view leaves provider errors out, as the headline does
    shown = result["views"]["without_errors"]["analyze"]["scores"]["judge_correct"]["per_model"]
    for cell in cells:
        headline = part.headline(prepared, cell)
        assert headline.failed == 1 and list(headline.scores) == ["1-01"]
        mean = sum(headline.scores.values()) / len(headline.scores)
        per_repeat = [r["1-01"] for r in headline.judge_runs]
        assert len(per_repeat) == 3 and mean == pytest.approx(sum(per_repeat) / 3)
        assert shown[f"{cell.model.name}/keep-recent"]["mean"] == pytest.approx(mean)
    # without a judge: key-fact F1, the mean `medalign run` prints (failed calls left out there too)
    keys = part.prepare(MedAlignOptions(data=data, max_tokens=16, **SERVER_FIT), Shared(), tmp_path)
    for cell in cells:
        facts = part.headline(keys, cell)
        assert facts.metric.startswith("key_facts_f1: ") and facts.failed == 1 and not facts.judge_runs
        summaries = json.loads((cell.out / "keep-recent" / "summary.json").read_text())["summaries"]
        printed = next(x for x in summaries if x["scorer"] == "key_facts_f1")
        assert sum(facts.scores.values()) / len(facts.scores) == pytest.approx(printed["mean"])
    good_f1, poor_f1 = (part.headline(keys, c).scores["1-01"] for c in cells)
    assert good_f1 > 0.5 and poor_f1 == 0.0  # F1: the key found, in a longer answer


def test_synthetic_table_reads_the_set_it_wrote(tmp_path: Path) -> None:
    part = _part()
    table = dict(part.synthetic(tmp_path / "data", 0))
    assert table.pop("judge") is False  # the tiny judge cannot write the rubric's verdict
    options = MedAlignOptions(**{k: Path(v) if k == "data" else v for k, v in table.items()})
    prepared = part.prepare(options, Shared(), tmp_path)
    assert prepared.items == 2 and "headline key_facts_f1" in prepared.describe
    assert part.synthetic(tmp_path / "data", 0) == {**table, "judge": False}  # rewritten in place
