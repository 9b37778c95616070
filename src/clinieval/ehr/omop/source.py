"""An opened OMOP CDM source: the tables found and checked, staged in DuckDB, read as timelines.

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

The SQL text is :mod:`.sql`'s and the decoding of rows :mod:`.rows`'s; this module owns the
connection, the temporary files and the order of work.
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
import weakref
from collections import Counter
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from clinieval.ehr.omop.rows import UnitStyle, timeline
from clinieval.ehr.omop.sql import TableSql, csv_sql, id_sql, ident, literal
from clinieval.ehr.omop.tables import EVENT_TABLES, REQUIRED_COLUMNS, REQUIRED_TABLES, TABLES
from clinieval.ehr.timeline import Timeline
from clinieval.errors import UserError

if TYPE_CHECKING:
    import duckdb

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


_PERSON_ORDER = "s.pid IS NULL, s.pkey IS NULL, s.pkey, s.pid"


_OFFLINE: dict[str, str | bool | int | float | list[str]] = {
    "autoinstall_known_extensions": False,
    "autoload_known_extensions": False,
}
"""DuckDB would otherwise download and load an extension (httpfs) the moment a query names a URL:
network access outside the egress guard. Extensions that ship with DuckDB still work."""


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
        self._sql = TableSql(columns, tables)
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
        con = duckdb.connect(":memory:", config=_OFFLINE)
        try:
            if memory_limit is not None:
                try:
                    con.execute(f"SET memory_limit = {literal(memory_limit)}")
                except duckdb.Error as e:
                    raise UserError(f"bad memory_limit {memory_limit!r}: {str(e).splitlines()[0]}") from None
            con.execute(f"SET temp_directory = {literal(str(tmp / 'spill'))}")
            # Staging regroups rows by person anyway; not keeping file order lets DuckDB stream.
            con.execute("SET preserve_insertion_order = false")
            # Every staging join is written with the small side (concepts, people) on the right, the
            # hash-join build side. DuckDB's optimiser guesses a CSV's size from a sample and once
            # built the hash table from 100,000 patients' notes (out of memory at 8 GB): keep the
            # joins as written.
            con.execute("SET disabled_optimizers = 'join_order,build_side_probe_side'")
            # Only the source and the staging folder are reachable: a database file whose views
            # read another file, or a URL (read_parquet('https://...')), gets a permission error
            # instead of reaching outside. The setting cannot be turned back on in this connection.
            readable = p if p.is_dir() else p.parent
            folders = ", ".join(literal(str(d.resolve()) + "/") for d in (readable, tmp))
            con.execute(f"SET allowed_directories = [{folders}]")
            con.execute("SET enable_external_access = false")
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
                try:
                    con.execute(f"CREATE VIEW {ident('raw_' + t)} AS {sql}")
                    desc = con.execute(f"SELECT * FROM {ident('raw_' + t)} LIMIT 0").description
                except duckdb.Error as e:
                    raise UserError(
                        f"OMOP table {t} in {where} cannot be read: {str(e).splitlines()[0]}"
                    ) from None
                columns[t] = {str(d[0]).lower() for d in desc or ()}
                missing = [c for c in REQUIRED_COLUMNS[t] if c not in columns[t]]
                if missing:
                    raise UserError(f"OMOP table {t} in {where} lacks required column {', '.join(missing)}")
            materialise = "TABLE" if sources["concept"][1].endswith((".csv", ".csv.gz")) else "VIEW"
            try:
                con.execute(
                    f"CREATE {materialise} _concept AS SELECT concept_id, concept_name, vocabulary_id, "
                    "concept_code FROM (SELECT TRY_CAST(concept_id AS BIGINT) AS concept_id, "
                    "CAST(concept_name AS VARCHAR) AS concept_name, "
                    "CAST(vocabulary_id AS VARCHAR) AS vocabulary_id, "
                    "CAST(concept_code AS VARCHAR) AS concept_code FROM raw_concept) "
                    "WHERE concept_id IS NOT NULL QUALIFY row_number() OVER "
                    "(PARTITION BY concept_id ORDER BY concept_code, concept_name, vocabulary_id) = 1"
                )
            except duckdb.Error as e:  # a CSV concept table is read in full here
                raise _read_error(p, e) from None
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
                    sql = csv_sql(f) if kind == "csv" else f"SELECT * FROM read_parquet({literal(str(f))})"
                    found[t] = (sql, str(f))
        return found

    @staticmethod
    def _database_tables(con: duckdb.DuckDBPyConnection, p: Path) -> dict[str, tuple[str, str]]:
        import duckdb

        try:
            con.execute(f"ATTACH {literal(str(p))} AS _omop_src (READ_ONLY)")
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
                ref = f"_omop_src.{ident(str(schema))}.{ident(str(name))}"
                found[t] = (f"SELECT * FROM {ref}", f"{p}:{schema}.{name}")
        return found

    # -- SQL -------------------------------------------------------------------------------------
    # -- reading ---------------------------------------------------------------------------------

    def person_ids(self) -> list[str]:
        """Every person id, in the order :meth:`iter_timelines` yields them."""
        import duckdb

        c = self._sql.col("person", "person_id")
        try:
            rows = self._con.execute(
                f"SELECT s.pid FROM (SELECT DISTINCT pid, TRY_CAST(pid AS BIGINT) AS pkey FROM "
                f"(SELECT {id_sql(c)} AS pid FROM raw_person) WHERE pid IS NOT NULL) s "
                f"ORDER BY {_PERSON_ORDER}"
            ).fetchall()
        except duckdb.Error as e:  # the first query that reads the person table's rows
            raise _read_error(self.path, e) from None
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
                f"SELECT pid FROM {want} EXCEPT SELECT {id_sql(self._sql.col('person', 'person_id'))} "
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
        con.execute(f"ATTACH {literal(str(db))} AS {stage}")
        import duckdb

        try:
            try:
                n = self._stage(stage, want)
            except duckdb.OutOfMemoryException as e:
                raise UserError(
                    f"DuckDB ran out of memory staging {self.path}: open it with a larger memory_limit "
                    f"({str(e).splitlines()[0]})"
                ) from None
            except duckdb.Error as e:  # staging reads every row of every table
                raise _read_error(self.path, e) from None
            person_cols = self._sql.person().n_out
            tables = [self._sql.visit()]
            tables += [self._sql.event(spec) for spec in EVENT_TABLES if spec.table in self.tables]
            if "note" in self.tables:
                tables.append(self._sql.note())
            for lo in range(1, n + 1, self.chunk):
                hi = lo + self.chunk - 1
                persons = self._fetch(stage, "person", person_cols, 0, lo, hi)
                chunk = {t.table: self._fetch(stage, t.table, t.n_out, t.n_order, lo, hi) for t in tables}
                for pord, rows in persons.items():
                    tl = timeline(
                        rows[0], {t: c.get(pord, []) for t, c in chunk.items()}, self.unit, self.rows
                    )
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
        person = self._sql.person()
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
        selects = [self._sql.visit()]
        selects += [self._sql.event(spec) for spec in EVENT_TABLES if spec.table in self.tables]
        if "note" in self.tables:
            selects.append(self._sql.note())
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


def _close(con: duckdb.DuckDBPyConnection, tmp: Path) -> None:
    con.close()
    shutil.rmtree(tmp, ignore_errors=True)


def _read_error(source: Path, error: duckdb.Error) -> UserError:
    """One line for a table DuckDB could not read (a CSV row with an unterminated quote or bytes
    that are not UTF-8): ``file:line`` from DuckDB's report (its ``file =`` line and its first
    line, ``CSV Error on Line: 3``), and the reason."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    first = lines[0] if lines else type(error).__name__
    where = next((line.partition("=")[2].strip() for line in lines if line.startswith("file =")), "")
    at = re.search(r"\bLine: (\d+)", first)
    if where and at:
        where += f":{at[1]}"
    reason = next((x for x in lines[1:3] if not x.startswith("Original Line")), "")
    return UserError(
        f"OMOP table file {where or source}: cannot be read ({' '.join(x for x in (first, reason) if x)})"
    )


def _one(con: duckdb.DuckDBPyConnection, sql: str) -> tuple[Any, ...]:
    row = con.execute(sql).fetchone()
    assert row is not None
    return row


def open_omop(path: str | Path, **options: Any) -> OmopSource:
    """Shorthand for :meth:`OmopSource.open`."""
    return OmopSource.open(path, **options)
