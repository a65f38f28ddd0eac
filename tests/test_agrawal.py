"""Agrawal et al.'s generator: the attribute distributions, and functions F1-F10 against hand-worked records and a
NumPy transcription of the paper's definitions."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from duckanon import AnonymizationError, PolicyError
from duckanon.datasets import agrawal
from duckanon.datasets.agrawal import (
    ATTRIBUTES,
    classification_function,
    generate_agrawal,
)
from duckanon.engine import as_engine
from duckanon.sqlgen import build as sb


def paper_functions(d: pd.DataFrame) -> dict[int, np.ndarray]:
    """Group A per function, transcribed from Agrawal, Imielinski & Swami (1993), vectorized."""
    age, salary, elevel, loan = d["age"], d["salary"], d["elevel"], d["loan"]
    total = salary + d["commission"]
    young, middle, old = age < 40, (40 <= age) & (age < 60), 60 <= age

    def between(v, low, high):
        return (low <= v) & (v <= high)

    def rule(condition, then, otherwise):
        return np.where(condition, then, otherwise)

    equity = np.where(d["hyears"] >= 20, 0.1 * d["hvalue"] * (d["hyears"] - 20), 0)
    return {
        1: young | old,
        2: young & between(salary, 50e3, 100e3) | middle & between(salary, 75e3, 125e3)
        | old & between(salary, 25e3, 75e3),
        3: young & elevel.isin([0, 1]) | middle & elevel.isin([1, 2, 3]) | old & elevel.isin([2, 3, 4]),
        4: young & rule(elevel.isin([0, 1]), between(salary, 25e3, 75e3), between(salary, 50e3, 100e3))
        | middle & rule(elevel.isin([1, 2, 3]), between(salary, 50e3, 100e3), between(salary, 75e3, 125e3))
        | old & rule(elevel.isin([2, 3, 4]), between(salary, 50e3, 100e3), between(salary, 25e3, 75e3)),
        5: young & rule(between(salary, 50e3, 100e3), between(loan, 100e3, 300e3), between(loan, 200e3, 400e3))
        | middle & rule(between(salary, 75e3, 125e3), between(loan, 200e3, 400e3), between(loan, 300e3, 500e3))
        | old & rule(between(salary, 25e3, 75e3), between(loan, 300e3, 500e3), between(loan, 100e3, 300e3)),
        6: young & between(total, 50e3, 100e3) | middle & between(total, 75e3, 125e3)
        | old & between(total, 25e3, 75e3),
        7: 0.67 * total - 0.2 * loan - 20e3 > 0,
        8: 0.67 * total - 5000 * elevel - 20e3 > 0,
        9: 0.67 * total - 5000 * elevel - 0.2 * loan - 10e3 > 0,
        10: 0.67 * total - 5000 * elevel + 0.2 * equity - 10e3 > 0,
    }


@pytest.fixture(scope="module")
def generated():
    con = duckdb.connect()
    generate_agrawal(con, "applicants", 20000, functions=list(range(1, 11)), seed=7)
    return con.execute("SELECT * FROM applicants").df()


def test_attribute_distributions(generated):
    d = generated
    assert list(d.columns) == [*ATTRIBUTES, *[f"class_f{i}" for i in range(1, 11)]]
    assert d["salary"].between(20000, 150000).all() and abs(d["salary"].mean() - 85000) < 1500
    assert ((d["commission"] == 0) == (d["salary"] >= 75000)).all()
    assert d.loc[d["commission"] > 0, "commission"].between(10000, 75000).all()
    for column, low, high in [("age", 20, 80), ("elevel", 0, 4), ("car", 1, 20), ("zipcode", 0, 8), ("hyears", 1, 30)]:
        assert set(d[column]) == set(range(low, high + 1)), column
        counts = d[column].value_counts()
        assert counts.max() / counts.min() < 1.4, column  # uniform
    k = 9 - d["zipcode"]
    assert (d["hvalue"] >= 50000 * k).all() and (d["hvalue"] <= 150000 * k).all()
    assert d["loan"].between(0, 500000).all() and abs(d["loan"].mean() - 250000) < 6000


def test_labels_follow_the_paper(generated):
    expected = paper_functions(generated)
    for number, group_a in expected.items():
        labels = generated[f"class_f{number}"]
        assert set(labels) <= {"A", "B"}
        assert ((labels == "A") == np.asarray(group_a)).all(), f"F{number}"


# salary, commission, age, elevel, car, zipcode, hvalue, hyears, loan -> Group A under F1..F10, worked by hand.
HAND_WORKED = [
    # young; 60K in [50K, 100K]; elevel 1; loan 150K in [100K, 300K]; total 80K; disposable 3,600 / 28,600 / 8,600
    # / equity 0.1 * 900K * 5 = 450K, +90K.
    ((60000, 20000, 30, 1, 1, 0, 900000, 25, 150000), "AAAAAAAAAA"),
    # middle-aged; 130K outside [75K, 125K]; elevel 4; loan 450K in [300K, 500K]; 0.67 * 130K = 87,100.
    ((130000, 0, 45, 4, 5, 3, 400000, 10, 450000), "BBBBABBABA"),
    # age 40 is middle-aged and age 60 old: boundaries are the paper's (age < 40, 40 <= age < 60, age >= 60).
    ((100000, 0, 40, 1, 1, 8, 100000, 1, 0), "BAAABAAAAA"),
    ((75000, 0, 60, 4, 1, 8, 100000, 1, 350000), "AAAAAABABA"),
]


@pytest.mark.parametrize("values, labels", HAND_WORKED)
def test_hand_worked_records(values, labels):
    con = duckdb.connect()
    row = exp.select(*[exp.alias_(sb.lit(v), name, quoted=True) for v, name in zip(values, ATTRIBUTES)])
    got = "".join("A" if as_engine(con).rows(exp.select(classification_function(i)).from_(row.subquery("r")))[0][0]
                  else "B" for i in range(1, 11))
    assert got == labels


def test_seeded_chunked_and_perturbed(monkeypatch):
    con = duckdb.connect()
    monkeypatch.setattr(agrawal, "CHUNK", 700)
    generate_agrawal(con, "a", 2000, functions=1, seed=3)
    generate_agrawal(con, "b", 2000, functions=1, seed=3)
    generate_agrawal(con, "c", 2000, functions=1, seed=4)
    a, b, c = (con.execute(f"SELECT * FROM {t}").df() for t in "abc")
    pd.testing.assert_frame_equal(a, b)
    assert not a["salary"].equals(c["salary"]) and len(a) == 2000 and list(a.columns)[-1] == "class"
    generate_agrawal(con, "p", 2000, functions=1, seed=3, perturbation=0.05)
    p = con.execute("SELECT * FROM p").df()
    # Labels are assigned before perturbing: identical to the unperturbed table's, though some ages moved across 40/60.
    assert (p["class"] == a["class"]).all()
    assert not ((p["class"] == "A") == paper_functions(p)[1]).all()
    moved = (p["salary"] - a["salary"]).abs()
    assert moved.max() <= 0.05 * 130000 and moved.mean() > 1000
    assert p["salary"].between(20000, 150000).all() and p["age"].between(20, 80).all()
    assert ((p["commission"] == 0) == (a["commission"] == 0)).all() and p["hyears"].between(1, 30).all()
    for column in ("elevel", "car", "zipcode"):
        assert p[column].equals(a[column])


@pytest.mark.parametrize("arguments, match", [
    (dict(functions=0), "numbered 1 to 10"), (dict(functions=[1, 11]), "numbered 1 to 10"),
    (dict(functions=[2, 2]), "distinct"), (dict(rows=0), "rows"), (dict(perturbation=1.5), "perturbation"),
    (dict(seed=-1), "seed"),
])
def test_bad_parameters(arguments, match):
    con = duckdb.connect()
    with pytest.raises(PolicyError, match=match):
        generate_agrawal(con, "t", **{"rows": 10, **arguments})
    assert con.execute("SELECT count(*) FROM duckdb_tables()").fetchone()[0] == 0


def test_existing_table_needs_replace():
    con = duckdb.connect()
    generate_agrawal(con, "t", 10)
    with pytest.raises(AnonymizationError, match="replace=True"):
        generate_agrawal(con, "t", 10)
    generate_agrawal(con, "t", 20, replace=True)
    assert con.execute("SELECT count(*) FROM t").fetchone()[0] == 20


def test_sql_transpiles_to_spark():
    query = agrawal._query(sb.table("frame"), {f"class_f{i}": classification_function(i, "g") for i in range(1, 11)},
                           0.05)
    spark = query.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE)
    sqlglot.parse_one(spark, read="spark")
    assert "GREATEST" in spark and "CASE WHEN" in spark
