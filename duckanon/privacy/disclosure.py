"""How much a perturbed release really discloses: measures that compare each record's original and released values.

Every measure takes the original and released values of an attribute as NumPy arrays aligned record by record (the
perturbation module has both in memory when it publishes, so every perturbed release is measured), and all of them are
vectorized: sorting, counting and small matrix algebra, never a loop over records.

**Q(X|Y) = 1 − 2^(−I(X;Y))** (Agrawal & Aggarwal 2001, the measure seed 004 uses): the share of X's uncertainty the
release removes, from the mutual information I(X;Y) in bits.  0 means the release tells nothing about the original,
values near 1 that it pins it down.

*The estimator.*  I(X;Y) of continuous attributes has no finite-sample formula, so it is estimated on a grid:

1. each variable is cut into at most ``bins`` cells (default ``round(n^(1/3))`` clipped to [2, 100]).  A variable with
   at most ``bins`` distinct values (a category, a small integer code) gets one cell per value; otherwise cells are
   equal-frequency, ``cell(v) = ⌊bins · #{records with a smaller value} / n⌋``, so tied values always share a cell and
   each cell holds about n/bins records;
2. the plug-in mutual information of the cells' contingency table, in bits, minus the Miller–Madow bias correction
   (K_xy − K_x − K_y + 1) / (2 n ln 2), K being the numbers of non-empty cells; negative results are reported as 0.

Cutting a variable into cells can only lose information (data-processing inequality), so the quantity estimated is
a *lower bound* of I(X;Y), and — Miller–Madow's small correction aside — it cannot exceed log2(bins): with 46 cells
(100,000 records) Q tops out at 1 − 1/46 = 0.978.  A
release whose Q sits at that ceiling discloses at least that much, and likely more.  Because mutual information is
unchanged by monotone transformations and the cells are equal-frequency, the estimate depends only on ranks.

**Spearman rank correlation** between original and released values (Pearson correlation of average ranks, ties
averaged), per attribute.  1 means the release keeps every record's rank.

**PCA reconstruction** (Huang, Du & Chen, "Deriving private information from randomized data", SIGMOD 2005, PCA-DR):
an attacker who knows the noise variance (randomization parameters are public so that miners can reconstruct
distributions) estimates the original covariance as Cov(Y) − Cov(noise), keeps the principal components that carry
more signal than noise, and projects the released records onto them, removing the noise in the dropped directions.
Here the attributes are first standardized by their released standard deviation, the noise variances expressed in the
same units, and a component is kept when its estimated signal variance exceeds the mean noise variance — dropping a
direction removes its signal and its noise, so this is the choice that minimizes the squared error when the noise is
equally strong in every attribute (the same SNR everywhere); ``components`` fixes the number instead.  The error is
the root mean square error over records relative to the original standard deviation (1.0 = as bad as guessing the
mean), for the release as it is and after the attack.  The attack helps only where attributes are correlated.

**Known records.**  An attacker who knows a few records' original values and finds them in the release (their other
columns, or their released values, give them away) learns a map from released to original values.  For each other
record this reports:

- the *order interval*: if the release keeps the order of each attribute (rank re-association does, exactly), a record
  whose released value lies between two known records' released values has its original value between theirs —
  with certainty, not probability.  Reported: how often the interval holds (``coverage``; 1.0 for any order-keeping
  release), the share of records it pins to one exact value (``exact``; common for attributes with few distinct
  values), the share pinned to within 1 % of the attribute's range, and the median width relative to the range;
- the *interpolation estimate*: the original value read off the piecewise-linear map through the known pairs, and
  its relative RMSE beside that of taking the released value itself as the estimate.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..deferred import pandas as pd
from ..errors import AnonymizationError, PolicyError

MAX_BINS = 100
SAMPLE = 200_000  # records measured at most (a uniform random sample of bigger releases)
PINNED_SHARE = 0.01  # "pinned" = an order interval at most 1 % of the attribute's range wide


# ------------------------------------------------------------------- mutual information
def default_bins(records: int) -> int:
    """Cells per variable for the mutual-information estimate: round(n^(1/3)), clipped to [2, 100]."""
    return int(min(MAX_BINS, max(2, round(records ** (1 / 3)))))


@dataclass(frozen=True)
class _Distinct:
    """A variable's distinct values: each record's index among them, and their counts (one sort, shared by the
    mutual-information cells and the ranks)."""

    inverse: np.ndarray
    counts: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> _Distinct:
        _, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
        return cls(inverse.reshape(-1), counts)

    def cells(self, bins: int) -> tuple[np.ndarray, int]:
        """Each record's cell and the number of cells: one per distinct value when there are at most ``bins`` of
        them, equal-frequency cells otherwise (tied values share a cell)."""
        if len(self.counts) <= bins:
            return self.inverse, len(self.counts)
        below = np.cumsum(self.counts) - self.counts  # records with a smaller value, per distinct value
        return ((bins * below) // len(self.inverse))[self.inverse], bins

    def average_ranks(self) -> np.ndarray:
        last = np.cumsum(self.counts)
        return ((2 * last - self.counts + 1) / 2.0)[self.inverse]


def mutual_information(x: np.ndarray, y: np.ndarray, bins: int | None = None) -> float:
    """The grid estimate of I(X;Y) in bits (module docstring): equal-frequency cells (one per value for variables
    with at most ``bins`` values), plug-in estimate with the Miller–Madow correction, never below 0."""
    x, y = _pair(x, y)
    bins = default_bins(len(x)) if bins is None else _checked_bins(bins)
    return _mutual_information(_Distinct.of(x), _Distinct.of(y), bins)


def _mutual_information(x: _Distinct, y: _Distinct, bins: int) -> float:
    n = len(x.inverse)
    cx, kx = x.cells(bins)
    cy, ky = y.cells(bins)
    joint = np.bincount(cx * ky + cy, minlength=kx * ky)
    px, py = np.bincount(cx, minlength=kx), np.bincount(cy, minlength=ky)
    cells = np.flatnonzero(joint)
    counts = joint[cells].astype(float)
    expected = px[cells // ky].astype(float) * py[cells % ky] / n
    plug_in = float(np.sum(counts * np.log2(counts / expected)) / n)
    correction = (len(cells) - np.count_nonzero(px) - np.count_nonzero(py) + 1) / (2 * n * math.log(2))
    return max(0.0, plug_in - correction)


def privacy_q(bits: float) -> float:
    """Q(X|Y) = 1 − 2^(−I(X;Y)) for I in bits."""
    return 1.0 - 2.0 ** (-bits)


def _checked_bins(bins: int) -> int:
    if isinstance(bins, bool) or not isinstance(bins, (int, np.integer)) or bins < 2:
        raise PolicyError(f"the mutual-information estimate needs a whole number of cells >= 2, got {bins!r}")
    return int(bins)


# ------------------------------------------------------------------------ rank measures
def average_ranks(values: np.ndarray) -> np.ndarray:
    """1-based ranks, tied values sharing the average of their positions."""
    return _Distinct.of(np.asarray(values)).average_ranks()


def spearman(x: np.ndarray, y: np.ndarray) -> float:
    """Spearman's rank correlation (ties averaged); NaN when either side is constant."""
    x, y = _pair(x, y)
    return _spearman(_Distinct.of(x), _Distinct.of(y))


