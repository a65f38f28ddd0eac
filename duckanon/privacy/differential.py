"""(ε,δ)-differential privacy for microdata as SafePub defines it, and the randomness it draws from.

SafePub (Bild, Kuhn and Prasser, "SafePub: A Truthful Data Anonymization Algorithm With Strong Privacy Guarantees",
PoPETs 2018(1), 67–87; ARX 3.9.2's ``EDDifferentialPrivacy`` with ``DataDependentEDDPAlgorithm``) releases a
generalization of a random sample: every record is drawn with probability β, the sample is generalized to one
full-domain transformation, and every class of fewer than k sampled records is suppressed (dropped).  Li, Qardaji and
Su ("On sampling, anonymization, and differential privacy", ASIACCS 2012, Theorem 5; SafePub §3.3) show that this
(k,β)-SDGS scheme satisfies (ε,δ)-differential privacy when

    β = 1 − e^(−ε)                                                    (SafePub eq. 2)
    δ ≥ d(k, β, ε) = max over n ≥ n_m of Σ_{j > γn}^{n} f(j; n, β)    (SafePub eq. 3)
    γ = (e^ε − 1 + β) / e^ε,    n_m = ⌈k/γ − 1⌉

with f the binomial probability mass.  The transformation is chosen by the exponential mechanism from the sample's
scores (:mod:`duckanon.search.safepub`), which spends ``search_epsilon`` of the budget; the sampling and the
suppression get the rest.  So k is the smallest whole number with d(k, β, ε − search_epsilon) ≤ δ.

The maximum over n is bounded as ARX bounds it (``ParameterCalculation.calculateDelta``): the tail a_n is at most the
Chernoff bound c_n = exp(−n (γ ln(γ/β) − (γ − β))), which falls with n, so the search over n stops at the first n
where the largest a_n seen reaches c_n.  ARX returns one more than that smallest k (its loop increments k after the
test that ends it); ``k_rule="arx"`` gives ARX's k, ``"safepub"`` (the default) the paper's.

Randomness: a release draws from the operating system's cryptographically secure source (:class:`SecureRandom`,
``os.urandom``), as ARX draws from ``SecureRandom``; :class:`SeededRandom` exists for tests of the mechanisms'
distributions, and no seed ever reaches a release (:class:`~duckanon.release.files.ReleaseInfo` refuses one).
"""

from __future__ import annotations

import math
import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from ..errors import PolicyError
from ..parameters import checked_number
from .models import DataFacts, PrivacyModel

K_RULES = ("safepub", "arx")
# The share of ε the search spends when none is given.  ARX's default is an absolute 0.1 (ARXConfiguration's
# dpSearchBudget), which is a fifth of ε = 0.5 and a thirtieth of ε = 3; a share keeps the split alike across ε.
DEFAULT_SEARCH_SHARE = 0.1


@dataclass(frozen=True)
class SamplingParameters:
    """What (ε, δ) give the (k,β)-SDGS scheme: each record's sampling probability β and the smallest class kept, k."""

    beta: float
    k: int


def _log_factorials(n: int) -> np.ndarray:
    return np.concatenate(([0.0], np.cumsum(np.log(np.arange(1, n + 1, dtype=float)))))


class _BinomialTails:
    """a_n = Σ_{j = ⌊γn⌋+1}^{n} f(j; n, β) and the Chernoff bound c_n, each n computed once."""

    def __init__(self, beta: float, gamma: float):
        self.beta, self.gamma = beta, gamma
        self.log_factorials = _log_factorials(1024)
        self.tails: dict[int, float] = {}
        # c_n = exp(−n · rate); rate > 0 as γ > β.
        self.rate = gamma * math.log(gamma / beta) - (gamma - beta)

    def tail(self, n: int) -> float:
        if n not in self.tails:
            if n >= len(self.log_factorials):
                self.log_factorials = _log_factorials(2 * n)
            lf = self.log_factorials
            j = np.arange(math.floor(n * self.gamma) + 1, n + 1)
            if j.size == 0:
                self.tails[n] = 0.0
            else:
                log_pmf = (lf[n] - lf[j] - lf[n - j] + j * math.log(self.beta) + (n - j) * math.log1p(-self.beta))
                top = log_pmf.max()
                self.tails[n] = float(math.exp(top) * np.exp(log_pmf - top).sum())
        return self.tails[n]

    def bound(self, n: int) -> float:
        return math.exp(-n * self.rate)

    def delta(self, k: int) -> float:
        """d(k, β, ε): the largest tail from n_m on, searched until the falling bound c_n no longer exceeds it."""
        n = max(math.ceil(k / self.gamma - 1.0), 1)
        largest = -math.inf
        while True:
            largest = max(largest, self.tail(n))
            if largest >= self.bound(n):
                return largest
            n += 1


