"""Issue 26: δ-presence and k-map counted in a population table, as ARX's ``DPresence`` and ``KMap`` with a research
subset.  Yardsticks: pandas group-bys of the sample and the population generalized by hand, at every node of small
lattices (the search's SQL evaluator) and for the checks and releases; ARX's own cases are in
benchmarks/results/arx_cases.md (every δ-presence and k-map case on Adult gives ARX's optimum)."""

from __future__ import annotations

import io
import json

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import DeltaPresence, DistinctLDiversity, Hierarchy, KAnonymity, KMap, Policy, PolicyError
from duckanon.cli import main, run
from duckanon.cli.parser import build_parser
from duckanon.cli.policy_options import models as models_of
from duckanon.encode.binding import bind
from duckanon.privacy import checks
from duckanon.privacy.classes import Classes
from duckanon.search import run as search_run
from duckanon.sqlgen import build as sb
from duckanon.utility.metrics import Discernibility

ZIPS = ["10001", "10002", "10003", "20001", "20002", "30001"]
AGES = list(range(20, 28))
ZIP_ROWS = [[z, z[:4] + "*", z[:1] + "****", "*"] for z in ZIPS]
AGE_ROWS = [[a, f"{a // 2 * 2}-{a // 2 * 2 + 1}", f"{a // 4 * 4}-{a // 4 * 4 + 3}", "*"] for a in AGES]
SEX_ROWS = [["f", "*"], ["m", "*"]]
HIERARCHIES = {"zip": ZIP_ROWS, "age": AGE_ROWS, "sex": SEX_ROWS}


def people(rng: np.random.Generator, n: int) -> pd.DataFrame:
    return pd.DataFrame({"zip": rng.choice(ZIPS, n), "age": rng.choice(AGES, n), "sex": rng.choice(["f", "m"], n),
                         "disease": rng.choice(["flu", "cold", "asthma"], n)})


def connection(population: pd.DataFrame, sample: pd.DataFrame) -> duckanon.Anonymizer:
    con = duckdb.connect()
    con.register("p", population)
    con.register("s", sample)
    con.execute("CREATE TABLE population AS SELECT zip, age, sex FROM p")
    con.execute("CREATE TABLE people AS SELECT * FROM s")
    return duckanon.connect(con)


def sampled(seed: int, people_: int, share: float) -> tuple[duckanon.Anonymizer, pd.DataFrame, pd.DataFrame] | None:
    """A population of ``people_`` drawn by ``seed`` and a sample of ``share`` of it, in tables ``population`` and
    ``people``; None when the sample is empty."""
    population = people(np.random.default_rng(seed), people_)
    sample = population.sample(frac=share, random_state=seed % 1000)
    return None if sample.empty else (connection(population, sample), population, sample)


def policy(models, **settings_) -> Policy:
    return Policy(quasi_identifiers={q: Hierarchy.from_lists(rows, name=q) for q, rows in HIERARCHIES.items()},
                  models=models, others="insensitive", **settings_)


