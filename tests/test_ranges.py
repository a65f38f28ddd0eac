"""Typed ranges: every generalized number of a release also has numeric bounds, and the ranges duckanon writes share
one notation whose labels sort as text in numeric order.  Expectations are computed with plain pandas from the source
(joined back by an id column), the hierarchy's rows and the records' partitions, or by hand."""

from __future__ import annotations

import decimal
import re

import duckdb
import numpy as np
import pandas as pd
import pytest
from sqlglot import ErrorLevel, exp

import duckanon
from duckanon import (
    AnonymizationError,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyError,
    SemiSupervisedClustering,
    TopDownPartitioning,
)
from duckanon.encode.binding import bind
from duckanon.engine import as_engine
from duckanon.hierarchy.bound import level_expressions
from duckanon.recode import generalization
from duckanon.recode.generalization import (
    LEAF_LABEL,
    LEAF_VALUE,
    SOURCE,
    FullDomainGeneralization,
)
from duckanon.sqlgen import build as sb

CLOSED = re.compile(r"^\[(-?[0-9.]+), (-?[0-9.]+)\]$")


def decades_hierarchy(values) -> Hierarchy:
    """ARX-style labels, as a user's hierarchy file has them: 10-19, 10-29, *."""
    return Hierarchy.from_lists([[str(v), f"{v // 10 * 10}-{v // 10 * 10 + 9}", f"{v // 20 * 20}-{v // 20 * 20 + 19}",
                                  "*"] for v in values], name="decades")


def load(con, frame: pd.DataFrame, name: str = "people") -> None:
    con.register("frame", frame)
    con.execute(f"CREATE OR REPLACE TABLE {name} AS SELECT * FROM frame")
    con.unregister("frame")


def read(path, table="release") -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as reader:
        return reader.execute(f'SELECT * FROM "{table}"').df()


def types(path, table="release") -> dict[str, str]:
    with duckdb.connect(str(path), read_only=True) as reader:
        return {name: kind for name, kind, *_ in reader.execute(f'DESCRIBE "{table}"').fetchall()}


@pytest.fixture
def people(con) -> pd.DataFrame:
    rng = np.random.default_rng(7)
    n = 240
    frame = pd.DataFrame({
        "id": range(n),
        "age": pd.array(rng.integers(10, 80, n), dtype="Int32"),
        "zip": rng.choice(["47677", "47602", "47678", "47905", "47906"], n),
        "disease": rng.choice(["flu", "cold", "hiv"], n),
    })
    frame.loc[[3, 50, 51, 52, 140], "age"] = pd.NA
    load(con, frame)
    return frame


def check_bounds_contain_each_record(released: pd.DataFrame, source: pd.DataFrame, attribute: str) -> pd.DataFrame:
    """Join the release back to the source by id; every shown bound holds the record's own value, '*' and NULL labels
    have none, and a label has one pair of bounds (so they tell no more than it does).  Returns the joined rows."""
    low, high = f"{attribute}_low", f"{attribute}_high"
    joined = released.merge(source[["id", attribute]].rename(columns={attribute: "original"}), on="id")
    assert len(joined) == len(released)
    hidden = joined[attribute].isna() | (joined[attribute] == "*")
    assert joined.loc[hidden, [low, high]].isna().all().all()
    shown = joined[~hidden]
    assert shown[[low, high]].notna().all().all()
    assert (shown[low].astype(float) <= shown["original"].astype(float)).all()
    assert (shown["original"].astype(float) <= shown[high].astype(float)).all()
    assert (shown.groupby(attribute)[[low, high]].nunique() == 1).all().all()
    return shown


