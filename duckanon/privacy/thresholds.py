"""Risk thresholds: privacy models over the release's class sizes as a whole (ARX's ``RiskBasedCriterion``).

No class violates such a model by itself: the average re-identification risk, the share of sample uniques or the
estimated share of population uniques is a figure of all the classes together.  When the classes the other models
keep exceed the threshold, the smallest classes are suppressed until it holds, as ARX 3.9.2 enforces a risk-based
criterion (``HashGroupifyDistribution.suppressWhileNotFulfilledBinary``): the kept classes are ordered by size, and a
binary search over that order finds how many of the first are suppressed.  The figure depends only on the sizes of
the classes left (a frequency of frequencies), so searches, checks and publishing all compute it from the class-size
histogram that the engine counts, and choose the same classes: among classes of one size, those first in the order of
their quasi-identifier values (codes at a search's node, which rank the values in that order), NULL last.  ARX breaks
that tie by each class's information loss under the search's metric, then by its first record; the size histogram
left, and so every verdict and suppressed-record count, is the same either way.

Differences from ARX, by design: a release's classes are all counted, including one whose every quasi-identifier is
at its hierarchy's top (ARX leaves such classes out of the histogram, which only matters at the top node); where
suppressed records are replaced and checked (``suppression="replace"``), their '*' class counts as a class of the
release too; under ARX's ``replace-unchecked`` it is left out, as ARX leaves suppressed records out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from ..parameters import checked_number
from ..risk.population import DANKAR, UNIQUENESS_MODELS, ClassSizes, uniqueness_estimate
from ..sqlgen import build as sb
from .models import DataFacts, PrivacyModel

# ARX's ParameterTranslation.RELATIVE_THRESHOLD_PRECISION: a size threshold's risk may exceed the risk asked for by
# this share of it.
_RELATIVE_PRECISION = 0.01


class RiskThreshold(PrivacyModel):
    """A bound on a risk figure of the release's class sizes as a whole (see the module's text)."""

    risk_threshold = True
    threshold: float

    def holds(self, sizes: np.ndarray, counts: np.ndarray) -> bool:
        """Whether classes of ``sizes`` records, ``counts`` classes of each (sizes distinct, ascending; none when
        every class is suppressed), meet the threshold."""
        raise NotImplementedError

    def figure(self, sizes: np.ndarray, counts: np.ndarray) -> str:
        """The figure the threshold bounds, for those classes, in words."""
        raise NotImplementedError

    def holds_after(self, ordered: np.ndarray) -> np.ndarray | None:
        """For a threshold that only gets easier as the smallest classes go: per count p of them suppressed (0 to
        all), whether the classes of ``ordered`` sizes (ascending) left meet it -- :meth:`holds` for every p at once,
        the same divisions of the same whole numbers; None where there is no such form."""
        return None

    def sql_holds(self, size: exp.Expression) -> exp.Expression | None:
        """An aggregate over a relation of one row per class (``size`` its records) that is true when the threshold
        holds for those classes: what a release's plain-SQL view recomputes.  None where SQL cannot (an estimator
        that solves equations)."""
        return None

    def _checked_threshold(self, threshold: float, name: str = "threshold") -> float:
        return float(checked_number(threshold, name, self.name, low=0, high=1))


def size_threshold(risk: float) -> int:
    """ARX's ParameterTranslation.getSizeThreshold: the smallest class size whose risk 1/size is at most ``risk``,
    give or take 1 % of it."""
    if risk == 0:
        return 2**31 - 1
    size = 1 / risk
    floor = math.floor(size)
    return int(floor + 1 if (1 / floor) - (1 / size) >= _RELATIVE_PRECISION * risk else floor)


class AverageReidentificationRisk(RiskThreshold):
    """The release's average re-identification risk, 1 / its average class size (classes / records), is at most
    ``threshold`` (ARX's ``AverageReidentificationRisk``).  With ``highest_risk`` and ``records_at_risk`` (both or
    neither), besides, at most that share of the records sits in classes whose risk exceeds ``highest_risk``: classes
    smaller than ARX's size threshold for it (:func:`size_threshold`)."""

    name = "average-reidentification-risk"
    monotone_under_suppression = True  # ARX's flag; tests hold the optimal search to the exhaustive one

    def __init__(self, threshold: float, highest_risk: float | None = None, records_at_risk: float | None = None):
        self.threshold = self._checked_threshold(threshold)
        if (highest_risk is None) != (records_at_risk is None):
            raise PolicyError(f"{self.name}: give highest_risk and records_at_risk together, or neither")
        self.highest_risk = None if highest_risk is None else float(
            checked_number(highest_risk, "highest_risk", self.name, low=0, low_open=True, high=1))
        self.records_at_risk = None if records_at_risk is None else self._checked_threshold(records_at_risk,
                                                                                             "records_at_risk")

    def holds(self, sizes, counts):
        records = float(sizes @ counts)
        if records == 0:
            return True
        if counts.sum() / records > self.threshold:  # 1 / (records / classes), as ARX divides
            return False
        if self.highest_risk is None:
            return True
        small = sizes < size_threshold(self.highest_risk)
        return float(sizes[small] @ counts[small]) / records <= self.records_at_risk

    def holds_after(self, ordered):
        classes = np.arange(len(ordered), -1, -1, dtype=np.int64)
        records = _records_left(ordered)
        with np.errstate(divide="ignore", invalid="ignore"):
            holds = (records == 0) | (classes / records <= self.threshold)
            if self.highest_risk is not None:
                small = _records_left(np.where(ordered < size_threshold(self.highest_risk), ordered, 0))
                holds &= (records == 0) | (small / records <= self.records_at_risk)
        return holds

    def figure(self, sizes, counts):
        records = float(sizes @ counts)
        return f"average risk {counts.sum() / records if records else 0:.6g} over {int(counts.sum()):,} classes"

    def sql_holds(self, size):
        records = sb.as_double(exp.func("SUM", size))
        holds = exp.func("COUNT", exp.Star()) / records <= sb.lit(self.threshold)
        if self.highest_risk is not None:
            small = exp.func("SUM", exp.Case().when(size.copy() < sb.lit(size_threshold(self.highest_risk)),
                                                      size.copy()).else_(sb.lit(0)))
            holds = exp.and_(holds, small / records.copy() <= sb.lit(self.records_at_risk))
        return exp.func("COALESCE", holds, exp.true())  # no class: nothing at risk


