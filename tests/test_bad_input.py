"""Bad input gets a clear error naming the problem, and loses nothing."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import duckanon
from duckanon import (
    AlphaKAnonymity,
    AnonymizationError,
    DistinctLDiversity,
    Hierarchy,
    HierarchyError,
    KAnonymity,
    Policy,
    PolicyError,
    TCloseness,
)

SEX = Hierarchy.from_lists([["m", "*"], ["f", "*"]], name="sex")
AGE = Hierarchy.intervals(range(0, 100), widths=[10, 50], name="age")


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute("CREATE TABLE people AS SELECT * FROM (VALUES ('ann', 'f', 34, 'flu'), ('bob', 'm', 35, 'hiv'), "
                "('cid', 'm', 36, 'flu'), ('dan', 'm', 37, 'cold'), ('eve', 'f', 38, 'cold'), ('fay', 'f', 39, 'hiv')) "
                "v(name, sex, age, disease)")
    return con


def policy(**changes) -> Policy:
    base = dict(quasi_identifiers={"sex": SEX, "age": AGE}, identifiers=["name"], models=[KAnonymity(2)],
                sensitive=["disease"])
    return Policy(**{**base, **changes})


def snapshot(con) -> pd.DataFrame:
    return con.execute("SELECT * FROM people ORDER BY name").df()


def attempt(con, tmp_path, make_policy, levels=None, error=AnonymizationError, match=None):
    """Publishing fails with ``error``; the source and the folder are unchanged."""
    before = snapshot(con)
    target = tmp_path / "release.duckdb"
    with pytest.raises(error, match=match):
        duckanon.connect(con).publish("people", make_policy(), levels or {"sex": 0, "age": 1}, target)
    pd.testing.assert_frame_equal(snapshot(con), before)
    assert not target.exists() and list(tmp_path.iterdir()) == []


def test_unknown_column(con, tmp_path):
    attempt(con, tmp_path, lambda: policy(insensitive=["salary"]), match="salary")


def test_column_with_two_roles():
    with pytest.raises(PolicyError, match="'sex' is given two roles"):
        policy(insensitive=["sex"])


def test_column_without_role(con, tmp_path):
    attempt(con, tmp_path, lambda: policy(identifiers=[]), match=r"without a role: \['name'\]")


@pytest.mark.parametrize("k", [0, -1, 2.5, True])
def test_k_below_one_or_not_whole(k):
    with pytest.raises(PolicyError, match="k must be a whole number"):
        KAnonymity(k)


def test_k_larger_than_table(con, tmp_path):
    attempt(con, tmp_path, lambda: policy(models=[KAnonymity(7)]), match=r"k=7 is larger than the table \(6 records\)")


def test_l_larger_than_distinct_values(con, tmp_path):
    attempt(con, tmp_path, lambda: policy(models=[DistinctLDiversity("disease", 4)]),
            match=r"l=4 needs 4 distinct values but 'disease' has only 3")


@pytest.mark.parametrize("alpha", [0, -0.1, 1.01, "0.5"])
def test_alpha_outside_range(alpha):
    with pytest.raises(PolicyError, match=r"alpha must lie in \(0, 1\]"):
        AlphaKAnonymity("disease", alpha, 2)


def test_alpha_below_overall_frequency(con, tmp_path):
    attempt(con, tmp_path, lambda: policy(models=[AlphaKAnonymity("disease", 0.3, 2)]), match="no release can satisfy")


@pytest.mark.parametrize("t", [-0.01, 1.5])
def test_t_outside_range(t):
    with pytest.raises(PolicyError, match=r"t must lie in \[0, 1\]"):
        TCloseness("disease", t)


def test_hierarchy_not_covering_a_value(con, tmp_path):
    con.execute("INSERT INTO people VALUES ('gus', 'x', 40, 'flu')")
    attempt(con, tmp_path, policy, error=HierarchyError, match=r"'sex' does not cover 1 of its values: 'x'")


def test_interval_hierarchy_not_covering_a_value(con, tmp_path):
    con.execute("INSERT INTO people VALUES ('old', 'm', 120, 'flu')")
    attempt(con, tmp_path, policy, error=HierarchyError, match=r"'age' does not cover 1 of its values: 120")


# "m" generalizes to NULL on level 1 but to "*" on level 2, while a missing sex (no NULL row) stays NULL throughout.
SEX_TO_NULL = [["m", None, "*"], ["f", "F", "*"]]


def test_hierarchy_splitting_missing_values_from_a_value(con, tmp_path):
    con.execute("UPDATE people SET sex = NULL WHERE name = 'dan'")
    split = Hierarchy.from_lists(SEX_TO_NULL, name="sex")
    attempt(con, tmp_path, lambda: policy(quasi_identifiers={"sex": split, "age": AGE}), error=HierarchyError,
            match=r"'sex' generalizes 'm' to NULL on level 1 and to '\*' on level 2.*Give NULL a row")


def test_a_null_row_makes_such_a_hierarchy_nest():
    """Seen before it was refused: with the missing value's class split above level 1, the optimal search missed
    level 1, the only 2-diverse node; with a NULL row joining that class for good, it finds it, as exhaustive does."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('a0', 'flu'), (NULL, 'cold'), ('a1', 'flu'), "
                "('a1', 'cold')) v(a, s)")
    anon = duckanon.connect(con)

    def make(rows):
        return Policy(quasi_identifiers={"a": Hierarchy.from_lists(rows, name="a")},
                      models=[DistinctLDiversity("s", 2)], suppression_limit=0.0)
    with pytest.raises(HierarchyError, match=r"'a' generalizes 'a0' to NULL on level 1"):
        anon.search("t", make([["a0", None, "*"], ["a1", "A", "*"]]), metric="dm")
    nested = make([["a0", None, "*"], ["a1", "A", "*"], [None, None, "*"]])
    for strategy in ("optimal", "exhaustive"):
        assert anon.search("t", nested, metric="dm", strategy=strategy).levels == {"a": 1}


