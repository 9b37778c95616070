"""The knowledge base behind AutoMedEval's knowledge completion chain, and the chain's text steps.

When a judge is unsure it writes a line starting with ``[Question]``; the query is looked up in a
knowledge base built from the user's own documents (books, manuals, guidelines: never the internet)
and the answer is appended as ``According to the Reference, the related knowledge for "…" is "…"``;
at most 3 rounds, then the judge must score (the paper's protocol).

The base is the documents (``.txt``, ``.md``, ``.jsonl`` with a ``text`` field per line; a PDF only
once converted to text) cut into 1,000-character chunks at whitespace, indexed with BM25
(:class:`clinieval.ehr.retrieval.BM25Index`, bm25s), built once, saved as a folder and reused.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.datasets import json_objects, not_utf8
from clinieval.ehr.retrieval import BM25Index, Document
from clinieval.errors import UserError

CHUNK_CHARS = 1000
"""The paper's chunk size, in characters."""

MAX_ROUNDS = 3
"""Lookups a judge may ask for before it must score."""

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


def build_kb(paths: Sequence[Path], out: Path) -> int:
    """Chunk, index and save the knowledge base to ``out`` (a folder); the number of chunks."""
    docs = document_chunks(paths)
    BM25Index.build(docs).save(out)
    return len(docs)


@dataclass(frozen=True, slots=True)
class Lookup:
    """One knowledge lookup, as recorded with the verdict."""

    query: str
    chunk_ids: tuple[str, ...]
    knowledge: str


class KnowledgeBase:
    """A saved base, searched for a judge's ``[Question]`` lines."""

    def __init__(self, folder: Path, top_k: int = 1) -> None:
        self.index = BM25Index.load(folder)
        self.top_k = top_k

    def lookup(self, query: str) -> Lookup:
        hits = self.index.search(query, k=self.top_k)
        texts = [self.index.document(doc_id).text for doc_id, _ in hits]
        return Lookup(
            query, tuple(doc_id for doc_id, _ in hits), " ".join(texts) if texts else "nothing found"
        )


def question_of(reply: str) -> str | None:
    """The judge's knowledge request: the text of its first line starting with ``[Question]``."""
    m = _QUESTION.search(reply)
    return m.group(1).strip().strip('"') if m else None


def knowledge_line(lookup: Lookup) -> str:
    """The line appended to the judge's context (the paper's wording)."""
    return f'According to the Reference, the related knowledge for "{lookup.query}" is "{lookup.knowledge}"'
