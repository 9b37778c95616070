"""AutoMedEval's training-data pipeline (issue 15): filter (a), generate (b), teach (c), physician
review export/import (d) and the curriculum (f), each on small real files, against real local
servers and the real embedded model; every expectation is computed by hand."""

from __future__ import annotations

import asyncio
import csv
import json
import re
from pathlib import Path
from typing import Any

import pytest
import typer
from typer.testing import CliRunner

from clinieval.benchmarks.automedeval.build.curriculum import order, sft_messages, with_revisions
from clinieval.benchmarks.automedeval.build.filtering import (
    default_patterns_text,
    first_match,
    parse_patterns,
    read_qa,
)
from clinieval.benchmarks.automedeval.build.instances import (
    Answer,
    Evaluation,
    Instance,
    LookupRecord,
    Verification,
    read_instances,
    write_instances,
)
from clinieval.benchmarks.automedeval.cli.build import build_app
from clinieval.errors import UserError

FULL: dict[str, Any] = {
    "id": "q1",
    "question": "What lowers blood pressure quickly in a hypertensive emergency?",
    "reference": "Intravenous labetalol or nicardipine, titrated.",
    "responses": [{"model": "a", "text": "IV labetalol."}, {"model": "b", "text": "Oral amlodipine."}],
    "evaluation": {
        "teacher": "t",
        "text": "Analyze: Step 1: ok.\nScore: Doctor 1: 5 points. Doctor 2: 2 points.",
        "scores": [5, 2],
        "lookups": [{"query": "labetalol", "chunks": ["kb.txt#0"]}],
    },
    "verification": {"keep": True, "reasons": ["correct"], "physician": "dr1"},
    "quality": "high",
    "quality_score": 0.875,
    "suggestions": ["Labetalol is given intravenously."],
}


def cli(*args: str) -> Any:
    """The build commands mounted as `clinieval automedeval build` will mount them, in process."""
    app = typer.Typer()
    app.add_typer(build_app, name="build")
    return CliRunner().invoke(app, ["build", *args])


def jsonl(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def write_jsonl(path: Path, *rows: object) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


# --- instances ------------------------------------------------------------------------------


def test_instances_round_trip_and_leave_unset_steps_out(tmp_path: Path) -> None:
    bare = {"id": "q2", "question": "Q?", "reference": "R.", "responses": []}
    path = write_jsonl(tmp_path / "i.jsonl", FULL, bare)
    read = read_instances(path)
    assert [x.to_dict() for x in read] == [FULL, bare]  # nothing unset is written, nothing added
    first = read[0]
    assert first.evaluation == Evaluation(
        "t", FULL["evaluation"]["text"], (5, 2), (LookupRecord("labetalol", ("kb.txt#0",)),)
    )
    assert first.verification == Verification(True, ("correct",), "dr1") and first.scored
    assert first.judge_item().models == ("a", "b")
    assert read[1] == Instance("q2", "Q?", "R.") and not read[1].scored
    write_instances(tmp_path / "again.jsonl", read)
    assert jsonl(tmp_path / "again.jsonl") == [FULL, bare]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"id": ""}, "field 'id' should be non-empty text"),
        ({"question": 3}, "field 'question' should be text, got int"),
        ({"responses": [{"model": "a"}]}, "field 'responses[0]': field 'text' should be text"),
        ({"evaluation": {**FULL["evaluation"], "scores": [5]}}, "'scores' has 1 score(s) for 2 response(s)"),
        ({"evaluation": {**FULL["evaluation"], "scores": [5, 0]}}, "list of whole numbers 1-5"),
        ({"verification": {"keep": "yes"}}, "verification: field 'keep' should be true or false"),
        ({"quality": "medium"}, "field 'quality' is 'medium'; expected \"high\" or \"low\""),
        ({"quality_score": "high"}, "field 'quality_score' should be a number"),
        ({"suggestions": ["ok", 2]}, "field 'suggestions[1]' should be text, got int"),
    ],
)
def test_a_bad_instance_is_one_error_naming_file_line_and_field(
    tmp_path: Path, change: dict[str, Any], message: str
) -> None:
    path = write_jsonl(tmp_path / "i.jsonl", {**FULL, "id": "fine"}, {**FULL, **change})
    with pytest.raises(UserError) as e:
        read_instances(path)
    assert str(e.value).startswith(f"{path}:2: ") and message in str(e.value), str(e.value)


