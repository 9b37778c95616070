"""BM25 over long patient records: clinieval's bm25s index against rank_bm25's BM25Okapi.

One run generates N synthetic patients (clinieval.ehr.synth), turns each into one whole-patient
document (every visit, event and note), capped at --max-words words so the run fits in memory
and time on a small machine, tokenises them once, and then on the same tokens:

  index   bm25s (method="robertson", float64, as BM25Index uses it) vs rank_bm25.BM25Okapi
  query   Q queries (drug / condition / lab words from the embedded vocabulary), top-k each:
          BM25Index.search (tokenise + score + top-k) vs BM25Okapi.get_scores + the same top-k

It checks that both return the same top-k scores (bm25s x (k1 + 1) = BM25Okapi) and prints a
table with the times and the rank_bm25 / bm25s ratio (goal: queries >= 50x faster).

``--no-reference`` measures clinieval's index alone, as large as memory allows: no rank_bm25, and
no second token list kept beside the index's own (rank_bm25 and the token lists were most of the
3.2 GB peak at 10,000 records); the token count then comes from a streaming pass.

    .venv/bin/python bench/bm25.py --n 10000 --queries 100 --max-words 2000
    .venv/bin/python bench/bm25.py --n 100000 --queries 100 --max-words 2000 --no-reference  # ~3.5 GB peak
"""

from __future__ import annotations

import argparse
import json
import platform
import random
import resource
import statistics
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

from clinieval.ehr.retrieval import BM25Index, Document, patient_document, snippets, tokenize
from clinieval.ehr.synth.catalog import CONDITIONS, DRUGS
from clinieval.ehr.synth.generator import generate
from clinieval.ehr.synth.labs import LABS

K1, B = 1.5, 0.75


