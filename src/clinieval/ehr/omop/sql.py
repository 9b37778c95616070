"""The SQL the reader runs: quoting, lenient typing of text columns, ``read_csv`` of a CSV table,
and the one SELECT per table that types its rows and joins them to the concept table.

Every column is read as text and typed here with ``TRY_CAST``, so a bad value is NULL (and
counted by :mod:`.rows`), never an error. The SELECTs of :class:`TableSql` hand rows to Python as
``pid, pkey`` then their ``outer`` columns: :mod:`.rows` unpacks exactly those columns in exactly
that order, so a column added to a SELECT here is added to its unpacking there.
"""

from __future__ import annotations

import csv
import functools
import gzip
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from clinieval.ehr.omop.tables import EventTable
from clinieval.errors import UserError


def literal(s: str) -> str:
    """A SQL string literal."""
    return "'" + s.replace("'", "''") + "'"


def ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def id_sql(e: str) -> str:
    """An identifier as text: integral numbers without ".0" (Parquet from pandas stores floats)."""
    return (
        f"CASE WHEN TRY_CAST({e} AS DOUBLE) = TRY_CAST({e} AS BIGINT) "
        f"THEN CAST(TRY_CAST({e} AS BIGINT) AS VARCHAR) "
        f"ELSE NULLIF(trim(CAST({e} AS VARCHAR)), '') END"
    )


def ts_sql(e: str) -> str:
    return f"TRY_CAST({e} AS TIMESTAMP)"


def date_sql(e: str) -> str:
    return f"TRY_CAST(TRY_CAST({e} AS TIMESTAMP) AS DATE)"


def bad_sql(raw: str, parsed: str) -> str:
    return f"({raw} IS NOT NULL AND trim(CAST({raw} AS VARCHAR)) <> '' AND {parsed} IS NULL)"


def csv_sql(f: Path) -> str:
    """``read_csv`` of an OMOP CSV, every column as text, with the dialect read off the header line.

    Naming the columns spares DuckDB's sniffer, which otherwise runs on every query of the view and
    dominates the cost of small tables.
    """
    opener = gzip.open if f.name.lower().endswith(".gz") else open
    try:
        with opener(f, "rt", encoding="utf-8-sig", newline="") as fh:
            header = fh.readline().rstrip("\r\n")
    except UnicodeDecodeError as e:  # decoded a chunk at a time from the start, so e.start is the offset
        raise UserError(f"OMOP table file {f} is not UTF-8 text (byte {e.start}: {e.reason})") from None
    except (OSError, EOFError) as e:  # a .gz file that is not gzip, or is cut short
        raise UserError(f"OMOP table file {f}: cannot read its header line ({e})") from None
    if not header.strip():
        raise UserError(f"OMOP table file {f} is empty: it needs at least a header line")
    delim = max(",\t|;", key=header.count)
    names = next(csv.reader([header], delimiter=delim))
    keys = [n.strip().lower() for n in names]  # DuckDB's names ignore case
    if "" in keys:
        raise UserError(f"OMOP table file {f}:1: column {keys.index('') + 1} of the header has no name")
    repeated = sorted({n for n in keys if keys.count(n) > 1})
    if repeated:
        raise UserError(
            f"OMOP table file {f}:1: column(s) {', '.join(map(repr, repeated))} appear twice in the header"
        )
    columns = "{" + ", ".join(f"{literal(n.strip())}: 'VARCHAR'" for n in names) + "}"
    return (
        f"SELECT * FROM read_csv({literal(str(f))}, header = true, auto_detect = false, "
        f"delim = {literal(delim)}, quote = '\"', escape = '\"', columns = {columns})"
    )


def _dated(c: Callable[[str], str], key: str, row_id: str, timestamp: str, day: str) -> list[str]:
    """The first inner columns of a dated table: the person (``pid``), the row's id as text and as a
    number (``<key>id``, ``<key>num``), its timestamp and date (``ts``, ``d``) and whether either
    was present but unreadable (``bad``). ``c`` reads a column of the table (NULL when absent)."""
    return [
        f"{id_sql(c('person_id'))} AS pid",
        f"{id_sql(row_id)} AS {key}id",
        f"TRY_CAST({row_id} AS DOUBLE) AS {key}num",
        f"{ts_sql(timestamp)} AS ts",
        f"{date_sql(day)} AS d",
        f"({bad_sql(timestamp, ts_sql(timestamp))} OR {bad_sql(day, date_sql(day))}) AS bad",
    ]


