"""EHRNoteQA's analyses over judged arms: three scoring modes side by side, their agreement,
judge variance and ranking stability, and breakdowns by level, number of notes and category.

Definitions (``shared/spec/ehrnoteqa.md``):

* **Judge score** of a model in judge repeat r: 100 x the share of its answers judged correct in
  that repeat. An answer the model failed to give counts as incorrect (its failure is its own);
  a repeat whose verdict is missing or unreadable is left out of that repeat's share (the
  judge's failure is not the model's) and counted. The reported score is the mean over repeats
  with its sample standard deviation.
* **Ranking stability**: in each repeat the models are ranked by score (1 = best, ties share
  the best rank); a model's gold rank is the mode of its ranks; instability is the sum over
  models and repeats of |rank - gold rank| (:func:`clinieval.analysis.rank_agreement.rank_instability`).
* **Letter extraction** and **log-likelihood** accuracies are 100 x the share correct, failures
  counted as incorrect.
* **Agreement between modes**: per answer, each mode's verdict (the judge's majority over its
  parsed repeats; an even split is left out), compared pairwise over every (model, question)
  both modes decided: percent agreement and Cohen's kappa; and per pair of modes the Kendall
  tau-b between the model scores they give (three models or more).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from itertools import combinations
from pathlib import Path
from typing import Any

from clinieval.errors import UserError
from clinieval.types import JSON

JUDGE = "judge"
MC_MODES = (JUDGE, "letter_extract", "loglik_letter", "loglik_text")
FREE_MODES = (JUDGE,)
BREAKDOWNS = ("level", "num_notes", "category")

Verdicts = dict[str, list[float | None]]
"""Item id -> the judge's verdict (1/0) in each repeat, None where the repeat gave none."""


@dataclass(frozen=True, slots=True)
class Item:
    id: str
    level: int | None
    num_notes: int | None
    category: str | None
    patient: str | None = None

    def group(self, by: str) -> str | None:
        value = getattr(self, by)
        return None if value is None else str(value)


IDENTICAL_NOTE = (
    "every repeat got the same judge reply (a deterministic judge, e.g. temperature 0), so the repeats "
    "measured no spread: judge SD and rank instability are not measured (not zero). Judge at a "
    "temperature above 0 to measure them."
)


@dataclass(slots=True)
class ArmAnswers:
    """One model in one format: its items, failures, per-mode correctness and judge verdicts."""

    label: str
    model: str
    fmt: str
    path: Path | None
    items: dict[str, Item]
    answer_failed: dict[str, str] = field(default_factory=dict)
    modes: dict[str, dict[str, float | None]] = field(default_factory=dict)
    verdicts: Verdicts | None = None
    judge_repeats: int = 0
    judge_name: str | None = None
    judge_warning: str | None = None
    unparsed_letters: int = 0
    identical_repeats: bool = False
    """Every item judged two or more times got the same reply in every repeat (a deterministic judge):
    the repeats measured no spread, so SD and rank instability are not measured, not zero."""
    self_judged: bool = False
    """The judge is the model whose answers it judged."""
    judge_unparsed: frozenset[str] = frozenset()
    """Items whose every judge repeat replied without a verdict (no call failed): a rerun reads
    the same cached replies, so these are not failures a rerun could fix."""


# --------------------------------------------------------------------------------------------
# Reading arms from run directories


def _item(sample: Any) -> Item:
    meta = sample.metadata
    level, num = meta.get("level"), meta.get("num_notes")
    category = meta.get("category")
    return Item(
        sample.id,
        None if level is None else int(level),
        None if num is None else int(num),
        None if category in (None, "") else str(category),
        None if meta.get("patient_id") in (None, "") else str(meta["patient_id"]),
    )


@dataclass(frozen=True, slots=True)
class _Judged:
    verdicts: Verdicts
    repeats: int
    judge: str | None
    warning: str | None
    identical: bool
    self_judged: bool
    unparsed: frozenset[str] = frozenset()


