"""Tests for duckanon.datasets, checked against independent pandas / csv computations
on the bundled files only (nothing outside the project tree is read)."""

from __future__ import annotations

import csv
import gzip
from collections import Counter
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import duckanon.datasets as ds
from duckanon.datasets import (
    ADULT_QUASI_IDENTIFIERS,
    adult_hierarchy_dir,
    load_adult,
    resample_adult,
)

DATA_GZ = Path(ds.__file__).resolve().parents[1] / "data" / "adult.csv.gz"
COLUMNS = [
    "age", "workclass", "fnlwgt", "education", "education-num", "marital-status",
    "occupation", "relationship", "race", "sex", "capital-gain", "capital-loss",
    "hours-per-week", "native-country", "salary-class",
]
NUMERIC = ["age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week"]
CATEGORICAL_QIS = [a for a in ADULT_QUASI_IDENTIFIERS if a != "age"]
# Known from the UCI file: records with a "?" and "?" per column.
KNOWN_TOTAL, KNOWN_COMPLETE = 32561, 30162
KNOWN_MISSING = {"workclass": 1836, "occupation": 1843, "native-country": 583}


def q(name: str) -> str:
    """Quote an identifier for the hand-written verification queries in this test."""
    return '"' + name.replace('"', '""') + '"'


# --------------------------------------------------------------------------- fixtures


@pytest.fixture(scope="module")
def raw() -> pd.DataFrame:
    """The bundled gz read with plain pandas, every field as text, empty fields kept as ''."""
    return pd.read_csv(DATA_GZ, dtype=str, keep_default_na=False, na_filter=False)


@pytest.fixture(scope="module")
def hierarchies() -> dict[str, list[list[str]]]:
    folder = adult_hierarchy_dir()
    out = {}
    for attr in ADULT_QUASI_IDENTIFIERS:
        with open(folder / f"{attr}.csv", newline="", encoding="utf-8") as f:
            out[attr] = [row for row in csv.reader(f, delimiter=";") if row]
    return out


@pytest.fixture()
def con():
    c = duckdb.connect()
    yield c
    c.close()