@lru_cache(maxsize=256)
def sampling_parameters(epsilon: float, delta: float, k_rule: str = "safepub") -> SamplingParameters:
    """β and k of the (k,β)-SDGS scheme that gives (``epsilon``, ``delta``)-differential privacy (the budget left for
    sampling and suppression); see the module for the formulas and ``k_rule``."""
    if k_rule not in K_RULES:
        raise PolicyError(f"k_rule must be one of {', '.join(K_RULES)}, got {k_rule!r}")
    beta = -math.expm1(-epsilon)  # 1 − e^(−ε)
    power = math.exp(epsilon)
    gamma = (power - 1.0 + beta) / power
    tails = _BinomialTails(beta, gamma)
    k = 1
    while tails.delta(k) > delta:
        k += 1
    return SamplingParameters(beta, k + 1 if k_rule == "arx" else k)


class EDDifferentialPrivacy(PrivacyModel):
    """(ε,δ)-differential privacy by SafePub (see the module): a random sample, generalized by a transformation the
    exponential mechanism picks in ``steps`` steps from the top of the lattice with ``search_epsilon`` of the budget
    (default a tenth of ``epsilon``), and every class of fewer than k sampled records dropped.  As a check of a
    release it is k-anonymity with that k; the release's policy records ε, δ, the steps and the search's ε, from
    which a recipient derives k again."""

    name = "ed-differential-privacy"
    monotone_under_suppression = True  # as a check: k-anonymity with the derived k
    differentially_private = True

    def __init__(self, epsilon: float, delta: float, steps: int = 100, search_epsilon: float | None = None,
                 k_rule: str = "safepub", k: int | None = None):
        self.epsilon = float(checked_number(epsilon, "epsilon", self.name, low=0, low_open=True))
        self.delta = float(checked_number(delta, "delta", self.name, low=0, high=1, low_open=True, high_open=True))
        self.steps = checked_number(steps, "steps", self.name, whole=True, low=1,
                                    note="the exponential mechanism's choices, each spending search_epsilon / steps")
        if search_epsilon is None:
            search_epsilon = DEFAULT_SEARCH_SHARE * self.epsilon
        self.search_epsilon = float(checked_number(search_epsilon, "search_epsilon", self.name, low=0, low_open=True))
        if self.search_epsilon >= self.epsilon:
            raise PolicyError(f"{self.name}: search_epsilon={self.search_epsilon!r} must be below epsilon="
                              f"{self.epsilon!r}: the sampling and suppression need the rest of the budget")
        if k_rule not in K_RULES:
            raise PolicyError(f"{self.name}: k_rule must be one of {', '.join(K_RULES)}, got {k_rule!r}")
        self.k_rule = k_rule
        # A stored policy (a release's) records the derived k, so that plain SQL can check classes against it; it
        # must be what these parameters derive.
        if k is not None and k != self.minimum_size:
            raise PolicyError(f"{self.name}: k={k!r} is recorded, but epsilon={self.epsilon!r}, delta={self.delta!r}, "
                              f"search_epsilon={self.search_epsilon!r} derive k={self.minimum_size} ({self.k_rule})")

    @property
    def sampling(self) -> SamplingParameters:
        """β and k for the budget left after the search (ε − search_epsilon)."""
        return sampling_parameters(self.epsilon - self.search_epsilon, self.delta, self.k_rule)

    @property
    def minimum_size(self) -> int:
        return self.sampling.k

    @property
    def step_epsilon(self) -> float:
        """What each of the search's choices spends."""
        return self.search_epsilon / self.steps

    def params(self) -> dict:
        return {**super().params(), "k": self.minimum_size}

    def check_data(self, facts: DataFacts) -> None:
        if self.delta >= 1.0 / facts.records:
            warnings.warn(f"{self.name}: delta={self.delta!r} is at least 1/n = 1/{facts.records}: a guarantee with "
                          f"such a δ allows releasing a record outright; choose δ well below 1/n", stacklevel=2)

    def describe(self) -> str:
        return f"{super().describe()[:-1]}, beta={self.sampling.beta:.6g})"