def _verdicts(path: Path, rubric: str) -> _Judged | None:
    from clinieval.judge.run import read_judge_scores, scores_path
    from clinieval.records.runs import RunDir

    run = RunDir(path)
    if not scores_path(run, rubric).is_file():
        return None
    scores = read_judge_scores(run, rubric)
    out: Verdicts = {}
    repeats = 0
    judge_name: str | None = None
    warning: str | None = None
    self_judged = False
    repeated = differing = 0
    unparsed: set[str] = set()
    for (sid, _), score in scores.items():
        entries = score.metadata.get("judge_repeats") or []
        if entries and all(e.get("values") is None and e.get("error_kind") == "unparsed" for e in entries):
            unparsed.add(sid)
        judge_name = judge_name or (score.metadata.get("judge") or {}).get("name")
        self_judged = self_judged or bool((score.metadata.get("judge") or {}).get("self_judged"))
        warning = warning or score.metadata.get("judge_warning")
        replies = [e.get("raw") for e in entries if e.get("error_kind") in (None, "unparsed")]
        if len(replies) > 1:
            repeated += 1
            differing += len(set(replies)) > 1
        repeats = max(repeats, len(entries))
        row: list[float | None] = [None] * len(entries)
        for e in entries:
            values = e.get("values")
            if values is not None and int(e["repeat"]) < len(row):
                row[int(e["repeat"])] = float(values["correct"])
        out[sid] = row
    identical = repeated > 0 and differing == 0
    return _Judged(out, repeats, judge_name, warning, identical, self_judged, frozenset(unparsed))


def read_arm(path: Path, label: str | None = None) -> ArmAnswers:
    """An arm from its run directory: samples, scorer values, and judge verdicts if judged.
    ``label`` names the model in tables (default: the model spec's short name; a suite passes
    its own model names, which stay distinct where two servers serve one model name)."""
    from clinieval.benchmarks.ehrnoteqa.task import arm_format, arm_model, rubric_for
    from clinieval.models.spec import model_short_name
    from clinieval.records.runs import RunDir

    run = RunDir.open(path)
    fmt = arm_format(run)
    records = [r for r in run.records() if r.repeat == 0]
    if not records:
        raise UserError(f"{path}: the run has no finished samples")
    spec = arm_model(run)
    arm = ArmAnswers(label=label or model_short_name(spec), model=spec, fmt=fmt, path=path, items={})
    for rec in records:
        arm.items[rec.sample.id] = _item(rec.sample)
        if rec.output is not None and rec.output.error_kind is not None:
            arm.answer_failed[rec.sample.id] = rec.output.error_kind.value
        for name, score in rec.scores.items():
            arm.modes.setdefault(name, {})[rec.sample.id] = score.value
            if name == "letter_extract" and score.metadata.get("unparsed"):
                arm.unparsed_letters += 1
    judged = _verdicts(path, rubric_for(fmt).name)
    if judged is not None:
        arm.verdicts, arm.judge_repeats, arm.judge_name = judged.verdicts, judged.repeats, judged.judge
        arm.judge_warning, arm.identical_repeats = judged.warning, judged.identical
        arm.self_judged, arm.judge_unparsed = judged.self_judged, judged.unparsed
    return arm


# --------------------------------------------------------------------------------------------
# Scores


def _pct(xs: Sequence[float]) -> float | None:
    return 100.0 * statistics.fmean(xs) if xs else None


def repeat_scores(arm: ArmAnswers, items: Sequence[str] | None = None) -> list[float | None]:
    """The judge score of each repeat (None for a repeat with no verdict at all)."""
    if arm.verdicts is None:
        return []
    ids = list(arm.items) if items is None else list(items)
    out: list[float | None] = []
    for r in range(arm.judge_repeats):
        xs: list[float] = []
        for i in ids:
            if i in arm.answer_failed:
                xs.append(0.0)
                continue
            row = arm.verdicts.get(i)
            if row is not None and r < len(row) and row[r] is not None:
                xs.append(float(row[r]))  # type: ignore[arg-type]
        out.append(_pct(xs))
    return out


def item_verdict(arm: ArmAnswers, item: str) -> float | None:
    """The judge's verdict on one answer: majority of parsed repeats; 0 for a failed answer."""
    if item in arm.answer_failed:
        return 0.0
    if arm.verdicts is None:
        return None
    xs = [v for v in arm.verdicts.get(item, []) if v is not None]
    if not xs:
        return None
    mean = statistics.fmean(xs)
    return None if mean == 0.5 else float(mean > 0.5)


