"""Disclosure measures, against independent computations: pandas' Spearman, a pandas crosstab of the same cells,
the closed-form mutual information of a bivariate normal, a plain NumPy PCA-DR, and hand-worked attacks."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from duckanon import PolicyError
from duckanon.privacy.disclosure import (
    average_ranks,
    default_bins,
    disclosure_report,
    known_records_attack,
    mutual_information,
    pca_reconstruction,
    privacy_q,
    spearman,
)


def crosstab_mi(x, y, bins) -> float:
    """The estimator re-done with pandas: cells from rank(method="min") (one per value when few), plug-in MI from a
    crosstab, Miller–Madow correction."""
    def cells(values):
        series = pd.Series(values)
        if series.nunique() <= bins:
            return series.rank(method="dense").astype(int)
        return ((series.rank(method="min") - 1) * bins // len(series)).astype(int)

    table = pd.crosstab(cells(x), cells(y)).to_numpy().astype(float)
    n = table.sum()
    joint = table / n
    outer = np.outer(joint.sum(axis=1), joint.sum(axis=0))
    nonzero = joint > 0
    plug_in = float(np.sum(joint[nonzero] * np.log2(joint[nonzero] / outer[nonzero])))
    correction = (nonzero.sum() - table.shape[0] - table.shape[1] + 1) / (2 * n * math.log(2))
    return max(0.0, plug_in - correction)


def test_mutual_information_equals_a_crosstab_computation():
    rng = np.random.default_rng(0)
    x = rng.normal(size=5000).round(1)  # ties
    y = x + rng.normal(scale=0.7, size=5000)
    for bins in (4, 17, 40):
        assert mutual_information(x, y, bins) == pytest.approx(crosstab_mi(x, y, bins), abs=1e-12)
    categories = rng.integers(0, 3, 5000)
    answers = np.where(rng.random(5000) < 0.8, categories, rng.integers(0, 3, 5000))
    assert mutual_information(categories, answers) == pytest.approx(crosstab_mi(categories, answers, 100), abs=1e-12)


def test_mutual_information_against_closed_forms():
    rng = np.random.default_rng(1)
    n = 40000
    independent = mutual_information(rng.normal(size=n), rng.normal(size=n))
    assert independent < 0.01
    for rho in (0.5, 0.8, 0.95):
        x = rng.normal(size=n)
        y = rho * x + math.sqrt(1 - rho**2) * rng.normal(size=n)
        exact = -0.5 * math.log2(1 - rho**2)
        estimate = mutual_information(x, y)
        # Cells lose information (a lower bound), but with 34 cells per variable little of it.
        assert exact * 0.85 < estimate < exact + 0.02
    # Two fair coins that agree: exactly 1 bit, plus Miller-Madow's (K - 1) / (2 n ln 2).
    coin = rng.integers(0, 2, n)
    assert mutual_information(coin, coin) == pytest.approx(1 + 1 / (2 * n * math.log(2)), abs=1e-3)


def test_q_and_bins():
    assert privacy_q(0) == 0 and privacy_q(1) == 0.5 and privacy_q(3) == 0.875
    assert default_bins(10) == 2 and default_bins(100_000) == 46 and default_bins(10**8) == 100
    with pytest.raises(PolicyError, match="cells >= 2"):
        mutual_information([1, 2, 3], [1, 2, 3], bins=1)


def test_spearman_equals_pandas_ranks_with_ties():
    rng = np.random.default_rng(2)
    x = rng.integers(0, 10, 3000).astype(float)
    y = x + rng.integers(0, 4, 3000)
    # Spearman's rho is Pearson's correlation of the average ranks.
    assert spearman(x, y) == pytest.approx(pd.Series(x).rank().corr(pd.Series(y).rank()), abs=1e-12)
    assert np.array_equal(average_ranks(x), pd.Series(x).rank().to_numpy())
    assert math.isnan(spearman(np.ones(5), np.arange(5.0)))


def plain_pca_dr(released, noise_variance):
    """Huang, Du & Chen's PCA-DR written out directly: standardize, subtract the noise covariance, keep components
    whose variance exceeds the mean noise variance, project."""
    frame = pd.DataFrame(released)
    mean, std = frame.mean(), frame.std(ddof=0)
    z = (frame - mean) / std
    noise = np.asarray(noise_variance) / std.to_numpy() ** 2
    covariance = np.cov(z.to_numpy(), rowvar=False, ddof=0) - np.diag(noise)
    values, vectors = np.linalg.eig(covariance)
    basis = vectors[:, values > noise.mean()].real
    return (z.to_numpy() @ basis @ basis.T) * std.to_numpy() + mean.to_numpy(), basis.shape[1]


def test_pca_reconstruction_matches_a_plain_implementation_and_removes_noise():
    rng = np.random.default_rng(3)
    n = 20000
    signal = rng.normal(size=(n, 1)) @ np.array([[1.0, 2.0, -1.0, 0.5]]) + rng.normal(scale=0.1, size=(n, 4))
    noise_variance = signal.var(axis=0) / 1.0  # SNR 1
    released = signal + rng.normal(size=(n, 4)) * np.sqrt(noise_variance)
    attack = pca_reconstruction(released, noise_variance)
    expected, kept = plain_pca_dr(released, noise_variance)
    assert attack.kept == kept == 1
    assert np.allclose(attack.values, expected)
    error_before = np.sqrt(((released - signal) ** 2).mean(axis=0)) / signal.std(axis=0)
    error_after = np.sqrt(((attack.values - signal) ** 2).mean(axis=0)) / signal.std(axis=0)
    assert np.all(error_after < 0.6 * error_before)
    # Without noise nothing is dropped and the release is its own reconstruction.
    assert np.allclose(pca_reconstruction(signal, [0, 0, 0, 0]).values, signal)
    assert pca_reconstruction(released, noise_variance, components=4).kept == 4


def test_order_interval_attack_by_hand():
    # Original values with ties; the release keeps the order (rank re-association): y is a monotone function of x
    # with the tied records in some order.
    x = np.array([0, 0, 0, 1, 1, 1, 2, 2, 2, 10.0])
    y = np.array([0.1, 0.2, 0.3, 1.1, 1.2, 1.3, 2.1, 2.2, 2.3, 9.0])
    # The attacker knows records 0 (x=0, y=0.1), 2 (x=0, y=0.3) and 7 (x=2, y=2.2).
    attack = known_records_attack(x, y, np.array([0, 2, 7]))
    # Record 1 lies between two known 0s: pinned to 0.  Records 3-6 lie in [0, 2]; record 8 and 9 in [2, inf).
    assert attack.known == 3 and attack.coverage == 1.0
    assert attack.exact == pytest.approx(1 / 7)
    widths = np.array([0, 2, 2, 2, 2, np.inf, np.inf]) / 10
    assert attack.median_width == pytest.approx(np.median(widths))
    # Interpolation through (0.1, 0), (0.3, 0), (2.2, 2), flat beyond.
    estimate = np.interp(y[[1, 3, 4, 5, 6, 8, 9]], [0.1, 0.3, 2.2], [0, 0, 2])
    truth = x[[1, 3, 4, 5, 6, 8, 9]]
    assert attack.interpolation_rmse == pytest.approx(np.sqrt(np.mean((estimate - truth) ** 2)) / truth.std())
    # A release that does not keep the order: the interval fails for some records.
    shuffled = known_records_attack(x, y[::-1], np.array([0, 2, 7]))
    assert shuffled.coverage < 1


def test_report_of_an_order_keeping_release_and_of_an_independent_one():
    rng = np.random.default_rng(4)
    n = 30000
    x = rng.uniform(0, 100, n)
    kept_order = np.sort(rng.uniform(0, 100, n))[np.argsort(np.argsort(x))]
    independent = rng.permutation(kept_order)
    report = disclosure_report({"a": x, "b": x.copy()}, {"a": kept_order, "b": independent},
                               methods={"a": "ranked", "b": "shuffled"}, noise_variance={}, seed=0)
    rows = report.attributes.set_index("attribute")
    assert rows.loc["a", "spearman"] == pytest.approx(1.0) and rows.loc["a", "q"] > 0.96
    assert abs(rows.loc["b", "spearman"]) < 0.03 and rows.loc["b", "q"] < 0.02
    known = report.known_records.set_index(["attribute", "known"])
    assert known.loc[("a", 100), "coverage"] == 1.0 and known.loc[("b", 100), "coverage"] < 0.1
    assert report.pca_components == (2, 2) and report.measured == n
    sampled = disclosure_report({"a": x}, {"a": kept_order}, methods={}, noise_variance={}, sample=5000, seed=0)
    assert sampled.measured == 5000 and sampled.records == n and "sample of 5000" in sampled.summary()
    assert set(sampled.as_dict()) >= {"attributes", "pca", "known_records", "mi_bins"}
