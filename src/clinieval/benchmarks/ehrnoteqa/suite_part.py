"""EHRNoteQA as one part of a suite (``clinieval suite``): the arm of ``ehrnoteqa run`` and the
judge of ``ehrnoteqa judge``, one cell per model.

EHRNoteQA's headline is an LLM judge's verdict on each answer, asked five times because the
verdicts vary between runs (the paper's Table 6 shows judge-based ranks moving): the suite keeps
each repeat (``Headline.judge_runs``) so the leaderboard can show that instability too. A cell is
one arm run folder (``cell.out/<format>``, made by
:func:`~clinieval.benchmarks.ehrnoteqa.task.run_format_arm`), judged in place by
:func:`~clinieval.benchmarks.ehrnoteqa.task.judge_arm`; both resume through the folder's records
and request cache, so a second run asks nothing.

What is scored (``scoring``): ``auto`` is the paper's judge when the suite names one, else letter
extraction (multiple choice only: a free-text answer has nothing but the judge); the
deterministic modes (letter extraction, option log-likelihood) can be chosen outright. A failed
answer, or one no judge repeat could read, is left out and counted, never scored 0 (the
benchmark's own report counts a failed answer as incorrect, the paper's rule).
"""

from __future__ import annotations

import dataclasses
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clinieval.errors import UserError
from clinieval.suite.part import Cell, CheckedModels, Headline, Prepared, Shared, Step

if TYPE_CHECKING:
    from clinieval.benchmarks.ehrnoteqa.analysis import ArmAnswers
    from clinieval.benchmarks.ehrnoteqa.data import LoadedSet
    from clinieval.benchmarks.ehrnoteqa.task import EHRNoteQASettings
    from clinieval.review.items import ReviewItem

Scoring = Literal["auto", "judge", "letter_extract", "loglik_letter", "loglik_text"]
JUDGE = "judge"
LOGLIK_MODES = ("loglik_letter", "loglik_text")
MODE_TITLES = {
    JUDGE: "correct per the paper's judge (mean over its repeats)",
    "letter_extract": "the option letter read from the answer is correct (no judge)",
    "loglik_letter": "the most likely option letter is correct (no judge)",
    "loglik_text": "the most likely option text is correct (no judge)",
}
"""What each headline mode means, for the plan and the leaderboard."""


@dataclass(frozen=True, slots=True)
class EHRNoteQAOptions:
    """A ``[benchmarks.ehrnoteqa]`` table: the paper's defaults unless said otherwise."""

    data: Path | None = field(
        default=None,
        metadata={
            "help": "a folder with qa.jsonl and discharge.csv (or .csv.gz): the PhysioNet QA file beside "
            "your MIMIC-IV-Note notes; or a jsonl with the notes inline"
        },
    )
    format: Literal["mc", "free"] = field(
        default="mc", metadata={"help": "mc: the five-option prompt (the paper's headline); free: no options"}
    )
    scoring: Scoring = field(
        default="auto",
        metadata={
            "help": "auto: the paper's judge when the suite names one, else letter extraction; or judge, "
            "letter_extract, loglik_letter, loglik_text"
        },
    )
    loglik: bool = field(
        default=True,
        metadata={"help": "mc: also score the options by log-likelihood (one more call per question)"},
    )
    max_tokens: int = field(default=600, metadata={"help": "answer length limit (the paper: 600)"})
    levels: tuple[str, ...] = field(
        default=(), metadata={"help": 'keep only these levels, e.g. ["1"] (default: both)'}
    )
    level_tokenizer: str = field(
        default="tiktoken:cl100k_base", metadata={"help": "tokenizer that assigns levels by note length"}
    )
    judge_max_tokens: int | None = field(
        default=None, metadata={"help": "judge reply limit (default: 16 for mc, 256 for free)"}
    )


@dataclass(frozen=True, slots=True)
class _Payload:
    loaded: LoadedSet
    mode: str


