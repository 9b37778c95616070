"""Text metrics by name: :func:`text_metric`, :func:`text_metric_names` and :func:`score_texts`.

The one module that knows every metric class, so the metric modules need not know each other;
the command line and :mod:`clinieval.engine.rescore` name metrics (``rouge``, ``chrf++``,
``bertscore``) and get them, with their options checked, from here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from clinieval.errors import UserError
from clinieval.scoring.text.base import BaseTextMetric, MetricResult, References, TextMetric
from clinieval.scoring.text.embedding import BertScore
from clinieval.scoring.text.overlap import ROUGE_TYPES, Bleu, Chrf, GoogleBleu, Meteor, Rouge


@dataclass(frozen=True, slots=True)
class _Entry:
    factory: Callable[..., BaseTextMetric]
    fixed: Mapping[str, object]
    summary: str


def _catalog() -> dict[str, _Entry]:
    rouge_one = {t: _Entry(Rouge, {"types": (t,), "name": t}, f"{t} F-measure") for t in ROUGE_TYPES}
    return {
        "rouge": _Entry(Rouge, {}, "rouge1, rouge2, rougeL, rougeLsum F-measures"),
        **rouge_one,
        "bleu": _Entry(Bleu, {}, "sacrebleu BLEU-4, 0-100"),
        "chrf++": _Entry(Chrf, {"word_order": 2, "name": "chrf++"}, "sacrebleu chrF++, 0-100"),
        "chrf": _Entry(Chrf, {"word_order": 0, "name": "chrf"}, "sacrebleu chrF, 0-100"),
        "google_bleu": _Entry(GoogleBleu, {}, "NLTK Google-BLEU (GLEU)"),
        "meteor": _Entry(Meteor, {}, "NLTK METEOR with WordNet"),
        "bertscore": _Entry(BertScore, {}, "BERTScore P/R/F1 (all-MiniLM-L6-v2 by default)"),
    }


def text_metric_names() -> tuple[str, ...]:
    return tuple(_catalog())


def text_metric(name: str, **options: Any) -> TextMetric:
    """A metric by name, with its options (e.g. ``text_metric("rouge", use_stemmer=False)``).

    Unknown names and options are UserErrors that list what is valid.
    """
    catalog = _catalog()
    entry = catalog.get(name)
    if entry is None:
        raise UserError(f"unknown text metric {name!r}; choose from {', '.join(catalog)}")
    allowed = _options(entry)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        valid = ", ".join(allowed) or "none"
        raise UserError(f"text metric {name!r}: unknown option(s) {', '.join(unknown)}; valid: {valid}")
    return entry.factory(**entry.fixed, **options)


def _options(entry: _Entry) -> list[str]:
    """The constructor fields a user may set: all but the name and what the entry fixes."""
    cls: Any = entry.factory
    return sorted(f.name for f in fields(cls) if f.init and f.name != "name" and f.name not in entry.fixed)


def score_texts(
    names: Iterable[str], predictions: Sequence[str], references: References
) -> dict[str, MetricResult]:
    """Several metrics over one batch, keyed by output name (``rouge`` gives four entries)."""
    out: dict[str, MetricResult] = {}
    for name in names:
        out.update(text_metric(name).compute(predictions, references))
    return out
