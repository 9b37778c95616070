"""Step 2 of the build: BM25 instruction → patient matching, and the random baseline it is judged against.

The query is the instruction plus the patient characteristics and clinical context its author gave;
BM25Okapi ranks the cohort's patients (one document per patient XML file) and the top K are the
candidates. K patients drawn uniformly at random (seeded) are the baseline. This module only picks
candidates; :mod:`.review` writes them out for blinded judgement.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from clinieval.benchmarks.medalign.build.instructions import Instruction
from clinieval.ehr.medalign_xml import read_xml
from clinieval.ehr.retrieval import BM25Index, Document, patient_document
from clinieval.errors import UserError

__all__ = ["DEFAULT_K", "Match", "RandomPool", "build_cohort_index", "match_instructions"]

DEFAULT_K = 5
"""MedAlign's number of BM25 candidates per instruction (and of random ones)."""

RandomPool = Literal["rest", "cohort"]
"""Where the random baseline draws from: the cohort minus the BM25 candidates, or all of it."""


def _cohort_files(ehr_dir: Path) -> list[Path]:
    if not ehr_dir.is_dir():
        raise UserError(f"{ehr_dir} is not a folder: give the folder of patient XML files (one per patient)")
    files = sorted(p for p in ehr_dir.iterdir() if p.suffix.lower() == ".xml" and p.is_file())
    if not files:
        raise UserError(f"{ehr_dir} holds no .xml files: the cohort is one MedAlign XML EHR per patient")
    return files


def _ehr_document(path: Path) -> Document:
    """The patient's whole record as one document, identified by its file name (what reviewers open)."""
    doc = patient_document(read_xml(path))  # UserError (file, line, column) for a non-MedAlign XML
    return Document(path.name, doc.text, doc.start, {"person_id": doc.doc_id})


def build_cohort_index(ehr_dir: str | Path, *, stopwords: bool = False) -> tuple[BM25Index, list[str]]:
    """A BM25Okapi index over a folder of patient XML files (either MedAlign dialect), one document
    per file, and the file names (the document ids) in index order.

    Only ``*.xml`` directly in the folder count. The text is not kept in memory once indexed.
    """
    files = _cohort_files(Path(ehr_dir))
    index = BM25Index.build((_ehr_document(p) for p in files), stopwords=stopwords, keep_text=False)
    return index, [p.name for p in files]


@dataclass(frozen=True, slots=True)
class Match:
    """An instruction's candidates: BM25's top K ``(ehr, score)`` best first, the random draw in draw
    order, and ``shown``, the union in the shuffled order reviewers see."""

    instruction: Instruction
    bm25: tuple[tuple[str, float], ...]
    random: tuple[str, ...]
    shown: tuple[str, ...]


def _random_draw(rng: random.Random, ehrs: Sequence[str], exclude: set[str], k: int) -> tuple[str, ...]:
    """``k`` EHRs uniformly without replacement from ``ehrs`` minus ``exclude``, in draw order.

    The first ``k`` survivors of a uniform random ordering are a uniform draw from the rest, and
    only ``k + len(exclude)`` positions of that ordering are ever needed: O(k), not O(cohort)."""
    order = rng.sample(range(len(ehrs)), min(len(ehrs), k + len(exclude)))
    return tuple([ehrs[i] for i in order if ehrs[i] not in exclude][:k])


def _match_one(
    ins: Instruction, index: BM25Index, ehrs: Sequence[str], k: int, seed: int, pool: RandomPool
) -> Match:
    hits = tuple(index.search(ins.query(), k))
    top = {ehr for ehr, _ in hits}
    rng = random.Random(f"{seed}/{ins.instruction_id}")  # per instruction: stable under reordering
    drawn = _random_draw(rng, ehrs, top if pool == "rest" else set(), k)
    shown = [ehr for ehr, _ in hits] + [ehr for ehr in drawn if ehr not in top]
    rng.shuffle(shown)
    return Match(ins, hits, drawn, tuple(shown))


def match_instructions(
    instructions: Sequence[Instruction],
    index: BM25Index,
    *,
    k: int = DEFAULT_K,
    seed: int = 0,
    random_pool: RandomPool = "cohort",
) -> list[Match]:
    """BM25 top-``k`` and ``k`` uniformly random EHRs for every instruction.

    The query is :meth:`Instruction.query`. BM25 may return fewer than ``k`` when fewer patients
    share an informative word with the query. The random draw is seeded per instruction
    (``seed`` and the instruction id), so it does not change when instructions are added or
    reordered. ``random_pool="rest"`` draws from the patients BM25 did not return (no EHR is shown
    twice; this baseline slightly understates uniform pairing when BM25 finds the relevant ones);
    ``"cohort"`` draws from every patient, the paper's uniform-random pairing, and a patient that is
    both is shown once with both sources in the key.
    """
    if k < 1:
        raise UserError(f"k (candidates per instruction) must be at least 1, got {k}")
    if random_pool not in ("rest", "cohort"):
        raise UserError(f"random_pool must be 'rest' or 'cohort', got {random_pool!r}")
    ehrs = index.ids
    return [_match_one(ins, index, ehrs, k, seed, random_pool) for ins in instructions]
