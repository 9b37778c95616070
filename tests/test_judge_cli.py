"""`clinieval judge RUN --judge SPEC --rubric NAME`: the generic judge command, on a real run made
by `clinieval run` of a small JSONL task, judged by the real embedded SmolLM2 (a tiny judge: it
exercises every path with real text, its verdicts mean nothing). Failures are shown by kind with
their fix and a failed judge call exits 3; the benchmark judge commands report the same way.

The pure parts (the reference rubric's parser, the rubric catalog, the failure advice) are tested
without a model at the end.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from clinieval.errors import EXIT_FAILED_ITEMS
from clinieval.judge.failures import CALL_FIXES, UNPARSED_FIX, call_fix, failures, pass_failed
from clinieval.judge.reference import ReferenceRubric, parse_verdict_line
from clinieval.judge.rubric import VerdictParseError
from clinieval.judge.run import JudgeResult, JudgeSummary
from clinieval.records.sample_record import SampleRecord
from clinieval.types import ErrorKind, Message, ModelOutput, Sample
from tests.conftest import run_cli
from tests.test_cli_errors import assert_one_line_error

JUDGE = "llamacpp:smollm2-135m-instruct"
ITEMS = [
    {
        # first, so --limit 1 judges it: a question too long for a judge with a 256-token context
        "id": "long",
        "input": "Given the history above, " * 40 + "which anticoagulant is the patient on?",
        "target": "Apixaban 5 mg twice daily.",
    },
    {"id": "capital", "input": "What is the capital of France?", "target": "Paris"},
    {"id": "sum", "input": "What is 2 + 2? Answer with a number.", "target": "4"},
]
QUICK = ("--repeats", "1", "--max-tokens", "24", "--no-progress")


@pytest.fixture(scope="module")
def made_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished `clinieval run` of three JSONL items with targets, answered by SmolLM2."""
    root = tmp_path_factory.mktemp("judge-cli")
    items = root / "items.jsonl"
    items.write_text("".join(json.dumps(x) + "\n" for x in ITEMS), encoding="utf-8")
    out = root / "run"
    done = run_cli("run", str(items), "-m", JUDGE, "--max-tokens", "16", "--scorer", "exact_match",
                   "--out", str(out), "--no-progress")  # fmt: skip
    assert done.returncode == 0, done.stderr
    return out


@pytest.fixture
def run_dir(made_run: Path, tmp_path: Path) -> Path:
    """A fresh copy per test, so no test reads another's judge cache."""
    return Path(shutil.copytree(made_run, tmp_path / "run"))


def _summary(run: Path, rubric: str) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((run / "scores" / f"{rubric}.summary.json").read_text())
    return loaded


@pytest.mark.slow
def test_judge_a_run_with_the_reference_rubric(run_dir: Path) -> None:
    done = run_cli("judge", str(run_dir), "--judge", JUDGE, "--rubric", "reference_correct", *QUICK)
    scored = _summary(run_dir, "reference_correct")["scored"]
    # a pass that scored nothing fails (issue 34: "0/3 answers scored" is no result), and the tiny
    # judge may miss the format every time
    assert done.returncode == (0 if scored else EXIT_FAILED_ITEMS), done.stderr
    lines = [json.loads(x) for x in (run_dir / "scores" / "reference_correct.jsonl").read_text().splitlines()]
    assert [d["sample_id"] for d in lines] == ["long", "capital", "sum"]
    s = _summary(run_dir, "reference_correct")
    assert s["judge_errors"] == {} and s["judge_calls"] == 3
    first = done.stdout.splitlines()[0]
    assert first.startswith(f"{run_dir}: {s['scored']}/3 answers scored; 0 failed judge calls, ")
    assert f"{s['parse_failures']} unparsed judge replies, 3 requests, 0 cache hits" in first
    if s["parse_failures"]:
        assert f"  unparsed: {s['parse_failures']} judge replies — {UNPARSED_FIX}" in done.stderr
    assert "not credible" in done.stderr  # the tiny judge says what it is
    # SmolLM2 wrote the answers it judges: said, and flagged in the summary
    assert "judging answers written by the same model" in done.stderr and s["self_judged"] is True
    again = run_cli("judge", str(run_dir), "--judge", JUDGE, "--rubric", "reference_correct", *QUICK)
    assert again.returncode == done.returncode and "0 requests, 3 cache hits" in again.stdout


