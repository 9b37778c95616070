"""Study kinds: what a reviewer's response is for each kind of study, checked on the server.

Four kinds cover the papers' clinician work:

* ``rank`` (MedAlign): rank every answer (1 = best; ties only when the config says ``ties: true``),
  mark each correct or incorrect, and for an incorrect one tick its reasons (C1-C3) and write why.
* ``rate`` (AutoMedEval): score every answer 1-5 on each of the config's scales.
* ``question`` (EHRNoteQA's build review): keep, revise or discard a generated item, editing the
  item's ``fields`` (question, options, answer) when revising.
* ``sentence`` (MedEval): label a sentence on each of the config's label sets and rewrite it.

The browser is never trusted: :meth:`Kind.validate` rebuilds the payload from what it allows and
refuses anything else with one message a clinician can act on. A draft (``partial=True``) may be
incomplete; a submission must be complete and consistent.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol

from clinieval.errors import UserError

MAX_TEXT: Final = 50_000
"""Longest rationale, comment or rewrite accepted (a guard against a runaway client, not a style rule)."""

REASONS: Final = {
    "C1": "not clinically appropriate given the record",
    "C2": "errors that would change the clinical interpretation",
    "C3": "does not address the instruction",
}
"""MedAlign's reasons an answer is incorrect."""

DECISIONS: Final = ("keep", "revise", "discard")
SCALE_RANGE: Final = (1, 5)
DEFAULT_SCALES: Final = (
    {"name": "relevancy", "label": "Relevancy"},
    {"name": "fluency", "label": "Fluency"},
    {"name": "correctness", "label": "Knowledge correctness"},
)
DEFAULT_LABELS: Final = {"abnormality": ["normal", "abnormal"], "ambiguity": ["unambiguous", "ambiguous"]}
RESERVED_COLUMNS: Final = frozenset({"item", "reviewer", "model", "mean", "decision", "comment", "rewrite"})
"""Column names the exported tables use themselves; a scale, label set or field cannot take them."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")


class ItemShape(Protocol):
    """What validation needs of an item: its answers' keys and its editable fields (both the
    database row :class:`clinieval.review.db.Item` and :class:`clinieval.review.items.ReviewItem`
    have them)."""

    @property
    def answer_keys(self) -> list[str]: ...

    @property
    def fields(self) -> dict[str, Any]: ...


# --- small checks -----------------------------------------------------------------------------


def _object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UserError(f"{what} should be an object")
    return value


def _only(obj: Mapping[str, Any], allowed: Sequence[str], what: str) -> None:
    extra = sorted(set(obj) - set(allowed))
    if extra:
        raise UserError(f"{what}: unknown entry {extra[0]!r}; expected {', '.join(allowed)}")


def _text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UserError(f"{what} should be text")
    if len(value) > MAX_TEXT:
        raise UserError(f"{what} is {len(value):,} characters; at most {MAX_TEXT:,} are kept")
    return value


def _whole(value: object, low: int, high: int, what: str, *, partial: bool) -> int | None:
    if value is None or value == "":
        if partial:
            return None
        raise UserError(f"{what} is missing")
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UserError(f"{what} must be a whole number from {low} to {high}, got {value!r}")
    return value


def _column_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(f"{what} {name!r} must be letters, digits and _ (it becomes a table column)")
    if name in RESERVED_COLUMNS:
        raise UserError(f"{what} {name!r} is taken by the exported tables; choose another name")
    return name


def _labelled(key: str, names: Mapping[str, str] | None) -> str:
    return names.get(key, f"answer {key}") if names else f"answer {key}"


def _answer_map(
    payload: object, item: ItemShape, names: Mapping[str, str] | None, *, partial: bool
) -> dict[str, dict[str, Any]]:
    """The payload's ``answers`` object, one entry per answer of the item (all of them unless a draft)."""
    obj = _object(payload, "the response")
    _only(obj, ("answers",), "the response")
    answers = _object(obj.get("answers", {}), "answers")
    keys = item.answer_keys
    unknown = [k for k in answers if k not in keys]
    if unknown:
        raise UserError(f"the response names an answer this item does not have: {unknown[0]!r}")
    missing = [k for k in keys if k not in answers]
    if missing and not partial:
        raise UserError(f"{_labelled(missing[0], names)} has no response yet")
    return {k: _object(answers[k], _labelled(k, names)) for k in keys if k in answers}


