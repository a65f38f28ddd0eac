"""Tests for the shell macros in sql/duckanon.sql.

The macros are run through the real `duckdb` shell binary (the `duckdb-cli` package,
1.5.x) as a subprocess that `.read`s the file by absolute path from an unrelated working
directory, and through the Python `duckdb` package in-process. Every result is compared
with an independent computation in pandas.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import subprocess
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

MACROS = Path(__file__).resolve().parents[1] / "sql" / "duckanon.sql"
# The macros load in DuckDB 1.4 and newer: 1.2's parser lacks `lambda x:`, 1.3 lacks WITH ORDINALITY (measured).
needs_macros = pytest.mark.skipif(tuple(int(p) for p in duckdb.__version__.split(".")[:2]) < (1, 4),
                                  reason=f"sql/duckanon.sql needs DuckDB 1.4 or newer, not {duckdb.__version__}")
DUCKDB_SHELL = shutil.which("duckdb")


def release_verdicts(path: Path, table: str = "release") -> tuple[dict[str, bool], dict[str, bool]]:
    """({guarantee: holds} of ``anon_verify`` over a DuckDB release, the same of its ``release_verification`` view),
    read in a connection of their own with the macros loaded and the release attached read-only."""
    con = duckdb.connect()
    try:
        con.execute(MACROS.read_text(encoding="utf-8"))
        con.execute(f"ATTACH '{path}' AS r (READ_ONLY)")
        macro = dict(con.execute(f"SELECT guarantee, holds FROM anon_verify('r.{table}')").fetchall())
        view = dict(con.execute("SELECT guarantee, holds FROM r.release_verification").fetchall())
    finally:
        con.close()
    return macro, view

needs_shell = pytest.mark.skipif(
    DUCKDB_SHELL is None,
    reason="the `duckdb` shell binary is not on PATH (pip install duckdb-cli)",
)

TABLE = "people"
ODD_TABLE = "my table-ü"  # a table name with a space, a hyphen and a non-ASCII letter
SENSITIVE = "diagnosis"

# Quasi-identifier sets as the user passes them, and the real column names they match.
QI_SETS = {
    "nulls": (["age", "marital-status"], ["age", "marital-status"]),
    "quotes-spaces": (["marital-status", "native country", 'a"b'], ["marital-status", "native country", 'a"b']),
    "non-ascii": (["Größe", 'a"b', "zip"], ["Größe", 'a"b', "zip"]),
    "case-insensitive": (["AGE", "Marital-Status"], ["age", "marital-status"]),
    "single": (["marital-status"], ["marital-status"]),
}


def make_frame(n: int = 400, seed: int = 7) -> pd.DataFrame:
    rng = np.random.default_rng(seed)

    def pick(values, p=None):
        return [values[i] for i in rng.choice(len(values), size=n, p=p)]

    age = pd.array(rng.integers(17, 31, size=n), dtype="Int64")
    age[rng.random(n) < 0.05] = pd.NA
    return pd.DataFrame(
        {
            "age": age,
            "marital-status": pick(["Married", "Never-married", "Divorced", None], [0.4, 0.3, 0.2, 0.1]),
            "native country": pick(["United-States", "Mexico", "Deutschland"], [0.7, 0.2, 0.1]),
            'a"b': pick(["x", "y"]),
            "Größe": pick(["klein", "groß"]),
            "zip": pick(["47677", "47678", "10115"]),
            SENSITIVE: pick(["flu", "cold", "covid", None], [0.4, 0.3, 0.2, 0.1]),
        }
    )


# ---------------------------------------------------------------------------------------
# Independent reference computations (pandas only)
# ---------------------------------------------------------------------------------------


def _norm(v):
    """A pandas cell as the plain Python value the shell's JSON output holds."""
    if v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, np.integer):
        return int(v)
    return v


def _key(k) -> tuple:
    return tuple(_norm(v) for v in (k if isinstance(k, tuple) else (k,)))