def mode_value(arm: ArmAnswers, mode: str, item: str) -> float | None:
    """Correct (1) / incorrect (0) for one answer under one mode; failures are incorrect."""
    if mode == JUDGE:
        return item_verdict(arm, item)
    values = arm.modes.get(mode)
    if values is None or item not in values:
        return None
    v = values[item]
    return 0.0 if v is None else float(v)


def _mode_accuracy(arm: ArmAnswers, mode: str, items: Sequence[str], *, with_ci: bool = False) -> JSON:
    values = {i: v for i in items if (v := mode_value(arm, mode, i)) is not None}
    xs = list(values.values())
    out: JSON = {"score": _pct(xs), "n": len(xs), "undecided": len(items) - len(xs)}
    if with_ci:
        out.update(question_interval(arm, list(values), [100.0 * x for x in xs]))
    return out


def judge_item_means(arm: ArmAnswers) -> dict[str, float]:
    """Each answer's judge score averaged over its parsed repeats (0 for a failed answer): the
    per-question values a between-question interval rests on (repeats are judge noise, not
    more questions)."""
    out: dict[str, float] = {}
    for item in arm.items:
        if item in arm.answer_failed:
            out[item] = 0.0
            continue
        xs = [v for v in (arm.verdicts or {}).get(item, []) if v is not None]
        if xs:
            out[item] = statistics.fmean(xs)
    return out


def question_interval(arm: ArmAnswers, items: Sequence[str], values: Sequence[float]) -> JSON:
    """A 95 % bootstrap CI over questions; when every question names its patient, a patient's
    questions are resampled together (they share notes, so they are not independent)."""
    from clinieval.analysis.uncertainty import bootstrap_ci, cluster_bootstrap_ci

    if len(values) < 2:
        return {"ci": None, "ci_resamples": None}
    patients = [arm.items[i].patient for i in items]
    if all(p is not None for p in patients):
        if len(set(patients)) < 2:
            why = "every question is about one patient"
            return {"ci": None, "ci_resamples": "patient", "ci_undefined": why}
        lo, hi = cluster_bootstrap_ci(values, patients)
        unit = "patient"
    else:
        lo, hi = bootstrap_ci(values)
        unit = "question"
    return {"ci": [lo, hi], "ci_resamples": unit}


def _judge_stats(arm: ArmAnswers) -> JSON:
    per = repeat_scores(arm)
    xs = [x for x in per if x is not None]
    unread = 0
    if arm.verdicts is not None:
        unread = sum(
            1 for i, row in arm.verdicts.items() if i not in arm.answer_failed for v in row if v is None
        )
    means = judge_item_means(arm)
    return {
        "per_repeat": per,
        "mean": statistics.fmean(xs) if xs else None,
        "sd": statistics.stdev(xs) if len(xs) >= 2 and not arm.identical_repeats else None,
        "sd_not_measured": IDENTICAL_NOTE if arm.identical_repeats else None,
        "self_judged": arm.self_judged,
        **question_interval(arm, list(means), [100.0 * v for v in means.values()]),
        "repeats": arm.judge_repeats,
        "unscored_verdicts": unread,
        "answer_failures": len(arm.answer_failed),
        "judge": arm.judge_name,
    }


def _modes_for(arms: Sequence[ArmAnswers], fmt: str) -> tuple[str, ...]:
    candidates = MC_MODES if fmt == "mc" else FREE_MODES

    def has(mode: str) -> bool:
        if mode == JUDGE:
            return any(a.verdicts is not None for a in arms)
        return any(mode in a.modes for a in arms)

    return tuple(m for m in candidates if has(m))


# --------------------------------------------------------------------------------------------
# Stability, agreement, breakdowns


