"""``clinieval suite report``: the leaderboard over a finished suite, from what its cells recorded.

Nothing here asks a model. The suite is read back from its own manifest (the suite file's text as
last run, so the report matches what ran even if the file was edited since), each benchmark is
prepared again (data only), and for every complete cell the benchmark's ``headline`` reads back
its per-item scores. Each benchmark also writes its own report and gets a per-item results
browser (``clinieval view``'s site), and the leaderboard links both from every number. Cells that
failed or never ran are left out and named in the page's notes, never scored 0.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clinieval.errors import UserError
from clinieval.suite.manifest import SuiteManifest
from clinieval.suite.part import Headline
from clinieval.suite.plan import PlannedCell, SuitePlan

JSON = dict[str, Any]

if TYPE_CHECKING:
    from clinieval.analysis.leaderboard import BenchmarkScores
    from clinieval.suite.clinicians import ClinicianRatings
    from clinieval.suite.leaderboard import BenchmarkLinks

REPORT = "report"


@dataclass(frozen=True, slots=True)
class SuiteReport:
    """What ``suite report`` wrote: the leaderboard files, and the notes it carries."""

    files: tuple[Path, ...]
    notes: tuple[str, ...]
    benchmarks: int


def write_suite_report(
    planned: SuitePlan,
    manifest: SuiteManifest,
    *,
    notes: Sequence[str] = (),
    clinicians: ClinicianRatings | None = None,
    lam: float | None = None,
) -> SuiteReport:
    """Every complete cell's headline, each benchmark's own report and results browser, then the
    leaderboard, under ``DIR/report`` (``DIR``: the manifest's folder). With ``clinicians``
    (ratings of a ``suite sample``), each benchmark they rated is calibrated: PPI++, or plain PPI
    with the judge's weight fixed at ``lam``."""
    from clinieval.analysis.leaderboard import build_leaderboard
    from clinieval.suite.leaderboard import write_leaderboard

    out = manifest.out / REPORT
    scores: list[BenchmarkScores] = []
    links: dict[str, BenchmarkLinks] = {}
    judges: dict[str, dict[str, JSON]] = {}
    left_out: list[str] = []
    done_any = any(manifest.status(c.key) == "complete" for c in planned.cells)
    for prepared in planned.prepared:
        cells = [c for c in planned.cells if c.entry.name == prepared.benchmark]
        done = [c for c in cells if manifest.status(c.key) == "complete"]
        left_out += [_left_out(c, manifest) for c in cells if c not in done]
        left_out += echo_notes(done, manifest)
        if not done:
            continue
        headlines = {c.cell.model.name: c.entry.part.headline(prepared, c.cell) for c in done}
        pages = _own_pages(done, headlines, out)
        unscored = [c for c in done if not headlines[c.cell.model.name].scores]
        left_out += [_unscored(c, headlines[c.cell.model.name]) for c in unscored]
        facts = {m: f for m, h in headlines.items() if (f := _judge_of(h)) is not None}
        if facts:
            judges[prepared.benchmark] = facts
        ranked = {m: h for m, h in headlines.items() if h.scores}
        if ranked:
            margin = done[0].entry.table.get("margin")
            table = benchmark_scores(prepared.benchmark, _metric(done[0], ranked), ranked, margin)
            table, said = calibrated_scores(table, clinicians, lam)
            left_out += said
            scores.append(table)
            links[prepared.benchmark] = pages
    if not scores:
        why = "no complete cell has a scored item" if done_any else "no cell is complete yet"
        raise UserError(f"{manifest.out}: {why}, so nothing to rank; run `clinieval suite run` first")
    board = build_leaderboard(scores, seed=planned.suite.seed)
    all_notes = (*notes, *left_out)
    made_by = provenance(planned, manifest)
    title = planned.suite.title
    files = write_leaderboard(
        board, links, out, title=title, notes=all_notes, provenance=made_by, judges=judges
    )
    return SuiteReport(tuple(files), tuple(all_notes), len(scores))


def _judge_of(line: Headline) -> JSON | None:
    """A cell's judge facts for the page (None when no judge scored it), with its agreement with
    the benchmark's deterministic scorer where it has one."""
    from clinieval.suite.judge_facts import agreement, judge_facts

    facts = judge_facts(line.runs)
    if facts is None:
        return None
    facts["unparsed_items"] = line.unparsed
    if line.deterministic:
        agreed = agreement(line.scores, line.deterministic) or {}
        facts["deterministic"] = {"name": line.deterministic_name, **agreed}
    return facts


def provenance(planned: SuitePlan, manifest: SuiteManifest) -> list[tuple[str, str]]:
    """What produced the numbers, for the page (suite.json holds the same and more): the code, each
    data file's SHA-256 and each model's fingerprint as its cells' runs recorded it."""
    code = manifest.data.get("code", {})
    rows = [("clinieval", f"{code.get('clinieval', '?')}, commit {code.get('git_commit') or 'unknown'}")]
    rows.append(("suite file", f"sha256 {manifest.data.get('suite', {}).get('sha256', '?')}"))
    for name, bench in sorted(manifest.data.get("benchmarks", {}).items()):
        for file, digest in sorted(bench.get("data", {}).items()):
            rows.append((f"{name} data", f"{Path(file).name}: sha256 {digest}"))
    from clinieval.models.fingerprint import describe

    for model in planned.suite.models:
        found = sorted({describe(fp) for fp in _fingerprints(planned, model.name)})
        rows.append((f"model {model.name}", "; ".join(found) if found else "no fingerprint recorded"))
    return rows


def _fingerprints(planned: SuitePlan, model: str) -> list[dict[str, Any]]:
    """The model fingerprints recorded by the runs in ``model``'s cells (their manifest.json)."""
    import json

    out = []
    for c in planned.cells:
        if c.cell.model.name != model or not c.cell.out.exists():
            continue
        for path in sorted(c.cell.out.rglob("manifest.json")):
            try:
                fp = json.loads(path.read_text(encoding="utf-8")).get("model_fingerprint")
            except (OSError, ValueError):
                continue
            if isinstance(fp, dict):
                out.append(fp)
    return out


def echo_notes(cells: Sequence[PlannedCell], manifest: SuiteManifest) -> list[str]:
    """A note for each cell whose answers mostly echo their prompt (counted when the cell ran)."""
    from clinieval.records.summary import ECHO_KEY, EchoCount

    notes = []
    for c in cells:
        found = manifest.cells().get(c.key, {}).get(ECHO_KEY)
        echo = EchoCount.from_dict(found) if isinstance(found, dict) else EchoCount()
        if echo.warns:
            notes.append(f"{c.label}: {echo.message()}")
    return notes


def benchmark_scores(
    name: str, metric: str, headlines: Mapping[str, Headline], margin: float | None = None
) -> BenchmarkScores:
    """One benchmark's headlines (model name -> its cell's) as the leaderboard takes them
    (``margin``: the suite file's clinical margin for the benchmark)."""
    from clinieval.analysis.leaderboard import BenchmarkScores

    clusters: dict[str, str] = {}
    for line in headlines.values():
        clusters.update(line.clusters or {})
    first = next(iter(headlines.values()))
    return BenchmarkScores(
        name=name,
        metric=metric,
        scores={m: dict(h.scores) for m, h in headlines.items()},
        clusters=clusters or None,
        judge_runs={m: list(h.judge_runs) for m, h in headlines.items() if h.judge_runs},
        failed={m: h.failed for m, h in headlines.items()},
        scale=first.scale,
        margin=None if margin is None else float(margin),
    )


def calibrated_scores(
    board: BenchmarkScores, clinicians: ClinicianRatings | None, lam: float | None = None
) -> tuple[BenchmarkScores, list[str]]:
    """``board`` with the clinicians' ratings of it, and what the page should say about them.

    A benchmark is calibrated only when every model on its board has ratings: a model added
    after the sample was drawn has none, and a board that mixed calibrated and judge-only
    numbers would compare unlike things, so it stays judge-only and the note says why."""
    from dataclasses import replace

    from clinieval.analysis.leaderboard_calibrated import method

    if clinicians is None or board.name not in clinicians.scores:
        return board, []
    rated = clinicians.scores[board.name]
    missing = [m for m in board.scores if len(rated.get(m, {})) < 2]
    said = []
    waiting = clinicians.unreviewed.get(board.name, 0)
    if waiting:
        said.append(
            f"{board.name}: {waiting} sampled items have no submitted clinician review yet; the"
            " calibration uses the reviewed ones (a random sample still, if reviewers took items"
            " in the order given)"
        )
    if missing:
        said.append(
            f"{board.name} is not calibrated: {', '.join(missing)} has fewer than 2 clinician ratings"
            " (a model added after the sample was drawn?); draw a sample that includes it"
        )
        return board, said
    mine = {m: dict(rated[m]) for m in board.scores}
    # the estimate is of the clinicians' score, on their scale (a rating's 1-5), not the judge's
    metric = f"clinicians' {clinicians.kind}, calibrated ({method(lam).estimator}) from {board.metric}"
    calibrated = replace(
        board, metric=metric, clinicians=mine, clinician_kind=clinicians.kind, scale=clinicians.scale, lam=lam
    )
    return calibrated, said


def _metric(cell: PlannedCell, headlines: Mapping[str, Headline]) -> str:
    """What the scores are: the headlines' own name for it when they agree (what was scored in
    this suite, e.g. the judge's verdict or key-fact F1 without one), else the benchmark's."""
    named = {h.metric for h in headlines.values()}
    return named.pop() if len(named) == 1 else cell.entry.part.metric


def _own_pages(done: Sequence[PlannedCell], headlines: Mapping[str, Headline], out: Path) -> BenchmarkLinks:
    """The benchmark's own report and its results browser, as links relative to ``out``."""
    from clinieval.suite.leaderboard import BenchmarkLinks
    from clinieval.view.site import build_site

    name = done[0].entry.name
    page = done[0].entry.part.report(done[0].prepared, [c.cell for c in done], out / name)
    runs = [run for line in headlines.values() for run in line.runs]
    view = None
    if runs:
        site = out / "view" / name
        build_site(runs, site)
        view = f"view/{name}/index.html"
    report = None if page is None else Path(os.path.relpath(page, out)).as_posix()
    return BenchmarkLinks(report=report, view=view)


def _unscored(c: PlannedCell, line: Headline) -> str:
    why = f"{line.failed} failed"
    if line.unparsed:
        why += f", {line.unparsed} got no verdict from the judge"
    return (
        f"{c.label} is left out: none of its items has a score ({why}); "
        f"{c.entry.name}'s own report and its results browser (report/{c.entry.name}/, "
        f"report/view/{c.entry.name}/) show why"
    )


def _left_out(c: PlannedCell, manifest: SuiteManifest) -> str:
    cell = manifest.cells().get(c.key, {})
    status = cell.get("status", "pending")
    if status == "failed":
        return f"{c.label} is left out: it failed ({cell.get('error')})"
    return f"{c.label} is left out: it has not run yet ({status}); run `clinieval suite run` again"
