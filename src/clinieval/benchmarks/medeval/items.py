"""What MedEval's data is made of, shared by the loaders, the labeller, the tasks and the analysis.

MedEval (He et al., EMNLP 2023) has two levels: **sentences** from radiology reports, labelled
normal/abnormal and ambiguous/unambiguous (an ambiguous one with a clinician's rewrite), and
**reports**, labelled with one code value per observation of their domain and carrying an
impression that serves as the gold summary of the findings. A domain is body part x modality
("chest x-ray", "foot/ankle x-ray"). The paper's data is not public; these types hold whatever a
loader reads (MedEval-shaped files, MIMIC-CXR, Open-i, the synthetic corpus).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal, TypeAlias

CodeValue: TypeAlias = Literal["positive", "negative", "unknown", "absent"]
"""One observation's value in a report: MedEval's positive / negative / unknown, or absent (not
mentioned). CheXpert's numbers are 1.0, 0.0, -1.0 and blank."""

CODE_VALUES: tuple[CodeValue, ...] = ("positive", "negative", "unknown", "absent")

CHEXPERT_NUMBERS: Mapping[CodeValue, str] = {
    "positive": "1.0",
    "negative": "0.0",
    "unknown": "-1.0",
    "absent": "",
}
"""How the CheXpert labeller's CSV writes each value (``labeled_reports.csv``)."""

TaskName: TypeAlias = Literal["abnormality", "ambiguity", "rewriting", "codes", "summarization"]
TASKS: tuple[TaskName, ...] = ("abnormality", "ambiguity", "rewriting", "codes", "summarization")
"""MedEval's five tasks, in the paper's order: what each one asks, prompts and scores is its entry
in :data:`~.task_table.TASK_TABLE`; the names are here, below everything that reads them (run
folders name their task, :mod:`.arms`)."""

Level: TypeAlias = Literal["sentence", "report"]
"""What a task's items are: sentences (abnormality, ambiguity, rewriting) or whole reports."""

Split: TypeAlias = Literal["train", "validation", "test"]
SPLITS: tuple[Split, ...] = ("train", "validation", "test")
SPLIT_SHARES: tuple[int, int, int] = (7, 1, 2)
"""MedEval's train / validation / test proportions for every task."""

CHEST = "chest x-ray"
"""The chest domain (Open-i, MIMIC-CXR); every other domain is "miscellaneous" in the paper."""

CHEXPERT_OBSERVATIONS: tuple[str, ...] = (
    "No Finding",
    "Enlarged Cardiomediastinum",
    "Cardiomegaly",
    "Lung Lesion",
    "Lung Opacity",
    "Edema",
    "Consolidation",
    "Pneumonia",
    "Atelectasis",
    "Pneumothorax",
    "Pleural Effusion",
    "Pleural Other",
    "Fracture",
    "Support Devices",
)
"""The 14 chest observations, in CheXpert's (and MedEval's prompt's) order."""

FOOT_ANKLE_CODES: tuple[str, ...] = (
    "Dislocation",
    "Osteonecrosis",
    "Fracture",
    "Gout",
    "Metatarsus Primus Varus",
    "Gas",
    "Swelling",
    "Psoriasis",
    "Enthesopathy",
    "Hammer Toe",
    "Osteomyelitis",
    "Mass",
    "Arthritis",
    "Pes Planus",
    "Rheumatoid",
    "CPDD",
    "Hardware",
    "Erosion",
    "Pes Cavus",
    "Coalition",
    "Subluxation",
    "Nodule",
    "Rupture",
    "Hallux Valgus",
    "No Finding",
)
"""The foot/ankle codes of MedEval's Table 1 (the first miscellaneous domain with its own codes)."""

AmbiguityKind: TypeAlias = Literal["jargon", "contradiction", "grammar"]
"""Why a sentence is ambiguous (MedEval's three reasons): jargon with a meaning different from
everyday usage ("unremarkable"), contradictory findings in one sentence, misleading grammar (no
period between sentences)."""


@dataclass(frozen=True, slots=True)
class SentenceItem:
    """One sentence with whatever labels its source has (None: not labelled for that task)."""

    id: str
    sentence: str
    domain: str
    abnormal: bool | None = None
    ambiguous: bool | None = None
    rewrite: str | None = None
    ambiguity_kind: AmbiguityKind | None = None
    split: Split | None = None
    source: str = ""
    """Where it was read: ``file:line`` (or ``file`` and the report id), for error messages."""


@dataclass(frozen=True, slots=True)
class ReportItem:
    """One report: its full text, its FINDINGS and IMPRESSION sections ("" when the report has
    none), and one value per observation of its domain (observations not listed are absent)."""

    id: str
    text: str
    domain: str
    findings: str = ""
    impression: str = ""
    codes: Mapping[str, CodeValue] = field(default_factory=dict)
    split: Split | None = None
    source: str = ""
