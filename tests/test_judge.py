"""The LLM-judge core and MedAlign's rubric: parsers on real-looking judge replies, and judging
a small run directory with the real embedded model (cache, repeats, resume, failures as data).

The embedded SmolLM2 is a real judge model here only in the mechanical sense: its verdicts say
nothing clinical, which is exactly why the scores carry a warning. Stand-ins appear only where a
real model cannot produce the event on demand (a crash mid-run, a provider timeout or content
filter on the judge call); each wraps the real model and says so in its name.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

import pytest

from clinieval.benchmarks.medalign.scoring import MedAlignRubric
from clinieval.engine.runner import CallTally
from clinieval.errors import UserError
from clinieval.judge.rubric import (
    Rubric,
    Verdict,
    VerdictParseError,
    labelled_text,
    parse_score,
    parse_yes_no,
)
from clinieval.judge.run import (
    DEFAULT_JUDGE_GENERATION,
    JudgeResult,
    JudgeSummary,
    judge_run,
    read_judge_scores,
)
from clinieval.models.base import Model
from clinieval.models.spec import BackendOptions, parse_model_spec
from clinieval.records.cache import request_key
from clinieval.records.runs import RunDir, append_record, build_manifest
from clinieval.records.sample_record import SampleRecord
from clinieval.types import JSON, ErrorKind, GenerationConfig, LoglikOutput, Message, ModelOutput, Sample

# --------------------------------------------------------------------------------------------
# Parsers

OK = {"correct": 1.0, "score": 5.0, "c1": 0.0, "c2": 0.0, "c3": 0.0}
CLEAN = '{"rationale": "Matches the EHR.", "C1": false, "C2": false, "C3": false, "score": 5}'

MEDALIGN_REPLIES: list[tuple[str, str, Verdict | None]] = [
    ("clean JSON", CLEAN, Verdict(OK, "Matches the EHR.")),
    (
        "fenced JSON",
        '```json\n{"rationale": "Wrong dose.", "C1": false, "C2": true, "C3": false, "score": 2}\n```',
        Verdict({"correct": 0.0, "score": 2.0, "c1": 0.0, "c2": 1.0, "c3": 0.0}, "Wrong dose."),
    ),
    (
        "prose around the JSON",
        f"Here is my review of the answer.\n\n{CLEAN}\n\nLet me know if you need more detail.",
        Verdict(OK, "Matches the EHR."),
    ),
    (
        "echoed format first, then the verdict",
        '{"rationale": "<one to three sentences>", "C1": <true|false>, "C2": <true|false>, '
        '"C3": <true|false>, "score": <1-5>}\n'
        '{"rationale": "Off topic.", "C1": false, "C2": false, "C3": true, "score": 1}',
        Verdict({"correct": 0.0, "score": 1.0, "c1": 0.0, "c2": 0.0, "c3": 1.0}, "Off topic."),
    ),
    (
        "Python-style dict",
        "{'C1': False, 'C2': False, 'C3': False, 'score': 4, 'rationale': \"The patient's meds match.\"}",
        Verdict({**OK, "score": 4.0}, "The patient's meds match."),
    ),
    (
        "yes/no strings, score as a string, lower-case keys, braces inside the rationale",
        '{"c1": "no", "c2": "No.", "c3": "yes", "score": "3", "rationale": "Lists {meds} only."}',
        Verdict({"correct": 0.0, "score": 3.0, "c1": 0.0, "c2": 0.0, "c3": 1.0}, "Lists {meds} only."),
    ),
    (
        "no rationale",
        '{"C1": true, "C2": true, "C3": false, "score": "2/5"}',
        Verdict({"correct": 0.0, "score": 2.0, "c1": 1.0, "c2": 1.0, "c3": 0.0}, None),
    ),
    (
        "verdict nested in an envelope",
        '{"review": {"C1": false, "C2": false, "C3": false, "score": 5}}',
        Verdict(OK, None),
    ),
    ("single quotes with JSON literals", "{'C1': false, 'C2': false, 'C3': false, 'score': 5}", None),
    ("trailing comma", '{"C1": false, "C2": false, "C3": false, "score": 4,}', None),
    ("missing field", '{"C1": false, "C2": false, "score": 4, "rationale": "ok"}', None),
    ("score 7 out of range", '{"C1": false, "C2": false, "C3": false, "score": 7}', None),
    ("score 0 out of range", '{"C1": false, "C2": false, "C3": false, "score": 0}', None),
    ("half score", '{"C1": false, "C2": false, "C3": false, "score": 4.5}', None),
    ("score out of 10", '{"C1": false, "C2": false, "C3": false, "score": "8/10"}', None),
    ("boolean score", '{"C1": false, "C2": false, "C3": false, "score": true}', None),
    ("criterion 'maybe'", '{"C1": "maybe", "C2": false, "C3": false, "score": 3}', None),
    ("truncated by max_tokens", '{"rationale": "The answer lists lisinopril but', None),
    ("prose only", "The answer is correct and complete. Score: 5", None),
    ("empty output", "", None),
    ("whitespace only", "  \n ", None),
]


@pytest.mark.parametrize(
    ("text", "expected"), [c[1:] for c in MEDALIGN_REPLIES], ids=[c[0] for c in MEDALIGN_REPLIES]
)
def test_medalign_parser(text: str, expected: Verdict | None) -> None:
    rubric = MedAlignRubric()
    if expected is None:
        with pytest.raises(VerdictParseError):
            rubric.parse(text)
    else:
        assert rubric.parse(text) == expected


YES_NO: list[tuple[str, bool | None]] = [
    ("Yes.", True),
    ("no, the output selects option B", False),
    ("**Yes**", True),
    ("  YES", True),
    ('"No"', False),
    ("Answer: no", False),
    ("The model output matches the correct choice.\n\nyes", True),
    ("Verdict: yes\nFinal answer: no", False),  # the last verdict line: the judge corrected itself
    ("There is no match between them.", None),
    ("Nope", None),
    ("", None),
]


@pytest.mark.parametrize(("text", "expected"), YES_NO)
def test_parse_yes_no(text: str, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(VerdictParseError):
            parse_yes_no(text)
    else:
        assert parse_yes_no(text) is expected


SCORES: list[tuple[str, float, float, float | None]] = [
    ("Score: 4\nReasoning: fine", 1, 5, 4.0),
    ("**Score:** 2", 1, 5, 2.0),
    ("score = 3/5", 1, 5, 3.0),
    ("I give it 4 out of 5.", 1, 5, 4.0),
    ("Overall 5/5, excellent.", 1, 5, 5.0),
    ("Score: 1\nReasoning: matches the note of 2130-04-02", 0, 1, 1.0),
    ("Score: 7", 1, 5, None),
    ("Score: 4/10", 1, 5, None),
    ("Score: 3.5", 1, 5, None),
    ("no number here", 1, 5, None),
    ("", 1, 5, None),
]


@pytest.mark.parametrize(("text", "low", "high", "expected"), SCORES)
def test_parse_score(text: str, low: float, high: float, expected: float | None) -> None:
    if expected is None:
        with pytest.raises(VerdictParseError):
            parse_score(text, low, high)
    else:
        assert parse_score(text, low, high) == expected


def test_labelled_text() -> None:
    assert (
        labelled_text("Score: 1\nReasoning: It matches.\nSee note 2.", "Reasoning")
        == "It matches.\nSee note 2."
    )
    assert labelled_text("Score: 1", "Reasoning") is None


# --------------------------------------------------------------------------------------------
# The MedAlign prompt

GOLD = "Lisinopril 10 mg daily."
SNIPPETS = [f"snippet {i}: [RxNorm/314076] lisinopril 10 MG Oral Tablet" for i in range(7)]


def _record(
    sid: str,
    answer: ModelOutput | None,
    *,
    target: str | None = GOLD,
    snippets: Sequence[str] = (),
    question: str = "What antihypertensive is the patient on?",
) -> SampleRecord:
    meta: JSON = {"evidence_snippets": list(snippets)} if snippets else {}
    sample = Sample(id=sid, input=question, context="<record>...</record>", target=target, metadata=meta)
    return SampleRecord(sample=sample, repeat=0, messages=[Message("user", question)], output=answer)


def test_medalign_prompt_shows_instruction_gold_snippets_and_answer() -> None:
    rec = _record("a", ModelOutput(text="Lisinopril."), snippets=SNIPPETS)
    (msg,) = MedAlignRubric().messages(rec)
    assert msg.role == "user"
    text = msg.content
    for part in ("What antihypertensive is the patient on?", GOLD, '"""Lisinopril."""', "C1", "C2", "C3"):
        assert part in text
    assert "snippet 4" in text and "snippet 5" not in text  # at most five by default
    assert text.index("## Instruction") < text.index("## Reference") < text.index("## Answer to review")

    no_gold = MedAlignRubric(max_snippets=2).messages(_record("b", ModelOutput(text="x"), target=None))[0]
    assert "Reference answer" not in no_gold.content and "No EHR excerpts" in no_gold.content

    own = MedAlignRubric(snippets=lambda r: ["from the lead's retriever"]).messages(rec)[0].content
    assert "from the lead's retriever" in own and "snippet 0" not in own

    with pytest.raises(ValueError, match="no answer"):
        MedAlignRubric().messages(_record("c", ModelOutput.failure(ErrorKind.TIMEOUT, "t")))


def test_medalign_primary_field_is_selectable() -> None:
    assert MedAlignRubric().fields[0] == "correct"
    assert MedAlignRubric(primary="score").fields == ("score", "correct", "c1", "c2", "c3")
    with pytest.raises(ValueError, match="primary"):
        MedAlignRubric(primary="bogus")


# --------------------------------------------------------------------------------------------
# judge_run with the real embedded model

REPEATS = 3
GEN = GenerationConfig(max_tokens=8, temperature=0.0, seed=0)


@dataclass(frozen=True, slots=True)
class YesNoRubric:
    """An EHRNoteQA-style yes/no judge built from the generic parts (short replies: fast tests)."""

    name: str = "yes_no"
    fields: tuple[str, ...] = ("correct",)

    def messages(self, record: SampleRecord) -> list[Message]:
        assert record.output is not None
        return [
            Message(
                "user",
                f"Question: {record.sample.input}\nReference answer: {record.sample.target}\n"
                f"Model answer: {record.output.text}\nDoes the model answer match the reference "
                'answer? Respond solely with "yes" or "no".',
            )
        ]

    def parse(self, text: str) -> Verdict:
        return Verdict({"correct": 1.0 if parse_yes_no(text) else 0.0}, None)


@dataclass(slots=True)
class EveryOtherFails:
    """The same rubric (same name and prompt, so same cache keys) whose parse fails on even calls;
    with one worker the calls come in (item, repeat) order, so which repeats fail is fixed."""

    inner: YesNoRubric
    calls: list[int] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.inner.name

    @property
    def fields(self) -> tuple[str, ...]:
        return ("correct", "score")

    def messages(self, record: SampleRecord) -> list[Message]:
        return self.inner.messages(record)

    def parse(self, text: str) -> Verdict:
        self.calls.append(1)
        if len(self.calls) % 2 == 0:
            raise VerdictParseError("forced failure")
        return Verdict({"correct": 1.0, "score": float(len(self.calls))}, f"call {len(self.calls)}")


class CrashAfter:
    """Stand-in for a process killed mid-run: the real judge, raising after ``n`` real calls."""

    def __init__(self, model: Model, n: int) -> None:
        self.model, self.left = model, n
        self.name, self.identity, self.max_concurrency = model.name, model.identity, 1

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        if self.left == 0:
            raise KeyboardInterrupt("killed")
        self.left -= 1
        return await self.model.generate(messages, config)


class ProviderFails:
    """Stand-in for a hosted judge's failure (timeout, content filter): no real call is made."""

    def __init__(self, model: Model, kind: ErrorKind) -> None:
        self.kind = kind
        self.name, self.identity, self.max_concurrency = model.name, model.identity, 1

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        return ModelOutput.failure(self.kind, f"stand-in {self.kind.value}")


