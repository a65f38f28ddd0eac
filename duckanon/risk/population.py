"""Re-identification risk estimated from a sample's class sizes, as ARX 3.9.2 (``org.deidentifier.arx.risk``)
computes it.

The input is a frequency of frequencies (:class:`ClassSizes`): the class sizes i that occur and f_i, how many classes
have size i; the SQL that counts them is in :mod:`.counting`.  Below, n = Σ i·f_i is the number of records, c = Σ f_i
the number of classes, f_1 the number of sample uniques, N the population size and π = n/N the sampling fraction.

**Sample risks** (RiskModelSampleSummary, RiskModelSampleRisks, RiskModelSampleUniqueness): a record in a class of
f records is re-identified with probability 1/f by a prosecutor (who knows the target is in the sample), with 1/F by
a journalist (who knows only that it is in the population, where its class has F records); a marketer, who links
every record, re-identifies c/n of them on average.

**Population uniqueness** (ModelPitman, ModelZayatz, ModelSNB, RiskModelPopulationUniqueness) estimates how many of
the population's N records are unique in it.  ARX's numbers are the reference users compare with, so its method is
reproduced, quirks included:

- the Newton–Raphson solver (de.linearbits.newtonraphson 0.0.1 under ARXSolverConfiguration's defaults) stops when
  both equations are within 1e-6 of zero; it takes at most 1,001 steps from the model's start, then 1,001 from each of
  15 restarts on the grid {0, 0.33, 0.66, 0.99}², and one step from the 16th; Pitman's tries end when θ turns
  negative.  ARX also stops a try after 100 ms and the solver after 1 s; those clock limits are not reproduced, so
  where ARX's solver runs out of time (a large sample whose fit does not converge) this one may go on to a root;
- ARX's trigamma adds its asymptotic series only from 12 on but recurses only up to 8, so below 12 it lacks the tail
  ψ₁(x + k) (at 8 ≤ x < 12 it returns 0).  The Jacobian of Pitman's likelihood equations uses it: the roots are right
  but the path, and so whether and where the solver converges, follows that Jacobian, hence :func:`_arx_trigamma`;
- Zayatz's hypergeometric probabilities take the population size as a Java int, capped at 2³¹ − 1;
- an estimate that is NaN (no root; for Pitman's also one outside [0, N]) or exactly 0 is reported as 0 and flagged
  not applicable; with no sample uniques every model reports 0, which is then applicable.

The share of population uniques is ARX's ``getFractionOfUniqueTuples``: estimated population uniques / N, a share
of the population's records, not of the sample's.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Mapping

import numpy as np

from ..errors import AnonymizationError
from ..parameters import checked_number

PITMAN, ZAYATZ, SNB, DANKAR = "pitman", "zayatz", "snb", "dankar"
# Dankar et al.'s rule takes Pitman's estimate up to this sampling fraction, Zayatz's or SNB's above it
DANKAR_PITMAN_UP_TO = 0.1

# ARXSolverConfiguration's defaults: accuracy, iterations per try, and the deterministic restarts
_ACCURACY = 1e-6
_STEPS_PER_TRY = 1000
_JAVA_INT_MAX = 2**31 - 1


def _restart_grid() -> tuple[float, ...]:
    """0, 0.33, 0.66, 0.99: ARXSolverConfiguration's grid, accumulated in steps of 0.33 as it does."""
    values, value = [], 0.0
    while value < 1.0:
        values.append(value)
        value += 0.33
    return tuple(values)


_RESTARTS = tuple((x, y) for x in _restart_grid() for y in _restart_grid())


# ----------------------------------------------------------------------------------------------------------- input

@dataclasses.dataclass(frozen=True, eq=False)
class ClassSizes:
    """A sample's equivalence classes as a frequency of frequencies: ``sizes`` holds the distinct class sizes i,
    ascending, and ``counts`` the number f_i of classes of each size (both int64, read-only)."""

    sizes: np.ndarray
    counts: np.ndarray

    def __post_init__(self) -> None:
        sizes = _whole_numbers(self.sizes, "class sizes")
        counts = _whole_numbers(self.counts, "class counts")
        if sizes.shape != counts.shape:
            raise AnonymizationError(f"class sizes and class counts differ in length: {sizes.size} sizes, "
                                     f"{counts.size} counts")
        _require_positive(sizes, "class size")
        _require_positive(counts, "class count")
        out_of_order = np.flatnonzero(np.diff(sizes) <= 0)
        if out_of_order.size:
            at = int(out_of_order[0]) + 1
            raise AnonymizationError(f"class sizes must be distinct and ascending: {sizes[at]} at position {at} "
                                     f"follows {sizes[at - 1]}")
        for name, array in (("sizes", sizes), ("counts", counts)):
            array.flags.writeable = False
            object.__setattr__(self, name, array)

    @classmethod
    def from_class_sizes(cls, class_sizes) -> ClassSizes:
        """The histogram of a plain array with one size per class."""
        sizes = _whole_numbers(class_sizes, "class sizes")
        _require_positive(sizes, "class size")
        distinct, counts = np.unique(sizes, return_counts=True)
        return cls(distinct, counts)

    @property
    def records(self) -> int:
        """n = Σ i·f_i."""
        return int((self.sizes * self.counts).sum())

    @property
    def classes(self) -> int:
        """c = Σ f_i."""
        return int(self.counts.sum())

    @property
    def uniques(self) -> int:
        """f_1, the records alone in their class."""
        return int(self.counts[0]) if self.sizes.size and self.sizes[0] == 1 else 0

    def count_of_size(self, size: int) -> int:
        """f_size (0 when no class has that size)."""
        at = int(np.searchsorted(self.sizes, size))
        return int(self.counts[at]) if at < self.sizes.size and self.sizes[at] == size else 0


