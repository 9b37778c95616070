"""``clinieval medeval``: run, analyze, label, train and demo MedEval evaluations.

Thin: each command parses its options, calls the library and prints. The work lives beside this
module: ``items`` (the data's types), ``data`` / ``mimic_cxr`` / ``openi`` / ``synth`` (loading and
the synthetic corpus), ``prompts`` and ``parsing`` (the paper's prompts, the qualified rate),
``task`` (arms), ``scoring``, ``analysis`` / ``report``, ``labeller`` (rule-based codes) and
``baselines`` (trained classifiers).
"""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path
from typing import Annotated

import typer

from clinieval.cli_commands import ArmOptions, Endpoints, command
from clinieval.cli_options import (
    ArmModels,
    ArmRuns,
    BootstrapSeed,
    ConfidenceLevel,
    DemoModels,
    ShowProgress,
    command_group,
    echo_run,
)
from clinieval.errors import UserError, one_of
from clinieval.records.runs import find_run_dirs as run_dirs

app = command_group("MedEval: radiology sentence and report tasks (run, analyze, label, train, demo).")

SHOT_SWEEP = (1, 3, 5, 7, 9)
"""The paper's explored few-shot counts (``--shots sweep``)."""


def parse_shots(values: list[str] | None) -> list[int]:
    """``--shots`` values: counts, ``paper`` (the paper's setting per task) or ``sweep`` (1,3,5,7,9)."""
    out: list[int] = []
    for value in values or ["0"]:
        if value == "sweep":
            out += SHOT_SWEEP
        elif value.isascii() and value.isdigit():
            out.append(int(value))
        else:
            raise UserError(f"--shots {value!r}: give a number of examples (0 for zero-shot) or 'sweep'")
    return list(dict.fromkeys(out))


@command(app)
def run(
    data: Annotated[Path, typer.Option(help="a MedEval-shaped folder (`clinieval medeval demo` writes one)")],
    model: ArmModels,
    out: Annotated[Path, typer.Option(help="folder for the arms' run directories (model x task x shots)")],
    task: Annotated[
        list[str] | None,
        typer.Option(help="abnormality, ambiguity, rewriting, codes, summarization (repeatable)"),
    ] = None,
    shots: Annotated[
        list[str] | None,
        typer.Option(help="examples from the train split: 0, N, or 'sweep' (1,3,5,7,9); repeatable"),
    ] = None,
    paper_examples: Annotated[
        bool, typer.Option(help="use the paper's fixed examples (abnormality, ambiguity, rewriting)")
    ] = False,
    seed: Annotated[int, typer.Option(help="seed of the example draw and of splits the data lacks")] = 0,
    split: Annotated[
        str,
        typer.Option(
            help="the split asked: test (reported), or validation (to choose prompts and shots on, "
            "as the paper does; `analyze` then picks each model's setting by it)"
        ),
    ] = "test",
    qualified: Annotated[
        str,
        typer.Option(
            help="when a label answer qualifies: paper (exactly one label word in it) or strict "
            "(the label and nothing else)"
        ),
    ] = "paper",
    rewrite_label: Annotated[
        bool,
        typer.Option(
            help="rewriting prompts carry the sentence's Diagnostic: Normal./Abnormal. (the paper's "
            "prompts); --no-rewrite-label gives Appendix C.3's label-free line"
        ),
    ] = True,
    max_tokens: Annotated[int, typer.Option(min=1, help="answer length limit (the paper: 200)")] = 200,
    limit: Annotated[int | None, typer.Option(help="evaluate only the first N items of each task")] = None,
    arms: ArmOptions = ArmOptions(),
    strict: Annotated[
        bool, typer.Option(help="stop at an unreadable Open-i or MIMIC-CXR report instead of skipping it")
    ] = False,
) -> None:
    """Prompt every model on every task, zero-shot and with k examples; score with the qualified rate.

    Re-running the same command resumes each arm where it stopped.
    """
    from clinieval.benchmarks.medeval.data import load_folder
    from clinieval.benchmarks.medeval.items import Split
    from clinieval.benchmarks.medeval.parsing import QUALIFIED_RULES
    from clinieval.benchmarks.medeval.prompts import PAPER_EXAMPLES, TASKS
    from clinieval.benchmarks.medeval.task import GENERATION, MedEvalSettings, arm_label, run_task_arm
    from clinieval.models.spec import arm_dir_name

    tasks = [one_of(t, TASKS, "--task") for t in (task or list(TASKS))]
    asked: tuple[Split, ...] = ("test", "validation")
    asked_split = one_of(split, asked, "--split")
    rule = one_of(qualified, QUALIFIED_RULES, "--qualified")
    counts = parse_shots(shots)
    loaded = load_folder(data, seed=seed, strict=strict)
    typer.echo(loaded.describe())
    medeval_settings = MedEvalSettings(
        generation=dataclasses.replace(GENERATION, max_tokens=max_tokens),
        seed=seed,
        split=asked_split,
        qualified=rule,
        rewrite_label=rewrite_label,
    )
    base = arms.apply_to(medeval_settings, limit)
    paper = dataclasses.replace(base, paper_examples=True)
    counted = [dataclasses.replace(base, shots=k) for k in (counts if shots or not paper_examples else [])]
    without = [t for t in tasks if t not in PAPER_EXAMPLES]
    if paper_examples and without:
        if len(without) == len(tasks) and not counted:
            raise UserError(
                f"the paper published no few-shot examples for {', '.join(without)}; use --shots N"
            )
        typer.echo(
            f"note: the paper published no examples for {', '.join(without)}; --paper-examples skips them"
        )
    for spec in model:
        for name in tasks:
            own = [paper] if paper_examples and name in PAPER_EXAMPLES else []
            for settings in own + counted:
                label = arm_label(name, settings)
                path = out / arm_dir_name(spec, label)
                items = loaded.items_for(name)
                result = asyncio.run(
                    run_task_arm(name, items, spec, path, settings, loaded.files, loaded.split_info())
                )
                echo_run(f"{spec} ({label})", result)
    typer.echo(f"next: clinieval medeval analyze {out}")


