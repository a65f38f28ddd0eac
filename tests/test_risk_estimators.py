"""The re-identification risk estimators of ``duckanon/risk/population.py``.

- against ARX 3.9.2: ``tests/data/arx_risk_reference.json`` holds, for Adult over five quasi-identifier sets and for
  one-column data sets made from a histogram, ARX's population-uniqueness estimates (Pitman, Zayatz, SNB, Dankar and
  the model Dankar's rule chose) under several populations, its sample risks per threshold, and journalist risk of
  every 10th Adult record within all of them (``benchmarks/arx_risk_reference/regenerate.py`` made it);
- small cases worked out by hand, the arithmetic in the test;
- independent computations: Pitman's θ, α by maximizing with SciPy the log-likelihood of Pitman's sampling formula
  written here, SNB's α, β by solving its two equations written here, Zayatz's probabilities from SciPy's
  hypergeometric distribution;
- refused input, and properties that hold for any histogram.
"""

from __future__ import annotations

import json
import math
from fractions import Fraction
from pathlib import Path

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from scipy import optimize, special, stats

from duckanon.errors import AnonymizationError
from duckanon.risk.population import (
    DANKAR,
    PITMAN,
    SNB,
    ZAYATZ,
    ClassSizes,
    dankar_uniqueness,
    journalist_risk,
    marketer_risk,
    pitman_uniqueness,
    population_size_for,
    population_uniqueness,
    prosecutor_risk,
    sample_uniqueness,
    snb_uniqueness,
    zayatz_uniqueness,
)

REFERENCE = json.loads((Path(__file__).parent / "data" / "arx_risk_reference.json").read_text(encoding="utf-8"))
SAMPLES = {case["name"]: case for case in REFERENCE["samples"]}
POPULATION_CASES = [(name, p["population"]) for name, case in SAMPLES.items() for p in case["populations"]]
JOURNALIST = {case["name"]: case for case in REFERENCE["journalist"]}
RELATIVE = 1e-6


def histogram(case: dict) -> ClassSizes:
    return ClassSizes(np.array(case["histogram"]["sizes"]), np.array(case["histogram"]["counts"]))


def close(ours: float, arx: float) -> bool:
    return ours == pytest.approx(arx, rel=RELATIVE, abs=1e-12)


# ------------------------------------------------------------------------------------------------------ ARX cases

@pytest.mark.parametrize("name, population", POPULATION_CASES)
def test_population_uniqueness_equals_arx(name, population):
    case = SAMPLES[name]
    arx = next(p for p in case["populations"] if p["population"] == population)
    sample = histogram(case)
    kind, value = population.split(":")
    if kind == "fraction":
        assert population_size_for(sample, sampling_fraction=float(value)) == arx["population_size"]
    estimates = {e.model: e for e in population_uniqueness(sample, arx["population_size"])}
    for model in (PITMAN, ZAYATZ, SNB, DANKAR):
        ours, theirs = estimates[model], arx[model]
        assert close(ours.uniques, theirs["uniques"]), (model, ours, theirs)
        assert close(ours.share, theirs["share"]), (model, ours, theirs)
        assert ours.applicable == theirs["available"], (model, ours, theirs)
    chosen = estimates[DANKAR].chosen_model
    assert (chosen or DANKAR).upper() == arx["dankar_model"]
    assert [e.model for e in estimates.values() if e.chosen] == ([chosen] if chosen else [])


@pytest.mark.parametrize("name", list(SAMPLES))
def test_dankar_alone_equals_dankar_among_all(name):
    case = SAMPLES[name]
    arx = case["populations"][-1]
    alone = dankar_uniqueness(histogram(case), arx["population_size"])
    assert close(alone.uniques, arx["dankar"]["uniques"])
    assert (alone.chosen_model or DANKAR).upper() == arx["dankar_model"]