def _spearman(x: _Distinct, y: _Distinct) -> float:
    rx, ry = x.average_ranks(), y.average_ranks()
    rx -= rx.mean()
    ry -= ry.mean()
    denominator = math.sqrt(float(rx @ rx) * float(ry @ ry))
    return float(rx @ ry) / denominator if denominator > 0 else float("nan")


def relative_rmse(estimate: np.ndarray, original: np.ndarray) -> float:
    """Root mean square error of ``estimate`` relative to the standard deviation of ``original``."""
    spread = float(np.std(original))
    error = math.sqrt(float(np.mean((estimate - original) ** 2)))
    return error / spread if spread > 0 else float("nan")


# ------------------------------------------------------------------------ PCA attack
@dataclass(frozen=True)
class PcaReconstruction:
    """Huang, Du & Chen's PCA-DR: the reconstructed records, and the components kept out of all."""

    values: np.ndarray
    kept: int
    eigenvalues: np.ndarray  # of the estimated original covariance (standardized units), largest first


def pca_reconstruction(released: np.ndarray, noise_variance: Sequence[float], components: int | None = None
                       ) -> PcaReconstruction:
    """Reconstruct records from ``released`` (n × m) given each attribute's noise variance (original units)."""
    released = np.asarray(released, dtype=float)
    if released.ndim != 2 or released.shape[0] < 2:
        raise AnonymizationError("the PCA attack needs a records-by-attributes matrix with at least two records")
    noise = np.asarray(noise_variance, dtype=float)
    if noise.shape != (released.shape[1],) or np.any(noise < 0):
        raise PolicyError(f"need one non-negative noise variance per attribute ({released.shape[1]}), got {noise!r}")
    mean, scale = released.mean(axis=0), released.std(axis=0)
    if np.any(scale == 0):
        raise AnonymizationError(f"released attributes {np.flatnonzero(scale == 0).tolist()} are constant: no "
                                 f"principal components to find")
    standardized = (released - mean) / scale
    noise_std = noise / scale**2
    covariance = standardized.T @ standardized / len(standardized) - np.diag(noise_std)
    eigenvalues, vectors = np.linalg.eigh(covariance)
    order = np.argsort(eigenvalues)[::-1]
    eigenvalues, vectors = eigenvalues[order], vectors[:, order]
    if components is None:
        kept = int(np.count_nonzero(eigenvalues > noise_std.mean()))
    elif isinstance(components, bool) or not isinstance(components, (int, np.integer)) or \
            not 0 <= components <= released.shape[1]:
        raise PolicyError(f"components must be a whole number from 0 to {released.shape[1]}, got {components!r}")
    else:
        kept = int(components)
    basis = vectors[:, :kept]
    reconstructed = mean + (standardized @ basis @ basis.T) * scale
    return PcaReconstruction(reconstructed, kept, eigenvalues)


