"""DuckDB as an engine: statements generated in DuckDB's dialect, run on one connection."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from .base import Engine, Prepared, Statement


class DuckDBEngine(Engine):
    """An engine over a DuckDB connection (``connection``, for what only DuckDB offers: attaching release files)."""

    dialect = "duckdb"

    def __init__(self, connection: duckdb.DuckDBPyConnection):
        self.connection = connection

    def _execute(self, statement: Statement, parameters: Sequence[object] | None = None) -> duckdb.DuckDBPyConnection:
        sql = statement if isinstance(statement, Prepared) else self.prepare(statement)
        return self.connection.execute(sql, parameters) if parameters is not None else self.connection.execute(sql)

    def run(self, statement, parameters=None) -> None:
        self._execute(statement, parameters)

    def rows(self, query, parameters=None) -> list[tuple]:
        return self._execute(query, parameters).fetchall()

    def frame(self, query) -> pd.DataFrame:
        return self._execute(query).df()

    def arrays(self, query) -> dict[str, np.ndarray]:
        return self._execute(query).fetchnumpy()

    def types(self, relation: exp.Expression) -> dict[str, str]:
        query = relation if isinstance(relation, exp.Query) else exp.select(exp.Star()).from_(relation)
        return {d[0]: str(d[1]) for d in self._execute(query.limit(0)).description}

    def run_many(self, statement: exp.Expression, rows: Sequence[Sequence[object]]) -> None:
        self.connection.executemany(self.prepare(statement), [list(r) for r in rows])

    def register(self, name: str, frame: pd.DataFrame) -> None:
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


def as_engine(database: Engine | duckdb.DuckDBPyConnection) -> Engine:
    """The engine for what a caller of a public function holds: an Engine as it is, a DuckDB connection wrapped."""
    if isinstance(database, Engine):
        return database
    if isinstance(database, duckdb.DuckDBPyConnection):
        return DuckDBEngine(database)
    raise TypeError(f"expected a DuckDB connection or a duckanon Engine, got {type(database).__name__}")
