"""OMOP CDM (5.3/5.4) reader: one :class:`Timeline` per person, streamed with DuckDB.

A source is a folder of CSV or Parquet tables (``PERSON.csv``, ``person.parquet``, ... names are
matched case-insensitively) or a DuckDB database file holding the tables. ``person``,
``visit_occurrence`` and ``concept`` must be there; every other table is optional and, when
absent, simply contributes nothing (listed in :attr:`OmopSource.missing_tables`).

Memory stays bounded however many patients there are: people are numbered, and each table is
copied once, typed, joined to the concept table and to those numbers, into a temporary DuckDB file,
then rewritten in passes of whole chunks of people so that each chunk's rows sit together. Nothing
is sorted globally (a sort of 100,000 patients' notes ran DuckDB out of memory even at 8 GB); people
are read ``chunk`` at a time with range scans that touch only that chunk's row groups, and only a
chunk's rows are ever sorted, so Python and DuckDB hold one chunk of patients at a time.

What the reader had to work around is counted, never patched silently, in each timeline's
``issues`` and in :attr:`OmopSource.issues` (totals over the timelines yielded so far):

``concept_0``
    the standard concept id is 0 or NULL; the source concept (``*_source_concept_id``) is used when
    the concept table knows it, else the ``*_source_value`` (vocabulary None).
``unknown_concept``
    a concept id (event, visit, value, unit, sex/race/ethnicity) absent from the concept table;
    the event is named ``Unknown concept <id>``.
``missing_datetime``
    no ``*_datetime``: the time is the date at midnight.
``missing_time``
    neither datetime nor date: the event is kept with time None.
``bad_datetime``
    a date or datetime that is not a date (kept as missing, and counted above too).
``no_visit``
    an event or note whose ``visit_occurrence_id`` is NULL or not one of the person's visits: kept,
    with visit_id None.

Rows whose person is not in the person table (or NULL) are skipped and counted per table in
:attr:`OmopSource.orphans`.
"""

from __future__ import annotations

import csv
import functools
import gzip
import itertools
import math
import shutil
import tempfile
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import date, datetime, time
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from clinieval.ehr.timeline import EVENT_DOMAINS, Event, Note, Person, Timeline, Visit
from clinieval.errors import UserError

if TYPE_CHECKING:
    import duckdb

TABLES: tuple[str, ...] = (
    "person",
    "visit_occurrence",
    "visit_detail",
    "condition_occurrence",
    "drug_exposure",
    "procedure_occurrence",
    "measurement",
    "observation",
    "device_exposure",
    "death",
    "note",
    "concept",
    "care_site",
)
REQUIRED_TABLES: tuple[str, ...] = ("person", "visit_occurrence", "concept")

# Columns a table cannot do without; every other column used is optional (NULL when absent).
REQUIRED_COLUMNS: dict[str, tuple[str, ...]] = {
    "person": ("person_id",),
    "visit_occurrence": ("visit_occurrence_id", "person_id", "visit_concept_id", "visit_start_date"),
    "concept": ("concept_id", "concept_name", "vocabulary_id", "concept_code"),
    "visit_detail": ("person_id", "visit_detail_concept_id", "visit_detail_start_date"),
    "condition_occurrence": ("person_id", "condition_concept_id", "condition_start_date"),
    "drug_exposure": ("person_id", "drug_concept_id", "drug_exposure_start_date"),
    "procedure_occurrence": ("person_id", "procedure_concept_id", "procedure_date"),
    "measurement": ("person_id", "measurement_concept_id", "measurement_date"),
    "observation": ("person_id", "observation_concept_id", "observation_date"),
    "device_exposure": ("person_id", "device_concept_id", "device_exposure_start_date"),
    "death": ("person_id", "death_date"),
    "note": ("person_id", "note_date", "note_text"),
    "care_site": ("care_site_id",),
}

# Standard OMOP names of the demographic concepts, for the many extracts whose concept table
# leaves them out (Synthea's does): "MALE" reads better than the source value "M".
_DEMOGRAPHIC_NAMES: dict[int, str] = {
    8507: "MALE",
    8532: "FEMALE",
    8527: "White",
    8516: "Black or African American",
    8515: "Asian",
    8657: "American Indian or Alaska Native",
    8557: "Native Hawaiian or Other Pacific Islander",
    38003563: "Hispanic or Latino",
    38003564: "Not Hispanic or Latino",
}

UnitStyle = Literal["source", "name"]


@dataclass(frozen=True, slots=True)
class _EventTable:
    table: str
    id_col: str | None
    concept: str
    source_concept: str
    datetime: str
    date: str
    source_value: str
    visit: str | None = "visit_occurrence_id"
    value_num: str | None = None
    value_str: str | None = None
    value_concept: str | None = None
    value_source: str | None = None
    unit_concept: str | None = None
    unit_source: str | None = None