def generalized(frame: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    out = pd.DataFrame(index=frame.index)
    for q, rows in HIERARCHIES.items():
        out[q] = frame[q].map({row[0]: str(row[levels[q]]) for row in rows})
    return out


def pandas_verdicts(sample: pd.DataFrame, population: pd.DataFrame, levels: dict[str, int], model) -> tuple:
    """(records in violating classes, violating classes, whether a population class holds no sample record) by the
    models' definitions, over pandas group-bys."""
    s = generalized(sample, levels).groupby(list(HIERARCHIES)).size()
    p = generalized(population, levels).groupby(list(HIERARCHIES)).size()
    counted = pd.DataFrame({"s": s}).join(pd.DataFrame({"p": p}), how="left").fillna(0)
    if isinstance(model, DeltaPresence):
        delta = counted["s"] / counted["p"]
        bad = (delta < model.delta_min) | (delta > model.delta_max)
        orphans = model.delta_min > 0 and len(p.index.difference(s.index)) > 0
    else:
        bad, orphans = counted["p"] < model.k, False
    return int(counted["s"][bad].sum()), int(bad.sum()), orphans


def test_delta_presence_and_k_map_by_hand():
    """A population of 10 (zip 10001: 4 people, 10002: 6) and a sample of 3 (two of 10001, one of 10002), on zip
    alone: δ = 2/4 and 1/6; k-map counts 4 and 6.  A third zip in the population, absent from the sample, is a class
    without a sample record: δ-presence with delta_min > 0 cannot hold at its level, whatever is suppressed."""
    population = pd.DataFrame({"zip": ["10001"] * 4 + ["10002"] * 6 + ["20001"] * 2, "age": 20, "sex": "f"})
    sample = population.iloc[[0, 1, 4]].assign(disease="flu")
    anon = connection(population, sample)
    bottom = {"zip": 0, "age": 0, "sex": 0}
    report = anon.check("people", policy([DeltaPresence(0.1, 0.4, "population")], suppression_limit=1.0), bottom)
    assert (report.violating_classes, report.violating_records) == (1, 2)  # 10001: δ = 0.5 > 0.4
    assert report.unmendable == ["delta-presence(delta_min=0.1, delta_max=0.4, population='population')"]
    assert not report.within_limit and "a class of the population holds no record of the data" in report.summary()
    lenient = anon.check("people", policy([DeltaPresence(0.0, 0.5, "population")]), bottom)
    assert lenient.satisfied  # δ = 0 is allowed for 20001, and 0.5, 1/6 lie within
    report = anon.check("people", policy([KMap(5, population="population")], suppression_limit=1.0), bottom)
    assert (report.violating_classes, report.violating_records) == (1, 2)  # 10001 stands for 4 people
    # zip level 2 ("1****", "2****"): 10001 and 10002 merge (δ = 3/10, 10 people); 20001 still has no sample record.
    merged = {"zip": 2, "age": 0, "sex": 0}
    assert anon.check("people", policy([KMap(10, population="population")]), merged).satisfied
    assert anon.check("people", policy([DeltaPresence(0.1, 0.4, "population")]), merged).unmendable
    assert anon.check("people", policy([DeltaPresence(0.1, 0.4, "population")]),
                      {"zip": 3, "age": 0, "sex": 0}).satisfied  # one class: δ = 3/12


@pytest.mark.parametrize("kind", ["sql", "memory"])
@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), people_=st.integers(40, 400), share=st.floats(0.05, 0.9),
       low=st.sampled_from([0.0, 0.05, 0.1, 0.2]), width=st.sampled_from([0.1, 0.3, 0.6]),
       k=st.integers(1, 40))
def test_every_node_of_the_search_counts_as_pandas(kind, seed, people_, share, low, width, k):
    """Each evaluator's verdict and suppressed records at every node of the lattice equal a pandas recount; so does
    whether the suppressed records, starred, satisfy the model (their population: everyone)."""
    drawn = sampled(seed, people_, share)
    if drawn is None:
        return
    anon, population, sample = drawn
    models = [DeltaPresence(low, min(low + width, 1.0), "population"), KMap(k, population="population")]
    for model in models:
        chosen = policy([model], suppression_limit=1.0, suppression="replace-unchecked")
        replaced = policy([model], suppression_limit=1.0)
        for settings_, starred in ((chosen, False), (replaced, True)):
            with bind(anon.workspace, "people", settings_) as bound, \
                    search_run.evaluator(anon.workspace, bound, [Discernibility()], None, kind=kind) as evaluator:
                results = evaluator.evaluate_many(range(evaluator.lattice.size))
                for index, result in enumerate(results):
                    levels = dict(zip(evaluator.lattice.attributes, result.node))
                    records, _, orphans = pandas_verdicts(sample, population, levels, model)
                    assert result.suppressed == records, (model, levels)
                    assert result.within_limit == (not orphans), (model, levels)
                    if starred and result.within_limit and records:
                        everyone = pd.Series({"s": records, "p": len(population)})
                        starred_violates = (everyone["s"] / everyone["p"] < model.delta_min
                                            or everyone["s"] / everyone["p"] > model.delta_max
                                            ) if isinstance(model, DeltaPresence) else everyone["p"] < model.k
                        assert evaluator.satisfies(index) == (not starred_violates), (model, levels)


