"""MedEval's prompts are the paper's, character for character, and its answers are read strictly.

The zero-shot prompts are compared with the code blocks of ``shared/spec/medeval.md`` (the spec
quotes the paper's Appendix C), with ``{}`` filled in; the few-shot prompts with the example lines
the spec quotes.
"""

from __future__ import annotations

import re

import pytest

from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS, ReportItem, SentenceItem
from clinieval.benchmarks.medeval.parsing import LABELS, read_codes, read_label
from clinieval.benchmarks.medeval.prompts import (
    PROMPT_OBSERVATIONS,
    code_tuples,
    data_shots,
    paper_shots,
    report_prompt,
    sentence_prompt,
)
from clinieval.benchmarks.medeval.task import draw_examples
from clinieval.errors import UserError
from tests.conftest import REPO, missing

SPEC = REPO.parent / "shared" / "spec" / "medeval.md"

SENTENCE = SentenceItem("s1", "Lungs are unremarkable.", "chest x-ray", abnormal=False, ambiguous=True)
REPORT = ReportItem(
    "r1",
    "FINDINGS: Heart size is normal. IMPRESSION: No acute process.",
    "chest x-ray",
    findings="Heart size is normal.",
    impression="No acute process.",
    codes={"No Finding": "positive", "Pneumothorax": "negative"},
)


def spec_blocks() -> dict[str, str]:
    """The spec's fenced prompts, keyed by the line above each fence ("Abnormality, zero-shot:")."""
    if not SPEC.exists():
        missing(f"{SPEC} is missing: the shared spec sits beside the checkout")
    text = SPEC.read_text(encoding="utf-8")
    return {m[1].strip(): m[2] for m in re.finditer(r"^([^\n]+):\n```\n(.*?)\n```", text, re.M | re.S)}


@pytest.mark.parametrize(
    ("heading", "build", "filled"),
    [
        ("Abnormality, zero-shot", lambda: sentence_prompt("abnormality", SENTENCE), SENTENCE.sentence),
        ("Ambiguity, zero-shot", lambda: sentence_prompt("ambiguity", SENTENCE), SENTENCE.sentence),
        ("Rewriting, zero-shot", lambda: sentence_prompt("rewriting", SENTENCE), "Lungs are unremarkable"),
        ("Code prediction (chest), zero-shot", lambda: report_prompt("codes", REPORT), REPORT.text),
        ("Summarization, zero-shot", lambda: report_prompt("summarization", REPORT), "Heart size is normal"),
    ],
)
def test_zero_shot_prompts_are_the_papers(heading: str, build: object, filled: str) -> None:
    template = spec_blocks()[heading]
    assert callable(build)
    # the rewriting template names the label as {Normal|Abnormal}: SENTENCE is a normal one
    assert build() == template.replace("{}", filled).replace("{Normal|Abnormal}", "Normal")


def test_the_label_free_rewrite_prompt_is_appendix_c3s_template_line() -> None:
    """The named option: C.3's template line, ``Sentence: {}. Rewrite:``, without the label; the
    default keeps it (test above). The rest of the prompt is the same."""
    labelled = sentence_prompt("rewriting", SENTENCE)
    free = sentence_prompt("rewriting", SENTENCE, with_label=False)
    assert free.endswith(
        "answer me with its rewrite, without saying anything else. Sentence: Lungs are unremarkable. Rewrite:"
    )
    assert "Diagnostic" not in free
    assert free == labelled.replace(" Diagnostic: Normal.", "")
    few = sentence_prompt("rewriting", SENTENCE, paper_shots("rewriting"), with_label=False)
    assert few.endswith("Sentence: Lungs are unremarkable. Rewrite:") and few.count("Diagnostic:") == 3