def _whole_numbers(values, name: str) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise AnonymizationError(f"{name} must be a one-dimensional array, got shape {array.shape}")
    if array.size and not np.issubdtype(array.dtype, np.integer):
        raise AnonymizationError(f"{name} must be whole numbers, got an array of {array.dtype}")
    return array.astype(np.int64)


def _require_positive(array: np.ndarray, name: str) -> None:
    bad = np.flatnonzero(array < 1)
    if bad.size:
        at = int(bad[0])
        raise AnonymizationError(f"{name} {array[at]} at position {at}: every {name} is at least 1")


def population_size_for(sample: ClassSizes, population_size: int | None = None, *,
                        sampling_fraction: float | None = None) -> int:
    """N, from ``population_size`` or from ``sampling_fraction`` π as ARX's ``ARXPopulationModel.create(n, π)``
    derives it: round(n / π), halves rounded up.  Exactly one of the two must be given; N must be at least n."""
    owner = "population"
    if (population_size is None) == (sampling_fraction is None):
        raise AnonymizationError("give either a population size or a sampling fraction, not both or neither")
    n = sample.records
    if sampling_fraction is not None:
        fraction = checked_number(sampling_fraction, "sampling fraction", owner, low=0, low_open=True, high=1)
        return math.floor(n / fraction + 0.5)
    size = checked_number(population_size, "population size", owner, whole=True, low=1)
    if size < n:
        raise AnonymizationError(f"population size {size} is smaller than the sample's {n} records")
    return size


# ------------------------------------------------------------------------------------------------- sample risks

@dataclasses.dataclass(frozen=True)
class ProsecutorRisk:
    """Prosecutor risk: a record in a class of f records is re-identified with probability 1/f."""

    highest: float          # 1 / smallest class
    average: float          # c / n: the mean over records of 1/f
    lowest: float           # 1 / largest class
    threshold: float
    records_at_risk: int    # records whose 1/f exceeds the threshold
    share_at_risk: float    # records_at_risk / n


@dataclasses.dataclass(frozen=True)
class JournalistRisk:
    """Journalist risk: a sample record whose class has F records in the population is re-identified with
    probability 1/F."""

    highest: float          # 1 / min F_j
    average: float          # max(c / Σ_j F_j, Σ_j (f_j / F_j) / n)
    lowest: float           # 1 / max F_j
    threshold: float
    records_at_risk: int    # sample records whose 1/F exceeds the threshold
    share_at_risk: float    # records_at_risk / n
    marketer: float         # Σ_j (f_j / F_j) / n


@dataclasses.dataclass(frozen=True)
class SampleUniqueness:
    """Sample uniques: records alone in their class."""

    records: int            # f_1, records alone in their class
    share: float            # f_1 / n


def prosecutor_risk(sample: ClassSizes, threshold: float) -> ProsecutorRisk:
    """ARX's RiskModelSampleSummary.getProsecutorRisk:

    - highest = 1 / min i, lowest = 1 / max i, average = c / n;
    - records at risk = Σ i·f_i over the sizes with 1/i > ``threshold`` (compared as ARX does, 1.0/i > t), and their
      share of n.

    An empty sample has every figure 0, as in ARX."""
    threshold = _checked_threshold(threshold, "prosecutor risk")
    if not sample.sizes.size:
        return ProsecutorRisk(0.0, 0.0, 0.0, threshold, 0, 0.0)
    at_risk = 1.0 / sample.sizes > threshold
    records_at_risk = int((sample.sizes[at_risk] * sample.counts[at_risk]).sum())
    n = sample.records
    return ProsecutorRisk(highest=1.0 / float(sample.sizes[0]), average=sample.classes / n,
                          lowest=1.0 / float(sample.sizes[-1]), threshold=threshold,
                          records_at_risk=records_at_risk, share_at_risk=records_at_risk / n)


def compatible_prosecutor_risk(sizes: np.ndarray, records: np.ndarray, threshold: float) -> ProsecutorRisk:
    """:func:`prosecutor_risk` where a missing value matches any value (a release of cell suppression), from how many
    ``records`` have each number of compatible records (``sizes``, ascending): a record is re-identified with
    probability 1 / its compatible records (sdcMicro's individual risk without weights), the average over records.
    Empty, every figure is 0."""
    threshold = _checked_threshold(threshold, "prosecutor risk")
    n = int(records.sum())
    if not n:
        return ProsecutorRisk(0.0, 0.0, 0.0, threshold, 0, 0.0)
    at_risk = int(records[1.0 / sizes > threshold].sum())
    return ProsecutorRisk(highest=1.0 / float(sizes[0]), average=float((records / sizes).sum() / n),
                          lowest=1.0 / float(sizes[-1]), threshold=threshold, records_at_risk=at_risk,
                          share_at_risk=at_risk / n)


