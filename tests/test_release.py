"""Releases: what a publish writes, checked from outside duckanon (pandas, the duckdb shell; SQLAlchemy: test_bi.py)."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess

import duckdb
import pandas as pd
import pytest
import sqlglot
from adult_files import arx_map

import duckanon
from duckanon import (
    DistinctLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyNotSatisfied,
    ReleaseCheckFailed,
)
from duckanon.datasets import adult_hierarchy_dir, load_adult
from duckanon.encode.binding import bind
from duckanon.engine import DuckDBEngine
from duckanon.engine.duckdb_engine import MERGES_EQUAL_VALUES
from duckanon.privacy.checks import check
from duckanon.privacy.classes import Classes
from duckanon.recode.generalization import generalize

QUASI = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
LEVELS = {"sex": 0, "age": 2, "race": 1, "marital-status": 1, "education": 2, "native-country": 2,
          "workclass": 1, "occupation": 1}


@pytest.fixture(scope="module")
def adult_con():
    con = duckdb.connect()
    load_adult(con, "adult")
    return con


@pytest.fixture(scope="module")
def adult_policy():
    return Policy(quasi_identifiers={q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in QUASI},
                  models=[KAnonymity(5)], sensitive=["salary-class"], others="drop", suppression_limit=0.05)


@pytest.fixture(scope="module")
def adult_release(adult_con, adult_policy, tmp_path_factory):
    path = tmp_path_factory.mktemp("release") / "adult_k5.duckdb"
    release = duckanon.connect(adult_con).publish("adult", adult_policy, LEVELS, path, table="adult")
    return path, release


def read_release(path, table="adult") -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True) as con:
        return con.execute(f'SELECT * FROM "{table}"').df()


def test_adult_k5_release_every_class_has_five_records(adult_release, adult_con):
    path, release = adult_release
    released = read_release(path)
    assert len(released) == 30162 == release.records_out
    sizes = released.groupby(QUASI, dropna=False).size()
    assert sizes.min() >= 5
    assert (released[QUASI] == "*").all(axis=1).sum() == release.suppressed > 0


def test_adult_release_shows_no_raw_value(adult_release, adult_con):
    path, release = adult_release
    released = read_release(path)
    raw = adult_con.execute("SELECT * FROM adult").df()
    assert list(released.columns) == QUASI_ORDER(raw.columns)
    expected = pd.DataFrame({a: raw[a].astype(str).map(arx_map(a, level)) for a, level in LEVELS.items()})
    expected["salary-class"] = raw["salary-class"]
    kept = released[~(released[QUASI] == "*").all(axis=1)]
    # Rows come in no particular order: the kept rows are exactly the hierarchy's generalizations of source rows, and
    # the suppressed ones make up the difference.
    counts_expected = expected.groupby(QUASI + ["salary-class"]).size()
    counts_kept = kept.groupby(QUASI + ["salary-class"]).size()
    difference = counts_expected.sub(counts_kept, fill_value=0)
    assert (difference >= 0).all() and difference.sum() == release.suppressed
    for attribute, level in LEVELS.items():
        if level > 0:
            leaked = set(released[attribute]) & set(raw[attribute].astype(str)) - set(arx_map(attribute, level).values())
            assert not leaked, attribute
    assert sorted(released["salary-class"]) == sorted(raw["salary-class"])


def QUASI_ORDER(columns) -> list[str]:
    """The released columns: the source's order, age (a number) followed by its bounds."""
    kept = [c for c in columns if c in QUASI or c == "salary-class"]
    return [name for c in kept for name in ([c, "age_low", "age_high"] if c == "age" else [c])]


