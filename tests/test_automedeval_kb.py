"""AutoMedEval's knowledge base with dense retrieval: MiniLM embeddings beside BM25, searched by
BM25, by cosine, or by both fused (reciprocal rank fusion, k = 60).

Four one-sentence documents, one chunk each, read in this order (positions 0-3):

  0 a.txt  hypertension: lifestyle changes, antihypertensive medicines (thiazides, ACE inhibitors)
  1 b.txt  metformin is the first-line drug for type 2 diabetes
  2 c.txt  asthma attacks, inhaled salbutamol
  3 d.txt  fractured bones heal in a cast

"how do you treat high blood pressure" shares no word with any chunk (after lower-casing), so BM25
finds nothing; "high blood pressure" means hypertension, so the real MiniLM puts chunk 0 first.
"first-line drug for high blood pressure" shares "first-line", "drug" and "for" with chunk 1 only,
so BM25 returns chunk 1 alone, while MiniLM still ranks the hypertension chunk first.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from clinieval.benchmarks.automedeval.knowledge import (
    DENSE_MANIFEST,
    DENSE_VECTORS,
    KnowledgeBase,
    build_kb,
    embed,
    embed_query,
    rrf,
)
from clinieval.errors import UserError
from tests.conftest import run_cli

DOCS = {
    "a.txt": "Hypertension is managed with lifestyle changes and antihypertensive medicines such as "
    "thiazides or ACE inhibitors.",
    "b.txt": "Metformin is the first-line drug for type 2 diabetes mellitus.",
    "c.txt": "Asthma attacks are relieved by inhaled salbutamol.",
    "d.txt": "Fractured bones heal in six to eight weeks when immobilized in a cast.",
}
PARAPHRASE = "how do you treat high blood pressure"
MIXED = "first-line drug for high blood pressure"


def write_docs(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name, text in DOCS.items():
        (folder / name).write_text(text + "\n", encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def dense_kb(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("kb")
    out = root / "kb"
    assert build_kb([write_docs(root / "docs")], out, dense=True) == 4
    return out


def test_rrf_sums_reciprocal_ranks_by_hand() -> None:
    # item 7: ranks 2 and 1 -> 1/62 + 1/61; item 3: rank 1 -> 1/61; item 5: ranks 3 and 2 -> 1/63 + 1/62;
    # item 9: rank 3 of the second list only -> 1/63
    fused = rrf([[3, 7, 5], [7, 5, 9]])
    assert [i for i, _ in fused] == [7, 5, 3, 9]
    assert [s for _, s in fused] == pytest.approx([1 / 62 + 1 / 61, 1 / 63 + 1 / 62, 1 / 61, 1 / 63])
    # a tie (each first in one list) goes to the earlier item in reading order
    assert rrf([[4], [2]]) == [(2, 1 / 61), (4, 1 / 61)]
    assert rrf([[], [1, 0]], k=1) == [(1, 1 / 2), (0, 1 / 3)]
    assert rrf([]) == []


def test_dense_finds_a_paraphrase_bm25_cannot(dense_kb: Path) -> None:
    bm25 = KnowledgeBase(dense_kb, top_k=1).lookup(PARAPHRASE)
    assert bm25.chunk_ids == () and bm25.knowledge == "nothing found" and bm25.mode == "bm25"
    dense = KnowledgeBase(dense_kb, top_k=1, mode="dense").lookup(PARAPHRASE)
    assert dense.mode == "dense" and dense.chunk_ids[0].endswith("a.txt#0")
    assert dense.knowledge == DOCS["a.txt"]
    # hybrid: BM25's list is empty, so the fusion is the dense order
    hybrid = KnowledgeBase(dense_kb, top_k=4, mode="hybrid")
    assert hybrid.ranking(PARAPHRASE) == [i for i, _ in hybrid.dense_ranking(PARAPHRASE, 4)]
    assert hybrid.lookup(PARAPHRASE).mode == "hybrid"


def test_hybrid_is_the_rrf_of_both_rankings_computed_by_hand(dense_kb: Path) -> None:
    kb = KnowledgeBase(dense_kb, top_k=4, mode="hybrid")
    assert kb.bm25_ranking(MIXED, 100) == [1]  # only the metformin chunk shares words
    dense = kb.dense_ranking(MIXED, 100)
    assert [i for i, _ in dense][:2] == [0, 1]  # the meaning (hypertension) first, metformin second
    assert dense[0][1] > dense[1][1] > dense[2][1]
    order = [i for i, _ in dense]
    # chunk 1: BM25 rank 1 + dense rank 2 = 1/61 + 1/62; chunk 0: dense rank 1 = 1/61;
    # the others: dense rank 3 and 4 = 1/63, 1/64
    by_hand = {1: 1 / 61 + 1 / 62, 0: 1 / 61, order[2]: 1 / 63, order[3]: 1 / 64}
    assert kb.ranking(MIXED) == sorted(by_hand, key=lambda i: -by_hand[i]) == [1, 0, order[2], order[3]]
    # top-1 per mode: BM25 and hybrid give metformin, dense gives hypertension
    tops = {m: KnowledgeBase(dense_kb, top_k=1, mode=m).lookup(MIXED).chunk_ids for m in ("bm25", "dense")}
    assert tops["bm25"][0].endswith("b.txt#0") and tops["dense"][0].endswith("a.txt#0")
    assert KnowledgeBase(dense_kb, top_k=1, mode="hybrid").lookup(MIXED).chunk_ids == tops["bm25"]


def test_saved_vectors_round_trip(dense_kb: Path) -> None:
    manifest = json.loads((dense_kb / DENSE_MANIFEST).read_text(encoding="utf-8"))
    assert manifest["model"] == "sentence-transformers/all-MiniLM-L6-v2"
    assert (manifest["dimension"], manifest["n_chunks"], manifest["normalized"]) == (384, 4, True)
    saved = np.load(dense_kb / DENSE_VECTORS)
    assert saved.shape == (4, 384) and saved.dtype == np.float32
    assert np.linalg.norm(saved, axis=1) == pytest.approx(np.ones(4), abs=1e-5)
    # the same vectors as embedding the chunks again, in the order the BM25 index holds them
    kb = KnowledgeBase(dense_kb, mode="dense")
    assert kb.vectors is not None
    texts = [kb.index.document(i).text for i in kb.index.ids]
    assert texts == list(DOCS.values())
    assert np.allclose(kb.vectors, embed(texts), atol=1e-5)
    # cosine of unit vectors = dot product: the reported similarity is the one computed here
    (top, sim), *_ = kb.dense_ranking(PARAPHRASE, 1)
    assert sim == pytest.approx(float(saved[top] @ embed([PARAPHRASE])[0]), abs=1e-6)
    # a query is embedded on one torch thread, and the process's thread count is put back
    import torch

    threads = torch.get_num_threads()
    assert np.allclose(embed_query(PARAPHRASE), embed([PARAPHRASE])[0], atol=1e-6)
    assert torch.get_num_threads() == threads


def test_errors_name_the_fix(dense_kb: Path, tmp_path: Path) -> None:
    plain = tmp_path / "plain"
    build_kb([write_docs(tmp_path / "docs")], plain)
    assert not (plain / DENSE_VECTORS).exists()
    for mode in ("dense", "hybrid"):
        with pytest.raises(UserError, match=r"built without dense embeddings; rebuild it with .*--dense"):
            KnowledgeBase(plain, mode=mode)
    with pytest.raises(UserError, match="search mode 'cosine' is unknown; choose from bm25, dense, hybrid"):
        KnowledgeBase(dense_kb, mode="cosine")
    # damaged vectors: one row short of the index
    broken = tmp_path / "broken"
    build_kb([tmp_path / "docs"], broken, dense=True)
    np.save(broken / DENSE_VECTORS, np.load(broken / DENSE_VECTORS)[:3])
    with pytest.raises(UserError, match=r"damaged \(expected 4 x 384 vectors, found \(3, 384\)\)"):
        KnowledgeBase(broken, mode="dense")
    # BM25 search still works on it: the vectors are read only for dense and hybrid
    assert KnowledgeBase(broken).lookup("asthma salbutamol").chunk_ids[0].endswith("c.txt#0")
    # the command line: one line, exit code 2
    asked = run_cli("automedeval", "kb", "query", str(plain), PARAPHRASE, "--mode", "dense")
    assert asked.returncode == 2 and "rebuild it with" in asked.stderr and "--dense" in asked.stderr
    assert "Traceback" not in asked.stderr


def test_the_folder_appears_complete_or_not_at_all(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    out = tmp_path / "kb"
    build_kb([docs], out, dense=True)
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    (docs / "scan.pdf").write_bytes(b"%PDF-1.4")  # a failing rebuild leaves the old base as it was
    with pytest.raises(UserError, match="converted to text first"):
        build_kb([docs / "a.txt", docs / "scan.pdf"], out, dense=True)
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    # a BM25-only rebuild replaces the whole folder: no stale vectors from the old build
    build_kb([docs / "a.txt", docs / "b.txt"], out)
    assert not (out / DENSE_VECTORS).exists() and not (out / DENSE_MANIFEST).exists()
    assert len(KnowledgeBase(out).index) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == ["docs", "kb"]  # no temporary folder left


def test_cli_build_dense_and_query_by_mode(tmp_path: Path) -> None:
    docs = write_docs(tmp_path / "docs")
    built = run_cli(
        "automedeval", "kb", "build", str(docs), "--out", str(tmp_path / "kb"), "--dense", "--no-progress"
    )
    assert built.returncode == 0, built.stderr
    assert "4 chunks indexed and embedded" in built.stdout
    assert built.stderr == ""  # no model-loading bars or warnings
    asked = run_cli("automedeval", "kb", "query", str(tmp_path / "kb"), PARAPHRASE, "--mode", "dense")
    assert asked.returncode == 0, asked.stderr
    lines = asked.stdout.splitlines()
    assert (
        lines[0]
        == f'According to the Reference, the related knowledge for "{PARAPHRASE}" is "{DOCS["a.txt"]}"'
    )
    assert lines[1].startswith("chunks (dense): ") and lines[1].endswith("a.txt#0")
    bm25 = run_cli("automedeval", "kb", "query", str(tmp_path / "kb"), PARAPHRASE)
    assert bm25.returncode == 0 and bm25.stdout.splitlines()[1] == "chunks (bm25): none"
    bad = run_cli("automedeval", "kb", "query", str(tmp_path / "kb"), PARAPHRASE, "--mode", "cosine")
    assert bad.returncode == 2 and "cosine" in bad.stderr


def test_a_bm25_only_base_never_loads_torch(tmp_path: Path) -> None:
    write_docs(tmp_path / "docs")
    code = (
        "import json, sys\n"
        "from pathlib import Path\n"
        "from clinieval.benchmarks.automedeval.cli import kb\n"
        "from clinieval.benchmarks.automedeval.knowledge import KnowledgeBase, build_kb\n"
        f"build_kb([Path({str(tmp_path / 'docs')!r})], Path({str(tmp_path / 'kb')!r}))\n"
        f"hit = KnowledgeBase(Path({str(tmp_path / 'kb')!r}), mode='bm25').lookup('inhaled salbutamol')\n"
        "heavy = sorted(m for m in sys.modules if m.split('.')[0] in "
        "('torch', 'transformers', 'sentence_transformers', 'sklearn'))\n"
        "print(json.dumps({'hit': hit.chunk_ids, 'heavy': heavy}))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout)
    assert seen["hit"][0].endswith("c.txt#0")
    assert seen["heavy"] == []


def test_the_judge_chain_appends_what_dense_search_found(dense_kb: Path, tmp_path: Path) -> None:
    """A scripted judge (a real local server) asks a paraphrase [Question]: with a dense base the
    line appended to its context holds the hypertension chunk; with BM25 it holds 'nothing found'."""
    from clinieval.benchmarks.automedeval.judge_set import JudgeItem, Response
    from clinieval.benchmarks.automedeval.judging import JudgePlan, judge_set
    from clinieval.models.spec import parse_model_spec
    from tests.fault_server import FaultServer

    item = JudgeItem(
        "q1", "My blood pressure is high, what now?", "See a doctor.",
        tuple(Response(m, f"{m} answer.") for m in ("a", "b", "c")),
    )  # fmt: skip

    def reply(prompt: str) -> str:
        if prompt.startswith("According to the Reference"):
            return "Analyze: ok.\nScore: Doctor 1: 4 points. Doctor 2: 3 points. Doctor 3: 2 points."
        return f"Analyze: unsure.\n[Question] {PARAPHRASE}"

    appended: dict[str, str] = {}
    for mode in ("bm25", "dense"):
        with FaultServer(responder=reply) as server:
            model = parse_model_spec(f"openai:{server.url}@fault")
            plan = JudgePlan(repeats=1, kb=KnowledgeBase(dense_kb, mode=mode), progress=False)

            async def go() -> None:
                try:
                    await judge_set([item], model, tmp_path / mode, plan)  # noqa: B023
                finally:
                    await model.aclose()  # noqa: B023

            asyncio.run(go())
            assert len(server.log.received) == 2  # the question, then the continuation
            appended[mode] = server.log.received[1]
        verdict = json.loads((tmp_path / mode / "verdicts.jsonl").read_text(encoding="utf-8"))
        assert verdict["scores"] is not None and len(verdict["lookups"]) == 1
    assert appended["dense"] == (
        f'According to the Reference, the related knowledge for "{PARAPHRASE}" is "{DOCS["a.txt"]}"'
    )
    assert appended["bm25"].endswith('is "nothing found"')
