"""A user's own samples: one JSON object per line with ``id``, ``input`` and optional
``context``, ``choices``, ``target``/``targets`` and ``metadata``; one error per bad line."""

from __future__ import annotations

from pathlib import Path

from clinieval.datasets import json_objects, require
from clinieval.errors import UserError
from clinieval.types import Sample


def load_jsonl(path: Path) -> list[Sample]:
    if not path.is_file():
        raise UserError(f"{path}: file not found")
    samples: list[Sample] = []
    seen: set[str] = set()
    for where, item in json_objects(path):
        sid = str(require(item, "id", where, (str, int)))
        if sid in seen:
            raise UserError(f"{where}: duplicate id {sid!r}")
        seen.add(sid)
        target = item.get("target")
        samples.append(
            Sample(
                id=sid,
                input=require(item, "input", where, str),
                context=str(item.get("context", "")),
                choices=tuple(str(c) for c in item.get("choices", ())),
                target=None if target is None else str(target),
                targets=tuple(str(t) for t in item.get("targets", ())),
                metadata=dict(item.get("metadata", {})),
            )
        )
    if not samples:
        raise UserError(f"{path}: no samples")
    return samples