class EHRNoteQAPart:
    """The :class:`~clinieval.suite.part.SuitePart` of EHRNoteQA."""

    @property
    def name(self) -> str:
        return "ehrnoteqa"

    @property
    def judged(self) -> bool:
        return True

    @property
    def options(self) -> type[Any]:
        return EHRNoteQAOptions

    @property
    def metric(self) -> str:
        return "accuracy (the paper's judge; letter extraction or log-likelihood without one)"

    def prepare(self, options: Any, shared: Shared, base: Path) -> Prepared:
        from clinieval.benchmarks.ehrnoteqa.data import load_folder, load_inline

        opts = _options(options)
        mode = _mode(opts, shared)
        if opts.data is None:
            raise UserError(
                "[benchmarks.ehrnoteqa] data: name a folder with qa.jsonl and discharge.csv (the "
                "PhysioNet QA file beside your MIMIC-IV-Note notes), or a jsonl with the notes inline"
            )
        if opts.max_tokens < 1 or (opts.judge_max_tokens is not None and opts.judge_max_tokens < 1):
            raise UserError("[benchmarks.ehrnoteqa] max_tokens and judge_max_tokens must be at least 1")
        levels = _levels(opts.levels)
        path = opts.data if opts.data.is_absolute() else base / opts.data
        if path.is_dir():
            loaded = load_folder(path, tokenizer=opts.level_tokenizer, levels=levels)
        elif path.is_file():
            loaded = load_inline(path, tokenizer=opts.level_tokenizer, levels=levels)
        else:
            raise UserError(f"{path}: EHRNoteQA data not found ([benchmarks.ehrnoteqa] data)")
        if not loaded.samples:
            raise UserError(f"{path}: no question is left to evaluate ({loaded.describe()})")
        items = len(loaded.samples) if shared.limit is None else min(shared.limit, len(loaded.samples))
        return Prepared(
            benchmark=self.name,
            options=opts,
            items=items,
            data_files=loaded.files,
            describe=f"{loaded.describe()}; {items} asked ({opts.format}), headline {mode}",
            payload=_Payload(loaded, mode),
            clustered=True,
        )

    def plan(self, prepared: Prepared, cell: Cell) -> Sequence[Step]:
        opts, payload = _options(prepared.options), _payload(prepared)
        loglik = opts.format == "mc" and opts.loglik
        what = f"arm {opts.format}" + (" (answer + option log-likelihoods)" if loglik else "")
        steps = [Step(what, cell.model.spec, prepared.items * (2 if loglik else 1))]
        judge = cell.shared.judge
        if judge is not None and payload.mode == JUDGE:
            steps.append(Step(f"judge x{judge.repeats}", judge.spec, prepared.items * judge.repeats))
        return steps

    async def check(self, prepared: Prepared, cell: Cell, models: CheckedModels) -> None:
        """``ehrnoteqa run``'s pre-flight for the arm (log-likelihoods where the format scores
        them, the note's room in the context), and the judge opened as ``ehrnoteqa judge`` does."""
        from clinieval.benchmarks.ehrnoteqa.task import ehrnoteqa_task
        from clinieval.engine.session import check_arm

        opts, payload = _options(prepared.options), _payload(prepared)
        settings = _settings(opts, cell)
        task = ehrnoteqa_task(payload.loaded.samples, opts.format, settings, payload.loaded.files)
        await check_arm(task, await models.checked(cell.model.spec), settings)
        judge = cell.shared.judge
        if judge is not None and payload.mode == JUDGE:
            await models.checked(judge.spec)

    async def run(self, prepared: Prepared, cell: Cell) -> None:
        from clinieval.benchmarks.ehrnoteqa.task import judge_arm, run_format_arm

        opts, payload = _options(prepared.options), _payload(prepared)
        path = _arm_path(cell, opts)
        loaded = payload.loaded
        await run_format_arm(
            loaded.samples, cell.model.spec, opts.format, path, _settings(opts, cell), loaded.files
        )
        judge = cell.shared.judge
        if judge is not None and payload.mode == JUDGE:
            await judge_arm(
                path,
                judge.spec,
                repeats=judge.repeats,
                backend=cell.shared.backend,
                max_tokens=opts.judge_max_tokens,
                concurrency=cell.shared.concurrency,
                progress=cell.shared.progress,
            )

    def headline(self, prepared: Prepared, cell: Cell) -> Headline:
        from clinieval.benchmarks.ehrnoteqa.analysis import read_arm

        opts, mode = _options(prepared.options), _payload(prepared).mode
        path = _arm_path(cell, opts)
        arm = read_arm(path)
        clusters = {i: item.patient or i for i, item in arm.items.items()}
        unparsed = 0
        letters: dict[str, float] | None = None
        if mode == JUDGE:
            scores, runs = _judged(arm)
            unparsed = sum(1 for i in arm.judge_unparsed if i in arm.items and i not in scores)
            given = arm.modes.get("letter_extract", {})
            letters = {i: float(v) for i, v in given.items() if v is not None and i not in arm.answer_failed}
        else:
            values = arm.modes.get(mode, {})
            scores = {
                i: float(v)
                for i in arm.items
                if i not in arm.answer_failed and (v := values.get(i)) is not None
            }
            runs = []
        return Headline(
            metric=f"{mode} ({opts.format}): {MODE_TITLES[mode]}",
            scores=scores,
            clusters={i: clusters[i] for i in scores},
            judge_runs=runs,
            runs=[path],
            failed=len(arm.items) - len(scores) - unparsed,
            unparsed=unparsed,
            deterministic=letters or None,
            deterministic_name="letter extraction" if letters else "",
        )

    def report(self, prepared: Prepared, cells: Sequence[Cell], out: Path) -> Path | None:
        from clinieval.benchmarks.ehrnoteqa.analysis import analyze_runs
        from clinieval.benchmarks.ehrnoteqa.report import write_report

        opts = _options(prepared.options)
        # each arm under the suite's model name: two servers may serve one model name
        arms = [(p, c.model.name) for c in cells if (p := _arm_path(c, opts)).is_dir()]
        if not arms:
            return None
        result = analyze_runs([p for p, _ in arms], labels=[n for _, n in arms])
        written = write_report(result, out)
        return next((p for p in written if p.suffix == ".html"), None)

    def synthetic(self, folder: Path, seed: int) -> Mapping[str, Any]:
        """Six synthetic patients with one question each (Level 1, about 900 tokens of notes),
        16-token answers and no log-likelihood pass: both embedded models answer and the tiny
        judge judges in a few minutes on two cores (the EHRNoteQA demo's sizes, cut down). Six,
        so the demo's calibration step can rate four and leave two for the judge alone."""
        from clinieval.benchmarks.ehrnoteqa.synth.writer import build_synthetic_set

        build_synthetic_set(folder, patients=6, seed=seed, per_patient=1, long_fraction=0.0, overwrite=True)
        return {"data": str(folder), "max_tokens": 16, "loglik": False}

    def review_items(
        self, prepared: Prepared, cells: Sequence[Cell], items: Collection[str]
    ) -> Sequence[ReviewItem]:
        """Each question as its format showed it (with the options in ``mc``), the patient's notes
        as the record and the answer key as the reference, each answer under the cell's model name."""
        from clinieval.benchmarks.ehrnoteqa.review import arm_items

        opts = _options(prepared.options)
        paths = [_arm_path(c, opts) for c in cells]
        return arm_items(paths, [c.model.name for c in cells], opts.format, keep=set(items)).items


