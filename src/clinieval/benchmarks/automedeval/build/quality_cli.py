"""Command functions for steps (e) and (g): ``quality train``, ``quality apply`` and ``introspect``.

Plain typer-annotated functions; the build command group registers them (see
docs/automedeval-train.md). Heavy libraries are imported inside each, so ``--help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.benchmarks.automedeval.kb_cli import KbSearch
from clinieval.cli_options import AllowHost, Concurrency, NCtx, Retries, ShowProgress, Timeout


def quality_train(
    labels: Annotated[Path, typer.Argument(help="CSV/TSV id,text,label (label: high or low)")],
    out: Annotated[Path, typer.Option(help="folder for the classifier (replaced atomically)")],
    instances: Annotated[
        Path | None,
        typer.Option(help="take each id's evaluation text from this instances file (CSV id,label)"),
    ] = None,
    test_fraction: Annotated[
        float, typer.Option(help="share held out for the accuracy (the paper: 1/4)")
    ] = 0.25,
    folds: Annotated[int, typer.Option(min=2, help="cross-validation folds of the grid search")] = 5,
    seed: Annotated[int, typer.Option(help="seed of the held-out split and the folds")] = 0,
    encoder: Annotated[
        Path | None, typer.Option(help="a sentence-transformers folder (default: the installed MiniLM)")
    ] = None,
) -> None:
    """Train the high/low quality classifier (MiniLM embeddings, SVM tuned by grid search)."""
    from clinieval.benchmarks.automedeval.build.quality import QualityPlan, read_labelled, train_quality

    examples = read_labelled(labels, instances)
    meta = train_quality(examples, out, QualityPlan(test_fraction, folds, seed, encoder=encoder))
    low, high = meta["test_ci"]
    params = ", ".join(f"{k}={v}" for k, v in sorted(meta["best_params"].items()))
    typer.echo(
        f"{len(examples)} labelled ({meta['labels']['high']} high, {meta['labels']['low']} low); "
        f"best {params} (cv accuracy {meta['cv_accuracy']:.3f}); held-out accuracy "
        f"{meta['test_accuracy']:.3f} ({meta['test_correct']}/{meta['test']}, "
        f"{meta['ci']} {low:.3f}-{high:.3f}); "
        f"written: {out}"
    )


def quality_apply(
    model: Annotated[Path, typer.Argument(help="a folder written by `quality train`")],
    instances: Annotated[Path, typer.Argument(help="instances (.jsonl) with teacher evaluations")],
    out: Annotated[Path, typer.Option(help="the instances file to write, with quality set")],
) -> None:
    """Label every evaluated instance high or low, with the SVM's distance as quality_score."""
    from clinieval.benchmarks.automedeval.build.instances import read_instances, write_instances
    from clinieval.benchmarks.automedeval.build.quality import apply_quality, load_quality

    classifier = load_quality(model)
    done, labelled = apply_quality(classifier, read_instances(instances))
    write_instances(out, done)
    high = sum(x.quality == "high" for x in done)
    typer.echo(
        f"{labelled} of {len(done)} instances labelled ({high} high, {labelled - high} low); "
        f"{len(done) - labelled} without an evaluation left as they were; written: {out}"
    )


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
    n_ctx: NCtx = 4096,
    timeout: Timeout = 600.0,
    retries: Retries = 4,
    concurrency: Concurrency = None,
    allow_host: AllowHost = None,
    progress: ShowProgress = True,
) -> None:
    """One iteration of knowledge introspection: judge the training set, get reviewed revision
    suggestions for the cases the judge got wrong, write the next iteration's data to OUT/next.

    Re-running resumes: finished calls come from the folder's cache.
    """
    import asyncio

    import clinieval.benchmarks.automedeval.build.introspect as step
    from clinieval.benchmarks.automedeval.build.instances import read_instances
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
    from clinieval.models.base import Model
    from clinieval.models.spec import BackendOptions, parse_model_spec

    step.curriculum_format(curriculum_format)
    items = read_instances(instances_path)
    plan = step.IntrospectPlan(
        kb=KnowledgeBase(kb, top_k=kb_top, mode=kb_mode),
        curriculum_format=curriculum_format,
        decisions=step.read_decisions(decisions) if decisions is not None else {},
        concurrency=concurrency,
        progress=progress,
    )
    options = BackendOptions.from_cli(n_ctx, timeout, retries, concurrency, allow_host)
    models: dict[str, Model] = {}
    for spec in (judge, teacher, reviewer):
        if spec not in models:  # one model serving two roles is loaded once
            models[spec] = parse_model_spec(spec, options)

    async def go() -> dict[str, object]:
        try:
            for m in models.values():
                await m.check()
            roles = models[judge], models[teacher], models[reviewer]
            done = await step.introspect(items, *roles, out, plan, str(instances_path))
            return done.summary
        finally:
            for m in models.values():
                await m.aclose()

    s = asyncio.run(go())
    typer.echo(
        f"{s['judged']} judged, {s['wrong']} wrong; {s['accepted']} suggestions accepted, {s['deadlocks']} "
        f"deadlocks ({s['awaiting_physician']} for a physician: {out / 'deadlocks.jsonl'}); "
        f"{s['updated_instances']} instances updated; written: {out / 'next'}"
    )
