"""``review assign`` and ``review progress``: who reviews which item, planned evenly and
reproducibly (never an item's own author), each reviewer's shuffled answer order, and how far the
assignments of a study have come.
"""

from __future__ import annotations

import json
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field

from sqlalchemy import Engine, func, select
from sqlalchemy.orm import Session

from clinieval.errors import UserError
from clinieval.review.audit import record
from clinieval.review.db import (
    Assignment,
    Item,
    User,
    read_session,
    write_session,
)
from clinieval.review.store import get_study
from clinieval.review.study_kinds import get_kind


@dataclass(frozen=True, slots=True)
class AssignCounts:
    created: int
    items: int
    per_reviewer: dict[str, int]
    """Each reviewer's number of items in the study after this run (old and new assignments)."""
    unmatched_authors: list[str] = field(default_factory=list)
    """Item authors who are not users: nobody could be excluded for them (check the spelling)."""


def answer_order(seed: int, reviewer: str, item: str, keys: Sequence[str]) -> list[str]:
    """The order one reviewer sees an item's answers in: shuffled, the same for the same (seed,
    reviewer, item), independent between reviewers (so position bias averages out and can be
    studied: the order shown is exported)."""
    order = list(keys)
    random.Random(json.dumps([seed, reviewer, item])).shuffle(order)
    return order


def _is_author(user: User, item: Item) -> bool:
    return item.author is not None and item.author.casefold() == user.name.casefold()


def _reviewers(s: Session, names: Sequence[str] | None) -> list[User]:
    reviewers = select(User).where(User.role == "reviewer", User.removed_at.is_(None))
    users = list(s.scalars(reviewers.order_by(User.name)).all())
    if names is None:
        return users
    by_name = {u.name: u for u in users}
    unknown = [n for n in names if n not in by_name]
    if unknown:
        raise UserError(f"{unknown[0]!r} is not a reviewer; the reviewers are {', '.join(by_name) or 'none'}")
    return [by_name[n] for n in dict.fromkeys(names)]


def assign(
    engine: Engine, study: str, per_item: int, seed: int, reviewers: Sequence[str] | None = None
) -> AssignCounts:
    """Give every item of ``study`` to ``per_item`` distinct reviewers (all users with the reviewer
    role, or ``reviewers``), never to its author, keeping workloads as even as possible.

    Existing assignments are kept and counted (running it again after an import assigns only the
    new items; raising ``per_item`` adds reviewers to every item). Items with fewer eligible
    reviewers are placed first, the rest in a seeded shuffle; each goes to the least-loaded
    eligible reviewers, ties broken by a seeded draw. The same database and seed give the same
    assignments, and overlapping pairs vary between items (better for inter-rater agreement than
    fixed teams).
    """
    if per_item < 1:
        raise UserError("--per-item must be at least 1")
    with write_session(engine) as s:
        row = get_study(s, study)
        users = _reviewers(s, reviewers)
        if len(users) < per_item:
            raise UserError(f"--per-item {per_item} needs {per_item} reviewers; there are {len(users)}")
        items = list(s.scalars(select(Item).where(Item.study_id == row.id).order_by(Item.id)).all())
        have: dict[int, set[int]] = {i.id: set() for i in items}
        load: Counter[int] = Counter()
        for a in s.scalars(select(Assignment).where(Assignment.study_id == row.id)).all():
            have[a.item_id].add(a.user_id)
            load[a.user_id] += 1
        plan = _plan(items, users, have, load, per_item, random.Random(f"assign:{seed}"))
        for item, user in plan:
            keys = [a.key for a in item.answers]
            s.add(
                Assignment(
                    study_id=row.id,
                    item_id=item.id,
                    user_id=user.id,
                    answer_order=answer_order(seed, user.name, item.key, keys),
                )
            )
        names = {u.casefold() for u in s.scalars(select(User.name)).all()}
        unmatched = sorted({i.author for i in items if i.author and i.author.casefold() not in names})
        per_reviewer = {u.name: load[u.id] for u in users}
        chosen = list(reviewers or [])
        detail = {"created": len(plan), "per_item": per_item, "seed": seed, "reviewers": chosen}
        record(s, "assign", study=study, detail=detail)
    return AssignCounts(len(plan), len(items), per_reviewer, unmatched)


def _plan(
    items: Sequence[Item],
    users: Sequence[User],
    have: dict[int, set[int]],
    load: Counter[int],
    per_item: int,
    rng: random.Random,
) -> list[tuple[Item, User]]:
    """The new (item, reviewer) pairs; ``load`` is updated as reviewers are picked."""

    def eligible_for(item: Item) -> list[User]:
        return [u for u in users if u.id not in have[item.id] and not _is_author(u, item)]

    # The most constrained items (an author among the reviewers) go first, while every load is
    # still low; the free items then even the loads out. A seeded draw orders items within that.
    draws = {item.id: rng.random() for item in items}
    order = sorted(items, key=lambda item: (len(eligible_for(item)), draws[item.id]))
    plan: list[tuple[Item, User]] = []
    for item in order:
        need = per_item - len(have[item.id])
        if need <= 0:
            continue
        eligible = eligible_for(item)
        if len(eligible) < need:
            note = f" (its author {item.author} is excluded)" if item.author else ""
            raise UserError(
                f"item {item.key!r} needs {need} more reviewer(s) but only {len(eligible)} can take it{note};"
                " add reviewers or lower --per-item"
            )
        draw = {u.id: rng.random() for u in eligible}
        eligible.sort(key=lambda u: (load[u.id], draw[u.id]))
        for user in eligible[:need]:
            plan.append((item, user))
            load[user.id] += 1
            have[item.id].add(user.id)
    return plan


# --- progress ------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Progress:
    """How far a study is: items, assignments by status, per reviewer, items fully submitted."""

    study: str
    kind: str
    label: str
    """What a reviewer does in the study, as the reviewer's queue says it ("Mark answers correct"
    for a rank study that asks no ranking)."""
    items: int
    assigned_items: int
    complete_items: int
    by_status: dict[str, int]
    per_reviewer: dict[str, dict[str, int]]


def progress(engine: Engine, study: str) -> Progress:
    with read_session(engine) as s:
        row = get_study(s, study)
        n_items = s.scalar(select(func.count(Item.id)).where(Item.study_id == row.id)) or 0
        rows = s.execute(
            select(User.name, Assignment.status, Assignment.item_id)
            .join(User, Assignment.user_id == User.id)
            .where(Assignment.study_id == row.id)
        ).all()
    by_status = dict.fromkeys(("pending", "draft", "submitted"), 0)
    per_reviewer: dict[str, dict[str, int]] = {}
    open_items: set[int] = set()
    assigned: set[int] = set()
    for name, status, item_id in rows:
        by_status[status] += 1
        per_reviewer.setdefault(name, dict.fromkeys(by_status, 0))[status] += 1
        assigned.add(item_id)
        if status != "submitted":
            open_items.add(item_id)
    return Progress(
        study=row.name,
        kind=row.kind,
        label=get_kind(row.kind).title(row.config or {}),
        items=n_items,
        assigned_items=len(assigned),
        complete_items=len(assigned - open_items),
        by_status=by_status,
        per_reviewer=dict(sorted(per_reviewer.items())),
    )
