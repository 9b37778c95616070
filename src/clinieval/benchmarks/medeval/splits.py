"""MedEval's train/validation/test split: seeded 7:1:2, held at the report level, de-duplicated.

Every item without a split of its own gets one (:func:`assign_splits`). The report is the unit
(a sentence's source report; a stand-alone sentence with every copy of its text; a report with
every copy of its text), and no report's items straddle splits. Reports that share a sentence
held by at most :data:`BOILERPLATE_REPORTS` reports go to one split too; a sentence in more is
boilerplate, ties nothing, and its copies across splits are counted. A split the data brings is
kept; the leakage it has (test and validation items with a copy in train, reports across splits,
test reports sharing a sentence with train) is counted in a :class:`SplitInfo`, which the run
manifest records. Apart from the loaders (:mod:`.tables`, :mod:`.data`) because it reads items,
not files, and the baselines' model cards count leakage with it too (:func:`split_leakage`).
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
from clinieval.benchmarks.medeval.sections import normalize_space, split_sentences
from clinieval.errors import UserError

Item = TypeVar("Item", SentenceItem, ReportItem)

_REPORT_SENTENCE = re.compile(r"(?P<report>.+)-[fi]\d+")
"""A sentence id as :func:`report_sentences` makes it: ``<report id>-f1`` (findings), ``-i2``."""
_ENDS = string.punctuation + string.whitespace
BOILERPLATE_REPORTS = 5
"""A text (:func:`text_key`) in more than this many reports is boilerplate ("No pneumothorax.",
"Heart size is normal."): it does not hold those reports in one split, and its copies across
splits are counted in the :class:`SplitInfo`. A text in this many or fewer still does."""
_GROUP_FLOOR = 50
"""A group of more items than this and than a tenth of the data is cut along the texts its
reports share (:func:`_join`), so that one chain of shared sentences cannot fill a split."""


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
    ones formed, and the leakage left: test and validation items with a copy in train, source
    reports whose sentences lie in more than one split, test and validation reports that share a
    sentence (not boilerplate) with a train report, and the boilerplate let across splits."""

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
    boilerplate: Mapping[str, int] = field(
        default_factory=lambda: {"more_than_reports": BOILERPLATE_REPORTS, "texts": 0, "items": 0}
    )
    """Texts in more than ``more_than_reports`` reports, and the items holding one."""
    shared: Mapping[str, int] = field(
        default_factory=lambda: {"test_reports": 0, "validation_reports": 0, "texts_cut": 0}
    )
    """Test and validation reports (or stand-alone sentences) sharing a text that is not
    boilerplate with a train one, and the texts of that kind let go to keep groups small."""

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
            "boilerplate": dict(self.boilerplate),
            "reports_sharing_text_with_train": {
                "test": self.shared.get("test_reports", 0),
                "validation": self.shared.get("validation_reports", 0),
            },
            "shared_texts_cut": self.shared.get("texts_cut", 0),
        }

    def describe(self) -> str:
        counts = ", ".join(f"{s} {self.counts.get(s, 0)}" for s in SPLITS)
        test, val = self.duplicates.get("test_in_train", 0), self.duplicates.get("validation_in_train", 0)
        line = f"split {self.method} (seed {self.seed}): {counts}; "
        line += f"{test} test and {val} validation items have a copy in train"
        if self.reports_across_splits:
            line += f"; {self.reports_across_splits} reports have sentences in more than one split"
        test, val = self.shared.get("test_reports", 0), self.shared.get("validation_reports", 0)
        if test or val:
            line += (
                f"; {test} test and {val} validation reports share a sentence (not boilerplate) with train"
            )
        if self.boilerplate.get("texts"):
            k, n, items = (self.boilerplate.get(x, 0) for x in ("more_than_reports", "texts", "items"))
            line += (
                f"; {n} boilerplate texts (each in more than {k} reports; {items} items) may be in any split"
            )
        return line


def _rank_key(seed: int, item_id: str) -> str:
    return hashlib.sha256(f"medeval-split:{seed}:{item_id}".encode()).hexdigest()


def _cuts(n: int) -> tuple[int, int]:
    """Where train ends and validation ends among ``n`` ranked items (rounded half up, 7:1:2)."""
    total = sum(SPLIT_SHARES)
    train = (2 * n * SPLIT_SHARES[0] + total) // (2 * total)
    val = (2 * n * (SPLIT_SHARES[0] + SPLIT_SHARES[1]) + total) // (2 * total)
    return train, val


