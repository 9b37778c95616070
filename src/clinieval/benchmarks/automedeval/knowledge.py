"""The knowledge base behind AutoMedEval's knowledge completion chain, and the chain's text steps.

When a judge is unsure it writes a line starting with ``[Question]``; the query is looked up in a
knowledge base built from the user's own documents (books, manuals, guidelines: never the internet)
and the answer is appended as ``According to the Reference, the related knowledge for "…" is "…"``;
at most 3 rounds, then the judge must score (the paper's protocol).

The base is the documents (``.txt``, ``.md``, ``.jsonl`` with a ``text`` field per line; a PDF only
once converted to text) cut into 1,000-character chunks at whitespace, indexed with BM25
(:class:`clinieval.ehr.retrieval.BM25Index`, bm25s), built once, saved as a folder and reused.

Optionally (``build_kb(..., dense=True)``, ``kb build --dense``) every chunk is also embedded with
the installed all-MiniLM-L6-v2 (the paper embeds its chunks): the unit-length vectors are saved as
``dense.npy`` beside the BM25 files, with ``dense.json`` naming the model and the dimension. BM25
finds a chunk only through shared words; the embedding also finds one that says the same thing in
other words (a judge asking about "high blood pressure" when the manual says "hypertension").
A base is then searched in one of three modes (:data:`MODES`): ``bm25``, ``dense`` (cosine
similarity) or ``hybrid`` (reciprocal rank fusion of the two rankings, k = 60, Cormack et al. 2009),
which needs no tuning of how the two kinds of score compare. The whole folder, BM25 and vectors,
appears complete or not at all. MiniLM reads at most 256 word pieces: a 1,000-character chunk of
prose fits, one dense with numbers and abbreviations may not (11 % of the benchmark's synthetic
clinical chunks), and is embedded from its start; BM25 still indexes all of it.

torch and sentence-transformers are imported only when embeddings are built or searched, so a
BM25-only base never loads them; the model is loaded once per process.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import numpy as np

from clinieval.datasets import json_objects, not_utf8
from clinieval.ehr.retrieval import BM25Index, Document
from clinieval.errors import UserError, one_of
from clinieval.fsutil import staged_dir

CHUNK_CHARS = 1000
"""The paper's chunk size, in characters."""

MAX_ROUNDS = 3
"""Lookups a judge may ask for before it must score."""

Mode = Literal["bm25", "dense", "hybrid"]
MODES: tuple[Mode, ...] = ("bm25", "dense", "hybrid")

RRF_K = 60
"""Reciprocal rank fusion's constant: a chunk at rank r (from 1) in a list earns 1 / (60 + r)."""

RRF_DEPTH = 100
"""How far down each ranking hybrid search fuses (at least ``top_k``): deep enough that a chunk
ranked well by one retriever and moderately by the other gets credit from both."""

DENSE_VECTORS = "dense.npy"
DENSE_MANIFEST = "dense.json"
DENSE_FORMAT = "clinieval-kb-dense"
DENSE_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"

EMBED_BATCH = 8
"""Chunks per forward pass. On a 2-core CPU, 1,000-character chunks embedded at ~50 chunks/s in
batches of 8 against ~43 in 32 and ~37 in 64 (smaller activations stay in cache)."""

TEXT_SUFFIXES = (".txt", ".md")

_QUESTION = re.compile(r"^[ \t]*\[Question\][ \t]*:?[ \t]*(\S.*?)[ \t]*$", re.MULTILINE)
"""A line starting with ``[Question]`` and holding the query on the same line."""


def chunks(text: str, size: int = CHUNK_CHARS) -> list[str]:
    """``text`` in pieces of at most ``size`` characters, cut at whitespace where a piece allows
    (a word longer than ``size`` is cut inside), each piece stripped; empty text gives none."""
    out: list[str] = []
    rest = text.strip()
    while rest:
        if len(rest) <= size:
            out.append(rest)
            break
        cut = rest.rfind(" ", 0, size + 1)
        cut = max(cut, rest.rfind("\n", 0, size + 1))
        if cut <= 0:
            cut = size
        out.append(rest[:cut].strip())
        rest = rest[cut:].strip()
    return [c for c in out if c]


def _texts(path: Path) -> Iterator[tuple[str, str]]:
    """(source, text) of one document file."""
    suffix = path.suffix.lower()
    if suffix in TEXT_SUFFIXES:
        raw = path.read_bytes()
        try:
            yield str(path), raw.decode("utf-8-sig")
        except UnicodeDecodeError as e:
            raise not_utf8(path, raw.count(b"\n", 0, e.start) + 1) from None
    elif suffix == ".jsonl":
        for where, obj in json_objects(path):
            text = obj.get("text")
            if not isinstance(text, str):
                raise UserError(f"{where}: field 'text' must be the document's text")
            yield where, text
    elif suffix == ".pdf":
        raise UserError(f"{path}: a PDF must be converted to text first (e.g. pdftotext), then given as .txt")
    else:
        raise UserError(f"{path}: expected .txt, .md or .jsonl documents")


