"""The command line: the bundled main job, a database-file source, and errors."""

from __future__ import annotations

import hashlib
import io

import duckdb
import pandas as pd

from duckanon.cli import main, run
from duckanon.datasets import adult_hierarchy_dir, load_adult


def test_main_job_on_bundled_adult(tmp_path):
    out = io.StringIO()
    assert run(["-o", str(tmp_path / "adult.duckdb")], out=out) == 0
    text = out.getvalue()
    assert "k-anonymity(k=5)" in text and "released 30162 of 30162 records" in text
    with duckdb.connect(str(tmp_path / "adult.duckdb"), read_only=True) as con:
        released = con.execute("SELECT * FROM adult").df()
    quasi = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
    assert list(released.columns) == [c for c in released.columns if c in quasi + ["salary-class"]]
    assert released.groupby(quasi).size().min() >= 5


def test_database_file_source_is_left_untouched(tmp_path):
    source = tmp_path / "people.duckdb"
    with duckdb.connect(str(source)) as con:
        load_adult(con, "adult")
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    folder = adult_hierarchy_dir()
    out = io.StringIO()
    code = run([str(source), "--table", "adult", "--hierarchies", str(folder), "--qi", "age", "--qi", "sex",
                "--qi", "race", "--sensitive", "salary-class", "--others", "drop", "-k", "10",
                "--l-diversity", "salary-class:2", "--levels", "age=2,sex=0,race=1", "--suppression", "drop",
                "--suppression-limit", "0.1", "-o", str(tmp_path / "out.duckdb")], out=out)
    assert code == 0, out.getvalue()
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before
    with duckdb.connect(str(tmp_path / "out.duckdb"), read_only=True) as con:
        released = con.execute("SELECT * FROM adult").df()
    classes = released.groupby(["age", "sex", "race"])
    assert classes.size().min() >= 10 and classes["salary-class"].nunique().min() >= 2


def test_csv_source_check_only(tmp_path):
    frame = pd.DataFrame({"sex": ["Male", "Female"] * 10, "salary-class": ["<=50K", ">50K"] * 10})
    frame.to_csv(tmp_path / "people.csv", index=False)
    out = io.StringIO()
    code = run([str(tmp_path / "people.csv"), "--qi", f"sex={adult_hierarchy_dir() / 'sex.csv'}",
                "--sensitive", "salary-class", "-k", "5", "--levels", "sex=0", "--check-only"], out=out)
    assert code == 0
    assert "the policy holds" in out.getvalue()
    assert not (tmp_path / "release.duckdb").exists()


def test_errors_are_reported_without_a_traceback(tmp_path, capsys):
    assert main(["-k", "40000", "-o", str(tmp_path / "x.duckdb")]) == 2
    assert "k=40000 is larger than the table (30162 records)" in capsys.readouterr().err
    assert not (tmp_path / "x.duckdb").exists()
    assert main([str(tmp_path / "missing.duckdb"), "--table", "t", "-k", "2"]) == 2
    assert "no such file" in capsys.readouterr().err
