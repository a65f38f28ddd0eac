"""Engines: what runs the statements the other rooms build as sqlglot trees (DuckDB now; Spark next)."""

from .base import Engine, Prepared, Statement
from .duckdb_engine import DuckDBEngine, as_engine

__all__ = ["DuckDBEngine", "Engine", "Prepared", "Statement", "as_engine"]
