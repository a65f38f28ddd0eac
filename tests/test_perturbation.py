"""Perturbation (seed 004's synthesis with rank re-association, noise baselines, randomized response): checked against
the paper's worked example, hand-computed distribution functions and plain pandas/NumPy computations of the release."""

from __future__ import annotations

import json
import re

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot.errors import ErrorLevel

import duckanon
from duckanon import (
    AdditiveNoise,
    AnonymizationError,
    EmpiricalSynthesis,
    PolicyError,
    RandomizedResponse,
)
from duckanon.engine import DuckDBEngine
from duckanon.perturb import perturbation
from duckanon.perturb.perturbation import KEYS, reassociate_by_rank, stable_argsort
from duckanon.release.files import read_release_info
from duckanon.sqlgen import build as sb


def read(path, table="release") -> pd.DataFrame:
    with duckdb.connect(str(path), read_only=True, config={"python_enable_replacements": False}) as reader:
        return reader.execute(f'SELECT * FROM "{table}"').df()


def info(path) -> dict:
    return read_release_info(path)


def people(n=3000, seed=0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame({
        "id": np.arange(n), "age": rng.integers(18, 90, n).astype(np.int32),
        "income": rng.lognormal(10, 0.6, n), "score": rng.normal(0, 1, n).round(2),
        "disease": rng.choice(["flu", "cold", "asthma", "hiv"], n, p=[0.4, 0.3, 0.2, 0.1]),
        "label": rng.choice(["yes", "no"], n)})


@pytest.fixture
def con():
    con = duckdb.connect()
    frame = people()
    con.register("frame", frame)
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    con.unregister("frame")
    return con


def source(con) -> pd.DataFrame:
    return con.execute("SELECT * FROM people").df()


def joined(con, path) -> pd.DataFrame:
    """Each released record beside its source record (by the kept ``id``)."""
    return source(con).merge(read(path), on="id", suffixes=("", "_released"), validate="one_to_one")


# ------------------------------------------------------------------ the paper's method, by hand
def test_the_papers_worked_example():
    """Section 2: columns (2 6 3 9 7) and (4 7 1 6 8) with labels (0 1 1 0 0); new values Y1 = (1 2 8 7 5) and
    Y2 = (3 4 6 9 5).  The paper prints the result as rows (1,4,0) (2,3,1) (8,5,0) (7,9,0) (5,6,1) listed in the
    order of the first column's ranks 1, 2, 5, 4, 3 — i.e. original records 1, 3, 4, 5, 2."""
    first, second, label = np.array([2, 6, 3, 9, 7.0]), np.array([4, 7, 1, 6, 8.0]), np.array([0, 1, 1, 0, 0])
    new_first = reassociate_by_rank(first, np.array([1, 2, 8, 7, 5.0]))
    new_second = reassociate_by_rank(second, np.array([3, 4, 6, 9, 5.0]))
    printed_order = [0, 2, 3, 4, 1]
    result = np.column_stack([new_first, new_second, label])[printed_order]
    assert result.tolist() == [[1, 4, 0], [2, 3, 1], [8, 5, 0], [7, 9, 0], [5, 6, 1]]


def test_distribution_function_by_hand():
    values = np.array([0, 0, 1, 2, 2, 2, 10.0])
    points, cdf = EmpiricalSynthesis(3).distribution(values)
    # x = (0, 5, 10); n1 = #{<= 0} = 2, n2 = #(0, 5] = 4, n3 = #(5, 10] = 1.
    assert points.tolist() == [0, 5, 10] and np.allclose(cdf, [2 / 7, 6 / 7, 1])
    points, cdf = EmpiricalSynthesis(6).distribution(values)
    # x = (0, 2, 4, 6, 8, 10); counts 2, 4, 0→1, 0→1, 0→1, 1 (empty bins smoothed to 1), total 10.
    assert points.tolist() == [0, 2, 4, 6, 8, 10] and np.allclose(cdf, [0.2, 0.6, 0.7, 0.8, 0.9, 1.0])


def test_draws_follow_the_distribution_function():
    rng = np.random.default_rng(5)
    values = np.concatenate([rng.uniform(0, 10, 3000), np.zeros(1000), rng.uniform(30, 40, 1000)])
    method = EmpiricalSynthesis(9)
    points, cdf = method.distribution(values)
    draws = method.draw_sorted(values, np.random.default_rng(1))
    assert np.all(np.diff(draws) >= 0) and len(draws) == len(values)
    assert draws.min() == points[0] and draws.max() <= points[-1]
    # The empirical distribution of the draws at the division points, and at midpoints (F is linear in between).
    below = np.searchsorted(draws, points, side="right") / len(draws)
    assert np.max(np.abs(below - cdf)) < 0.02
    midpoints = (points[:-1] + points[1:]) / 2
    linear = (cdf[:-1] + cdf[1:]) / 2
    assert np.max(np.abs(np.searchsorted(draws, midpoints, side="right") / len(draws) - linear)) < 0.02
    # The point mass at the minimum has probability F(x_1) = n_1 / Σ n.
    assert abs(np.mean(draws == points[0]) - cdf[0]) < 0.02


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.integers(-3, 3), st.integers(0, 100_000), st.floats(-1e9, 1e9)), min_size=1,
                max_size=60))
