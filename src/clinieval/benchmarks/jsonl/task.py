"""The task over a user's own JSON Lines file: the record, then the question; exact match by default."""

from __future__ import annotations

from pathlib import Path

from clinieval.benchmarks.jsonl.data import load_jsonl
from clinieval.scoring.scorers import ExactMatch, Scorer
from clinieval.task import PromptTemplate, Task
from clinieval.types import GenerationConfig

DEFAULT_PROMPT = PromptTemplate(user="{context}\n\n{input}")


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