def _stability(arms: Sequence[ArmAnswers]) -> JSON:
    from clinieval.analysis.rank_agreement import rank_instability
    from clinieval.analysis.rankings import ScoreTable

    judged = [a for a in arms if a.verdicts is not None]
    if len(judged) < 2:
        return {"undefined": "ranking stability needs at least two judged models"}
    repeats = {a.judge_repeats for a in judged}
    if len(repeats) != 1:
        return {"undefined": f"the models were judged a different number of times ({sorted(repeats)})"}
    if all(a.identical_repeats for a in judged):
        return {"undefined": f"not measured: {IDENTICAL_NOTE}"}
    per_arm = {a.label: repeat_scores(a) for a in judged}
    rows = [(f"repeat {r + 1}", label, v) for label, xs in per_arm.items() for r, v in enumerate(xs)]
    if any(v is None for _, _, v in rows):
        return {"undefined": "a repeat has no verdict at all for some model"}
    # EHRNoteQA's public code takes the mode met first in run order when a model's ranks tie
    result = rank_instability(ScoreTable.from_rows(rows), gold_rule="first")
    ranks = {m: [float(x) for x in result.ranks.values[:, j]] for j, m in enumerate(result.ranks.models)}
    sds = [s for a in judged if (s := _judge_stats(a)["sd"]) is not None]
    return {
        "ranks": ranks,
        "gold_rank": result.gold_ranks,
        "gold_rule": result.gold_rule,
        "tied_modes": list(result.tied_modes),
        "instability": result.per_model,
        "total": result.total,
        "average_sd": statistics.fmean(sds) if sds else None,
    }


def _kappa(a: list[float], b: list[float]) -> float | None:
    from clinieval.analysis._validation import UndefinedStatisticError
    from clinieval.analysis.agreement import cohen_kappa

    try:
        return cohen_kappa(a, b, labels=[0.0, 1.0])
    except UndefinedStatisticError:
        return None


def _tau(x: list[float], y: list[float]) -> JSON:
    from clinieval.analysis.agreement import kendall_tau

    if len(x) < 3:
        return {"undefined": "needs three models or more"}
    try:
        c = kendall_tau(x, y)
    except UserError as e:  # constant scores: every model tied under one mode
        return {"undefined": str(e)}
    return {"tau_b": c.statistic, "p": c.pvalue, "n_models": c.n}


def _agreement(arms: Sequence[ArmAnswers], modes: Sequence[str]) -> list[JSON]:
    out: list[JSON] = []
    for m1, m2 in combinations(modes, 2):
        xs: list[float] = []
        ys: list[float] = []
        for arm in arms:
            for i in arm.items:
                a, b = mode_value(arm, m1, i), mode_value(arm, m2, i)
                if a is not None and b is not None:
                    xs.append(a)
                    ys.append(b)
        scores = [
            (s1, s2)
            for arm in arms
            if (s1 := _mode_accuracy(arm, m1, list(arm.items))["score"]) is not None
            and (s2 := _mode_accuracy(arm, m2, list(arm.items))["score"]) is not None
        ]
        out.append(
            {
                "a": m1,
                "b": m2,
                "n_answers": len(xs),
                "percent_agreement": _pct([float(x == y) for x, y in zip(xs, ys, strict=True)]),
                "kappa": _kappa(xs, ys) if xs else None,
                "ranking": _tau([s for s, _ in scores], [t for _, t in scores]),
            }
        )
    return out


def _score_of(arm: ArmAnswers, mode: str, items: Sequence[str]) -> float | None:
    if mode == JUDGE:
        xs = [x for x in repeat_scores(arm, items) if x is not None]
        return statistics.fmean(xs) if xs else None
    value: float | None = _mode_accuracy(arm, mode, items)["score"]
    return value


def _breakdown(arms: Sequence[ArmAnswers], modes: Sequence[str], by: str) -> JSON | None:
    groups: dict[str, None] = {}
    for arm in arms:
        for item in arm.items.values():
            g = item.group(by)
            if g is not None:
                groups.setdefault(g)
    if not groups:
        return None
    out: JSON = {}
    for g in sorted(groups, key=_group_key):
        cell: JSON = {}
        for arm in arms:
            ids = [i for i, it in arm.items.items() if it.group(by) == g]
            cell[arm.label] = {"n": len(ids), **{m: _score_of(arm, m, ids) for m in modes}}
        out[g] = cell
    return out


def _group_key(g: str) -> tuple[int, float, str]:
    try:
        return (0, float(g), g)
    except ValueError:
        return (1, 0.0, g)