def ref_classes(df: pd.DataFrame, cols: list[str]) -> dict[tuple, int]:
    sizes = df.groupby(cols, dropna=False).size()
    return {_key(k): int(v) for k, v in sizes.items()}


def ref_k(df, cols, k_target=None) -> dict:
    sizes = df.groupby(cols, dropna=False).size()
    out = {"k": int(sizes.min()), "classes": int(len(sizes)), "records": int(sizes.sum())}
    if k_target is not None:
        small = sizes[sizes < k_target]
        out["violating_classes"] = int(len(small))
        out["violating_records"] = int(small.sum())
    return out


def ref_entropy_l(values: pd.Series) -> float:
    counts = values.value_counts(dropna=False).to_numpy(dtype=float)
    p = counts / counts.sum()
    return math.exp(-(p * np.log(p)).sum())


def ref_l(df, cols, s) -> dict:
    g = df.groupby(cols, dropna=False)[s]
    return {
        "l": int(g.nunique(dropna=False).min()),
        "entropy_l": float(g.apply(ref_entropy_l).min()),
        "classes": int(g.ngroups),
        "records": len(df),
    }


def ref_risk(df, cols, k_threshold) -> dict:
    sizes = df.groupby(cols, dropna=False).size()
    n = sizes.sum()
    return {
        "max_risk": 1.0 / sizes.min(),
        "avg_risk": len(sizes) / n,
        "records_at_max_risk": sizes[sizes == sizes.min()].sum() / n,
        "records_at_risk": sizes[sizes < k_threshold].sum() / n,
    }


def rows_as_tuples(records: list[dict], cols: list[str]) -> list[tuple]:
    return sorted((tuple(_norm(r[c]) for c in cols) for r in records), key=repr)


# ---------------------------------------------------------------------------------------
# Running SQL: the shell binary and Python duckdb
# ---------------------------------------------------------------------------------------


def sql_str(s: str) -> str:
    """A SQL string literal."""
    return "'" + s.replace("'", "''") + "'"


def sql_list(names: list[str]) -> str:
    return "[" + ", ".join(sql_str(n) for n in names) + "]"


def run_shell(db: Path | None, *statements: str, cwd: Path, read: bool = True, readonly: bool = False):
    """Run the shell binary on db: `.read` the macros (absolute path), then each statement."""
    args = [DUCKDB_SHELL, "-json"]
    if readonly:
        args.append("-readonly")
    if db is not None:
        args.append(str(db))
    if read:
        args += ["-c", f".read '{MACROS}'"]
    for s in statements:
        args += ["-c", s]
    return subprocess.run(args, cwd=cwd, capture_output=True, text=True, timeout=120)


def parse_json_results(out: str) -> list[list[dict]]:
    """The shell prints one JSON array per statement that returns rows."""
    dec, pos, results = json.JSONDecoder(), 0, []
    while True:
        while pos < len(out) and out[pos].isspace():
            pos += 1
        if pos >= len(out):
            return results
        value, pos = dec.raw_decode(out, pos)
        results.append(value)


def shell_query(db: Path, query: str, cwd: Path) -> list[dict]:
    proc = run_shell(db, query, cwd=cwd)
    assert proc.returncode == 0, f"shell failed on {query!r}:\n{proc.stderr}"
    results = parse_json_results(proc.stdout)
    assert len(results) == 1, proc.stdout
    return results[0]


def py_query(con: duckdb.DuckDBPyConnection, query: str) -> list[dict]:
    cur = con.execute(query)
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row)) for row in cur.fetchall()]


@pytest.fixture(scope="module")
def frame() -> pd.DataFrame:
    return make_frame()


@pytest.fixture(scope="module")
def workdir(tmp_path_factory) -> Path:
    """An unrelated working directory: `.read` must not depend on the cwd."""
    return tmp_path_factory.mktemp("elsewhere")


