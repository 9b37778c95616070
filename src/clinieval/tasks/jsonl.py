"""A user's own task: one JSON object per line with ``id``, ``input`` and optional ``context``,
``choices``, ``target``/``targets`` and ``metadata``."""

from __future__ import annotations

from pathlib import Path

from clinieval.datasets import json_objects, require
from clinieval.errors import UserError
from clinieval.scoring.scorers import ExactMatch, Scorer
from clinieval.task import PromptTemplate, Task
from clinieval.types import GenerationConfig, Sample

DEFAULT_PROMPT = PromptTemplate(user="{context}\n\n{input}")


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


def jsonl_task(
    path: Path,
    scorers: list[Scorer] | None = None,
    generation: GenerationConfig | None = None,
    prompt: PromptTemplate | None = None,
) -> Task:
    return Task(
        name=f"jsonl:{path.name}",
        load=lambda: load_jsonl(path),
        prompt=prompt or DEFAULT_PROMPT,
        scorers=scorers or [ExactMatch()],
        generation=generation or GenerationConfig(),
        data_files=[path],
        params={"file": path.name},
    )