def test_stable_argsort_is_numpys_stable_argsort(values):
    values = np.array(values, dtype=float)
    assert np.array_equal(stable_argsort(values), np.argsort(values, kind="stable"))


# ------------------------------------------------------------------ releases
def test_synthesis_release_keeps_ranks_and_labels(con, tmp_path):
    path = tmp_path / "synth.duckdb"
    release = duckanon.connect(con).perturb("people", path, method=EmpiricalSynthesis(bins=25),
                                            numeric=["age", "income", "score"], insensitive=["id", "disease", "label"],
                                            seed=11)
    both = joined(con, path)
    assert len(both) == release.records == 3000
    assert list(read(path).columns) == list(source(con).columns)
    for column in ["age", "income", "score"]:
        released, original = both[f"{column}_released"], both[column]
        assert released.dtype == np.float64
        # Rank re-association: a smaller original value never gets a larger new value.
        assert both.sort_values([column, f"{column}_released"])[f"{column}_released"].is_monotonic_increasing
        assert original.min() <= released.min() and released.max() <= original.max()
        assert (released != original).mean() > 0.5
    # Columns that are not private stay with their record.
    assert (both["label"] == both["label_released"]).all() and (both["disease"] == both["disease_released"]).all()
    facts = info(path)
    assert facts["kind"] == "perturbation" and facts["source_records"] == facts["released_records"]
    assert facts["transformation"]["perturbation"] == {c: {"method": "empirical-synthesis", "bins": 25}
                                                       for c in ["age", "income", "score"]}
    assert "seed" not in str(facts) and "11" not in json.dumps(facts["transformation"])
    measures = facts["metrics"]["disclosure"]
    assert [row["attribute"] for row in measures["attributes"]] == ["age", "income", "score"]


def test_release_rows_come_in_a_seeded_random_order(con, tmp_path):
    anon = duckanon.connect(con)
    first = read(anon.perturb("people", tmp_path / "a.duckdb", method=EmpiricalSynthesis(10), numeric=["income"],
                              others="insensitive", seed=3, measure=False).path)
    again = read(anon.perturb("people", tmp_path / "b.duckdb", method=EmpiricalSynthesis(10), numeric=["income"],
                              others="insensitive", seed=3, measure=False).path)
    other = read(anon.perturb("people", tmp_path / "c.duckdb", method=EmpiricalSynthesis(10), numeric=["income"],
                              others="insensitive", seed=4, measure=False).path)
    pd.testing.assert_frame_equal(first, again)
    assert not first["income"].equals(other["income"])
    # Rows are not in the source's order, and the seed changes the order.
    assert not first["id"].is_monotonic_increasing and not first["id"].equals(other["id"])
    assert sorted(first["id"]) == list(range(3000))


def test_additive_noise_has_the_asked_signal_to_noise_ratio(con, tmp_path):
    anon = duckanon.connect(con)
    original = source(con)
    for distribution, snr in [("gaussian", 4.0), ("uniform", 0.5)]:
        path = tmp_path / f"{distribution}.duckdb"
        anon.perturb("people", path, method=AdditiveNoise(distribution, snr), numeric=["income", "age"],
                     others="insensitive", seed=2, measure=False)
        both = joined(con, path)
        for column in ["income", "age"]:
            noise = both[f"{column}_released"] - both[column]
            assert abs(original[column].var(ddof=0) / noise.var(ddof=0) / snr - 1) < 0.1
            assert abs(noise.mean()) < 4 * noise.std() / np.sqrt(len(noise))
            if distribution == "uniform":
                half_width = np.sqrt(3 * original[column].var(ddof=0) / snr)
                assert noise.abs().max() <= half_width and noise.abs().max() > 0.95 * half_width
                assert abs(noise.kurt() - (-1.2)) < 0.2  # excess kurtosis of a uniform distribution
            else:
                assert abs(noise.kurt()) < 0.3
        assert (both["label"] == both["label_released"]).all()


