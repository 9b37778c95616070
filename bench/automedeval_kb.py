"""AutoMedEval's knowledge base: build and query time over 10,000 chunks, BM25 and dense.

One run writes a deterministic corpus of clinical-looking notes (``bench/_clinical_text.py``'s
sentences, about 10 MB) as ``.txt`` files, then measures what ``clinieval automedeval kb`` does:

  chunk     reading the files and cutting them into 1,000-character chunks (``document_chunks``)
  bm25      ``build_kb`` (chunk + tokenise + bm25s index + save), opening the base, and a lookup
            (tokenise + score + top-1 + text, what the knowledge chain asks) per query, against
            a bare peer: rank_bm25's BM25Okapi on the same chunks' tokens (same tokeniser, same
            k1 and b), ``get_scores`` + argmax + the text. Both top-1 hits are compared; queries
            with a term in more than half of the chunks are counted apart (the two idf formulas
            differ there by design, see ``clinieval.ehr.retrieval``).
  dense     on the corpus's first ``--dense-chunks`` chunks (embedding all 10,000 takes minutes
            on 2 cores): ``build_kb(dense=True)`` against ``build_kb`` of the same chunks (the
            model already loaded; its load is timed apart), so the difference is the embedding
            and gives chunks/s; a dense lookup (embed the query + cosine over every chunk + sort +
            text) against a bare peer (``SentenceTransformer.encode`` of the query with torch's
            default threads, one matrix-vector product, argmax); a hybrid lookup (both rankings,
            100 deep, fused); and the cosine + sort alone over as many random unit vectors as the
            full corpus has chunks (the only part of a dense lookup that grows with the base).

Queries are 2-5 clinical words drawn from the corpus vocabulary (seeded). Timings are medians
over the queries after one warm-up query each. Prints a table; writes JSON to bench/out/.

    .venv/bin/python bench/automedeval_kb.py --chunks 10000 --queries 100 --dense-chunks 2000
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _clinical_text import _HISTORY, _LABS, _MEDS, _SYMPTOMS, clinical_pairs

from clinieval.benchmarks.automedeval import knowledge
from clinieval.benchmarks.automedeval.knowledge import (
    KnowledgeBase,
    build_kb,
    chunks,
    document_chunks,
    embed,
)
from clinieval.ehr.retrieval import tokenize

OUT = Path(__file__).resolve().parent / "out"
K1, B = 1.5, 0.75  # BM25Index's defaults, given to rank_bm25 too


def write_corpus(folder: Path, n_chunks: int, seed: int) -> int:
    """Notes of ~15 chunks each (10 generated paragraphs), the last one cut so that the corpus
    holds ``n_chunks`` chunks; the number of files."""
    folder.mkdir(parents=True, exist_ok=True)
    made, n_files, rng_seed = 0, 0, seed
    while made < n_chunks:
        paragraphs = [r for r, _ in clinical_pairs(10, rng_seed, 150, 300)]
        rng_seed += 1
        parts = chunks("\n\n".join(paragraphs))[: n_chunks - made]
        (folder / f"note{n_files:05d}.txt").write_text(" ".join(parts) + "\n", encoding="utf-8")
        made += len(parts)
        n_files += 1
    return n_files


def make_queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = _SYMPTOMS + _HISTORY + [m for m, _ in _MEDS] + [lab for lab, *_ in _LABS]
    words += ["hyponatremia", "sepsis", "cellulitis", "anticoagulation", "telemetry", "diuresis"]
    return [" ".join(rng.sample(words, rng.randint(2, 5))) for _ in range(n)]


def median_ms(fn: Callable[[str], Any], queries: list[str]) -> tuple[float, list[Any]]:
    """Median latency in ms over the queries (after one warm-up), and each query's result."""
    fn(queries[0])
    times, results = [], []
    for q in queries:
        started = time.perf_counter()
        results.append(fn(q))
        times.append(time.perf_counter() - started)
    return 1000 * statistics.median(times), results


