"""``clinieval review import`` reading each benchmark's own files, and the exports going back.

Real files throughout: MedAlign arms run against a local server, an EHRNoteQA build generated
against it, a MedEval synthetic table and an AutoMedEval set written by the project's own writers.
The round trips import, review as two clinicians through :func:`clinieval.review.reviewing.save`,
export with the command, and hand the export to the benchmark's own command, checking numbers
worked out by hand.
"""

from __future__ import annotations

import csv
import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from clinieval.cli.review import make_review_app
from clinieval.errors import UserError
from clinieval.review import accounts, assigning, reviewing, store
from clinieval.review.items import ReviewItem
from clinieval.review.sources import (
    ITEMS,
    Converted,
    ReviewSource,
    check_sources,
    export_verdicts,
    one_verdict_per_item,
    pick_source,
    read_export,
    refuse_strangers,
    study_kind,
    table_columns,
)
from tests.conftest import run_cli
from tests.fault_server import FaultServer

PASSWORD = {"ann": "ann-password-1", "bob": "bob-password-2"}


def reviewers(db: str) -> Any:
    """A new review database with the reviewers ann and bob."""
    engine = store.init_db(db)
    for name, password in PASSWORD.items():
        accounts.add_user(engine, name, "reviewer", password)
    return engine


def review_all(engine: Any, name: str, payload: Callable[[str], dict[str, Any]]) -> int:
    """Submit ``payload(item)`` for every assignment of ``name``; how many were submitted."""
    who = accounts.verify_user(engine, name, PASSWORD[name])
    assert who is not None
    entries = reviewing.reviewer_queue(engine, who)
    for entry in entries:
        reviewing.save(engine, entry.id, who, payload(entry.item), entry.version, submit=True)
    return len(entries)


def ok(*args: str) -> str:
    done = run_cli(*args)
    assert done.returncode == 0, done.stderr
    return done.stdout + done.stderr