class SampleUniqueness(RiskThreshold):
    """At most ``threshold`` of the release's records are unique on their quasi-identifiers: in classes of one
    record (ARX's ``SampleUniqueness``)."""

    name = "sample-uniqueness"
    monotone_under_suppression = True  # merging never makes a unique, suppressing uniques first removes them

    def __init__(self, threshold: float):
        self.threshold = self._checked_threshold(threshold)

    def holds(self, sizes, counts):
        records = float(sizes @ counts)
        uniques = float(counts[sizes == 1].sum())
        return records == 0 or uniques / records <= self.threshold

    def holds_after(self, ordered):
        records = _records_left(ordered)
        uniques = _records_left((ordered == 1).astype(np.int64))
        with np.errstate(divide="ignore", invalid="ignore"):
            return (records == 0) | (uniques / records <= self.threshold)

    def figure(self, sizes, counts):
        records = float(sizes @ counts)
        uniques = int(counts[sizes == 1].sum())
        return f"{uniques:,} unique records, {uniques / records if records else 0:.6g} of {int(records):,}"

    def sql_holds(self, size):
        uniques = exp.func("SUM", exp.Case().when(size.eq(sb.lit(1)), sb.lit(1)).else_(sb.lit(0)))
        return exp.func("COALESCE", uniques / sb.as_double(exp.func("SUM", size.copy())) <= sb.lit(self.threshold),
                        exp.true())


