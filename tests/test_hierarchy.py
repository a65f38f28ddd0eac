"""Tests for duckanon.hierarchy.hierarchy (and the hierarchy side of duckanon.recode.generalization / the anonymizer).

Expected values are written down by hand or computed independently here (plain csv, pandas, integer arithmetic),
never by calling the code under test a second time.
"""

from __future__ import annotations

import csv
import datetime as dt
import io
import os
import re
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import HierarchyError, IntervalHierarchy, KAnonymity, Policy
from duckanon.datasets import ADULT_QUASI_IDENTIFIERS, adult_hierarchy_dir
from duckanon.engine import as_engine
from duckanon.errors import AnonymizationError
from duckanon.hierarchy.bound import BoundHierarchy
from duckanon.hierarchy.hierarchy import Hierarchy
from duckanon.recode.generalization import generalize
from duckanon.sqlgen import build as sb

HIERARCHY_DIR = adult_hierarchy_dir()
ADULT_FILES = sorted(HIERARCHY_DIR.glob("*.csv"))


def q(name: str) -> str:
    """Quote an identifier for the hand-written SQL of this test (independent of duckanon.sqlgen.build)."""
    return '"' + name.replace('"', '""') + '"'


def plain_csv_rows(path: Path) -> list[list[str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return [row for row in csv.reader(f, delimiter=";") if row]


def all_tables(con: duckdb.DuckDBPyConnection) -> set[tuple[str, str]]:
    return {(s, t) for s, t in con.execute(
        "SELECT schema_name, table_name FROM duckdb_tables() WHERE NOT temporary").fetchall()}


@pytest.fixture()
def con():
    connection = duckdb.connect()
    yield connection
    connection.close()


@pytest.fixture()
def anon(con):
    return duckanon.connect(con)


# =============================================================================================== ARX files


def test_bundled_directory_holds_the_nine_adult_hierarchies():
    assert sorted(p.stem for p in ADULT_FILES) == sorted(ADULT_QUASI_IDENTIFIERS)


@pytest.mark.parametrize("path", ADULT_FILES, ids=lambda p: p.stem)
def test_arx_file_reads_as_plain_csv_rows(path):
    h = Hierarchy.from_arx_csv(path)
    expected = plain_csv_rows(path)
    assert h.name == path.stem
    assert [list(r) for r in h.rows] == expected
    assert h.levels == len(expected[0])
    assert all(r[-1] == "*" for r in h.rows)


@pytest.mark.parametrize("path", ADULT_FILES, ids=lambda p: p.stem)
def test_arx_file_writes_back_byte_identical(path, tmp_path):
    raw = path.read_bytes()
    # to_arx_csv always ends the last line; a bundled file whose last line is unterminated
    # (native-country.csv is) compares equal up to that final newline.
    expected = raw if raw.endswith(b"\n") else raw + b"\n"
    h = Hierarchy.from_arx_csv(path)
    buffer = io.StringIO()
    h.to_arx_csv(buffer)
    assert buffer.getvalue().encode("utf-8") == expected
    target = tmp_path / path.name
    h.to_arx_csv(target)
    assert target.read_bytes() == expected


@pytest.mark.parametrize("path", ADULT_FILES, ids=lambda p: p.stem)
def test_arx_file_stores_in_duckdb_and_loads_back(path, con):
    h = Hierarchy.from_arx_csv(path)
    h.store(con, f"hierarchy_{path.stem}")
    # The stored table, read with hand-written SQL: columns level_0.., all VARCHAR, same rows.
    described = con.execute(f"DESCRIBE anon.{q('hierarchy_' + path.stem)}").fetchall()
    assert [(r[0], r[1]) for r in described] == [(f"level_{i}", "VARCHAR") for i in range(h.levels)]
    stored = con.execute(f"SELECT * FROM anon.{q('hierarchy_' + path.stem)}").fetchall()
    assert sorted(stored) == sorted(tuple(r) for r in plain_csv_rows(path))
    loaded = Hierarchy.from_table(con, f"hierarchy_{path.stem}")
    assert loaded == h
    assert loaded.name == f"hierarchy_{path.stem}"


def test_add_arx_hierarchies_stores_every_file(anon, con):
    names = anon.add_arx_hierarchies(HIERARCHY_DIR)
    assert names == sorted(ADULT_QUASI_IDENTIFIERS)
    assert {("anon", f"hierarchy_{n}") for n in names} <= all_tables(con)
    for name in names:
        assert anon.hierarchy(name) == Hierarchy.from_arx_csv(HIERARCHY_DIR / f"{name}.csv")
        assert anon.hierarchy(name).name == name


def test_add_arx_hierarchies_with_names_picks_those(anon, con):
    assert anon.add_arx_hierarchies(HIERARCHY_DIR, names=["sex", "age"]) == ["age", "sex"]
    stored = {t for s, t in all_tables(con) if s == "anon" and t.startswith("hierarchy_")}
    assert stored == {"hierarchy_age", "hierarchy_sex"}


def test_known_adult_rows(anon):
    anon.add_arx_hierarchies(HIERARCHY_DIR, names=["age", "education", "sex"])
    by_value = {h: {r[0]: r for r in anon.hierarchy(h).rows} for h in ("age", "education", "sex")}
    age_file = {r[0]: tuple(r) for r in plain_csv_rows(HIERARCHY_DIR / "age.csv")}
    assert by_value["age"]["39"] == age_file["39"] == ("39", "35-39", "30-39", "20-39", "*")
    assert by_value["age"]["90"] == age_file["90"] == ("90", "85-89", "80-89", "80-99", "*")
    assert by_value["age"]["1"] == ("1", "0-4", "0-9", "0-19", "*")
    assert len(by_value["age"]) == 100
    assert by_value["education"]["Masters"] == ("Masters", "Graduate", "Higher education", "*")
    assert by_value["education"]["Preschool"] == ("Preschool", "Primary School", "Primary education", "*")
    assert by_value["sex"] == {"Male": ("Male", "*"), "Female": ("Female", "*")}


def test_unknown_hierarchy_name(anon):
    with pytest.raises(AnonymizationError, match="no hierarchy named 'nope'"):
        anon.hierarchy("nope")


def test_arx_null_row_and_special_values_round_trip(con):
    text = 'Berlin;DE;EU;*\nNULL;unknown;unknown;*\n"a;b";"x ""y""";EU;*\nStraße;DE;EU;*\n'
    h = Hierarchy.from_arx_csv(io.StringIO(text), name="cities")
    assert h.rows == [("Berlin", "DE", "EU", "*"), (None, "unknown", "unknown", "*"),
                      ("a;b", 'x "y"', "EU", "*"), ("Straße", "DE", "EU", "*")]
    out = io.StringIO()
    h.to_arx_csv(out)
    assert out.getvalue() == text
    h.store(con, "hierarchy_cities")
    assert con.execute('SELECT level_1 FROM anon.hierarchy_cities WHERE level_0 IS NULL').fetchall() == [("unknown",)]
    assert Hierarchy.from_table(con, "hierarchy_cities") == h


def test_arx_reader_skips_blank_lines_and_bom(tmp_path):
    path = tmp_path / "sex.csv"
    path.write_bytes("\ufeffMale;*\n\nFemale;*\n\n".encode("utf-8"))
    h = Hierarchy.from_arx_csv(path)
    assert h.name == "sex"
    assert h.rows == [("Male", "*"), ("Female", "*")]


# =============================================================================================== builders


def test_intervals_nested_widths():
    h = Hierarchy.intervals([47], widths=[5, 10, 20], name="age")
    assert isinstance(h, IntervalHierarchy)
    assert h.rows == [("47", "[45, 50)", "[40, 50)", "[40, 60)", "*")]
    assert h.levels == 5 and h.height == 4


def test_intervals_nested_widths_over_a_range():
    values = list(range(1, 101))
    h = Hierarchy.intervals(values, widths=[5, 10, 20])
    # The cuts run to 120: every number is written with three digits, so that labels sort as text.
    expected = [(str(v), f"[{v // 5 * 5:03d}, {v // 5 * 5 + 5:03d})", f"[{v // 10 * 10:03d}, {v // 10 * 10 + 10:03d})",
                 f"[{v // 20 * 20:03d}, {v // 20 * 20 + 20:03d})", "*") for v in values]
    assert h.rows == expected
    # Labels on a level cover the whole range, including intervals no value falls in.
    assert h.labels(3) == {"[000, 020)", "[020, 040)", "[040, 060)", "[060, 080)", "[080, 100)", "[100, 120)"}
    assert "[115, 120)" in h.labels(1)


def test_intervals_origin_and_fractions():
    h = Hierarchy.intervals([3, 12.5], widths=[5, 10], origin=2)
    assert h.rows == [("3", "[02, 07)", "[02, 12)", "*"), ("12.5", "[12, 17)", "[12, 22)", "*")]
    h = Hierarchy.intervals([0.25, 0.75], widths=[0.5, 1])
    assert h.rows == [("0.25", "[0.0, 0.5)", "[0.0, 1.0)", "*"), ("0.75", "[0.5, 1.0)", "[0.0, 1.0)", "*")]


def test_intervals_of_decimal_widths_place_values_at_their_cut():
    """Float noise: 3 * 0.1 is 0.30000000000000004 and 0.7 / 0.1 is 6.999…; the cuts are the decimals meant."""
    h = Hierarchy.intervals([0.3, 0.55, 0.7], widths=[0.1, 0.2])
    assert h.cuts == [[0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], [0.2, 0.4, 0.6, 0.8]]
    assert h.rows == [("0.3", "[0.3, 0.4)", "[0.2, 0.4)", "*"), ("0.55", "[0.5, 0.6)", "[0.4, 0.6)", "*"),
                      ("0.7", "[0.7, 0.8)", "[0.6, 0.8)", "*")]


def test_intervals_negative_values():
    h = Hierarchy.intervals([-7, 3], widths=[5, 10])
    # A sign place: negatives sort before the others (among themselves by magnitude; the bound columns sort them).
    assert h.rows == [("-7", "[-10, -05)", "[-10, 000)", "*"), ("3", "[000, 005)", "[000, 010)", "*")]


def test_intervals_with_cut_points():
    h = Hierarchy.intervals([17, 47, 64, 65, 89], cuts=[[0, 18, 30, 65, 120], [0, 30, 120]])
    assert h.rows == [
        ("17", "[000, 018)", "[000, 030)", "*"),
        ("47", "[030, 065)", "[030, 120)", "*"),
        ("64", "[030, 065)", "[030, 120)", "*"),
        ("65", "[065, 120)", "[030, 120)", "*"),
        ("89", "[065, 120)", "[030, 120)", "*"),
    ]
    assert h.labels(1) == {"[000, 018)", "[018, 030)", "[030, 065)", "[065, 120)"}


def test_intervals_ignore_missing_values_and_duplicates():
    h = Hierarchy.intervals([5, None, float("nan"), 5, 5.0], widths=[10])
    assert h.rows == [("5", "[00, 10)", "*")]


def test_intervals_non_nesting_widths():
    with pytest.raises(HierarchyError, match=r"'age'.*12 is not a multiple of 5"):
        Hierarchy.intervals([1, 2], widths=[5, 12], name="age")
    with pytest.raises(HierarchyError, match=r"5 is not a multiple of 10"):
        Hierarchy.intervals([1, 2], widths=[10, 5])


def test_intervals_non_nesting_cuts():
    with pytest.raises(HierarchyError, match=r"'h'.*level 2's cut points \[15\.0\].*do not nest"):
        Hierarchy.intervals([1, 2], cuts=[[0, 10, 20], [0, 15, 20]], name="h")


def test_intervals_values_outside_cut_points():
    with pytest.raises(HierarchyError) as info:
        Hierarchy.intervals([5, 25, -1, 19.5], cuts=[[0, 10, 20]], name="ages")
    message = str(info.value)
    assert "'ages'" in message and "[0, 20)" in message
    listed = message.rsplit(": ", 1)[1]
    assert sorted(float(v) for v in listed.split(", ")) == [-1, 25]  # the offending values, and only those


@pytest.mark.parametrize("kwargs, fragment", [
    ({}, "either widths or cuts"),
    ({"widths": [5], "cuts": [[0, 10]]}, "either widths or cuts"),
    ({"widths": [0]}, "positive"),
    ({"widths": [-5]}, "positive"),
    ({"widths": []}, "at least one level"),
    ({"cuts": []}, "at least one level"),
    ({"cuts": [[0]]}, "at least two cut points"),
])
def test_intervals_bad_parameters(kwargs, fragment):
    with pytest.raises(HierarchyError, match=re.escape(fragment)):
        Hierarchy.intervals([1, 2], name="h", **kwargs)


def test_intervals_without_values():
    with pytest.raises(HierarchyError, match="'h' is empty"):
        Hierarchy.intervals([None], widths=[5], name="h")


def test_redaction():
    """One top level: the fully masked ``*****`` would be a second root above ``4****`` (issue 12)."""
    h = Hierarchy.redaction([47677], name="zip")
    assert h.rows == [("47677", "4767*", "476**", "47***", "4****", "*")]


def test_redaction_mixed_lengths():
    h = Hierarchy.redaction([47677, "123", 47677.0, None, "81"])
    assert h.rows == [
        ("123", "12*", "1**", "***", "***", "*"),
        ("47677", "4767*", "476**", "47***", "4****", "*"),
        ("81", "8*", "**", "**", "**", "*"),
    ]


def test_redaction_custom_mask_and_empty():
    assert Hierarchy.redaction(["ab"], mask="#").rows == [("ab", "a#", "*")]
    assert Hierarchy.redaction(["7"]).rows == [("7", "*")]
    with pytest.raises(HierarchyError, match="'z' is empty"):
        Hierarchy.redaction([None], name="z")


def test_dates():
    h = Hierarchy.dates(["2020-03-15", dt.date(2019, 12, 31), pd.Timestamp("2020-03-15"), None,
                         dt.datetime(2031, 1, 2, 13, 0)])
    assert h.rows == [
        ("2019-12-31", "2019-12", "2019", "2010-2019", "*"),
        ("2020-03-15", "2020-03", "2020", "2020-2029", "*"),
        ("2031-01-02", "2031-01", "2031", "2030-2039", "*"),
    ]
    with pytest.raises(HierarchyError, match="'d' is empty"):
        Hierarchy.dates([], name="d")


EDUCATION_ORDER = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad"]


def test_ordered_groups_education():
    h = Hierarchy.ordered_groups(EDUCATION_ORDER, sizes=[2, 2], name="education")
    p1, p2 = "Preschool..1st-4th", "5th-6th..7th-8th"
    s1, s2 = "9th..10th", "11th..12th"
    assert h.rows == [
        ("Preschool", p1, "Preschool..7th-8th", "*"),
        ("1st-4th", p1, "Preschool..7th-8th", "*"),
        ("5th-6th", p2, "Preschool..7th-8th", "*"),
        ("7th-8th", p2, "Preschool..7th-8th", "*"),
        ("9th", s1, "9th..12th", "*"),
        ("10th", s1, "9th..12th", "*"),
        ("11th", s2, "9th..12th", "*"),
        ("12th", s2, "9th..12th", "*"),
        ("HS-grad", "HS-grad", "HS-grad", "*"),
    ]


def test_ordered_groups_errors():
    with pytest.raises(HierarchyError, match=r"'e': categories listed twice: '9th'"):
        Hierarchy.ordered_groups(["9th", "10th", "9th"], sizes=[2], name="e")
    with pytest.raises(HierarchyError, match="at least 2"):
        Hierarchy.ordered_groups(["a", "b"], sizes=[1])
    with pytest.raises(HierarchyError, match="at least 2"):
        Hierarchy.ordered_groups(["a", "b"], sizes=[])
    with pytest.raises(HierarchyError, match="'e' is empty"):
        Hierarchy.ordered_groups([], sizes=[2], name="e")


def test_from_frame():
    frame = pd.DataFrame({"v": ["Berlin", "Paris", None], "country": ["DE", "FR", "unknown"], "top": ["*"] * 3})
    h = Hierarchy.from_frame(frame, name="city")
    assert h.rows == [("Berlin", "DE", "*"), ("Paris", "FR", "*"), (None, "unknown", "*")]
    assert h.name == "city"
    pd.testing.assert_frame_equal(h.to_frame(), pd.DataFrame(
        {"level_0": ["Berlin", "Paris", None], "level_1": ["DE", "FR", "unknown"], "level_2": ["*"] * 3},
        dtype=object))


def test_from_frame_numbers_and_nullable_dtypes():
    floats = pd.DataFrame({"v": [1.0, 2.5, float("nan")], "p": ["low", "low", "none"]})
    assert Hierarchy.from_frame(floats).rows == [("1", "low"), ("2.5", "low"), (None, "none")]
    nullable = pd.DataFrame({"v": pd.array([1, None], dtype="Int64"),
                             "p": pd.array(["low", "none"], dtype="string")})
    assert Hierarchy.from_frame(nullable).rows == [("1", "low"), (None, "none")]
    strings = pd.DataFrame({"v": pd.array(["x", None], dtype="string"), "p": ["a", "b"]})
    assert Hierarchy.from_frame(strings).rows == [("x", "a"), (None, "b")]


def test_from_mapping_and_from_lists():
    h = Hierarchy.from_mapping({47677: ["4767*", "*"], 47678: ["4767*", "*"], None: ["?", "*"]}, name="zip")
    assert h.rows == [("47677", "4767*", "*"), ("47678", "4767*", "*"), (None, "?", "*")]
    assert h == Hierarchy.from_lists([["47677", "4767*", "*"], ["47678", "4767*", "*"], [None, "?", "*"]])
    assert h.values == ["47677", "47678", None]
    assert h.leaves_under(1) == {"4767*": 2, "?": 1}
    assert h.labels(1) == {"4767*", "?"}


# =============================================================================================== validation


def test_empty_hierarchy():
    with pytest.raises(HierarchyError, match="hierarchy 'nothing' is empty"):
        Hierarchy([], name="nothing")
    with pytest.raises(HierarchyError, match="hierarchy 'blank' is empty"):
        Hierarchy.from_arx_csv(io.StringIO("\n\n"), name="blank")


def test_rows_without_values():
    with pytest.raises(HierarchyError, match="'h' has rows with no values"):
        Hierarchy([[], []], name="h")


def test_rows_of_unequal_length():
    with pytest.raises(HierarchyError) as info:
        Hierarchy([["a", "x", "*"], ["b", "*"], ["c", "x", "*"]], name="uneven")
    message = str(info.value)
    assert "'uneven'" in message and "unequal length" in message
    assert "'b'" in message and "'a'" not in message and "'c'" not in message


def test_value_listed_twice():
    with pytest.raises(HierarchyError, match=r"hierarchy 'twice' lists these values more than once: 'a'"):
        Hierarchy([["a", "x", "*"], ["b", "x", "*"], ["a", "x", "*"]], name="twice")
    with pytest.raises(HierarchyError, match=r"more than once: None"):
        Hierarchy.from_arx_csv(io.StringIO("NULL;?;*\nNULL;?;*\n"), name="nulls")


def test_value_with_two_parents():
    # a;x;* and b;x;* agree; b;x;y gives the level-1 value x a second parent on level 2.
    Hierarchy([["a", "x", "*"], ["b", "x", "*"]], name="fine")
    with pytest.raises(HierarchyError) as info:
        Hierarchy.from_arx_csv(io.StringIO("a;x;*\nb;x;y\n"), name="conflict")
    message = str(info.value)
    assert "'conflict'" in message
    assert "'x'" in message and "level 1" in message and "level 2" in message
    assert "'*'" in message and "'y'" in message


def test_two_parents_on_first_level_is_reported_as_a_duplicate():
    with pytest.raises(HierarchyError, match="'a'"):
        Hierarchy([["a", "x"], ["a", "y"]], name="h")


def test_check_level():
    h = Hierarchy([["a", "*"]])
    h.check_level(0, "col")
    h.check_level(1, "col")
    for bad in (2, -1, "1", 1.0):
        with pytest.raises(HierarchyError, match=r"'col' is outside its hierarchy's levels 0\.\.1"):
            h.check_level(bad, "col")


# =============================================================================================== coverage


def make_cities(con, name="people", column="city"):
    con.execute(f"CREATE TABLE {q(name)} (id INTEGER, {q(column)} VARCHAR)")
    con.executemany(f"INSERT INTO {q(name)} VALUES (?, ?)",
                    [(1, "Berlin"), (2, "Bonn"), (3, None), (4, None), (5, "Paris"), (6, "Lyon")])


CITY_ROWS = [["Berlin", "DE", "*"], ["Bonn", "DE", "*"], ["Paris", "FR", "*"], ["Lyon", "FR", "*"]]


def test_uncovered_value_fails_check_and_publish(anon, con, tmp_path):
    make_cities(con)
    con.execute("INSERT INTO people VALUES (7, 'Madrid'), (8, 'Madrid'), (9, 'Zürich')")
    before = con.execute("SELECT * FROM people ORDER BY id").fetchall()
    tables_before = all_tables(con)
    policy = Policy({"city": Hierarchy(CITY_ROWS, name="city")}, [KAnonymity(2)], insensitive=["id"])
    with pytest.raises(HierarchyError) as info:
        anon.check("people", policy, levels={"city": 1})
    message = str(info.value)
    assert "'city'" in message and "'Madrid'" in message and "'Zürich'" in message and "2 of its values" in message
    target = tmp_path / "release.duckdb"
    with pytest.raises(HierarchyError, match="'Madrid'"):
        anon.publish("people", policy, {"city": 1}, target)
    assert not target.exists()
    assert os.listdir(tmp_path) == []
    assert con.execute("SELECT * FROM people ORDER BY id").fetchall() == before
    # Only the (inline) hierarchy table may have been added.
    assert all_tables(con) - tables_before <= {("anon", "hierarchy_city")}


def test_uncovered_number_fails_for_interval_hierarchy(anon, con, tmp_path):
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (1, 5), (2, 15), (3, 25), (4, NULL)) v(id, age)")
    policy = Policy({"age": Hierarchy.intervals([5, 15], cuts=[[0, 10, 20]])}, [KAnonymity(1)], insensitive=["id"])
    with pytest.raises(HierarchyError, match=r"'age' does not cover 1 of its values: 25"):
        anon.check("t", policy, levels={"age": 1})
    with pytest.raises(HierarchyError, match="'age'"):
        anon.publish("t", policy, {"age": 1}, tmp_path / "r.duckdb")
    assert not (tmp_path / "r.duckdb").exists()
    assert con.execute("SELECT count(*), count(age) FROM t").fetchone() == (4, 3)


def test_stored_hierarchy_that_misses_a_value(anon, con):
    make_cities(con)
    anon.add_hierarchy("de", Hierarchy([["Berlin", "DE", "*"], ["Bonn", "DE", "*"]]))
    policy = Policy({"city": "de"}, [KAnonymity(1)], insensitive=["id"])
    with pytest.raises(HierarchyError, match=r"'city' does not cover 2 of its values: 'Lyon', 'Paris'"):
        anon.check("people", policy, levels={"city": 0})


# =============================================================================================== NULL semantics


def read_release(path: Path) -> pd.DataFrame:
    reader = duckdb.connect(str(path), read_only=True)
    try:
        return reader.execute("SELECT * FROM release ORDER BY id").df()
    finally:
        reader.close()


def expected_release(mapping: dict, level: int) -> pd.DataFrame:
    ids = [1, 2, 3, 4, 5, 6]
    raw = ["Berlin", "Bonn", None, None, "Paris", "Lyon"]
    # Without a NULL row in the mapping a missing value stays missing; otherwise everything maps by its row.
    city = [None if v is None and None not in mapping else mapping[v][level] for v in raw]
    return pd.DataFrame({"id": pd.Series(ids, dtype="int32"), "city": pd.Series(city, dtype=object)})


def assert_release_equal(actual: pd.DataFrame, expected: pd.DataFrame) -> None:
    assert list(actual.columns) == ["id", "city"]
    normalized = pd.DataFrame({"id": actual["id"],
                               "city": pd.Series([None if pd.isna(v) else v for v in actual["city"]], dtype=object)})
    pd.testing.assert_frame_equal(normalized, expected)


@pytest.mark.parametrize("level", [0, 1, 2])
def test_null_without_null_row_stays_null_and_forms_its_own_class(anon, con, tmp_path, level):
    make_cities(con)
    h = Hierarchy(CITY_ROWS, name="city")
    policy = Policy({"city": h}, [KAnonymity(2)], insensitive=["id"])
    report = anon.check("people", policy, levels={"city": level})
    # level 0: Berlin, Bonn, Paris, Lyon are singletons, NULL a pair; level 1: DE, FR, NULL; level 2: *, NULL.
    assert (report.classes, report.smallest_class, report.violating_records) == {
        0: (5, 1, 4), 1: (3, 2, 0), 2: (2, 2, 0)}[level]
    if level == 0:
        return
    release = anon.publish("people", policy, {"city": level}, tmp_path / "r.duckdb")
    assert release.suppressed == 0
    mapping = {r[0]: r for r in CITY_ROWS}
    assert_release_equal(read_release(tmp_path / "r.duckdb"), expected_release(mapping, level))


@pytest.mark.parametrize("source", ["arx", "lists"])
@pytest.mark.parametrize("level", [1, 2])
def test_null_row_generalizes_missing_values(anon, con, tmp_path, source, level):
    make_cities(con)
    if source == "arx":
        h = Hierarchy.from_arx_csv(io.StringIO("Berlin;DE;*\nBonn;DE;*\nParis;FR;*\nLyon;FR;*\nNULL;unknown;*\n"))
    else:
        h = Hierarchy.from_lists(CITY_ROWS + [[None, "unknown", "*"]])
    policy = Policy({"city": h}, [KAnonymity(2)], insensitive=["id"])
    report = anon.check("people", policy, levels={"city": level})
    assert (report.classes, report.smallest_class) == {1: (3, 2), 2: (1, 6)}[level]
    anon.publish("people", policy, {"city": level}, tmp_path / "r.duckdb")
    mapping = {r[0]: r for r in CITY_ROWS} | {None: [None, "unknown", "*"]}
    expected = expected_release(mapping, level)
    assert expected["city"].isna().sum() == 0
    assert_release_equal(read_release(tmp_path / "r.duckdb"), expected)


def test_null_row_keeps_null_at_level_zero(anon, con):
    make_cities(con)
    h = Hierarchy.from_lists(CITY_ROWS + [[None, "unknown", "*"]])
    bound = BoundHierarchy("city", h, h.store(con, "hierarchy_city"))
    query = generalize(sb.table("people"), ["id", "city"], {"city": bound}, {"city": 0})
    rows = sorted(as_engine(con).rows(query))
    assert rows == [(1, "Berlin"), (2, "Bonn"), (3, None), (4, None), (5, "Paris"), (6, "Lyon")]


# =============================================================================================== CASE vs join


def hand_interval_rows(values):
    def interval(v, w):
        lo = v // w * w
        return f"[{lo:03d}, {lo + w:03d})"  # the interval hierarchy's cuts reach 100: three digits
    return [[str(v), interval(v, 5), interval(v, 10), interval(v, 20), "*"] for v in values]


def test_interval_case_and_join_give_the_same_values(con):
    con.execute("CREATE TABLE nums AS SELECT range::INTEGER AS v FROM range(0, 100) UNION ALL SELECT NULL")
    # Built from three values only: the CASE must still generalize the other 97 (all inside [0, 100)).
    interval = Hierarchy.intervals([3, 47, 99], widths=[5, 10, 20], name="iv")
    assert interval.cuts[-1] == [0, 20, 40, 60, 80, 100]
    plain = Hierarchy(hand_interval_rows(range(100)), name="plain")
    bound_interval = BoundHierarchy("v", interval, interval.store(con, "hierarchy_iv"))
    bound_plain = BoundHierarchy("v", plain, plain.store(con, "hierarchy_plain"))
    expected = {v: r for v, r in zip(range(100), hand_interval_rows(range(100)))}
    for level in range(5):
        case_query = generalize(sb.table("nums"), ["v"], {"v": bound_interval}, {"v": level})
        join_query = generalize(sb.table("nums"), ["v"], {"v": bound_plain}, {"v": level})
        if level > 0:
            assert "JOIN" not in sb.to_sql(case_query).upper()
        assert "JOIN" in sb.to_sql(join_query).upper() or level == 0
        case_rows = sorted(as_engine(con).rows(with_original(case_query)), key=repr)
        join_rows = sorted(as_engine(con).rows(with_original(join_query)), key=repr)
        assert case_rows == join_rows
        assert case_rows == sorted([(expected[v][level], v) for v in range(100)] + [(None, None)], key=repr)


def with_original(query):
    """The generalized query plus the original value, to compare value by value."""
    return query.select(sb.col("v", "src").as_("original", quoted=True))


def test_interval_generalization_of_unseen_values_via_publish(anon, con, tmp_path):
    con.execute("CREATE TABLE t (id INTEGER, age INTEGER)")
    ages = [18, 19, 23, 24, 36, 38, 41, 44]
    con.executemany("INSERT INTO t VALUES (?, ?)", list(enumerate(ages)))
    h = Hierarchy.intervals([10, 40], widths=[5, 10, 20])  # range [0, 60): every age is inside
    policy = Policy({"age": h}, [KAnonymity(2)], insensitive=["id"])
    anon.publish("t", policy, {"age": 1}, tmp_path / "r.duckdb")
    reader = duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True)
    got = reader.execute("SELECT id, age FROM release ORDER BY id").fetchall()
    reader.close()
    assert got == [(0, "[15, 20)"), (1, "[15, 20)"), (2, "[20, 25)"), (3, "[20, 25)"), (4, "[35, 40)"),
                   (5, "[35, 40)"), (6, "[40, 45)"), (7, "[40, 45)")]