def test_the_reference_takes_every_branch_of_dankars_rule():
    """Regenerating the reference must keep a case for each way the rule goes (ARX's own choice is what is read)."""
    branches = set()
    for case in SAMPLES.values():
        n = sum(s * c for s, c in zip(case["histogram"]["sizes"], case["histogram"]["counts"]))
        for p in case["populations"]:
            small = n / p["population_size"] <= 0.1
            branches.add((small, p["dankar_model"], p["pitman"]["available"] if small else p["snb"]["available"]))
    assert {(True, "PITMAN", True), (True, "ZAYATZ", False), (False, "ZAYATZ", True), (False, "SNB", True),
            (False, "ZAYATZ", False), (True, "DANKAR", True), (False, "DANKAR", True)} <= branches


def test_pitmans_fit_without_a_root_is_reported_as_arx_reports_it():
    """48 uniques and 4 classes of 10: neither the closed-form nor the term-by-term equations reach a root from any
    start; ARX reports 0, not available, and Dankar's rule falls back to Zayatz's estimate."""
    case = SAMPLES["histogram 1x48,10x4"]
    arx = case["populations"][0]
    pitman = pitman_uniqueness(histogram(case), arx["population_size"])
    assert not pitman.converged and pitman.parameters == {}
    assert (pitman.uniques, pitman.applicable) == (0.0, False) == (arx["pitman"]["uniques"], arx["pitman"]["available"])
    assert arx["dankar_model"] == "ZAYATZ"


@pytest.mark.parametrize("name", list(SAMPLES))
def test_sample_risks_equal_arx(name):
    case = SAMPLES[name]
    sample, arx = histogram(case), case["sample_risks"]
    assert sample.records == case["records"]
    per_class = np.repeat(sample.sizes, sample.counts)
    for summary in case["summaries"]:
        prosecutor = prosecutor_risk(sample, summary["threshold"])
        theirs = summary["prosecutor"]
        assert close(prosecutor.highest, theirs["highest_risk"])
        assert close(prosecutor.lowest, theirs["lowest_risk"])
        assert close(prosecutor.average, theirs["average_risk"])
        assert close(prosecutor.share_at_risk, theirs["records_at_risk"])
        assert prosecutor.records_at_risk == round(theirs["records_at_risk"] * sample.records)
        # no population table: ARX's journalist and marketer risks take the sample as the population
        journalist = journalist_risk(per_class, per_class, summary["threshold"])
        theirs = summary["journalist"]
        assert close(journalist.highest, theirs["highest_risk"])
        assert close(journalist.lowest, theirs["lowest_risk"])
        assert close(journalist.average, theirs["average_risk"])
        assert close(journalist.share_at_risk, theirs["records_at_risk"])
        assert close(journalist.marketer, summary["marketer"])
    prosecutor = prosecutor_risk(sample, 0.5)
    assert close(prosecutor.highest, arx["highest_risk"]) and close(prosecutor.highest, arx["estimated_prosecutor_risk"])
    assert close(prosecutor.lowest, arx["lowest_risk"])
    assert close(prosecutor.average, arx["average_risk"])
    assert close(marketer_risk(sample), arx["estimated_marketer_risk"])
    uniques = sample_uniqueness(sample)
    assert uniques.records == arx["sample_uniques"] and close(uniques.share, arx["sample_uniques_share"])


@pytest.mark.parametrize("name", list(JOURNALIST))
def test_journalist_risk_equals_arx(name):
    case = JOURNALIST[name]
    pairs = np.array(case["pairs"])
    sample_sizes, population_sizes = np.repeat(pairs[:, 0], pairs[:, 2]), np.repeat(pairs[:, 1], pairs[:, 2])
    assert sample_sizes.sum() == case["sample_records"]
    sample = ClassSizes.from_class_sizes(sample_sizes)
    for summary in case["summaries"]:
        ours, theirs = journalist_risk(sample_sizes, population_sizes, summary["threshold"]), summary["journalist"]
        assert close(ours.highest, theirs["highest_risk"])
        assert close(ours.lowest, theirs["lowest_risk"])
        assert close(ours.average, theirs["average_risk"])
        assert close(ours.share_at_risk, theirs["records_at_risk"])
        assert close(ours.marketer, summary["marketer"])
        prosecutor = prosecutor_risk(sample, summary["threshold"])
        assert close(prosecutor.highest, summary["prosecutor"]["highest_risk"])
        assert close(prosecutor.average, summary["prosecutor"]["average_risk"])
        assert close(prosecutor.share_at_risk, summary["prosecutor"]["records_at_risk"])