@pytest.mark.parametrize("suppression", ["replace", "drop", "replace-unchecked"])
def test_a_release_satisfies_delta_presence_by_pandas(tmp_path, suppression):
    rng = np.random.default_rng(11)
    population = people(rng, 2000)
    sample = population.sample(300, random_state=3)
    anon = connection(population, sample)
    model = DeltaPresence(0.05, 0.3, "population")
    result, release = anon.anonymize("people", policy([model], suppression_limit=0.1, suppression=suppression),
                                     tmp_path / "release.parquet")
    released = duckdb.sql(f"SELECT * FROM read_parquet('{release.path}')").df()
    levels = result.levels
    kept = released[released["zip"] != "*"]
    population_classes = generalized(population, levels).groupby(list(HIERARCHIES)).size()
    for key, count in kept.groupby(list(HIERARCHIES)).size().items():
        assert 0.05 <= count / population_classes[key] <= 0.3, key
    assert len(released) == (300 - release.suppressed if suppression == "drop" else 300)
    verification = duckanon.verify(release.path)
    assert verification.holds
    [unchecked] = [c for c in verification.checks if c.holds is None]
    assert unchecked.guarantee.startswith("delta-presence") and "population table" in unchecked.recomputed


def test_the_starred_class_stands_for_the_whole_population():
    """Replace mode checks the suppressed records' own class too: a starred record could be anyone, so its
    population is everyone -- the records of the classes whose δ falls outside [0.06, 0.12], starred, have δ =
    their number / 2,000, below 0.06 (unless 120 or more are suppressed)."""
    rng = np.random.default_rng(5)
    population = people(rng, 2000)
    sample = population.sample(200, random_state=1)
    anon = connection(population, sample)
    levels = {"zip": 3, "age": 0, "sex": 0}
    records, classes, orphans = pandas_verdicts(sample, population, levels, DeltaPresence(0.06, 0.12, "p"))
    assert records and not orphans
    strict = anon.check("people", policy([DeltaPresence(0.06, 0.12, "population")], suppression_limit=1.0), levels)
    assert (strict.violating_records, strict.violating_classes) == (records, classes)
    assert records / 2000 < 0.06 and strict.replaced_class_violates  # 53 records: δ = 0.0265
    relaxed = anon.check("people", policy([DeltaPresence(0.0, 0.12, "population")], suppression_limit=1.0), levels)
    assert relaxed.violating_records and not relaxed.replaced_class_violates


def test_arx_size_first_suppresses_a_population_class_without_records_when_the_policy_bounds_class_size():
    """ARX tests a class's size against the policy's k (or l) before δ-presence: a population class without a sample
    record fails that test and is suppressed at no cost (``HashGroupify.isPrivacyModelFulfilled``), so the zip 20001
    of the population, absent from the sample, fails the node only by duckanon's default order, or when no model of
    the policy bounds class size."""
    population = pd.DataFrame({"zip": ["10001"] * 4 + ["10002"] * 6 + ["20001"] * 2, "age": 20, "sex": "f"})
    sample = population.iloc[[0, 1, 4]].assign(disease="flu")
    anon = connection(population, sample)
    bottom = {"zip": 0, "age": 0, "sex": 0}

    def check(*models):
        return anon.check("people", policy(list(models), suppression_limit=1.0), bottom)

    arx = DeltaPresence(0.1, 0.5, "population", arx_size_first=True)
    assert check(KAnonymity(1), arx).satisfied
    assert check(KAnonymity(2), arx).violating_records == 1  # 10002's one record: its class is smaller than 2
    assert check(KAnonymity(1), DeltaPresence(0.1, 0.5, "population")).unmendable  # duckanon's order
    assert check(arx).unmendable  # nothing bounds class size: δ-presence is checked first, as in ARX
    assert check(KMap(3, population="population"), arx).unmendable  # a counted k-map has no size bound in ARX
    assert arx.describe() == ("delta-presence(delta_min=0.1, delta_max=0.5, population='population', "
                              "arx_size_first=True)")
    assert "arx_size_first" not in DeltaPresence(0.1, 0.5, "population").params()


@pytest.mark.parametrize("kind", ["sql", "memory"])
@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 2**32 - 1), share=st.floats(0.05, 0.9), low=st.sampled_from([0.05, 0.1, 0.2]),
       k=st.integers(1, 6), diverse=st.booleans())
