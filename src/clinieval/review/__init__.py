"""Blinded clinician review: a small web app where clinicians rank, rate or correct model answers.

The papers behind clinieval rest on clinicians' judgements (MedAlign's rankings, AutoMedEval's
ratings, EHRNoteQA's item review, MedEval's sentence labels); this package collects them inside the
hospital, with the model names hidden, and exports tables that ``clinieval analyze`` reads.

Layout: ``items`` (the generic item format a benchmark converts into), ``study_kinds`` (what a
response of each study kind is, validated on the server, and what follows from it: agreement,
export table, form), ``db`` (the schema and engine), ``store`` (opening the database, finding a
study, the errors), ``accounts`` (users and passwords), ``importing`` (items into a study),
``assigning`` (who reviews what, and progress), ``reviewing`` (a reviewer's queue and saves),
``agreement`` (live inter-rater agreement), ``export`` (files for the analyzers), ``sources``
(what a benchmark hands over so ``review import`` reads its own files) and ``app`` with ``web/``
(the web app); the ``clinieval review`` commands are ``clinieval.cli.review``. This package sits below the
benchmarks: it never imports them; each gives its readers through ``review_sources()``.
"""
