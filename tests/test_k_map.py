"""Issue 26: k-map estimated from the population's size, as ARX's ``KMap(k, significance, population, estimator)``.

Yardsticks: the estimators' quantiles computed by hand and by scipy's Poisson distribution (independent of our
arithmetic), ARX's own k-map test cases (their k' on Adult), and pandas group-bys of what is released."""

from __future__ import annotations

import io
import json
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest

from duckanon import Hierarchy, KAnonymity, KMap, Policy, PolicyError
from duckanon.cli import main, run
from duckanon.datasets import ADULT_COMPLETE_RECORDS
from duckanon.privacy.models import DataFacts, derived_k
from search_data import setup_table

# ARX's ARXPopulationModel.Region.USA, from which its k-map test cases estimate.
USA = 317_238_626


def resolved(model: KMap, records: int) -> int:
    return model.for_data(DataFacts(records=records)).minimum_size


def test_derived_k_by_hand():
    """k = 30, 100 of 1,000 records: Poisson mean 3.  P(X <= 7) = 0.9881, P(X <= 8) = 0.9962: the Poisson estimator's
    first m reaching 0.99 is 8, k' = 8 + 2 = 10; zero-truncated, (0.9881 - 0.0498) / 0.9502 = 0.9875 and
    (0.9962 - 0.0498) / 0.9502 = 0.9960 give m = 8, k' = 8 + 1 = 9."""
    assert resolved(KMap(30, 1_000, 0.01, "poisson"), 100) == 10
    assert resolved(KMap(30, 1_000, 0.01, "zero-truncated-poisson"), 100) == 9


def test_derived_k_of_arxs_adult_cases():
    """ARX's TestAnonymizationKMap cases #0 and #1 on Adult (30,162 of the USA's records, zero-truncated, 1 %): the
    optima ARX's tests expect are the 2- and 3-anonymous ones (benchmarks/results/arx_cases.md)."""
    assert resolved(KMap(3, USA), ADULT_COMPLETE_RECORDS) == 2
    assert resolved(KMap(1000, USA), ADULT_COMPLETE_RECORDS) == 3


@pytest.mark.parametrize("estimator", ["poisson", "zero-truncated-poisson"])
def test_derived_k_matches_scipys_poisson_quantiles(estimator):
    stats = pytest.importorskip("scipy.stats")
    rng = np.random.default_rng(26)
    for _ in range(300):
        k = int(rng.integers(1, 200))
        records = int(rng.integers(1, 5_000))
        population = records * int(rng.integers(1, 2_000))
        significance = float(rng.choice([0.001, 0.01, 0.05, 0.2]))
        mean = k * records / population
        if estimator == "poisson":
            cumulative = [stats.poisson.cdf(m, mean) for m in range(k)]
            first = next((m for m in range(k) if cumulative[m] >= 1 - significance), k - 1)
            expected = first + 2
        else:
            zero = stats.poisson.pmf(0, mean)
            truncated = [(stats.poisson.cdf(m, mean) - zero) / (1 - zero) for m in range(1, max(k, 2))]
            first = next((m for m, c in enumerate(truncated, start=1) if c >= 1 - significance), max(k - 1, 1))
            expected = first + 1
        assert derived_k(k, records / population, significance, estimator, records) == min(k, records, expected), \
            (k, records, population, significance)


def test_k_prime_never_exceeds_k_or_the_records():
    assert resolved(KMap(5, 10, 0.01, "poisson"), 10) == 5  # the whole population sampled: k itself
    assert resolved(KMap(50, 100, 0.01, "poisson"), 20) == 20


@pytest.mark.parametrize("make, message", [
    (lambda: KMap(0, 100), "k-map: k must be a whole number of at least 1"),
    (lambda: KMap(5, 0), "k-map: population_size must be a whole number of at least 1"),
    (lambda: KMap(5, 100, 0), r"k-map: significance must lie in \(0, 1\)"),
    (lambda: KMap(5, 100, 1), r"k-map: significance must lie in \(0, 1\)"),
    (lambda: KMap(5, 100, float("nan")), r"k-map: significance must lie in \(0, 1\)"),
    (lambda: KMap(5, 100, 0.01, "binomial"), "estimator must be one of zero-truncated-poisson, poisson, got 'binomial'"),
])
def test_bad_k_map_parameters(make, message):
    with pytest.raises(PolicyError, match=message):
        make()


FRAME = pd.DataFrame({"age": np.random.default_rng(7).integers(20, 80, 600),
                      "sex": np.random.default_rng(8).choice(["f", "m"], 600),
                      "disease": np.random.default_rng(9).choice(["flu", "cold", "asthma"], 600)})
