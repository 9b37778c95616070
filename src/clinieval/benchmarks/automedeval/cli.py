"""``clinieval automedeval``: AutoMedEval's commands (so far the knowledge base; see README.md)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.benchmarks.automedeval.kb_cli import kb_app
from clinieval.cli_options import AllowHost, Concurrency, NCtx, Retries, ShowProgress, Timeout, command_group
from clinieval.errors import UserError

app = command_group("AutoMedEval: a medical judge scoring several answers (in progress: kb).")
app.add_typer(kb_app, name="kb")


@app.command()
def convert(
    runs: Annotated[list[Path], typer.Argument(help="two or more run folders over the same questions")],
    out: Annotated[Path, typer.Option(help="the judge-evaluation set to write (.jsonl)")],
) -> None:
    """Turn runs (MedAlign arms, EHRNoteQA free-text arms, any task) into a judge-evaluation set."""
    from clinieval.benchmarks.automedeval.convert import runs_to_set, write_set

    done = runs_to_set(runs)
    if not done.items:
        raise UserError(
            f"no sample to judge: {done.no_reference} have no reference answer, "
            f"{done.failed} failed in some run"
        )
    write_set(done.items, out)
    typer.echo(
        f"{len(done.items)} items x {len(done.items[0].responses)} responses; left out: {done.no_reference} "
        f"without a reference, {done.failed} with a failed call; written: {out}"
    )


@app.command()
def judge(
    judge_set_path: Annotated[
        Path, typer.Argument(metavar="SET", help="a judge-evaluation set (.jsonl, .csv)")
    ],
    judge_model: Annotated[str, typer.Option("--judge", help="the judge's model spec")],
    out: Annotated[Path, typer.Option(help="folder for verdicts.jsonl, summary.json and the request cache")],
    repeats: Annotated[int, typer.Option(min=1, help="judge each item N times, each in its own order")] = 3,
    seed: Annotated[int, typer.Option(help="seed of the response orders (and of repeat r: seed + r)")] = 0,
    kb_path: Annotated[
        Path | None, typer.Option("--kb", help="a `kb build` folder: turns on the knowledge completion chain")
    ] = None,
    max_tokens: Annotated[int, typer.Option(min=1, help="judge reply limit")] = 512,
    n_ctx: NCtx = 4096,
    timeout: Timeout = 600.0,
    retries: Retries = 4,
    concurrency: Concurrency = None,
    allow_host: AllowHost = None,
    progress: ShowProgress = True,
) -> None:
    """Score every item's responses with a judge; agreement with physicians and bias rates in the summary.

    Re-running resumes: finished judge calls come from the folder's cache.
    """
    import asyncio
    import dataclasses

    from clinieval.benchmarks.automedeval.data import load_set
    from clinieval.benchmarks.automedeval.judging import JUDGE_GENERATION, JudgePlan, judge_set
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
    from clinieval.models.spec import BackendOptions, parse_model_spec

    items = load_set(judge_set_path)
    kb = KnowledgeBase(kb_path) if kb_path is not None else None
    plan = JudgePlan(
        repeats=repeats,
        seed=seed,
        generation=dataclasses.replace(JUDGE_GENERATION, max_tokens=max_tokens),
        kb=kb,
        concurrency=concurrency,
        progress=progress,
    )
    model = parse_model_spec(
        judge_model, BackendOptions.from_cli(n_ctx, timeout, retries, concurrency, allow_host)
    )

    async def go() -> None:
        try:
            await model.check()
            await judge_set(items, model, out, plan)
        finally:
            await model.aclose()

    asyncio.run(go())
    typer.echo(
        f"{len(items)} items x {repeats} repeats judged; "
        f"written: {out / 'verdicts.jsonl'}, {out / 'summary.json'}"
    )
