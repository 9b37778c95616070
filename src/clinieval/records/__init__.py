"""What a run writes and reads back: run folders, their records, summaries and the long table.

:mod:`clinieval.engine` drives a run; this package is what the run leaves on disk and everything
that reads it again (the viewer, ``analyze``/``export``, judges, suites, a user's own script). This
package is the one documented place for that reading::

    from clinieval.records import RunDir, summarize

    run = RunDir("runs/pubmedqa-smol")          # a str or a Path
    records = run.records()                     # SampleRecords, long texts put back
    for s in summarize(records, ["choice_extract"]):
        print(s.scorer, s.mean, s.ci_low, s.ci_high)

The names in ``__all__`` are loaded on first use, not on ``import clinieval.records``: a scorer that
imports :mod:`clinieval.records.sample_record` must not pull in the run folder, numpy or the
analysis under it (it would run the import graph backwards).

Modules, lowest first (``tests/test_import_layers.py`` holds them to this order). Storing sits
below scoring, which reads records; reading back sits above the analysis it uses:

- ``sample_record``: one line of a run's results file (:class:`SampleRecord`);
- ``record_codec``: long texts stored once per run (``texts.jsonl``) and put back;
- ``cache``: the request cache every model call goes through (``cache.sqlite``);
- ``runs``: a run folder (:class:`RunDir`): manifest, records, resuming, finding run folders;
- ``run_writer``: records and answers written in group commits while a run goes;
- ``summary``: per-scorer scores with a 95 % CI, the summary table, echo counts;
- ``failures``: what a finished run left failed, and the fix for each kind;
- ``run_table``: run folders as the long table ``clinieval analyze`` reads and ``export`` writes.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from clinieval.records.failures import FailureReport, failure_report
    from clinieval.records.run_table import RunTable, analyze_runs, read_runs, write_table
    from clinieval.records.runs import RunDir, find_run_dirs
    from clinieval.records.sample_record import SampleRecord
    from clinieval.records.summary import ScorerSummary, plain_table, summarize

__all__ = [
    "FailureReport",
    "RunDir",
    "RunTable",
    "SampleRecord",
    "ScorerSummary",
    "analyze_runs",
    "failure_report",
    "find_run_dirs",
    "plain_table",
    "read_runs",
    "summarize",
    "write_table",
]

_HOME = {
    "FailureReport": "failures",
    "failure_report": "failures",
    "RunTable": "run_table",
    "analyze_runs": "run_table",
    "read_runs": "run_table",
    "write_table": "run_table",
    "RunDir": "runs",
    "find_run_dirs": "runs",
    "SampleRecord": "sample_record",
    "ScorerSummary": "summary",
    "plain_table": "summary",
    "summarize": "summary",
}
"""The module each public name lives in, for loading it on first use (PEP 562)."""


def __getattr__(name: str) -> Any:
    home = _HOME.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
    globals()[name] = value  # found once; later lookups do not come here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