def _create_db(path: Path, frame: pd.DataFrame) -> Path:
    """A database file the 1.5.x shell can open, written by Python duckdb."""
    con = duckdb.connect()
    con.execute(f"ATTACH {sql_str(str(path))} AS x (STORAGE_VERSION 'v1.2.0')")
    con.register("frame_view", frame)
    con.execute(f'CREATE TABLE x."{TABLE}" AS SELECT * FROM frame_view')
    con.execute(f'CREATE TABLE x."{ODD_TABLE}" AS SELECT * FROM frame_view')
    con.execute("CREATE TABLE x.empty AS SELECT * FROM frame_view LIMIT 0")
    con.close()
    return path


@pytest.fixture(scope="module")
def db(tmp_path_factory, frame) -> Path:
    return _create_db(tmp_path_factory.mktemp("db") / "people.duckdb", frame)


@pytest.fixture
def fresh_db(tmp_path, frame) -> Path:
    """A database of its own, for tests that try to damage it."""
    return _create_db(tmp_path / "victim.duckdb", frame)


@pytest.fixture(scope="module")
def pycon(frame):
    con = duckdb.connect()
    con.execute(MACROS.read_text(encoding="utf-8"))
    con.register("frame_view", frame)
    con.execute(f'CREATE TABLE "{TABLE}" AS SELECT * FROM frame_view')
    con.execute(f'CREATE TABLE "{ODD_TABLE}" AS SELECT * FROM frame_view')
    con.execute("CREATE TABLE empty AS SELECT * FROM frame_view LIMIT 0")
    yield con
    con.close()


ENGINES = ["shell", "python"]


@pytest.fixture(params=ENGINES)
def query(request, db, workdir, pycon):
    """query(sql) -> list of row dicts, from the shell binary or from Python duckdb."""
    if request.param == "shell":
        if DUCKDB_SHELL is None:
            pytest.skip("the `duckdb` shell binary is not on PATH (pip install duckdb-cli)")
        return lambda q: shell_query(db, q, workdir)
    return lambda q: py_query(pycon, q)


# ---------------------------------------------------------------------------------------
# The macro file itself
# ---------------------------------------------------------------------------------------


def test_macro_names_are_prefixed_and_documented():
    text = MACROS.read_text(encoding="utf-8")
    con = duckdb.connect()
    con.execute(text)
    names = {
        r[0]
        for r in con.execute(
            "SELECT DISTINCT function_name FROM duckdb_functions() WHERE schema_name = 'main' "
            "AND database_name = 'temp' AND function_type IN ('macro', 'table_macro')"
        ).fetchall()
    }
    assert {
        "anon_k_anonymity",
        "anon_l_diversity",
        "anon_equivalence_classes",
        "anon_risk",
        "anon_suppress",
        "anon_interval",
        "anon_redact",
    } <= names
    for name in names:
        assert name.startswith("anon_"), name
        assert f"-- {name}(" in text, f"{name} has no comment line saying what it returns"
    assert "->" not in "\n".join(l for l in text.splitlines() if not l.lstrip().startswith("--")), (
        "use `lambda x: ...`: DuckDB 2.0 rejects the arrow lambda syntax"
    )


@needs_shell
def test_shell_version_is_1_5(workdir):
    proc = subprocess.run([DUCKDB_SHELL, "--version"], capture_output=True, text=True, cwd=workdir)
    assert proc.returncode == 0
    assert proc.stdout.startswith("v1.5."), proc.stdout


# ---------------------------------------------------------------------------------------
# k-anonymity, l-diversity, classes, risk, suppression: both engines vs pandas
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("qi_name", list(QI_SETS))
def test_k_anonymity(query, frame, qi_name):
    given, real = QI_SETS[qi_name]
    [row] = query(f"SELECT * FROM anon_k_anonymity('{TABLE}', {sql_list(given)})")
    assert row == ref_k(frame, real)


