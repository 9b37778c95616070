"""What every text metric shares: the result type, the protocol, input checks, and tokenisation.

Kept apart from the metrics themselves because everything else builds on it without needing
any one metric: the overlap metrics, BERTScore and the name registry all speak
:class:`MetricResult` and :func:`prepare_inputs`.
:func:`word_tokens` and the cached stemmer are here because results record the tokenizer by its
path and because the benchmarks count words with the same function. Importing this module loads
no heavy library (nltk only when a stemmer is first asked for).
"""

from __future__ import annotations

import functools
import importlib.metadata
import math
import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from clinieval.errors import UserError

References = Sequence[str] | Sequence[Sequence[str]]
"""One reference string per prediction, or one non-empty sequence of references per prediction."""

Refs = list[tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """One metric's scores for a batch: a value per item plus the corpus-level value.

    ``corpus_method`` says how ``corpus`` was obtained: ``"library"`` (the library's own
    corpus statistic, pooled over all items) or ``"mean"`` (the mean of ``values``).
    ``metadata`` records everything needed to reproduce the numbers: library and version,
    tokenisation, options, and for BERTScore the model and layer.
    """

    name: str
    values: tuple[float, ...]
    corpus: float
    corpus_method: str
    scale: float
    metadata: Mapping[str, object]


class TextMetric(Protocol):
    """A metric over (prediction, reference) text pairs."""

    @property
    def name(self) -> str: ...

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of the results ``compute`` returns; the first is the metric's main value."""
        ...

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        """All outputs for a batch (one pass over the data)."""
        ...

    def sentence(self, predictions: Sequence[str], references: References) -> list[float]:
        """The main output's per-item values."""
        ...

    def corpus(self, predictions: Sequence[str], references: References) -> float:
        """The main output's corpus-level value."""
        ...


# --------------------------------------------------------------------------------------------
# Input checks shared by every metric


def prepare_inputs(metric: str, predictions: Sequence[str], references: References) -> tuple[list[str], Refs]:
    """Validate a batch and normalise references to a tuple of strings per item.

    Raises a one-line UserError for anything a caller can get wrong: a bare string instead of
    a list, unequal lengths, a missing (None) prediction, an empty reference list, an empty batch.
    """
    if isinstance(predictions, str) or isinstance(references, str):
        raise UserError(f"{metric}: predictions and references must be lists of strings, not one string")
    preds = list(predictions)
    refs_in = list(references)
    if len(preds) != len(refs_in):
        raise UserError(
            f"{metric}: {len(preds)} predictions but {len(refs_in)} references; "
            "give one reference (or one list of references) per prediction"
        )
    if not preds:
        raise UserError(f"{metric}: nothing to score (0 predictions)")
    for i, p in enumerate(preds):
        if not isinstance(p, str):
            raise UserError(
                f"{metric}: prediction {i} is {type(p).__name__}, not text; "
                "drop items without generated text before scoring"
            )
    return preds, [_item_refs(metric, i, r) for i, r in enumerate(refs_in)]


def _item_refs(metric: str, i: int, ref: object) -> tuple[str, ...]:
    if isinstance(ref, str):
        return (ref,)
    if isinstance(ref, Sequence) and ref and all(isinstance(r, str) for r in ref):
        return tuple(ref)
    raise UserError(f"{metric}: reference {i} must be a string or a non-empty list of strings")


def _finite(name: str, values: Sequence[float], corpus: float) -> None:
    """A NaN or infinity here is a bug (every library case is handled), never a score to pass on."""
    for i, v in enumerate(values):
        if not math.isfinite(v):
            raise RuntimeError(f"{name}: non-finite value {v} for item {i}")
    if not math.isfinite(corpus):
        raise RuntimeError(f"{name}: non-finite corpus value {corpus}")


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def library_version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def metric_result(
    name: str,
    values: Sequence[float],
    corpus: float | None,
    *,
    scale: float,
    metadata: Mapping[str, object],
) -> MetricResult:
    """Pack a result; ``corpus=None`` means the mean of the item values."""
    vals = tuple(float(v) for v in values)
    method = "mean" if corpus is None else "library"
    corp = _mean(vals) if corpus is None else float(corpus)
    _finite(name, vals, corp)
    return MetricResult(name, vals, corp, method, scale, dict(metadata))


class BaseTextMetric(ABC):
    """``sentence``/``corpus`` from ``compute``; subclasses implement ``compute`` and ``outputs``."""

    name: str

    @property
    @abstractmethod
    def outputs(self) -> tuple[str, ...]: ...

    @abstractmethod
    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]: ...

    def sentence(self, predictions: Sequence[str], references: References) -> list[float]:
        return list(self.compute(predictions, references)[self.outputs[0]].values)

    def corpus(self, predictions: Sequence[str], references: References) -> float:
        return self.compute(predictions, references)[self.outputs[0]].corpus


# --------------------------------------------------------------------------------------------
# Tokenisation shared by the NLTK metrics (GLEU, METEOR)

WORD_PATTERN = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")


def word_tokens(text: str) -> list[str]:
    """The tokenisation clinieval feeds NLTK's GLEU and METEOR (which expect token lists).

    A token is a run of letters/digits (Unicode-aware ``\\w``), joined across internal
    apostrophes or hyphens ("don't", "x-ray"); every other non-space character is a token on its
    own, so "fever." gives "fever", ".". This replaces NLTK's ``word_tokenize``, which needs the
    Punkt model, a download. Case is kept (METEOR lowercases itself; GLEU is case-sensitive).
    """
    return WORD_PATTERN.findall(text)


class _CachedStemmer:
    """NLTK's Porter stemmer with memory: stemming dominates ROUGE and METEOR time, and a
    word's stem never changes, so each distinct word is stemmed once per process."""

    def __init__(self) -> None:
        from nltk.stem.porter import PorterStemmer

        self.stem: Callable[[str], str] = functools.lru_cache(maxsize=1 << 18)(PorterStemmer().stem)


@functools.cache
def cached_stemmer() -> _CachedStemmer:
    return _CachedStemmer()