def _options(options: Any) -> EHRNoteQAOptions:
    if not isinstance(options, EHRNoteQAOptions):
        raise TypeError(f"expected EHRNoteQAOptions, got {type(options).__name__}")
    return options


def _payload(prepared: Prepared) -> _Payload:
    if not isinstance(prepared.payload, _Payload):
        raise TypeError("not a prepared EHRNoteQA part")
    return prepared.payload


def _mode(opts: EHRNoteQAOptions, shared: Shared) -> str:
    """Which of the benchmark's scoring modes is the headline, or one error saying what is missing."""
    where = "[benchmarks.ehrnoteqa]"
    if opts.scoring == "auto":
        if shared.judge is not None:
            return JUDGE
        if opts.format == "free":
            raise UserError(f"{where} format free is scored by the judge only: name a judge in the suite")
        return "letter_extract"
    if opts.scoring == JUDGE:
        if shared.judge is None:
            raise UserError(f'{where} scoring judge: name a judge in the suite (or scoring = "auto")')
        return JUDGE
    if opts.format == "free":
        raise UserError(f"{where} scoring {opts.scoring} needs format mc: free text has no options")
    if opts.scoring in LOGLIK_MODES and not opts.loglik:
        raise UserError(f"{where} scoring {opts.scoring} needs loglik = true")
    return opts.scoring


def _levels(levels: Sequence[str]) -> list[int] | None:
    if not levels:
        return None
    bad = [x for x in levels if x not in ("1", "2")]
    if bad:
        raise UserError(f'[benchmarks.ehrnoteqa] levels: {bad[0]!r} is not a level; use "1" and/or "2"')
    return [int(x) for x in levels]


def _arm_path(cell: Cell, opts: EHRNoteQAOptions) -> Path:
    return cell.out / opts.format


def _settings(opts: EHRNoteQAOptions, cell: Cell) -> EHRNoteQASettings:
    from clinieval.benchmarks.ehrnoteqa.prompts import GENERATION
    from clinieval.benchmarks.ehrnoteqa.task import EHRNoteQASettings

    shared = cell.shared
    return EHRNoteQASettings(
        generation=dataclasses.replace(GENERATION, max_tokens=opts.max_tokens),
        loglik=opts.loglik,
        backend=shared.backend,
        limit=shared.limit,
        concurrency=shared.concurrency,
        progress=shared.progress,
    )


def _judged(arm: ArmAnswers) -> tuple[dict[str, float], list[dict[str, float]]]:
    """Each answer's verdict averaged over the repeats that gave one, and each repeat's verdicts
    (what :func:`~clinieval.benchmarks.ehrnoteqa.analysis.repeat_scores` averages per repeat)."""
    scores: dict[str, float] = {}
    runs: list[dict[str, float]] = [{} for _ in range(arm.judge_repeats)]
    for item, row in (arm.verdicts or {}).items():
        if item in arm.answer_failed or item not in arm.items:
            continue
        given = [v for v in row if v is not None]
        if given:
            scores[item] = statistics.fmean(given)
        for r, v in enumerate(row):
            if v is not None:
                runs[r][item] = v
    return scores, runs