_EVENT_TABLES: tuple[_EventTable, ...] = (
    _EventTable(
        "condition_occurrence",
        "condition_occurrence_id",
        "condition_concept_id",
        "condition_source_concept_id",
        "condition_start_datetime",
        "condition_start_date",
        "condition_source_value",
    ),
    _EventTable(
        "visit_detail",
        "visit_detail_id",
        "visit_detail_concept_id",
        "visit_detail_source_concept_id",
        "visit_detail_start_datetime",
        "visit_detail_start_date",
        "visit_detail_source_value",
    ),
    _EventTable(
        "measurement",
        "measurement_id",
        "measurement_concept_id",
        "measurement_source_concept_id",
        "measurement_datetime",
        "measurement_date",
        "measurement_source_value",
        value_num="value_as_number",
        value_concept="value_as_concept_id",
        value_source="value_source_value",
        unit_concept="unit_concept_id",
        unit_source="unit_source_value",
    ),
    _EventTable(
        "procedure_occurrence",
        "procedure_occurrence_id",
        "procedure_concept_id",
        "procedure_source_concept_id",
        "procedure_datetime",
        "procedure_date",
        "procedure_source_value",
    ),
    _EventTable(
        "observation",
        "observation_id",
        "observation_concept_id",
        "observation_source_concept_id",
        "observation_datetime",
        "observation_date",
        "observation_source_value",
        value_num="value_as_number",
        value_str="value_as_string",
        value_concept="value_as_concept_id",
        value_source="value_source_value",
        unit_concept="unit_concept_id",
        unit_source="unit_source_value",
    ),
    _EventTable(
        "drug_exposure",
        "drug_exposure_id",
        "drug_concept_id",
        "drug_source_concept_id",
        "drug_exposure_start_datetime",
        "drug_exposure_start_date",
        "drug_source_value",
    ),
    _EventTable(
        "device_exposure",
        "device_exposure_id",
        "device_concept_id",
        "device_source_concept_id",
        "device_exposure_start_datetime",
        "device_exposure_start_date",
        "device_source_value",
    ),
    _EventTable(
        "death",
        None,
        "cause_concept_id",
        "cause_source_concept_id",
        "death_datetime",
        "death_date",
        "cause_source_value",
        visit=None,
    ),
)
assert tuple(t.table for t in _EVENT_TABLES) == EVENT_DOMAINS
_DOMAIN_ORDER = {d: i for i, d in enumerate(EVENT_DOMAINS)}

_SUFFIXES: tuple[tuple[str, str], ...] = ((".csv", "csv"), (".csv.gz", "csv"), (".parquet", "parquet"))
_DUCKDB_MAGIC = b"DUCK"


_PASS_ROWS = 1 << 20
"""Rows copied per staging pass: big enough that a 100,000-patient measurement table takes a few
dozen passes (each scans the raw table's ``pord`` column once), small enough that a chunk's range
scan reads a few row groups."""


def _passes(counts: list[tuple[int, int]], rows: int) -> list[tuple[int, int]]:
    """Group consecutive chunks ``(index, row count)`` into ``(first, last)`` index ranges of at
    least ``rows`` rows each (the last may be smaller); chunks with no rows are spanned, not split."""
    out: list[tuple[int, int]] = []
    first: int | None = None
    total = 0
    for index, count in counts:
        first = index if first is None else first
        total += count
        if total >= rows:
            out.append((first, index))
            first, total = None, 0
    if first is not None:
        out.append((first, counts[-1][0]))
    return out


def _q(s: str) -> str:
    """A SQL string literal."""
    return "'" + s.replace("'", "''") + "'"


def _ident(s: str) -> str:
    return '"' + s.replace('"', '""') + '"'


def _id_sql(e: str) -> str:
    """An identifier as text: integral numbers without ".0" (Parquet from pandas stores floats)."""
    return (
        f"CASE WHEN TRY_CAST({e} AS DOUBLE) = TRY_CAST({e} AS BIGINT) "
        f"THEN CAST(TRY_CAST({e} AS BIGINT) AS VARCHAR) "
        f"ELSE NULLIF(trim(CAST({e} AS VARCHAR)), '') END"
    )


def _ts_sql(e: str) -> str:
    return f"TRY_CAST({e} AS TIMESTAMP)"


def _date_sql(e: str) -> str:
    return f"TRY_CAST(TRY_CAST({e} AS TIMESTAMP) AS DATE)"


def _bad_sql(raw: str, parsed: str) -> str:
    return f"({raw} IS NOT NULL AND trim(CAST({raw} AS VARCHAR)) <> '' AND {parsed} IS NULL)"


def _csv_sql(f: Path) -> str:
    """``read_csv`` of an OMOP CSV, every column as text, with the dialect read off the header line.

    Naming the columns spares DuckDB's sniffer, which otherwise runs on every query of the view and
    dominates the cost of small tables.
    """
    opener = gzip.open if f.name.lower().endswith(".gz") else open
    with opener(f, "rt", encoding="utf-8-sig", newline="") as fh:
        header = fh.readline().rstrip("\r\n")
    if not header.strip():
        raise UserError(f"OMOP table file {f} is empty: it needs at least a header line")
    delim = max(",\t|;", key=header.count)
    names = next(csv.reader([header], delimiter=delim))
    columns = "{" + ", ".join(f"{_q(n.strip())}: 'VARCHAR'" for n in names) + "}"
    return (
        f"SELECT * FROM read_csv({_q(str(f))}, header = true, auto_detect = false, "
        f"delim = {_q(delim)}, quote = '\"', escape = '\"', columns = {columns})"
    )


