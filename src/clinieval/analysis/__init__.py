"""Statistics over scored results, shared by ``clinieval analyze`` and every benchmark's analysis.

Why a layer of its own: the papers' conclusions rest on a handful of statistics (bootstrap CIs,
paired tests, rankings and win rates, agreement with clinicians), and each must mean one thing
whichever benchmark reports it. So they live here once, below the benchmarks (which may import
this package; this package never imports a benchmark), numbers in and numbers out:

* the statistics: :mod:`.uncertainty` (CIs, paired tests, Bonferroni, sample size),
  :mod:`.subgroups` (chi-square by attribute), :mod:`.rankings` (the ScoreTable, ranks, win rates,
  head-to-head), :mod:`.rank_agreement` (Kendall agreement, rank instability, ordering accuracy),
  :mod:`.agreement` (correlations, kappa, alpha, ICC), :mod:`.judge_vs_human` (a judge against
  human scores of the same responses), :mod:`.ppi` (clinician-level scores from every judge score
  plus a clinician sample, PPI++), with :mod:`._validation`'s input checks;
* ``clinieval analyze`` over a long table: :mod:`.table` (reading it), :mod:`.analyze`,
  :mod:`.analyze_context` and :mod:`.analyze_human` (computing), :mod:`.markdown` (rendering);
* ``clinieval correlate`` over per-model score tables: :mod:`.model_scores`, :mod:`.correlate`,
  :mod:`.correlate_markdown`.

Import from the submodule that defines a name; this package re-exports nothing.
"""