def _time_order(key: str) -> list[str]:
    """A dated table's rows in time order (a date alone counts as its midnight), then by row id."""
    return ["coalesce(s.ts, CAST(s.d AS TIMESTAMP))", f"s.{key}num", f"s.{key}id"]


@dataclass(frozen=True, slots=True)
class Select:
    """One table's typed SELECT, with how many outer and ordering columns it has."""

    table: str
    sql: str
    n_out: int
    n_order: int


class TableSql:
    """The typed SELECT of each raw table (views ``raw_<table>``) of one opened source.

    ``columns`` are the columns each table has (lower case), ``tables`` the tables found; a column
    a table lacks reads as NULL.
    """

    def __init__(self, columns: Mapping[str, set[str]], tables: Mapping[str, str]) -> None:
        self.columns = columns
        self.tables = tables

    def col(self, table: str, col: str | None) -> str:
        return ident(col) if col is not None and col in self.columns[table] else "NULL"

    def _query(
        self,
        table: str,
        inner: Sequence[str],
        outer: Sequence[str],
        joins: Sequence[str],
        order: Sequence[str],
    ) -> Select:
        """``inner`` columns are computed from the raw table (must include ``pid``); ``outer`` ones
        (the row handed to Python after ``pid, pkey``) and ``order`` (a person's rows are sorted by
        them) from ``s``, the inner result, and the ``joins``."""
        cols = [f"{e} AS _c{i}" for i, e in enumerate(outer)] + [f"{e} AS _o{i}" for i, e in enumerate(order)]
        sql = (
            f"SELECT s.pid, s.pkey, {', '.join(cols)} FROM (SELECT *, TRY_CAST(pid AS BIGINT) AS pkey "
            f"FROM (SELECT {', '.join(inner)} FROM {ident('raw_' + table)})) s {' '.join(joins)}"
        )
        return Select(table, sql, len(outer), len(order))

    def person(self) -> Select:
        c = functools.partial(self.col, "person")
        inner = [
            f"{id_sql(c('person_id'))} AS pid",
            f"{ts_sql(c('birth_datetime'))} AS bts",
            f"{bad_sql(c('birth_datetime'), ts_sql(c('birth_datetime')))} AS bad",
            f"TRY_CAST({c('year_of_birth')} AS INTEGER) AS y",
            f"TRY_CAST({c('month_of_birth')} AS INTEGER) AS m",
            f"TRY_CAST({c('day_of_birth')} AS INTEGER) AS d",
        ]
        outer = ["s.bts", "s.bad", "s.y", "s.m", "s.d"]
        joins = []
        for n, attr in enumerate(("gender", "race", "ethnicity")):
            inner += [
                f"TRY_CAST({c(attr + '_concept_id')} AS BIGINT) AS cid{n}",
                f"{c(attr + '_source_value')} AS src{n}",
            ]
            outer += [f"s.cid{n}", f"c{n}.concept_name", f"c{n}.concept_id IS NOT NULL", f"s.src{n}"]
            joins.append(f"LEFT JOIN _concept c{n} ON c{n}.concept_id = s.cid{n}")
        return self._query("person", inner, outer, joins, [])

    def visit(self) -> Select:
        c = functools.partial(self.col, "visit_occurrence")
        inner = [
            *_dated(c, "v", c("visit_occurrence_id"), c("visit_start_datetime"), c("visit_start_date")),
            f"{ts_sql(c('visit_end_datetime'))} AS ets",
            f"{date_sql(c('visit_end_date'))} AS ed",
            f"TRY_CAST({c('visit_concept_id')} AS BIGINT) AS cid",
            f"{c('visit_source_value')} AS src",
        ]
        outer = [
            "s.vid",
            "s.ts",
            "s.d",
            "s.bad",
            "s.ets",
            "s.ed",
            "s.cid",
            "c.concept_name",
            "c.concept_id IS NOT NULL",
            "s.src",
        ]
        joins = ["LEFT JOIN _concept c ON c.concept_id = s.cid"]
        return self._query("visit_occurrence", inner, outer, joins, _time_order("v"))

    def event(self, spec: EventTable) -> Select:
        t = spec.table
        c = functools.partial(self.col, t)
        inner = [
            *_dated(c, "r", c(spec.id_col), c(spec.datetime), c(spec.date)),
            f"TRY_CAST({c(spec.concept)} AS BIGINT) AS cid",
            f"TRY_CAST({c(spec.source_concept)} AS BIGINT) AS scid",
            f"CAST({c(spec.source_value)} AS VARCHAR) AS src",
            f"{id_sql(c(spec.visit))} AS vid",
            f"TRY_CAST({c(spec.value_num)} AS DOUBLE) AS vnum",
            f"CAST({c(spec.value_str)} AS VARCHAR) AS vstr",
            f"TRY_CAST({c(spec.value_concept)} AS BIGINT) AS vcid",
            f"CAST({c(spec.value_source)} AS VARCHAR) AS vsrc",
            f"TRY_CAST({c(spec.unit_concept)} AS BIGINT) AS ucid",
            f"CAST({c(spec.unit_source)} AS VARCHAR) AS usrc",
        ]
        care_site = t == "visit_detail" and "care_site" in self.tables
        inner.append(f"{id_sql(c('care_site_id'))} AS csid" if care_site else "NULL AS csid")
        outer = [
            "s.ts",
            "s.d",
            "s.bad",
            "s.cid",
            "c.vocabulary_id",
            "c.concept_code",
            "c.concept_name",
            "c.concept_id IS NOT NULL",
            "s.src",
            "sc.vocabulary_id",
            "sc.concept_code",
            "sc.concept_name",
            "sc.concept_id IS NOT NULL",
            "s.vid",
            "s.vnum",
            "s.vstr",
            "s.vcid",
            "vc.concept_name",
            "vc.concept_id IS NOT NULL",
            "s.vsrc",
            "s.ucid",
            "uc.concept_code",
            "uc.concept_name",
            "uc.concept_id IS NOT NULL",
            "s.usrc",
            "s.csid",
            "cs.name" if care_site else "NULL",
        ]
        joins = [
            "LEFT JOIN _concept c ON c.concept_id = s.cid",
            "LEFT JOIN _concept sc ON sc.concept_id = s.scid AND s.scid <> 0",
            "LEFT JOIN _concept vc ON vc.concept_id = s.vcid",
            "LEFT JOIN _concept uc ON uc.concept_id = s.ucid",
        ]
        if care_site:
            cs = functools.partial(self.col, "care_site")
            joins.append(
                f"LEFT JOIN (SELECT {id_sql(cs('care_site_id'))} AS csid, "
                f"any_value(CAST({cs('care_site_name')} AS VARCHAR)) AS name FROM raw_care_site "
                "GROUP BY ALL) cs ON cs.csid = s.csid"
            )
        return self._query(t, inner, outer, joins, _time_order("r"))

    def note(self) -> Select:
        c = functools.partial(self.col, "note")
        inner = [
            *_dated(c, "n", c("note_id"), c("note_datetime"), c("note_date")),
            f"CAST({c('note_title')} AS VARCHAR) AS title",
            f"TRY_CAST({c('note_type_concept_id')} AS BIGINT) AS tcid",
            f"TRY_CAST({c('note_class_concept_id')} AS BIGINT) AS ccid",
            f"CAST({c('note_text')} AS VARCHAR) AS body",
            f"{id_sql(c('visit_occurrence_id'))} AS vid",
        ]
        outer = [
            "s.nid",
            "s.ts",
            "s.d",
            "s.bad",
            "s.title",
            "tc.concept_name",
            "cc.concept_name",
            "s.body",
            "s.vid",
        ]
        joins = [
            "LEFT JOIN _concept tc ON tc.concept_id = s.tcid AND s.tcid <> 0",
            "LEFT JOIN _concept cc ON cc.concept_id = s.ccid AND s.ccid <> 0",
        ]
        return self._query("note", inner, outer, joins, _time_order("n"))