def test_adult_release_bounds_are_the_leaves_of_each_age_node(adult_release):
    """ARX's age labels ("20-39") stay as they are; the bounds are the smallest and largest leaf under each node, read
    from the hierarchy file with plain csv; suppressed records have none."""
    path, _ = adult_release
    released = read_release(path)
    leaves = pd.Series(arx_map("age", LEVELS["age"]))
    expected = leaves.index.to_series().astype(int).groupby(leaves.values).agg(["min", "max"])
    suppressed = released["age"] == "*"
    assert released.loc[suppressed, ["age_low", "age_high"]].isna().all().all()
    kept = released[~suppressed]
    assert (kept["age_low"].to_numpy() == expected.loc[kept["age"], "min"].to_numpy()).all()
    assert (kept["age_high"].to_numpy() == expected.loc[kept["age"], "max"].to_numpy()).all()
    assert pd.api.types.is_integer_dtype(released["age_low"])  # the source column's type
    assert set(kept["age"]) <= set(leaves)  # the user's labels, unchanged


def test_release_file_has_only_the_table_views_and_info(adult_release):
    path, _ = adult_release
    with duckdb.connect(str(path), read_only=True) as con:
        tables = {r[0] for r in con.execute("SELECT table_name FROM duckdb_tables()").fetchall()}
        views = {r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal").fetchall()}
        info = con.execute("SELECT transformation FROM release_info").fetchall()
    assert tables == {"adult", "release_info"}
    assert views == {"adult_classes", "release_verification"}
    assert [json.loads(row[0]) for row in info] == [{"full-domain generalization": LEVELS}]
    assert "fnlwgt" not in read_release(path).columns


@pytest.mark.skipif(shutil.which("duckdb") is None, reason="the duckdb shell (PyPI duckdb-cli) is not installed")
def test_release_opens_in_the_duckdb_shell(adult_release):
    path, _ = adult_release
    result = subprocess.run(["duckdb", "-readonly", "-json", str(path), "-c",
                             "SELECT min(records) AS smallest, CAST(sum(records) AS BIGINT) AS total FROM adult_classes"],
                            capture_output=True, text=True, check=True)
    assert json.loads(result.stdout) == [{"smallest": 5, "total": 30162}]


def test_drop_mode_accounts_for_every_record(adult_con, adult_policy, tmp_path):
    policy = Policy(**{**vars_of(adult_policy), "suppression": "drop"})
    report = duckanon.connect(adult_con).check("adult", policy, LEVELS)
    release = duckanon.connect(adult_con).publish("adult", policy, LEVELS, tmp_path / "d.duckdb", table="adult")
    released = read_release(tmp_path / "d.duckdb")
    raw = adult_con.execute("SELECT * FROM adult").df()
    generalized = pd.DataFrame({a: raw[a].astype(str).map(arx_map(a, lv)) for a, lv in LEVELS.items()})
    sizes = generalized.groupby(QUASI).size()
    assert release.suppressed == report.violating_records == int(sizes[sizes < 5].sum())
    assert len(released) + release.suppressed == len(raw)
    assert released.groupby(QUASI).size().min() >= 5


def vars_of(policy: Policy) -> dict:
    return {k: getattr(policy, k) for k in ("quasi_identifiers", "models", "identifiers", "sensitive", "insensitive",
                                            "suppression", "suppression_limit", "others")}


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def temporary_tables(con) -> list[str]:
    return sorted(name for name, in con.execute("SELECT table_name FROM duckdb_tables() WHERE temporary").fetchall())


@pytest.mark.parametrize("name", ["r.parquet", "r.csv", "r.duckdb"])
def test_a_release_holds_every_record_as_its_own_text(tmp_path, name):
    """A publish checks and digests the records alike in every released column once (grouped by their text) and
    writes each as often as it occurs: the file must hold the recoded source row for row, values equal under SQL's
    comparison but written differently ('a' and 'A' under NOCASE, 0.0 and -0.0, a month and 30 days) kept apart, and
    a record suppressed as the check says (DuckDB before 2.0 wrote such values as one another to a Parquet dictionary
    and in runs of a database file).  Compared with the source recoded in pandas."""
    with duckdb.connect() as con:
        con.execute("CREATE TABLE src (age INTEGER, label VARCHAR COLLATE NOCASE, amount DOUBLE, span INTERVAL)")
        con.execute("""INSERT INTO src SELECT 20 + i % 20, CASE WHEN i % 3 = 0 THEN 'a' ELSE 'A' END,
                       CASE WHEN i % 2 = 0 THEN CAST('0.0' AS DOUBLE) ELSE CAST('-0.0' AS DOUBLE) END,
                       CASE WHEN i % 5 = 0 THEN INTERVAL 1 MONTH ELSE INTERVAL 30 DAYS END FROM range(997) AS t(i)""")
        # Two classes too small, suppressed: their five records form the class of '*', which holds.
        con.execute("INSERT INTO src VALUES (95, 'b', 1.5, INTERVAL 1 DAY), (95, 'b', 1.5, INTERVAL 1 DAY), "
                    "(85, 'c', 2.5, INTERVAL 2 DAYS), (85, 'c', 2.5, INTERVAL 2 DAYS), (86, 'c', 2.5, NULL)")
        source = con.execute("SELECT age, label, CAST(amount AS VARCHAR) AS amount, CAST(span AS VARCHAR) AS span "
                             "FROM src").df()
        decades = Hierarchy.intervals(range(100), widths=[10])
        policy = Policy(quasi_identifiers={"age": decades}, insensitive=["label", "amount", "span"],
                        models=[KAnonymity(5)], suppression_limit=0.01)
        release = duckanon.connect(con).publish("src", policy, {"age": 1}, tmp_path / name, table="r")
    decade = source["age"].astype(str).map({row[0]: row[1] for row in decades.rows})
    expected = source.assign(age=decade.where(source["age"] < 80, "*"))
    with duckdb.connect() as reader:
        text = "SELECT CAST(age AS VARCHAR) AS age, label, CAST(amount AS VARCHAR) AS amount, CAST(span AS VARCHAR) AS span"
        if name.endswith(".duckdb"):
            reader.execute(f"ATTACH '{tmp_path / name}' AS written (READ_ONLY)")
            released = reader.execute(f"{text} FROM written.r").df()
        else:
            released = reader.execute(f"{text} FROM '{tmp_path / name}'").df()
    assert release.suppressed == 5 and len(released) == len(source) == 1002
    key = ["age", "label", "amount", "span"]
    assert released.value_counts(key, dropna=False).sort_index().equals(
        expected.value_counts(key, dropna=False).sort_index())
    assert set(released["label"]) == {"a", "A", "b", "c"} and set(released["amount"]) == {"0.0", "-0.0", "1.5", "2.5"}


def test_a_duckdb_file_whose_stored_rows_differ_is_refused(tmp_path, monkeypatch):
    """A DuckDB release is staged through Parquet and stored by the file's own connection: rows stored otherwise
    than they were released fail the publish, which leaves no file."""
    from duckanon.release import files

    real, calls = files.fingerprint, []

    def stored_otherwise(engine, relation, weight=None):
        rows, total = real(engine, relation, weight)
        calls.append(1)
        return (rows, total + 1) if len(calls) == 1 else (rows, total)  # the stored table's, taken first

    monkeypatch.setattr(files, "fingerprint", stored_otherwise)
    with duckdb.connect() as con:
        con.execute("CREATE TABLE src AS SELECT i % 50 AS age FROM range(500) AS t(i)")
        policy = Policy(quasi_identifiers={"age": Hierarchy.intervals(range(100), widths=[10])}, models=[KAnonymity(5)])
        with pytest.raises(ReleaseCheckFailed, match="stored other values than those released"):
            duckanon.connect(con).publish("src", policy, {"age": 1}, tmp_path / "r.duckdb", table="r")
    assert list(tmp_path.iterdir()) == []


def test_a_column_of_zeros_of_both_signs_is_stored_as_released_or_refused(tmp_path):
    """A column whose values are all -0.0 or 0.0 is one constant segment of a database file before DuckDB 2.0, which
    keeps one of the two: the publish refuses, naming the column, and leaves no file; DuckDB 2.0 and newer store both,
    as many of each as the source holds."""
    with duckdb.connect() as con:
        con.execute("CREATE TABLE src AS SELECT i % 50 AS age, CASE WHEN i % 2 = 0 THEN CAST('0.0' AS DOUBLE) "
                    "ELSE CAST('-0.0' AS DOUBLE) END AS amount FROM range(1000) AS t(i)")
        expected = con.execute("SELECT CAST(amount AS VARCHAR) FROM src").df().iloc[:, 0].value_counts().to_dict()
        policy = Policy(quasi_identifiers={"age": Hierarchy.intervals(range(100), widths=[10])}, insensitive=["amount"],
                        models=[KAnonymity(5)])
        anon = duckanon.connect(con)
        if MERGES_EQUAL_VALUES:
            with pytest.raises(ReleaseCheckFailed, match=r"in columns \['amount'\]"):
                anon.publish("src", policy, {"age": 1}, tmp_path / "r.duckdb", table="r")
            assert list(tmp_path.iterdir()) == []
            return
        anon.publish("src", policy, {"age": 1}, tmp_path / "r.duckdb", table="r")
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as release:
        stored = release.execute("SELECT CAST(amount AS VARCHAR) FROM r").df().iloc[:, 0].value_counts().to_dict()
    assert stored == expected == {"0.0": 500, "-0.0": 500}


def test_failed_publish_keeps_the_earlier_release_and_leaves_nothing(adult_con, adult_policy, tmp_path):
    anon = duckanon.connect(adult_con)
    target = tmp_path / "r.duckdb"
    tables = temporary_tables(adult_con)
    anon.publish("adult", adult_policy, LEVELS, target, table="adult")
    assert temporary_tables(adult_con) == tables  # every temporary table of the publish is dropped
    before = digest(target)
    strict = Policy(**{**vars_of(adult_policy), "suppression_limit": 0.0})
    with pytest.raises(PolicyNotSatisfied, match="may be suppressed"):
        anon.publish("adult", strict, LEVELS, target, table="adult")
    assert digest(target) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.duckdb"]


def test_failure_while_writing_leaves_no_partial_file(adult_con, adult_policy, tmp_path, monkeypatch):
    import duckanon.release.publish as publishing

    def broken(*args, **kwargs):
        raise RuntimeError("disk on fire")

    monkeypatch.setattr(publishing, "verify_release", broken)
    tables = temporary_tables(adult_con)
    with pytest.raises(RuntimeError, match="disk on fire"):
        duckanon.connect(adult_con).publish("adult", adult_policy, LEVELS, tmp_path / "x.duckdb", table="adult")
    assert list(tmp_path.iterdir()) == []
    assert temporary_tables(adult_con) == tables
    assert adult_con.execute("SELECT count(*) FROM adult").fetchone()[0] == 30162


def test_replaced_records_form_a_class_that_must_satisfy_the_policy(tmp_path):
    # Two unique records violate k=3; suppressed alone they would be a '*' class of 2: level 0 is refused by check and
    # publish alike, and the search goes to level 1.
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a', 'x'), ('a', 'y'), ('a', 'z'), ('b', 'x'), ('b', 'y'), "
                "('b', 'z'), ('b', 'w'), ('c', 'x'), ('d', 'y')) v(q, s)")
    policy = Policy(quasi_identifiers={"q": Hierarchy.from_lists([["a", "*"], ["b", "*"], ["c", "*"], ["d", "*"]])},
                    models=[KAnonymity(3)], sensitive=["s"], suppression_limit=1.0)
    anon = duckanon.connect(con)
    assert not anon.check("t", policy, {"q": 0}).within_limit
    with pytest.raises(PolicyNotSatisfied, match="would form a class that violates it too"):
        anon.publish("t", policy, {"q": 0}, tmp_path / "t.duckdb", table="t")
    assert list(tmp_path.iterdir()) == []
    assert anon.search("t", policy).levels == {"q": 1}


