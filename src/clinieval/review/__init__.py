"""Blinded clinician review: a small web app where clinicians rank, rate or correct model answers.

The papers behind clinieval rest on clinicians' judgements (MedAlign's rankings, AutoMedEval's
ratings, EHRNoteQA's item review, MedEval's sentence labels); this package collects them inside the
hospital, with the model names hidden, and exports tables that ``clinieval analyze`` reads.

Layout: ``items`` (the generic item format a benchmark converts into), ``study_kinds`` (what a response
of each study kind is, validated on the server), ``db`` (the schema and engine), ``store`` (every
read and write), ``agreement`` (live inter-rater agreement), ``export`` (files for the analyzers),
``sources`` (what a benchmark hands over so ``review import`` reads its own files), ``cli``
(``clinieval review``) and ``app`` with ``web/`` (the web app). This package sits below the
benchmarks: it never imports them; each gives its readers through ``review_sources()``.
"""
