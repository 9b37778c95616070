"""Build a MedAlign-style dataset: drop near-duplicate instructions, match instructions to EHRs.

MedAlign (Fleming et al., AAAI 2024) built its benchmark in steps this package reproduces, one
module per step, so that each can be read (and changed) without the others:

1. **Near-duplicate removal** (:mod:`.dedupe`): an instruction is dropped when its ROUGE-L
   F-measure with an earlier *kept* instruction exceeds 0.7, exactly as rouge-score computes it,
   with an overlap bound that spares most exact LCS computations.
2. **Instruction→EHR matching** (:mod:`.matching`): BM25Okapi ranks the cohort's patients for the
   instruction plus its patient characteristics and clinical context; K uniformly random patients
   (seeded) are the baseline. :mod:`.review` writes the candidates for a *blinded* review (shuffled,
   no source) and the key that un-blinds them to a separate file; :func:`.review.match_file` does
   read, index, match and write in one call.
3. **Scoring the review** (:mod:`.evaluate`): success@K and MRR@K, averaged over instructions, for
   BM25 in rank order and for the random baseline in draw order.

Shared by the steps: :mod:`.instructions` (the instructions CSV: ``instruction_id``, ``question``,
optionally ``patient_characteristics`` and ``clinical_context``; other columns are carried along
untouched) and :mod:`.tables` (line-numbered CSV reading, so every error names file, line and
column; atomic CSV writing). All files are UTF-8 CSV with a header line; a byte-order mark from
Excel is accepted.
"""
