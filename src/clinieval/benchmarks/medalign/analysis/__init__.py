"""MedAlign's reported statistics, in the paper's two views: all items, and items without errors.

MedAlign (Fleming et al., AAAI 2024) counted the 44 of 303 items that Azure's content filter
refused as incorrect, and also reported every number on the 259 items left without them. A
provider error is an outcome of the arm, not a missing value, so this package computes each
statistic twice: on all instructions (an error row whose correctness is empty counts as
incorrect) and on the instructions where no arm had an error (every arm's row of such an
instruction is dropped, so the arms stay paired on the same items).

The general statistics (per-column CIs, head-to-head matrices, win rates, metric-vs-reference
Kendall tau, Fisher-Z, point-biserial, inter-rater agreement, subgroup chi-square) come from
:func:`clinieval.analysis.analyze.analyze`; this package adds what is specific to the paper:
correct % per arm, breakdowns by category, subcategory, specialty and EHR-length quartile, easy
and hard items, response lengths, minimum detectable differences, and error counts. As in
``analyze``, a statistic the data cannot define is listed under ``undefined`` with its reason,
never shown as NaN and never raised as an exception.

The reference ranking is whatever column the caller names: clinicians' ranks in the paper, or a
ranking computed from another column when there were no clinicians. ``reference_label`` travels
into the result so that a report never presents a computed ranking as clinicians' judgement.

The package is split by concern, each section reading the table through :class:`.view.View`:
:mod:`.columns` (what the caller names), :mod:`.view` (input checks and the two views),
:mod:`.compute` (:func:`~.compute.medalign_analysis`, the entry point, and the headline per-arm
numbers), :mod:`.breakdowns`, :mod:`.lengths` and :mod:`.comparisons` (MDD, per-instruction
Kendall tau, and the generic ``analyze``).
"""