# ------------------------------------------------------------------------------------------ full-domain
def test_full_domain_bounds_are_the_leaves_under_each_node(con, people, tmp_path):
    hierarchy = decades_hierarchy(range(5, 95))  # leaves 5..94: the node 0-9 holds 5..9, 80-99 holds 80..94
    policy = Policy(quasi_identifiers={"age": hierarchy, "zip": Hierarchy.redaction(people["zip"])},
                    models=[KAnonymity(5)], identifiers=[], insensitive=["id"], sensitive=["disease"],
                    suppression_limit=0.2)
    anon = duckanon.connect(con)
    release = anon.publish("people", policy, {"age": 2, "zip": 1}, tmp_path / "r.duckdb")
    released = read(tmp_path / "r.duckdb")
    assert list(released.columns) == ["id", "age", "age_low", "age_high", "zip", "disease"]
    assert types(tmp_path / "r.duckdb")["age_low"] == "INTEGER"  # the source column's type
    # pandas, from the hierarchy's rows: each level-2 node's smallest and largest leaf (not parsed from its label).
    rows = pd.DataFrame(hierarchy.rows, columns=["leaf", "l1", "l2", "top"])
    nodes = rows.assign(leaf=rows["leaf"].astype(int)).groupby("l2")["leaf"].agg(["min", "max"])
    shown = check_bounds_contain_each_record(released, people, "age")
    assert (shown["age_low"].to_numpy() == nodes.loc[shown["age"], "min"].to_numpy()).all()
    assert (shown["age_high"].to_numpy() == nodes.loc[shown["age"], "max"].to_numpy()).all()
    assert set(shown["age"]) <= set(rows["l2"])  # the user's labels stay as they are
    assert release.suppressed == (released["zip"] == "*").sum() > 0
    assert released.loc[released["id"].isin([3, 50, 51, 52, 140]) & (released["zip"] != "*"), "age"].isna().all()
    # The classes view shows each class's bounds and has no more rows than the classes of the labels.
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as reader:
        classes = reader.execute("SELECT * FROM release_classes").df()
    assert list(classes.columns) == ["age", "age_low", "age_high", "zip", "records"]
    assert len(classes) == len(released.groupby(["age", "zip"], dropna=False))


