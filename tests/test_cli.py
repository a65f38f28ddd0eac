"""The command line: the bundled main job, a database-file source, and errors."""

from __future__ import annotations

import hashlib
import io
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd

from duckanon.cli import main, run
from duckanon.datasets import adult_hierarchy_dir, load_adult

SCRIPT = Path(sys.executable).with_name("duckanon")


def test_readme_main_command_through_the_installed_script(tmp_path):
    """`duckanon -o adult_release.duckdb`, the README's main command: the default command (search) on the bundled
    data prints the policy, the search's choice and metric, the levels, the suppressed records, the release and the
    time; progress in a log is a few lines, not one per node."""
    done = subprocess.run([str(SCRIPT), "-o", "adult_release.duckdb"], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0] == "policy: k-anonymity(k=5)"
    assert lines[1].startswith("optimal: {'sex': ") and "with loss = " in lines[1] and "records suppressed" in lines[1]
    assert lines[2].startswith("levels: sex=")
    assert "records in" in lines[3] and "the policy holds after suppressing" in lines[3]
    assert any(line.startswith("released 30162 of 30162 records to ") for line in lines)
    assert lines[-1].startswith("time: ") and lines[-1].endswith(" s")
    assert 3 <= len(done.stderr.splitlines()) <= 20, done.stderr
    with duckdb.connect(str(tmp_path / "adult_release.duckdb"), read_only=True) as con:
        released = con.execute("SELECT * FROM adult").df()
    quasi = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
    assert set(quasi + ["salary-class"]) <= set(released.columns)
    assert not {"fnlwgt", "relationship", "capital-gain"} & set(released.columns)  # no role on the bundled data
    assert released.groupby(quasi).size().min() >= 5


def test_the_main_job_loads_no_pandas_and_finds_what_a_process_with_pandas_finds(tmp_path):
    """pandas takes a quarter of the main job's time to load and unload, and the job builds no DataFrame: a process
    that imports duckanon and runs it never loads pandas (DuckDB before 2.0 loads it itself to convert any Python
    value, a parameter or a text array).  It groups keys by sorting where a process with pandas loaded hashes them:
    the same node, metric, suppression and per-model table either way."""
    script = ("import sys; import duckanon; from duckanon.cli import main; "
              "loaded = 'pandas' in sys.modules; code = main(['-o', 'alone.duckdb', '--quiet']); "
              "print(loaded, 'pandas' in sys.modules, code)")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stderr
    *job, verdict = done.stdout.splitlines()
    duckdb_loads_pandas = tuple(int(part) for part in duckdb.__version__.split(".")[:2]) < (2, 0)
    assert verdict == ("False True 0" if duckdb_loads_pandas else "False False 0")
    out = io.StringIO()
    assert run(["-o", str(tmp_path / "beside.duckdb"), "--quiet"], out=out, err=io.StringIO()) == 0
    assert "pandas" in sys.modules
    beside = out.getvalue().splitlines()
    assert job[3:6] == beside[3:6]  # the check's summary and per-model table
    assert job[1].split(" (")[0] == beside[1].split(" (")[0] and job[2] == beside[2]  # the node, metric, suppression
    assert job[4:6] == pd.DataFrame({"model": ["k-anonymity(k=5)"], "violating_classes": [716],
                                     "violating_records": [1248]}).to_string(index=False).splitlines()


def test_quiet_and_an_explicit_search_command(tmp_path):
    levels = "sex=0,age=4,race=1,marital-status=2,education=3,native-country=2,workclass=2,occupation=2"
    done = subprocess.run([str(SCRIPT), "search", "--quiet", "--levels", levels, "--check-only"],
                          capture_output=True, text=True, cwd=tmp_path, timeout=300)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert "the policy holds" in done.stdout
    assert not list(tmp_path.iterdir())


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
