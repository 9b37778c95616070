"""Train/test leakage of MedEval's splits on the synthetic corpus (synthetic — not MedEval's data).

For each corpus size, write the synthetic corpus, load it as a task does (``load_folder``, which
assigns the splits), and count, per level, the test (and validation) items whose normalised text
(lower case, whitespace collapsed, punctuation stripped at the ends) has a copy in train, and the
share of items whose normalised text occurs more than once in the whole corpus. Sentences are
compared on their sentence, reports on their full text and, separately, on their FINDINGS (the
summarization input) and their IMPRESSION (the summary). For the reports it also counts the
sentences of the test reports (FINDINGS and IMPRESSION, as the report splitter cuts them) with a
copy in a train report, and the test reports sharing a sentence with a train report: any, and one
in at most 5 reports (not boilerplate). ``--boilerplate`` first measures a sentence table of 300
reports in which one sentence is in 200 of them, loaded the same way: how many reports have
sentences in more than one split. With ``--tfidf`` it also fits the TF-IDF baseline on abnormality and
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
from clinieval.benchmarks.medeval.sections import split_sentences
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


def report_sentences_shared(reports: Sequence[Any], k: int = 5) -> dict[str, Any]:
    """Test reports' sentences with a copy in a train report, and test reports sharing any."""

    def keys(r: Any) -> set[str]:
        return {normalised(x) for x in split_sentences(r.findings) + split_sentences(r.impression)} - {""}

    spread = Counter(k for r in reports for k in keys(r))
    train = {k for r in reports if r.split == "train" for k in keys(r)}
    test = [keys(r) for r in reports if r.split == "test"]
    return {
        "test_reports": len(test),
        "test_sentences": sum(len(t) for t in test),
        "test_sentences_in_train": sum(len(t & train) for t in test),
        "test_reports_sharing_any": sum(bool(t & train) for t in test),
        "test_reports_sharing_not_boilerplate": sum(any(spread[x] <= k for x in t & train) for t in test),
    }


def boilerplate_table(seed: int) -> dict[str, Any]:
    """300 reports of 2-4 sentences of their own, 200 of them also holding one common sentence,
    as a sentence table with a report_id column: how many reports straddle splits."""
    import random

    rng = random.Random(5)
    rows = ["id,sentence,domain,report_id"]
    for r in range(300):
        texts = [f"Report {r} finding {n}." for n in range(rng.randint(2, 4))]
        if r % 3:
            texts.insert(rng.randrange(len(texts) + 1), "The heart size is normal.")
        rows += [f"s{r}-{n},{t},chest x-ray,study{r}" for n, t in enumerate(texts)]
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "sentences.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
        data = load_folder(Path(tmp), seed=seed)
    per_report: dict[str, set[Any]] = {}
    for item in data.sentences:
        per_report.setdefault(item.id.split("-")[0], set()).add(item.split)
    return {
        "reports": len(per_report),
        "reports_across_splits": sum(len(s) > 1 for s in per_report.values()),
        "split_info": data.split_info()["sentences"],
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
        "reports (impression)": leakage(data.reports, lambda r: r.impression),
        "report sentences": report_sentences_shared(data.reports),
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
    ap.add_argument(
        "--boilerplate",
        action="store_true",
        help="also the 300-report table with one sentence in 200 reports",
    )
    args = ap.parse_args(argv)
    table = boilerplate_table(args.seed) if args.boilerplate else None
    results = [measure(s, r, args.seed, args.tfidf) for s, r in args.size]
    if args.json:
        print(json.dumps({"boilerplate_table": table, "synthetic": results}, indent=2))
        return 0
    print(f"clinieval from {Path(clinieval.__file__).parent}")
    if table is not None:
        print(
            f"boilerplate table: {table['reports_across_splits']} of {table['reports']} reports across splits"
        )
    head = f"{'size':>10} {'level':>19} {'test in train':>15} {'val in train':>13} {'repeated':>9}"
    print(head)
    for res in results:
        for level in ("sentences", "reports (text)", "reports (findings)", "reports (impression)"):
            x = res[level]
            print(
                f"{res['size']:>10} {level:>19} {x['test_in_train']:>6} of {x['test']:<6} "
                f"{x['validation_in_train']:>4} of {x['validation']:<4} {100 * x['repeated_share']:>8.1f}%"
            )
    for res in results:
        x = res["report sentences"]
        print(
            f"{res['size']:>10} test report sentences in a train report {x['test_sentences_in_train']} of "
            f"{x['test_sentences']}; test reports sharing one: {x['test_reports_sharing_any']} of "
            f"{x['test_reports']}, not boilerplate (in <= 5 reports): "
            f"{x['test_reports_sharing_not_boilerplate']}"
        )
    for res in results:
        if res["tfidf_test_accuracy"]:
            shown = ", ".join(f"{t} {a}" for t, a in res["tfidf_test_accuracy"].items())
            print(f"{res['size']:>10} TF-IDF test accuracy: {shown}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
