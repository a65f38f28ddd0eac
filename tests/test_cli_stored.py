"""The command line reads hierarchies and policies stored in the source database's ``anon`` schema (issue 12, fault 5)
and runs a stored policy (``duckanon run``), leaving the source database unchanged."""

from __future__ import annotations

import hashlib
import io
import re

import duckdb
import pandas as pd
import pytest

import duckanon
from duckanon import Hierarchy, KAnonymity, Policy
from duckanon.cli import main, run


def _people(path, records: int = 60) -> pd.DataFrame:
    """A database file holding table ``people`` and the hierarchy ``age`` in its anon schema."""
    frame = pd.DataFrame({"name": [f"n{i}" for i in range(records)], "age": [20 + i % 30 for i in range(records)],
                          "disease": [["flu", "cold", "hiv"][i % 3] for i in range(records)]})
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE people AS SELECT * FROM frame")
        duckanon.connect(con).add_hierarchy("age", Hierarchy.intervals(frame["age"], widths=[10, 20]))
    return frame


def _digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_hierarchy_stored_in_the_source_database_is_found(tmp_path):
    source = tmp_path / "people.duckdb"
    frame = _people(source)
    before = _digest(source)
    out = io.StringIO()
    code = run([str(source), "--table", "people", "--qi", "age", "--identifier", "name", "--sensitive", "disease",
                "-k", "10", "-o", str(tmp_path / "release.duckdb")], out=out)
    assert code == 0, out.getvalue()
    assert _digest(source) == before
    with duckdb.connect(str(tmp_path / "release.duckdb"), read_only=True) as con:
        released = con.execute("SELECT * FROM people").df()
    assert {"age", "disease"} <= set(released.columns) and "name" not in released.columns
    assert len(released) == len(frame)
    # Ages 20..49 in decades: the stored hierarchy's level 1, three classes of 20 records.
    assert sorted(tuple(re.findall(r"\d+", a)) for a in released["age"].unique()) == [
        ("20", "30"), ("30", "40"), ("40", "50")]
    assert released.groupby("age").size().min() >= 10
