"""MedEval end to end over real model calls: the five tasks against a local OpenAI-compatible server
(started here on 127.0.0.1) whose scripted answers are the gold ones, or deliberately chatty; the
analysis must then read exactly what was scripted. Then `clinieval run medeval-TASK`, the labeller
command, and the demo with the real embedded model."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from clinieval.benchmarks.medeval.baselines.train import answer_text
from clinieval.benchmarks.medeval.data import load_folder
from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS
from clinieval.benchmarks.medeval.synth.writer import write_synthetic
from tests.conftest import need_shared, run_cli
from tests.fault_server import FaultServer

LIMIT = 8


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("medeval") / "data"
    write_synthetic(folder, seed=1, sentences=240, reports=160)
    return folder


def _gold_answers(folder: Path) -> dict[str, str]:
    """What a perfect model answers, keyed by the text the prompt asks about."""
    loaded = load_folder(folder, seed=0)
    out: dict[str, str] = {}
    for s in loaded.sentences:
        out[f"label:{s.sentence}"] = "abnormal" if s.abnormal else "normal"
        out[f"ambiguity:{s.sentence}"] = "ambiguous" if s.ambiguous else "unambiguous"
        if s.rewrite:
            out[f"rewrite:{s.sentence.rstrip('.')}"] = s.rewrite
    for r in loaded.reports:
        codes = tuple(r.codes.get(o, "absent") for o in CHEXPERT_OBSERVATIONS)
        out[f"codes:{r.text}"] = answer_text("codes", tuple("unknown" if c == "absent" else c for c in codes))
        out[f"summary:{r.findings.strip().rstrip('.')}"] = r.impression
    return out


def responder(gold: dict[str, str], chatty_every: int = 0) -> Any:
    """Answers each prompt's last query with its gold answer; every ``chatty_every``-th answer is
    a sentence naming both labels, which the qualified rate must count as unqualified."""
    count = {"n": 0}

    def reply(prompt: str) -> str:
        last = prompt.rsplit("\n", 1)[-1]
        if "abnormal findings" in prompt:
            key = "label:" + re.findall(r"Sentence: (.*?) Label:$", last)[-1]
        elif "classify ambiguous" in prompt:
            key = "ambiguity:" + re.findall(r"Sentence: (.*?) Label:$", last)[-1]
        elif "rewrite ambiguous" in prompt:
            key = "rewrite:" + re.findall(r"Sentence: (.*?)\. (?:Diagnostic: \w+\. )?Rewrite:$", last)[-1]
        elif "14 observations" in prompt:
            key = "codes:" + re.findall(r"Report: (.*) Mentioned observations:$", prompt, re.S)[-1]
        else:
            key = "summary:" + re.findall(r"Report: (.*?)\. Summary:$", last, re.S)[-1]
        answer = gold[key]
        count["n"] += 1
        if chatty_every and count["n"] % chatty_every == 0 and key.startswith(("label:", "ambiguity:")):
            # both label words: unqualified under the paper's rule (exactly one label word)
            other = {"normal": "abnormal", "abnormal": "normal", "ambiguous": "unambiguous"}.get(
                answer, "ambiguous"
            )
            return f"It is {answer}, not {other}."
        return answer

    return reply


@pytest.fixture(scope="module")
def arms(corpus: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The arms, plus what a rerun of the same command and a `clinieval run medeval-TASK` sent (one
    server throughout: its URL is part of the model's identity, so a rerun must meet the same one)."""
    out = tmp_path_factory.mktemp("arms")
    gold = _gold_answers(corpus)
    command = (
        "medeval", "run", "--data", str(corpus), "--out", str(out), "--shots", "0", "--paper-examples",
        "--limit", str(LIMIT), "--no-progress",
    )  # fmt: skip
    seen: dict[str, Any] = {}
    with FaultServer(responder=responder(gold, chatty_every=4)) as server:
        spec = f"openai:{server.url}@fault"
        done = run_cli(*command, "-m", spec)
        assert done.returncode == 0, done.stderr
        first = len(server.log.received)
        again = run_cli(*command, "-m", spec)
        seen["rerun"] = (again.returncode, len(server.log.received) - first, again.stderr)
        single = run_cli(
            "run", "medeval-ambiguity", "--data", str(corpus), "-m", spec, "--out",
            str(out.parent / "one"), "--limit", "5", "--no-progress",
        )  # fmt: skip
        seen["single"] = (single.returncode, len(server.log.received) - first, single.stderr)
    yield out, seen