def test_arx_size_first_at_every_node_counts_as_pandas(kind, seed, share, low, k, diverse):
    """Beside k-anonymity or distinct l-diversity, ARX's order never fails a node for a population class without a
    sample record: each evaluator's suppressed records at every node equal a pandas recount of classes below the
    size bound or outside [δmin, δmax], and every node is within a limit of all records."""
    rng = np.random.default_rng(seed)
    population = people(rng, 300)
    sample = population.sample(frac=share, random_state=seed % 1000)
    anon = connection(population, sample)
    presence = DeltaPresence(low, min(low + 0.4, 1.0), "population", arx_size_first=True)
    bound = DistinctLDiversity("disease", 2) if diverse else KAnonymity(k)
    with bind(anon.workspace, "people", policy([bound, presence], suppression_limit=1.0,
                                               suppression="replace-unchecked")) as bound_source, \
            search_run.evaluator(anon.workspace, bound_source, [Discernibility()], None, kind=kind) as evaluator:
        for result in evaluator.evaluate_many(range(evaluator.lattice.size)):
            levels = dict(zip(evaluator.lattice.attributes, result.node))
            keys = list(HIERARCHIES)
            classes = generalized(sample, levels).assign(disease=sample["disease"]).groupby(keys).agg(
                s=("disease", "size"), distinct=("disease", "nunique"))
            classes = classes.join(generalized(population, levels).groupby(keys).size().rename("p"))
            delta = classes["s"] / classes["p"]
            small = classes["distinct"] < 2 if diverse else classes["s"] < k
            bad = small | (delta < presence.delta_min) | (delta > presence.delta_max)
            assert result.suppressed == int(classes["s"][bad].sum()), levels
            assert result.within_limit, levels


@pytest.mark.parametrize("dialect", ["spark", "postgres"])
def test_population_verdicts_transpile(dialect):
    """The verdicts and the population-only check are standard SQL: they transpile, and DuckDB runs the text it
    generated with the same result."""
    keys = ["q 1", 'q"2']
    sample = sb.table("my sample")
    classes = Classes.of(sample, keys, population=Classes.of(sb.table("my population"), keys, weight="n"))
    models = [DeltaPresence(0.1, 0.5, "p"), KMap(5, population="p")]
    statements = [checks.class_verdicts(classes, models), models[0].population_violations(classes)]
    con = duckdb.connect()
    con.register("my sample", pd.DataFrame({"q 1": [1, 1, 2], 'q"2': ["a", "a", None]}))
    con.register("my population", pd.DataFrame({"q 1": [1, 2, 3], 'q"2': ["a", None, "b"], "n": [4, 10, 2]}))
    for statement in statements:
        duck = sb.to_sql(statement)
        for sql in (sqlglot.transpile(duck, read="duckdb", write=dialect)[0], statement.sql(dialect=dialect)):
            assert isinstance(sqlglot.parse_one(sql, read=dialect), sqlglot.exp.Query)
        again = sqlglot.parse_one(duck, read="duckdb").sql(dialect="duckdb")
        assert sorted(map(str, con.execute(again).fetchall())) == sorted(map(str, con.execute(duck).fetchall()))
    verdicts = {row[0]: row[-3:-1] for row in con.execute(sb.to_sql(statements[0])).fetchall()}
    # (1, 'a'): 2 of 4 people, δ = 0.5 (a bound holds, as ARX), but 4 < 5; (2, NULL): 1 of 10, matched NULL-safe.
    assert verdicts == {1: (False, True), 2: (False, False)}
    assert con.execute(sb.to_sql(statements[1])).fetchall() == [(True,)]  # (3, 'b') holds no sample record


# ------------------------------------------------------------------------------------------------ bad input
@pytest.mark.parametrize("make, message", [
    (lambda: DeltaPresence(0.3, 0.2, "p"), "delta-presence: delta_min=0.3 exceeds delta_max=0.2"),
    (lambda: DeltaPresence(-0.1, 0.2, "p"), "delta-presence: delta_min must lie in"),
    (lambda: DeltaPresence(0.1, 1.5, "p"), "delta-presence: delta_max must lie in"),
    (lambda: DeltaPresence(0.1, 0.2, ""), "delta-presence: population must name a table, view or file"),
    (lambda: DeltaPresence(0.1, 0.2, 7), "delta-presence: population must name a table, view or file"),
    (lambda: KMap(5), "k-map: give either population"),
    (lambda: KMap(5, 1000, population="p"), "k-map: give either population"),
])
def test_bad_population_model_parameters(make, message):
    with pytest.raises(PolicyError, match=message):
        make()


@pytest.fixture
def small():
    rng = np.random.default_rng(8)
    population = people(rng, 500)
    return connection(population, population.sample(100, random_state=2)), population


def test_a_population_missing_a_quasi_identifier_is_named(small, tmp_path):
    anon, _ = small
    anon.con.execute("CREATE TABLE partial AS SELECT zip, sex FROM population")
    with pytest.raises(PolicyError, match=r"the population table 'partial' lacks the quasi-identifiers \['age'\]"):
        anon.anonymize("people", policy([DeltaPresence(0.0, 0.5, "partial")]), tmp_path / "r.duckdb")
    assert not list(tmp_path.iterdir())