class PopulationUniqueness(RiskThreshold):
    """At most ``threshold`` of the population (``population_size`` people, of whom the data is a sample) is
    estimated to be unique on the release's quasi-identifiers, by Pitman's, Zayatz's or the SNB model or Dankar et
    al.'s rule among them (ARX's ``PopulationUniqueness``, with its estimators: :mod:`duckanon.risk.population`).

    As ARX decides it: an estimate of 0 holds only when the release has no sample uniques (no model estimates
    anything then), and where Dankar's rule picks Pitman's model and it finds no root, the rule gives no estimate,
    which fails.  ``solver_steps`` are the Newton–Raphson steps per start (ARX's ``iterationsPerTry``; 1000 by
    default; ARX's tests take 15).  Not monotone: suppressing classes changes the sample the models fit, and
    merging them can move an estimate either way."""

    name = "population-uniqueness"

    def __init__(self, threshold: float, population_size: int, estimator: str = DANKAR, solver_steps: int = 1000):
        self.threshold = self._checked_threshold(threshold)
        self.population_size = int(checked_number(population_size, "population_size", self.name, low=1,
                                                  whole=True))
        if estimator not in UNIQUENESS_MODELS:
            raise PolicyError(f"{self.name}: unknown estimator {estimator!r}; known: {', '.join(UNIQUENESS_MODELS)}")
        self.estimator = estimator
        self.solver_steps = int(checked_number(solver_steps, "solver_steps", self.name, low=1, whole=True))

    # ARX flags Zayatz's estimate monotone under generalization; with the rule that an estimate of 0 holds only
    # without sample uniques it is not (tests found a generalization of a satisfying node that fails), so no
    # estimator is: the search prunes by bounds alone.
    monotone_under_generalization = False

    def holds(self, sizes, counts):
        if not len(sizes):
            return True
        sample = ClassSizes(sizes, counts)
        estimate = uniqueness_estimate(sample, self.population_size, self.estimator,
                                       steps_per_try=self.solver_steps, zayatz_fallback=False)
        if estimate.uniques == 0:
            return sample.uniques == 0
        return estimate.applicable and estimate.share <= self.threshold

    def figure(self, sizes, counts):
        if not len(sizes):
            return "no class"
        estimate = uniqueness_estimate(ClassSizes(sizes, counts), self.population_size, self.estimator,
                                       steps_per_try=self.solver_steps, zayatz_fallback=False)
        shown = f"{estimate.share:.6g}" if estimate.applicable else "no estimate"
        return f"estimated population uniques {shown} ({estimate.chosen_model or estimate.model})"

    def check_data(self, facts: DataFacts) -> None:
        if self.population_size < facts.size:
            raise PolicyError(f"{self.name}: population_size={self.population_size} is smaller than the data "
                              f"({facts.size} {facts.unit}), which is a sample of it")

    def in_stratum(self, share):
        # The stratum's population: its share of the records, sampled as the whole data is (at least one person).
        if share == 1:
            return self
        return PopulationUniqueness(self.threshold, max(1, round(self.population_size * share)), self.estimator,
                                    self.solver_steps)


def _records_left(ordered: np.ndarray) -> np.ndarray:
    """Per count p of the first classes gone (0 to all), the sum of ``ordered`` over the others, as float64 (whole
    numbers, exact below 2**53)."""
    return (ordered.sum() - np.concatenate(([0], np.cumsum(ordered)))).astype(np.float64)


def risk_thresholds(models: Sequence[PrivacyModel]) -> list[RiskThreshold]:
    return [m for m in models if m.risk_threshold]


@dataclass(frozen=True, eq=False)
class Cut:
    """How many of the kept classes, in the order of :func:`cut`, a policy's risk thresholds suppress: ``prefixes``
    per threshold (each at least the one before; the classes between the previous and its own count against it),
    ``records`` in the suppressed classes, the threshold that still fails after them (ARX's search over a threshold
    that is not monotone can end on a count that does not meet it; the later thresholds are then not tried), and the
    histogram left."""

    prefixes: tuple[int, ...]
    records: int
    failed: int | None  # the threshold (its place) that the classes left still fail, if one does
    left_sizes: np.ndarray  # the histogram of the classes left
    left_counts: np.ndarray

    @property
    def classes(self) -> int:
        return self.prefixes[-1] if self.prefixes else 0

    @property
    def holds(self) -> bool:
        return self.failed is None


