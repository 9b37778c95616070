"""``clinieval automedeval build``: the judge's training data, one resumable step per command.

Thin: each command parses its options, calls its step's module (``automedeval/build/``) and
prints one line of counts. A :class:`~clinieval.errors.UserError` propagates to ``clinieval``'s
``main``, which prints it on one line and exits 2. The steps: filter (a), generate (b), teach
(c), export and import of the physicians' verdicts (d), the quality classifier (e, its own
group in ``quality.py``), curriculum (f) and introspection (g).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.benchmarks.automedeval.cli.options import Instances, KbChain, KbSearch, run_models
from clinieval.benchmarks.automedeval.cli.quality import quality_app
from clinieval.cli_commands import Endpoints, with_option_groups
from clinieval.cli_options import ShowProgress, command_group
from clinieval.errors import UserError, one_of

if TYPE_CHECKING:
    from clinieval.models.base import Model


def filter_(
    qa: Annotated[Path, typer.Argument(metavar="QA", help="QA pairs: .jsonl, .json, .csv or .tsv")],
    out: Annotated[
        Path, typer.Option(help="instances .jsonl to write (dropped.jsonl, filter-summary.json beside it)")
    ],
    patterns: Annotated[
        Path | None,
        typer.Option(help="pattern file (one regex per line, # comments); default: the built-in one"),
    ] = None,
) -> None:
    """(a) Drop the QA pairs that are not medical, by pattern; the rest become instances."""
    from clinieval.benchmarks.automedeval.build.filtering import (
        filter_instances,
        load_patterns,
        read_qa,
        write_filtered,
    )

    found, source = load_patterns(patterns)
    done = filter_instances(read_qa(qa), found, qa, source)
    write_filtered(done, out)
    counts = ", ".join(f"{p!r}: {n}" for p, n in done.counts().items() if n)
    typer.echo(
        f"{len(done.kept) + len(done.dropped)} read, {len(done.kept)} kept, {len(done.dropped)} dropped"
        f"{f' ({counts})' if counts else ''}; written: {out}"
    )


def generate(
    instances: Instances,
    model: Annotated[
        list[str], typer.Option("--model", "-m", help="a responding model's spec (repeat: k models)")
    ],
    out: Annotated[
        Path, typer.Option(help="folder for instances.jsonl, generate-summary.json and the cache")
    ],
    seed: Annotated[int, typer.Option(help="sampling seed")] = 0,
    max_tokens: Annotated[int, typer.Option(min=1, help="new tokens per answer (the paper: 200)")] = 200,
    endpoints: Endpoints = Endpoints(),
    progress: ShowProgress = True,
) -> None:
    """(b) Each model answers each question once (temperature 0.5, top-k 50, top-p 1).

    Re-running resumes: answers already given come from the folder's cache.
    """
    from clinieval.benchmarks.automedeval.build.generate import (
        GeneratePlan,
        generate_responses,
        unique_labels,
    )
    from clinieval.benchmarks.automedeval.build.instances import read_instances
    from clinieval.cli_options import warn_if_echoed
    from clinieval.models.spec import parse_model_spec
    from clinieval.records.summary import ECHO_KEY, EchoCount

    items = read_instances(instances)
    backend = endpoints.backend()
    unique_labels(model, model)  # a spec given twice is an error before any model is opened
    models = [parse_model_spec(spec, backend) for spec in model]
    labelled = list(zip(unique_labels(model, [m.name for m in models]), models, strict=True))
    plan = GeneratePlan(
        seed=seed, max_tokens=max_tokens, concurrency=endpoints.in_flight(), progress=progress
    )
    # each model is checked when its pass begins (an embedded one is loaded only for its own pass)
    done = run_models(models, lambda: generate_responses(items, labelled, out, plan), check=False)
    typer.echo(
        f"{len(items)} items x {len(models)} models: {len(done.instances)} written, "
        f"{len(done.left_out)} left out (a model failed); written: {out / 'instances.jsonl'}"
    )
    for entry in done.summary["models"]:
        warn_if_echoed(EchoCount.from_dict(entry[ECHO_KEY]), str(entry["model"]))


def teach(
    instances: Instances,
    teacher: Annotated[str, typer.Option(help="the teacher's model spec")],
    out: Annotated[Path, typer.Option(help="folder for instances.jsonl, teach-summary.json and the cache")],
    kb_path: KbChain = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="teacher reply limit")] = 512,
    endpoints: Endpoints = Endpoints(),
    progress: ShowProgress = True,
) -> None:
    """(c) The teacher evaluates every instance (one-shot prompt, knowledge chain with --kb).

    Re-running resumes: evaluations already made come from the folder's cache.
    """
    import dataclasses

    from clinieval.benchmarks.automedeval.build.instances import read_instances
    from clinieval.benchmarks.automedeval.build.teacher import TEACHER_GENERATION, TeachPlan, check_responses
    from clinieval.benchmarks.automedeval.build.teacher import teach as run_teach
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
    from clinieval.models.spec import parse_model_spec

    items = read_instances(instances)
    check_responses(items, str(instances))
    plan = TeachPlan(
        generation=dataclasses.replace(TEACHER_GENERATION, max_tokens=max_tokens),
        kb=KnowledgeBase(kb_path) if kb_path is not None else None,
        concurrency=endpoints.in_flight(),
        progress=progress,
    )
    model = parse_model_spec(teacher, endpoints.backend())
    s = run_models([model], lambda: run_teach(items, model, out, plan, source=str(instances))).summary
    typer.echo(
        f"{s['items']} items: {s['evaluated']} evaluated ({s['parsed']} parsed, "
        f"{s['unparsed']} unparsed), {s['failed']} failed, {s['lookups']} lookups; "
        f"written: {out / 'instances.jsonl'}"
    )


def export(
    instances: Instances,
    out: Annotated[Path, typer.Option(help="the review .csv for physicians")],
    overwrite: Annotated[
        bool, typer.Option(help="replace a review file physicians already wrote in")
    ] = False,
) -> None:
    """(d) Write the spreadsheet physicians fill in: keep (yes/no), reasons (;-separated), physician."""
    from clinieval.benchmarks.automedeval.build.instances import read_instances
    from clinieval.benchmarks.automedeval.build.verify import export_review, review_has_input

    items = read_instances(instances)
    if not overwrite and review_has_input(out):
        raise UserError(
            f"{out} already holds physicians' verdicts: import it first, write elsewhere, or pass --overwrite"
        )
    rows, left_out = export_review(items, out)
    typer.echo(
        f"{rows} evaluations to review ({left_out} without a parsed evaluation left out); written: {out}"
    )


def import_(
    instances: Instances,
    review: Annotated[
        Path, typer.Argument(metavar="REVIEW", help="the review .csv the physicians filled in")
    ],
    out: Annotated[
        Path, typer.Option(help="kept instances .jsonl (discarded.jsonl, review-summary.json beside it)")
    ],
) -> None:
    """(d) Read the physicians' verdicts back: kept and discarded instances, reasons with counts."""
    from clinieval.benchmarks.automedeval.build.instances import read_instances
    from clinieval.benchmarks.automedeval.build.verify import import_review

    _, s = import_review(read_instances(instances), review, out)
    typer.echo(
        f"{s['reviewed']} reviewed: {s['kept']} kept, {s['discarded']} discarded; "
        f"{s['not_yet_reviewed']} not yet reviewed; written: {out}"
    )


