"""``clinieval ehr …``: convert, describe and synthesise patient records. Thin: parse, call, print."""

from __future__ import annotations

import statistics
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from clinieval.cli_options import ShowProgress, command_group
from clinieval.ehr.timeline import Timeline
from clinieval.errors import UserError
from clinieval.fsutil import atomic_write_text, staged_dir

if TYPE_CHECKING:
    from rich.progress import Progress

app = command_group("Patient records: OMOP CDM, MedAlign XML, synthetic patients.")


def _check_output(out_dir: Path, overwrite: bool) -> None:
    """Refuse to replace a non-empty ``out_dir`` unless asked (it is replaced only when all is written)."""
    if out_dir.exists() and any(out_dir.iterdir()) and not overwrite:
        raise UserError(f"{out_dir}: exists and is not empty; choose another folder or pass --overwrite")


def _progress(label: str) -> Progress:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    columns = (TextColumn(label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    return Progress(*columns, console=Console(stderr=True))


@app.command()
def omop2xml(
    omop_dir: Annotated[Path, typer.Argument(help="folder of OMOP CDM CSV/Parquet tables, or a DuckDB file")],
    out_dir: Annotated[Path, typer.Argument(help="folder for one MedAlign XML file per patient")],
    overwrite: Annotated[bool, typer.Option(help="replace a non-empty OUT_DIR")] = False,
    progress: ShowProgress = True,
    memory_limit: Annotated[
        str, typer.Option(help="DuckDB memory limit while staging tables (100,000 patients need more)")
    ] = "2GB",
) -> None:
    """Write each patient of an OMOP CDM database as MedAlign's XML (visit → day → events)."""
    from clinieval.ehr.medalign_xml import write_xml
    from clinieval.ehr.omop.source import open_omop

    with open_omop(omop_dir, memory_limit=memory_limit) as source:
        ids = source.person_ids()
        _check_output(out_dir, overwrite)
        with staged_dir(out_dir, "the XML folder") as tmp, _progress("patients") as bar:
            task = bar.add_task("omop2xml", total=len(ids), visible=progress)
            for tl in source.iter_timelines():
                write_xml(tl, tmp / f"{_safe_name(tl.person.person_id)}.xml")
                bar.advance(task)
        summary = source.summary()
    from clinieval.records.summary import format_counts

    rows = format_counts(summary["rows"], empty="")
    issues = format_counts(summary["issues"], empty="none")
    typer.echo(f"{summary['timelines']} patients written to {out_dir}\nrows read: {rows}\nissues: {issues}")
    if summary["missing_tables"]:
        typer.echo(f"tables not present: {', '.join(summary['missing_tables'])}")


def _safe_name(person_id: str) -> str:
    keep = "".join(c if c.isalnum() or c in "-_." else "_" for c in person_id)
    return keep or "unknown"


def _timelines(source: Path) -> Iterator[Timeline]:
    """Timelines from an OMOP folder/database, one MedAlign XML file, or a folder of them."""
    from clinieval.ehr.medalign_xml import read_xml

    if source.is_file() and source.suffix.lower() == ".xml":
        yield read_xml(source)
        return
    xmls = sorted(source.glob("*.xml")) if source.is_dir() else []
    if xmls:
        for path in xmls:
            yield read_xml(path)
        return
    from clinieval.ehr.omop.source import open_omop

    with open_omop(source) as omop:
        yield from omop.iter_timelines()


@app.command()
def stats(
    source: Annotated[
        Path, typer.Argument(help="OMOP folder/database, a MedAlign XML file, or a folder of them")
    ],
    tokenizer: Annotated[
        str,
        typer.Option(help="budget tokenizer spec, e.g. tiktoken:cl100k_base, llamacpp:smollm2-135m-instruct"),
    ] = "tiktoken:cl100k_base",
    csv: Annotated[Path | None, typer.Option(help="also write per-patient rows to this CSV")] = None,
) -> None:
    """Per-patient counts and XML token lengths, summarised like MedAlign's Table S5."""
    from clinieval.context.tokenizers import tokenizer_from_spec
    from clinieval.ehr.medalign_xml import timeline_to_xml

    tok = tokenizer_from_spec(tokenizer)
    rows: list[dict[str, int | str]] = []
    for tl in _timelines(source):
        rows.append(
            {
                "person_id": tl.person.person_id,
                "visits": len(tl.visits),
                "events": len(tl.events),
                "notes": len(tl.notes),
                "tokens": tok.count(timeline_to_xml(tl)),
            }
        )
    if not rows:
        raise UserError(f"{source}: no patients found")
    if csv is not None:
        header = list(rows[0])
        lines = [",".join(header)] + [",".join(str(r[h]) for h in header) for r in rows]
        atomic_write_text(csv, "\n".join(lines) + "\n")
    _print_stats(rows, f"{source} ({len(rows)} patients, tokens: {tok.name})")


def _print_stats(rows: list[dict[str, int | str]], title: str) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in ("", "median", "IQR", "min", "max", "total"):
        table.add_column(col, justify="left" if not col else "right")
    for key in ("visits", "events", "notes", "tokens"):
        values = sorted(int(r[key]) for r in rows)
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        table.add_row(
            key,
            f"{statistics.median(values):g}",
            f"{q[2] - q[0]:g}",
            str(values[0]),
            str(values[-1]),
            str(sum(values)),
        )
    Console().print(table)


@app.command()
def synth(
    out_dir: Annotated[Path, typer.Argument(help="folder for the OMOP CDM CSV tables")],
    patients: Annotated[int, typer.Option(min=1, help="number of patients")] = 100,
    seed: Annotated[int, typer.Option(help="patient i is the same for a given seed whatever N is")] = 0,
    overwrite: Annotated[bool, typer.Option(help="replace OUT_DIR if it exists")] = False,
) -> None:
    """Generate synthetic patients (real ICD-10/SNOMED, RxNorm and LOINC codes) as OMOP CDM CSVs."""
    from clinieval.ehr.synth import write_omop

    path = write_omop(patients, seed, out_dir, overwrite=overwrite)
    typer.echo(f"{patients} synthetic patients (seed {seed}) written to {path}")