# ---------------------------------------------------------------- known-records attack
@dataclass(frozen=True)
class KnownRecordsAttack:
    """What ``known`` records with known original values reveal about the others (module docstring)."""

    known: int
    coverage: float
    exact: float
    pinned: float
    median_width: float
    interpolation_rmse: float
    released_rmse: float


def known_records_attack(x: np.ndarray, y: np.ndarray, known: np.ndarray) -> KnownRecordsAttack:
    """The order-interval and interpolation attack with the records at positions ``known`` as the attacker's."""
    x, y = _pair(x, y)
    known = np.unique(np.asarray(known, dtype=np.int64))
    if len(known) == 0 or len(known) >= len(x) or known[0] < 0 or known[-1] >= len(x):
        raise PolicyError(f"known records must be between 1 and {len(x) - 1} positions of the {len(x)} records")
    others = np.ones(len(x), dtype=bool)
    others[known] = False
    order = np.lexsort((x[known], y[known]))
    known_y, known_x = y[known][order], x[known][order]
    target_x, target_y = x[others], y[others]

    # Known records released below (above) a record bound its original value from below (above) if order is kept.
    below = np.searchsorted(known_y, target_y, side="left")
    above = np.searchsorted(known_y, target_y, side="right")
    highest_below = np.maximum.accumulate(known_x)
    lowest_above = np.minimum.accumulate(known_x[::-1])[::-1]
    lower = np.where(below > 0, highest_below[np.maximum(below - 1, 0)], -np.inf)
    upper = np.where(above < len(known_x), lowest_above[np.minimum(above, len(known_x) - 1)], np.inf)
    covered = (lower <= target_x) & (target_x <= upper)
    with np.errstate(invalid="ignore"):
        width = upper - lower
    span = float(np.ptp(x))
    consistent = covered & (width >= 0)

    # The interpolation estimate: the piecewise-linear map through the known pairs (tied released values averaged).
    levels, where = np.unique(known_y, return_inverse=True)
    means = np.bincount(where.reshape(-1), weights=known_x) / np.bincount(where.reshape(-1))
    estimate = np.interp(target_y, levels, means)
    return KnownRecordsAttack(
        known=len(known),
        coverage=float(covered.mean()),
        exact=float(np.mean(consistent & (width == 0))),
        pinned=float(np.mean(consistent & (width <= PINNED_SHARE * span))),
        median_width=float(np.median(np.where(width >= 0, width, np.inf)) / span) if span > 0 else float("nan"),
        interpolation_rmse=relative_rmse(estimate, target_x),
        released_rmse=relative_rmse(target_y, target_x),
    )


