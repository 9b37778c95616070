"""MedAlign as one part of a suite (``clinieval suite``): the same arm and judge as ``medalign run``
and ``medalign judge``, one cell per model.

Why a part of its own rather than ``clinieval run medalign`` per model: MedAlign's headline is
clinicians' binary correctness, which a suite can only stand in for with the benchmark's own
judge (the C1-C3 rubric shown BM25 excerpts of the record, as ``medalign judge`` asks it), and its
report compares every model's arm side by side. So a cell is one arm run folder
(``cell.out/<strategy>``, made by :func:`~clinieval.benchmarks.medalign.task.run_strategy_arm`),
judged in place by :func:`~clinieval.judge.run.judge_folder` when the suite names a judge; both
resume through the folder's own records and request cache, so a second run asks nothing.

The headline, per instruction: the judge's correctness (mean over the judge's parsed repeats)
when the suite names a judge; without one, key-fact F1 on sets that carry answer keys (the
synthetic sets), else the first text metric the options name. A set that offers none of these
is refused in :meth:`MedAlignPart.prepare`, before any model is opened. Instructions whose
answer failed, or that no judge repeat could score, are left out and counted, never scored 0.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clinieval.errors import UserError
from clinieval.suite.part import Cell, CheckedModels, Headline, Prepared, Shared, Step

if TYPE_CHECKING:
    from clinieval.benchmarks.medalign.task import MedAlignSettings
    from clinieval.review.items import ReviewItem
    from clinieval.types import Sample

Strategy = Literal["keep-recent", "refine", "retrieval", "whole"]

JUDGE_METRIC = "judge_correct"
RUBRIC = "medalign_judge"
PERCENT_METRICS = frozenset({"chrf++", "chrf", "bleu"})
"""Text metrics on a 0-100 scale (sacrebleu's); the others, key facts and the judge are 0-1."""


@dataclass(frozen=True, slots=True)
class MedAlignOptions:
    """A ``[benchmarks.medalign]`` table: the paper's defaults unless said otherwise."""

    data: Path | None = field(
        default=None,
        metadata={
            "help": "the MedAlign release folder (clinician-instruction-responses.tsv + ehrs/), or a "
            "folder with instructions.csv + ehrs/ (what `clinieval medalign demo` writes)"
        },
    )
    strategy: Strategy = field(
        default="keep-recent",
        metadata={"help": "how a long record is fitted: keep-recent (the paper), refine, retrieval, whole"},
    )
    max_tokens: int = field(default=256, metadata={"help": "answer length limit (the paper: 256)"})
    tokenizer: str | None = field(
        default=None,
        metadata={"help": "budget tokenizer, e.g. tiktoken:cl100k_base (default: the model's own)"},
    )
    max_context: int | None = field(
        default=None, metadata={"help": "context length to budget the record for (default: the model's)"}
    )
    reserve: int = field(default=256, metadata={"help": "tokens reserved for the answer (the paper: 256)"})
    metrics: tuple[str, ...] = field(
        default=(),
        metadata={"help": "text metrics vs the gold response scored after generation (e.g. rougeL)"},
    )
    snippets: int = field(default=5, metadata={"help": "BM25 excerpts of the record shown to the judge"})
    judge_max_tokens: int = field(default=512, metadata={"help": "judge reply length limit"})


@dataclass(frozen=True, slots=True)
class _Payload:
    samples: list[Sample]
    files: list[Path]
    metric: str


class MedAlignPart:
    """The :class:`~clinieval.suite.part.SuitePart` of MedAlign."""

    @property
    def name(self) -> str:
        return "medalign"

    @property
    def judged(self) -> bool:
        return True

    @property
    def options(self) -> type[Any]:
        return MedAlignOptions

    @property
    def metric(self) -> str:
        return "correct (MedAlign C1-C3 judge; key-fact F1 or a text metric without a judge)"

    def prepare(self, options: Any, shared: Shared, base: Path) -> Prepared:
        from clinieval.benchmarks.medalign.data import load_folder
        from clinieval.benchmarks.medalign.task import STRATEGIES
        from clinieval.scoring.text.registry import text_metric

        opts = _options(options)
        if opts.data is None:
            raise UserError(
                "[benchmarks.medalign] data: name the MedAlign release folder, or a folder with "
                "instructions.csv and ehrs/ (`clinieval medalign demo` writes one)"
            )
        if opts.strategy not in STRATEGIES:
            raise UserError(
                f"[benchmarks.medalign] strategy {opts.strategy!r}: choose {', '.join(STRATEGIES)}"
            )
        for name, value, least in (("max_tokens", opts.max_tokens, 1), ("snippets", opts.snippets, 0)):
            if value < least:
                raise UserError(f"[benchmarks.medalign] {name} must be at least {least}, not {value}")
        for name in opts.metrics:
            text_metric(name)  # an unknown metric is one error naming the choices
        folder = opts.data if opts.data.is_absolute() else base / opts.data
        if not folder.is_dir():
            raise UserError(f"{folder}: MedAlign data folder not found ([benchmarks.medalign] data)")
        samples, files = load_folder(folder)
        metric = _headline_metric(samples, opts, shared)
        items = len(samples) if shared.limit is None else min(shared.limit, len(samples))
        patients = {_patient(s) for s in samples[:items]}
        return Prepared(
            benchmark=self.name,
            options=opts,
            items=items,
            data_files=[*files, *_record_files(folder, samples)],
            describe=f"{items} instructions, {len(patients)} patients ({opts.strategy}); headline {metric}",
            payload=_Payload(samples, files, metric),
            clustered=True,
        )

    def plan(self, prepared: Prepared, cell: Cell) -> Sequence[Step]:
        opts = _options(prepared.options)
        what = f"arm {opts.strategy}"
        if opts.strategy == "refine":
            what += " (one call per record piece: more for records longer than the context)"
        elif opts.strategy == "whole":
            what += " (a record that does not fit fails without a call)"
        steps = [Step(what, cell.model.spec, prepared.items)]
        judge = cell.shared.judge
        if judge is not None and _payload(prepared).metric == JUDGE_METRIC:
            steps.append(Step(f"judge x{judge.repeats}", judge.spec, prepared.items * judge.repeats))
        return steps

    async def check(self, prepared: Prepared, cell: Cell, models: CheckedModels) -> None:
        """``medalign run``'s pre-flight for the arm (the tokenizer, context size and room for the
        record under the strategy), and the judge opened as ``medalign judge`` opens it."""
        from clinieval.benchmarks.medalign.task import medalign_task
        from clinieval.engine.session import check_arm

        opts, payload = _options(prepared.options), _payload(prepared)
        settings = _settings(opts, cell)
        task = medalign_task(payload.samples, opts.strategy, settings, payload.files)
        await check_arm(task, await models.checked(cell.model.spec), settings)
        judge = cell.shared.judge
        if judge is not None and payload.metric == JUDGE_METRIC:
            await models.checked(judge.spec)

    async def run(self, prepared: Prepared, cell: Cell) -> None:
        from clinieval.benchmarks.medalign.task import run_strategy_arm

        opts, payload = _options(prepared.options), _payload(prepared)
        path = _arm_path(cell, opts)
        settings = _settings(opts, cell)
        await run_strategy_arm(payload.samples, cell.model.spec, opts.strategy, path, settings, payload.files)
        judge = cell.shared.judge
        if judge is not None and payload.metric == JUDGE_METRIC:
            await _judge(path, opts, cell, judge.spec, judge.repeats)

    def headline(self, prepared: Prepared, cell: Cell) -> Headline:
        from clinieval.benchmarks.medalign.table import arm_of

        payload = _payload(prepared)
        path = _arm_path(cell, _options(prepared.options))
        arm = arm_of(path)
        values = arm.scores.get(payload.metric, {})
        scores: dict[str, float] = {}
        clusters: dict[str, str] = {}
        failed = unparsed = 0
        no_verdict = _no_verdict(path) if payload.metric == JUDGE_METRIC else frozenset()
        for rec in arm.records:
            sid = rec.sample.id
            value = values.get(sid)
            if rec.output is not None and rec.output.ok and value is None and sid in no_verdict:
                unparsed += 1  # answered, but the judge replied without a verdict every time
                continue
            if rec.output is None or not rec.output.ok or value is None:
                failed += 1  # the answer (or every judge repeat) failed: left out, never 0
                continue
            scores[sid], clusters[sid] = value, _patient(rec.sample)
        runs = _judge_runs(path, scores) if payload.metric == JUDGE_METRIC else ()
        return Headline(
            metric=_metric_title(payload.metric),
            scores=scores,
            clusters=clusters,
            judge_runs=runs,
            runs=[path],
            failed=failed,
            scale=(0.0, 100.0) if payload.metric in PERCENT_METRICS else (0.0, 1.0),
            unparsed=unparsed,
        )

    def report(self, prepared: Prepared, cells: Sequence[Cell], out: Path) -> Path | None:
        from clinieval.benchmarks.medalign.table import report, runs_table

        opts = _options(prepared.options)
        # each arm under the suite's model name (two servers may serve one model name), as
        # `medalign analyze` names arms: model/strategy
        arms = [(p, f"{c.model.name}/{opts.strategy}") for c in cells if (p := _arm_path(c, opts)).is_dir()]
        if not arms:
            return None
        paths = [p for p, _ in arms]
        table, label, reference = runs_table(paths, None, None, where=paths[0], labels=[n for _, n in arms])
        _, written = report(table, label, reference, out, seed=cells[0].shared.seed)
        return next((p for p in written if p.suffix == ".html"), None)

    def synthetic(self, folder: Path, seed: int) -> Mapping[str, Any]:
        """Two synthetic patients with one instruction each, records fitted into 768 tokens and
        answers of 32 tokens, scored by key-fact F1 without a judge (``judge = false``): the
        embedded SmolLM2 cannot write the rubric's JSON verdict (0 of 8 replies parsed when tried),
        so a judged demo would rank nothing. Both embedded models finish in about a minute."""
        from clinieval.benchmarks.medalign.synth import build_synthetic_set

        build_synthetic_set(folder, patients=2, per_patient=1, seed=seed, overwrite=True)
        return {"data": str(folder), "max_tokens": 32, "max_context": 768, "judge": False}

    def review_items(
        self, prepared: Prepared, cells: Sequence[Cell], items: Collection[str]
    ) -> Sequence[ReviewItem]:
        """``medalign-arms``' items (the instruction, the patient's record, the clinician's gold
        response) from the cells' arms, each answer under the cell's model name."""
        from clinieval.benchmarks.medalign.review import arm_items

        opts = _options(prepared.options)
        paths = [_arm_path(c, opts) for c in cells]
        return arm_items(paths, [c.model.name for c in cells], keep=set(items), least=1).items


def _options(options: Any) -> MedAlignOptions:
    if not isinstance(options, MedAlignOptions):
        raise TypeError(f"expected MedAlignOptions, got {type(options).__name__}")
    return options


def _payload(prepared: Prepared) -> _Payload:
    if not isinstance(prepared.payload, _Payload):
        raise TypeError("not a prepared MedAlign part")
    return prepared.payload


def _patient(sample: Sample) -> str:
    from clinieval.benchmarks.medalign.table import instruction_columns

    return str(instruction_columns(sample)["patient_id"] or sample.id)


def _metric_title(column: str) -> str:
    """What the headline is, in words, with the column it was read from."""
    if column == JUDGE_METRIC:
        return "judge_correct: correct per the MedAlign C1-C3 judge (mean over its repeats)"
    if column == "key_facts_f1":
        return "key_facts_f1: key-fact F1 (facts computed from the synthetic record; no judge)"
    return f"{column}: vs the clinician's gold response (no judge)"


def _record_files(folder: Path, samples: Sequence[Sample]) -> list[Path]:
    """The patient files the instructions read (``ehrs/``): the manifest hashes them with the
    instructions, so a changed record shows as changed data."""
    from clinieval.benchmarks.medalign.data import EHR_FOLDER

    names = sorted({str(s.metadata.get("filename")) for s in samples if s.metadata.get("filename")})
    return [folder / EHR_FOLDER / name for name in names]


def _headline_metric(samples: Sequence[Sample], opts: MedAlignOptions, shared: Shared) -> str:
    """The judge's correctness with a judge; else key-fact F1 (answer keys), else a text metric."""
    from clinieval.benchmarks.medalign.task import medalign_scorers

    if shared.judge is not None:
        return JUDGE_METRIC
    if any(s.name == "key_facts_f1" for s in medalign_scorers(samples)):
        return "key_facts_f1"
    if opts.metrics and all(s.target for s in samples):
        from clinieval.scoring.text.registry import text_metric

        return text_metric(opts.metrics[0]).outputs[0]
    raise UserError(
        "[benchmarks.medalign] nothing to score without a judge: name a judge in the suite (MedAlign's "
        'headline is correctness), or metrics = ["rougeL"] over a set with gold responses'
    )


def _arm_path(cell: Cell, opts: MedAlignOptions) -> Path:
    return cell.out / opts.strategy


def _settings(opts: MedAlignOptions, cell: Cell) -> MedAlignSettings:
    from clinieval.benchmarks.medalign.task import GENERATION, MedAlignSettings, StrategyOptions

    shared = cell.shared
    return MedAlignSettings(
        strategy=StrategyOptions(
            tokenizer=opts.tokenizer,
            max_context=opts.max_context,
            reserve=opts.reserve,
            answer_tokens=opts.max_tokens,
        ),
        generation=dataclasses.replace(GENERATION, max_tokens=opts.max_tokens),
        metrics=opts.metrics,
        backend=shared.backend,
        limit=shared.limit,
        concurrency=shared.concurrency,
        progress=shared.progress,
    )


async def _judge(path: Path, opts: MedAlignOptions, cell: Cell, spec: str, repeats: int) -> None:
    """``clinieval medalign judge``'s rubric and generation over the arm (shared cache entries)."""
    from clinieval.benchmarks.medalign.scoring import retrieval_rubric
    from clinieval.judge.run import DEFAULT_JUDGE_GENERATION, judge_folder
    from clinieval.records.runs import RunDir

    generation = dataclasses.replace(DEFAULT_JUDGE_GENERATION, max_tokens=opts.judge_max_tokens)
    await judge_folder(
        RunDir.open(path),
        spec,
        retrieval_rubric(opts.snippets),
        backend=cell.shared.backend,
        repeats=repeats,
        generation=generation,
        concurrency=cell.shared.concurrency,
        progress=cell.shared.progress,
    )


def _no_verdict(path: Path) -> frozenset[str]:
    """Instructions whose every judge repeat replied without a verdict (none failed as a call):
    a rerun reads the same cached replies, so they are counted apart from failures."""
    from clinieval.judge.run import read_judge_scores, scores_path
    from clinieval.records.runs import RunDir

    run = RunDir(path)
    if not scores_path(run, RUBRIC).is_file():
        return frozenset()
    out = set()
    for (sid, repeat), score in read_judge_scores(run, RUBRIC).items():
        entries = score.metadata.get("judge_repeats") or []
        if (
            repeat == 0
            and entries
            and all(e.get("values") is None and e.get("error_kind") == "unparsed" for e in entries)
        ):
            out.add(sid)
    return frozenset(out)


def _judge_runs(path: Path, kept: Mapping[str, float]) -> list[dict[str, float]]:
    """One mapping per judge repeat: each kept instruction's correctness in that repeat (left out
    where that repeat gave no verdict)."""
    from clinieval.judge.run import read_judge_scores
    from clinieval.records.runs import RunDir

    runs: list[dict[str, float]] = []
    for (sid, repeat), score in read_judge_scores(RunDir(path), RUBRIC).items():
        if repeat != 0 or sid not in kept:
            continue
        for entry in score.metadata.get("judge_repeats") or []:
            r, values = int(entry["repeat"]), entry.get("values")
            while len(runs) <= r:
                runs.append({})
            if values is not None:
                runs[r][sid] = float(values["correct"])
    return runs
