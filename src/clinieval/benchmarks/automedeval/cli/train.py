"""``clinieval automedeval train``: fine-tune a judge on the curriculum's three stages (see ``train.py``).

One command, not a group: the curriculum (``build curriculum``) gives it the stages, and
``build introspect`` the next iteration's. Torch and transformers load only when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clinieval.cli_options import ShowProgress

if TYPE_CHECKING:
    from collections.abc import Mapping


def train(
    stages_dir: Annotated[
        Path, typer.Argument(metavar="STAGES_DIR", help="stage1/2/3.hf.jsonl's folder (the curriculum's)")
    ],
    model: Annotated[Path, typer.Option(help="base model folder (Hugging Face, with a chat template)")],
    out: Annotated[Path, typer.Option(help="folder for a checkpoint per stage and train.json")],
    epochs: Annotated[float, typer.Option(min=0.01, help="epochs per stage (the paper: 5)")] = 5.0,
    lr: Annotated[float, typer.Option(min=0.0, help="learning rate (the paper: 2e-5)")] = 2e-5,
    warmup: Annotated[float, typer.Option(min=0.0, max=0.99, help="warmup ratio (the paper: 0.03)")] = 0.03,
    max_length: Annotated[int, typer.Option(min=16, help="tokens per example (the paper: 2,048)")] = 2048,
    batch_size: Annotated[int, typer.Option(min=1, help="examples per device step (the paper: 2)")] = 2,
    effective_batch: Annotated[
        int, typer.Option(min=1, help="examples per optimizer update over all devices (the paper: 128)")
    ] = 128,
    gradient_accumulation: Annotated[
        int | None,
        typer.Option(min=1, help="steps per optimizer update (default: derived from --effective-batch)"),
    ] = None,
    max_steps: Annotated[
        int | None, typer.Option(min=1, help="cap each stage's optimizer steps (a smoke run)")
    ] = None,
    seed: Annotated[int, typer.Option(help="training seed")] = 0,
    progress: ShowProgress = True,
) -> None:
    """Train the judge stage by stage, each from the previous stage's weights.

    Re-running reuses every finished stage whose data, settings and start are unchanged. Runs on
    CPU, slowly: a real judge needs a GPU and a 7-13B base model.
    """
    from clinieval.benchmarks.automedeval.train import TrainPlan, train_stages

    plan = TrainPlan(
        epochs=epochs,
        lr=lr,
        warmup=warmup,
        max_length=max_length,
        batch_size=batch_size,
        effective_batch=effective_batch,
        gradient_accumulation=gradient_accumulation,
        max_steps=max_steps,
        seed=seed,
        progress=progress,
    )
    summary = train_stages(stages_dir, model, out, plan)
    for stage in summary["stages"]:
        typer.echo(_stage_line(stage))
    typer.echo(f"final checkpoint: {summary['final']}; written: {out / 'train.json'}")


def _stage_line(s: Mapping[str, Any]) -> str:
    """One stage of ``train.json``: skipped and why, or its examples, steps, loss and how it was made."""
    if "skipped" in s:
        return f"{s['stage']}: skipped ({s['skipped']})"
    how = "reused" if s["reused"] else f"trained in {s['seconds']:.0f} s on {s['device']}"
    loss = "none" if s["final_loss"] is None else f"{s['final_loss']:.4f}"
    return f"{s['stage']}: {s['examples']} examples, {s['steps']} steps, final loss {loss}; {how}"
