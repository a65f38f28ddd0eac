"""The SQL-first workflow's parts: hierarchies built by the shell macros of sql/duckanon.sql, the catalog of
sql/duckanon_catalog.sql, and policies declared in SQL.

Every SQL-built hierarchy is compared with the Python builder's table for the same values (Hierarchy.intervals,
redaction, dates, ordered_groups), through the real `duckdb` 1.5 shell binary and through the Python duckdb package;
policies declared in SQL must read back (Anonymizer.policy) as the Policy object built in Python, with the rows
Anonymizer.save_policy writes.
"""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
from pathlib import Path

import duckdb
import pandas as pd
import pytest
from test_sql_macros import DUCKDB_SHELL, MACROS, parse_json_results, sql_list, sql_str

import duckanon
from duckanon import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    DateShift,
    DeltaPresence,
    DistinctLDiversity,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    KMap,
    Mask,
    Policy,
    PSensitiveKAnonymity,
    Pseudonymize,
    RecursiveCLDiversity,
    TCloseness,
)
from duckanon.declare.catalog import POLICY_TABLES
from duckanon.errors import PolicyError
from duckanon.privacy.registry import MODELS, model_from_params
from duckanon.recode.protect import method_from_params

CATALOG = MACROS.with_name("duckanon_catalog.sql")

needs_shell = pytest.mark.skipif(DUCKDB_SHELL is None, reason="the `duckdb` shell binary is not on PATH")

# The data every builder reads: NULLs are skipped, as the Python builders skip them.
AGES = [30, 31, None, 47, 47, 18, 64, 35, 29, 52]
SCORES = [0.5, 2.5, 7.25, 12.75, None, 2.5, 9.0, 0.0, 4.75, 11.5]
ZIPS = ["47677", "4767", "10115", None, "47678", "476", "10115", "47677", "99", "4767"]
DATES = ["2020-03-01", "1999-12-31", "2019-07-15", None, "2021-01-01", "2020-03-02", "1990-01-01", "2020-03-01",
         "2009-12-31", "2010-01-01"]
EDUCATION = ["Preschool", "1st-4th", "5th-6th", "7th-8th", "9th", "10th", "11th", "12th", "HS-grad"]


def _literal(value, kind: str) -> str:
    if value is None:
        return f"CAST(NULL AS {kind})"
    return f"CAST({sql_str(str(value))} AS {kind})"


SETUP = ("CREATE TABLE people AS SELECT * FROM (VALUES "
         + ", ".join(f"({_literal(a, 'INTEGER')}, {_literal(s, 'DOUBLE')}, {_literal(z, 'VARCHAR')}, "
                     f"{_literal(d, 'DATE')})" for a, s, z, d in zip(AGES, SCORES, ZIPS, DATES))
         + ') v("Age", score, zip, visit)')