def read_csv(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --- choosing a source ----------------------------------------------------------------------------


def fake(name: str, kind: str | None, accepts: bool, config: dict[str, Any] | None = None) -> ReviewSource:
    def convert(paths: Sequence[Path]) -> Converted:
        return Converted([ReviewItem(item="x", prompt="a fake item")], (f"{name} was here",))

    return ReviewSource(name, kind, f"{name} files", lambda paths: accepts, convert, config)


def test_pick_source_names_the_sources_when_none_or_several_match(tmp_path: Path) -> None:
    data = tmp_path / "data.txt"
    data.write_text("hello\n")
    one, two, three = fake("one", "rank", False), fake("two", "rate", True), fake("three", "rate", True)
    known = check_sources([one, two])
    assert pick_source(known, [data], None) is two
    assert pick_source(known, [data], "one") is one  # --from wins over detection
    with pytest.raises(UserError, match=r"several sources read these files \(two, three\).*--from"):
        pick_source(check_sources([one, two, three]), [data], None)
    with pytest.raises(
        UserError, match=r"no source recognises.*items \(--kind\): review items.*one \(rank\)"
    ):
        pick_source(check_sources([one]), [data], None)
    with pytest.raises(UserError, match=r"--from 'nope' is unknown; the sources are: items"):
        pick_source(known, [data], "nope")
    with pytest.raises(UserError, match=r"missing\.jsonl: not found"):
        pick_source(known, [tmp_path / "missing.jsonl"], None)
    with pytest.raises(ValueError, match="two review sources are called 'one'"):
        check_sources([one, fake("one", "rate", False)])


def test_the_kind_comes_from_the_source(tmp_path: Path) -> None:
    assert study_kind(fake("a", "rank", True), None) == "rank"
    assert study_kind(fake("a", "rank", True), "rank") == "rank"
    with pytest.raises(UserError, match="makes a rank study; --kind rate conflicts with it"):
        study_kind(fake("a", "rank", True), "rate")
    with pytest.raises(UserError, match="items: say what reviewers do with --kind"):
        study_kind(ITEMS, None)


def test_detection_reads_only_the_head_of_a_table(tmp_path: Path) -> None:
    (tmp_path / "a.csv").write_text("id,sentence,domain\n1,x,chest\n")
    (tmp_path / "b.jsonl").write_text('\n{"item": "q", "prompt": "p"}\nnot json\n')
    (tmp_path / "c.tsv").write_text("x\ty\n")
    (tmp_path / "d.txt").write_text("id,sentence\n")
    assert table_columns(tmp_path / "a.csv") == ("id", "sentence", "domain")
    assert table_columns(tmp_path / "b.jsonl") == ("item", "prompt")
    assert table_columns(tmp_path / "c.tsv") == ("x", "y")
    assert table_columns(tmp_path / "d.txt") is None
    assert ITEMS.accepts([tmp_path / "b.jsonl"]) and not ITEMS.accepts([tmp_path / "a.csv"])


def test_review_import_command_picks_refuses_and_forces(tmp_path: Path) -> None:
    """Through the command group: the one matching source is used (its kind too), two matches or
    none are refused by listing the sources, --from forces one, a conflicting --kind is refused."""
    db = str(tmp_path / "r.sqlite")
    reviewers(db)
    data = tmp_path / "data.txt"
    data.write_text("hello\n")
    runner = CliRunner()

    def invoke(app: Any, *args: str) -> Any:
        return runner.invoke(app, ["import", str(data), "--db", db, *args])

    single = make_review_app([fake("one", "rank", False), fake("two", "question", True)])
    done = invoke(single, "--study", "s")
    assert done.exit_code == 0 and "read as two: 1 question item(s)" in done.output
    assert [(s.name, s.kind) for s in store.list_studies(store.connect(db))] == [("s", "question")]
    both = make_review_app([fake("one", "sentence", True), fake("two", "question", True)])
    refused = invoke(both, "--study", "t")
    assert isinstance(refused.exception, UserError) and "several sources" in str(refused.exception)
    forced = invoke(both, "--study", "t", "--from", "one")
    assert forced.exit_code == 0 and "read as one: 1 sentence item(s)" in forced.output
    conflict = invoke(both, "--study", "u", "--from", "one", "--kind", "rate")
    assert isinstance(conflict.exception, UserError) and "--kind rate conflicts" in str(conflict.exception)
    nothing = invoke(make_review_app([fake("one", "rank", False)]), "--study", "v")
    assert isinstance(nothing.exception, UserError)
    assert "no source recognises" in str(nothing.exception) and "one (rank): one files" in str(
        nothing.exception
    )
    # a source's default config is a new study's; an existing study keeps its own, unrefused
    labels = {"labels": {"finding": ["absent", "present"]}}
    configured = make_review_app([fake("lab", "sentence", True, labels)])
    done = invoke(configured, "--study", "me")
    assert done.exit_code == 0 and "note: lab was here" in done.output
    again = invoke(configured, "--study", "t")  # made by `--from one` above, with the kind's defaults
    assert again.exit_code == 0 and "0 item(s) added, 1 already there" in again.output
    configs = {s.name: s.config for s in store.list_studies(store.connect(db))}
    assert configs["me"] == labels and configs["t"]["labels"] != labels["labels"]
    # a broken items file is still read as items when forced, with its own precise error
    broken = tmp_path / "broken.jsonl"
    broken.write_text('{"prompt": "p"}\n')
    forced_items = runner.invoke(single, ["import", str(broken), "--db", db, "--study", "w", "--kind", "rank",
                                          "--from", "items"])  # fmt: skip
    assert "broken.jsonl:1: missing field 'item'" in str(forced_items.exception)


# --- the way back: one verdict per item ---------------------------------------------------------------


def test_one_verdict_per_item(tmp_path: Path) -> None:
    path = tmp_path / "questions.csv"
    path.write_text(
        "item,reviewer,decision,comment\n"
        "q1,ann,keep,fine\nq1,bob,keep,\n"
        "q2,ann,discard,\nq2,bob,'=revise,\n"  # the export's spreadsheet guard is undone
        "q3,bob,keep,\n",
        encoding="utf-8",
    )
    rows = read_export(path, "decision")
    assert rows[3].cells["decision"] == "=revise"
    with pytest.raises(
        UserError, match=r"questions\.csv:5: item q2: bob and ann \(.*:4\) differ on 'decision'"
    ):
        one_verdict_per_item(rows, ("decision",))
    chosen = one_verdict_per_item(rows, ("decision",), ("bob",))
    assert [(k, [r.reviewer for r in v]) for k, v in chosen.items()] == [
        ("q1", ["bob"]),
        ("q2", ["bob"]),
        ("q3", ["bob"]),
    ]
    chosen = one_verdict_per_item(rows, ("decision",), ("ann",))
    assert [r.reviewer for r in chosen["q3"]] == ["bob"]  # ann did not review q3
    with pytest.raises(UserError, match="--reviewer 'eve' reviewed nothing in this export"):
        one_verdict_per_item(rows, ("decision",), ("eve",))
    with pytest.raises(UserError, match=r"no column 'rewrite'"):
        read_export(path, "rewrite")
    agreed = one_verdict_per_item(rows[:2], ("decision",))
    assert [r.reviewer for r in agreed["q1"]] == ["ann", "bob"]


def test_export_verdicts_and_strangers(tmp_path: Path) -> None:
    """The shared start of every benchmark's way back: one verdict per item from the export's
    table, and verdicts on items the benchmark's file lacks refused, naming the first."""
    path, review = tmp_path / "questions.csv", tmp_path / "r.csv"
    path.write_text("item,reviewer,decision\nq1,ann,keep\nq2,ann,discard\nq9,ann,keep\n", encoding="utf-8")
    verdicts = export_verdicts(path, ("decision",), ("ann",))
    decided = {k: v[0].cells["decision"] for k, v in verdicts.items()}
    assert decided == {"q1": "keep", "q2": "discard", "q9": "keep"}
    refuse_strangers(path, ["q1", "q2"], {"q1", "q2", "q3"}, noun="item", source=review, named="x")
    with pytest.raises(UserError) as caught:
        refuse_strangers(path, verdicts, ["q1", "q2"], noun="item", source=review, named="review.csv")
    assert str(caught.value) == (
        f"{path}: item q9 is not in {review} (1 such); give the review.csv the study was imported from"
    )


# --- MedAlign arms ------------------------------------------------------------------------------------


def test_medalign_arms_round_trip_to_the_analysis(tmp_path: Path) -> None:
    """Two arms over the synthetic set become rank items; ann and bob rank them; the export's
    reviews.csv is what `medalign analyze --reviews` reads, joined on the arms' own labels."""
    from clinieval.benchmarks.medalign.review import REVIEW_SOURCE
    from clinieval.benchmarks.medalign.synth import build_synthetic_set

    built = build_synthetic_set(tmp_path / "data", patients=2, per_patient=1)
    samples = {s.id: s for s in built.load()}
    assert len(samples) == 2
    calls = {"n": 0}

    def answer(prompt: str) -> str:  # arms run one after the other, one call per instruction
        calls["n"] += 1
        return "The first arm's answer." if calls["n"] <= 2 else "The second arm's answer."

    arms = tmp_path / "arms"  # one model under two context strategies: two arms
    with FaultServer(responder=answer) as server:
        ok("medalign", "run", "--instructions", str(built.instructions_csv), "--ehrs", str(built.ehr_dir),
           "-m", f"openai:{server.url}@fault", "--strategy", "keep-recent", "--strategy", "whole",
           "--tokenizer", "tiktoken:cl100k_base", "--max-context", "32768", "--no-metrics",
           "--concurrency", "1", "--out", str(arms), "--no-progress")  # fmt: skip
    first, second = "fault/keep-recent", "fault/whole"  # the model alias, not the URL path

    assert REVIEW_SOURCE.accepts([arms]) and not REVIEW_SOURCE.accepts([sorted(arms.iterdir())[0]])
    converted = REVIEW_SOURCE.convert([arms])
    assert [i.item for i in converted.items] == sorted(samples) and converted.notes == ()
    item = converted.items[0]
    sample = samples[item.item]
    assert (item.prompt, item.context, item.reference) == (sample.input, sample.context, sample.target)
    assert item.author is None  # the synthetic instructions name no submitter
    assert [(a.id, a.source, a.text) for a in item.answers] == [
        ("a1", first, "The first arm's answer."),
        ("a2", second, "The second arm's answer."),
    ]

    db = str(tmp_path / "review.sqlite")
    engine = reviewers(db)
    text = ok("review", "import", str(arms), "--study", "ma", "--db", db)
    assert "read as medalign-arms: 2 rank item(s)" in text and "2 item(s) added" in text
    assert "0 item(s) added, 2 already there" in ok(
        "review", "import", str(arms), "--study", "ma", "--db", db
    )
    assigning.assign(engine, "ma", per_item=2, seed=0)
    later = sorted(samples)[1]

    def ranks(best: str) -> dict[str, Any]:
        worst = "a2" if best == "a1" else "a1"
        return {
            "answers": {
                best: {"rank": 1, "correct": True, "reasons": [], "rationale": ""},
                worst: {"rank": 2, "correct": False, "reasons": ["C2"], "rationale": "wrong value"},
            }
        }

    # ann prefers the first arm on both; bob agrees on the first instruction only
    assert review_all(engine, "ann", lambda key: ranks("a1")) == 2
    assert review_all(engine, "bob", lambda key: ranks("a2" if key == later else "a1")) == 2
    export = tmp_path / "export"
    ok("review", "export", "--db", db, "--study", "ma", str(export))
    rows = read_csv(export / "reviews.csv")
    assert {(r["instruction_id"], r["model"], r["rank"], r["correct"], r["rater"]) for r in rows} == {
        (iid, model, rank, correct, rater)
        for iid in samples
        for rater in ("ann", "bob")
        for model, rank, correct in (
            ((first, "2", "false"), (second, "1", "true"))
            if (iid, rater) == (later, "bob")
            else ((first, "1", "true"), (second, "2", "false"))
        )
    }

    report = tmp_path / "report"
    out = ok("medalign", "analyze", str(arms), "--reviews", str(export / "reviews.csv"),
             "--out", str(report), "--resamples", "200")  # fmt: skip
    assert "2 arms, 2 instructions; reference: clinician" in out
    result = json.loads((report / "medalign.json").read_text())
    per_model = result["views"]["all"]["per_model"]
    # the first rater of each instruction (ann, by name) is the primary one: she put arm 1 first twice
    assert per_model[first]["correct_percent"] == 100.0 and per_model[first]["mean_rank"] == 1.0
    assert per_model[second]["correct_percent"] == 0.0 and per_model[second]["mean_rank"] == 2.0
    # both raters are in the table: they agree on one instruction (tau +1) and not the other (-1)
    raters = result["views"]["all"]["analyze"]["human"]["raters"]
    assert raters["raters"] == 2 and raters["inter_rater_kendall"]["mean_tau_b"] == 0.0


def write_arm(path: Path, model: str, strategy: str | None, answers: dict[str, str | None]) -> Path:
    """A run folder written through RunDir: one record per sample, None for a failed call."""
    from clinieval.records.runs import RunDir, append_record, build_manifest
    from clinieval.records.sample_record import SampleRecord
    from clinieval.types import ErrorKind, ModelOutput, Sample

    params = {"strategy": strategy} if strategy else {}
    run = RunDir.create_or_resume(
        path, build_manifest({"model": {"spec": model}, "task": {"params": params}}, [])
    )
    with run.open_appender() as f:
        for sid, text in answers.items():
            meta = {"person_id": "p1", "submitter_id": "dr-lee"} if sid == "i1" else {}
            sample = Sample(sid, f"instruction {sid}", "<record/>", target="gold", metadata=meta)
            output = (
                ModelOutput(text) if text is not None else ModelOutput.failure(ErrorKind.CONTENT_FILTER, "x")
            )
            append_record(f, SampleRecord(sample, 0, [], output=output))
    return path


def test_medalign_arms_leave_out_failed_calls_and_name_the_author(tmp_path: Path) -> None:
    from clinieval.benchmarks.medalign.review import REVIEW_SOURCE

    one = write_arm(tmp_path / "a", "openai:http://h/v1@m", "keep-recent", {"i1": "x", "i2": "y", "i3": None})
    two = write_arm(tmp_path / "b", "openai:http://h/v1@m", "refine", {"i1": "z", "i2": None, "i3": None})
    three = write_arm(
        tmp_path / "c", "llamacpp:/models/tiny.gguf", None, {"i1": "w", "i2": "v", "i3": None, "i4": "u"}
    )
    converted = REVIEW_SOURCE.convert([one, two, three])
    assert [i.item for i in converted.items] == ["i1", "i2"]
    i1, i2 = converted.items
    assert i1.author == "dr-lee" and i1.meta == {"person_id": "p1"} and i2.author is None
    assert [a.source for a in i1.answers] == ["m/keep-recent", "m/refine", "tiny"]
    assert [(a.id, a.source) for a in i2.answers] == [("a1", "m/keep-recent"), ("a3", "tiny")]
    assert converted.notes == (
        "1 instruction(s) not answered by every run left out",
        "4 failed call(s) left out of their items (`medalign analyze` counts them wrong)",
        "1 instruction(s) with fewer than two answers left out",
    )
    with pytest.raises(UserError, match=r"same arm \(m/keep-recent\)"):
        REVIEW_SOURCE.convert(
            [one, write_arm(tmp_path / "d", "openai:http://h/v1@m", "keep-recent", {"i1": "q"})]
        )
    with pytest.raises(UserError, match="two or more run folders"):
        REVIEW_SOURCE.convert([one])
    other = write_arm(tmp_path / "e", "openai:http://h/v1@n", "keep-recent", {"i1": "q"})
    (other / "samples.jsonl").write_text(
        (other / "samples.jsonl").read_text().replace("instruction i1", "other")
    )
    with pytest.raises(UserError, match=r"instruction 'i1' differs from the one in"):
        REVIEW_SOURCE.convert([one, other])


def test_every_benchmark_source_has_its_own_name() -> None:
    from clinieval.benchmarks import BENCHMARKS

    sources = check_sources([s for b in BENCHMARKS for s in b.review_sources()])
    assert [(s.name, s.kind) for s in sources] == [
        ("items", None),
        ("medalign-arms", "rank"),
        ("ehrnoteqa-build", "question"),
        ("medeval-sentences", "sentence"),
        ("automedeval-set", "rate"),
    ]


# --- EHRNoteQA build review ---------------------------------------------------------------------------

OPTIONS = {"A": "Warfarin", "B": "Apixaban", "C": "Heparin", "D": "Aspirin", "E": "Clopidogrel"}


def write_notes(path: Path) -> Path:
    from clinieval.ehr.notes import DISCHARGE_HEADER

    notes = [
        (
            "n1",
            "201",
            "9001",
            "DS",
            "1",
            "2150-03-02 10:00:00",
            "",
            "Started apixaban for new   atrial fibrillation.",
        ),
        ("n2", "201", "9000", "DS", "1", "2149-11-20 10:00:00", "", "Admitted for pneumonia."),
        ("n3", "202", "9100", "DS", "1", "2151-01-05 10:00:00", "", "Cellulitis treated with cefazolin."),
    ]
    with path.open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(DISCHARGE_HEADER)
        w.writerows(notes)
    return path


def generator(prompt: str) -> str:
    """A generator that writes the same well-formed item for every patient."""
    from clinieval.benchmarks.ehrnoteqa.build.prompts import QUESTION_PROMPT

    m = re.search(r"Patient ID : (\w+)", prompt)
    assert m is not None
    question = f"Which drug was started for patient {m.group(1)}?"
    if prompt.startswith(QUESTION_PROMPT):
        return f"- Question : {question}\n- Answer : Apixaban\n- Reason : per the note"
    choices = " ".join(f"{x}: {t}" for x, t in OPTIONS.items())
    return f"- Question: {question} - Answer Choices: {choices} - Correct Answer: B - Reason: per the note"


def test_ehrnoteqa_build_round_trip_to_build_import(tmp_path: Path) -> None:
    """A real build's review.csv (with its notes as context) becomes question items; ann revises
    one and discards the other, bob disagrees on the discard; review-verdicts refuses until told
    whose verdict wins, then `build import` reads the filled CSV as if a clinician had typed it."""
    from clinieval.benchmarks.ehrnoteqa.review import REVIEW_SOURCE
    from clinieval.ehr.notes import format_notes, read_discharge_notes

    notes = write_notes(tmp_path / "discharge.csv")
    ids = tmp_path / "ids.txt"
    ids.write_text("201\n202\n")
    build = tmp_path / "build"
    with FaultServer(responder=generator) as server:
        ok("ehrnoteqa", "build", "generate", "--notes", str(notes), "--patients", str(ids),
           "--model", f"openai:{server.url}@fault", "--out", str(build), "--no-progress")  # fmt: skip
    review_csv = build / "review.csv"

    assert REVIEW_SOURCE.accepts([review_csv]) and REVIEW_SOURCE.accepts([build, notes])
    assert not REVIEW_SOURCE.accepts([notes]) and not REVIEW_SOURCE.accepts([review_csv, review_csv])
    bare = REVIEW_SOURCE.convert([review_csv])
    assert bare.items[0].context == "" and "no discharge notes given" in bare.notes[0]
    converted = REVIEW_SOURCE.convert([review_csv, notes])
    first = converted.items[0]
    assert [i.item for i in converted.items] == ["201-1", "202-1"] and converted.notes == ()
    assert first.context == format_notes(read_discharge_notes(notes)["201"])  # what the generator saw
    assert first.prompt == "Review this generated question" and first.answers == ()
    assert first.fields == {"question": "Which drug was started for patient 201?", "options": OPTIONS,
                            "answer": "B"}  # fmt: skip

    db = str(tmp_path / "review.sqlite")
    engine = reviewers(db)
    text = ok("review", "import", str(review_csv), str(notes), "--study", "qa", "--db", db)
    assert "read as ehrnoteqa-build: 2 question item(s)" in text
    assigning.assign(engine, "qa", per_item=2, seed=0)
    revised_q = "Which anticoagulant was started in March 2150?"
    revision = {
        "decision": "revise",
        "fields": {
            "question": revised_q,
            "options": {**OPTIONS, "D": "Aspirin 81 mg daily"},
            "answer": "C",
        },
        "comment": "the note says heparin first",
    }

    def ann(key: str) -> dict[str, Any]:
        return revision if key == "201-1" else {"decision": "discard", "comment": "trivial"}

    def bob(key: str) -> dict[str, Any]:
        return {**revision, "comment": ""} if key == "201-1" else {"decision": "keep"}

    assert review_all(engine, "ann", ann) == 2 and review_all(engine, "bob", bob) == 2
    export = tmp_path / "export"
    ok("review", "export", "--db", db, "--study", "qa", str(export))

    before = review_csv.read_bytes()
    refused = run_cli("ehrnoteqa", "review-verdicts", str(export / "questions.csv"), "--out", str(review_csv))
    assert (
        refused.returncode == 2
        and "item 202-1: bob and ann" in refused.stderr
        and "--reviewer" in refused.stderr
    )
    assert review_csv.read_bytes() == before
    text = ok("ehrnoteqa", "review-verdicts", str(export / "questions.csv"), "--out", str(review_csv),
              "--reviewer", "ann")  # fmt: skip
    assert "2 items (0 keep, 1 revise, 1 discard)" in text
    filled = {r["item_id"]: r for r in read_csv(review_csv)}
    assert filled["201-1"]["keep"] == "yes" and filled["201-1"]["revised_question"] == revised_q
    assert (filled["201-1"]["revised_answer"], filled["201-1"]["revised_choice_D"]) == (
        "C",
        "Aspirin 81 mg daily",
    )
    assert filled["201-1"]["revised_choice_A"] == "" and filled["202-1"]["keep"] == "no"
    assert filled["201-1"]["reviewer_note"] == "ann: the note says heparin first"

    final = tmp_path / "final.jsonl"
    text = ok("ehrnoteqa", "build", "import", str(review_csv), "--out", str(final))
    # by hand: 202-1 removed; 201-1 kept with its question and answer (B -> C) revised, and one
    # distractor (D) of the 4 x 2 = 8 revised
    assert "2 items reviewed: 1 removed, 1 kept" in text
    assert "revised: 1 of 2 questions, 1 of 2 correct answers, 1 of 8 distractors" in text
    [item] = [json.loads(line) for line in final.read_text().splitlines()]
    assert (item["id"], item["question"], item["answer"]) == ("201-1", revised_q, "C")
    assert item["choice_D"] == "Aspirin 81 mg daily" and item["choice_B"] == "Apixaban"


# --- MedEval sentences ----------------------------------------------------------------------------------


def test_medeval_sentences_round_trip_to_a_sentence_table(tmp_path: Path) -> None:
    """Synthetic sentences become sentence items (the sentence is what the page shows); ann and bob
    label them; review-labels writes a table MedEval's own loader reads, with their labels."""
    from clinieval.benchmarks.medeval.data import load_sentences
    from clinieval.benchmarks.medeval.review import REVIEW_SOURCE
    from clinieval.benchmarks.medeval.synth.writer import write_synthetic

    folder = tmp_path / "medeval"
    write_synthetic(folder, sentences=3, reports=1, fmt="csv")
    table = folder / "synthetic-sentences.csv"
    originals = load_sentences(table)
    s1, s2, s3 = (s.id for s in originals)
    assert REVIEW_SOURCE.accepts([folder]) and REVIEW_SOURCE.accepts([table])
    items = REVIEW_SOURCE.convert([folder]).items
    assert [(i.item, i.prompt, i.fields) for i in items] == [(s.id, s.sentence, {"sentence": s.sentence})
                                                            for s in originals]  # fmt: skip
    assert items[0].context == f"Domain: {originals[0].domain}"

    db = str(tmp_path / "review.sqlite")
    engine = reviewers(db)
    assert "read as medeval-sentences: 3 sentence item(s)" in ok(
        "review", "import", str(folder), "--study", "me", "--db", db
    )
    assigning.assign(engine, "me", per_item=2, seed=0)
    labels = {
        # s1: both say abnormal and ambiguous, same rewrite; s2: they differ; s3: a rewrite of an
        # unambiguous sentence, which MedEval does not keep
        "ann": {s1: ("abnormal", "ambiguous", "Small left effusion."), s2: ("normal", "unambiguous", ""),
                s3: ("normal", "unambiguous", "Lungs are clear.")},
        "bob": {s1: ("abnormal", "ambiguous", "Small left effusion."), s2: ("abnormal", "unambiguous", ""),
                s3: ("normal", "unambiguous", "Lungs are clear.")},
    }  # fmt: skip

    def labelling(chosen: dict[str, tuple[str, str, str]]) -> Callable[[str], dict[str, Any]]:
        def payload(key: str) -> dict[str, Any]:
            abnormality, ambiguity, rewrite = chosen[key]
            return {"labels": {"abnormality": abnormality, "ambiguity": ambiguity}, "rewrite": rewrite}

        return payload

    for name, chosen in labels.items():
        assert review_all(engine, name, labelling(chosen)) == 3
    export = tmp_path / "export"
    ok("review", "export", "--db", db, "--study", "me", str(export))

    out = tmp_path / "labelled.csv"
    refused = run_cli("medeval", "review-labels", str(export / "sentences.csv"), "--sentences", str(folder),
                      "--out", str(out))  # fmt: skip
    assert refused.returncode == 2 and f"item {s2}: bob and ann" in refused.stderr and not out.exists()
    text = ok("medeval", "review-labels", str(export / "sentences.csv"), "--sentences", str(folder),
              "--out", str(out), "--reviewer", "bob")  # fmt: skip
    assert (
        "3 labelled sentence(s)" in text and "1 rewrite(s) of sentences labelled unambiguous left out" in text
    )
    back = {s.id: s for s in load_sentences(out)}
    assert (back[s1].abnormal, back[s1].ambiguous, back[s1].rewrite) == (True, True, "Small left effusion.")
    assert (back[s2].abnormal, back[s2].ambiguous, back[s2].rewrite) == (True, False, None)  # bob's
    assert (back[s3].abnormal, back[s3].ambiguous, back[s3].rewrite) == (False, False, None)
    assert back[s1].sentence == originals[0].sentence and back[s1].domain == originals[0].domain
    assert [r["reviewer"] for r in read_csv(out)] == ["bob", "bob", "bob"]


# --- AutoMedEval sets -----------------------------------------------------------------------------------


def test_an_automedeval_set_is_recognised_in_either_format(tmp_path: Path) -> None:
    from clinieval.benchmarks.automedeval.convert import write_set
    from clinieval.benchmarks.automedeval.review import REVIEW_SOURCE
    from clinieval.benchmarks.automedeval.synth import synthetic_set

    items = synthetic_set(2, seed=1)
    write_set(items, tmp_path / "set.jsonl")
    rows = [
        {"id": x.id, "question": x.question, "reference": x.reference, "model": r.model, "response": r.text}
        for x in items
        for r in x.responses
    ]
    with (tmp_path / "set.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    for name in ("set.jsonl", "set.csv"):
        assert REVIEW_SOURCE.accepts([tmp_path / name])
        converted = REVIEW_SOURCE.convert([tmp_path / name])
        assert [i.item for i in converted.items] == [x.id for x in items]
        assert [a.source for a in converted.items[0].answers] == [r.model for r in items[0].responses]
    db = str(tmp_path / "review.sqlite")
    reviewers(db)
    text = ok("review", "import", str(tmp_path / "set.jsonl"), "--study", "auto", "--db", db)
    assert "read as automedeval-set: 2 rate item(s)" in text and "review-ratings" in text
    wrong = run_cli(
        "review", "import", str(tmp_path / "set.csv"), "--study", "x", "--kind", "rank", "--db", db
    )
    assert wrong.returncode == 2 and "--kind rank conflicts" in wrong.stderr
    junk = tmp_path / "notes.txt"
    junk.write_text("nothing to review\n")
    none = run_cli("review", "import", str(junk), "--study", "y", "--db", db)
    assert none.returncode == 2 and "no source recognises" in none.stderr
    for name in ("items", "medalign-arms", "ehrnoteqa-build", "medeval-sentences", "automedeval-set"):
        assert name in none.stderr