# -------------------------------------------------------------------------------------------------- by hand

def test_zayatz_by_hand():
    """Sizes 1, 2, 3 with 4, 2, 1 classes: n = 4 + 4 + 3 = 11 records, c = 7 classes, N = 20.

    P_i = i·C(N − i, n − 1) / C(N, n), C(20, 11) = 167960:
      P_1 = 1·C(19, 10) / 167960 = 92378 / 167960 = 11/20
      P_2 = 2·C(18, 10) / 167960 = 2·43758 / 167960
      P_3 = 3·C(17, 10) / 167960 = 3·19448 / 167960
    p = (4/7)·P_1 / ((4/7)·P_1 + (2/7)·P_2 + (1/7)·P_3) = 4·92378 / (4·92378 + 2·2·43758 + 3·19448)
    population uniques = f_1 · p / π = 4 · p · 20/11."""
    assert (math.comb(20, 11), math.comb(19, 10), math.comb(18, 10), math.comb(17, 10)) == (167960, 92378, 43758,
                                                                                           19448)
    p = Fraction(4 * 92378, 4 * 92378 + 2 * 2 * 43758 + 3 * 19448)
    estimate = zayatz_uniqueness(ClassSizes(np.array([1, 2, 3]), np.array([4, 2, 1])), 20)
    assert estimate.parameters["conditional_uniqueness"] == pytest.approx(float(p), rel=1e-12)
    assert estimate.uniques == pytest.approx(float(4 * p * Fraction(20, 11)), rel=1e-12)
    assert estimate.share == pytest.approx(float(4 * p * Fraction(20, 11) / 20), rel=1e-12)
    assert estimate.converged and estimate.applicable


def test_zayatz_when_the_sample_is_the_population():
    """π = 1: a sample unique is a population unique (P_1 = 1, P_i = 0 for i > 1), so the estimate is f_1."""
    estimate = zayatz_uniqueness(ClassSizes(np.array([1, 2, 5]), np.array([3, 4, 1])), sampling_fraction=1)
    assert estimate.population_size == 16 and estimate.uniques == pytest.approx(3, rel=1e-12)


def test_sample_risks_by_hand():
    """Classes of 1, 2, 2 and 5 records (n = 10, c = 4), in the population 3, 2, 6 and 10.

    prosecutor: highest 1/1, lowest 1/5, average 4/10; above 0.3 are the classes of 1 and 2 (1 + 2 + 2 = 5 records),
    above 0.5 only the class of 1 (1/2 is not above 0.5).  marketer 4/10; sample uniques 1, a share of 1/10.
    journalist: highest 1/2, lowest 1/10; Σ f/F = 1/3 + 2/2 + 2/6 + 5/10 = 13/6, over n: 13/60, against
    c / Σ F = 4/21: average 13/60; above 0.3 are F = 3 and F = 2 (1 + 2 = 3 records); marketer 13/60."""
    sample = ClassSizes.from_class_sizes([1, 2, 2, 5])
    assert (sample.sizes.tolist(), sample.counts.tolist(), sample.records, sample.classes, sample.uniques) == (
        [1, 2, 5], [1, 2, 1], 10, 4, 1)
    at_03 = prosecutor_risk(sample, 0.3)
    assert (at_03.highest, at_03.lowest, at_03.average, at_03.records_at_risk, at_03.share_at_risk) == (
        1.0, 0.2, 0.4, 5, 0.5)
    assert prosecutor_risk(sample, 0.5).records_at_risk == 1
    assert marketer_risk(sample) == 0.4
    assert (sample_uniqueness(sample).records, sample_uniqueness(sample).share) == (1, 0.1)
    journalist = journalist_risk([1, 2, 2, 5], [3, 2, 6, 10], 0.3)
    assert journalist.highest == 0.5 and journalist.lowest == 0.1
    assert journalist.average == pytest.approx(13 / 60, rel=1e-15) and 13 / 60 > 4 / 21
    assert journalist.marketer == pytest.approx(13 / 60, rel=1e-15)
    assert (journalist.records_at_risk, journalist.share_at_risk) == (3, 0.3)


