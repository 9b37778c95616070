"""``review import``'s write: items into a study, created on first import with its kind and
config. All or nothing, and never a silent change: an item already there must be identical, since
reviews may rest on it; answers must keep their models apart and their ids blind.

An answer's text may name its model ("I am llama-3-70b, ..."): the text is stored with every model
name of the study (and every ``--mask`` pattern) replaced by ``[model hidden]``
(:mod:`clinieval.review.blinding`), since that text is what a reviewer's page shows. How many
mentions were masked, and in which items, goes into the import's audit row, which the admin's
study page reads (:func:`masking_report`).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from sqlalchemy import Engine, select
from sqlalchemy.orm import Session, selectinload

from clinieval.errors import UserError
from clinieval.review.audit import record
from clinieval.review.blinding import Masker, masker
from clinieval.review.db import (
    Answer,
    Audit,
    Item,
    Study,
    read_session,
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
    masked_mentions: int = 0
    """Model names (and ``--mask`` matches) replaced in the added items' answer texts."""
    masked_answers: int = 0


@dataclass(frozen=True, slots=True)
class MaskingReport:
    """What the imports of one study masked: mentions per item, and the extra patterns used."""

    mentions: int
    answers: int
    per_item: dict[str, int]
    patterns: tuple[str, ...]


def _masked(it: ReviewItem, hide: Masker) -> tuple[ReviewItem, int, int]:
    """``it`` with its answers' texts masked; how many mentions, in how many answers."""
    answers, mentions, touched = [], 0, 0
    for a in it.answers:
        text, n = hide.count(a.text)
        answers.append(replace(a, text=text))
        mentions, touched = mentions + n, touched + (n > 0)
    return replace(it, answers=tuple(answers)), mentions, touched


def _study_sources(s: Session, study_id: int) -> set[str]:
    query = select(Answer.source).join(Item, Item.id == Answer.item_id).where(Item.study_id == study_id)
    return set(s.scalars(query).all())


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


def _config_in_force(
    engine: Engine, study: str, kind: str, config: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The config the items of an import are checked under: the one given, else the existing
    study's (a study of another kind is refused later, by name), else the kind's defaults."""
    if config is None:
        with read_session(engine) as s:
            row = s.scalar(select(Study).where(Study.name == study))
        if row is not None and row.kind == kind:
            return dict(row.config)
    return get_kind(kind).config(config)


def import_items(
    engine: Engine,
    study: str,
    kind: str,
    config: Mapping[str, Any] | None,
    items: Sequence[ReviewItem],
    mask: Sequence[str] = (),
    names: Sequence[str] = (),
) -> ImportCounts:
    """Add ``items`` to ``study`` (created with ``kind`` and ``config`` if new). An item already
    there must be identical; a changed one is refused by name, since reviews may rest on it.
    Answer texts are stored with model names and the ``mask`` patterns masked; an item already
    there is compared masked the same way. ``names`` are more names the models go by (a suite's
    model specs behind its names for them): masked as the sources are, and, unlike ``mask``, never
    listed on the study's page, which admins read blinded. All or nothing: one bad item leaves the
    database as it was."""
    check_name(study, "study name")
    checker = get_kind(kind)
    settings = _config_in_force(engine, study, kind, config)
    seen: set[str] = set()
    for it in items:
        where = f"item {it.item!r}"
        if it.item in seen:
            raise UserError(f"{where} appears twice in this import")
        seen.add(it.item)
        checker.check_item(it, where, settings)
        _check_blinding(it, where)
    masker(mask)  # a bad pattern is refused before anything is written
    added = unchanged = mentions = answers = 0
    per_item: dict[str, int] = {}
    with write_session(engine) as s:
        row, created = _study_for_import(s, study, kind, config)
        sources = _study_sources(s, row.id) | {a.source for it in items for a in it.answers}
        hide = masker(sources | set(names), mask)
        existing = {
            i.key: i
            for i in s.scalars(
                select(Item).where(Item.study_id == row.id).options(selectinload(Item.answers))
            ).all()
        }
        for raw in items:
            it, n, touched = _masked(raw, hide)
            old = existing.get(it.item)
            if old is not None:
                diff = difference(_masked(_as_review_item(old), hide)[0], it)
                if diff is not None:
                    raise UserError(
                        f"item {it.item!r} is already in study {study!r} with a different {diff}; give a"
                        " changed item a new key, or import it into a new study"
                    )
                unchanged += 1
                continue
            s.add(_new_item(row.id, it))
            added += 1
            mentions, answers = mentions + n, answers + touched
            if n:
                per_item[it.item] = n
        detail: dict[str, Any] = {"kind": kind, "added": added, "unchanged": unchanged, "created": created}
        detail["masked"] = {
            "mentions": mentions,
            "answers": answers,
            "items": per_item,
            "patterns": list(mask),
        }
        record(s, "import", study=study, detail=detail)
    return ImportCounts(added, unchanged, created, mentions, answers)


def masking_report(engine: Engine, study: str) -> MaskingReport:
    """What every import into ``study`` masked (from the import rows of the audit trail)."""
    mentions = answers = 0
    per_item: dict[str, int] = {}
    patterns: list[str] = []
    query = select(Audit.detail).where(Audit.action == "import", Audit.study == study).order_by(Audit.id)
    with read_session(engine) as s:
        details = s.scalars(query).all()
    for detail in details:
        masked = (detail or {}).get("masked") or {}
        mentions += int(masked.get("mentions", 0))
        answers += int(masked.get("answers", 0))
        for key, n in (masked.get("items") or {}).items():
            per_item[key] = per_item.get(key, 0) + int(n)
        patterns += [p for p in masked.get("patterns") or [] if p not in patterns]
    return MaskingReport(mentions, answers, per_item, tuple(patterns))


def _new_item(study_id: int, it: ReviewItem) -> Item:
    return Item(
        study_id=study_id,
        key=it.item,
        answers=[Answer(key=a.id, source=a.source, text=a.text) for a in it.answers],
        **item_content(it),
    )