def test_randomized_response_keeps_with_probability_keep(con, tmp_path):
    path = tmp_path / "rr.duckdb"
    order = ["asthma", "cold", "flu", "hiv", "measles"]  # 'measles' is in the domain but not in the data
    release = duckanon.connect(con).perturb(
        "people", path, method=AdditiveNoise("gaussian", 10), numeric=["age"], categorical={"disease": order},
        categorical_method=RandomizedResponse(keep=0.6), others="insensitive", seed=8)
    both = joined(con, path)
    kept = both["disease"] == both["disease_released"]
    assert abs(kept.mean() - 0.6) < 4 * np.sqrt(0.6 * 0.4 / len(both))
    changed = both.loc[~kept]
    # A replaced value is one of the other four categories, uniformly: each about a quarter of the replacements.
    shares = changed.groupby("disease")["disease_released"].value_counts(normalize=True)
    assert shares.between(0.25 - 0.08, 0.25 + 0.08).all() and len(shares) == 4 * 4
    assert set(both["disease_released"]) <= set(order) and "measles" in set(both["disease_released"])
    assert info(path)["transformation"]["perturbation"]["disease"] == {"method": "randomized-response", "keep": 0.6,
                                                                 "categories": order}
    row = release.disclosure.attributes.set_index("attribute").loc["disease"]
    assert row["method"] == "randomized-response" and np.isnan(row["spearman"])


def test_categorical_synthesis_releases_codes(con, tmp_path):
    path = tmp_path / "codes.duckdb"
    duckanon.connect(con).perturb("people", path, method=EmpiricalSynthesis(12), categorical=["disease"],
                                  keep=["id", "label"], seed=1)
    both = joined(con, path)
    assert list(read(path).columns) == ["id", "disease", "label"]
    categories = info(path)["transformation"]["perturbation"]["disease"]["categories"]
    assert categories == sorted(["flu", "cold", "asthma", "hiv"])
    code = both["disease"].map({c: i for i, c in enumerate(categories)})
    assert both["disease_released"].between(0, 3).all()
    assert both.assign(code=code).sort_values(["code", "disease_released"])["disease_released"].is_monotonic_increasing


def test_reads_csv_files_and_sources_are_untouched(con, tmp_path):
    csv = tmp_path / "people.csv"
    source(con).to_csv(csv, index=False)
    contents = csv.read_bytes()
    release = duckanon.connect(con).perturb(csv, tmp_path / "from_csv.duckdb", method=EmpiricalSynthesis(5),
                                            numeric=["score"], others="insensitive", seed=0, measure=False)
    released = read(release.path)
    assert release.records == 3000 and sorted(released["id"]) == list(range(3000))
    assert csv.read_bytes() == contents


@settings(max_examples=10, deadline=None)
@given(values=st.lists(st.integers(-5, 5), min_size=2, max_size=40).filter(lambda v: len(set(v)) > 1),
       data=st.data(), bins=st.integers(2, 8), seed=st.integers(0, 2**32))
def test_every_record_accounted_for_and_ranks_kept(tmp_path_factory, values, data, bins, seed):
    """Property: whatever the data, the release has every record once, each label with its record, and every
    attribute's order kept."""
    n = len(values)
    frame = pd.DataFrame({"id": range(n), "x": values,
                          "y": data.draw(st.lists(st.floats(-1e6, 1e6), min_size=n, max_size=n)),
                          "label": data.draw(st.lists(st.sampled_from("ab"), min_size=n, max_size=n))})
    if frame["y"].nunique() < 2:
        frame.loc[0, "y"] = frame["y"].iloc[0] + 1.0
    path = tmp_path_factory.mktemp("property") / "release.duckdb"
    con = duckdb.connect()
    con.register("frame", frame)
    duckanon.connect(con).perturb("frame", path, method=EmpiricalSynthesis(bins), numeric=["x", "y"],
                                  insensitive=["id", "label"], seed=seed, measure=False)
    both = frame.merge(read(path), on="id", suffixes=("", "_released"), validate="one_to_one")
    assert len(both) == n and (both["label"] == both["label_released"]).all()
    for column in ["x", "y"]:
        assert both.sort_values([column, f"{column}_released"])[f"{column}_released"].is_monotonic_increasing