@pytest.mark.parametrize("qi_name", list(QI_SETS))
def test_k_anonymity_with_target(query, frame, qi_name):
    given, real = QI_SETS[qi_name]
    [row] = query(f"SELECT * FROM anon_k_anonymity('{TABLE}', {sql_list(given)}, 5)")
    assert row == ref_k(frame, real, k_target=5)


def test_k_anonymity_groups_nulls_together(query, frame):
    # NULL is a value of its own: every NULL age falls into one class.
    [row] = query(f"SELECT * FROM anon_k_anonymity('{TABLE}', ['age'])")
    assert frame["age"].isna().sum() > 1
    assert row["classes"] == frame["age"].nunique() + 1
    assert row["k"] == int(frame.groupby("age", dropna=False).size().min())


def test_odd_table_name(query, frame):
    [row] = query(f"SELECT * FROM anon_k_anonymity({sql_str(ODD_TABLE)}, ['age', 'Größe'])")
    assert row == ref_k(frame, ["age", "Größe"])
    [row] = query(f"SELECT * FROM anon_k_anonymity('main.{TABLE}', ['age', 'Größe'])")
    assert row == ref_k(frame, ["age", "Größe"])


def test_empty_table(query):
    [row] = query("SELECT * FROM anon_k_anonymity('empty', ['age'], 2)")
    assert row == {"k": None, "classes": 0, "records": 0, "violating_classes": 0, "violating_records": 0}
    [row] = query(f"SELECT * FROM anon_l_diversity('empty', ['age'], '{SENSITIVE}')")
    assert row == {"l": None, "entropy_l": None, "classes": 0, "records": 0}


@pytest.mark.parametrize("qi_name", list(QI_SETS))
def test_l_diversity(query, frame, qi_name):
    given, real = QI_SETS[qi_name]
    [row] = query(f"SELECT * FROM anon_l_diversity('{TABLE}', {sql_list(given)}, 'DIAGNOSIS')")
    expected = ref_l(frame, real, SENSITIVE)
    assert row["l"] == expected["l"]
    assert row["entropy_l"] == pytest.approx(expected["entropy_l"], rel=1e-9)
    assert 1.0 <= row["entropy_l"] <= row["l"]  # exact bounds, no rounding below 1
    assert (row["classes"], row["records"]) == (expected["classes"], expected["records"])


def test_l_diversity_with_quoted_sensitive_column(query, frame):
    [row] = query(f"SELECT * FROM anon_l_diversity('{TABLE}', ['age'], 'a\"b')")
    expected = ref_l(frame, ["age"], 'a"b')
    assert row["l"] == expected["l"]
    assert row["entropy_l"] == pytest.approx(expected["entropy_l"], rel=1e-9)


@pytest.mark.parametrize("qi_name", ["nulls", "quotes-spaces", "non-ascii"])
def test_equivalence_classes(query, frame, qi_name):
    given, real = QI_SETS[qi_name]
    rows = query(f"SELECT * FROM anon_equivalence_classes('{TABLE}', {sql_list(given)})")
    # COLUMNS() keeps the table's column order, whatever the order of the list.
    in_table_order = [c for c in frame.columns if c in real]
    assert list(rows[0]) == in_table_order + ["class_size"]
    got = {tuple(r[c] for c in real): r["class_size"] for r in rows}
    assert len(got) == len(rows)
    assert got == ref_classes(frame, real)
    sizes = [r["class_size"] for r in rows]
    assert sizes == sorted(sizes), "smallest classes first"