def curriculum(
    instances: Instances,
    out: Annotated[Path, typer.Option(help="folder for stage1-3 SFT files and curriculum.json")],
    fmt: Annotated[str, typer.Option("--format", help="openai, hf or both")] = "both",
) -> None:
    """(f) Order the evaluations into the three curriculum stages as SFT chat data."""
    from clinieval.benchmarks.automedeval.build.curriculum import FORMATS, write_curriculum
    from clinieval.benchmarks.automedeval.build.instances import read_instances

    chosen = one_of(fmt, FORMATS, "--format")
    s = write_curriculum(read_instances(instances), out, chosen, str(instances))
    stages = ", ".join(f"stage {k}: {v['examples']}" for k, v in s["stages"].items())
    typer.echo(f"{s['examples']} examples ({stages}); {s['verification']}; written: {out}")
    if s["note"]:
        typer.echo(f"note: {s['note']}", err=True)


def introspect(
    instances_path: Annotated[
        Path, typer.Argument(metavar="INSTANCES", help="the instances the judge was trained on (.jsonl)")
    ],
    judge: Annotated[str, typer.Option(help="the trained judge's model spec")],
    teacher: Annotated[str, typer.Option(help="the teacher's model spec (proposes suggestions)")],
    reviewer: Annotated[str, typer.Option(help="the reviewer's model spec (accepts or rejects them)")],
    kb: Annotated[Path, typer.Option(help="a `kb build` folder: the teacher's retrieved knowledge")],
    out: Annotated[Path, typer.Option(help="folder for the results, the cache and next/")],
    kb_top: Annotated[int, typer.Option(min=1, help="knowledge chunks given to the teacher")] = 3,
    kb_mode: KbSearch = "bm25",
    decisions: Annotated[
        Path | None, typer.Option(help="deadlocks.jsonl with physicians' decisions filled in")
    ] = None,
    curriculum_format: Annotated[
        str, typer.Option("--format", help="next/ curriculum files: openai, hf or both")
    ] = "both",
    endpoints: Endpoints = Endpoints(),
    progress: ShowProgress = True,
) -> None:
    """One iteration of knowledge introspection: judge the training set, get reviewed revision
    suggestions for the cases the judge got wrong, write the next iteration's data to OUT/next.

    Re-running resumes: finished calls come from the folder's cache.
    """
    import clinieval.benchmarks.automedeval.build.introspect as step
    from clinieval.benchmarks.automedeval.build.instances import read_instances
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
    from clinieval.models.spec import parse_model_spec

    step.curriculum_format(curriculum_format)
    items = read_instances(instances_path)
    plan = step.IntrospectPlan(
        kb=KnowledgeBase(kb, top_k=kb_top, mode=kb_mode),
        curriculum_format=curriculum_format,
        decisions=step.read_decisions(decisions) if decisions is not None else {},
        concurrency=endpoints.in_flight(),
        progress=progress,
    )
    backend = endpoints.backend()
    models: dict[str, Model] = {}
    for spec in (judge, teacher, reviewer):
        if spec not in models:  # one model serving two roles is loaded once
            models[spec] = parse_model_spec(spec, backend)
    roles = models[judge], models[teacher], models[reviewer]
    s = run_models(
        list(models.values()), lambda: step.introspect(items, *roles, out, plan, str(instances_path))
    ).summary
    typer.echo(
        f"{s['judged']} judged, {s['wrong']} wrong; {s['accepted']} suggestions accepted, {s['deadlocks']} "
        f"deadlocks ({s['awaiting_physician']} for a physician: {out / 'deadlocks.jsonl'}); "
        f"{s['updated_instances']} instances updated; written: {out / 'next'}"
    )


build_app = command_group(
    "Build AutoMedEval's judge training data: filter, generate, teach, export/import, curriculum."
)
# Registered in the order `--help` has always listed them.
for _name, _command in (
    ("introspect", introspect),
    ("filter", filter_),
    ("generate", generate),
    ("teach", teach),
    ("export", export),
    ("import", import_),
    ("curriculum", curriculum),
):
    build_app.command(_name)(with_option_groups(_command))
build_app.add_typer(quality_app, name="quality")