# --------------------------------------------------------------------------------------------
# The whole analysis


def _check_arms(arms: Sequence[ArmAnswers]) -> None:
    if not arms:
        raise UserError("no EHRNoteQA arms to analyse")
    seen = Counter((a.label, a.fmt) for a in arms)
    dup = next((k for k, n in seen.items() if n > 1), None)
    if dup is not None:
        raise UserError(f"two runs of {dup[0]} in format {dup[1]}; give each model once per format")


def _format_section(arms: Sequence[ArmAnswers], fmt: str) -> JSON:
    modes = _modes_for(arms, fmt)
    per_model: JSON = {}
    for arm in arms:
        entry: JSON = {
            "model": arm.model,
            "items": len(arm.items),
            "answer_failures": dict(Counter(arm.answer_failed.values())),
        }
        for mode in modes:
            if mode == JUDGE:
                entry[JUDGE] = _judge_stats(arm) if arm.verdicts is not None else None
            else:
                known = mode in arm.modes
                entry[mode] = _mode_accuracy(arm, mode, list(arm.items), with_ci=True) if known else None
        if fmt == "mc" and "letter_extract" in arm.modes:
            entry["unparsed_letters"] = arm.unparsed_letters
        per_model[arm.label] = entry
    return {
        "models": [a.label for a in arms],
        "modes": list(modes),
        "per_model": per_model,
        "stability": _stability(arms) if JUDGE in modes else None,
        "agreement": _agreement(arms, modes) if len(modes) >= 2 else [],
        "breakdowns": {by: _breakdown(arms, modes, by) for by in BREAKDOWNS},
    }


def _consistency(sections: dict[str, JSON]) -> JSON:
    """The paper's multiple-choice vs free-text comparison: judge SD and rank instability."""
    out: JSON = {}
    for fmt, section in sections.items():
        st = section.get("stability") or {}
        not_measured = str(st.get("undefined", "")).startswith("not measured")
        out[fmt] = {
            "average_sd": st.get("average_sd"),
            "instability": st.get("total"),
            "not_measured": not_measured,
        }
    return out


def analyze_arms(arms: Sequence[ArmAnswers]) -> JSON:
    """Every EHRNoteQA statistic over ``arms`` (any mix of models and formats)."""
    _check_arms(arms)
    sections: dict[str, JSON] = {}
    for fmt in ("mc", "free"):
        chosen = [a for a in arms if a.fmt == fmt]
        if chosen:
            sections[fmt] = _format_section(chosen, fmt)
    warnings = sorted({a.judge_warning for a in arms if a.judge_warning})
    same = sorted({f"{a.label} ({a.fmt})" for a in arms if a.identical_repeats})
    if same:
        warnings.append(f"Judge repeats were identical for {', '.join(same)}: {IDENTICAL_NOTE}")
    own = sorted({f"{a.label} ({a.fmt})" for a in arms if a.self_judged})
    if own:
        warnings.append(
            f"Self-judging: the judge also wrote the answers of {', '.join(own)}; its scores for them "
            "are flagged and are not comparable with the other models'."
        )
    return {
        "formats": sections,
        "consistency": _consistency(sections),
        "arms": [{"label": a.label, "format": a.fmt, "path": str(a.path)} for a in arms],
        "warnings": warnings,
    }


def analyze_runs(
    paths: Sequence[Path],
    progress: Callable[[str], None] | None = None,
    labels: Sequence[str] | None = None,
) -> JSON:
    """Read the arm runs at ``paths`` and analyse them (``labels``: each arm's model name in the
    tables, in the order of ``paths``; default: from each run's model spec)."""
    arms = []
    for i, p in enumerate(paths):
        if progress:
            progress(str(p))
        arms.append(read_arm(p, None if labels is None else labels[i]))
    return analyze_arms(arms)


__all__ = [
    "BREAKDOWNS",
    "FREE_MODES",
    "JUDGE",
    "MC_MODES",
    "ArmAnswers",
    "Item",
    "analyze_arms",
    "analyze_runs",
    "item_verdict",
    "mode_value",
    "read_arm",
    "repeat_scores",
]
