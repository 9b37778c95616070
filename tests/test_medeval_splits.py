"""MedEval's train/validation/test split without leakage (issue 24): sentences of one source report
share a split, every copy of a sentence (after normalising case, spacing and end punctuation) falls
in one split, a split the data brings is kept but its leakage counted, and the synthetic corpus
(synthetic — not MedEval's data) is made of distinct sentences."""

from __future__ import annotations

import json
import random
import re
from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from clinieval.benchmarks.medeval.baselines.train import train_baseline
from clinieval.benchmarks.medeval.data import load_folder
from clinieval.benchmarks.medeval.items import CHEST, SPLITS, ReportItem, SentenceItem
from clinieval.benchmarks.medeval.splits import assign_splits
from clinieval.benchmarks.medeval.synth.corpus import build_corpus
from clinieval.benchmarks.medeval.synth.writer import write_synthetic


def _key(text: str) -> str:
    return re.sub(r"\s+", " ", text.lower()).strip(" .,;:!?")


def _splits_per_text(items: Sequence[SentenceItem]) -> dict[str, set[str | None]]:
    out: dict[str, set[str | None]] = defaultdict(set)
    for item in items:
        out[_key(item.sentence)].add(item.split)
    return out


def _report(item: SentenceItem) -> str:
    return item.id.rsplit("-", 1)[0]


def _spread_beyond_boilerplate(items: Sequence[SentenceItem], k: int = 5) -> dict[str, set[str | None]]:
    """Texts in more than one split that are not boilerplate (in at most ``k`` reports)."""
    reports: dict[str, set[str]] = defaultdict(set)
    for item in items:
        reports[_key(item.sentence)].add(_report(item))
    return {t: s for t, s in _splits_per_text(items).items() if len(s) > 1 and len(reports[t]) <= k}