def _files(paths: Sequence[Path]) -> list[Path]:
    out: list[Path] = []
    for p in paths:
        if p.is_dir():
            out += sorted(
                f for f in p.rglob("*") if f.is_file() and f.suffix.lower() in (*TEXT_SUFFIXES, ".jsonl")
            )
        elif p.is_file():
            out.append(p)
        else:
            raise UserError(f"{p}: no such file or folder")
    if not out:
        raise UserError(f"no .txt, .md or .jsonl documents in {', '.join(map(str, paths))}")
    return out


def document_chunks(paths: Sequence[Path], size: int = CHUNK_CHARS) -> list[Document]:
    """Every document under ``paths`` cut into chunks, ids ``<source>#<n>`` in reading order."""
    docs: list[Document] = []
    for f in _files(paths):
        for source, text in _texts(f):
            docs += [
                Document(f"{source}#{n}", c, None, {"source": source})
                for n, c in enumerate(chunks(text, size))
            ]
    if not docs:
        raise UserError(f"the documents in {', '.join(map(str, paths))} hold no text")
    return docs


def build_kb(paths: Sequence[Path], out: Path, *, dense: bool = False, progress: bool = False) -> int:
    """Chunk, index and save the knowledge base to ``out`` (a folder); the number of chunks.

    With ``dense`` every chunk is embedded too (minutes for thousands of chunks on a CPU; shown
    with a progress bar when ``progress``). Everything is computed before anything is written, and
    the folder replaces an older one only once complete.
    """
    docs = document_chunks(paths)
    index = BM25Index.build(docs)
    vectors = embed([d.text for d in docs], progress=progress) if dense else None
    with staged_dir(out, "the knowledge base folder") as tmp:
        index.save(tmp)  # the BM25 files at the top of the folder, as a BM25-only base has them
        if vectors is not None:
            _save_dense(tmp, vectors)
    return len(docs)


# ---------------------------------------------------------------------------------------------
# Dense embeddings
# ---------------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=1)
def _encoder() -> Any:
    """all-MiniLM-L6-v2 from the installed package, on CPU, loaded once per process (seconds)."""
    from sentence_transformers import SentenceTransformer
    from transformers.utils import logging as hf_logging

    from clinieval.scoring.text.embedding import default_bertscore_model

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:  # the installed folder only: never the model hub
        return SentenceTransformer(str(default_bertscore_model()), device="cpu", local_files_only=True)
    finally:
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


def embed(texts: Sequence[str], *, progress: bool = False) -> np.ndarray:
    """Unit-length float32 embeddings of ``texts`` (one row each), so a dot product is the cosine."""
    from clinieval.engine.runner import ProgressBar

    model = _encoder()
    parts: list[np.ndarray] = []
    bar = ProgressBar(progress and len(texts) > EMBED_BATCH, len(texts), 0, "embed chunks")
    with bar:
        for start in range(0, len(texts), EMBED_BATCH):
            batch = list(texts[start : start + EMBED_BATCH])
            parts.append(_encode(model, batch))
            for _ in batch:
                bar.advance()
    if not parts:
        return np.zeros((0, 0), dtype=np.float32)
    return np.concatenate(parts).astype(np.float32, copy=False)


def embed_query(query: str) -> np.ndarray:
    """The unit-length embedding of one query, computed on one torch thread.

    A query of a few words gives a second thread nothing to do, and when the other core is busy
    (a judge's model server on the same machine) torch's waiting threads make it far slower: on a
    2-core machine under load, 9-15 ms on one thread against ~550 ms on two. The thread count is
    put back afterwards, so nothing else in the process is affected.
    """
    import torch

    model = _encoder()
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return np.asarray(_encode(model, [query])[0], dtype=np.float32)
    finally:
        torch.set_num_threads(before)


def _encode(model: Any, texts: list[str]) -> np.ndarray:
    out = model.encode(
        texts,
        batch_size=EMBED_BATCH,
        normalize_embeddings=True,
        convert_to_numpy=True,
        show_progress_bar=False,
    )
    return np.asarray(out, dtype=np.float32)