def test_a_repeated_instance_id_names_both_lines(tmp_path: Path) -> None:
    path = write_jsonl(tmp_path / "i.jsonl", FULL, FULL)
    with pytest.raises(UserError, match=r"i\.jsonl:2: field 'id': 'q1' repeats .*i\.jsonl:1"):
        read_instances(path)


# --- (a) filter -----------------------------------------------------------------------------

WIKIDOC = [
    {"instruction": "Answer this question truthfully", "input": "What causes gout?",
     "output": "Gout is caused by uric acid crystals depositing in joints."},
    {"instruction": "Answer this question truthfully", "input": "Can you rephrase this sentence?",
     "output": "Sure, here is the text rephrased in plain words."},
    {"instruction": "What is the first-line drug for type 2 diabetes?", "input": "",
     "output": "Metformin, unless contraindicated."},
    {"instruction": "Answer this question truthfully", "input": "What is a CT scan for?",
     "output": "A CT scan can provide more information about the size of a tumor than an X-ray."},
    {"instruction": "Answer this question truthfully", "input": "Tell me about xyz.",
     "output": "As an AI language model, I do not have information about xyz."},
]  # fmt: skip


def test_filter_wikidoc_drops_by_pattern_and_counts(tmp_path: Path) -> None:
    qa = write_jsonl(tmp_path / "wikidoc.jsonl", *WIKIDOC)
    out = tmp_path / "f" / "instances.jsonl"
    done = cli("filter", str(qa), "--out", str(out))
    assert done.exit_code == 0, done.output
    assert "5 read, 3 kept, 2 dropped ('rephras': 1, 'as an ai language model': 1)" in done.output
    kept = read_instances(out)
    # ids are the file lines; the empty input falls back to the instruction; "CT scans provide more
    # information" is medical content, not a request for context
    assert [(x.id, x.question, x.reference) for x in kept] == [
        ("line-1", "What causes gout?", "Gout is caused by uric acid crystals depositing in joints."),
        ("line-3", "What is the first-line drug for type 2 diabetes?", "Metformin, unless contraindicated."),
        ("line-4", "What is a CT scan for?", WIKIDOC[3]["output"]),
    ]
    assert all(x.responses == () for x in kept)
    dropped = jsonl(tmp_path / "f" / "dropped.jsonl")
    assert [(d["id"], d["dropped_by"]) for d in dropped] == [
        ("line-2", {"pattern": "rephras", "field": "question"}),
        ("line-5", {"pattern": "as an ai language model", "field": "reference"}),
    ]
    summary = json.loads((tmp_path / "f" / "filter-summary.json").read_text())
    assert summary["read"] == 5 and summary["kept"] == 3 and summary["dropped"] == 2
    assert summary["dropped_rate"] == pytest.approx(2 / 5)
    assert summary["dropped_by_pattern"]["rephras"] == 1 and sum(summary["dropped_by_pattern"].values()) == 2
    assert summary["dropped_by_field"] == {"question": 1, "reference": 1}
    assert summary["patterns"] == "built-in non_medical.txt"


