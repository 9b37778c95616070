"""``clinieval medalign``: run, judge, analyze and build MedAlign-style evaluations.

Thin: each command parses its options, calls the library and prints. The work lives beside this
module: ``data`` (loading), ``prompts``, ``task`` (context strategies and arms), ``scoring`` (the
judge's rubric), ``table`` / ``analysis`` / ``report`` (the analysis and its report) and ``build``
(dataset building); text metrics over a saved run are :mod:`clinieval.engine.rescore`'s.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

import typer

from clinieval.cli_commands import ArmOptions, Endpoints, JudgeOptions, command, judge_runs, rubric_judge
from clinieval.cli_options import (
    ArmModels,
    ArmRuns,
    BootstrapSeed,
    ConfidenceLevel,
    DemoModels,
    JudgeSpec,
    ShowProgress,
    command_group,
    echo_run,
)
from clinieval.errors import UserError
from clinieval.records.runs import find_run_dirs as run_dirs

if TYPE_CHECKING:
    from clinieval.analysis.table import LongTable
    from clinieval.types import GenerationConfig, Sample

app = command_group(
    "MedAlign: clinician instructions over long patient records (run, judge, analyze, build)."
)


def _samples(
    release: Path | None, instructions: Path | None, ehrs: Path | None, gold_annotator: str
) -> list[Sample]:
    from clinieval.benchmarks.medalign.data import load_generic, load_release

    if release is not None:
        if instructions is not None or ehrs is not None:
            raise UserError("give either --release DIR or --instructions CSV with --ehrs DIR, not both")
        return load_release(release, gold_annotator=gold_annotator)
    if instructions is None or ehrs is None:
        raise UserError(
            "say what to evaluate: --release DIR (the MedAlign release), or --instructions CSV --ehrs DIR "
            "(your own instructions over a folder of patient XML; `clinieval medalign demo` builds "
            "a synthetic one)"
        )
    return load_generic(instructions, ehrs)


@command(app)
def run(
    model: ArmModels,
    strategy: Annotated[
        list[str], typer.Option(help="context strategy: keep-recent, refine, retrieval, whole (repeatable)")
    ],
    out: Annotated[
        Path, typer.Option(help="folder for the arms' run directories (one per model x strategy)")
    ],
    release: Annotated[Path | None, typer.Option(help="the MedAlign release folder (TSVs + ehrs/)")] = None,
    instructions: Annotated[Path | None, typer.Option(help="your instructions CSV (with --ehrs)")] = None,
    ehrs: Annotated[
        Path | None, typer.Option(help="folder of patient XML files (with --instructions)")
    ] = None,
    gold_annotator: Annotated[
        str, typer.Option(help="whose response is the gold (release only)")
    ] = "Annotator_1",
    tokenizer: Annotated[
        str | None,
        typer.Option(help="budget tokenizer, e.g. tiktoken:cl100k_base (default: the model's own)"),
    ] = None,
    max_context: Annotated[
        int | None, typer.Option(help="context length to budget for (default: the model's)")
    ] = None,
    reserve: Annotated[int, typer.Option(help="tokens reserved for the answer")] = 256,
    max_tokens: Annotated[int, typer.Option(help="answer length limit (MedAlign: 256)")] = 256,
    prompt: Annotated[
        Path | None, typer.Option(help="your own prompt template file, with {input} and {context}")
    ] = None,
    metric: Annotated[
        list[str] | None, typer.Option(help="text metric vs the gold (repeatable; default: the paper's five)")
    ] = None,
    no_metrics: Annotated[bool, typer.Option(help="generate only; score later")] = False,
    limit: Annotated[int | None, typer.Option(help="evaluate only the first N instructions")] = None,
    arms: ArmOptions = ArmOptions(),
) -> None:
    """Generate answers for every model x strategy arm, then score the text metrics.

    Re-running the same command resumes each arm where it stopped.
    """
    from clinieval.benchmarks.medalign.prompts import MEDALIGN_PROMPT
    from clinieval.benchmarks.medalign.task import (
        DEFAULT_METRICS,
        STRATEGIES,
        MedAlignSettings,
        StrategyOptions,
        run_strategy_arm,
    )
    from clinieval.models.spec import arm_dir_name
    from clinieval.task import PromptTemplate

    bad = [s for s in strategy if s not in STRATEGIES]
    if bad:
        raise UserError(f"--strategy {bad[0]!r} is unknown; choose from {', '.join(STRATEGIES)}")
    samples = _samples(release, instructions, ehrs, gold_annotator)
    template = MEDALIGN_PROMPT if prompt is None else PromptTemplate(user=_read_prompt(prompt))
    own = MedAlignSettings(
        strategy=StrategyOptions(
            tokenizer=tokenizer, max_context=max_context, reserve=reserve, answer_tokens=max_tokens
        ),
        generation=_generation(max_tokens),
        template=template,
        metrics=() if no_metrics else tuple(metric or DEFAULT_METRICS),
    )
    settings = arms.apply_to(own, limit)
    from clinieval.benchmarks.medalign.data import RESPONSES_FILE

    # the files whose hashes the manifest records (the release folder: its instruction/response TSV)
    sources = (instructions, release / RESPONSES_FILE if release is not None else None)
    data = [p for p in sources if p is not None and p.is_file()]
    for spec in model:
        for strat in strategy:
            arm_dir = out / arm_dir_name(spec, strat)
            result = asyncio.run(run_strategy_arm(samples, spec, strat, arm_dir, settings, data))
            echo_run(result.label, result.run, result.metrics)
    typer.echo(f"next: clinieval medalign analyze {out}/* --out {out}/report")


def _read_prompt(path: Path) -> str:
    if not path.is_file():
        raise UserError(f"{path}: prompt template file not found")
    return path.read_text(encoding="utf-8")


def _generation(max_tokens: int) -> GenerationConfig:
    import dataclasses

    from clinieval.benchmarks.medalign.task import GENERATION

    if max_tokens < 1:
        raise UserError("--max-tokens must be at least 1")
    return dataclasses.replace(GENERATION, max_tokens=max_tokens)


build_app = command_group(
    "Build a MedAlign-like dataset: dedupe instructions, match them to patients, score the matching."
)
app.add_typer(build_app, name="build")


@command(build_app, "dedupe")
def build_dedupe(
    instructions: Annotated[Path, typer.Argument(help="CSV with instruction_id and question")],
    out: Annotated[Path, typer.Option(help="CSV of the kept instructions (removed ones go beside it)")],
    threshold: Annotated[
        float, typer.Option(help="remove when ROUGE-L F with an earlier kept one exceeds this")
    ] = 0.7,
    stemmer: Annotated[bool, typer.Option(help="Porter-stem words before ROUGE-L")] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the result as JSON")] = None,
) -> None:
    """Remove near-duplicate instructions (ROUGE-L > 0.7 in the paper); the first one is kept."""
    from clinieval.benchmarks.medalign.build.dedupe import dedupe_file, removed_path
    from clinieval.fsutil import atomic_write_json

    result = dedupe_file(instructions, out, threshold, use_stemmer=stemmer)
    typer.echo(result.summary())
    typer.echo(f"kept -> {out}\nremoved -> {removed_path(out)}")
    if json_out is not None:
        atomic_write_json(json_out, result.to_dict())


@command(build_app, "match")
def build_match(
    instructions: Annotated[
        Path,
        typer.Argument(help="CSV: instruction_id, question[, patient_characteristics, clinical_context]"),
    ],
    ehrs: Annotated[Path, typer.Option(help="the cohort: a folder of patient XML files")],
    out: Annotated[Path, typer.Option(help="blinded review CSV (the key is written beside it)")],
    k: Annotated[int, typer.Option(help="BM25 candidates (and random ones) per instruction")] = 5,
    seed: Annotated[int, typer.Option(help="seed of the random draw and the shuffle")] = 0,
    random_pool: Annotated[
        str, typer.Option(help="cohort (uniform pairing) or rest (exclude BM25's)")
    ] = "cohort",
    stopwords: Annotated[bool, typer.Option(help="drop English stopwords from queries and records")] = False,
) -> None:
    """BM25 top-K patients per instruction plus K random ones, shuffled for blinded relevance review."""
    from clinieval.benchmarks.medalign.build.review import match_file

    if random_pool not in ("cohort", "rest"):
        raise UserError(f"--random-pool must be cohort or rest, not {random_pool!r}")
    pool: Literal["cohort", "rest"] = "cohort" if random_pool == "cohort" else "rest"
    summary = match_file(instructions, ehrs, out, k=k, seed=seed, random_pool=pool, stopwords=stopwords)
    typer.echo(summary.summary())


@command(build_app, "score")
def build_score(
    review: Annotated[Path, typer.Argument(help="the review CSV with its relevant column filled (1/0)")],
    key: Annotated[
        Path | None, typer.Option(help="the key written by `match` (default: beside the review)")
    ] = None,
    k: Annotated[int | None, typer.Option(help="largest K (default: the K used for matching)")] = None,
    allow_unjudged: Annotated[
        bool, typer.Option(help="leave out unjudged candidates instead of failing")
    ] = False,
    json_out: Annotated[Path | None, typer.Option("--json", help="also write the scores as JSON")] = None,
) -> None:
    """success@K and MRR@K of the BM25 matching, and of the random baseline."""
    from clinieval.benchmarks.medalign.build.evaluate import score_matching
    from clinieval.benchmarks.medalign.build.review import key_path
    from clinieval.fsutil import atomic_write_json

    scores = score_matching(review, key or key_path(review), k_max=k, allow_unjudged=allow_unjudged)
    typer.echo(scores.to_text())
    if json_out is not None:
        atomic_write_json(json_out, scores.to_dict())


@command(app)
def judge(
    runs: ArmRuns,
    judge_model: JudgeSpec,
    repeats: Annotated[int, typer.Option(min=1, help="judge each answer N times (distinct requests)")] = 5,
    snippets: Annotated[int, typer.Option(min=0, help="BM25 EHR excerpts shown to the judge")] = 5,
    max_tokens: Annotated[int, typer.Option(help="judge answer length limit")] = 512,
    judging: JudgeOptions = JudgeOptions(),
) -> None:
    """Judge every arm's answers with the MedAlign rubric (C1-C3 correctness and a 1-5 score).

    Re-running resumes: answered judge requests come from each run's cache. Exits 3 when a judge
    call failed (each kind is listed with its fix), unless --allow-failures.
    """
    import dataclasses

    from clinieval.benchmarks.medalign.scoring import retrieval_rubric
    from clinieval.judge.run import DEFAULT_JUDGE_GENERATION

    generation = dataclasses.replace(
        DEFAULT_JUDGE_GENERATION, max_tokens=max_tokens, temperature=judging.judge_temperature
    )
    judge_one = rubric_judge(
        judge_model, retrieval_rubric(snippets), judging, repeats=repeats, generation=generation
    )
    judge_runs(runs, judging, judge_one, shrink="--snippets")


@command(app)
def analyze(
    runs: Annotated[
        list[Path] | None, typer.Argument(help="arm run directories (or a folder of them)")
    ] = None,
    out: Annotated[Path, typer.Option(help="folder for medalign.json, medalign.md and medalign.html")] = Path(
        "medalign-report"
    ),
    reviews: Annotated[
        Path | None, typer.Option(help="clinician judgements: instruction_id, model, rank, correct[, rater]")
    ] = None,
    reference: Annotated[
        str | None,
        typer.Option(
            help="without reviews: the score column to rank by instead (default key_facts when present)"
        ),
    ] = None,
    release: Annotated[
        Path | None, typer.Option(help="analyse the MedAlign release's clinician-reviewed responses instead")
    ] = None,
    gold_annotator: Annotated[
        str, typer.Option(help="whose response is the gold (release only)")
    ] = "Annotator_1",
    metric: Annotated[list[str] | None, typer.Option(help="text metric (release only; repeatable)")] = None,
    level: ConfidenceLevel = 0.95,
    resamples: Annotated[int, typer.Option(help="bootstrap resamples")] = 2000,
    seed: BootstrapSeed = 0,
    cluster: Annotated[
        bool,
        typer.Option(
            help="resample a patient's instructions together in CIs and paired tests "
            "(--no-cluster: each instruction alone)"
        ),
    ] = True,
) -> None:
    """Every statistic of the paper's analysis, with and without provider-error items, as a report."""
    from clinieval.benchmarks.medalign.table import report

    table, label, ref = _analysis_table(runs or [], reviews, reference, release, gold_annotator, metric)
    result, written = report(
        table, label, ref, out, level=level, resamples=resamples, seed=seed, cluster=cluster
    )
    typer.echo(
        f"{len(result['input']['models'])} arms, {result['input']['items']} instructions; reference: {label}"
    )
    typer.echo("written: " + ", ".join(str(p) for p in written))


