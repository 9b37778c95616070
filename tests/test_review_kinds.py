"""Each study kind carries its own behaviour (issue 27): the agreement it composes, its export
table and template, and its form mapping, both ways. These check the kinds' side of that contract
directly; the store, app and browser tests check it end to end."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from clinieval.review.study_kinds import KINDS, Measure, get_kind
from clinieval.review.study_kinds.form_fields import FormData

TEMPLATES = Path(__file__).resolve().parents[1] / "src" / "clinieval" / "review" / "templates"


@dataclass
class Recorder:
    """An AgreementStats that records which statistic each measure was given."""

    calls: list[tuple[str, str]] = field(default_factory=list)

    def ranking(self, rank: Measure, correct: Measure) -> dict[str, Any]:
        self.calls.append(("ranking", f"{rank.key}+{correct.key}"))
        return {"kendall_tau": None, "correct": {}, "why": {}}

    def ordinal(self, measure: Measure) -> dict[str, Any]:
        self.calls.append(("ordinal", measure.key))
        return {"label": measure.label}

    def nominal(self, measure: Measure) -> dict[str, Any]:
        self.calls.append(("nominal", measure.key))
        return {}


def test_each_kind_has_a_template_and_its_own_export_table() -> None:
    tables = [k.table for k in KINDS.values()]
    assert tables == ["ranks.csv", "ratings.csv", "questions.csv", "sentences.csv"]
    for kind in KINDS.values():
        assert (TEMPLATES / kind.template).is_file(), kind.name
    extras = {name: k.extra.file for name, k in KINDS.items() if k.extra is not None}
    assert extras == {"rank": "reviews.csv", "rate": "clinicians.csv"}


def test_each_kind_composes_its_agreement_from_its_measures() -> None:
    expected: dict[str, tuple[list[tuple[str, str]], set[str]]] = {
        "rank": ([("ranking", "rank+correct")], {"kendall_tau", "correct", "why"}),
        "rate": ([("ordinal", "relevancy"), ("ordinal", "fluency"), ("ordinal", "correctness")], {"scales"}),
        "question": ([("nominal", "decision")], {"decision"}),
        "sentence": ([("nominal", "abnormality"), ("nominal", "ambiguity")], {"labels"}),
    }
    for name, (calls, keys) in expected.items():
        kind = get_kind(name)
        stats = Recorder()
        sections = kind.agreement(kind.config(None), stats)
        assert stats.calls == calls, name
        assert set(sections) == keys, name
    rate = get_kind("rate")
    scales = rate.agreement(rate.config(None), Recorder())["scales"]
    assert scales["correctness"] == {"label": "Knowledge correctness"}


@dataclass(frozen=True)
class Shown:
    letter: str
    key: str


@dataclass(frozen=True)
class View:
    answers: tuple[Shown, ...]
    config: dict[str, Any]
    fields: dict[str, Any]
    answer_keys: list[str]


def _posted(name: str, state: dict[str, Any]) -> FormData:
    """What a browser posts for a form showing ``state`` (the templates' field names)."""
    form: dict[str, list[str]] = {}
    if name == "rank":
        for letter, s in state["answers"].items():
            form[f"rank-{letter}"] = [s["rank"]]
            form[f"correct-{letter}"] = ["correct" if s["correct"] else "incorrect"]
            form[f"reasons-{letter}"] = list(s["reasons"])
            form[f"rationale-{letter}"] = [s["rationale"].replace("\n", "\r\n")]
    elif name == "rate":
        for letter, s in state["answers"].items():
            for scale, value in s.items():
                form[f"score-{letter}-{scale}"] = [value]
    elif name == "question":
        form["decision"] = [state["decision"]]
        form |= {f.name: [f.value] for f in state["fields"]}
        form["comment"] = [state["comment"]]
    else:
        form |= {f"label-{k}": [v] for k, v in state["labels"].items()}
        form["rewrite"] = [state["rewrite"]]
    return form


PAYLOADS: dict[str, dict[str, Any]] = {
    "rank": {
        "answers": {
            "a1": {"rank": 2, "correct": False, "reasons": ["C1", "C3"], "rationale": "wrong\ndose"},
            "a2": {"rank": 1, "correct": True, "reasons": [], "rationale": ""},
        }
    },
    "rate": {
        "answers": {
            "a1": {"relevancy": 4, "fluency": 5, "correctness": 3},
            "a2": {"relevancy": 1, "fluency": 2, "correctness": 2},
        }
    },
    "question": {
        "decision": "revise",
        "fields": {"question": "Which drug?", "options": ["aspirin", "heparin"], "answer": 1},
        "comment": "option B reworded",
    },
    "sentence": {"labels": {"abnormality": "abnormal", "ambiguity": "unambiguous"}, "rewrite": "clearer"},
}


@pytest.mark.parametrize("name", list(KINDS))
def test_a_payload_survives_the_form_both_ways(name: str) -> None:
    """Stored payload -> what the form shows -> what the browser posts -> payload: the same,
    and valid for the kind (B is shown first, so letters and keys must not be confused)."""
    kind = get_kind(name)
    fields = {"question": "Which drug?", "options": ["aspirin", "warfarin"], "answer": 1}
    view = View((Shown("A", "a2"), Shown("B", "a1")), kind.config(None), fields, ["a1", "a2"])
    payload = PAYLOADS[name]
    state = kind.form_state(view, payload)
    parsed = kind.parse_form(view, _posted(name, state))
    assert parsed == payload
    names = {"a1": "Answer B", "a2": "Answer A"}
    assert kind.validate(parsed, view, view.config, names=names) == payload


def test_a_summary_says_what_is_saved() -> None:
    view = View((Shown("A", "a2"), Shown("B", "a1")), get_kind("rank").config(None), {}, ["a1", "a2"])
    rank = get_kind("rank")
    assert rank.summary(view, None) == [("Response", "nothing saved")]
    assert rank.summary(view, PAYLOADS["rank"]) == [
        ("Answer A", "rank 1 · correct"),
        ("Answer B", "rank 2 · incorrect · C1 · C3 · rationale: wrong\ndose"),
    ]
    rate = get_kind("rate")
    assert rate.summary(view, PAYLOADS["rate"])[0] == ("Answer A", "relevancy 1, fluency 2, correctness 2")
    assert rate.page_values(rate.config(None))["scales"][0]["name"] == "relevancy"
    sentence = get_kind("sentence")
    assert sentence.page_values(sentence.config(None)) == {
        "label_sets": {"abnormality": ["normal", "abnormal"], "ambiguity": ["unambiguous", "ambiguous"]}
    }
