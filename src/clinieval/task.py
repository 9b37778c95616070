"""Tasks: a dataset, how to prompt for it, how to fit its context, and how to score it."""

from __future__ import annotations

import string
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol, runtime_checkable

from clinieval.errors import UserError
from clinieval.fsutil import read_user_text
from clinieval.models.base import Model
from clinieval.scoring.choices import LETTERS as LETTERS
from clinieval.scoring.choices import option_lines as option_lines
from clinieval.scoring.scorers import Scorer
from clinieval.types import JSON, GenerationConfig, Message, Sample

PROMPT_FIELDS = ("input", "context", "choices", "options")
"""The fields a prompt template may use; ``{options}`` is a synonym of ``{choices}``."""


@dataclass(frozen=True, slots=True)
class PromptTemplate:
    """``str.format``-style templates over ``{input}``, ``{context}`` and ``{choices}``.

    The question and the record are separate fields so a context policy can trim the record and
    never the question. ``{choices}`` is one lettered line per choice (``A. first`` /
    ``B. second`` ...), the layout of lm-evaluation-harness's and inspect_ai's multiple-choice
    prompts, so a model answering "B" can be understood (``choice_extract`` reads the letter when
    the prompt as sent holds these lines); ``{options}`` is the same text under the name
    EHRNoteQA's prompt uses. A field that renders empty at the very start or end of a message takes
    the whitespace that separated it from the rest along (``{context}\n\n{input}`` without a record
    is just the question, not two blank lines first); everything else is exactly ``str.format``'s.
    """

    user: str
    system: str | None = None

    def __post_init__(self) -> None:
        for text in (self.user, self.system or ""):
            template_fields(text, "prompt template")

    @classmethod
    def from_file(cls, path: Path) -> PromptTemplate:
        """The user prompt written in ``path`` (``--prompt FILE``); one UserError naming the file,
        and the line for a bad field. The file's final line break is not part of the prompt (an
        editor adds one), and a prompt without ``{input}`` is refused: it would never send the
        question."""
        text = _read_prompt_file(path)
        if "input" not in template_fields(text, str(path)):
            raise UserError(
                f"{path}: the prompt never uses {{input}}, so the question would not be sent; "
                "put {input} where the question goes"
            )
        return cls(user=text)

    def messages(self, sample: Sample, context: str) -> list[Message]:
        fields = _SampleFields(sample, context)
        out: list[Message] = []
        if self.system:
            out.append(Message("system", _render(self.system, fields)))
        out.append(Message("user", _render(self.user, fields)))
        return out

    def to_dict(self) -> JSON:
        return {"system": self.system, "user": self.user}


def template_fields(text: str, where: str) -> set[str]:
    """The fields ``text`` uses; a malformed brace or an unknown field is one UserError naming
    ``where`` (a file, or "prompt template") and the line."""
    used: set[str] = set()
    for number, line in enumerate(text.split("\n"), 1):
        try:
            parsed = list(string.Formatter().parse(line))
        except ValueError as e:
            raise UserError(f"{where}:{number}: {e}; write {{{{ and }}}} for a literal brace") from None
        for _, name, spec, conversion in parsed:
            if name is None:
                continue
            if name not in PROMPT_FIELDS:
                raise UserError(
                    f"{where}:{number}: unknown field {{{name}}}; a prompt may use {{input}}, "
                    "{context} and {choices} (lettered lines; {options} is the same); write {{ and }} "
                    "for a literal brace"
                )
            _check_format(name, spec or "", conversion, f"{where}:{number}")
            used.add(name)
    return used


def _check_format(name: str, spec: str, conversion: str | None, where: str) -> None:
    """Refuse now what ``str.format`` would refuse only while rendering the first sample."""
    if conversion not in (None, "r", "s", "a") or "{" in spec:
        raise UserError(f"{where}: {{{name}}} has a conversion or format spec str.format cannot apply")
    try:
        format("", spec)
    except ValueError as e:
        raise UserError(f"{where}: {{{name}:{spec}}}: {e}") from None


def _read_prompt_file(path: Path) -> str:
    text = read_user_text(
        path,
        "the prompt file",
        missing="prompt file not found",
        folder="is a folder; --prompt takes a text file",
    )
    text = text.removesuffix("\n").removesuffix("\r")
    if not text.strip():
        raise UserError(f"{path}: the prompt file is empty; write the prompt with {{input}} in it")
    return text


class _SampleFields(Mapping[str, str]):
    """A sample's template fields, each computed only when a template uses it (a task without
    lettered options may have more choices than there are letters)."""

    def __init__(self, sample: Sample, context: str) -> None:
        self._sample = sample
        self._context = context

    def __getitem__(self, key: str) -> str:
        match key:
            case "input":
                return self._sample.input
            case "context":
                return self._context
            case "choices" | "options":
                return option_lines(self._sample.choices)
        raise KeyError(key)

    def __iter__(self) -> Iterator[str]:
        return iter(PROMPT_FIELDS)

    def __len__(self) -> int:
        return len(PROMPT_FIELDS)


Piece = tuple[bool, str]
"""A rendered part of a template: (whether it came from a field, its text)."""