@pytest.mark.parametrize("qi_name", ["nulls", "quotes-spaces", "non-ascii"])
def test_equivalence_classes_with_sensitive(query, frame, qi_name):
    given, real = QI_SETS[qi_name]
    rows = query(f"SELECT * FROM anon_equivalence_classes('{TABLE}', {sql_list(given)}, '{SENSITIVE}')")
    in_table_order = [c for c in frame.columns if c in real]
    assert list(rows[0]) == in_table_order + ["class_size", "distinct_sensitive", "entropy_l"]
    g = frame.groupby(real, dropna=False)[SENSITIVE]
    expected = {
        _key(k): (len(v), int(v.nunique(dropna=False)), ref_entropy_l(v)) for k, v in g
    }
    assert len(rows) == len(expected)
    for r in rows:
        size, distinct, ent = expected[tuple(r[c] for c in real)]
        assert (r["class_size"], r["distinct_sensitive"]) == (size, distinct)
        assert r["entropy_l"] == pytest.approx(ent, rel=1e-9)
        assert 1.0 <= r["entropy_l"] <= distinct
        if distinct == 1:
            assert r["entropy_l"] == 1.0


@pytest.mark.parametrize("qi_name", ["nulls", "non-ascii"])
def test_risk(query, frame, qi_name):
    given, real = QI_SETS[qi_name]
    [row] = query(f"SELECT * FROM anon_risk('{TABLE}', {sql_list(given)}, 3)")
    expected = ref_risk(frame, real, 3)
    assert row.keys() == expected.keys()
    for name, value in expected.items():
        assert row[name] == pytest.approx(value, rel=1e-12), name
    [row] = query(f"SELECT * FROM anon_risk('{TABLE}', {sql_list(given)})")
    assert list(row) == ["max_risk", "avg_risk", "records_at_max_risk"]
    assert row["max_risk"] == pytest.approx(expected["max_risk"], rel=1e-12)


@pytest.mark.parametrize("k", [1, 3, 10])
def test_suppress(query, frame, k):
    qi = ["age", "marital-status"]
    rows = query(f"SELECT * FROM anon_suppress('{TABLE}', {sql_list(qi)}, {k})")
    sizes = frame.groupby(qi, dropna=False)[qi[0]].transform("size")
    kept = frame[sizes >= k]
    cols = list(frame.columns)
    assert (list(rows[0]) if rows else cols) == cols
    assert rows_as_tuples(rows, cols) == rows_as_tuples(kept.to_dict("records"), cols)


# ---------------------------------------------------------------------------------------
# Shell specifics: cwd, stdin scripts, TEMP macros, read-only databases, re-reading
# ---------------------------------------------------------------------------------------


@needs_shell
def test_read_from_stdin_script_in_other_cwd(db, workdir, frame):
    script = f".read '{MACROS}'\n.read '{MACROS}'\nSELECT * FROM anon_k_anonymity('{TABLE}', ['age', 'zip']);\n"
    proc = subprocess.run(
        [DUCKDB_SHELL, "-json", str(db)], input=script, capture_output=True, text=True, cwd=workdir, timeout=120
    )
    assert proc.returncode == 0, proc.stderr
    assert parse_json_results(proc.stdout) == [[ref_k(frame, ["age", "zip"])]]