def marketer_risk(sample: ClassSizes) -> float:
    """The share of records a marketer who links every record re-identifies, population unknown: c / n (ARX's
    RiskModelSampleRisks.getEstimatedMarketerRisk, 1 / average class size); 0 for an empty sample."""
    return sample.classes / sample.records if sample.sizes.size else 0.0


def sample_uniqueness(sample: ClassSizes) -> SampleUniqueness:
    """Records alone in their class, f_1, and their share f_1 / n (ARX's RiskModelSampleUniqueness)."""
    return SampleUniqueness(sample.uniques, sample.uniques / sample.records if sample.sizes.size else 0.0)


def journalist_risk(sample_sizes, population_sizes, threshold: float) -> JournalistRisk:
    """ARX's RiskModelSampleSummary.getJournalistRisk and getMarketerRisk for a sample drawn from a population,
    given for each sample class j its size f_j and its size F_j ≥ f_j in the population (aligned arrays; F_j may be
    an estimate, so a real number):

    - highest = 1 / min F_j, lowest = 1 / max F_j;
    - average = max(c / Σ_j F_j, Σ_j (f_j / F_j) / n), the larger of El Emam's two estimates;
    - records at risk = Σ f_j over the classes with 1/F_j > ``threshold``, and their share of n;
    - marketer = Σ_j (f_j / F_j) / n.

    No classes gives every figure 0, as in ARX."""
    threshold = _checked_threshold(threshold, "journalist risk")
    sample = _whole_numbers(sample_sizes, "sample class sizes")
    _require_positive(sample, "sample class size")
    population = np.asarray(population_sizes, dtype=np.float64)
    if population.shape != sample.shape:
        raise AnonymizationError(f"sample and population class sizes differ in shape: {sample.shape} and "
                                 f"{population.shape}")
    short = np.flatnonzero(~(population >= sample))  # NaN is short too
    if short.size:
        at = int(short[0])
        raise AnonymizationError(f"the class at position {at} has {sample[at]} records in the sample but "
                                 f"{population[at]:g} in the population")
    if not sample.size:
        return JournalistRisk(0.0, 0.0, 0.0, threshold, 0, 0.0, 0.0)
    n = int(sample.sum())
    at_risk = 1.0 / population > threshold
    records_at_risk = int(sample[at_risk].sum())
    per_record = float((sample / population).sum()) / n
    return JournalistRisk(highest=1.0 / population.min(), average=max(sample.size / population.sum(), per_record),
                          lowest=1.0 / population.max(), threshold=threshold, records_at_risk=records_at_risk,
                          share_at_risk=records_at_risk / n, marketer=per_record)


def _checked_threshold(threshold: float, owner: str) -> float:
    return checked_number(threshold, "threshold", owner, low=0, high=1)


# ---------------------------------------------------------------------------------------- population uniqueness

@dataclasses.dataclass(frozen=True)
class UniquenessEstimate:
    """One model's estimate of the population's unique records.

    ``uniques`` is ARX's ``getNumUniqueTuples``: 0 when the model gives no estimate.  ``converged``: Pitman's and
    SNB's equations were solved (Zayatz's model is closed-form: always true; so is every model when the sample has
    no uniques, as nothing is fitted).  ``applicable`` is ARX's ``isAvailableEstimate``: the estimate is not 0, or
    the sample has no uniques.  In :func:`population_uniqueness`'s answer ``chosen`` marks the model Dankar et al.'s
    rule picked; the Dankar estimate names it in ``chosen_model`` (None when the sample has no uniques) and takes
    its parameters."""

    model: str
    uniques: float
    population_size: int
    parameters: Mapping[str, float]
    converged: bool
    applicable: bool
    chosen: bool = False
    chosen_model: str | None = None

    @property
    def share(self) -> float:
        """ARX's getFractionOfUniqueTuples: population uniques / N, the share of the population's records."""
        return self.uniques / self.population_size


def pitman_uniqueness(sample: ClassSizes, population_size: int | None = None, *,
                      sampling_fraction: float | None = None) -> UniquenessEstimate:
    """Pitman's model (Hoshino 2001) as ARX's ModelPitman fits it.

    θ and α solve the likelihood equations of Pitman's sampling formula,

        Σ_{k=1}^{c−1} 1/(θ + kα) − Σ_{k=1}^{n−1} 1/(θ + k) = 0
        Σ_{k=1}^{c−1} k/(θ + kα) − Σ_{i≥2} f_i Σ_{k=1}^{i−1} 1/(k − α) = 0

    (ARX takes any root: the maximum of the likelihood when θ + kα > 0 for every k and α < 1, but it may lie
    outside that domain, where the likelihood is undefined)

    by Newton–Raphson from ARX's start (with c' = f_1(f_1 − 1)/f_2, f_2 taken as 1 when 0)

        θ₀ = (n c c' − f_1 (n − 1)(2c + c')) / (2 f_1 c + f_1 c' − n c'),   α₀ = (θ₀ (f_1 − n) + (n − 1) f_1) / (n c),

    first with the sums in closed form (digamma, ARX's trigamma), then, when that finds no root or one the direct
    sums reject, with the sums added term by term.  The population's uniques are Γ(θ + 1) / Γ(θ + α) · N^α, kept
    when in [0, N] (from log-gammas, or gammas, the larger when both are)."""
    return _pitman(sample, population_size_for(sample, population_size, sampling_fraction=sampling_fraction))