@pytest.fixture(scope="module")
def smol() -> Iterator[Model]:
    model = parse_model_spec("llamacpp:smollm2-135m-instruct", BackendOptions(n_ctx=2048))
    yield model
    asyncio.run(model.aclose())


def make_run(path: Path) -> RunDir:
    """A finished run: two answered items and one the provider refused."""
    run = RunDir.create_or_resume(path, build_manifest({"task": "judge-test", "model": "fixture"}, []))
    records = [
        _record(
            "med", ModelOutput(text="The patient takes lisinopril 10 mg once daily."), snippets=SNIPPETS[:2]
        ),
        _record(
            "visit",
            ModelOutput(text="Seen for cough; amoxicillin prescribed."),
            target="Follow-up for pneumonia; amoxicillin started.",
            question="Summarize the last visit.",
        ),
        _record("refused", ModelOutput.failure(ErrorKind.CONTENT_FILTER, "filtered")),
    ]
    with run.open_appender() as f:
        for rec in records:
            append_record(f, rec)
    return run


def judge(run: RunDir, model: object, rubric: object, **kw: object) -> JudgeResult:
    options: dict[str, object] = {"repeats": REPEATS, "generation": GEN, "progress": False, **kw}
    return asyncio.run(judge_run(run, model, rubric, **options))  # type: ignore[arg-type]