def _text(v: Any) -> str | None:
    if v is None:
        return None
    s = str(v).strip()
    return s or None


def format_number(v: Any) -> str | None:
    """A numeric value as the source wrote it: ``48.1`` stays ``48.1``, ``100.0`` becomes ``100``."""
    if v is None:
        return None
    if isinstance(v, Decimal):
        v = float(v)
    if isinstance(v, bool):
        return str(int(v))
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if not math.isfinite(v):
            return str(v)
        if v.is_integer() and abs(v) < 1e16:
            return str(int(v))
        return repr(v)  # the shortest text that reads back as the same float
    return _text(v)


def _when(ts: Any, d: Any, bad: Any, issues: Counter[str]) -> datetime | None:
    if bad:
        issues["bad_datetime"] += 1
    if isinstance(ts, datetime):
        return ts
    issues["missing_datetime" if isinstance(d, date) else "missing_time"] += 1
    return datetime.combine(d, time()) if isinstance(d, date) else None


_PERSON_ORDER = "s.pid IS NULL, s.pkey IS NULL, s.pkey, s.pid"


class OmopSource:
    """An opened OMOP CDM source. Use :meth:`open`; close it (or use ``with``) when done."""

    def __init__(
        self,
        path: Path,
        con: duckdb.DuckDBPyConnection,
        tables: dict[str, str],
        columns: dict[str, set[str]],
        unit: UnitStyle,
        chunk: int,
        tmp: Path,
    ) -> None:
        self.path = path
        self.tables = tables
        """Each table found and where it was read from."""
        self.missing_tables: tuple[str, ...] = tuple(t for t in TABLES if t not in tables)
        """Optional tables absent from the source (their events are simply not there)."""
        self.issues: Counter[str] = Counter()
        """Totals of the per-timeline ``issues`` over every timeline yielded so far."""
        self.orphans: Counter[str] = Counter()
        """Per table, rows skipped because their person_id is NULL or not in the person table."""
        self.rows: Counter[str] = Counter()
        """Per table, rows read into timelines."""
        self.timelines = 0
        self.duplicate_persons = 0
        self.unit = unit
        self.chunk = chunk
        self._tmp = tmp
        self._cleanup = weakref.finalize(self, _close, con, tmp)
        self._con = con
        self._columns = columns
        self._serial = itertools.count()

    # -- opening ---------------------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        path: str | Path,
        *,
        unit: UnitStyle = "source",
        chunk: int = 1000,
        memory_limit: str | None = "2GB",
        work_dir: str | Path | None = None,
    ) -> OmopSource:
        """Open a folder of CSV/Parquet OMOP tables or a DuckDB database file.

        ``unit`` picks how measurement/observation units read: ``"source"`` (default) is the
        ``unit_source_value`` as recorded (``kg``, ``mm[Hg]``), falling back to the unit concept's
        code; ``"name"`` is the unit concept's name (``kilogram``), falling back to the source value.

        Reading stages the tables, grouped by chunk of people, in a temporary DuckDB file under
        ``work_dir`` (default: the system temp folder), then reads ``chunk`` people at a time, so
        Python holds one chunk at a time. DuckDB keeps to ``memory_limit`` (DuckDB's own default, 80%
        of RAM, when None), spilling joins to ``work_dir`` beyond it.
        """
        import duckdb

        p = Path(path).expanduser()
        if not p.exists():
            raise UserError(
                f"OMOP source {p} does not exist: give a folder of OMOP CSV/Parquet tables "
                "or a DuckDB database file"
            )
        if unit not in ("source", "name"):
            raise UserError(f"unit must be 'source' or 'name', not {unit!r}")
        if chunk < 1:
            raise UserError(f"chunk must be 1 or more people, not {chunk}")
        tmp = Path(tempfile.mkdtemp(prefix="clinieval-omop-", dir=work_dir))
        con = duckdb.connect(":memory:")
        try:
            if memory_limit is not None:
                try:
                    con.execute(f"SET memory_limit = {_q(memory_limit)}")
                except duckdb.Error as e:
                    raise UserError(f"bad memory_limit {memory_limit!r}: {str(e).splitlines()[0]}") from None
            con.execute(f"SET temp_directory = {_q(str(tmp / 'spill'))}")
            # Staging regroups rows by person anyway; not keeping file order lets DuckDB stream.
            con.execute("SET preserve_insertion_order = false")
            # Every staging join is written with the small side (concepts, people) on the right, the
            # hash-join build side. DuckDB's optimiser guesses a CSV's size from a sample and once
            # built the hash table from 100,000 patients' notes (out of memory at 8 GB): keep the
            # joins as written.
            con.execute("SET disabled_optimizers = 'join_order,build_side_probe_side'")
            if p.is_dir():
                sources = cls._folder_tables(p)
            elif p.is_file() and cls._is_duckdb(p):
                sources = cls._database_tables(con, p)
            else:
                raise UserError(
                    f"OMOP source {p} is not a folder of OMOP CSV/Parquet tables nor a DuckDB database file"
                )
            where = f"folder {p}" if p.is_dir() else f"database {p}"
            for t in REQUIRED_TABLES:
                if t not in sources:
                    raise UserError(
                        f"OMOP table {t} is missing from {where}: it is required "
                        f"(expected {t.upper()}.csv or {t}.parquet, names in any case)"
                    )
            columns: dict[str, set[str]] = {}
            for t, (sql, _) in sources.items():
                con.execute(f"CREATE VIEW {_ident('raw_' + t)} AS {sql}")
                try:
                    desc = con.execute(f"SELECT * FROM {_ident('raw_' + t)} LIMIT 0").description
                except duckdb.Error as e:
                    raise UserError(
                        f"OMOP table {t} in {where} cannot be read: {str(e).splitlines()[0]}"
                    ) from None
                columns[t] = {str(d[0]).lower() for d in desc or ()}
                missing = [c for c in REQUIRED_COLUMNS[t] if c not in columns[t]]
                if missing:
                    raise UserError(f"OMOP table {t} in {where} lacks required column {', '.join(missing)}")
            materialise = "TABLE" if sources["concept"][1].endswith((".csv", ".csv.gz")) else "VIEW"
            con.execute(
                f"CREATE {materialise} _concept AS SELECT concept_id, concept_name, vocabulary_id, "
                "concept_code FROM (SELECT TRY_CAST(concept_id AS BIGINT) AS concept_id, "
                "CAST(concept_name AS VARCHAR) AS concept_name, "
                "CAST(vocabulary_id AS VARCHAR) AS vocabulary_id, "
                "CAST(concept_code AS VARCHAR) AS concept_code FROM raw_concept) "
                "WHERE concept_id IS NOT NULL QUALIFY row_number() OVER "
                "(PARTITION BY concept_id ORDER BY concept_code, concept_name, vocabulary_id) = 1"
            )
        except BaseException:
            _close(con, tmp)
            raise
        return cls(p, con, {t: loc for t, (_, loc) in sources.items()}, columns, unit, chunk, tmp)

    @staticmethod
    def _is_duckdb(p: Path) -> bool:
        with p.open("rb") as f:
            head = f.read(12)
        return head[8:12] == _DUCKDB_MAGIC

    @staticmethod
    def _folder_tables(folder: Path) -> dict[str, tuple[str, str]]:
        found: dict[str, tuple[str, str]] = {}
        for f in sorted(folder.iterdir()):
            low = f.name.lower()
            for suffix, kind in _SUFFIXES:
                t = low[: -len(suffix)]
                if low.endswith(suffix) and t in TABLES and f.is_file():
                    if t in found:
                        raise UserError(
                            f"OMOP table {t} is in {folder} twice ({Path(found[t][1]).name} "
                            f"and {f.name}): keep one"
                        )
                    sql = _csv_sql(f) if kind == "csv" else f"SELECT * FROM read_parquet({_q(str(f))})"
                    found[t] = (sql, str(f))
        return found

    @staticmethod
    def _database_tables(con: duckdb.DuckDBPyConnection, p: Path) -> dict[str, tuple[str, str]]:
        import duckdb

        try:
            con.execute(f"ATTACH {_q(str(p))} AS _omop_src (READ_ONLY)")
        except duckdb.Error as e:
            raise UserError(f"cannot open DuckDB database {p}: {str(e).splitlines()[0]}") from None
        rows = con.execute(
            "SELECT table_schema, table_name FROM information_schema.tables "
            "WHERE table_catalog = '_omop_src' ORDER BY table_schema <> 'main', table_schema, table_name"
        ).fetchall()
        found: dict[str, tuple[str, str]] = {}
        for schema, name in rows:
            t = str(name).lower()
            if t in TABLES and t not in found:
                ref = f"_omop_src.{_ident(str(schema))}.{_ident(str(name))}"
                found[t] = (f"SELECT * FROM {ref}", f"{p}:{schema}.{name}")
        return found

    # -- SQL -------------------------------------------------------------------------------------

    def _col(self, table: str, col: str | None) -> str:
        return _ident(col) if col is not None and col in self._columns[table] else "NULL"

    def _query(
        self,
        table: str,
        inner: Sequence[str],
        outer: Sequence[str],
        joins: Sequence[str],
        order: Sequence[str],
    ) -> _Select:
        """``inner`` columns are computed from the raw table (must include ``pid``); ``outer`` ones
        (the row handed to Python after ``pid, pkey``) and ``order`` (a person's rows are sorted by
        them) from ``s``, the inner result, and the ``joins``."""
        cols = [f"{e} AS _c{i}" for i, e in enumerate(outer)] + [f"{e} AS _o{i}" for i, e in enumerate(order)]
        sql = (
            f"SELECT s.pid, s.pkey, {', '.join(cols)} FROM (SELECT *, TRY_CAST(pid AS BIGINT) AS pkey "
            f"FROM (SELECT {', '.join(inner)} FROM {_ident('raw_' + table)})) s {' '.join(joins)}"
        )
        return _Select(table, sql, len(outer), len(order))

    def _person_sql(self) -> _Select:
        c = functools.partial(self._col, "person")
        inner = [
            f"{_id_sql(c('person_id'))} AS pid",
            f"{_ts_sql(c('birth_datetime'))} AS bts",
            f"{_bad_sql(c('birth_datetime'), _ts_sql(c('birth_datetime')))} AS bad",
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

    def _visit_sql(self) -> _Select:
        c = functools.partial(self._col, "visit_occurrence")
        inner = [
            f"{_id_sql(c('person_id'))} AS pid",
            f"{_id_sql(c('visit_occurrence_id'))} AS vid",
            f"TRY_CAST({c('visit_occurrence_id')} AS DOUBLE) AS vnum",
            f"{_ts_sql(c('visit_start_datetime'))} AS ts",
            f"{_date_sql(c('visit_start_date'))} AS d",
            f"({_bad_sql(c('visit_start_datetime'), _ts_sql(c('visit_start_datetime')))} OR "
            f"{_bad_sql(c('visit_start_date'), _date_sql(c('visit_start_date')))}) AS bad",
            f"{_ts_sql(c('visit_end_datetime'))} AS ets",
            f"{_date_sql(c('visit_end_date'))} AS ed",
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
        order = ["coalesce(s.ts, CAST(s.d AS TIMESTAMP))", "s.vnum", "s.vid"]
        return self._query("visit_occurrence", inner, outer, joins, order)

    def _event_sql(self, spec: _EventTable) -> _Select:
        t = spec.table
        c = functools.partial(self._col, t)
        inner = [
            f"{_id_sql(c('person_id'))} AS pid",
            f"{_id_sql(c(spec.id_col))} AS rid",
            f"TRY_CAST({c(spec.id_col)} AS DOUBLE) AS rnum",
            f"{_ts_sql(c(spec.datetime))} AS ts",
            f"{_date_sql(c(spec.date))} AS d",
            f"({_bad_sql(c(spec.datetime), _ts_sql(c(spec.datetime)))} OR "
            f"{_bad_sql(c(spec.date), _date_sql(c(spec.date)))}) AS bad",
            f"TRY_CAST({c(spec.concept)} AS BIGINT) AS cid",
            f"TRY_CAST({c(spec.source_concept)} AS BIGINT) AS scid",
            f"CAST({c(spec.source_value)} AS VARCHAR) AS src",
            f"{_id_sql(c(spec.visit))} AS vid",
            f"TRY_CAST({c(spec.value_num)} AS DOUBLE) AS vnum",
            f"CAST({c(spec.value_str)} AS VARCHAR) AS vstr",
            f"TRY_CAST({c(spec.value_concept)} AS BIGINT) AS vcid",
            f"CAST({c(spec.value_source)} AS VARCHAR) AS vsrc",
            f"TRY_CAST({c(spec.unit_concept)} AS BIGINT) AS ucid",
            f"CAST({c(spec.unit_source)} AS VARCHAR) AS usrc",
        ]
        care_site = t == "visit_detail" and "care_site" in self.tables
        inner.append(f"{_id_sql(c('care_site_id'))} AS csid" if care_site else "NULL AS csid")
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
            cs = functools.partial(self._col, "care_site")
            joins.append(
                f"LEFT JOIN (SELECT {_id_sql(cs('care_site_id'))} AS csid, "
                f"any_value(CAST({cs('care_site_name')} AS VARCHAR)) AS name FROM raw_care_site "
                "GROUP BY ALL) cs ON cs.csid = s.csid"
            )
        order = ["coalesce(s.ts, CAST(s.d AS TIMESTAMP))", "s.rnum", "s.rid"]
        return self._query(t, inner, outer, joins, order)

    def _note_sql(self) -> _Select:
        c = functools.partial(self._col, "note")
        inner = [
            f"{_id_sql(c('person_id'))} AS pid",
            f"{_id_sql(c('note_id'))} AS nid",
            f"TRY_CAST({c('note_id')} AS DOUBLE) AS nnum",
            f"{_ts_sql(c('note_datetime'))} AS ts",
            f"{_date_sql(c('note_date'))} AS d",
            f"({_bad_sql(c('note_datetime'), _ts_sql(c('note_datetime')))} OR "
            f"{_bad_sql(c('note_date'), _date_sql(c('note_date')))}) AS bad",
            f"CAST({c('note_title')} AS VARCHAR) AS title",
            f"TRY_CAST({c('note_type_concept_id')} AS BIGINT) AS tcid",
            f"TRY_CAST({c('note_class_concept_id')} AS BIGINT) AS ccid",
            f"CAST({c('note_text')} AS VARCHAR) AS body",
            f"{_id_sql(c('visit_occurrence_id'))} AS vid",
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
        order = ["coalesce(s.ts, CAST(s.d AS TIMESTAMP))", "s.nnum", "s.nid"]
        return self._query("note", inner, outer, joins, order)

    # -- reading ---------------------------------------------------------------------------------

    def person_ids(self) -> list[str]:
        """Every person id, in the order :meth:`iter_timelines` yields them."""
        c = self._col("person", "person_id")
        rows = self._con.execute(
            f"SELECT s.pid FROM (SELECT DISTINCT pid, TRY_CAST(pid AS BIGINT) AS pkey FROM "
            f"(SELECT {_id_sql(c)} AS pid FROM raw_person) WHERE pid IS NOT NULL) s "
            f"ORDER BY {_PERSON_ORDER}"
        ).fetchall()
        return [str(r[0]) for r in rows]

    def iter_timelines(self, person_ids: Iterable[str] | None = None) -> Iterator[Timeline]:
        """One timeline per person, in person_id order (numeric ids numerically), streamed.

        ``person_ids`` restricts the output to those people (still in person_id order); an id that
        is not in the person table is a :class:`UserError`.
        """
        want: str | None = None
        if person_ids is not None:
            ids = sorted({str(i).strip() for i in person_ids})
            want = f"_want_{next(self._serial)}"
            self._con.execute(f"CREATE TABLE {want} AS SELECT unnest(?::VARCHAR[]) AS pid", [ids])
            absent = self._con.execute(
                f"SELECT pid FROM {want} EXCEPT SELECT {_id_sql(self._col('person', 'person_id'))} "
                "FROM raw_person ORDER BY pid LIMIT 3"
            ).fetchall()
            if absent:
                self._con.execute(f"DROP TABLE {want}")
                shown = ", ".join(str(r[0]) for r in absent)
                raise UserError(f"person_id {shown} not in the person table of {self.path}")
        return self._iter(want)

    def _iter(self, want: str | None) -> Iterator[Timeline]:
        con = self._con
        stage = f"_stage{next(self._serial)}"
        db = self._tmp / f"{stage}.duckdb"
        con.execute(f"ATTACH {_q(str(db))} AS {stage}")
        import duckdb

        try:
            try:
                n = self._stage(stage, want)
            except duckdb.OutOfMemoryException as e:
                raise UserError(
                    f"DuckDB ran out of memory staging {self.path}: open it with a larger memory_limit "
                    f"({str(e).splitlines()[0]})"
                ) from None
            person_cols = self._person_sql().n_out
            tables = [self._visit_sql()]
            tables += [self._event_sql(spec) for spec in _EVENT_TABLES if spec.table in self.tables]
            if "note" in self.tables:
                tables.append(self._note_sql())
            for lo in range(1, n + 1, self.chunk):
                hi = lo + self.chunk - 1
                persons = self._fetch(stage, "person", person_cols, 0, lo, hi)
                chunk = {t.table: self._fetch(stage, t.table, t.n_out, t.n_order, lo, hi) for t in tables}
                for pord, rows in persons.items():
                    tl = self._timeline(rows[0], {t: c.get(pord, []) for t, c in chunk.items()})
                    self.issues.update(tl.issues)
                    self.timelines += 1
                    yield tl
        finally:
            con.execute(f"DETACH {stage}")
            for f in (db, db.with_name(db.name + ".wal")):
                f.unlink(missing_ok=True)
            if want is not None:
                con.execute(f"DROP TABLE IF EXISTS {want}")

    def _stage(self, stage: str, want: str | None) -> int:
        """Copy the people (numbered ``pord`` in person_id order) and each table's rows (tagged with
        ``pord`` and grouped by chunk of people) into the stage database; return the number of
        people. Each chunk of people is then read with a range scan of its own row groups."""
        con = self._con
        person = self._person_sql()
        keep = f"AND x.pid IN (SELECT pid FROM {want})" if want else ""
        con.execute(
            f"CREATE TABLE {stage}.person AS SELECT row_number() OVER "
            f"(ORDER BY pkey IS NULL, pkey, pid) AS pord, * FROM (SELECT * FROM ({person.sql}) x "
            f"WHERE x.pid IS NOT NULL {keep} QUALIFY row_number() OVER (PARTITION BY x.pid) = 1) "
            "ORDER BY pord"
        )
        if want is None:
            dup, null = _one(
                con,
                f"SELECT count(pid) - count(DISTINCT pid), count(*) - count(pid) FROM ({person.sql})",
            )
            self.duplicate_persons += dup
            self.orphans["person"] += null
        selects = [self._visit_sql()]
        selects += [self._event_sql(spec) for spec in _EVENT_TABLES if spec.table in self.tables]
        if "note" in self.tables:
            selects.append(self._note_sql())
        join = "LEFT JOIN" if want is None else "JOIN"
        for sel in selects:
            raw = f"{stage}._raw_{sel.table}"
            con.execute(
                f"CREATE TABLE {raw} AS SELECT p.pord, x.* FROM ({sel.sql}) x "
                f"{join} {stage}.person p ON p.pid = x.pid"
            )
            if want is None:
                (lost,) = _one(con, f"SELECT count(*) FROM {raw} WHERE pord IS NULL")
                self.orphans[sel.table] += lost
            self._cluster(raw, f"{stage}.{sel.table}")
            con.execute(f"DROP TABLE {raw}")
        self.orphans += Counter()  # drop zero counts
        (n,) = _one(con, f"SELECT count(*) FROM {stage}.person")
        return int(n)

    def _cluster(self, raw: str, table: str) -> None:
        """Copy ``raw`` into ``table`` in passes of whole chunks of people (about ``_PASS_ROWS`` rows
        each) so that a chunk's rows share row groups and a range scan skips the rest by their
        min/max ``pord``. Passes filter rather than sort, so memory stays flat however long the
        notes are; rows with no person (``pord`` NULL, already counted) are left out."""
        con = self._con
        counts = con.execute(
            f"SELECT (pord - 1) // ? AS c, count(*) FROM {raw} WHERE pord IS NOT NULL GROUP BY c ORDER BY c",
            [self.chunk],
        ).fetchall()
        con.execute(f"CREATE TABLE {table} AS SELECT * FROM {raw} LIMIT 0")
        for first, last in _passes([(int(c), int(k)) for c, k in counts], _PASS_ROWS):
            con.execute(
                f"INSERT INTO {table} SELECT * FROM {raw} WHERE pord BETWEEN ? AND ?",
                [first * self.chunk + 1, (last + 1) * self.chunk],
            )

    def _fetch(
        self, stage: str, table: str, n_out: int, n_order: int, lo: int, hi: int
    ) -> dict[int, list[tuple[Any, ...]]]:
        """Rows ``(pid, pkey, outer columns...)`` of people ``lo..hi`` of a staged table, by person."""
        cols = ", ".join(["pid", "pkey", *(f"_c{i}" for i in range(n_out))])
        order = "".join(f", _o{i} NULLS LAST" for i in range(n_order))
        rows = self._con.execute(
            f"SELECT pord, {cols} FROM {stage}.{table} WHERE pord BETWEEN ? AND ? ORDER BY pord{order}",
            [lo, hi],
        ).fetchall()
        return {int(k): [r[1:] for r in g] for k, g in itertools.groupby(rows, key=lambda r: r[0])}

    def _timeline(self, row: tuple[Any, ...], rows: dict[str, list[tuple[Any, ...]]]) -> Timeline:
        issues: Counter[str] = Counter()
        pid = str(row[0])
        person = Person(person_id=pid, birth=self._birth(row, issues))
        person.sex, person.race, person.ethnicity = (
            self._demographic(row[i], row[i + 1], row[i + 2], row[i + 3], issues) for i in (7, 11, 15)
        )
        tl = Timeline(person=person, issues=issues)

        vrows = rows["visit_occurrence"]
        self.rows["visit_occurrence"] += len(vrows)
        for vid, ts, d, bad, ets, ed, cid, cname, known, src in (r[2:] for r in vrows):
            start = _when(ts, d, bad, issues)
            end = ets if isinstance(ets, datetime) else datetime.combine(ed, time()) if ed else None
            _, _, name = self._coded(
                cid, known, None, None, cname, src, False, None, None, None, issues, zero_name="Visit"
            )
            tl.visits.append(Visit(visit_id=str(vid), type=name, start=start, end=end))
        visit_ids = {v.visit_id for v in tl.visits}

        for spec in _EVENT_TABLES:
            erows = rows.get(spec.table, [])
            self.rows[spec.table] += len(erows)
            for r in erows:
                ev = self._event(spec, r, visit_ids, issues)
                tl.events.append(ev)
                if spec.table == "death" and ev.time is not None:
                    person.death = ev.time if person.death is None else min(person.death, ev.time)
        tl.events.sort(key=lambda e: (e.time is None, e.time or datetime.min, _DOMAIN_ORDER[e.domain]))

        if "note" in rows:
            nrows = rows["note"]
            self.rows["note"] += len(nrows)
            for nid, ts, d, bad, title, tname, cname, body, vid in (r[2:] for r in nrows):
                if vid is None or vid not in visit_ids:
                    issues["no_visit"] += 1
                    vid = None
                tl.notes.append(
                    Note(
                        time=_when(ts, d, bad, issues),
                        type=_text(title) or _text(tname) or _text(cname) or "note",
                        text="" if body is None else str(body),
                        visit_id=vid,
                        note_id=nid,
                    )
                )
        return tl

    @staticmethod
    def _birth(row: tuple[Any, ...], issues: Counter[str]) -> datetime | None:
        bts, bad, y, m, d = row[2:7]
        if bad:
            issues["bad_datetime"] += 1
        if isinstance(bts, datetime):
            return bts
        if y is None:
            return None
        try:
            return datetime(int(y), int(m or 1), int(d or 1))
        except ValueError:
            issues["bad_datetime"] += 1
            return None

    @staticmethod
    def _demographic(cid: Any, name: Any, known: Any, src: Any, issues: Counter[str]) -> str | None:
        if cid is not None and cid != 0:
            if known and _text(name):
                return _text(name)
            if cid in _DEMOGRAPHIC_NAMES:
                return _DEMOGRAPHIC_NAMES[cid]
            issues["unknown_concept"] += 1
        return _text(src)

    @staticmethod
    def _coded(
        cid: Any,
        known: Any,
        vocab: Any,
        code: Any,
        name: Any,
        src: Any,
        s_known: Any,
        s_vocab: Any,
        s_code: Any,
        s_name: Any,
        issues: Counter[str],
        zero_name: str = "No matching concept",
    ) -> tuple[str | None, str | None, str]:
        """(vocabulary, code, name) of a row's standard concept, with the fallbacks counted."""
        if cid is None or cid == 0:
            issues["concept_0"] += 1
            if s_known:
                return _text(s_vocab), _text(s_code), _text(s_name) or zero_name
            sv = _text(src)
            return None, sv, sv or zero_name
        if not known:
            issues["unknown_concept"] += 1
            return None, _text(src) or str(cid), f"Unknown concept {cid}"
        return _text(vocab), _text(code), _text(name) or f"Unknown concept {cid}"

    def _event(
        self, spec: _EventTable, r: tuple[Any, ...], visit_ids: set[str], issues: Counter[str]
    ) -> Event:
        (
            ts,
            d,
            bad,
            cid,
            vocab,
            code,
            name,
            known,
            src,
            s_vocab,
            s_code,
            s_name,
            s_known,
            vid,
            vnum,
            vstr,
            vcid,
            vc_name,
            vc_known,
            vsrc,
            ucid,
            u_code,
            u_name,
            u_known,
            usrc,
            csid,
            cs_name,
        ) = r[2:]
        t = spec.table
        when = _when(ts, d, bad, issues)
        if t == "visit_detail" and _text(cs_name):
            coded: tuple[str | None, str | None, str] = ("CARE_SITE", csid, str(cs_name).strip())
        elif t == "death" and (cid is None or cid == 0) and not s_known and not _text(src):
            coded = (None, None, "Death")  # no cause recorded: nothing to work around
        else:
            coded = self._coded(cid, known, vocab, code, name, src, s_known, s_vocab, s_code, s_name, issues)
        if spec.visit is not None and (vid is None or vid not in visit_ids):
            issues["no_visit"] += 1
            vid = None
        value = unit = None
        if spec.value_num is not None or spec.value_concept is not None:
            value = format_number(vnum) or _text(vstr)
            if value is None and vcid is not None and vcid != 0:
                if vc_known:
                    value = _text(vc_name)
                else:
                    issues["unknown_concept"] += 1
                    value = f"Unknown concept {vcid}"
            value = value or _text(vsrc)
            if value is not None:
                unit = self._unit(ucid, u_code, u_name, u_known, usrc, issues)
        return Event(
            domain=t,
            time=when,
            name=coded[2],
            vocabulary=coded[0],
            code=coded[1],
            value=value,
            unit=unit,
            visit_id=vid,
        )

    def _unit(
        self, ucid: Any, u_code: Any, u_name: Any, u_known: Any, usrc: Any, issues: Counter[str]
    ) -> str | None:
        if ucid is not None and ucid != 0 and not u_known:
            issues["unknown_concept"] += 1
        concept = (_text(u_code) if self.unit == "source" else _text(u_name)) if u_known else None
        if self.unit == "source":
            return _text(usrc) or concept
        return concept or _text(usrc)

    # -- summary / lifetime ----------------------------------------------------------------------

    def summary(self) -> dict[str, Any]:
        """Reader-level totals: tables found and missing, rows read, orphans, issues."""
        return {
            "path": str(self.path),
            "tables": dict(self.tables),
            "missing_tables": list(self.missing_tables),
            "timelines": self.timelines,
            "duplicate_persons": self.duplicate_persons,
            "rows": dict(self.rows),
            "orphans": dict(self.orphans),
            "issues": dict(self.issues),
        }

    def close(self) -> None:
        """Close DuckDB and remove the temporary folder (also done when the source is collected)."""
        self._cleanup()

    def __enter__(self) -> OmopSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class _Select:
    table: str
    sql: str
    n_out: int
    n_order: int


def _close(con: duckdb.DuckDBPyConnection, tmp: Path) -> None:
    con.close()
    shutil.rmtree(tmp, ignore_errors=True)


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None
    return row


def open_omop(path: str | Path, **options: Any) -> OmopSource:
    """Shorthand for :meth:`OmopSource.open`."""
    return OmopSource.open(path, **options)
