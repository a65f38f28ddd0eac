"""``duckanon hierarchy intervals|redaction|dates``: ARX-format CSV files and hierarchies stored in a database, from
a column's distinct values; expected rows written by hand."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import duckanon
from duckanon.cli import main, run

SCRIPT = Path(sys.executable).with_name("duckanon")
SHELL = Path(sys.executable).with_name("duckdb")

AGES = [37, 23, 58, 41, 23, None]
# Each value, then the bounds of its interval on each level (the labels' notation is the library's).
AGE_BOUNDS = [(23, (20, 30), (20, 40)), (37, (30, 40), (20, 40)), (41, (40, 50), (40, 60)), (58, (50, 60), (40, 60))]


def _bounds(label: str) -> tuple[float, ...]:
    """The numbers of an interval label ("[20-30)", "[20, 30)" …), for ages (no signs)."""
    return tuple(float(n) for n in re.findall(r"\d+(?:\.\d+)?", label))


def _interval_rows(text: str) -> list[tuple]:
    """An ARX interval hierarchy's rows as (value, bounds per level …), checking that it ends in '*'."""
    rows = [line.split(";") for line in text.splitlines()]
    assert all(row[-1] == "*" for row in rows)
    return [(float(row[0]), *(_bounds(label) for label in row[1:-1])) for row in rows]


@pytest.fixture
def data(tmp_path) -> Path:
    frame = pd.DataFrame({"age": AGES, "zip": ["47677", "47602", "12345", "47677", "47602", "47602"],
                          "visit": pd.to_datetime(["2020-03-15", "2019-12-31", "2020-03-01", None, "2021-07-04",
                                                   "2020-03-15"])})
    path = tmp_path / "people.parquet"
    frame.to_parquet(path)
    return path


def _build(argv) -> str:
    out = io.StringIO()
    assert run(["hierarchy", *argv], out=out) == 0
    return out.getvalue()


def test_intervals_to_an_arx_csv(data, tmp_path):
    target = tmp_path / "age.csv"
    text = _build(["intervals", str(data), "--column", "age", "--widths", "10,20", "-o", str(target)])
    assert "4 values, 4 levels" in text
    assert _interval_rows(target.read_text()) == AGE_BOUNDS
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no partial file left


def test_intervals_from_cut_points(data, tmp_path):
    target = tmp_path / "age.csv"
    _build(["intervals", str(data), "--column", "age", "--cuts", "0,30,45,100", "--cuts", "0,45,100", "-o",
            str(target)])
    assert _interval_rows(target.read_text()) == [(23, (0, 30), (0, 45)), (37, (30, 45), (0, 45)),
                                                  (41, (30, 45), (0, 45)), (58, (45, 100), (45, 100))]


def test_redaction_and_dates(data, tmp_path):
    _build(["redaction", str(data), "--column", "zip", "-o", str(tmp_path / "zip.csv")])
    assert (tmp_path / "zip.csv").read_text().splitlines() == [
        "12345;1234*;123**;12***;1****;*", "47602;4760*;476**;47***;4****;*", "47677;4767*;476**;47***;4****;*"]
    _build(["dates", str(data), "--column", "visit", "-o", str(tmp_path / "visit.csv")])
    assert (tmp_path / "visit.csv").read_text().splitlines() == [
        "2019-12-31;2019-12;2019;2010-2019;*", "2020-03-01;2020-03;2020;2020-2029;*",
        "2020-03-15;2020-03;2020;2020-2029;*", "2021-07-04;2021-07;2021;2020-2029;*"]


def test_into_a_database_made_by_the_shell_which_still_opens_it(tmp_path):
    """The hierarchy goes into anon.hierarchy_<name>; a file the 1.5 shell made still opens in it afterwards; the
    search then finds the stored hierarchy (fault 5), through the installed script."""
    database = tmp_path / "people.duckdb"
    subprocess.run([str(SHELL), str(database), "-c",
                    "CREATE TABLE people AS SELECT 20 + i % 40 AS age, 'n' || i AS name, "
                    "['flu', 'cold'][1 + i % 2] AS disease FROM range(120) t(i)"], check=True, timeout=60)
    done = subprocess.run([str(SCRIPT), "hierarchy", "intervals", str(database), "--table", "people", "--column", "age",
                           "--widths", "10,20", "--into", str(database)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "anon.hierarchy_age" in done.stdout
    shell = subprocess.run([str(SHELL), str(database), "-readonly", "-list", "-separator", ";", "-noheader", "-c",
                            "SELECT level_0, level_1, level_2, level_3 FROM anon.hierarchy_age WHERE level_0 IN "
                            "('20', '59') ORDER BY level_0"], capture_output=True, text=True, timeout=60)
    assert shell.returncode == 0, shell.stderr
    assert _interval_rows(shell.stdout) == [(20, (20, 30), (20, 40)), (59, (50, 60), (40, 60))]
    release = tmp_path / "release.duckdb"
    done = subprocess.run([str(SCRIPT), str(database), "--table", "people", "--qi", "age", "--identifier", "name",
                           "--sensitive", "disease", "-k", "20", "-o", str(release)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    with duckdb.connect(str(release), read_only=True) as con:
        released = con.execute("SELECT age, disease FROM people").df()
    assert released.groupby("age").size().min() >= 20 and len(released) == 120
    assert sorted(_bounds(a) for a in released["age"].unique()) == [(20, 30), (30, 40), (40, 50), (50, 60)]


def test_into_a_new_database(data, tmp_path):
    database = tmp_path / "hierarchies.duckdb"
    _build(["redaction", str(data), "--column", "zip", "--name", "zip5", "--into", str(database)])
    stored = duckanon.connect(str(database))
    try:
        assert stored.hierarchy("zip5").rows[0] == ("12345", "1234*", "123**", "12***", "1****", "*")
    finally:
        stored.con.close()


@pytest.mark.parametrize("argv, named", [
    (["intervals", "{data}", "--column", "zip", "--widths", "10"], "'zip' is not numeric"),
    (["intervals", "{data}", "--column", "nope", "--widths", "10"], "--column 'nope'"),
    (["intervals", "{data}", "--column", "age", "--widths", "10,x"], "--widths"),
    (["intervals", "{data}", "--column", "age", "--widths", "10,15"], "nest"),
    (["intervals", "{data}", "--column", "age", "--widths", "10", "-o", "{data}"], "is the source file"),
    (["dates", "{data}", "--column", "age", "--into", "{tmp}/x.duckdb", "-o", "{tmp}/x.csv"], "not allowed with"),
])
def test_bad_builds_are_one_line(data, tmp_path, capsys, argv, named):
    before = data.read_bytes()
    argv = [a.format(data=data, tmp=tmp_path) for a in argv]
    if "-o" not in argv and "--into" not in argv:
        argv += ["-o", str(tmp_path / "out.csv")]
    assert main(["hierarchy", *argv]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and named in err, err
    assert data.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["people.parquet"]
