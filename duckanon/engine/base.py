"""The engine interface: the one narrow door through which algorithms reach a database.

Algorithms build statements as sqlglot trees and hand them to an :class:`Engine`, which generates them in its own
dialect and runs them.  Nothing above this module holds a connection: an algorithm written against this interface
runs on any engine that implements it (DuckDB today; Spark SQL generates from the same trees).

A statement is a tree, or a :class:`Prepared` text that the same engine generated from a tree beforehand
(:meth:`Engine.prepare`): searches and partitioning rounds run one shape thousands of times, and rendering a tree
costs more than running a small query.  Positional parameters (``$1``...) fill such a text's values.
"""

from __future__ import annotations

import contextlib
import itertools
import os
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping, Sequence
from typing import TypeAlias

import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..sqlgen import build as sb


class Prepared(str):
    """SQL text an engine generated from a tree with :meth:`Engine.prepare`; only such text is ever run as text."""


Statement = exp.Expression | Prepared
# What can be registered as a table: named columns as NumPy arrays need no pandas, which the CLI's main job never loads.
Frame: TypeAlias = "pd.DataFrame | Mapping[str, np.ndarray]"
_serial = itertools.count()


class Engine(ABC):
    """Runs statements built as trees, in ``dialect``."""

    dialect: str
    # What the engine raises for a table or column that does not exist.
    catalog_errors: tuple[type[BaseException], ...] = ()

    def prepare(self, statement: exp.Expression) -> Prepared:
        """The statement as this engine's SQL text, to run many times."""
        return Prepared(statement.sql(dialect=self.dialect))

    @abstractmethod
    def run(self, statement: Statement, parameters: Sequence[object] | None = None) -> None:
        """Run a statement for its effect."""

    @abstractmethod
    def rows(self, query: Statement, parameters: Sequence[object] | None = None) -> list[tuple]:
        """A query's rows."""

    @abstractmethod
    def frame(self, query: Statement) -> pd.DataFrame:
        """A query's rows as a DataFrame."""

    @abstractmethod
    def arrays(self, query: Statement) -> dict[str, np.ndarray]:
        """A query's columns as NumPy arrays (masked where NULL)."""

    @abstractmethod
    def types(self, relation: exp.Expression) -> dict[str, str]:
        """Each column of a table or query with its type name in this engine, as the engine writes it (an ENUM's name
        holds its values, so no case is changed), reading no rows."""

    def columns(self, relation: exp.Expression) -> list[str]:
        return list(self.types(relation))

    def exists(self, relation: exp.Expression) -> bool:
        """Whether a table, view or query can be read."""
        try:
            self.types(relation)
            return True
        except self.catalog_errors:
            return False

    @abstractmethod
    def table_widths(self, schema: str, names: Sequence[str]) -> dict[str, int]:
        """Each of the tables ``names`` that exists in ``schema`` of the current database, with its number of
        columns (one catalog lookup)."""

    @abstractmethod
    def write_parquet(self, query: exp.Expression, path: str) -> None:
        """The query's rows as Parquet at ``path``: one file (DuckDB) or a folder of part files written by the
        executors (Spark); either reads back through :meth:`read_file`."""

    @abstractmethod
    def read_file(self, path: str, kind: str) -> exp.Expression:
        """A relation reading the file (or folder of files) at ``path``: ``kind`` csv, parquet or json."""

    def protected_paths(self, sources: Sequence[exp.Expression]) -> dict[str, str]:
        """Files a release must never be written over, each with what it is: those the ``sources`` read."""
        return {literal.this: f"source file {literal.this!r}" for source in sources
                for literal in source.find_all(exp.Literal)
                if literal.is_string and literal.this and os.path.exists(literal.this)}

    def native_relation(self, source: object) -> exp.Expression | None:
        """A relation for a source object of this engine's own (a Spark DataFrame), or None."""
        return None

    def value(self, query: Statement, parameters: Sequence[object] | None = None) -> object:
        """The single value of a one-row, one-column query."""
        return self.rows(query, parameters)[0][0]

    @abstractmethod
    def run_many(self, statement: exp.Expression, rows: Sequence[Sequence[object]]) -> None:
        """Run a statement with placeholders once per row of values (inserts of many rows)."""

    @abstractmethod
    def register(self, name: str, frame: Frame) -> None:
        """Make a DataFrame, or columns as NumPy arrays by name, readable as table ``name`` for this session."""

    @abstractmethod
    def unregister(self, name: str) -> None:
        """Forget a registered DataFrame."""

    @contextlib.contextmanager
    def registered(self, frame: Frame, name: str | None = None) -> Iterator[exp.Table]:
        """A DataFrame, or columns as NumPy arrays by name, readable as a table while the block runs."""
        name = name or f"__duckanon_frame_{next(_serial)}"
        self.register(name, frame)
        try:
            yield exp.Table(this=exp.to_identifier(name, quoted=True))
        finally:
            self.unregister(name)

    @contextlib.contextmanager
    def temporary(self, query: exp.Expression) -> Iterator[exp.Table]:
        """``query``'s rows as a temporary table while the block runs."""
        table = exp.Table(this=exp.to_identifier(f"__duckanon_temporary_{next(_serial)}", quoted=True))
        self.run(sb.create_table_as(table, query, temporary=True))
        try:
            yield table
        finally:
            self.run(sb.drop("TABLE", table))

    @abstractmethod
    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """All statements of the block take effect together, or none does."""