def judge_keys(run: RunDir) -> set[str]:
    with sqlite3.connect(run.path / "cache.sqlite") as db:
        return {k for (k,) in db.execute("SELECT key FROM requests WHERE kind = 'judge'")}


@pytest.fixture(scope="module")
def judged(
    smol: Model, tmp_path_factory: pytest.TempPathFactory
) -> tuple[RunDir, JudgeResult, JudgeResult, bytes]:
    """One run judged twice with the real model: (run, first pass, second pass, first file)."""
    run = make_run(tmp_path_factory.mktemp("judged") / "run")
    first = judge(run, smol, YesNoRubric())
    first_file = first.scores_path.read_bytes()
    second = judge(run, smol, YesNoRubric())
    return run, first, second, first_file


def test_repeats_are_distinct_requests_and_a_rerun_makes_none(
    judged: tuple[RunDir, JudgeResult, JudgeResult, bytes], smol: Model
) -> None:
    run, first, second, first_file = judged
    assert first.summary.requests == 2 * REPEATS and first.summary.cache_hits == 0
    rubric = YesNoRubric()
    expected = {
        request_key(
            "judge",
            smol.identity,
            # repeat r asks with seed + r (distinct draws whenever the temperature allows)
            {**replace(GEN, seed=r).to_dict(), "rubric": rubric.name},
            [{"role": m.role, "content": m.content} for m in rubric.messages(rec)],
            r,
        )
        for rec in run.records()
        if rec.output is not None and rec.output.ok
        for r in range(REPEATS)
    }
    assert len(expected) == 2 * REPEATS and judge_keys(run) == expected
    assert second.summary.requests == 0 and second.summary.cache_hits == 2 * REPEATS
    assert second.scores_path.read_bytes() == first_file
    assert second.scores == first.scores
    assert first.summary.new_completion_tokens > 0 and second.summary.new_completion_tokens == 0
    assert second.summary.completion_tokens == first.summary.completion_tokens


