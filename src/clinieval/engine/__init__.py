"""The run engine: what drives one evaluation from request to summary.

A run asks a model about every item of a task, through the request cache, and writes what it got
into a run folder; this package is the driving, :mod:`clinieval.records` what is written and read
back. It sits above scoring, the task and context fitting (a run applies them) and above records
(a run writes them); judges, suites, the benchmarks and the command line sit above it. Importing
the package imports none of its modules: import the one you need.

Modules, lowest first (``tests/test_import_layers.py`` holds them to this order):

- ``runner``: the per-item loop every executor runs (:class:`~clinieval.engine.runner.ItemLoop`),
  the :class:`~clinieval.engine.runner.Executor` seam, the local executor and ``execute``, the
  concurrent, cached, resumable run over a task's items;
- ``distributed``: the Ray executor, running the same item loop on Ray actors;
- ``server_fit``: default scorers and requests in flight fitted to what the server reports;
- ``rescore``: a finished run scored again with other scorers, without calling the model;
- ``session``: one run (or one arm) end to end, in the order that keeps bad input harmless.
"""
