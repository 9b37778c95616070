"""The long table MedAlign's analysis reads: one row per instruction x arm (x clinician).

Two sources give the same columns:

* **arm runs** (``clinieval medalign run``): each run directory is one arm (model x context
  strategy); its answers, error kinds, context sizes and every score file under ``scores/``
  (text metrics, key facts, judges) become columns. Clinician judgements come from a reviews
  file (``instruction_id, model, rank, correct[, rater]``); without one, a *computed reference*
  can stand in (key-fact recall on synthetic sets), labelled as such in every report.
* **the MedAlign release**: ``clinician-reviewed-model-responses.tsv`` (each model's response,
  its clinician rank and binary correctness) joined with the gold responses and the patient
  files; the text metrics are computed here, against the gold.

Patient columns for the bias analysis (age group at the record's last event, gender, race,
ethnicity) are read from the record's ``<person>`` block; EHR length is counted in the budget
tokenizer of the run (the release: ``tiktoken:cl100k_base``, the tokenizer GPT-4 used).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.analysis.table import LongTable, Row
from clinieval.datasets import json_objects
from clinieval.errors import UserError
from clinieval.records.runs import SCORES, RunDir
from clinieval.records.sample_record import SampleRecord
from clinieval.types import JSON, Sample

JUDGE_COLUMNS = {"correct": "judge_correct", "score": "judge_score"}
"""How a judge rubric's fields are named in the table (the rubric's file is ``scores/<rubric>.jsonl``)."""

_REVIEW_COLUMNS = ("instruction_id", "model", "rank", "correct")

ANALYSIS_METRICS = (
    "rougeL",
    "chrf++",
    "google_bleu",
    "meteor",
    "bertscore_f1",
    "judge_correct",
    "judge_score",
    "key_facts",
    "key_facts_f1",
)
"""Score columns the report compares with the reference ranking, when the table has them."""


@dataclass(frozen=True, slots=True)
class ArmScores:
    """One run directory read as an arm of the comparison."""

    label: str
    run: RunDir
    records: tuple[SampleRecord, ...]
    scores: Mapping[str, Mapping[str, float | None]]  # column -> sample id -> value


def arm_of(path: Path, label: str | None = None) -> ArmScores:
    """Read a ``clinieval medalign run`` directory (repeat 0 of each instruction); ``label`` names
    the arm in tables (default: model/strategy from its manifest; a suite passes its own names)."""
    from clinieval.benchmarks.medalign.task import arm_label

    run = RunDir.open(path)
    spec = run.manifest().get("spec", {})
    strategy = spec.get("task", {}).get("params", {}).get("strategy")
    model_spec = spec.get("model", {}).get("spec")
    if not isinstance(strategy, str) or not isinstance(model_spec, str):
        raise UserError(
            f"{path}: not a MedAlign arm (made by `clinieval medalign run`): no strategy in its manifest"
        )
    records = tuple(r for r in run.records() if r.repeat == 0)
    if not records:
        raise UserError(f"{path}: the run has no finished samples")
    return ArmScores(label or arm_label(model_spec, strategy), run, records, _score_columns(run, records))


def _score_columns(run: RunDir, records: Sequence[SampleRecord]) -> dict[str, dict[str, float | None]]:
    """Scores recorded during the run, then every ``scores/*.jsonl`` file (later files win)."""
    out: dict[str, dict[str, float | None]] = defaultdict(dict)
    for r in records:
        for name, score in r.scores.items():
            out[name][r.sample.id] = score.value
    folder = run.path / SCORES
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else ():
        for where, obj in json_objects(path):
            if obj.get("repeat", 0) != 0:
                continue
            sid = str(obj.get("sample_id"))
            meta = obj.get("metadata")
            means = meta.get("mean") if isinstance(meta, dict) else None
            if isinstance(means, dict) and means:  # a judge: every field's mean over its repeats
                for field_name, value in means.items():
                    column = JUDGE_COLUMNS.get(field_name, f"judge_{field_name}")
                    out[column][sid] = _number(value, where)
            else:
                out[path.stem][sid] = _number(obj.get("value"), where)
    return out


def _number(value: object, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserError(f"{where}: score {value!r} is not a number")
    return float(value)


# --- patient and instruction columns -----------------------------------------------------------


def age_group(years: int | None) -> str | None:
    """MedAlign-style age bands for the bias analysis."""
    if years is None:
        return None
    return "<40" if years < 40 else "40-64" if years < 65 else ">=65"


def patient_columns(sample: Sample) -> dict[str, object]:
    """Age group at the record's last event, gender, race and ethnicity from the record itself."""
    from clinieval.ehr.medalign_xml import read_xml

    if not sample.context.strip():
        return {}
    tl = read_xml(sample.context, person_id=str(sample.metadata.get("person_id") or sample.id))
    times = [x.time for x in tl.items() if x.time is not None]
    age = tl.person.age_at(max(times)) if times else None
    return {
        "age_group": age_group(age[1] if age else None),
        "gender": tl.person.sex,
        "race": tl.person.race,
        "ethnicity": tl.person.ethnicity,
    }


def instruction_columns(sample: Sample) -> dict[str, object]:
    """The instruction's own columns, with its patient: the unit a bootstrap resamples whole."""
    md = sample.metadata
    filename = str(md.get("filename") or "")
    return {
        "patient_id": str(md.get("person_id") or (Path(filename).stem if filename else "")),
        "category": md.get("category") or "",
        "subcategory": md.get("subcategory") or md.get("human_assigned_subcategory_1") or "",
        "specialty": md.get("submitter_specialty") or "",
        "gold_response": sample.target or "",
    }


# --- reviews --------------------------------------------------------------------------------


def read_reviews(path: Path) -> dict[tuple[str, str], list[dict[str, object]]]:
    """Clinician judgements of arm answers: ``(instruction_id, model) -> [{rank, correct, rater}]``."""
    from clinieval.analysis.table import read_table

    table = read_table(path)
    table.require(*_REVIEW_COLUMNS)
    out: dict[tuple[str, str], list[dict[str, object]]] = defaultdict(list)
    for row in table.rows:
        iid, model = table.text(row, "instruction_id"), table.text(row, "model")
        if iid is None or model is None:
            raise UserError(f"{row.where}: instruction_id and model must not be empty")
        out[(iid, model)].append(
            {
                "rank": table.number(row, "rank"),
                "correct": table.number(row, "correct"),
                "rater": table.text(row, "rater") if "rater" in table.columns else None,
            }
        )
    return out


def reference_judgements(
    arms: Sequence[ArmScores], column: str, correct_column: str | None = None
) -> dict[tuple[str, str], list[dict[str, object]]]:
    """A computed reference in place of clinicians: correct = ``correct_column`` (default
    ``<column>_all`` when present, else value == 1), e.g. every key found; rank = the arms ranked
    by ``column`` per instruction (ties share the average rank). Unscored answers (failed calls)
    count as 0, the paper's rule for provider errors."""
    from scipy.stats import rankdata

    out: dict[tuple[str, str], list[dict[str, object]]] = {}
    for iid in _instruction_ids(arms):
        values = [_value(arm, column, iid) for arm in arms]
        ranks = rankdata([-v for v in values], method="average")
        for arm, v, rank in zip(arms, values, ranks, strict=True):
            if correct_column is not None and correct_column in arm.scores:
                correct = _value(arm, correct_column, iid)
            elif f"{column}_all" in arm.scores:
                correct = _value(arm, f"{column}_all", iid)
            else:
                correct = float(v == 1.0)
            out[(iid, arm.label)] = [{"rank": float(rank), "correct": correct, "rater": None}]
    return out


def _value(arm: ArmScores, column: str, iid: str) -> float:
    if column not in arm.scores:
        raise UserError(f"{arm.run.path}: no {column!r} scores to use as the reference")
    value = arm.scores[column].get(iid)
    return 0.0 if value is None else value


def _instruction_ids(arms: Sequence[ArmScores]) -> list[str]:
    """Instructions every arm answered, in the first arm's order (arms on other sets are refused)."""
    first = [r.sample.id for r in arms[0].records]
    common = set(first)
    for arm in arms[1:]:
        common &= {r.sample.id for r in arm.records}
    if not common:
        raise UserError("the arms share no instruction; were they run on the same instructions?")
    return [i for i in first if i in common]


# --- the table --------------------------------------------------------------------------------


def arms_table(
    arms: Sequence[ArmScores],
    judgements: Mapping[tuple[str, str], list[dict[str, object]]] | None,
    where: Path,
) -> LongTable:
    """One row per instruction x arm (x rater) with every column the analysis reads."""
    labels = [a.label for a in arms]
    dupes = sorted({x for x in labels if labels.count(x) > 1})
    if dupes:
        raise UserError(f"two run directories are the same arm ({', '.join(dupes)}); give each arm once")
    ids = _instruction_ids(arms)
    patients: dict[str, dict[str, object]] = {}
    rows: list[Row] = []
    for arm in arms:
        by_id = {r.sample.id: r for r in arm.records}
        for iid in ids:
            rec = by_id[iid]
            if iid not in patients:
                patients[iid] = {**instruction_columns(rec.sample), **patient_columns(rec.sample)}
            base = {
                "instruction_id": iid,
                "model": arm.label,
                "response": rec.output.text if rec.output is not None else "",
                "error_kind": rec.error_kind() or "",
                "ehr_tokens": rec.context_info.get("original_tokens"),
                **patients[iid],
                **{col: values.get(iid) for col, values in arm.scores.items()},
            }
            for j, judgement in enumerate(_judged(judgements, iid, arm.label)):
                rows.append(Row(f"{arm.run.path}:{iid}#{j}", {**base, **judgement}))
    return _table(where, rows)


def _judged(
    judgements: Mapping[tuple[str, str], list[dict[str, object]]] | None, iid: str, label: str
) -> list[dict[str, object]]:
    if judgements is None:
        return [{}]
    return judgements.get((iid, label)) or [{"rank": None, "correct": None, "rater": None}]


def _table(where: Path, rows: Iterable[Row]) -> LongTable:
    kept = tuple(rows)
    if not kept:
        raise UserError(f"{where}: nothing to analyse")
    columns = tuple(dict.fromkeys(c for r in kept for c in r.cells))
    return LongTable(where, columns, kept)


def runs_table(
    paths: Sequence[Path],
    reviews: Path | None,
    reference: str | None,
    *,
    where: Path,
    labels: Sequence[str] | None = None,
) -> tuple[LongTable, str, str | None]:
    """Arm run directories as the analysis table, how its reference ranking is labelled, and the
    score column that ranking came from: clinicians' ``reviews`` when given; otherwise a computed
    reference from ``reference`` (default ``key_facts_f1``, else ``key_facts``, when every arm
    has it), or none. What ``clinieval medalign analyze RUNS`` and a suite's report both read
    (``labels``: each arm's name, in the order of ``paths``; default: from its manifest)."""
    arms = [arm_of(p, None if labels is None else labels[i]) for i, p in enumerate(paths)]
    if reviews is not None:
        return arms_table(arms, read_reviews(reviews), reviews), "clinician", None
    # key_facts_f1 does not reward an answer that copies the record; runs made before it had recall
    found = [c for c in ("key_facts_f1", "key_facts") if all(c in a.scores for a in arms)]
    ref = reference or (found[0] if found else None)
    if ref is None:
        return arms_table(arms, None, where), "none (no reviews given)", None
    table = arms_table(arms, reference_judgements(arms, ref, "key_facts_all"), where)
    return table, f"computed reference ({ref})", ref


# --- the MedAlign release -----------------------------------------------------------------------

REVIEWED_FILE = "clinician-reviewed-model-responses.tsv"
_RESPONSE_COLUMNS = ("model_response", "response", "model response text", "model_output")
_RELEASE_REVIEW_COLUMNS = ("instruction_id", "model_name", "model_rank", "binary_correct")


def release_table(root: Path, metrics: Sequence[str], *, gold_annotator: str = "Annotator_1") -> LongTable:
    """The release's clinician-reviewed responses as the long table, with text metrics computed
    here against the gold response (``clinician-instruction-responses.tsv``, ``gold_annotator``).

    The reviewed file's layout is inferred from public code (see the spec): its response column
    may be named any of :data:`_RESPONSE_COLUMNS`; a row's ``annotator`` becomes the rater.
    """
    from clinieval.analysis.table import read_table
    from clinieval.benchmarks.medalign.data import load_release

    samples = {s.id: s for s in load_release(root, gold_annotator=gold_annotator)}
    reviewed = read_table(root / REVIEWED_FILE)
    reviewed.require(*_RELEASE_REVIEW_COLUMNS)
    response_col = next((c for c in _RESPONSE_COLUMNS if c in reviewed.columns), None)
    if response_col is None:
        raise UserError(
            f"{root / REVIEWED_FILE}: no column with the model's response (looked for "
            f"{', '.join(_RESPONSE_COLUMNS)}); the columns are {', '.join(reviewed.columns)}"
        )
    cells: list[tuple[Row, dict[str, object]]] = []
    extra: dict[str, dict[str, object]] = {}
    for row in reviewed.rows:
        iid = reviewed.text(row, "instruction_id") or ""
        sample = samples.get(iid)
        if sample is None:
            continue  # reviewed, but no gold from this annotator: outside the analysed set
        if iid not in extra:
            extra[iid] = {**instruction_columns(sample), **patient_columns(sample)}
        cells.append(
            (
                row,
                {
                    "instruction_id": iid,
                    "model": reviewed.text(row, "model_name"),
                    "response": reviewed.text(row, response_col) or "",
                    "error_kind": reviewed.text(row, "error_kind") or ""
                    if "error_kind" in reviewed.columns
                    else "",
                    "rank": reviewed.number(row, "model_rank"),
                    "correct": reviewed.number(row, "binary_correct"),
                    "rater": reviewed.text(row, "annotator") if "annotator" in reviewed.columns else None,
                    **extra[iid],
                },
            )
        )
    if not cells:
        raise UserError(
            f"{root / REVIEWED_FILE}: no reviewed response belongs to an instruction with a gold response"
        )
    _add_ehr_tokens(cells, samples)
    _add_metrics(cells, metrics)
    return _table(root / REVIEWED_FILE, (Row(row.where, c) for row, c in cells))


def _add_ehr_tokens(cells: list[tuple[Row, dict[str, object]]], samples: Mapping[str, Sample]) -> None:
    from clinieval.context.tokenizers import tokenizer_from_spec

    tok = tokenizer_from_spec("tiktoken:cl100k_base")
    counts = {iid: tok.count(s.context) for iid, s in samples.items()}
    for _, c in cells:
        c["ehr_tokens"] = counts[str(c["instruction_id"])]


def _add_metrics(cells: list[tuple[Row, dict[str, object]]], metrics: Sequence[str]) -> None:
    """Each metric of each response against the gold, batched; an empty response scores as the
    metric scores an empty text (the clinicians saw it, so it stays in the comparison)."""
    from clinieval.scoring.text.registry import text_metric

    answers = [str(c["response"]) for _, c in cells]
    golds = [str(c["gold_response"]) for _, c in cells]
    for name in metrics:
        metric = text_metric(name)
        for output, result in metric.compute(answers, golds).items():
            for (_, c), value in zip(cells, result.values, strict=True):
                c[output] = value


def report(
    table: LongTable,
    label: str,
    reference: str | None,
    out: Path,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    cluster: bool = True,
) -> tuple[JSON, list[Path]]:
    """The MedAlign analysis of ``table`` written to ``out`` (JSON, Markdown, HTML): every
    :data:`ANALYSIS_METRICS` column it has, except the ``reference`` the ranking was computed from.
    ``cluster`` resamples a patient's instructions together (off: each instruction alone)."""
    from clinieval.benchmarks.medalign.analysis.columns import MedAlignColumns
    from clinieval.benchmarks.medalign.analysis.compute import medalign_analysis
    from clinieval.benchmarks.medalign.report import write_report

    metrics = tuple(c for c in table.columns if c in ANALYSIS_METRICS and c != reference)
    columns = MedAlignColumns(
        metrics=metrics, reference_label=label, patient=MedAlignColumns.patient if cluster else None
    )
    result = medalign_analysis(table, columns, level=level, resamples=resamples, seed=seed)
    return result, write_report(result, out)
