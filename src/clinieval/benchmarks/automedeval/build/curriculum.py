"""Step (f): the curriculum: evaluations ordered into three SFT stages, in the common chat formats.

The paper trains the judge in three stages: #1 on the lower-quality evaluations (to learn the
output pattern), #2 on the mixed remainder, #3 on the high-quality ones (to learn quality). Here
stage 1 is ``quality: "low"``, stage 3 ``quality: "high"`` (both set by the quality classifier,
step (e)), and stage 2 everything else; within a stage the instances keep their file order. Only
instances with a parsed evaluation are examples, and only those a physician kept; when no
instance of the file carries a verdict at all (no review was done) every parsed one is used, and
the summary says so rather than silently training on unverified data.

An example (:func:`sft_messages`) is the judge's own prompt (:func:`judging.judge_messages`, the
responses in their original order, each cut to 1,000 characters) and the teacher's evaluation as
the assistant's reply; an introspection suggestion (step (g)) becomes a ``Revision: ...`` line
just before the ``Score:`` line, so the judge learns the corrected knowledge as part of its
rationale, ahead of the scores it justifies.

Two formats, both JSON Lines with a ``messages`` list of ``{"role", "content"}``:
``stageN.openai.jsonl`` holds exactly that and nothing else (OpenAI's chat fine-tuning file
format, which defines no place for an id), ``stageN.hf.jsonl`` adds the
instance ``id`` beside ``messages`` (TRL's ``SFTTrainer`` reads a conversational dataset from its
``messages`` column and drops the other columns, so the id costs nothing and traces an example
back to its instance).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from clinieval.benchmarks.automedeval.build.instances import Instance
from clinieval.benchmarks.automedeval.prompts import judge_messages
from clinieval.benchmarks.automedeval.verdict import _DOCTOR, _SCORE_LINE, cut_response
from clinieval.fsutil import atomic_write_json, atomic_write_jsonl
from clinieval.types import Message

Format = Literal["openai", "hf", "both"]
FORMATS: tuple[Format, ...] = ("openai", "hf", "both")
STAGES = (1, 2, 3)
SUMMARY_FILE = "curriculum.json"
STAGE_QUALITY = {1: "low", 2: None, 3: "high"}


def with_revisions(evaluation: str, suggestions: Sequence[str]) -> str:
    """The evaluation with one ``Revision: <suggestion>`` line per suggestion inserted just before
    its ``Score:`` line (the one before the first score read), or before the first score when there
    is no ``Score:`` label, or at the end when neither is found."""
    if not suggestions:
        return evaluation
    lines = "".join(f"Revision: {s.strip()}\n" for s in suggestions)
    first_score = _DOCTOR.search(evaluation)
    end = first_score.start() if first_score else len(evaluation)
    labels = list(_SCORE_LINE.finditer(evaluation, 0, end))
    at = labels[-1].start() if labels else end
    if at == len(evaluation):
        return evaluation.rstrip("\n") + "\n" + lines.rstrip("\n")
    line_start = evaluation.rfind("\n", 0, at) + 1
    if evaluation[line_start:at].strip():  # "... Step 2: ok. Score: ..." on one line: break it
        return evaluation[:at].rstrip(" ") + "\n" + lines + evaluation[at:]
    return evaluation[:line_start] + lines + evaluation[line_start:]


def sft_messages(instance: Instance) -> list[Message]:
    """The SFT example of an instance: the judge prompt, then the evaluation as the reply. Only an
    instance with a parsed evaluation is an example (ValueError otherwise)."""
    if instance.evaluation is None or instance.evaluation.scores is None:
        raise ValueError(f"instance {instance.id!r} has no parsed evaluation: it is no SFT example")
    shown = [cut_response(a.text).text for a in instance.responses]
    reply = with_revisions(instance.evaluation.text, instance.suggestions)
    # the prompt the teacher answered (minus its worked example), offering the [Question] lookup:
    # introspection runs the trained judge with the knowledge chain, and `judge --kb` asks the same
    return [*judge_messages(instance.judge_item(), shown, knowledge=True), Message("assistant", reply)]


def _chat(messages: Sequence[Message]) -> list[dict[str, str]]:
    return [{"role": m.role, "content": m.content} for m in messages]


def stage_of(instance: Instance) -> int:
    """1 for a low-quality evaluation, 3 for a high-quality one, 2 for the rest (unlabelled)."""
    return {"low": 1, "high": 3}.get(instance.quality or "", 2)


@dataclass
class Curriculum:
    """The stages' instances and what was left out, and why."""

    verified: bool
    labelled: bool
    stages: dict[int, list[Instance]] = field(default_factory=lambda: {s: [] for s in STAGES})
    no_parsed_evaluation: list[str] = field(default_factory=list)
    discarded: list[str] = field(default_factory=list)
    unverified: list[str] = field(default_factory=list)


def order(instances: Sequence[Instance]) -> Curriculum:
    """Split eligible instances into the three stages (file order kept within a stage)."""
    done = Curriculum(
        verified=any(x.verification is not None for x in instances),
        labelled=any(x.quality is not None for x in instances),
    )
    for x in instances:
        if not x.scored:
            done.no_parsed_evaluation.append(x.id)
        elif done.verified and x.verification is None:
            done.unverified.append(x.id)
        elif x.verification is not None and not x.verification.keep:
            done.discarded.append(x.id)
        else:
            done.stages[stage_of(x)].append(x)
    return done


def stage_files(stage: int, fmt: Format) -> list[str]:
    kinds = ("openai", "hf") if fmt == "both" else (fmt,)
    return [f"stage{stage}.{k}.jsonl" for k in kinds]


def write_curriculum(instances: Sequence[Instance], out: Path, fmt: Format, source: str) -> dict[str, Any]:
    """Write every stage's files (empty stages too, so a trainer can always read three) and
    ``curriculum.json``; returns the summary."""
    done = order(instances)
    out.mkdir(parents=True, exist_ok=True)
    for stage in STAGES:
        examples = [(x.id, _chat(sft_messages(x))) for x in done.stages[stage]]
        for name in stage_files(stage, fmt):
            if ".openai." in name:
                atomic_write_jsonl(out / name, ({"messages": m} for _, m in examples))
            else:
                atomic_write_jsonl(out / name, ({"id": i, "messages": m} for i, m in examples))
    summary = _summary(done, len(instances), fmt, source)
    atomic_write_json(out / SUMMARY_FILE, summary)
    return summary


def _summary(done: Curriculum, total: int, fmt: Format, source: str) -> dict[str, Any]:
    labelled = done.labelled
    return {
        "source": source,
        "instances": total,
        "examples": sum(len(v) for v in done.stages.values()),
        "verification": (
            "physician-kept instances only"
            if done.verified
            else "unverified: no instance carries a physician verdict, so every parsed evaluation is used"
        ),
        "stages": {
            str(s): {
                "quality": STAGE_QUALITY[s] or "unlabelled (mixed)",
                "examples": len(done.stages[s]),
                "files": stage_files(s, fmt),
            }
            for s in STAGES
        },
        "left_out": {
            "no_parsed_evaluation": len(done.no_parsed_evaluation),
            "discarded_by_physician": len(done.discarded),
            "not_yet_reviewed": len(done.unverified),
        },
        "quality_labels": labelled,
        "note": None if labelled else "no instance has a quality label: stages 1 and 3 are empty",
        "format": fmt,
    }