def table_names(con) -> list[str]:
    return [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() ORDER BY 1").fetchall()]


def rows_as_text(con, table: str) -> Counter:
    cols = ", ".join(f"coalesce(CAST({q(c)} AS VARCHAR), '')" for c in COLUMNS)
    return Counter(con.execute(f"SELECT {cols} FROM {q(table)}").fetchall())


# --------------------------------------------------------------------------- bundled files


def test_bundle_file_shape(raw):
    assert list(raw.columns) == COLUMNS
    assert len(raw) == KNOWN_TOTAL
    # whitespace stripped everywhere, no '?' left (missing values are empty fields)
    for c in COLUMNS:
        col = raw[c]
        assert (col == col.str.strip()).all(), c
        assert not (col == "?").any(), c
    # deterministic gzip: mtime field of the header is 0
    header = DATA_GZ.read_bytes()[:10]
    assert header[:2] == b"\x1f\x8b" and header[4:8] == b"\x00\x00\x00\x00"
    with gzip.open(DATA_GZ, "rt", encoding="utf-8") as f:
        assert f.readline().rstrip("\n") == ",".join(COLUMNS)


def test_missing_counts_in_bundle(raw):
    missing = {c: int((raw[c] == "").sum()) for c in COLUMNS}
    assert {c: n for c, n in missing.items() if n} == KNOWN_MISSING
    complete = int((raw != "").all(axis=1).sum())
    assert complete == KNOWN_COMPLETE
    assert KNOWN_TOTAL - complete == 2399


def test_hierarchy_dir_and_files(hierarchies):
    folder = adult_hierarchy_dir()
    assert folder.is_dir()
    assert {p.name for p in folder.glob("*.csv")} >= {f"{a}.csv" for a in ADULT_QUASI_IDENTIFIERS}
    assert ADULT_QUASI_IDENTIFIERS == (
        "sex", "age", "race", "marital-status", "education",
        "native-country", "workclass", "occupation", "salary-class",
    )
    heights = {}
    for attr, rows in hierarchies.items():
        widths = {len(r) for r in rows}
        assert len(widths) == 1, attr
        assert all(r[-1] == "*" for r in rows), attr
        firsts = [r[0] for r in rows]
        assert len(firsts) == len(set(firsts)), attr
        assert all(v == v.strip() for r in rows for v in r), attr
        heights[attr] = widths.pop()
    # the ARX lattice: 5*4*3*3*3*2*2*2*3 = 12,960 nodes
    n = 1
    for h in heights.values():
        n *= h
    assert n == 12960


# --------------------------------------------------------------------------- load_adult


@pytest.mark.parametrize("complete, expected", [(True, KNOWN_COMPLETE), (False, KNOWN_TOTAL)])
def test_load_counts_and_content(con, raw, complete, expected):
    assert load_adult(con, "t", complete=complete) == "t"
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == expected
    want = raw[(raw != "").all(axis=1)] if complete else raw
    assert len(want) == expected
    assert rows_as_text(con, "t") == Counter(map(tuple, want.itertuples(index=False, name=None)))


def test_load_types(con):
    load_adult(con)
    types = dict(con.execute("SELECT column_name, column_type FROM (DESCRIBE adult)").fetchall())
    assert list(types) == COLUMNS
    for c in COLUMNS:
        if c in NUMERIC:
            assert types[c] in ("INTEGER", "BIGINT"), (c, types[c])
        else:
            assert types[c] == "VARCHAR", (c, types[c])


def test_nulls_match_question_marks(con, raw):
    load_adult(con, "adult_full", complete=False)
    expected = {c: int((raw[c] == "").sum()) for c in COLUMNS}
    got = {
        c: con.execute(f"SELECT count(*) FROM adult_full WHERE {q(c)} IS NULL").fetchone()[0] for c in COLUMNS
    }
    assert got == expected
    assert {c: n for c, n in got.items() if n} == KNOWN_MISSING
    load_adult(con, "adult_complete")
    nulls = con.execute(
        "SELECT count(*) FROM adult_complete WHERE " + " OR ".join(f"{q(c)} IS NULL" for c in COLUMNS)
    ).fetchone()[0]
    assert nulls == 0


def test_complete_values_covered_by_hierarchies(con, hierarchies):
    load_adult(con)
    for attr in ADULT_QUASI_IDENTIFIERS:
        firsts = {r[0] for r in hierarchies[attr]}
        values = {str(v) for (v,) in con.execute(f"SELECT DISTINCT {q(attr)} FROM adult").fetchall()}
        assert values <= firsts, (attr, sorted(values - firsts))


@pytest.mark.parametrize(
    "name",
    ['a"; DROP TABLE x; --', "größe tabelle", "it's", "semi;colon", "Ünïcödé 表", "select"],
)
def test_hostile_table_names(con, name):
    con.execute("CREATE TABLE x AS SELECT 1 AS v")
    before = table_names(con)
    assert load_adult(con, name) == name
    after = table_names(con)
    assert sorted(after) == sorted(before + [name])
    assert con.execute(f"SELECT count(*) FROM {q(name)}").fetchone()[0] == KNOWN_COMPLETE
    assert con.execute("SELECT v FROM x").fetchall() == [(1,)]


def test_existing_table_raises_unless_replace(con):
    name = 'my "adult"; table'
    load_adult(con, name)
    with pytest.raises(ValueError) as info:
        load_adult(con, name, complete=False)
    assert name in str(info.value) or repr(name) in str(info.value)
    assert con.execute(f"SELECT count(*) FROM {q(name)}").fetchone()[0] == KNOWN_COMPLETE
    load_adult(con, name, complete=False, replace=True)
    assert con.execute(f"SELECT count(*) FROM {q(name)}").fetchone()[0] == KNOWN_TOTAL


def test_bad_table_name_type(con):
    with pytest.raises(ValueError):
        load_adult(con, "")


# --------------------------------------------------------------------------- resample_adult


def _sorted_rows(con, table: str) -> list[tuple]:
    cols = ", ".join(q(c) for c in COLUMNS)
    return con.execute(f"SELECT {cols} FROM {q(table)} ORDER BY ALL").fetchall()


def test_resample_size_determinism_and_coverage(con, hierarchies):
    n = 50_000
    assert resample_adult(con, n, "r1", seed=11) == "r1"
    resample_adult(con, n, "r2", seed=11)
    resample_adult(con, n, "r3", seed=12)
    assert con.execute("SELECT count(*) FROM r1").fetchone()[0] == n
    a, b, c = _sorted_rows(con, "r1"), _sorted_rows(con, "r2"), _sorted_rows(con, "r3")
    assert a == b
    assert a != c
    # same schema as load_adult
    load_adult(con)
    assert con.execute("DESCRIBE r1").fetchall() == con.execute("DESCRIBE adult").fetchall()
    # no helper tables left behind
    assert sorted(table_names(con)) == ["adult", "r1", "r2", "r3"]

    age_domain = {int(r[0]) for r in hierarchies["age"]}
    for table in ("r1", "r3"):
        lo, hi, nulls = con.execute(
            f"SELECT min(age), max(age), count(*) FILTER (WHERE age IS NULL) FROM {table}"
        ).fetchone()
        assert nulls == 0
        assert 17 <= lo and hi <= 90
        ages = {v for (v,) in con.execute(f"SELECT DISTINCT age FROM {table}").fetchall()}
        assert ages <= age_domain
        h_lo, h_hi = con.execute(f'SELECT min("hours-per-week"), max("hours-per-week") FROM {table}').fetchone()
        assert 1 <= h_lo and h_hi <= 99
        for attr in CATEGORICAL_QIS:
            firsts = {r[0] for r in hierarchies[attr]}
            values = {v for (v,) in con.execute(f"SELECT DISTINCT {q(attr)} FROM {table}").fetchall()}
            assert None not in values, attr
            assert values <= firsts, (attr, sorted(values - firsts))


def test_resample_independent_of_thread_count():
    results = []
    for threads in (1, 2, 4):
        c = duckdb.connect(config={"threads": threads})
        resample_adult(c, 30_000, "r", seed=5)
        results.append(_sorted_rows(c, "r"))
        c.close()
    assert results[0] == results[1] == results[2]


def test_resample_noise(con):
    load_adult(con)
    resample_adult(con, 20_000, "plain", seed=3, noise=False)
    resample_adult(con, 20_000, "noisy", seed=3, noise=True)
    cols = ", ".join(q(c) for c in COLUMNS)
    # without noise every record is a record of the complete data
    assert con.execute(f"SELECT count(*) FROM (SELECT {cols} FROM plain EXCEPT SELECT {cols} FROM adult)").fetchone()[0] == 0
    # with noise most records are not copies; categorical columns and capital columns are untouched
    copies = con.execute(f"SELECT count(*) FROM noisy SEMI JOIN adult USING ({cols})").fetchone()[0]
    assert copies < 20_000 // 2
    keep = [c for c in COLUMNS if c not in ("age", "hours-per-week", "fnlwgt")]
    keep_cols = ", ".join(q(c) for c in keep)
    assert con.execute(
        f"SELECT count(*) FROM (SELECT {keep_cols} FROM noisy EXCEPT SELECT {keep_cols} FROM adult)"
    ).fetchone()[0] == 0
    # the multiset of the untouched columns is the same with and without noise (same draws)
    assert Counter(con.execute(f"SELECT {keep_cols} FROM plain").fetchall()) == Counter(
        con.execute(f"SELECT {keep_cols} FROM noisy").fetchall()
    )
    # age moves by at most 2 per draw: totals differ by at most 2*n
    sa, sb = con.execute("SELECT (SELECT sum(age) FROM plain), (SELECT sum(age) FROM noisy)").fetchone()
    assert abs(sa - sb) <= 2 * 20_000


def test_resample_from_source_and_names(con):
    load_adult(con, "small src")
    con.execute('DELETE FROM "small src" WHERE sex <> \'Female\'')
    name = 'out"; DROP TABLE "small src"; --'
    resample_adult(con, 1_000, name, seed=1, source="small src", noise=False)
    assert con.execute(f"SELECT count(*), count(DISTINCT sex), min(sex) FROM {q(name)}").fetchone() == (1000, 1, "Female")
    assert "small src" in table_names(con)
    with pytest.raises(ValueError) as info:
        resample_adult(con, 10, name)
    assert "out" in str(info.value)
    resample_adult(con, 10, name, replace=True)
    assert con.execute(f"SELECT count(*) FROM {q(name)}").fetchone()[0] == 10
    resample_adult(con, 0, "empty_out")
    assert con.execute("SELECT count(*) FROM empty_out").fetchone()[0] == 0
