"""The admin's agreement panel: :func:`clinieval.review.agreement.study_agreement` as one readable
table per thing reviewers are compared on (a scale, a label set, the ranking, the correct marks,
the decision), each row a statistic with its value, 95 % CI, the units and reviewers it rests on,
and a band in words from a named convention; a missing number says why, in words.

The bands read the point estimate, by these conventions:

* ICC: Koo & Li (2016), *A guideline of selecting and reporting intraclass correlation
  coefficients for reliability research*: poor below 0.5, moderate 0.5-0.75, good 0.75-0.9,
  excellent above 0.9.
* Krippendorff's alpha: Krippendorff (2004), *Content Analysis*: reliable from 0.800, tentative
  from 0.667 (conclusions with care), unreliable below.
* Cohen's kappa: Landis & Koch (1977): below 0 poor, then slight, fair, moderate, substantial,
  almost perfect at 0.2 steps.
* Kendall's tau between rankings has no conventional band: its row says what the scale means.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from clinieval.review.study_kinds import Measure

Band = tuple[float, str]
"""(upper bound, exclusive; the band's name)."""

ICC_BANDS: Final[tuple[Band, ...]] = (
    (0.5, "poor"),
    (0.75, "moderate"),
    (0.9, "good"),
    (math.inf, "excellent"),
)
ALPHA_BANDS: Final[tuple[Band, ...]] = ((0.667, "unreliable"), (0.8, "tentative"), (math.inf, "reliable"))
KAPPA_BANDS: Final[tuple[Band, ...]] = (
    (0.0, "poor"),
    (0.2, "slight"),
    (0.4, "fair"),
    (0.6, "moderate"),
    (0.8, "substantial"),
    (math.inf, "almost perfect"),
)
CONVENTIONS: Final = (
    ("ICC", "Koo & Li (2016)", "poor < 0.5, moderate 0.5–0.75, good 0.75–0.9, excellent > 0.9"),
    (
        "Krippendorff's α",
        "Krippendorff (2004)",
        "unreliable < 0.667, tentative 0.667–0.8 (draw conclusions with care), reliable ≥ 0.8",
    ),
    (
        "Cohen's κ",
        "Landis & Koch (1977)",
        "poor < 0, slight < 0.2, fair < 0.4, moderate < 0.6, substantial < 0.8, almost perfect ≥ 0.8",
    ),
    ("Kendall's τ", "no conventional bands", "1 = the same order, 0 = unrelated orders, −1 = reversed"),
)
"""(statistic, convention, bands) for the legend under the tables."""


def band(value: float | None, bands: Sequence[Band]) -> str:
    if value is None:
        return ""
    return next(name for upper, name in bands if value < upper)


def number(value: object) -> str:
    return f"{value:.2f}" if isinstance(value, int | float) and not isinstance(value, bool) else "—"


CI_MISSING: Final = "not estimable from these ratings"
"""Why a CI is missing when the statistic's section gives no reason of its own."""


def _has_ci(ci: object) -> bool:
    return isinstance(ci, list | tuple) and len(ci) == 2 and all(isinstance(x, int | float) for x in ci)


def interval(ci: object) -> str:
    if isinstance(ci, list | tuple) and _has_ci(ci):
        return f"{ci[0]:.2f} to {ci[1]:.2f}"
    return "—"


def _ci_cells(ci: object, why: object) -> dict[str, str]:
    """The CI cell's text and, when there is no interval, why in words (shown in the cell, since a
    bare "—" leaves the reader guessing whether it is missing data or a bug)."""
    if _has_ci(ci):
        return {"ci": interval(ci)}
    reason = why if isinstance(why, str) and why else CI_MISSING
    return {"ci": reason, "ci_why": reason}


@dataclass(frozen=True, slots=True)
class Row:
    """One statistic: ``stat`` is its stable name (``alpha``, ``icc_single``...), ``why`` is set
    (and the numbers are "—") when the data does not define it yet."""

    stat: str
    name: str
    value: str
    ci: str
    units: str
    raters: str
    band: str
    why: str | None = None
    ci_why: str | None = None
    """Set (and ``ci`` says it) when the value is defined but its CI is not: why, in words."""


@dataclass(frozen=True, slots=True)
class Table:
    """One measure's statistics; ``key`` is the measure's (for the link to its disagreements)."""

    key: str
    title: str
    rows: tuple[Row, ...]
    note: str = ""


def _row(stat: str, name: str, value: object, why: Mapping[str, str], why_key: str, **cells: str) -> Row:
    if not isinstance(value, int | float) or isinstance(value, bool):
        reason = why.get(why_key) or "not defined by these reviews yet"
        return Row(stat, name, "—", "", "", "", "", f"Not defined yet: {reason}.")
    return Row(
        stat,
        name,
        number(value),
        cells.get("ci", "—"),
        cells.get("units", ""),
        cells.get("raters", ""),
        cells.get("band", ""),
        None,
        cells.get("ci_why"),
    )


def _alpha_row(section: Mapping[str, Any], level: str) -> Row:
    value = section.get(f"krippendorff_alpha_{level}")
    block = section.get("alpha") or {}
    return _row(
        "alpha",
        f"Krippendorff's α ({level})",
        value,
        section.get("why") or {},
        "alpha",
        **_ci_cells(block.get("ci"), block.get("ci_why")),
        units=str(block.get("units", "")),
        raters=str(block.get("raters", "")),
        band=band(value, ALPHA_BANDS) if isinstance(value, float) else "",
    )


def _kappa_row(section: Mapping[str, Any], raters: int) -> Row:
    kappa = section.get("cohen_kappa") or {}
    value = kappa.get("mean")
    pairs = [p for p in kappa.get("pairs", []) if p.get("kappa") is not None]
    units = ", ".join(str(p.get("n")) for p in pairs)
    return _row(
        "kappa",
        "Cohen's κ, mean over pairs of reviewers",
        value,
        section.get("why") or {},
        "kappa",
        **_ci_cells(kappa.get("ci"), kappa.get("ci_why")),
        units=units,
        raters=str(raters),
        band=band(value, KAPPA_BANDS) if isinstance(value, float) else "",
    )


def _icc_rows(section: Mapping[str, Any]) -> tuple[Row, ...]:
    icc = section.get("icc")
    why = section.get("why") or {}
    if not isinstance(icc, Mapping):
        return (
            _row("icc_single", "ICC, one reviewer", None, why, "icc"),
            _row("icc_average", "ICC, mean of the reviewers", None, why, "icc"),
        )
    k = icc.get("raters_per_unit")
    units, model = str(icc.get("units", "")), str(icc.get("model", ""))
    names = {
        "single": f"{icc.get('name_single', 'ICC')}: one reviewer's score ({model})",
        "average": f"{icc.get('name_average', 'ICC')}: the mean of {k} reviewers' scores",
    }
    return tuple(
        _row(
            f"icc_{which}",
            name,
            icc.get(which),
            why,
            "icc",
            **_ci_cells(icc.get(f"ci_{which}"), None),
            units=units,
            raters=str(k),
            band=band(icc.get(which), ICC_BANDS),
        )
        for which, name in names.items()
    )


def _tau_row(section: Mapping[str, Any]) -> Row:
    tau = section.get("kendall_tau")
    why = section.get("why") or {}
    if not isinstance(tau, Mapping):
        return _row("tau", "Kendall's τ-b between two reviewers' rankings", None, why, "kendall_tau")
    return _row(
        "tau",
        "Kendall's τ-b between two reviewers' rankings, mean over items",
        tau.get("mean_tau_b"),
        why,
        "kendall_tau",
        **_ci_cells(tau.get("ci"), tau.get("ci_why")),
        units=str(tau.get("items", "")),
        raters=str(section.get("reviewers", "")),
        band="no conventional band",
    )


def tables(result: Mapping[str, Any], measures: Sequence[Measure], hide: Callable[[str], str]) -> list[Table]:
    """The agreement of one study as tables, one per measure of its kind, in the kind's order; a
    table's statistics follow from what its section holds (:func:`.agreement.measure_sections`).
    ``hide`` removes model names from every text (none should be there; blinding holds anyway)."""
    from clinieval.review.agreement import measure_sections

    sections = measure_sections(result)
    raters = int(result.get("reviewers") or 0)
    out: list[Table] = []
    for m in measures:
        section = sections.get(m.key) or {}
        if "kendall_tau" in section:
            rows: tuple[Row, ...] = (_tau_row(section),)
            note = "Units: items two reviewers both ranked in full."
        elif "krippendorff_alpha_ordinal" in section:
            rows = (_alpha_row(section, "ordinal"), *_icc_rows(section))
            note = "Units: answers rated by two or more reviewers. Reviewers: for the ICC, per answer."
        else:
            rows = (_alpha_row(section, "nominal"), _kappa_row(section, raters))
            note = "Units: what two or more reviewers marked; for κ, what each pair of reviewers shares."
        out.append(Table(m.key, hide(m.label), tuple(_hidden(r, hide) for r in rows), note))
    return out


def _hidden(row: Row, hide: Callable[[str], str]) -> Row:
    return Row(
        row.stat,
        hide(row.name),
        row.value,
        row.ci,
        row.units,
        row.raters,
        row.band,
        None if row.why is None else hide(row.why),
        row.ci_why,
    )