def _save_dense(folder: Path, vectors: np.ndarray) -> None:
    with (folder / DENSE_VECTORS).open("wb") as f:
        np.save(f, vectors, allow_pickle=False)
    manifest = {
        "format": DENSE_FORMAT,
        "version": 1,
        "model": DENSE_MODEL_NAME,
        "dimension": int(vectors.shape[1]),
        "n_chunks": int(vectors.shape[0]),
        "normalized": True,
    }
    # plain writes: ``folder`` is the staged copy, published whole or not at all
    (folder / DENSE_MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")


def _load_dense(folder: Path, n_chunks: int) -> np.ndarray:
    """The saved vectors, checked against the manifest and the BM25 index they sit beside."""
    if not (folder / DENSE_MANIFEST).is_file():
        raise UserError(
            f"the knowledge base at {folder} was built without dense embeddings; rebuild it with "
            f"`clinieval automedeval kb build DOCS... --out {folder} --dense` to search it by meaning"
        )
    try:
        manifest = json.loads((folder / DENSE_MANIFEST).read_text(encoding="utf-8"))
        if manifest.get("format") != DENSE_FORMAT or manifest.get("model") != DENSE_MODEL_NAME:
            raise ValueError(f"it holds {manifest.get('format')!r} vectors of {manifest.get('model')!r}")
        vectors = np.load(folder / DENSE_VECTORS, allow_pickle=False)
        want = (n_chunks, int(manifest["dimension"]))
        if vectors.shape != want or int(manifest["n_chunks"]) != n_chunks:
            raise ValueError(f"expected {want[0]} x {want[1]} vectors, found {vectors.shape}")
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise UserError(
            f"the dense embeddings in {folder} are unreadable or damaged ({exc}); rebuild with --dense"
        ) from exc
    return np.asarray(vectors, dtype=np.float32)


def rrf(rankings: Sequence[Sequence[int]], k: int = RRF_K) -> list[tuple[int, float]]:
    """Reciprocal rank fusion: every item's sum over the rankings of ``1 / (k + rank)`` (rank from 1;
    nothing from a ranking that lacks it), best first, ties in ascending item order (for chunks:
    reading order)."""
    fused: dict[int, float] = {}
    for ranking in rankings:
        for rank, item in enumerate(ranking, 1):
            fused[item] = fused.get(item, 0.0) + 1.0 / (k + rank)
    return sorted(fused.items(), key=lambda kv: (-kv[1], kv[0]))


@dataclass(frozen=True, slots=True)
class Lookup:
    """One knowledge lookup, as recorded with the verdict (``mode``: how the base was searched)."""

    query: str
    chunk_ids: tuple[str, ...]
    knowledge: str
    mode: Mode = "bm25"


class KnowledgeBase:
    """A saved base, searched for a judge's ``[Question]`` lines by ``mode`` (:data:`MODES`).

    ``dense`` and ``hybrid`` need a base built with embeddings (a clear error otherwise); their
    vectors are read when the base is opened, the embedding model at the first lookup.
    """

    def __init__(self, folder: Path, top_k: int = 1, mode: str = "bm25") -> None:
        self.mode: Mode = one_of(mode, MODES, "knowledge base search mode")
        if top_k < 1:
            raise UserError(f"top_k must be at least 1, got {top_k}")
        self.index = BM25Index.load(folder)
        self.top_k = top_k
        self.vectors = _load_dense(Path(folder), len(self.index)) if self.mode != "bm25" else None
        self._ids = self.index.ids
        self._pos = {doc_id: i for i, doc_id in enumerate(self._ids)}

    def bm25_ranking(self, query: str, depth: int) -> list[int]:
        """Positions of the ``depth`` best chunks by BM25 (chunks sharing no word are left out)."""
        return [self._pos[doc_id] for doc_id, _ in self.index.search(query, k=depth)]

    def dense_ranking(self, query: str, depth: int) -> list[tuple[int, float]]:
        """(position, cosine) of the ``depth`` chunks nearest ``query``, best first, ties in reading order."""
        if self.vectors is None:
            raise UserError("this knowledge base was opened for BM25 only; open it with mode='dense'")
        sims = self.vectors @ embed_query(query)
        order = np.argsort(-sims, kind="stable")[:depth]
        return [(int(i), float(sims[i])) for i in order]

    def ranking(self, query: str) -> list[int]:
        """Positions of the ``top_k`` chunks for ``query`` in this base's mode, best first."""
        if self.mode == "bm25":
            return self.bm25_ranking(query, self.top_k)
        if self.mode == "dense":
            return [i for i, _ in self.dense_ranking(query, self.top_k)]
        depth = max(self.top_k, RRF_DEPTH)
        both = [self.bm25_ranking(query, depth), [i for i, _ in self.dense_ranking(query, depth)]]
        return [i for i, _ in rrf(both)][: self.top_k]

    def lookup(self, query: str) -> Lookup:
        hits = [self._ids[i] for i in self.ranking(query)]
        texts = [self.index.document(doc_id).text for doc_id in hits]
        return Lookup(query, tuple(hits), " ".join(texts) if texts else "nothing found", self.mode)


def question_of(reply: str) -> str | None:
    """The judge's knowledge request: the text of its first line starting with ``[Question]``."""
    m = _QUESTION.search(reply)
    return m.group(1).strip().strip('"') if m else None


def knowledge_line(lookup: Lookup) -> str:
    """The line appended to the judge's context (the paper's wording)."""
    return f'According to the Reference, the related knowledge for "{lookup.query}" is "{lookup.knowledge}"'