def test_interval_bounds_count_values_the_table_does_not_list(con, tmp_path):
    """An interval hierarchy built from two values generalizes the others with its CASE: their interval's bounds are
    the smallest and largest of its listed leaves and the values it places (by hand)."""
    con.execute("CREATE TABLE t (id INTEGER, age INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate([18, 19, 23, 24, 36, 38, 41, 44])))
    hierarchy = Hierarchy.intervals([10, 40], widths=[5, 10, 20])  # lists 10 and 40 only
    policy = Policy({"age": hierarchy}, [KAnonymity(2)], insensitive=["id"])
    duckanon.connect(con).publish("t", policy, {"age": 1}, tmp_path / "r.duckdb")
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as reader:
        got = reader.execute("SELECT id, age, age_low, age_high FROM release ORDER BY id").fetchall()
    assert got == [(0, "[15, 20)", 18, 19), (1, "[15, 20)", 18, 19), (2, "[20, 25)", 23, 24), (3, "[20, 25)", 23, 24),
                   (4, "[35, 40)", 36, 38), (5, "[35, 40)", 36, 38), (6, "[40, 45)", 40, 44), (7, "[40, 45)", 40, 44)]


def test_several_numbers_bounds_from_one_reading_each_judged_on_its_own(con, tmp_path):
    """Three numbers whose labels place values without their tables (two interval hierarchies listing two values
    each, one number on level 0): the publish reads their values once for all three, and each gets the bounds
    computed by hand; verification judges all three from one grouping of the release, and a record whose bound of
    one number was changed fails that number's bounds only."""
    ages, hours, children = [18, 19, 23, 24, 36, 38, 41, 44], [1, 9, 12, 19, 21, 30, 33, 39], [0, 0, 1, 1, 2, 2, 3, 3]
    con.execute("CREATE TABLE t (id INTEGER, age INTEGER, hours INTEGER, children INTEGER)")
    con.executemany("INSERT INTO t VALUES (?, ?, ?, ?)", list(zip(range(8), ages, hours, children)))
    policy = Policy({"age": Hierarchy.intervals([10, 40], widths=[10, 20]),  # lists 10 and 40 only
                     "hours": Hierarchy.intervals([0, 40], widths=[20, 40]),
                     "children": Hierarchy.intervals(range(4), widths=[2])},
                    [KAnonymity(2)], insensitive=["id"])
    path = tmp_path / "r.duckdb"
    duckanon.connect(con).publish("t", policy, {"age": 1, "hours": 1, "children": 0}, path)
    with duckdb.connect(str(path), read_only=True) as reader:
        got = reader.execute("SELECT age, age_low, age_high, hours, hours_low, hours_high, children, children_low, "
                             "children_high FROM release ORDER BY id").fetchall()
    # age: [10, 20) holds 18, 19 (and the listed 10); [20, 30) 23, 24; [30, 40) 36, 38; [40, 50) the listed 40 and
    # 41, 44.  hours: [0, 20) the listed 0 and 1 to 19; [20, 40) 21 to 39 and the listed 40 lies in [40, 60).
    expected_age = {"[10, 20)": (10, 19), "[20, 30)": (23, 24), "[30, 40)": (36, 38), "[40, 50)": (40, 44)}
    expected_hours = {"[00, 20)": (0, 19), "[20, 40)": (21, 39)}
    assert [(a, lo, hi) for a, lo, hi, *_ in got] == [(a, *expected_age[a]) for a, *_ in got]
    assert [(h, lo, hi) for _, _, _, h, lo, hi, *_ in got] == [(h, *expected_hours[h]) for _, _, _, h, *_ in got]
    assert [(c, lo, hi) for *_, c, lo, hi in got] == [(str(n), n, n) for n in children]
    checks = duckanon.verify(path).frame().set_index("guarantee")
    assert all(checks.loc[f"typed bounds of {a}", "holds"] for a in ("age", "hours", "children"))
    with duckdb.connect(str(path)) as writer:
        writer.execute("UPDATE release SET hours_high = hours_high + 1 WHERE id = 0")
    checks = duckanon.verify(path).frame().set_index("guarantee")
    assert not checks.loc["typed bounds of hours", "holds"]
    assert "shows several bounds" in checks.loc["typed bounds of hours", "recomputed"]
    assert checks.loc["typed bounds of age", "holds"] and checks.loc["typed bounds of children", "holds"]


def test_level_zero_bounds_are_the_value_and_top_has_none(con, people, tmp_path):
    hierarchy = decades_hierarchy(range(5, 95))
    policy = Policy(quasi_identifiers={"age": hierarchy, "zip": Hierarchy.redaction(people["zip"])},
                    models=[KAnonymity(1)], insensitive=["id"], sensitive=["disease"])
    anon = duckanon.connect(con)
    anon.publish("people", policy, {"age": 0, "zip": 5}, tmp_path / "zero.duckdb")
    released = read(tmp_path / "zero.duckdb").merge(people[["id", "age"]].rename(columns={"age": "original"}), on="id")
    known = released["original"].notna()
    assert (released.loc[known, "age_low"] == released.loc[known, "original"]).all()
    assert (released.loc[known, "age_high"] == released.loc[known, "original"]).all()
    assert released.loc[~known, ["age", "age_low", "age_high"]].isna().all().all()
    anon.publish("people", policy, {"age": 3, "zip": 5}, tmp_path / "top.duckdb")
    assert read(tmp_path / "top.duckdb")[["age_low", "age_high"]].isna().all().all()  # '*' says nothing


def test_categorical_hierarchies_over_text_get_no_bounds(con, people, tmp_path):
    policy = Policy(quasi_identifiers={"zip": Hierarchy.redaction(people["zip"])}, models=[KAnonymity(2)],
                    insensitive=["id", "age"], sensitive=["disease"])
    duckanon.connect(con).publish("people", policy, {"zip": 2}, tmp_path / "r.duckdb")
    assert list(read(tmp_path / "r.duckdb").columns) == ["id", "age", "zip", "disease"]


# ------------------------------------------------------------------------------------- Mondrian, clustering
@pytest.fixture
def measures(con) -> pd.DataFrame:
    """Numbers of every kind: integers of one to three digits, decimals, doubles with more than six decimals."""
    rng = np.random.default_rng(3)
    n = 300
    frame = pd.DataFrame({
        "id": range(n),
        "age": rng.integers(1, 150, n),
        "income": [decimal.Decimal(int(v)) / 100 for v in rng.integers(0, 2_000_000, n)],
        "ratio": rng.random(n) * 20,
        "disease": rng.choice(["flu", "cold", "hiv"], n),
    })
    load(con, frame)
    con.execute("CREATE OR REPLACE TABLE people AS SELECT id, age, CAST(income AS DECIMAL(10, 2)) AS income, ratio, "
                "disease FROM people")
    return frame


def check_ranges(released: pd.DataFrame, source: pd.DataFrame, attribute: str) -> None:
    """Each range label: its bounds are the smallest and largest value of the records showing it (pandas), its text
    shows them (rounded outward beyond six decimals), and labels written alike sort as text in numeric order."""
    shown = check_bounds_contain_each_record(released, source, attribute)
    by_label = shown.groupby(attribute)["original"].agg(["min", "max"]).astype(float)
    bounds = shown.groupby(attribute)[[f"{attribute}_low", f"{attribute}_high"]].first().astype(float)
    assert np.allclose(bounds.to_numpy(), by_label.to_numpy(), rtol=0, atol=0)
    for label, (low, high) in bounds.iterrows():
        match = CLOSED.match(label)
        assert match, label
        written_low, written_high = float(match.group(1)), float(match.group(2))
        assert written_low <= low and high <= written_high
        assert low - written_low < 1e-6 and written_high - high < 1e-6
    labels = list(bounds.index)
    assert len({len(label) for label in labels}) == 1
    assert sorted(labels) == [label for label, _ in sorted(bounds.iterrows(), key=lambda item: tuple(item[1]))]


def test_mondrian_bounds_are_each_partitions_range(con, measures, tmp_path):
    policy = Policy(quasi_identifiers={"age": None, "income": None, "ratio": None}, models=[KAnonymity(6)],
                    insensitive=["id"], sensitive=["disease"])
    result = duckanon.connect(con).mondrian("people", policy, tmp_path / "m.duckdb")
    assert result.partitioning.partitions > 10
    released = read(tmp_path / "m.duckdb")
    assert list(released.columns) == ["id", "age", "age_low", "age_high", "income", "income_low", "income_high",
                                      "ratio", "ratio_low", "ratio_high", "disease"]
    kinds = types(tmp_path / "m.duckdb")
    assert (kinds["age_low"], kinds["income_high"], kinds["ratio_low"]) == ("BIGINT", "DECIMAL(10,2)", "DOUBLE")
    for attribute in ("age", "income", "ratio"):
        check_ranges(released, measures, attribute)
    assert released["age"].str.fullmatch(r"\[\d{3}, \d{3}\]").all()  # ages up to 149: three digits each
    assert released["income"].str.fullmatch(r"\[\d{5}\.\d{2}, \d{5}\.\d{2}\]").all()
    assert released["ratio"].str.fullmatch(r"\[\d{2}\.\d{6}, \d{2}\.\d{6}\]").all()  # rounded outward to six


def test_negative_numbers_get_a_sign_place(con, tmp_path):
    frame = pd.DataFrame({"id": range(60), "t": list(range(-150, 150, 5)), "s": ["a", "b", "c"] * 20})
    load(con, frame, "readings")
    policy = Policy(quasi_identifiers={"t": None}, models=[KAnonymity(5)], insensitive=["id"], sensitive=["s"])
    duckanon.connect(con).mondrian("readings", policy, tmp_path / "m.duckdb")
    released = read(tmp_path / "m.duckdb")
    check_bounds_contain_each_record(released, frame, "t")
    labels = sorted(set(released["t"]), key=lambda label: float(CLOSED.match(label).group(1)))
    assert len({len(label) for label in labels}) == 1
    assert all(re.fullmatch(r"\[[-0]\d{3}, [-0]\d{3}\]", label) for label in labels)
    # Text puts the negative ranges first; among the others, text order is numeric order.
    negatives = [label for label in labels if label.startswith("[-")]
    assert sorted(labels)[:len(negatives)] == sorted(negatives)
    others = labels[len(negatives):]
    assert sorted(others) == others


@pytest.mark.parametrize("method", [SemiSupervisedClustering(), TopDownPartitioning(seed=1)])
def test_clustering_bounds_are_each_groups_range(con, measures, tmp_path, method):
    policy = Policy(quasi_identifiers={"age": None, "income": None}, models=[KAnonymity(8)],
                    insensitive=["id"], sensitive=["disease"], others="drop")
    duckanon.connect(con).cluster("people", policy, method).publish(tmp_path / "c.duckdb")
    released = read(tmp_path / "c.duckdb")
    assert list(released.columns) == ["id", "age", "age_low", "age_high", "income", "income_low", "income_high",
                                      "disease"]
    for attribute in ("age", "income"):
        check_ranges(released, measures, attribute)


def test_mean_style_gets_no_bounds(con, measures, tmp_path):
    policy = Policy(quasi_identifiers={"age": None}, models=[KAnonymity(5)], insensitive=["id"],
                    sensitive=["disease"], others="drop")
    duckanon.connect(con).mondrian("people", policy, tmp_path / "m.duckdb", styles={"age": "mean"})
    assert list(read(tmp_path / "m.duckdb").columns) == ["id", "age", "disease"]


# -------------------------------------------------------------------------------------- faults and names
def test_bound_names_taken_by_a_released_column_are_refused(con, people, tmp_path):
    con.execute("CREATE TABLE clash AS SELECT *, 1 AS age_high FROM people")
    policy = Policy(quasi_identifiers={"age": decades_hierarchy(range(5, 95))}, models=[KAnonymity(2)],
                    insensitive=["id", "age_high"], others="drop")
    with pytest.raises(PolicyError, match=r"columns \['age_high'\], which the release already has"):
        duckanon.connect(con).publish("clash", policy, {"age": 1}, tmp_path / "r.duckdb")
    assert not list(tmp_path.iterdir())


def test_verification_refuses_bounds_narrower_than_the_node(con, people, tmp_path, monkeypatch):
    """Bounds taken from the records' own values instead of the node's leaves would tell more than the label: the
    release check refuses them and no file is left."""
    def own_values(bound, level, type_name, values):
        (label,), join = level_expressions(bound, [level], SOURCE, "h")
        return (exp.select(label.as_(LEAF_LABEL, quoted=True),
                           sb.col(bound.column, SOURCE).as_(LEAF_VALUE, quoted=True))
                .from_(exp.alias_(exp.to_table("people"), SOURCE, quoted=True)).join(join))

    monkeypatch.setattr(generalization, "_leaves", own_values)
    policy = Policy(quasi_identifiers={"age": decades_hierarchy(range(5, 95))}, models=[KAnonymity(2)],
                    insensitive=["id"], others="drop")
    with pytest.raises(AnonymizationError, match="bounds of 'age' do not match"):
        duckanon.connect(con).publish("people", policy, {"age": 2}, tmp_path / "r.duckdb")
    assert not list(tmp_path.iterdir())


def test_verification_refuses_bounds_a_range_does_not_show(con, measures, tmp_path, monkeypatch):
    import duckanon.recode.recoding as recoding
    faithful = recoding.range_relation
    monkeypatch.setattr(recoding, "range_relation", lambda rows, label, low, high: faithful(rows, label, low, low))
    policy = Policy(quasi_identifiers={"age": None}, models=[KAnonymity(5)], insensitive=["id"],
                    sensitive=["disease"], others="drop")
    with pytest.raises(AnonymizationError, match="bounds of 'age' do not match"):
        duckanon.connect(con).mondrian("people", policy, tmp_path / "m.duckdb")
    assert not list(tmp_path.iterdir())


def test_bound_queries_transpile_to_spark(con, people):
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers={"age": Hierarchy.intervals(range(5, 95), widths=[10, 20])},
                    models=[KAnonymity(2)], insensitive=["id", "zip", "disease"])
    queries = []

    def kept(query):
        queries.append(query)
        return sb.table(f"kept_{len(queries)}")

    with bind(anon.workspace, "people", policy) as bound:
        ranges = FullDomainGeneralization({"age": 1}).ranges(as_engine(con), bound.source, bound.columns, bound.hierarchies, kept)
        final = ranges.joined(sb.table("released"), bound.columns)
    for query in [*queries, final]:
        assert query.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE)