# =============================================================================================== hostile names


HOSTILE = 'Straße "x"; DROP TABLE t; --'
HOSTILE_NAMES = [HOSTILE, "O'Brien; DELETE FROM t", "two words ü", 'a"."b']


@pytest.mark.parametrize("name", HOSTILE_NAMES)
def test_hostile_hierarchy_and_column_names(anon, con, tmp_path, name):
    con.execute("CREATE TABLE t (x INTEGER)")
    con.execute("INSERT INTO t VALUES (1)")
    make_cities(con, name="people", column=name)
    h = Hierarchy.from_lists(CITY_ROWS + [[None, "Ünknown; DROP TABLE t; --", "*"]], name=name)
    assert anon.add_hierarchy(name, h) == name
    tables = all_tables(con)
    assert {("main", "t"), ("main", "people"), ("anon", f"hierarchy_{name}")} <= tables
    assert anon.hierarchy(name) == h
    policy = Policy({name: name}, [KAnonymity(2)], insensitive=["id"])
    assert anon.check("people", policy, levels={name: 1}).classes == 3
    target = tmp_path / "r.duckdb"
    anon.publish("people", policy, {name: 1}, target)
    reader = duckdb.connect(str(target), read_only=True)
    got = reader.execute(f"SELECT id, {q(name)} FROM release ORDER BY id").fetchall()
    reader.close()
    assert got == [(1, "DE"), (2, "DE"), (3, "Ünknown; DROP TABLE t; --"), (4, "Ünknown; DROP TABLE t; --"),
                   (5, "FR"), (6, "FR")]
    # An inline hierarchy is stored under the column's name.
    inline = Policy({name: Hierarchy(CITY_ROWS)}, [KAnonymity(2)], insensitive=["id"])
    anon.check("people", inline, levels={name: 2})
    assert all_tables(con) >= tables
    assert con.execute("SELECT * FROM t").fetchall() == [(1,)]
    assert con.execute("SELECT count(*) FROM people").fetchone() == (6,)


