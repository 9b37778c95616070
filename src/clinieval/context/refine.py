"""Multi-step refinement (MedAlign's MR): answer from the first piece, then revise piece by piece.

For records longer than any context, MedAlign split the EHR into time-ordered pieces as large as
the context allows (30k tokens for a 32k model), answered the instruction from the first piece,
then gave the model each following piece together with its answer so far and asked it to update
the answer if appropriate or keep it. A piece whose call failed (a content filter) kept the
answer from the earlier pieces.

The paper describes that second prompt but does not print it, so :data:`REFINE_PROMPT` is the
project's wording; the first step uses the task's own prompt (Figure S9 for MedAlign), so a
record that fits in one piece is asked exactly as under truncation.

Piece size: the budget of the task prompt, less room for the carried answer (the generation
limit) and for the extra words of the refinement prompt, so every step's whole prompt fits. The
runner (:func:`clinieval.engine.runner.execute`) drives the steps and records each one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import string
from collections.abc import Sequence
from dataclasses import dataclass

from clinieval.context.budget import prompt_counter
from clinieval.context.fit import ChunkPolicy, distinct_prompts
from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.types import JSON, Message, Sample

_FIELDS = frozenset({"input", "context", "previous", "part", "parts"})
_MARGIN = 8  # tokens of slack for the part numbers and merges at the edges of the answer


@dataclass(frozen=True, slots=True)
class RefineTemplate:
    """The prompt of every step after the first: ``{input}``, ``{context}`` (this piece),
    ``{previous}`` (the answer so far), ``{part}`` and ``{parts}``."""

    user: str
    system: str | None = None

    def __post_init__(self) -> None:
        for text in (self.user, self.system or ""):
            for _, name, _, _ in string.Formatter().parse(text):
                if name is not None and name not in _FIELDS:
                    raise UserError(
                        f"refinement template field {{{name}}} is unknown; use "
                        + ", ".join(f"{{{f}}}" for f in sorted(_FIELDS))
                    )

    def messages(self, sample: Sample, piece: str, previous: str, part: int, parts: int) -> list[Message]:
        fields = {"input": sample.input, "context": piece, "previous": previous, "part": part, "parts": parts}
        out = [Message("system", self.system.format(**fields))] if self.system else []
        out.append(Message("user", self.user.format(**fields)))
        return out

    def to_dict(self) -> JSON:
        return {"system": self.system, "user": self.user}


REFINE_PROMPT = RefineTemplate(
    user='Instruction: Answer the following question based on the EHR:\n###\nQuestion: """{input}"""\n'
    'EHR (part {part} of {parts}, in time order): """{context}"""\n'
    'Your answer based on the earlier parts of the EHR: """{previous}"""\n'
    "Update your answer if this part of the EHR changes it; otherwise give the same answer again. "
    "Reply with the answer only."
)
"""The project's refinement prompt (the paper describes it without printing it)."""


@dataclass(frozen=True, slots=True)
class RefinePolicy:
    """Multi-step refinement over the pieces cut by ``chunker`` (its template is the first step's
    prompt), carrying an answer of up to ``answer_tokens`` tokens between steps."""

    chunker: ChunkPolicy
    refine: RefineTemplate = REFINE_PROMPT
    answer_tokens: int = 256

    @property
    def name(self) -> str:
        return f"refine({self.chunker.name},answer={self.answer_tokens})"

    def _carry(self, sample: Sample, model: Model) -> int:
        """Tokens each piece must leave free: the answer so far and the refinement prompt's extra text."""
        tok, budget = self.chunker.budget(sample, model)
        empty = model.render(self.refine.messages(sample, "", "", 1, 1))
        extra = prompt_counter(tok)(empty) - budget.template_tokens
        return self.answer_tokens + max(0, extra) + _MARGIN

    def _with_carry(self, sample: Sample, model: Model) -> ChunkPolicy:
        return dataclasses.replace(self.chunker, carry_tokens=self._carry(sample, model))

    async def check(self, samples: Sequence[Sample], model: Model) -> None:
        """Refuse, before the run folder exists, a run in which some question leaves no room for
        a piece of record beside the carried answer (or the budget cannot be counted at all)."""

        def each() -> None:
            for sample in distinct_prompts(samples):
                self._with_carry(sample, model).room(sample, model)

        await asyncio.to_thread(each)

    async def plan(self, sample: Sample, model: Model) -> tuple[list[str], JSON]:
        chunker = self._with_carry(sample, model)
        pieces, info = await chunker.chunks(sample, model)
        info["policy"] = "refine"
        info["carry_tokens"] = chunker.carry_tokens
        return pieces, info

    def step_messages(
        self, sample: Sample, piece: str, index: int, total: int, previous: str | None
    ) -> list[Message]:
        if previous is None:
            return self.chunker.template.messages(sample, piece)
        return self.refine.messages(sample, piece, previous, index + 1, total)

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        """The first piece (for callers that want one context)."""
        pieces, info = await self.plan(sample, model)
        return pieces[0], info
