"""MedAlign's reported statistics, in the paper's two views: all items, and items without errors.

MedAlign (Fleming et al., AAAI 2024) counted the 44 of 303 items that Azure's content filter
refused as incorrect, and also reported every number on the 259 items left without them. A
provider error is an outcome of the arm, not a missing value, so this module computes each
statistic twice: on all instructions (an error row whose correctness is empty counts as
incorrect) and on the instructions where no arm had an error (every arm's row of such an
instruction is dropped, so the arms stay paired on the same items).

The general statistics (per-column CIs, head-to-head matrices, win rates, metric-vs-reference
Kendall tau, Fisher-Z, point-biserial, inter-rater agreement, subgroup chi-square) come from
:func:`clinieval.analysis.analyze.analyze`; this module adds what is specific to the paper:
correct % per arm, breakdowns by category, subcategory, specialty and EHR-length quartile, easy
and hard items, response lengths, minimum detectable differences, and error counts. As in
``analyze``, a statistic the data cannot define is listed under ``undefined`` with its reason,
never shown as NaN and never raised as an exception.

The reference ranking is whatever column the caller names: clinicians' ranks in the paper, or a
ranking computed from another column when there were no clinicians. ``reference_label`` travels
into the result so that a report never presents a computed ranking as clinicians' judgement.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from itertools import combinations
from typing import Any

import numpy as np

from clinieval.analysis import rank_agreement, uncertainty
from clinieval.analysis.analyze import AnalyzeOptions, analyze
from clinieval.analysis.rankings import ScoreTable
from clinieval.analysis.table import LongTable, Row
from clinieval.errors import UserError
from clinieval.scoring.text.base import word_tokens

JSON = dict[str, Any]
LengthCounter = Callable[[str], int]
Cells = dict[tuple[str, str], float]

PERCENTILES = (10, 25, 50, 75, 90)
MDD_ALPHA = 0.05
MDD_POWER = 0.8
MISSING_LABEL = "(none)"
ERROR_RULE = (
    "a response with a provider error and no correctness judgement counts as incorrect "
    "(MedAlign counted its 44 content-filtered items as incorrect)"
)
WORD_COUNTER = (
    "clinieval.scoring.text.base.word_tokens: runs of letters/digits (joined across internal "
    "apostrophes and hyphens) plus each punctuation mark"
)


@dataclass(frozen=True)
class MedAlignColumns:
    """Which column of the long table holds what, and how to name the reference ranking.

    Only ``instruction`` and ``model`` are required; a section whose column is absent or empty
    is listed as undefined. ``metrics`` are score columns where higher is better. ``rank`` is the
    reference ranking (1 = best, ties allowed): clinicians' in the paper; when it was computed
    from another column, say so in ``reference_label`` ("computed reference"), which every
    report prints beside the ranking.
    """

    instruction: str = "instruction_id"
    model: str = "model"
    response: str = "response"
    error_kind: str = "error_kind"
    correct: str = "correct"
    rank: str = "rank"
    rater: str = "rater"
    category: str = "category"
    subcategory: str = "subcategory"
    specialty: str = "specialty"
    ehr_tokens: str = "ehr_tokens"
    gold_response: str = "gold_response"
    groups: tuple[str, ...] = ("age_group", "gender", "race", "ethnicity")
    metrics: tuple[str, ...] = ()
    reference_label: str = "clinician"

    def roles(self) -> list[str]:
        """Every column given a role other than metric."""
        return [
            self.instruction,
            self.model,
            self.response,
            self.error_kind,
            self.correct,
            self.rank,
            self.rater,
            self.category,
            self.subcategory,
            self.specialty,
            self.ehr_tokens,
            self.gold_response,
            *self.groups,
        ]


@dataclass(frozen=True)
class _Settings:
    level: float
    resamples: int
    seed: int
    counter: LengthCounter
    counter_name: str


@dataclass
class _View:
    """One view's rows and the labels every section reads, plus its undefined statistics.

    ``keys[k]`` is (instruction, arm) of ``primary[k]``; keys and numeric columns are read once,
    since every section walks the same rows.
    """

    name: str
    table: LongTable
    cols: MedAlignColumns
    primary: list[Row]
    undefined: list[str] = field(default_factory=list)
    keys: list[tuple[str, str]] = field(init=False)
    items: list[str] = field(init=False)
    models: list[str] = field(init=False)
    _cells: dict[str, Cells] = field(init=False, default_factory=dict)

    def __post_init__(self) -> None:
        t, c = self.table, self.cols
        self.keys = [(str(t.text(r, c.instruction)), str(t.text(r, c.model))) for r in self.primary]
        self.items = list(dict.fromkeys(i for i, _ in self.keys))
        self.models = list(dict.fromkeys(m for _, m in self.keys))

    def rows_of(self, model: str) -> list[Row]:
        return [r for r, (_, m) in zip(self.primary, self.keys, strict=True) if m == model]

    def has(self, column: str) -> bool:
        """The column exists and holds at least one value in this view."""
        return column in self.table.columns and any(
            self.table.text(r, column) is not None for r in self.primary
        )

    def cells(self, column: str) -> Cells:
        """(instruction, model) → value of a numeric column, present cells only."""
        if column not in self._cells:
            out: Cells = {}
            for row, key in zip(self.primary, self.keys, strict=True):
                value = self.table.number(row, column)
                if value is not None:
                    out[key] = value
            self._cells[column] = out
        return self._cells[column]

    def item_labels(self, column: str) -> dict[str, str | None]:
        """Instruction → its first non-empty value of an item-level column (category, ...)."""
        out: dict[str, str | None] = dict.fromkeys(self.items)
        for row, (item, _) in zip(self.primary, self.keys, strict=True):
            if out[item] is None:
                out[item] = self.table.text(row, column)
        return out

    def missing(self, what: str, column: str) -> None:
        self.undefined.append(f"{what}: no values in column {column!r}")


# --- entry point ---------------------------------------------------------------------------------


def medalign_analysis(
    table: LongTable,
    columns: MedAlignColumns,
    *,
    level: float = 0.95,
    resamples: int = 2000,
    seed: int = 0,
    length_counter: LengthCounter | None = None,
) -> JSON:
    """Every MedAlign statistic the table's columns allow, for all items and without error items.

    Raises UserError for input that is wrong (a missing instruction/model/metric column, a cell
    that is not a number, correctness other than 0/1, two rows for one instruction and arm);
    statistics the data cannot define are listed under ``undefined`` instead.
    """
    _validate(table, columns)
    settings = _Settings(
        level,
        resamples,
        seed,
        length_counter or _word_count,
        WORD_COUNTER if length_counter is None else _callable_name(length_counter),
    )
    errors = _error_items(table, columns)
    imputed_table, imputed = _impute_errors(table, columns)
    kept = tuple(r for r in table.rows if table.text(r, columns.instruction) not in errors)
    views = {
        "all": _view_json(
            _make_view("all", imputed_table, columns),
            settings,
            f"All {len(_items(table, columns))} instructions. Rule: {ERROR_RULE}; "
            f"applied to {imputed} row(s).",
        ),
        "without_errors": _view_json(
            _make_view("without_errors", LongTable(table.path, table.columns, kept), columns),
            settings,
            f"Instructions where no arm had a provider error: the {len(errors)} instruction(s) with an"
            " error are dropped for every arm.",
        ),
    }
    views["all"]["imputed_incorrect"] = imputed
    views["without_errors"]["dropped_items"] = list(errors)
    return {
        "input": {
            "table": str(table.path),
            "rows": len(table.rows),
            "items": len(_items(table, columns)),
            "models": list(dict.fromkeys(str(table.text(r, columns.model)) for r in table.rows)),
        },
        "reference_label": columns.reference_label,
        "columns": _columns_json(columns),
        "options": {
            "level": level,
            "resamples": resamples,
            "seed": seed,
            "length_counter": settings.counter_name,
            "error_rule": ERROR_RULE,
            "mdd": {"alpha": MDD_ALPHA, "power": MDD_POWER, "method": "z (normal approximation)"},
        },
        "error_items": [{"instruction": item, "arms": arms} for item, arms in errors.items()],
        "views": views,
        "undefined": [f"{name}: {u}" for name, v in views.items() for u in v["undefined"]],
    }


def _word_count(text: str) -> int:
    return len(word_tokens(text))


def _callable_name(fn: LengthCounter) -> str:
    module = getattr(fn, "__module__", None) or "?"
    return f"{module}.{getattr(fn, '__qualname__', repr(fn))}"


def _columns_json(columns: MedAlignColumns) -> JSON:
    out = asdict(columns)
    out["groups"], out["metrics"] = list(columns.groups), list(columns.metrics)
    return out


# --- input ---------------------------------------------------------------------------------------


def _validate(table: LongTable, cols: MedAlignColumns) -> None:
    """Refuse input errors up front, so that anything raised later is a degenerate statistic."""
    table.require(cols.instruction, cols.model, *cols.metrics)
    clash = sorted(set(cols.metrics) & set(cols.roles()))
    if clash:
        raise UserError(f"metric column(s) {', '.join(clash)} also have another role; name them once")
    numeric = [c for c in (*cols.metrics, cols.correct, cols.rank, cols.ehr_tokens) if c in table.columns]
    for row in table.rows:
        for role in (cols.instruction, cols.model):
            if table.text(row, role) is None:
                raise UserError(f"{row.where}: column {role!r} is empty")
        for column in numeric:
            value = table.number(row, column)
            if column == cols.correct and value not in (None, 0.0, 1.0):
                raise UserError(f"{row.where}: column {column!r} is {value!r}; correctness must be 1 or 0")


def _items(table: LongTable, cols: MedAlignColumns) -> list[str]:
    return list(dict.fromkeys(str(table.text(r, cols.instruction)) for r in table.rows))


def _error_kind(table: LongTable, cols: MedAlignColumns, row: Row) -> str | None:
    return table.text(row, cols.error_kind) if cols.error_kind in table.columns else None


def _error_items(table: LongTable, cols: MedAlignColumns) -> dict[str, dict[str, str]]:
    """Instruction → {arm: error kind} for every instruction where some arm had a provider error."""
    out: dict[str, dict[str, str]] = {}
    for row in table.rows:
        kind = _error_kind(table, cols, row)
        if kind is not None:
            arms = out.setdefault(str(table.text(row, cols.instruction)), {})
            arms.setdefault(str(table.text(row, cols.model)), kind)
    return out


def _impute_errors(table: LongTable, cols: MedAlignColumns) -> tuple[LongTable, int]:
    """The paper's rule for the all-items view: an error row not judged counts as incorrect."""
    if cols.correct not in table.columns:
        return table, 0
    rows: list[Row] = []
    imputed = 0
    for row in table.rows:
        if _error_kind(table, cols, row) is not None and table.number(row, cols.correct) is None:
            row = Row(row.where, {**row.cells, cols.correct: 0})
            imputed += 1
        rows.append(row)
    return LongTable(table.path, table.columns, tuple(rows)), imputed


