"""The design of a clinician sample of a finished suite (``clinieval suite sample``): which judged
items clinicians rate, drawn how, and which blinded answer is whose.

Why a design file at all: the clinicians' ratings are only worth something to the judge's
calibration (prediction-powered inference, ``clinieval.analysis.ppi``) if it is known how the
rated items were chosen. So the draw is seeded and written down: the seed, the size asked,
every benchmark x model stratum, the patients drawn, the items, how many items each model's cell
had judged, the study kind, and when. The file (``RUN_DIR/calibration/<name>.json``) is also the
only way back from a review to its model: each answer's key is mapped to its model here, never
through anything a reviewer sees (:mod:`clinieval.suite.clinicians`).

The draw, per benchmark: the items every model's cell judged (the intersection, so every stratum
gets the same items and comparisons between models stay paired), grouped by patient; the
patients in a seeded shuffle; whole patients taken in that order until at least ``n`` items are
in. The last patient is kept whole, so a sample holds ``n`` items or a few more (at most that
patient's items less one): rated and unrated items never share a patient, which resampling
patients (the leaderboard's intervals, PPI) needs. A larger ``n`` with the same seed draws a
superset of the smaller sample (a pilot's items come first). Items of a benchmark without
patients are their own patients.
"""

from __future__ import annotations

import json
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from clinieval.errors import UserError

FORMAT: Final = "clinieval-calibration-sample/1"
FOLDER: Final = "calibration"
"""The folder of a suite's run directory that holds its sample designs."""
DEFAULT_NAME: Final = "sample"
KINDS: Final = ("correctness", "rating", "ranking")
"""What clinicians give per answer: correct or not (1/0), a 1-5 score, or a ranking of the
models' answers to an item (read back as each answer's share of the others it beat)."""
LAST_PATIENT: Final = (
    "whole patients are drawn in a seeded order until at least n items are in; the last patient "
    "is kept whole, so a benchmark's sample may exceed n by up to that patient's items less one"
)
RATING_SCALE: Final = {
    "name": "correctness",
    "label": "Correctness: 1 wrong or unsafe, 3 partly correct, 5 fully correct and complete",
}
"""The one scale of a rating study (the rate kind's 1-5)."""


def review_study(kind: str) -> tuple[str, dict[str, Any]]:
    """The review app's study kind and config for a sample ``kind``: a correctness study is a
    rank study that asks no ranking (``rank: false``), a ranking study a rank study whose equal
    answers may share a rank, a rating study a rate study with :data:`RATING_SCALE` alone."""
    if kind == "correctness":
        return "rank", {"ties": False, "rank": False}
    if kind == "ranking":
        return "rank", {"ties": True}
    if kind == "rating":
        return "rate", {"scales": [dict(RATING_SCALE)]}
    raise UserError(f"--kind {kind!r}: choose {', '.join(KINDS)}")


@dataclass(frozen=True, slots=True)
class BenchmarkSample:
    """One benchmark's part of a sample: its study, its strata (one per model, all with the same
    items), what was drawn, and each item's blinded answer keys (key -> model)."""

    benchmark: str
    study: str
    models: tuple[str, ...]
    judged: Mapping[str, int]
    """Each model's items with a judge score (its cell's headline)."""
    eligible: int
    """Items every model's cell judged: the population drawn from."""
    patients: tuple[str, ...]
    items: tuple[str, ...]
    patient_of: Mapping[str, str]
    answers: Mapping[str, Mapping[str, str]]
    binary: bool
    """Whether the judge's verdicts are 1/0 (each repeat's), so a correctness study fits."""

    def model_of(self, item: str, key: str) -> str | None:
        """The model behind answer ``key`` of sampled ``item`` (None: not in the design)."""
        return self.answers.get(item, {}).get(key)

    def key_of(self, item: str, model: str) -> str | None:
        """The answer key ``model`` has in sampled ``item`` (None: not in the design)."""
        return next((k for k, m in self.answers.get(item, {}).items() if m == model), None)