def zayatz_uniqueness(sample: ClassSizes, population_size: int | None = None, *,
                      sampling_fraction: float | None = None) -> UniquenessEstimate:
    """Zayatz's model (1991) as ARX's ModelZayatz computes it.

    With P_i = P(X = 1) for X ~ Hypergeometric(N, i, n) = i·C(N − i, n − 1) / C(N, n), the probability that a
    sample unique is unique in the population is

        p = (f_1/c) P_1 / Σ_i (f_i/c) P_i,

    and the population's uniques are f_1 · p / π."""
    return _zayatz(sample, population_size_for(sample, population_size, sampling_fraction=sampling_fraction))


def snb_uniqueness(sample: ClassSizes, population_size: int | None = None, *,
                   sampling_fraction: float | None = None) -> UniquenessEstimate:
    """The shifted negative binomial model (Chen & Keller-McNulty 1998) as ARX's ModelSNB fits it.

    K, ARX's estimate of the population's non-empty classes (a variant of Shlosser's estimator, with its −1 per
    class size in the second sum):

        K = c + f_1 · (A/B) · (C/D)²,  A = Σ_i i π² (1 − π²)^(i−1) f_i,  B = Σ_i (f_i (1 − π)^i (1 + π)^i − 1),
                                       C = Σ_i f_i (1 − π)^i,           D = Σ_i i π (1 − π)^(i−1) f_i.

    α and β solve, with d = (1 − π)(1 − β),

        K π (β / (1 − d))^α (α d / (1 − d) + 1) = f_1
        K α β^α π² (1 − β) / 2 · (1 − d)^(α+2) (2 − (1 − α) d) = f_2

    by Newton–Raphson from (1, 1), and the population's uniques are K β^α."""
    return _snb(sample, population_size_for(sample, population_size, sampling_fraction=sampling_fraction))


def dankar_uniqueness(sample: ClassSizes, population_size: int | None = None, *,
                      sampling_fraction: float | None = None) -> UniquenessEstimate:
    """Dankar et al.'s (2012) choice among the models, as ARX's
    RiskModelPopulationUniqueness.getNumUniqueTuplesDankar makes it:

    - no sample uniques: 0;
    - π ≤ 0.1: Pitman's estimate when applicable, else Zayatz's;
    - π > 0.1: when SNB's estimate is applicable, Zayatz's if strictly smaller, else SNB's; otherwise Zayatz's.

    Only the models the rule needs are fitted."""
    size = population_size_for(sample, population_size, sampling_fraction=sampling_fraction)
    return _dankar(sample, size, lambda model: _ESTIMATORS[model](sample, size))


def population_uniqueness(sample: ClassSizes, population_size: int | None = None, *,
                          sampling_fraction: float | None = None) -> tuple[UniquenessEstimate, ...]:
    """Pitman's, Zayatz's and SNB's estimates, the one Dankar et al.'s rule picks marked ``chosen``, then the
    rule's own estimate."""
    size = population_size_for(sample, population_size, sampling_fraction=sampling_fraction)
    estimates = {model: estimator(sample, size) for model, estimator in _ESTIMATORS.items()}
    dankar = _dankar(sample, size, estimates.__getitem__)
    return (*(dataclasses.replace(e, chosen=e.model == dankar.chosen_model) for e in estimates.values()), dankar)


def _require_records(sample: ClassSizes) -> None:
    if not sample.sizes.size:
        raise AnonymizationError("the sample has no records: population uniqueness needs at least one")


def _estimate(model: str, population_size: int, raw: float, parameters: Mapping[str, float],
              converged: bool) -> UniquenessEstimate:
    """ARX's isValid: a NaN or 0 estimate is reported as 0, and is not applicable."""
    valid = not math.isnan(raw) and raw != 0
    return UniquenessEstimate(model, float(raw) if valid else 0.0, population_size, dict(parameters), converged,
                              applicable=valid)


def _no_uniques(model: str, population_size: int) -> UniquenessEstimate:
    return UniquenessEstimate(model, 0.0, population_size, {}, converged=True, applicable=True)


