"""The task over a user's own JSON Lines file: the record, the question, and its lettered choices.

The defaults follow the file, because the mistake they prevent is silent: a multiple-choice
question sent without its options is answered blind, and its exact match is 0 however good the
model. So a file whose samples all carry ``choices`` gets :data:`CHOICE_PROMPT` (the options as
``A. ...`` lines, as lm-evaluation-harness and inspect_ai show them) scored by ``choice_extract``
(the letter or the option's text); a file without choices gets :data:`DEFAULT_PROMPT` scored by
``exact_match``. A file that mixes the two is refused rather than half shown. ``--prompt FILE``
replaces the prompt; the default scorer then follows it (``choice_extract`` when it shows
``{choices}``). ``--scorer`` replaces the scorers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path

from clinieval.benchmarks.jsonl.data import load_jsonl
from clinieval.benchmarks.jsonl.shapes import parse_fields
from clinieval.errors import UserError
from clinieval.scoring.scorers import ChoiceExtraction, ExactMatch, Scorer
from clinieval.task import PromptTemplate, Task, template_fields
from clinieval.types import GenerationConfig, Sample

DEFAULT_PROMPT = PromptTemplate(user="{context}\n\n{input}")
"""Samples without choices: the record, a blank line, the question (just the question when the
sample has no record)."""

CHOICE_PROMPT = PromptTemplate(
    user="{context}\n\n{input}\n\n{choices}\n\nAnswer with the letter of the correct option."
)
"""Samples with choices: the record, the question, one ``A. text`` line per choice, and what to
answer with."""


def jsonl_task(
    path: Path,
    scorers: list[Scorer] | None = None,
    generation: GenerationConfig | None = None,
    prompt: PromptTemplate | None = None,
    fields: Sequence[str] = (),
) -> Task:
    """The task over ``path``, read through ``fields`` (``--field NAME=COLUMN``); without
    ``prompt`` the file is read now to choose the default (with one, it is read only when the run
    loads its samples: a Ray worker is handed the driver's prompt and the samples, and needs no
    copy of the file, nor the fields)."""
    samples = None
    if prompt is None:
        samples = load_jsonl(path, fields)
        prompt = default_prompt(path, samples)
    else:
        parse_fields(fields)  # a mistake in --field is refused before the run starts either way
    return Task(
        name=f"jsonl:{path.name}",
        load=_loader(path, samples, tuple(fields)),
        prompt=prompt,
        scorers=scorers or [default_scorer(prompt)],
        generation=generation or GenerationConfig(),
        data_files=[path],
        params={"file": path.name},
    )


def _loader(path: Path, samples: list[Sample] | None, fields: tuple[str, ...]) -> Callable[[], list[Sample]]:
    """The samples already read (a fresh list each time: a run shuffles what it is given), or
    the file read when asked."""
    if samples is None:
        return lambda: load_jsonl(path, fields)
    read = samples
    return lambda: list(read)


def default_prompt(path: Path, samples: list[Sample]) -> PromptTemplate:
    """:data:`CHOICE_PROMPT` when every sample has choices, :data:`DEFAULT_PROMPT` when none has."""
    with_choices = next((s for s in samples if s.choices), None)
    without = next((s for s in samples if not s.choices), None)
    if with_choices is None:
        return DEFAULT_PROMPT
    if without is None:
        return CHOICE_PROMPT
    raise UserError(
        f"{path}: sample {with_choices.id!r} has choices but sample {without.id!r} has none, and the "
        "default prompt lists the choices of every sample or of none; give every sample its choices, "
        "split the file in two, or pass --prompt FILE and --scorer"
    )


def default_scorer(prompt: PromptTemplate) -> Scorer:
    """``choice_extract`` for a prompt that shows the choices, else ``exact_match``."""
    used = template_fields(prompt.user, "prompt") | template_fields(prompt.system or "", "prompt")
    return ChoiceExtraction() if used & {"choices", "options"} else ExactMatch()