@dataclass(frozen=True)
class _Units:
    """The items as reports: each item's unit (its report, or for an item of no known report its
    text) and sentences, each unit's texts (its items' sentences, :func:`text_key`), its size in
    items, and in how many units each text is (its document frequency)."""

    of_item: list[int]
    item_texts: list[list[str]]
    texts: list[list[str]]
    sizes: list[int]
    spread: Counter[str]


def _unit_name(item: SentenceItem | ReportItem, reports: Mapping[str, str] | None) -> str:
    """A sentence's source report, else its text (every copy of a stand-alone sentence is one
    unit); a report's full text (copies of one report are one unit)."""
    report = report_of(item, reports)
    if report is not None:
        return f"report:{report}"
    key = text_key(_item_text(item))
    return f"text:{key}" if key else f"id:{item.id}"


def _sentences_of(item: SentenceItem | ReportItem) -> list[str]:
    """The texts that tie an item's unit to others: a sentence's own; a report's sentences of
    FINDINGS and IMPRESSION (of its whole text when it has neither)."""
    if isinstance(item, SentenceItem):
        return [text_key(item.sentence)]
    parts = [item.findings, item.impression] if item.findings or item.impression else [item.text]
    return [text_key(s) for part in parts for s in split_sentences(part)]


def _units(items: Sequence[Item], reports: Mapping[str, str] | None) -> _Units:
    index: dict[str, int] = {}
    of_item: list[int] = []
    item_texts: list[list[str]] = []
    texts: list[set[str]] = []
    for item in items:
        unit = index.setdefault(_unit_name(item, reports), len(index))
        if unit == len(texts):
            texts.append(set())
        of_item.append(unit)
        item_texts.append([k for k in _sentences_of(item) if k])
        texts[unit].update(item_texts[-1])
    sizes = Counter(of_item)
    ordered = [sorted(t) for t in texts]
    spread = Counter(k for t in ordered for k in t)
    return _Units(of_item, item_texts, ordered, [sizes[u] for u in range(len(texts))], spread)


