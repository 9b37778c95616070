"""``clinieval correlate``: benchmark-vs-clinician rank correlation, as in EHRNoteQA's table.

Parses the options, reads the tables (:mod:`clinieval.analysis.model_scores`), correlates them
(:mod:`clinieval.analysis.correlate`), prints the Markdown table
(:mod:`clinieval.analysis.correlate_markdown`). Every input problem is a
:class:`~clinieval.errors.UserError`, which ``clinieval.cli.main`` turns into one ``error:`` line
and exit code 2.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.errors import UserError


def _clinician_list(text: str) -> list[str]:
    names = [n.strip() for n in text.split(",")]
    if not any(names) or any(not n for n in names):
        raise UserError(
            f"--clinician-columns {text!r}: expected column names separated by commas, e.g. a,b,c"
        )
    return names


def correlate(
    benchmarks: Annotated[
        Path,
        typer.Option(
            help="per-model benchmark scores: .csv, .tsv, .txt, .json or .jsonl; wide (model + one column "
            "per benchmark) or long (model, benchmark, score)"
        ),
    ],
    clinicians: Annotated[
        Path | None,
        typer.Option(
            help="per-model clinician scores, same formats (wide: one column per clinician; long: "
            "model, clinician, score)"
        ),
    ] = None,
    clinician_columns: Annotated[
        str | None,
        typer.Option(
            help="instead of --clinicians: the columns of --benchmarks that are clinicians, comma-separated "
            "(every other column is a benchmark)"
        ),
    ] = None,
    model_column: Annotated[str, typer.Option(help="column naming the model")] = "model",
    lower_is_better: Annotated[
        list[str] | None,
        typer.Option(help="benchmark where lower is better (a rank, an error rate); negated (repeatable)"),
    ] = None,
    clinician_mean: Annotated[
        bool, typer.Option(help="also correlate with the clinicians' mean score (2+ clinicians)")
    ] = True,
    out: Annotated[Path | None, typer.Option(help="folder for correlation.json and correlation.md")] = None,
) -> None:
    """Spearman and Kendall correlation of each benchmark's model ranking with each clinician's."""
    from clinieval.analysis.correlate import correlate_scores
    from clinieval.analysis.correlate_markdown import render_markdown, write_outputs
    from clinieval.analysis.model_scores import read_scores, split_columns

    if (clinicians is None) == (clinician_columns is None):
        raise UserError(
            "give either --clinicians FILE, or --clinician-columns a,b,c when --benchmarks holds both"
        )
    if clinicians is not None:
        bench = read_scores(benchmarks, model_column=model_column, role="benchmark")
        clin = read_scores(clinicians, model_column=model_column, role="clinician")
    else:
        assert clinician_columns is not None
        both = read_scores(benchmarks, model_column=model_column, role="benchmark or clinician")
        bench, clin = split_columns(both, _clinician_list(clinician_columns))
    result = correlate_scores(
        bench, clin, lower_is_better=frozenset(lower_is_better or ()), clinician_mean=clinician_mean
    )
    typer.echo(render_markdown(result))
    if out is not None:
        json_path, md_path = write_outputs(result, out)
        typer.echo(f"written: {json_path}, {md_path}")
