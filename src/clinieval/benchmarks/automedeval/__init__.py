"""AutoMedEval: a medical judge that scores several answers with a rationale (see README.md).

Work in progress (issue 15): the judge-evaluation set format and its loaders, and the judge's
output format, parsing and position-bias controls, are here; the judge run, the knowledge chain,
the agreement analysis and the training-data pipeline are not yet. Not yet listed in BENCHMARKS.
"""
