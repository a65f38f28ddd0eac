"""The report's figures as tables in a DuckDB file of their own, for those who read them with SQL.

Only aggregates go in: risk measures, class-size shares, population-uniqueness estimates, classification accuracy
and the frontier, never a source value (the per-value distributions stay in the HTML).  The release itself is never
written to: once verified, nothing of ours changes its bytes.
"""

from __future__ import annotations

from pathlib import Path

import duckdb
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import DuckDBEngine
from ..errors import AnonymizationError
from ..sqlgen import build as sb
from .figures import ReportFigures

PREFIX = "report_"
SUFFIXES = (".duckdb", ".db")


def report_tables(figures: ReportFigures) -> dict[str, pd.DataFrame]:
    tables = {"metrics": figures.metrics}
    if figures.risk is not None:
        tables["risk"] = figures.risk.table()
        if (population := figures.risk.population_table()) is not None:
            tables["population_uniqueness"] = population
    if figures.class_buckets is not None:
        tables["class_sizes"] = figures.class_buckets.rename(columns={"bucket": "class_size"})
    if figures.noisy_class_sizes is not None:
        tables["noisy_class_sizes"] = figures.noisy_class_sizes.rename(columns={"bucket": "class_size"})
    if figures.special_uniques is not None:
        tables["special_uniques"] = figures.special_uniques
    if figures.accuracy is not None:
        tables["accuracy"] = figures.accuracy
    if figures.frontier is not None:
        tables["frontier"] = figures.frontier.rename(columns={"value": figures.frontier_request.parameter})
    return {PREFIX + name: frame for name, frame in tables.items() if len(frame.columns)}


def checked_tables_path(path: Path, release: Path) -> Path:
    """The tables file's path, refused before any work when it could not be one (or is the release itself)."""
    if path.suffix.lower() not in SUFFIXES:
        raise AnonymizationError(f"report tables path {str(path)!r} must end in .duckdb")
    if path.resolve() == release.resolve():
        raise AnonymizationError(f"report tables path {str(path)!r} is the release: a report never writes into it; "
                                 f"name another file")
    return path


def write_tables(figures: ReportFigures, partial: Path) -> None:
    """The figures' tables into a new DuckDB file at ``partial`` (renamed into place by the caller)."""
    engine = DuckDBEngine(duckdb.connect(str(partial)))
    try:
        for name, frame in report_tables(figures).items():
            with engine.registered(frame) as registered:
                engine.run(sb.create_table_as(sb.table(name), exp.select(exp.Star()).from_(registered)))
    finally:
        engine.close()