def differentially_private(models: Sequence[PrivacyModel]) -> EDDifferentialPrivacy | None:
    """The policy's differential-privacy model, or None."""
    found = [m for m in models if isinstance(m, EDDifferentialPrivacy)]
    return found[0] if found else None


# Records drawn at once when sampling: 8 MB of random bytes.
_DRAW_CHUNK = 1 << 20


class RandomSource:
    """Where a differentially private release draws its randomness: uniform numbers in [0, 1)."""

    def uniform(self, size: int) -> np.ndarray:
        raise NotImplementedError

    def sampled(self, counts: np.ndarray, probability: float) -> np.ndarray:
        """Per group of ``counts`` records, how many of them a draw of each record with ``probability`` keeps: one
        draw per record, summed per group (the groups' records are alike, so which of them does not matter)."""
        counts = np.asarray(counts, dtype=np.int64)
        ends = np.cumsum(counts)
        # Records kept before each group's end, drawn in chunks so that memory does not grow with the records.
        kept_by_end = np.zeros(len(counts), dtype=np.int64)
        kept_before = 0
        for start in range(0, int(ends[-1]) if len(ends) else 0, _DRAW_CHUNK):
            stop = min(start + _DRAW_CHUNK, int(ends[-1]))
            running = kept_before + np.cumsum(self.uniform(stop - start) < probability)
            inside = (ends > start) & (ends <= stop)
            kept_by_end[inside] = running[ends[inside] - start - 1]
            kept_before = int(running[-1])
        return np.diff(np.concatenate(([0], kept_by_end)))

    def choice(self, weights: np.ndarray) -> int:
        """An index drawn with probability proportional to ``weights`` (non-negative, not all 0)."""
        cumulative = np.cumsum(np.asarray(weights, dtype=float))
        return int(min(np.searchsorted(cumulative, self.uniform(1)[0] * cumulative[-1], side="right"),
                       len(cumulative) - 1))


class SecureRandom(RandomSource):
    """The operating system's cryptographically secure generator (``os.urandom``): 53 random bits per number."""

    def uniform(self, size: int) -> np.ndarray:
        bits = np.frombuffer(os.urandom(8 * size), dtype=np.uint64) >> np.uint64(11)
        return bits.astype(np.float64) * (1.0 / (1 << 53))


class SeededRandom(RandomSource):
    """A seeded generator, for tests of the mechanisms' distributions only: a release made with it is not private
    (anyone with the seed regenerates its choices)."""

    def __init__(self, seed: int):
        self.generator = np.random.default_rng(seed)

    def uniform(self, size: int) -> np.ndarray:
        return self.generator.random(size)


def exponential_choice(scores: Sequence[float], epsilon: float, random: RandomSource) -> int:
    """The exponential mechanism (McSherry and Talwar 2007) over ``scores`` of sensitivity 1 (higher is better): index
    i with probability ∝ exp(ε · score_i / 2), computed from the largest score down so that no exponent overflows
    (ARX's ``ExponentialMechanism``)."""
    exponents = 0.5 * epsilon * np.asarray(scores, dtype=float)
    return random.choice(np.exp(exponents - exponents.max()))