def test_l_diversity_release_checked_by_pandas(adult_con, tmp_path):
    quasi = ["sex", "age", "race"]
    policy = Policy(quasi_identifiers={q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi},
                    models=[KAnonymity(3), DistinctLDiversity("occupation", 4)], sensitive=["occupation"],
                    others="drop", suppression="drop", suppression_limit=0.2)
    levels = {"sex": 0, "age": 1, "race": 0}
    duckanon.connect(adult_con).publish("adult", policy, levels, tmp_path / "l.duckdb", table="adult")
    released = read_release(tmp_path / "l.duckdb")
    classes = released.groupby(quasi)
    assert classes.size().min() >= 3 and classes["occupation"].nunique().min() >= 4


def test_release_sql_transpiles_to_spark_and_postgres(adult_con, adult_policy):
    anon = duckanon.connect(adult_con)
    with bind(anon.workspace, "adult", adult_policy) as bound:
        query = generalize(bound.source, bound.columns, bound.hierarchies, LEVELS)
    for dialect in ("spark", "postgres"):
        text = query.sql(dialect=dialect)
        assert sqlglot.parse_one(text, read=dialect).sql(dialect=dialect) == text


def test_policy_round_trips_through_the_database(adult_con, adult_policy):
    anon = duckanon.connect(adult_con)
    anon.save_policy("adult k5", adult_policy)
    loaded = anon.policy("adult k5")
    assert loaded.models == adult_policy.models
    assert loaded.sensitive == ["salary-class"] and loaded.others == "drop"
    assert {q: h.rows for q, h in loaded.quasi_identifiers.items()} == \
        {q: h.rows for q, h in adult_policy.quasi_identifiers.items()}
    stored = adult_con.execute("SELECT role, count(*) FROM anon.policy_columns WHERE policy = 'adult k5' "
                               "GROUP BY role ORDER BY role").fetchall()
    assert stored == [("quasi-identifier", 8), ("sensitive", 1)]
    assert anon.check("adult", "adult k5", LEVELS).violating_records == \
        anon.check("adult", adult_policy, LEVELS).violating_records