def test_identical_records_each_get_their_own_values(tmp_path):
    """Records identical in every column share a key; each still gets its own new values, ranks kept."""
    con = duckdb.connect()
    frame = pd.DataFrame({"x": [1.0, 1.0, 1.0, 2.0, 2.0, 3.0, 5.0, 5.0], "label": list("aaabbccd")})
    con.register("frame", frame)
    duckanon.connect(con).perturb("frame", tmp_path / "r.duckdb", method=EmpiricalSynthesis(4), numeric=["x"],
                                  insensitive=["label"], seed=5, measure=False)
    released = read(tmp_path / "r.duckdb")
    assert len(released) == 8 and released["x"].nunique() >= 7
    assert released.groupby("label").size().to_dict() == {"a": 3, "b": 2, "c": 2, "d": 1}
    # The three a-records had the smallest values: they hold the three smallest new values, and so on (the last two
    # tie at 5.0, in either order).
    labels = released.sort_values("x")["label"].tolist()
    assert labels[:6] == list("aaabbc") and sorted(labels[6:]) == ["c", "d"]


def test_colliding_first_keys_fall_back_to_both(con, tmp_path, monkeypatch):
    """When records share the first hash (a 64-bit collision, here forced for all), the second one tells them apart."""
    keyed = perturbation.keyed_query

    def colliding(source, columns, seed):
        query = keyed(source, columns, seed)
        query.expressions[1] = sqlglot.exp.alias_(sb.lit(7), KEYS[0], quoted=True)
        return query

    monkeypatch.setattr(perturbation, "keyed_query", colliding)
    duckanon.connect(con).perturb("people", tmp_path / "r.duckdb", method=EmpiricalSynthesis(6), numeric=["income"],
                                  others="insensitive", seed=2, measure=False)
    both = joined(con, tmp_path / "r.duckdb")
    assert len(both) == 3000 and (both["label"] == both["label_released"]).all()
    assert both.sort_values(["income", "income_released"])["income_released"].is_monotonic_increasing


# ------------------------------------------------------------------ column roles
def test_a_column_without_a_role_is_an_error_not_a_release(tmp_path):
    """Issue 12: without keep=, every column not perturbed was released unchanged, a name column included."""
    con = duckdb.connect()
    con.execute("CREATE TABLE clients AS SELECT 'person ' || range AS name, range::DOUBLE AS income, "
                "range % 2 AS label FROM range(50)")
    anon = duckanon.connect(con)
    with pytest.raises(PolicyError, match=r"columns without a role: \['name', 'label'\]"):
        anon.perturb("clients", tmp_path / "r.duckdb", method=EmpiricalSynthesis(4), numeric=["income"], seed=1)
    assert list(tmp_path.iterdir()) == []
    release = anon.perturb("clients", tmp_path / "r.duckdb", method=EmpiricalSynthesis(4), numeric=["income"],
                           identifiers=["name"], insensitive=["label"], seed=1, measure=False)
    assert list(read(release.path).columns) == ["income", "label"]


ROLE_COLUMNS = ("name", "age", "income", "label")


@settings(max_examples=25, deadline=None)
@given(roles=st.fixed_dictionaries({
    "name": st.sampled_from(["identifier", "insensitive", None]),
    "age": st.sampled_from(["identifier", "numeric", "insensitive", None]),
    "income": st.just("numeric"),
    "label": st.sampled_from(["identifier", "categorical", "insensitive", None])}),
    others=st.sampled_from(["error", "drop", "insensitive"]), use_keep=st.booleans())