@dataclass(frozen=True, slots=True)
class Measure:
    """One thing two reviewers' submissions can agree or differ on: a scale, a label set, a rank,
    a correct mark, a decision. ``path`` is where its value sits, inside each answer's entry of the
    payload (``per_answer``) or in the payload itself; ``ordered`` values are numbers whose gap
    means something (scores, ranks), the others labels that match or not."""

    key: str
    label: str
    path: tuple[str, ...]
    per_answer: bool
    ordered: bool

    def values(self, payload: Mapping[str, Any]) -> dict[str, Any]:
        """Each unit's value in a stored payload: answer key -> value for a per-answer measure,
        ``""`` -> value for a per-item one; units without a value are left out."""
        if self.per_answer:
            answers = payload.get("answers")
            if not isinstance(answers, Mapping):
                return {}
            found = {k: _at(v, self.path) for k, v in answers.items()}
            return {k: v for k, v in found.items() if v is not None}
        value = _at(payload, self.path)
        return {} if value is None else {"": value}


def _at(value: object, path: Sequence[str]) -> Any:
    for part in path:
        if not isinstance(value, Mapping):
            return None
        value = value.get(part)
    return value


# --- the kinds ----------------------------------------------------------------------------------


class Kind(ABC):
    """One study kind: its config (defaults, checks), its items' needs and its payload's rules."""

    name: ClassVar[str]
    description: ClassVar[str]
    label: ClassVar[str]
    """What a reviewer does, in plain words, for the queue ("Rate answers")."""
    config_keys: ClassVar[tuple[str, ...]]

    def preview(self, prompt: str, fields: Mapping[str, Any]) -> str:
        """The text that stands for an item in the reviewer's queue: its prompt by default."""
        return prompt

    @abstractmethod
    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        """What reviewers' submissions are compared on (the admin's agreement tables and the
        per-item disagreements), in the order the admin page shows them."""

    def config(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        """The full config: ``raw`` checked and completed with defaults (stored with the study, so
        a re-import with the same settings compares equal)."""
        given = dict(raw or {})
        _only(given, self.config_keys, f"the {self.name} config")
        return self._config(given)

    @abstractmethod
    def _config(self, given: dict[str, Any]) -> dict[str, Any]: ...

    def check_item(self, item: ItemShape, where: str) -> None:  # noqa: B027 (most kinds take any item)
        """Refuse an item this kind cannot review (``where`` names it)."""

    @abstractmethod
    def validate(
        self,
        payload: object,
        item: ItemShape,
        config: Mapping[str, Any],
        *,
        partial: bool = False,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        """The payload rebuilt from what this kind allows, or a UserError. ``partial`` accepts an
        incomplete draft; ``names`` maps answer keys to what the reviewer sees ("answer 2")."""


class RankKind(Kind):
    name = "rank"
    description = "rank all answers, mark each correct or incorrect with reasons and a rationale (MedAlign)"
    label = "Rank answers"
    config_keys = ("ties",)

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        ties = given.get("ties", False)
        if not isinstance(ties, bool):
            raise UserError(f"the rank config's 'ties' must be true or false, got {ties!r}")
        return {"ties": ties}

    def check_item(self, item: ItemShape, where: str) -> None:
        if len(item.answer_keys) < 2:
            raise UserError(f"{where}: a rank study needs at least 2 answers per item")

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        return (
            Measure("rank", "Ranking", ("rank",), per_answer=True, ordered=True),
            Measure("correct", "Correct or incorrect", ("correct",), per_answer=True, ordered=False),
        )

    def validate(
        self,
        payload: object,
        item: ItemShape,
        config: Mapping[str, Any],
        *,
        partial: bool = False,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        answers = _answer_map(payload, item, names, partial=partial)
        n = len(item.answer_keys)
        out = {k: self._answer(v, n, _labelled(k, names), partial=partial) for k, v in answers.items()}
        self._check_ranks(out, bool(config.get("ties", False)), names, partial=partial)
        return {"answers": out}

    def _answer(self, obj: dict[str, Any], n: int, what: str, *, partial: bool) -> dict[str, Any]:
        _only(obj, ("rank", "correct", "reasons", "rationale"), what)
        correct = obj.get("correct")
        if correct is not None and not isinstance(correct, bool):
            raise UserError(f"{what}: correct must be true or false")
        if correct is None and not partial:
            raise UserError(f"{what}: mark it correct or incorrect")
        reasons = self._reasons(obj.get("reasons"), what)
        rationale = _text(obj.get("rationale"), f"{what}: the rationale")
        if not partial and correct and reasons:
            raise UserError(f"{what} is marked correct but has reasons {', '.join(reasons)}; untick them")
        if not partial and correct is False and not reasons:
            raise UserError(f"{what} is marked incorrect: tick at least one reason (C1, C2, C3)")
        if not partial and correct is False and not rationale.strip():
            raise UserError(f"{what} is marked incorrect: write a rationale")
        rank = _whole(obj.get("rank"), 1, n, f"{what}: the rank", partial=partial)
        return {"rank": rank, "correct": correct, "reasons": reasons, "rationale": rationale}

    @staticmethod
    def _reasons(value: object, what: str) -> list[str]:
        if value is None:
            return []
        if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
            raise UserError(f"{what}: reasons should be a list of C1, C2, C3")
        unknown = [r for r in value if r not in REASONS]
        if unknown:
            raise UserError(f"{what}: reason {unknown[0]!r} is unknown; choose from {', '.join(REASONS)}")
        return [r for r in REASONS if r in value]

    @staticmethod
    def _check_ranks(
        out: Mapping[str, dict[str, Any]], ties: bool, names: Mapping[str, str] | None, *, partial: bool
    ) -> None:
        ranks = {k: v["rank"] for k, v in out.items() if v["rank"] is not None}
        if not ties:
            seen: dict[int, str] = {}
            for key, rank in ranks.items():
                if rank in seen:
                    raise UserError(
                        f"{_labelled(seen[rank], names)} and {_labelled(key, names)} share rank {rank};"
                        " this study does not allow ties"
                    )
                seen[rank] = key
        if not partial and ranks and min(ranks.values()) != 1:
            raise UserError("no answer has rank 1: give the best answer rank 1")


class RateKind(Kind):
    name = "rate"
    description = "score each answer 1-5 on named scales (AutoMedEval)"
    label = "Rate answers"
    config_keys = ("scales",)

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        raw = given.get("scales", [dict(s) for s in DEFAULT_SCALES])
        if not isinstance(raw, list) or not raw:
            raise UserError("the rate config's 'scales' must be a non-empty list of {name, label}")
        scales: list[dict[str, str]] = []
        for s in raw:
            if not isinstance(s, dict) or set(s) - {"name", "label"} or "name" not in s:
                raise UserError(f"the rate config's scale {s!r} should be an object with name and label")
            name = _column_name(s["name"], "scale name")
            label = s.get("label", name)
            if not isinstance(label, str) or not label.strip():
                raise UserError(f"scale {name!r}: label must be text")
            scales.append({"name": name, "label": label})
        dup = sorted({s["name"] for s in scales if [t["name"] for t in scales].count(s["name"]) > 1})
        if dup:
            raise UserError(f"the rate config names scale {dup[0]!r} twice")
        return {"scales": scales}

    def check_item(self, item: ItemShape, where: str) -> None:
        if not item.answer_keys:
            raise UserError(f"{where}: a rate study needs at least 1 answer per item")

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        scales = config["scales"]
        return tuple(
            Measure(s["name"], s["label"], (s["name"],), per_answer=True, ordered=True) for s in scales
        )

    def validate(
        self,
        payload: object,
        item: ItemShape,
        config: Mapping[str, Any],
        *,
        partial: bool = False,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        answers = _answer_map(payload, item, names, partial=partial)
        scales = [s["name"] for s in config["scales"]]
        low, high = SCALE_RANGE
        out: dict[str, dict[str, Any]] = {}
        for key, obj in answers.items():
            what = _labelled(key, names)
            _only(obj, scales, what)
            out[key] = {s: _whole(obj.get(s), low, high, f"{what}: {s}", partial=partial) for s in scales}
        return {"answers": out}


class QuestionKind(Kind):
    name = "question"
    description = "keep, revise or discard a generated item, editing its fields (EHRNoteQA build review)"
    label = "Review a generated question"
    config_keys = ()

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        return {}

    def preview(self, prompt: str, fields: Mapping[str, Any]) -> str:
        """The generated question itself, when the item has one as text (every item of a build
        review shares one prompt, "Review this generated question")."""
        question = fields.get("question")
        return question if isinstance(question, str) and question.strip() else prompt

    def check_item(self, item: ItemShape, where: str) -> None:
        for name in item.fields:
            _column_name(name, f"{where}: field")

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        return (Measure("decision", "Decision", ("decision",), per_answer=False, ordered=False),)

    def validate(
        self,
        payload: object,
        item: ItemShape,
        config: Mapping[str, Any],
        *,
        partial: bool = False,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        obj = _object(payload, "the response")
        _only(obj, ("decision", "fields", "comment"), "the response")
        decision = obj.get("decision")
        if decision is None and partial:
            pass
        elif decision not in DECISIONS:
            raise UserError(f"choose a decision: {', '.join(DECISIONS)} (got {decision!r})")
        edits = _object(obj.get("fields", {}), "fields")
        unknown = [k for k in edits if k not in item.fields]
        if unknown:
            raise UserError(f"field {unknown[0]!r} is not one of this item's fields")
        fields = dict(item.fields)
        for key, value in edits.items():
            _same_shape(item.fields[key], value, f"field {key!r}")
            fields[key] = value
        changed = fields != item.fields
        if not partial and decision == "keep" and changed:
            raise UserError(
                "the fields were edited but the decision is keep: choose revise or undo the edits"
            )
        if not partial and decision == "revise" and not changed:
            raise UserError("the decision is revise but no field was changed")
        return {"decision": decision, "fields": fields, "comment": _text(obj.get("comment"), "the comment")}


def _same_shape(original: object, edited: object, what: str) -> None:
    """An edited field must keep the original's structure (text stays text, a list of options
    keeps its length, an object its keys): the exported item must still load as the same kind."""
    if isinstance(original, dict):
        if not isinstance(edited, dict) or set(edited) != set(original):
            raise UserError(f"{what} must keep the entries {', '.join(map(str, original))}")
        for k in original:
            _same_shape(original[k], edited[k], f"{what}[{k!r}]")
    elif isinstance(original, list):
        if not isinstance(edited, list) or len(edited) != len(original):
            raise UserError(f"{what} must stay a list of {len(original)} entries")
        for i, (a, b) in enumerate(zip(original, edited, strict=True)):
            _same_shape(a, b, f"{what}[{i}]")
    elif isinstance(original, str):
        _text(edited, what)
        if not isinstance(edited, str):
            raise UserError(f"{what} should be text")
    elif type(edited) is not type(original):
        raise UserError(f"{what} should be {type(original).__name__}, got {type(edited).__name__}")


class SentenceKind(Kind):
    name = "sentence"
    description = "label a sentence on each label set and rewrite it (MedEval)"
    label = "Label sentence"
    config_keys = ("labels",)

    def _config(self, given: dict[str, Any]) -> dict[str, Any]:
        raw = given.get("labels", {k: list(v) for k, v in DEFAULT_LABELS.items()})
        if not isinstance(raw, dict) or not raw:
            raise UserError("the sentence config's 'labels' must map each label set to its values")
        labels: dict[str, list[str]] = {}
        for name, values in raw.items():
            _column_name(name, "label set")
            if (
                not isinstance(values, list)
                or len(values) < 2
                or not all(isinstance(v, str) and v.strip() for v in values)
                or len(set(values)) != len(values)
            ):
                raise UserError(f"label set {name!r} needs at least 2 distinct text values")
            labels[name] = list(values)
        return {"labels": labels}

    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        sets = config["labels"]
        return tuple(Measure(name, name, ("labels", name), per_answer=False, ordered=False) for name in sets)

    def validate(
        self,
        payload: object,
        item: ItemShape,
        config: Mapping[str, Any],
        *,
        partial: bool = False,
        names: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        obj = _object(payload, "the response")
        _only(obj, ("labels", "rewrite"), "the response")
        sets: Mapping[str, list[str]] = config["labels"]
        given = _object(obj.get("labels", {}), "labels")
        _only(given, list(sets), "labels")
        labels: dict[str, str | None] = {}
        for name, values in sets.items():
            value = given.get(name)
            if value is None and partial:
                labels[name] = None
            elif value not in values:
                raise UserError(f"choose {name}: {' or '.join(values)}")
            else:
                labels[name] = value
        return {"labels": labels, "rewrite": _text(obj.get("rewrite"), "the rewrite")}


KINDS: Final[dict[str, Kind]] = {k.name: k for k in (RankKind(), RateKind(), QuestionKind(), SentenceKind())}


def get_kind(name: str) -> Kind:
    """The kind called ``name``, or one error listing the kinds."""
    kind = KINDS.get(name)
    if kind is None:
        raise UserError(f"study kind {name!r} is unknown; choose from {', '.join(KINDS)}")
    return kind
