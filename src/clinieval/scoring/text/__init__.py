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

The package is split by what changes together:

* :mod:`~clinieval.scoring.text.base`: the contract every metric shares (:class:`MetricResult`,
  the :class:`TextMetric` protocol, ``References``, input checks) and the tokenisation the NLTK
  metrics use (:func:`word_tokens`, the cached Porter stemmer);
* :mod:`~clinieval.scoring.text.overlap`: the n-gram / LCS metrics (ROUGE, BLEU, chrF, GLEU,
  METEOR), CPU-only and cheap to set up;
* :mod:`~clinieval.scoring.text.embedding`: BERTScore, which loads a transformer model;
* :mod:`~clinieval.scoring.text.registry`: metrics by name (:func:`text_metric`,
  :func:`score_texts`), the one place that knows every metric class.

Import a name from the module that defines it; this package re-exports nothing.
"""