def _report_corpus(reports: int, seed: int = 0) -> list[SentenceItem]:
    """Sentences of ``reports`` reports (ids ``<report>-f<n>``, as report_sentences makes them), 1 to
    5 each; about one in six is a common sentence shared with other reports, written with its case,
    spacing or final period changed, and now and then a report repeats one of its own sentences."""
    rng = random.Random(seed)
    common = [f"Common finding number {n}." for n in range(reports // 3)]
    out: list[SentenceItem] = []
    for r in range(reports):
        texts: list[str] = []
        for n in range(rng.randint(1, 5)):
            if rng.random() < 1 / 6:
                text = rng.choice(common)
                text = rng.choice([text, text.upper(), text.rstrip("."), "  " + text.replace(" ", "   ")])
            elif texts and rng.random() < 0.05:
                text = texts[-1]
            else:
                text = f"Report {r} says thing {n}."
            texts.append(text)
        out += [SentenceItem(f"rep{r}-f{n}", t, CHEST) for n, t in enumerate(texts, 1)]
    return out


def test_no_sentence_has_a_copy_in_another_split() -> None:
    items = _report_corpus(400)
    out, info = assign_splits(items, seed=0)
    spread = {k: s for k, s in _splits_per_text(out).items() if len(s) > 1}
    assert not spread, list(spread.items())[:5]
    assert info.to_json()["boilerplate"] == {"more_than_reports": 5, "texts": 0, "items": 0}


def test_sentences_of_one_report_share_a_split() -> None:
    out, _ = assign_splits(_report_corpus(400), seed=0)
    per_report: dict[str, set[str | None]] = defaultdict(set)
    for item in out:
        per_report[_report(item)].add(item.split)
    assert all(len(s) == 1 for s in per_report.values())


def test_a_report_id_column_groups_the_sentences(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    lines = ["id,sentence,domain,report_id"]
    lines += [f"s{n},Sentence number {n}.,chest x-ray,study{n % 50}" for n in range(300)]
    (folder / "sentences.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    data = load_folder(folder, seed=1)
    per_report: dict[str, set[str | None]] = defaultdict(set)
    for item in data.sentences:
        per_report[f"study{int(item.id[1:]) % 50}"].add(item.split)
    assert all(len(s) == 1 for s in per_report.values())
    assert data.split_info()["sentences"]["groups"] == 50


def test_proportions_stay_near_7_1_2_on_a_large_corpus() -> None:
    items = _report_corpus(3000, seed=3)
    out, info = assign_splits(items, seed=0)
    shares = {s: info.counts[s] / len(items) for s in SPLITS}
    assert shares["train"] == pytest.approx(0.7, abs=0.015)
    assert shares["validation"] == pytest.approx(0.1, abs=0.015)
    assert shares["test"] == pytest.approx(0.2, abs=0.015)
    assert not _spread_beyond_boilerplate(out)  # only boilerplate crosses splits ...
    data = info.to_json()
    assert data["boilerplate"]["texts"] == 2 and data["shared_texts_cut"] == 0
    copies = data["duplicates_across_splits"]
    assert 0 < copies["test_in_train"] + copies["validation_in_train"] <= data["boilerplate"]["items"]
    assert data["reports_across_splits"] == 0  # ... never a report


def test_the_split_is_stable_under_reordering_and_seeded() -> None:
    items = _report_corpus(500, seed=4)
    out, _ = assign_splits(items, seed=2)
    shuffled = items[:]
    random.Random(9).shuffle(shuffled)
    again, _ = assign_splits(shuffled, seed=2)
    assert {i.id: i.split for i in again} == {i.id: i.split for i in out}
    other, _ = assign_splits(items, seed=3)
    assert {i.id: i.split for i in other} != {i.id: i.split for i in out}
    assert not _spread_beyond_boilerplate(again)


def test_a_split_column_is_kept_and_its_leakage_counted() -> None:
    given: list[tuple[str, str, str | None]] = [
        ("a", "No pleural effusion.", "train"),
        ("b", "no  pleural effusion", "test"),
        ("c", "NO PLEURAL EFFUSION!", "validation"),
        ("d", "Small left effusion.", "test"),
        ("e", "Heart size is normal.", "train"),
        ("f", "Heart size is normal", "test"),
    ]
    items = [SentenceItem(i, t, CHEST, split=s) for i, t, s in given]  # type: ignore[arg-type]
    out, info = assign_splits(items, seed=0)
    assert [i.split for i in out] == [s for _, _, s in given]  # the user's split is theirs
    data = info.to_json()
    assert data["method"] == "from the data"
    assert data["duplicates_across_splits"] == {"test_in_train": 2, "validation_in_train": 1}
    assert "2 test and 1 validation items have a copy in train" in info.describe()


def test_items_without_a_split_follow_their_copies_that_have_one() -> None:
    items = [SentenceItem(f"g{n}", f"Given sentence {n}.", CHEST, split=SPLITS[n % 3]) for n in range(30)]
    items += [SentenceItem(f"n{n}", f"given sentence {n}", CHEST) for n in range(30)]
    out, info = assign_splits(items, seed=0)
    by_id = {i.id: i.split for i in out}
    assert all(by_id[f"n{n}"] == SPLITS[n % 3] for n in range(30))
    assert info.to_json()["duplicates_across_splits"] == {"test_in_train": 0, "validation_in_train": 0}


def test_reports_are_de_duplicated_on_their_text() -> None:
    reports = [ReportItem(f"r{n}", f"FINDINGS: Text {n % 40}.\nIMPRESSION: None.", CHEST) for n in range(200)]
    out, info = assign_splits(reports, seed=0)
    per_text: dict[str, set[str | None]] = defaultdict(set)
    for r in out:
        per_text[_key(r.text)].add(r.split)
    assert all(len(s) == 1 for s in per_text.values())
    assert info.to_json()["groups"] == 40


def test_the_counts_reach_the_split_info_the_manifest_and_describe(tmp_path: Path) -> None:
    folder = tmp_path / "data"
    folder.mkdir()
    rows = [f"r{n}-f1,Sentence {n % 30}.,chest x-ray," for n in range(90)]
    rows += ["x1,Leaked sentence.,chest x-ray,train", "x2,leaked sentence,chest x-ray,test"]
    (folder / "sentences.csv").write_text(
        "id,sentence,domain,split\n" + "\n".join(rows) + "\n", encoding="utf-8"
    )
    data = load_folder(folder, seed=0)
    info = data.split_info()["sentences"]
    assert info["method"] == "from the data, the rest grouped by report and de-duplicated, seeded 7:1:2"
    assert info["groups"] == 30
    assert info["duplicates_across_splits"] == {"test_in_train": 1, "validation_in_train": 0}
    assert "1 test and 0 validation items have a copy in train" in data.describe()
    json.dumps(data.split_info())  # it goes into the run manifest as it is


def test_the_baseline_card_counts_its_own_test_items_copied_in_train(tmp_path: Path) -> None:
    items = []
    for n in range(40):
        abnormal = n % 2 == 1
        text = ("Opacity in view" if abnormal else "Clear lungs in view") + f" {n}."
        items.append(SentenceItem(f"s{n}", text, CHEST, abnormal=abnormal, ambiguous=False, split="train"))
    for n in range(10):
        text = items[n].sentence if n < 3 else f"Fresh test sentence {n}."
        items.append(replace(items[n + 10], id=f"t{n}", sentence=text, split="test"))
    _, info = assign_splits(items, seed=0)
    trained = train_baseline(
        "tfidf", "abnormality", items, tmp_path, split_info={"sentences": info.to_json()}
    )
    card = json.loads((trained.model_dir / "card.json").read_text())
    assert card["split"]["test_in_train"] == 3
    assert card["split"]["sentences"]["duplicates_across_splits"]["test_in_train"] == 3


# ------------------------------------------------------------- the synthetic corpus


def _repeated_share(texts: Sequence[str]) -> float:
    counts = Counter(_key(t) for t in texts)
    return sum(n for n in counts.values() if n > 1) / max(1, len(texts))


@pytest.mark.parametrize(("sentences", "reports"), [(600, 300), (2000, 1000)], ids=["demo", "default"])
def test_the_synthetic_corpus_is_made_of_distinct_sentences(
    tmp_path: Path, sentences: int, reports: int
) -> None:
    corpus = build_corpus(0, sentences, reports)
    assert _repeated_share([s.sentence for s in corpus.sentences]) <= 0.01
    assert _repeated_share([r.text for r in corpus.reports]) <= 0.01
    write_synthetic(tmp_path / "synth", seed=0, sentences=sentences, reports=reports)
    data = load_folder(tmp_path / "synth", seed=0)
    for level in ("sentences", "reports"):
        info = data.split_info()[level]
        assert info["duplicates_across_splits"] == {"test_in_train": 0, "validation_in_train": 0}, level
    train = {_key(s.sentence) for s in data.sentences if s.split == "train"}
    test = [s for s in data.sentences if s.split == "test"]
    assert sum(_key(s.sentence) in train for s in test) <= 0.01 * len(test)