def _primary_rows(table: LongTable, cols: MedAlignColumns) -> list[Row]:
    """One row per instruction and arm: the first-listed rater's (analyze's rule), all rows
    without a rater column. A repeated (instruction, arm) is an input error."""
    first: dict[str, str | None] = {}
    seen: dict[tuple[str, str], str] = {}
    out: list[Row] = []
    has_rater = cols.rater in table.columns
    for row in table.rows:
        item, model = str(table.text(row, cols.instruction)), str(table.text(row, cols.model))
        if has_rater and first.setdefault(item, table.text(row, cols.rater)) != table.text(row, cols.rater):
            continue
        if (item, model) in seen:
            raise UserError(
                f"{row.where}: instruction {item!r} and arm {model!r} already appear at "
                f"{seen[(item, model)]}; give one row per instruction and arm (per rater with a rater column)"
            )
        seen[(item, model)] = row.where
        out.append(row)
    return out


def _make_view(name: str, table: LongTable, cols: MedAlignColumns) -> _View:
    return _View(name, table, cols, _primary_rows(table, cols))


# --- one view ------------------------------------------------------------------------------------


def _view_json(view: _View, s: _Settings, description: str) -> JSON:
    """All sections of one view; sections that cannot be computed are None, with a reason."""
    out: JSON = {
        "description": description,
        "rows": len(view.table.rows),
        "items": len(view.items),
        "models": view.models,
    }
    sections = (
        "per_model",
        "breakdowns",
        "easy_hard",
        "response_length",
        "minimum_detectable_difference",
        "kendall_per_instruction",
        "analyze",
    )
    out["errors"] = _errors(view)
    if not view.primary:
        why = "the table has no rows" if view.name == "all" else "every instruction had a provider error"
        view.undefined.append(f"no instruction in this view: {why}")
        return {**out, **dict.fromkeys(sections), "undefined": view.undefined}
    out["per_model"] = _per_model(view, s)
    out["breakdowns"] = _breakdowns(view)
    out["easy_hard"] = _easy_hard(view)
    out["response_length"] = _lengths(view, s)
    out["minimum_detectable_difference"] = _mdd(view)
    out["kendall_per_instruction"] = _kendall_items(view)
    out["analyze"] = generic = _generic(view, s)
    out["undefined"] = view.undefined + [f"analyze: {u}" for u in (generic or {}).get("undefined", [])]
    return out