def test_a_sample_without_uniques_estimates_none():
    sample = ClassSizes(np.array([2, 3]), np.array([10, 5]))
    for estimate in population_uniqueness(sample, 1000):
        assert (estimate.uniques, estimate.share, estimate.applicable, estimate.converged) == (0.0, 0.0, True, True)
    assert dankar_uniqueness(sample, 1000).chosen_model is None


def test_an_empty_sample_has_no_sample_risk():
    empty = ClassSizes.from_class_sizes(np.array([], dtype=np.int64))
    assert (empty.records, empty.classes, empty.uniques) == (0, 0, 0)
    assert prosecutor_risk(empty, 0.2).highest == 0 and marketer_risk(empty) == 0
    assert journalist_risk([], [], 0.2).average == 0
    with pytest.raises(AnonymizationError, match="no records"):
        zayatz_uniqueness(empty, 10)


def test_population_size_from_a_sampling_fraction_rounds_halves_up_as_arx():
    """ARXPopulationModel.create(n, π) is Math.round(n / π): 5 / 0.4 = 12.5 gives 13 (Python's round gives 12)."""
    assert population_size_for(ClassSizes.from_class_sizes([1, 2, 2]), sampling_fraction=0.4) == 13
    assert population_size_for(ClassSizes.from_class_sizes([1, 2, 2]), 5) == 5


# ------------------------------------------------------------------------------------------ independently

def pitman_log_likelihood(theta: float, alpha: float, sizes: np.ndarray, counts: np.ndarray) -> float:
    """Pitman's sampling formula, the terms that depend on θ and α:
    Σ_{k=1}^{c−1} log(θ + kα) − Σ_{k=1}^{n−1} log(θ + k) + Σ_i f_i Σ_{j=1}^{i−1} log(j − α)."""
    c, n = counts.sum(), (sizes * counts).sum()
    k = np.arange(1, c)
    value = np.log(theta + k * alpha).sum() - np.log(theta + np.arange(1, n)).sum()
    return value + sum(f * np.log(np.arange(1, i) - alpha).sum() for i, f in zip(sizes, counts))