def _groups(units: _Units, k: int) -> list[list[int]]:
    """Item indices by group: units joined by the texts they share, except boilerplate (a text in
    more than ``k`` units). Texts are taken rarest first (a sentence two reports share says more
    about copying than one five share), and a join that would make a group of more than a tenth of
    the items (and :data:`_GROUP_FLOOR`) is not made: that text is let go (counted as cut), so a
    chain of shared sentences cannot fill a split, and no unit is ever cut."""
    cap = max(_GROUP_FLOOR, len(units.of_item) // 10)
    parent = list(range(len(units.texts)))
    size = list(units.sizes)

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    holders: dict[str, list[int]] = {}
    for unit, texts in enumerate(units.texts):
        for text in texts:
            if 1 < units.spread[text] <= k:
                holders.setdefault(text, []).append(unit)
    for text in sorted(holders, key=lambda t: (units.spread[t], t)):
        first = holders[text][0]
        for unit in holders[text][1:]:
            a, b = find(first), find(unit)
            if a != b and size[a] + size[b] <= cap:
                parent[max(a, b)], size[min(a, b)] = min(a, b), size[a] + size[b]
    out: dict[int, list[int]] = {}
    for i, unit in enumerate(units.of_item):
        out.setdefault(find(unit), []).append(i)
    return list(out.values())


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


def _boilerplate(units: _Units, k: int) -> dict[str, int]:
    """The boilerplate texts (in more than ``k`` units) and the items that are, or hold, one."""
    common = {t for t, n in units.spread.items() if n > k}
    items = sum(1 for texts in units.item_texts if common.intersection(texts))
    return {"more_than_reports": k, "texts": len(common), "items": items}


def _shared(units: _Units, splits: Sequence[set[Split | None]], k: int) -> dict[str, int]:
    """Test and validation units (reports) that share a text held by at most ``k`` units with
    another unit in train: what grouping by report is there to prevent."""
    in_train: dict[str, set[int]] = {}
    for unit, texts in enumerate(units.texts):
        if "train" in splits[unit]:
            for text in texts:
                if 1 < units.spread[text] <= k:
                    in_train.setdefault(text, set()).add(unit)
    return {
        f"{split}_reports": sum(
            1
            for u, texts in enumerate(units.texts)
            if split in splits[u] and any(in_train.get(t, set()) - {u} for t in texts)
        )
        for split in ("test", "validation")
    }


def _by_domain(items: Sequence[Item], groups: Sequence[list[int]]) -> list[list[list[int]]]:
    """The groups by domain (a group's most common one; ties to the first name), domains in name
    order: each domain is split 7:1:2 on its own. Unstratified, grouping by report could put every
    chest report of a small corpus in train, leaving the chest-only codes task no test item."""
    out: dict[str, list[list[int]]] = {}
    for group in groups:
        counts = Counter(items[i].domain for i in group)
        domain = max(counts, key=lambda d: (counts[d], [-ord(c) for c in d]))
        out.setdefault(domain, []).append(group)
    return [out[d] for d in sorted(out)]


def assign_splits(
    items: Sequence[Item],
    seed: int,
    *,
    reports: Mapping[str, str] | None = None,
    boilerplate: int = BOILERPLATE_REPORTS,
) -> tuple[list[Item], SplitInfo]:
    """``items`` (same order) each with a split, and how they were split.

    An item keeps its source's split (the user's split is theirs; its leakage is counted in the
    :class:`SplitInfo`). The others are split by report, the unit no split cuts through: a
    sentence's source report (:func:`report_of`; ``reports`` maps sentence ids to a ``report_id``
    column) or, for a sentence of no known report, every copy of its text; a report with every
    copy of its text. Units that share a sentence (:func:`text_key`) held by at most
    ``boilerplate`` units are joined, transitively, into a group that goes to one split; a sentence
    in more is boilerplate and joins nothing (its copies across splits are counted). A group past
    a tenth of the items is cut along its most widely shared sentences (:func:`_join`). A group
    that holds an item with a split of its own follows it (the most common one). The other groups
    fill 7:1:2 as closely as their sizes allow (:func:`_place`): the result depends on the ids,
    texts and seed only, not on the input order, and another seed gives another split. Ids must
    be unique.
    """
    dup = next((k for k, n in Counter(i.id for i in items).items() if n > 1), None)
    if dup is not None:
        raise UserError(f"id {dup!r} appears twice; a split needs unique ids")
    if isinstance(boilerplate, bool) or not isinstance(boilerplate, int) or boilerplate < 1:
        raise UserError(
            f"the boilerplate threshold must be a whole number of reports, at least 1, not {boilerplate!r}"
        )
    units = _units(items, reports)
    given: dict[int, Split] = {}
    free: list[list[int]] = []
    grouped = _groups(units, boilerplate)
    for group in grouped:
        own = Counter(s for i in group if (s := items[i].split) is not None)
        if not own:
            free.append(group)
            continue
        follow = max(SPLITS, key=lambda s: (own[s], -SPLITS.index(s)))
        given.update({i: follow for i in group if items[i].split is None})
    for domain_groups in _by_domain(items, free):
        sizes = [(len(g), min(items[i].id for i in g)) for g in domain_groups]
        for group, split in zip(domain_groups, _place(sizes, seed), strict=True):
            given.update(dict.fromkeys(group, split))
    out = [item if item.split is not None else replace(item, split=given[n]) for n, item in enumerate(items)]
    counts = Counter(i.split for i in out if i.split is not None)
    todo = sum(1 for i in items if i.split is None)
    unit_splits: list[set[Split | None]] = [set() for _ in units.texts]
    for n, unit in enumerate(units.of_item):
        unit_splits[unit].add(out[n].split)
    info = SplitInfo(
        seed,
        {s: counts.get(s, 0) for s in SPLITS},
        len(items) - todo,
        todo,
        groups=len(free),
        duplicates=leakage(out),
        reports_across_splits=_reports_across(out, reports),
        boilerplate=_boilerplate(units, boilerplate),
        shared={
            **_shared(units, unit_splits, boilerplate),
            "texts_cut": _texts_cut(units, grouped, boilerplate),
        },
    )
    return out, info


def _texts_cut(units: _Units, grouped: Sequence[Sequence[int]], k: int) -> int:
    """Texts (in 2 to ``k`` units) whose units ended in more than one group."""
    group_of = {units.of_item[i]: g for g, items in enumerate(grouped) for i in items}
    seen: dict[str, set[int]] = {}
    for unit, texts in enumerate(units.texts):
        for text in texts:
            if 1 < units.spread[text] <= k:
                seen.setdefault(text, set()).add(group_of[unit])
    return sum(1 for groups in seen.values() if len(groups) > 1)