def shell(db: Path | None, script: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a script through the shell binary (stdin, -bail: it stops at the first error)."""
    args = [DUCKDB_SHELL, "-json", "-bail"] + ([str(db)] if db is not None else [])
    return subprocess.run(args, input=script, capture_output=True, text=True, cwd=cwd, timeout=120)


def shell_rows(db: Path, query: str, cwd: Path) -> tuple[list[str], list[tuple]]:
    proc = shell(db, f".read '{MACROS}'\n{query};\n", cwd)
    assert proc.returncode == 0, proc.stderr
    [rows] = parse_json_results(proc.stdout) or [[]]
    columns = list(rows[0]) if rows else []
    return columns, [tuple(r.values()) for r in rows]


def py_rows(con: duckdb.DuckDBPyConnection, query: str) -> tuple[list[str], list[tuple]]:
    cursor = con.execute(query)
    return [d[0] for d in cursor.description], cursor.fetchall()


def macro_connection() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute(MACROS.read_text(encoding="utf-8"))
    return con


@pytest.fixture(scope="module")
def shell_db(tmp_path_factory) -> Path:
    db = tmp_path_factory.mktemp("shell") / "people.duckdb"
    if DUCKDB_SHELL is not None:
        proc = shell(db, SETUP + ";\n", db.parent)
        assert proc.returncode == 0, proc.stderr
    return db


@pytest.fixture(scope="module")
def pycon():
    con = macro_connection()
    con.execute(SETUP)
    yield con
    con.close()


@pytest.fixture(params=["shell", "python"])
def rows(request, shell_db, pycon):
    """rows(query) -> (column names, rows as tuples), from the shell binary or from Python duckdb."""
    if request.param == "shell":
        if DUCKDB_SHELL is None:
            pytest.skip("the `duckdb` shell binary is not on PATH")
        return lambda q: shell_rows(shell_db, q, shell_db.parent)
    return lambda q: py_rows(pycon, q)


def assert_table_is(got: tuple[list[str], list[tuple]], hierarchy: Hierarchy) -> None:
    """The hierarchy table as duckanon stores it: level_0..level_h, the builder's rows in its order."""
    columns, table = got
    assert columns == list(hierarchy.to_frame().columns)
    assert table == hierarchy.rows


# ---------------------------------------------------------------------------------------
# Builders: the SQL table equals the Python builder's for the same values
# ---------------------------------------------------------------------------------------

INTERVAL_CASES = [
    ("'Age'", [5, 10, 20], None),
    ("'age'", [10], None),
    ("'AGE'", [5, 15], 3),            # counted from an origin
    ("'age'", [1, 2, 4, 8, 16], -1),
]


@pytest.mark.parametrize("column,widths,origin", INTERVAL_CASES)
def test_intervals_equal_python(rows, column, widths, origin):
    extra = "" if origin is None else f", {origin}"
    got = rows(f"SELECT * FROM anon_hierarchy_intervals('people', {column}, {widths}{extra})")
    assert_table_is(got, Hierarchy.intervals([a for a in AGES if a is not None], widths=widths, origin=origin or 0))


def test_intervals_of_fractional_numbers_equal_python(rows):
    got = rows("SELECT * FROM anon_hierarchy_intervals('people', 'score', [2.5, 5])")
    # Whole DOUBLEs keep their text as DuckDB writes it ('9.0'): that is how data values are matched (level_0 is
    # CAST(value AS VARCHAR)); the Python builder writes '9'. Every other cell is the Python builder's.
    python = Hierarchy.intervals([s for s in SCORES if s is not None], widths=[2.5, 5])
    assert_table_is(got, Hierarchy([(str(float(r[0])) if float(r[0]).is_integer() else r[0], *r[1:])
                                    for r in python.rows]))


@pytest.mark.parametrize("bottom,top", [(20, 70), ("NULL", 65), (18, "NULL"), (17.5, 80.5)])
def test_top_bottom_coding_equals_python(rows, bottom, top):
    got = rows(f"SELECT * FROM anon_hierarchy_top_bottom('people', 'age', {bottom}, {top})")
    python = Hierarchy.top_bottom([a for a in AGES if a is not None], bottom=None if bottom == "NULL" else bottom,
                                  top=None if top == "NULL" else top)
    assert_table_is(got, python)
    # Written out: below the bottom code, above the top code, and kept between.
    low, high = (-1e9 if bottom == "NULL" else bottom), (1e9 if top == "NULL" else top)
    for leaf, coded, root in got[1]:
        value = float(leaf)
        assert root == "*"
        assert coded == (f"< {bottom}" if value < low else f"> {top}" if value > high else leaf)


@pytest.mark.parametrize("height", [5, 3, 1])
def test_redaction(rows, height):
    got = rows(f"SELECT * FROM anon_hierarchy_redaction('people', 'zip', {height})")
    values = sorted({z for z in ZIPS if z is not None})
    if height == max(len(z) for z in values):
        assert_table_is(got, Hierarchy.redaction(ZIPS))
    # Written out: level i masks the last i characters, level `height` is '*'.
    expected = [tuple([z] + [z[:max(len(z) - i, 0)] + "*" * min(i, len(z)) for i in range(1, height)] + ["*"])
                for z in values]
    assert got[1] == expected


def test_redaction_of_the_longest_values_length_is_python_s(rows):
    assert_table_is(rows("SELECT * FROM anon_hierarchy_redaction('people', 'zip', 5)"), Hierarchy.redaction(ZIPS))
    assert_table_is(rows("SELECT * FROM anon_hierarchy_redaction('people', 'zip', 5, '#')"),
                    Hierarchy.redaction(ZIPS, mask="#"))
    # Numbers are redacted as their text.
    assert_table_is(rows("SELECT * FROM anon_hierarchy_redaction('people', 'age', 2)"), Hierarchy.redaction(AGES))


def test_redaction_has_one_top_level(rows):
    _columns, table = rows("SELECT * FROM anon_hierarchy_redaction('people', 'zip', 5)")
    assert {r[-1] for r in table} == {"*"}
    assert all(r[-2] != "*" * len(r[0]) or len(r[0]) < 5 for r in table)  # no fully masked level under '*'
    assert [r for r in table if r[0] == "47677"] == [("47677", "4767*", "476**", "47***", "4****", "*")]


def test_dates_equal_python(rows):
    assert_table_is(rows("SELECT * FROM anon_hierarchy_dates('people', 'visit')"), Hierarchy.dates(DATES))
    _columns, table = rows("SELECT * FROM anon_hierarchy_dates('people', 'visit')")
    assert ("2009-12-31", "2009-12", "2009", "2000-2009", "*") in table  # written out


def test_dates_of_timestamps_keep_the_timestamp_as_leaf(rows):
    got = rows("CREATE OR REPLACE TEMP TABLE stamps AS SELECT CAST(visit AS TIMESTAMP) + INTERVAL 90 MINUTE AS at "
               "FROM people; SELECT * FROM anon_hierarchy_dates('stamps', 'at')")
    python = Hierarchy.dates(DATES)
    assert_table_is(got, Hierarchy([(f"{r[0]} 01:30:00", *r[1:]) for r in python.rows]))


@pytest.mark.parametrize("sizes", [[2], [2, 2], [3, 3], [4]])
def test_ordered_groups_equal_python(rows, sizes):
    got = rows(f"SELECT * FROM anon_hierarchy_ordered_groups({sql_list(EDUCATION)}, {sizes})")
    assert_table_is(got, Hierarchy.ordered_groups(EDUCATION, sizes=sizes))


def test_ordered_groups_written_out(rows):
    _columns, table = rows("SELECT * FROM anon_hierarchy_ordered_groups(['a', 'b', 'c', 'd', 'e'], [2, 2])")
    assert table == [("a", "a..b", "a..d", "*"), ("b", "a..b", "a..d", "*"), ("c", "c..d", "a..d", "*"),
                     ("d", "c..d", "a..d", "*"), ("e", "e", "e", "*")]


BUILDER_ERRORS = [
    ("anon_hierarchy_intervals('people', 'age', [10, 15])", "widths must nest"),
    ("anon_hierarchy_intervals('people', 'age', [0, 10])", "interval widths must be positive"),
    ("anon_hierarchy_intervals('people', 'age', [-5])", "interval widths must be positive"),
    ("anon_hierarchy_intervals('people', 'age', CAST([] AS INTEGER[]))", "at least one interval width"),
    ("anon_hierarchy_intervals('people', 'agee', [5])", 'column "agee" not found'),
    ("anon_hierarchy_intervals('peeple', 'age', [5])", "does not exist"),
    ("anon_hierarchy_redaction('people', 'zip', 6)", "height 6 exceeds the longest value's length 5"),
    ("anon_hierarchy_redaction('people', 'zip', 0)", "height must be a whole number of at least 1"),
    ("anon_hierarchy_redaction('people', 'zip', 40)", "exceeds the longest value's length"),
    ("anon_hierarchy_redaction('people', 'zap', 3)", 'column "zap" not found'),
    ("anon_hierarchy_dates('people', 'nope')", 'column "nope" not found'),
    ("anon_hierarchy_top_bottom('people', 'age', 70, 20)", "the bottom code 70 must lie below the top code 20"),
    ("anon_hierarchy_top_bottom('people', 'age', NULL, NULL)", "give a top code, a bottom code, or both"),
    ("anon_hierarchy_ordered_groups(['a', 'b', 'a'], [2])", "categories listed twice or NULL: [a, a]"),
    ("anon_hierarchy_ordered_groups(['a', 'b'], [1])", "group sizes must be whole numbers of at least 2"),
    ("anon_hierarchy_ordered_groups(['a', 'b'], [2.5])", "group sizes must be whole numbers of at least 2"),
]


@pytest.mark.parametrize("call,message", BUILDER_ERRORS)
def test_builder_errors(rows, call, message):
    with pytest.raises((AssertionError, duckdb.Error), match=message.replace("[", r"\[").replace("]", r"\]")):
        rows(f"SELECT * FROM {call}")


def test_at_most_32_levels():
    con = macro_connection()
    con.execute("CREATE TABLE t AS SELECT 5 AS x")
    widths = [2 ** i for i in range(31)]
    with pytest.raises(duckdb.Error, match="at most 32 levels, not 33"):
        con.execute(f"SELECT * FROM anon_hierarchy_intervals('t', 'x', {widths})").fetchall()


# ---------------------------------------------------------------------------------------
# The catalog file and the Anonymizer using SQL-built hierarchies
# ---------------------------------------------------------------------------------------

def _catalog_columns(con) -> list[tuple]:
    return con.execute("SELECT table_name, column_index, column_name, data_type, is_nullable, column_default "
                       "FROM duckdb_columns() WHERE schema_name = 'anon' ORDER BY ALL").fetchall()


def test_catalog_file_creates_the_tables_python_creates():
    by_sql = duckdb.connect()
    by_sql.execute(CATALOG.read_text(encoding="utf-8"))
    by_sql.execute(CATALOG.read_text(encoding="utf-8"))  # reading it again changes nothing
    by_python = duckdb.connect()
    duckanon.connect(by_python)
    assert _catalog_columns(by_sql) == _catalog_columns(by_python)
    assert {(t, c) for t, _i, c, *_ in _catalog_columns(by_sql)} == {
        (t, c) for t, columns in POLICY_TABLES.items() for c in columns}
    duckanon.connect(by_sql)  # the anonymizer accepts the catalog the file made
    assert _catalog_columns(by_sql) == _catalog_columns(by_python)


@needs_shell
def test_catalog_file_in_the_shell_and_macros_on_a_database_without_it(tmp_path):
    db = tmp_path / "c.duckdb"
    proc = shell(db, f".read '{MACROS}'\n.read '{CATALOG}'\n.read '{CATALOG}'\n", tmp_path)
    assert proc.returncode == 0, proc.stderr
    with duckdb.connect(str(db), read_only=True) as con:
        by_python = duckdb.connect()
        duckanon.connect(by_python)
        assert _catalog_columns(con) == _catalog_columns(by_python)
    # The macro file loads on a read-only database with no catalog (policy macros look tables up when used).
    empty = tmp_path / "empty.duckdb"
    assert shell(empty, "CREATE TABLE t(x INT);\n", tmp_path).returncode == 0
    proc = subprocess.run([DUCKDB_SHELL, "-readonly", str(empty), "-c", f".read '{MACROS}'", "-c",
                           "SELECT * FROM anon_policy('p')"], capture_output=True, text=True, cwd=tmp_path)
    assert proc.returncode != 0 and "anon.policies does not exist" in proc.stderr.replace('"', ""), proc.stderr


def _hierarchy_script() -> str:
    return "\n".join([
        f".read '{MACROS}'", f".read '{CATALOG}'",
        "CREATE OR REPLACE TABLE anon.hierarchy_age AS SELECT * FROM anon_hierarchy_intervals('people', 'age', "
        "[5, 10, 20]);",
        "CREATE OR REPLACE TABLE anon.hierarchy_zip AS SELECT * FROM anon_hierarchy_redaction('people', 'zip', 5);",
        "CREATE OR REPLACE TABLE anon.hierarchy_visit AS SELECT * FROM anon_hierarchy_dates('people', 'visit');",
        f"CREATE OR REPLACE TABLE anon.hierarchy_education AS SELECT * FROM anon_hierarchy_ordered_groups("
        f"{sql_list(EDUCATION)}, [3, 3]);", ""])


PYTHON_HIERARCHIES = {
    "age": Hierarchy.intervals([a for a in AGES if a is not None], widths=[5, 10, 20]),
    "zip": Hierarchy.redaction(ZIPS),
    "visit": Hierarchy.dates(DATES),
    "education": Hierarchy.ordered_groups(EDUCATION, sizes=[3, 3]),
}


@pytest.mark.parametrize("engine", ["shell", "python"])
def test_anonymizer_finds_sql_built_hierarchies(tmp_path, engine):
    db = tmp_path / "h.duckdb"
    if engine == "shell":
        if DUCKDB_SHELL is None:
            pytest.skip("no shell")
        proc = shell(db, SETUP + ";\n" + _hierarchy_script(), tmp_path)
        assert proc.returncode == 0, proc.stderr
        con = duckdb.connect(str(db))
    else:
        con = macro_connection()
        con.execute(CATALOG.read_text(encoding="utf-8"))
        con.execute(SETUP)
        for statement in _hierarchy_script().splitlines()[2:]:
            if statement:
                con.execute(statement)
    anon = duckanon.connect(con)
    for name, expected in PYTHON_HIERARCHIES.items():
        assert anon.has_hierarchy(name)
        assert anon.hierarchy(name) == expected, name
    # Used by name in a policy: the check sees the classes pandas computes with the Python hierarchies.
    con.execute("CREATE TABLE patients AS SELECT p.*, ['Preschool', '9th', '12th', 'HS-grad', '5th-6th'][1 + "
                "(row_number() OVER () % 5)::INT] AS education FROM people p WHERE \"Age\" IS NOT NULL")
    patients = con.execute("SELECT * FROM patients").df()
    policy = Policy(quasi_identifiers={"Age": "age", "zip": "zip", "visit": "visit", "education": "education"},
                    models=[KAnonymity(2)], insensitive=["score"], suppression_limit=1.0)
    levels = {"Age": 3, "zip": 4, "visit": 3, "education": 2}
    report = anon.check("patients", policy, levels)
    mapped = pd.DataFrame({
        column: patients[column].map(lambda v, h=PYTHON_HIERARCHIES[name], level=levels[column]: _generalize(
            h, v, level)) for column, name in policy.quasi_identifiers.items()})
    sizes = mapped.groupby(list(mapped.columns), dropna=False).size()
    assert report.records == len(patients)
    assert report.classes == len(sizes)
    assert report.violating_records == int(sizes[sizes < 2].sum())


def _generalize(hierarchy: Hierarchy, value, level: int):
    if value is None or (isinstance(value, float) and pd.isna(value)) or value is pd.NaT:
        return None
    text = value.date().isoformat() if isinstance(value, (pd.Timestamp, dt.datetime)) else str(value)
    return {row[0]: row[level] for row in hierarchy.rows}[text]


# ---------------------------------------------------------------------------------------
# Policies declared in SQL read back as the Policy built in Python
# ---------------------------------------------------------------------------------------

DISEASE_TREE = Hierarchy.from_mapping({"flu": ["respiratory", "*"], "cold": ["respiratory", "*"],
                                       "hiv": ["severe", "*"], "cancer": ["severe", "*"]})

# (name, the Policy built in Python, its declaration in SQL)
POLICY_CASES = [
    ("k_only",
     lambda h: Policy(quasi_identifiers={"age": h["age"], "zip": h["zip"]}, models=[KAnonymity(5)],
                      identifiers=["name"], insensitive=["visits"]),
     ["SELECT * FROM anon_policy('k_only')",
      "SELECT * FROM anon_policy_columns('k_only', MAP {'age': 'age', 'zip': 'zip'}, identifiers := ['name'], "
      "insensitive := ['visits'])",
      "SELECT * FROM anon_policy_models('k_only', [anon_model('k-anonymity', {'k': 5})])"]),
    ("k_map",
     lambda h: Policy(quasi_identifiers={"age": h["age"], "zip": h["zip"]},
                      models=[KMap(5, 100_000), KMap(20, 50_000, 0.05, "poisson")],
                      identifiers=["name"], insensitive=["visits"], suppression_limit=0.1),
     ["SELECT * FROM anon_policy('k_map', suppression_limit := 0.1)",
      "SELECT * FROM anon_policy_columns('k_map', MAP {'age': 'age', 'zip': 'zip'}, identifiers := ['name'], "
      "insensitive := ['visits'])",
      "SELECT * FROM anon_policy_models('k_map', [anon_model('k-map', {'k': 5, 'population_size': 100000}), "
      "anon_model('k-map', {'k': 20, 'population_size': 50000, 'significance': 0.05, 'estimator': 'poisson'})])"]),
    ("presence",
     lambda h: Policy(quasi_identifiers={"age": h["age"], "zip": h["zip"]},
                      models=[DeltaPresence(0.05, 0.2, "voters", arx_size_first=True),
                              KMap(10, population="voters")],
                      identifiers=["name"], insensitive=["visits"], suppression="replace-unchecked"),
     ["SELECT * FROM anon_policy('presence', suppression := 'replace-unchecked')",
      "SELECT * FROM anon_policy_columns('presence', MAP {'age': 'age', 'zip': 'zip'}, identifiers := ['name'], "
      "insensitive := ['visits'])",
      "SELECT * FROM anon_policy_models('presence', [anon_model('delta-presence', {'delta_min': 0.05, "
      "'delta_max': 0.2, 'population': 'voters', 'arx_size_first': true}), "
      "anon_model('k-map', {'k': 10, 'population': 'voters'})])"]),
    ("l_kinds",
     lambda h: Policy(quasi_identifiers={"zip": h["zip"], "age": h["age"]},
                      models=[DistinctLDiversity("disease", 2), EntropyLDiversity("disease", 1.5),
                              RecursiveCLDiversity("disease", 3, 2), EntropyLDiversity("disease", 2)],
                      identifiers=["name"], sensitive=["disease"], suppression="drop", suppression_limit=0.05,
                      others="drop"),
     ["SELECT * FROM anon_policy('l_kinds', suppression := 'drop', suppression_limit := 0.05, others := 'drop')",
      "SELECT * FROM anon_policy_columns('l_kinds', MAP {'zip': 'zip', 'age': 'age'}, identifiers := ['name'], "
      "sensitive := ['disease'])",
      "SELECT * FROM anon_policy_models('l_kinds', [anon_model('distinct-l-diversity', {'sensitive': 'disease', "
      "'l': 2}), anon_model('entropy-l-diversity', {'sensitive': 'disease', 'l': 1.5}), "
      "anon_model('recursive-cl-diversity', {'sensitive': 'disease', 'c': 3, 'l': 2}), "
      "anon_model('entropy-l-diversity', {'sensitive': 'disease', 'l': 2})])"]),
    ("t_closeness",
     lambda h: Policy(quasi_identifiers={"age": h["age"]},
                      models=[KAnonymity(3), TCloseness("disease", 0.2), TCloseness("visits", 0.25, "ordered"),
                              TCloseness("disease", 0.3, "hierarchical", DISEASE_TREE)],
                      identifiers=["name", "zip"], sensitive=["disease", "visits"], max_suppressed=10),
     ["SELECT * FROM anon_policy('t_closeness', max_suppressed := 10)",
      "SELECT * FROM anon_policy_columns('t_closeness', MAP {'age': 'age'}, identifiers := ['name', 'zip'], "
      "sensitive := ['disease', 'visits'])",
      "SELECT * FROM anon_policy_models('t_closeness', [anon_model('k-anonymity', {'k': 3}), "
      "anon_model('t-closeness', {'sensitive': 'disease', 't': 0.2, 'distance': 'equal'}), "
      "anon_model('t-closeness', {'sensitive': 'visits', 't': 0.25, 'distance': 'ordered'}), "
      "anon_model('t-closeness', {'sensitive': 'disease', 't': 0.3, 'distance': 'hierarchical', "
      "'hierarchy': anon_hierarchy_rows('disease')})])"]),
    ("alpha_p",
     lambda h: Policy(quasi_identifiers={"age": h["age"], "zip": h["zip"]},
                      models=[AlphaKAnonymity("disease", 0.5, 4), AlphaKAnonymity("disease", 0.25, 4, ["hiv", "cancer"]),
                              PSensitiveKAnonymity("disease", 2, 4)],
                      sensitive=["disease"], others="insensitive", suppression_limit=0.1, max_suppressed=3),
     ["SELECT * FROM anon_policy('alpha_p', suppression_limit := 0.1, max_suppressed := 3, others := 'insensitive')",
      "SELECT * FROM anon_policy_columns('alpha_p', MAP {'age': 'age', 'zip': 'zip'}, sensitive := ['disease'])",
      "SELECT * FROM anon_policy_models('alpha_p', [anon_model('alpha-k-anonymity', {'sensitive': 'disease', "
      "'alpha': 0.5, 'k': 4}), anon_model('alpha-k-anonymity', {'sensitive': 'disease', 'alpha': 0.25, 'k': 4, "
      "'highly_sensitive': ['hiv', 'cancer']}), anon_model('p-sensitive-k-anonymity', {'sensitive': 'disease', "
      "'p': 2, 'k': 4})])"]),
    ("alpha_l_partition",
     lambda h: Policy(quasi_identifiers={"age": None, "zip": h["zip"]},
                      models=[AlphaLDiversityKAnonymity("disease", 0.6, 2, 5, {"flu": 1, "cold": 1, "hiv": 3,
                                                                               "cancer": 3})],
                      identifiers=["name"], sensitive=["disease"], insensitive=["visits"], suppression="drop",
                      suppression_limit=1),
     ["SELECT * FROM anon_policy('alpha_l_partition', suppression := 'drop', suppression_limit := 1)",
      "SELECT * FROM anon_policy_columns('alpha_l_partition', MAP {'age': NULL, 'zip': 'zip'}, "
      "identifiers := ['name'], sensitive := ['disease'], insensitive := ['visits'])",
      "SELECT * FROM anon_policy_models('alpha_l_partition', [anon_model('alpha-l-diversity-k-anonymity', "
      "{'sensitive': 'disease', 'alpha': 0.6, 'l': 2, 'k': 5, 'levels': MAP {'flu': 1, 'cold': 1, 'hiv': 3, "
      "'cancer': 3}})])"]),
    ("transformed",
     lambda h: Policy(quasi_identifiers={"age": h["age"]}, models=[KAnonymity(3)], identifiers=["zip"],
                      insensitive=["visits"], pseudonymize={"name": Pseudonymize("env:DUCKANON_KEY"),
                                                            "card": Pseudonymize()},
                      mask={"email": Mask.email_domain(), "phone": Mask.keep_last(4), "iban": Mask.keep_first(4, "#"),
                            "code": Mask(r"([A-Z]+)-(\d+)-(\d+)", (1, 3), "?")},
                      date_shift={"visit": DateShift(30, "name", "file:/etc/duckanon.key")}, person="name"),
     ["SELECT * FROM anon_policy('transformed')",
      ("SELECT * FROM anon_policy_columns('transformed', MAP {'age': 'age'}, identifiers := ['zip'], "
       "insensitive := ['visits'], pseudonymize := ['name', 'card'], mask := ['email', 'phone', 'iban', 'code'], "
       "date_shift := ['visit'], person := 'name')"),
      "SELECT * FROM anon_policy_models('transformed', [anon_model('k-anonymity', {'k': 3})])",
      ("SELECT * FROM anon_policy_methods('transformed', MAP {'name': anon_pseudonym(key := 'env:DUCKANON_KEY'), "
       "'card': anon_pseudonym(), 'email': anon_mask_email_domain(), 'phone': anon_mask_keep_last(4), "
       "'iban': anon_mask_keep_first(4, padding := '#'), 'code': anon_mask('([A-Z]+)-(\\d+)-(\\d+)', [1, 3], "
       "padding := '?'), 'visit': anon_date_shift(30, 'name', key := 'file:/etc/duckanon.key')})")]),
]

POLICY_TABLE_OF = {"anon_policy(": "policies", "anon_policy_columns(": "policy_columns",
                   "anon_policy_models(": "policy_models", "anon_policy_methods(": "policy_methods"}


def declaration_script(queries: list[str]) -> str:
    """The INSERT statements a shell user writes for the declaring queries."""
    lines = []
    for query in queries:
        table = next(t for call, t in POLICY_TABLE_OF.items() if f"FROM {call}" in query)
        lines.append(f"INSERT INTO anon.{table} {query};")
    return "\n".join(lines) + "\n"


STORED_SETUP = "\n".join([
    f".read '{MACROS}'", f".read '{CATALOG}'", SETUP + ";",
    "CREATE TABLE anon.hierarchy_age AS SELECT * FROM anon_hierarchy_intervals('people', 'Age', [5, 10, 20]);",
    "CREATE TABLE anon.hierarchy_zip AS SELECT * FROM anon_hierarchy_redaction('people', 'zip', 5);",
    "CREATE TABLE anon.hierarchy_disease AS SELECT * FROM (VALUES ('flu', 'respiratory', '*'), "
    "('cold', 'respiratory', '*'), ('hiv', 'severe', '*'), ('cancer', 'severe', '*')) v(level_0, level_1, level_2);",
    ""])


@pytest.fixture(scope="module")
def declared_db(tmp_path_factory) -> Path:
    """A database file in which the 1.5 shell declared every policy of POLICY_CASES."""
    if DUCKDB_SHELL is None:
        pytest.skip("no shell")
    db = tmp_path_factory.mktemp("declared") / "policies.duckdb"
    script = STORED_SETUP + "".join(declaration_script(queries) for _n, _p, queries in POLICY_CASES)
    proc = shell(db, script, db.parent)
    assert proc.returncode == 0, proc.stderr
    return db


@pytest.fixture(scope="module")
def declared(declared_db, tmp_path_factory):
    """An anonymizer over a copy of the declared database (the original stays as the shell wrote it)."""
    copy = tmp_path_factory.mktemp("copy") / "policies.duckdb"
    shutil.copy(declared_db, copy)
    con = duckdb.connect(str(copy))
    yield duckanon.connect(con)
    con.close()


PYTHON_BUILT = {"age": Hierarchy.intervals([a for a in AGES if a is not None], widths=[5, 10, 20]),
                "zip": Hierarchy.redaction(ZIPS)}


@pytest.mark.parametrize("name,build,_queries", POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_policy_declared_in_sql_reads_back_as_python_s(declared, name, build, _queries):
    assert declared.policy(name) == build(PYTHON_BUILT)


def _stored_rows(con, name: str) -> dict[str, list[tuple]]:
    out = {}
    for table, columns in POLICY_TABLES.items():
        key = "name" if table == "policies" else "policy"
        rows = con.execute(f"SELECT * EXCLUDE ({key}) FROM anon.{table} WHERE {key} = ?", [name]).fetchall()
        width = [c for c in columns if c != key]
        out[table] = [dict(zip(width, r)) for r in rows]
    for row in out["policies"]:
        created = dt.datetime.fromisoformat(row.pop("created"))
        assert created.utcoffset() == dt.timedelta(0)
        assert abs((dt.datetime.now(dt.timezone.utc) - created).total_seconds()) < 3600
    roles = {row["column_name"]: row["role"] for row in out["policy_columns"] if row["role"] != "person"}
    for row in out["policy_methods"]:
        # The same method: Python writes the HMAC's name and a random key's description, SQL neither.
        row["params"] = method_from_params(roles[row["column_name"]], json.loads(row["params"])).params()
    for row in out["policy_models"]:
        # The same model: Python spaces its JSON differently, writes unset arguments as null and sorts
        # highly_sensitive; the model's constructor reads both alike.
        row["params"] = model_from_params(row["model"], json.loads(row["params"])).params()
    return out


@pytest.mark.parametrize("name,build,_queries", POLICY_CASES, ids=[c[0] for c in POLICY_CASES])
def test_policy_rows_equal_save_policy_s(declared, name, build, _queries):
    saved = duckanon.connect(duckdb.connect())
    for hierarchy, built in PYTHON_BUILT.items():
        saved.add_hierarchy(hierarchy, built)
    policy = build({"age": "age", "zip": "zip"})
    saved.save_policy(name, policy)
    assert _stored_rows(declared.con, name) == _stored_rows(saved.con, name)


def test_sql_knows_every_model():
    con = macro_connection()
    for name in MODELS:
        assert con.execute("SELECT anon_model(?, {'k': 5}).model", [name]).fetchone() == (name,)
    with pytest.raises(duckdb.Error, match="unknown privacy model k-anonimity; known: k-anonymity, "):
        con.execute("SELECT anon_model('k-anonimity', {'k': 5})").fetchall()
    text = MACROS.read_text(encoding="utf-8")
    assert all(f"anon_model('{name}'," in text for name in MODELS), "every model has an example in the file"


# ---------------------------------------------------------------------------------------
# Declaring twice, and bad values: one clear error naming the policy and the value
# ---------------------------------------------------------------------------------------

def declaring_connection() -> duckdb.DuckDBPyConnection:
    con = macro_connection()
    con.execute(CATALOG.read_text(encoding="utf-8"))
    con.execute(SETUP)
    con.execute("CREATE TABLE anon.hierarchy_age AS SELECT * FROM anon_hierarchy_intervals('people', 'age', [5])")
    return con


def declare(con, name: str, *, settings: str = "", columns: str = "MAP {'age': 'age'}",
            models: str = "[anon_model('k-anonymity', {'k': 2})]") -> None:
    con.execute(f"INSERT INTO anon.policies SELECT * FROM anon_policy('{name}'{settings})")
    con.execute(f"INSERT INTO anon.policy_columns SELECT * FROM anon_policy_columns('{name}', {columns})")
    con.execute(f"INSERT INTO anon.policy_models SELECT * FROM anon_policy_models('{name}', {models})")


def test_declaring_twice_is_refused_until_the_rows_are_deleted():
    con = declaring_connection()
    declare(con, "p")
    for call, table in [("anon_policy('p')", "policies"), ("anon_policy_columns('p', MAP {'age': 'age'})",
                                                           "policy_columns"),
                        ("anon_policy_models('p', [anon_model('k-anonymity', {'k': 3})])", "policy_models")]:
        with pytest.raises(duckdb.Error, match=f"policy p already has rows in anon.{table}; delete its rows"):
            con.execute(f"INSERT INTO anon.{table} SELECT * FROM {call}")
    assert duckanon.connect(con).policy("p").models == [KAnonymity(2)]
    for table, key in [("policies", "name"), ("policy_columns", "policy"), ("policy_models", "policy")]:
        con.execute(f"DELETE FROM anon.{table} WHERE {key} = 'p'")
    declare(con, "p", models="[anon_model('k-anonymity', {'k': 3})]")
    assert duckanon.connect(con).policy("p").models == [KAnonymity(3)]


BAD_DECLARATIONS = [
    # (keyword arguments of declare, raw statements after it, fragments the error must hold)
    ({"models": "[anon_model('k-anonymity', {'k': 0})]"}, [], ["k must be a whole number", "0"]),
    ({"models": "[anon_model('k-anonymity', {'k': 2.5})]"}, [], ["k must be a whole number", "2.5"]),
    ({"models": "[anon_model('k-anonymity', {'kk': 5})]"}, [], ["kk"]),
    ({"models": "[anon_model('t-closeness', {'sensitive': 'zip', 't': 1.5})]"}, [], ["t must lie in", "1.5"]),
    ({"models": "[anon_model('t-closeness', {'sensitive': 'zip', 't': 0.2, 'distance': 'far'})]"}, [], ["'far'"]),
    ({"settings": ", suppression := 'erase'"}, [], ["suppression must be one of", "'erase'"]),
    ({"settings": ", others := 'keep'"}, [], ["others must be one of", "'keep'"]),
    ({"settings": ", suppression_limit := 1.5"}, [], ["suppression_limit", "1.5"]),
    ({"settings": ", max_suppressed := 2.5"}, [], ["2.5"]),
    ({"columns": "MAP {'age': 'agge'}"}, [], ["hierarchy_agge"]),
    ({"columns": "MAP {'age': 'age'}, identifiers := ['age']"}, [], ["'age'", "two roles"]),
    ({}, ["INSERT INTO anon.policy_models VALUES ('p', '1', 'k-anonimity', NULL, '{\"k\": 2}')"],
     ["unknown privacy model 'k-anonimity'"]),
    ({}, ["INSERT INTO anon.policy_models VALUES ('p', '1', 'k-anonymity', NULL, '{\"k\": 2')"], ['{"k": 2']),
    ({}, ["INSERT INTO anon.policy_models VALUES ('p', 'one', 'k-anonymity', NULL, '{\"k\": 2}')"], ["'one'"]),
    ({}, ["INSERT INTO anon.policy_columns VALUES ('p', 'zip', 'quasi_identifier', NULL)"],
     ["'zip'", "'quasi_identifier'"]),
    ({}, ["INSERT INTO anon.policies SELECT 'p', 'drop', '0.0', NULL, 'error', 'now'"], ["2 rows in anon.policies"]),
]


@pytest.mark.parametrize("kwargs,raw,fragments", BAD_DECLARATIONS)
def test_bad_declaration_is_one_error_naming_policy_and_value(kwargs, raw, fragments):
    con = declaring_connection()
    declare(con, "p", **kwargs)
    for statement in raw:
        con.execute(statement)
    with pytest.raises(PolicyError) as info:
        duckanon.connect(con).policy("p")
    message = str(info.value)
    assert "policy 'p'" in message
    for fragment in fragments:
        assert fragment in message, message


def test_unknown_policy_is_still_its_own_error():
    with pytest.raises(duckanon.errors.AnonymizationError, match="no policy named 'q'"):
        duckanon.connect(declaring_connection()).policy("q")