def pitman_score(theta: float, alpha: float, sizes: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The log-likelihood's gradient, term by term: (Σ_k 1/(θ + kα) − Σ_k 1/(θ + k),
    Σ_k k/(θ + kα) − Σ_i f_i Σ_j 1/(j − α))."""
    c, n = counts.sum(), (sizes * counts).sum()
    k = np.arange(1, c)
    return np.array([(1 / (theta + k * alpha)).sum() - (1 / (theta + np.arange(1, n))).sum(),
                     (k / (theta + k * alpha)).sum()
                     - sum(f * (1 / (np.arange(1, i) - alpha)).sum() for i, f in zip(sizes, counts))])


@pytest.mark.parametrize("name", ["adult: age, education, marital-status, sex",
                                  "adult: age, workclass, education, marital-status, occupation, race, sex, "
                                  "native-country"])
def test_pitman_parameters_maximize_the_likelihood(name):
    """SciPy's maximum of the likelihood written above, from elsewhere, is ours (and ARX's, whose estimates equal
    ours): the same θ and α, and the population uniques Γ(θ + 1) / Γ(θ + α) · N^α from SciPy's log-gamma."""
    sample = histogram(SAMPLES[name])
    ours = pitman_uniqueness(sample, 10 * sample.records)
    theta, alpha = ours.parameters["theta"], ours.parameters["alpha"]
    assert theta > 0 and 0 < alpha < 1
    found = optimize.minimize(lambda p: -pitman_log_likelihood(*p, sample.sizes, sample.counts),
                              jac=lambda p: -pitman_score(*p, sample.sizes, sample.counts),
                              x0=[theta * 1.5, alpha / 2], method="L-BFGS-B", bounds=[(1e-6, None), (0, 1 - 1e-9)],
                              options={"ftol": 1e-15, "gtol": 1e-12, "maxiter": 10_000})
    assert found.success
    assert found.x[0] == pytest.approx(theta, rel=1e-6) and found.x[1] == pytest.approx(alpha, rel=1e-6)
    assert np.abs(pitman_score(theta, alpha, sample.sizes, sample.counts)).max() <= 1e-6  # ARX's accuracy
    expected = math.exp(special.gammaln(theta + 1) - special.gammaln(theta + alpha)) * ours.population_size ** alpha
    assert ours.uniques == pytest.approx(expected, rel=1e-10)


def snb_equations(parameters, k: float, f: float, c1: float, c2: float) -> list[float]:
    """SNB's equations as written by Chen & Keller-McNulty and ARX, d = (1 − π)(1 − β)."""
    alpha, beta = parameters
    d = (1 - f) * (1 - beta)
    return [k * f * (beta / (1 - d)) ** alpha * (alpha * d / (1 - d) + 1) - c1,
            k * alpha * beta ** alpha * f * f * (1 - beta) / 2 * (1 - d) ** (alpha + 2) * (2 - (1 - alpha) * d) - c2]


@pytest.mark.parametrize("name", ["adult: age, sex, race", "adult: age, education, marital-status, sex"])
def test_snb_parameters_solve_its_equations(name):
    case = SAMPLES[name]
    sample, population = histogram(case), case["populations"][3]["population_size"]
    ours = snb_uniqueness(sample, population)
    assert ours.converged
    f = sample.records / population
    sizes, counts = sample.sizes.astype(float), sample.counts.astype(float)
    k = sample.classes + sample.uniques * (
        (sizes * f**2 * (1 - f**2) ** (sizes - 1) * counts).sum()
        / ((counts * (1 - f) ** sizes * (1 + f) ** sizes - 1).sum())
        * ((counts * (1 - f) ** sizes).sum() / (sizes * f * (1 - f) ** (sizes - 1) * counts).sum()) ** 2)
    assert ours.parameters["population_classes"] == pytest.approx(k, rel=1e-12)
    alpha, beta = optimize.fsolve(snb_equations, [ours.parameters["alpha"] * 1.2, ours.parameters["beta"] * 0.9],
                                  args=(k, f, sample.uniques, sample.count_of_size(2)), xtol=1e-13)
    assert alpha == pytest.approx(ours.parameters["alpha"], rel=1e-6)
    assert beta == pytest.approx(ours.parameters["beta"], rel=1e-6)
    assert ours.uniques == pytest.approx(k * beta**alpha, rel=1e-6)


@pytest.mark.parametrize("name", [n for n in SAMPLES if n.startswith("adult")])
def test_zayatz_with_scipys_hypergeometric_distribution(name):
    sample = histogram(SAMPLES[name])
    if not sample.uniques:
        return
    n, c, population = sample.records, sample.classes, 3 * sample.records
    found_once = stats.hypergeom.pmf(1, population, sample.sizes, n)
    p = sample.uniques / c * found_once[0] / (sample.counts / c * found_once).sum()
    estimate = zayatz_uniqueness(sample, population)
    assert estimate.parameters["conditional_uniqueness"] == pytest.approx(p, rel=1e-9)
    assert estimate.uniques == pytest.approx(sample.uniques * p / (n / population), rel=1e-9)


