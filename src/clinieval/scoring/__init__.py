"""Turning saved answers into numbers, apart from running models, so any run can be scored again.

Scorers read one saved record (:mod:`.scorers`, :mod:`.keyfacts`), text metrics compare answers
with references in batches (:mod:`.text`), classification metrics count labels
(:mod:`.classification`), and :mod:`.catalog` names them for the command line. Nothing here calls
a model under test; judges that do live in :mod:`clinieval.judge`.
"""