def _site_href(site: Path | None, out: Path) -> str | None:
    """The results site as a link from the report folder (relative, so both can move together)."""
    import os

    if site is None:
        return None
    if not (site / "view.json").is_file():
        raise UserError(
            f"{site}: not a site written by `clinieval view`; run `clinieval view RUN... --out {site}`"
        )
    return Path(os.path.relpath(site.resolve(), out.resolve())).as_posix()


@command(app)
def analyze(
    runs: ArmRuns,
    out: Annotated[Path, typer.Option(help="folder for medeval.json, medeval.md and medeval.html")] = Path(
        "medeval-report"
    ),
    level: ConfidenceLevel = 0.95,
    resamples: Annotated[int, typer.Option(min=1, help="bootstrap resamples")] = 2000,
    seed: BootstrapSeed = 0,
    classifiers: Annotated[
        Path | None,
        typer.Option(help="a `medeval train` folder: its ambiguity and abnormality classifiers give ΔAcc"),
    ] = None,
    classifier_kind: Annotated[
        str, typer.Option(help="which trained classifiers: tfidf or encoder")
    ] = "tfidf",
    view: Annotated[
        Path | None,
        typer.Option(help="a `clinieval view` site of these runs: every answer's id links to its page there"),
    ] = None,
) -> None:
    """Every task's metrics per model and shot setting, with CIs, curves, domains and every answer."""
    from clinieval.benchmarks.medeval.analysis import Settings, medeval_analysis, read_arm
    from clinieval.benchmarks.medeval.report import write_medeval_report

    arms = [read_arm(p) for p in run_dirs(runs)]
    if not arms:
        raise UserError(f"no MedEval run directories under {', '.join(map(str, runs))}")
    pair = None
    if classifiers is not None:
        pair = (
            classifiers / "models" / f"{classifier_kind}-ambiguity",
            classifiers / "models" / f"{classifier_kind}-abnormality",
        )
    result = medeval_analysis(arms, Settings(level, resamples, seed), pair)
    synthetic = any(_synthetic(a.path) for a in arms)
    written = write_medeval_report(result, arms, out, synthetic=synthetic, view=_site_href(view, out))
    typer.echo(f"{len(arms)} arms; written: " + ", ".join(str(p) for p in written))


def _synthetic(run: Path) -> bool:
    """Whether an arm ran on the synthetic corpus (its data files say so)."""
    from clinieval.records.runs import RunDir

    files = RunDir.open(run).manifest().get("data") or {}
    return any("synthetic" in Path(f).name for f in files)


@command(app)
def label(
    reports: Annotated[
        Path, typer.Argument(help="CSV whose first column holds report text (header `Reports`)")
    ],
    out: Annotated[Path, typer.Option(help="CSV in the CheXpert layout: Reports + 14 observation columns")],
    chexpert: Annotated[
        Path | None,
        typer.Option(
            help="the CheXpert labeler's folder (phrases/ and patterns/, read in place); "
            "default: ../shared/data's copy"
        ),
    ] = None,
) -> None:
    """Label chest reports with the rule-based labeller (CheXpert's phrases and negation/uncertainty
    patterns, medspaCy's ConText)."""
    from clinieval.benchmarks.medeval.labeller import label_csv

    n = label_csv(reports, out, chexpert=chexpert)
    typer.echo(f"{n} reports labelled; written: {out}")