@pytest.mark.slow
def test_a_prompt_too_long_for_the_judge_is_shown_with_its_fix_and_exits_3(run_dir: Path) -> None:
    cmd = ("judge", str(run_dir), "--judge", JUDGE, "--rubric", "reference_correct", "--n-ctx", "256", *QUICK)
    done = run_cli(*cmd)
    assert done.returncode == EXIT_FAILED_ITEMS, done.stderr
    s = _summary(run_dir, "reference_correct")
    assert s["judge_errors"] == {"context_length": 1}
    first = done.stdout.splitlines()[0]
    assert "1 failed judge calls" in first, done.stdout
    fix = "use a longer-context judge (--n-ctx for an embedded judge)"
    assert f"  context_length: 1 judge calls — the judge prompt did not fit the judge's context: {fix}" in (
        done.stderr
    )
    assert "--snippets" not in done.stderr  # this rubric shows no excerpts: lowering them cannot help
    error = done.stderr.strip().splitlines()[-1]
    assert error.startswith("error: 1 of 3 judge calls failed (context_length=1); they are unscored")
    assert "--allow-failures [FRACTION]" in error and "Traceback" not in done.stderr

    too_few = run_cli(*cmd, "--allow-failures", "0.2")  # 1 of 3 is more than a fifth
    assert too_few.returncode == EXIT_FAILED_ITEMS, too_few.stderr
    assert "0 requests, 3 cache hits" in too_few.stdout  # a prompt too long is cached: same outcome
    scored = int(str(_summary(run_dir, "reference_correct")["scored"]))
    for accept, share in ((("--allow-failures",), 1.0), (("--allow-failures", "0.5"), 0.5)):
        accepted = run_cli(*cmd, *accept)
        # the failed call is accepted; the tiny judge's unparsed replies count against a fraction,
        # and a pass that scored nothing is never accepted (issue 34)
        whole = scored > 0 and (3 - scored) / 3 <= share
        assert accepted.returncode == (0 if whole else EXIT_FAILED_ITEMS), accepted.stderr
        assert "context_length: 1 judge calls" in accepted.stderr
        assert "warning: 1 of 3 judge calls failed (context_length=1); kept as unscored" in accepted.stderr


@pytest.mark.slow
def test_a_rubric_with_excerpts_names_snippets_as_the_fix(run_dir: Path) -> None:
    """Both the generic command and `clinieval medalign judge` (through the shared echo_judged): the
    MedAlign prompt with the long question does not fit 512 tokens, and the rubric shows excerpts."""
    small = ("--n-ctx", "512", "--snippets", "3", "--limit", "1", *QUICK)
    generic = run_cli("judge", str(run_dir), "--judge", JUDGE, "--rubric", "medalign_judge", *small)
    benchmark = run_cli("medalign", "judge", str(run_dir), "--judge", JUDGE, *small)
    fix = "lower --snippets or use a longer-context judge (--n-ctx for an embedded judge)"
    for done in (generic, benchmark):
        assert done.returncode == EXIT_FAILED_ITEMS, done.stderr
        assert f"context_length: 1 judge calls — the judge prompt did not fit the judge's context: {fix}" in (
            done.stderr
        )
        assert done.stderr.strip().splitlines()[-1].startswith("error: 1 of 1 judge calls failed")
    # one rubric, one prompt: the benchmark command asked nothing the generic one had not
    assert "0 requests, 1 cache hits" in benchmark.stdout


def test_unknown_rubric_is_one_error_listing_the_known_ones(tmp_path: Path) -> None:
    done = run_cli("judge", str(tmp_path), "--judge", JUDGE, "--rubric", "nope")
    assert_one_line_error(done, "unknown rubric 'nope'", "reference_correct", "medalign_judge",
                          "ehrnoteqa_judge", "ehrnoteqa_free_judge")  # fmt: skip


