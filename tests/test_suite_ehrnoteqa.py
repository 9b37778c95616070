"""EHRNoteQA's suite part (issue 29) over real model calls: the embedded SmolLM2 as the model under
test (answers and option log-likelihoods), and local OpenAI-compatible servers
(tests/fault_server.py) as a scripted judge and as models, one of which is refused on one
question. The plan is checked against the calls made, a second run against asking nothing, and
the headline against the benchmark's own analysis."""

from __future__ import annotations

import asyncio
import itertools
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from clinieval.benchmarks.ehrnoteqa import BENCHMARK
from clinieval.benchmarks.ehrnoteqa.suite_part import EHRNoteQAOptions
from clinieval.errors import UserError
from clinieval.models.spec import BackendOptions
from clinieval.suite.part import Cell, Shared, SuiteJudge, SuiteModel, SuitePart
from tests.fault_server import FaultServer
from tests.suite_helpers import CountedCalls

MODEL = "llamacpp:smollm2-135m-instruct"
NOTES = [
    "DISCHARGE SUMMARY\nPRINCIPAL DIAGNOSIS: atrial fibrillation.\nMEDICATIONS:\n- Metoprolol 25 mg",
    "DISCHARGE SUMMARY\nPRINCIPAL DIAGNOSIS: pneumonia.\nDISCHARGE MEDICATIONS:\n- Amoxicillin 500 mg",
]


def _part() -> SuitePart:
    part = BENCHMARK.suite()
    assert part is not None
    return part


def _inline(path: Path) -> Path:
    """Three short questions over two patients (notes inline); the third carries the fault
    server's content-filter marker, so a model behind that server is refused on it."""
    items = [
        {
            "id": f"q{i}",
            "patient_id": str(i % 2),
            "question": f"Which drug was the patient discharged on? ({i})"
            + (" FAULT:FILTER" if i == 2 else ""),
            "choices": [
                "Aspirin",
                "Metoprolol 25 mg",
                "Heparin",
                f"Warfarin {i + 1} mg",
                "Amoxicillin 500 mg",
            ],
            "answer": "B" if i % 2 == 0 else "E",
            "notes": [NOTES[i % 2]],
        }
        for i in range(3)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in items), encoding="utf-8")
    return path


def _verdicts() -> Iterator[str]:
    """The paper's judge answers yes or no; every third verdict is no, so repeats differ."""
    for n in itertools.count():
        yield "No." if n % 3 == 1 else "Yes."


def test_prepare_refuses_bad_data_before_any_model(tmp_path: Path) -> None:
    part = _part()
    shared = Shared()
    with pytest.raises(UserError, match="nowhere: EHRNoteQA data not found"):
        part.prepare(EHRNoteQAOptions(data=Path("nowhere")), shared, tmp_path)
    (tmp_path / "folder").mkdir()
    with pytest.raises(UserError, match=r"folder: expected qa.jsonl and discharge.csv"):
        part.prepare(EHRNoteQAOptions(data=Path("folder")), shared, tmp_path)
    (tmp_path / "bad.jsonl").write_text('{"id": "1", "question": "Q?", "answer": "A"}\n', encoding="utf-8")
    with pytest.raises(UserError, match=r"bad.jsonl:1"):
        part.prepare(EHRNoteQAOptions(data=Path("bad.jsonl")), shared, tmp_path)
    with pytest.raises(UserError, match=r"\[benchmarks.ehrnoteqa\] data"):
        part.prepare(EHRNoteQAOptions(), shared, tmp_path)


def test_prepare_refuses_scoring_it_cannot_do(tmp_path: Path) -> None:
    part, data = _part(), _inline(tmp_path / "qa.jsonl")
    with pytest.raises(UserError, match="free is scored by the judge only"):
        part.prepare(EHRNoteQAOptions(data=data, format="free"), Shared(), tmp_path)
    with pytest.raises(UserError, match="needs loglik = true"):
        part.prepare(EHRNoteQAOptions(data=data, scoring="loglik_text", loglik=False), Shared(), tmp_path)
    with pytest.raises(UserError, match="levels: '3' is not a level"):
        part.prepare(EHRNoteQAOptions(data=data, levels=("3",)), Shared(), tmp_path)
    prepared = part.prepare(EHRNoteQAOptions(data=data), Shared(limit=2), tmp_path)
    assert prepared.items == 2 and prepared.clustered and prepared.data_files == [data]
    assert "headline letter_extract" in prepared.describe