def test_filter_reads_csv_and_json_arrays_and_user_patterns(tmp_path: Path) -> None:
    table = tmp_path / "qa.csv"
    table.write_text(
        'id,question,answer\nk1,"What is sepsis?","A dysregulated response to infection."\n'
        ',What is asthma?,"Airway inflammation, reversible."\n',
        encoding="utf-8",
    )
    assert [(x.id, x.reference) for x in read_qa(table)] == [
        ("k1", "A dysregulated response to infection."),
        ("line-3", "Airway inflammation, reversible."),
    ]
    array = tmp_path / "medical_meadow_wikidoc.json"
    array.write_text(json.dumps(WIKIDOC[:2]), encoding="utf-8")
    assert [x.id for x in read_qa(array)] == ["item-1", "item-2"]
    patterns = tmp_path / "p.txt"
    patterns.write_text("# only sepsis\nSEPSIS\n", encoding="utf-8")
    out = tmp_path / "kept.jsonl"
    done = cli("filter", str(table), "--out", str(out), "--patterns", str(patterns))
    assert done.exit_code == 0, done.output
    assert [x.id for x in read_instances(out)] == ["line-3"]  # case-insensitive
    assert json.loads((tmp_path / "filter-summary.json").read_text())["dropped_by_pattern"] == {"SEPSIS": 1}


