"""Fitting a record into a token budget, token-exact, and the context policies built on it.

Every cut is made at a token boundary of one tokenisation of the whole record, then mapped back
to a character offset of the ORIGINAL text (the kept text is always an exact substring, never a
decoded approximation) and verified by re-encoding the kept text alone. Tokenizers are not always
stable under decode→encode, so when the kept text re-encodes over budget the cut moves by the
excess and is verified again; when decoding does not reproduce the text at all (normalising
tokenizers), a galloping search over character offsets that only ever encodes about a budget's
worth of text takes over.

Policies (MedAlign keeps the most recent tokens):

- :func:`keep_recent` drops the oldest tokens and keeps the end;
- :func:`keep_oldest` keeps the beginning;
- :func:`drop_if_over` keeps the record whole or drops the sample (``info["dropped"]``);
- :func:`chunk_text` splits the record into in-order pieces of at most N tokens for multi-step
  refinement, cutting at visit boundaries, else event boundaries, else mid-text.

The ``*Policy`` classes adapt these to :class:`clinieval.task.ContextPolicy`.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import ClassVar, Literal

from clinieval.context.budget import DEFAULT_RESERVE, Budget, compute_budget, prompt_counter
from clinieval.context.tokenizers import Tokenizer, tokenizer_for_gguf, tokenizer_from_spec
from clinieval.errors import UserError
from clinieval.models.base import Model
from clinieval.task import PromptTemplate
from clinieval.types import JSON, Message, Sample

_TRIES = 8  # decode/verify rounds before the search fallback (a split UTF-8 character costs one each)

Fitter = Callable[[str, Tokenizer, int], tuple[str, JSON]]


def _search_suffix(text: str, tok: Tokenizer, budget: int) -> int:
    """Smallest-found start offset whose suffix encodes within ``budget`` (only ever encoding
    suffixes about twice the kept size)."""
    n = len(text)
    fits, width = 0, max(64, budget * 4)
    while True:
        width = min(width, n)
        if tok.count(text[n - width :]) <= budget:
            if width == n:
                return 0
            fits, width = width, width * 2
        else:
            over = width
            break
    while over - fits > 1:
        mid = (fits + over) // 2
        if tok.count(text[n - mid :]) <= budget:
            fits = mid
        else:
            over = mid
    return n - fits


def _search_prefix(text: str, tok: Tokenizer, budget: int) -> int:
    """Largest-found end offset whose prefix encodes within ``budget``."""
    n = len(text)
    fits, width = 0, max(64, budget * 4)
    while True:
        width = min(width, n)
        if tok.count(text[:width]) <= budget:
            if width == n:
                return n
            fits, width = width, width * 2
        else:
            over = width
            break
    while over - fits > 1:
        mid = (fits + over) // 2
        if tok.count(text[:mid]) <= budget:
            fits = mid
        else:
            over = mid
    return fits


def suffix_start(text: str, tok: Tokenizer, ids: Sequence[int], budget: int) -> tuple[int, int]:
    """``(offset, tokens)``: where the kept end of ``text`` starts, given ``ids = tok.encode(text)``,
    and ``tok.count(text[offset:])``, which is always ``<= budget``."""
    if budget <= 0:
        return len(text), 0
    n = len(ids)
    if n <= budget:
        return 0, n
    k = budget
    for _ in range(_TRIES):
        if k <= 0:
            return len(text), 0
        piece = tok.decode(list(ids[n - k :]))
        if not text.endswith(piece):
            k -= 1  # the first kept token splits a character (U+FFFD) or does not round-trip
            continue
        start = len(text) - len(piece)
        got = tok.count(text[start:])
        if got <= budget:
            return start, got
        k -= got - budget
    start = _search_suffix(text, tok, budget)
    return start, tok.count(text[start:])


def prefix_end(text: str, tok: Tokenizer, ids: Sequence[int], budget: int) -> tuple[int, int]:
    """``(offset, tokens)``: where the kept beginning of ``text`` ends, given
    ``ids = tok.encode(text)``, and ``tok.count(text[:offset])``, which is always ``<= budget``."""
    if budget <= 0:
        return 0, 0
    if len(ids) <= budget:
        return len(text), len(ids)
    k = budget
    for _ in range(_TRIES):
        if k <= 0:
            return 0, 0
        piece = tok.decode(list(ids[:k]))
        if text.startswith(piece):
            end = len(piece)
        elif text[:1].isspace() and text.startswith(piece, 1):
            end = 1 + len(piece)  # SentencePiece decoders drop the first token's leading space
        else:
            k -= 1
            continue
        got = tok.count(text[:end])
        if got <= budget:
            return end, got
        k -= got - budget
    end = _search_prefix(text, tok, budget)
    return end, tok.count(text[:end])


def keep_recent(text: str, tok: Tokenizer, budget: int) -> tuple[str, JSON]:
    """Keep the newest end of ``text`` within ``budget`` tokens (MedAlign's rule)."""
    ids = tok.encode(text)
    start, kept_tokens = suffix_start(text, tok, ids, budget)
    kept = text[start:]
    return kept, {
        "policy": "keep_recent",
        "budget": budget,
        "original_tokens": len(ids),
        "kept_tokens": kept_tokens,
        "truncated": start > 0,
        "cut_tokens": len(ids) - kept_tokens,
        "original_chars": len(text),
        "first_kept_char": start,
    }


def keep_oldest(text: str, tok: Tokenizer, budget: int) -> tuple[str, JSON]:
    """Keep the oldest beginning of ``text`` within ``budget`` tokens."""
    ids = tok.encode(text)
    end, kept_tokens = prefix_end(text, tok, ids, budget)
    kept = text[:end]
    return kept, {
        "policy": "keep_oldest",
        "budget": budget,
        "original_tokens": len(ids),
        "kept_tokens": kept_tokens,
        "truncated": end < len(text),
        "cut_tokens": len(ids) - kept_tokens,
        "original_chars": len(text),
        "first_kept_char": 0,
        "kept_chars": end,
    }


def drop_if_over(text: str, tok: Tokenizer, budget: int) -> tuple[str, JSON]:
    """Keep ``text`` whole if it fits; otherwise return ``""`` with ``info["dropped"] = True``."""
    n = tok.count(text)
    dropped = n > budget
    info: JSON = {
        "policy": "drop",
        "budget": budget,
        "original_tokens": n,
        "kept_tokens": 0 if dropped else n,
        "truncated": False,
        "dropped": dropped,
    }
    if dropped:
        info["reason"] = f"record has {n} tokens, over the budget of {budget}"
    return ("" if dropped else text), info


# Visit boundaries of both MedAlign dialects, at the start of their line.
VISIT_LINE = re.compile(r"^[ \t]*<(?:visit|encounter)\b", re.MULTILINE)
CutKind = Literal["visit", "event", "mid", "end"]


def _last_visit(text: str, lo: int, hi: int) -> int | None:
    last = None
    for m in VISIT_LINE.finditer(text, lo, min(len(text), hi + 64)):
        if lo < m.start() <= hi:
            last = m.start()
    return last


def _last_event(text: str, lo: int, hi: int) -> int | None:
    """Latest line start or tag-to-tag position in ``(lo, hi]``."""
    nl = text.rfind("\n", lo, hi)
    tag = text.rfind("><", lo, hi)
    best = max(nl, tag) + 1
    return best if best > lo else None


def chunk_spans(
    text: str, tok: Tokenizer, size: int, *, min_fill: float = 0.5, total_tokens: int | None = None
) -> list[tuple[int, int, int, CutKind]]:
    """``(start, end, tokens, cut)`` of consecutive pieces of ``text`` of at most ``size`` tokens.

    Each piece ends at the last visit boundary that keeps it at least ``min_fill`` of the largest
    piece that would fit, else at the last event boundary (line start, ``><``) under the same
    condition, else mid-text at a token boundary.
    """
    if size <= 0:
        raise ValueError(f"chunk size must be positive, not {size}")
    n = len(text)
    total = tok.count(text) if total_tokens is None else total_tokens
    if total <= size:
        return [(0, n, total, "end")]
    chars_per_token = n / max(1, total)
    spans: list[tuple[int, int, int, CutKind]] = []
    start = 0
    while start < n:
        width = int(size * chars_per_token * 1.25) + 64
        while True:
            stop = min(n, start + width)
            window = text[start:stop]
            ids = tok.encode(window)
            if len(ids) > size or stop == n:
                break
            width *= 2
        if stop == n and len(ids) <= size:
            spans.append((start, n, len(ids), "end"))
            break
        fit_chars, fit_tokens = prefix_end(window, tok, ids, size)
        limit = start + fit_chars
        if limit <= start:
            raise ValueError(f"chunk size {size} is too small for the text at character {start}")
        floor = start + (limit - start) * min_fill
        end, got = limit, -1
        kind_: CutKind = "mid"
        visit = _last_visit(text, start, limit)
        event = _last_event(text, start, limit)
        candidates: list[tuple[int | None, CutKind]] = [(visit, "visit"), (event, "event")]
        for cut, kind in candidates:
            if cut is not None and cut >= floor and cut > start:
                n_cut = tok.count(text[start:cut])
                if n_cut <= size:
                    end, got, kind_ = cut, n_cut, kind
                    break
        if got < 0:
            got = fit_tokens
        spans.append((start, end, got, kind_))
        start = end
    return spans


def chunk_text(text: str, tok: Tokenizer, size: int, *, min_fill: float = 0.5) -> tuple[list[str], JSON]:
    """Split ``text`` into in-order pieces of at most ``size`` tokens; ``"".join(pieces) == text``."""
    total = tok.count(text)
    spans = chunk_spans(text, tok, size, min_fill=min_fill, total_tokens=total)
    pieces = [text[a:b] for a, b, _, _ in spans]
    return pieces, {
        "policy": "chunk",
        "chunk_tokens": size,
        "original_tokens": total,
        "truncated": False,
        "n_chunks": len(spans),
        "chunks": [{"start": a, "end": b, "tokens": t, "cut": k} for a, b, t, k in spans],
    }


# --- ContextPolicy adapters -------------------------------------------------------------------

NO_TOKENIZER = (
    "its tokenizer cannot be read here to count the record's token budget; pass --tokenizer "
    "(tokenizer=), e.g. tiktoken:cl100k_base, hf:/path/tokenizer.json or gguf:/path/model.gguf"
)
NO_CONTEXT = (
    "the server did not report its context size; pass --max-context N (max_context=) "
    "(llama.cpp's server defaults to 2048; use the --n_ctx it was started with)"
)
_MORE_CONTEXT = {
    "--max-context": "pass a larger --max-context (max_context=)",
    "--n-ctx": "pass a larger --n-ctx, or shorten the prompt",
    "server": "start the server with a larger context, or shorten the prompt",
}
"""How to make room, by where the context size came from (see :func:`reported_context`)."""


def own_tokenizer(model: Model) -> Tokenizer | None:
    """The model's own tokenizer where it can be read locally (a GGUF file), else None."""
    path = getattr(model, "path", None)
    if isinstance(path, Path) and path.suffix == ".gguf":
        return tokenizer_for_gguf(path)
    return None


def model_tokenizer(model: Model) -> Tokenizer:
    """The model's own tokenizer, or one error naming the flag that sets another."""
    tok = own_tokenizer(model)
    if tok is None:
        raise UserError(f"model {model.name}: {NO_TOKENIZER}")
    return tok


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def reported_context(model: Model) -> tuple[int, str] | None:
    """The model's own context size and where it comes from: an embedded model's ``n_ctx``
    (``--n-ctx``), or what a server reported about itself (``context_length``, known after
    ``check()``); None when neither is known."""
    n_ctx = _positive(getattr(model, "n_ctx", None))
    if n_ctx is not None:
        return n_ctx, "--n-ctx"
    reported = _positive(getattr(model, "context_length", None))
    return None if reported is None else (reported, "server")


def model_context(model: Model) -> int:
    """The model's own context size, or one error naming the flag that sets it."""
    found = reported_context(model)
    if found is None:
        raise UserError(f"model {model.name}: {NO_CONTEXT}")
    return found[0]


@dataclass(frozen=True, slots=True)
class Resolved:
    """The budget tokenizer, the context size, and where the size came from (``--max-context``,
    ``--n-ctx`` or ``server``), so an error about room can name the flag that changes it."""

    tokenizer: Tokenizer
    context: int
    source: str


@dataclass(frozen=True, slots=True)
class _BudgetPolicy:
    """Shared settings of the budget policies.

    ``template``: the task's prompt (the protocol's ``fit(sample, model)`` does not receive it);
    ``tokenizer``: a Tokenizer, a spec string, or None for the model's own; ``max_context``: None
    reads the model's (``n_ctx``, or the size its server reported); ``reserve``: tokens kept free
    for generation.
    """

    template: PromptTemplate
    tokenizer: Tokenizer | str | None = None
    max_context: int | None = None
    reserve: int = DEFAULT_RESERVE

    @property
    def kind(self) -> str:
        raise NotImplementedError

    @property
    def name(self) -> str:
        tok = self.tokenizer if isinstance(self.tokenizer, str | None) else self.tokenizer.name
        ctx = "model" if self.max_context is None else str(self.max_context)
        return f"{self.kind}(ctx={ctx},reserve={self.reserve},tokenizer={tok or 'model'})"

    def _resolve(self, model: Model) -> Resolved:
        """The tokenizer and the context, or one error that names every missing flag at once
        (naming them one run at a time made a user correct the command twice)."""
        if self.max_context is not None and self.max_context <= 0:
            raise UserError(
                f"--max-context (max_context=) must be a positive number of tokens, not {self.max_context}"
            )
        if self.reserve < 0:
            raise UserError(f"--reserve (reserve=) must not be negative, not {self.reserve}")
        if self.tokenizer is None:
            tok = own_tokenizer(model)
        elif isinstance(self.tokenizer, str):
            tok = tokenizer_from_spec(self.tokenizer)
        else:
            tok = self.tokenizer
        given = self.max_context
        found = (given, "--max-context") if given is not None else reported_context(model)
        missing = [why for why, gone in ((NO_TOKENIZER, tok is None), (NO_CONTEXT, found is None)) if gone]
        if missing:
            raise UserError(f"model {model.name}: " + "; and ".join(missing))
        assert tok is not None and found is not None
        return Resolved(tok, found[0], found[1])

    def resolve(self, model: Model) -> tuple[Tokenizer, int]:
        """The budget tokenizer and the context size (see :meth:`_resolve`)."""
        got = self._resolve(model)
        return got.tokenizer, got.context

    def _budget(self, sample: Sample, model: Model, got: Resolved) -> Budget:
        return compute_budget(
            got.tokenizer,
            self.template,
            sample,
            max_context=got.context,
            reserve=self.reserve,
            render=model.render,
        )

    def budget(self, sample: Sample, model: Model) -> tuple[Tokenizer, Budget]:
        """The budget tokenizer and the budget for ``sample`` (renders the prompt with the model)."""
        got = self._resolve(model)
        return got.tokenizer, self._budget(sample, model, got)

    def _carry_tokens(self) -> int:
        """Tokens each prompt must leave free beside the reserve (an answer carried between steps)."""
        return 0

    def _require_room(self, sample: Sample, budget: Budget, source: str) -> int:
        """Tokens of the record that fit beside ``sample``'s prompt, or one error when not a
        single one does: such a run would send the question without its record (or drop every
        record), so it is refused instead."""
        carry = self._carry_tokens()
        room = budget.tokens - carry
        if room > 0:
            return room
        carried = f", {carry} for the answer carried between refinement steps" if carry else ""
        raise UserError(
            f"sample {sample.id!r}: no room for any of the record: the prompt without it takes "
            f"{budget.template_tokens} tokens and {budget.reserve} are kept for the answer{carried}, "
            f"of a context of {budget.max_context}; {_MORE_CONTEXT[source]}"
        )

    def room(self, sample: Sample, model: Model) -> int:
        """Tokens of ``sample``'s record that fit beside its prompt (see :meth:`_require_room`)."""
        got = self._resolve(model)
        return self._require_room(sample, self._budget(sample, model, got), got.source)

    def _check_sync(self, samples: Sequence[Sample], model: Model) -> None:
        got = self._resolve(model)
        for sample in distinct_prompts(samples):
            self._require_room(sample, self._budget(sample, model, got), got.source)

    async def check(self, samples: Sequence[Sample], model: Model) -> None:
        """Refuse, before the run folder exists, a run whose records cannot be fitted: no
        tokenizer, no context size, or a prompt that leaves no room for any record."""
        await asyncio.to_thread(self._check_sync, samples, model)


def distinct_prompts(samples: Sequence[Sample]) -> list[Sample]:
    """One sample per distinct (question, choices): a budget depends on nothing else of a sample,
    so samples that share a question are counted once."""
    seen: dict[tuple[str, tuple[str, ...]], Sample] = {}
    for sample in samples:
        seen.setdefault((sample.input, sample.choices), sample)
    return list(seen.values())


def fit_verified(
    fitter: Fitter,
    template: PromptTemplate,
    sample: Sample,
    tok: Tokenizer,
    budget: Budget,
    render: Callable[[Sequence[Message]], str],
) -> tuple[str, JSON]:
    """Fit, then count the whole rendered prompt; shrink by any excess (tokens merging across the
    record's edges, chat markup) until prompt + reserve fits the context."""
    count = prompt_counter(tok)
    tokens = budget.tokens
    kept, info = fitter(sample.context, tok, tokens)
    prompt_tokens = None
    for _ in range(_TRIES):
        if info.get("dropped"):
            break
        prompt_tokens = count(render(template.messages(sample, kept)))
        over = prompt_tokens + budget.reserve - budget.max_context
        if over <= 0 or tokens <= 0:
            break
        tokens = max(0, tokens - over)
        kept, info = fitter(sample.context, tok, tokens)
    info.update({k: v for k, v in budget.to_dict().items() if k != "budget"})
    info["budget"] = budget.tokens
    info["effective_budget"] = tokens
    info["prompt_tokens"] = prompt_tokens
    info["fits"] = prompt_tokens is not None and prompt_tokens + budget.reserve <= budget.max_context
    info["tokenizer"] = tok.name
    return kept, info


@dataclass(frozen=True, slots=True)
class FitterPolicy(_BudgetPolicy):
    """A budget policy that fits the record with one :data:`Fitter`, verified on the whole prompt.

    A subclass names its ``KIND`` and its ``FITTER`` (or overrides :meth:`_fitter_for` when the
    fitter depends on the sample).
    """

    KIND: ClassVar[str]
    FITTER: ClassVar[Fitter]

    @property
    def kind(self) -> str:
        return self.KIND

    def _fitter_for(self, sample: Sample) -> Fitter:
        """The fitter for one sample (a policy that reads the instruction overrides this)."""
        return type(self).FITTER

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        def work() -> tuple[str, JSON]:
            tok, budget = self.budget(sample, model)
            return fit_verified(self._fitter_for(sample), self.template, sample, tok, budget, model.render)

        return await asyncio.to_thread(work)


@dataclass(frozen=True, slots=True)
class KeepRecentPolicy(FitterPolicy):
    """MedAlign's default: drop the oldest tokens, keep the end of the record."""

    KIND = "keep_recent"
    FITTER = keep_recent


@dataclass(frozen=True, slots=True)
class KeepOldestPolicy(FitterPolicy):
    """Keep the beginning of the record."""

    KIND = "keep_oldest"
    FITTER = keep_oldest


@dataclass(frozen=True, slots=True)
class DropPolicy(FitterPolicy):
    """Keep the record whole or drop the sample: ``info["dropped"]`` is True and the context empty."""

    KIND = "drop"
    FITTER = drop_if_over


@dataclass(frozen=True, slots=True)
class ChunkPolicy(_BudgetPolicy):
    """Multi-step refinement: the record in order, in pieces of at most ``chunk_tokens`` tokens
    (None: the whole budget less ``carry_tokens``, room for the answer carried between steps).

    ``fit`` returns the first piece and lists every piece's character span in ``info["chunks"]``;
    :meth:`chunks` returns all pieces.
    """

    chunk_tokens: int | None = None
    carry_tokens: int = 0
    min_fill: float = 0.5

    @property
    def kind(self) -> str:
        size = "budget" if self.chunk_tokens is None else str(self.chunk_tokens)
        return f"chunk[{size},carry={self.carry_tokens}]"

    def _carry_tokens(self) -> int:
        return self.carry_tokens

    def _chunks_sync(self, sample: Sample, model: Model) -> tuple[list[str], JSON]:
        got = self._resolve(model)
        tok, budget = got.tokenizer, self._budget(sample, model, got)
        room = self._require_room(sample, budget, got.source)
        size = self.chunk_tokens if self.chunk_tokens is not None else room
        count = prompt_counter(tok)
        for _ in range(_TRIES):
            pieces, info = chunk_text(sample.context, tok, size, min_fill=self.min_fill)
            # Every piece's whole prompt must fit, edges and chat markup included.
            worst = max(count(model.render(self.template.messages(sample, p))) for p in pieces)
            over = worst + self.carry_tokens + budget.reserve - budget.max_context
            if over <= 0 or size <= 1:
                break
            size = max(1, size - over)
        info.update(budget.to_dict())
        info["chunk_tokens"] = size
        info["tokenizer"] = tok.name
        return pieces, info

    async def chunks(self, sample: Sample, model: Model) -> tuple[list[str], JSON]:
        return await asyncio.to_thread(self._chunks_sync, sample, model)

    async def fit(self, sample: Sample, model: Model) -> tuple[str, JSON]:
        pieces, info = await self.chunks(sample, model)
        return pieces[0], info
