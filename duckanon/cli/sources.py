"""The data a command reads: the bundled Adult records, a CSV/Parquet/JSON file, or a table of a DuckDB database file.

A database file is attached read-only to an in-memory connection, so no command changes it; the hierarchies and
policies stored in its ``anon`` schema (tables, or views) are copied into the connection's own ``anon`` schema, where
the anonymizer looks for them (and where it may store what it needs, such as a hierarchy given as a file).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import duckdb
from sqlglot import exp

from .. import datasets
from ..encode.sources import FILE_KINDS, source_relation
from ..encode.tables import Tables
from ..engine import DuckDBEngine
from ..errors import AnonymizationError
from ..hierarchy.hierarchy import SCHEMA
from ..sqlgen import build as sb

BUNDLED_TABLE = "adult"
ATTACHED = "source"  # the catalog name the source database is attached under


@dataclass
class Source:
    engine: DuckDBEngine
    relation: str | exp.Expression | Tables  # what the library reads: a file path, the attached table, or tables
    name: str  # the released table's name unless one is given
    path: Path | None  # None: the bundled data

    @property
    def bundled(self) -> bool:
        return self.path is None

    def expression(self) -> exp.Expression:
        """The relation as SQL, for the command line's own queries."""
        return source_relation(self.engine, self.relation)


def is_data_file(path: Path) -> bool:
    return path.suffix.lower() in FILE_KINDS


def open_source(text: str | None, table: str | None) -> Source:
    """The bundled Adult data when ``text`` is None; a data file; or ``table`` of a database file."""
    if text is None:
        con = duckdb.connect()
        datasets.load_adult(con, BUNDLED_TABLE)
        return Source(DuckDBEngine(con), BUNDLED_TABLE, BUNDLED_TABLE, None)
    path = existing_file(text)
    if is_data_file(path):
        if table is not None:
            raise AnonymizationError(f"--table {table!r} names a table of a database file, but {text!r} is a data file")
        return Source(DuckDBEngine(duckdb.connect()), str(path), path.name.split(".")[0], path)
    engine = attach_database(path)
    if table is None:
        raise AnonymizationError(f"{text!r} is a database file: name the table to read with --table "
                                 f"(it has {_listing(database_tables(engine))})")
    return Source(engine, database_table(engine, path, table), table, path)


def ledger_key(text: str | None, table: str | None) -> str:
    """What names a source in a privacy ledger: a data file by its absolute path, a database file's table by the
    file's path and the table, the bundled data by its name."""
    if text is None:
        return f"{BUNDLED_TABLE} (bundled)"
    path = existing_file(text).resolve()
    if is_data_file(path):
        return str(path)
    if table is None:
        raise AnonymizationError(f"{text!r} is a database file: name the table with --table")
    return f"{path}:{table}"


def with_events(source: Source, events: list[str], key: str | None) -> Source:
    """``source`` as the person table of :class:`Tables` joined by ``key`` to each of ``events``: tables of its
    database file, or data files (named by their stems)."""
    if not events:
        return source
    if source.bundled:
        raise AnonymizationError("--events joins event tables to a person table: name the person table's file")
    if key is None:
        raise AnonymizationError("--events needs --person, the key column that joins the tables")
    named = {source.name: source.relation}
    for event in events:
        if is_data_file(source.path):
            path = existing_file(event)
            if not is_data_file(path):
                raise AnonymizationError(f"--events {event!r}: the source is a data file, so each event table is a "
                                         f"CSV, Parquet or JSON file too")
            name, relation = path.name.split(".")[0], str(path)
        else:
            name, relation = event, database_table(source.engine, source.path, event)
        if name in named:
            raise AnonymizationError(f"--events {event!r}: two tables named {name!r}")
        named[name] = relation
    return dataclasses.replace(source, relation=Tables(named, key=key))


def existing_file(text: str) -> Path:
    """A file, or a folder of Parquet parts (as Spark writes a data set or a release) named ``*.parquet``."""
    path = Path(text)
    if not path.is_file() and not (path.is_dir() and path.suffix.lower() == ".parquet"):
        raise AnonymizationError(f"no such file: {text!r}" + (" (it is a directory)" if path.is_dir() else ""))
    return path


def attach_database(path: Path) -> DuckDBEngine:
    """An in-memory database with ``path`` attached read-only and its stored hierarchies and policies copied."""
    engine = DuckDBEngine(duckdb.connect())
    engine.run(exp.Attach(this=exp.alias_(sb.lit(str(path)), ATTACHED, quoted=True),
                          expressions=[exp.AttachOption(this=exp.var("READ_ONLY"))]))
    engine.run(exp.Create(this=sb.ident(SCHEMA), kind="SCHEMA", exists=True))
    for name in _tables(engine, SCHEMA):
        engine.run(sb.create_table_as(sb.table(name, SCHEMA), exp.select(exp.Star()).from_(
            sb.table(name, SCHEMA, ATTACHED))))
    return engine


def database_tables(engine: DuckDBEngine) -> list[str]:
    return _tables(engine, "main")


def database_table(engine: DuckDBEngine, path: Path, table: str) -> exp.Table:
    tables = database_tables(engine)
    if table not in tables:
        raise AnonymizationError(f"no table {table!r} in {str(path)!r} (it has {_listing(tables)})")
    return sb.table(table, "main", ATTACHED)


def _tables(engine: DuckDBEngine, schema: str) -> list[str]:
    """The tables and views of a schema of the attached database (a shell user may keep a hierarchy as a view)."""
    def listed(function: str, column: str) -> exp.Select:
        catalog = exp.Table(this=exp.Anonymous(this=function, expressions=[]))
        return (exp.select(sb.col(column).as_("name", quoted=True)).from_(catalog)
                .where(exp.and_(sb.col("database_name").eq(sb.lit(ATTACHED)), sb.col("schema_name").eq(sb.lit(schema)),
                                sb.col("internal").not_())))

    query = exp.union(listed("duckdb_tables", "table_name"), listed("duckdb_views", "view_name"), distinct=False)
    return sorted(row[0] for row in engine.rows(query))


def _listing(tables: list[str]) -> str:
    return "tables " + ", ".join(repr(t) for t in tables) if tables else "no tables"