def test_the_shipped_patterns_parse_and_each_catches_what_its_comment_says() -> None:
    patterns = parse_patterns(default_patterns_text(), "non_medical.txt")
    assert patterns[0].text == "rephras"
    hits = {
        "Could you please rephrase the question?": "rephras",
        "As an AI language model, I cannot diagnose.": "as an ai language model",
        "Could you please provide more context about the text?": "provide",
        "Is this sentence grammatically correct?": "grammatical",
        "I'm sorry, but there is no information given.": "sorry",
    }
    for text, expected in hits.items():
        hit = first_match(Instance("x", text, "r"), patterns)
        assert hit is not None and expected in hit[0].text and hit[1] == "question", text
    medical = [
        "Further imaging can provide more information about the lesion.",
        "The patient was sorry to hear the diagnosis.",
        "Metformin lowers hepatic glucose output.",
    ]
    assert all(first_match(Instance("x", "q", t), patterns) is None for t in medical)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ('{"instruction": "x", "input": "", "output": ""}\n', ":1: field 'output' is empty"),
        ('{"instruction": "", "input": "", "output": "y"}\n', ":1: field 'input' or 'instruction' is empty"),
        ('{"question": "q", "answer": 5}\n', ":1: field 'answer' should be text, got int"),
        ('{"prompt": "q"}\n', ":1: expected the fields instruction, input, output"),
        ('{"id": "a", "question": "q", "answer": "r"}\n{"id": "a", "question": "q", "answer": "r"}\n',
         ":2: field 'id': 'a' repeats"),
        ("not json\n", ":1: not valid JSON"),
    ],
)  # fmt: skip
def test_bad_qa_rows_name_file_line_and_field(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "qa.jsonl"
    path.write_text(content, encoding="utf-8")
    done = cli("filter", str(path), "--out", str(tmp_path / "o.jsonl"))
    assert isinstance(done.exception, UserError) and str(done.exception).startswith(str(path))
    assert message in str(done.exception), str(done.exception)
    assert not (tmp_path / "o.jsonl").exists()


def test_a_bad_pattern_names_its_line(tmp_path: Path) -> None:
    path = tmp_path / "p.txt"
    path.write_text("# fine\nrephras\n(unclosed\n", encoding="utf-8")
    with pytest.raises(UserError, match=r"p\.txt:3: '\(unclosed' is not a valid regular expression"):
        parse_patterns(path.read_text(), str(path))
    with pytest.raises(UserError, match=r":1: 'x\*\|' matches empty text"):
        parse_patterns("x*|\n", "p.txt")


# --- (b) generate ---------------------------------------------------------------------------


def _questions(tmp_path: Path, n: int) -> Path:
    rows = [Instance(f"q{i}", f"Question {i}?", f"Reference {i}.") for i in range(n)]
    path = tmp_path / f"in{n}.jsonl"
    write_instances(path, rows)
    return path


def test_generate_asks_each_model_once_per_question_with_the_papers_sampling(tmp_path: Path) -> None:
    from tests.fault_server import FaultServer

    out = tmp_path / "gen"
    with (
        FaultServer(responder=lambda q: f"Doctor A on {q}") as a,
        FaultServer(responder=lambda q: f"Doctor B on {q}") as b,
    ):
        specs = [f"openai:{a.url}@fault", f"openai:{b.url}@fault"]
        args = ("--model", specs[0], "--model", specs[1], "--out", str(out), "--no-progress")
        # two questions first, as if a pass was killed after them, then all three
        assert cli("generate", str(_questions(tmp_path, 2)), *args).exit_code == 0
        assert (len(a.log.received), len(b.log.received)) == (2, 2)
        done = cli("generate", str(_questions(tmp_path, 3)), *args)
        assert done.exit_code == 0, done.output
        assert (len(a.log.received), len(b.log.received)) == (3, 3)  # only the missing question asked
        again = cli("generate", str(_questions(tmp_path, 3)), *args)
        assert again.exit_code == 0 and (len(a.log.received), len(b.log.received)) == (3, 3)
    for body in [*a.log.bodies, *b.log.bodies]:
        assert (body["temperature"], body["top_k"], body["top_p"], body["max_tokens"], body["seed"]) == (
            0.5, 50, 1.0, 200, 0,
        )  # fmt: skip
        assert body["messages"][0]["role"] == "system" and "doctor" in body["messages"][0]["content"]
    written = read_instances(out / "instances.jsonl")
    # both servers serve the model "fault": each response is named by its spec, in --model order
    assert [x.id for x in written] == ["q0", "q1", "q2"]
    assert written[2].responses == (
        Answer(specs[0], "Doctor A on Question 2?"),
        Answer(specs[1], "Doctor B on Question 2?"),
    )
    summary = json.loads((out / "generate-summary.json").read_text())
    assert summary["written"] == 3 and summary["left_out"] == 0
    assert summary["calls"] == {"requests": 0, "cache_hits": 6, "prompt_tokens": 18, "completion_tokens": 6}


def test_generate_leaves_out_and_counts_an_item_a_model_failed_on(tmp_path: Path) -> None:
    from tests.fault_server import FaultServer

    rows = [Instance("ok", "Fine question?", "r"), Instance("bad", "Blocked FAULT:FILTER?", "r")]
    write_instances(tmp_path / "in.jsonl", rows)
    with FaultServer(responder=lambda q: "An answer.") as server:
        done = cli("generate", str(tmp_path / "in.jsonl"), "--model", f"openai:{server.url}@fault",
                   "--out", str(tmp_path / "gen"), "--no-progress")  # fmt: skip
    assert done.exit_code == 0, done.output
    assert "2 items x 1 models: 1 written, 1 left out" in done.output
    assert [x.id for x in read_instances(tmp_path / "gen" / "instances.jsonl")] == ["ok"]
    summary = json.loads((tmp_path / "gen" / "generate-summary.json").read_text())
    assert summary["left_out_ids"] == ["bad"]
    assert summary["models"][0]["answered"] == 1 and summary["models"][0]["failures"] == {"content_filter": 1}
    twice = cli("generate", str(tmp_path / "in.jsonl"), "--model", "openai:http://127.0.0.1:9/v1@m",
                "--model", "openai:http://127.0.0.1:9/v1@m", "--out", str(tmp_path / "x"))  # fmt: skip
    assert isinstance(twice.exception, UserError) and "is given twice" in str(twice.exception)


def test_generate_with_the_real_embedded_model(tmp_path: Path) -> None:
    """SmolLM2-135M on CPU answers two questions (48 new tokens at most, to stay fast on CPU: the
    paper's 200 are checked in the request bodies above); a rerun asks nothing."""
    from clinieval.benchmarks.automedeval.build.generate import GeneratePlan, generate_responses
    from clinieval.models.spec import BackendOptions, parse_model_spec

    rows = [Instance("a", "What is a normal resting heart rate for adults?", "60 to 100 beats per minute."),
            Instance("b", "Is fever a sign of infection?", "Often, though not always.")]  # fmt: skip
    plan = GeneratePlan(max_tokens=48, progress=False)

    def run() -> Any:
        model = parse_model_spec("llamacpp:smollm2-135m-instruct", BackendOptions(n_ctx=512))

        async def go() -> Any:
            try:
                return await generate_responses(rows, [("smollm2", model)], tmp_path / "gen", plan)
            finally:
                await model.aclose()  # else llama.cpp frees the model at interpreter exit, noisily

        return asyncio.run(go())

    first = run()
    assert [x.id for x in first.instances] == ["a", "b"] and not first.left_out
    assert all(x.responses[0].model == "smollm2" and x.responses[0].text for x in first.instances)
    assert first.tally.requests == 2 and 0 < first.tally.completion_tokens <= 2 * 48
    second = run()
    assert second.tally.requests == 0 and second.tally.cache_hits == 2
    assert second.instances == first.instances


# --- (c) teach ------------------------------------------------------------------------------


def _generated(tmp_path: Path) -> Path:
    rows = [
        Instance(f"q{i}", f"Patient question {i}?", "Reference.",
                 (Answer("a", f"answer a{i} scores 5"), Answer("b", f"answer b{i} scores 2"),
                  Answer("c", f"answer c{i} scores 4")))
        for i in range(3)
    ]  # fmt: skip
    rows.append(Instance("odd", "Unscorable question?", "Reference.", (Answer("a", "x"), Answer("b", "y"))))
    path = tmp_path / "generated.jsonl"
    write_instances(path, rows)
    return path


def test_teach_one_shot_in_original_order_with_the_knowledge_chain(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.knowledge import build_kb
    from clinieval.benchmarks.automedeval.prompts import EXAMPLE_REPLY
    from tests.fault_server import FaultServer

    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "htn.txt").write_text("Labetalol is first line in hypertensive emergency.", encoding="utf-8")
    (docs / "dm.txt").write_text("Metformin is the first-line drug for type 2 diabetes.", encoding="utf-8")
    (docs / "acs.txt").write_text("Aspirin is given in acute coronary syndrome.", encoding="utf-8")
    build_kb([docs], tmp_path / "kb")

    def reply(prompt: str) -> str:
        if prompt.startswith("According to the Reference"):
            return "Analyze: Step 1: knowledge used.\nScore: " + " ".join(
                f"Doctor {n}: 4 points." for n in (1, 2, 3)
            )
        if "Patient question 0?" in prompt:
            return "Analyze: unsure.\n[Question] first line drug for hypertensive emergency"
        if "Unscorable" in prompt:
            return "I cannot evaluate this."
        shown = re.findall(r"^Doctor \d: answer \w\d scores (\d)", prompt, re.M)
        return "Analyze: Step 1: compared.\nScore: " + " ".join(
            f"Doctor {n}: {s} points." for n, s in enumerate(shown, 1)
        )

    out = tmp_path / "taught"
    with FaultServer(responder=reply) as server:
        args = (str(_generated(tmp_path)), "--teacher", f"openai:{server.url}@fault", "--out", str(out),
                "--kb", str(tmp_path / "kb"), "--no-progress")  # fmt: skip
        done = cli("teach", *args)
        assert done.exit_code == 0, done.output
        assert "4 items: 4 evaluated (3 parsed, 1 unparsed), 0 failed, 1 lookups" in done.output
        asked = len(server.log.received)
        assert asked == 5  # 4 instances + 1 continuation after the lookup
        assert cli("teach", *args).exit_code == 0 and len(server.log.received) == asked  # all cached
    first = server.log.bodies[0]["messages"]
    assert [m["role"] for m in first] == ["system", "user", "assistant", "user"]  # the one-shot pair
    assert first[2]["content"] == EXAMPLE_REPLY and "sore throat" in first[1]["content"]
    assert "Doctor 3: X points." in first[0]["content"]
    assert all(b["temperature"] == 0.0 for b in server.log.bodies)
    taught = {x.id: x for x in read_instances(out / "instances.jsonl")}
    assert taught["q1"].evaluation is not None and taught["q1"].evaluation.scores == (5, 2, 4)  # not permuted
    q0 = taught["q0"].evaluation
    assert (
        q0 is not None and q0.scores == (4, 4, 4) and q0.text.startswith("Analyze: Step 1: knowledge used.")
    )
    assert q0.lookups == (
        LookupRecord("first line drug for hypertensive emergency", (f"{docs / 'htn.txt'}#0",)),
    )
    odd = taught["odd"].evaluation
    assert odd is not None and odd.scores is None and odd.text == "I cannot evaluate this."
    summary = json.loads((out / "teach-summary.json").read_text())
    assert (summary["parsed"], summary["unparsed"], summary["lookups"], summary["items_with_lookups"]) == (
        3,
        1,
        1,
        1,
    )
    assert summary["parse_rate"] == pytest.approx(3 / 4) and summary["calls"]["cache_hits"] == 5


def test_teach_needs_responses(tmp_path: Path) -> None:
    write_instances(tmp_path / "bare.jsonl", [Instance("q", "Q?", "R.")])
    done = cli("teach", str(tmp_path / "bare.jsonl"), "--teacher", "openai:http://127.0.0.1:9/v1@m",
               "--out", str(tmp_path / "t"))  # fmt: skip
    assert isinstance(done.exception, UserError) and "'q' has no responses" in str(done.exception)


# --- (d) physician review -------------------------------------------------------------------


def _evaluated(i: int, scores: tuple[int, ...] | None = (5, 2)) -> Instance:
    text = "Analyze: fine.\nScore: Doctor 1: 5 points. Doctor 2: 2 points." if scores else "no score"
    return Instance(f"e{i}", f"Question {i}?", "@Reference.",
                    (Answer("a", "=HYPERLINK(\"http://x\")"), Answer("b", "-5 mg is wrong")),
                    Evaluation("t", text, scores))  # fmt: skip


def test_export_edit_import_round_trip(tmp_path: Path) -> None:
    instances = tmp_path / "taught.jsonl"
    write_instances(instances, [*(_evaluated(i) for i in range(4)), _evaluated(9, None)])
    review = tmp_path / "review.csv"
    done = cli("export", str(instances), "--out", str(review))
    assert (
        done.exit_code == 0
        and "4 evaluations to review (1 without a parsed evaluation left out)" in done.output
    )
    with review.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    assert [r["id"] for r in rows] == ["e0", "e1", "e2", "e3"]
    assert rows[0]["teacher_scores"] == "5, 2" and rows[0]["keep"] == ""
    # formula injection guarded: the cell starts with an apostrophe; the numbering is the teacher's
    assert rows[0]["reference"] == "'@Reference."
    assert rows[0]["responses"] == 'Doctor 1 [a]: =HYPERLINK("http://x")\n\nDoctor 2 [b]: -5 mg is wrong'
    verdicts = {"e0": ("yes", "", "dr1"), "e1": ("No", "wrong dose; wrong dose ;attribution", "dr2"),
                "e2": ("n", "fluency", "dr1"), "e3": ("", "", "")}  # fmt: skip
    for r in rows:
        r["keep"], r["reasons"], r["physician"] = verdicts[r["id"]]
    with review.open("w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    refused = cli("export", str(instances), "--out", str(review))
    assert isinstance(refused.exception, UserError) and "already holds physicians' verdicts" in str(
        refused.exception
    )
    kept_path = tmp_path / "out" / "kept.jsonl"
    done = cli("import", str(instances), str(review), "--out", str(kept_path))
    assert done.exit_code == 0, done.output
    assert "3 reviewed: 1 kept, 2 discarded; 1 not yet reviewed" in done.output
    kept = read_instances(kept_path)
    assert [(x.id, x.verification) for x in kept] == [("e0", Verification(True, (), "dr1"))]
    assert kept[0].reference == "@Reference." and kept[0].responses[0].text == '=HYPERLINK("http://x")'
    discarded = read_instances(tmp_path / "out" / "discarded.jsonl")
    assert [x.id for x in discarded] == ["e1", "e2"]
    assert discarded[0].verification == Verification(
        False, ("wrong dose", "wrong dose", "attribution"), "dr2"
    )
    summary = json.loads((tmp_path / "out" / "review-summary.json").read_text())
    assert summary["discard_reasons"] == {"wrong dose": 2, "attribution": 1, "fluency": 1}
    assert (summary["kept"], summary["discarded"], summary["not_yet_reviewed"]) == (1, 2, 1)
    assert summary["not_yet_reviewed_ids"] == ["e3"] and summary["without_parsed_evaluation"] == 1
    assert summary["discarded_rate"] == pytest.approx(2 / 3) and summary["physicians"] == {"dr1": 2, "dr2": 1}


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("e0", "yes"), ("zz", "no")], ":3: column 'id': 'zz' is not an instance"),
        ([("e0", "maybe")], ":2: column 'keep' is 'maybe'; expected yes or no"),
        ([("e0", "yes"), ("e1", "no"), ("e0", "no")], ":4: column 'id': 'e0' repeats line 2"),
    ],
)
def test_bad_review_rows_name_the_line(tmp_path: Path, rows: list[tuple[str, str]], message: str) -> None:
    instances = tmp_path / "taught.jsonl"
    write_instances(instances, [_evaluated(0), _evaluated(1)])
    review = tmp_path / "review.csv"
    review.write_text("id,keep,reasons,physician\n" + "".join(f"{i},{k},,dr\n" for i, k in rows))
    done = cli("import", str(instances), str(review), "--out", str(tmp_path / "k.jsonl"))
    assert isinstance(done.exception, UserError) and str(done.exception).startswith(str(review))
    assert message in str(done.exception), str(done.exception)
    assert not (tmp_path / "k.jsonl").exists()
    review.write_text("id,keep\ne0,yes\n")
    with pytest.raises(UserError, match=r"review\.csv:1: the header has no column 'reasons', 'physician'"):
        from clinieval.benchmarks.automedeval.build.verify import read_verdicts

        read_verdicts([_evaluated(0)], review)


