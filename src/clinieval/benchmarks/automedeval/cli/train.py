"""``clinieval automedeval train``: fine-tune a judge on the curriculum's three stages (see ``train.py``).

One command, not a group: the curriculum (``build curriculum``) gives it the stages, and
``build introspect`` the next iteration's. Torch and transformers load only when it runs.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clinieval.benchmarks.automedeval.train import TrainPlan

if TYPE_CHECKING:
    from collections.abc import Mapping


def train(
    stages_dir: Annotated[
        Path, typer.Argument(metavar="STAGES_DIR", help="stage1/2/3.hf.jsonl's folder (the curriculum's)")
    ],
    model: Annotated[Path, typer.Option(help="base model folder (Hugging Face, with a chat template)")],
    out: Annotated[Path, typer.Option(help="folder for a checkpoint per stage and train.json")],
    plan: TrainPlan = TrainPlan(),
) -> None:
    """Train the judge stage by stage, each from the previous stage's weights.

    Re-running reuses every finished stage whose data, settings and start are unchanged. Runs on
    CPU, slowly: a real judge needs a GPU and a 7-13B base model.
    """
    from clinieval.benchmarks.automedeval.train import train_stages

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