def test_scores_file_and_accounting(judged: tuple[RunDir, JudgeResult, JudgeResult, bytes]) -> None:
    run, first, _, _ = judged
    lines = [json.loads(line) for line in first.scores_path.read_text().splitlines()]
    assert [(d["sample_id"], d["repeat"]) for d in lines] == [("med", 0), ("visit", 0), ("refused", 0)]
    for d in lines[:2]:
        meta = d["metadata"]
        assert [e["repeat"] for e in meta["judge_repeats"]] == list(range(REPEATS))
        assert meta["parsed"] + meta["failed"] == REPEATS
        values = [e["values"]["correct"] for e in meta["judge_repeats"] if e["values"] is not None]
        if values:
            assert d["value"] == pytest.approx(sum(values) / len(values)) == meta["mean"]["correct"]
        else:  # unreadable replies are unscored, never "no"
            assert d["value"] is None and meta["error_kind"] == "judge_unparsed"
        assert "tiny embedded model" in meta["judge_warning"]
        assert meta["judge"]["name"] == "smollm2-135m-instruct"
    refused = lines[2]
    assert refused["value"] is None and refused["metadata"]["judge_repeats"] == []
    assert refused["metadata"]["error_kind"] == "answer_failed:content_filter"

    s = json.loads(first.summary_path.read_text())
    assert s["items"] == 3 and s["judged"] == 2 and s["judge_calls"] == 2 * REPEATS
    assert s["answer_failures"] == {"answer_failed:content_filter": 1}
    assert s["parsed"] + s["parse_failures"] == 2 * REPEATS
    assert s["parse_failures"] == sum(d["metadata"]["failed"] for d in lines)
    assert s["requests"] + s["cache_hits"] == s["judge_calls"] and s["judge_errors"] == {}
    assert s["prompt_tokens"] > 0 and "tiny embedded model" in s["warning"]
    assert s["generation"] == GEN.to_dict()
    assert read_judge_scores(run, "yes_no") == first.scores


