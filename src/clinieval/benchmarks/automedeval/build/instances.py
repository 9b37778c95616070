"""The training instance every build step reads and writes, one JSON object per line::

    {"id": str, "question": str, "reference": str,
     "responses": [{"model": str, "text": str}, ...],          # [] before generate (b)
     "evaluation": {"teacher": str, "text": str,               # absent before teach (c)
                    "scores": [int, ...] | null,               # null: the reply was unparsed
                    "lookups": [{"query": str, "chunks": [str]}]},
     "verification": {"keep": bool, "reasons": [str], "physician": str},   # absent before (d)
     "quality": "high" | "low", "quality_score": float,        # absent before (e)
     "suggestions": [str]}                                     # absent unless introspection (g)

Why one shared format over files: each step is a separate command that can be killed, rerun or
swapped for a hand edit, and a later step must be able to tell exactly what an earlier one did.
Optional parts are left out of the line (not written as null) until their step sets them, so a
file says by itself how far it has come. Every mistake in a file is one error naming the file,
the line and the field.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clinieval.benchmarks.automedeval.judge_set import SCORE_RANGE, JudgeItem, Response
from clinieval.datasets import json_objects
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_jsonl

JSON = dict[str, Any]
Quality = Literal["high", "low"]
QUALITIES: tuple[Quality, ...] = ("high", "low")


@dataclass(frozen=True, slots=True)
class Answer:
    """One model's response to the instance's question."""

    model: str
    text: str

    def to_dict(self) -> JSON:
        return {"model": self.model, "text": self.text}


@dataclass(frozen=True, slots=True)
class LookupRecord:
    """One knowledge lookup the teacher asked for: its query and the chunk ids found."""

    query: str
    chunks: tuple[str, ...] = ()

    def to_dict(self) -> JSON:
        return {"query": self.query, "chunks": list(self.chunks)}


@dataclass(frozen=True, slots=True)
class Evaluation:
    """The teacher's full reply (rationale and ``Score:`` line), the scores read from it in the
    responses' original order (None: unparsed) and the lookups it made."""

    teacher: str
    text: str
    scores: tuple[int, ...] | None = None
    lookups: tuple[LookupRecord, ...] = ()

    @property
    def parsed(self) -> bool:
        return self.scores is not None

    def to_dict(self) -> JSON:
        return {
            "teacher": self.teacher,
            "text": self.text,
            "scores": None if self.scores is None else list(self.scores),
            "lookups": [x.to_dict() for x in self.lookups],
        }


@dataclass(frozen=True, slots=True)
class Verification:
    """A physician's verdict on the evaluation: keep or discard, and why."""

    keep: bool
    reasons: tuple[str, ...] = ()
    physician: str = ""

    def to_dict(self) -> JSON:
        return {"keep": self.keep, "reasons": list(self.reasons), "physician": self.physician}


@dataclass(frozen=True, slots=True)
class Instance:
    """One training instance; each build step fills in its part (see the module docstring)."""

    id: str
    question: str
    reference: str
    responses: tuple[Answer, ...] = ()
    evaluation: Evaluation | None = None
    verification: Verification | None = None
    quality: Quality | None = None
    quality_score: float | None = None
    suggestions: tuple[str, ...] = field(default=())

    @property
    def scored(self) -> bool:
        """Whether the teacher's reply was parsed: only such instances can teach a judge."""
        return self.evaluation is not None and self.evaluation.scores is not None

    def judge_item(self) -> JudgeItem:
        """The instance as a judge-evaluation item, for :func:`judging.judge_messages`."""
        return JudgeItem(
            id=self.id,
            question=self.question,
            reference=self.reference,
            responses=tuple(Response(a.model, a.text) for a in self.responses),
        )

    def to_dict(self) -> JSON:
        out: JSON = {
            "id": self.id,
            "question": self.question,
            "reference": self.reference,
            "responses": [a.to_dict() for a in self.responses],
        }
        if self.evaluation is not None:
            out["evaluation"] = self.evaluation.to_dict()
        if self.verification is not None:
            out["verification"] = self.verification.to_dict()
        if self.quality is not None:
            out["quality"] = self.quality
        if self.quality_score is not None:
            out["quality_score"] = self.quality_score
        if self.suggestions:
            out["suggestions"] = list(self.suggestions)
        return out

    @classmethod
    def from_dict(cls, d: JSON, where: str = "instance") -> Instance:
        """An instance from its JSON object; a wrong field is a UserError naming ``where`` and it."""
        item_id = d.get("id")
        if isinstance(item_id, int) and not isinstance(item_id, bool):
            item_id = str(item_id)
        if not isinstance(item_id, str) or not item_id.strip():
            raise UserError(f"{where}: field 'id' should be non-empty text, got {item_id!r}")
        question = _text(d, "question", where)
        if not question.strip():
            raise UserError(f"{where}: field 'question' is empty")
        responses = tuple(
            _answer(raw, f"{where}: field 'responses[{i}]'")
            for i, raw in enumerate(_list(d, "responses", where, required=True))
        )
        evaluation = _evaluation(d.get("evaluation"), where, len(responses))
        return cls(
            id=item_id.strip(),
            question=question,
            reference=_text(d, "reference", where),
            responses=responses,
            evaluation=evaluation,
            verification=_verification(d.get("verification"), where),
            quality=_quality(d.get("quality"), where),
            quality_score=_quality_score(d.get("quality_score"), where),
            suggestions=tuple(_strings(d, "suggestions", where)),
        )


