"""Retrieval context: the visits most relevant to the instruction, put back in time order.

For a record longer than the budget, keep-recent truncation keeps whatever is newest even when
the instruction asks about something years old. This policy instead scores every visit of the
record against the instruction with BM25 (MedAlign's BM25Okapi, ``k1=1.5``, ``b=0.75``, through
:class:`clinieval.ehr.retrieval.BM25Index`) and fills the budget with the best visits first; a
visit scoring zero ranks by recency, so an instruction that matches little still gets the newest
history rather than an arbitrary one. The chosen visits are then put back in the order they have
in the record (time order), with the record's opening text kept, so the model reads a shorter
record of the same shape.

A visit is a span of the record text from one ``<visit``/``<encounter`` line to the next (the
same boundaries multi-step refinement cuts at); a record whose text has none is one visit. A
visit larger than the whole budget is skipped; if no visit fits at all the policy falls back to
keep-recent truncation and says so (``info["fallback"]``). The record is never cut silently:
``info`` lists how many visits there were, which were kept (index, BM25 score, tokens) and the
tokens dropped.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial

from clinieval.context.fit import VISIT_LINE, Fitter, FitterPolicy, keep_recent
from clinieval.context.tokenizers import Tokenizer
from clinieval.types import JSON, Sample


def visit_spans(text: str) -> tuple[int, list[tuple[int, int]]]:
    """``(header_end, spans)``: the record's opening text ends at ``header_end`` and each visit is
    ``text[a:b]``; the spans tile ``text[header_end:]`` in order."""
    starts = [m.start() for m in VISIT_LINE.finditer(text)]
    if not starts:
        return 0, [(0, len(text))] if text else []
    ends = [*starts[1:], len(text)]
    return starts[0], list(zip(starts, ends, strict=True))


def _relevance(visits: list[str], query: str) -> list[float]:
    from clinieval.ehr.retrieval import BM25Index, Document

    index = BM25Index.build((Document(str(i), v) for i, v in enumerate(visits)), keep_text=False)
    return [float(s) for s in index.scores(query)]


def retrieve_visits(text: str, tok: Tokenizer, budget: int, *, query: str) -> tuple[str, JSON]:
    """The header and the most relevant visits that fit ``budget`` tokens, in record order."""
    total = tok.count(text)
    info: JSON = {"policy": "retrieval", "budget": budget, "original_tokens": total}
    if total <= budget:
        return text, {**info, "kept_tokens": total, "truncated": False, "whole": True}
    header_end, spans = visit_spans(text)
    header = text[:header_end]
    visits = [text[a:b] for a, b in spans]
    sizes = [tok.count(v) for v in visits]
    scores = _relevance(visits, query) if len(visits) > 1 else [0.0]
    room = budget - tok.count(header)
    chosen: list[int] = []
    for i in sorted(range(len(visits)), key=lambda i: (-scores[i], -i)):
        if sizes[i] <= room:
            chosen.append(i)
            room -= sizes[i]
    if not chosen:
        kept, fallback = keep_recent(text, tok, budget)
        return kept, {**fallback, "policy": "retrieval", "fallback": "keep_recent", "visits": len(visits)}
    chosen.sort()
    kept = header + "".join(visits[i] for i in chosen)
    kept_tokens = tok.count(kept)
    return kept, {
        **info,
        "kept_tokens": kept_tokens,
        "truncated": len(chosen) < len(visits),
        "cut_tokens": total - kept_tokens,
        "visits": len(visits),
        "kept_visits": [
            {"index": i, "score": round(scores[i], 4), "tokens": sizes[i], "start": spans[i][0]}
            for i in chosen
        ],
    }


@dataclass(frozen=True, slots=True)
class RetrievalPolicy(FitterPolicy):
    """BM25 over the record's visits with the instruction as the query, re-sorted by time."""

    KIND = "retrieval"

    def _fitter_for(self, sample: Sample) -> Fitter:
        return partial(retrieve_visits, query=sample.input)