def test_empty_table(con, tmp_path):
    con.execute("DELETE FROM people")
    attempt(con, tmp_path, policy, match="empty")


def test_level_outside_hierarchy(con, tmp_path):
    attempt(con, tmp_path, policy, levels={"sex": 2, "age": 0}, error=HierarchyError,
            match=r"level 2 for 'sex' is outside its hierarchy's levels 0..1")


def test_level_missing_for_a_quasi_identifier(con, tmp_path):
    attempt(con, tmp_path, policy, levels={"sex": 1}, match=r"no level given for quasi-identifiers \['age'\]")


def test_unknown_table(con):
    with pytest.raises(AnonymizationError, match="no table named 'nobody'"):
        duckanon.connect(con).check("nobody", policy(), {"sex": 0, "age": 0})


def test_suppression_limit_outside_range():
    with pytest.raises(PolicyError, match="suppression_limit"):
        policy(suppression_limit=1.5)


HOSTILE = ['na"me; DROP TABLE people; --', "Größe der Stadt", "it's", "a.b c"]


def test_hostile_names_are_names(tmp_path):
    con = duckdb.connect()
    table = 'pe"ople; DROP TABLE x; --'
    con.execute("CREATE TABLE x (keep INT)")
    frame = pd.DataFrame({HOSTILE[0]: ["a", "b", "c", "d"], HOSTILE[1]: ["m", "m", "f", "f"],
                          HOSTILE[2]: ["s1", "s2", "s1", "s2"], HOSTILE[3]: [1, 2, 3, 4]})
    con.register("frame", frame)
    con.execute(f'CREATE TABLE "{table.replace(chr(34), chr(34) * 2)}" AS SELECT * FROM frame')
    hierarchy = Hierarchy.from_lists([["m", "*"], ["f", "*"]], name=HOSTILE[0])
    anon = duckanon.connect(con)
    anon.add_hierarchy(HOSTILE[1], hierarchy)
    hostile_policy = Policy(quasi_identifiers={HOSTILE[1]: HOSTILE[1]}, identifiers=[HOSTILE[0]],
                            models=[KAnonymity(2), DistinctLDiversity(HOSTILE[2], 2)], insensitive=[HOSTILE[3]])
    anon.save_policy(HOSTILE[2], hostile_policy)
    release = anon.publish(table, HOSTILE[2], {HOSTILE[1]: 0}, tmp_path / "größe'; x.duckdb", table=HOSTILE[0])
    with duckdb.connect(str(release.path), read_only=True) as reader:
        released = reader.execute(f'SELECT * FROM "{HOSTILE[0].replace(chr(34), chr(34) * 2)}"').df()
    assert list(released.columns) == HOSTILE[1:]
    assert released.groupby(HOSTILE[1]).size().to_dict() == {"f": 2, "m": 2}
    assert con.execute("SELECT count(*) FROM x").fetchone() == (0,)


def test_a_folder_reads_only_as_parquet_parts(con, tmp_path):
    """A folder of Parquet parts (as Spark writes them) is a source; a folder named like another kind is refused."""
    parts = tmp_path / "people.parquet"
    parts.mkdir()
    con.execute(f"COPY (SELECT * FROM people WHERE sex = 'f') TO '{parts / 'part-0.parquet'}' (FORMAT parquet)")
    con.execute(f"COPY (SELECT * FROM people WHERE sex = 'm') TO '{parts / 'part-1.parquet'}' (FORMAT parquet)")
    report = duckanon.connect(con).check(str(parts), policy(), {"sex": 0, "age": 2})
    assert report.records == 6 and report.satisfied  # both parts read: 3 + 3 records, one class of each sex
    folder = tmp_path / "people.csv"
    folder.mkdir()
    with pytest.raises(AnonymizationError, match=r"is a folder: DuckDB reads a folder only as Parquet parts"):
        duckanon.connect(con).check(str(folder), policy(), {"sex": 0, "age": 2})
