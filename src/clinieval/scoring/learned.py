"""Optional learned metrics (COMET, BLEURT, UniEval, LENS) on checkpoints the user supplies.

These metrics are neural models with heavy, conflicting dependencies (pinned torch, transformers,
pytorch-lightning or TensorFlow versions), so clinieval never installs their packages and never
downloads a checkpoint. Each adapter imports its package only when scoring, loads the checkpoint
the user points to, and otherwise returns :class:`NotAvailable` with the reason. A metric that
cannot run is therefore reported as not available in the results: it is never left out silently
and never replaced by a made-up number.

    metric = learned_metric("comet", checkpoint="~/models/wmt22-comet-da")
    outcome = metric.compute(predictions, references, sources=sources)
    if isinstance(outcome, NotAvailable):
        print(outcome)                       # comet: not available (package unbabel-comet ...)

What is tested here: unknown names, bad inputs, a missing checkpoint path, and the
not-available paths (no checkpoint, package not installed, checkpoint that fails to load), all
for real. The code that loads a real checkpoint and scores with it is written against each
package's documented API but has never run in this repository (the packages are not installed
and no checkpoint is available offline): treat the first real run as its test.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import inspect
import io
import math
import sys
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

from clinieval.errors import UserError
from clinieval.scoring.text.base import MetricResult, References, prepare_inputs


@dataclass(frozen=True, slots=True)
class NotAvailable:
    """A metric that was asked for but could not run here, with the reason (one line)."""

    metric: str
    reason: str

    def __str__(self) -> str:
        return f"{self.metric}: not available ({self.reason})"


LearnedOutcome = dict[str, MetricResult] | NotAvailable
"""What ``LearnedMetric.compute`` returns: results by output name, or why the metric could not run."""


@dataclass(frozen=True)
class LearnedMetric(ABC):
    """Shared flow: check inputs, check availability, load once, score, pack results.

    A missing ``checkpoint`` path is a UserError (a typo should stop the run), while a metric
    configured without a checkpoint, or whose package is absent or whose checkpoint fails to
    load, is NotAvailable (the rest of the evaluation goes on and the gap shows in the results).
    """

    checkpoint: str | None = None
    batch_size: int = 16
    _loaded: list[Any] = field(default_factory=list, init=False, repr=False, compare=False)

    name: ClassVar[str]
    distribution: ClassVar[str]  # what to pip install
    needs_sources: ClassVar[bool] = False
    needs_references: ClassVar[bool] = True
    single_reference: ClassVar[bool] = False  # the model takes one reference per item
    checkpoint_hint: ClassVar[str]

    def __post_init__(self) -> None:
        if self.checkpoint is not None and not self.path.exists():
            raise UserError(f"{self.name}: checkpoint {self.path} does not exist")
        if self.batch_size < 1:
            raise UserError(f"{self.name}: batch_size must be >= 1")

    @property
    def path(self) -> Path:
        if self.checkpoint is None:
            raise UserError(f"{self.name}: no checkpoint given")
        return Path(self.checkpoint).expanduser()

    @property
    def outputs(self) -> tuple[str, ...]:
        return (self.name,)

    @property
    def scale(self) -> float:
        """The score's nominal top (learned metrics are not strictly bounded)."""
        return 1.0

    @abstractmethod
    def _module(self) -> str | None:
        """The import name that provides the metric, or None when none is installed."""

    @abstractmethod
    def _load(self) -> Any: ...

    @abstractmethod
    def _score(
        self, model: Any, preds: list[str], refs: list[tuple[str, ...]] | None, srcs: list[str] | None
    ) -> dict[str, list[float]]: ...

    def availability(self) -> NotAvailable | None:
        """None when the metric can run; otherwise why not (checked without importing anything)."""
        if self.checkpoint is None:
            return NotAvailable(
                self.name, f"no checkpoint given; pass checkpoint=PATH to a local {self.checkpoint_hint}"
            )
        if self._module() is None:
            return NotAvailable(self.name, self._missing_package())
        return None

    def _missing_package(self) -> str:
        return (
            f"package {self.distribution} is not installed; install it (in its own virtualenv if its "
            "pins clash with clinieval's) to use this metric"
        )

    def compute(
        self,
        predictions: Sequence[str],
        references: References | None = None,
        sources: Sequence[str] | None = None,
    ) -> LearnedOutcome:
        preds, refs, srcs = self._inputs(predictions, references, sources)
        missing = self.availability()
        if missing is not None:
            return missing
        if not self._loaded:
            try:
                self._loaded.append(self._load())
            except Exception as e:  # any failure to load means "not available", with the reason
                first_line = (str(e).strip().splitlines() or [""])[0]
                return NotAvailable(
                    self.name, f"loading {self.path} failed: {type(e).__name__}: {first_line}"
                )
        columns = self._score(self._loaded[0], preds, refs, srcs)
        meta = self._metadata()
        return {
            out: _result(out, values, len(preds), self.scale, meta)
            for out, values in columns.items()  # the adapter decides the outputs' order
        }

    def _inputs(
        self, predictions: Sequence[str], references: References | None, sources: Sequence[str] | None
    ) -> tuple[list[str], list[tuple[str, ...]] | None, list[str] | None]:
        if references is None:
            if self.needs_references:
                raise UserError(f"{self.name}: needs references (one per prediction)")
            preds, _ = prepare_inputs(self.name, predictions, [""] * len(predictions))
            refs = None
        else:
            preds, refs = prepare_inputs(self.name, predictions, references)
            if self.single_reference and any(len(r) != 1 for r in refs):
                raise UserError(f"{self.name}: takes exactly one reference per prediction")
        if sources is None:
            if self.needs_sources:
                raise UserError(
                    f"{self.name}: needs the source texts: pass sources=[...] (one per prediction)"
                )
            return preds, refs, None
        if isinstance(sources, str) or len(sources) != len(preds):
            n = 1 if isinstance(sources, str) else len(sources)
            raise UserError(
                f"{self.name}: {len(preds)} predictions but {n} sources; give one source per prediction"
            )
        if not all(isinstance(s, str) for s in sources):
            raise UserError(f"{self.name}: every source must be a string")
        return preds, refs, list(sources)

    def _metadata(self) -> dict[str, object]:
        module = self._module()
        return {
            "package": self.distribution,
            "module": module,
            "version": _version_of(module),
            "checkpoint": str(self.path.resolve()),
            "batch_size": self.batch_size,
            "device": "cpu",
        }


