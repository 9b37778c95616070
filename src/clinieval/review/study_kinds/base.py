"""What every study kind is: :class:`Kind`, the one place a kind's behaviour is declared, and the
small checks its payload rules are written with.

A kind answers every question the rest of ``clinieval.review`` asks about a study: its config,
which items it takes, what a response must hold (:meth:`Kind.validate`), what reviewers are compared
on (:meth:`Kind.measures`) and how (:meth:`Kind.agreement`), the table its export writes
(:meth:`Kind.export_table`), and how its HTML form maps to a payload and back
(:meth:`Kind.parse_form`, :meth:`Kind.form_state`). The modules that serve those questions ask the
study's kind instead of branching on its name.

The browser is never trusted: :meth:`Kind.validate` rebuilds the payload from what it allows and
refuses anything else with one message a clinician can act on. A draft (``partial=True``) may be
incomplete; a submission must be complete and consistent.
"""

from __future__ import annotations

import json
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Protocol

from clinieval.errors import UserError
from clinieval.review.study_kinds.form_fields import FormData, FormView

MAX_TEXT: Final = 50_000
"""Longest rationale, comment or rewrite accepted (a guard against a runaway client, not a style rule)."""
RESERVED_COLUMNS: Final = frozenset({"item", "reviewer", "model", "mean", "decision", "comment", "rewrite"})
"""Column names the exported tables use themselves; a scale, label set or field cannot take them."""
DESIGN_KEY: Final = "design"
"""The config entry any kind keeps verbatim: the sampling design that chose a study's items
(``clinieval suite sample`` records its seed, size and items there). Reviewers' pages never show
a config, and what goes in it names no model, since admins' pages are blinded too."""
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,63}")

Row = dict[str, Any]
"""One row of an export: a submitted review (:func:`clinieval.review.export.submitted_rows`) or a
line of a table."""
Table = tuple[list[str], list[Row]]
"""A table to write: its columns and its rows."""


class ItemShape(Protocol):
    """What validation needs of an item: its answers' keys and its editable fields (both the
    database row :class:`clinieval.review.db.Item` and :class:`clinieval.review.items.ReviewItem`
    have them)."""

    @property
    def answer_keys(self) -> list[str]: ...

    @property
    def fields(self) -> dict[str, Any]: ...


# --- small checks -----------------------------------------------------------------------------


def as_object(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict) or not all(isinstance(k, str) for k in value):
        raise UserError(f"{what} should be an object")
    return value


def only(obj: Mapping[str, Any], allowed: Sequence[str], what: str) -> None:
    extra = sorted(set(obj) - set(allowed))
    if extra:
        raise UserError(f"{what}: unknown entry {extra[0]!r}; expected {', '.join(allowed)}")