def _analysis_table(
    runs: list[Path],
    reviews: Path | None,
    reference: str | None,
    release: Path | None,
    gold_annotator: str,
    metric: list[str] | None,
) -> tuple[LongTable, str, str | None]:
    """The long table, how its reference ranking is labelled, and the score column it came from."""
    from clinieval.benchmarks.medalign import table as mt

    if release is not None:
        if runs:
            raise UserError("give either run directories or --release, not both")
        from clinieval.benchmarks.medalign.task import DEFAULT_METRICS

        metrics = tuple(metric or DEFAULT_METRICS)
        return mt.release_table(release, metrics, gold_annotator=gold_annotator), "clinician", None
    if not runs:
        raise UserError("give the arms' run directories (or a folder of them), or --release DIR")
    return mt.runs_table(run_dirs(runs), reviews, reference, where=runs[0])


DEMO_STRATEGIES = ("keep-recent", "refine")
DEMO_ENDPOINTS = Endpoints(n_ctx=2048, timeout=120.0)
"""The demo's endpoint options: the embedded models in a 2,048-token window (``demo.DEMO_N_CTX``)
and the 120 s per request the demo has always used; the rest as every command has them."""


@command(app)
def demo(
    out: Annotated[Path, typer.Option(help="folder for the data, the arms and the report")] = Path(
        "runs/medalign-demo"
    ),
    patients: Annotated[int, typer.Option(min=1, help="synthetic patients")] = 2,
    per_patient: Annotated[int, typer.Option(min=1, help="instructions per patient")] = 1,
    model: DemoModels = None,
    strategy: Annotated[list[str] | None, typer.Option(help="context strategy (repeatable)")] = None,
    max_tokens: Annotated[int, typer.Option(help="answer length limit (the paper: 256)")] = 96,
    tokenizer: Annotated[
        str | None,
        typer.Option(
            help="budget tokenizer, e.g. gguf:/path/model.gguf (default: the model's own; a model on a "
            "server or on Ray needs one)"
        ),
    ] = None,
    max_context: Annotated[
        int | None, typer.Option(help="context length to budget for (default: the model's)")
    ] = None,
    public: Annotated[
        int,
        typer.Option(min=0, help="also answer N of the 62 public instructions over the public sample EHR"),
    ] = 2,
    judge_model: Annotated[
        str | None, typer.Option("--judge", help="judge the answers with this model")
    ] = None,
    endpoints: Endpoints = DEMO_ENDPOINTS,
    progress: ShowProgress = True,
) -> None:
    """MedAlign end to end without restricted data: a synthetic set whose gold answers come from the
    structured record, two embedded models under two context strategies, and the full report.

    The embedded models are tiny: the numbers exercise the pipeline, not clinical ability.
    """
    from clinieval.benchmarks.medalign.demo import DemoPlan, run_demo
    from clinieval.models.catalog import DEMO_MODELS

    plan = DemoPlan(
        out=out,
        patients=patients,
        per_patient=per_patient,
        models=tuple(model or DEMO_MODELS),
        strategies=tuple(strategy or DEMO_STRATEGIES),
        backend=endpoints.backend(),
        concurrency=endpoints.in_flight(),
        max_tokens=max_tokens,
        tokenizer=tokenizer,
        max_context=max_context,
        public=public,
        judge=judge_model,
        progress=progress,
    )
    for line in asyncio.run(run_demo(plan)):
        typer.echo(line)