@pytest.mark.slow
def test_plan_equals_the_calls_and_a_rerun_asks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    part, data = _part(), _inline(tmp_path / "qa.jsonl")
    counted = CountedCalls(monkeypatch)
    verdicts = _verdicts()
    with FaultServer(responder=lambda _: next(verdicts)) as judge:
        spec = f"openai:{judge.url}@fault"
        shared = Shared(backend=BackendOptions(n_ctx=1024, max_retries=0), judge=SuiteJudge(spec, 2), limit=2)
        prepared = part.prepare(EHRNoteQAOptions(data=data, max_tokens=8), shared, tmp_path)
        cell = Cell(SuiteModel("smol", MODEL), tmp_path / "ehrnoteqa" / "smol", shared)
        steps = part.plan(prepared, cell)
        # each question: an answer and one call scoring the five options' log-likelihoods
        assert [(s.asks, s.calls) for s in steps] == [(MODEL, 4), (spec, 4)]
        asyncio.run(part.run(prepared, cell))
        assert counted.calls == steps[0].calls and len(judge.log.received) == steps[1].calls
        asyncio.run(part.run(prepared, cell))  # resumes: every answer and verdict is recorded
        assert counted.calls == steps[0].calls and len(judge.log.received) == steps[1].calls
    headline = part.headline(prepared, cell)
    assert headline.metric.startswith("judge (mc): correct per") and headline.failed == 0
    assert headline.clusters == {"q0": "0", "q1": "1"} and len(headline.judge_runs) == 2
    assert sorted(p.name for p in cell.out.iterdir()) == ["mc"]


def test_the_judge_is_on_the_page_with_its_parse_rate_and_agreement_with_letters(tmp_path: Path) -> None:
    """Issue 38: which model judged, its repeats, how many replies gave a verdict, whether it judged
    itself, and how often it agrees with letter extraction on the same answers, on the page."""
    from clinieval.analysis.leaderboard import BenchmarkScores, build_leaderboard
    from clinieval.suite.leaderboard import write_leaderboard
    from clinieval.suite.report import _judge_of

    part, data = _part(), _inline(tmp_path / "qa.jsonl")
    verdicts = _verdicts()
    with FaultServer(responder=lambda _: next(verdicts)) as judge:
        spec = f"openai:{judge.url}@fault"
        shared = Shared(backend=BackendOptions(n_ctx=1024, max_retries=0), judge=SuiteJudge(spec, 2), limit=2)
        prepared = part.prepare(EHRNoteQAOptions(data=data, max_tokens=8), shared, tmp_path)
        cell = Cell(SuiteModel("smol", MODEL), tmp_path / "ehrnoteqa" / "smol", shared)
        asyncio.run(part.run(prepared, cell))
    headline = part.headline(prepared, cell)
    facts = _judge_of(headline)
    assert facts is not None
    assert (facts["repeats"], facts["replies"], facts["parsed"]) == (2, 4, 4) and "fault" in facts["judge"]
    assert facts["self_judged"] is False and facts["unparsed_items"] == 0
    det = facts["deterministic"]
    assert det["name"] == "letter extraction" and det["items"] == 2
    assert det["judge_mean"] == pytest.approx(sum(headline.scores.values()) / 2)
    scores = BenchmarkScores("ehrnoteqa", "judge", {"smol": headline.scores, "other": headline.scores})
    self_judged = {**facts, "self_judged": True}
    write_leaderboard(
        build_leaderboard([scores]), {}, tmp_path / "page", title="t",
        judges={"ehrnoteqa": {"smol": facts, "other": self_judged}},
    )  # fmt: skip
    page = (tmp_path / "page" / "leaderboard.html").read_text(encoding="utf-8")
    assert "The judge" in page and "4 of 4 (100.0%)" in page and "with letter extraction" in page
    assert "answers were judged by the same model" in page.replace("&#x27;", "'")
    board = json.loads((tmp_path / "page" / "leaderboard.json").read_text(encoding="utf-8"))
    assert board["judges"]["ehrnoteqa"]["smol"]["parse_rate"] == 1.0