def test_a_population_smaller_than_the_data_is_refused(small, tmp_path):
    anon, _ = small
    anon.con.execute("CREATE TABLE few AS SELECT * FROM population LIMIT 50")
    with pytest.raises(PolicyError, match="the population table 'few' holds 50 records, fewer than the data's 100"):
        anon.anonymize("people", policy([KMap(3, population="few")]), tmp_path / "r.duckdb")
    assert not list(tmp_path.iterdir())


def test_a_population_that_lacks_a_record_of_the_data_names_it(small):
    anon, population = small
    first = anon.con.execute("SELECT zip, age, sex FROM people LIMIT 1").fetchone()
    anon.con.execute("CREATE TABLE other AS SELECT * FROM population WHERE NOT (zip = ? AND age = ? AND sex = ?)",
                     list(first))
    with pytest.raises(PolicyError, match=f"the population table 'other' does not hold the data: zip = '{first[0]}', "
                                          f"age = {first[1]}, sex = '{first[2]}' is in"):
        anon.check("people", policy([KMap(3, population="other")]), {"zip": 0, "age": 0, "sex": 0})


def test_two_populations_in_one_policy_are_refused(small):
    anon, _ = small
    anon.con.execute("CREATE TABLE again AS SELECT * FROM population")
    with pytest.raises(PolicyError, match="name different population tables"):
        anon.check("people", policy([KMap(3, population="population"), DeltaPresence(0, 0.5, "again")]),
                   {"zip": 0, "age": 0, "sex": 0})


def test_population_models_need_a_full_domain_generalization(small, tmp_path):
    anon, _ = small
    with pytest.raises(PolicyError, match="only a full-domain generalization recodes alike"):
        anon.mondrian("people", policy([KAnonymity(2), KMap(3, population="population")]), tmp_path / "m.duckdb")
    assert not list(tmp_path.iterdir())


# ------------------------------------------------------------------------------------------------ the CLI
def test_the_cli_takes_delta_presence_and_k_map_with_a_population_file(tmp_path):
    rng = np.random.default_rng(9)
    population = people(rng, 3000)
    population[["zip", "age", "sex"]].to_csv(tmp_path / "population.csv", index=False)
    population.sample(400, random_state=4).to_csv(tmp_path / "sample.csv", index=False)
    hierarchies = tmp_path / "h"
    hierarchies.mkdir()
    for q, rows in HIERARCHIES.items():
        pd.DataFrame(rows).to_csv(hierarchies / f"{q}.csv", sep=";", header=False, index=False)
    out, release = io.StringIO(), tmp_path / "release.duckdb"
    code = run([str(tmp_path / "sample.csv"), "--hierarchies", str(hierarchies), "--qi", "zip", "--qi", "age",
                "--qi", "sex", "--insensitive", "disease", "--population", str(tmp_path / "population.csv"),
                "--delta-presence", "0.05:0.3", "--k-map", "20", "--suppression-limit", "0.1", "-o", str(release)],
               out=out)
    assert code == 0, out.getvalue()
    with duckdb.connect(str(release), read_only=True) as con:
        models = json.loads(con.execute("SELECT policy FROM release_info").fetchone()[0])["models"]
    assert [m["model"] for m in models] == ["k-map", "delta-presence"]
    assert models[1]["params"] == {"delta_min": 0.05, "delta_max": 0.3, "population": str(tmp_path / "population.csv")}


def test_the_cli_names_arx_size_first_order(tmp_path, capsys):
    assert main(["--population", "p.csv", "--delta-presence", "0.1:0.2:first", "-o", str(tmp_path / "x.duckdb")]) == 2
    assert "expected MIN:MAX[:arx], got '0.1:0.2:first'" in capsys.readouterr().err
    args = build_parser().parse_args(["check", "--population", "p.csv", "--delta-presence", "0.05:0.3:arx", "-k", "2"])
    assert models_of(args)[-1] == DeltaPresence(0.05, 0.3, "p.csv", arx_size_first=True)
    assert not list(tmp_path.iterdir())


def test_the_cli_asks_for_the_population(tmp_path, capsys):
    assert main(["--delta-presence", "0.1:0.2", "-o", str(tmp_path / "x.duckdb")]) == 2
    assert "--delta-presence and --k-map K (without a population size) need --population" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())
