"""MedEval's suite part (issue 29): bad data fails before any model call with one error naming the
file; the plan counts exactly the requests a fresh cell makes, and a second run makes none; the
per-item headline averages to the benchmark's own analysis of the same arms; a failed call is left
out and counted; the report is MedEval's own. The counting cells talk to a local OpenAI-compatible
server started by the test (scripted, realistic answers); one cell runs the real embedded model.
About 25 s on 2 cores, most of it the embedded model's cell and the report's TF-IDF baselines.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from clinieval.benchmarks.medeval import BENCHMARK
from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS
from clinieval.benchmarks.medeval.suite_part import MedEvalOptions, MedEvalPart
from clinieval.errors import UserError
from clinieval.models.catalog import DEMO_MODELS
from clinieval.models.spec import BackendOptions
from clinieval.suite.part import Cell, Prepared, Shared, SuiteModel
from tests.fault_server import FaultServer

PART = MedEvalPart()


def _answer(prompt: str) -> str:
    """What a plausible model says to each of MedEval's prompts (varied by the prompt, so that some
    answers are right and some wrong)."""
    odd = sum(map(ord, prompt)) % 2
    if "abnormal identification" in prompt:
        return ["The sentence is normal.", "Label: abnormal"][odd]
    if "classify ambiguous sentences" in prompt:
        return ["ambiguous", "unambiguous"][odd]
    if "rewrite ambiguous sentences" in prompt:
        return "The lungs are clear and normal."
    if "observations of the chest reports" in prompt:
        return ", ".join(f"({o}, {['unknown', 'negative'][odd]})" for o in CHEXPERT_OBSERVATIONS)
    return "No acute cardiopulmonary process."


def _data(tmp_path: Path) -> Path:
    table = PART.synthetic(tmp_path / "data", seed=0)
    assert Path(table["data"]).is_dir()
    return Path(table["data"])


def _cell(root: Path, name: str, spec: str, shared: Shared) -> Cell:
    return Cell(SuiteModel(name, spec), root / name, shared)


def test_the_benchmark_offers_its_part() -> None:
    part = BENCHMARK.suite()
    assert isinstance(part, MedEvalPart) and part.options is MedEvalOptions


def test_bad_data_is_one_error_naming_the_file_before_any_model(tmp_path: Path) -> None:
    shared = Shared()
    with pytest.raises(UserError, match="medeval needs `data`"):
        PART.prepare(MedEvalOptions(), shared, tmp_path)
    with pytest.raises(UserError, match=r"nowhere: medeval\.data is not a folder"):
        PART.prepare(MedEvalOptions(data=Path("nowhere")), shared, tmp_path)
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "sentences.csv").write_text("id,sentence,domain,abnormal\ns1,Lungs are clear.,chest x-ray,maybe\n")
    with pytest.raises(UserError, match=r"sentences\.csv:2"):
        PART.prepare(MedEvalOptions(data=Path("bad")), shared, tmp_path)
    with pytest.raises(UserError, match=r"medeval\.tasks: task 'coding' is unknown"):
        PART.prepare(MedEvalOptions(data=_data(tmp_path), tasks=("coding",)), shared, tmp_path)
    (bad / "sentences.csv").write_text(
        "id,sentence,domain,abnormal,split\ns1,Lungs are clear.,chest x-ray,0,test\n"
    )
    with pytest.raises(UserError, match=r"bad: abnormality: 2 examples asked for, but the train split has 0"):
        PART.prepare(MedEvalOptions(data=Path("bad")), shared, tmp_path)
    zero = MedEvalOptions(data=Path("bad"), tasks=("abnormality", "codes"), shots="zero")
    with pytest.raises(UserError, match=r"bad: codes: no test item has what the task needs"):
        PART.prepare(zero, shared, tmp_path)


def _prepared(tmp_path: Path, shared: Shared, **options: object) -> Prepared:
    return PART.prepare(MedEvalOptions(data=_data(tmp_path), **options), shared, tmp_path)  # type: ignore[arg-type]


def test_plan_counts_the_requests_of_a_fresh_cell_and_a_rerun_asks_nothing(tmp_path: Path) -> None:
    shared = Shared(limit=3, progress=False, backend=BackendOptions(max_retries=0))
    prepared = _prepared(tmp_path, shared, balance="all")
    with FaultServer(responder=_answer) as server:
        cell = _cell(tmp_path / "cells", "scripted", f"openai:{server.url}@fault", shared)
        steps = PART.plan(prepared, cell)
        assert [s.what for s in steps] == [
            "arm abnormality-2shot", "arm ambiguity-2shot", "arm rewriting-3shot", "arm codes-2shot",
            "arm summarization-3shot",
        ]  # fmt: skip
        asyncio.run(PART.run(prepared, cell))
        assert len(server.log.received) == sum(s.calls for s in steps) == prepared.items
        asyncio.run(PART.run(prepared, cell))
        assert len(server.log.received) == prepared.items  # the rerun resumed everything
        # a smaller limit later scores only the items it asks, not what the larger run left
        smaller = _prepared(tmp_path, dataclasses.replace(shared, limit=2), balance="all")
        asyncio.run(PART.run(smaller, cell))
        assert len(server.log.received) == prepared.items
    assert len(PART.headline(smaller, cell).scores) == smaller.items < prepared.items
    assert len(PART.headline(prepared, cell).scores) == prepared.items
    # the paper's per-task examples are in the prompts (2 for the label tasks, 3 for rewriting)
    assert all(p.count("Sentence:") == 3 for p in server.log.received if "abnormal identification" in p)


def test_shot_settings_follow_the_paper_per_task() -> None:
    from clinieval.benchmarks.medeval.suite_part import arm_name, settings_for

    def names(**options: object) -> list[str]:
        opts = MedEvalOptions(**options)  # type: ignore[arg-type]
        return [arm_name(settings_for(t, opts, Shared(), None), t) for t in opts.tasks]

    assert names() == [
        "abnormality-2shot",
        "ambiguity-2shot",
        "rewriting-3shot",
        "codes-2shot",
        "summarization-3shot",
    ]
    # the paper's own examples where published; its number drawn from train for codes and summaries
    assert names(paper_examples=True) == [
        "abnormality-paper", "ambiguity-paper", "rewriting-paper", "codes-2shot", "summarization-3shot",
    ]  # fmt: skip
    assert names(shots="zero", split="validation")[0] == "abnormality-0shot-validation"
    # a setting that changes the prompt or the scoring names its own folder (issue 36): the labelled
    # and the label-free rewriting arms were both "rewriting-3shot", so one refused the other
    assert names(rewrite_label=False, qualified="strict") == [
        "abnormality-2shot-strict", "ambiguity-2shot-strict", "rewriting-3shot-nolabel", "codes-2shot",
        "summarization-3shot",
    ]  # fmt: skip
    assert names(shots="zero", rewrite_label=False)[2] == "rewriting-0shot-nolabel"


def test_an_arm_folder_names_the_examples_seed_and_absent_codes() -> None:
    from clinieval.benchmarks.medeval.task import MedEvalSettings, arm_label

    assert arm_label("rewriting", MedEvalSettings(shots=3, seed=4)) == "rewriting-3shot-seed4"
    assert arm_label("rewriting", MedEvalSettings(paper_examples=True, seed=4)) == "rewriting-paper"
    assert arm_label("rewriting", MedEvalSettings(seed=4)) == "rewriting-0shot"  # no examples drawn
    assert arm_label("codes", MedEvalSettings(absent_as="negative")) == "codes-0shot-absent-negative"
    assert arm_label("codes", MedEvalSettings(rewrite_label=False)) == "codes-0shot"  # not its setting


def test_equal_balance_gives_every_task_the_same_number_of_items(tmp_path: Path) -> None:
    everything = _prepared(tmp_path, Shared(), balance="all")
    equal = _prepared(tmp_path, Shared())
    counts = everything.payload.counts
    assert len(set(counts.values())) > 1  # the corpus holds more of some tasks than of others
    assert set(equal.payload.counts.values()) == {min(counts.values())}
    assert equal.items == 5 * min(counts.values())


def test_headline_equals_the_benchmark_analysis_and_the_report_is_its_own(tmp_path: Path) -> None:
    from clinieval.benchmarks.medeval.analysis import main_value, medeval_analysis, read_arm
    from clinieval.benchmarks.medeval.comparisons import per_item

    shared = Shared(limit=4, progress=False, backend=BackendOptions(max_retries=0))
    prepared = _prepared(tmp_path, shared, balance="all", shots="zero")
    with FaultServer(responder=_answer) as one, FaultServer(answer="normal") as two:
        specs = [f"openai:{one.url}@fault", f"openai:{two.url}@fault"]
        cells = [_cell(tmp_path / "cells", n, spec, shared) for n, spec in zip("ab", specs, strict=True)]
        for cell in cells:
            asyncio.run(PART.run(prepared, cell))
    headline = PART.headline(prepared, cells[0])
    assert headline.failed == 0 and len(headline.scores) == prepared.items
    arms = {a.task: a for a in (read_arm(p) for p in headline.runs)}
    result = {r["task"]: r for r in medeval_analysis(list(arms.values()))["arms"] if r["model"] == specs[0]}
    for task, arm in arms.items():
        mine = {k.split("/", 1)[1]: v for k, v in headline.scores.items() if k.startswith(f"{task}/")}
        # the suite's item score is the benchmark's own per-item value on 0-1
        assert mine == pytest.approx({k: v / 100 for k, v in per_item(arm).items()})
        if task != "rewriting":  # rewriting's table figure is corpus BLEU-4, not a mean over items
            assert 100 * sum(mine.values()) / len(mine) == pytest.approx(main_value(result[task]))
    assert 0 < sum(headline.scores.values()) < len(headline.scores)  # some answers right, some wrong
    # one sentence asked in two tasks is one cluster
    assert headline.clusters is not None
    shared_ids = {k.split("/", 1)[1] for k in headline.scores if k.startswith("abnormality/")}
    sid = sorted(shared_ids & {k.split("/", 1)[1] for k in headline.scores if k.startswith("ambiguity/")})[0]
    assert headline.clusters[f"abnormality/{sid}"] == headline.clusters[f"ambiguity/{sid}"]

    page = PART.report(prepared, cells, tmp_path / "report")
    assert page == tmp_path / "report" / "medeval.html" and page.is_file()
    written = json.loads((tmp_path / "report" / "medeval.json").read_text())
    models = {r["model"] for r in written["arms"]}
    assert {*(c.model.name for c in cells), "baseline:tfidf"} <= models  # the suite's names, not the specs
    assert "synthetic" in page.read_text()  # the report says what the data is


def test_a_failed_call_is_left_out_and_counted(tmp_path: Path) -> None:
    data = tmp_path / "tables"
    data.mkdir()
    rows = [
        ("t1", "Lungs are clear.", "normal", "train"),
        ("t2", "There is a large effusion.", "abnormal", "train"),
        ("s1", "Heart size is normal.", "normal", "test"),
        ("s2", "FAULT:500x9 Small left pleural effusion.", "abnormal", "test"),
        ("s3", "Right lower lobe consolidation.", "abnormal", "test"),
    ]
    lines = ["id,sentence,domain,abnormal,split", *(f"{i},{s},chest x-ray,{a},{sp}" for i, s, a, sp in rows)]
    (data / "sentences.csv").write_text("\n".join(lines) + "\n")
    shared = Shared(progress=False, backend=BackendOptions(max_retries=0))
    prepared = PART.prepare(MedEvalOptions(data=Path("tables"), tasks=("abnormality",)), shared, tmp_path)
    assert prepared.items == 3
    with FaultServer(answer="abnormal") as server:
        cell = _cell(tmp_path / "cells", "m", f"openai:{server.url}@fault", shared)
        asyncio.run(PART.run(prepared, cell))
    headline = PART.headline(prepared, cell)
    assert headline.failed == 1
    assert headline.scores == {"abnormality/s1": 0.0, "abnormality/s3": 1.0}


def test_the_embedded_model_runs_a_cell_quietly(tmp_path: Path, capfd: pytest.CaptureFixture[str]) -> None:
    shared = Shared(limit=2, progress=False)
    prepared = _prepared(tmp_path, shared, tasks=("abnormality",), shots="zero", max_tokens=16, stop=("\n",))
    cell = _cell(tmp_path / "cells", "smollm2", DEMO_MODELS[0], shared)
    capfd.readouterr()
    asyncio.run(PART.run(prepared, cell))
    assert capfd.readouterr() == ("", "")  # the suite draws the only progress view
    headline = PART.headline(prepared, cell)
    assert headline.failed + len(headline.scores) == 2
    assert set(headline.scores.values()) <= {0.0, 1.0}
