"""LLM-as-judge over a persisted run, in two parts that change for different reasons.

* :mod:`clinieval.judge.rubric`: what a judge is asked and how its reply is read (the
  :class:`~clinieval.judge.rubric.Rubric` protocol, :class:`~clinieval.judge.rubric.Verdict` and
  the verdict parsers rubrics compose). Pure text in, numbers out; no model, no files. The
  readers follow one principle (only the final verdict block is read), stated in
  :mod:`clinieval.judge.verdict` with the one-score and section readers; the numbered scores
  reader is :mod:`clinieval.judge.verdict_numbered`, the yes/no reader
  :mod:`clinieval.judge.verdict_yes_no`, the JSON object reader :mod:`clinieval.judge.verdict_json`.
  :mod:`clinieval.judge.reference` is the rubric for any task with reference answers, and
  :mod:`clinieval.judge.catalog` the rubrics ``clinieval judge --rubric`` may name.
* :mod:`clinieval.judge.run`: asking the judge about every recorded answer of a run, with
  repeats through the run's request cache, failures kept as data, the accounting summary, and
  reading the scores back (:func:`~clinieval.judge.run.judge_run`,
  :func:`~clinieval.judge.run.read_judge_scores`); :mod:`clinieval.judge.failures` turns the
  summary's failures into the lines every judging command prints, with the one rule for a failed
  pass.

Import from the submodule that defines a name; this package re-exports nothing.
"""
