"""A rule-based baseline judge: word overlap with the reference answer, written in the judge's format.

Not a language model. Each response scores 1 + round(4 x the share of the reference's content
words it contains) — ROUGE-1 recall of the reference, mapped to 1-5 — and the reply is written in
the paper's output format (``Analyze: ... Score: Doctor 1: X points. ...``), so it goes through
exactly the same parsing, position-bias and agreement code as a model judge. It answers the
question a judge report should always answer: how much better than surface overlap is the judge?
It reads the responses from the prompt :func:`judging.judge_messages` builds, so it only works
with that prompt (any other prompt gets a failed call, not a guess).

On the command line it is the judge spec ``baseline:overlap``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence

from clinieval.models.base import Model, render_plain
from clinieval.models.spec import BackendOptions
from clinieval.types import JSON, ErrorKind, GenerationConfig, LoglikOutput, Message, ModelOutput

SPEC = "baseline:overlap"

_WORD = re.compile(r"[a-z0-9]+")
_STOP = frozenset(
    ("the", "and", "for", "are", "with", "that", "this", "from", "can", "your", "you", "may", "should",
     "not", "but", "have", "has", "was", "were", "will", "into", "than", "then", "them", "they", "their",
     "its", "also", "such")
)  # fmt: skip
_DOCTOR = re.compile(r"^Doctor (\d+): (.*)$", re.MULTILINE)


def content_words(text: str) -> set[str]:
    """Lower-case words of 3+ characters, without a few very common ones."""
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP}


def overlap_score(response: str, reference: str) -> int:
    """1 + round(4 x recall of the reference's content words); 1 for an empty reference."""
    ref = content_words(reference)
    if not ref:
        return 1
    return 1 + round(4 * len(ref & content_words(response)) / len(ref))


def _read_prompt(text: str) -> tuple[str, list[str]] | None:
    if "[Reference Answer]\n" not in text or "[Doctors' Answers]\n" not in text:
        return None
    reference = text.split("[Reference Answer]\n", 1)[1].split("\n\n[Doctors' Answers]", 1)[0]
    answers = [a for _, a in _DOCTOR.findall(text.split("[Doctors' Answers]\n", 1)[1])]
    return (reference, answers) if answers else None


def overlap_reply(reference: str, answers: Sequence[str]) -> str:
    """The judge-format reply for these answers."""
    scores = [overlap_score(a, reference) for a in answers]
    ref = content_words(reference)
    steps = " ".join(
        f"Step {i}: Doctor {i} contains {len(ref & content_words(a))} of the reference's "
        f"{len(ref)} content words."
        for i, a in enumerate(answers, 1)
    )
    return f"Analyze: {steps}\nScore: " + " ".join(
        f"Doctor {i}: {s} points." for i, s in enumerate(scores, 1)
    )


class OverlapJudge:
    """The baseline behind the :class:`Model` protocol (only ``generate`` does anything)."""

    @property
    def name(self) -> str:
        return "overlap-baseline"

    @property
    def identity(self) -> JSON:
        return {"backend": "rule", "rule": "reference content-word recall -> 1-5", "version": 1}

    @property
    def max_concurrency(self) -> int:
        return 1

    def render(self, messages: Sequence[Message]) -> str:
        return render_plain(messages)

    async def generate(self, messages: Sequence[Message], config: GenerationConfig) -> ModelOutput:
        start = time.perf_counter()
        read = _read_prompt(messages[-1].content if messages else "")
        if read is None:
            return ModelOutput.failure(
                ErrorKind.BACKEND, "the overlap baseline only reads the AutoMedEval judge prompt"
            )
        text = overlap_reply(*read)
        return ModelOutput(text=text, finish_reason="stop", latency_s=time.perf_counter() - start)

    async def loglikelihood(self, prompt: str, continuations: Sequence[str]) -> LoglikOutput:
        raise NotImplementedError("the overlap baseline has no likelihoods")

    async def tokenize(self, text: str) -> list[int]:
        return list(range(len(text.split())))

    async def count_tokens(self, text: str) -> int:
        return len(text.split())

    async def check(self) -> None:
        return None

    async def aclose(self) -> None:
        return None


def judge_model(spec: str, options: BackendOptions) -> Model:
    """A judge from its spec: ``baseline:overlap``, or any model spec clinieval knows."""
    from clinieval.models.spec import parse_model_spec

    return OverlapJudge() if spec == SPEC else parse_model_spec(spec, options)
