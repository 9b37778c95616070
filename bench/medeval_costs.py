"""What MedEval's machinery costs besides the model: building prompts, and training the baselines.

* **Prompt building**, per task: clinieval's builder (:func:`sentence_prompt` / :func:`report_prompt`
  with k examples already written as lines) against a bare baseline that only joins a prebuilt
  prefix, the item's text and a prebuilt suffix (the least any harness must do). The ratio shows what the
  builder adds per item; both are timed over the same items, median of ``--rounds``.
* **Baseline training**, per task on the synthetic corpus's train split: TF-IDF + logistic
  regression, and the MiniLM encoder fine-tuned for ``--epochs`` (seconds per epoch reported), each
  with its test accuracy.

    .venv/bin/python bench/medeval_costs.py --sentences 3000 --reports 1500 --epochs 1 --rounds 5
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from clinieval.benchmarks.medeval.baselines.train import CLASSIFIED, train_baseline
from clinieval.benchmarks.medeval.data import MedEvalData, load_folder
from clinieval.benchmarks.medeval.items import ReportItem, SentenceItem
from clinieval.benchmarks.medeval.prompts import (
    PAPER_SHOTS,
    TASKS,
    Shots,
    TaskName,
    data_shots,
    report_prompt,
    sentence_prompt,
)
from clinieval.benchmarks.medeval.synth.writer import write_synthetic
from clinieval.benchmarks.medeval.task import Item, draw_examples, eligible

OUT = Path(__file__).resolve().parent / "out"


def _median_seconds(fn: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        started = time.perf_counter()
        fn()
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def _query_text(task: str, item: SentenceItem | ReportItem) -> str:
    """The part of a prompt that changes from item to item."""
    if isinstance(item, SentenceItem):
        return item.sentence.rstrip(".")
    return item.text if task == "codes" else item.findings.strip().rstrip(".")


def _builders(
    task: TaskName, tested: list[Item], shots: Shots
) -> tuple[Callable[[], object], Callable[[], object]]:
    """clinieval's builder over the items, and the bare baseline: one prebuilt template filled in."""

    def build() -> object:
        return [
            sentence_prompt(task, x, shots) if isinstance(x, SentenceItem) else report_prompt(task, x, shots)
            for x in tested
        ]

    first = tested[0]
    whole = (
        sentence_prompt(task, first, shots)
        if isinstance(first, SentenceItem)
        else report_prompt(task, first, shots)
    )
    prefix, _, suffix = whole.rpartition(_query_text(task, first))
    texts = [_query_text(task, x) for x in tested]

    def bare() -> object:
        return [prefix + t + suffix for t in texts]

    return build, bare


def prompt_costs(loaded: MedEvalData, rounds: int) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for task in TASKS:
        items = [x for x in loaded.items_for(task) if eligible(task, x)]
        train = [x for x in items if x.split == "train"]
        shots = data_shots(task, draw_examples(task, train, PAPER_SHOTS[task], 0))
        tested = [x for x in items if x.split == "test"]
        build, bare = _builders(task, tested, shots)
        ours, base = _median_seconds(build, rounds), _median_seconds(bare, rounds)
        rows.append(
            {
                "task": task,
                "items": len(tested),
                "shots": PAPER_SHOTS[task],
                "clinieval_us_per_item": 1e6 * ours / len(tested),
                "bare_us_per_item": 1e6 * base / len(tested),
                "ratio": ours / base if base else None,
            }
        )
    return rows


def training_costs(loaded: MedEvalData, epochs: int, out: Path) -> list[dict[str, object]]:
    rows = []
    for kind in ("tfidf", "encoder"):
        for task in CLASSIFIED:
            done = train_baseline(kind, task, loaded.items_for(task), out, seed=0, epochs=epochs)
            card = done.card
            rows.append(
                {
                    "kind": kind,
                    "task": task,
                    "train_items": card["split"]["train"],
                    "test_items": card["split"]["test"],
                    "seconds": card["training_seconds"],
                    "seconds_per_epoch": card["training_seconds"] / (epochs if kind == "encoder" else 1),
                    "metrics": card["metrics"],
                }
            )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sentences", type=int, default=3000)
    parser.add_argument("--reports", type=int, default=1500)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp) / "data"
        write_synthetic(data, seed=0, sentences=args.sentences, reports=args.reports)
        loaded = load_folder(data, seed=0)
        prompts = prompt_costs(loaded, args.rounds)
        training = training_costs(loaded, args.epochs, Path(tmp) / "baselines")
    result = {
        "args": vars(args),
        "machine": {"cpus": os.cpu_count(), "python": platform.python_version()},
        "prompts": prompts,
        "training": training,
    }
    OUT.mkdir(exist_ok=True)
    path = OUT / f"medeval_costs-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    for row in prompts:
        print(
            f"prompt {row['task']:<14} {row['clinieval_us_per_item']:8.1f} us/item vs bare "
            f"{row['bare_us_per_item']:6.1f} ({row['ratio']:.1f}x), {row['items']} items, "
            f"{row['shots']} shots"
        )
    for row in training:
        print(
            f"train {row['kind']:<8} {row['task']:<12} {row['seconds']:7.2f} s "
            f"({row['train_items']} train items) test {row['metrics']}"
        )
    print(f"written: {path}")


if __name__ == "__main__":
    main()