def test_hostile_interval_hierarchy_name(con):
    con.execute("CREATE TABLE t AS SELECT 1 AS x")
    h = Hierarchy.intervals([1, 7], widths=[5], name=HOSTILE)
    h.store(con, HOSTILE, schema="my schema; --")
    assert Hierarchy.from_table(con, HOSTILE, schema="my schema; --") == h
    assert ("main", "t") in all_tables(con)
    with pytest.raises(HierarchyError, match=re.escape(repr(HOSTILE))):
        Hierarchy.intervals([1, 7], widths=[5, 7], name=HOSTILE)


# =============================================================================================== hypothesis


LABEL = re.compile(r"^\[(-?\d+), (-?\d+)\)$")


def hand_label(lo: int, hi: int, cuts: list[float]) -> str:
    """An interval's label by hand: every number of the hierarchy with as many digits as its widest cut, and a sign
    place (``-`` or ``0``) when a cut is negative."""
    digits, signed = max(len(str(abs(int(c)))) for c in cuts), min(cuts) < 0

    def number(n: int) -> str:
        return ("-" if n < 0 else "0" if signed else "") + str(abs(n)).zfill(digits)

    return f"[{number(lo)}, {number(hi)})"


@st.composite
def nested_widths(draw):
    widths = [draw(st.integers(1, 10))]
    for _ in range(draw(st.integers(0, 3))):
        widths.append(widths[-1] * draw(st.integers(1, 4)))
    return widths


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(widths=nested_widths(), values=st.lists(st.integers(-1000, 1000), min_size=1, max_size=30),
       origin=st.integers(-20, 20))