# --- (f) curriculum -------------------------------------------------------------------------


def test_revisions_go_just_before_the_score_line() -> None:
    text = "Analyze: Step 1: a.\nStep 2: b.\nScore: Doctor 1: 5 points. Doctor 2: 1 points."
    assert with_revisions(text, ["Aspirin is not given to children.", "Dose is weight-based."]) == (
        "Analyze: Step 1: a.\nStep 2: b.\nRevision: Aspirin is not given to children.\n"
        "Revision: Dose is weight-based.\nScore: Doctor 1: 5 points. Doctor 2: 1 points."
    )
    one_line = "Analyze: fine. Score: Doctor 1: 4 points."
    assert with_revisions(one_line, ["x"]) == "Analyze: fine.\nRevision: x\nScore: Doctor 1: 4 points."
    # a "score:" in the rationale is not the Score line: the last one before the scores is
    tricky = "Analyze: the pain score: high.\nScore: Doctor 1: 2 points."
    assert (
        with_revisions(tricky, ["y"])
        == "Analyze: the pain score: high.\nRevision: y\nScore: Doctor 1: 2 points."
    )
    assert with_revisions(text, []) == text


def _labelled(i: int, quality: str | None, keep: bool | None, scored: bool = True) -> Instance:
    base = _evaluated(i, (5, 2) if scored else None)
    return Instance(
        base.id, base.question, base.reference, base.responses, base.evaluation,
        None if keep is None else Verification(keep, (), "dr"),
        quality,  # type: ignore[arg-type]
        None if quality is None else 0.5,
    )  # fmt: skip