def test_parse_failures_are_counted_not_zeroed(
    judged: tuple[RunDir, JudgeResult, JudgeResult, bytes], smol: Model, tmp_path: Path
) -> None:
    src, *_ = judged
    run = RunDir(tmp_path / "copy")
    shutil.copytree(src.path, run.path)
    result = judge(run, smol, EveryOtherFails(YesNoRubric()), concurrency=1)
    assert result.summary.requests == 0  # same rubric name and prompt: every reply is cached
    assert result.summary.parse_failures == 3 and result.summary.parsed == 3
    med, visit = result.scores[("med", 0)], result.scores[("visit", 0)]
    # med: calls 1, 2, 3 -> repeats 0 and 2 parse (score 1 and 3), repeat 1 fails and is left out.
    assert med.value == 1.0 and med.metadata["mean"] == {"correct": 1.0, "score": 2.0}
    assert med.metadata["sd"]["score"] == pytest.approx(2**0.5)
    assert med.metadata["parsed"] == 2 and med.metadata["failed"] == 1
    failed = med.metadata["judge_repeats"][1]
    assert (
        failed["values"] is None
        and failed["error_kind"] == "unparsed"
        and failed["parse_error"] == "forced failure"
    )
    assert med.explanation == "call 1"
    assert visit.metadata["parsed"] == 1 and visit.metadata["mean"]["score"] == 5.0
    assert visit.metadata["sd"]["score"] is None  # one parsed repeat: no spread to report

    scores = read_judge_scores(run, "yes_no", field="score")
    assert scores[("med", 0)].value == 2.0 and scores[("refused", 0)].value is None


