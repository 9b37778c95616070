"""The rule that a rewrite without clinical content counts as failed (issue 36): each form it
catches, the rewrites it must let through (the paper's own examples, the synthetic corpus's
clinician rewrites, synonyms a rewrite may swap in), and the rewriting scorer that applies it."""

from __future__ import annotations

from pathlib import Path

import pytest

from clinieval.benchmarks.medeval import paper_prompts
from clinieval.benchmarks.medeval.data import load_folder
from clinieval.benchmarks.medeval.items import CHEST, SentenceItem
from clinieval.benchmarks.medeval.paper_prompts import Shots
from clinieval.benchmarks.medeval.rewrite_content import finding_words, without_content
from clinieval.benchmarks.medeval.synth.writer import write_synthetic
from clinieval.benchmarks.medeval.task import MedEvalSettings
from clinieval.benchmarks.medeval.task_table import task_entry
from clinieval.records.sample_record import SampleRecord
from clinieval.types import Message, ModelOutput, Sample

SENTENCE = "The lungs are unremarkable."


@pytest.mark.parametrize(
    ("rewrite", "why"),
    [
        (".", "punctuation only"),
        ("  ...!? ", "punctuation only"),
        ("normal", "the label alone"),
        ("Abnormal.", "the label alone"),
        ("Diagnostic: Normal.", "the label alone"),
        ("UNAMBIGUOUS", "the label alone"),
        ("Label: ambiguous", "the label alone"),
        ("Lungs normal.", "fewer than three words"),
        ("No.", "fewer than three words"),
        ("The sentence is normal.", "none of the sentence's finding words"),
        ("This is now clear.", "none of the sentence's finding words"),
    ],
)
def test_each_form_without_content_is_caught_and_named(rewrite: str, why: str) -> None:
    assert without_content(rewrite, SENTENCE) == why


@pytest.mark.parametrize(
    ("original", "rewrite"),
    [
        (SENTENCE, "The lung fields are clear."),  # lung / lungs
        ("Multiple opacities in both bases.", "There is an opacity at each base."),  # first five letters
        ("The osseous structures are unremarkable.", "The bones are normal."),  # a synonym
        ("Heart size is unremarkable.", "Normal cardiac size."),  # shares "size"
        ("Cardiac silhouette unremarkable.", "The heart is normal in size."),  # cardiac = heart
        ("It is normal.", "Nothing to add here."),  # no finding word to keep: only the other checks
    ],
)
def test_a_rewrite_keeping_a_finding_word_has_content(original: str, rewrite: str) -> None:
    assert without_content(rewrite, original) is None


def test_the_papers_own_rewrite_examples_have_content() -> None:
    for line in paper_prompts.REWRITING_EXAMPLES:
        sentence = line.split("Sentence: ", 1)[1].split(". Diagnostic:", 1)[0]
        rewrite = line.split("Rewrite: ", 1)[1]
        assert without_content(rewrite, sentence) is None, line


def test_label_and_stop_words_are_no_finding_words() -> None:
    assert finding_words("Diagnostic: Normal. The sentence is not ambiguous.") == set()
    assert finding_words("The osseous structures are unremarkable.") == {"bone", "structures", "unremarkable"}


def test_every_clinician_rewrite_of_the_synthetic_corpus_has_content(tmp_path: Path) -> None:
    """The rule must not fail the rewrites it is meant to let through: none of the corpus's
    clinician rewrites is counted as without content."""
    write_synthetic(tmp_path / "c", seed=1, sentences=400, reports=10)
    pairs = {(s.sentence, s.rewrite) for s in load_folder(tmp_path / "c", seed=0).sentences if s.rewrite}
    assert len(pairs) > 50
    assert [p for p in pairs if without_content(p[1], p[0])] == []


def _scored(task: str, answer: str) -> tuple[float | None, dict[str, object]]:
    item = SentenceItem(
        "s1", SENTENCE, CHEST, abnormal=False, ambiguous=True, rewrite="The lungs are normal.", split="test"
    )
    entry = task_entry(task)
    prompt, target, meta = entry.sample_parts(item, Shots(), MedEvalSettings())
    sample = Sample(id="s1", input=prompt, target=target, metadata=meta)
    record = SampleRecord(sample, 0, [Message("user", prompt)], {}, ModelOutput(answer))
    score = entry.scorer().score(record)
    return score.value, dict(score.metadata or {})


def test_the_rewriting_scorer_counts_a_rewrite_without_content_unqualified_and_zero() -> None:
    """Before, "." was a qualified rewrite (any non-empty answer was)."""
    value, meta = _scored("rewriting", "Diagnostic: Normal.")
    assert value == 0.0 and meta["qualified"] is False and meta["without_content"] == "the label alone"
    value, meta = _scored("rewriting", ".")
    assert meta["qualified"] is False and meta["without_content"] == "punctuation only"
    value, meta = _scored("rewriting", "The lungs are normal.")
    assert meta["qualified"] is True and value is not None and value > 50.0