def test_curriculum_stages_and_both_chat_formats(tmp_path: Path) -> None:
    rows = [
        _labelled(0, "high", True), _labelled(1, "low", True), _labelled(2, None, True),
        _labelled(3, "low", True), _labelled(4, "high", False), _labelled(5, None, None),
        _labelled(6, "low", True, scored=False),
    ]  # fmt: skip
    rows[2] = Instance(**{**{f: getattr(rows[2], f) for f in rows[2].__slots__}, "suggestions": ("Fix.",)})
    path = tmp_path / "kept.jsonl"
    write_instances(path, rows)
    out = tmp_path / "sft"
    done = cli("curriculum", str(path), "--out", str(out))
    assert done.exit_code == 0, done.output
    assert "4 examples (stage 1: 2, stage 2: 1, stage 3: 1); physician-kept instances only" in done.output
    hf = {s: jsonl(out / f"stage{s}.hf.jsonl") for s in (1, 2, 3)}
    assert {s: [r["id"] for r in v] for s, v in hf.items()} == {1: ["e1", "e3"], 2: ["e2"], 3: ["e0"]}
    openai = {s: jsonl(out / f"stage{s}.openai.jsonl") for s in (1, 2, 3)}
    for s in (1, 2, 3):
        assert [set(r) for r in openai[s]] == [{"messages"}] * len(hf[s])  # nothing but messages
        assert [r["messages"] for r in openai[s]] == [r["messages"] for r in hf[s]]
    messages = hf[2][0]["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]
    assert set().union(*(m.keys() for m in messages)) == {"role", "content"}
    assert "Doctor 1: =HYPERLINK" in messages[1]["content"]  # the original order, uncut
    assert (
        messages[2]["content"]
        == "Analyze: fine.\nRevision: Fix.\nScore: Doctor 1: 5 points. Doctor 2: 2 points."
    )
    assert messages == [{"role": m.role, "content": m.content} for m in sft_messages(rows[2])]
    summary = json.loads((out / "curriculum.json").read_text())
    assert summary["left_out"] == {
        "no_parsed_evaluation": 1,
        "discarded_by_physician": 1,
        "not_yet_reviewed": 1,
    }
    assert summary["stages"]["1"]["files"] == ["stage1.openai.jsonl", "stage1.hf.jsonl"]
    with pytest.raises(ValueError, match="no parsed evaluation"):
        sft_messages(rows[6])


def test_curriculum_of_an_unverified_unlabelled_file_is_all_stage_two(tmp_path: Path) -> None:
    path = tmp_path / "taught.jsonl"
    write_instances(
        path, [_labelled(0, None, None), _labelled(1, None, None), _labelled(2, None, None, False)]
    )
    assert [len(v) for v in order(read_instances(path)).stages.values()] == [0, 2, 0]
    out = tmp_path / "sft"
    done = cli("curriculum", str(path), "--out", str(out), "--format", "openai")
    assert done.exit_code == 0, done.output
    summary = json.loads((out / "curriculum.json").read_text())
    assert summary["verification"].startswith("unverified") and summary["quality_labels"] is False
    assert summary["note"] == "no instance has a quality label: stages 1 and 3 are empty"
    assert sorted(p.name for p in out.iterdir()) == [
        "curriculum.json", "stage1.openai.jsonl", "stage2.openai.jsonl", "stage3.openai.jsonl",
    ]  # fmt: skip
    assert (out / "stage1.openai.jsonl").read_text() == "" and len(jsonl(out / "stage2.openai.jsonl")) == 2
    bad = cli("curriculum", str(path), "--out", str(out), "--format", "alpaca")
    assert isinstance(bad.exception, UserError) and "--format 'alpaca' is unknown" in str(bad.exception)
