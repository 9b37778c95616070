"""BM25 retrieval over patient records: visits, snippets or whole patients.

The caller decides what a document is: :func:`visit_documents` gives one document per visit (with
its start time), :func:`patient_document` one per patient, :func:`snippet_documents` cuts any
document into fixed-size word windows. :class:`BM25Index` scores them with BM25 as MedAlign
used it (BM25Okapi: ``k1=1.5``, ``b=0.75``), computed by ``bm25s`` with ``method="robertson"``.

bm25s's Robertson scores are rank_bm25's ``BM25Okapi`` scores divided by ``k1 + 1`` (bm25s leaves
the constant ``(k1 + 1)`` out of the term-frequency factor), so the ranking is the same, as long
as no query term occurs in more than half of the documents: for such terms the Robertson idf is
negative, bm25s clamps it to 0 and rank_bm25 replaces it with ``0.25 *`` the mean idf.

Tokenisation (:func:`tokenize`) is deliberately plain so any other BM25 implementation can be
fed the same tokens: lower-case the text, then take words as runs of letters and digits that may
be joined by an inner ``.`` or ``-`` (``E11.9``, ``2345-7``, ``7.2`` and ``follow-up`` stay one
token; ``mg/dL`` is two). Optionally drop :data:`ENGLISH_STOPWORDS`.

An index is saved as a folder: bm25s's arrays under ``bm25s/``, the documents' ids, start times,
metadata (and text, unless left out) in ``documents.jsonl``, and ``index.json`` with the settings.
The folder is written under a temporary name and renamed into place.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from clinieval.ehr.timeline import Event, Note, Timeline
from clinieval.errors import UserError
from clinieval.fsutil import staged_dir

WORD_RE = re.compile(r"[^\W_]+(?:[.\-][^\W_]+)*")

# A short general English list (articles, pronouns, auxiliaries, prepositions, conjunctions).
# Clinical words such as "no", "not", "without", "left", "right" are kept on purpose: they change
# what a record says.
_STOPWORD_TEXT = """
a an the and or but if then than so as of at by for from in into on onto to with about over under
after before between during through up down out off again further once here there when where why
how all any both each few more most other some such only own same too very can will just should
would could may might must shall do does did doing done be is am are was were been being have has
had having this that these those i me my myself we our ours you your yours he him his she her hers
it its they them their theirs what which who whom whose s t
"""
ENGLISH_STOPWORDS: frozenset[str] = frozenset(_STOPWORD_TEXT.split())

FORMAT = "clinieval-bm25"
FORMAT_VERSION = 1


def tokenize(text: str, *, stopwords: bool = False) -> list[str]:
    """Lower-cased word tokens of ``text`` (see the module docstring); drop stopwords if asked."""
    tokens = WORD_RE.findall(text.lower())
    if stopwords:
        return [t for t in tokens if t not in ENGLISH_STOPWORDS]
    return tokens


@dataclass(frozen=True, slots=True)
class Document:
    """A retrievable unit: an id, its text, when it starts (for chronological order) and metadata."""

    doc_id: str
    text: str
    start: datetime | None = None
    meta: dict[str, str] = field(default_factory=dict)


# ---------------------------------------------------------------------------------------------
# Documents from timelines
# ---------------------------------------------------------------------------------------------


def _item_text(item: Event | Note) -> str:
    when = "" if item.time is None else f"{item.time:%Y-%m-%d %H:%M} "
    if isinstance(item, Note):
        return f"{when}{item.type}\n{item.text}"
    return f"{when}{item.domain} {item.code_line()}"


def visit_documents(tl: Timeline) -> list[Document]:
    """One document per visit: a header line, then the visit's events and notes in time order.

    Ids are ``"<person_id>/<visit_id>"`` and ``start`` is the visit start. Events and notes that
    belong to no visit (or to a visit id the timeline does not list) are gathered into one more
    document, ``"<person_id>/no-visit"``, dated by its earliest item.
    """
    pid = tl.person.person_id
    known = {v.visit_id for v in tl.visits}
    by_visit: dict[str, list[str]] = {v.visit_id: [] for v in tl.visits}
    loose: list[Event | Note] = []
    for item in tl.items():
        if item.visit_id is not None and item.visit_id in known:
            by_visit[item.visit_id].append(_item_text(item))
        else:
            loose.append(item)
    docs = []
    for v in tl.visits:
        when = "" if v.start is None else f" {v.start:%Y-%m-%d %H:%M}"
        until = "" if v.end is None else f" to {v.end:%Y-%m-%d %H:%M}"
        text = "\n".join([f"{v.type}{when}{until}", *by_visit[v.visit_id]])
        docs.append(
            Document(f"{pid}/{v.visit_id}", text, v.start, {"person_id": pid, "visit_id": v.visit_id})
        )
    if loose:
        start = min((x.time for x in loose if x.time is not None), default=None)
        text = "\n".join(_item_text(x) for x in loose)
        docs.append(Document(f"{pid}/no-visit", text, start, {"person_id": pid}))
    return docs


def patient_document(tl: Timeline) -> Document:
    """The whole record of one patient as one document (id = person id), its visits in order."""
    parts = [d.text for d in visit_documents(tl)]
    start = min((v.start for v in tl.visits if v.start is not None), default=None)
    return Document(tl.person.person_id, "\n\n".join(parts), start, {"person_id": tl.person.person_id})


def snippets(text: str, size: int = 200, overlap: int = 0) -> list[str]:
    """Cut ``text`` into windows of ``size`` whitespace-separated words, ``overlap`` words shared
    between neighbours. Each snippet is a verbatim slice of ``text`` (line breaks kept)."""
    if size < 1 or not 0 <= overlap < size:
        raise UserError(f"snippet size must be at least 1 and overlap in [0, size), got {size}, {overlap}")
    spans = [m.span() for m in re.finditer(r"\S+", text)]
    out = []
    step = size - overlap
    for i in range(0, len(spans), step):
        window = spans[i : i + size]
        out.append(text[window[0][0] : window[-1][1]])
        if i + size >= len(spans):
            break
    return out


def snippet_documents(doc: Document, size: int = 200, overlap: int = 0) -> list[Document]:
    """:func:`snippets` of a document, ids ``"<doc_id>#<n>"`` (n from 0), start and metadata kept."""
    return [
        Document(f"{doc.doc_id}#{n}", s, doc.start, {**doc.meta, "parent": doc.doc_id})
        for n, s in enumerate(snippets(doc.text, size, overlap))
    ]


def in_time_order(docs: Iterable[Document]) -> list[Document]:
    """Documents sorted by start time (undated last, ties by id): the order for a prompt."""
    return sorted(docs, key=lambda d: (d.start is None, d.start or datetime.min, d.doc_id))


# ---------------------------------------------------------------------------------------------
# The index
# ---------------------------------------------------------------------------------------------


def _doc_json(d: Document, keep_text: bool) -> str:
    row: dict[str, Any] = {"id": d.doc_id, "start": None if d.start is None else d.start.isoformat()}
    if d.meta:
        row["meta"] = d.meta
    if keep_text:
        row["text"] = d.text
    return json.dumps(row, ensure_ascii=False)


def _token_ids(tokens: list[str], vocab: dict[str, int]) -> np.ndarray:
    """A document's tokens as vocabulary ids (4 bytes each), adding new tokens to ``vocab``."""
    return np.fromiter((vocab.setdefault(t, len(vocab)) for t in tokens), dtype=np.int32, count=len(tokens))


