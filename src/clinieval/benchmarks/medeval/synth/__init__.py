"""A synthetic radiology corpus shaped like MedEval's — synthetic, not MedEval's data.

MedEval (spec: ``shared/spec/medeval.md``) labels radiology sentences (normal/abnormal,
ambiguous/unambiguous with a clinician's rewrite) and reports (codes per observation, an
impression that summarizes the findings); its data is not public. This package writes text of the
same shape from templates, with every label known by construction, so the loaders, prompts,
parsers and scorers can run end to end on any machine and be checked against known answers. A
score on it says nothing about a model's clinical ability.

- :mod:`.domains`: six body part x modality domains, their codes, phrases and normal sentences;
- :mod:`.text`: stated, hedged, contradictory and run-on sentence forms, with rewrites, and the
  contexts (a dated comparison, a view) that keep the sentences distinct;
- :mod:`.sentences`: the labelled sentences (normal, abnormal, three ambiguity kinds);
- :mod:`.reports`: reports planned first, so their codes follow from the plan;
- :mod:`.corpus`: :func:`~.corpus.build_corpus`, deterministic by seed;
- :mod:`.writer`: :func:`~.writer.write_corpus`, the folder :func:`~..data.load_folder` reads.
"""
