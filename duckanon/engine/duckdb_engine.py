"""DuckDB as an engine: statements generated in DuckDB's dialect, run on one connection."""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import Iterator, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..errors import AnonymizationError, GeneratedSqlError
from .base import Engine, Frame, Prepared, Statement

_LOG = logging.getLogger("duckanon.sql")


class DuckDBEngine(Engine):
    """An engine over a DuckDB connection (``connection``, for what only DuckDB offers: attaching release files)."""

    dialect = "duckdb"
    catalog_errors = (duckdb.CatalogException,)
    _READERS = {"csv": "read_csv_auto", "tsv": "read_csv_auto", "parquet": "read_parquet", "json": "read_json_auto"}

    def __init__(self, connection: duckdb.DuckDBPyConnection):
        self.connection = connection

    def _execute(self, statement: Statement, parameters: Sequence[object] | None = None) -> duckdb.DuckDBPyConnection:
        sql = statement if isinstance(statement, Prepared) else self.prepare(statement)
        try:
            return self.connection.execute(sql, parameters) if parameters is not None else self.connection.execute(sql)
        except (duckdb.ParserException, duckdb.BinderException, duckdb.InternalException) as error:
            # Input is checked before SQL runs, so DuckDB refusing the statement itself is our fault: say so, and
            # keep the statement for the report (the debug log; the exception's ``statement``).
            text = str(sql)
            _LOG.debug("DuckDB %s rejected: %s", duckdb.__version__, text)
            raise GeneratedSqlError(f"DuckDB {duckdb.__version__} rejected a statement duckanon built: "
                                    f"{str(error).splitlines()[0]}", text) from error

    def run(self, statement, parameters=None) -> None:
        self._execute(statement, parameters)

    def rows(self, query, parameters=None) -> list[tuple]:
        return self._execute(query, parameters).fetchall()

    def batches(self, query, rows: int = 100_000) -> Iterator[list[tuple]]:
        """A query's rows, ``rows`` at a time, so that a result larger than memory is read in bounded memory (DuckDB
        only; nothing else may run on this engine until every batch is read)."""
        result = self._execute(query)
        while batch := result.fetchmany(rows):
            yield batch

    def frame(self, query) -> pd.DataFrame:
        return self._execute(query).df()

    def arrays(self, query) -> dict[str, np.ndarray]:
        return self._execute(query).fetchnumpy()

    def types(self, relation: exp.Expression) -> dict[str, str]:
        # DESCRIBE names each column's SQL type on every DuckDB; a cursor's description gives only DB-API type codes
        # ('NUMBER', 'STRING') on older ones (1.2).
        query = relation if isinstance(relation, exp.Query) else exp.select(exp.Star()).from_(relation)
        return {row[0]: str(row[1]) for row in self._execute(exp.Describe(this=query)).fetchall()}

    def table_widths(self, schema: str, names: Sequence[str]) -> dict[str, int]:
        literal = exp.Literal.string
        catalog = exp.Table(this=exp.Anonymous(this="duckdb_tables", expressions=[]))
        return dict(self.rows(exp.select("table_name", "column_count").from_(catalog).where(exp.and_(
            exp.column("schema_name").eq(literal(schema)),
            exp.column("database_name").eq(exp.func("CURRENT_DATABASE")),
            exp.column("table_name").isin(*[literal(n) for n in names])))))

    def protected_paths(self, sources: Sequence[exp.Expression]) -> dict[str, str]:
        attached = self.rows(exp.select("database_name", "path").from_(
            exp.Table(this=exp.Anonymous(this="duckdb_databases"))).where("path IS NOT NULL"))
        return {**{path: f"database {name!r} attached to this connection" for name, path in attached},
                **super().protected_paths(sources)}

    def read_file(self, path: str, kind: str) -> exp.Expression:
        files = path
        if os.path.isdir(path):
            # A folder is a data set written in parts, as Spark writes Parquet.
            if kind != "parquet":
                raise AnonymizationError(f"{path!r} is a folder: DuckDB reads a folder only as Parquet parts "
                                         f"(name it *.parquet), or name one {kind} file in it")
            files = os.path.join(path, "*.parquet")
        return exp.Table(this=exp.Anonymous(this=self._READERS[kind], expressions=[exp.Literal.string(files)]))

    def write_parquet(self, query: exp.Expression, path: str) -> None:
        self.run(exp.Copy(this=query.subquery(), kind=False, files=[exp.Literal.string(path)], params=[
            exp.CopyParameter(this=exp.var(name), expression=value)
            for name, value in (("FORMAT", exp.var("parquet")), *parquet_options())]))

    def run_many(self, statement: exp.Expression, rows: Sequence[Sequence[object]]) -> None:
        self.connection.executemany(self.prepare(statement), [list(r) for r in rows])

    def register(self, name: str, frame: Frame) -> None:
        self.connection.register(name, frame)

    def unregister(self, name: str) -> None:
        self.connection.unregister(name)

    def close(self) -> None:
        self.connection.close()

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        self.run(exp.Transaction())
        try:
            yield
        except BaseException:
            self.run(exp.Rollback())
            raise
        self.run(exp.Commit())


# DuckDB before 2.0 writes values equal but written differently (-0.0 and 0.0, a month and 30 days) as one another
# wherever its compression finds them equal: a Parquet dictionary's entries, a run or a constant segment of a
# database file.
MERGES_EQUAL_VALUES = tuple(int(part) for part in duckdb.__version__.split(".")[:2]) < (2, 0)


def parquet_options() -> list[tuple[str, exp.Expression]]:
    """The COPY options of every Parquet file written from DuckDB, beyond its format: no dictionary where DuckDB
    merges equal values (:data:`MERGES_EQUAL_VALUES`)."""
    return [("DICTIONARY_SIZE_LIMIT", exp.Literal.number(0))] if MERGES_EQUAL_VALUES else []


def as_engine(database: Engine | duckdb.DuckDBPyConnection) -> Engine:
    """The engine for what a caller of a public function holds: an Engine as it is, a DuckDB connection wrapped."""
    if isinstance(database, Engine):
        return database
    if isinstance(database, duckdb.DuckDBPyConnection):
        return DuckDBEngine(database)
    raise TypeError(f"expected a DuckDB connection or a duckanon Engine, got {type(database).__name__}")
