"""Context policies inside a real run: keep-recent trims only the record, drop is counted."""

from __future__ import annotations

import asyncio
from pathlib import Path

from clinieval.context.fit import DropPolicy, KeepRecentPolicy
from clinieval.engine.session import RunRequest, RunResult, run_evaluation
from clinieval.models.openai_http import OpenAIModel
from clinieval.scoring.scorers import ExactMatch
from clinieval.task import PromptTemplate, Task
from clinieval.types import Sample
from tests.fault_server import FaultServer

TEMPLATE = PromptTemplate(
    user="Instruction: Answer the following question based on the EHR:\n###\n"
    'Question: """{input}"""\nEHR: """{context}"""'
)
LONG = "\n".join(f"<event n={i}>creatinine {i}.0 mg/dL</event>" for i in range(400))
SAMPLES = [
    Sample(id="short", input="Latest creatinine?", context="<event>creatinine 1.1</event>", target="yes"),
    Sample(id="long", input="Latest creatinine?", context=LONG, target="yes"),
]


def run(policy: object, out: Path, server: FaultServer) -> RunResult:
    task = Task(
        name="ctx", load=lambda: list(SAMPLES), prompt=TEMPLATE, scorers=[ExactMatch()], context_policy=policy
    )  # type: ignore[arg-type]
    model = OpenAIModel(server.url, "fault")
    req = RunRequest(
        task=task, model=model, model_spec="openai", out=out, default_out=lambda _: out, progress=False
    )
    return asyncio.run(run_evaluation(req))


def test_keep_recent_trims_the_record_not_the_question(tmp_path: Path) -> None:
    policy = KeepRecentPolicy(TEMPLATE, tokenizer="tiktoken:cl100k_base", max_context=600, reserve=256)
    with FaultServer() as server:
        result = run(policy, tmp_path / "run", server)
        sent = {p.split('EHR: """')[1][:20]: p for p in server.log.received}
    from clinieval.records.runs import RunDir

    records = {r.sample.id: r for r in RunDir.open(result.run_path).records()}
    long = records["long"]
    assert long.context_info["truncated"] is True and long.context_info["kept_tokens"] <= 600 - 256
    prompt = long.messages[-1].content
    assert 'Question: """Latest creatinine?"""' in prompt
    assert "creatinine 399.0 mg/dL</event>" in prompt and "<event n=0>" not in prompt
    assert records["short"].context_info["truncated"] is False
    assert len(sent) == 2


def test_drop_policy_counts_dropped_samples_without_calling_the_model(tmp_path: Path) -> None:
    policy = DropPolicy(TEMPLATE, tokenizer="tiktoken:cl100k_base", max_context=600, reserve=256)
    with FaultServer() as server:
        result = run(policy, tmp_path / "run", server)
        received = list(server.log.received)
    assert len(received) == 1 and "creatinine 1.1" in received[0]
    [summary] = result.summaries
    assert summary.errors == {"context_length": 1} and summary.scored == 1
