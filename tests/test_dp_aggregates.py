"""Differentially private aggregates through OpenDP: each mechanism's calibration against its closed form, its
noise's distribution (OpenDP's sampler is not seeded: the thresholds are at p = 1e-6), the budget they spend, the
refusals, the command line and the report's noisy class sizes."""

from __future__ import annotations

import math
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pytest
from search_data import adult_setup

from duckanon import KAnonymity, Policy
from duckanon.aggregate import private
from duckanon.errors import PolicyError

dp = pytest.importorskip("opendp.prelude")

# χ² critical values at p = 1e-6 by degrees of freedom.
CHI2_1E6 = {10: 51.4}


@pytest.fixture(scope="module")
def adult():
    con, anon, hierarchies = adult_setup(["age", "sex", "race", "education"])
    yield con, anon, hierarchies
    con.close()


def test_a_count_is_noised_by_the_discrete_laplace_of_scale_one_over_epsilon(adult):
    """OpenDP's calibration of a count at ε gives the scale 1/ε (sensitivity 1); 20,000 draws of its noise follow
    the discrete Laplace law P(k) ∝ exp(−|k|/b) (χ² over −4…4 and the two tails)."""
    query = private.Query.checked("count", None, None, None, 0.5, 0.0, "laplace")
    noise, scale = private._counting(private._opendp(), query, 20_000, 0.5, 0.0)
    assert scale == pytest.approx(2.0, rel=1e-6)
    drawn = noise(np.zeros(20_000, dtype=np.int64))
    weights = {k: math.exp(-abs(k) / scale) for k in range(-200, 201)}
    total = sum(weights.values())
    bins = list(range(-4, 5))
    expected = [sum(w for k, w in weights.items() if k < -4) / total, *(weights[k] / total for k in bins),
                sum(w for k, w in weights.items() if k > 4) / total]
    observed = [np.sum(drawn < -4), *(np.sum(drawn == k) for k in bins), np.sum(drawn > 4)]
    chi2 = sum((o - 20_000 * e) ** 2 / (20_000 * e) for o, e in zip(observed, expected))
    assert chi2 < CHI2_1E6[10]


def test_the_gaussian_mechanism_meets_its_epsilon_and_delta_and_no_smaller_scale_does(adult):
    """The scale OpenDP finds for a count at (ε, δ) = (1, 1e-6): its privacy map is within (ε, δ), a scale 1 %
    smaller is not; the draws' standard deviation is the scale's."""
    opendp = private._opendp()
    domain = opendp.vector_domain(opendp.atom_domain(T=int), size=1)
    query = private.Query.checked("count", None, None, None, 1.0, 1e-6, "gaussian")
    _, scale = private._counting(opendp, query, 1, 1.0, 1e-6)

    def epsilon_at(s: float) -> float:
        measurement = opendp.c.make_fix_delta(opendp.c.make_zCDP_to_approxDP(
            opendp.m.make_gaussian(domain, opendp.l2_distance(T=int), s)), 1e-6)
        return measurement.map(1)[0]

    assert epsilon_at(scale) <= 1.0 < epsilon_at(scale * 0.99)
    many, _ = private._counting(opendp, query, 20_000, 1.0, 1e-6)
    drawn = many(np.zeros(20_000, dtype=np.int64))
    assert np.std(drawn) == pytest.approx(scale, rel=0.05)


def test_each_statistic_is_the_true_one_within_its_noise_and_spends_its_budget(adult):
    con, anon, _ = adult
    truth = con.execute("SELECT count(*), sum(least(greatest(age, 20), 60)), "
                        "count(*) FILTER (WHERE race = 'White'), count(*) FILTER (WHERE race = 'Black') "
                        "FROM adult").fetchall()[0]
    count = anon.dp_aggregate("adult", "count", epsilon=1.0)
    assert abs(count["value"][0] - truth[0]) <= 30 and count["scale"][0] == pytest.approx(1.0)
    summed = anon.dp_aggregate("adult", "sum", column="age", bounds=(20, 60), epsilon=1.0)
    assert summed["scale"][0] == pytest.approx(60.0)  # max(|20|, |60|) / ε: unbounded differential privacy
    assert abs(summed["value"][0] - truth[1]) <= 30 * 60
    histogram = anon.dp_aggregate("adult", "histogram", column="race", categories=["White", "Black"], epsilon=2.0)
    assert list(histogram["race"]) == ["White", "Black", "(other)"]
    assert np.all(np.abs(histogram["value"].to_numpy() - [truth[2], truth[3], truth[0] - truth[2] - truth[3]]) <= 15)
    mean = anon.dp_aggregate("adult", "mean", column="age", bounds=(20, 60), epsilon=2.0)
    assert 20 <= mean["value"][0] <= 60 and abs(mean["value"][0] - truth[1] / truth[0]) < 1
    assert mean["scale"][0] == pytest.approx(60.0) and mean["count_scale"][0] == pytest.approx(1.0)  # ε/2 each
    spent = anon.privacy_spent("adult")
    assert list(spent["epsilon"]) == [1.0, 1.0, 2.0, 2.0]
    assert spent["output"][2] == "laplace histogram of race (ε = 2, δ = 0)"


