"""Issue 23, items 4 and 9: a multiple-choice JSONL task shows its options lettered and reads the
letter back, `run --prompt FILE`, no leading blank lines, the prompt as sent in the browser, arm
folders named after the model, and the browser's index in data order."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Mapping, Sequence
from pathlib import Path

import pytest

from clinieval.benchmarks.ehrnoteqa.prompts import FREE_PROMPT, MC_PROMPT
from clinieval.benchmarks.jsonl.task import CHOICE_PROMPT, DEFAULT_PROMPT
from clinieval.benchmarks.medalign.prompts import MEDALIGN_PROMPT
from clinieval.benchmarks.pubmedqa.prompts import PROMPT as PUBMEDQA_PROMPT
from clinieval.errors import UserError
from clinieval.models.spec import arm_dir_name, model_short_name
from clinieval.records.runs import RunDir, append_record, build_manifest
from clinieval.records.sample_record import SampleRecord
from clinieval.scoring.choices import option_lines
from clinieval.scoring.scorers import ChoiceExtraction, extract_choice
from clinieval.task import PromptTemplate
from clinieval.types import Message, ModelOutput, Sample
from clinieval.view.site import build_site
from clinieval.view.urls import item_href
from tests.conftest import run_cli

HEPARIN = ("Prothrombin time", "aPTT", "Platelet count", "Anti-Xa level")
ROWS: list[dict[str, object]] = [
    {"id": "q1", "input": "Which laboratory test is used to monitor unfractionated heparin therapy?",
     "choices": list(HEPARIN), "target": "aPTT"},
    {"id": "q2", "input": "Which test monitors warfarin?", "choices": ["INR", "aPTT", "D-dimer"],
     "target": "A"},
    {"id": "q3", "input": "Which drug was started?", "context": "Day 2: heparin drip started.",
     "choices": ["Heparin", "Warfarin"], "target": "Heparin"},
]  # fmt: skip


def write_rows(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def user_message(record: SampleRecord) -> str:
    return next(m.content for m in record.messages if m.role == "user")


# --- the prompt ---------------------------------------------------------------------------------


def test_an_empty_record_leaves_no_blank_lines_at_either_end() -> None:
    bare = Sample(id="1", input="Q?")
    assert DEFAULT_PROMPT.messages(bare, "")[0].content == "Q?"
    assert DEFAULT_PROMPT.messages(bare, "The record.")[0].content == "The record.\n\nQ?"
    assert PromptTemplate(user="{input}\n\n{context}").messages(bare, "")[0].content == "Q?"
    # only an empty field at an edge takes its separator along; the template's own text stays
    assert PromptTemplate(user="Record:\n{context}\n\nQ: {input}").messages(bare, "")[0].content == (
        "Record:\n\n\nQ: Q?"
    )
    lettered = Sample(id="2", input="Q?", choices=("x", "y"))
    assert CHOICE_PROMPT.messages(lettered, "")[0].content == (
        "Q?\n\nA. x\nB. y\n\nAnswer with the letter of the correct option."
    )


@pytest.mark.parametrize(
    ("template", "fields"),
    [
        (PUBMEDQA_PROMPT, {}),
        (MC_PROMPT, {"options": option_lines(("a1", "b2", "c3", "d4", "e5"))}),
        (FREE_PROMPT, {}),
        (MEDALIGN_PROMPT, {}),
    ],
)
def test_paper_prompts_are_byte_identical_with_a_record(
    template: PromptTemplate, fields: dict[str, str]
) -> None:
    sample = Sample(id="1", input="  Is it {x}?\n", choices=("a1", "b2", "c3", "d4", "e5"))
    record = "\nLine one.\n\nLine two.\n"
    expected = template.user.format(input=sample.input, context=record, **fields)
    assert template.messages(sample, record) == [Message("user", expected)]


def test_choices_are_lettered_lines_and_options_is_the_same() -> None:
    sample = Sample(id="1", input="Q?", choices=HEPARIN)
    both = PromptTemplate(user="{input}\n{choices}\n--\n{options}").messages(sample, "")[0].content
    lines = "A. Prothrombin time\nB. aPTT\nC. Platelet count\nD. Anti-Xa level"
    assert both == f"Q?\n{lines}\n--\n{lines}"


def test_a_prompt_file_is_checked_line_by_line(tmp_path: Path) -> None:
    good = tmp_path / "good.txt"
    good.write_text("Question: {input}\n{choices}\n", encoding="utf-8")
    assert PromptTemplate.from_file(good).user == "Question: {input}\n{choices}"  # the editor's last newline
    cases = {
        "Q: {input}\nUse {question} here": r"bad\.txt:2: unknown field \{question\}",
        "Q: {input} }": r"bad\.txt:1: Single '\}'",
        "Q: {input:d}": r"bad\.txt:1: \{input:d\}",
        "no question here": r"never uses \{input\}",
        "\n": "empty",
    }
    for text, error in cases.items():
        bad = tmp_path / "bad.txt"
        bad.write_text(text, encoding="utf-8")
        with pytest.raises(UserError, match=error):
            PromptTemplate.from_file(bad)
    with pytest.raises(UserError, match="prompt file not found"):
        PromptTemplate.from_file(tmp_path / "missing.txt")


# --- reading the answer -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("B", "aPTT"),
        ("B.", "aPTT"),
        ("(B)", "aPTT"),
        ("**D. Anti-Xa level**", "Anti-Xa level"),
        ("Answer: B", "aPTT"),
        ("The correct answer is (C) because ...", "Platelet count"),
        ("aPTT is used.", "aPTT"),
        ("It is the platelet count.", "Platelet count"),
        ("A heparin drip is monitored with the aPTT.", "aPTT"),  # an article, not option A
        ("A heparin drip is monitored closely.", None),
        ("a", None),
        ("E.", None),  # no fifth option
        ("I cannot say.", None),
    ],
)
def test_a_letter_or_a_text_names_a_lettered_option(text: str, expected: str | None) -> None:
    assert extract_choice(text, HEPARIN, lettered=True) == expected


@pytest.mark.parametrize("text", ["B", "C.", "Answer: A", "(C)"])
def test_letters_mean_nothing_when_the_options_were_not_lettered(text: str) -> None:
    assert extract_choice(text, ("yes", "no", "maybe")) is None  # PubMedQA shows no letters


def _record(prompt: str, answer: str, target: str) -> SampleRecord:
    sample = Sample(id="q", input="Q?", choices=HEPARIN, target=target)
    return SampleRecord(sample, 0, [Message("user", prompt)], output=ModelOutput(text=answer))


def test_choice_extract_reads_letters_only_when_the_prompt_as_sent_lettered_the_options() -> None:
    shown = f"Q?\n\n{option_lines(HEPARIN)}\n\nAnswer with the letter."
    assert ChoiceExtraction().score(_record(shown, "B", "aPTT")).value == 1.0
    assert ChoiceExtraction().score(_record(shown, "Answer: B", "B")).value == 1.0  # a letter target
    assert ChoiceExtraction().score(_record(shown, "aPTT", "B")).value == 1.0
    assert ChoiceExtraction().score(_record(shown, "C", "B")).value == 0.0
    unshown = ChoiceExtraction().score(_record("Q?", "B", "aPTT"))
    assert unshown.value == 0.0 and unshown.metadata["unparsed"] is True


# --- a JSONL multiple-choice task end to end ---------------------------------------------------


def test_a_multiple_choice_jsonl_file_sends_lettered_options(llama_server: str, tmp_path: Path) -> None:
    data = write_rows(tmp_path / "mc.jsonl", ROWS)
    out = tmp_path / "run"
    done = run_cli("run", str(data), "-m", f"openai:{llama_server}@smol", "--out", str(out), "--no-progress",
                   "--max-tokens", "8", "--concurrency", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    records = {r.sample.id: r for r in RunDir(out).records()}
    first = user_message(records["q1"])
    assert first == (
        "Which laboratory test is used to monitor unfractionated heparin therapy?\n\n"
        "A. Prothrombin time\nB. aPTT\nC. Platelet count\nD. Anti-Xa level\n\n"
        "Answer with the letter of the correct option."
    )
    assert user_message(records["q3"]).startswith("Day 2: heparin drip started.\n\nWhich drug was started?")
    assert all(not user_message(r).startswith(("\n", " ")) for r in records.values())
    assert set(RunDir(out).manifest()["spec"]["task"]["scorers"]) == {"choice_extract"}
    assert "choice_extract" in done.stdout

    # --prompt FILE: the file's prompt is sent, and a resume with another prompt is refused
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Options:\n{choices}\nQuestion: {input}\nLetter:\n", encoding="utf-8")
    mine = tmp_path / "mine"
    done = run_cli("run", str(data), "-m", f"openai:{llama_server}@smol", "--out", str(mine), "--no-progress",
                   "--max-tokens", "8", "--prompt", str(prompt))  # fmt: skip
    assert done.returncode == 0, done.stderr
    sent = {r.sample.id: user_message(r) for r in RunDir(mine).records()}
    assert (
        sent["q2"]
        == "Options:\nA. INR\nB. aPTT\nC. D-dimer\nQuestion: Which test monitors warfarin?\nLetter:"
    )
    prompt.write_text("Q: {input}\n{choices}", encoding="utf-8")
    again = run_cli("run", str(data), "-m", f"openai:{llama_server}@smol", "--out", str(mine),
                    "--no-progress", "--max-tokens", "8", "--prompt", str(prompt))  # fmt: skip
    assert again.returncode == 2 and "holds a different run" in again.stderr and "prompt" in again.stderr


def test_a_bad_prompt_file_is_one_error_and_no_run_folder(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "mc.jsonl", ROWS)
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Question: {input}\nOptions: {answers}\n", encoding="utf-8")
    out = tmp_path / "run"
    done = run_cli("run", str(data), "-m", "openai:http://127.0.0.1:9/v1@x", "--prompt", str(prompt),
                   "--out", str(out), "--no-progress")  # fmt: skip
    assert done.returncode == 2, done.stderr
    assert done.stderr.strip() == (
        f"error: {prompt}:2: unknown field {{answers}}; a prompt may use {{input}}, {{context}} and "
        "{choices} (lettered lines; {options} is the same); write {{ and }} for a literal brace"
    )
    assert "Traceback" not in done.stderr and not out.exists()


def test_a_file_mixing_samples_with_and_without_choices_is_refused(tmp_path: Path) -> None:
    data = write_rows(tmp_path / "mixed.jsonl", [ROWS[0], {"id": "free", "input": "Why?", "target": "x"}])
    done = run_cli("run", str(data), "-m", "openai:http://127.0.0.1:9/v1@x", "--out", str(tmp_path / "r"))
    assert done.returncode == 2 and "sample 'q1' has choices but sample 'free' has none" in done.stderr
    assert done.stderr.count("\n") == 1 and not (tmp_path / "r").exists()


# --- the browser ----------------------------------------------------------------------------------


def _hand_run(path: Path, order: list[str] | None, answered: list[str], prompt: str = "{input}") -> Path:
    """A run folder as `clinieval run` writes one, its records appended in ``answered`` order."""
    manifest = build_manifest({"task": {"name": "t"}, "model": {"spec": "openai:http://h/v1@m"}}, [])
    if order is not None:
        manifest["sample_order"] = order
    run = RunDir.create_or_resume(path, manifest)
    with run.open_appender() as f:
        for sid in answered:
            sample = Sample(id=sid, input=f"question {sid}", choices=("yes", "no"), target="yes")
            text = PromptTemplate(user=prompt).messages(sample, "")[0].content
            append_record(f, SampleRecord(sample, 0, [Message("user", text)], output=ModelOutput(text="yes")))
    return path


def _index_ids(site: Path) -> list[str]:
    index = (site / "index.html").read_text(encoding="utf-8")
    return re.findall(r'<a class="item-link" href="items/([^"]+)\.html"', index)


def test_the_index_lists_samples_in_data_order_not_as_they_finished(tmp_path: Path) -> None:
    one = _hand_run(tmp_path / "one", ["s1", "s2", "s3"], ["s3", "s1", "s2"])
    two = _hand_run(tmp_path / "two", ["s4", "s2"], ["s2", "s4"])
    old = _hand_run(tmp_path / "old", None, ["s6", "s5"])  # written before orders were recorded
    build_site([one, two, old], tmp_path / "site")
    assert _index_ids(tmp_path / "site") == ["s1", "s2", "s3", "s4", "s6", "s5"]
    page = (tmp_path / "site" / item_href("s1")).read_text(encoding="utf-8")
    assert 'rel="next" href="s2.html"' in page


def test_the_item_page_says_whether_the_prompt_as_sent_showed_the_choices(tmp_path: Path) -> None:
    blind = _hand_run(tmp_path / "blind", ["s1"], ["s1"])
    build_site([blind], tmp_path / "site")
    page = (tmp_path / "site" / item_href("s1")).read_text(encoding="utf-8")
    assert "<h2>Prompt as sent" in page and '<pre class="text">question s1</pre>' in page
    assert 'no <a href="#prompt">prompt as sent</a> lists them: the model was not shown these options' in page
    shown = _hand_run(tmp_path / "shown", ["s1"], ["s1"], prompt="{input}\n{choices}")
    build_site([shown], tmp_path / "site2")
    page = (tmp_path / "site2" / item_href("s1")).read_text(encoding="utf-8")
    assert "the model was not shown" not in page and "A. yes\nB. no" in page


def test_run_records_its_samples_in_file_order_whatever_the_shuffle(
    llama_server: str, tmp_path: Path
) -> None:
    rows = [{"id": f"s{i}", "input": f"Say {i}.", "target": str(i)} for i in range(6)]
    data = write_rows(tmp_path / "items.jsonl", rows)
    ids = [str(r["id"]) for r in rows]
    seed = next(s for s in range(100) if _out_of_file_order(ids, s))
    out = tmp_path / "run"
    done = run_cli("run", str(data), "-m", f"openai:{llama_server}@smol", "--shuffle", str(seed),
                   "--limit", "4", "--out", str(out), "--no-progress", "--max-tokens", "4",
                   "--concurrency", "1")  # fmt: skip
    assert done.returncode == 0, done.stderr
    answered = [r.sample.id for r in RunDir(out).records()]
    in_file_order = [sid for sid in ids if sid in answered]
    assert answered != in_file_order  # finished in shuffled order ...
    assert RunDir(out).manifest()["sample_order"] == in_file_order
    build_site([out], tmp_path / "site")
    assert _index_ids(tmp_path / "site") == in_file_order  # ... listed in the file's


def _out_of_file_order(ids: list[str], seed: int) -> bool:
    """Whether --shuffle SEED --limit 4 asks the samples in another order than the file's (the
    run shuffles with random.Random(seed).shuffle, as here)."""
    shuffled = list(ids)
    random.Random(seed).shuffle(shuffled)
    return shuffled[:4] != sorted(shuffled[:4], key=ids.index)


# --- arm folder names -----------------------------------------------------------------------------


def test_arm_folders_are_named_after_the_model(tmp_path: Path) -> None:
    endpoints = tmp_path / "servers.yaml"
    endpoints.write_text("model: pooled-model\nendpoints:\n  - http://10.0.0.1:8000/v1\n", encoding="utf-8")
    cases = {
        "openai:http://127.0.0.1:8080/v1@smol": "smol",
        "openai-completions:http://127.0.0.1:8080/v1@base": "base",
        "openai:http://a:1/v1,http://b:2/v1@pool": "pool",
        "openai:http://127.0.0.1:8000/v1@meta-llama/Llama-3.1-8B-Instruct": "Llama-3.1-8B-Instruct",
        f"openai:{endpoints}": "pooled-model",
        f"openai:{tmp_path / 'gone.yaml'}": "gone",
        "llamacpp:/models/Llama-3.1-8B-Instruct-Q4_K_M.gguf": "Llama-3.1-8B-Instruct-Q4_K_M",
        "llamacpp:smollm2-135m-instruct": "smollm2-135m-instruct",
        "llamacpp:gemma3-270m": "gemma3-270m",
    }
    assert {spec: model_short_name(spec) for spec in cases} == cases
    assert arm_dir_name("openai:http://127.0.0.1:8080/v1@smol", "keep-recent") == "smol-keep-recent"
    assert arm_dir_name("llamacpp:smollm2-135m-instruct", "mc") == "smollm2-135m-instruct-mc"


# --- Ray workers ----------------------------------------------------------------------------------


def test_a_worker_builds_the_drivers_prompt_without_the_data_file(tmp_path: Path) -> None:
    """What a Ray worker does with its recipe (pickled, as Ray sends it), on a machine without
    the data file: the same task spec as the driver's, the default prompt the driver chose from
    the data included."""
    import pickle

    from clinieval.cli import _build_task, _pick_scorers
    from clinieval.engine.distributed import TaskRecipe
    from clinieval.types import GenerationConfig

    data = write_rows(tmp_path / "mc.jsonl", ROWS)
    for prompt in (None, PromptTemplate(user="{input}\n{choices}")):
        driver = _build_task(str(data), None, None, None, (None, None), prompt)
        recipe = TaskRecipe.of(
            str(data), None, None, None, (None, None), GenerationConfig(),
            build=_build_task, pick_scorers=_pick_scorers, prompt=driver.prompt,
        )  # fmt: skip
        moved = data.rename(tmp_path / "elsewhere.jsonl")
        worker = pickle.loads(pickle.dumps(recipe)).task()
        moved.rename(data)
        assert worker.spec() == driver.spec()
        assert worker.prompt == (prompt or CHOICE_PROMPT)
        assert [s.name for s in worker.scorers] == ["choice_extract"]