def test_only_columns_given_a_releasing_role_are_released(tmp_path_factory, roles, others, use_keep):
    """Property: a column is released iff it is perturbed, insensitive (or kept), or named nowhere with
    others='insensitive'; a column named nowhere with others='error' stops the publish, and nothing is written."""
    frame = people(40).rename(columns={"id": "name"})[list(ROLE_COLUMNS)]
    frame["name"] = "person " + frame["name"].astype(str)
    con = duckdb.connect()
    con.register("frame", frame)
    named = {role: [c for c in ROLE_COLUMNS if roles[c] == role]
             for role in ("identifier", "numeric", "categorical", "insensitive")}
    folder = tmp_path_factory.mktemp("roles")
    arguments = dict(method=EmpiricalSynthesis(4), numeric=named["numeric"], categorical=named["categorical"],
                     identifiers=named["identifier"], seed=3, measure=False)
    if use_keep:  # keep= is insensitive= with others='drop'
        arguments["keep"], others = named["insensitive"], "drop"
    else:
        arguments.update(insensitive=named["insensitive"], others=others)
    unnamed = [c for c in ROLE_COLUMNS if roles[c] is None]
    if unnamed and others == "error":
        with pytest.raises(PolicyError, match="columns without a role: " + re.escape(str(unnamed))):
            duckanon.connect(con).perturb("frame", folder / "r.duckdb", **arguments)
        assert list(folder.iterdir()) == []
        return
    release = duckanon.connect(con).perturb("frame", folder / "r.duckdb", **arguments)
    released = [c for c in ROLE_COLUMNS if roles[c] in ("numeric", "categorical", "insensitive")
                or (roles[c] is None and others == "insensitive")]
    table = read(release.path)
    assert list(table.columns) == released
    if "name" in released:  # released only when the user said so: as it is, with its record
        assert sorted(table["name"]) == sorted(frame["name"])
    else:
        assert not set(frame["name"]) & {str(v) for row in table.itertuples(index=False) for v in row}


# ------------------------------------------------------------------ bad input publishes nothing
@pytest.mark.parametrize("make, error, match", [
    (lambda: EmpiricalSynthesis(1), PolicyError, "empirical-synthesis: bins must be a whole number of at least 2"),
    (lambda: EmpiricalSynthesis(2.5), PolicyError, "bins must be a whole number of at least 2, got 2.5"),
    (lambda: AdditiveNoise("gaussian", 0), PolicyError, "additive-noise: snr must be a positive number, got 0"),
    (lambda: AdditiveNoise("uniform", -2), PolicyError, "snr must be a positive number, got -2"),
    (lambda: AdditiveNoise("uniform", float("nan")), PolicyError, "snr must be a positive number, got nan"),
    (lambda: AdditiveNoise("laplace", 1), PolicyError, "noise distribution"),
    (lambda: RandomizedResponse(1.0), PolicyError, r"keep must lie in \[0, 1\), got 1.0 \(.*1 would publish"),
])
def test_bad_parameters(make, error, match):
    with pytest.raises(error, match=match):
        make()