def test_the_papers_few_shot_examples_and_layout() -> None:
    two = sentence_prompt("abnormality", SENTENCE, paper_shots("abnormality"))
    assert two == (
        "We are here to address a new task, abnormal identification. Given a sentence from a radiology "
        "report, written by a radiologist, please tell if this sentence indicates abnormal findings or not. "
        "Here are 2 examples.\n"
        "Sentence: there is likely left basilar opacity. Label: abnormal.\n"
        "Sentence: unchanged exam without acute abnormality. Label: normal.\n"
        "Now here is a new sentence, tell me if it is normal or abnormal, without saying anything else. "
        "Sentence: Lungs are unremarkable. Label:"
    )
    three = sentence_prompt("rewriting", SENTENCE, paper_shots("rewriting"))
    assert (
        "no period between full sentences. Here are three examples.\nSentence: Lungs are unremarkable."
        in three
    )
    assert three.endswith("Sentence: Lungs are unremarkable. Diagnostic: Normal. Rewrite:")
    assert "Sentence: lungs are unremarkable. Label: ambiguous." in sentence_prompt(
        "ambiguity", SENTENCE, paper_shots("ambiguity")
    )
    with pytest.raises(UserError, match="no few-shot examples for summarization"):
        paper_shots("summarization")


def test_k_shot_from_data_and_balanced_draws() -> None:
    pool = [
        SentenceItem(f"t{i}", f"sentence {i}.", "chest x-ray", abnormal=i % 4 == 0, split="train")
        for i in range(20)
    ]
    two = draw_examples("abnormality", pool, 2, seed=3)
    assert {x.abnormal for x in two} == {True, False}  # both classes, as the paper's examples
    assert draw_examples("abnormality", pool, 2, seed=3) == two
    others = {tuple(x.id for x in draw_examples("abnormality", pool, 2, seed=s)) for s in range(6)}
    assert len(others) > 1  # the seed matters
    shots = data_shots("abnormality", two)
    one = data_shots("abnormality", two[:1])
    assert shots.announce() == "Here are 2 examples." and one.announce() == "Here is 1 example."
    with pytest.raises(UserError, match="9 examples asked for, but the train split has 0"):
        draw_examples("ambiguity", pool, 9, seed=0)


def test_code_tuples_keep_the_prompts_spelling_and_fill_absent() -> None:
    line = code_tuples(REPORT)
    assert line.startswith("(No Finding, positive), (Enlarged Cardiomeastinum, unknown)")
    assert "(Pneumothorax, negative)" in line and line.count("(") == 14


@pytest.mark.parametrize(
    ("answer", "paper", "strict"),
    [
        ("abnormal", "abnormal", "abnormal"),
        ("Abnormal.", "abnormal", "abnormal"),
        ("  NORMAL \n", "normal", "normal"),
        ('"normal"', "normal", "normal"),
        ("The sentence is abnormal.", "abnormal", None),  # the paper's own examples of qualified
        ("Label: abnormal", "abnormal", None),
        ("It is normal. Normal.", "normal", None),  # one label word, said twice
        ("normal or abnormal", None, None),  # both label words
        ("abnormality", None, None),  # a word, not the label word
        ("", None, None),
    ],
)
def test_a_label_qualifies_by_the_papers_rule_or_the_strict_one(
    answer: str, paper: str | None, strict: str | None
) -> None:
    """The paper (Table 9) counts an answer that includes only one of the label words; "strict" (the
    label and nothing else) is the named option."""
    assert read_label(answer, LABELS["abnormality"]) == paper
    assert read_label(answer, LABELS["abnormality"], "strict") == strict


@pytest.mark.parametrize(
    ("answer", "label"),
    [
        ("unambiguous.", "unambiguous"),
        ("The sentence is ambiguous", "ambiguous"),
        ("ambiguous or unambiguous", None),
    ],
)
def test_unambiguous_is_never_read_as_ambiguous(answer: str, label: str | None) -> None:
    assert read_label(answer, LABELS["ambiguity"]) == label


def test_code_answers_read_the_tuples_and_mark_unqualified_ones() -> None:
    full = ", ".join(f"({o}, negative)" for o in PROMPT_OBSERVATIONS)
    answer = read_codes(full)
    assert answer.qualified and set(answer.predictions) == set(CHEXPERT_OBSERVATIONS)
    assert answer.predictions["Enlarged Cardiomediastinum"] == "negative"  # the misspelling mapped
    missing = read_codes(full.replace("(Edema, negative), ", ""))
    assert not missing.qualified and "missing, first Edema" in missing.problems[0]
    twice = read_codes(full + ", (Edema, positive)")
    assert not twice.qualified and "Edema given twice" in twice.problems
    odd = read_codes(full.replace("(Fracture, negative)", "(Fracture, maybe)"))
    assert not odd.qualified and any("maybe" in p for p in odd.problems)
