"""Shared fixtures: a fresh DuckDB connection, and checking privacy models on a pandas DataFrame."""

from __future__ import annotations

import duckdb
import pytest

from duckanon.engine import as_engine
from duckanon.privacy import checks
from duckanon.privacy.classes import Classes
from duckanon.sqlgen import build as sb


@pytest.fixture
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


@pytest.fixture
def check_frame(con):
    """``check_frame(df, keys, models)``: the CheckReport of ``df``'s classes over the key columns ``keys``."""

    def run(frame, keys, models, name="t"):
        con.register(name, frame)
        return checks.check(as_engine(con), Classes.of(sb.table(name), keys), models, key_names=list(keys),
                            allowed_suppressed=0)

    return run


@pytest.fixture
def violating():
    """``violating(report, i)``: the key tuples of the classes that violate the report's i-th model."""

    def keys(report, i):
        # The listing's columns: the keys, "size", then one flag per model in the models' order.
        width = list(report.violations.columns).index("size")
        rows = report.violations.itertuples(index=False, name=None)
        return {tuple(None if v is None or v != v else v for v in row[:width]) for row in rows if row[width + 1 + i]}

    return keys
