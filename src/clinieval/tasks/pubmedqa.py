"""PubMedQA (expert-labelled PQA-L): a research question plus its abstract -> yes / no / maybe.

Data: ``ori_pqal.json`` (1,000 items keyed by PMID) and ``test_ground_truth.json`` (the 500
test PMIDs), read in place. Two scorers by default: the choice read out of generated text, and
the choice with the highest log-likelihood.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from clinieval.datasets import find_dataset_dir, read_json, require
from clinieval.errors import UserError
from clinieval.scoring.scorers import ChoiceExtraction, ChoiceLoglik, Scorer
from clinieval.task import PromptTemplate, Task
from clinieval.types import GenerationConfig, Sample

CHOICES = ("yes", "no", "maybe")
Split = Literal["test", "all"]

PROMPT = PromptTemplate(
    user=(
        "Read the abstract and answer the research question with yes, no or maybe.\n\n"
        "Abstract:\n{context}\n\nQuestion: {input}\n\n"
        "Reply with one word: yes, no or maybe."
    )
)


def load_pubmedqa(folder: Path, split: Split = "test") -> list[Sample]:
    items_path = folder / "ori_pqal.json"
    items = read_json(items_path)
    if not isinstance(items, dict):
        raise UserError(f"{items_path}: expected an object keyed by PMID")
    if split == "test":
        truth_path = folder / "test_ground_truth.json"
        truth = read_json(truth_path)
        if not isinstance(truth, dict):
            raise UserError(f"{truth_path}: expected an object of PMID -> label")
        ids = [str(k) for k in truth]
        missing = [i for i in ids if i not in items]
        if missing:
            raise UserError(f"{items_path}: test PMID {missing[0]} has no item ({len(missing)} missing)")
    else:
        ids = [str(k) for k in items]
    return [_sample(pmid, items[pmid], f"{items_path} item {pmid}") for pmid in ids]


def _sample(pmid: str, item: object, where: str) -> Sample:
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected an object")
    question = require(item, "QUESTION", where, str)
    contexts = require(item, "CONTEXTS", where, list)
    labels = item.get("LABELS") or [""] * len(contexts)
    decision = require(item, "final_decision", where, str)
    if decision not in CHOICES:
        raise UserError(f"{where}: final_decision {decision!r} is not one of {', '.join(CHOICES)}")
    context = "\n".join(
        f"{label}: {text}" if label else str(text) for label, text in zip(labels, contexts, strict=False)
    )
    return Sample(
        id=pmid,
        input=question,
        context=context,
        choices=CHOICES,
        target=decision,
        metadata={"year": item.get("YEAR"), "meshes": item.get("MESHES", [])},
    )


def pubmedqa_task(
    data: Path | None = None,
    split: Split = "test",
    scorers: list[Scorer] | None = None,
    generation: GenerationConfig | None = None,
) -> Task:
    folder = find_dataset_dir("pubmedqa", data)
    files = [folder / "ori_pqal.json"] + ([folder / "test_ground_truth.json"] if split == "test" else [])
    return Task(
        name="pubmedqa",
        load=lambda: load_pubmedqa(folder, split),
        prompt=PROMPT,
        scorers=scorers or [ChoiceExtraction(), ChoiceLoglik()],
        generation=generation or GenerationConfig(max_tokens=16),
        data_files=files,
        params={"split": split},
    )
