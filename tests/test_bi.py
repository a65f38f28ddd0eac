"""BI tools: what Superset does when a release is added as a dataset, over SQLAlchemy and the driver the `bi` extra
installs, on a release of every algorithm (full-domain search, Mondrian, clustering, perturbation).

Every expectation is read from the same file by a plain duckdb connection: the relations, their columns and types,
their constraints and indexes, their rows.  Nothing here lists a release's columns, so the tests follow whatever a
release holds."""

from __future__ import annotations

import datetime
import decimal
import hashlib
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
import pytest

import duckanon
from duckanon import (
    EmpiricalSynthesis,
    Hierarchy,
    KAnonymity,
    Policy,
    SemiSupervisedClustering,
)
from duckanon.datasets import adult_hierarchy_dir, load_adult

sqlalchemy = pytest.importorskip("sqlalchemy")
pytest.importorskip("duckdb_engine")

QUASI = ["age", "sex", "race", "education"]
TABLE = "people"


@pytest.fixture(scope="module")
def source():
    """200 Adult records (a fixed sample): small enough for every algorithm to publish in moments."""
    con = duckdb.connect()
    load_adult(con, "adult")
    con.execute("CREATE TABLE people AS SELECT age, sex, race, education, \"hours-per-week\", \"salary-class\" "
                "FROM adult USING SAMPLE 200 ROWS (reservoir, 7)")
    # Perturbation releases every column it is given, so it gets only the ones it perturbs or keeps.
    con.execute("CREATE VIEW people_numbers AS SELECT age, \"hours-per-week\", \"salary-class\" FROM people")
    yield con
    con.close()


@pytest.fixture(scope="module")
def releases(source, tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("bi")
    anon = duckanon.connect(source)
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in QUASI}
    generalized = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5)], sensitive=["salary-class"],
                         insensitive=["hours-per-week"], suppression_limit=0.3)
    partitioned = Policy(quasi_identifiers={"age": None, "sex": hierarchies["sex"],
                                            "education": hierarchies["education"]},
                         models=[KAnonymity(5)], sensitive=["salary-class"], insensitive=["hours-per-week"],
                         others="drop")
    paths = {kind: folder / f"{kind}.duckdb" for kind in ("full-domain", "mondrian", "clustering", "perturbation")}
    anon.publish(TABLE, generalized, {"age": 2, "sex": 0, "race": 1, "education": 2}, paths["full-domain"],
                 table=TABLE)
    anon.mondrian(TABLE, partitioned, paths["mondrian"], metrics=False, table=TABLE)
    anon.cluster(TABLE, partitioned, SemiSupervisedClustering()).publish(paths["clustering"], table=TABLE)
    anon.perturb("people_numbers", paths["perturbation"], method=EmpiricalSynthesis(bins=10),
                 numeric=["age", "hours-per-week"], keep=["salary-class"], seed=1, table=TABLE)
    return paths


@pytest.fixture(scope="module", params=["full-domain", "mondrian", "clustering", "perturbation"])
def release(request, releases):
    return releases[request.param]


@dataclass
class Relation:
    """A table or view as a plain duckdb connection reads it."""
    columns: list[str]
    types: list[str]
    rows: list[tuple]                  # ORDER BY ALL
    primary_key: list[str]
    foreign_keys: int
    indexes: int


@dataclass
class Reference:
    tables: list[str]
    views: list[str]
    relations: dict[str, Relation]


@pytest.fixture(scope="module")
def plain(release) -> Reference:
    """The release read by a plain duckdb connection, closed before any SQLAlchemy engine opens the file (DuckDB
    refuses a second connection to one file with another configuration in the same process)."""
    with duckdb.connect(str(release), read_only=True) as con:
        tables = [r[0] for r in con.execute("SELECT table_name FROM duckdb_tables() WHERE schema_name = 'main' "
                                            "ORDER BY table_name").fetchall()]
        views = [r[0] for r in con.execute("SELECT view_name FROM duckdb_views() WHERE NOT internal "
                                           "AND schema_name = 'main' ORDER BY view_name").fetchall()]
        found = {}
        for name in tables + views:
            relation = con.table(name)
            constraints = con.execute("SELECT constraint_type, constraint_column_names FROM duckdb_constraints() "
                                      "WHERE table_name = ?", [name]).fetchall()
            keys = [columns for kind, columns in constraints if kind == "PRIMARY KEY"]
            found[name] = Relation(
                columns=relation.columns, types=[str(t) for t in relation.types],
                rows=relation.order("ALL").fetchall(), primary_key=keys[0] if keys else [],
                foreign_keys=sum(kind == "FOREIGN KEY" for kind, _ in constraints),
                indexes=con.execute("SELECT count(*) FROM duckdb_indexes() WHERE table_name = ?", [name]).fetchone()[0])
    return Reference(tables, views, found)


@pytest.fixture(scope="module")
def engine(release, plain):
    # The URL the README gives BI users.
    engine = sqlalchemy.create_engine(f"duckdb:///{release}?access_mode=read_only")
    yield engine
    engine.dispose()


@pytest.fixture(scope="module")
def inspector(engine):
    return sqlalchemy.inspect(engine)


