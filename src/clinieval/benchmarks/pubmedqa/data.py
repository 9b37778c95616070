"""PubMedQA's expert-labelled set (PQA-L), read in place.

``ori_pqal.json`` holds 1,000 items keyed by PMID; ``test_ground_truth.json`` names the 500 test
PMIDs. Each item becomes one :class:`~clinieval.types.Sample`: the question as input, the abstract's
labelled sections as context, yes / no / maybe as choices and the expert decision as target.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from clinieval.datasets import read_json, require
from clinieval.errors import UserError
from clinieval.types import Sample

CHOICES = ("yes", "no", "maybe")
Split = Literal["test", "all"]
SPLITS: tuple[Split, ...] = ("test", "all")


def load_pubmedqa(folder: Path, split: Split = "test") -> list[Sample]:
    items_path = folder / "ori_pqal.json"
    items = read_json(items_path)
    if not isinstance(items, dict):
        raise UserError(f"{items_path}: the top level is {_kind(items)}; expected an object keyed by PMID")
    if split == "test":
        truth_path = folder / "test_ground_truth.json"
        truth = read_json(truth_path)
        if not isinstance(truth, dict):
            raise UserError(
                f"{truth_path}: the top level is {_kind(truth)}; expected an object of PMID -> label"
            )
        ids = [str(k) for k in truth]
        missing = [i for i in ids if i not in items]
        if missing:
            raise UserError(f"{items_path}: test PMID {missing[0]} has no item ({len(missing)} missing)")
    else:
        ids = [str(k) for k in items]
    return [_sample(pmid, items[pmid], f"{items_path} item {pmid}") for pmid in ids]


def _kind(value: object) -> str:
    """A JSON value's kind as JSON names it, for an error about the file's top level."""
    return {dict: "an object", list: "an array", str: "a string", bool: "a boolean"}.get(
        type(value), "null" if value is None else "a number"
    )


def _sample(pmid: str, item: object, where: str) -> Sample:
    if not isinstance(item, dict):
        raise UserError(f"{where}: expected an object")
    question = require(item, "QUESTION", where, str)
    contexts = require(item, "CONTEXTS", where, list)
    labels = item.get("LABELS") or [""] * len(contexts)
    if not isinstance(labels, list):
        raise UserError(f"{where}: field 'LABELS' is {_kind(labels)}; expected a list of section names")
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
