"""What do clinician ratings cost the leaderboard? A 10,000-item judged benchmark, 300 ratings.

One command builds a judged benchmark of 10,000 items (3 items per patient) over three models,
with a judge that agrees with a simulated clinician on about 90% of answers and is biased on one
model, and 300 clinician ratings (100 sampled items, every model's answer rated), then renders the
leaderboard (``leaderboard.json``, ``.md``, ``.html``) two ways, alternating, in this process:

  judge only   the board as `suite report` builds it without ratings (exact pair tests,
               bootstrap CIs and rank intervals over patients)
  calibrated   the same board with the ratings (`suite report --clinicians`): PPI++ estimates,
               their paired differences, and the rank bootstrap of the calibrated estimator

It prints the median wall time of each (goal for calibrated: seconds) and the ratio calibrated /
judge only. Calibration asks no model: there is nothing else to time.

    .venv/bin/python bench/calibrated_report.py --rounds 3
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

ITEMS = 10_000
PER_PATIENT = 3
RATED_ITEMS = 100
MODELS = {"alpha": (0.62, 0.0), "beta": (0.66, 0.0), "gamma": (0.55, 0.15)}
"""Each model's true clinician accuracy and the judge's extra yes rate on its wrong answers."""


def data(seed: int) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]], dict[str, str]]:
    import numpy as np

    rng = np.random.default_rng(seed)
    items = [f"q{i:05d}" for i in range(ITEMS)]
    clusters = {item: f"p{i // PER_PATIENT}" for i, item in enumerate(items)}
    patients = sorted(set(clusters.values()))
    drawn = set(rng.choice(len(patients), RATED_ITEMS // PER_PATIENT + 1, replace=False).tolist())
    rated = [i for i in items if int(clusters[i][1:]) in drawn][:RATED_ITEMS]
    judge: dict[str, dict[str, float]] = {}
    clinicians: dict[str, dict[str, float]] = {}
    for model, (accuracy, bias) in MODELS.items():
        truth = (rng.random(ITEMS) < accuracy).astype(float)
        verdict = np.where(rng.random(ITEMS) < 0.1, 1.0 - truth, truth)
        verdict = np.where((truth == 0.0) & (rng.random(ITEMS) < bias), 1.0, verdict)
        judge[model] = {item: float(v) for item, v in zip(items, verdict, strict=True)}
        by_item = dict(zip(items, truth, strict=True))
        clinicians[model] = {item: float(by_item[item]) for item in rated}
    return judge, clinicians, clusters


def render(calibrated: bool, seed: int, out: Path) -> float:
    from clinieval.analysis.leaderboard import BenchmarkScores, build_leaderboard
    from clinieval.suite.leaderboard import write_leaderboard

    judge, clinicians, clusters = data(seed)
    start = time.perf_counter()
    scores = BenchmarkScores(
        "judged",
        "correct (judge)",
        judge,
        clusters=clusters,
        scale=(0.0, 1.0),
        clinicians=clinicians if calibrated else None,
        clinician_kind="correctness",
    )
    board = build_leaderboard([scores], seed=seed)
    write_leaderboard(board, {}, out, title="bench")
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    times: dict[str, list[float]] = {"judge only": [], "calibrated": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(args.rounds):
            order = ["judge only", "calibrated"] if r % 2 == 0 else ["calibrated", "judge only"]
            for side in order:
                times[side].append(render(side == "calibrated", r, Path(tmp) / side))
    judge, cal = statistics.median(times["judge only"]), statistics.median(times["calibrated"])
    ratings = RATED_ITEMS * len(MODELS)
    print(f"{ITEMS:,} items x {len(MODELS)} models, {ratings} clinician ratings, {args.rounds} rounds")
    print(f"judge only  {judge:6.2f} s (median; {', '.join(f'{t:.2f}' for t in times['judge only'])})")
    print(f"calibrated  {cal:6.2f} s (median; {', '.join(f'{t:.2f}' for t in times['calibrated'])})")
    print(f"ratio calibrated / judge only: {cal / judge:.2f}")


if __name__ == "__main__":
    main()