class _TokenIds(list):  # type: ignore[type-arg]
    """Every document's token ids as int32 arrays, handed to bm25s one document at a time as the
    Python list it expects. bm25s takes ids with their vocabulary only as a (list, dict) pair, and
    reads each document in a loop, so only one document is ever a list of Python ints."""

    def __iter__(self) -> Iterator[list[int]]:
        for ids in super().__iter__():
            yield ids.tolist()


class BM25Index:
    """A BM25 (Okapi/Robertson) index over documents with ids; build, search, save, load.

    ``search`` returns ``(doc_id, score)`` best first; documents whose score is 0 (they share no
    informative term with the query) are not returned. Ties are broken by indexing order.
    Scores are computed in float64 so they match other implementations to double precision.
    """

    def __init__(
        self, retriever: Any, docs: list[Document], *, k1: float, b: float, stopwords: bool, keep_text: bool
    ) -> None:
        self._retriever = retriever
        self._docs = docs
        self._pos = {d.doc_id: i for i, d in enumerate(docs)}
        self.k1 = k1
        self.b = b
        self.stopwords = stopwords
        self.keep_text = keep_text

    # -- building --------------------------------------------------------------------------

    @classmethod
    def build(
        cls,
        docs: Iterable[Document],
        *,
        k1: float = 1.5,
        b: float = 0.75,
        stopwords: bool = False,
        keep_text: bool = True,
    ) -> BM25Index:
        """Index ``docs`` (ids must be unique). ``keep_text=False`` keeps only ids, times and metadata
        in memory and on disk (the caller holds the text elsewhere)."""
        import bm25s

        kept: list[Document] = []
        ids = _TokenIds()
        vocab: dict[str, int] = {}
        seen: set[str] = set()
        for d in docs:
            if d.doc_id in seen:
                raise UserError(f"duplicate document id {d.doc_id!r}: every document needs its own id")
            seen.add(d.doc_id)
            ids.append(_token_ids(tokenize(d.text, stopwords=stopwords), vocab))
            kept.append(d if keep_text else Document(d.doc_id, "", d.start, d.meta))
        if not kept:
            raise UserError("nothing to index: the document list is empty")
        retriever = bm25s.BM25(k1=k1, b=b, method="robertson", idf_method="robertson", dtype="float64")
        # token ids and their vocabulary rather than token lists: bm25s would hold every token as a
        # string and again as an int (about 90 bytes a token, 18 GB for 100,000 long records).
        # Documents without a single token get a vocabulary of the empty token (no query has it),
        # since bm25s cannot add it to an empty one; their average length is then 0 / 0
        with np.errstate(invalid="ignore") if not vocab else contextlib.nullcontext():
            retriever.index((ids, vocab or {"": 0}), show_progress=False)
        return cls(retriever, kept, k1=k1, b=b, stopwords=stopwords, keep_text=keep_text)

    def __len__(self) -> int:
        return len(self._docs)

    @property
    def ids(self) -> list[str]:
        return [d.doc_id for d in self._docs]

    def document(self, doc_id: str) -> Document:
        """The indexed document (its text is empty when the index was built with ``keep_text=False``)."""
        try:
            return self._docs[self._pos[doc_id]]
        except KeyError:
            raise KeyError(f"no document {doc_id!r} in this index") from None

    # -- searching -------------------------------------------------------------------------

    def scores(self, query: str) -> np.ndarray:
        """BM25 score of every document for ``query``, in indexing order (float64)."""
        vocab: dict[str, int] = self._retriever.vocab_dict
        ids = [vocab[t] for t in tokenize(query, stopwords=self.stopwords) if t in vocab]
        if not ids:
            return np.zeros(len(self._docs), dtype=np.float64)
        return np.asarray(self._retriever.get_scores_from_ids(ids), dtype=np.float64)

    def search(self, query: str, k: int = 5) -> list[tuple[str, float]]:
        """The ``k`` best documents for ``query`` as ``(doc_id, score)``, best first."""
        if k < 1:
            return []
        s = self.scores(query)
        n = len(s)
        if k < n:
            top = np.argpartition(-s, k - 1)[:k]
            # widen to every document tied with the k-th score, so ties break by index order
            kth = s[top].min()
            top = np.flatnonzero(s >= kth)
        else:
            top = np.arange(n)
        order = sorted(top.tolist(), key=lambda i: (-s[i], i))[:k]
        return [(self._docs[i].doc_id, float(s[i])) for i in order if s[i] > 0]

    def search_in_time_order(self, query: str, k: int = 5) -> list[Document]:
        """The ``k`` best documents, then re-sorted chronologically (for a prompt)."""
        return in_time_order(self.document(doc_id) for doc_id, _ in self.search(query, k))

    # -- persistence -----------------------------------------------------------------------

    def save(self, folder: str | Path) -> Path:
        """Write the index to ``folder`` (replacing an older index there) atomically."""
        out = Path(folder)
        with staged_dir(out, "the index folder") as tmp:
            self._retriever.save(str(tmp / "bm25s"), show_progress=False)
            with (tmp / "documents.jsonl").open("w", encoding="utf-8") as f:
                for d in self._docs:
                    f.write(_doc_json(d, self.keep_text) + "\n")
            manifest = {
                "format": FORMAT,
                "version": FORMAT_VERSION,
                "method": "robertson",
                "k1": self.k1,
                "b": self.b,
                "stopwords": self.stopwords,
                "token_pattern": WORD_RE.pattern,
                "keep_text": self.keep_text,
                "n_docs": len(self._docs),
            }
            (tmp / "index.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
        return out

    @classmethod
    def load(cls, folder: str | Path, *, mmap: bool = False) -> BM25Index:
        """Read an index written by :meth:`save`; ``UserError`` if it is missing or damaged."""
        import bm25s

        path = Path(folder)
        if not path.is_dir():
            raise UserError(f"no BM25 index at {path}: the folder does not exist")
        try:
            manifest = json.loads((path / "index.json").read_text(encoding="utf-8"))
            if manifest.get("format") != FORMAT:
                raise ValueError(f"format is {manifest.get('format')!r}, not {FORMAT!r}")
            if manifest.get("version") != FORMAT_VERSION:
                raise ValueError(f"version {manifest.get('version')!r} is not supported")
            if manifest.get("token_pattern") != WORD_RE.pattern:
                raise ValueError("it was built with a different tokeniser")
            docs = list(_read_docs(path / "documents.jsonl"))
            retriever = bm25s.BM25.load(str(path / "bm25s"), mmap=mmap, show_progress=False)
            n = int(manifest["n_docs"])
            if len(docs) != n or int(retriever.scores["num_docs"]) != n:
                raise ValueError(
                    f"it should hold {n} documents, found {len(docs)} ids and "
                    f"{retriever.scores['num_docs']} indexed"
                )
            if retriever.method != "robertson":
                raise ValueError(f"bm25s method is {retriever.method!r}")
        except UserError:
            raise
        except (OSError, ValueError, KeyError, TypeError) as exc:
            raise UserError(f"the BM25 index at {path} is unreadable or damaged ({exc}); rebuild it") from exc
        return cls(
            retriever,
            docs,
            k1=float(manifest["k1"]),
            b=float(manifest["b"]),
            stopwords=bool(manifest["stopwords"]),
            keep_text=bool(manifest.get("keep_text", True)),
        )


def _read_docs(path: Path) -> Iterator[Document]:
    with path.open(encoding="utf-8") as f:
        for line in f:
            row = json.loads(line)
            start = row.get("start")
            yield Document(
                str(row["id"]),
                row.get("text", ""),
                None if start is None else datetime.fromisoformat(start),
                dict(row.get("meta", {})),
            )
