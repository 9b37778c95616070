"""Surface-overlap metrics: ROUGE, BLEU, chrF / chrF++, Google-BLEU (GLEU) and METEOR.

One module because these are one kind of metric: each compares the token or character n-grams
(or the longest common subsequence) of prediction and reference on the CPU, is computed by or
checked number-for-number against its reference library (rouge-score, sacrebleu, nltk), and
imports that library only inside the function that needs it. BERTScore, which needs a model,
is in :mod:`clinieval.scoring.text.embedding`.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from clinieval.errors import UserError
from clinieval.scoring.text.base import (
    WORD_PATTERN,
    BaseTextMetric,
    MetricResult,
    References,
    Refs,
    cached_stemmer,
    library_version,
    metric_result,
    prepare_inputs,
    word_tokens,
)

# --------------------------------------------------------------------------------------------
# ROUGE (rouge-score)

ROUGE_TYPES = ("rouge1", "rouge2", "rougeL", "rougeLsum")


class RougeTokenizer:
    """rouge-score's own tokenizer function, given the cached stemmer (same tokens, faster)."""

    def __init__(self, use_stemmer: bool) -> None:
        from rouge_score import tokenize

        self._tokenize = tokenize.tokenize
        self._stemmer = cached_stemmer() if use_stemmer else None

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
class Rouge(BaseTextMetric):
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
        return {t: metric_result(t, per_type[t], None, scale=1.0, metadata=meta) for t in self.types}

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
            "version": library_version("rouge-score"),
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
class Bleu(BaseTextMetric):
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
            "version": library_version("sacrebleu"),
            "max_ngram_order": 4,
            "tokenize": self.tokenize,
            "lowercase": self.lowercase,
            "smooth_method": self.smooth_method,
            "effective_order": {"item": True, "corpus": False},
            "corpus_signature": signature,
        }
        return {"bleu": metric_result("bleu", values, corpus, scale=100.0, metadata=meta)}


@dataclass(frozen=True, slots=True)
class Chrf(BaseTextMetric):
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
            "version": library_version("sacrebleu"),
            "char_order": self.char_order,
            "word_order": self.word_order,
            "beta": self.beta,
            "whitespace": False,
            "eps_smoothing": False,
            "corpus_signature": signature,
        }
        return {self.name: metric_result(self.name, values, corpus, scale=100.0, metadata=meta)}


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
class GoogleBleu(BaseTextMetric):
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
            "version": library_version("nltk"),
            "min_len": self.min_len,
            "max_len": self.max_len,
            "tokenizer": f"clinieval.scoring.text.base.word_tokens ({WORD_PATTERN.pattern})",
            "lowercase": False,
        }
        return {"google_bleu": metric_result("google_bleu", values, corpus, scale=1.0, metadata=meta)}


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
class Meteor(BaseTextMetric):
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
        wn, stemmer = _wordnet(), cached_stemmer()
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
            "version": library_version("nltk"),
            "alpha": self.alpha,
            "beta": self.beta,
            "gamma": self.gamma,
            "tokenizer": f"clinieval.scoring.text.base.word_tokens ({WORD_PATTERN.pattern}), lowercased",
            "stemmer": "nltk PorterStemmer",
            "wordnet": f"WordNet {wn.reader.get_version()} at {wn.reader.root}",
            "multi_reference": "max over references",
        }
        return {"meteor": metric_result("meteor", values, None, scale=1.0, metadata=meta)}
