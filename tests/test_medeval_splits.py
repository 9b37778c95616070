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
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from clinieval.benchmarks.medeval.baselines.train import train_baseline
from clinieval.benchmarks.medeval.data import load_folder
from clinieval.benchmarks.medeval.items import CHEST, SPLITS, ReportItem, SentenceItem
from clinieval.benchmarks.medeval.splits import BOILERPLATE_REPORTS, assign_splits
from clinieval.benchmarks.medeval.synth.corpus import build_corpus
from clinieval.benchmarks.medeval.synth.writer import write_synthetic
from clinieval.errors import UserError


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


# ------------------------------------------------------- reports, the unit of a split


def _per_report(items: Sequence[SentenceItem], reports: dict[str, str]) -> dict[str, set[str | None]]:
    out: dict[str, set[str | None]] = defaultdict(set)
    for item in items:
        out[reports[item.id]].add(item.split)
    return out


def test_boilerplate_does_not_pull_reports_across_splits(tmp_path: Path) -> None:
    """300 reports, one sentence in 200 of them: it used to join those 200 into one group, too big
    to keep, so the group was cut back to text copies and 226 reports straddled splits."""
    rng = random.Random(5)
    rows = ["id,sentence,domain,report_id"]
    for r in range(300):
        texts = [f"Report {r} finding {n}." for n in range(rng.randint(2, 4))]
        if r % 3:
            texts.insert(rng.randrange(len(texts) + 1), "The heart size is normal.")
        rows += [f"s{r}-{n},{t},chest x-ray,study{r}" for n, t in enumerate(texts)]
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / "sentences.csv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    data = load_folder(folder, seed=0)
    spread = {r: s for r, s in _per_report(data.sentences, dict(data.sentence_reports)).items() if len(s) > 1}
    assert not spread, f"{len(spread)} of 300 reports have sentences in more than one split"
    info = data.split_info()["sentences"]
    assert info["reports_across_splits"] == 0
    assert info["boilerplate"] == {"more_than_reports": BOILERPLATE_REPORTS, "texts": 1, "items": 200}
    assert (
        "1 boilerplate texts (each in more than 5 reports; 200 items) may be in any split" in data.describe()
    )
    copies = info["duplicates_across_splits"]
    in_train = sum(1 for s in data.sentences if s.split == "train" and s.sentence.startswith("The heart"))
    assert 0 < in_train < 200 and copies["test_in_train"] > 0  # the boilerplate is in every split, counted
    shares = {s: n / len(data.sentences) for s, n in info["counts"].items()}
    assert shares == pytest.approx({"train": 0.7, "validation": 0.1, "test": 0.2}, abs=0.02)


def _followed_reports(pairs: int) -> list[ReportItem]:
    """Reports in pairs, the second a follow-up that copies a sentence of the first (real reports
    carry sentences forward), and boilerplate in all of them."""
    out: list[ReportItem] = []
    for n in range(pairs):
        nodule = f"Stable {n % 9 + 3} mm nodule in the right upper lobe, series {n}."
        for visit, other in enumerate((f"New opacity number {n}.", f"Resolved opacity number {n}.")):
            findings = f"{nodule} {other} No pneumothorax."
            impression = f"Nodule, follow-up {n}." if visit else "No acute cardiopulmonary process."
            text = f"FINDINGS: {findings}\nIMPRESSION: {impression}"
            out.append(ReportItem(f"r{n}-{visit}", text, CHEST, findings=findings, impression=impression))
    return out


def test_reports_sharing_a_sentence_share_a_split() -> None:
    out, info = assign_splits(_followed_reports(150), seed=0)
    by_id = {r.id: r.split for r in out}
    straddling = [n for n in range(150) if by_id[f"r{n}-0"] != by_id[f"r{n}-1"]]
    assert not straddling, f"{len(straddling)} of 150 follow-ups are in another split than their report"
    data = info.to_json()
    assert data["reports_sharing_text_with_train"] == {"test": 0, "validation": 0}
    assert data["groups"] == 150
    assert data["boilerplate"] == {
        "more_than_reports": 5,
        "texts": 2,
        "items": 300,
    }  # no pneumothorax, the clean line


def test_a_chain_of_shared_sentences_is_cut_between_reports_and_counted() -> None:
    """Report n shares a sentence with report n + 1, 400 reports long: one group would be all the
    data, so the chain is cut (into groups of at most a tenth), never a report."""
    items: list[SentenceItem] = []
    reports: dict[str, str] = {}
    for r in range(400):
        for n, text in enumerate((f"Link {r}.", f"Own {r}.", f"Link {r + 1}.")):
            items.append(SentenceItem(f"x{r}.{n}", text, CHEST))
            reports[f"x{r}.{n}"] = f"study{r}"
    out, info = assign_splits(items, seed=1, reports=reports)
    assert all(len(s) == 1 for s in _per_report(out, reports).values())
    assert max(info.counts.values()) < len(items)
    data = info.to_json()
    assert data["groups"] >= 10 and data["shared_texts_cut"] >= 9
    crossing = sum(1 for s in _splits_per_text(out).values() if len(s) > 1)
    assert 0 < crossing <= data["shared_texts_cut"]
    assert {s: n / len(items) for s, n in info.counts.items()} == pytest.approx(
        {"train": 0.7, "validation": 0.1, "test": 0.2}, abs=0.06
    )


