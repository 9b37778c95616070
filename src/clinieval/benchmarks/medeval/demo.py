"""MedEval end to end on the synthetic radiology corpus: every task, both embedded models, zero-shot
and with the paper's number of examples, the trained baselines, and the report.

The corpus is clinieval's synthetic one (not MedEval's data, which is not public): its labels are
known by construction, so the numbers are checkable, but they are not comparable with the paper's.
The embedded models are tiny; the demo shows the method and the report, not clinical ability.
Re-running resumes: the corpus is reused, finished arms ask nothing again. The arms open their
models with the command's endpoint options (``backend``, ``concurrency``: the ``--n-ctx``,
``--timeout``, ``--concurrency``, ``--executor`` ... that ``medeval run`` takes).
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.benchmarks.medeval.task_table import SUMMARIZATION, TASK_TABLE
from clinieval.models.spec import BackendOptions, arm_dir_name

DEMO_STOP = ("\n\n",)
DEMO_MAX_TOKENS = {"sentence": 48, "report": 160}
"""The demo's answer limits, shorter than the paper's 200 tokens, and a stop at a blank line: the
embedded Gemma is a base model that otherwise writes on to the limit on every item (numbered lists
of nothing), which would triple the demo's time without changing what it shows. A label, a rewrite
or 14 code tuples fit. Recorded in each arm's generation settings; `medeval run` keeps the paper's."""


@dataclass(frozen=True, slots=True)
class DemoPlan:
    out: Path
    models: tuple[str, ...]
    items: int = 6
    """Test items per task and model (the corpus has more; the demo keeps the runtime small: the
    20 model arms are nearly all of it, Gemma writing to the answer limit on every report, so 6
    items rather than 10 take the demo from about 11 to about 7 minutes on a shared 2-core machine)."""
    sentences: int = 600
    reports: int = 300
    seed: int = 0
    encoder_epochs: int = 2
    backend: BackendOptions = field(default_factory=BackendOptions)
    """How every arm opens its model (the command's endpoint options)."""
    concurrency: int | None = None
    """Requests in flight for each arm (None: the model's own ceiling)."""
    progress: bool = True


def _corpus(plan: DemoPlan) -> Path:
    from clinieval.benchmarks.medeval.synth.writer import write_synthetic

    folder = plan.out / "data"
    if not (folder / "manifest.json").is_file():
        write_synthetic(folder, seed=plan.seed, sentences=plan.sentences, reports=plan.reports)
    return folder


def _run_arms(plan: DemoPlan, data: Path, echo: Callable[[str], None]) -> None:
    from clinieval.benchmarks.medeval.data import load_folder
    from clinieval.benchmarks.medeval.task import GENERATION, MedEvalSettings, run_task_arm

    loaded = load_folder(data, seed=plan.seed)
    base = MedEvalSettings(
        generation=dataclasses.replace(GENERATION, stop=DEMO_STOP),
        backend=plan.backend,
        concurrency=plan.concurrency,
        limit=plan.items,
        progress=plan.progress,
        seed=plan.seed,
    )
    echo(loaded.describe())
    for model in plan.models:
        for task, entry in TASK_TABLE.items():
            generation = dataclasses.replace(base.generation, max_tokens=DEMO_MAX_TOKENS[entry.level])
            for shots in (0, entry.paper_shots):
                path = plan.out / "arms" / arm_dir_name(model, f"{task}-{shots}shot")
                settings = dataclasses.replace(base, shots=shots, generation=generation)
                items = loaded.items_for(task)
                result = asyncio.run(
                    run_task_arm(task, items, model, path, settings, loaded.files, loaded.split_info())
                )
                echo(f"{model} {task} {shots}-shot: {result.stats_line}")


def _baselines(plan: DemoPlan, data: Path, echo: Callable[[str], None]) -> None:
    from clinieval.benchmarks.medeval.baselines.train import CLASSIFIED, lead_sentence_arm, train_baseline
    from clinieval.benchmarks.medeval.data import load_folder

    loaded = load_folder(data, seed=plan.seed)
    for kind in ("tfidf", "encoder"):
        for task in CLASSIFIED:
            done = train_baseline(
                kind,
                task,
                loaded.items_for(task),
                plan.out / "baselines",
                seed=plan.seed,
                epochs=plan.encoder_epochs,
                split_info=loaded.split_info(),
            )
            metrics = ", ".join(f"{k} {v:.1f}" for k, v in done.card["metrics"].items())
            echo(f"{kind} {task}: {metrics} ({done.card['training_seconds']:.1f} s)")
    lead_sentence_arm(
        loaded.items_for(SUMMARIZATION.name), plan.out / "baselines" / "arms" / "baseline-lead-sentence"
    )


def run_demo(plan: DemoPlan, echo: Callable[[str], None]) -> list[Path]:
    """The corpus, every arm, the baselines and the report (its files); progress goes to ``echo``."""
    from clinieval.benchmarks.medeval.analysis import medeval_analysis, read_arm
    from clinieval.benchmarks.medeval.report import write_medeval_report
    from clinieval.records.runs import find_run_dirs

    data = _corpus(plan)
    _run_arms(plan, data, echo)
    _baselines(plan, data, echo)
    arms = [read_arm(p) for p in find_run_dirs([plan.out / "arms", plan.out / "baselines" / "arms"])]
    models = plan.out / "baselines" / "models"
    result = medeval_analysis(arms, classifiers=(models / "tfidf-ambiguity", models / "tfidf-abnormality"))
    return write_medeval_report(result, arms, plan.out / "report", synthetic=True)


def demo_models(models: Sequence[str] | None) -> tuple[str, ...]:
    from clinieval.models.catalog import DEMO_MODELS

    return tuple(models or DEMO_MODELS)
