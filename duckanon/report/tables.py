"""The report's figures as tables inside a DuckDB release, for those who read it with SQL.

Only aggregates go in: risk measures, class-size shares, population-uniqueness estimates, classification accuracy
and the frontier, never a source value (the per-value distributions stay in the HTML, which the custodian keeps).
The tables are replaced in one transaction on the release's file (an earlier report's ``report_*`` tables that this
one lacks are dropped); its released table, views and ``release_info`` are not touched.  Parquet and CSV releases have no room for them.
"""

from __future__ import annotations

import duckdb
import pandas as pd
from sqlglot import exp

from ..engine import DuckDBEngine
from ..errors import AnonymizationError
from ..release.files import release_format
from ..sqlgen import build as sb
from .figures import ReportFigures

PREFIX = "report_"


def report_tables(figures: ReportFigures) -> dict[str, pd.DataFrame]:
    tables = {"metrics": figures.metrics}
    if figures.risk is not None:
        tables["risk"] = figures.risk.table()
        if (population := figures.risk.population_table()) is not None:
            tables["population_uniqueness"] = population
    if figures.class_buckets is not None:
        tables["class_sizes"] = figures.class_buckets.rename(columns={"bucket": "class_size"})
    if figures.accuracy is not None:
        tables["accuracy"] = figures.accuracy
    if figures.frontier is not None:
        tables["frontier"] = figures.frontier.rename(columns={"value": figures.frontier_request.parameter})
    return {PREFIX + name: frame for name, frame in tables.items() if len(frame.columns)}


def store(figures: ReportFigures) -> str | None:
    """Write the figures' tables into the release when it is a DuckDB file; None when stored, else why not."""
    if release_format(figures.path) != "duckdb":
        return (f"The figures' tables are stored only inside DuckDB releases; this one is "
                f"{release_format(figures.path)}.")
    try:
        connection = duckdb.connect(str(figures.path))
    except duckdb.IOException as error:  # another process holds the file (a BI tool reading it)
        return f"The figures' tables were not stored in the release: it could not be opened for writing ({error})."
    engine = DuckDBEngine(connection)
    tables = report_tables(figures)
    try:
        if figures.info["released_table"] in tables:
            raise AnonymizationError(f"the release's table is named {figures.info['released_table']!r}, as one of "
                                     f"the report's tables would be: its tables were not stored")
        with engine.transaction():
            # An earlier report's tables that this one has no figures for would contradict it: they go.
            for stale in set(_stored(engine)) - set(tables):
                engine.run(sb.drop("TABLE", sb.table(stale)))
            for name, frame in tables.items():
                with engine.registered(frame) as registered:
                    engine.run(sb.create_table_as(sb.table(name), exp.select(exp.Star()).from_(registered),
                                                  replace=True))
    except duckdb.Error as error:
        raise AnonymizationError(f"storing the report's tables in {str(figures.path)!r} failed: {error}") from error
    finally:
        engine.close()
    return None


def _stored(engine: DuckDBEngine) -> list[str]:
    catalog = exp.Table(this=exp.Anonymous(this="duckdb_tables", expressions=[]))
    return [row[0] for row in engine.rows(exp.select(sb.col("table_name")).from_(catalog)
                                          .where(exp.func("STARTS_WITH", sb.col("table_name"), sb.lit(PREFIX))))]