@command(app)
def train(
    data: Annotated[Path, typer.Option(help="a MedEval-shaped folder (`clinieval medeval demo` writes one)")],
    out: Annotated[Path, typer.Option(help="folder for models/<kind>-<task>/ and arms/baseline-*")],
    kind: Annotated[list[str] | None, typer.Option(help="tfidf and/or encoder (repeatable)")] = None,
    task: Annotated[list[str] | None, typer.Option(help="abnormality, ambiguity, codes (repeatable)")] = None,
    epochs: Annotated[int, typer.Option(min=1, help="encoder epochs (the paper's 10 by default)")] = 10,
    seed: Annotated[int, typer.Option(help="training seed, and of splits the data lacks")] = 0,
    strict: Annotated[
        bool, typer.Option(help="stop at an unreadable Open-i or MIMIC-CXR report instead of skipping it")
    ] = False,
) -> None:
    """Fine-tune the adapted-PLM baselines on the train split; write their test answers as arms."""
    from clinieval.benchmarks.medeval.baselines.classifiers import KINDS
    from clinieval.benchmarks.medeval.baselines.train import CLASSIFIED, lead_sentence_arm, train_baseline
    from clinieval.benchmarks.medeval.data import load_folder

    kinds = [one_of(k, KINDS, "--kind") for k in (kind or ["tfidf"])]
    tasks = [one_of(t, CLASSIFIED, "--task") for t in (task or list(CLASSIFIED))]
    loaded = load_folder(data, seed=seed, strict=strict)
    typer.echo(loaded.describe())
    for k in kinds:
        for name in tasks:
            done = train_baseline(
                k, name, loaded.items_for(name), out, seed=seed, epochs=epochs, split_info=loaded.split_info()
            )
            metrics = ", ".join(f"{m} {v:.1f}" for m, v in done.card["metrics"].items())
            typer.echo(f"{k} {name}: {metrics} ({done.card['training_seconds']:.1f} s); {done.model_dir}")
    lead = lead_sentence_arm(loaded.items_for("summarization"), out / "arms" / "baseline-lead-sentence")
    typer.echo(f"lead-sentence summaries: {lead}")


DEMO_ENDPOINTS = Endpoints(timeout=120.0)
"""The demo's endpoint options: the 120 s per request the demo has always used; the rest as
every command has them."""


@command(app)
def demo(
    out: Annotated[
        Path, typer.Option(help="folder for the synthetic corpus, the arms, the baselines, the report")
    ],
    model: DemoModels = None,
    items: Annotated[int, typer.Option(min=1, help="test items per task and model")] = 6,
    seed: Annotated[int, typer.Option(help="seed of the corpus, the splits and the examples")] = 0,
    encoder_epochs: Annotated[int, typer.Option(min=1, help="epochs of the fine-tuned encoder")] = 2,
    endpoints: Endpoints = DEMO_ENDPOINTS,
    progress: ShowProgress = True,
) -> None:
    """MedEval end to end on the synthetic corpus (not MedEval's data): every task, both embedded
    models zero-shot and few-shot, the trained baselines, and the report."""
    from clinieval.benchmarks.medeval.demo import DemoPlan, demo_models, run_demo

    plan = DemoPlan(
        out,
        demo_models(model),
        items=items,
        seed=seed,
        encoder_epochs=encoder_epochs,
        backend=endpoints.backend(),
        concurrency=endpoints.in_flight(),
        progress=progress,
    )
    written = run_demo(plan, typer.echo)
    typer.echo("written: " + ", ".join(str(p) for p in written))


@command(app, "review-labels")
def review_labels(
    export: Annotated[
        Path, typer.Argument(metavar="EXPORT_CSV", help="sentences.csv written by `clinieval review export`")
    ],
    sentences: Annotated[Path, typer.Option(help="the sentence table (or its folder) the study came from")],
    out: Annotated[Path, typer.Option(help="the labelled sentence table to write (.csv or .jsonl)")],
    reviewer: Annotated[
        list[str] | None,
        typer.Option(help="whose labels win where reviewers differ (repeatable, first listed wins)"),
    ] = None,
) -> None:
    """The clinicians' labels and rewrites from a review export, as a MedEval sentence table."""
    from clinieval.benchmarks.medeval.review import labelled_sentences

    done = labelled_sentences(export, sentences, out, reviewer or ())
    typer.echo(f"{done.sentences} labelled sentence(s) -> {done.out}")
    if done.not_reviewed:
        typer.echo(f"note: {done.not_reviewed} sentence(s) without a submitted review left out", err=True)
    if done.rewrites_dropped:
        typer.echo(
            f"note: {done.rewrites_dropped} rewrite(s) of sentences labelled unambiguous left out"
            " (MedEval keeps rewrites of ambiguous sentences only)",
            err=True,
        )