@pytest.fixture
def messy(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE messy AS SELECT * FROM (VALUES (1, 5.0, 'a', 10.0, 1.0), (2, 5.0, 'b', NULL, 2.0), "
                "(3, 5.0, 'c', 30.0, 'inf'::DOUBLE), (4, 5.0, 'a', 20.0, 3.0)) v(id, constant, text, gaps, infinite)")
    return con


@pytest.mark.parametrize("arguments, error, match", [
    (dict(numeric=["constant"]), AnonymizationError, "'constant' is constant"),
    (dict(numeric=["gaps"]), AnonymizationError, "'gaps' has 1 NULL"),
    (dict(numeric=["text"]), AnonymizationError, "'text' is VARCHAR"),
    (dict(numeric=["infinite"]), AnonymizationError, "'infinite' holds 1 infinite"),
    (dict(numeric=["salary"]), PolicyError, r"the perturbation names columns the source does not have: \['salary'\]"),
    (dict(numeric=["id"], categorical=["id"]), PolicyError, "'id' is given two roles: numeric and categorical"),
    (dict(numeric=["id", "id"]), PolicyError, "'id' is named twice as numeric"),
    (dict(numeric=["id"], keep=["id"], others="error"), PolicyError, "'id' is given two roles: numeric and insensitive"),
    (dict(numeric=["id"], identifiers=["id"]), PolicyError, "'id' is given two roles: identifier and numeric"),
    (dict(numeric=["id"], identifiers=["name"]), PolicyError, r"does not have: \['name'\]"),
    (dict(numeric=["id"], identifiers="text"), PolicyError, "identifier takes a list of column names"),
    (dict(numeric=["id"], others="error"), PolicyError,
     r"columns without a role: \['constant', 'text', 'gaps', 'infinite'\]; classify them \(identifiers, numeric"),
    (dict(numeric=["id"], others="keep"), PolicyError, "others must be one of"),
    (dict(numeric=["id"], keep=["text"], insensitive=["gaps"], others="error"), PolicyError, "not both"),
    (dict(numeric=["id"], keep=["text"]), PolicyError, "not both"),
    (dict(numeric=[]), PolicyError, "at least one private attribute"),
    (dict(categorical={"text": ["a", "b"]}), PolicyError, r"missing from its categories: \['c'\]"),
    (dict(categorical=["text"], method=AdditiveNoise("gaussian", 2)), PolicyError, "categorical_method"),
    (dict(numeric=["id"], method=RandomizedResponse(0.5)), PolicyError, "perturbs categories"),
    (dict(numeric=["id"], method=EmpiricalSynthesis(3), seed=-1), PolicyError, "seed"),
    (dict(numeric=["id"], table=""), PolicyError, "table needs a name"),
    (dict(numeric=["id"], known_records=[0]), PolicyError, "known_records"),
])
def test_bad_input_publishes_nothing(messy, tmp_path, arguments, error, match):
    before = messy.execute("SELECT * FROM messy ORDER BY id").df()
    arguments = {"method": EmpiricalSynthesis(4), "seed": 1, "others": "drop", **arguments}
    folder = tmp_path / "out"
    folder.mkdir()
    with pytest.raises(error, match=match):
        duckanon.connect(messy).perturb("messy", folder / "release.duckdb", **arguments)
    assert list(folder.iterdir()) == []
    pd.testing.assert_frame_equal(messy.execute("SELECT * FROM messy ORDER BY id").df(), before)
    leftovers = messy.execute("SELECT table_name FROM duckdb_tables() WHERE table_name LIKE '__duckanon_%'").fetchall()
    assert leftovers == [] and messy.execute("SELECT * FROM duckdb_views() WHERE NOT internal").fetchall() == []


def test_empty_source_publishes_nothing(tmp_path):
    con = duckdb.connect()
    con.execute("CREATE TABLE empty (x DOUBLE, y DOUBLE)")
    with pytest.raises(AnonymizationError, match="at least two"):
        duckanon.connect(con).perturb("empty", tmp_path / "r.duckdb", method=EmpiricalSynthesis(3), numeric=["x"],
                                      insensitive=["y"])
    assert list(tmp_path.iterdir()) == []


def test_a_release_equal_to_the_original_is_refused(con, tmp_path):
    """Noise too weak to change a double (SNR 1e40) would publish the original values: the check refuses it."""
    with pytest.raises(AnonymizationError, match="holds exactly the original values"):
        duckanon.connect(con).perturb("people", tmp_path / "r.duckdb", method=AdditiveNoise("gaussian", 1e40),
                                      numeric=["age"], others="drop", seed=1, measure=False)
    assert list(tmp_path.iterdir()) == []


# ------------------------------------------------------------------ the SQL it runs transpiles
def test_every_statement_transpiles_to_spark(con, tmp_path, monkeypatch):
    statements = []
    original = DuckDBEngine.prepare

    def recording(engine, statement):  # every tree an engine runs is prepared first
        statements.append(statement)
        return original(engine, statement)

    monkeypatch.setattr(DuckDBEngine, "prepare", recording)
    duckanon.connect(con).perturb("people", tmp_path / "r.duckdb", method=EmpiricalSynthesis(5),
                                  numeric=["age", "income"], categorical={"disease": None, "label": ["no", "yes"]},
                                  identifiers=["id"], insensitive=["score"], seed=1, measure=False)
    query = sqlglot.exp.Query
    queries = [s for s in statements
               if isinstance(s, query) or (isinstance(s, sqlglot.exp.Create) and isinstance(s.expression, query))]
    assert len(queries) >= 6
    keyed = [q for q in queries if KEYS[0] in q.sql() and "HASH(" in q.sql()]
    assert keyed, "the keying query ran"
    for statement in queries:
        spark = statement.sql(dialect="spark", unsupported_level=ErrorLevel.RAISE)
        sqlglot.parse_one(spark, read="spark")