def test_missing_run_folder_is_one_error(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-run"
    done = run_cli("judge", str(missing), "--judge", JUDGE, "--rubric", "reference_correct")
    assert_one_line_error(done, str(missing), "not a run directory")


def test_snippets_on_a_rubric_without_excerpts_is_one_error(tmp_path: Path) -> None:
    done = run_cli("judge", str(tmp_path), "--judge", JUDGE, "--rubric", "reference_correct",
                   "--snippets", "2")  # fmt: skip
    assert_one_line_error(done, "--snippets", "reference_correct shows no EHR excerpts")


@pytest.mark.slow
def test_a_run_without_targets_is_one_error_for_the_reference_rubric(tmp_path: Path) -> None:
    items = tmp_path / "items.jsonl"
    items.write_text(json.dumps({"id": "a", "input": "Say hi."}) + "\n", encoding="utf-8")
    made = run_cli("run", str(items), "-m", JUDGE, "--max-tokens", "4", "--scorer", "answered",
                   "--out", str(tmp_path / "run"), "--no-progress")  # fmt: skip
    assert made.returncode == 0, made.stderr
    done = run_cli("judge", str(tmp_path / "run"), "--judge", JUDGE, "--rubric", "reference_correct")
    assert_one_line_error(done, "sample a: no target to judge against")


# --------------------------------------------------------------------------------------------
# Without a model


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Verdict: yes\nReason: it names Paris.", True),
        ("**Verdict:** No.\nReason: the reference says 4, the answer says 5.", False),
        ("verdict - yes", True),
        ("Yes", True),
        ("no.", False),
        # only the verdict is read: never a number or a yes/no in the reason
        ("Verdict: no\nReason: yes, it scores 5 out of 5 on style, but it is wrong.", False),
        ("Reason: the answer is right, yes.", None),
        ("Score: 1\nThe answer is correct.", None),
        ("Verdict: <yes or no>\nReason: <one sentence>", None),  # the format, echoed
        ("Verdict: yes\nReason: ... on reflection, wrong dose.\nVerdict: no", False),  # a stated revision
        ("Verdict: yes\nReason: ...\nVerdict: no", None),  # two verdicts, no revision stated: a conflict
        ("Verdict: yes, on reflection no\nReason: ...", False),  # the stated revision replaces
        ("Verdict: yes, no\nReason: ...", None),  # the final verdict says both
        ("Verdict: correct", None),
        ("", None),
    ],
)
def test_reference_parser_reads_only_the_verdict(text: str, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(VerdictParseError):
            parse_verdict_line(text)
    else:
        assert parse_verdict_line(text) is expected


def _record(**sample: object) -> SampleRecord:
    s = Sample(id="q", input="Which anticoagulant?", **sample)  # type: ignore[arg-type]
    answer = ModelOutput(text="Apixaban.")
    return SampleRecord(sample=s, repeat=0, messages=[Message("user", "q")], output=answer)


def test_reference_prompt_shows_question_options_every_reference_and_the_answer() -> None:
    rubric = ReferenceRubric()
    one = rubric.messages(_record(target="Apixaban"))[0].content
    assert '"""Which anticoagulant?"""' in one and '## Reference answer\n"""Apixaban"""' in one
    assert '## Answer to check\n"""Apixaban."""' in one and "## Options" not in one
    record = _record(target="Apixaban", targets=("Eliquis",), choices=("Warfarin", "Apixaban"))
    several = rubric.messages(record)
    assert "any one of them is correct" in several[0].content and '- """Eliquis"""' in several[0].content
    assert "## Options\nA. Warfarin\nB. Apixaban" in several[0].content
    with pytest.raises(VerdictParseError):  # its own filled prompt is never a verdict
        rubric.parse(one)
    assert rubric.parse("Verdict: yes\nReason: same drug.").rationale == "same drug."


def test_every_rubric_is_named_once_and_builds_under_its_name() -> None:
    from clinieval.cli.judge import known_rubrics
    from clinieval.judge.catalog import RubricOptions

    known = known_rubrics()
    assert list(known) == ["reference_correct", "medalign_judge", "ehrnoteqa_judge", "ehrnoteqa_free_judge"]
    for name, entry in known.items():
        assert entry.build(RubricOptions()).name == name
    # the generic command asks what `clinieval ehrnoteqa judge` asks (same cache keys)
    assert known["ehrnoteqa_judge"].judge_generation(None, 0.0).max_tokens == 16
    assert known["medalign_judge"].uses_snippets and not known["reference_correct"].uses_snippets


def test_every_kind_of_failed_call_has_a_fix() -> None:
    assert set(CALL_FIXES) == set(ErrorKind)
    assert call_fix("context_length", shrink="--snippets").startswith(
        "the judge prompt did not fit the judge's context: lower --snippets or use a longer-context judge"
    )
    assert call_fix("timeout") == CALL_FIXES[ErrorKind.TIMEOUT] and "--timeout" in call_fix("timeout")
    assert "scores file" in call_fix("something_new")


def _judge_summary(**counts: object) -> JudgeSummary:
    base: dict[str, object] = {
        "rubric": "r", "fields": ["correct"], "judge": "j", "judge_identity": {}, "generation": {},
        "repeats": 1, "items": 3, "judged": 3, "scored": 0, "unscored": 3, "answer_failures": {},
        "judge_calls": 3, "parsed": 0, "parse_failures": 0, "judge_errors": {}, "requests": 3,
        "cache_hits": 0, "prompt_tokens": 0, "completion_tokens": 0, "new_prompt_tokens": 0,
        "new_completion_tokens": 0, "elapsed_s": 0.0,
    }  # fmt: skip
    return JudgeSummary(**{**base, **counts})  # type: ignore[arg-type]


def test_the_issue_s_pass_no_longer_hides_its_failed_calls() -> None:
    """Issue 23: "0/3 answers scored; 1 unparsed judge replies" and exit 0, with two calls failed."""
    s = _judge_summary(parse_failures=1, unparsed_at_limit=1, judge_errors={"context_length": 2})
    line = JudgeResult({}, s, Path("scores/r.jsonl"), Path("scores/r.summary.json")).describe()
    assert line.startswith("0/3 answers scored; 2 failed judge calls, 1 unparsed judge replies")
    found = failures(s, shrink="--snippets")
    assert [(f.kind, f.count) for f in found] == [("context_length", 2), ("unparsed", 1)]
    assert "lower --snippets" in found[0].fix
    assert "1 stopped unfinished, at the reply limit or the end of the judge's context" in found[1].fix
    assert pass_failed(s)
    unparsed_only = _judge_summary(parse_failures=3, unparsed_reasons={"echo": 1, "no_verdict": 2})
    assert not pass_failed(unparsed_only) and [f.kind for f in failures(unparsed_only)] == ["unparsed"]
    assert failures(unparsed_only)[0].fix.endswith("(why: no_verdict 2, echo 1)")  # the typed reasons
    answers = _judge_summary(answer_failures={"answer_failed:timeout": 1}, judged=2)
    assert [(f.kind, f.unit) for f in failures(answers)] == [("answer_failed:timeout", "answers")]


def test_the_judge_command_is_listed_with_its_options() -> None:
    listed = run_cli("--help")
    assert listed.returncode == 0 and "judge" in listed.stdout
    helped = run_cli("judge", "--help")
    assert helped.returncode == 0
    for option in ("--judge", "--rubric", "--repeats", "--snippets", "--n-ctx", "--allow-failures"):
        assert option in helped.stdout


def test_same_model_is_the_same_weights_or_the_same_served_name() -> None:
    """Self-judging is one model under two roles, whatever serves it: the same embedded weights at
    another context size, or the same model name on another server; never two different models."""
    from clinieval.judge.run import same_model

    smol = {
        "backend": "llamacpp",
        "file": "a.gguf",
        "fingerprint": "abc",
        "chat_template": True,
        "n_ctx": 4096,
    }
    assert same_model(smol, {**smol, "n_ctx": 2048, "chat_template": False})
    assert not same_model(smol, {**smol, "fingerprint": "def"})
    api = {"backend": "openai", "api": "chat", "base_url": "http://127.0.0.1:1/v1", "model": "m"}
    assert same_model(api, {**api, "base_url": "http://127.0.0.1:2/v1", "api": "completions"})
    assert not same_model(api, {**api, "model": "other"})
    assert not same_model(api, smol) and not same_model({"backend": "openai"}, {"backend": "openai"})