def read_instances(path: Path) -> list[Instance]:
    """Every instance of a ``.jsonl`` file, in file order; ids must be unique."""
    if not path.is_file():
        raise UserError(f"{path}: instances file not found")
    out: list[Instance] = []
    seen: dict[str, str] = {}
    for where, obj in json_objects(path):
        instance = Instance.from_dict(obj, where)
        if instance.id in seen:
            raise UserError(f"{where}: field 'id': {instance.id!r} repeats {seen[instance.id]}")
        seen[instance.id] = where
        out.append(instance)
    return out


def write_instances(path: Path, instances: Iterable[Instance]) -> None:
    """Write instances as JSON Lines, atomically (a crash leaves the old file or the new one)."""
    atomic_write_jsonl(path, (x.to_dict() for x in instances))


# --- field readers: each names the line and the field it rejects ----------------------------


def _text(d: JSON, name: str, where: str) -> str:
    value = d.get(name)
    if not isinstance(value, str):
        raise UserError(f"{where}: field {name!r} should be text, got {_kind(value)}")
    return value


def _list(d: JSON, name: str, where: str, *, required: bool = False) -> list[Any]:
    value = d.get(name)
    if value is None and not (required and name not in d):
        return []
    if not isinstance(value, list):
        raise UserError(f"{where}: field {name!r} should be a list, got {_kind(value)}")
    return value


def _strings(d: JSON, name: str, where: str) -> list[str]:
    values = _list(d, name, where)
    for i, v in enumerate(values):
        if not isinstance(v, str):
            raise UserError(f"{where}: field '{name}[{i}]' should be text, got {_kind(v)}")
    return values


def _object(value: object, where: str, name: str) -> JSON:
    if not isinstance(value, dict):
        raise UserError(f"{where}: field {name!r} should be an object, got {_kind(value)}")
    return value


def _answer(raw: object, where: str) -> Answer:
    obj = _object(raw, where, "response")
    model = _text(obj, "model", where)
    if not model.strip():
        raise UserError(f"{where}: field 'model' is empty")
    return Answer(model.strip(), _text(obj, "text", where))


def _evaluation(raw: object, where: str, k: int) -> Evaluation | None:
    if raw is None:
        return None
    obj = _object(raw, where, "evaluation")
    at = f"{where}: evaluation"
    return Evaluation(
        teacher=_text(obj, "teacher", at),
        text=_text(obj, "text", at),
        scores=_scores(obj.get("scores"), at, k),
        lookups=tuple(_lookup(x, f"{at}.lookups[{i}]") for i, x in enumerate(_list(obj, "lookups", at))),
    )


def _scores(raw: object, where: str, k: int) -> tuple[int, ...] | None:
    if raw is None:
        return None
    low, high = SCORE_RANGE
    if not isinstance(raw, list) or not all(
        isinstance(s, int) and not isinstance(s, bool) and low <= s <= high for s in raw
    ):
        raise UserError(f"{where}: field 'scores' should be null or a list of whole numbers {low}-{high}")
    if len(raw) != k:
        raise UserError(f"{where}: field 'scores' has {len(raw)} score(s) for {k} response(s)")
    return tuple(raw)


def _lookup(raw: object, where: str) -> LookupRecord:
    obj = _object(raw, where, "lookup")
    return LookupRecord(_text(obj, "query", where), tuple(_strings(obj, "chunks", where)))


def _verification(raw: object, where: str) -> Verification | None:
    if raw is None:
        return None
    obj = _object(raw, where, "verification")
    at = f"{where}: verification"
    keep = obj.get("keep")
    if not isinstance(keep, bool):
        raise UserError(f"{at}: field 'keep' should be true or false, got {keep!r}")
    physician = obj.get("physician", "")
    if not isinstance(physician, str):
        raise UserError(f"{at}: field 'physician' should be text, got {_kind(physician)}")
    return Verification(keep, tuple(_strings(obj, "reasons", at)), physician)


def _quality(raw: object, where: str) -> Quality | None:
    if raw is None:
        return None
    for q in QUALITIES:
        if raw == q:
            return q
    raise UserError(f'{where}: field \'quality\' is {raw!r}; expected "high" or "low"')


def _quality_score(raw: object, where: str) -> float | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int | float) or not math.isfinite(raw):
        raise UserError(f"{where}: field 'quality_score' should be a number, got {raw!r}")
    return float(raw)


def _kind(value: object) -> str:
    return "nothing" if value is None else type(value).__name__


def by_id(instances: Sequence[Instance]) -> dict[str, Instance]:
    """Instances keyed by id (ids are unique in a file read with :func:`read_instances`)."""
    return {x.id: x for x in instances}