def _errors(view: _View) -> JSON:
    """Provider errors per arm and kind (the responses the paper counted as incorrect)."""
    per_model: dict[str, dict[str, int]] = {m: {} for m in view.models}
    totals: Counter[str] = Counter()
    items: set[str] = set()
    for row, (item, model) in zip(view.primary, view.keys, strict=True):
        kind = _error_kind(view.table, view.cols, row)
        if kind is not None:
            per_model[model][kind] = per_model[model].get(kind, 0) + 1
            totals[kind] += 1
            items.add(item)
    return {
        "per_model": per_model,
        "total": dict(totals),
        "responses": sum(totals.values()),
        "items": len(items),
    }


def _percent_ci(values: Sequence[float], s: _Settings) -> list[float]:
    low, high = uncertainty.bootstrap_ci(values, level=s.level, resamples=s.resamples, seed=s.seed)
    return [100.0 * low, 100.0 * high]


def _per_model(view: _View, s: _Settings) -> JSON:
    """Correct % with a bootstrap CI over instructions, and the mean reference rank as given."""
    c = view.cols
    has_correct, has_rank = view.has(c.correct), view.has(c.rank)
    if not has_correct:
        view.missing("correct %", c.correct)
    if not has_rank:
        view.missing("mean rank", c.rank)
    correct, rank = view.cells(c.correct) if has_correct else {}, view.cells(c.rank) if has_rank else {}
    responses = Counter(m for _, m in view.keys)
    out: JSON = {}
    for model in view.models:
        # in instruction order, so the bootstrap CI equals analyze's for the same column
        judged = [correct[(i, model)] for i in view.items if (i, model) in correct]
        ranks = [rank[(i, model)] for i in view.items if (i, model) in rank]
        stats: JSON = {
            "responses": responses[model],
            "reviewed": len(judged),
            "correct": int(sum(judged)),
            "correct_percent": 100.0 * sum(judged) / len(judged) if judged else None,
            "ci": _percent_ci(judged, s) if judged else None,
            "ranked": len(ranks),
            "mean_rank": sum(ranks) / len(ranks) if ranks else None,
        }
        if has_correct and not judged:
            view.undefined.append(f"correct % of {model}: no reviewed response")
        out[model] = stats
    return out


