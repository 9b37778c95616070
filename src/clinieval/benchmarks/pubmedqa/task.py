"""PubMedQA (expert-labelled PQA-L): a research question plus its abstract -> yes / no / maybe.

Data: ``ori_pqal.json`` (1,000 items keyed by PMID) and ``test_ground_truth.json`` (the 500
test PMIDs), read in place. Two scorers by default: the choice read out of generated text, and
the choice with the highest log-likelihood.
"""

from __future__ import annotations

from pathlib import Path

from clinieval.benchmarks.pubmedqa.data import Split, load_pubmedqa
from clinieval.benchmarks.pubmedqa.prompts import PROMPT
from clinieval.datasets import find_dataset_dir
from clinieval.scoring.scorers import ChoiceExtraction, ChoiceLoglik, Scorer
from clinieval.task import Task
from clinieval.types import GenerationConfig


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
