"""Nothing is written before the first model call can be made (issue 23, item 5).

A refused command must leave no run folder, or the corrected command is refused as "a
different run"; the refusal names the command-line flags that fix it; a "different run" refusal
shows the values that differ whole.
"""

from __future__ import annotations

import asyncio
import json
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from clinieval.benchmarks.medalign.prompts import MEDALIGN_PROMPT
from clinieval.context.fit import ChunkPolicy, KeepRecentPolicy
from clinieval.context.refine import RefinePolicy
from clinieval.engine.session import RunRequest, RunResult, run_evaluation
from clinieval.errors import UserError
from clinieval.models.base import Model, render_plain
from clinieval.models.openai_http import OpenAIModel
from clinieval.records.runs import RunDir, build_manifest
from clinieval.scoring.scorers import ExactMatch
from clinieval.task import ContextPolicy, PromptTemplate, Task
from clinieval.types import JSON, Message, Sample
from tests.conftest import need_shared, run_cli
from tests.fault_server import FaultServer

TIKTOKEN = "tiktoken:cl100k_base"
RECORD = "\n".join(f"<event n={i}>creatinine {i}.0 mg/dL</event>" for i in range(200))
SAMPLES = [
    Sample(id="a", input="Latest creatinine?", context=RECORD, target="yes"),
    Sample(id="b", input="Highest creatinine?", context=RECORD, target="yes"),
]
TEMPLATE = PromptTemplate(user='Question: """{input}"""\nEHR: """{context}"""')


def _error_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


# --- the command line, against a real llama.cpp server ----------------------------------------


@pytest.fixture
def medalign_data(tmp_path: Path) -> Path:
    """One instruction over the public sample record (about 3,500 tokens: it must be cut)."""
    shared = need_shared("medalign")
    data = tmp_path / "data"
    (data / "ehrs").mkdir(parents=True)
    shutil.copy(shared / "sample-ehr-clean.xml", data / "ehrs" / "sample.xml")
    (data / "instructions.csv").write_text(
        "instruction_id,question,filename\n1,What was the most recent blood pressure?,sample.xml\n"
    )
    return data


def test_refused_medalign_run_leaves_no_folder_and_the_corrected_one_runs(
    llama_server: str, smollm2_path: Path, medalign_data: Path, tmp_path: Path
) -> None:
    out = tmp_path / "runs" / "medalign"
    base = ["run", "medalign", "--data", str(medalign_data), "-m", f"openai:{llama_server}@smol"]
    base += ["--out", str(out), "--no-progress", "--max-tokens", "4"]

    refused = run_cli(*base)
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    [line] = _error_lines(refused.stderr)
    # both missing flags in one refusal, the server's default named, no Python attribute alone
    assert "--tokenizer" in line and "--max-context" in line and "2048" in line
    assert "policy's" not in line
    assert not out.exists() and not out.parent.exists()

    tokenizer = f"gguf:{smollm2_path}"
    # any context up to the server's 2,048 is right; a short one keeps the test fast
    corrected = run_cli(*base, "--tokenizer", tokenizer, "--max-context", "768")
    assert corrected.returncode == 0, corrected.stderr
    [record] = RunDir(out).records()
    assert record.context_info["truncated"] and record.context_info["tokenizer"] == tokenizer

    other = run_cli(*base, "--tokenizer", TIKTOKEN, "--max-context", "768")
    assert other.returncode == 2
    [line] = _error_lines(other.stderr)
    # the long site-packages path is shown whole, and the flag that set it is named
    assert "holds a different run" in line and str(smollm2_path) in line and "--tokenizer" in line


# --- run_evaluation: the pre-flight, and what a failed new run leaves -------------------------


def _run(
    policy: ContextPolicy, out: Path, server: FaultServer, samples: Sequence[Sample] = SAMPLES
) -> RunResult:
    task = Task(
        name="ctx", load=lambda: list(samples), prompt=TEMPLATE, scorers=[ExactMatch()], context_policy=policy
    )
    model = OpenAIModel(server.url, "fault")
    request = RunRequest(
        task=task, model=model, model_spec="openai", out=out, default_out=lambda _: out, progress=False
    )
    return asyncio.run(run_evaluation(request))