def _pitman(sample: ClassSizes, population_size: int, steps: int = _STEPS_PER_TRY) -> UniquenessEstimate:
    _require_records(sample)
    if not sample.uniques:
        return _no_uniques(PITMAN, population_size)
    with np.errstate(all="ignore"):  # Java's arithmetic: overflow, 0/0 and the like give inf or NaN
        c1, c2 = np.float64(sample.uniques), np.float64(sample.count_of_size(2) or 1)
        c, n = np.float64(sample.classes), np.float64(sample.records)
        c_prime = c1 * (c1 - 1) / c2
        theta = (n * c * c_prime - c1 * (n - 1) * (2 * c + c_prime)) / (2 * c1 * c + c1 * c_prime - n * c_prime)
        alpha = (theta * (c1 - n) + (n - 1) * c1) / (n * c)
        closed = _pitman_equations_closed(sample)
        termwise = _pitman_equations_termwise(sample)
        root = _newton_raphson(closed, (theta, alpha), steps, theta_nonnegative=True)
        if not math.isnan(root[0]):
            check = termwise(*root)
            if not (abs(check[0]) <= _ACCURACY and abs(check[1]) <= _ACCURACY):
                root = (math.nan, math.nan)
        if math.isnan(root[0]):
            root = _newton_raphson(termwise, (theta, alpha), steps, theta_nonnegative=True)
        converged = not math.isnan(root[0])
        uniques = _pitman_population_uniques(*root, population_size) if converged else math.nan
    parameters = {"theta": float(root[0]), "alpha": float(root[1])} if converged else {}
    return _estimate(PITMAN, population_size, uniques, parameters, converged)


Equations = Callable[[np.float64, np.float64], tuple]  # (x, y) -> (g₁, g₂, ∂g₁/∂x, ∂g₁/∂y, ∂g₂/∂x, ∂g₂/∂y)


def _pitman_equations_closed(sample: ClassSizes) -> Equations:
    """ARX's getMasterFunctionClosed: the sums over k in digammas, their derivatives in ARX's trigammas."""
    c, n = np.float64(sample.classes), np.float64(sample.records)
    larger = sample.sizes != 1
    sizes, counts = sample.sizes[larger].astype(np.float64), sample.counts[larger].astype(np.float64)

    def evaluate(t, a):
        rest = c - 1
        ratio = t / a
        # the five arguments of the equations' own terms, then one per class size above 1
        digammas = _arx_digamma(np.concatenate(([rest + ratio + 1, ratio + 1, n + t, t + 1, 1 - a], sizes - a)))
        trigammas = _arx_trigamma(np.concatenate(([(a + t + a * rest) / a, ratio + 1, t + 1, n + t, 1 - a],
                                                  sizes - a)))
        dig_top, dig_ratio, dig_n, dig_t, dig_alpha = digammas[:5]
        tri_top, tri_ratio, tri_t, tri_n, tri_alpha = trigammas[:5]
        aa = a * a
        d1 = (tri_ratio - tri_top) / aa
        d5 = (a * dig_top + t * tri_top - a * dig_ratio - t * tri_ratio) / (aa * a)
        d3 = (aa * rest - t * t * tri_top + t * t * tri_ratio - 2 * a * t * dig_top + 2 * a * t * dig_ratio) / (aa * aa)
        o1 = (dig_top - dig_ratio) / a
        o3 = (-t * dig_top + a * rest + t * dig_ratio) / (a * a)
        o2 = dig_n - dig_t
        d2 = tri_t - tri_n
        d4 = _sum_in_order(counts * (tri_alpha - trigammas[5:]))
        o4 = _sum_in_order(counts * (digammas[5:] - dig_alpha))
        return o1 - o2, o3 - o4, d2 - d1, -d5, -d5, -d3 - d4

    return evaluate


def _pitman_equations_termwise(sample: ClassSizes) -> Equations:
    """ARX's getMasterFunctionIterative: the same equations, every sum added term by term, exact derivatives."""
    steps_classes = np.arange(1, sample.classes, dtype=np.float64)
    steps_records = np.arange(1, sample.records, dtype=np.float64)
    larger = sample.sizes != 1
    sizes, counts = sample.sizes[larger], sample.counts[larger].astype(np.float64)
    inner = np.arange(1, int(sizes.max(initial=1)), dtype=np.float64)

    def evaluate(t, a):
        shifted = t + steps_classes * a
        reciprocal = 1 / shifted
        reciprocal_squared = 1 / (shifted * shifted)
        d1, o1 = _sum_in_order(reciprocal_squared), _sum_in_order(reciprocal)
        d5 = _sum_in_order(steps_classes * reciprocal_squared)
        d3 = _sum_in_order(steps_classes * (steps_classes * reciprocal_squared))
        o3 = _sum_in_order(steps_classes * reciprocal)
        # Σ_{k=1}^{i−1} 1/(k − α) and its square for every size i: prefix sums, added in ARX's order
        below = inner - a
        squares = np.cumsum(1 / (below * below))[sizes - 2]
        plain = np.cumsum(1 / below)[sizes - 2]
        d4, o4 = _sum_in_order(counts * squares), _sum_in_order(counts * plain)
        records = t + steps_records
        d2, o2 = _sum_in_order(1 / (records * records)), _sum_in_order(1 / records)
        return o1 - o2, o3 - o4, d2 - d1, -d5, -d5, -d3 - d4

    return evaluate