@pytest.mark.slow
def test_headline_is_the_analysis_number_and_refusals_are_left_out(tmp_path: Path) -> None:
    """Two models behind servers and the scripted judge: the refused question is counted, not
    scored; each judge repeat's share and the letter accuracy equal the benchmark's analysis."""
    part, data = _part(), _inline(tmp_path / "qa.jsonl")
    verdicts = _verdicts()
    with (
        FaultServer(answer="B. Metoprolol 25 mg", model_fields={"id": "bee"}) as bee,
        FaultServer(answer="E", model_fields={"id": "eee"}) as eee,
        FaultServer(responder=lambda _: next(verdicts)) as judge,
    ):
        shared = Shared(
            backend=BackendOptions(max_retries=0), judge=SuiteJudge(f"openai:{judge.url}@fault", 3)
        )
        options = EHRNoteQAOptions(data=data, loglik=False, max_tokens=16)
        prepared = part.prepare(options, shared, tmp_path)
        cells = [
            Cell(SuiteModel(name, f"openai:{server.url}@{name}"), tmp_path / "ehrnoteqa" / name, shared)
            for name, server in (("bee", bee), ("eee", eee))
        ]
        for cell in cells:
            asyncio.run(part.run(prepared, cell))
        assert len(judge.log.received) == 2 * 2 * 3  # two answered questions per model, 3 repeats
    page = part.report(prepared, cells, tmp_path / "report")
    assert page is not None and page.name == "report.html" and page.is_file()
    analysis = json.loads((tmp_path / "report" / "analysis.json").read_text())["formats"]["mc"]["per_model"]
    letters = part.prepare(options, Shared(), tmp_path)  # no judge: letter extraction
    for cell in cells:
        headline = part.headline(prepared, cell)
        assert headline.failed == 1 and sorted(headline.scores) == ["q0", "q1"]
        shown = analysis[cell.model.name]
        # the analysis counts the refusal as incorrect (the paper's rule): the headline leaves it
        # out, so each repeat's share is the analysis's x 3 questions / 2 answered
        for r, run in enumerate(headline.judge_runs):
            share = 100 * sum(run.values()) / len(run)
            assert share == pytest.approx(shown["judge"]["per_repeat"][r] * 3 / 2)
        plain = part.headline(letters, cell)
        assert plain.metric.startswith("letter_extract (mc): ") and plain.judge_runs == []
        accuracy = 100 * sum(plain.scores.values()) / len(plain.scores)
        assert accuracy == pytest.approx(shown["letter_extract"]["score"] * 3 / 2)
    assert part.headline(letters, cells[0]).scores == {"q0": 1.0, "q1": 0.0}


def test_synthetic_table_reads_the_set_it_wrote(tmp_path: Path) -> None:
    part = _part()
    table = part.synthetic(tmp_path / "data", 0)
    options = EHRNoteQAOptions(**{k: Path(v) if k == "data" else v for k, v in table.items()})
    prepared = part.prepare(options, Shared(judge=SuiteJudge(MODEL, 2)), tmp_path)
    # six patients with a question each: the demo's calibration step rates four of them
    assert prepared.items == 6 and "headline judge" in prepared.describe
    cell = Cell(SuiteModel("smol", MODEL), tmp_path / "cell", Shared(judge=SuiteJudge(MODEL, 2)))
    assert [s.calls for s in part.plan(prepared, cell)] == [6, 12]  # no log-likelihood pass
    assert part.synthetic(tmp_path / "data", 0) == table  # rewritten in place


@pytest.mark.slow
def test_free_text_is_judged_by_the_free_text_judge(tmp_path: Path) -> None:
    part, data = _part(), _inline(tmp_path / "qa.jsonl")
    with (
        FaultServer(answer="Metoprolol 25 mg twice daily.") as model,
        FaultServer(
            responder=lambda p: "Score: 1\nReasoning: matches" if "(0)" in p else "Score: 0"
        ) as judge,
    ):
        spec = f"openai:{judge.url}@fault"
        shared = Shared(backend=BackendOptions(max_retries=0), judge=SuiteJudge(spec, 2), limit=2)
        prepared = part.prepare(EHRNoteQAOptions(data=data, format="free", max_tokens=16), shared, tmp_path)
        cell = Cell(SuiteModel("m", f"openai:{model.url}@fault"), tmp_path / "ehrnoteqa" / "m", shared)
        steps = part.plan(prepared, cell)
        assert [(s.what, s.calls) for s in steps] == [("arm free", 2), ("judge x2", 4)]
        asyncio.run(part.run(prepared, cell))
        assert len(model.log.received) == 2 and len(judge.log.received) == 4
        assert "Choices" not in model.log.received[0]  # the free-text prompt has no options
    headline = part.headline(prepared, cell)
    assert headline.metric.startswith("judge (free): ") and headline.scores == {"q0": 1.0, "q1": 0.0}
    assert [dict(r) for r in headline.judge_runs] == [{"q0": 1.0, "q1": 0.0}] * 2