def test_arx_trigamma_lacks_its_tail_below_12():
    """ARX's digamma is right; its trigamma recurses up to 8 but adds the asymptotic series only from 12, so below 12
    it lacks ψ₁ of where the recurrence stopped (at 8 ≤ x < 12 it is 0).  Pitman's Newton path follows it: with a
    correct trigamma, Adult over age and sex converges to another root (0.078 population uniques at π = 0.01, where
    ARX reports 0.0059), which is why it is reproduced."""
    from duckanon.risk.population import _arx_digamma, _arx_trigamma
    x = np.array([0.5, 3.0, 10.0, 12.0, 50.0, -2.5])
    assert _arx_digamma(x) == pytest.approx(special.digamma(x), rel=1e-13)
    trigamma = special.polygamma(1, x)
    expected = [trigamma[0] - special.polygamma(1, 8.5), trigamma[1] - special.polygamma(1, 8.0), 0.0, trigamma[3],
                trigamma[4], -(special.polygamma(1, 3.5) - special.polygamma(1, 8.5)) + (np.pi / np.sin(2.5 * np.pi)) ** 2]
    assert _arx_trigamma(x) == pytest.approx(expected, rel=1e-13)


# ---------------------------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("call, message", [
    (lambda s: pitman_uniqueness(s, 100), "population size 100 is smaller than the sample's 165 records"),
    (lambda s: zayatz_uniqueness(s, sampling_fraction=0), r"sampling fraction must lie in \(0, 1\], got 0"),
    (lambda s: snb_uniqueness(s, sampling_fraction=1.5), r"sampling fraction must lie in \(0, 1\], got 1.5"),
    (lambda s: dankar_uniqueness(s, sampling_fraction=float("nan")), "sampling fraction .* got nan"),
    (lambda s: population_uniqueness(s), "either a population size or a sampling fraction"),
    (lambda s: population_uniqueness(s, 1000, sampling_fraction=0.1), "either a population size or a sampling"),
    (lambda s: zayatz_uniqueness(s, 1000.0), "population size must be a whole number .* got 1000.0"),
    (lambda s: prosecutor_risk(s, 1.5), r"threshold must lie in \[0, 1\], got 1.5"),
])
def test_bad_population_or_threshold_is_refused(call, message):
    sample = ClassSizes(np.array([1, 2, 3, 5, 10]), np.array([50, 20, 10, 5, 2]))
    with pytest.raises(AnonymizationError, match=message):
        call(sample)


@pytest.mark.parametrize("sizes, counts, message", [
    ([0, 1], [1, 1], "class size 0 at position 0"),
    ([1, 2], [3, 0], "class count 0 at position 1"),
    ([2, 1], [1, 1], "distinct and ascending: 1 at position 1 follows 2"),
    ([1, 1], [1, 1], "distinct and ascending: 1 at position 1 follows 1"),
    ([1, 2], [1], "differ in length: 2 sizes, 1 counts"),
    ([1.5, 2], [1, 1], "class sizes must be whole numbers"),
    ([[1, 2]], [[1, 1]], "one-dimensional"),
])
def test_a_malformed_histogram_is_refused(sizes, counts, message):
    with pytest.raises(AnonymizationError, match=message):
        ClassSizes(np.array(sizes), np.array(counts))


def test_a_class_of_no_records_is_refused():
    with pytest.raises(AnonymizationError, match="class size 0 at position 2"):
        ClassSizes.from_class_sizes([3, 1, 0, 2])
    with pytest.raises(AnonymizationError, match="sample class size 0 at position 1"):
        journalist_risk([2, 0], [3, 3], 0.1)