def _pitman_population_uniques(theta: float, alpha: float, population_size: int) -> float:
    """Γ(θ + 1) / Γ(θ + α) · N^α, from log-gammas and from gammas, each kept when in [0, N]; the larger if both."""
    if alpha == 0:
        return math.nan
    scale = np.power(np.float64(population_size), alpha)
    from_logs = np.exp(_commons_log_gamma(theta + 1) - _commons_log_gamma(theta + alpha)) * scale
    from_gammas = np.float64(_commons_gamma(theta + 1)) / np.float64(_commons_gamma(theta + alpha)) * scale
    kept = [float(v) for v in (from_logs, from_gammas) if 0 <= v <= population_size]
    return max(kept) if kept else math.nan


def _commons_log_gamma(x: float) -> float:
    """commons-math3 Gamma.logGamma: NaN from 0 down."""
    return math.lgamma(x) if x > 0 else math.nan


def _commons_gamma(x: float) -> float:
    """commons-math3 Gamma.gamma: NaN at the poles, ±inf on overflow."""
    try:
        return math.gamma(x)
    except ValueError:
        return math.nan
    except OverflowError:
        return math.inf if x > 0 else math.nan


def _zayatz(sample: ClassSizes, population_size: int, steps: int = _STEPS_PER_TRY) -> UniquenessEstimate:
    del steps  # closed-form: nothing is solved
    _require_records(sample)
    if not sample.uniques:
        return _no_uniques(ZAYATZ, population_size)
    n, c = sample.records, sample.classes
    with np.errstate(all="ignore"):
        one_found = _hypergeometric_one(min(population_size, _JAVA_INT_MAX), sample.sizes, n)
        weighted = _sum_in_order(sample.counts / np.float64(c) * one_found)
        conditional = sample.uniques / np.float64(c) * one_found[0] / weighted
        uniques = sample.uniques * conditional / (n / np.float64(population_size))
    return _estimate(ZAYATZ, population_size, float(uniques), {"conditional_uniqueness": float(conditional)},
                     converged=True)


def _hypergeometric_one(population: int, successes: np.ndarray, draws: int) -> np.ndarray:
    """P(X = 1) for X ~ Hypergeometric(population, successes, draws), per element of ``successes``:

        K · C(N − K, n − 1) / C(N, n) = K · (n/N) · Π_{j=1}^{K−1} (N − n − j + 1) / (N − j),

    the product summed in logs (log1p((1 − n)/(N − j))) to stay exact for large N; 0 once a factor is."""
    factors = np.arange(1, int(successes.max()), dtype=np.float64)
    logs = np.where(factors <= population - draws, np.log1p((1.0 - draws) / (population - factors)), -np.inf)
    log_products = np.concatenate(([0.0], np.cumsum(logs)))[successes - 1]
    return successes * (draws / population) * np.exp(log_products)


def _snb(sample: ClassSizes, population_size: int, steps: int = _STEPS_PER_TRY) -> UniquenessEstimate:
    _require_records(sample)
    if not sample.uniques:
        return _no_uniques(SNB, population_size)
    with np.errstate(all="ignore"):
        fraction = sample.records / np.float64(population_size)
        classes = _snb_population_classes(sample, fraction)
        alpha, beta = _newton_raphson(_snb_equations(classes, fraction, np.float64(sample.uniques),
                                                     np.float64(sample.count_of_size(2))), (1.0, 1.0), steps)
        converged = not math.isnan(alpha)
        uniques = classes * _java_pow(beta, alpha)
    parameters = {"alpha": float(alpha), "beta": float(beta), "population_classes": float(classes)}
    return _estimate(SNB, population_size, float(uniques), parameters if converged else {}, converged)


def _snb_population_classes(sample: ClassSizes, fraction: np.float64) -> np.float64:
    """ARX's estimateNonEmptyEquivalenceClasses (see :func:`snb_uniqueness` for the formula)."""
    sizes, counts = sample.sizes.astype(np.float64), sample.counts.astype(np.float64)
    squared = fraction * fraction
    weighted = np.power(1 - fraction, sizes) * counts
    a = _sum_in_order(sizes * squared * np.power(1 - squared, sizes - 1) * counts)
    b = _sum_in_order(weighted * np.power(1 + fraction, sizes) - 1)
    c = _sum_in_order(weighted)
    d = _sum_in_order(sizes * fraction * np.power(1 - fraction, sizes - 1) * counts)
    return sample.classes + sample.uniques * (a / b) * (c / d) * (c / d)


