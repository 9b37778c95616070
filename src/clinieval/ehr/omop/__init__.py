"""OMOP CDM (5.3/5.4) reader: one :class:`~clinieval.ehr.timeline.Timeline` per person, streamed
with DuckDB.

A source is a folder of CSV or Parquet tables (``PERSON.csv``, ``person.parquet``, ... names are
matched case-insensitively) or a DuckDB database file holding the tables. ``person``,
``visit_occurrence`` and ``concept`` must be there; every other table is optional and, when
absent, simply contributes nothing. Open one with :func:`~clinieval.ehr.omop.source.open_omop`.

The reader, by concern:

* :mod:`.tables` -- which OMOP tables and columns are read, and how each event table maps onto
  a timeline event;
* :mod:`.sql` -- the SQL text: quoting, lenient typing of text columns, ``read_csv`` of a CSV
  table, and the one SELECT per table that types its rows and joins them to the concept table;
* :mod:`.rows` -- those rows as Person, Visit, Event and Note, with every work-around counted
  as an issue;
* :mod:`.source` -- the DuckDB side: finding and checking the tables, staging them by chunk of
  people in bounded memory, and streaming timelines.
"""