# --- breakdowns ----------------------------------------------------------------------------------


def _group_stats(view: _View, items: set[str], correct: Cells, rank: Cells) -> JSON:
    """Correct % and mean rank per arm over a set of instructions, and correct % pooled."""
    per_model: JSON = {}
    for model in view.models:
        judged = [v for (i, m), v in correct.items() if m == model and i in items]
        ranks = [v for (i, m), v in rank.items() if m == model and i in items]
        per_model[model] = {
            "reviewed": len(judged),
            "correct_percent": 100.0 * sum(judged) / len(judged) if judged else None,
            "ranked": len(ranks),
            "mean_rank": sum(ranks) / len(ranks) if ranks else None,
        }
    pooled = [v for (i, _), v in correct.items() if i in items]
    return {
        "items": len(items),
        "pooled": {
            "reviewed": len(pooled),
            "correct_percent": 100.0 * sum(pooled) / len(pooled) if pooled else None,
        },
        "per_model": per_model,
    }


def _outcomes(view: _View) -> tuple[Cells, Cells]:
    c = view.cols
    return (
        view.cells(c.correct) if view.has(c.correct) else {},
        view.cells(c.rank) if view.has(c.rank) else {},
    )


def _label_breakdown(view: _View, column: str) -> JSON | None:
    """Correctness and rank per value of an instruction-level label (category, specialty...)."""
    if not view.has(column):
        view.missing(f"breakdown by {column}", column)
        return None
    labels = view.item_labels(column)
    names = sorted({v for v in labels.values() if v is not None})
    if any(v is None for v in labels.values()):
        names.append(MISSING_LABEL)
    correct, rank = _outcomes(view)
    groups = []
    for name in names:
        members = {i for i, v in labels.items() if (v or MISSING_LABEL) == name}
        groups.append({"group": name, **_group_stats(view, members, correct, rank)})
    return {"column": column, "groups": groups}


