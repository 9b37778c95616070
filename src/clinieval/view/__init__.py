"""The read-only results browser: run folders written out as a static site (``clinieval view``).

Read by :mod:`~clinieval.view.results` (runs, records, ``scores/`` files), rendered by
:mod:`~clinieval.view.index_page` and :mod:`~clinieval.view.item_page` (long text paged by
:mod:`~clinieval.view.paging`, cuts described by :mod:`~clinieval.view.cut`), written by
:mod:`~clinieval.view.site`; :mod:`~clinieval.view.urls` is the address scheme other pages link
with. The site needs no server and no network: plain files with a small script (``static/``).

This layer sits above the judge and the reports and below the benchmarks: it reads what any
benchmark's runs hold, and never imports a benchmark or the review app.
"""