def checked_text(value: object, what: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise UserError(f"{what} should be text")
    if len(value) > MAX_TEXT:
        raise UserError(f"{what} is {len(value):,} characters; at most {MAX_TEXT:,} are kept")
    return value


def whole_number(value: object, low: int, high: int, what: str, *, partial: bool) -> int | None:
    if value is None or value == "":
        if partial:
            return None
        raise UserError(f"{what} is missing")
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise UserError(f"{what} must be a whole number from {low} to {high}, got {value!r}")
    return value


def column_name(name: object, what: str) -> str:
    if not isinstance(name, str) or not _NAME.fullmatch(name):
        raise UserError(f"{what} {name!r} must be letters, digits and _ (it becomes a table column)")
    if name in RESERVED_COLUMNS:
        raise UserError(f"{what} {name!r} is taken by the exported tables; choose another name")
    return name


def cell(value: object) -> object:
    """A CSV cell: text as is, booleans as true/false (``clinieval analyze`` reads them as 1/0),
    other structures as JSON."""
    if value is None or (isinstance(value, str | int | float) and not isinstance(value, bool)):
        return value
    if isinstance(value, bool):
        return "true" if value else "false"
    return json.dumps(value, ensure_ascii=False)


@dataclass(frozen=True, slots=True)
class Check:
    """One validation's circumstances: the item, the study's config, whether it is a draft
    (``partial``) and what the reviewer calls each answer (``names``: "answer 2")."""

    item: ItemShape
    config: Mapping[str, Any]
    partial: bool
    names: Mapping[str, str] | None

    def labelled(self, key: str) -> str:
        return self.names.get(key, f"answer {key}") if self.names else f"answer {key}"


# --- what reviewers are compared on -------------------------------------------------------------


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


class AgreementStats(Protocol):
    """The statistics a kind composes its agreement section from, over one study's submitted
    reviews (:mod:`clinieval.review.agreement` implements it; the kinds only say which applies to
    which measure, so this package stays free of numpy)."""

    def ranking(self, rank: Measure, correct: Measure) -> dict[str, Any]:
        """Kendall's tau between reviewers' rankings, and ``correct`` as labels."""
        ...

    def ordinal(self, measure: Measure) -> dict[str, Any]:
        """Krippendorff's alpha (ordinal) and the ICC of a scale."""
        ...

    def nominal(self, measure: Measure) -> dict[str, Any]:
        """Krippendorff's alpha (nominal) and pairwise Cohen's kappa of labels."""
        ...


@dataclass(frozen=True, slots=True)
class ExtraTable:
    """A second file of an export: the kind's table in the shape another command reads."""

    file: str
    build: Callable[[Sequence[Row]], Table]


# --- the kind -----------------------------------------------------------------------------------


class Kind(ABC):
    """One study kind: its config (defaults, checks), its items' needs, its payload's rules, and
    what the agreement, export and form of its studies are."""

    name: ClassVar[str]
    description: ClassVar[str]
    label: ClassVar[str]
    """What a reviewer does, in plain words, for the queue ("Rate answers")."""

    def title(self, config: Mapping[str, Any]) -> str:
        """What a reviewer does in a study with ``config``: :attr:`label`, unless a setting of the
        kind changes the task (a rank study that asks no ranking)."""
        return self.label

    config_keys: ClassVar[tuple[str, ...]]
    table: ClassVar[str]
    """The file name of the kind's long table in an export ("ranks.csv")."""
    extra: ClassVar[ExtraTable | None] = None
    """The same numbers in the shape another command reads, when there is one."""

    @property
    def template(self) -> str:
        """The page template of an assignment of this kind."""
        return f"kind_{self.name}.html"

    def preview(self, prompt: str, fields: Mapping[str, Any]) -> str:
        """The text that stands for an item in the reviewer's queue: its prompt by default."""
        return prompt

    @abstractmethod
    def measures(self, config: Mapping[str, Any]) -> tuple[Measure, ...]:
        """What reviewers' submissions are compared on (the admin's agreement tables and the
        per-item disagreements), in the order the admin page shows them."""

    @abstractmethod
    def agreement(self, config: Mapping[str, Any], stats: AgreementStats) -> dict[str, Any]:
        """The kind's sections of :func:`clinieval.review.agreement.study_agreement`."""

    def config(self, raw: Mapping[str, Any] | None) -> dict[str, Any]:
        """The full config: ``raw`` checked and completed with defaults (stored with the study, so
        a re-import with the same settings compares equal). Every kind also keeps a
        :data:`DESIGN_KEY` object as given: how the study's items were chosen."""
        given = dict(raw or {})
        design = given.pop(DESIGN_KEY, None)
        only(given, self.config_keys, f"the {self.name} config")
        out = self._config(given)
        if design is not None:
            out[DESIGN_KEY] = as_object(design, f"the {self.name} config's {DESIGN_KEY!r}")
        return out

    @abstractmethod
    def _config(self, given: dict[str, Any]) -> dict[str, Any]: ...

    def check_item(  # noqa: B027 (most kinds take any item)
        self, item: ItemShape, where: str, config: Mapping[str, Any]
    ) -> None:
        """Refuse an item this kind cannot review under the study's ``config`` (``where`` names it)."""

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
        return self._rebuild(payload, Check(item, config, partial, names))

    @abstractmethod
    def _rebuild(self, payload: object, check: Check) -> dict[str, Any]: ...

    @abstractmethod
    def export_table(self, rows: Sequence[Row], config: Mapping[str, Any]) -> Table:
        """The kind's long table (:attr:`table`) from the study's submitted reviews."""

    # --- the HTML form (field names: :mod:`clinieval.review.study_kinds.form_fields`) ------------

    @abstractmethod
    def parse_form(self, view: FormView, form: FormData) -> dict[str, Any]:
        """The posted form as a payload of the right shape, every judgement left to :meth:`validate`."""

    def form_state(self, view: FormView, payload: Mapping[str, Any] | None) -> dict[str, Any]:
        """What each input shows, keyed the way the kind's template reads it (by letter for
        answers). ``payload`` is the stored response, or the one rebuilt from a refused form (then
        it may hold values no kind accepts, shown as typed so the reviewer can fix them)."""
        return self._form_state(view, payload if isinstance(payload, Mapping) else {})

    @abstractmethod
    def _form_state(self, view: FormView, payload: Mapping[str, Any]) -> dict[str, Any]: ...

    @abstractmethod
    def _summary_lines(self, view: FormView, state: Mapping[str, Any]) -> list[tuple[str, str]]:
        """A :meth:`form_state` as (what, value) lines."""

    def page_values(self, config: Mapping[str, Any]) -> dict[str, Any]:
        """What the kind's template needs from the config besides the view (its scales, its label sets)."""
        return {}

    def summary(self, view: FormView, payload: Mapping[str, Any] | None) -> list[tuple[str, str]]:
        """The stored response as (what, value) lines: what someone else saved, shown read-only."""
        if not payload:
            return [("Response", "nothing saved")]
        return self._summary_lines(view, self.form_state(view, payload))


class AnswerKind(Kind):
    """A kind whose response has one entry per answer (rank, rate): the payload's ``answers``
    object, and a form state and summary line per answer letter."""

    def _rebuild(self, payload: object, check: Check) -> dict[str, Any]:
        obj = as_object(payload, "the response")
        only(obj, ("answers",), "the response")
        answers = as_object(obj.get("answers", {}), "answers")
        keys = check.item.answer_keys
        unknown = [k for k in answers if k not in keys]
        if unknown:
            raise UserError(f"the response names an answer this item does not have: {unknown[0]!r}")
        missing = [k for k in keys if k not in answers]
        if missing and not check.partial:
            raise UserError(f"{check.labelled(missing[0])} has no response yet")
        given = {k: as_object(answers[k], check.labelled(k)) for k in keys if k in answers}
        return {"answers": self._answers(given, check)}

    @abstractmethod
    def _answers(self, given: dict[str, dict[str, Any]], check: Check) -> dict[str, dict[str, Any]]:
        """Each given answer's entry, rebuilt and checked."""

    def _form_state(self, view: FormView, payload: Mapping[str, Any]) -> dict[str, Any]:
        answers = payload.get("answers")
        by_key = answers if isinstance(answers, Mapping) else {}
        return {"answers": {a.letter: self._answer_state(by_key.get(a.key)) for a in view.answers}}

    @abstractmethod
    def _answer_state(self, raw: object) -> dict[str, Any]: ...

    def _summary_lines(self, view: FormView, state: Mapping[str, Any]) -> list[tuple[str, str]]:
        answers = state["answers"]
        return [(f"Answer {a.letter}", self._answer_summary(answers[a.letter])) for a in view.answers]

    @abstractmethod
    def _answer_summary(self, state: Mapping[str, Any]) -> str: ...