def _quartile_breakdown(view: _View) -> JSON | None:
    """Correctness and rank per EHR-length quartile; the edges are quartiles over instructions."""
    column = view.cols.ehr_tokens
    if not view.has(column):
        view.missing("breakdown by EHR-length quartile", column)
        return None
    lengths: dict[str, float] = {}
    for (item, _), value in view.cells(column).items():
        lengths.setdefault(item, value)
    values = np.array(list(lengths.values()))
    if values.size < 4 or np.unique(values).size < 2:
        view.undefined.append(
            f"breakdown by EHR-length quartile: needs 4+ instructions with differing {column!r}; "
            f"{values.size} instruction(s), {np.unique(values).size} distinct value(s)"
        )
        return None
    edges = [float(e) for e in np.quantile(values, [0.0, 0.25, 0.5, 0.75, 1.0])]
    quartile = {i: int(np.searchsorted(edges[1:4], v, side="left")) for i, v in lengths.items()}
    correct, rank = _outcomes(view)
    groups = [
        {
            "group": f"Q{q + 1}",
            "range": [edges[q], edges[q + 1]],
            **_group_stats(view, {i for i, k in quartile.items() if k == q}, correct, rank),
        }
        for q in range(4)
    ]
    return {
        "column": column,
        "edges": edges,
        "rule": "Q1 <= edge 1 < Q2 <= edge 2 < Q3 <= edge 3 < Q4; edges by linear interpolation",
        "items_without_length": len(view.items) - len(lengths),
        "groups": groups,
    }


def _breakdowns(view: _View) -> JSON:
    c = view.cols
    return {
        "category": _label_breakdown(view, c.category),
        "subcategory": _label_breakdown(view, c.subcategory),
        "specialty": _label_breakdown(view, c.specialty),
        "ehr_length_quartile": _quartile_breakdown(view),
    }