# ------------------------------------------------------------------------- the report
@dataclass
class DisclosureReport:
    """Every measure of one release.

    ``attributes``: per attribute its method, Spearman's rho, the MI estimate in bits and Q, the share of records
    released with exactly their original value, the released values' relative RMSE and the effective SNR
    (Var(X) / mean squared change); ``pca``: per numeric attribute the relative RMSE of the release and of its PCA
    reconstruction (``pca_components`` kept of all); ``known_records``: per numeric attribute and number of known
    records the attack's figures.  Nominal attributes (randomized response) have no rank, RMSE or PCA figures.
    """

    attributes: pd.DataFrame
    pca: pd.DataFrame
    pca_components: tuple[int, int]
    known_records: pd.DataFrame
    mi_bins: int
    records: int
    measured: int  # the records measured: all, or a random sample of them

    def summary(self) -> str:
        sample = f" on a random sample of {self.measured} of the {self.records} records" \
            if self.measured < self.records else ""
        lines = [f"Q(X|Y) with {self.mi_bins} cells per variable (at most {privacy_q(math.log2(self.mi_bins)):.3f})"
                 f"{sample}:"]
        for row in self.attributes.itertuples(index=False):
            lines.append(f"  {row.attribute}: Q {row.q:.3f} ({row.mi_bits:.2f} bits), Spearman {row.spearman:.4f}, "
                         f"{row.unchanged:.1%} unchanged, relative RMSE {row.relative_rmse:.3f}")
        if len(self.pca):
            lines.append(f"PCA attack ({self.pca_components[0]} of {self.pca_components[1]} components kept): "
                         f"relative RMSE {self.pca['released_rmse'].mean():.3f} released, "
                         f"{self.pca['reconstructed_rmse'].mean():.3f} reconstructed (mean over attributes)")
        for known, group in self.known_records.groupby("known", sort=True):
            lines.append(f"{known} known records: order interval holds for {group['coverage'].mean():.1%}, pins "
                         f"{group['exact'].mean():.1%} exactly and {group['pinned'].mean():.1%} to within 1 % of the "
                         f"range; interpolation RMSE {group['interpolation_rmse'].mean():.3f} (mean over attributes)")
        return "\n".join(lines)

    def as_dict(self) -> dict:
        def records(frame: pd.DataFrame) -> list[dict]:
            return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
                    for row in frame.to_dict(orient="records")]

        return {"records": self.records, "measured": self.measured, "mi_bins": self.mi_bins,
                "attributes": records(self.attributes), "pca": records(self.pca),
                "pca_components": list(self.pca_components), "known_records": records(self.known_records)}


