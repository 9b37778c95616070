"""Build an EHRNoteQA-style dataset: two-step question generation, checks, clinician review.

EHRNoteQA (Kweon et al., NeurIPS 2024 D&B) wrote its 1,000 draft questions with an LLM in two
steps, then had clinicians review every one. This package reproduces that pipeline over the
user's own MIMIC-IV-Note ``discharge.csv(.gz)``: :mod:`.prompts` (the paper's two prompts),
:mod:`.parsing` (reading the replies), :mod:`.checks` (the named checks), :mod:`.pipeline` (the
generate step, cached and resumable), :mod:`.review` (``review.csv``), :mod:`.importing` (applying
the review) and :mod:`.cli` (``clinieval ehrnoteqa build``).
"""
