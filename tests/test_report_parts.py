"""The parts a report is made of, against independent computations: distributions counted in SQL against pandas,
the frontier's optima and release class sizes against separate searches and published files read by pandas, a
policy's varied parameter, and opening releases (bad input: one clear error)."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import duckanon
from duckanon import DistinctLDiversity, Hierarchy, KAnonymity, Policy, datasets
from duckanon.engine import as_engine
from duckanon.errors import AnonymizationError, NotARelease, PolicyError
from duckanon.release.files import open_release
from duckanon.risk.counting import class_size_histogram, population_pairs
from duckanon.search.run import frontier
from duckanon.sqlgen import build as sb
from duckanon.utility.distributions import OTHERS, Bins, compare, value_counts

QUASI = ["sex", "age", "race", "marital-status", "education"]


@pytest.fixture(scope="module")
def adult():
    con = duckdb.connect()
    datasets.load_adult(con, "adult")
    yield con
    con.close()


@pytest.fixture(scope="module")
def adult_policy():
    folder = datasets.adult_hierarchy_dir()
    return Policy(quasi_identifiers={q: Hierarchy.from_arx_csv(folder / f"{q}.csv") for q in QUASI},
                  models=[KAnonymity(5)], sensitive=["salary-class"], others="drop", suppression_limit=0.02)


# ------------------------------------------------------------------ distributions
def test_value_counts_of_text_equal_pandas(adult):
    counted = value_counts(as_engine(adult), sb.table("adult"), "race")
    expected = adult.sql("SELECT * FROM adult").df()["race"].value_counts()
    assert dict(zip(counted["value"], counted["records"])) == expected.to_dict()
    assert list(counted["value"]) == sorted(counted["value"])


def test_value_counts_pool_the_rarest_beyond_the_limit(adult):
    counted = value_counts(as_engine(adult), sb.table("adult"), "native-country", most=10)
    expected = adult.sql("SELECT * FROM adult").df()["native-country"].value_counts()
    assert len(counted) == 10 and counted["value"].iloc[-1] == OTHERS
    kept = counted.iloc[:-1]
    assert set(kept["value"]) == set(expected.index[:9])
    assert int(counted["records"].sum()) == int(expected.sum())


@settings(max_examples=30, deadline=None)
@given(st.lists(st.one_of(st.none(), st.floats(-1e4, 1e4, allow_nan=False)), min_size=1, max_size=200),
       st.integers(2, 30))
@example([5e-324], 2)  # one subnormal value: its magnitude underflowed to a bin width of 0
def test_binned_counts_equal_numpy(values, most):
    con = duckdb.connect()
    con.execute("CREATE TABLE t (x DOUBLE)")
    con.executemany("INSERT INTO t VALUES (?)", [[v] for v in values])
    present = np.array([v for v in values if v is not None])
    if len(present) == 0:
        return
    bins = Bins.covering(float(present.min()), float(present.max()), most)
    assert bins.count <= most
    assert bins.low <= present.min() and present.max() < bins.low + bins.width * bins.count + 1e-9
    counted = value_counts(as_engine(con), sb.table("t"), "x", bins=bins)
    expected = np.bincount(np.clip(np.floor((present - bins.low) / bins.width).astype(int), 0, bins.count - 1),
                           minlength=bins.count)
    assert list(counted["records"][:bins.count]) == list(expected)
    assert int(counted["records"].sum()) == len(values)


def test_perturbed_numbers_compare_over_the_same_bins(adult):
    released = duckdb.connect()
    released.execute("CREATE TABLE r AS SELECT age + 0.5 AS age FROM (SELECT * FROM range(30162)) t(i), "
                     "(SELECT 40 AS age)")
    comparison = compare(as_engine(adult), sb.table("adult"), as_engine(released), sb.table("r"), "age")
    assert comparison.aligned
    assert list(comparison.original["value"]) == list(comparison.released["value"])
    assert comparison.total_variation == pytest.approx(
        0.5 * np.abs(comparison.original["records"] / 30162 - comparison.released["records"] / 30162).sum())


# ------------------------------------------------------------------ class sizes
def test_class_size_histogram_equals_pandas(adult):
    sizes, counts = class_size_histogram(as_engine(adult), sb.table("adult"), QUASI)
    frame = adult.sql("SELECT * FROM adult").df()
    expected = frame.groupby(QUASI, dropna=False).size().value_counts().sort_index()
    assert list(sizes) == list(expected.index) and list(counts) == list(expected)


def test_population_pairs_count_each_class_in_the_population():
    con = duckdb.connect()
    con.execute("CREATE TABLE population AS SELECT * FROM (VALUES ('a', 1), ('a', 1), ('a', 1), ('b', 2), "
                "('b', 2), (NULL, 3), (NULL, 3), ('c', 4)) t(q, r)")
    con.execute("CREATE TABLE sample AS SELECT * FROM (VALUES ('a', 1), ('b', 2), ('b', 2), (NULL, 3)) t(q, r)")
    sample, population, classes = population_pairs(as_engine(con), sb.table("sample"), sb.table("population"), ["q"])
    assert sorted(zip(sample, population, classes)) == [(1, 2, 1), (1, 3, 1), (2, 2, 1)]
    con.execute("INSERT INTO sample VALUES ('z', 9)")
    with pytest.raises(AnonymizationError, match="does not contain the sample"):
        population_pairs(as_engine(con), sb.table("sample"), sb.table("population"), ["q"])


# ------------------------------------------------------------------ the frontier
def test_frontier_points_are_the_optima_and_their_releases(adult, adult_policy, tmp_path):
    anon = duckanon.connect(adult)
    points = frontier(anon.workspace, "adult", adult_policy, "k", [2, 10, 50], "loss")
    assert [p.value for p in points] == [2, 10, 50]
    losses = []
    for point in points:
        policy = adult_policy.with_parameter("k", point.value)
        alone = anon.search("adult", policy, metric="loss")
        assert point.levels == alone.levels and point.metric == pytest.approx(alone.best.values["loss"])
        release = anon.publish("adult", policy, point.levels, tmp_path / f"k{point.value}.parquet")
        frame = pd.read_parquet(release.path)
        expected = frame.groupby(QUASI, dropna=False).size().value_counts().sort_index()
        assert list(point.sizes) == list(expected.index) and list(point.counts) == list(expected)
        assert point.suppressed == release.suppressed
        assert point.sizes.min() >= point.value
        losses.append(point.metric)
    assert losses == sorted(losses)  # a larger k never loses less


def test_frontier_marks_values_nothing_satisfies(adult_policy):
    con = duckdb.connect()
    con.execute("CREATE TABLE tiny AS SELECT * FROM (VALUES ('Male', 30, 'White', 'Never-married', 'Bachelors', "
                "'<=50K')) t(sex, age, race, \"marital-status\", education, \"salary-class\")")
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers=adult_policy.quasi_identifiers, models=[KAnonymity(1)],
                    sensitive=["salary-class"], others="drop")
    points = frontier(anon.workspace, "tiny", policy, "k", [1, 2], "dm")
    assert points[0].levels is not None and points[1].levels is None and points[1].metric is None


def test_with_parameter_names_what_is_wrong(adult_policy):
    varied = adult_policy.with_parameter("k", 12)
    assert varied.models[0].k == 12 and adult_policy.models[0].k == 5
    both = Policy(quasi_identifiers={"a": None}, models=[KAnonymity(2), DistinctLDiversity("s", 2)], others="drop")
    assert both.with_parameter("l", 3).models[1].l == 3
    with pytest.raises(PolicyError, match="parameter 't'"):
        adult_policy.with_parameter("t", 0.2)
    with pytest.raises(PolicyError, match="k must be"):
        adult_policy.with_parameter("k", 0)


# ------------------------------------------------------------------ opening releases
def test_open_release_reads_each_format(adult, adult_policy, tmp_path):
    anon = duckanon.connect(adult)
    for name in ("r.duckdb", "r.parquet", "r.csv"):
        release = anon.publish("adult", adult_policy, {q: 1 for q in QUASI}, tmp_path / name, table="people")
        reader, info = open_release(release.path)
        try:
            assert info["released_table"] == "people"
            count = reader.value(exp.select(exp.func("COUNT", exp.Star())).from_(sb.table("people")))
            assert count == release.records_out
        finally:
            reader.close()


def test_open_release_refuses_what_is_not_one(tmp_path):
    plain = tmp_path / "plain.duckdb"
    duckdb.connect(str(plain)).execute("CREATE TABLE t AS SELECT 1 AS a").close()
    with pytest.raises(AnonymizationError, match="no readable release_info"):
        open_release(plain)
    with pytest.raises(AnonymizationError, match="is not a file"):
        open_release(tmp_path / "missing.duckdb")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(NotARelease, match="is not a release: duckanon writes .duckdb"):
        open_release(tmp_path / "notes.txt")
    foreign = tmp_path / "foreign.duckdb"
    con = duckdb.connect(str(foreign))
    con.execute("CREATE TABLE release_info AS SELECT 'other' AS tool, 't' AS released_table")
    con.close()
    with pytest.raises(AnonymizationError, match="does not describe a duckanon release"):
        open_release(foreign)


def test_prosecutor_risk_of_an_encoded_source_equals_pandas(adult, adult_policy):
    anon = duckanon.connect(adult)
    levels = {"sex": 0, "age": 2, "race": 1, "marital-status": 1, "education": 2}
    report = anon.risk("adult", adult_policy, levels, threshold=5)
    frame = adult.sql("SELECT * FROM adult").df()
    maps = {q: {row[0]: row[levels[q]] for row in adult_policy.quasi_identifiers[q].rows} for q in QUASI}
    generalized = pd.DataFrame({q: frame[q].astype(str).map(maps[q]) for q in QUASI})
    assert generalized.notna().all().all()
    sizes = generalized.groupby(QUASI, dropna=False).size()
    assert report.records == len(frame) and report.classes == len(sizes)
    assert report.highest_risk == pytest.approx(1 / sizes.min())
    assert report.average_risk == pytest.approx(len(sizes) / len(frame))
    assert report.records_below_threshold == int(sizes[sizes < 5].sum())
    histogram = sizes.value_counts().sort_index()
    assert list(report.histogram["class_size"]) == list(histogram.index)
    assert list(report.histogram["classes"]) == list(histogram)


def test_class_sizes_of_columns_named_like_the_counts():
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES ('M', 'x'), ('M', 'x'), ('S', 'y')) v(size, population_size)")
    con.execute("CREATE TABLE p AS SELECT * FROM t UNION ALL SELECT * FROM t")
    sizes, counts = class_size_histogram(as_engine(con), sb.table("t"), ["size", "population_size"])
    assert list(sizes) == [1, 2] and list(counts) == [1, 1]
    sample, population, classes = population_pairs(as_engine(con), sb.table("t"), sb.table("p"),
                                                   ["size", "population_size"])
    assert sorted(zip(sample, population, classes)) == [(1, 2, 1), (2, 4, 1)]
