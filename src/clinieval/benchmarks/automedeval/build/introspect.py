"""Step (g): iterative knowledge introspection, one iteration per run.

The paper runs the trained judge over its own training set, and for every case it got wrong a
retrieval-augmented teacher proposes a revision suggestion that a second model reviews (at most 3
rounds; a physician breaks deadlocks); the accepted suggestions are added to those instances and
the judge is retrained (44.61 -> 47.13 -> 48.65 Accuracy_triple over 0, 1, 2 iterations). Here:

1. **Judge**: the training set is what the curriculum would train on (:func:`curriculum.order`:
   parsed evaluations a physician kept, or all parsed ones when none was reviewed). Each instance
   is judged once, responses in their original order (the order its SFT example shows), with the
   judge prompt :func:`judging.judge_messages` and the knowledge completion chain on the KB.
2. **Wrong**: a case is wrong when the judge's ordering of the responses is not the teacher's
   under the paper's Accuracy_triple rule (:func:`rank_agreement.order_agreement`: every pair's
   relation, ties included, must match; the metric the paper's iteration gains are reported in).
   An unparsed judge reply is wrong. A failed call is neither: it is counted and asked again on
   the next run.
3. **Suggestion rounds**: the question is looked up in the KB; the teacher gets the case, the
   knowledge, the judge's evaluation and its own, and writes one ``Suggestion:``; the reviewer
   answers ``ACCEPT`` or ``REJECT`` and a reason (a reply starting with neither is a rejection,
   its text the reason); on a rejection the teacher revises in the same conversation, given the
   reason. At most 3 rounds; still rejected is a deadlock, exported to ``deadlocks.jsonl`` for a
   physician, whose decision (``"decision": "accept"``, the suggestion editable) is read back
   with ``decisions=`` on a rerun.
4. **Next iteration**: accepted suggestions are appended to the instances' ``suggestions`` (an
   identical one is not added twice); ``next/instances.jsonl`` holds every instance (only the
   updated ones changed) and ``next/`` the curriculum stages for retraining
   (:func:`curriculum.write_curriculum`, where each suggestion becomes a ``Revision:`` line).

Every call goes through ``OUT/cache.sqlite``: a killed run resumes, a rerun asks nothing.
``introspect.json`` counts everything (judged, wrong, accepted, deadlocks, the rounds histogram,
calls and tokens per role); ``judged.jsonl`` and ``cases.jsonl`` hold what each call said.
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clinieval.benchmarks.automedeval.build.instances import Instance, write_instances
from clinieval.benchmarks.automedeval.judging import JUDGE_GENERATION, ask_with_knowledge
from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase
from clinieval.benchmarks.automedeval.prompts import judge_messages
from clinieval.benchmarks.automedeval.verdict import cut_response, parse_scores
from clinieval.datasets import json_objects
from clinieval.engine.runner import CachedCalls, CallTally, ProgressBar, cached_generate, map_each
from clinieval.errors import UserError, one_of
from clinieval.fsutil import atomic_write_json, atomic_write_jsonl
from clinieval.judge.rubric import VerdictParseError
from clinieval.models.base import Model
from clinieval.records.cache import RequestCache
from clinieval.types import GenerationConfig, Message

if TYPE_CHECKING:
    from clinieval.benchmarks.automedeval.build.curriculum import Format

JSON = dict[str, Any]

REVIEW_ROUNDS = 3
"""Proposals a suggestion gets before it is a deadlock (the paper's limit)."""
PROMPT_NAME = "automedeval-introspect-v1"
"""Part of every teacher and reviewer cache key: changed wording must never reuse old replies."""
ADVISER_GENERATION = GenerationConfig(temperature=0.0, max_tokens=384, seed=0)
RULE = "Accuracy_triple: every pair's relation (<, =, >) equal to the teacher's; unparsed is wrong"

CACHE_FILE = "cache.sqlite"
SUMMARY_FILE = "introspect.json"
JUDGED_FILE = "judged.jsonl"
CASES_FILE = "cases.jsonl"
DEADLOCKS_FILE = "deadlocks.jsonl"
NEXT_DIR = "next"

PROPOSE_SYSTEM = (
    "You are a senior medical expert teaching a medical judge. The judge evaluated doctors' answers to "
    "a patient's question against a reference answer, and ordered the answers differently from your own "
    "evaluation. Using the retrieved knowledge, the reference and your evaluation, write one revision "
    "suggestion: the medical knowledge or judgement the judge missed, which would let it evaluate such "
    "answers correctly, in one to three sentences and without giving scores. Start with 'Suggestion:'."
)
REVISE = (
    "The reviewer rejected your suggestion. Reason: {reason}\n"
    "Write a revised suggestion that answers the objection. Start with 'Suggestion:'."
)
REVIEW_SYSTEM = (
    "You are a medical expert reviewing a revision suggestion written for a medical judge. Accept it "
    "only if it is medically correct, supported by the reference answer or the retrieved knowledge, and "
    "would lead the judge to the teacher's evaluation of the answers. Answer ACCEPT or REJECT on the first "
    "line, then give your reason."
)

_SUGGESTION = re.compile(r"Suggestion\s*:\s*", re.IGNORECASE)
_VERDICT = re.compile(r"^\W*(ACCEPT|REJECT)\w*\W*(.*)$", re.IGNORECASE | re.DOTALL)


@dataclass(frozen=True)
class IntrospectPlan:
    """Settings of one introspection iteration."""

    kb: KnowledgeBase
    judge_generation: GenerationConfig = JUDGE_GENERATION
    adviser_generation: GenerationConfig = ADVISER_GENERATION
    curriculum_format: str = "both"
    decisions: Mapping[str, Decision] = field(default_factory=dict)
    """Physicians' decisions on deadlocked cases, by instance id (:func:`read_decisions`)."""
    concurrency: int | None = None
    progress: bool = True


@dataclass
class Judged:
    """The judge's reply to one training instance, read against the teacher's scores."""

    id: str
    scores: list[int] | None = None
    text: str = ""
    error: str | None = None
    """Why there are no scores: an unparsed reply (a wrong case) or a failed call (asked again)."""
    failed: bool = False
    lookups: list[JSON] = field(default_factory=list)
    wrong: bool = False

    def to_dict(self, teacher: Sequence[int] | None) -> JSON:
        return {"id": self.id, "scores": self.scores, "teacher_scores": list(teacher or []),
                "wrong": self.wrong, "failed": self.failed, "error": self.error,
                "lookups": self.lookups, "text": self.text}  # fmt: skip


@dataclass
class Round:
    """One proposal and its review."""

    suggestion: str
    accepted: bool
    reason: str

    def to_dict(self) -> JSON:
        return {"suggestion": self.suggestion, "accepted": self.accepted, "reason": self.reason}


@dataclass
class Case:
    """A wrong case's suggestion rounds and how they ended: accepted, deadlock or failed."""

    id: str
    knowledge: list[str]
    rounds: list[Round] = field(default_factory=list)
    outcome: str = "failed"
    error: str | None = None

    @property
    def accepted(self) -> str | None:
        return self.rounds[-1].suggestion if self.outcome == "accepted" else None

    def to_dict(self) -> JSON:
        return {"id": self.id, "outcome": self.outcome, "error": self.error, "knowledge": self.knowledge,
                "rounds": [r.to_dict() for r in self.rounds]}  # fmt: skip


@dataclass
class Advisers:
    """The teacher and reviewer calls of one run, with their tallies."""

    teacher: CachedCalls
    reviewer: CachedCalls
    teacher_tally: CallTally = field(default_factory=CallTally)
    reviewer_tally: CallTally = field(default_factory=CallTally)


# --- 1. and 2.: judging the training set ----------------------------------------------------


def training_set(instances: Sequence[Instance]) -> list[Instance]:
    """What the curriculum trains on, in file order (the judge is introspected on exactly that)."""
    from clinieval.benchmarks.automedeval.build.curriculum import order

    chosen = {x.id for stage in order(instances).stages.values() for x in stage}
    return [x for x in instances if x.id in chosen]


def is_wrong(teacher: Sequence[int], judge: Sequence[int] | None) -> bool:
    """Whether the judge's ordering differs from the teacher's (Accuracy_triple; None is wrong)."""
    from clinieval.analysis.rank_agreement import order_agreement

    read = None if judge is None else [float(s) for s in judge]
    return order_agreement([[float(s) for s in teacher]], [read]).items_correct == 0


def _shown(instance: Instance) -> list[str]:
    return [cut_response(a.text).text for a in instance.responses]


async def judge_one(instance: Instance, calls: CachedCalls, tally: CallTally, plan: IntrospectPlan) -> Judged:
    """The judge's evaluation of one instance (original order, knowledge chain on the KB)."""
    messages = judge_messages(instance.judge_item(), _shown(instance), knowledge=True)
    settings = {**plan.judge_generation.to_dict(), "judge": "automedeval"}
    done = Judged(instance.id)
    chained = await ask_with_knowledge(
        calls, tally, "automedeval-judge", settings, messages, 0, plan.judge_generation, plan.kb
    )
    done.text = chained.text
    done.lookups = [{"query": f.query, "chunks": list(f.chunk_ids), "mode": f.mode} for f in chained.lookups]
    if chained.error is not None:
        done.error, done.failed = f"judge {chained.error}", True
        return done
    try:
        done.scores = parse_scores(done.text, len(instance.responses))
    except VerdictParseError as e:
        done.error = f"unparsed: {e}"
    teacher = instance.evaluation.scores if instance.evaluation is not None else None
    done.wrong = teacher is not None and is_wrong(teacher, done.scores)
    return done


# --- 3.: suggestion rounds ------------------------------------------------------------------


def case_body(instance: Instance, knowledge: str, judged: Judged) -> str:
    """What teacher and reviewer both see: the case, the knowledge and both evaluations."""
    answers = "\n".join(f"Doctor {i}: {t}" for i, t in enumerate(_shown(instance), 1))
    teacher = instance.evaluation.text if instance.evaluation is not None else ""
    judge = judged.text if judged.scores is not None else f"{judged.text}\n(no scores could be read)"
    return (
        f"[Patient Question]\n{instance.question}\n\n[Reference Answer]\n{instance.reference}\n\n"
        f"[Doctors' Answers]\n{answers}\n\n[Retrieved Knowledge]\n{knowledge}\n\n"
        f"[Judge's Evaluation]\n{judge.strip()}\n\n[Teacher's Evaluation]\n{teacher.strip()}"
    )


def read_suggestion(reply: str) -> str:
    """The suggestion in a teacher's reply: the text after ``Suggestion:`` (the whole reply when
    it has no such label), on one line, since it becomes one ``Revision:`` line of the rationale."""
    m = _SUGGESTION.search(reply)
    return " ".join((reply[m.end() :] if m else reply).split())


def read_review(reply: str) -> tuple[bool, str]:
    """(accepted, reason): ACCEPT or REJECT first; anything else is a rejection, the reply its reason."""
    m = _VERDICT.match(reply.strip())
    if m is None:
        return False, "unclear review: " + " ".join(reply.split())[:500]
    return m.group(1).upper() == "ACCEPT", " ".join(m.group(2).split())


def review_messages(body: str, suggestion: str) -> list[Message]:
    """The reviewer's prompt: a fresh conversation per suggestion, so each is judged on its own."""
    ask = f"{body}\n\n[Suggestion]\n{suggestion}\n\nAnswer ACCEPT or REJECT, then your reason."
    return [Message("system", REVIEW_SYSTEM), Message("user", ask)]


async def _ask(
    calls: CachedCalls, tally: CallTally, kind: str, messages: list[Message], plan: IntrospectPlan
) -> str | None:
    settings = {**plan.adviser_generation.to_dict(), "prompt": PROMPT_NAME}
    out, asked = await cached_generate(calls, kind, settings, messages, 0, plan.adviser_generation)
    tally.add(out, asked)
    return out.text if out.ok else None


async def advise(instance: Instance, judged: Judged, advisers: Advisers, plan: IntrospectPlan) -> Case:
    """Propose, review and revise a suggestion for one wrong case, at most 3 rounds."""
    found = plan.kb.lookup(instance.question)
    case = Case(instance.id, list(found.chunk_ids))
    body = case_body(instance, found.knowledge, judged)
    talk = [Message("system", PROPOSE_SYSTEM), Message("user", f"{body}\n\nWrite the revision suggestion.")]
    for _ in range(REVIEW_ROUNDS):
        reply = await _ask(
            advisers.teacher, advisers.teacher_tally, "automedeval-introspect-teacher", talk, plan
        )
        if reply is None:
            case.error = "teacher call failed"
            return case
        suggestion = read_suggestion(reply)
        if suggestion:
            said = await _ask(
                advisers.reviewer,
                advisers.reviewer_tally,
                "automedeval-introspect-review",
                review_messages(body, suggestion),
                plan,
            )
            if said is None:
                case.error = "reviewer call failed"
                return case
            accepted, reason = read_review(said)
        else:
            accepted, reason = False, "the reply held no suggestion"
        case.rounds.append(Round(suggestion, accepted, reason))
        if accepted:
            case.outcome = "accepted"
            return case
        talk = [
            *talk,
            Message("assistant", reply),
            Message("user", REVISE.format(reason=reason or "none given")),
        ]
    case.outcome = "deadlock"
    return case


# --- physicians' decisions on deadlocks -----------------------------------------------------


@dataclass(frozen=True, slots=True)
class Decision:
    """A physician's decision on a deadlocked case, and the suggestion (possibly edited) it takes."""

    accept: bool
    suggestion: str


def read_decisions(path: Path) -> dict[str, Decision]:
    """Physicians' decisions: ``deadlocks.jsonl`` with ``"decision"`` set to ``accept`` or
    ``reject`` (null: not decided yet, skipped) and ``suggestion`` possibly edited. The file may be
    the run's own ``deadlocks.jsonl``: a rerun writes the decisions back into it unchanged."""
    if not path.is_file():
        raise UserError(f"{path}: physicians' decisions file not found")
    out: dict[str, Decision] = {}
    for where, obj in json_objects(path):
        item_id, decision, suggestion = obj.get("id"), obj.get("decision"), obj.get("suggestion")
        if not isinstance(item_id, str) or not item_id:
            raise UserError(f"{where}: field 'id' should be the instance id")
        if decision not in ("accept", "reject", None):
            raise UserError(f"{where}: field 'decision' is {decision!r}; expected accept, reject or null")
        if decision is None:
            continue
        if not isinstance(suggestion, str) or (decision == "accept" and not suggestion.strip()):
            raise UserError(f"{where}: field 'suggestion' should be the suggestion's text")
        out[item_id] = Decision(decision == "accept", " ".join(suggestion.split()))
    return out


def _deadlock_row(instance: Instance, judged: Judged, case: Case, decided: Decision | None) -> JSON:
    """What a physician needs to break a deadlock, and the two fields they fill in."""
    return {
        "id": instance.id, "question": instance.question, "reference": instance.reference,
        "responses": [a.to_dict() for a in instance.responses],
        "teacher_evaluation": instance.evaluation.text if instance.evaluation else None,
        "judge_evaluation": judged.text, "knowledge": case.knowledge,
        "rounds": [r.to_dict() for r in case.rounds],
        "suggestion": decided.suggestion if decided else case.rounds[-1].suggestion,
        "decision": None if decided is None else "accept" if decided.accept else "reject",
    }  # fmt: skip


# --- 4.: the next iteration -----------------------------------------------------------------


def with_suggestion(instance: Instance, suggestion: str) -> Instance:
    """The instance with ``suggestion`` appended (unless it already holds that exact text)."""
    if suggestion in instance.suggestions:
        return instance
    return replace(instance, suggestions=(*instance.suggestions, suggestion))


def curriculum_format(name: str) -> Format:
    """The curriculum's file format by name (openai, hf or both)."""
    from clinieval.benchmarks.automedeval.build.curriculum import FORMATS

    return one_of(name, FORMATS, "curriculum format (--format)")


@dataclass
class Introspection:
    """One iteration's results (also written to ``out``)."""

    instances: list[Instance]
    judged: dict[str, Judged]
    cases: dict[str, Case]
    summary: JSON


async def introspect(
    instances: Sequence[Instance],
    judge: Model,
    teacher: Model,
    reviewer: Model,
    out: Path,
    plan: IntrospectPlan,
    source: str = "instances",
) -> Introspection:
    """One introspection iteration into ``out`` (see the module docstring for the files)."""
    fmt = curriculum_format(plan.curriculum_format)
    chosen = training_set(instances)
    if not chosen:
        raise UserError(
            f"{source}: no instance has a parsed teacher evaluation to train on; run teach (and verify) first"
        )
    out.mkdir(parents=True, exist_ok=True)
    cache = RequestCache(out / CACHE_FILE)
    judge_calls, judge_tally = CachedCalls(judge, cache), CallTally()
    advisers = Advisers(CachedCalls(teacher, cache), CachedCalls(reviewer, cache))
    started = time.perf_counter()
    try:
        judged = await _judge_all(chosen, judge_calls, judge_tally, plan)
        wrong = [x for x in chosen if judged[x.id].wrong]
        cases = await _advise_all(
            wrong, judged, advisers, plan, min(teacher.max_concurrency, reviewer.max_concurrency)
        )
    finally:
        cache.close()
    updated = _updated(instances, cases, plan.decisions)
    _write(out, chosen, judged, cases, updated, plan, fmt, source)
    changed = sum(a is not b for a, b in zip(instances, updated, strict=True))
    summary = _summary(
        instances,
        chosen,
        judged,
        cases,
        plan,
        changed,
        time.perf_counter() - started,
        {
            "judge": (judge, judge_tally),
            "teacher": (teacher, advisers.teacher_tally),
            "reviewer": (reviewer, advisers.reviewer_tally),
        },
    )
    atomic_write_json(out / SUMMARY_FILE, summary)
    return Introspection(updated, judged, cases, summary)


async def _judge_all(
    chosen: Sequence[Instance],
    calls: CachedCalls,
    tally: CallTally,
    plan: IntrospectPlan,
) -> dict[str, Judged]:
    """Each chosen instance's verdict by the judge, by instance id in the instances' order."""
    bar = ProgressBar(plan.progress, len(chosen), 0, f"introspect: judge {calls.model.name}")

    async def one(instance: Instance) -> Judged:
        return await judge_one(instance, calls, tally, plan)

    results = await map_each(chosen, plan.concurrency or calls.model.max_concurrency, one, bar)
    return {instance.id: result for instance, result in zip(chosen, results, strict=True)}


async def _advise_all(
    wrong: Sequence[Instance],
    judged: Mapping[str, Judged],
    advisers: Advisers,
    plan: IntrospectPlan,
    workers: int,
) -> dict[str, Case]:
    """The teacher's and reviewer's suggestion for each wrongly judged instance, by instance id."""
    bar = ProgressBar(plan.progress, len(wrong), 0, "introspect: suggestions")

    async def one(instance: Instance) -> Case:
        return await advise(instance, judged[instance.id], advisers, plan)

    results = await map_each(wrong, plan.concurrency or workers, one, bar)
    return {instance.id: case for instance, case in zip(wrong, results, strict=True)}


def _updated(
    instances: Sequence[Instance], cases: Mapping[str, Case], decisions: Mapping[str, Decision]
) -> list[Instance]:
    out = []
    for x in instances:
        case = cases.get(x.id)
        chosen = case.accepted if case is not None else None
        decided = decisions.get(x.id)
        if case is not None and case.outcome == "deadlock" and decided is not None and decided.accept:
            chosen = decided.suggestion
        out.append(with_suggestion(x, chosen) if chosen else x)
    return out


def _write(
    out: Path,
    chosen: Sequence[Instance],
    judged: Mapping[str, Judged],
    cases: Mapping[str, Case],
    updated: Sequence[Instance],
    plan: IntrospectPlan,
    fmt: Format,
    source: str,
) -> None:
    from clinieval.benchmarks.automedeval.build.curriculum import write_curriculum

    by_id = {x.id: x for x in chosen}
    atomic_write_jsonl(
        out / JUDGED_FILE,
        (judged[x.id].to_dict(x.evaluation.scores if x.evaluation else None) for x in chosen),
    )
    atomic_write_jsonl(out / CASES_FILE, (cases[x.id].to_dict() for x in chosen if x.id in cases))
    atomic_write_jsonl(
        out / DEADLOCKS_FILE,
        (
            _deadlock_row(by_id[c.id], judged[c.id], c, plan.decisions.get(c.id))
            for c in cases.values()
            if c.outcome == "deadlock"
        ),
    )
    write_instances(out / NEXT_DIR / "instances.jsonl", updated)
    write_curriculum(updated, out / NEXT_DIR, fmt, f"{source} after introspection")


def _summary(
    instances: Sequence[Instance],
    chosen: Sequence[Instance],
    judged: Mapping[str, Judged],
    cases: Mapping[str, Case],
    plan: IntrospectPlan,
    changed: int,
    seconds: float,
    roles: Mapping[str, tuple[Model, CallTally]],
) -> JSON:
    verdicts = list(judged.values())
    outcomes = Counter(c.outcome for c in cases.values())
    deadlocked = [c.id for c in cases.values() if c.outcome == "deadlock"]
    return {
        "source_instances": len(instances),
        "training_set": len(chosen),
        "judged": sum(not j.failed for j in verdicts),
        "judge_failed": sum(j.failed for j in verdicts),
        "unparsed": sum(j.scores is None and not j.failed for j in verdicts),
        "wrong": sum(j.wrong for j in verdicts),
        "right": sum(not j.wrong and not j.failed for j in verdicts),
        "rule": RULE,
        "accepted": outcomes["accepted"],
        "deadlocks": outcomes["deadlock"],
        "physician_accepted": sum(i in plan.decisions and plan.decisions[i].accept for i in deadlocked),
        "physician_rejected": sum(i in plan.decisions and not plan.decisions[i].accept for i in deadlocked),
        "awaiting_physician": sum(i not in plan.decisions for i in deadlocked),
        "advice_failed": outcomes["failed"],
        "rounds": {str(n): sum(c.outcome == "accepted" and len(c.rounds) == n for c in cases.values())
                   for n in range(1, REVIEW_ROUNDS + 1)},
        "updated_instances": changed,
        "calls": {role: {"model": model.name, "requests": t.requests, "cache_hits": t.cache_hits,
                         "prompt_tokens": t.prompt_tokens, "completion_tokens": t.completion_tokens}
                  for role, (model, t) in roles.items()},
        "seconds": round(seconds, 3),
        "next": {"instances": f"{NEXT_DIR}/instances.jsonl", "curriculum": f"{NEXT_DIR}/curriculum.json"},
    }  # fmt: skip