def _snb_equations(k: np.float64, f: np.float64, c1: np.float64, c2: np.float64) -> Equations:
    """ARX's getObjectFunction and getDerivatives (x = α, y = β), operation for operation."""

    def evaluate(a, b):
        dividend = (1 - f) * (1 - b)
        g1 = k * f * _java_pow(b / (1 - dividend), a) * (a * dividend / (1 - dividend) + 1) - c1
        g2 = (k * a * _java_pow(b, a) * (f * f) * (1 - b) / 2 * _java_pow(1 - dividend, a + 2)
              * (2 - (1 - a) * dividend) - c2)
        val0 = (b - 1) * (f - 1)
        val1 = val0 - 1
        val2 = 1 - val0
        val3 = a * val0 / val1 - 1
        val4 = _java_pow(-b / val1, a)
        val6 = _java_pow(f, 2.0)
        val7 = _java_pow(b, a)
        val9 = a * (val7 * val6 * k)
        val10 = 2 * _java_pow(val2, a + 2)
        val11 = _java_pow(val1, 2.0)
        val13 = f * k
        val14 = f - 1
        val15 = a - 1
        val16 = b - 1
        val17 = val15 * val0
        val18 = val6 * k
        val19 = val17 + 2
        val20 = val18 * val19
        x1 = -val13 * np.log(-b / val1) * val3 * val4 - val13 * val4 * val0 / val1
        x2 = (a * val13 * (1 / val1 - b * val14 / val11) * val3 * _java_pow(-b / val1, val15)
              - val13 * val4 * (a * val14 / val1 - a * val16 * _java_pow(val14, 2.0) / val11))
        y1 = (val9 * np.log(val2) * val19 * val16 / val10 - val9 * _java_pow(val16, 2.0) * val14 / val10
              - val7 * val20 * val16 / val10 - a * val7 * val18 * np.log(b) * val19 * val16 / val10)
        y2 = (-(val9 * val19) / val10 - _java_pow(a, 2.0) * _java_pow(b, val15) * val20 * val16 / val10
              - a * val7 * val18 * val17 / val10
              - a * val7 * val20 * (a + 2) * val0 / (2 * _java_pow(val2, a + 3)))
        return g1, g2, x1, x2, y1, y2

    return evaluate


def _dankar(sample: ClassSizes, population_size: int, estimate: Callable[[str], UniquenessEstimate],
            zayatz_fallback: bool = True) -> UniquenessEstimate:
    _require_records(sample)
    if not sample.uniques:
        return _no_uniques(DANKAR, population_size)
    if sample.records / population_size <= DANKAR_PITMAN_UP_TO:
        pitman = estimate(PITMAN)
        chosen = pitman if pitman.applicable or not zayatz_fallback else estimate(ZAYATZ)
    else:
        snb, zayatz = estimate(SNB), estimate(ZAYATZ)
        # ARX compares the raw values: a NaN Zayatz estimate (never seen: its terms are positive) is not smaller
        chosen = zayatz if not snb.applicable or (zayatz.applicable and zayatz.uniques < snb.uniques) else snb
    return dataclasses.replace(chosen, model=DANKAR, chosen=False, chosen_model=chosen.model)


_ESTIMATORS: dict[str, Callable[[ClassSizes, int, int], UniquenessEstimate]] = {
    PITMAN: _pitman, ZAYATZ: _zayatz, SNB: _snb}
UNIQUENESS_MODELS = (*_ESTIMATORS, DANKAR)


def uniqueness_estimate(sample: ClassSizes, population_size: int, model: str, *, steps_per_try: int = _STEPS_PER_TRY,
                        zayatz_fallback: bool = True) -> UniquenessEstimate:
    """One model's estimate (``model`` one of :data:`UNIQUENESS_MODELS`) with ARX's solver taking at most
    ``steps_per_try`` Newton–Raphson steps per start (ARXSolverConfiguration.iterationsPerTry).  ``zayatz_fallback``
    False is ARX's getNumUniqueTuplesDankar(false), which a PopulationUniqueness criterion asks: where Dankar's rule
    picks Pitman's model and it gives no estimate, the rule gives none either (Pitman's inapplicable estimate), rather
    than Zayatz's."""
    if model == DANKAR:
        return _dankar(sample, population_size, lambda chosen: _ESTIMATORS[chosen](sample, population_size,
                                                                                   steps_per_try), zayatz_fallback)
    return _ESTIMATORS[model](sample, population_size, steps_per_try)


# ------------------------------------------------------------------------------------------------- the solver

def _newton_raphson(equations: Equations, start: tuple[float, float], steps_per_try: int = _STEPS_PER_TRY, *,
                    theta_nonnegative: bool = False) -> tuple[float, float]:
    """ARX's NewtonRaphson2D.solve under ARXSolverConfiguration's defaults, its clock limits aside: a root where
    both equations are within 1e-6 of zero, or (NaN, NaN).  A try ends after 1,001 steps, on NaN, or (with
    ``theta_nonnegative``, Pitman's constraint) when x < 0; the tries start at ``start``, then at each restart, the
    last of which gets a single step."""
    starts = (start, *_RESTARTS)
    for number, (x, y) in enumerate(starts):
        x, y = np.float64(x), np.float64(y)
        steps = 0
        while True:
            g1, g2, j11, j12, j21, j22 = equations(x, y)
            if abs(g1) <= _ACCURACY and abs(g2) <= _ACCURACY:
                return float(x), float(y)
            inverse = 1 / (j11 * j22 - j12 * j21)
            x, y = x - (j22 * inverse * g1 + -j12 * inverse * g2), y - (-j21 * inverse * g1 + j11 * inverse * g2)
            if number == len(starts) - 1:
                return math.nan, math.nan
            if theta_nonnegative and not x >= 0:
                break
            if math.isnan(x) or math.isnan(y) or steps >= steps_per_try:
                break
            steps += 1
    return math.nan, math.nan