def timed(fn: Callable[[], Any]) -> tuple[float, Any]:
    started = time.perf_counter()
    out = fn()
    return time.perf_counter() - started, out


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def bm25_part(docs_dir: Path, kb: Path, queries: list[str]) -> dict[str, Any]:
    from rank_bm25 import BM25Okapi

    t_chunk, docs = timed(lambda: document_chunks([docs_dir]))
    chunk_docs = list(docs)
    t_build, n = timed(lambda: build_kb([docs_dir], kb))
    t_open, base = timed(lambda: KnowledgeBase(kb, top_k=1))
    assert isinstance(base, KnowledgeBase)
    lookup_ms, ours = median_ms(lambda q: base.lookup(q).chunk_ids, queries)

    texts = [d.text for d in chunk_docs]
    t_tok, tokens = timed(lambda: [tokenize(t) for t in texts])
    t_peer, peer = timed(lambda: BM25Okapi(tokens, k1=K1, b=B))
    df: Counter[str] = Counter()
    for toks in tokens:
        df.update(set(toks))

    def peer_lookup(q: str) -> tuple[str, ...]:
        scores = peer.get_scores(tokenize(q))
        best = int(np.argmax(scores))
        _ = texts[best]
        return (chunk_docs[best].doc_id,) if scores[best] > 0 else ()

    peer_ms, theirs = median_ms(peer_lookup, queries)
    common = [max(df.get(t, 0) for t in tokenize(q)) > len(texts) / 2 for q in queries]
    agree = sum(a == b for a, b, c in zip(ours, theirs, common, strict=True) if not c)
    agree_all = sum(a == b for a, b in zip(ours, theirs, strict=True))
    return {
        "chunks": n,
        "chunk_s": t_chunk,
        "build_kb_s": t_build,
        "open_s": t_open,
        "lookup_ms_median": lookup_ms,
        "peer": {
            "name": "rank_bm25.BM25Okapi",
            "tokenize_s": t_tok,
            "index_s": t_peer,
            "build_s": t_chunk + t_tok + t_peer,
            "lookup_ms_median": peer_ms,
        },
        "lookup_speedup": peer_ms / lookup_ms,
        "top1_agree": agree,
        "compared": len(queries) - sum(common),
        "top1_agree_all_queries": agree_all,
        "queries_with_common_term": sum(common),
        "folder_mb": folder_mb(kb),
        "hits": ours,
    }


def dense_part(docs_dir: Path, kb: Path, queries: list[str], full_chunks: int) -> dict[str, Any]:
    t_load, model = timed(knowledge._encoder)
    t_bm25, _ = timed(lambda: build_kb([docs_dir], kb))  # the same corpus without embeddings
    t_build, n = timed(lambda: build_kb([docs_dir], kb, dense=True))
    t_open, base = timed(lambda: KnowledgeBase(kb, top_k=1, mode="dense"))
    assert isinstance(base, KnowledgeBase) and base.vectors is not None
    vectors = base.vectors
    texts = [base.index.document(i).text for i in base.index.ids]
    lookup_ms, hits = median_ms(lambda q: base.lookup(q).chunk_ids, queries)

    def bare(q: str) -> int:
        v = model.encode([q], normalize_embeddings=True, convert_to_numpy=True)[0]
        best = int(np.argmax(vectors @ v))
        _ = texts[best]
        return best

    bare_ms, bare_hits = median_ms(bare, queries)
    ids = base.index.ids
    same_as_bare = sum(h == (ids[b],) for h, b in zip(hits, bare_hits, strict=True))
    bm25 = KnowledgeBase(kb, top_k=1)
    same_as_bm25 = sum(h == bm25.lookup(q).chunk_ids for h, q in zip(hits, queries, strict=True))
    hybrid = KnowledgeBase(kb, top_k=1, mode="hybrid")
    hybrid_ms, _ = median_ms(lambda q: hybrid.lookup(q).chunk_ids, queries)
    # the search itself at the full corpus size: cosine over full_chunks unit vectors + the sort
    rng = np.random.default_rng(0)
    full = rng.standard_normal((full_chunks, vectors.shape[1])).astype(np.float32)
    full /= np.linalg.norm(full, axis=1, keepdims=True)
    qv = full[0]
    search_ms, _ = median_ms(lambda q: np.argsort(-(full @ qv), kind="stable")[:1], queries)
    long = sum(len(model.tokenizer(t, verbose=False)["input_ids"]) > model.max_seq_length for t in texts)
    threads = thread_rates(texts[:THREAD_SAMPLE])
    return {
        "chunks": n,
        "model_load_s": t_load,
        "build_kb_bm25_s": t_bm25,
        "build_kb_dense_s": t_build,
        "embed_s": t_build - t_bm25,
        "chunks_per_s": n / (t_build - t_bm25),
        "open_s": t_open,
        "lookup_ms_median": lookup_ms,
        "bare_ms_median": bare_ms,
        "lookup_over_bare": lookup_ms / bare_ms,
        "top1_same_as_bare": same_as_bare,
        "top1_same_as_bm25": same_as_bm25,
        "hybrid_lookup_ms_median": hybrid_ms,
        "full_size_chunks": full_chunks,
        "full_size_cosine_sort_ms_median": search_ms,
        "chunks_over_max_seq_length": long,
        "max_seq_length": model.max_seq_length,
        "folder_mb": folder_mb(kb),
        "chunks_per_s_by_torch_threads": threads,
    }


THREAD_SAMPLE = 96


