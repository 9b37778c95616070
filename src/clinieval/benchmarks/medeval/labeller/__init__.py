"""MedEval's rule-based radiology report labeller: medspaCy ConText over CheXpert's phrase lists.

MedEval pseudo-labelled its report codes with rule-based labellers before radiologists corrected
them (CheXpert for chest, pyConText keyword rules elsewhere). This package does the same, and is a
non-LLM baseline for code prediction: per report and code, positive, negative, unknown (CheXpert's
uncertain) or absent.

* :class:`Labeller` / :func:`label_reports`: a list of report texts -> a list of dicts code -> value.
* :func:`label_csv`: CheXpert's file layout in and out (``clinieval medeval label``).
* :mod:`.rules`: the phrase lists (CheXpert's folder for chest; JSON rules files elsewhere).
* :mod:`.patterns` and :mod:`.modifiers`: the ConText triggers, switched on by the words of
  CheXpert's negation and uncertainty pattern files.

Nothing heavy is imported here: spaCy and medspaCy load when a :class:`Labeller` is built.
"""

from clinieval.benchmarks.medeval.labeller.chexpert import label_csv, read_reports
from clinieval.benchmarks.medeval.labeller.pipeline import Labeller, label_reports
from clinieval.benchmarks.medeval.labeller.rules import DomainRules, load_chexpert_rules, load_rules_file

__all__ = [
    "DomainRules",
    "Labeller",
    "label_csv",
    "label_reports",
    "load_chexpert_rules",
    "load_rules_file",
    "read_reports",
]