def _easy_hard(view: _View) -> JSON | None:
    """Instructions every arm got right (easy) and none did (hard), among those all arms judged."""
    c = view.cols
    if not view.has(c.correct):
        view.missing("easy and hard items", c.correct)
        return None
    models = view.models
    if len(models) < 2:
        view.undefined.append(f"easy and hard items: need 2+ arms, found {len(models)}")
        return None
    correct = view.cells(c.correct)
    easy, hard, judged = [], [], 0
    for item in view.items:
        values = [correct.get((item, m)) for m in models]
        if any(v is None for v in values):
            continue
        judged += 1
        if all(v == 1.0 for v in values):
            easy.append(item)
        elif all(v == 0.0 for v in values):
            hard.append(item)

    def share(ids: list[str]) -> JSON:
        return {"count": len(ids), "percent": 100.0 * len(ids) / judged if judged else None, "ids": ids}

    return {
        "judged_by_all_arms": judged,
        "incomplete": len(view.items) - judged,
        "easy": share(easy),
        "hard": share(hard),
    }


# --- response lengths ----------------------------------------------------------------------------


def _distribution(lengths: Sequence[int]) -> JSON:
    """Count, mean and percentiles (numpy's linear interpolation) of a list of lengths."""
    out: JSON = {"count": len(lengths), "mean": None, **{f"p{p}": None for p in PERCENTILES}}
    if lengths:
        arr = np.asarray(lengths, dtype=np.float64)
        out["mean"] = float(arr.mean())
        out.update(
            {f"p{p}": float(v) for p, v in zip(PERCENTILES, np.percentile(arr, PERCENTILES), strict=True)}
        )
    return out


def _lengths(view: _View, s: _Settings) -> JSON | None:
    """Response length per arm and for the gold (clinician) responses.

    Responses with a provider error are left out: their text is an error message or nothing, not
    an answer. An empty response without an error is a real answer of length 0.
    """
    c, t = view.cols, view.table
    if c.response not in t.columns:
        view.missing("response length", c.response)
        return None
    per_model: JSON = {}
    for model in view.models:
        rows = view.rows_of(model)
        answered = [r for r in rows if _error_kind(t, c, r) is None]
        lengths = [s.counter(t.text(r, c.response) or "") for r in answered]
        per_model[model] = {
            **_distribution(lengths),
            "empty": sum(1 for r in answered if t.text(r, c.response) is None),
            "errors_left_out": len(rows) - len(answered),
        }
    gold: JSON | None = None
    if view.has(c.gold_response):
        texts = [g for g in view.item_labels(c.gold_response).values() if g is not None]
        gold = _distribution([s.counter(g) for g in texts])
    else:
        view.missing("gold response length", c.gold_response)
    return {"counter": s.counter_name, "per_model": per_model, "gold": gold}


# --- pairs, agreement, generic -------------------------------------------------------------------


def _mdd_columns(view: _View) -> list[str]:
    c = view.cols
    return [col for col in (*c.metrics, c.correct, c.rank) if view.has(col)]


def _mdd(view: _View) -> JSON | None:
    """Per column and pair of arms: sigma_d of the per-item differences and the minimum detectable
    difference at power 0.8, alpha 0.05 over the items both arms have (MedAlign's sample size)."""
    models = view.models
    if len(models) < 2:
        view.undefined.append(f"minimum detectable difference: need 2+ arms, found {len(models)}")
        return None
    out: JSON = {}
    for column in _mdd_columns(view):
        cells = view.cells(column)
        out[column] = [p for a, b in combinations(models, 2) if (p := _mdd_pair(view, column, cells, a, b))]
    return out


def _mdd_pair(view: _View, column: str, cells: Cells, a: str, b: str) -> JSON | None:
    diffs = [cells[(i, a)] - cells[(i, b)] for i in view.items if (i, a) in cells and (i, b) in cells]
    if len(diffs) < 2:
        view.undefined.append(
            f"minimum detectable difference, {column}, {a} vs {b}: fewer than 2 shared items"
        )
        return None
    sigma = float(np.std(diffs, ddof=1))
    if sigma == 0.0:
        view.undefined.append(
            f"minimum detectable difference, {column}, {a} vs {b}: the per-item differences are constant"
        )
        return None
    mdd = uncertainty.minimum_detectable_difference(sigma, len(diffs), alpha=MDD_ALPHA, power=MDD_POWER)
    return {"model": a, "opponent": b, "n": len(diffs), "sigma_d": sigma, "mdd": mdd}


