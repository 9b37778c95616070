"""``review import``'s write: items into a study, created on first import with its kind and
config. All or nothing, and never a silent change: an item already there must be identical, since
reviews may rest on it; answers must keep their models apart and their ids blind.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, selectinload

from clinieval.errors import UserError
from clinieval.review.audit import record
from clinieval.review.db import (
    Answer,
    Item,
    Study,
    write_session,
)
from clinieval.review.items import AnswerIn, ReviewItem, difference, item_content
from clinieval.review.store import check_name
from clinieval.review.study_kinds import get_kind


@dataclass(frozen=True, slots=True)
class ImportCounts:
    added: int
    unchanged: int
    study_created: bool


def _check_blinding(item: ReviewItem, where: str) -> None:
    """Answers of one item need distinct models (the export maps each back to one model), and an
    answer id must not name its model: ids reach the reviewer's browser, model names must not."""
    sources = [a.source for a in item.answers]
    dup = sorted({s for s in sources if sources.count(s) > 1})
    if dup:
        raise UserError(f"{where}: two answers come from {dup[0]!r}; each answer needs its own model")
    for a in item.answers:
        if a.source.casefold() in a.id.casefold():
            raise UserError(
                f"{where}: answer id {a.id!r} contains its model's name {a.source!r}; reviewers' browsers see"
                " answer ids, so use neutral ids such as a1, a2"
            )


def _as_review_item(row: Item) -> ReviewItem:
    return ReviewItem(
        item=row.key,
        answers=tuple(AnswerIn(a.key, a.source, a.text) for a in row.answers),
        **item_content(row),
    )


def _study_for_import(
    s: Session, name: str, kind: str, config: Mapping[str, Any] | None
) -> tuple[Study, bool]:
    checked = get_kind(kind).config(config)
    study = s.scalar(select(Study).where(Study.name == name))
    if study is None:
        study = Study(name=name, kind=kind, config=checked)
        s.add(study)
        s.flush()
        return study, True
    if study.kind != kind:
        raise UserError(f"study {name!r} is a {study.kind} study; import into it with --kind {study.kind}")
    if config is not None and checked != study.config:
        raise UserError(
            f"study {name!r} was created with config {json.dumps(study.config)}; this import gives"
            f" {json.dumps(checked)}. Leave --config out to keep the study's, or use a new study"
        )
    return study, False


def import_items(
    engine: Engine, study: str, kind: str, config: Mapping[str, Any] | None, items: Sequence[ReviewItem]
) -> ImportCounts:
    """Add ``items`` to ``study`` (created with ``kind`` and ``config`` if new). An item already
    there must be identical; a changed one is refused by name, since reviews may rest on it.
    All or nothing: one bad item leaves the database as it was."""
    check_name(study, "study name")
    checker = get_kind(kind)
    seen: set[str] = set()
    for it in items:
        where = f"item {it.item!r}"
        if it.item in seen:
            raise UserError(f"{where} appears twice in this import")
        seen.add(it.item)
        checker.check_item(it, where)
        _check_blinding(it, where)
    added = unchanged = 0
    with write_session(engine) as s:
        row, created = _study_for_import(s, study, kind, config)
        existing = {
            i.key: i
            for i in s.scalars(
                select(Item).where(Item.study_id == row.id).options(selectinload(Item.answers))
            ).all()
        }
        for it in items:
            old = existing.get(it.item)
            if old is not None:
                diff = difference(_as_review_item(old), it)
                if diff is not None:
                    raise UserError(
                        f"item {it.item!r} is already in study {study!r} with a different {diff}; give a"
                        " changed item a new key, or import it into a new study"
                    )
                unchanged += 1
                continue
            s.add(_new_item(row.id, it))
            added += 1
        detail = {"kind": kind, "added": added, "unchanged": unchanged, "created": created}
        record(s, "import", study=study, detail=detail)
    return ImportCounts(added, unchanged, created)


def _new_item(study_id: int, it: ReviewItem) -> Item:
    return Item(
        study_id=study_id,
        key=it.item,
        answers=[Answer(key=a.id, source=a.source, text=a.text) for a in it.answers],
        **item_content(it),
    )