# ------------------------------------------------------------------------------------------ ARX's arithmetic

def _sum_in_order(terms: np.ndarray) -> np.float64:
    """Σ terms added left to right as ARX's loops add them (np.sum adds pairwise, which rounds differently)."""
    return np.cumsum(terms)[-1] if terms.size else np.float64(0.0)


def _java_pow(x: np.float64, y: np.float64) -> np.float64:
    """Java's Math.pow of two numbers: a NaN exponent gives NaN, and so does ±1 to an infinite power (C's pow gives 1
    for both)."""
    if math.isnan(y) or (abs(x) == 1 and math.isinf(y)):
        return np.float64(np.nan)
    return np.power(x, y)


def _recurrence(start: np.ndarray, bound: int, term: Callable[[np.ndarray], np.ndarray]
                ) -> tuple[np.ndarray, np.ndarray]:
    """ARX's loop ``while (x < bound) { value += term(x); x += 1; }`` from value 0, for every element at once: the
    values added and the x where each loop stops.  Both cumulative sums run left to right, so x is incremented and
    the terms added in the loop's order (for a start above 0 the loop runs at most ``bound`` times)."""
    ladder = np.ones((start.size, bound + 1))
    ladder[:, 0] = start
    np.cumsum(ladder, axis=1, out=ladder)
    below = ladder[:, :-1] < bound
    added = np.cumsum(np.where(below, term(ladder[:, :-1]), 0.0), axis=1)[:, -1]
    return added, ladder[np.arange(start.size), below.sum(axis=1)]


_EULER = -0.5772156649015329          # digamma(1)
_TRIGAMMA_1 = 1.6449340668482264      # π²/6
_TETRAGAMMA_1 = -2.4041138063191885   # −2 ζ(3)
_DIGAMMA_SERIES = (0.08333333333333333, 0.008333333333333333, 0.003968253968253968, 0.004166666666666667,
                   0.007575757575757576)
_TRIGAMMA_SERIES = (0.16666666666666666, -0.03333333333333333, 0.023809523809523808, -0.03333333333333333,
                    0.07575757575757576)


def _arx_digamma(x: np.ndarray) -> np.ndarray:
    """ARX's Gamma.digamma, elementwise: NaN at ±inf, −inf at 0, ψ(x) = ψ(1 − x) + π / tan(−πx) below 0, a series
    at 0 < x ≤ 1e-6, else the recurrence ψ(x) = ψ(x + 1) − 1/x up to 12 and the asymptotic series."""
    x = np.asarray(x, dtype=np.float64)
    negative = x < 0
    z = np.where(negative, 1 - x, x)
    regular = z > 1e-6
    value, y = _recurrence(np.where(regular, z, 12.0), 12, lambda y: -1 / y)
    inverse = 1 / y
    value = value + (np.log(y) - 0.5 * inverse)
    inverse = inverse * inverse
    s3, s4, s5, s6, s7 = _DIGAMMA_SERIES
    value = value - inverse * (s3 - inverse * (s4 - inverse * (s5 - inverse * (s6 - inverse * s7))))
    result = np.where(regular, value, _EULER - 1 / z + _TRIGAMMA_1 * z)
    result = np.where(negative, result + np.pi / np.tan(-np.pi * x), result)
    result[x == 0] = -np.inf
    result[~np.isfinite(x)] = np.nan
    return result


def _arx_trigamma(x: np.ndarray) -> np.ndarray:
    """ARX's Gamma.trigamma, elementwise, with its gap: NaN at ±inf, −inf at 0, ψ₁(x) = −ψ₁(1 − x) + (π / sin(−πx))²
    below 0, a series at 0 < x ≤ 1e-4, else the recurrence ψ₁(x) = ψ₁(x + 1) + 1/x² up to 8, plus the asymptotic
    series only from 12, so for 1e-4 < x < 12 the result lacks the tail."""
    x = np.asarray(x, dtype=np.float64)
    negative = x < 0
    z = np.where(negative, 1 - x, x)
    regular = z > 1e-4
    value, y = _recurrence(np.where(regular, z, 8.0), 8, lambda y: 1 / (y * y))
    inverse = 1 / (y * y)
    b2, b4, b6, b8, b10 = _TRIGAMMA_SERIES
    series = 0.5 * inverse + (1 + inverse * (b2 + inverse * (b4 + inverse * (b6 + inverse * (b8 + inverse * b10))))) / y
    value = np.where(y >= 12, value + series, value)
    result = np.where(regular, value, 1 / (z * z) + _TRIGAMMA_1 + _TETRAGAMMA_1 * z)
    reflection = np.pi / np.sin(-np.pi * x)
    result = np.where(negative, -result + reflection * reflection, result)
    result[x == 0] = -np.inf
    result[~np.isfinite(x)] = np.nan
    return result