def _result(name: str, values: list[float], n: int, scale: float, meta: dict[str, object]) -> MetricResult:
    """Pack one output; a wrong count or a NaN from the model is an error, never passed along."""
    vals = tuple(float(v) for v in values)
    if len(vals) != n:
        raise RuntimeError(f"{name}: the model returned {len(vals)} scores for {n} predictions")
    bad = [i for i, v in enumerate(vals) if not math.isfinite(v)]
    if bad:
        raise RuntimeError(f"{name}: the model returned a non-finite score for item {bad[0]}")
    return MetricResult(name, vals, math.fsum(vals) / len(vals), "mean", scale, meta)


def _version_of(module: str | None) -> str | None:
    if module is None:
        return None
    mod = sys.modules.get(module)
    version = getattr(mod, "__version__", None)
    return str(version) if version is not None else None


def _installed(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def _single_refs(refs: list[tuple[str, ...]] | None) -> list[str] | None:
    return None if refs is None else [r[0] for r in refs]


@dataclass(frozen=True)
class Comet(LearnedMetric):
    """COMET (unbabel-comet): ``load_from_checkpoint(path).predict([{src, mt, ref}], gpus=0)``.

    ``checkpoint`` is the ``.ckpt`` file or the model folder holding ``checkpoints/model.ckpt``
    (e.g. a local copy of Unbabel/wmt22-comet-da). Needs sources; references are optional so
    reference-free (QE) checkpoints work too. Corpus value: the mean, which is COMET's system score.
    """

    name: ClassVar[str] = "comet"
    distribution: ClassVar[str] = "unbabel-comet"
    needs_sources: ClassVar[bool] = True
    needs_references: ClassVar[bool] = False
    single_reference: ClassVar[bool] = True
    checkpoint_hint: ClassVar[str] = "COMET model folder or .ckpt file (e.g. wmt22-comet-da)"

    def _module(self) -> str | None:
        return "comet" if _installed("comet") else None

    def _ckpt(self) -> Path:
        inner = self.path / "checkpoints" / "model.ckpt"
        return inner if self.path.is_dir() and inner.is_file() else self.path

    def _load(self) -> Any:
        comet = importlib.import_module("comet")
        return comet.load_from_checkpoint(str(self._ckpt()))

    def _score(
        self, model: Any, preds: list[str], refs: list[tuple[str, ...]] | None, srcs: list[str] | None
    ) -> dict[str, list[float]]:
        assert srcs is not None
        single = _single_refs(refs)
        data: list[dict[str, str]] = [{"src": s, "mt": p} for s, p in zip(srcs, preds, strict=True)]
        if single is not None:
            for row, ref in zip(data, single, strict=True):
                row["ref"] = ref
        out = model.predict(data, batch_size=self.batch_size, gpus=0, progress_bar=False)
        scores = out.scores if hasattr(out, "scores") else out[0]  # COMET >= 2.0 / 1.x
        return {self.name: [float(s) for s in scores]}


@dataclass(frozen=True)
class Bleurt(LearnedMetric):
    """BLEURT from a local checkpoint, with ``bleurt-pytorch`` if installed, else Google's
    TensorFlow ``bleurt`` package (``score.BleurtScorer(path).score(references=, candidates=)``).

    Several references per item: the best score (BLEURT itself takes one).
    """

    name: ClassVar[str] = "bleurt"
    distribution: ClassVar[str] = "bleurt-pytorch (or Google's bleurt)"
    checkpoint_hint: ClassVar[str] = "BLEURT checkpoint folder (e.g. BLEURT-20-D12)"

    def _module(self) -> str | None:
        for name in ("bleurt_pytorch", "bleurt"):
            if _installed(name):
                return name
        return None

    def _load(self) -> Any:
        if self._module() == "bleurt_pytorch":
            bp = importlib.import_module("bleurt_pytorch")
            model = bp.BleurtForSequenceClassification.from_pretrained(str(self.path))
            model.eval()
            return ("pytorch", model, bp.BleurtTokenizer.from_pretrained(str(self.path)))
        score = importlib.import_module("bleurt.score")
        return ("tensorflow", score.BleurtScorer(str(self.path)), None)

    def _pairs(self, model: Any, cands: list[str], refs: list[str]) -> list[float]:
        kind, scorer, tokenizer = model
        if kind == "tensorflow":
            return [
                float(s) for s in scorer.score(references=refs, candidates=cands, batch_size=self.batch_size)
            ]
        import torch

        out: list[float] = []
        with torch.no_grad():
            for i in range(0, len(cands), self.batch_size):
                enc = tokenizer(
                    refs[i : i + self.batch_size],
                    cands[i : i + self.batch_size],
                    padding="longest",
                    truncation=True,
                    return_tensors="pt",
                )
                out.extend(float(v) for v in scorer(**enc).logits.flatten().tolist())
        return out

    def _score(
        self, model: Any, preds: list[str], refs: list[tuple[str, ...]] | None, srcs: list[str] | None
    ) -> dict[str, list[float]]:
        assert refs is not None
        owners = [i for i, rs in enumerate(refs) for _ in rs]
        flat = self._pairs(model, [preds[i] for i in owners], [r for rs in refs for r in rs])
        best = [-float("inf")] * len(preds)
        for i, v in zip(owners, flat, strict=True):
            best[i] = max(best[i], v)
        return {self.name: best}


UNIEVAL_DIMENSIONS = ("coherence", "consistency", "fluency", "relevance")


@dataclass(frozen=True)
class UniEval(LearnedMetric):
    """UniEval for summaries (coherence, consistency, fluency, relevance, and their mean).

    UniEval has no installable package: ``repo`` is a checkout of its code (the folder holding
    ``metric/`` and ``utils.py``), put on ``sys.path`` when scoring. Its ``SumEvaluator`` names
    the hub model itself, so the adapter builds one around
    ``UniEvaluator(model_name_or_path=checkpoint)`` instead (a local copy of unieval-sum).
    Needs sources (the documents) and, for relevance, references. Consistency and fluency split
    summaries into sentences with NLTK's Punkt data, which clinieval does not provide.
    """

    repo: str | None = None
    dimensions: tuple[str, ...] = UNIEVAL_DIMENSIONS
    max_length: int = 1024

    name: ClassVar[str] = "unieval"
    distribution: ClassVar[str] = "UniEval (code checkout)"
    needs_sources: ClassVar[bool] = True
    needs_references: ClassVar[bool] = False  # only relevance uses them
    single_reference: ClassVar[bool] = True
    checkpoint_hint: ClassVar[str] = "copy of the unieval-sum model folder"

    def __post_init__(self) -> None:
        LearnedMetric.__post_init__(self)
        object.__setattr__(self, "dimensions", tuple(self.dimensions))
        bad = [d for d in self.dimensions if d not in UNIEVAL_DIMENSIONS]
        if bad or not self.dimensions:
            raise UserError(
                f"unieval: unknown dimension(s) {bad}; choose from {', '.join(UNIEVAL_DIMENSIONS)}"
            )
        if self.repo is not None and not (Path(self.repo).expanduser() / "metric" / "evaluator.py").is_file():
            raise UserError(f"unieval: {self.repo} is not a UniEval checkout (no metric/evaluator.py)")

    @property
    def outputs(self) -> tuple[str, ...]:
        return (*(f"unieval_{d}" for d in self.dimensions), "unieval_overall")

    def _inputs(
        self, predictions: Sequence[str], references: References | None, sources: Sequence[str] | None
    ) -> tuple[list[str], list[tuple[str, ...]] | None, list[str] | None]:
        if references is None and "relevance" in self.dimensions:
            raise UserError(
                "unieval: relevance needs references; pass them or leave relevance out of dimensions"
            )
        return LearnedMetric._inputs(self, predictions, references, sources)

    def _module(self) -> str | None:
        return "metric.evaluator" if self.repo is not None else None

    def _missing_package(self) -> str:
        return "UniEval has no package to install; pass repo=PATH, a checkout of its code"

    def _load(self) -> Any:
        if self.repo is not None and str(Path(self.repo).expanduser()) not in sys.path:
            sys.path.insert(0, str(Path(self.repo).expanduser()))
        evaluator = importlib.import_module("metric.evaluator")
        scorer = importlib.import_module("metric.scorer")
        utils = importlib.import_module("utils")
        ev = evaluator.SumEvaluator.__new__(evaluator.SumEvaluator)
        ev.scorer = scorer.UniEvaluator(
            model_name_or_path=str(self.path), max_length=self.max_length, device="cpu", cache_dir=None
        )
        ev.task = "summarization"
        ev.dimensions = list(UNIEVAL_DIMENSIONS)
        return ev, utils.convert_to_json

    def _score(
        self, model: Any, preds: list[str], refs: list[tuple[str, ...]] | None, srcs: list[str] | None
    ) -> dict[str, list[float]]:
        ev, convert_to_json = model
        single = _single_refs(refs)
        data = convert_to_json(output_list=preds, src_list=srcs, ref_list=single or [""] * len(preds))
        with contextlib.redirect_stdout(io.StringIO()):  # UniEval prints progress lines
            rows = ev.evaluate(data, dims=list(self.dimensions), overall=True, print_result=False)
        keys = [*self.dimensions, "overall"]
        return {f"unieval_{k}": [float(row[k]) for row in rows] for k in keys}


@dataclass(frozen=True)
class Lens(LearnedMetric):
    """LENS (lens-metric, for simplification): ``LENS(path, rescale=True).score(complex,
    simplified, references)``, 0-100. Sources are the complex (original) texts; every item may
    have several references (LENS keeps the best).
    """

    rescale: bool = True

    name: ClassVar[str] = "lens"
    distribution: ClassVar[str] = "lens-metric"
    needs_sources: ClassVar[bool] = True
    checkpoint_hint: ClassVar[str] = "LENS checkpoint (the .ckpt file of davidheineman/lens)"

    @property
    def scale(self) -> float:
        return 100.0 if self.rescale else 1.0

    def _module(self) -> str | None:
        # Another PyPI package also installs a top-level `lens`; only lens-metric's has LENS.
        return "lens" if _installed("lens") else None

    def _load(self) -> Any:
        lens = importlib.import_module("lens")
        if not hasattr(lens, "LENS"):
            raise ImportError("the installed `lens` module is not lens-metric (it has no LENS class)")
        return lens.LENS(str(self.path), rescale=self.rescale)

    def _score(
        self, model: Any, preds: list[str], refs: list[tuple[str, ...]] | None, srcs: list[str] | None
    ) -> dict[str, list[float]]:
        assert refs is not None and srcs is not None
        params = inspect.signature(model.score).parameters
        device = {"gpus": 0} if "gpus" in params else {}
        scores = model.score(srcs, preds, [list(r) for r in refs], batch_size=self.batch_size, **device)
        return {self.name: [float(s) for s in scores]}


def _learned_catalog() -> dict[str, type[LearnedMetric]]:
    return {"comet": Comet, "bleurt": Bleurt, "unieval": UniEval, "lens": Lens}


def learned_metric_names() -> tuple[str, ...]:
    return tuple(_learned_catalog())


def learned_metric(name: str, checkpoint: str | None = None, **options: Any) -> LearnedMetric:
    """A learned metric by name; without ``checkpoint`` it reports NotAvailable when computed."""
    catalog = _learned_catalog()
    cls = catalog.get(name)
    if cls is None:
        raise UserError(f"unknown learned metric {name!r}; choose from {', '.join(catalog)}")
    allowed = sorted(
        p for p in inspect.signature(cls).parameters if p not in ("checkpoint",) and not p.startswith("_")
    )
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        raise UserError(f"{name}: unknown option(s) {', '.join(unknown)}; valid: {', '.join(allowed)}")
    return cls(checkpoint=checkpoint, **options)
