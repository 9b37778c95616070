"""Do the PPI++ intervals hold their 95%? Simulated studies of a binary judge against clinicians.

Each simulated study has 2-3 models answering the same items, a clinician verdict (correct or not)
on every item, and a judge that flips the clinician's verdict with some probability and is then
lenient or harsh on some models (e.g. +0.15 on one model only). A random sample of items is rated by
the clinician (every model's answer to a sampled item); the rest only by the judge. For each
model, three estimates of the clinician-level accuracy:

  judge only       the judge's mean over every item (biased by the judge)
  clinicians only  the rated items alone
  PPI++            both (clinieval.analysis.ppi)

and the table gives how often each one's 95% interval covers the true accuracy, and its median
width, over many studies. Scenarios: independent items with an informative judge and with an
uninformative one (independent of the truth), items clustered by patient (whole patients rated;
the cluster-robust interval against the one that ignores the clustering), and the paired difference
between two models. Seeded: the same command prints the same table.

    .venv/bin/python bench/ppi_validity.py                    # 1,000 studies per scenario, ~3 s
    .venv/bin/python bench/ppi_validity.py --studies 20000 --seed 777   # closer to the true coverage, ~45 s
    .venv/bin/python bench/ppi_validity.py --lam 1    # adds plain PPI (lam fixed at 1, not tuned)

The tests (tests/test_ppi.py) run the same simulations and assert on them.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass, field, replace
from statistics import NormalDist

import numpy as np
from numpy.typing import NDArray

from clinieval.analysis.ppi import Batch, mean_batch, ppi_mean_batch

Bools = NDArray[np.bool_]
Floats = NDArray[np.float64]
Ints = NDArray[np.int64]


@dataclass(frozen=True)
class Design:
    """One simulated setting: models' true accuracies, the judge, and how items are sampled.

    ``flip`` is the judge's chance of flipping a clinician's verdict; ``bias`` then shifts its mean
    per model (by turning some of its "wrong" verdicts to "right", or the reverse) so that the
    judge's mean is exactly ``accuracy + bias``. ``informative=False`` replaces the judge by a coin
    with that same mean, independent of the truth. ``patient_size`` items share a patient; ``patient_sd`` (on
    the clinician's latent scale) and ``judge_sd`` (on the judge's flip propensity) make a patient's
    items alike; ``item_sd`` makes an item hard or easy for every model alike (pairs the models).
    """

    name: str
    accuracy: tuple[float, ...] = (0.55, 0.68, 0.75)
    bias: tuple[float, ...] = (0.0, 0.15, -0.05)
    flip: float = 0.12
    informative: bool = True
    items: int = 2000
    rated: int = 200
    patient_size: int = 1
    patient_sd: float = 0.0
    judge_sd: float = 0.0
    item_sd: float = 0.8
    models: tuple[str, ...] = ("A", "B", "C")


def _threshold(p: float, sd: float) -> float:
    """The cut on a N(0, sd**2) latent above which a verdict is "correct" with probability p."""
    return sd * NormalDist().inv_cdf(1.0 - p)


def clinician_verdicts(rng: np.random.Generator, design: Design, studies: int) -> Bools:
    """(models x studies x items) clinician verdicts: latent item + patient + answer effects."""
    if design.items % design.patient_size:
        raise SystemExit(f"{design.name}: items must be whole patients of {design.patient_size}")
    patients = design.items // design.patient_size
    shared = rng.normal(0.0, design.item_sd, (studies, design.items))
    if design.patient_sd:
        shared += np.repeat(
            rng.normal(0.0, design.patient_sd, (studies, patients)), design.patient_size, axis=1
        )
    sd = float(np.sqrt(1.0 + design.item_sd**2 + design.patient_sd**2))
    return np.stack(
        [shared + rng.normal(size=(studies, design.items)) > _threshold(p, sd) for p in design.accuracy]
    )


def judge_verdicts(rng: np.random.Generator, design: Design, truth: Bools, model: int) -> Bools:
    """The judge's verdicts on one model's answers: flips of the clinician's, then its bias."""
    p, bias = design.accuracy[model], design.bias[model]
    shape = truth.shape
    if not design.informative:
        return rng.random(shape) < p + bias
    propensity = rng.normal(size=shape)
    if design.judge_sd:
        per_patient = rng.normal(0.0, design.judge_sd, (shape[0], shape[1] // design.patient_size))
        propensity += np.repeat(per_patient, design.patient_size, axis=1)
    sd = float(np.sqrt(1.0 + design.judge_sd**2))
    verdict = truth ^ (propensity > _threshold(design.flip, sd))
    base = p * (1 - design.flip) + (1 - p) * design.flip  # the judge's mean before its bias
    target = p + bias
    if target >= base:
        return verdict | (rng.random(shape) < (target - base) / (1 - base))
    return verdict & (rng.random(shape) < target / base)


def patient_ids(design: Design) -> tuple[Ints, Ints] | tuple[None, None]:
    """Patients of the rated (the first ``rated`` items: whole patients) and unrated items."""
    if design.patient_size == 1:
        return None, None
    if design.rated % design.patient_size:
        raise SystemExit(f"{design.name}: rated items must be whole patients of {design.patient_size}")
    ids = np.arange(design.items, dtype=np.int64) // design.patient_size
    return ids[: design.rated], ids[design.rated :]


@dataclass(frozen=True)
class Row:
    scenario: str
    model: str
    bias: float
    estimator: str
    coverage: float
    median_width: float


@dataclass
class _Tally:
    """Coverage and widths of one estimator, accumulated over chunks of studies."""

    covered: int = 0
    studies: int = 0
    widths: list[Floats] = field(default_factory=list)

    def add(self, batch: Batch, truth: float) -> None:
        self.covered += int(batch.covers(truth).sum())
        self.studies += batch.value.size
        self.widths.append(batch.width())

    def row(self, design: Design, model: str, bias: float, estimator: str) -> Row:
        width = float(np.median(np.concatenate(self.widths)))
        return Row(design.name, model, bias, estimator, self.covered / self.studies, width)


CHUNK = 1000  # studies simulated at once: bounds memory (~0.5 GB) whatever --studies asks


def _chunks(studies: int) -> list[int]:
    return [min(CHUNK, studies - start) for start in range(0, studies, CHUNK)]


def simulate(design: Design, studies: int, rng: np.random.Generator) -> tuple[Bools, Bools]:
    """Clinician and judge verdicts (models x studies x items); the first ``rated`` items rated."""
    truth = clinician_verdicts(rng, design, studies)
    judge = np.stack([judge_verdicts(rng, design, truth[k], k) for k in range(len(design.accuracy))])
    return truth, judge


def estimates(design: Design, y: Floats, f: Floats, lam: float | None = None) -> dict[str, Batch]:
    """Every estimator on one model's (or one difference's) scores of a chunk of studies; with
    ``lam``, also PPI with that weight fixed in advance instead of tuned."""
    lab, unl = patient_ids(design)
    every = None if lab is None or unl is None else np.concatenate([lab, unl])
    n = design.rated
    out = {
        "judge only": mean_batch(f, every),
        "clinicians only": mean_batch(y[:, :n], lab),
        "PPI++": ppi_mean_batch(y[:, :n], f[:, :n], f[:, n:], patients_lab=lab, patients_unl=unl),
    }
    if lab is not None:
        out["PPI++ ignoring patients"] = ppi_mean_batch(y[:, :n], f[:, :n], f[:, n:])
    if lam is not None:
        out[f"PPI, lam fixed at {lam:g}"] = ppi_mean_batch(
            y[:, :n], f[:, :n], f[:, n:], patients_lab=lab, patients_unl=unl, lam=lam
        )
    return out


def validity_rows(design: Design, studies: int, seed: int, lam: float | None = None) -> list[Row]:
    """Coverage of the true accuracy and median width, per model and estimator."""
    rng = np.random.default_rng(seed)
    tallies: dict[tuple[int, str], _Tally] = {}
    for size in _chunks(studies):
        truth, judge = simulate(design, size, rng)
        for k, p in enumerate(design.accuracy):
            for name, batch in estimates(
                design, truth[k].astype(np.float64), judge[k].astype(np.float64), lam
            ).items():
                tallies.setdefault((k, name), _Tally()).add(batch, p)
    return [tally.row(design, design.models[k], design.bias[k], name) for (k, name), tally in tallies.items()]


def difference_rows(design: Design, studies: int, seed: int, lam: float | None = None) -> list[Row]:
    """Model B minus model A, paired on the same items: every estimator on the differences."""
    rng = np.random.default_rng(seed)
    tallies: dict[str, _Tally] = {}
    target = design.accuracy[1] - design.accuracy[0]
    for size in _chunks(studies):
        truth, judge = simulate(design, size, rng)
        y = truth[1].astype(np.float64) - truth[0]
        f = judge[1].astype(np.float64) - judge[0]
        for name, batch in estimates(design, y, f, lam).items():
            tallies.setdefault(name, _Tally()).add(batch, target)
    bias = design.bias[1] - design.bias[0]
    return [tally.row(design, "B - A", bias, name) for name, tally in tallies.items()]


IID = Design("independent items, informative judge")
UNINFORMATIVE = Design("independent items, uninformative judge", informative=False)
CLUSTERED = Design(
    "4 items per patient, 50 patients rated",
    patient_size=4,
    patient_sd=1.0,
    judge_sd=1.0,
    item_sd=0.0,
)
SMALL = Design("independent items, 60 rated", rated=60)
SMALL_CLUSTERED = replace(CLUSTERED, name="4 items per patient, 15 patients rated", rated=60)
PAIRED = Design("paired difference B - A", accuracy=(0.68, 0.75), bias=(0.0, 0.15))
SCENARIOS = (IID, UNINFORMATIVE, CLUSTERED, SMALL, SMALL_CLUSTERED)


def table(studies: int, seed: int, lam: float | None = None) -> list[Row]:
    rows: list[Row] = []
    for i, design in enumerate(SCENARIOS):
        rows += validity_rows(design, studies, seed + i, lam)
    rows += difference_rows(PAIRED, studies, seed + len(SCENARIOS), lam)
    return rows


def render(rows: list[Row]) -> str:
    lines = [
        f"{'scenario':40} {'model':5} {'bias':>6} {'estimator':24} {'coverage':>8} {'median width':>12}",
    ]
    last = ""
    for r in rows:
        scenario = r.scenario if r.scenario != last else ""
        last = r.scenario
        measured = f"{r.coverage:>8.1%} {r.median_width:>12.4f}"
        lines.append(f"{scenario:40} {r.model:5} {r.bias:>+6.2f} {r.estimator:24} {measured}")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--studies", type=int, default=1000, help="simulated studies per scenario")
    parser.add_argument("--seed", type=int, default=20240, help="seed of the first scenario")
    parser.add_argument("--lam", type=float, help="also show PPI with this judge weight fixed in advance")
    args = parser.parse_args()
    start = time.perf_counter()
    rows = table(args.studies, args.seed, args.lam)
    print(render(rows))
    print(f"\n{args.studies} studies per scenario, seed {args.seed}, {time.perf_counter() - start:.1f} s")


if __name__ == "__main__":
    main()
