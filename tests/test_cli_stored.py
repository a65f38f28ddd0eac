"""The command line reads hierarchies and policies stored in the source database's ``anon`` schema (issue 12, fault 5)
and runs a stored policy (``duckanon run``), leaving the source database unchanged."""

from __future__ import annotations

import hashlib
import io
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import duckanon
from duckanon import DistinctLDiversity, Hierarchy, KAnonymity, Policy
from duckanon.cli import main, run


def _people(path, records: int = 60) -> pd.DataFrame:
    """A database file holding table ``people`` and the hierarchy ``age`` in its anon schema."""
    frame = pd.DataFrame({"name": [f"n{i}" for i in range(records)], "age": [20 + i % 30 for i in range(records)],
                          "disease": [["flu", "cold", "hiv"][i % 3] for i in range(records)]})
    anon = duckanon.connect(str(path))  # a new file in the storage version the DuckDB 1.5 shell reads
    try:
        anon.con.execute("CREATE TABLE people AS SELECT * FROM frame")
        anon.add_hierarchy("age", Hierarchy.intervals(frame["age"], widths=[10, 20]))
    finally:
        anon.con.close()
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


SCRIPT = Path(sys.executable).with_name("duckanon")
SHELL = Path(sys.executable).with_name("duckdb")


@pytest.fixture
def stored(tmp_path):
    """people.duckdb made by duckanon.connect, with table people, hierarchy age and policy people_k10."""
    source = tmp_path / "people.duckdb"
    frame = _people(source, records=90)
    anon = duckanon.connect(str(source))
    try:
        anon.save_policy("people_k10", Policy(quasi_identifiers={"age": "age"}, identifiers=["name"],
                                              models=[KAnonymity(10), DistinctLDiversity("disease", 3)]))
    finally:
        anon.con.close()
    return source, frame


def test_run_publishes_with_the_stored_policy(stored, tmp_path):
    source, frame = stored
    before = _digest(source)
    release = tmp_path / "release.duckdb"
    done = subprocess.run([str(SCRIPT), "run", str(source), "--policy", "people_k10", "--table", "people",
                           "--metric", "dm", "-o", str(release)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "k-anonymity(k=10)" in done.stdout and "released 90 of 90 records" in done.stdout
    assert _digest(source) == before
    with duckdb.connect(str(release), read_only=True) as con:
        released = con.execute("SELECT * FROM people").df()
    assert "name" not in released.columns and len(released) == len(frame)
    classes = released.groupby("age")
    assert classes.size().min() >= 10 and classes["disease"].nunique().min() >= 3
    # Both files still open in the DuckDB 1.5 shell.
    for path, query in ((source, "SELECT count(*) FROM people"), (release, "SELECT count(*) FROM people")):
        shell = subprocess.run([str(SHELL), str(path), "-readonly", "-csv", "-noheader", "-c", query],
                               capture_output=True, text=True, timeout=60)
        assert (shell.returncode, shell.stdout.strip()) == (0, "90"), shell.stderr


def test_run_check_only_and_given_levels(stored, tmp_path):
    source, _ = stored
    out = io.StringIO()
    assert run(["run", str(source), "--policy", "people_k10", "--table", "people", "--levels", "age=1",
                "--check-only", "-o", str(tmp_path / "r.duckdb")], out=out) == 0
    assert "levels: age=1" in out.getvalue() and "the policy holds" in out.getvalue()
    assert not (tmp_path / "r.duckdb").exists()
    assert run(["run", str(source), "--policy", "people_k10", "--table", "people", "--levels", "age=0",
                "--check-only"], out=io.StringIO()) == 1


@pytest.mark.parametrize("argv, message", [
    (["--policy", "nope", "--table", "people"], "no policy named 'nope'"),
    (["--policy", "people_k10", "--table", "patients"], "no table 'patients'"),
    (["--policy", "people_k10"], "--table"),
])
def test_run_errors_name_what_is_missing(stored, tmp_path, capsys, argv, message):
    source, _ = stored
    before = _digest(source)
    assert main(["run", str(source), *argv, "-o", str(tmp_path / "r.duckdb")]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and message in err, err
    assert _digest(source) == before and not (tmp_path / "r.duckdb").exists()


def test_a_hierarchy_kept_as_a_view_by_a_shell_user_is_found(tmp_path):
    source = tmp_path / "people.duckdb"
    subprocess.run([str(SHELL), str(source), "-c", """
        CREATE TABLE people AS SELECT 20 + i % 30 AS age, ['flu', 'cold', 'hiv'][1 + i % 3] AS disease
            FROM range(60) t(i);
        CREATE SCHEMA anon;
        CREATE TABLE anon.age_rows AS SELECT CAST(a AS VARCHAR) AS level_0,
            CASE WHEN a < 35 THEN 'young' ELSE 'old' END AS level_1, '*' AS level_2 FROM range(20, 50) t(a);
        CREATE VIEW anon.hierarchy_age AS SELECT * FROM anon.age_rows;"""], check=True, timeout=60)
    before = _digest(source)
    out = io.StringIO()
    assert run([str(source), "--table", "people", "--qi", "age", "--sensitive", "disease", "-k", "25", "--quiet",
                "-o", str(tmp_path / "release.duckdb")], out=out) == 0, out.getvalue()
    assert _digest(source) == before
    with duckdb.connect(str(tmp_path / "release.duckdb"), read_only=True) as con:
        assert con.execute("SELECT age, count(*) FROM people GROUP BY age ORDER BY age").fetchall() == [
            ("old", 30), ("young", 30)]
