"""The benchmarks clinieval ships, one package each, and the one list of them the CLI reads.

Order matters only for ``clinieval run NAME``: the first benchmark that claims ``NAME`` gets it,
so the catch-all (a ``.jsonl`` path) comes last. Adding a benchmark is one package and one line
here (docs/architecture.md).
"""

from __future__ import annotations

from clinieval.benchmark import Benchmark
from clinieval.benchmarks import automedeval, ehrnoteqa, jsonl, medalign, medeval, pubmedqa

BENCHMARKS: tuple[Benchmark, ...] = (
    pubmedqa.BENCHMARK,
    medalign.BENCHMARK,
    ehrnoteqa.BENCHMARK,
    medeval.BENCHMARK,
    automedeval.BENCHMARK,
    jsonl.BENCHMARK,
)
