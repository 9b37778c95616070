"""``clinieval suite sample --plan WIDTH``: how many clinician ratings per benchmark x model a 95%
interval of a given width needs, with the judge (PPI++) and without it (clinicians alone).

Prediction-powered inference estimates the clinicians' mean score from a few clinician ratings
and the judge's scores of every judged item; the better the judge tracks the clinicians (their
correlation rho), the fewer ratings reach a given width. The count is
:func:`clinieval.analysis.ppi.ratings_needed`'s: rating ``n`` of the stratum's ``judged`` items
gives a variance of ``sd^2 / n (1 - rho^2 (judged - n) / judged)``, solved for the least ``n``
whose interval ``2 z sqrt(variance)`` is no wider than asked, where z is the normal quantile of
the interval and ``sd`` the clinician scores' standard deviation. Where the numbers come from:

* ``--pilot``: ratings already given to an earlier sample of this suite. rho is the correlation
  between clinician and judge scores over the pilot's answers of the benchmark (all models
  pooled, a pilot is small); sd is the stratum's clinician SD in the pilot (the stand-in below
  when the pilot has fewer than two ratings of the stratum or they all agree).
* ``--assume-rho R``: rho as stated; sd a stand-in from the judge: for correctness sqrt(p(1-p))
  with p the judge's mean; for a rating the judge scores' SD rescaled to the 1-5 scale; for a
  ranking the SD of the judge's own win shares.

The width is on the clinician score's scale: a share for correctness and ranking, 1-5 points for
a rating.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.errors import UserError
from clinieval.suite.clinicians import SCALES, ClinicianRatings
from clinieval.suite.manifest import SuiteManifest
from clinieval.suite.plan import SuitePlan
from clinieval.suite.sample import Judged, judged_benchmarks
from clinieval.suite.sample_design import FOLDER, SampleDesign, read_design

ALPHA = 0.05


def _ratings_needed(width: float, *, sd: float, rho: float, judged: int, alpha: float = ALPHA) -> int:
    """Clinician ratings a (1 - alpha) interval of ``width`` needs: PPI++'s own count
    (:func:`clinieval.analysis.ppi.ratings_needed`; ``rho = 0`` gives clinicians alone). A width
    that rating every judged item cannot reach gives the clinicians-alone count, above ``judged``,
    which the table marks out of reach; scores that do not vary need the minimum, 2."""
    from clinieval.analysis.ppi import PPIError, ratings_needed

    if not width > 0 or not math.isfinite(width):
        raise UserError(f"--plan {width}: the interval width must be a positive number")
    if not -1.0 <= rho <= 1.0:
        raise UserError(f"rho {rho}: a correlation lies between -1 and 1")
    if sd <= 0:
        return 2
    try:
        return ratings_needed(width, sd=sd, rho=rho, judged=max(judged, 2), alpha=alpha)
    except PPIError:  # out of reach with this suite's judged items
        z = statistics.NormalDist().inv_cdf(1 - alpha / 2)
        return max(judged + 1, math.ceil((2 * z * sd / width) ** 2 - 1e-9))


@dataclass(frozen=True, slots=True)
class StratumPlan:
    """One benchmark x model: its judged items, the sd and rho used, and the ratings needed."""

    benchmark: str
    model: str
    judged: int
    sd: float
    rho: float
    ppi: int
    alone: int


def plan_strata(
    judged: Sequence[Judged],
    width: float,
    kind: str,
    *,
    rho: float | None = None,
    pilot: ClinicianRatings | None = None,
) -> list[StratumPlan]:
    """The ratings each stratum needs (module docstring), from ``pilot`` or a stated ``rho``."""
    if (rho is None) == (pilot is None):
        raise UserError("--plan needs --pilot DB_OR_EXPORT or --assume-rho R (one of them)")
    out = []
    for j in judged:
        eligible = j.eligible()
        judge = {m: _judge_scores(j, m, eligible, kind) for m in j.headlines}
        r = rho if rho is not None else _pilot_rho(j, judge, pilot)
        for model in j.headlines:
            stand_in = _judge_sd(j, model, judge[model], kind)
            sd = stand_in if pilot is None else _pilot_sd(pilot, j.name, model, stand_in)
            if r is None:
                continue
            ppi = _ratings_needed(width, sd=sd, rho=r, judged=len(eligible))
            alone = _ratings_needed(width, sd=sd, rho=0.0, judged=len(eligible))
            out.append(StratumPlan(j.name, model, len(eligible), sd, r, ppi, alone))
    return out


def _judge_scores(j: Judged, model: str, items: Sequence[str], kind: str) -> dict[str, float]:
    """The judge's score of each item in the clinicians' measure: its own score, or for a
    ranking its win share among the models' scores of the item (ties half)."""
    scores = j.headlines[model].scores
    if kind != "ranking":
        return {i: float(scores[i]) for i in items}
    others = [m for m in j.headlines if m != model]
    out = {}
    for i in items:
        mine = scores[i]
        won = [
            1.0 if mine > j.headlines[o].scores[i] else 0.5 if mine == j.headlines[o].scores[i] else 0.0
            for o in others
        ]
        out[i] = statistics.fmean(won) if won else 0.5
    return out