def test_random_intervals_contain_their_value_and_nest(widths, values, origin):
    h = Hierarchy.intervals(values, widths=widths, origin=origin)
    assert h.levels == len(widths) + 2
    assert [r[0] for r in h.rows] == [str(v) for v in sorted(set(values))]
    for row in h.rows:
        v = int(row[0])
        assert row[-1] == "*"
        previous = None
        for width, label in zip(widths, row[1:-1]):
            match = LABEL.match(label)
            assert match, label
            lo, hi = int(match.group(1)), int(match.group(2))
            assert lo <= v < hi
            assert hi - lo == width
            assert (lo - origin) % width == 0
            if previous is not None:
                assert lo <= previous[0] and previous[1] <= hi
            previous = (lo, hi)
    for level in range(1, len(widths) + 1):
        labels = sorted(h.labels(level), key=lambda label: int(LABEL.match(label).group(1)))
        assert len({len(label) for label in labels}) == 1  # written alike
        if min(v for level_cuts in h.cuts for v in level_cuts) >= 0:
            assert sorted(labels) == labels  # text order is numeric order


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(widths=nested_widths(), seen=st.lists(st.integers(-80, 80), min_size=1, max_size=10),
       fresh=st.lists(st.integers(-150, 150), max_size=10))
def test_random_interval_case_matches_hand_labels(widths, seen, fresh):
    h = Hierarchy.intervals(seen, widths=widths)
    low, high = h.cuts[-1][0], h.cuts[-1][-1]
    inside = sorted({v for v in seen + fresh if low <= v < high})
    connection = duckdb.connect()
    try:
        connection.execute("CREATE TABLE n (v INTEGER)")
        connection.executemany("INSERT INTO n VALUES (?)", [(v,) for v in inside])
        bound = BoundHierarchy("v", h, sb.table("unused_by_the_case_path"))
        for level, width in enumerate(widths, start=1):
            query = generalize(sb.table("n"), ["v"], {"v": bound}, {"v": level})
            query = query.select(sb.col("v", "src").as_("original", quoted=True))
            got = dict((o, g) for g, o in as_engine(connection).rows(query))
            cuts = [c for level_cuts in h.cuts for c in level_cuts]
            assert got == {v: hand_label(v // width * width, v // width * width + width, cuts) for v in inside}
    finally:
        connection.close()