AGES = Hierarchy.intervals(range(20, 80), widths=[5, 10, 20, 60])
SEXES = Hierarchy([["f", "*"], ["m", "*"]])


@pytest.fixture
def anon():
    con, anonymizer = setup_table(FRAME)
    con.execute("ALTER TABLE t RENAME TO people")
    yield anonymizer
    con.close()


def policy(model) -> Policy:
    return Policy(quasi_identifiers={"age": AGES, "sex": SEXES}, models=[model], others="insensitive",
                  suppression_limit=0.02)


def test_a_population_smaller_than_the_data_is_refused_before_anything_is_written(anon, tmp_path):
    with pytest.raises(PolicyError, match=r"k-map: population_size=500 is smaller than the data \(600 records\)"):
        anon.anonymize("people", policy(KMap(5, 500)), tmp_path / "release.duckdb")
    assert not list(tmp_path.iterdir())


def test_the_search_enforces_k_prime_exactly_as_k_anonymity_with_it(anon, tmp_path):
    """k = 60 for 600 of 6,000 people: mean 6, k' = 14 (Poisson, 1 %).  The optimum equals k-anonymity with k = 14's,
    and a pandas group-by of the release finds no class below 14 (one of the classes is below 60)."""
    k_map = KMap(60, 6_000, 0.01, "poisson")
    assert resolved(k_map, 600) == 14
    by_map = anon.search("people", policy(k_map))
    by_k = anon.search("people", policy(KAnonymity(14)))
    assert by_map.levels == by_k.levels and by_map.best.suppressed == by_k.best.suppressed
    _, release = anon.anonymize("people", policy(k_map), tmp_path / "release.parquet")
    path = release.path
    released = duckdb.sql(f"SELECT * FROM read_parquet('{path}')").df()
    sizes = released[released["age"] != "*"].groupby(["age", "sex"]).size()
    assert sizes.min() >= 14 and sizes.min() < 60


def test_a_source_encoded_once_searches_with_the_policy_it_was_encoded_for(anon):
    """The bound policy holds k' and the records it came from; the caller's policy does not, yet it is the same."""
    chosen = policy(KMap(60, 6_000, 0.01, "poisson"))
    encoded = anon.encode("people", chosen)
    assert anon.search(encoded, chosen).levels == anon.search("people", policy(KAnonymity(14))).levels
    with pytest.raises(PolicyError, match="encoded for another policy"):
        anon.search(encoded, policy(KMap(60, 7_000, 0.01, "poisson")))


def test_the_cli_takes_k_map_and_records_it(tmp_path):
    out, release = io.StringIO(), tmp_path / "adult.duckdb"
    code = run(["-k", "1", "--k-map", f"1000:{USA}", "-o", str(release)], out=out)
    assert code == 0, out.getvalue()
    with duckdb.connect(str(release), read_only=True) as con:
        models = json.loads(con.execute("SELECT policy FROM release_info").fetchone()[0])["models"]
        smallest = con.execute("SELECT smallest_class FROM release_info").fetchone()[0]
    [k_map] = [m for m in models if m["model"] == "k-map"]
    assert k_map["params"] == {"k": 1000, "population_size": USA, "significance": 0.01,
                               "estimator": "zero-truncated-poisson", "sample_records": ADULT_COMPLETE_RECORDS}
    assert smallest >= 3


def test_the_cli_names_a_malformed_k_map(tmp_path, capsys):
    assert main(["--k-map", "5:a", "-o", str(tmp_path / "x.duckdb")]) == 2
    assert "argument --k-map: 'a' is not a whole number in '5:a' (expected K[:POPULATION[:SIGNIFICANCE[:" in \
        capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_the_shell_macros_derive_the_same_k_prime():
    """sql/duckanon.sql's anon__derived_k, which anon_verify uses, against the Python definition on a grid."""
    con = duckdb.connect()
    con.execute((Path(__file__).parents[1] / "sql" / "duckanon.sql").read_text(encoding="utf-8"))
    rng = np.random.default_rng(27)
    for estimator in ("poisson", "zero-truncated-poisson"):
        for _ in range(100):
            k, records = int(rng.integers(1, 300)), int(rng.integers(1, 3_000))
            population, significance = records * int(rng.integers(1, 500)), float(rng.choice([0.01, 0.05, 0.3]))
            [(sql,)] = con.execute("SELECT anon__derived_k(?, ?, ?, ?, ?)",
                                   [k, records, population, significance, estimator]).fetchall()
            assert sql == derived_k(k, records / population, significance, estimator, records), \
                (k, records, population, significance, estimator)
