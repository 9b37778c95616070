"""Retrieval and multi-step refinement: what reaches the model, in which order, and what is recorded."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from clinieval.benchmarks.medalign.prompts import MEDALIGN_PROMPT
from clinieval.context.fit import ChunkPolicy
from clinieval.context.refine import REFINE_PROMPT, RefinePolicy, RefineTemplate
from clinieval.context.retrieve import RetrievalPolicy, retrieve_visits, visit_spans
from clinieval.context.tokenizers import Tokenizer, tokenizer_from_spec
from clinieval.engine.session import RunRequest, RunResult, run_evaluation
from clinieval.errors import UserError
from clinieval.models.openai_http import OpenAIModel
from clinieval.records.runs import RunDir
from clinieval.scoring.scorers import ExactMatch
from clinieval.types import Sample
from tests.fault_server import FaultServer
from tests.test_context import _PlainModel

TOK = "tiktoken:cl100k_base"


def _visit(day: int, lines: list[str]) -> str:
    body = "".join(
        f'<measurement start="03/{day:02d}/2020 09:00 AM">\n<code>{x}</code>\n</measurement>\n' for x in lines
    )
    when = f"03/{day:02d}/2020 09:00"
    return f'<visit type="Office Visit" start="{when}">\n<day start="{when}">\n{body}</day>\n</visit>\n'


def _record() -> str:
    visits = [
        _visit(d, [f"[LOINC/8462-4] Diastolic blood pressure {70 + d + k} mm Hg" for k in range(8)])
        for d in range(1, 9)
    ]
    visits[2] = _visit(
        3, ["[ICD/163.5] Cerebral infarction stroke", "[RxNorm/1804799] alteplase thrombolysis"] * 4
    )
    return "<record>\n" + "".join(visits) + "</record>\n"


@pytest.fixture(scope="module")
def tok() -> Tokenizer:
    return tokenizer_from_spec(TOK)


def test_visit_spans_tile_the_record() -> None:
    text = _record()
    header_end, spans = visit_spans(text)
    assert text[:header_end] == "<record>\n" and len(spans) == 8
    assert "".join(text[a:b] for a, b in spans) == text[header_end:]
    assert visit_spans("no visits here") == (0, [(0, 14)])


def test_retrieval_keeps_the_relevant_visit_and_the_newest_in_time_order(tok: Tokenizer) -> None:
    text = _record()
    visit_tokens = tok.count(
        _visit(1, [f"[LOINC/8462-4] Diastolic blood pressure {71 + k} mm Hg" for k in range(8)])
    )
    budget = 3 * visit_tokens  # room for about three visits of eight
    kept, info = retrieve_visits(text, tok, budget, query="Which thrombolytic was given for the stroke?")
    assert tok.count(kept) <= budget and info["truncated"] and info["visits"] == 8
    chosen = [v["index"] for v in info["kept_visits"]]
    assert chosen == sorted(chosen) and 2 in chosen  # the stroke visit, re-sorted into time order
    assert info["kept_visits"][0]["score"] > 0 and all(v["score"] == 0 for v in info["kept_visits"][1:])
    assert chosen[1:] == [6, 7]  # the rest of the budget goes to the newest visits
    assert kept.startswith("<record>\n") and kept.index("alteplase") < kept.index("03/07/2020")
    assert info["cut_tokens"] == info["original_tokens"] - info["kept_tokens"]


def test_retrieval_returns_a_fitting_record_whole_and_falls_back_when_no_visit_fits(tok: Tokenizer) -> None:
    text = _record()
    kept, info = retrieve_visits(text, tok, 10_000, query="stroke")
    assert kept == text and info["whole"] and not info["truncated"]
    kept, info = retrieve_visits(text, tok, 40, query="stroke")  # smaller than any visit
    assert info["fallback"] == "keep_recent" and text.endswith(kept) and tok.count(kept) <= 40


def test_retrieval_policy_fits_the_whole_prompt_and_keeps_the_instruction() -> None:
    sample = Sample(id="s", input="Which thrombolytic was given for the stroke?", context=_record())
    policy = RetrievalPolicy(MEDALIGN_PROMPT, TOK, max_context=900, reserve=256)
    kept, info = asyncio.run(policy.fit(sample, _PlainModel()))
    assert info["fits"] and info["policy"] == "retrieval" and "alteplase" in kept
    prompt = MEDALIGN_PROMPT.messages(sample, kept)[0].content
    assert f'Question: """{sample.input}"""' in prompt
    assert info["prompt_tokens"] + 256 <= 900
    assert policy.name.startswith("retrieval(ctx=900")


def test_refine_template_rejects_unknown_fields() -> None:
    with pytest.raises(UserError, match="previous"):
        RefineTemplate(user="{input} {answer}")


# --- refinement inside a real run, against a local OpenAI-compatible server ----------------------


def _refine_run(out: Path, server: FaultServer, sample: Sample, max_context: int) -> RunResult:
    from clinieval.task import Task

    chunker = ChunkPolicy(MEDALIGN_PROMPT, TOK, max_context=max_context, reserve=64)
    policy = RefinePolicy(chunker, answer_tokens=64)
    task = Task(
        name="mr",
        load=lambda: [sample],
        prompt=MEDALIGN_PROMPT,
        scorers=[ExactMatch()],
        context_policy=policy,
    )
    model = OpenAIModel(server.url, "fault")
    req = RunRequest(
        task=task, model=model, model_spec="openai", out=out, default_out=lambda _: out, progress=False
    )
    return asyncio.run(run_evaluation(req))


def _user_prompts(server: FaultServer) -> list[str]:
    return list(server.log.received)


def test_refinement_visits_every_piece_in_order_and_carries_the_answer(tmp_path: Path) -> None:
    sample = Sample(id="mr1", input="Summarize the diastolic pressures.", context=_record(), target="yes")
    with FaultServer(answer="draft answer") as server:
        result = _refine_run(tmp_path / "run", server, sample, max_context=700)
        prompts = _user_prompts(server)
    [record] = RunDir.open(result.run_path).records()
    info = record.context_info
    n = info["n_chunks"]
    assert n >= 3 and len(prompts) == n == info["model_calls"]
    # Every piece reached the model once, in record order, and nothing else of the record did.
    positions = [_record().index(p.split('"""')[3][:60]) for p in prompts]
    assert positions == sorted(positions)
    assert prompts[0].startswith("Instruction: Answer the following question based on the EHR:")
    assert "Your answer based on the earlier parts" not in prompts[0]
    for k, p in enumerate(prompts[1:], start=2):
        assert f"(part {k} of {n}" in p and '"""draft answer"""' in p
    assert record.output is not None and record.output.ok and record.output.text == "draft answer"
    assert info["failed_steps"] == [] and len(info["steps"]) == n


