"""Suites: every model over every benchmark in one command, and the leaderboard over them.

A suite file (TOML) names models and benchmarks; ``clinieval suite run`` runs each model x benchmark
through the benchmark's own code (a benchmark offers a :class:`~clinieval.suite.part.SuitePart`),
``clinieval suite report`` turns what they recorded into one leaderboard with its uncertainty.
This layer knows no benchmark: it sits below ``clinieval.benchmark`` and talks to them only
through the protocol in :mod:`clinieval.suite.part` (tests/test_import_layers.py keeps it so).
"""
