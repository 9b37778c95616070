"""The MedAlign demo without restricted data, as a library function the CLI and tests share.

Steps, each resumable because each writes where the next run finds it:

1. a synthetic MedAlign-shaped set (:mod:`clinieval.benchmarks.medalign.synth`) under ``OUT/data``,
   reused when it is already there;
2. every model x strategy arm over it (``OUT/arms/<model>-<strategy>``), text metrics included;
3. optionally a judge over every arm;
4. the analysis with key-fact recall as a *computed reference* (there are no clinicians here),
   written to ``OUT/report``;
5. optionally the first arm's model answering some of the 62 public MedAlign instructions over
   the public sample EHR (``OUT/public``): there is no gold for them, so they are for reading.

Sized to finish in a few minutes on a 2-core machine: 2 synthetic patients (one instruction each)
and 2 public instructions. Multi-step refinement reads a patient's whole record, 8 pieces of
2,048 tokens for the long ones, so it is nearly all of the cost and grows with the records read:
the earlier 4 patients meant 22 refinement calls per model, 2 patients mean 10.
``--patients`` and ``--public`` scale it up.

The models are opened with the command's endpoint options (``backend``, ``concurrency``: the
same ``--n-ctx``, ``--timeout``, ``--concurrency``, ``--executor`` ... as ``medalign run`` and
``judge``), so the demo's arms and judge can also be asked over HTTP or on Ray.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_text
from clinieval.models.catalog import DEMO_MODELS
from clinieval.models.spec import BackendOptions

if TYPE_CHECKING:
    from clinieval.benchmarks.medalign.task import MedAlignSettings
    from clinieval.types import Sample


DEMO_N_CTX = 2048
"""The embedded models' context window in the demo (``--n-ctx``): the strategies fit each record
into it."""


@dataclass(frozen=True, slots=True)
class DemoPlan:
    out: Path
    patients: int = 2
    per_patient: int = 1
    models: tuple[str, ...] = DEMO_MODELS
    strategies: tuple[str, ...] = ("keep-recent", "refine")
    backend: BackendOptions = field(default_factory=lambda: BackendOptions(n_ctx=DEMO_N_CTX))
    """How every arm and the judge open their model (the command's endpoint options)."""
    concurrency: int | None = None
    """Requests in flight for each arm and judge pass (None: the model's own ceiling)."""
    max_tokens: int = 96
    tokenizer: str | None = None
    """The budget tokenizer (None: the model's own, which only an embedded model opened here has:
    a model on a server or on Ray needs one named, as for ``medalign run``)."""
    max_context: int | None = None
    """The context length to budget for (None: the model's own ``--n-ctx`` or what its server says)."""
    public: int = 2
    judge: str | None = None
    judge_repeats: int = 2
    progress: bool = True
    public_data: Path | None = None  # the public MedAlign sample folder (default: shared/data/medalign)


def _settings(plan: DemoPlan, metrics: tuple[str, ...]) -> MedAlignSettings:
    import dataclasses

    from clinieval.benchmarks.medalign.task import GENERATION, MedAlignSettings, StrategyOptions

    return MedAlignSettings(
        strategy=StrategyOptions(
            tokenizer=plan.tokenizer, max_context=plan.max_context, answer_tokens=plan.max_tokens
        ),
        generation=dataclasses.replace(GENERATION, max_tokens=plan.max_tokens),
        metrics=metrics,
        backend=plan.backend,
        concurrency=plan.concurrency,
        progress=plan.progress,
    )


async def run_demo(plan: DemoPlan) -> list[str]:
    """Run every step; return the lines to print."""
    from clinieval.benchmarks.medalign.data import INSTRUCTIONS_FILE, load_folder
    from clinieval.benchmarks.medalign.synth import build_synthetic_set

    data = plan.out / "data"
    if (data / INSTRUCTIONS_FILE).is_file():
        samples, files = load_folder(data)
    else:
        built = build_synthetic_set(data, patients=plan.patients, per_patient=plan.per_patient)
        samples, files = built.load(), [built.instructions_csv]
    lines = [f"synthetic set: {len(samples)} instructions over {plan.patients} patients in {data}"]
    arms = await _run_arms(plan, samples, files, lines)
    if plan.judge is not None:
        await _judge(plan, arms, lines)
    lines += _report(plan, arms)
    if plan.public:
        lines += await _public(plan)
    lines.append(
        "note: the embedded models are tiny; these numbers exercise the pipeline, not clinical ability"
    )
    return lines


async def _run_arms(
    plan: DemoPlan, samples: list[Sample], data_files: list[Path], lines: list[str]
) -> list[Path]:
    from clinieval.benchmarks.medalign.task import DEFAULT_METRICS, run_strategy_arm
    from clinieval.models.spec import arm_dir_name

    settings = _settings(plan, DEFAULT_METRICS)
    arms: list[Path] = []
    for spec in plan.models:
        for strategy in plan.strategies:
            path = plan.out / "arms" / arm_dir_name(spec, strategy)
            result = await run_strategy_arm(samples, spec, strategy, path, settings, data_files)
            facts = next((s for s in result.run.summaries if s.scorer == "key_facts_f1"), None)
            score = "-" if facts is None or not facts.scored else f"{facts.mean:.3f}"
            lines.append(f"arm {result.label}: key_facts_f1 {score}; {result.run.stats_line}")
            arms.append(path)
    return arms


async def _judge(plan: DemoPlan, arms: list[Path], lines: list[str]) -> None:
    from clinieval.benchmarks.medalign.scoring import MedAlignRubric, evidence_snippets
    from clinieval.judge.run import judge_folder
    from clinieval.records.runs import RunDir

    if plan.judge is None:
        return
    rubric = MedAlignRubric(snippets=lambda rec: evidence_snippets(rec.sample, 3))
    for path in arms:
        result = await judge_folder(
            RunDir.open(path),
            plan.judge,
            rubric,
            backend=plan.backend,
            concurrency=plan.concurrency,
            repeats=plan.judge_repeats,
            progress=plan.progress,
        )
        lines.append(f"judge {path.name}: {result.summary.scored}/{result.summary.items} scored")


def _report(plan: DemoPlan, arms: list[Path]) -> list[str]:
    from clinieval.benchmarks.medalign import table as mt

    read = [mt.arm_of(p) for p in arms]
    table = mt.arms_table(read, mt.reference_judgements(read, "key_facts_f1", "key_facts_all"), plan.out)
    _, written = mt.report(table, "computed reference (key_facts_f1)", "key_facts_f1", plan.out / "report")
    return ["report: " + ", ".join(str(p) for p in written)]


def _public_csv(plan: DemoPlan) -> tuple[Path, Path]:
    """A CSV pairing the first N public instructions with the public sample EHR (no gold)."""
    from clinieval.datasets import find_dataset_dir

    root = find_dataset_dir("medalign", plan.public_data)
    source, ehr = root / "instructions-sample.csv", root / "sample-ehr-clean.xml"
    if not source.is_file() or not ehr.is_file():
        raise UserError(
            f"{root}: the public MedAlign sample is missing (instructions-sample.csv, sample-ehr-clean.xml)"
        )
    with source.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))[: plan.public]
    lines = ["instruction_id,question,filename,subcategory"]
    for r in rows:
        q = r["question"].replace('"', '""')
        lines.append(f'{r["instruction_id"]},"{q}",{ehr.name},{r.get("human_assigned_subcategory_1", "")}')
    path = plan.out / "public" / "instructions.csv"
    atomic_write_text(path, "\n".join(lines) + "\n")
    return path, ehr.parent


async def _public(plan: DemoPlan) -> list[str]:
    from clinieval.benchmarks.medalign.data import load_generic
    from clinieval.benchmarks.medalign.task import run_strategy_arm
    from clinieval.models.spec import arm_dir_name

    csv_path, ehr_dir = _public_csv(plan)
    samples = load_generic(csv_path, ehr_dir)
    spec = plan.models[0]
    result = await run_strategy_arm(
        samples,
        spec,
        "keep-recent",
        plan.out / "public" / arm_dir_name(spec, "keep-recent"),
        _settings(plan, ()),
    )
    return [f"public instructions ({len(samples)}, no gold; answers in {result.run.run_path}/samples.jsonl)"]