def test_refinement_survives_a_failing_piece_and_keeps_the_previous_answer(tmp_path: Path) -> None:
    marked = '03/05/2020 09:00 AM">\n<code>[LOINC/8462-4] Diastolic blood pressure 75'
    assert _record().count(marked) == 1
    context = _record().replace(marked, marked.replace("Diastolic", "FAULT:FILTER Diastolic"))
    sample = Sample(id="mr2", input="Summarize the diastolic pressures.", context=context, target="yes")
    with FaultServer(answer="kept answer") as server:
        result = _refine_run(tmp_path / "run", server, sample, max_context=700)
        prompts = _user_prompts(server)
    [record] = RunDir.open(result.run_path).records()
    info = record.context_info
    failed = info["failed_steps"]
    assert len(failed) == 1 and 0 < failed[0] < info["n_chunks"] - 1  # a middle piece was refused
    assert info["steps"][failed[0]]["error_kind"] == "content_filter"
    assert info["steps"][failed[0]]["kept_previous_answer"] is True
    assert len(prompts) == info["n_chunks"]  # the pieces after the refused one were still read
    assert record.output is not None and record.output.ok and record.output.text == "kept answer"
    [summary] = result.summaries
    assert summary.errors == {} and summary.scored == 1


def test_refinement_with_every_piece_refused_is_a_counted_failure(tmp_path: Path) -> None:
    context = _record().replace("</code>", " FAULT:FILTER</code>")
    sample = Sample(id="mr3", input="Summarize.", context=context, target="yes")
    with FaultServer() as server:
        result = _refine_run(tmp_path / "run", server, sample, max_context=700)
    [record] = RunDir.open(result.run_path).records()
    assert record.output is not None and record.output.error_kind is not None
    assert record.output.error_kind.value == "content_filter"
    assert len(record.context_info["failed_steps"]) == record.context_info["n_chunks"]
    [summary] = result.summaries
    assert summary.errors == {"content_filter": 1}


def test_refinement_resumes_from_the_cache(tmp_path: Path) -> None:
    sample = Sample(id="mr4", input="Summarize the diastolic pressures.", context=_record(), target="yes")
    with FaultServer(answer="a") as server:
        first = _refine_run(tmp_path / "run", server, sample, max_context=700)
        (tmp_path / "run" / "samples.jsonl").unlink()  # lose the record; the cache still holds every step
        second = _refine_run(tmp_path / "run", server, sample, max_context=700)
        calls = len(server.log.received)
    assert second.stats.requests == 0 and second.stats.cache_hits == first.stats.requests == calls


def test_refine_prompt_fields() -> None:
    s = Sample(id="x", input="Q?", context="")
    [m] = REFINE_PROMPT.messages(s, "piece", "before", 2, 3)
    assert '"""Q?"""' in m.content and '"""piece"""' in m.content and '"""before"""' in m.content
    assert "part 2 of 3" in m.content
