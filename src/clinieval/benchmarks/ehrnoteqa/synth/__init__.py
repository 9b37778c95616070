"""A synthetic EHRNoteQA-shaped set: discharge summaries and five-option questions, no credentials.

EHRNoteQA (spec: ``shared/spec/ehrnoteqa.md``) asks multiple-choice questions about one patient's
MIMIC-IV discharge summaries; both the questions and the notes sit behind PhysioNet credentials.
This package writes the same two files a user brings (``discharge.csv`` in the MIMIC-IV-Note
layout and ``qa.jsonl`` in the PhysioNet question format) over the project's synthetic patients
(:mod:`clinieval.ehr.synth`), so the whole pipeline (reading, note selection, levels, prompts,
scoring) can run end to end on any machine. A score on it says nothing about clinical ability.

- :mod:`.summaries`: the patient's admissions and their (long-mode) discharge summaries;
- :mod:`.facts`: what the coded events of a stay say (the answers' source);
- :mod:`.question_kinds`: the question kinds and their distractor candidates;
- :mod:`.questions`: evidence, distractors, answer letters and the per-patient pick;
- :mod:`.writer`: :func:`~.writer.build_synthetic_set`, the folder and its manifest.
"""
