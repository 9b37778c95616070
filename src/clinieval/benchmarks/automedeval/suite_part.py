"""AutoMedEval as a suite runs it: each model under test *is a judge*, judging one set.

AutoMedEval evaluates judges, so a suite's models take the judge's seat: each judges every item of
the judge-evaluation set ``repeats`` times through :func:`~.judging.judge_all` (the benchmark's own
pass: its prompt, its cache, its verdict parsing, its knowledge chain when a base is given), into
the cell's folder, and is ranked by how well it agrees with the physicians.

The paper's headline is Accuracy_triple (the judge reproduces the physicians' ordering of an item's
responses, ties included), computed on each run's own verdicts and averaged over the runs. Per item
that is the item's triple right (1) or wrong (0), averaged over its runs, and the mean over items
equals the paper's figure whenever every run scores the same items (Accuracy_2-tuple, the share of
pairs ordered right, is the option ``agreement = "2-tuple"``). An unparsed reply is the judge's
answer and counts wrong in its run, as in the paper; a *failed call* (the model never answered) is
no answer at all, so that run is left out of the item, and an item whose every run failed is left
out and counted. ``judge_runs`` holds each run's per-item figure, so the leaderboard can show how a
ranking by judges moves between runs. Items without a full set of physician ratings are judged
(the benchmark's pass judges the whole set) but not scored.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clinieval.errors import UserError
from clinieval.suite.part import Cell, CheckedModels, Headline, Prepared, Shared, Step

if TYPE_CHECKING:
    from clinieval.benchmarks.automedeval.judge_set import JudgeItem
    from clinieval.benchmarks.automedeval.judging import Entry, JudgePlan
    from clinieval.review.items import ReviewItem

NAME = "automedeval"
METRIC = "agreement with physicians as a judge (Accuracy_triple per item, 0-1)"
METRIC_2TUPLE = "agreement with physicians as a judge (Accuracy_2-tuple per item, 0-1)"
SET_NAMES = ("set.jsonl", "set.csv", "set.tsv")
SYNTHETIC_FORMAT = "clinieval-automedeval-synthetic/1"
MANIFEST = "manifest.json"


@dataclass(frozen=True, slots=True)
class AutoMedEvalOptions:
    """An ``[benchmarks.automedeval]`` table: the set the models judge and how they judge it."""

    data: Path | None = field(
        default=None,
        metadata={
            "help": "a judge-evaluation set with physician ratings (.jsonl, .csv, .tsv) "
            "or a folder holding set.jsonl"
        },
    )
    kb: Path | None = field(
        default=None,
        metadata={"help": "a `automedeval kb build` folder: turns on the knowledge completion chain"},
    )
    kb_mode: Literal["bm25", "dense", "hybrid"] = field(
        default="bm25", metadata={"help": "how the knowledge base is searched"}
    )
    repeats: int = field(
        default=3, metadata={"help": "runs per item (the paper: 3, each metric per run, then averaged)"}
    )
    order: Literal["fixed", "shuffled", "balanced"] = field(
        default="fixed", metadata={"help": "the order each run shows the responses in (fixed: the paper's)"}
    )
    one_shot: bool = field(
        default=False,
        metadata={"help": "show the worked example first (for judges not trained on the format)"},
    )
    seed: int | None = field(
        default=None,
        metadata={"help": "seed of the orders and of run r (seed + r); default: the suite's seed"},
    )
    agreement: Literal["triple", "2-tuple"] = field(
        default="triple",
        metadata={"help": "the per-item headline: triple (the paper's headline) or 2-tuple (share of pairs)"},
    )
    max_tokens: int = field(default=512, metadata={"help": "judge reply limit"})
    stop: tuple[str, ...] = field(default=(), metadata={"help": "stop sequences of the judge's reply"})
    rationale: bool = field(
        default=True, metadata={"help": "the report scores rationales against reference ones with BERTScore"}
    )


@dataclass(frozen=True, slots=True)
class _Payload:
    items: tuple[JudgeItem, ...]
    """The items each model judges (after limit)."""
    rated: int
    """How many of them have every response rated (the scored ones)."""
    plan: JudgePlan
    synthetic: bool


def _resolve(path: Path, base: Path) -> Path:
    return path if path.is_absolute() else base / path


def set_file(options: AutoMedEvalOptions, base: Path) -> Path:
    """The set file ``data`` names: the file itself, or the one set file in the folder."""
    if options.data is None:
        raise UserError(
            "automedeval needs `data`: a judge-evaluation set with physician ratings "
            "(`clinieval automedeval demo` writes a synthetic one)"
        )
    path = _resolve(options.data, base)
    if path.is_dir():
        found = [path / n for n in SET_NAMES if (path / n).is_file()]
        if len(found) != 1:
            raise UserError(
                f"{path}: automedeval.data is a folder, so it must hold exactly one of {', '.join(SET_NAMES)}"
                + (f" (it holds {', '.join(p.name for p in found)})" if found else "")
            )
        return found[0]
    if not path.is_file():
        raise UserError(f"{path}: automedeval.data not found (a set file, or a folder holding set.jsonl)")
    return path


def _synthetic(path: Path) -> bool:
    manifest = path.parent / MANIFEST
    try:
        return bool(json.loads(manifest.read_text(encoding="utf-8")).get("format") == SYNTHETIC_FORMAT)
    except (OSError, ValueError, AttributeError):
        return False


def judge_plan(options: AutoMedEvalOptions, shared: Shared, base: Path) -> JudgePlan:
    """The benchmark's own judging plan from the options and the suite's settings."""
    from clinieval.benchmarks.automedeval.judging import JUDGE_GENERATION, JudgePlan
    from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase

    if options.repeats < 1 or options.max_tokens < 1:
        raise UserError(
            f"automedeval.repeats is {options.repeats} and max_tokens {options.max_tokens}; "
            "both must be at least 1"
        )
    kb = None
    if options.kb is not None:
        folder = _resolve(options.kb, base)
        if not folder.is_dir():
            raise UserError(
                f"{folder}: automedeval.kb is not a folder (`clinieval automedeval kb build` writes one)"
            )
        kb = KnowledgeBase(folder, mode=options.kb_mode)
    return JudgePlan(
        repeats=options.repeats,
        seed=shared.seed if options.seed is None else options.seed,
        generation=dataclasses.replace(
            JUDGE_GENERATION, max_tokens=options.max_tokens, stop=tuple(options.stop)
        ),
        kb=kb,
        concurrency=shared.concurrency,
        progress=shared.progress,
        one_shot=options.one_shot,
        order=options.order,
    )


def _rated(item: JudgeItem) -> bool:
    from clinieval.analysis.judge_vs_human import complete

    return complete(item.human_scores()) is not None


def call_failed(entry: Entry) -> bool:
    """Whether the judge never answered (a failed call), as against an answer that did not parse."""
    return entry.scores is None and (entry.error or "").startswith("judge call failed")


def run_figures(
    items: Sequence[JudgeItem], entries: Sequence[Entry], agreement: str
) -> list[dict[str, float]]:
    """Per run, item id -> that run's figure for the item (triple right 0/1, or the share of pairs
    ordered right); an unparsed reply is 0, a failed call leaves the item out of that run."""
    from clinieval.analysis.judge_vs_human import complete
    from clinieval.analysis.rank_agreement import order_agreement

    reference = {item.id: complete(item.human_scores()) for item in items}
    runs: dict[int, dict[str, float]] = {}
    for entry in entries:
        ref = reference.get(entry.item)
        figures = runs.setdefault(entry.repeat, {})
        if ref is None or call_failed(entry):
            continue
        judged = None if entry.scores is None else [float(s) for s in entry.scores]
        oa = order_agreement([ref], [judged])
        figures[entry.item] = oa.accuracy_triple if agreement == "triple" else oa.accuracy_2tuple
    return [runs[r] for r in sorted(runs)]


@dataclass(frozen=True, slots=True)
class AutoMedEvalPart:
    """AutoMedEval's :class:`~clinieval.suite.part.SuitePart` (module docstring)."""

    name: str = NAME
    options: type[Any] = AutoMedEvalOptions
    judged: bool = False
    metric: str = METRIC

    def prepare(self, options: Any, shared: Shared, base: Path) -> Prepared:
        from clinieval.benchmarks.automedeval.data import load_set

        path = set_file(options, base)
        items = load_set(path)
        rated = sum(_rated(x) for x in items)
        if not rated:
            raise UserError(
                f"{path}: no item has every response rated by physicians; a suite ranks judges by their "
                "agreement with the physicians"
            )
        plan = judge_plan(options, shared, base)
        kept = tuple(items if shared.limit is None else items[: shared.limit])
        scored = sum(_rated(x) for x in kept)
        if not scored:
            raise UserError(
                f"{path}: none of the first {len(kept)} items (the suite's limit) has every response "
                "rated; raise the limit or put rated items first"
            )
        files = [path, *([] if options.kb is None else sorted(_resolve(options.kb, base).glob("*")))]
        chain = "" if plan.kb is None else ", with the knowledge chain"
        return Prepared(
            benchmark=NAME,
            options=options,
            items=len(kept),
            data_files=tuple(f for f in files if f.is_file()),
            describe=f"{path.name}: {len(kept)} items judged ({scored} rated) x {plan.repeats} runs, "
            f"{plan.order} order{chain}",
            payload=_Payload(kept, scored, plan, _synthetic(path)),
        )

    def plan(self, prepared: Prepared, cell: Cell) -> Sequence[Step]:
        payload: _Payload = prepared.payload
        what = f"judge x{payload.plan.repeats}"
        if payload.plan.kb is not None:
            what += " (each may add up to 3 knowledge lookups, not counted)"
        return [Step(what, cell.model.spec, len(payload.items) * payload.plan.repeats)]

    async def check(self, prepared: Prepared, cell: Cell, models: CheckedModels) -> None:
        """What ``automedeval judge`` checks first: the model under test, a judge here, opened."""
        from clinieval.benchmarks.automedeval.overlap_judge import judge_model

        await models.checked(cell.model.spec, lambda spec: judge_model(spec, cell.shared.backend))

    async def run(self, prepared: Prepared, cell: Cell) -> None:
        from clinieval.benchmarks.automedeval.judging import judge_all
        from clinieval.benchmarks.automedeval.overlap_judge import judge_model

        payload: _Payload = prepared.payload
        plan = dataclasses.replace(
            payload.plan, concurrency=cell.shared.concurrency, progress=cell.shared.progress
        )
        judge = judge_model(cell.model.spec, cell.shared.backend)
        await judge_all(payload.items, [judge], [cell.out], plan)

    def headline(self, prepared: Prepared, cell: Cell) -> Headline:
        from clinieval.benchmarks.automedeval.judging import read_verdicts

        payload: _Payload = prepared.payload
        wanted = {x.id for x in payload.items}
        entries = [e for e in read_verdicts(cell.out) if e.item in wanted and e.repeat < payload.plan.repeats]
        runs = run_figures(payload.items, entries, prepared.options.agreement)
        scores: dict[str, float] = {}
        failed = 0
        for item in payload.items:
            if not _rated(item):
                continue
            got = [run[item.id] for run in runs if item.id in run]
            if got:
                scores[item.id] = sum(got) / len(got)
            else:
                failed += 1
        metric = METRIC if prepared.options.agreement == "triple" else METRIC_2TUPLE
        return Headline(metric, scores, None, judge_runs=runs, failed=failed)

    def report(self, prepared: Prepared, cells: Sequence[Cell], out: Path) -> Path | None:
        from clinieval.benchmarks.automedeval import report
        from clinieval.benchmarks.automedeval.analysis import AnalysisSettings, analyze, read_judge_runs
        from clinieval.benchmarks.automedeval.demo import SYNTHETIC_WARNING

        payload: _Payload = prepared.payload
        judged = [c for c in cells if (c.out / "verdicts.jsonl").is_file()]
        if not judged:
            return None
        runs = [
            dataclasses.replace(run, name=cell.model.name)
            for cell, run in zip(judged, read_judge_runs([c.out for c in judged]), strict=True)
        ]
        settings = AnalysisSettings(rationale=prepared.options.rationale, seed=payload.plan.seed)
        warnings = [SYNTHETIC_WARNING] if payload.synthetic else []
        report.write(analyze(payload.items, runs, settings, warnings=warnings), out)
        return out / "automedeval.html"

    def synthetic(self, folder: Path, seed: int) -> Mapping[str, Any]:
        from clinieval.benchmarks.automedeval.convert import write_set
        from clinieval.benchmarks.automedeval.demo import DEMO_STOP
        from clinieval.benchmarks.automedeval.synth import synthetic_set
        from clinieval.fsutil import atomic_write_json

        folder.mkdir(parents=True, exist_ok=True)
        write_set(synthetic_set(SYNTHETIC_ITEMS, seed=seed), folder / "set.jsonl")
        atomic_write_json(
            folder / MANIFEST,
            {"format": SYNTHETIC_FORMAT, "synthetic": True, "items": SYNTHETIC_ITEMS, "seed": seed,
             "note": "synthetic judge-evaluation set: rule-made physician ratings, not real physicians"},
        )  # fmt: skip
        return {
            "data": str(folder),
            "repeats": SYNTHETIC_REPEATS,
            "one_shot": True,
            "max_tokens": SYNTHETIC_MAX_TOKENS,
            "stop": list(DEMO_STOP),
        }

    def review_items(
        self, prepared: Prepared, cells: Sequence[Cell], items: Collection[str]
    ) -> Sequence[ReviewItem]:
        """No judge decides AutoMedEval's score, so there is nothing to calibrate with clinicians."""
        return ()


SYNTHETIC_ITEMS = 4
SYNTHETIC_REPEATS = 1
SYNTHETIC_MAX_TOKENS = 160
"""The suite demo's set: four items, one run each, the worked example first and the demo's stop,
and replies cut at 160 tokens (the demo's 256 made the cell about 6 minutes on a busy 2-core
machine; a verdict with a short analysis fits). The judge decodes at temperature 0, so on the
embedded (deterministic) models a second run repeats the first word for word: it would double
the cell's time and show a spread of 0 by construction."""