def test_killed_judging_run_resumes_without_repeating_a_request(smol: Model, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    with pytest.raises(KeyboardInterrupt):
        judge(run, CrashAfter(smol, 2), YesNoRubric(), repeats=2)
    assert len(judge_keys(run)) == 2 and not (run.path / "scores" / "yes_no.jsonl").exists()
    resumed = judge(run, smol, YesNoRubric(), repeats=2)
    assert resumed.summary.requests == 2 and resumed.summary.cache_hits == 2
    assert len(judge_keys(run)) == 4 and resumed.summary.scored + resumed.summary.unscored == 3


def test_judge_failures_are_unscored_and_only_lasting_ones_are_cached(smol: Model, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    timed_out = judge(run, ProviderFails(smol, ErrorKind.TIMEOUT), YesNoRubric(), repeats=2)
    assert timed_out.summary.judge_errors == {"timeout": 4} and timed_out.summary.scored == 0
    assert timed_out.scores[("med", 0)].value is None
    assert timed_out.scores[("med", 0)].metadata["error_kind"] == "judge_failed:timeout"
    assert judge_keys(run) == set()  # transient: a rerun asks again

    filtered = judge(run, ProviderFails(smol, ErrorKind.CONTENT_FILTER), YesNoRubric(), repeats=2)
    assert filtered.summary.requests == 4 and len(judge_keys(run)) == 4
    again = judge(run, smol, YesNoRubric(), repeats=2)  # the real judge: refusals come from the cache
    assert again.summary.requests == 0 and again.summary.judge_errors == {"content_filter": 4}


def test_medalign_rubric_with_the_real_judge(smol: Model, tmp_path: Path) -> None:
    """The full MedAlign prompt through the tiny model: whatever it says is accounted for."""
    run = make_run(tmp_path / "run")
    result = judge(run, smol, MedAlignRubric(), repeats=1, generation=GenerationConfig(max_tokens=32))
    s = result.summary
    assert s.requests == 2 and s.parsed + s.parse_failures == 2 and s.prompt_tokens > 800
    for key in (("med", 0), ("visit", 0)):
        score = result.scores[key]
        parsed = score.metadata["parsed"]
        assert (score.value is None) == (parsed == 0)
        assert score.value is None or 0.0 <= score.value <= 1.0
        assert set(score.metadata["mean"]) == {"correct", "score", "c1", "c2", "c3"}
        assert all(len(e["raw"]) <= 2000 for e in score.metadata["judge_repeats"])


def test_defaults_and_argument_checks(smol: Model, tmp_path: Path) -> None:
    assert GenerationConfig(temperature=0.0, seed=0, max_tokens=512) == DEFAULT_JUDGE_GENERATION
    run = make_run(tmp_path / "run")
    with pytest.raises(UserError, match="repeats"):
        judge(run, smol, YesNoRubric(), repeats=0)
    empty = RunDir.create_or_resume(tmp_path / "empty", build_manifest({"task": "none"}, []))
    with pytest.raises(UserError, match="no finished samples"):
        judge(empty, smol, YesNoRubric())
    loglik_only = RunDir.create_or_resume(tmp_path / "ll", build_manifest({"task": "ll"}, []))
    rec = _record("x", None)
    rec.loglik = LoglikOutput(logliks=[-1.0])
    with loglik_only.open_appender() as f:
        append_record(f, rec)
    with pytest.raises(UserError, match="no generated answers"):
        judge(loglik_only, smol, YesNoRubric())


def test_judge_behind_a_real_openai_compatible_server(llama_server: str, tmp_path: Path) -> None:
    run = make_run(tmp_path / "run")
    opts: dict[str, object] = {"repeats": 2, "generation": GEN, "progress": False}

    async def go() -> tuple[JudgeResult, JudgeResult]:
        model = parse_model_spec(f"openai:{llama_server}@smol")
        try:
            return (
                await judge_run(run, model, YesNoRubric(), **opts),  # type: ignore[arg-type]
                await judge_run(run, model, YesNoRubric(), **opts),  # type: ignore[arg-type]
            )
        finally:
            await model.aclose()

    first, second = asyncio.run(go())
    assert first.summary.requests == 4 and first.summary.judge_errors == {}
    assert first.summary.judge_calls == 4 and first.summary.new_completion_tokens > 0
    assert len(judge_keys(run)) == 4 and second.summary.requests == 0
    assert second.scores == first.scores
    # the summary says which proxies the judge's requests went through: none to a loopback server
    assert json.loads(first.summary_path.read_text())["proxies"] == []


# --------------------------------------------------------------------------------------------
# Every rubric's parser against its own prompt (small judges echo prompts), the prompt with the
# answer filled in, and mixed or hedged replies: none of these may become a verdict.


def _judged_record() -> SampleRecord:
    from clinieval.types import ModelOutput, Sample

    sample = Sample(
        id="q1",
        input="Which anticoagulant was the patient discharged on?",
        context="DISCHARGE SUMMARY\nDischarge medications: apixaban 5 mg twice daily.",
        choices=("Warfarin", "Apixaban", "Heparin", "Aspirin", "None"),
        target="Apixaban 5 mg twice daily",
        metadata={"answer": "B"},
    )
    return SampleRecord(sample=sample, repeat=0, messages=[], output=ModelOutput(text="B. Apixaban"))


def _rubrics() -> list[Rubric]:
    from clinieval.benchmarks.ehrnoteqa.scoring import ChoiceJudgeRubric, FreeTextJudgeRubric
    from clinieval.judge.reference import ReferenceRubric

    return [ChoiceJudgeRubric(), FreeTextJudgeRubric(), MedAlignRubric(), ReferenceRubric()]


@pytest.mark.parametrize("rubric", _rubrics(), ids=lambda r: type(r).__name__)
def test_a_rubric_never_reads_a_verdict_out_of_its_own_prompt(rubric: Rubric) -> None:
    from clinieval.benchmarks.ehrnoteqa.scoring import CHOICE_JUDGE_PROMPT, FREE_TEXT_JUDGE_PROMPT
    from clinieval.benchmarks.medalign.scoring import REVIEW
    from clinieval.judge.reference import PROMPT

    filled = rubric.messages(_judged_record())[-1].content
    for text in (filled, CHOICE_JUDGE_PROMPT, FREE_TEXT_JUDGE_PROMPT, REVIEW, PROMPT):
        with pytest.raises(VerdictParseError):
            rubric.parse(text)


def test_an_echoed_prompt_is_cut_before_the_verdict_is_read() -> None:
    from clinieval.benchmarks.ehrnoteqa.scoring import FreeTextJudgeRubric
    from clinieval.judge.rubric import strip_echo

    rubric = FreeTextJudgeRubric()
    prompt = rubric.messages(_judged_record())[-1].content
    reply = prompt + "\nScore: 0\nReasoning: the answer names the wrong drug."
    assert rubric.parse(strip_echo(reply, prompt)).values == {"correct": 0.0}
    assert strip_echo("Score: 1", prompt) == "Score: 1"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("No doubt, the answer is right. Yes.", True),
        ("No way. The output picks warfarin.\nAnswer: no", False),
        ("Yes and no: it names the drug but not the dose.", None),
        ("yes/no", None),
        ('I must respond "yes" or "no".', None),
        ("Verdict: yes. On reflection, no.", False),  # a stated revision replaces what it revises
        ("Verdict: yes. No.", None),  # an unexplained conflict
        ("Respond solely with yes or no", None),
    ],
)
def test_yes_no_mixed_and_hedged(text: str, expected: bool | None) -> None:
    if expected is None:
        with pytest.raises(VerdictParseError):
            parse_yes_no(text)
    else:
        assert parse_yes_no(text) is expected


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "Score: 1\nReasoning: it names the drug, but not the dose, so\nScore: 0",
            0.0,
        ),  # reasons, then a new score
        ("Score: 1\nReasoning: it names the drug, but not the dose.\nScore: 0", None),  # no revision stated
        ("Score: 1\nScore: 0", None),  # back to back, nothing between: an unexplained conflict
        ("Score: 1\nReasoning: right.\nScore: 1", 1.0),
        ("Score 1 if the model's answer is correct", None),  # the instruction, not a verdict
        ("Reasoning: it is wrong.\nScore: 0", 0.0),
        ("My final score: 1", 1.0),
        ("between 3/5 and 4/5", None),
    ],
)
def test_score_read_where_the_format_puts_it(text: str, expected: float | None) -> None:
    high = 5 if "/5" in text else 1
    if expected is None:
        with pytest.raises(VerdictParseError):
            parse_score(text, 0, high)
    else:
        assert parse_score(text, 0, high) == expected


def test_judge_summary_carries_every_call_tally_count() -> None:
    """The summary takes the pass's call counts by name (``**asdict(tally)``): a count added to
    CallTally needs its place in JudgeSummary (and in ``summary.json``)."""
    summary_fields = {f.name for f in fields(JudgeSummary)}
    assert {f.name for f in fields(CallTally)} <= summary_fields
