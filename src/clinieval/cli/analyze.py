"""``clinieval analyze`` and ``clinieval export``: statistics over per-item results.

``analyze`` takes either one long table (CSV, TSV, JSON Lines: one row per item and model) or one
or more run folders, which it turns into that table (:mod:`clinieval.records.run_table`) and compares
paired on sample ids. ``export`` writes the runs' table, so what ``analyze RUN_DIR...`` computed
can be read again, shared, or joined with clinicians' columns. Every input problem is a
:class:`~clinieval.errors.UserError`, which ``clinieval.cli.main`` turns into one ``error:`` line
and exit code 2.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from clinieval.errors import UserError

if TYPE_CHECKING:
    from clinieval.analysis.analyze import AnalyzeOptions
    from clinieval.analysis.rank_agreement import GoldRule


def analyze(
    sources: Annotated[
        list[Path],
        typer.Argument(
            metavar="TABLE|RUN_DIR",
            help="one table (.csv, .tsv or .jsonl, one row per item and model), or one or more run "
            "folders (or folders of runs) of one task, compared paired on sample ids",
            show_default=False,
        ),
    ],
    item: Annotated[str, typer.Option(help="column naming the item")] = "item",
    model: Annotated[str, typer.Option(help="column naming the model")] = "model",
    score: Annotated[
        list[str] | None, typer.Option(help="score column (repeatable; default: every other numeric column)")
    ] = None,
    lower_is_better: Annotated[
        list[str] | None, typer.Option(help="score column where lower is better (repeatable)")
    ] = None,
    human_rank: Annotated[
        str | None, typer.Option(help="column with the clinician's rank (1 = best)")
    ] = None,
    human_score: Annotated[
        str | None, typer.Option(help="column with the clinician's score, to judge a judge against")
    ] = None,
    human_label: Annotated[
        str, typer.Option(help="what the human columns are, in the report (e.g. 'computed reference')")
    ] = "clinician",
    correct: Annotated[
        str | None, typer.Option(help="column with binary correctness (1/0, true/false)")
    ] = None,
    cluster: Annotated[
        str | None, typer.Option(help="column to cluster the bootstrap by (patient, instruction)")
    ] = None,
    group: Annotated[
        list[str] | None, typer.Option(help="subgroup column for the chi-square of --correct (repeatable)")
    ] = None,
    rater: Annotated[
        str | None, typer.Option(help="column naming the clinician, for inter-rater agreement")
    ] = None,
    run: Annotated[
        str | None, typer.Option(help="column naming a repeated run, for rank instability")
    ] = None,
    gold_rank: Annotated[
        str,
        typer.Option(help="with --run, a gold rank among tied modes: first (EHRNoteQA), smallest, median"),
    ] = "smallest",
    out: Annotated[Path | None, typer.Option(help="folder for analysis.json and analysis.md")] = None,
    level: Annotated[float, typer.Option(help="confidence level")] = 0.95,
    resamples: Annotated[int, typer.Option(help="bootstrap resamples")] = 2000,
    seed: Annotated[int, typer.Option(help="bootstrap and permutation seed")] = 0,
) -> None:
    """Statistics of results: CIs, paired tests, rankings, agreement with clinicians; of a table, or
    of run folders compared directly."""
    from clinieval.analysis.analyze import AnalyzeOptions

    options = AnalyzeOptions(
        item=item,
        model=model,
        scores=tuple(score or ()),
        lower_is_better=frozenset(lower_is_better or ()),
        human_rank=human_rank,
        human_score=human_score,
        human_label=human_label,
        correct=correct,
        cluster=cluster,
        groups=tuple(group or ()),
        rater=rater,
        run=run,
        gold_rank=_gold_rule(gold_rank),
        level=level,
        resamples=resamples,
        seed=seed,
    )
    _report(_analysis(sources, options), out)


def export(
    runs: Annotated[
        list[Path],
        typer.Argument(
            metavar="RUN_DIR", help="run folders (or folders of runs) of one task", show_default=False
        ),
    ],
    table: Annotated[Path, typer.Option(help="the table to write: .csv, .tsv or .jsonl", show_default=False)],
) -> None:
    """Write the long table `clinieval analyze` reads: one row per sample and run, one column per scorer."""
    from clinieval.records.run_table import check_table_path, read_runs, write_table

    check_table_path(table)
    found = read_runs(runs)
    write_table(found, table)
    columns = ", ".join(found.table.columns)
    typer.echo(
        f"written: {table} ({len(found.table.rows)} rows from {len(found.arms)} runs; columns {columns})"
    )


def _analysis(sources: list[Path], options: AnalyzeOptions) -> dict[str, Any]:
    """The result for a table file or for run folders; a mix, or a path that is neither, is refused."""
    from clinieval.analysis.analyze import analyze as run_analysis
    from clinieval.analysis.table import read_table
    from clinieval.records.run_table import analyze_runs

    for path in sources:
        if not path.exists():
            raise UserError(f"{path}: not found; expected a table file or a run folder")
    files = [p for p in sources if not p.is_dir()]
    if not files:
        return analyze_runs(sources, options)
    if len(sources) > 1:
        raise UserError(f"{files[0]}: is a file; give one table file, or one or more run folders")
    _not_a_run_file(files[0])
    return run_analysis(read_table(files[0]), options)


def _not_a_run_file(path: Path) -> None:
    """A file inside a run folder (samples.jsonl, a scores file) is not the long table: say which
    folder to give instead of failing on its columns."""
    from clinieval.records.runs import MANIFEST, SAMPLES, SCORES, TEXTS

    folder = path.parent.parent if path.parent.name == SCORES else path.parent
    own = path.name in (MANIFEST, SAMPLES, TEXTS) or folder != path.parent
    if own and (folder / MANIFEST).is_file():
        raise UserError(
            f"{path}: a file of the run folder {folder}, not a table of results; "
            f"give the folder: clinieval analyze {folder}"
        )


def _report(result: dict[str, Any], out: Path | None) -> None:
    from rich.console import Console
    from rich.markdown import Markdown

    from clinieval.analysis.markdown import render_markdown
    from clinieval.fsutil import atomic_write_json, atomic_write_text

    text = render_markdown(result)
    if sys.stdout.isatty():
        Console().print(Markdown(text))
    else:  # a pipe or a log: the Markdown itself, whose tables no terminal width can cut
        typer.echo(text)
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_json(out / "analysis.json", result)
        atomic_write_text(out / "analysis.md", text)
        typer.echo(f"written: {out / 'analysis.json'}, {out / 'analysis.md'}")


def _gold_rule(name: str) -> GoldRule:
    from clinieval.analysis.rank_agreement import GOLD_RULES
    from clinieval.errors import one_of

    return one_of(name, GOLD_RULES, "--gold-rank")
