"""``clinieval automedeval convert | review-items | review-ratings``: make a judge-evaluation set
and carry the physicians' ratings into it.

A set comes from runs (``convert``) and gets its physicians' ratings through clinieval's review
browser (``review-items`` out, ``review-ratings`` back); ``judge`` and ``analyze`` then read it.
The work lives in ``convert.py``, ``data.py`` and ``review.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from clinieval.errors import UserError


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


def review_items(
    judge_set_path: Annotated[
        Path, typer.Argument(metavar="SET", help="a judge-evaluation set (.jsonl, .csv)")
    ],
    out: Annotated[Path, typer.Option(help="the review items file to write (.jsonl)")],
) -> None:
    """Turn a set into review items for physicians' ratings in the browser (`clinieval review import`)."""
    from clinieval.benchmarks.automedeval.data import load_set
    from clinieval.benchmarks.automedeval.review import to_review_items
    from clinieval.review.items import write_items

    items = to_review_items(load_set(judge_set_path))
    write_items(out, items)
    typer.echo(
        f"{len(items)} items written: {out}\nnext: clinieval review import {out} --study NAME --kind rate"
    )


def review_ratings(
    judge_set_path: Annotated[Path, typer.Argument(metavar="SET", help="the set the review items came from")],
    ratings: Annotated[Path, typer.Argument(help="ratings.csv from `clinieval review export`")],
    out: Annotated[Path, typer.Option(help="the set with the physicians' ratings (.jsonl)")],
) -> None:
    """Add the physicians' ratings from a review export to the set, for `judge` and `analyze`."""
    from clinieval.benchmarks.automedeval.convert import write_set
    from clinieval.benchmarks.automedeval.data import load_set
    from clinieval.benchmarks.automedeval.review import with_review_ratings

    items, added = with_review_ratings(load_set(judge_set_path), ratings)
    write_set(items, out)
    typer.echo(f"{added} ratings added to {len(items)} items; written: {out}")
