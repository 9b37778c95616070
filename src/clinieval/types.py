"""Plain, typed, JSON-serialisable records that flow between the stages of a run.

Every stage persists what it produces (see docs/architecture), so these types are deliberately
dumb: dataclasses with a ``to_dict`` / ``from_dict`` pair and no behaviour that needs a model or
a file. Keeping them free of heavy imports lets any tool read a run directory.
"""

from __future__ import annotations

import dataclasses
import enum
from dataclasses import dataclass, field
from typing import Any, Literal

JSON = dict[str, Any]
Role = Literal["system", "user", "assistant"]


class ErrorKind(enum.StrEnum):
    """Why a model call produced no usable answer.

    Failures are data: each kind is counted and reported in its own column rather than being
    folded into a wrong answer, so a provider's content filter (which cost MedAlign 44 of 303
    answers) is visible in every summary.
    """

    CONTENT_FILTER = "content_filter"
    RATE_LIMIT = "rate_limit"
    SERVER_ERROR = "server_error"
    TIMEOUT = "timeout"
    CONNECTION = "connection"
    BAD_REQUEST = "bad_request"
    CONTEXT_LENGTH = "context_length"
    BACKEND = "backend"
    NO_CONTENT = "no_content"
    """The reply held no answer text at all (``content: null``): a reasoning model that spent its
    whole budget thinking, for instance. Not an empty answer to score: a failure to count."""

    @property
    def transient(self) -> bool:
        """Whether asking again later might succeed: such a failure is never cached, and a resumed
        run asks the item again. A local backend error counts (memory pressure, a decode failure):
        asking a local model again costs little, and caching it would keep it forever."""
        return self in _TRANSIENT


_TRANSIENT = frozenset(
    {
        ErrorKind.RATE_LIMIT,
        ErrorKind.SERVER_ERROR,
        ErrorKind.TIMEOUT,
        ErrorKind.CONNECTION,
        ErrorKind.BACKEND,
    }
)


@dataclass(frozen=True, slots=True)
class Message:
    """One chat turn."""

    role: Role
    content: str


@dataclass(frozen=True, slots=True)
class Sample:
    """One evaluation item.

    ``input`` is the question or instruction; ``context`` is the (possibly long) record it is
    asked about. They are kept apart so context policies can trim the record without ever
    touching the question.
    """

    id: str
    input: str
    context: str = ""
    choices: tuple[str, ...] = ()
    target: str | None = None
    targets: tuple[str, ...] = ()
    metadata: JSON = field(default_factory=dict)

    @property
    def all_targets(self) -> tuple[str, ...]:
        """Every acceptable reference answer, ``target`` first."""
        if self.target is None:
            return self.targets
        return (self.target, *(t for t in self.targets if t != self.target))

    def to_dict(self) -> JSON:
        return {
            "id": self.id,
            "input": self.input,
            "context": self.context,
            "choices": list(self.choices),
            "target": self.target,
            "targets": list(self.targets),
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: JSON) -> Sample:
        return cls(
            id=str(d["id"]),
            input=d["input"],
            context=d.get("context", ""),
            choices=tuple(d.get("choices", ())),
            target=d.get("target"),
            targets=tuple(d.get("targets", ())),
            metadata=dict(d.get("metadata", {})),
        )


@dataclass(frozen=True, slots=True)
class GenerationConfig:
    """Sampling settings; part of every cache key, so changing one never reuses stale answers."""

    temperature: float = 0.0
    max_tokens: int = 256
    top_p: float = 1.0
    seed: int | None = 0
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    top_k: int | None = None
    """Sample from the k most likely tokens (AutoMedEval's responses use 50); None leaves the
    backend's own default (llama.cpp's is 40; OpenAI's API has none)."""

    def to_dict(self) -> JSON:
        d = dataclasses.asdict(self)
        d["stop"] = list(self.stop)
        if self.top_k is None:
            # left out when unset, so every cache key written before top_k existed still matches
            del d["top_k"]
        return d

    @classmethod
    def from_dict(cls, d: JSON) -> GenerationConfig:
        known = {f.name for f in dataclasses.fields(cls)}
        kw = {k: v for k, v in d.items() if k in known}
        if "stop" in kw:
            kw["stop"] = tuple(kw["stop"])
        return cls(**kw)