def test_drop_mode_rechecks_t_closeness_against_the_released_distribution(tmp_path):
    # Classes A={x}, B={x,y}, C={y,y,y,y} at t=0.3: A violates; once A is dropped the table's distribution moves to
    # y and B (distance 1/3 from it) violates too, so B must go as well.
    from duckanon import TCloseness
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a', 'x'), ('b', 'x'), ('b', 'y'), ('c', 'y'), ('c', 'y'), "
                "('c', 'y'), ('c', 'y')) v(q, s)")
    policy = Policy(quasi_identifiers={"q": Hierarchy.from_lists([["a", "*"], ["b", "*"], ["c", "*"]])},
                    models=[TCloseness("s", 0.3)], sensitive=["s"], suppression="drop", suppression_limit=0.5)
    release = duckanon.connect(con).publish("t", policy, {"q": 0}, tmp_path / "t.duckdb", table="t")
    assert read_release(tmp_path / "t.duckdb", "t")["q"].tolist() == ["c"] * 4
    assert release.suppressed == 3


def test_encoded_check_lists_generalized_values(adult_con, adult_policy):
    report = duckanon.connect(adult_con).check("adult", adult_policy, LEVELS)
    ages = set(report.violations["age"])
    assert ages <= set(arx_map("age", 2).values()) and ages


def test_classes_of_a_derived_table_run_on_every_duckdb():
    # DuckDB 1.1-1.5 and 2.0.1 reject `FROM ((SELECT …) AS a) AS b`; replace mode re-checked such a relation and
    # crashed whenever a record was suppressed.
    con = duckdb.connect()
    query = sqlglot.parse_one("SELECT * FROM (VALUES ('a'), ('a'), ('b')) v(q)")
    classes = Classes.of(query.subquery("final"), ["q"])
    assert "((" not in classes.normalized().sql("duckdb")
    report = check(DuckDBEngine(con), classes, [KAnonymity(2)], key_names=["q"])
    assert (report.violating_classes, report.violating_records) == (1, 1)