@pytest.mark.parametrize("options, message", [
    ({"statistic": "sum", "column": "age", "epsilon": 1.0}, "give bounds"),
    ({"statistic": "mean", "column": "age", "bounds": (60, 20), "epsilon": 1.0}, "low < high"),
    ({"statistic": "histogram", "column": "race", "epsilon": 1.0}, "give categories"),
    ({"statistic": "count", "epsilon": 0.0}, "epsilon"),
    ({"statistic": "count", "epsilon": math.inf}, "epsilon"),
    ({"statistic": "count", "epsilon": 1.0, "mechanism": "gaussian"}, "needs a delta"),
    ({"statistic": "count", "epsilon": 1.0, "delta": 1e-6}, "spends no delta"),
    ({"statistic": "count", "epsilon": 1.0, "delta": 1.0, "mechanism": "gaussian"}, "delta"),
    ({"statistic": "median", "epsilon": 1.0}, "unknown statistic"),
    ({"statistic": "sum", "column": "race", "bounds": (0, 1), "epsilon": 1.0}, "not numeric"),
    ({"statistic": "sum", "column": "nope", "bounds": (0, 1), "epsilon": 1.0}, "no column 'nope'"),
])
def test_bad_input_is_refused_by_name_and_spends_nothing(tmp_path, options, message):
    con, anon, _ = adult_setup([])
    with pytest.raises(PolicyError, match=message):
        anon.dp_aggregate("adult", **options)
    assert anon.privacy_spent().empty
    con.close()


def test_an_aggregate_past_the_budget_is_refused_naming_what_was_spent():
    con, anon, _ = adult_setup([])
    anon.set_privacy_budget("adult", 1.0)
    anon.dp_aggregate("adult", "count", epsilon=0.75)
    with pytest.raises(PolicyError, match=r"1 output already spent ε = 0.75, δ = 0 of the budget ε = 1"):
        anon.dp_aggregate("adult", "count", epsilon=0.5)
    assert len(anon.privacy_spent("adult")) == 1
    con.close()


def test_the_command_line_prints_a_noisy_histogram_and_keeps_the_ledger(tmp_path):
    cli = [str(Path(sys.executable).with_name("duckanon"))]
    ledger = tmp_path / "ledger.duckdb"
    done = subprocess.run([*cli, "aggregate", "--statistic", "histogram", "--column", "sex", "--categories",
                           "Male,Female", "--epsilon", "1", "--ledger", str(ledger)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0, done.stderr
    lines = done.stdout.splitlines()
    assert lines[0].split() == ["sex", "value", "scale", "accuracy"]
    assert [line.split()[0] for line in lines[1:]] == ["Male", "Female", "(other)"]
    shown = subprocess.run([*cli, "budget", "--ledger", str(ledger)], capture_output=True, text=True, timeout=300)
    assert "adult (bundled): no budget declared; spent ε = 1, δ = 0 in 1 output" in shown.stdout


def test_the_report_shows_the_source_s_class_sizes_with_noise(adult, tmp_path):
    """The report's noisy class-size counts: per bucket within 14 scales of the true count of the source's classes
    (pandas), the scale 2/ε (one record moves one class between buckets); the spend is in the ledger.  Laplace noise
    strays beyond t scales with chance e^-t: on one of 8 buckets, 2 % for 6 scales, 7 in a million for 14."""
    con, anon, hierarchies = adult
    _, release = anon.anonymize("adult", Policy(hierarchies, [KAnonymity(5)], suppression_limit=0.05, others="drop"),
                                tmp_path / "k.duckdb")
    before = len(anon.privacy_spent("adult"))
    release.report(tmp_path / "k.html", noise_epsilon=0.5, tables=tmp_path / "figures.duckdb")
    with duckdb.connect(str(tmp_path / "figures.duckdb"), read_only=True) as figures:
        noisy = figures.execute("SELECT * FROM report_noisy_class_sizes").df()
    sizes = con.execute('SELECT count(*) AS n FROM adult GROUP BY age, sex, race, education').df()["n"]
    buckets = [(1, 1), (2, 2), (3, 4), (5, 9), (10, 19), (20, 49), (50, 99), (100, 10**9)]
    truth = [int(((sizes >= low) & (sizes <= high)).sum()) for low, high in buckets]
    assert noisy["scale"].eq(4.0).all()
    assert np.all(np.abs(noisy["classes"].to_numpy() - truth) <= 14 * 4.0)
    assert len(anon.privacy_spent("adult")) == before + 1
    assert "The source's classes by size, with differential privacy" in (tmp_path / "k.html").read_text()
