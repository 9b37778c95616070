"""LLM-as-judge over a persisted run, in two parts that change for different reasons.

* :mod:`clinieval.judge.rubric`: what a judge is asked and how its reply is read (the
  :class:`~clinieval.judge.rubric.Rubric` protocol, :class:`~clinieval.judge.rubric.Verdict` and
  the verdict parsers rubrics compose). Pure text in, numbers out; no model, no files.
* :mod:`clinieval.judge.run`: asking the judge about every recorded answer of a run, with
  repeats through the run's request cache, failures kept as data, the accounting summary, and
  reading the scores back (:func:`~clinieval.judge.run.judge_run`,
  :func:`~clinieval.judge.run.read_judge_scores`).

Import from the submodule that defines a name; this package re-exports nothing.
"""