def test_unknown_context_size_is_refused_before_the_folder_and_any_request(tmp_path: Path) -> None:
    out = tmp_path / "new" / "run"
    with FaultServer() as server:
        with pytest.raises(UserError, match="did not report its context size") as refused:
            _run(KeepRecentPolicy(TEMPLATE, tokenizer=TIKTOKEN), out, server)
        received = list(server.log.received)
    assert "--max-context N" in str(refused.value) and "--tokenizer" not in str(refused.value)
    assert not received and not (tmp_path / "new").exists()


def test_a_question_without_room_for_the_record_is_refused_before_the_folder(tmp_path: Path) -> None:
    out = tmp_path / "run"
    policy = KeepRecentPolicy(TEMPLATE, tokenizer=TIKTOKEN, max_context=260, reserve=256)
    with FaultServer() as server, pytest.raises(UserError, match="no room for any of the record") as refused:
        _run(policy, out, server)
    assert "sample 'a'" in str(refused.value) and "--max-context" in str(refused.value)
    assert not out.exists()


@dataclass(frozen=True, slots=True)
class _RefusesIn:
    """A policy that passes the pre-flight but refuses the samples named in ``refused`` when
    fitting them (as the first item of a run on another executor, which skips the driver's
    pre-flight, can)."""

    refused: frozenset[str] = field(default_factory=frozenset)
    name: str = "refuses-in"

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        if sample.id in self.refused:
            raise UserError(f"sample {sample.id}: refused")
        return sample.context, {"policy": self.name, "truncated": False}

    async def check(self, samples: Sequence[Sample], model: Model) -> None:
        """Passes: the refusal comes from the first item."""


def test_a_new_run_refused_at_its_first_item_is_removed(tmp_path: Path) -> None:
    made = tmp_path / "a" / "b" / "run"
    given = tmp_path / "given"
    given.mkdir()
    with FaultServer() as server:
        for out in (made, given):
            with pytest.raises(UserError, match="refused"):
                _run(_RefusesIn(frozenset({"a", "b"})), out, server)
        assert not (tmp_path / "a").exists()
        assert given.is_dir() and not any(given.iterdir())  # the user's own folder stays, empty
        assert _run(_RefusesIn(), made, server).stats.finished == 2  # nothing in the way


def test_a_resumed_run_with_records_is_kept_when_a_later_item_is_refused(tmp_path: Path) -> None:
    out = tmp_path / "run"
    with FaultServer() as server:
        _run(_RefusesIn(), out, server, SAMPLES[:1])
        extra = Sample(id="c", input="Lowest creatinine?", context=RECORD, target="yes")
        with pytest.raises(UserError, match="refused"):
            _run(_RefusesIn(frozenset({"c"})), out, server, [*SAMPLES[:1], extra])
    assert [r.sample.id for r in RunDir(out).records()] == ["a"]


# --- the policies' pre-flight and its messages -------------------------------------------------


@dataclass
class _Model:
    """What a policy reads from a model: a name, render, and maybe ``n_ctx`` (an embedded model)
    or ``context_length`` (what a server reported in check())."""

    name: str = "m"
    n_ctx: int | None = None
    context_length: int | None = None

    def render(self, messages: Sequence[Message]) -> str:
        return render_plain(messages)


def _check(policy: object, model: object, samples: Sequence[Sample] = SAMPLES) -> None:
    asyncio.run(policy.check(samples, model))  # type: ignore[attr-defined]


def test_a_missing_tokenizer_and_context_are_named_as_flags_in_one_message() -> None:
    with pytest.raises(UserError) as both:
        _check(KeepRecentPolicy(MEDALIGN_PROMPT), _Model())
    message = str(both.value)
    assert (
        "--tokenizer" in message
        and "--max-context N" in message
        and "llama.cpp's server defaults to 2048" in message
    )
    assert "policy's" not in message and "budget tokenizer" not in message
    with pytest.raises(UserError, match="--tokenizer") as one:
        _check(KeepRecentPolicy(MEDALIGN_PROMPT, max_context=2048), _Model())
    assert "--max-context" not in str(one.value)


def test_the_context_size_a_server_reported_is_used_without_max_context() -> None:
    policy = KeepRecentPolicy(MEDALIGN_PROMPT, tokenizer=TIKTOKEN)
    model = _Model(context_length=700)
    _check(policy, model)
    _, budget = policy.budget(SAMPLES[0], model)  # type: ignore[arg-type]
    assert budget.max_context == 700
    kept, info = asyncio.run(policy.fit(SAMPLES[0], model))  # type: ignore[arg-type]
    assert info["max_context"] == 700 and info["fits"] and RECORD.endswith(kept)
    # --max-context wins over what the server said
    _, given = KeepRecentPolicy(MEDALIGN_PROMPT, TIKTOKEN, max_context=900).budget(SAMPLES[0], model)  # type: ignore[arg-type]
    assert given.max_context == 900


