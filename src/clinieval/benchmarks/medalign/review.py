"""MedAlign arms to clinician review in the browser (``clinieval review import ARM...``).

The paper's clinicians ranked every model's answer to an instruction and marked each correct or
not, reading the whole record. Here each run folder of ``clinieval medalign run`` (or any runs of
the same instructions) is one arm, and each instruction every arm answered becomes one ``rank``
item: the instruction as the prompt, the patient's record as the context, the clinician's gold
response as the reference, and one answer per arm (``a1`` for the first run given, ``a2`` ...).
Each answer's model is the arm's label exactly as ``clinieval medalign analyze`` names the arm, so
the export's ``reviews.csv`` joins the runs again:

    clinieval medalign analyze ARM... --reviews EXPORT/reviews.csv

A failed call is no answer to rank: it is left out of its item (the analysis counts it as
incorrect, the paper's rule for provider errors), and an instruction with fewer than two answers
left is left out whole; both are counted in the import's notes.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from clinieval.errors import UserError
from clinieval.review.sources import Converted, ReviewSource

AUTHOR_KEYS = ("submitter_id", "author")
"""Sample metadata that names who wrote the instruction, so that clinician never reviews it. The
release's TSV has no submitter id (only a specialty) and ``data.py`` keeps none, so today this is
only filled for runs whose samples carry one (a JSON Lines set of your own)."""


def accepts(paths: Sequence[Path]) -> bool:
    """Two or more run folders (or folders of them); anything else is not ours (never an error)."""
    from clinieval.records.runs import find_run_dirs

    try:
        return len(find_run_dirs(list(paths))) >= 2
    except UserError:
        return False


def _label(manifest: dict[str, object], path: Path) -> str:
    """The arm's label as ``clinieval medalign analyze`` writes it (model/strategy); for a run that
    is no MedAlign arm, the model and its format when it has one."""
    from clinieval.benchmarks.medalign.task import arm_label
    from clinieval.models.spec import model_short_name

    spec = manifest.get("spec")
    spec = spec if isinstance(spec, dict) else {}
    model = (spec.get("model") or {}).get("spec")
    params = (spec.get("task") or {}).get("params") or {}
    if not isinstance(model, str) or not model:
        raise UserError(f"{path}: the run's manifest names no model")
    strategy = params.get("strategy")
    if isinstance(strategy, str) and strategy:
        return arm_label(model, strategy)
    variant = params.get("format")
    return (
        f"{model_short_name(model)}/{variant}"
        if isinstance(variant, str) and variant
        else model_short_name(model)
    )


def _author(metadata: dict[str, object]) -> str | None:
    """Who wrote the instruction (:data:`AUTHOR_KEYS`): the review never assigns it to them."""
    for key in AUTHOR_KEYS:
        value = metadata.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool) and str(value).strip():
            return str(value).strip()
    return None


def convert(paths: Sequence[Path]) -> Converted:
    """One ``rank`` item per instruction every run answered (sorted by instruction id: a run's
    file is in completion order, which concurrency makes vary)."""
    from clinieval.records.runs import RunDir, find_run_dirs

    found = find_run_dirs(list(paths))
    if len(found) < 2:
        raise UserError("give two or more run folders (the arms): a rank study compares answers")
    labels = [_label(RunDir.open(p).manifest(), p) for p in found]
    converted = arm_items(found, labels)
    if not converted.items:
        raise UserError("no instruction has answers from two arms (every other call failed); nothing to rank")
    return converted


def arm_items(
    paths: Sequence[Path], labels: Sequence[str], *, keep: Collection[str] | None = None, least: int = 2
) -> Converted:
    """The items of the arms at ``paths`` (each answer's ``source`` its arm's label): one per
    instruction every arm answered (only those in ``keep`` when given), with the arms that answered
    it; one with fewer than ``least`` answers is left out. ``convert`` reads arms this way, and so
    does the suite's clinician sample (with its own model names as the labels)."""
    from clinieval.review.arms import arm_answers, shared_records
    from clinieval.review.items import ReviewItem

    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise UserError(f"two run folders are the same arm ({', '.join(dupes)}); give each arm once")
    shared = shared_records(paths, noun="instruction", keep=keep)
    items: list[ReviewItem] = []
    failed = too_few = 0
    for iid in shared.ids:
        records = shared.records[iid]
        sample = records[0].sample
        answers = arm_answers(labels, records)
        failed += len(records) - len(answers)
        if len(answers) < least:
            too_few += 1
            continue
        md = sample.metadata
        person = md.get("person_id")
        items.append(
            ReviewItem(
                item=iid,
                prompt=sample.input,
                context=sample.context,
                reference=sample.target,
                author=_author(md),
                answers=answers,
                meta={"person_id": str(person)} if person else {},
            )
        )
    notes = []
    if shared.partial:
        notes.append(f"{shared.partial} instruction(s) not answered by every run left out")
    if failed:
        notes.append(
            f"{failed} failed call(s) left out of their items (`medalign analyze` counts them wrong)"
        )
    if too_few:
        fewer = "fewer than two answers" if least == 2 else f"fewer than {least} answer(s)"
        notes.append(f"{too_few} instruction(s) with {fewer} left out")
    return Converted(items, tuple(notes))


REVIEW_SOURCE = ReviewSource(
    name="medalign-arms",
    kind="rank",
    describe="two or more run folders (`clinieval medalign run` arms) to rank per instruction",
    accepts=accepts,
    convert=convert,
)