def cut(thresholds: Sequence[RiskThreshold], sizes: np.ndarray) -> Cut:
    """The classes ``thresholds`` suppress among kept classes of ``sizes`` records (any order): each threshold in
    turn, when the classes left after the earlier ones do not meet it, suppresses the first classes in ascending
    size, as many as ARX's binary search over that order finds (:func:`_arx_binary_search`; ARX also ends it early
    once a failing probe suppresses more than the limit allows, which changes no verdict, only the count reported
    for a failing node: not done here, so that every count is the cut's own)."""
    distinct, counts = np.unique(np.asarray(sizes, dtype=np.int64), return_counts=True)
    ends = np.cumsum(counts)  # classes up to and including each size
    before = np.concatenate(([0], np.cumsum(np.repeat(distinct, counts))))  # records in the first p classes

    def left_after(p: int) -> tuple[np.ndarray, np.ndarray]:
        """The histogram of the classes left once the first ``p`` go."""
        at = int(np.searchsorted(ends, p, side="right"))
        left = counts[at:].copy()
        if len(left):
            left[0] = ends[at] - p
        return distinct[at:], left

    prefixes, prefix, failed = [], 0, None
    for place, threshold in enumerate(thresholds):
        def fulfilled(p: int, threshold=threshold) -> bool:
            return threshold.holds(*left_after(p))

        at_once = threshold.holds_after(np.repeat(distinct, counts))
        if at_once is not None:  # it only gets easier: ARX's binary search ends at the fewest classes that meet it
            prefix = prefix + int(np.argmax(at_once[prefix:]))  # all gone always meets it
        elif not fulfilled(prefix):
            prefix, holds = _arx_binary_search(fulfilled, prefix, int(before.size - 1))
            if not holds:
                failed = place
        prefixes.append(prefix)
        if failed is not None:
            break
    prefixes += [prefix] * (len(thresholds) - len(prefixes))
    return Cut(tuple(prefixes), int(before[prefix]), failed, *left_after(prefix))


def starred_fails(thresholds: Sequence[RiskThreshold], left: Cut, suppressed: int) -> bool:
    """Whether the classes ``left`` keeps, with the suppressed records as one class of their own (every
    quasi-identifier '*', as replacement publishes them), fail a threshold."""
    if not suppressed:
        return False
    sizes, counts = left.left_sizes, left.left_counts
    at = int(np.searchsorted(sizes, suppressed))
    if at < len(sizes) and sizes[at] == suppressed:
        counts = counts.copy()
        counts[at] += 1
    else:
        sizes, counts = np.insert(sizes, at, suppressed), np.insert(counts, at, 1)
    return not all(t.holds(sizes, counts) for t in thresholds)


def _arx_binary_search(fulfilled, start: int, classes: int) -> tuple[int, bool]:
    """ARX's suppressWhileNotFulfilledBinary over the classes from ``start`` on: (classes suppressed in all,
    whether the threshold holds after them).  For a threshold that only gets easier as more small classes go (average
    risk, sample uniqueness) this is the fewest classes that meet it; for another (population uniqueness) it is where
    ARX's search ends."""
    if start >= classes:
        return start, True
    low, high = start, classes - 1
    mid = (low + high) // 2  # classes up to mid are suppressed: a prefix of mid + 1
    while low <= high:
        if fulfilled(mid + 1):
            high = mid - 1
        else:
            low = mid + 1
        mid = (low + high) // 2
    if fulfilled(mid + 1):
        return mid + 1, True
    if mid + 1 < classes:  # ARX then suppresses one class more
        return mid + 2, fulfilled(mid + 2)
    return mid + 1, False