def make_queries(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    words = [c.snomed.name for c in CONDITIONS.values()]
    words += [d.concept.name.split()[0] for d in DRUGS.values()]
    words += [lab.short for lab in LABS.values()]
    words += ["orthopnea", "consolidation", "hemiparesis", "dysuria", "palpitations", "exudates", "diuresed"]
    return [" ".join(rng.sample(words, rng.randint(2, 4))) for _ in range(n)]


def make_docs(n: int, seed: int, max_words: int) -> list[Document]:
    """N whole-patient documents, each cut to its first ``max_words`` words."""
    docs: list[Document] = []
    for tl in generate(n, seed):
        d = patient_document(tl)
        text = snippets(d.text, size=max_words)[0] if d.text.strip() else ""
        docs.append(Document(d.doc_id, text, d.start))
    return docs


def index_only(args: argparse.Namespace) -> int:
    """``--no-reference``: generate, count tokens (streaming), BM25Index.build, queries, peak RSS."""
    t0 = time.perf_counter()
    docs = make_docs(args.n, args.seed, args.max_words)
    t_gen = time.perf_counter() - t0
    rss_docs = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    n_tokens = sum(len(tokenize(d.text)) for d in docs)
    t_tok = time.perf_counter() - t0
    t0 = time.perf_counter()
    index = BM25Index.build(docs, k1=K1, b=B, keep_text=False)
    t_build = time.perf_counter() - t0  # tokenise + index, what a user calls
    rss_build = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    del docs
    queries = make_queries(args.queries, args.seed + 1)
    index.search(queries[0], args.k)  # warm-up
    lat: list[float] = []
    for q in queries:
        t0 = time.perf_counter()
        index.search(q, args.k)
        lat.append(time.perf_counter() - t0)
    mean_ms, p95_ms = 1000 * statistics.mean(lat), 1000 * float(np.percentile(lat, 95))
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    per = n_tokens / max(args.n, 1)
    print(f"{args.n} records, {n_tokens:,} tokens ({per:.0f}/record, cap {args.max_words} words); bm25s only")
    print(f"generate {t_gen:.1f} s (peak RSS {rss_docs:.0f} MB), tokenise (count) {t_tok:.1f} s")
    print(f"BM25Index.build (tokenise + index) {t_build:.1f} s, peak RSS after build {rss_build:.0f} MB")
    print(
        f"query mean {mean_ms:.3f} ms, p95 {p95_ms:.3f} ms, {len(queries)} queries {sum(lat):.3f} s "
        f"(top-{args.k}, after one warm-up query)"
    )
    print(f"peak RSS {peak_mb:.0f} MB; python {platform.python_version()}")
    if args.json:
        args.json.write_text(json.dumps({
            "n": args.n, "queries": len(queries), "max_words": args.max_words, "k": args.k,
            "tokens": n_tokens, "reference": None, "generate_s": t_gen, "tokenize_s": t_tok,
            "build_s": t_build, "query_ms_mean": mean_ms, "query_ms_p95": p95_ms,
            "peak_rss_mb_after_generate": rss_docs, "peak_rss_mb_after_build": rss_build,
            "peak_rss_mb": peak_mb,
        }, indent=2) + "\n")  # fmt: skip
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--n", type=int, default=10_000, help="patients = documents (default 10000)")
    ap.add_argument("--queries", type=int, default=100, help="number of queries (default 100)")
    ap.add_argument("--max-words", type=int, default=2000, help="cap on words per record (default 2000)")
    ap.add_argument("--k", type=int, default=10, help="top-k per query (default 10)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", type=Path, help="also write the results here")
    ap.add_argument(
        "--no-reference", action="store_true", help="time clinieval's index only (no rank_bm25, less memory)"
    )
    args = ap.parse_args(argv)
    if args.no_reference:
        return index_only(args)
    from rank_bm25 import BM25Okapi

    t0 = time.perf_counter()
    docs = make_docs(args.n, args.seed, args.max_words)
    t_gen = time.perf_counter() - t0
    t0 = time.perf_counter()
    tokens = [tokenize(d.text) for d in docs]
    t_tok = time.perf_counter() - t0
    n_tokens = sum(len(t) for t in tokens)

    import bm25s

    t0 = time.perf_counter()
    raw = bm25s.BM25(k1=K1, b=B, method="robertson", idf_method="robertson", dtype="float64")
    raw.index(tokens, show_progress=False)
    t_idx_bm25s = time.perf_counter() - t0
    del raw
    t0 = time.perf_counter()
    index = BM25Index.build(docs, k1=K1, b=B, keep_text=False)
    t_build = time.perf_counter() - t0  # tokenise + index, what a user calls
    t0 = time.perf_counter()
    ref = BM25Okapi(tokens, k1=K1, b=B)
    t_idx_rank = time.perf_counter() - t0
    df: Counter[str] = Counter()
    for toks in tokens:
        df.update(set(toks))
    del tokens

    queries = make_queries(args.queries, args.seed + 1)
    lat_bm25s: list[float] = []
    lat_rank: list[float] = []
    mismatches = 0
    common = 0  # queries with a term in more than half of the records
    for q in queries:
        t0 = time.perf_counter()
        hits = index.search(q, args.k)
        lat_bm25s.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        scores = ref.get_scores(tokenize(q))
        top = np.argpartition(-scores, args.k)[: args.k]
        top = top[np.argsort(-scores[top], kind="stable")]
        lat_rank.append(time.perf_counter() - t0)
        if max(df.get(t, 0) for t in tokenize(q)) > args.n / 2:
            common += 1  # the two idf formulas differ on such terms (see clinieval.ehr.retrieval)
            continue
        want = [float(scores[i]) for i in top if scores[i] > 0]
        got = [s * (K1 + 1) for _, s in hits]
        if len(want) != len(got) or not np.allclose(got, want, rtol=1e-6):
            mismatches += 1

    def ms(xs: list[float]) -> float:
        return 1000 * statistics.mean(xs)

    def p95(xs: list[float]) -> float:
        return 1000 * float(np.percentile(xs, 95))

    rows = [
        ("index build (from tokens), s", t_idx_bm25s, t_idx_rank),
        ("query mean latency, ms", ms(lat_bm25s), ms(lat_rank)),
        ("query p95 latency, ms", p95(lat_bm25s), p95(lat_rank)),
        (f"{len(queries)} queries total, s", sum(lat_bm25s), sum(lat_rank)),
    ]
    per = n_tokens / max(args.n, 1)
    print(f"{args.n} records, {n_tokens:,} tokens ({per:.0f}/record, cap {args.max_words} words)")
    print(
        f"generate {t_gen:.1f} s, tokenise {t_tok:.1f} s, BM25Index.build (tokenise + index) {t_build:.1f} s"
    )
    print(f"{'':34} {'bm25s':>10} {'rank_bm25':>10} {'ratio':>8}")
    for name, a, b in rows:
        print(f"{name:34} {a:10.3f} {b:10.3f} {b / a:7.1f}x")
    compared = len(queries) - common
    print(
        f"top-{args.k} scores identical (bm25s x (k1+1) = BM25Okapi) on {compared - mismatches}/{compared} "
        f"queries; {common} queries had a term in more than half of the records and were not compared"
    )
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak RSS {peak_mb:.0f} MB; python {platform.python_version()}, bm25s {bm25s.__version__}")
    if args.json:
        args.json.write_text(json.dumps({
            "n": args.n, "queries": len(queries), "max_words": args.max_words, "k": args.k,
            "tokens": n_tokens, "compared": compared, "not_compared_common_term": common,
            "generate_s": t_gen, "tokenize_s": t_tok, "build_s": t_build,
            "index_s": {"bm25s": t_idx_bm25s, "rank_bm25": t_idx_rank},
            "query_ms_mean": {"bm25s": ms(lat_bm25s), "rank_bm25": ms(lat_rank)},
            "query_ms_p95": {"bm25s": p95(lat_bm25s), "rank_bm25": p95(lat_rank)},
            "speedup_query": ms(lat_rank) / ms(lat_bm25s), "mismatches": mismatches, "peak_rss_mb": peak_mb,
        }, indent=2) + "\n")  # fmt: skip
    return 1 if mismatches else 0


if __name__ == "__main__":
    sys.exit(main())
