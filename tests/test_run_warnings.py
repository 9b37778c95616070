"""Issue 34: a run says when its answers echo their prompt, and every exit for failed calls
carries its fix.

The echoing model is a real OpenAI-compatible server on 127.0.0.1 (``tests/fault_server.py``)
whose answer is the last user message sent back, wrapped as llama-2's chat template would show
it: what `python -m llama_cpp.server` serving a base model did in the issue ("[INST]Read the
abstract and answer the research question with yes, no…", 10/10 scored, exit 0). The non-echo
case is the real embedded SmolLM2. Timeouts are that server holding its answer past --timeout,
and the judge that no reader can read is the same server answering in no rubric's format.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clinieval.errors import EXIT_FAILED_ITEMS
from clinieval.records.failures import FIXES, failure_report
from clinieval.records.sample_record import SampleRecord
from clinieval.records.summary import ECHO_FIX, EchoCount, count_echoes, echo_count, echo_under
from clinieval.types import ErrorKind, Message, ModelOutput, Sample
from tests.conftest import run_cli
from tests.fault_server import FaultServer

QUESTION = "Read the abstract and answer the research question with yes, no or maybe. Question {i}: {q}"
TOPICS = ["does aspirin lower stroke risk", "is metformin safe in pregnancy", "do statins cause myalgia"]
WARNING = "mostly repeat their prompt"


def _items(path: Path, n: int, marker: str = "") -> Path:
    rows = [
        {"id": f"q{i}", "input": QUESTION.format(i=i, q=TOPICS[i % 3]) + marker, "target": "yes"}
        for i in range(n)
    ]
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _echo_some(echoing: set[str]) -> FaultServer:
    """Echoes the prompt of the items named in ``echoing`` (by their "Question i:"), answers the
    rest with a plain "Yes."."""

    def respond(prompt: str) -> str:
        asked = next((i for i in echoing if f"Question {i}:" in prompt), None)
        return "Yes." if asked is None else f"[INST]{prompt}[/INST]"

    return FaultServer(responder=respond)


def _run(data: Path, model: str, out: Path, *extra: str) -> tuple[int, str, str]:
    done = run_cli("run", str(data), "-m", model, "--out", str(out), "--no-progress", *extra)
    return done.returncode, done.stdout, done.stderr


def test_a_server_that_echoes_its_prompt_is_warned_about_once_with_count_share_and_fix(
    tmp_path: Path,
) -> None:
    data = _items(tmp_path / "q.jsonl", 10)
    with _echo_some({str(i) for i in range(7)}) as server:
        code, _, err = _run(data, f"openai:{server.url}@fault", tmp_path / "run", "--scorer", "exact_match")
        _, as_json, _ = _run(
            data,
            f"openai:{server.url}@fault",
            tmp_path / "run",
            "--scorer",
            "exact_match",
            "--format",
            "json",
        )
    assert code == 0, err  # answered, so not a failure: a warning
    expected = f"warning: 7 of 10 answers (70%) {WARNING}: {ECHO_FIX}"
    assert err.count(WARNING) == 1 and expected in err, err
    assert "openai-completions:" in err  # the spec that reaches a base model's completions endpoint
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["run"]["echoed_prompt"] == {"count": 7, "of": 10, "share": 0.7}
    assert json.loads(as_json)["echoed_prompt"] == {"count": 7, "of": 10, "share": 0.7}
    # the suite's count reads the same summary (one per run under a cell's folder)
    assert echo_under(tmp_path) == EchoCount(7, 10)


def test_a_tenth_or_fewer_echoes_is_no_warning(tmp_path: Path) -> None:
    data = _items(tmp_path / "q.jsonl", 10)
    with _echo_some({"3"}) as server:
        code, _, err = _run(data, f"openai:{server.url}@fault", tmp_path / "run", "--scorer", "exact_match")
    assert code == 0, err
    assert WARNING not in err
    summary = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert summary["run"]["echoed_prompt"] == {"count": 1, "of": 10, "share": 0.1}


@pytest.mark.slow
def test_the_embedded_model_answers_without_an_echo_warning(tmp_path: Path) -> None:
    data = _items(tmp_path / "q.jsonl", 3)
    code, _, err = _run(
        data,
        "llamacpp:smollm2-135m-instruct",
        tmp_path / "run",
        "--max-tokens",
        "16",
        "--scorer",
        "exact_match",
    )
    assert code == 0, err
    assert WARNING not in err
    recorded = json.loads((tmp_path / "run" / "summary.json").read_text())["run"]["echoed_prompt"]
    assert recorded["of"] == 3 and recorded["count"] == 0


def test_echo_count_is_over_successful_answers_and_independent_of_scorers() -> None:
    sent = ["Read the abstract and answer the research question with yes, no or maybe."]
    echo = count_echoes([(sent[0], sent), ("Yes.", sent), ("Answer: yes, no or maybe", sent)])
    assert echo == EchoCount(1, 3) and echo.warns and "1 of 3 answers (33%)" in echo.message()
    assert not EchoCount(1, 10).warns and EchoCount(2, 10).warns and not EchoCount().warns


def test_an_answer_naming_its_option_line_is_not_an_echo() -> None:
    """A lettered question answered with its whole option line is answered, as the choice reader
    takes it; it was counted as an echo, so a run of good answers warned of a base model."""
    choices = ("Furosemide 40 mg IV twice daily", "Torsemide 20 mg by mouth daily")
    prompt = (
        "What was she discharged on?\nA. Furosemide 40 mg IV twice daily\nB. Torsemide 20 mg by mouth daily"
    )
    sample = Sample(id="q", input="What was she discharged on?", choices=choices, target="B")
    records = [
        SampleRecord(sample, 0, [Message("user", prompt)], output=ModelOutput(text=answer))
        for answer in ("B. Torsemide 20 mg by mouth daily", "Torsemide 20 mg by mouth daily", prompt)
    ]
    assert echo_count(records) == EchoCount(1, 3)  # only the answer that is the whole prompt


# --- failed calls: the same exit and hint whether some or all failed --------------------------------


def test_a_run_whose_every_call_timed_out_exits_as_a_partial_one_with_the_hint_and_one_message(
    tmp_path: Path,
) -> None:
    """Before: every call timed out -> exit 1, the kinds, no "raise --timeout"; some -> exit 3 with it."""
    every = _items(tmp_path / "all.jsonl", 3, marker=" FAULT:HANGx9")
    some = tmp_path / "some.jsonl"
    some.write_text(
        "".join(
            json.dumps({"id": f"s{i}", "input": f"question {i}" + (" FAULT:HANGx9" if i == 0 else "")}) + "\n"
            for i in range(3)
        )
    )
    common = ("--timeout", "1", "--retries", "0", "--scorer", "exact_match")
    with FaultServer() as server:
        model = f"openai:{server.url}@fault"
        all_code, _, all_err = _run(every, model, tmp_path / "all", *common)
        some_code, _, some_err = _run(some, model, tmp_path / "some", *common)
        accepted, _, accepted_err = _run(every, model, tmp_path / "all", *common, "--allow-failures")
    assert some_code == EXIT_FAILED_ITEMS, some_err
    assert all_code == some_code, all_err
    hint = f"  timeout: 3 — {FIXES['timeout']}"
    assert hint in all_err and "raise --timeout" in all_err
    examples = [x for x in all_err.splitlines() if x.startswith("  for example: ")]
    assert len(examples) == 1 and "timed out" in examples[0], all_err
    assert "Read the abstract" not in all_err  # the transport's words, never the prompt
    assert "for example" not in some_err  # a partial failure keeps its short form
    # no score at all is nothing to accept
    assert accepted == EXIT_FAILED_ITEMS and "raise --timeout" in accepted_err


def test_the_example_message_is_one_line_without_prompt_text() -> None:
    prompt = "The patient John Smith reports crushing chest pain radiating to the left arm since Monday."
    message = f"HTTP 400: invalid request: '{prompt}' is too long\nTraceback (most recent call last): ..."
    record = SampleRecord(
        sample=Sample(id="a", input=prompt),
        repeat=0,
        messages=[Message("user", prompt)],
        output=ModelOutput.failure(ErrorKind.BAD_REQUEST, message),
    )
    report = failure_report([record])
    assert report.everything and report.example is not None
    assert "John Smith" not in report.example and "\n" not in report.example
    assert report.example.startswith("HTTP 400: invalid request: '[…]") and report.example.endswith(
        "too long"
    )


# --- the judge: scoring nothing is a failed pass, with its fix ----------------------------------------


@pytest.fixture
def answered_run(tmp_path: Path) -> Path:
    data = tmp_path / "items.jsonl"
    rows = [{"id": f"x{i}", "input": f"What is {i} + {i}?", "target": str(2 * i)} for i in range(3)]
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    with FaultServer(answer="It is a number.") as server:
        code, _, err = _run(data, f"openai:{server.url}@fault", tmp_path / "run", "--scorer", "exact_match")
    assert code == 0, err
    return tmp_path / "run"


def _judge(run: Path, responder: object, *extra: str) -> tuple[int, str, str]:
    with FaultServer(responder=responder) as judge:  # type: ignore[arg-type]
        done = run_cli(
            "judge", str(run), "--judge", f"openai:{judge.url}@fault", "--rubric", "reference_correct",
            "--repeats", "1", "--no-progress", *extra,
        )  # fmt: skip
    return done.returncode, done.stdout, done.stderr


def test_a_judge_whose_replies_no_reader_reads_exits_non_zero_with_the_fix(answered_run: Path) -> None:
    """Before: "0/3 answers scored" and exit 0."""
    code, out, err = _judge(answered_run, lambda _: "I would rather not commit to an opinion here.")
    assert "0/3 answers scored" in out
    assert code == EXIT_FAILED_ITEMS, err
    scores = answered_run / "scores" / "reference_correct.jsonl"
    assert "  unparsed: 3 judge replies — " in err and f"see parse_error in {scores}" in err
    assert "larger or instruction-tuned judge model" in err
    assert err.strip().splitlines()[-1].startswith(f"error: no answer could be scored in {scores}")
    # no --allow-failures accepts no result at all
    accepted, _, _ = _judge(answered_run, lambda _: "I would rather not commit.", "--allow-failures")
    assert accepted == EXIT_FAILED_ITEMS


def test_a_judge_that_reads_too_few_exits_beyond_the_allowed_share(answered_run: Path) -> None:
    def one_verdict(prompt: str) -> str:  # only the first item's reply has a verdict line
        return "Verdict: yes" if "What is 0 + 0?" in prompt else "Hard to say."

    unflagged, _, err = _judge(answered_run, one_verdict)
    assert unflagged == 0, err  # unparsed replies alone, as before, do not fail a pass
    tight, _, tight_err = _judge(answered_run, one_verdict, "--allow-failures", "0.5")
    assert tight == EXIT_FAILED_ITEMS, tight_err
    assert "error: 2 of 3 judged answers are unscored (67%), more than --allow-failures 0.5" in tight_err
    loose, _, loose_err = _judge(answered_run, one_verdict, "--allow-failures", "0.7")
    assert loose == 0, loose_err


# --- the suite: each cell's echo warning and failed kinds with their fixes ---------------------------


def test_a_suite_cell_lists_its_failed_kinds_with_fixes_and_its_echo_warning(tmp_path: Path) -> None:
    from clinieval.records.failures import failed_kinds_under
    from clinieval.suite.execute import CellOutcome, SuiteOutcome, summary_lines

    data = _items(tmp_path / "q.jsonl", 2, marker=" FAULT:HANGx9")
    with FaultServer() as server:
        code, _, err = _run(data, f"openai:{server.url}@fault", tmp_path / "cell" / "arm", "--timeout", "1",
                            "--retries", "0", "--scorer", "exact_match")  # fmt: skip
    assert code == EXIT_FAILED_ITEMS, err
    kinds = failed_kinds_under(tmp_path / "cell")
    assert kinds == {"timeout": 2}
    cells = (
        CellOutcome("pubmedqa × base", "complete", failed_items=2, failed_kinds=kinds, echo=EchoCount(9, 10)),
        CellOutcome("pubmedqa × chat", "complete", echo=EchoCount(1, 10)),
    )
    lines = summary_lines(SuiteOutcome(cells), tmp_path)
    assert f"    timeout: 2 — {FIXES['timeout']}" in lines
    echoed = [x for x in lines if WARNING in x]
    assert echoed == [f"  warning: pubmedqa × base: 9 of 10 answers (90%) {WARNING}: {ECHO_FIX}"]


def test_a_benchmark_arm_prints_its_echo_warning_and_failed_kinds_with_fixes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """What `medalign run`, `ehrnoteqa run` and `medeval run` print for each arm: `run_arm` (their
    shared runner) against the echoing server, then `echo_run`."""
    import asyncio

    from clinieval.benchmark import TaskRequest, find_benchmark
    from clinieval.benchmarks import BENCHMARKS
    from clinieval.cli_options import echo_run
    from clinieval.engine.session import ArmSettings, run_arm
    from clinieval.models.spec import BackendOptions

    data = _items(tmp_path / "q.jsonl", 4)
    rows = data.read_text().splitlines()
    rows[3] = rows[3].replace("Question 3:", "FAULT:500x9 Question 3:")  # fails every time
    data.write_text("\n".join(rows) + "\n")
    task = find_benchmark(BENCHMARKS, str(data)).task(TaskRequest(str(data), None, None, None))
    with _echo_some({"0", "1"}) as server:
        settings = ArmSettings(backend=BackendOptions(max_retries=0), progress=False)
        result = asyncio.run(run_arm(task, f"openai:{server.url}@fault", tmp_path / "arm", settings))
    echo_run("fault (mc)", result)
    err = capsys.readouterr().err
    assert f"warning: fault (mc): 2 of 3 answers (67%) {WARNING}: {ECHO_FIX}" in err, err
    assert f"  server_error: 1 — {FIXES['server_error']}" in err
