"""EHRNoteQA end to end on a synthetic set with the embedded models (``clinieval ehrnoteqa demo``).

Every step a real evaluation takes, on data anyone may hold: the synthetic set is written in
the release's own files (``qa.jsonl`` + ``discharge.csv``) and read back through the release
loader, both embedded models answer in both formats, the tiny embedded judge judges every answer
five times, and the analysis writes the report. The tiny models exercise the machinery with real
text; their scores, and above all the tiny judge's verdicts, say nothing about clinical ability,
and the report says so.

Sized to finish in a few minutes on a 2-core machine: 5 patients x 2 questions (both levels), with
a quarter of the patients' summaries in long mode (one Level-2 patient, 4,100 tokens of notes).
Reading the notes is most of the cost (three passes: each model's arms, then the free-text judge),
so the set cuts the notes: 8,200 SmolLM2 tokens against 22,200 for the earlier 8 patients x 2
questions at half long mode. ``--patients`` and ``--per-patient`` scale it up.

The models and the judge are opened with the command's endpoint options (``backend``,
``concurrency``: the ``--n-ctx``, ``--timeout``, ``--concurrency``, ``--executor`` ... that
``ehrnoteqa run`` and ``judge`` take), so either can also be asked over HTTP or on Ray.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

from clinieval.benchmarks.ehrnoteqa.prompts import Format
from clinieval.models.catalog import DEFAULT_MODEL, DEMO_MODELS
from clinieval.models.spec import BackendOptions, arm_dir_name

DEMO_N_CTX = 8192
"""Level 2 reaches 7,500 tokens of notes: both embedded models are opened with an 8k window."""


@dataclass(frozen=True, slots=True)
class DemoPlan:
    out: Path
    patients: int = 5
    per_patient: int = 2
    long_fraction: float = 0.25
    """Share of patients whose summaries get long-mode sections (the builder's default is 0.5):
    one Level-2 patient (4,100 tokens of notes) among the five."""
    seed: int = 0
    models: tuple[str, ...] = DEMO_MODELS
    judge: str = DEFAULT_MODEL
    repeats: int = 5
    formats: tuple[Format, ...] = ("mc", "free")
    max_tokens: int = 48
    loglik: bool = True
    """Multiple-choice arms also score the options by log-likelihood: the embedded models and vLLM
    return prompt log-probabilities, most OpenAI-compatible servers do not (``--no-loglik``)."""
    backend: BackendOptions = field(default_factory=lambda: BackendOptions(n_ctx=DEMO_N_CTX))
    """How every arm and judge pass opens its model (the command's endpoint options)."""
    concurrency: int | None = None
    """Requests in flight for each arm and judge pass (None: the model's own ceiling)."""
    judge_max_tokens: int = 24
    """The verdict comes first (``yes`` / ``Score: 1``); a tiny judge's rambling after it is cut, so
    the free-text judge does not spend minutes writing reasoning nobody reads."""
    progress: bool = True


async def run_demo(plan: DemoPlan) -> list[str]:
    """Build, run, judge and analyse; return the lines to print (the report last)."""
    from clinieval.benchmarks.ehrnoteqa.analysis import analyze_runs
    from clinieval.benchmarks.ehrnoteqa.data import load_folder
    from clinieval.benchmarks.ehrnoteqa.prompts import GENERATION
    from clinieval.benchmarks.ehrnoteqa.report import render_markdown, write_report
    from clinieval.benchmarks.ehrnoteqa.synth.writer import build_synthetic_set
    from clinieval.benchmarks.ehrnoteqa.task import EHRNoteQASettings, judge_arm, run_format_arm

    data = plan.out / "data"
    # deterministic: a rerun rewrites identical files, so the arms below resume
    built = build_synthetic_set(
        data,
        patients=plan.patients,
        seed=plan.seed,
        per_patient=plan.per_patient,
        long_fraction=plan.long_fraction,
        overwrite=True,
    )
    loaded = load_folder(data)
    lines = [f"synthetic set: {built.describe()}", f"loaded: {loaded.describe()}"]
    settings = EHRNoteQASettings(
        generation=dataclasses.replace(GENERATION, max_tokens=plan.max_tokens),
        loglik=plan.loglik,
        backend=plan.backend,
        concurrency=plan.concurrency,
        progress=plan.progress,
    )
    arms: list[Path] = []
    for spec in plan.models:
        for fmt in plan.formats:
            path = plan.out / "arms" / arm_dir_name(spec, fmt)
            ran = await run_format_arm(loaded.samples, spec, fmt, path, settings, loaded.files)
            lines.append(f"{spec} ({fmt}): {ran.stats_line}")
            arms.append(path)
    for path in arms:
        judged = await judge_arm(
            path,
            plan.judge,
            repeats=plan.repeats,
            backend=plan.backend,
            concurrency=plan.concurrency,
            max_tokens=plan.judge_max_tokens,
            progress=plan.progress,
        )
        s = judged.summary
        lines.append(
            f"judged {path.name}: {s.scored}/{s.items} scored, {s.parse_failures} unparsed of "
            f"{s.judge_calls} judge calls ({s.requests} requests, {s.cache_hits} cache hits)"
        )
    result = analyze_runs(arms)
    paths = write_report(result, plan.out / "report")
    lines += [render_markdown(result), f"wrote {', '.join(map(str, paths))}"]
    return lines