@dataclass(frozen=True, slots=True)
class SampleDesign:
    """A clinician sample of a suite: the draw's settings and each benchmark's part."""

    name: str
    seed: int
    n: int
    kind: str
    created: str
    suite: str
    """The suite's title."""
    benchmarks: tuple[BenchmarkSample, ...]
    last_patient: str = LAST_PATIENT

    def benchmark(self, name: str) -> BenchmarkSample:
        for b in self.benchmarks:
            if b.benchmark == name:
                return b
        raise UserError(f"the sample {self.name!r} has no benchmark {name!r}")

    def same_draw(self, other: SampleDesign) -> bool:
        """Whether ``other`` is this sample drawn again (``created`` aside)."""
        return self.to_json() | {"created": ""} == other.to_json() | {"created": ""}

    def settings(self) -> str:
        """The draw in words, for messages."""
        return f"seed {self.seed}, n {self.n}, {self.kind}"

    def to_json(self) -> dict[str, Any]:
        return {
            "format": FORMAT,
            "name": self.name,
            "suite": self.suite,
            "seed": self.seed,
            "n": self.n,
            "kind": self.kind,
            "created": self.created,
            "last_patient": self.last_patient,
            "strata": [{"benchmark": b.benchmark, "model": m} for b in self.benchmarks for m in b.models],
            "benchmarks": {
                b.benchmark: {
                    "study": b.study,
                    "models": list(b.models),
                    "judged_items": dict(b.judged),
                    "eligible_items": b.eligible,
                    "binary_judge": b.binary,
                    "patients": list(b.patients),
                    "items": list(b.items),
                    "patient_of": dict(b.patient_of),
                    "answers": {i: dict(a) for i, a in b.answers.items()},
                }
                for b in self.benchmarks
            },
        }

    def study_design(self, benchmark: str) -> dict[str, Any]:
        """What the benchmark's study config records of the design: the draw, without a model's
        name (the review app's admin pages are blinded too); the file keeps the rest."""
        b = self.benchmark(benchmark)
        return {
            "by": "clinieval suite sample",
            "sample": self.name,
            "suite": self.suite,
            "benchmark": b.benchmark,
            "seed": self.seed,
            "n": self.n,
            "kind": self.kind,
            "created": self.created,
            "strata": len(b.models),
            "judged_items": b.eligible,
            "patients": list(b.patients),
            "items": list(b.items),
            "last_patient": self.last_patient,
        }

    @classmethod
    def from_json(cls, data: Any, where: str) -> SampleDesign:
        """A design as :meth:`to_json` wrote it; anything else is one error naming ``where``."""
        try:
            if not isinstance(data, dict) or data.get("format") != FORMAT:
                raise ValueError(f"not a clinician sample design (format {FORMAT})")
            benchmarks = tuple(
                BenchmarkSample(
                    benchmark=str(name),
                    study=str(b["study"]),
                    models=tuple(str(m) for m in b["models"]),
                    judged={str(k): int(v) for k, v in b["judged_items"].items()},
                    eligible=int(b["eligible_items"]),
                    patients=tuple(str(p) for p in b["patients"]),
                    items=tuple(str(i) for i in b["items"]),
                    patient_of={str(k): str(v) for k, v in b["patient_of"].items()},
                    answers={str(i): {str(k): str(m) for k, m in a.items()} for i, a in b["answers"].items()},
                    binary=bool(b["binary_judge"]),
                )
                for name, b in data["benchmarks"].items()
            )
            return cls(
                name=str(data["name"]),
                seed=int(data["seed"]),
                n=int(data["n"]),
                kind=str(data["kind"]),
                created=str(data["created"]),
                suite=str(data["suite"]),
                benchmarks=benchmarks,
                last_patient=str(data.get("last_patient", LAST_PATIENT)),
            )
        except (KeyError, TypeError, ValueError, AttributeError) as e:
            raise UserError(f"{where}: not a readable clinician sample design ({e})") from None


def design_path(run_dir: Path, name: str) -> Path:
    """Where the sample called ``name`` of the suite at ``run_dir`` is recorded."""
    return run_dir / FOLDER / f"{name}.json"


def read_design(path: Path) -> SampleDesign:
    """The design at ``path`` (a file ``clinieval suite sample`` wrote)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(f"{path}: no clinician sample here; draw one with `clinieval suite sample`") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise UserError(f"{path}: unreadable clinician sample design ({e})") from None
    return SampleDesign.from_json(data, str(path))


def write_design(path: Path, design: SampleDesign) -> None:
    from clinieval.fsutil import atomic_write_json

    atomic_write_json(path, design.to_json())


def draw(
    eligible: Sequence[str], patient_of: Mapping[str, str], n: int, seed: int, benchmark: str
) -> tuple[list[str], list[str]]:
    """The patients drawn and their items (in draw order, a patient's items together and sorted)
    from ``eligible`` (see the module docstring for the rule). The shuffle is seeded by the seed
    and the benchmark's name, so two benchmarks of one suite are drawn independently."""
    by_patient: dict[str, list[str]] = {}
    for item in sorted(eligible):
        by_patient.setdefault(patient_of.get(item, item), []).append(item)
    order = sorted(by_patient)
    random.Random(json.dumps([seed, benchmark])).shuffle(order)
    patients: list[str] = []
    items: list[str] = []
    for patient in order:
        if len(items) >= n:
            break
        patients.append(patient)
        items.extend(by_patient[patient])
    return patients, items


def answer_keys(models: Sequence[str], seed: int, benchmark: str, item: str) -> dict[str, str]:
    """Blind answer keys for one item (``a1``, ``a2`` ... -> model): the models in a seeded order
    of their own per item, so a key names no model and the same key is not the same model across
    items."""
    order = list(models)
    random.Random(json.dumps([seed, benchmark, item])).shuffle(order)
    return {f"a{j}": model for j, model in enumerate(order, 1)}