def _render(template: str, fields: Mapping[str, str]) -> str:
    """``template.format_map(fields)``, less the whitespace around empty fields at either end."""
    pieces: list[Piece] = []
    for literal, name, spec, conversion in string.Formatter().parse(template):
        if literal:
            pieces.append((False, literal))
        if name is not None:
            field_text = (
                "{" + name + (f"!{conversion}" if conversion else "") + (f":{spec}" if spec else "") + "}"
            )
            pieces.append((True, field_text.format_map(fields)))
    pieces = _trim_start(pieces, str.lstrip)
    pieces = _trim_start(pieces[::-1], str.rstrip)[::-1]
    return "".join(text for _, text in pieces)


def _trim_start(pieces: list[Piece], strip: Callable[[str], str]) -> list[Piece]:
    """Drop the empty fields the pieces start with and the whitespace that separated them from
    the rest; nothing changes when the first piece is text of the template or a non-empty field."""
    emptied = False
    i = 0
    while i < len(pieces):
        from_field, text = pieces[i]
        if from_field and not text:
            emptied = True
        elif not (emptied and not from_field and not text.strip()):
            break
        i += 1
    rest = pieces[i:]
    if emptied and rest and not rest[0][0]:
        rest[0] = (False, strip(rest[0][1]))
    return rest


def same_choices(sample: Sample) -> tuple[str, ...]:
    """The default log-likelihood continuations: the sample's choices as written."""
    return sample.choices


def loaded(samples: Iterable[Sample]) -> Callable[[], list[Sample]]:
    """A ``Task.load`` for samples already read: taken now (a caller that changes its list
    afterwards changes nothing), and a fresh list on every call, since a run may reorder it."""
    kept = tuple(samples)
    return lambda: list(kept)


class ContextPolicy(Protocol):
    """Decides how much of a sample's record reaches the model, and records what was done."""

    @property
    def name(self) -> str: ...

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        """Return the context to use and a description of what was kept or cut."""
        ...

    async def check(self, samples: Sequence[Sample], model: Model) -> None:
        """Refuse with one UserError what would make fitting any of ``samples`` fail or pointless
        (no tokenizer, no context size, no room for the record). Called after ``model.check()``
        and before the run folder is created: raised from the first item instead, such an error
        left a folder behind that made the corrected command a "different run"."""
        ...


@runtime_checkable
class MultiStepPolicy(ContextPolicy, Protocol):
    """A policy that shows the model the record in several calls (multi-step refinement).

    The runner asks :meth:`plan` for the pieces, then calls the model once per piece in order
    with :meth:`step_messages`, passing the latest answer so far (None before any call
    succeeded); a failed call keeps the previous answer.
    """

    async def plan(self, sample: Sample, model: Model) -> tuple[list[str], JSON]:
        """The record's pieces in order, and a description of how it was cut."""
        ...

    def step_messages(
        self, sample: Sample, piece: str, index: int, total: int, previous: str | None
    ) -> list[Message]:
        """The conversation for step ``index`` (from 0) of ``total``."""
        ...


@dataclass(frozen=True, slots=True)
class FullContext:
    """Pass the record through untouched (short-context tasks such as PubMedQA)."""

    name: str = "full"

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        return sample.context, {"policy": self.name, "truncated": False}

    async def check(self, samples: Sequence[Sample], model: Model) -> None:
        """Nothing to check: the record goes as it is."""


@dataclass(slots=True)
class Task:
    """Everything needed to evaluate a model on one benchmark."""

    name: str
    load: Callable[[], list[Sample]]
    prompt: PromptTemplate
    scorers: Sequence[Scorer]
    generation: GenerationConfig = field(default_factory=GenerationConfig)
    context_policy: ContextPolicy = field(default_factory=FullContext)
    data_files: list[Path] = field(default_factory=list)
    params: JSON = field(default_factory=dict)
    loglik_continuations: Callable[[Sample], tuple[str, ...]] = same_choices
    """What a log-likelihood request scores after the prompt (a task may score option letters
    and option texts in one request; its scorers know the layout)."""

    @property
    def needs_generation(self) -> bool:
        return any(s.needs == "generate" for s in self.scorers)

    @property
    def needs_loglikelihood(self) -> bool:
        return any(s.needs == "loglikelihood" for s in self.scorers)

    def check_samples(self, samples: Sequence[Sample]) -> None:
        """Refuse, before any model call, samples the scorers cannot score."""
        if not samples:
            raise UserError(f"task {self.name}: no samples to evaluate")
        for scorer in self.scorers:
            if scorer.needs_choices:
                bad = next((s for s in samples if not s.choices), None)
                if bad is not None:
                    raise UserError(
                        f"scorer {scorer.name} needs choices, but sample {bad.id!r} has none; "
                        "add a 'choices' list or use another scorer"
                    )

    def spec(self) -> JSON:
        """The parts of the task that decide its results (for the run fingerprint)."""
        return {
            "name": self.name,
            "params": self.params,
            "prompt": self.prompt.to_dict(),
            "context_policy": self.context_policy.name,
            "scorers": [s.name for s in self.scorers],
        }