@needs_shell
def test_macros_are_temporary_and_work_read_only(db, workdir, frame):
    proc = run_shell(db, f"SELECT * FROM anon_k_anonymity('{TABLE}', ['zip'])", cwd=workdir, readonly=True)
    assert proc.returncode == 0, proc.stderr
    assert parse_json_results(proc.stdout) == [[ref_k(frame, ["zip"])]]
    # Nothing was stored in the database file.
    proc = run_shell(
        db,
        "SELECT count(*) AS n FROM duckdb_functions() WHERE function_name LIKE 'anon%'",
        cwd=workdir,
        read=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert parse_json_results(proc.stdout) == [[{"n": 0}]]


@needs_shell
def test_ascii_only_case_folding(workdir):
    # DuckDB folds ASCII letters only: "É" and "é" are two different columns.
    setup = (
        'CREATE TABLE acc AS SELECT * FROM (VALUES (1, 1), (1, 2), (2, 2)) v("É", "é");'
    )
    proc = run_shell(
        None,
        setup,
        "SELECT * FROM anon_equivalence_classes('acc', ['É'])",
        "SELECT * FROM anon_equivalence_classes('ACC', ['é'])",
        cwd=workdir,
    )
    assert proc.returncode == 0, proc.stderr
    by_upper, by_lower = parse_json_results(proc.stdout)
    assert by_upper == [{"É": 2, "class_size": 1}, {"É": 1, "class_size": 2}]
    assert by_lower == [{"é": 1, "class_size": 1}, {"é": 2, "class_size": 2}]


# ---------------------------------------------------------------------------------------
# Bad names and injection attempts: an error naming the problem, the data untouched
# ---------------------------------------------------------------------------------------

INJECTIONS = [
    # (table value, qi list, sensitive or None, expected error fragment)
    ("people; DROP TABLE people; --", ["age"], None, "does not exist"),
    ("people\"; DROP TABLE people; --", ["age"], None, "qualified name"),
    ("people') ; DROP TABLE people; --", ["age"], None, "does not exist"),
    (TABLE, ["age", "zip'); DROP TABLE people; --"], None, "not a column of people"),
    (TABLE, ["age", 'zip"); DROP TABLE people; --'], None, "not a column of people"),
    (TABLE, ["age", "*"], None, "not a column of people"),
    (TABLE, ["age"], "diagnosis'); DROP TABLE people; --", "not a column of people"),
    (TABLE, ["age", "nope"], None, "not a column of people: nope"),
]


def _injection_query(tbl, qi, sensitive):
    if sensitive is None:
        return f"SELECT * FROM anon_k_anonymity({sql_str(tbl)}, {sql_list(qi)})"
    return f"SELECT * FROM anon_l_diversity({sql_str(tbl)}, {sql_list(qi)}, {sql_str(sensitive)})"


@needs_shell
@pytest.mark.parametrize("tbl,qi,sensitive,fragment", INJECTIONS)
def test_injection_shell(fresh_db, workdir, frame, tbl, qi, sensitive, fragment):
    proc = run_shell(fresh_db, _injection_query(tbl, qi, sensitive), cwd=workdir)
    assert proc.returncode != 0
    assert fragment in proc.stderr, proc.stderr
    proc = run_shell(fresh_db, f'SELECT count(*) AS n FROM "{TABLE}"', cwd=workdir, read=False)
    assert proc.returncode == 0, proc.stderr
    assert parse_json_results(proc.stdout) == [[{"n": len(frame)}]]


@pytest.mark.parametrize("tbl,qi,sensitive,fragment", INJECTIONS)
def test_injection_python(pycon, frame, tbl, qi, sensitive, fragment):
    with pytest.raises(duckdb.Error) as info:
        pycon.execute(_injection_query(tbl, qi, sensitive)).fetchall()
    assert fragment in str(info.value)
    assert pycon.execute(f'SELECT count(*) FROM "{TABLE}"').fetchone()[0] == len(frame)


def test_injection_text_is_only_ever_a_name(tmp_path):
    # A table really named like an injection is analysed as that name.
    name = "t; DROP TABLE t; --"
    q = f"SELECT * FROM anon_k_anonymity({sql_str(name)}, ['a'])"
    setup = f'CREATE TABLE t(a INT); INSERT INTO t VALUES (1), (1), (2); CREATE TABLE "{name}" AS SELECT * FROM t;'
    if DUCKDB_SHELL is not None:
        proc = run_shell(None, setup, q, "SELECT count(*) AS n FROM t", cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert parse_json_results(proc.stdout) == [[{"k": 1, "classes": 2, "records": 3}], [{"n": 3}]]
    con = duckdb.connect()
    con.execute(MACROS.read_text(encoding="utf-8"))
    con.execute(setup)
    assert py_query(con, q) == [{"k": 1, "classes": 2, "records": 3}]
    # Prepared-statement parameters work as well.
    assert con.execute("SELECT * FROM anon_k_anonymity(?, ?)", [name, ["a"]]).fetchall() == [(1, 2, 3)]


QUOTED_NAMES = [
    # (tables to create, the name as the user passes it, the table it must read)
    ('"a""b"', '"a""b"', 'a"b'),            # issue 12: the 1.5 shell read table ab instead
    ('"a""b"', 'main."a""b"', 'a"b'),
    ('"x"".y"', '"x"".y"', 'x".y'),          # a quote and a dot
    ('"""q"""', '"""q"""', '"q"'),           # quotes at both ends
    ('"my.t"', '"my.t"', "my.t"),
    ('"my.t"', 'MAIN."my.t"', "my.t"),
]


@pytest.mark.parametrize("create,given,meant", QUOTED_NAMES)
def test_quoted_table_name_reads_that_table(tmp_path, create, given, meant):
    # Decoy tables whose names a wrong unquoting would produce (ab, "a" and so on) hold other data.
    decoys = {"ab", "a", "b", "xy", "x", "q", "my", "t"}
    setup = [f'CREATE TABLE "{d}" AS SELECT 9 AS v FROM range(5)' for d in sorted(decoys)]
    setup.append(f"CREATE TABLE {create} AS SELECT v FROM (VALUES (1), (1), (2)) t(v)")
    queries = [f"SELECT * FROM anon_k_anonymity({sql_str(given)}, ['v'])",
               f"SELECT class_size FROM anon_equivalence_classes({sql_str(given)}, ['V'])",
               f"SELECT count(*) AS n FROM anon_suppress({sql_str(given)}, ['v'], 2)"]
    expected = [[{"k": 1, "classes": 2, "records": 3}], [{"class_size": 1}, {"class_size": 2}], [{"n": 2}]]
    if DUCKDB_SHELL is not None:
        proc = run_shell(None, "; ".join(setup), *queries, cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        assert parse_json_results(proc.stdout) == expected, f"shell read the wrong table for {given!r}"
    con = duckdb.connect()
    con.execute(MACROS.read_text(encoding="utf-8"))
    for statement in setup:
        con.execute(statement)
    assert con.execute("SELECT table_name FROM duckdb_tables() WHERE table_name NOT IN "
                       f"({', '.join(sql_str(d) for d in decoys)})").fetchall() == [(meant,)]
    assert [py_query(con, q) for q in queries] == expected


@pytest.mark.parametrize("name", ['"a', 'a"b', 'main.', '.t', 'a..b', '"a"b"'])
def test_malformed_table_name_is_an_error(query, name):
    with pytest.raises((AssertionError, duckdb.Error), match="qualified name"):
        query(f"SELECT * FROM anon_k_anonymity({sql_str(name)}, ['age'])")


def test_empty_or_null_column_names_are_errors(query):
    # (the shell path raises AssertionError carrying the shell's stderr)
    with pytest.raises((AssertionError, duckdb.Error), match="empty set of columns|no column names"):
        query(f"SELECT * FROM anon_k_anonymity('{TABLE}', [])")
    with pytest.raises((AssertionError, duckdb.Error), match="not a column of people: NULL"):
        query(f"SELECT * FROM anon_k_anonymity('{TABLE}', ['age', NULL])")


# ---------------------------------------------------------------------------------------
# anon_interval and anon_redact
# ---------------------------------------------------------------------------------------

INTERVAL_CASES = [
    ("0", "5", "[0, 5)"),
    ("4", "5", "[0, 5)"),
    ("5", "5", "[5, 10)"),
    ("30", "5", "[30, 35)"),
    ("34", "5", "[30, 35)"),
    ("35", "5", "[35, 40)"),
    ("-1", "5", "[-5, 0)"),
    ("-5", "5", "[-5, 0)"),
    ("-6", "5", "[-10, -5)"),
    ("0", "1", "[0, 1)"),
    ("NULL", "5", None),
    ("CAST(NULL AS INTEGER)", "5", None),
    ("2.5", "0.5", "[2.5, 3)"),
    ("2.75", "0.5", "[2.5, 3)"),
    ("0.3", "0.1", "[0.3, 0.4)"),
    ("-0.05", "0.1", "[-0.1, 0)"),
    ("32.0::DOUBLE", "5", "[30, 35)"),
    ("17::BIGINT", "10", "[10, 20)"),
    ("47677", "1000", "[47000, 48000)"),
]

INTERVAL_ORIGIN_CASES = [
    ("32", "5", "3", "[28, 33)"),
    ("33", "5", "3", "[33, 38)"),
    ("3", "5", "3", "[3, 8)"),
    ("2", "5", "3", "[-2, 3)"),
    ("0", "10", "-5", "[-5, 5)"),
    ("NULL", "5", "3", None),
]

REDACT_CASES = [
    ("47677", "2", "476**"),
    ("'47677'", "0", "47677"),
    ("'47677'", "5", "*****"),
    ("'ab'", "5", "**"),
    ("'héllo'", "2", "hél**"),
    ("''", "2", ""),
    ("'abc'", "-1", "abc"),
    ("NULL", "2", None),
    ("'abc'", "NULL", None),
    ("'a\"b c-ü'", "3", "a\"b ***"),
]


def test_interval_and_redact_literals(query):
    exprs = [f"anon_interval({x}, {w})" for x, w, _ in INTERVAL_CASES]
    exprs += [f"anon_interval({x}, {w}, {o})" for x, w, o, _ in INTERVAL_ORIGIN_CASES]
    exprs += [f"anon_redact({s}, {n})" for s, n, _ in REDACT_CASES]
    expected = [e for *_, e in INTERVAL_CASES + INTERVAL_ORIGIN_CASES + REDACT_CASES]
    [row] = query("SELECT " + ", ".join(f"{e} AS c{i}" for i, e in enumerate(exprs)))
    got = [row[f"c{i}"] for i in range(len(exprs))]
    assert dict(zip(exprs, got)) == dict(zip(exprs, expected))


def _ref_interval(x: int, width: int, origin: int = 0) -> str:
    lower = origin + math.floor((x - origin) / width) * width
    return f"[{lower}, {lower + width})"


@pytest.mark.parametrize("width,origin", [(1, 0), (3, 0), (5, 0), (10, 0), (7, 2), (5, -3)])
def test_interval_over_a_column(query, width, origin):
    rows = query(
        f"SELECT x, anon_interval(x, {width}) AS a, anon_interval(x, {width}, {origin}) AS b "
        "FROM range(-60, 61) r(x) ORDER BY x"
    )
    assert len(rows) == 121
    for r in rows:
        assert r["a"] == _ref_interval(r["x"], width), r
        assert r["b"] == _ref_interval(r["x"], width, origin), r
        lo, hi = (int(v) for v in re.fullmatch(r"\[(-?\d+), (-?\d+)\)", r["a"]).groups())
        assert lo <= r["x"] < hi and hi - lo == width


def test_interval_rejects_bad_width(query):
    for w in ("0", "-5"):
        with pytest.raises((AssertionError, duckdb.Error), match="width must be > 0"):
            query(f"SELECT anon_interval(7, {w}) AS a")


def test_interval_on_table_column_with_nulls(query, frame):
    rows = query(f"SELECT age, anon_interval(age, 5) AS band FROM {TABLE}")
    assert len(rows) == len(frame)
    for r in rows:
        if r["age"] is None:
            assert r["band"] is None
        else:
            assert r["band"] == _ref_interval(r["age"], 5)


def test_redact_on_table_column(query, frame):
    rows = query(f"SELECT zip, anon_redact(zip, 2) AS z FROM {TABLE}")
    assert sorted(r["z"] for r in rows) == sorted(z[:-2] + "**" for z in frame["zip"])
