"""BM25 retrieval: bm25s (Robertson) against rank_bm25's BM25Okapi, persistence, time order."""

from __future__ import annotations

import json
import random
from collections import Counter
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
from rank_bm25 import BM25Okapi

from clinieval.ehr import synth
from clinieval.ehr.retrieval import (
    BM25Index,
    Document,
    in_time_order,
    patient_document,
    snippet_documents,
    snippets,
    tokenize,
    visit_documents,
)
from clinieval.ehr.timeline import Event, Note, Person, Timeline, Visit
from clinieval.errors import UserError
from tests.conftest import need_shared

K1 = 1.5


def note_corpus(n: int = 25, seed: int = 11) -> list[Document]:
    """Synthetic patients' notes cut into 80-word snippets."""
    docs: list[Document] = []
    for tl in synth.generate(n, seed):
        for note in tl.notes:
            doc = Document(f"{tl.person.person_id}/{note.note_id}", note.text, note.time)
            docs.extend(snippet_documents(doc, size=80))
    return docs


def medalign_corpus() -> list[Document]:
    xml = (need_shared("medalign") / "sample-ehr-clean.xml").read_text(encoding="utf-8")
    return snippet_documents(Document("sample", xml), size=40, overlap=10)


def queries(docs: list[Document], stopwords: bool, count: int = 12) -> list[str]:
    """Queries of 1 to 4 terms, each in at least 2 and at most a quarter of the documents."""
    df: Counter[str] = Counter()
    for d in docs:
        df.update(set(tokenize(d.text, stopwords=stopwords)))
    pool = sorted(t for t, c in df.items() if 2 <= c <= len(docs) // 4)
    rng = random.Random(5)
    out = [" ".join(rng.sample(pool, rng.randint(1, 4))) for _ in range(count)]
    out.append(f"{pool[0]} {pool[0]} {pool[1]}")  # a repeated term counts twice in both
    return out


def check_same_ranking(docs: list[Document], stopwords: bool, k: int = 10) -> None:
    index = BM25Index.build(docs, k1=K1, b=0.75, stopwords=stopwords)
    ref = BM25Okapi([tokenize(d.text, stopwords=stopwords) for d in docs], k1=K1, b=0.75)
    pos = {d.doc_id: i for i, d in enumerate(docs)}
    for q in queries(docs, stopwords):
        want = ref.get_scores(tokenize(q, stopwords=stopwords))
        got = index.scores(q)
        # bm25s Robertson = BM25Okapi / (k1 + 1), for every document
        np.testing.assert_allclose(got * (K1 + 1), want, rtol=1e-6, atol=1e-12)
        hits = index.search(q, k)
        assert hits, q
        ids = [pos[i] for i, _ in hits]
        scores = np.array([s for _, s in hits])
        # the top-k is a top-k of the reference too, in the same order
        ref_top = np.sort(want)[::-1][: len(hits)]
        np.testing.assert_allclose(want[ids], ref_top, rtol=1e-6)
        assert all(np.diff(want[ids]) <= 1e-9 * max(want.max(), 1.0)), q
        # and score differences agree up to the constant factor
        np.testing.assert_allclose(np.diff(scores) * (K1 + 1), np.diff(want[ids]), rtol=1e-6, atol=1e-9)


@pytest.mark.parametrize("stopwords", [False, True])
def test_robertson_ranks_like_bm25okapi_on_synthetic_notes(stopwords: bool) -> None:
    check_same_ranking(note_corpus(), stopwords)


def test_robertson_ranks_like_bm25okapi_on_medalign_sample() -> None:
    check_same_ranking(medalign_corpus(), stopwords=False, k=5)


def test_tokenize() -> None:
    text = "Dx E11.9; glucose 182 mg/dL (LOINC 2345-7), follow-up. The patient's A1c was 8.1%"
    assert tokenize(text) == [
        "dx", "e11.9", "glucose", "182", "mg", "dl", "loinc", "2345-7", "follow-up",
        "the", "patient", "s", "a1c", "was", "8.1",
    ]  # fmt: skip
    assert tokenize(text, stopwords=True)[-3:] == ["patient", "a1c", "8.1"]
    assert tokenize("Ärztin — naïve __x__") == ["ärztin", "naïve", "x"]


def test_snippets_are_verbatim_windows() -> None:
    text = " ".join(f"w{i}" for i in range(23)).replace("w5 ", "w5\n")
    parts = snippets(text, size=10)
    assert [len(p.split()) for p in parts] == [10, 10, 3]
    assert "w5\nw6" in parts[0]
    assert " ".join(" ".join(parts).split()) == " ".join(text.split())
    over = snippets(text, size=10, overlap=4)
    assert [p.split()[0] for p in over] == ["w0", "w6", "w12", "w18"][: len(over)]
    assert over[-1].split()[-1] == "w22"
    assert snippets("", 5) == []
    with pytest.raises(UserError):
        snippets(text, size=5, overlap=5)


def test_save_load_gives_identical_results(tmp_path: Path) -> None:
    docs = note_corpus(8, seed=2)
    index = BM25Index.build(docs, stopwords=True)
    folder = index.save(tmp_path / "idx")
    again = BM25Index.load(folder)
    assert again.ids == index.ids and again.stopwords and again.k1 == 1.5 and again.b == 0.75
    for q in queries(docs, stopwords=True):
        assert again.search(q, 7) == index.search(q, 7)
    assert again.document(docs[3].doc_id) == docs[3]
    # saving over an existing index replaces it and leaves nothing else beside it
    BM25Index.build(docs[:5], keep_text=False).save(folder)
    small = BM25Index.load(folder, mmap=True)
    assert len(small) == 5 and small.document(docs[0].doc_id).text == ""
    assert sorted(p.name for p in tmp_path.iterdir()) == ["idx"]


def test_load_missing_or_damaged_index(tmp_path: Path) -> None:
    with pytest.raises(UserError, match="does not exist"):
        BM25Index.load(tmp_path / "nope")
    folder = BM25Index.build(note_corpus(3)).save(tmp_path / "idx")
    (folder / "bm25s" / "data.csc.index.npy").write_bytes(b"not numpy")
    with pytest.raises(UserError, match="damaged"):
        BM25Index.load(folder)
    folder = BM25Index.build(note_corpus(3)).save(tmp_path / "idx2")
    lines = (folder / "documents.jsonl").read_text().splitlines()
    (folder / "documents.jsonl").write_text("\n".join(lines[:-1]) + "\n")
    with pytest.raises(UserError, match="damaged"):
        BM25Index.load(folder)
    (folder / "index.json").write_text("{")
    with pytest.raises(UserError, match="damaged"):
        BM25Index.load(folder)
    (folder / "index.json").write_text(json.dumps({"format": "other"}))
    with pytest.raises(UserError, match="damaged"):
        BM25Index.load(folder)
    (folder / "index.json").unlink()
    with pytest.raises(UserError, match="damaged"):
        BM25Index.load(folder)


def test_retrieved_visits_come_back_in_time_order() -> None:
    patients = list(synth.generate(40, 4))
    docs = [d for tl in patients for d in visit_documents(tl)]
    tl = patients[0]
    assert [d.meta["visit_id"] for d in visit_documents(tl)] == [v.visit_id for v in tl.visits]
    index = BM25Index.build(docs)
    shuffled = 0
    for q in sorted({e.name for t in patients for e in t.events if e.domain == "drug_exposure"}):
        hits = index.search(q, 6)
        starts = [index.document(i).start or datetime.min for i, _ in hits]
        shuffled += starts != sorted(starts)  # relevance order is not time order ...
        ordered = index.search_in_time_order(q, 6)
        assert {d.doc_id for d in ordered} == {i for i, _ in hits}
        got = [d.start for d in ordered if d.start is not None]
        assert len(got) == len(ordered) and got == sorted(got)  # ... the prompt order is
    assert shuffled >= 5


def test_visit_and_patient_documents() -> None:
    t0 = datetime(2020, 1, 1, 9)
    tl = Timeline(
        Person("p1"),
        visits=[Visit("v2", "Outpatient Visit", datetime(2021, 1, 1)), Visit("v1", "Inpatient Visit", t0)],
        events=[
            Event("measurement", t0, "Glucose", "LOINC", "2345-7", "101", "mg/dL", "v1"),
            Event("condition_occurrence", datetime(2019, 5, 1), "Asthma", "SNOMED", "195967001"),
        ],
        notes=[Note(datetime(2021, 1, 1, 10), "progress note", "Wheezing improved.", "v2", "n1")],
    )
    docs = visit_documents(tl)
    assert [d.doc_id for d in docs] == ["p1/v2", "p1/v1", "p1/no-visit"]
    assert "[LOINC/2345-7] Glucose 101 mg/dL" in docs[1].text
    assert "Wheezing improved." in docs[0].text and "Asthma" in docs[2].text
    assert docs[2].start == datetime(2019, 5, 1)
    assert [d.doc_id for d in in_time_order(docs)] == ["p1/no-visit", "p1/v1", "p1/v2"]
    whole = patient_document(tl)
    assert whole.doc_id == "p1" and whole.start == t0 and "Wheezing" in whole.text and "Asthma" in whole.text


def test_search_edge_cases() -> None:
    docs = [Document("a", "warfarin inr"), Document("b", "metformin glucose"), Document("c", "insulin")]
    index = BM25Index.build(docs)
    assert index.search("") == [] and index.search("zzz unknown") == []
    assert [i for i, _ in index.search("glucose", k=50)] == ["b"]
    assert index.search("glucose", k=0) == []
    with pytest.raises(UserError, match="duplicate"):
        BM25Index.build([Document("a", "x"), Document("a", "y")])
    with pytest.raises(UserError, match="empty"):
        BM25Index.build([])
    with pytest.raises(KeyError):
        index.document("zz")


def test_documents_without_any_token_still_index() -> None:
    index = BM25Index.build([Document("a", ""), Document("b", "  ")])
    assert len(index) == 2 and index.search("warfarin") == []


def test_building_holds_token_ids_not_token_strings() -> None:
    """Building once held every token as a string and again as a Python int (86 bytes a token
    here, 18 GB for 100,000 long records); it now holds int32 ids and hands bm25s one document's
    list at a time. Records repeat their terms, as these do (1,000 tokens over 300 terms)."""
    import tracemalloc

    rng = random.Random(0)
    words = [f"term{i}" for i in range(300)]
    docs = [Document(f"d{i}", " ".join(rng.choice(words) for _ in range(1000))) for i in range(300)]
    BM25Index.build(docs[:2])  # bm25s and scipy imported outside the measurement
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        index = BM25Index.build(docs, keep_text=False)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    assert peak / 300_000 < 30, f"{peak / 300_000:.1f} bytes per token while building"
    # and the index is the same as one built document by document from strings
    reference = BM25Okapi([tokenize(d.text) for d in docs], k1=K1, b=0.75, epsilon=0.0)
    query = "term7 term42 term299"
    got = dict(index.search(query, k=10))
    want = reference.get_scores(tokenize(query))
    for doc_id, score in got.items():
        assert score * (K1 + 1) == pytest.approx(want[int(doc_id[1:])], rel=1e-9)