def test_the_boilerplate_threshold_is_an_option() -> None:
    items = [SentenceItem(f"r{r}-f1", "No effusion.", CHEST) for r in range(8)]
    items += [SentenceItem(f"r{r}-f2", f"Own {r}.", CHEST) for r in range(8)]
    _, strict = assign_splits(items, seed=0, boilerplate=3)
    _, loose = assign_splits(items, seed=0, boilerplate=10)
    assert strict.to_json()["boilerplate"]["texts"] == 1 and strict.groups == 8
    assert loose.to_json()["boilerplate"]["texts"] == 0 and loose.groups == 1
    with pytest.raises(UserError, match="at least 1"):
        assign_splits(items, seed=0, boilerplate=0)


@st.composite
def _structures(draw: st.DrawFn) -> tuple[list[SentenceItem], dict[str, str]]:
    """Reports of 1 to 6 sentences, each sentence the report's own, one of a small pool shared by
    a few reports, or one of a few boilerplate lines; reports named by a ``report_id`` mapping or
    by the id prefix ``report_sentences`` gives; now and then a stand-alone sentence."""
    count = draw(st.integers(120, 400))
    pool = draw(st.integers(1, 200))
    shares = draw(st.tuples(st.floats(0, 0.5), st.floats(0, 0.4)))
    rng = random.Random(draw(st.integers(0, 2**32)))
    by_column = draw(st.booleans())
    items: list[SentenceItem] = []
    reports: dict[str, str] = {}
    for r in range(count):
        if rng.random() < 0.05:
            items.append(SentenceItem(f"alone{r}", f"Shared {rng.randrange(pool)}.", CHEST))
            continue
        for n in range(rng.randint(1, 6)):
            draw_ = rng.random()
            if draw_ < shares[0]:
                text = f"Shared {rng.randrange(pool)}."
            elif draw_ < shares[0] + shares[1]:
                text = f"Boilerplate {rng.randrange(3)}."
            else:
                text = f"Report {r} own {n}."
            sid = f"s{r}.{n}" if by_column else f"r{r}-f{n}"
            items.append(SentenceItem(sid, text, CHEST))
            reports[sid] = f"study{r}"
    return items, (reports if by_column else {})


@settings(
    max_examples=40,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(_structures(), st.integers(0, 3))
def test_no_report_straddles_splits_and_the_shares_hold(
    structure: tuple[list[SentenceItem], dict[str, str]], seed: int
) -> None:
    items, column = structure
    out, info = assign_splits(items, seed, reports=column)
    reports = {i.id: column.get(i.id) or (_report(i) if i.id.startswith("r") else i.id) for i in items}
    assert all(len(s) == 1 for s in _per_report(out, reports).values())
    assert info.reports_across_splits == 0
    data = info.to_json()
    assert data["reports_sharing_text_with_train"]["test"] <= data["shared_texts_cut"] * BOILERPLATE_REPORTS
    if not data["shared_texts_cut"]:
        assert data["reports_sharing_text_with_train"] == {"test": 0, "validation": 0}
    n = len(items)
    for split, share in zip(SPLITS, (0.7, 0.1, 0.2), strict=True):
        assert abs(info.counts[split] - share * n) <= max(0.03 * n, 3), (split, dict(info.counts), n)


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


def test_every_domain_is_split_on_its_own(tmp_path: Path) -> None:
    """Grouped by report but not by domain, the suite demo's 30 reports put all 12 chest reports in
    train, and the chest-only codes task had no test item (issue 36's report-level split)."""
    from collections import Counter

    from clinieval.benchmarks.medeval.data import load_folder
    from clinieval.benchmarks.medeval.synth.writer import write_synthetic

    write_synthetic(tmp_path / "d", seed=0, sentences=60, reports=30, overwrite=True)
    data = load_folder(tmp_path / "d", seed=0)
    reports = Counter((r.domain, r.split) for r in data.items_for("summarization"))
    sizes = Counter(r.domain for r in data.items_for("summarization"))
    assert sizes[CHEST] >= 10
    for domain in (d for d, n in sizes.items() if n >= 10):  # smaller ones may be one group
        assert reports[(domain, "test")] >= 1, (domain, reports)
    assert any(r.split == "test" for r in data.items_for("codes"))
