"""MedEval's tasks are one typed table (issue 27): one entry per task, looked up, never branched on.

The prompts themselves are held to the paper by ``test_medeval_prompts.py`` and the numbers by the
analysis tests; these tests hold the table's shape: every task has an entry of its level, the views
other modules read (few-shot counts, examples, levels, headline metrics) come from it, and no
MedEval module compares a task's name with a string again.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from clinieval.benchmarks.medeval import prompts
from clinieval.benchmarks.medeval.analysis import MAIN_METRIC, main_value
from clinieval.benchmarks.medeval.baselines.train import CLASSIFIED
from clinieval.benchmarks.medeval.data import MedEvalData
from clinieval.benchmarks.medeval.items import CHEST, TASKS, ReportItem, SentenceItem
from clinieval.benchmarks.medeval.paper_prompts import Shots
from clinieval.benchmarks.medeval.task import MedEvalSettings
from clinieval.benchmarks.medeval.task_table import TASK_TABLE, ReportTask, SentenceTask, task_entry
from clinieval.errors import UserError

MEDEVAL = Path(prompts.__file__).resolve().parent
SENTENCE = SentenceItem(
    "s1", "Lungs are unremarkable.", CHEST, abnormal=False, ambiguous=True, rewrite="Lungs are normal."
)
REPORT = ReportItem(
    "r1",
    "FINDINGS: Heart size is normal. IMPRESSION: No acute process.",
    CHEST,
    findings="Heart size is normal.",
    impression="No acute process.",
    codes={"No Finding": "positive"},
)


def test_the_table_holds_the_five_tasks_in_the_papers_order() -> None:
    assert tuple(TASK_TABLE) == TASKS
    assert all(entry.name == name for name, entry in TASK_TABLE.items())
    levels = {name: entry.level for name, entry in TASK_TABLE.items()}
    assert levels == {
        "abnormality": "sentence",
        "ambiguity": "sentence",
        "rewriting": "sentence",
        "codes": "report",
        "summarization": "report",
    }
    assert all(
        isinstance(e, SentenceTask if e.level == "sentence" else ReportTask) for e in TASK_TABLE.values()
    )


def test_the_views_other_modules_read_come_from_the_table() -> None:
    assert prompts.SENTENCE_TASKS == ("abnormality", "ambiguity", "rewriting")
    assert dict(prompts.PAPER_SHOTS) == {
        "abnormality": 2,
        "ambiguity": 2,
        "rewriting": 3,
        "codes": 2,
        "summarization": 3,
    }
    assert set(prompts.PAPER_EXAMPLES) == {"abnormality", "ambiguity", "rewriting"}
    assert [len(v) for v in prompts.PAPER_EXAMPLES.values()] == [2, 2, 3]
    assert dict(MAIN_METRIC) == {
        "abnormality": "accuracy",
        "ambiguity": "accuracy",
        "rewriting": "bleu4",
        "codes": "average_accuracy",
        "summarization": "rougeL",
    }
    assert CLASSIFIED == ("abnormality", "ambiguity", "codes")
    assert [t for t, e in TASK_TABLE.items() if e.classifier_deltas] == ["rewriting"]
    assert {t: e.item_scale for t, e in TASK_TABLE.items()}["rewriting"] == 1.0


def test_each_entry_scores_under_its_own_name_and_records_only_its_own_settings() -> None:
    settings = MedEvalSettings(absent_as="negative", qualified="strict", rewrite_label=False)
    for name, entry in TASK_TABLE.items():
        assert entry.scorer().name == f"medeval_{name}"
        assert list(entry.params(settings)) == ["absent_as", "qualified_rule", "rewrite_label"]
    used = {
        name: {k: v for k, v in entry.params(settings).items() if v is not None}
        for name, entry in TASK_TABLE.items()
    }
    assert used == {
        "abnormality": {"qualified_rule": "strict"},
        "ambiguity": {"qualified_rule": "strict"},
        "rewriting": {"rewrite_label": False},
        "codes": {"absent_as": "negative"},
        "summarization": {},
    }


def test_an_entry_takes_only_items_of_its_level() -> None:
    for entry in TASK_TABLE.values():
        own, other = (SENTENCE, REPORT) if entry.level == "sentence" else (REPORT, SENTENCE)
        assert entry.eligible(own) is (entry.name != "codes" or own.domain == CHEST)
        assert entry.eligible(other) is False
        with pytest.raises(UserError, match=f"task {entry.name}: an example must be a {entry.level}"):
            entry.example_line(other)
        with pytest.raises(UserError):
            entry.sample_parts(other, Shots(), MedEvalSettings())


def test_label_words_targets_and_metadata_follow_the_entry() -> None:
    settings = MedEvalSettings()
    assert task_entry("abnormality").gold_label(SENTENCE) == "normal"
    assert task_entry("ambiguity").gold_label(SENTENCE) == "ambiguous"
    with pytest.raises(UserError, match="no rewriting label"):
        task_entry("rewriting").gold_label(SENTENCE)
    targets = {
        name: entry.sample_parts(SENTENCE if entry.level == "sentence" else REPORT, Shots(), settings)[1]
        for name, entry in TASK_TABLE.items()
    }
    assert targets == {
        "abnormality": "normal",
        "ambiguity": "ambiguous",
        "rewriting": "Lungs are normal.",
        "codes": None,
        "summarization": "No acute process.",
    }
    _, _, codes_meta = task_entry("codes").sample_parts(REPORT, Shots(), settings)
    assert codes_meta["level"] == "report" and codes_meta["codes"]["No Finding"] == "positive"
    assert codes_meta["codes"]["Edema"] == "unknown"
    with pytest.raises(UserError, match="MedEval task 'nonsense' is unknown"):
        task_entry("nonsense")


def test_items_for_reads_the_level_from_the_table() -> None:
    data = MedEvalData("medeval", (SENTENCE,), (REPORT,), {}, ())
    for name, entry in TASK_TABLE.items():
        assert data.items_for(name) == ((SENTENCE,) if entry.level == "sentence" else (REPORT,))


def test_a_headline_is_read_where_its_kind_of_answer_keeps_it() -> None:
    label = {"task": "ambiguity", "metrics": {"accuracy": {"counted_wrong": {"value": 60.0}}}}
    text = {"task": "rewriting", "metrics": {"counted_wrong": {"bleu4": 5.0}}}
    empty = {"task": "summarization", "metrics": {"counted_wrong": None}}
    assert (main_value(label), main_value(text), main_value(empty)) == (60.0, 5.0, None)


_NAMES = "|".join(TASKS)
_BRANCH = re.compile(rf"""(==|!=|\bin)\s*\(?\s*["']({_NAMES})["']""")


def test_no_medeval_module_branches_on_a_task_name() -> None:
    """A comparison of anything with a task's name (``task == "codes"``, ``in ("abnormality",``)
    belongs in the task's entry; the table itself is where names meet behaviour."""
    offenders = [
        f"{path.relative_to(MEDEVAL)}:{n}: {line.strip()}"
        for path in sorted(MEDEVAL.rglob("*.py"))
        if path.name != "task_table.py"
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if _BRANCH.search(line)
    ]
    assert not offenders, "\n".join(offenders)
    assert _BRANCH.search('if task == "codes":') and _BRANCH.search('task in ("abnormality", "ambiguity")')