def _analysis(arms: Path, out: Path) -> dict[str, Any]:
    done = run_cli("medeval", "analyze", str(arms), "--out", str(out), "--resamples", "200")
    assert done.returncode == 0, done.stderr
    data: dict[str, Any] = json.loads((out / "medeval.json").read_text())
    return data


@pytest.mark.slow
def test_scripted_answers_are_read_back_exactly(arms: tuple[Path, dict[str, Any]], tmp_path: Path) -> None:
    folder, _ = arms
    result = _analysis(folder, tmp_path / "report")
    by = {(a["task"], a["setting"]): a for a in result["arms"]}
    # the paper's examples exist for the three sentence tasks: 3 + 5 zero-shot arms
    assert len(result["arms"]) == 8
    for task in ("abnormality", "ambiguity"):
        arm = by[(task, "zero-shot")]
        assert arm["items"] == LIMIT and arm["failed"] == 0
        qualified = arm["qualified"]
        assert qualified < LIMIT  # every 4th answer was chatty
        acc = arm["metrics"]["accuracy"]
        assert acc["qualified"]["value"] == 100.0  # every qualified answer is the gold
        assert acc["counted_wrong"]["value"] == pytest.approx(100.0 * qualified / LIMIT)
    codes = by[("codes", "zero-shot")]["metrics"]
    assert codes["exact_match"]["counted_wrong"]["value"] == 100.0
    assert codes["average_accuracy"]["counted_wrong"]["value"] == 100.0
    summary = by[("summarization", "zero-shot")]["metrics"]["counted_wrong"]
    assert summary["rougeL"]["value"] == pytest.approx(100.0) and summary["bleu4"] == pytest.approx(100.0)
    rewrite = by[("rewriting", "3-shot (paper's examples)")]["metrics"]["counted_wrong"]
    assert rewrite["bleu4"] == pytest.approx(100.0)
    assert any("ΔAcc_am" in u for u in result["undefined"])  # no classifiers given
    # by level: only tasks that share a metric are averaged (the two label tasks' accuracy)
    [zero] = [x for x in result["levels"] if x["setting"] == "zero-shot"]
    assert zero["tasks"] == ["abnormality", "ambiguity"] and zero["metric"] == "accuracy"
    assert zero["value"] == pytest.approx(
        (by[("abnormality", "zero-shot")]["metrics"]["accuracy"]["counted_wrong"]["value"]
         + by[("ambiguity", "zero-shot")]["metrics"]["accuracy"]["counted_wrong"]["value"]) / 2
    )  # fmt: skip
    html = (tmp_path / "report" / "medeval.html").read_text()
    assert "<svg" in html and "not on MedEval" in html  # the curve, and the synthetic-data warning
    manifest = json.loads(next(folder.glob("*abnormality-0shot")).joinpath("manifest.json").read_text())
    params = manifest["spec"]["task"]["params"]
    splits = params["splits"]["sentences"]
    assert splits["method"] == "grouped by report and de-duplicated, seeded 7:1:2"
    assert splits["duplicates_across_splits"]["test_in_train"] == 0 and params["context_policy"] == "drop"


@pytest.mark.slow
def test_rerunning_asks_nothing_and_run_names_one_task(
    arms: tuple[Path, dict[str, Any]], corpus: Path
) -> None:
    _, seen = arms
    code, sent, err = seen["rerun"]
    assert code == 0 and sent == 0, err  # every arm resumed complete
    code, sent, err = seen["single"]
    assert code == 0 and sent == 5, err  # `clinieval run medeval-ambiguity`: one arm, 5 items
    bad = run_cli("run", "medeval-essay", "--data", str(corpus), "-m", "openai:http://127.0.0.1:9/v1@m")
    assert bad.returncode == 2 and "MedEval task 'essay' is unknown" in bad.stderr


def test_the_label_command_reproduces_the_labelers_gold(tmp_path: Path) -> None:
    folder = need_shared("chexpert-labeler")
    out = tmp_path / "labeled.csv"
    done = run_cli("medeval", "label", str(folder / "sample_reports.csv"), "--out", str(out))
    assert done.returncode == 0, done.stderr
    assert out.read_bytes() == (folder / "labeled_reports.csv").read_bytes()
    missing = run_cli("medeval", "label", str(tmp_path / "nope.csv"), "--out", str(tmp_path / "x.csv"))
    assert missing.returncode == 2 and "nope.csv" in missing.stderr and not (tmp_path / "x.csv").exists()


