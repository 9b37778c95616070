"""MedEval's train/validation/test split: seeded 7:1:2, grouped by source report, de-duplicated.

Every item without a split of its own gets one (:func:`assign_splits`): the sentences of one source
report and every copy of one text (:func:`text_key`) form one group, and a group goes to one split,
so no text has a copy in another split and no report's sentences straddle train and test. A split
the data brings is kept; the leakage it has (test and validation items with a copy in train,
reports across splits) is counted in a :class:`SplitInfo`, which the run manifest records. Apart
from the loaders (:mod:`.tables`, :mod:`.data`) because it reads items, not files, and the
baselines' model cards count leakage with it too (:func:`split_leakage`).
"""

from __future__ import annotations

import hashlib
import re
import string
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any, TypeVar

from clinieval.benchmarks.medeval.items import SPLIT_SHARES, SPLITS, ReportItem, SentenceItem, Split
from clinieval.benchmarks.medeval.sections import normalize_space
from clinieval.errors import UserError

Item = TypeVar("Item", SentenceItem, ReportItem)

_REPORT_SENTENCE = re.compile(r"(?P<report>.+)-[fi]\d+")
"""A sentence id as :func:`report_sentences` makes it: ``<report id>-f1`` (findings), ``-i2``."""
_ENDS = string.punctuation + string.whitespace
_BOILERPLATE_FLOOR = 50
"""A group of more items than this and than a tenth of the data is kept whole only by its text
copies, not by its reports (:func:`assign_splits`)."""


def text_key(text: str) -> str:
    """``text`` as duplicates are found: lower case, every run of whitespace one space, punctuation
    stripped at both ends ("No effusion." and "no  effusion" are one sentence)."""
    return normalize_space(text).lower().strip(_ENDS)


def _item_text(item: SentenceItem | ReportItem) -> str:
    return item.sentence if isinstance(item, SentenceItem) else item.text


def report_of(item: SentenceItem | ReportItem, reports: Mapping[str, str] | None = None) -> str | None:
    """The source report of a sentence: its ``report_id`` (or ``report``) cell as ``reports`` maps
    it, else the report prefix of an id :func:`report_sentences` made (``s50414267-f2``); None for
    a report, or a sentence of no known report."""
    if not isinstance(item, SentenceItem):
        return None
    given = (reports or {}).get(item.id)
    if given:
        return given
    m = _REPORT_SENTENCE.fullmatch(item.id)
    return m["report"] if m else None


def leakage(items: Sequence[SentenceItem | ReportItem]) -> dict[str, int]:
    """How many test and validation items have a copy (:func:`text_key`) among the train items."""
    train = {text_key(_item_text(i)) for i in items if i.split == "train"} - {""}
    return {
        f"{split}_in_train": sum(1 for i in items if i.split == split and text_key(_item_text(i)) in train)
        for split in ("test", "validation")
    }


def split_leakage(
    train: Sequence[SentenceItem | ReportItem], test: Sequence[SentenceItem | ReportItem]
) -> int:
    """How many of ``test`` have a copy (:func:`text_key`) in ``train``: what a model card records
    of the very items a baseline was fitted and tested on."""
    seen = {text_key(_item_text(i)) for i in train} - {""}
    return sum(1 for i in test if text_key(_item_text(i)) in seen)


@dataclass(frozen=True)
class SplitInfo:
    """How a set was split, for the run manifest: the seed, the shares, the counts, how many items
    kept their source's split versus how many were assigned here, how many groups the assigned
    ones formed, and the leakage left: test and validation items with a copy in train, and source
    reports whose sentences lie in more than one split."""

    seed: int
    counts: Mapping[Split, int]
    from_data: int
    assigned: int
    shares: tuple[int, int, int] = SPLIT_SHARES
    groups: int = 0
    duplicates: Mapping[str, int] = field(
        default_factory=lambda: {"test_in_train": 0, "validation_in_train": 0}
    )
    reports_across_splits: int = 0

    @property
    def method(self) -> str:
        if not self.assigned:
            return "from the data"
        grouped = "grouped by report and de-duplicated, seeded 7:1:2"
        return grouped if not self.from_data else f"from the data, the rest {grouped}"

    def to_json(self) -> dict[str, Any]:
        return {
            "method": self.method,
            "seed": self.seed,
            "shares": dict(zip(SPLITS, self.shares, strict=True)),
            "counts": {s: self.counts.get(s, 0) for s in SPLITS},
            "from_data": self.from_data,
            "assigned": self.assigned,
            "groups": self.groups,
            "duplicates_across_splits": dict(self.duplicates),
            "reports_across_splits": self.reports_across_splits,
        }

    def describe(self) -> str:
        counts = ", ".join(f"{s} {self.counts.get(s, 0)}" for s in SPLITS)
        test, val = self.duplicates.get("test_in_train", 0), self.duplicates.get("validation_in_train", 0)
        line = f"split {self.method} (seed {self.seed}): {counts}; "
        line += f"{test} test and {val} validation items have a copy in train"
        if self.reports_across_splits:
            line += f"; {self.reports_across_splits} reports have sentences in more than one split"
        return line


def _rank_key(seed: int, item_id: str) -> str:
    return hashlib.sha256(f"medeval-split:{seed}:{item_id}".encode()).hexdigest()