@pytest.fixture(scope="module")
def autoloaded(engine, plain) -> dict[str, object]:
    """Every relation as ``Table(name, MetaData(), autoload_with=engine)``: how BI tools and ORMs reflect a table."""
    return {name: sqlalchemy.Table(name, sqlalchemy.MetaData(), autoload_with=engine) for name in plain.relations}


def test_release_holds_the_table_and_its_info(plain):
    # The fixtures built what the other tests iterate over: without it they would pass on nothing.
    assert {TABLE, "release_info"} <= set(plain.tables)
    assert plain.relations[TABLE].rows


def test_table_and_view_names(inspector, plain):
    assert sorted(inspector.get_table_names()) == plain.tables
    assert sorted(inspector.get_view_names()) == plain.views
    assert all(inspector.has_table(name) for name in plain.relations)


def test_columns_and_types_match_duckdb(inspector, plain):
    for name, relation in plain.relations.items():
        reflected = inspector.get_columns(name)
        assert [c["name"] for c in reflected] == relation.columns, name
        for position, column in enumerate(reflected):
            # A type the driver does not know reflects as NullType, whose python_type raises: a BI tool could then
            # neither sort nor filter the column.
            python_type = column["type"].python_type
            returned = {type(row[position]) for row in relation.rows if row[position] is not None}
            assert returned <= {python_type}, (name, column["name"], relation.types[position], python_type)


def test_keys_and_indexes_are_what_duckdb_lists(inspector, plain):
    # A release holds none today; the driver must say what duckdb lists, not fail.
    for name, relation in plain.relations.items():
        assert inspector.get_pk_constraint(name)["constrained_columns"] == relation.primary_key, name
        assert len(inspector.get_foreign_keys(name)) == relation.foreign_keys, name
        assert len(inspector.get_indexes(name)) == relation.indexes, name
        assert inspector.get_table_comment(name)["text"] is None


def test_autoloaded_table_reads_the_rows_duckdb_reads(engine, autoloaded, plain):
    for name, relation in plain.relations.items():
        table = autoloaded[name]
        assert [c.name for c in table.columns] == relation.columns
        ordered = sqlalchemy.select(table).order_by(*table.columns)
        with engine.connect() as connection:
            rows = connection.execute(ordered).fetchall()
            first = connection.execute(ordered.limit(3)).fetchall()
        assert [tuple(r) for r in rows] == relation.rows, name
        assert [tuple(r) for r in first] == relation.rows[:3], name


def test_where_filters_as_duckdb_does(engine, autoloaded, plain):
    # Per column, its most frequent value, counted in Python over duckdb's rows, against a filtered count over
    # SQLAlchemy with the value as a bound parameter.
    filtered = 0
    for name, relation in plain.relations.items():
        table = autoloaded[name]
        with engine.connect() as connection:
            for position, column in enumerate(table.columns):
                counts = Counter(row[position] for row in relation.rows if row[position] is not None)
                if not counts or not isinstance(next(iter(counts)), (str, int, float, decimal.Decimal, datetime.date)):
                    continue
                value, count = counts.most_common(1)[0]
                query = sqlalchemy.select(sqlalchemy.func.count()).select_from(table).where(column == value)
                assert connection.execute(query).scalar() == count, (name, column.name, value)
                filtered += 1
    assert filtered >= len(plain.relations[TABLE].columns)


def normalized(value):
    """One representation for what duckdb and pandas return for the same value (NULL/NaN/NaT, numpy scalars,
    pandas timestamps, decimals read as floats)."""
    if value is None or (not isinstance(value, (list, dict)) and pd.isna(value)):
        return None
    if isinstance(value, pd.Timestamp):
        return value.to_pydatetime()
    if hasattr(value, "item"):
        return value.item()
    if isinstance(value, decimal.Decimal):
        return float(value)
    return value


def test_pandas_read_sql_table(engine, plain):
    # The released table (the views and release_info are read through SQLAlchemy above; pandas reflects each
    # relation again, which costs a third of a second).  pandas takes SQLAlchemy engines only from the version it
    # names (a BI tool's own stack, SQLAlchemy 1.4, pairs with an older pandas).
    from pandas.compat._optional import VERSIONS
    from pandas.util.version import Version
    if Version(sqlalchemy.__version__) < Version(VERSIONS["sqlalchemy"]):
        pytest.skip(f"pandas {pd.__version__} reads through SQLAlchemy {VERSIONS['sqlalchemy']} or newer")
    frame = pd.read_sql_table(TABLE, engine)
    relation = plain.relations[TABLE]
    assert list(frame.columns) == relation.columns
    read = Counter(tuple(normalized(v) for v in row) for row in frame.itertuples(index=False, name=None))
    assert read == Counter(tuple(normalized(v) for v in row) for row in relation.rows)


def test_bi_connection_cannot_change_the_release(release):
    before = hashlib.sha256(release.read_bytes()).hexdigest()
    engine = sqlalchemy.create_engine(f"duckdb:///{release}?access_mode=read_only")
    try:
        with engine.connect() as connection:
            sqlalchemy.inspect(connection).get_columns(TABLE)
            with pytest.raises(sqlalchemy.exc.DBAPIError, match="read-only"):
                connection.execute(sqlalchemy.delete(sqlalchemy.table(TABLE)))
    finally:
        engine.dispose()
    assert hashlib.sha256(release.read_bytes()).hexdigest() == before
    assert sorted(p.name for p in release.parent.iterdir() if p.name.startswith(release.name)) == [release.name]