def _judge_sd(j: Judged, model: str, scores: Mapping[str, float], kind: str) -> float:
    """The stand-in for the clinicians' SD in one stratum, from the judge (module docstring)."""
    values = list(scores.values())
    if kind == "correctness":
        p = statistics.fmean(values)
        return math.sqrt(max(0.0, p * (1 - p)))
    spread = statistics.pstdev(values) if len(values) > 1 else 0.0
    if kind == "rating":
        low, high = j.headlines[model].scale
        return spread * (SCALES["rating"][1] - SCALES["rating"][0]) / (high - low) if high > low else spread
    return spread


def _pilot_sd(pilot: ClinicianRatings, benchmark: str, model: str, stand_in: float) -> float:
    given = list(pilot.scores.get(benchmark, {}).get(model, {}).values())
    sd = statistics.stdev(given) if len(given) > 1 else 0.0
    return sd if sd > 0 else stand_in


def _pilot_rho(
    j: Judged, judge: Mapping[str, Mapping[str, float]], pilot: ClinicianRatings | None
) -> float | None:
    """The clinician-judge correlation over the pilot's answers of ``j`` (None: the pilot has no
    study of it); too few or constant scores are one error."""
    if pilot is None or j.name not in pilot.scores:
        return None
    pairs = [
        (score, judge[m][i])
        for m, items in pilot.scores[j.name].items()
        for i, score in items.items()
        if i in judge.get(m, {})
    ]
    xs, ys = [p[0] for p in pairs], [p[1] for p in pairs]
    if len(pairs) < 3 or len(set(xs)) < 2 or len(set(ys)) < 2:
        raise UserError(
            f"--pilot: {j.name} has {len(pairs)} rated answer(s), too few or too uniform (clinicians or judge"
            " all gave one score) to measure their correlation; rate more, or give --assume-rho R"
        )
    return statistics.correlation(xs, ys)


def pilot_design(run_dir: Path, source: Path | str) -> tuple[SampleDesign, ClinicianRatings]:
    """The sample of ``run_dir`` whose studies ``source`` holds (an export, or a database), and
    its ratings: the pilot of ``--plan``."""
    from clinieval.suite.clinicians import read_clinicians

    paths = sorted((run_dir / FOLDER).glob("*.json"))
    if not paths:
        raise UserError(f"{run_dir}: no clinician sample drawn yet ({FOLDER}/ is empty), so no pilot to read")
    fits: list[tuple[SampleDesign, ClinicianRatings]] = []
    why = []
    for path in paths:
        design = read_design(path)
        try:
            fits.append((design, read_clinicians(source, design)))
        except UserError as e:
            why.append(f"{design.name}: {e}")
    if len(fits) != 1:
        found = "several samples" if fits else "no sample"
        raise UserError(f"--pilot {source}: {found} of {run_dir} fit it ({'; '.join(why) or 'each'})")
    design, ratings = fits[0]
    if not any(ratings.scores.get(b, {}) and any(ratings.scores[b].values()) for b in ratings.scores):
        raise UserError(f"--pilot {source}: sample {design.name!r} has no submitted review yet")
    return fits[0]


def plan_lines(plans: Sequence[StratumPlan], width: float, kind: str, source: str) -> list[str]:
    """The plan as an aligned table, with what its numbers rest on."""
    low, high = SCALES[kind]
    lines = [
        f"ratings per benchmark x model for a 95% interval {width:g} wide on the {kind} scale"
        f" ({low:g}-{high:g}); {source}",
    ]
    header = ["benchmark", "model", "judged", "sd", "rho", "PPI++", "clinicians alone"]
    rows = [
        [
            p.benchmark,
            p.model,
            str(p.judged),
            f"{p.sd:.3f}",
            f"{p.rho:.2f}",
            _n(p.ppi, p.judged),
            _n(p.alone, p.judged),
        ]
        for p in plans
    ]
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    for row in [header, *rows]:
        lines.append("  ".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip())
    if any(max(p.ppi, p.alone) > p.judged for p in plans):
        lines.append("* more than the stratum's judged items: that width is out of reach with this suite")
    return lines


def _n(n: int, judged: int) -> str:
    return f"{n}*" if n > judged else str(n)


def plan_report(
    planned: SuitePlan,
    manifest: SuiteManifest,
    width: float,
    *,
    kind: str | None = None,
    rho: float | None = None,
    pilot: str | None = None,
) -> list[str]:
    """``--plan``'s lines for the suite at ``manifest.out``: from the pilot ``pilot`` (a review
    database or an export of a sample drawn earlier) or the stated correlation ``rho``."""
    from clinieval.suite.sample_design import KINDS

    judged = judged_benchmarks(planned, manifest)
    if (rho is None) == (pilot is None):
        raise UserError("--plan needs --pilot DB_OR_EXPORT or --assume-rho R (one of them)")
    ratings = None
    if pilot is not None:
        design, ratings = pilot_design(manifest.out, pilot)
        if kind is not None and kind != design.kind:
            raise UserError(f"--kind {kind}: the pilot sample {design.name!r} is a {design.kind} sample")
        kind = design.kind
        rated = sum(len(items) for b in ratings.scores.values() for items in b.values())
        source = f"rho and sd from the pilot sample {design.name!r} ({rated} rated answers)"
    else:
        kind = kind or ("correctness" if all(j.binary for j in judged) else "rating")
        source = f"rho {rho:g} as stated, sd from the judge's scores"
    if kind not in KINDS:
        raise UserError(f"--kind {kind!r}: choose {', '.join(KINDS)}")
    plans = plan_strata(judged, width, kind, rho=rho, pilot=ratings)
    return plan_lines(plans, width, kind, source)
