"""One line of a run's append-only results file."""

from __future__ import annotations

from dataclasses import dataclass, field

from clinieval.types import JSON, LoglikOutput, Message, ModelOutput, Sample, Score


@dataclass(slots=True)
class SampleRecord:
    """Everything one (sample, repeat) produced: enough to re-score without the model."""

    sample: Sample
    repeat: int
    messages: list[Message]
    context_info: JSON = field(default_factory=dict)
    output: ModelOutput | None = None
    loglik: LoglikOutput | None = None
    scores: dict[str, Score] = field(default_factory=dict)

    @property
    def key(self) -> tuple[str, int]:
        return (self.sample.id, self.repeat)

    @property
    def transient_failure(self) -> bool:
        """Whether a model call of this record failed in a way that asking again may fix (rate
        limit, 5xx, timeout, dropped connection): such a record is pending, not done."""
        return any(
            part is not None and part.error_kind is not None and part.error_kind.transient
            for part in (self.output, self.loglik)
        )

    def error_kind(self) -> str | None:
        """The first model failure this record holds, if any."""
        for part in (self.output, self.loglik):
            if part is not None and part.error_kind is not None:
                return part.error_kind.value
        return None

    def to_dict(self) -> JSON:
        return {
            "sample_id": self.sample.id,
            "repeat": self.repeat,
            "sample": self.sample.to_dict(),
            "messages": [{"role": m.role, "content": m.content} for m in self.messages],
            "context_info": self.context_info,
            "output": None if self.output is None else self.output.to_dict(),
            "loglik": None if self.loglik is None else self.loglik.to_dict(),
            "scores": {k: v.to_dict() for k, v in self.scores.items()},
        }

    @classmethod
    def from_dict(cls, d: JSON) -> SampleRecord:
        return cls(
            sample=Sample.from_dict(d["sample"]),
            repeat=int(d["repeat"]),
            messages=[Message(m["role"], m["content"]) for m in d["messages"]],
            context_info=dict(d.get("context_info", {})),
            output=None if d.get("output") is None else ModelOutput.from_dict(d["output"]),
            loglik=None if d.get("loglik") is None else LoglikOutput.from_dict(d["loglik"]),
            scores={k: Score.from_dict(v) for k, v in d.get("scores", {}).items()},
        )