def test_every_answer_links_to_its_page_in_a_results_site(
    arms: tuple[Path, dict[str, Any]], tmp_path: Path
) -> None:
    """`medeval analyze --view SITE`: each id in the "Every answer" tables links to that sample's
    page of the `clinieval view` site, relative to the report, and every link resolves."""
    import re

    folder, _ = arms
    site = tmp_path / "site"
    made = run_cli("view", str(folder), "--out", str(site))
    assert made.returncode == 0, made.stderr
    out = tmp_path / "report"
    done = run_cli(
        "medeval", "analyze", str(folder), "--out", str(out), "--resamples", "200", "--view", str(site)
    )
    assert done.returncode == 0, done.stderr
    hrefs = re.findall(r'<a href="([^"]+)">', (out / "medeval.html").read_text())
    assert hrefs and all(h.startswith("../site/items/") for h in hrefs)
    assert all((out / h).resolve().is_file() for h in hrefs)
    assert "](../site/items/" in (out / "medeval.md").read_text()
    refused = run_cli(
        "medeval", "analyze", str(folder), "--out", str(tmp_path / "r2"), "--view", str(tmp_path)
    )
    assert refused.returncode == 2 and "not a site written by `clinieval view`" in refused.stderr


def test_report_links_must_be_relative_paths() -> None:
    from clinieval.report import Link

    assert Link("x", "../site/items/a~1.html#scores").href.endswith("#scores")
    for bad in ("javascript:alert(1)", "http://example.org/x", "//host/x", 'a"b', "a<b"):
        with pytest.raises(ValueError, match="relative path"):
            Link("x", bad)


def test_validation_arms_the_strict_rule_and_the_label_free_rewrite_prompt(
    corpus: Path, tmp_path: Path
) -> None:
    """`--split validation` asks the validation items into a folder of their own, which `analyze` uses
    only to choose; `--qualified strict` refuses "The sentence is abnormal." (the paper's rule, the
    default, takes it); `--no-rewrite-label` sends Appendix C.3's line without the label."""
    gold = _gold_answers(corpus)
    plain = responder(gold)

    def reply(prompt: str) -> str:
        answer = plain(prompt)
        return f"The sentence is {answer}." if answer in ("normal", "abnormal") else answer

    common = ("--data", str(corpus), "--task", "abnormality", "--limit", "4", "--no-progress")
    with FaultServer(responder=reply) as server:
        spec = f"openai:{server.url}@fault"
        paper = run_cli(
            "medeval", "run", *common, "-m", spec, "--out", str(tmp_path / "paper"), "--split", "validation"
        )
        strict = run_cli(
            "medeval", "run", *common, "-m", spec, "--out", str(tmp_path / "strict"), "--qualified", "strict"
        )
        rewrite = run_cli(
            "medeval", "run", "--data", str(corpus), "--task", "rewriting", "--limit", "2", "--no-progress",
            "-m", spec, "--out", str(tmp_path / "free"), "--no-rewrite-label",
        )  # fmt: skip
        prompts = [p for p in server.log.received if "rewrite ambiguous" in p]
    for done in (paper, strict, rewrite):
        assert done.returncode == 0, done.stderr
    [val] = (tmp_path / "paper").iterdir()
    assert val.name.endswith("abnormality-0shot-validation")
    params = json.loads((val / "manifest.json").read_text())["spec"]["task"]["params"]
    assert params["split"] == "validation" and params["qualified_rule"] == "paper"
    samples = [json.loads(line) for line in (val / "samples.jsonl").read_text().splitlines()]
    assert {s["sample"]["metadata"]["split"] for s in samples} == {"validation"}
    assert all(s["scores"]["medeval_abnormality"]["metadata"]["qualified"] for s in samples)
    [test_arm] = (tmp_path / "strict").iterdir()
    strict_samples = [json.loads(line) for line in (test_arm / "samples.jsonl").read_text().splitlines()]
    assert not any(s["scores"]["medeval_abnormality"]["metadata"]["qualified"] for s in strict_samples)
    assert prompts and all(p.endswith(". Rewrite:") and "Diagnostic:" not in p for p in prompts)
    out = tmp_path / "report"
    done = run_cli(
        "medeval",
        "analyze",
        str(tmp_path / "paper"),
        str(tmp_path / "strict"),
        "--out",
        str(out),
        "--resamples",
        "100",
    )
    assert done.returncode == 0, done.stderr
    result = json.loads((out / "medeval.json").read_text())
    assert len(result["arms"]) == 1 and len(result["validation_arms"]) == 1