# ------------------------------------------------------------------------------------------------ BI tools
def test_bounds_reflect_as_numbers_over_sqlalchemy(con, people, tmp_path):
    sqlalchemy = pytest.importorskip("sqlalchemy")
    pytest.importorskip("duckdb_engine")
    policy = Policy(quasi_identifiers={"age": decades_hierarchy(range(5, 95))}, models=[KAnonymity(2)],
                    insensitive=["id"], others="drop")
    path = tmp_path / "r.duckdb"
    duckanon.connect(con).publish("people", policy, {"age": 1}, path)
    engine = sqlalchemy.create_engine(f"duckdb:///{path}?access_mode=read_only")
    try:
        columns = {c["name"]: c["type"] for c in sqlalchemy.inspect(engine).get_columns("release")}
        assert columns["age_low"].python_type is int and columns["age_high"].python_type is int
        assert columns["age"].python_type is str
        # Sorting and filtering by value, as a BI tool's query does.
        table = sqlalchemy.Table("release", sqlalchemy.MetaData(), autoload_with=engine)
        query = (sqlalchemy.select(table.c.age, table.c.age_low).where(table.c.age_low >= 30)
                 .order_by(table.c.age_low.desc()))
        with engine.connect() as connection:
            rows = connection.execute(query).fetchall()
    finally:
        engine.dispose()
    ages = people["age"].dropna()
    assert len(rows) == int((ages >= 30).sum())
    assert [low for _, low in rows] == sorted((v // 10 * 10 for v in ages if v >= 30), reverse=True)
