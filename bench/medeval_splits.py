"""Train/test leakage of MedEval's splits on the synthetic corpus (synthetic — not MedEval's data).

For each corpus size, write the synthetic corpus, load it as a task does (``load_folder``, which
assigns the splits), and count, per level, the test (and validation) items whose normalised text
(lower case, whitespace collapsed, punctuation stripped at the ends) has a copy in train, and the
share of items whose normalised text occurs more than once in the whole corpus. Sentences are
compared on their sentence, reports on their full text and, separately, on their FINDINGS (the
summarization input). With ``--tfidf`` it also fits the TF-IDF baseline on abnormality and
ambiguity and prints its test accuracy (what a copy of a test sentence in train inflates). The
counting is done here, not by clinieval, so the same script measures an older checkout too:

    .venv/bin/python bench/medeval_splits.py [--tfidf]              # this checkout
    git worktree add /tmp/splits-before <commit>
    PYTHONPATH=/tmp/splits-before/src .venv/bin/python bench/medeval_splits.py   # that one
"""

from __future__ import annotations

import argparse
import json
import re
import string
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import clinieval
from clinieval.benchmarks.medeval.data import load_folder
from clinieval.benchmarks.medeval.synth.writer import write_synthetic

_SPACE = re.compile(r"\s+")
_ENDS = string.punctuation + string.whitespace


def normalised(text: str) -> str:
    return _SPACE.sub(" ", text.lower()).strip(_ENDS)


def leakage(items: Sequence[Any], text: Callable[[Any], str]) -> dict[str, Any]:
    """Copies across splits and within the whole level, for one text of each item."""
    keys = [normalised(text(x)) for x in items]
    train = {k for x, k in zip(items, keys, strict=True) if x.split == "train" and k}
    test = [k for x, k in zip(items, keys, strict=True) if x.split == "test" and k]
    val = [k for x, k in zip(items, keys, strict=True) if x.split == "validation" and k]
    counts = Counter(k for k in keys if k)
    repeated = sum(n for n in counts.values() if n > 1)
    return {
        "items": len(items),
        "test": len(test),
        "test_in_train": sum(k in train for k in test),
        "validation": len(val),
        "validation_in_train": sum(k in train for k in val),
        "distinct": len(counts),
        "repeated_share": repeated / max(1, sum(counts.values())),
    }


def _tfidf(data: Any, out: Path, seed: int) -> dict[str, float]:
    from clinieval.benchmarks.medeval.baselines.train import train_baseline

    accuracy: dict[str, float] = {}
    for task in ("abnormality", "ambiguity"):
        trained = train_baseline("tfidf", task, data.items_for(task), out, seed=seed)
        accuracy[task] = round(float(trained.card["metrics"]["accuracy"]), 1)
    return accuracy


def measure(sentences: int, reports: int, seed: int, tfidf: bool = False) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "synthetic"
        started = time.perf_counter()
        write_synthetic(folder, seed=seed, sentences=sentences, reports=reports)
        written = time.perf_counter() - started
        data = load_folder(folder, seed=seed)
        accuracy = _tfidf(data, Path(tmp) / "baselines", seed) if tfidf else {}
    return {
        "size": f"{sentences}/{reports}",
        "seed": seed,
        "write_seconds": round(written, 3),
        "sentences": leakage(data.sentences, lambda s: s.sentence),
        "reports (text)": leakage(data.reports, lambda r: r.text),
        "reports (findings)": leakage(data.reports, lambda r: r.findings),
        "split_info": data.split_info(),
        "tfidf_test_accuracy": accuracy,
    }


def _size(text: str) -> tuple[int, int]:
    sentences, _, reports = text.partition(":")
    return int(sentences), int(reports)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument(
        "--size",
        type=_size,
        nargs="+",
        default=[(600, 300), (2000, 1000)],
        help="SENTENCES:REPORTS (default: the demo's 600:300 and the default 2000:1000)",
    )
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tfidf", action="store_true", help="also the TF-IDF baselines' test accuracy")
    ap.add_argument("--json", action="store_true", help="print the full results as JSON")
    args = ap.parse_args(argv)
    results = [measure(s, r, args.seed, args.tfidf) for s, r in args.size]
    if args.json:
        print(json.dumps(results, indent=2))
        return 0
    print(f"clinieval from {Path(clinieval.__file__).parent}")
    head = f"{'size':>10} {'level':>19} {'test in train':>15} {'val in train':>13} {'repeated':>9}"
    print(head)
    for res in results:
        for level in ("sentences", "reports (text)", "reports (findings)"):
            x = res[level]
            print(
                f"{res['size']:>10} {level:>19} {x['test_in_train']:>6} of {x['test']:<6} "
                f"{x['validation_in_train']:>4} of {x['validation']:<4} {100 * x['repeated_share']:>8.1f}%"
            )
    for res in results:
        if res["tfidf_test_accuracy"]:
            shown = ", ".join(f"{t} {a}" for t, a in res["tfidf_test_accuracy"].items())
            print(f"{res['size']:>10} TF-IDF test accuracy: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