def disclosure_report(original: Mapping[str, np.ndarray], released: Mapping[str, np.ndarray], *,
                      methods: Mapping[str, str], noise_variance: Mapping[str, float],
                      nominal: Collection[str] = (), known_records: Sequence[int] = (10, 100),
                      mi_bins: int | None = None, sample: int | None = SAMPLE, seed: int | None = None
                      ) -> DisclosureReport:
    """Measure a release: ``original`` and ``released`` map each attribute to its values, aligned by record.

    ``noise_variance`` is what the PCA attacker assumes per numeric attribute (0 where nothing is added);
    ``nominal`` attributes are compared only by mutual information and the share unchanged; ``known_records`` are
    the numbers of records the attacker knows, drawn at random (``seed``) from the release, the same records for
    every attribute.  Releases with more than ``sample`` records are measured on a uniform random sample of that many
    (None: all records); the measures are then estimates, with standard errors of a few thousandths at 200,000."""
    check_parameters(known_records, mi_bins, sample)
    attributes = list(original)
    if not attributes or set(released) != set(attributes):
        raise PolicyError("original and released values must name the same, non-empty set of attributes")
    records = len(original[attributes[0]])
    rng = np.random.default_rng(seed)
    if sample is not None:
        if records > sample:
            rows = np.sort(rng.choice(records, size=int(sample), replace=False))
            original = {a: np.asarray(original[a])[rows] for a in attributes}
            released = {a: np.asarray(released[a])[rows] for a in attributes}
    measured = len(original[attributes[0]])
    bins = default_bins(measured) if mi_bins is None else _checked_bins(mi_bins)
    numeric = [a for a in attributes if a not in nominal]
    rows = []
    for attribute in attributes:
        x, y = _pair(original[attribute], released[attribute])
        distinct_x, distinct_y = _Distinct.of(x), _Distinct.of(y)
        bits = _mutual_information(distinct_x, distinct_y, bins)
        row = {"attribute": attribute, "method": methods.get(attribute, ""), "spearman": float("nan"),
               "mi_bits": bits, "q": privacy_q(bits), "unchanged": float(np.mean(x == y)),
               "relative_rmse": float("nan"), "effective_snr": float("nan")}
        if attribute not in nominal:
            change = float(np.mean((y - x) ** 2))
            row.update(spearman=_spearman(distinct_x, distinct_y), relative_rmse=relative_rmse(y, x),
                       effective_snr=float(np.var(x)) / change if change > 0 else float("inf"))
        rows.append(row)

    pca = pd.DataFrame(columns=["attribute", "released_rmse", "reconstructed_rmse"])
    components = (0, len(numeric))
    if numeric:
        matrix = np.column_stack([np.asarray(released[a], dtype=float) for a in numeric])
        attack = pca_reconstruction(matrix, [noise_variance.get(a, 0.0) for a in numeric])
        components = (attack.kept, len(numeric))
        pca = pd.DataFrame({
            "attribute": numeric,
            "released_rmse": [relative_rmse(matrix[:, i], original[a]) for i, a in enumerate(numeric)],
            "reconstructed_rmse": [relative_rmse(attack.values[:, i], original[a]) for i, a in enumerate(numeric)],
        })

    attacks = []
    for known in known_records:
        if known >= measured:
            continue
        chosen = rng.choice(measured, size=int(known), replace=False)
        for attribute in numeric:
            result = known_records_attack(original[attribute], released[attribute], chosen)
            attacks.append({"attribute": attribute, **result.__dict__})
    known_frame = pd.DataFrame(attacks, columns=["attribute", *KnownRecordsAttack.__dataclass_fields__])
    return DisclosureReport(pd.DataFrame(rows), pca, components, known_frame, bins, records, measured)


def check_parameters(known_records: Sequence[int], mi_bins: int | None, sample: int | None) -> None:
    """Raise PolicyError for parameters :func:`disclosure_report` cannot use (so callers can check before working)."""
    if isinstance(known_records, (str, bytes)) or not all(
            not isinstance(k, bool) and isinstance(k, (int, np.integer)) and k >= 1 for k in known_records):
        raise PolicyError(f"known_records must be whole numbers >= 1, got {known_records!r}")
    if mi_bins is not None:
        _checked_bins(mi_bins)
    if sample is not None and (isinstance(sample, bool) or not isinstance(sample, (int, np.integer)) or sample < 2):
        raise PolicyError(f"sample must be a whole number of records >= 2 (or None for all), got {sample!r}")


def _pair(x, y) -> tuple[np.ndarray, np.ndarray]:
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or x.shape != y.shape or len(x) < 2:
        raise AnonymizationError(f"original and released values must be two equally long vectors of at least two "
                                 f"records, got shapes {x.shape} and {y.shape}")
    return x, y