def _cuts(n: int) -> tuple[int, int]:
    """Where train ends and validation ends among ``n`` ranked items (rounded half up, 7:1:2)."""
    total = sum(SPLIT_SHARES)
    train = (2 * n * SPLIT_SHARES[0] + total) // (2 * total)
    val = (2 * n * (SPLIT_SHARES[0] + SPLIT_SHARES[1]) + total) // (2 * total)
    return train, val


def _components(keys: Sequence[Sequence[str]]) -> list[list[int]]:
    """The indices of ``keys`` joined when they share a key (union-find), each list ascending."""
    parent = list(range(len(keys)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first: dict[str, int] = {}
    for i, own in enumerate(keys):
        for key in own:
            a, b = find(first.setdefault(key, i)), find(i)
            if a != b:
                parent[max(a, b)] = min(a, b)
    out: dict[int, list[int]] = {}
    for i in range(len(keys)):
        out.setdefault(find(i), []).append(i)
    return list(out.values())


def _groups(items: Sequence[Item], reports: Mapping[str, str] | None) -> list[list[int]]:
    """Items joined by source report and by every copy of their text; a group grown past a tenth
    of the items (and :data:`_BOILERPLATE_FLOOR`) through sentences that many reports share is cut
    back to its text copies, so that boilerplate cannot pull most of the data into one split."""
    texts: list[list[str]] = []
    joined: list[list[str]] = []
    for item in items:
        key, report = text_key(_item_text(item)), report_of(item, reports)
        texts.append([f"text:{key}"] if key else [])
        joined.append(texts[-1] + ([f"report:{report}"] if report is not None else []))
    cap = max(_BOILERPLATE_FLOOR, len(items) // 10)
    out: list[list[int]] = []
    for group in _components(joined):
        if len(group) <= cap:
            out.append(group)
            continue
        out += [[group[j] for j in sub] for sub in _components([texts[i] for i in group])]
    return out


def _draw(seed: int, key: str) -> float:
    """A number in [0, 1) fixed by the seed and a group's first id."""
    return int(_rank_key(seed, key)[:13], 16) / 16**13


def _place(sizes: Sequence[tuple[int, str]], seed: int) -> list[Split]:
    """A split for each group ``(size, first id)``, filling 7:1:2 of their items: largest groups
    first (then in seeded hash order), each drawn among the splits it still fits in, weighted by
    the room left there (into the emptiest split when it fits nowhere)."""
    train, val = _cuts(sum(n for n, _ in sizes))
    room = {"train": train, "validation": val - train, "test": sum(n for n, _ in sizes) - val}
    order = sorted(range(len(sizes)), key=lambda g: (-sizes[g][0], _rank_key(seed, sizes[g][1]), sizes[g][1]))
    out: list[Split] = ["train"] * len(sizes)
    for g in order:
        size, key = sizes[g]
        fits = [s for s in SPLITS if room[s] >= size]
        if fits:
            point = _draw(seed, key) * sum(room[s] for s in fits)
            chosen = fits[-1]
            for s in fits:
                if point < room[s]:
                    chosen = s
                    break
                point -= room[s]
        else:
            chosen = max(SPLITS, key=lambda s: room[s])
        room[chosen] -= size
        out[g] = chosen
    return out


def _reports_across(items: Sequence[Item], reports: Mapping[str, str] | None) -> int:
    seen: dict[str, set[Split | None]] = {}
    for item in items:
        report = report_of(item, reports)
        if report is not None:
            seen.setdefault(report, set()).add(item.split)
    return sum(1 for splits in seen.values() if len(splits) > 1)


def assign_splits(
    items: Sequence[Item], seed: int, *, reports: Mapping[str, str] | None = None
) -> tuple[list[Item], SplitInfo]:
    """``items`` (same order) each with a split, and how they were split.

    An item keeps its source's split (the user's split is theirs; its leakage is counted in the
    :class:`SplitInfo`). The others are split by group: the sentences of one source report
    (:func:`report_of`; ``reports`` maps sentence ids to a ``report_id`` column) and every copy of
    one text (:func:`text_key`) are one group, joined transitively, and a group goes to one split.
    A group that holds an item with a split of its own follows it (the most common one). The
    other groups fill 7:1:2 as closely as their sizes allow (:func:`_place`): the result depends
    on the ids, texts and seed only, not on the input order, and another seed gives another split.
    Ids must be unique.
    """
    dup = next((k for k, n in Counter(i.id for i in items).items() if n > 1), None)
    if dup is not None:
        raise UserError(f"id {dup!r} appears twice; a split needs unique ids")
    given: dict[int, Split] = {}
    free: list[list[int]] = []
    for group in _groups(items, reports):
        own = Counter(s for i in group if (s := items[i].split) is not None)
        if not own:
            free.append(group)
            continue
        follow = max(SPLITS, key=lambda s: (own[s], -SPLITS.index(s)))
        given.update({i: follow for i in group if items[i].split is None})
    sizes = [(len(g), min(items[i].id for i in g)) for g in free]
    for group, split in zip(free, _place(sizes, seed), strict=True):
        given.update(dict.fromkeys(group, split))
    out = [item if item.split is not None else replace(item, split=given[n]) for n, item in enumerate(items)]
    counts = Counter(i.split for i in out if i.split is not None)
    todo = sum(1 for i in items if i.split is None)
    info = SplitInfo(
        seed,
        {s: counts.get(s, 0) for s in SPLITS},
        len(items) - todo,
        todo,
        groups=len(free),
        duplicates=leakage(out),
        reports_across_splits=_reports_across(out, reports),
    )
    return out, info