@dataclass(frozen=True, slots=True)
class TokenLogprob:
    token: str
    logprob: float


@dataclass(slots=True)
class ModelOutput:
    """What one model call returned, or why it returned nothing usable."""

    text: str = ""
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    latency_s: float = 0.0
    logprobs: list[TokenLogprob] | None = None
    error_kind: ErrorKind | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    @classmethod
    def failure(cls, kind: ErrorKind, message: str, latency_s: float = 0.0) -> ModelOutput:
        return cls(error_kind=kind, error_message=message, latency_s=latency_s)

    def to_dict(self) -> JSON:
        return {
            "text": self.text,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "finish_reason": self.finish_reason,
            "latency_s": self.latency_s,
            "logprobs": None if self.logprobs is None else [[t.token, t.logprob] for t in self.logprobs],
            "error_kind": None if self.error_kind is None else self.error_kind.value,
            "error_message": self.error_message,
        }

    @classmethod
    def from_dict(cls, d: JSON) -> ModelOutput:
        lp = d.get("logprobs")
        kind = d.get("error_kind")
        return cls(
            text=d.get("text", ""),
            prompt_tokens=d.get("prompt_tokens"),
            completion_tokens=d.get("completion_tokens"),
            finish_reason=d.get("finish_reason"),
            latency_s=float(d.get("latency_s", 0.0)),
            logprobs=None if lp is None else [TokenLogprob(str(t), float(p)) for t, p in lp],
            error_kind=None if kind is None else ErrorKind(kind),
            error_message=d.get("error_message"),
        )


@dataclass(slots=True)
class LoglikOutput:
    """Summed log-probability of each candidate continuation given one context."""

    logliks: list[float] = field(default_factory=list)
    token_counts: list[int] = field(default_factory=list)
    latency_s: float = 0.0
    error_kind: ErrorKind | None = None
    error_message: str | None = None

    @property
    def ok(self) -> bool:
        return self.error_kind is None

    def to_dict(self) -> JSON:
        return {
            "logliks": self.logliks,
            "token_counts": self.token_counts,
            "latency_s": self.latency_s,
            "error_kind": None if self.error_kind is None else self.error_kind.value,
            "error_message": self.error_message,
        }

    @classmethod
    def from_dict(cls, d: JSON) -> LoglikOutput:
        kind = d.get("error_kind")
        return cls(
            logliks=[float(x) for x in d.get("logliks", [])],
            token_counts=[int(x) for x in d.get("token_counts", [])],
            latency_s=float(d.get("latency_s", 0.0)),
            error_kind=None if kind is None else ErrorKind(kind),
            error_message=d.get("error_message"),
        )


@dataclass(slots=True)
class Score:
    """A scorer's verdict on one sample.

    ``value`` is None when the sample could not be scored (the model call failed, or the answer
    could not be read); the reason sits in ``metadata['error_kind']`` so summaries can show
    results both with and without failures instead of silently counting them as wrong.
    """

    value: float | None
    answer: str | None = None
    explanation: str | None = None
    metadata: JSON = field(default_factory=dict)

    def to_dict(self) -> JSON:
        return {
            "value": self.value,
            "answer": self.answer,
            "explanation": self.explanation,
            "metadata": self.metadata,
        }

    @classmethod
    def from_dict(cls, d: JSON) -> Score:
        v = d.get("value")
        return cls(
            value=None if v is None else float(v),
            answer=d.get("answer"),
            explanation=d.get("explanation"),
            metadata=dict(d.get("metadata", {})),
        )