def test_a_population_class_smaller_than_its_sample_class_is_refused():
    with pytest.raises(AnonymizationError, match="class at position 1 has 3 records in the sample but 2 in the "
                                                 "population"):
        journalist_risk([1, 3, 2], [4, 2, 2], 0.1)
    with pytest.raises(AnonymizationError, match="differ in shape"):
        journalist_risk([1, 3], [4, 3, 2], 0.1)


# ---------------------------------------------------------------------------------------------- properties

class_sizes = st.lists(st.integers(1, 40), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(class_sizes, st.lists(st.floats(0, 1), min_size=2, max_size=5))
def test_prosecutor_risk_orders_and_records_at_risk_fall_with_the_threshold(per_class, thresholds):
    sample = ClassSizes.from_class_sizes(per_class)
    assert (sample.records, sample.classes, sample.uniques) == (sum(per_class), len(per_class), per_class.count(1))
    risks = [prosecutor_risk(sample, t) for t in sorted(thresholds)]
    for risk in risks:
        assert 0 < risk.lowest <= risk.average <= risk.highest <= 1
        assert 0 <= risk.records_at_risk <= sample.records
        assert risk.share_at_risk == risk.records_at_risk / sample.records
    assert [r.records_at_risk for r in risks] == sorted((r.records_at_risk for r in risks), reverse=True)
    assert prosecutor_risk(sample, 0).records_at_risk == sample.records
    assert prosecutor_risk(sample, 1).records_at_risk == 0
    assert marketer_risk(sample) == risks[0].average


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(1, 30), st.integers(0, 100)), min_size=1, max_size=50), st.floats(0, 1))
def test_journalist_risk_never_exceeds_prosecutor_risk(classes, threshold):
    """F ≥ f: 1/F ≤ 1/f record by record, so every journalist figure is at most the prosecutor's, and equal when the
    population is the sample."""
    sample_sizes = np.array([f for f, _ in classes])
    population_sizes = sample_sizes + np.array([extra for _, extra in classes])
    journalist = journalist_risk(sample_sizes, population_sizes, threshold)
    prosecutor = prosecutor_risk(ClassSizes.from_class_sizes(sample_sizes), threshold)
    assert journalist.highest <= prosecutor.highest
    assert journalist.lowest <= prosecutor.lowest
    assert journalist.average <= prosecutor.average * (1 + 1e-12)
    assert journalist.marketer <= journalist.average
    assert journalist.records_at_risk <= prosecutor.records_at_risk
    same = journalist_risk(sample_sizes, sample_sizes, threshold)
    assert (same.highest, same.lowest, same.records_at_risk) == (prosecutor.highest, prosecutor.lowest,
                                                                 prosecutor.records_at_risk)
    assert same.average == pytest.approx(prosecutor.average, rel=1e-12)


@settings(max_examples=100, deadline=None)
@given(class_sizes.filter(lambda sizes: 1 in sizes), st.floats(0.1, 1, exclude_min=True))
def test_zayatz_and_dankar_above_a_tenth(per_class, fraction):
    """Zayatz: the probability p that a sample unique is a population unique is in (0, 1], so the estimate
    f_1·p/π lies in (0, f_1/π] (it may exceed f_1: uniques outside the sample count).  Above π = 0.1 Dankar's rule
    gives Zayatz's or SNB's estimate, whichever it names (π is n/N once N is rounded)."""
    sample = ClassSizes.from_class_sizes(per_class)
    size = population_size_for(sample, sampling_fraction=fraction)
    assume(sample.records / size > 0.1)
    zayatz = zayatz_uniqueness(sample, size)
    assert 0 < zayatz.parameters["conditional_uniqueness"] <= 1 + 1e-12
    assert 0 < zayatz.uniques <= sample.uniques * size / sample.records * (1 + 1e-12)
    dankar = dankar_uniqueness(sample, size)
    assert dankar.chosen_model in (ZAYATZ, SNB)
    chosen = zayatz if dankar.chosen_model == ZAYATZ else snb_uniqueness(sample, size)
    assert dankar.uniques == chosen.uniques and dankar.parameters == chosen.parameters
