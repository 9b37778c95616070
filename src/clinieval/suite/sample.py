"""``clinieval suite sample``: a seeded sample of a finished suite's judged items, as review studies
for clinicians, so the judge behind the leaderboard's numbers can be calibrated against them.

Nothing here asks a model. The suite is read back as ``suite report`` reads it; each benchmark
whose score a judge decided in this suite (its headlines carry the judge's repeats) gets one
sample (:mod:`clinieval.suite.sample_design` says how it is drawn) and one study in the review
database: the benchmark's own review items for the sampled questions (its part's
``review_items``: the question, the record the models saw, the reference), every model's answer
under a blind key, model names in the answers masked as every import masks them (also the names
the models' specs serve them under), and never the judge's verdict.

The study's kind follows the judge: 1/0 verdicts make a correctness study (the rank kind with
``rank: false``: correct or not, per answer), graded ones a rating study (the rate kind, one 1-5
scale); ``--kind ranking`` makes a rank study of every model's answer to the item. The draw goes
into the study's config and, with each answer's model, into ``RUN_DIR/calibration/<name>.json``.

Running it again with the same settings changes nothing (the import is all or nothing, and an
item already there must be unchanged); another seed, size or kind for a sample or study that
exists is refused: ratings already given rest on the first draw.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clinieval.errors import UserError
from clinieval.suite.manifest import SuiteManifest
from clinieval.suite.part import Headline, Prepared, SuitePart
from clinieval.suite.plan import PlannedCell, SuitePlan
from clinieval.suite.sample_design import (
    DEFAULT_NAME,
    KINDS,
    BenchmarkSample,
    SampleDesign,
    answer_keys,
    design_path,
    draw,
    read_design,
    review_study,
    write_design,
)

if TYPE_CHECKING:
    from sqlalchemy import Engine

    from clinieval.review.importing import ImportCounts
    from clinieval.review.items import ReviewItem

BY = "clinieval suite sample"


@dataclass(frozen=True, slots=True)
class SampleRequest:
    """What to draw: ``n`` items per benchmark, the seed, the kind of study (None: from the
    judge's verdicts) and the sample's name (None: ``sample``, studies named after the suite)."""

    n: int
    seed: int = 0
    kind: str | None = None
    study: str | None = None


@dataclass(frozen=True, slots=True)
class Judged:
    """A benchmark a judge scored in this suite: its data, every model's complete cell, and each
    model's headline."""

    prepared: Prepared
    cells: tuple[PlannedCell, ...]
    headlines: Mapping[str, Headline]

    @property
    def name(self) -> str:
        return self.prepared.benchmark

    @property
    def part(self) -> SuitePart:
        return self.cells[0].entry.part

    @property
    def binary(self) -> bool:
        """Whether every verdict of every judge repeat is 1 or 0."""
        return all(
            v in (0.0, 1.0) for h in self.headlines.values() for run in h.judge_runs for v in run.values()
        )

    def eligible(self) -> list[str]:
        """The items every model's cell has a judge score for."""
        scored = [set(h.scores) for h in self.headlines.values()]
        return sorted(set.intersection(*scored)) if scored else []

    def patients(self) -> dict[str, str]:
        out: dict[str, str] = {}
        for h in self.headlines.values():
            out.update(h.clusters or {})
        return out


@dataclass(frozen=True, slots=True)
class SampleOutcome:
    """What ``sample_suite`` did: the design and where it is, and each study's import."""

    design: SampleDesign
    path: Path
    imports: tuple[tuple[BenchmarkSample, ImportCounts], ...]


def judged_benchmarks(planned: SuitePlan, manifest: SuiteManifest) -> list[Judged]:
    """The benchmarks a judge scored in this suite, each with every model's cell complete (a
    sample covers every model, so an unfinished cell is refused by name)."""
    out = []
    for prepared in planned.prepared:
        cells = tuple(c for c in planned.cells if c.entry.name == prepared.benchmark)
        if not cells or not cells[0].entry.part.judged or cells[0].cell.shared.judge is None:
            continue
        for c in cells:
            if manifest.status(c.key) != "complete":
                raise UserError(
                    f"{manifest.out}: {c.label} is {manifest.status(c.key)}; a clinician sample covers"
                    " every model, so finish the suite first (`clinieval suite run` resumes it)"
                )
        headlines = {c.cell.model.name: c.entry.part.headline(prepared, c.cell) for c in cells}
        if any(h.judge_runs for h in headlines.values()):
            out.append(Judged(prepared, cells, headlines))
    if not out:
        raise UserError(
            f"{manifest.out}: no benchmark of this suite was scored by a judge, so there is no judge"
            " to calibrate (MedAlign and EHRNoteQA are, when the suite names a [judge])"
        )
    return out


def study_name(request: SampleRequest, title: str, benchmark: str) -> str:
    """``NAME-<benchmark>`` for ``--study NAME``, else ``<suite title>-<benchmark>-calibration``."""
    from clinieval.fsutil import slug

    if request.study is not None:
        return f"{request.study}-{benchmark}"
    return f"{slug((title or 'suite').lower())}-{benchmark}-calibration"


def draw_design(judged: Sequence[Judged], request: SampleRequest, title: str, created: str) -> SampleDesign:
    """Each judged benchmark's sample (:func:`~clinieval.suite.sample_design.draw`)."""
    if request.n < 1:
        raise UserError(f"--n {request.n}: draw at least 1 item per benchmark")
    samples = []
    for j in judged:
        kind = request.kind or ("correctness" if j.binary else "rating")
        if kind not in KINDS:
            raise UserError(f"--kind {kind!r}: choose {', '.join(KINDS)}")
        models = tuple(j.headlines)
        if kind == "ranking" and len(models) < 2:
            raise UserError(f"--kind ranking: {j.name} has one model; a ranking needs two or more")
        eligible = j.eligible()
        if not eligible:
            raise UserError(f"{j.name}: no item has a judge score in every model's cell; nothing to sample")
        of = j.patients()
        patients, items = draw(eligible, of, request.n, request.seed, j.name)
        samples.append(
            BenchmarkSample(
                benchmark=j.name,
                study=study_name(request, title, j.name),
                models=models,
                judged={m: len(h.scores) for m, h in j.headlines.items()},
                eligible=len(eligible),
                patients=tuple(patients),
                items=tuple(items),
                patient_of={i: of.get(i, i) for i in items},
                answers={i: answer_keys(models, request.seed, j.name, i) for i in items},
                binary=j.binary,
            )
        )
    kinds = {request.kind or ("correctness" if j.binary else "rating") for j in judged}
    if len(kinds) > 1:
        raise UserError(
            "the judged benchmarks' verdicts differ (1/0 in some, graded in others): choose one --kind"
            f" ({', '.join(KINDS)}) for them all"
        )
    return SampleDesign(
        name=request.study or DEFAULT_NAME,
        seed=request.seed,
        n=request.n,
        kind=kinds.pop(),
        created=created,
        suite=title,
        benchmarks=tuple(samples),
    )


def sample_suite(
    planned: SuitePlan, manifest: SuiteManifest, request: SampleRequest, db: str
) -> SampleOutcome:
    """Draw the sample of the suite at ``manifest.out``, import it as studies into the review
    database ``db`` and record its design (module docstring). Everything is checked before the
    first study is written."""
    from clinieval.review.store import connect

    judged = judged_benchmarks(planned, manifest)
    path = design_path(manifest.out, request.study or DEFAULT_NAME)
    old = read_design(path) if path.is_file() else None
    engine = connect(db)
    title = planned.suite.title
    recorded = _recorded_designs(engine, [study_name(request, title, j.name) for j in judged])
    created = old.created if old else next(iter(recorded.values()), {}).get("created") or _now()
    design = draw_design(judged, request, title, str(created))
    if old is not None and not old.same_draw(design):
        raise UserError(_redraw(f"{path}: sample {old.name!r}", old.settings(), design, request))
    for b in design.benchmarks:
        was = recorded.get(b.study)
        if was is not None and was != design.study_design(b.benchmark):
            settings = f"seed {was.get('seed')}, n {was.get('n')}, {was.get('kind')}"
            raise UserError(_redraw(f"study {b.study!r}", settings, design, request))
    batches = [(b, _items(j, b)) for j, b in zip(judged, design.benchmarks, strict=True)]
    imports = tuple((b, _import(engine, design, b, items, planned)) for b, items in batches)
    write_design(path, design)
    return SampleOutcome(design, path, imports)


def _redraw(what: str, was: str, design: SampleDesign, request: SampleRequest) -> str:
    now = design.settings()
    why = f"was drawn with {was}; this asks {now}" if was != now else "was drawn from other judged items"
    hint = "the same --seed, --n and --kind to add nothing" if was != now else "a new --study NAME"
    return (
        f"{what} {why}. Clinicians' ratings rest on the first draw, so it is kept: give a new"
        f" --study NAME for another sample (or {hint})"
    )


def _recorded_designs(engine: Engine, studies: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The design each of ``studies`` recorded, for those that exist; a study of that name that
    ``suite sample`` did not make is refused (its items are someone else's)."""
    from clinieval.review.store import list_studies
    from clinieval.review.study_kinds.base import DESIGN_KEY

    out: dict[str, dict[str, Any]] = {}
    for study in list_studies(engine):
        if study.name not in studies:
            continue
        design = study.config.get(DESIGN_KEY)
        if not isinstance(design, dict) or design.get("by") != BY:
            raise UserError(
                f"study {study.name!r} already exists and was not made by `{BY}`; give a new --study NAME"
            )
        out[study.name] = design
    return out


def _items(judged: Judged, sample: BenchmarkSample) -> list[ReviewItem]:
    """The benchmark's review items for the sampled questions, each answer under its blind key."""
    from clinieval.review.items import AnswerIn

    given = judged.part.review_items(judged.prepared, [c.cell for c in judged.cells], sample.items)
    by_id = {it.item: it for it in given}
    out = []
    for item in sample.items:
        found = by_id.get(item)
        texts = {} if found is None else {a.source: a.text for a in found.answers}
        lacking = [m for m in sample.models if m not in texts]
        if found is None or lacking:
            who = ", ".join(lacking) if found is not None else "any model"
            raise UserError(
                f"{sample.benchmark}: item {item!r} was judged but its answer from {who} is not in the"
                " runs; was a cell run again since? (`clinieval suite report` reads the same runs)"
            )
        keyed = sample.answers[item]
        out.append(replace(found, answers=tuple(AnswerIn(k, m, texts[m]) for k, m in keyed.items())))
    return out


def _import(
    engine: Engine,
    design: SampleDesign,
    sample: BenchmarkSample,
    items: Sequence[ReviewItem],
    planned: SuitePlan,
) -> ImportCounts:
    """The items into the benchmark's study, masking the names the models' specs serve them under
    as well as the suite's names for them."""
    from clinieval.review.importing import import_items
    from clinieval.review.study_kinds.base import DESIGN_KEY

    kind, config = review_study(design.kind)
    config[DESIGN_KEY] = design.study_design(sample.benchmark)
    specs = [m.spec for m in planned.suite.models if m.name in sample.models]
    return import_items(engine, sample.study, kind, config, items, names=specs)


def sample_lines(outcome: SampleOutcome, db: str) -> list[str]:
    """What ``suite sample`` prints: each benchmark's draw and study, the design file, what next."""
    from clinieval.review.db import shown_url

    d = outcome.design
    lines = []
    for b, counts in outcome.imports:
        made = "created" if counts.study_created else "already there"
        short = " (fewer judged items than --n: all drawn)" if b.eligible < d.n else ""
        lines.append(
            f"{b.benchmark}: {len(b.items)} of {b.eligible} items judged for every model{short}, from"
            f" {len(b.patients)} patient(s), x {len(b.models)} models -> study {b.study} ({d.kind}; {made}):"
            f" {counts.added} item(s) added, {counts.unchanged} unchanged"
        )
        if counts.masked_mentions:
            lines.append(f"  masked {counts.masked_mentions} mention(s) of model names in the answers")
    lines.append(f"design ({d.settings()}): {outcome.path}")
    where = shown_url(db)
    for b, _ in outcome.imports:
        lines.append(f"next: clinieval review assign --db {where} --study {b.study} --per-item 2")
    return lines


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")