def thread_rates(texts: list[str]) -> dict[int, float]:
    """Embedding chunks/s on 1 and on 2 torch threads over the same chunks (1, 2, 1, 2; the best of
    each): how much the machine's other work costs torch's default of one thread per core."""
    import torch

    before = torch.get_num_threads()
    best: dict[int, float] = {}
    try:
        for n in (1, 2, 1, 2):
            torch.set_num_threads(n)
            seconds, _ = timed(lambda: embed(texts))
            best[n] = max(best.get(n, 0.0), len(texts) / seconds)
    finally:
        torch.set_num_threads(before)
    return best


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chunks", type=int, default=10_000, help="chunks in the corpus (default 10000)")
    ap.add_argument("--queries", type=int, default=100)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument(
        "--dense-chunks",
        type=int,
        default=2_000,
        help="chunks embedded for the dense part, the first of the corpus (default 2000; 0: no dense part). "
        "Embedding runs at tens of chunks/s on 2 cores, so all 10,000 take minutes",
    )
    args = ap.parse_args(argv)
    load_start = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        docs = Path(tmp) / "docs"
        t_gen, n_files = timed(lambda: write_corpus(docs, args.chunks, args.seed))
        corpus_mb = folder_mb(docs)
        queries = make_queries(args.queries, args.seed + 1)
        bm25 = bm25_part(docs, Path(tmp) / "kb-bm25", queries)
        bm25.pop("hits")
        dense = None
        if args.dense_chunks:
            subset = Path(tmp) / "docs-dense"
            write_corpus(subset, min(args.dense_chunks, args.chunks), args.seed)
            dense = dense_part(subset, Path(tmp) / "kb-dense", queries, bm25["chunks"])
    result = {
        "args": vars(args),
        "machine": {
            "cpus": os.cpu_count(),
            "python": platform.python_version(),
            "load_avg_start": load_start,
            "load_avg_end": os.getloadavg(),
        },
        "corpus": {"files": n_files, "mb": corpus_mb, "generate_s": t_gen},
        "bm25": bm25,
        "dense": dense,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
    }
    OUT.mkdir(exist_ok=True)
    path = OUT / f"automedeval_kb-{time.strftime('%Y%m%d-%H%M%S')}.json"
    path.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    print_table(result)
    print(f"written: {path}")
    return 0


def print_table(r: dict[str, Any]) -> None:
    corpus, bm, peer = r["corpus"], r["bm25"], r["bm25"]["peer"]
    print(f"corpus: {bm['chunks']} chunks in {corpus['files']} files, {corpus['mb']:.1f} MB")
    print(f"{'BM25':34} {'clinieval':>12} {'rank_bm25':>12} {'ratio':>8}")
    print(
        f"{'build, s (chunk+tokenise+index)':34} {bm['build_kb_s']:12.2f} {peer['build_s']:12.2f} "
        f"{peer['build_s'] / bm['build_kb_s']:7.2f}x"
    )
    print(
        f"{'lookup top-1, median ms':34} {bm['lookup_ms_median']:12.3f} {peer['lookup_ms_median']:12.3f} "
        f"{bm['lookup_speedup']:7.1f}x"
    )
    print(
        f"open saved base {bm['open_s']:.2f} s; folder {bm['folder_mb']:.1f} MB; top-1 agrees on "
        f"{bm['top1_agree']}/{bm['compared']} comparable queries "
        f"({bm['top1_agree_all_queries']}/{r['args']['queries']} all; "
        f"{bm['queries_with_common_term']} had a term in > half the chunks)"
    )
    d = r["dense"]
    if d is None:
        return
    print(
        f"dense over {d['chunks']} chunks: model load {d['model_load_s']:.1f} s; build_kb --dense "
        f"{d['build_kb_dense_s']:.1f} s (BM25 alone {d['build_kb_bm25_s']:.1f} s, so embedding "
        f"{d['embed_s']:.1f} s = {d['chunks_per_s']:.1f} chunks/s); open {d['open_s']:.2f} s; "
        f"folder {d['folder_mb']:.1f} MB"
    )
    print(
        f"dense lookup median {d['lookup_ms_median']:.2f} ms vs bare encode+matvec "
        f"{d['bare_ms_median']:.2f} ms ({d['lookup_over_bare']:.2f}x), same top-1 on "
        f"{d['top1_same_as_bare']}/{r['args']['queries']}; "
        f"hybrid lookup {d['hybrid_lookup_ms_median']:.2f} ms"
    )
    print(
        f"cosine + sort over {d['full_size_chunks']} chunks: {d['full_size_cosine_sort_ms_median']:.2f} ms; "
        f"dense top-1 = BM25 top-1 on {d['top1_same_as_bm25']}/{r['args']['queries']}; chunks over "
        f"{d['max_seq_length']} word pieces (MiniLM reads their start only): "
        f"{d['chunks_over_max_seq_length']}"
    )
    rates = d["chunks_per_s_by_torch_threads"]
    print(
        f"embedding {THREAD_SAMPLE} chunks, best of 2: "
        + ", ".join(f"{n} torch thread(s) {v:.1f} chunks/s" for n, v in rates.items())
    )


if __name__ == "__main__":
    raise SystemExit(main())