@pytest.mark.parametrize(
    ("policy", "flag"),
    [
        (KeepRecentPolicy(MEDALIGN_PROMPT, TIKTOKEN, max_context=0), "--max-context"),
        (KeepRecentPolicy(MEDALIGN_PROMPT, TIKTOKEN, max_context=-5), "--max-context"),
        (KeepRecentPolicy(MEDALIGN_PROMPT, TIKTOKEN, max_context=900, reserve=-1), "--reserve"),
    ],
)
def test_impossible_settings_are_refused_with_their_flag(policy: KeepRecentPolicy, flag: str) -> None:
    # max_context=0 used to mean "the model's" and a negative one raised a ValueError traceback
    with pytest.raises(UserError, match=flag):
        _check(policy, _Model(n_ctx=4096))


def test_no_room_names_the_flag_that_set_the_context() -> None:
    small = KeepRecentPolicy(MEDALIGN_PROMPT, TIKTOKEN, reserve=256)
    for model, flag in ((_Model(n_ctx=280), "--n-ctx"), (_Model(context_length=280), "start the server")):
        with pytest.raises(UserError, match="no room") as refused:
            _check(small, model)
        assert flag in str(refused.value)


def test_refinement_counts_the_carried_answer_before_the_run() -> None:
    chunks = ChunkPolicy(MEDALIGN_PROMPT, TIKTOKEN, max_context=500, reserve=256)
    _check(chunks, _Model())  # without a carried answer the record has room
    with pytest.raises(UserError, match="carried between refinement steps") as refused:
        _check(RefinePolicy(chunks, answer_tokens=256), _Model())
    assert "--max-context" in str(refused.value)


# --- "holds a different run" ---------------------------------------------------------------------


def _refusal(old: JSON, new: JSON, tmp_path: Path) -> str:
    RunDir.create_or_resume(tmp_path / "run", build_manifest(old, []))
    with pytest.raises(UserError, match="holds a different run") as refused:
        RunDir.create_or_resume(tmp_path / "run", build_manifest(new, []))
    return str(refused.value)


def test_a_different_run_shows_a_long_path_whole_and_its_flag(tmp_path: Path) -> None:
    path = "/data/" + "/".join(f"folder-{i:02d}" for i in range(16)) + "/tokenizer.json"
    policy = KeepRecentPolicy(MEDALIGN_PROMPT, f"hf:{path}")
    old = {"task": {"context_policy": KeepRecentPolicy(MEDALIGN_PROMPT).name}}
    message = _refusal(old, {"task": {"context_policy": policy.name}}, tmp_path)
    assert f"hf:{path}" in message and "--tokenizer" in message
    assert "task.context_policy was" in message


def test_a_long_differing_value_keeps_whole_words_around_the_difference(tmp_path: Path) -> None:
    words = [f"word{i}" for i in range(200)]
    changed = [*words[:100], "CHANGED", *words[101:]]
    message = _refusal(
        {"task": {"prompt": " ".join(words)}}, {"task": {"prompt": " ".join(changed)}}, tmp_path
    )
    assert "CHANGED" in message and "word100" in message and "…" in message
    assert len(message) < 600
    shown = message.split("task.prompt was ")[1].split("); use another --out")[0]
    assert set(re.findall(r'[^\s…",]+', shown)) - {"now"} <= {*words, "CHANGED"}  # whole words only


def test_other_differences_name_their_flag(tmp_path: Path) -> None:
    message = _refusal({"generation": {"seed": 0}}, {"generation": {"seed": 1}}, tmp_path)
    assert "generation.seed was 0, now 1; set by --seed" in message
    assert json.dumps(1) in message
    both = KeepRecentPolicy(MEDALIGN_PROMPT, TIKTOKEN, max_context=2048).name
    message = _refusal(
        {"task": {"context_policy": KeepRecentPolicy(MEDALIGN_PROMPT).name}},
        {"task": {"context_policy": both}},
        tmp_path / "two",
    )
    assert "set by --max-context and --tokenizer" in message
