"""Release formats from the command line (``-o x.parquet``, ``-o x.csv``, ``--format``; issue 12, fault 6 and
deliverable 1) and ``-o`` naming the source (fault 1): refused, the source intact."""

from __future__ import annotations

import hashlib
import io
import os

import duckdb
import pandas as pd
import pytest

from duckanon.cli import main, run
from duckanon.deferred import Rows


@pytest.fixture
def people(tmp_path):
    """people.csv (60 records: name, age 20..49, disease) and an ARX hierarchy age.csv (decades, then *)."""
    frame = pd.DataFrame({"name": [f"n{i}" for i in range(60)], "age": [20 + i % 30 for i in range(60)],
                          "disease": [["flu", "cold", "hiv"][i % 3] for i in range(60)]})
    frame.to_csv(tmp_path / "people.csv", index=False)
    (tmp_path / "age.csv").write_text("".join(f"{a};{a // 10 * 10}s;*\n" for a in range(20, 50)))
    return tmp_path / "people.csv", frame


def _policy(tmp_path):
    return ["--qi", f"age={tmp_path / 'age.csv'}", "--identifier", "name", "--sensitive", "disease", "-k", "10",
            "--quiet"]


def _checked(released: pd.DataFrame, frame: pd.DataFrame) -> None:
    assert len(released) == len(frame) and "name" not in released.columns
    assert released.groupby("age").size().min() >= 10
    assert sorted(released["age"].unique()) == ["20s", "30s", "40s"]


@pytest.mark.parametrize("name, argv, read", [
    ("release.parquet", [], pd.read_parquet),
    ("release.csv", [], pd.read_csv),
    ("release.data", ["--format", "parquet"], pd.read_parquet),
    ("release.out", ["--format", "csv"], pd.read_csv),
])
def test_release_formats_by_extension_or_option(people, tmp_path, name, argv, read):
    source, frame = people
    target = tmp_path / name
    assert run([str(source), *_policy(tmp_path), "-o", str(target), *argv], out=io.StringIO()) == 0
    if read is pd.read_parquet:
        assert target.read_bytes()[:4] == b"PAR1"  # a Parquet file, not a DuckDB file under that name
    _checked(read(target), frame)


def test_format_without_output_names_the_default_file(people, tmp_path, monkeypatch):
    source, frame = people
    monkeypatch.chdir(tmp_path)
    assert run([str(source), *_policy(tmp_path), "--format", "parquet"], out=io.StringIO()) == 0
    _checked(pd.read_parquet(tmp_path / "release.parquet"), frame)


@pytest.mark.parametrize("command, extra", [
    ("mondrian", ["--style", "age=lca"]),
    ("cluster", ["--method", "top-down"]),
])
def test_partitioning_releases_as_csv(people, tmp_path, command, extra):
    source, frame = people
    target = tmp_path / f"{command}.csv"
    assert run([command, str(source), *_policy(tmp_path), *extra, "-o", str(target)], out=io.StringIO()) == 0
    released = pd.read_csv(target)
    assert len(released) == len(frame) and released.groupby("age").size().min() >= 10


def test_perturbed_release_as_parquet(people, tmp_path):
    source, frame = people
    target = tmp_path / "perturbed.parquet"
    assert run(["perturb", str(source), "--numeric", "age", "--identifier", "name", "--insensitive", "disease",
                "--seed", "3", "-o", str(target), "--quiet"], out=io.StringIO()) == 0
    released = pd.read_parquet(target)
    assert sorted(released.columns) == ["age", "disease"] and len(released) == len(frame)


def test_unknown_extension_is_one_error_before_any_work(people, tmp_path, capsys):
    source, _ = people
    assert main([str(source), *_policy(tmp_path), "-o", str(tmp_path / "release.txt")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1 and "'.txt'" in captured.err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["age.csv", "people.csv"]


# ------------------------------------------------------------------------------------ -o naming the source


def _digest(con: duckdb.DuckDBPyConnection) -> tuple:
    return con.execute("SELECT count(*), sum(hash(name, age, disease)) FROM people").fetchone()


@pytest.fixture
def database(people, tmp_path):
    _, frame = people
    path = tmp_path / "SRC.duckdb"
    with duckdb.connect(str(path)) as con:
        con.execute("CREATE TABLE people AS SELECT * FROM frame")
        before = _digest(con)
    return path, before


@pytest.mark.parametrize("via_link", [False, True])
def test_output_onto_the_source_database_is_refused(database, tmp_path, capsys, via_link):
    source, before = database
    target = source
    if via_link:
        target = tmp_path / "link.duckdb"
        os.symlink(source, target)
    code = main([str(source), "--table", "people", *_policy(tmp_path), "-o", str(target)])
    assert code == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("duckanon: error: "), err
    with duckdb.connect(str(source), read_only=True) as con:
        assert _digest(con) == before


def test_output_onto_the_source_csv_is_refused(people, tmp_path, capsys):
    source, _ = people
    before = hashlib.sha256(source.read_bytes()).hexdigest()
    assert main([str(source), *_policy(tmp_path), "-o", str(source)]) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1
    assert hashlib.sha256(source.read_bytes()).hexdigest() == before


@pytest.mark.parametrize("columns, rows", [
    (("model", "violating_classes", "violating_records"), [("k-anonymity(k=5)", 716, 1248)]),
    (("model", "violating_classes", "violating_records"),
     [("k-anonymity(k=5)", 0, 0), ("distinct-l-diversity(l=2, sensitive=salary-class)", 12345678, 3)]),
    (("model", "violating_signatures", "violating_people", "violating_records"), [("k over people (k=2)", 3, 4, 5)]),
])
def test_the_per_model_table_reads_as_pandas_prints_it(columns, rows):
    """The CLI prints a check's per-model table (a model's description, then counts) without loading pandas, in the
    layout pandas gives it."""
    shown = Rows(columns, tuple(rows))
    assert shown.text() == pd.DataFrame.from_records(rows, columns=list(columns)).to_string(index=False)
    assert shown.frame().equals(pd.DataFrame.from_records(rows, columns=list(columns)))
