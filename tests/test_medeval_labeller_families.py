"""MedEval's report labeller by phrasing family: the frozen part (tests/data/medeval-labeller-families-
frozen.jsonl, written from the dev set's conventions before the labeller was changed for it) and
properties of the generated families of tests/labeller_families.py (order of a list, a non-observation
added to it, commas and full stops change nothing; every variant gets its convention's labels).

Hypothesis draws the variants; example counts are kept small (the labeller labels ~1,000 reports a
second, and the whole file should run in well under a minute on one core)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.benchmarks.medeval.items import CHEXPERT_OBSERVATIONS, CodeValue
from clinieval.benchmarks.medeval.labeller import Labeller
from tests import labeller_families as fam
from tests.conftest import need_shared
from tests.test_medeval_labeller_dev import KNOWN_TAGS, NUMBER, cell_misses

FROZEN = Path(__file__).parent / "data" / "medeval-labeller-families-frozen.jsonl"
EXAMPLES = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@pytest.fixture(scope="module")
def chest() -> Labeller:
    return Labeller("chest x-ray", chexpert=need_shared("chexpert-labeler"))


def label(labeller: Labeller, report: str) -> dict[str, CodeValue]:
    (labels,) = labeller.label([report])
    return labels


def frozen_items() -> list[dict[str, object]]:
    with FROZEN.open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


# --- the frozen part ------------------------------------------------------------------------------


def test_the_frozen_part_is_well_formed_and_new() -> None:
    items = frozen_items()
    dev = Path(__file__).parent / "data" / "medeval-labeller-dev.jsonl"
    dev_reports = {json.loads(line)["report"] for line in dev.read_text(encoding="utf-8").splitlines()}
    assert len(items) >= 150
    assert len({i["id"] for i in items}) == len(items)
    assert not {i["report"] for i in items} & dev_reports, "the frozen part copies a dev-set sentence"
    for item in items:
        labels, why = item["labels"], item["why"]
        assert isinstance(labels, dict) and isinstance(why, dict)
        assert list(labels) == list(CHEXPERT_OBSERVATIONS), item["id"]
        assert all(v in NUMBER for v in labels.values()), item["id"]
        assert all(c in why for c, v in labels.items() if v is not None), item["id"]
        assert set(why.values()) <= KNOWN_TAGS, item["id"]
        ignored = ("No Finding", "Support Devices")
        affirmed = [c for c, v in labels.items() if v in (1.0, -1.0) and c not in ignored]
        assert labels["No Finding"] in (1.0, None), item["id"]
        assert not (labels["No Finding"] == 1.0 and affirmed), item["id"]


def test_the_frozen_part_cell_by_cell(chest: Labeller) -> None:
    """Every cell as frozen; a rule change that loses one shows which, report by report."""
    items = frozen_items()
    wrong, right, exact = cell_misses(items, chest.label([str(i["report"]) for i in items]))
    cells = len(items) * len(CHEXPERT_OBSERVATIONS)
    assert not wrong, f"{right}/{cells} cells, {exact}/{len(items)} reports exact\n" + "\n".join(wrong)


# --- every family: each variant gets its convention's labels ------------------------------------------


@pytest.mark.parametrize("family", list(fam.FAMILIES))
@EXAMPLES
@given(data=st.data())
def test_every_variant_of_a_family_gets_its_conventions_labels(
    chest: Labeller, family: str, data: st.DataObject
) -> None:
    variant = data.draw(fam.FAMILIES[family])
    assert label(chest, variant.report) == dict(variant.expected), variant.report


def test_the_benchmarks_fixed_sample_is_all_right(chest: Labeller) -> None:
    """The seeded sample that `bench/medeval_labeller.py --families` counts, in full."""
    variants = fam.sample(per_family=60)
    got = chest.label([v.report for v in variants])
    wrong = [f"{v.family}: {v.report!r}" for v, g in zip(variants, got, strict=True) if g != dict(v.expected)]
    assert not wrong, f"{len(wrong)}/{len(variants)} wrong:\n" + "\n".join(wrong)


# --- properties across variants -------------------------------------------------------------------


@EXAMPLES
@given(
    members=fam.structure_lists(),
    statement=st.sampled_from(fam.NORMAL_AFTER),
    style=fam.styles,
    data=st.data(),
)
def test_the_order_of_a_normal_lists_members_changes_nothing(
    chest: Labeller, members: list[fam.Part], statement: str, style: str, data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(members))
    a = fam.normal_list(members, statement, style, ".")
    b = fam.normal_list(shuffled, statement, style, ".")
    assert label(chest, a.report) == label(chest, b.report) == dict(a.expected), (a.report, b.report)


@EXAMPLES
@given(
    members=fam.structure_lists(),
    statement=st.sampled_from(fam.NORMAL_AFTER),
    extra=st.sampled_from(fam.NON_OBSERVATIONS),
    data=st.data(),
)
def test_a_non_observation_added_to_a_normal_list_changes_nothing(
    chest: Labeller, members: list[fam.Part], statement: str, extra: fam.Part, data: st.DataObject
) -> None:
    where = data.draw(st.integers(0, len(members)))
    bigger = [*members[:where], extra, *members[where:]]
    for style in fam.LIST_STYLES:
        before = fam.normal_list(members, statement, style, ".")
        after = fam.normal_list(bigger, statement, style, ".")
        assert label(chest, after.report) == label(chest, before.report), (before.report, after.report)


@EXAMPLES
@given(members=fam.finding_lists(), cue=st.sampled_from(fam.NEGATIONS), data=st.data())
def test_a_negated_list_negates_every_finding_in_any_order_and_style(
    chest: Labeller, members: list[fam.Part], cue: str, data: st.DataObject
) -> None:
    shuffled = data.draw(st.permutations(members))
    extra = data.draw(st.sampled_from(fam.NEGATED_NON_OBSERVATIONS))
    variants = [
        fam.negated_list(m, cue, "", style, end)
        for m in (members, shuffled, [*shuffled, extra])
        for style in fam.LIST_STYLES
        for end in fam.ENDS
    ]
    expected = dict(variants[0].expected)
    assert all(v.expected == expected for v in variants)
    got = chest.label([v.report for v in variants])
    wrong = [v.report for v, g in zip(variants, got, strict=True) if g != expected]
    assert not wrong, wrong


@EXAMPLES
@given(
    normal=fam.FAMILIES["normal-list"],
    finding=st.sampled_from(fam.HEDGED_FINDINGS),
    first=st.booleans(),
)
def test_a_normality_statement_stays_in_its_sentence(
    chest: Labeller, normal: fam.Variant, finding: fam.Part, first: bool
) -> None:
    """A finding in the next sentence stays positive and blocks No Finding; the list stays negative."""
    other = f"{fam.capital(finding.text)}."
    report = f"{other} {normal.report}" if first else f"{normal.report.rstrip('.')}. {other}"
    expected = {**normal.expected, finding.code or "": "positive", "No Finding": "absent"}
    assert label(chest, report) == expected, report


@EXAMPLES
@given(before=fam.FAMILIES["borderline"], hedge=fam.FAMILIES["hedge-after"])
def test_hedges_before_and_after_agree(chest: Labeller, before: fam.Variant, hedge: fam.Variant) -> None:
    """ "Borderline enlarged heart" and "The heart is borderline in size" are both uncertain, as is
    every hedge after its mention; two such sentences together keep both uncertain."""
    report = f"{before.report.rstrip('.')}. {hedge.report}"
    got = label(chest, report)
    assert got["Cardiomegaly"] == "unknown" and got["No Finding"] == "absent", report
    for code, value in hedge.expected.items():
        if value == "unknown":
            assert got[code] == "unknown", report
