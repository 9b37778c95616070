"""``clinieval automedeval build quality``: step (e), the high/low quality classifier of the
teacher's evaluations (see docs/automedeval-train.md).

Its own group under ``build`` because it is two commands, one trained once and one applied to
every instances file. scikit-learn and the encoder are imported inside each, so ``--help`` stays fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.cli_options import command_group

quality_app = command_group("(e) The high/low quality classifier of the teacher's evaluations.")


@quality_app.command("train")
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


@quality_app.command("apply")
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