def _score_table(view: _View, column: str, *, higher_is_better: bool) -> ScoreTable:
    cells = view.cells(column)
    rows = ((i, m, cells.get((i, m))) for i in view.items for m in view.models)
    return ScoreTable.from_rows(rows, higher_is_better=higher_is_better)


def _kendall_items(view: _View) -> JSON | None:
    """Each metric's per-instruction Kendall tau-b with the reference ranking (analyze reports
    only the mean and CI; the per-instruction values show where a metric disagrees)."""
    c = view.cols
    if not view.has(c.rank):
        view.missing("per-instruction Kendall tau", c.rank)
        return None
    reference = _score_table(view, c.rank, higher_is_better=False)
    out: JSON = {}
    for metric in (*c.metrics, *([c.correct] if view.has(c.correct) else [])):
        scores = _score_table(view, metric, higher_is_better=True)
        k = rank_agreement.metric_human_kendall(scores, reference, resamples=1)
        out[metric] = {
            "taus": k.taus,
            "mean": k.mean,
            "skipped_constant": list(k.skipped_constant),
            "skipped_incomplete": list(k.skipped_incomplete),
        }
    return out


def _generic(view: _View, s: _Settings) -> JSON | None:
    """analyze() on this view: metrics and correctness as scores, the reference as human rank.

    Options analyze would trip over on a small table are left out beforehand with a reason
    (see the notes in the module's docs); anything it still refuses is recorded, not raised.
    """
    c = view.cols
    what = "generic statistics (analyze)"
    if len(view.models) < 2:
        view.undefined.append(f"{what}: need 2+ arms, found {len(view.models)}")
        return None
    correct = c.correct if view.has(c.correct) else None
    rank = c.rank if view.has(c.rank) else None
    scores = (*c.metrics, *([correct] if correct else []))
    if not scores and rank is None:
        view.undefined.append(f"{what}: no metric, correctness or rank values")
        return None
    role_correct = correct if correct and rank and _pairs_with_rank(view, correct, rank) >= 3 else None
    if correct and rank and role_correct is None:
        view.undefined.append("point-biserial correct vs rank: fewer than 3 responses have both")
    groups = tuple(g for g in c.groups if view.has(g)) if role_correct else ()
    if groups and not _every_arm_judged(view, c.correct):
        view.undefined.append("subgroup chi-square: some arm has no reviewed response")
        groups = ()
    rater = c.rater if rank and view.has(c.rater) else None
    options = AnalyzeOptions(
        item=c.instruction,
        model=c.model,
        scores=scores,
        human_rank=rank,
        human_label=c.reference_label,
        correct=role_correct,
        groups=groups,
        rater=rater,
        level=s.level,
        resamples=s.resamples,
        seed=s.seed,
    )
    keep = [x for x in (c.instruction, c.model, rater, rank, *scores, *groups) if x is not None]
    rows = view.table.rows if rater else tuple(view.primary)
    projected = LongTable(
        view.table.path,
        tuple(dict.fromkeys(keep)),
        tuple(Row(r.where, {k: r.cells.get(k) for k in keep}) for r in rows),
    )
    try:
        return analyze(projected, options)
    except UserError as e:
        view.undefined.append(f"{what}: {e}")
        return None


def _pairs_with_rank(view: _View, correct: str, rank: str) -> int:
    ranks = view.cells(rank)
    return sum(1 for key in view.cells(correct) if key in ranks)


def _every_arm_judged(view: _View, correct: str) -> bool:
    judged = {m for _, m in view.cells(correct)}
    return all(m in judged for m in view.models)


__all__ = ["ERROR_RULE", "LengthCounter", "MedAlignColumns", "medalign_analysis"]
