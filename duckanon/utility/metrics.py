"""Utility metrics of a full-domain generalization, and lower bounds that make optimal search exact.

Every metric is computed from the totals of one node's evaluation query (:class:`NodeTotals`): class sizes,
suppressed records, and sums of per-record costs.  Record-level costs (Loss/LM, NCP, non-uniform entropy) are
precomputed once per attribute, level and original value (:func:`cost_table`) and summed in SQL.

**Lower bounds.**  :meth:`Metric.lower_bound` of a node bounds the metric of the node *and every generalization of
it*, with or without suppression.  The search prunes a node's whole up-set when the bound reaches the best value
found, so it stays exact for metrics that are not monotone under suppression (generalizing can reduce suppression and
with it the loss):

- record-cost metrics: a record's cost only grows with its attribute's level, and a suppressed record costs the most,
  so the sum of every record's cost at the node's levels, suppression ignored, is a bound;
- DM: a suppressed class E costs |D|·|E| ≥ |E|², and merging classes only grows Σ|E|², so Σ|E|² over all classes is
  a bound;
- average class size: a generalization has no more classes than the node (suppressed records count as one class), so
  |D| / classes is a bound.

Without suppression every bound equals the metric: the metrics are monotone.

**ARX's metrics** (``arx-loss``, ``dm-star``, ``arx-entropy``, ``arx-nm-entropy``, ``arx-precision``,
``arx-precision-monotone``, ``arx-height``, ``arx-ebil``, ``arx-ambiguity``, ``arx-aecs``) are defined as ARX 3.9.2
defines them (its ``metric/v2`` sources, cited per class), so that a search here and ARX's optimize the same
objective; duckanon's own (``loss``, ``dm``, …) keep their definitions.  A metric sums record costs in cost sums (:class:`CostSum`): one per
metric for those that weigh attributes into one total, one per attribute for those that aggregate attributes' losses
otherwise (ARX's Loss: a geometric mean by default).
"""

from __future__ import annotations

import functools
import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlglot import exp

from ..deferred import is_missing
from ..errors import PolicyError
from ..hierarchy.hierarchy import Hierarchy, IntervalHierarchy
from ..hierarchy.shares import domain_share, log_domain_shares, row_share
from ..parameters import checked_number
from ..privacy.profitability import CostBenefit

# share: ARX's domain share (domain_share); log-share its log10; log-row-share the log10 of the hierarchy rows a value
# covers over all rows, whatever the hierarchy (row_share).
COST_KINDS = ("lm", "ncp", "entropy", "share", "log-share", "log-row-share")
# The kinds whose cost at level 0 (an original value) is not 0: a domain share counts the original values' shares too.
COSTED_AT_BOTTOM = ("share", "log-share", "log-row-share")
# A suppressed record's cost per attribute ('*' covers the domain: share 1, log10 share 0); entropy's depends on the
# original value (cost_table).
SUPPRESSED_COST = {"lm": 1.0, "ncp": 1.0, "share": 1.0, "log-share": 0.0, "log-row-share": 0.0}


@dataclass(frozen=True)
class CostSum:
    """A sum the node evaluators compute for a metric: over records, over attributes, weight × the record's cost of
    ``kind`` at the node's levels (the weights of attributes left out are 0).  With ``exp10``, each record's
    weighted sum s counts as 10^s: over log10 domain shares, the product of the record's shares (ARX's ambiguity)."""

    name: str
    kind: str
    weights: Mapping[str, float]
    exp10: bool = False

    def per_record(self, weighted):
        """A record's cost in this sum from its weighted sum over attributes (a number or an array): the sum, or 10
        to its power."""
        return 10.0 ** weighted if self.exp10 else weighted


@dataclass(frozen=True)
class TupleWeights:
    """For metrics that weigh tuples (:attr:`Metric.weighs_tuples`): each record weighs its tuple's records C_t (the
    records with its original quasi-identifier values), so a class c weighs Q_c = Σ over its tuples of C_t².
    ``total`` is Σ over tuples of C_t², ``total_logs`` Σ of C_t² · log2 C_t (both alike for every node);
    ``suppressed`` is Σ over suppressed classes of Q_c, ``kept_log_sizes`` Σ over kept classes of Q_c · log2 (their
    size), and ``kept_costs`` per cost sum Σ over kept classes of Q_c · one of their records' cost."""

    total: float
    total_logs: float
    suppressed: float = 0.0
    kept_log_sizes: float = 0.0
    kept_costs: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class NodeTotals:
    """What one node's evaluation query returns."""

    records: int
    suppressed: int
    classes: int
    kept_classes: int
    squares: float
    kept_squares: float
    # per cost sum (:class:`CostSum`'s name): (sum over all records at the node's levels, sum over kept records, sum
    # over suppressed records at their suppressed cost)
    costs: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)
    # per cost sum: its sum over all records at the lattice's bottom (the original values), which no node is below
    bottom: Mapping[str, float] = field(default_factory=dict)
    # the node's level and its hierarchy's height, per quasi-identifier
    levels: Sequence[int] = ()
    heights: Sequence[int] = ()
    # per quasi-identifier, when a metric asks (:attr:`Metric.suppressed_spread`): Σ over its values v at the node's
    # level of c_v · log2(n / c_v), c_v of the n suppressed records holding v -- n times the entropy of the attribute
    # among the suppressed records
    suppressed_entropy: Sequence[float] = ()
    # per metric that counts classes (:attr:`Metric.counts_classes`), by name: the sum of its weights of the kept
    # classes (Metric.counted)
    counted_classes: Mapping[str, float] = field(default_factory=dict)
    # when a metric weighs tuples
    tuples: TupleWeights | None = None


def gs_factors(gs_factor: float, name: str) -> tuple[float, float, float]:
    """ARX's gs-factor (``AbstractMetricSingleDimensional``, ``AbstractMetricMultiDimensional``), checked, with the
    generalization factor g it gives (1 up to 0.5, then 1 − 2 (gs − 0.5)) and the suppression factor s (2 gs below
    0.5, then 1)."""
    gs = float(checked_number(gs_factor, "gs_factor", f"metric {name}", low=0, high=1))
    return gs, (1.0 if gs <= 0.5 else 1.0 - 2.0 * (gs - 0.5)), (2.0 * gs if gs < 0.5 else 1.0)


class Metric(ABC):
    """A utility metric: lower is better."""

    name: str = ""
    cost_kind: str | None = None
    # Whether the value needs how the suppressed records spread over each attribute's values
    # (NodeTotals.suppressed_entropy), which evaluators compute only then.
    suppressed_spread: bool = False
    # Whether the value sums a weight of each kept class, from its size and, for a metric that also
    # `counts_population`, its records in the policy's population table (NodeTotals.counted_classes): the evaluators
    # sum :meth:`counted` over arrays and :meth:`counted_sql` in SQL, the same formula.
    counts_classes: bool = False
    counts_population: bool = False
    # Whether the value weighs each record by its tuple's records (NodeTotals.tuples, :class:`TupleWeights`), which
    # evaluators compute only then; a record's cost in such a metric's cost sums must be alike across its class.
    weighs_tuples: bool = False

    def counted(self, sizes: np.ndarray, population: np.ndarray | None) -> np.ndarray:
        """Per class of ``sizes`` records (and ``population`` population records, given where the metric
        :attr:`counts_population`), its weight in the sum (float64)."""
        raise NotImplementedError

    def counted_sql(self, size: exp.Expression, population: exp.Expression | None) -> exp.Expression:
        """:meth:`counted` over a class's size (a DOUBLE) and population records in SQL."""
        raise NotImplementedError

    def weights(self, attributes: Sequence[str]) -> dict[str, float]:
        """Per-attribute weights of the record cost (record-cost metrics only)."""
        return {a: 1.0 for a in attributes}

    def cost_sums(self, attributes: Sequence[str]) -> list[CostSum]:
        """The record-cost sums this metric needs per node: by default one over all attributes, weighted."""
        if self.cost_kind is None:
            return []
        return [CostSum(self.name, self.cost_kind, self.weights(attributes))]

    @abstractmethod
    def value(self, totals: NodeTotals) -> float: ...

    @abstractmethod
    def lower_bound(self, totals: NodeTotals) -> float: ...

    def prior_bounds(self, nodes: np.ndarray, level_costs: Mapping[str, Sequence[np.ndarray]],
                     records: int) -> np.ndarray | None:
        """Lower bounds of every node (rows of ``nodes``, a level per attribute) known before evaluating any, or None.

        ``level_costs[sum][i][j]`` is Σ over records of attribute i's cost at level j in the cost sum named ``sum``
        (its kind, times the attribute's weight there).
        """
        return None

    def __repr__(self) -> str:
        return self.name


class RecordCostMetric(Metric):
    """Σ over records of Σ over attributes of weight × cost, optionally averaged over records."""

    average: bool = False

    def value(self, totals):
        _, kept, suppressed = totals.costs[self.name]
        return self._scale(kept + suppressed, totals)

    def lower_bound(self, totals):
        return self._scale(totals.costs[self.name][0], totals)

    def _scale(self, total: float, totals: NodeTotals) -> float:
        return total / totals.records if self.average else total

    def prior_bounds(self, nodes, level_costs, records):
        # lower_bound without a query: a record's cost on an attribute depends on that attribute's level alone.
        total = at_levels(nodes, level_costs[self.name])
        return total / records if self.average else total


def at_levels(nodes: np.ndarray, level_costs: Sequence[np.ndarray]) -> np.ndarray:
    """Per node (rows of ``nodes``), the sum over attributes of the table's cost at the node's level."""
    return sum(costs[nodes[:, i]] for i, costs in enumerate(level_costs))


class Loss(RecordCostMetric):
    """Loss / LM (Iyengar; seed 002): per attribute the records' average loss — numeric: generalized interval width
    over domain width; categorical: (leaves under the generalized value − 1) / (leaves − 1) — summed over attributes,
    each times its weight.  A suppressed record loses 1 on every attribute.

    Weights of 1 give seed 002's LM; weights summing to 1 give seed 000's weighted Loss (uniform weights: Loss,
    normalized entropies: Entropy Loss, normalized mutual information with the label: MI Loss)."""

    cost_kind = "lm"
    average = True

    def __init__(self, weights: Mapping[str, float] | None = None, name: str = "loss"):
        self._weights = dict(weights) if weights is not None else None
        self.name = name

    def weights(self, attributes):
        given = _given_weights(self.name, self._weights, attributes)
        return super().weights(attributes) if given is None else given


def _given_weights(metric: str, weights: Mapping[str, float] | None, attributes: Sequence[str]
                   ) -> dict[str, float] | None:
    """The weights given to a metric, per attribute, or None when none were; every attribute needs one."""
    if weights is None:
        return None
    missing = [a for a in attributes if a not in weights]
    if missing:
        raise PolicyError(f"metric {metric}: no weight for quasi-identifiers {missing}")
    return {a: float(weights[a]) for a in attributes}


class NormalizedCertaintyPenalty(RecordCostMetric):
    """NCP (Xu et al. 2006; seed 003 formulas 1–3): Σ over records and attributes of the generalized interval's width
    over the domain's (numeric) or the generalized value's leaves over all leaves (categorical; 0 when not
    generalized: the generalized value covers only the original).  A suppressed record costs 1 on every attribute."""

    name = "ncp"
    cost_kind = "ncp"


class NonUniformEntropy(RecordCostMetric):
    """Non-uniform entropy (de Waal & Willenborg 1999): Σ over records and attributes of −log2 P(original value |
    generalized value), the probabilities counted over the whole table; a suppressed value costs −log2 P(value)."""

    name = "non-uniform-entropy"
    cost_kind = "entropy"


class Discernibility(Metric):
    """DM (Bayardo & Agrawal; seed 002): Σ |E|² over kept classes plus |D| for each suppressed record."""

    name = "dm"

    def value(self, totals):
        return totals.kept_squares + totals.records * totals.suppressed

    def lower_bound(self, totals):
        return totals.squares


class AverageClassSize(Metric):
    """Average equivalence class size: records over classes, the suppressed records counting as one class."""

    name = "average-class-size"

    def value(self, totals):
        classes = totals.kept_classes + (1 if totals.suppressed else 0)
        return totals.records / classes

    def lower_bound(self, totals):
        return totals.records / totals.classes


class ArxAverageClassSize(Metric):
    """ARX's AECS with its gs-factor (``Metric.createAECSMetric(gsFactor)``; ARX 3.9.2 ``metric/v2/MetricSDAECS``):
    records / (kept classes × s + g when records are suppressed), g and s from the gs-factor as in ARX's Loss and,
    as ARX's source notes, switched here.  At the default 0.5 it is ``average-class-size``.

    Lower bound: records / (classes × s + max(0, g − s)).  ARX bounds with records / (classes × s), which exceeds the
    value of a node that suppresses one class when g > s (gs-factor below 0.5); with g ≤ s a suppressed class adds
    at most s, so the two agree."""

    def __init__(self, gs_factor: float = 0.5, name: str = "arx-aecs"):
        self.name = name
        self.gs_factor, self.generalization_factor, self.suppression_factor = gs_factors(gs_factor, name)

    def value(self, totals):
        groups = totals.kept_classes * self.suppression_factor + (self.generalization_factor if totals.suppressed
                                                                   else 0.0)
        return totals.records / groups if groups else math.inf

    def lower_bound(self, totals):
        groups = (totals.classes * self.suppression_factor
                  + max(0.0, self.generalization_factor - self.suppression_factor))
        return totals.records / groups if groups else math.inf

    def __repr__(self) -> str:
        return f"{self.name}(gs_factor={self.gs_factor})"


class DiscernibilityStar(Metric):
    """DM* (ARX's monotone discernibility, ``Metric.createDiscernabilityMetric(true)``; ARX 3.9.2
    ``metric/v2/MetricSDDiscernability``): Σ |E|² over every class, suppressed ones too, as if nothing were
    suppressed.  ARX's non-monotone discernibility (its default) is duckanon's ``dm``, and ARX's AECS at its default
    gs-factor of 0.5 is ``average-class-size``."""

    name = "dm-star"

    def value(self, totals):
        return totals.squares

    def lower_bound(self, totals):
        return totals.squares


class ArxNonUniformEntropy(RecordCostMetric):
    """ARX's monotone non-uniform entropy (``Metric.createEntropyMetric(true)`` and its precomputed form
    ``createPrecomputedEntropyMetric(threshold, true)``; ARX 3.9.2 ``metric/v2/MetricMDNUEntropyPrecomputed``): Σ over
    records and attributes of −log2 P(original value | generalized value) at the node's levels, suppressed records
    included at those levels: suppression is not counted at all.  duckanon's ``non-uniform-entropy`` charges a
    suppressed value −log2 P(value) instead."""

    name = "arx-entropy"
    cost_kind = "entropy"

    def value(self, totals):
        return totals.costs[self.name][0]


class ArxNonMonotoneEntropy(ArxNonUniformEntropy):
    """ARX's non-monotone non-uniform entropy (its default: ``Metric.createEntropyMetric()``,
    ``createPrecomputedEntropyMetric(threshold)`` and ``(threshold, false)``; ARX 3.9.2
    ``metric/v2/MetricMDNUNMEntropyPrecomputed``): the monotone entropy (every record at the node's levels), plus, per
    attribute, Σ over its values v at the node's level of c_v · log2(n / c_v) over the n suppressed records, c_v of which
    hold v: as if the suppressed records were generalized to one value more, within their own group.  Its lower bound
    is the monotone part, as ARX's."""

    name = "arx-nm-entropy"
    suppressed_spread = True

    def value(self, totals):
        return totals.costs[self.name][0] + float(sum(totals.suppressed_entropy))


AGGREGATIONS = ("geometric-mean", "arithmetic-mean", "sum", "maximum", "rank")
_ARX_DIGITS = 1e10
# Far above the rounding error of a share summed over records, far below ARX's last digit.
_BOUND_SLACK = 1e-12


@functools.total_ordering
class RankedLoss:
    """A loss of ARX's rank aggregation (``ILMultiDimensionalRank``): the attributes' weighted losses sorted in
    descending order (:attr:`ranks`), ordered lexicographically -- the largest loss first, ties broken by the next.
    As a number (``float()``: what a release records, what a report shows) it is ARX's mean of the unweighted
    losses, Π (1 + v)^(1/n) − 1, which plays no part in the order.  Searches keep such values in object arrays;
    the infinite sentinels they start from compare as numbers.  Adding, subtracting and scaling act on every rank
    (and the mean), as lowering a bound for rounding needs."""

    __slots__ = ("ranks", "mean")

    def __init__(self, ranks: Sequence[float], mean: float):
        self.ranks, self.mean = tuple(float(r) for r in ranks), float(mean)

    @classmethod
    def of(cls, losses: np.ndarray, weights: np.ndarray) -> RankedLoss:
        mean = float(np.prod((losses + 1.0) ** (1.0 / len(losses))) - 1.0) if len(losses) else 0.0
        return cls(sorted(losses * weights, reverse=True), mean)

    def _key(self, other: object) -> tuple[tuple[float, ...], tuple[float, ...]] | None:
        return (self.ranks, other.ranks) if isinstance(other, RankedLoss) else None

    def __eq__(self, other: object) -> bool:
        keys = self._key(other)
        return keys[0] == keys[1] if keys else float(self) == other

    def __lt__(self, other: object) -> bool:
        keys = self._key(other)
        return keys[0] < keys[1] if keys else float(self) < other

    def __hash__(self) -> int:
        return hash(self.ranks)

    def __float__(self) -> float:
        return self.mean

    def __format__(self, spec: str) -> str:
        return format(self.mean, spec)

    def __repr__(self) -> str:
        return f"RankedLoss({list(self.ranks)})"

    def _map(self, op: Callable[[float, float], float], other: object) -> RankedLoss:
        if isinstance(other, RankedLoss):
            return RankedLoss([op(a, b) for a, b in zip(self.ranks, other.ranks)], op(self.mean, other.mean))
        return RankedLoss([op(a, float(other)) for a in self.ranks], op(self.mean, float(other)))

    def __sub__(self, other: object) -> RankedLoss:
        return self._map(lambda a, b: a - b, other)

    def __add__(self, other: object) -> RankedLoss:
        return self._map(lambda a, b: a + b, other)

    __radd__ = __add__

    def __mul__(self, factor: object) -> RankedLoss:
        return self._map(lambda a, b: a * b, factor)

    __rmul__ = __mul__

    def __abs__(self) -> RankedLoss:
        return RankedLoss([abs(r) for r in self.ranks], abs(self.mean))


class _ArxMultiDimensional(Metric):
    """ARX's multi-dimensional metrics (``metric/v2/AbstractMetricMultiDimensional``): a loss per quasi-identifier,
    weighted (weights divided by the largest; all 1 when none is given or all are 0) and aggregated by one of
    :data:`AGGREGATIONS` (``ILMultiDimensional*``): ``geometric-mean`` Π (1 + w·v)^(1/n) − 1, ``arithmetic-mean``
    Σ w·v / n, ``sum`` Σ w·v, ``maximum`` max w·v, ``rank`` the w·v sorted descending, ordered lexicographically
    (:class:`RankedLoss`; every aggregation grows with each attribute's loss, so bounds per attribute bound it).  ARX's gs-factor sets a generalization factor g (1 up to 0.5, then
    1 − 2 (gs − 0.5)) and a suppression factor s (2 gs below 0.5, then 1)."""

    def __init__(self, gs_factor: float, aggregation: str, weights: Mapping[str, float] | None, name: str):
        self.gs_factor, self.generalization_factor, self.suppression_factor = gs_factors(gs_factor, name)
        if aggregation not in AGGREGATIONS:
            raise PolicyError(f"metric {name}: unknown aggregation {aggregation!r}; known: {', '.join(AGGREGATIONS)}")
        self.aggregation, self.name = aggregation, name
        if weights is not None:
            for attribute, weight in weights.items():
                checked_number(weight, f"the weight of {attribute!r}", f"metric {name}", low=0)
        self._weights = dict(weights) if weights is not None else None

    def weights(self, attributes):
        given = _given_weights(self.name, self._weights, attributes)
        largest = max(given.values(), default=0.0) if given is not None else 0.0
        if largest == 0:
            return super().weights(attributes)
        return {a: weight / largest for a, weight in given.items()}

    def _aggregate(self, losses: np.ndarray, weights: np.ndarray) -> np.ndarray | float | RankedLoss:
        """Attributes' losses (last axis) aggregated as ARX's ``AggregateFunction``: per row, a float, or for the
        rank aggregation a :class:`RankedLoss` (an object array of them for many rows)."""
        if self.aggregation == "rank":
            if losses.ndim == 1:
                return RankedLoss.of(losses, weights)
            ranked = np.empty(losses.shape[:-1], dtype=object)
            for position in np.ndindex(ranked.shape):
                ranked[position] = RankedLoss.of(losses[position], weights)
            return ranked
        weighted = losses * weights
        n = losses.shape[-1]
        if self.aggregation == "geometric-mean":
            return np.prod((weighted + 1.0) ** (1.0 / n), axis=-1) - 1.0
        if self.aggregation == "arithmetic-mean":
            return np.sum(weighted / n, axis=-1)
        if self.aggregation == "sum":
            return np.sum(weighted, axis=-1)
        return np.max(weighted, axis=-1, initial=0.0)

    def _weight_vector(self, attributes: Sequence[str]) -> np.ndarray:
        weights = self.weights(attributes)
        return np.array([weights[a] for a in attributes])

    def __repr__(self) -> str:
        return f"{self.name}(gs_factor={self.gs_factor}, aggregation={self.aggregation!r})"


def _number(aggregated: np.ndarray | float | RankedLoss) -> float | RankedLoss:
    """One node's aggregated loss: a float, or the :class:`RankedLoss` itself."""
    return aggregated if isinstance(aggregated, RankedLoss) else float(aggregated)


class ArxLoss(_ArxMultiDimensional):
    """ARX's Loss (``Metric.createLossMetric(gsFactor, aggregation)``; ARX 3.9.2 ``metric/v2/MetricMDNMLoss``).

    Per quasi-identifier, a kept record costs g × its generalized value's domain share (ARX's ``DomainShare``: the
    hierarchy rows the value covers over all rows, or its interval's width over the domain's; 1 for ``*``), a
    suppressed one its share + s × (1 − share), which is 1 when s = 1.  The attribute's sum is normalized between
    g × records / domain size (every value original) and the records, clipped at 0 and floored to 10 decimals, and
    the attributes' losses aggregated (a geometric mean by default; see :class:`_ArxMultiDimensional`).  At ARX's
    default gs-factor of 0.5, generalizing a value all the way and suppressing it cost the same.

    Lower bound (as ARX's ``getLowerBoundInternal``): each attribute's g × shares at the node's levels, suppression
    ignored.  A share only grows with the level, a suppressed value costs at least g × its share, and every
    aggregation grows with each attribute's loss, so it bounds every generalization of the node."""

    cost_kind = "share"

    def __init__(self, gs_factor: float = 0.5, aggregation: str = "geometric-mean",
                 weights: Mapping[str, float] | None = None, name: str = "arx-loss"):
        super().__init__(gs_factor, aggregation, weights, name)

    def _sum_name(self, attribute: str) -> str:
        return f"{self.name}[{attribute}]"

    def cost_sums(self, attributes):
        return [CostSum(self._sum_name(a), self.cost_kind, {b: float(a == b) for b in attributes}) for a in attributes]

    def _attributes(self, keys) -> list[str]:
        prefix = f"{self.name}["
        return [key[len(prefix):-1] for key in keys if key.startswith(prefix)]

    def _normalized(self, total, bottom, records, slack: float = 0.0):
        """An attribute's summed cost between its floor (every value original) and the records, as ARX normalizes;
        a bound passes ``slack``, taken off before the floor to 10 decimals: summed in another order than a node's
        value, the same share can land a rounding error above it, which that floor turns into a step of 1e-10."""
        floor = self.generalization_factor * np.asarray(bottom, dtype=float)
        span = records - floor
        with np.errstate(divide="ignore", invalid="ignore"):
            share = np.where(span > 0, (np.asarray(total, dtype=float) - floor) / np.where(span > 0, span, 1), 0.0)
        return np.floor(np.maximum(share - slack, 0.0) * _ARX_DIGITS) / _ARX_DIGITS

    def _sums(self, totals) -> tuple[list[str], np.ndarray, np.ndarray]:
        """The attributes, their (every, kept, suppressed) cost sums as rows, and their sums at the bottom: one
        array each, so that 30 attributes cost one vectorized pass."""
        attributes = self._attributes(totals.costs)
        names = [self._sum_name(a) for a in attributes]
        return (attributes, np.array([totals.costs[n] for n in names], dtype=float).reshape(-1, 3),
                np.array([totals.bottom[n] for n in names], dtype=float))

    def value(self, totals):
        attributes, sums, bottom = self._sums(totals)
        g, s = self.generalization_factor, self.suppression_factor
        every, kept, suppressed = sums.T
        suppressed_share = every - kept  # the suppressed records' shares at the node's levels
        cost = g * kept + (suppressed if s == 1.0 else suppressed_share + s * (suppressed - suppressed_share))
        return _number(self._aggregate(self._normalized(cost, bottom, totals.records),
                                       self._weight_vector(attributes)))

    def lower_bound(self, totals):
        attributes, sums, bottom = self._sums(totals)
        losses = self._normalized(self.generalization_factor * sums[:, 0], bottom, totals.records, _BOUND_SLACK)
        return _number(self._aggregate(losses, self._weight_vector(attributes)))

    def prior_bounds(self, nodes, level_costs, records):
        attributes = self._attributes(level_costs)
        losses = []
        for attribute in attributes:
            costs = level_costs[self._sum_name(attribute)]
            bottom = sum(float(per_level[0]) for per_level in costs)
            losses.append(self._normalized(self.generalization_factor * at_levels(nodes, costs), bottom, records,
                                           _BOUND_SLACK))
        return self._aggregate(np.stack(losses, axis=-1), self._weight_vector(attributes))


class ArxPrecision(_ArxMultiDimensional):
    """ARX's precision (``Metric.createPrecisionMetric(monotonic, gsFactor, aggregation)``; ARX 3.9.2
    ``metric/v2/MetricMDNMPrecision`` and ``MetricMDPrecision``; Sweeney's Prec): per quasi-identifier, its level
    over its hierarchy's height.  Non-monotone (``arx-precision``, ARX's default): (kept records × g × level / height
    + suppressed records × s) / records; monotone (``arx-precision-monotone``): g × level / height, suppression not
    counted.  Aggregated by an arithmetic mean by default; attributes weigh alike.  Lower bound: the monotone form,
    which only grows with the levels."""

    def __init__(self, monotone: bool = False, gs_factor: float = 0.5, aggregation: str = "arithmetic-mean",
                 name: str | None = None):
        super().__init__(gs_factor, aggregation, None,
                         name or ("arx-precision-monotone" if monotone else "arx-precision"))
        self.monotone = monotone

    def _ratios(self, totals: NodeTotals) -> np.ndarray:
        return np.array([level / height if height else 0.0 for level, height in zip(totals.levels, totals.heights)])

    def value(self, totals):
        ratios = self._ratios(totals)
        if not self.monotone:
            kept = totals.records - totals.suppressed
            ratios = (kept * ratios * self.generalization_factor
                      + totals.suppressed * self.suppression_factor) / totals.records
        else:
            ratios = ratios * self.generalization_factor
        return _number(self._aggregate(ratios, np.ones(len(ratios))))

    def lower_bound(self, totals):
        return _number(self._aggregate(self._ratios(totals) * self.generalization_factor, np.ones(len(totals.levels))))


class ArxHeight(_ArxMultiDimensional):
    """ARX's height (``Metric.createHeightMetric(aggregation)``; ARX 3.9.2 ``metric/v2/MetricMDHeight``): the
    node's levels, summed by default; monotone, its own lower bound."""

    def __init__(self, aggregation: str = "sum", name: str = "arx-height"):
        super().__init__(0.5, aggregation, None, name)

    def value(self, totals):
        return _number(self._aggregate(np.array(totals.levels, dtype=float), np.ones(len(totals.levels))))

    def lower_bound(self, totals):
        return self.value(totals)

    def prior_bounds(self, nodes, level_costs, records):
        return self._aggregate(nodes.astype(float), np.ones(nodes.shape[1]))


class ArxEntropyBasedInformationLoss(Metric):
    """ARX's entropy-based information loss (``Metric.createEntropyBasedInformationLossMetric(gsFactor)``; ARX 3.9.2
    ``metric/v2/MetricSDNMEntropyBasedInformationLoss``, after Gionis & Tassa): a kept record costs
    g × (1 + Σ over quasi-identifiers of log10(domain share of its generalized value) / maxIL), with maxIL =
    log10 of the product of the domains' sizes, so an original record costs 0 and a fully generalized one 1; a
    suppressed record costs s.  g and s come from the gs-factor as in ARX's Loss (both 1 at the default 0.5).  ARX
    clamps each class's value to [0, 1] against rounding; here the sums are taken as they are.

    Lower bound: min(g, s) × the cost of every record at the node's levels, suppression ignored.  A record's cost
    only grows with generalization and never exceeds 1, so a suppressed record's s is at least min(g, s) times it;
    ARX bounds with g alone, which exceeds the value when s < g."""

    cost_kind = "log-share"

    def __init__(self, gs_factor: float = 0.5, name: str = "arx-ebil"):
        self.name = name
        self.gs_factor, self.generalization_factor, self.suppression_factor = gs_factors(gs_factor, name)

    def _loss(self, records, log_shares, bottom: float, total_records: int):
        """Σ over ``records`` records of 1 + Σ log10 share / maxIL, maxIL = −``bottom`` / ``total_records`` (the
        bottom's log10 shares, summed over every record)."""
        most = -bottom / total_records if total_records else 0.0
        records = np.asarray(records, dtype=float)
        if most == 0 or not math.isfinite(most):  # no information, none lost (as ARX)
            return 0.0 * records
        # Every record costs at least 0; at the bottom the two sums cancel, and rounding must not dip below 0 (below
        # the prior bound, 0, that the optimal search prunes by).
        return np.maximum(records + np.asarray(log_shares, dtype=float) / most, 0.0)

    def value(self, totals):
        _, kept, _ = totals.costs[self.name]
        loss = self._loss(totals.records - totals.suppressed, kept, totals.bottom[self.name], totals.records)
        return float(self.generalization_factor * loss + self.suppression_factor * totals.suppressed)

    def lower_bound(self, totals):
        every = totals.costs[self.name][0]
        return float(min(self.generalization_factor, self.suppression_factor)
                     * self._loss(totals.records, every, totals.bottom[self.name], totals.records))

    def prior_bounds(self, nodes, level_costs, records):
        costs = level_costs[self.name]
        bottom = sum(float(per_level[0]) for per_level in costs)
        return min(self.generalization_factor, self.suppression_factor) * self._loss(
            np.full(len(nodes), float(records)), at_levels(nodes, costs), bottom, records)

    def __repr__(self) -> str:
        return f"{self.name}(gs_factor={self.gs_factor})"


class ArxPublisherPayout(ArxEntropyBasedInformationLoss):
    """ARX's publisher payout (``Metric.createPublisherPayoutMetric(journalist)``; ARX 3.9.2
    ``metric/v2/MetricSDNMPublisherPayout`` with ``risk/RiskModelCostBenefit``, after Wan et al.'s re-identification
    game): a kept record in a class of n records pays the publisher B × (1 − IL) minus, when an attack pays the
    adversary (G × p − C > 0: gain G times the success probability p, less the cost C), L × p; IL is the class's
    entropy-based information loss (:class:`ArxEntropyBasedInformationLoss`).  A prosecutor succeeds with p = 1/n; a
    journalist (``journalist=True``) with 1 over the class's records in the policy's population table (1/n where it has
    none), so the policy must name one (as ARX's journalist models take a research subset).  The value is what is lost
    against the most a record pays, B: g × Σ over kept records of (B − payout) + s × B × the suppressed records, that
    is g × (B × the kept records' entropy-based loss + L × Σ over the kept classes an attack pays on of n × p)
    + s × B × suppressed.

    Lower bound (ARX's, with min(g, s) as for the entropy-based loss): B × the entropy-based loss's bound; an attack
    only adds."""

    counts_classes = True

    def __init__(self, adversary_cost: float, adversary_gain: float, publisher_loss: float,
                 publisher_benefit: float, gs_factor: float = 0.5, journalist: bool = False,
                 name: str | None = None):
        name = name or ("arx-payout-journalist" if journalist else "arx-payout")
        super().__init__(gs_factor, name)
        self.journalist = self.counts_population = bool(journalist)
        self._terms = CostBenefit.checked(f"metric {name}", adversary_gain, adversary_cost, publisher_loss,
                                          publisher_benefit)
        self.adversary_cost, self.adversary_gain = self._terms.adversary_cost, self._terms.adversary_gain
        self.publisher_loss, self.publisher_benefit = self._terms.publisher_loss, self._terms.publisher_benefit

    def counted(self, sizes, population):
        """Per class, what an attack costs the publisher over its n records: n × the penalty per record."""
        success = self._terms.success(sizes, population if self.journalist else None)
        return np.asarray(sizes, dtype=np.float64) * self._terms.penalty(success)

    def counted_sql(self, size, population):
        success = self._terms.success_sql(size.copy(), population if self.journalist else None)
        return size.copy() * self._terms.penalty_sql(success)

    def value(self, totals):
        _, kept, _ = totals.costs[self.name]
        loss = self._loss(totals.records - totals.suppressed, kept, totals.bottom[self.name], totals.records)
        attacked = totals.counted_classes[self.name]
        return float(self.generalization_factor * (self.publisher_benefit * loss + attacked)
                     + self.suppression_factor * self.publisher_benefit * totals.suppressed)

    def lower_bound(self, totals):
        return self.publisher_benefit * super().lower_bound(totals)

    def prior_bounds(self, nodes, level_costs, records):
        return self.publisher_benefit * super().prior_bounds(nodes, level_costs, records)

    def __repr__(self) -> str:
        return (f"{self.name}(adversary_cost={self.adversary_cost}, adversary_gain={self.adversary_gain}, "
                f"publisher_loss={self.publisher_loss}, publisher_benefit={self.publisher_benefit}, "
                f"gs_factor={self.gs_factor}, journalist={self.journalist})")


class ArxAmbiguity(Metric):
    """ARX's ambiguity (``Metric.createAmbiguityMetric()``; ARX 3.9.2 ``metric/v2/MetricSDNMAmbiguity``, after
    Nergiz & Clifton): Σ over records of the number of original combinations its generalized record could stand for,
    the product over quasi-identifiers of the hierarchy rows its value covers (ARX's ``DomainShareMaterialized``, for
    interval hierarchies too, × the domain's rows); a suppressed record stands for every combination, the product of
    the domains' rows.  Computed as the product of those rows × Σ over records of the product of their shares.

    Lower bound (as ARX's): every record at the node's levels, suppression ignored.  A share only grows with
    generalization and is at most 1, a suppressed record's.  Before evaluating, by Jensen's inequality: the records
    × 10 to their mean log10 shares at the node's levels."""

    name = "arx-ambiguity"
    cost_kind = "log-row-share"

    def cost_sums(self, attributes):
        return [CostSum(self.name, self.cost_kind, {a: 1.0 for a in attributes}, exp10=True)]

    def _combinations(self, totals: NodeTotals) -> float:
        """The product of the domains' rows: at the bottom, every record's shares multiply to its inverse."""
        return totals.records / totals.bottom[self.name]

    def value(self, totals):
        _, kept, suppressed = totals.costs[self.name]
        return self._combinations(totals) * (kept + suppressed)

    def lower_bound(self, totals):
        return self._combinations(totals) * totals.costs[self.name][0]

    def prior_bounds(self, nodes, level_costs, records):
        # Σ over records of 10^(a record's log10 shares) ≥ records × 10^(their mean), as 10^x is convex (Jensen);
        # the bottom's shares are alike for every record, so the product of the domains' rows is 10^(-their mean).
        costs = level_costs[self.name]
        bottom = sum(float(per_level[0]) for per_level in costs)
        return records * 10.0 ** ((at_levels(nodes, costs) - bottom) / records)


class ArxKLDivergence(Metric):
    """ARX's KL divergence (``Metric.createKLDivergenceMetric()``; ARX 3.9.2 ``metric/v2/MetricSDNMKLDivergence``):
    Σ over the input's records r of f_r · log2(f_r / q_r), f_r = C_t / N the share of the records holding r's original
    quasi-identifier values (its tuple t), q_r = (the records of r's class / N) / the class's area, the product over
    quasi-identifiers of the hierarchy rows its value covers (``DomainShareMaterialized`` × the domain's rows, for
    interval hierarchies too); a suppressed record's class is every suppressed record, its area the product of the
    domains' rows.  ARX sums over records, not tuples, so a tuple counts C_t times: the value is
    (Σ_t C_t² log2 C_t + Σ_t C_t² log2 (area / class records)) / N, computed from :class:`TupleWeights`.

    ARX gives no lower bound.  The value is never negative (by the log-sum inequality, as a class holds at most as
    many tuples as its area), so 0 bounds it."""

    name = "arx-kl"
    cost_kind = "log-row-share"
    weighs_tuples = True

    def value(self, totals):
        tuples, records = totals.tuples, totals.records
        # log2 of the domains' product of rows: a record's log10 row shares at the bottom sum to minus its log10
        most = -math.log2(10.0) * totals.bottom[self.name] / records
        kept_area = math.log2(10.0) * tuples.kept_costs[self.name] + (tuples.total - tuples.suppressed) * most
        suppressed = (tuples.suppressed * (most - math.log2(totals.suppressed)) if totals.suppressed else 0.0)
        return float((tuples.total_logs + kept_area - tuples.kept_log_sizes + suppressed) / records)

    def lower_bound(self, totals):
        return 0.0

    def prior_bounds(self, nodes, level_costs, records):
        return np.zeros(len(nodes))


class SafePubScore(Metric):
    """A score function of SafePub (Bild, Kuhn and Prasser, PoPETs 2018(1), §5; ARX 3.9.2's ``getScore`` of each
    metric, ``ScoreType.DP_SCORE``), which the exponential mechanism picks a transformation by.  Scored on the random
    sample: ``records`` is the source's n, and a record not sampled counts as suppressed, as a record of a class
    below ``k``.  Each score is divided by its sensitivity, so that adding or removing one record changes it by at most
    1.  :meth:`score` is higher for better; as a metric its value is the negated score (lower is better).  Not a bound
    of generalizations: the search that uses it walks, it does not prune."""

    def __init__(self, k: int, records: int):
        self.k, self.records = int(k), int(records)

    def value(self, totals):
        return -self.score(totals)

    def lower_bound(self, totals):
        return -math.inf

    @abstractmethod
    def score(self, totals: NodeTotals) -> float: ...

    def _suppressed(self, totals: NodeTotals) -> int:
        """The source's records not released: those of classes below k, and those not sampled."""
        return totals.suppressed + self.records - totals.records

    def _per_record(self) -> float:
        """The sensitivity of a sum whose every record adds at most 1 per attribute: k − 1 (a record added to a class
        of k − 1 keeps them all), 1 when k is 1."""
        return self.k - 1 if self.k > 1 else 1

    def _squared(self) -> float:
        """The sensitivity of a sum of squared class sizes, over n: k²/(k − 1) + 1, or 5 when k is 1."""
        return self.k * self.k / (self.k - 1) + 1 if self.k > 1 else 5.0

    def __repr__(self) -> str:
        return f"{self.name}(k={self.k}, records={self.records})"


class GranularityScore(SafePubScore):
    """SafePub's granularity (ARX's ``MetricMDNMLoss.getScore``): per attribute, the kept records' domain shares of
    their generalized values, plus 1 per record not released; summed, negated, over attributes × (k − 1)."""

    name = "safepub-granularity"
    cost_kind = "share"

    def score(self, totals):
        attributes = len(totals.levels)
        kept_shares = totals.costs[self.name][1]
        return -(attributes * self._suppressed(totals) + kept_shares) / (attributes * self._per_record())


class IntensityScore(SafePubScore):
    """SafePub's intensity (ARX's ``MetricMDNMPrecision.getScore``): per attribute, the kept records × level / height,
    plus 1 per record not released; summed, negated, over attributes × (k − 1)."""

    name = "safepub-intensity"

    def score(self, totals):
        attributes = len(totals.levels)
        ratios = sum(level / height if height else 0.0 for level, height in zip(totals.levels, totals.heights))
        kept = totals.records - totals.suppressed
        return -(kept * ratios + attributes * self._suppressed(totals)) / (attributes * self._per_record())


class DiscernibilityScore(SafePubScore):
    """SafePub's discernibility (ARX's ``MetricSDNMDiscernability.getScore``): Σ |E|² over kept classes plus n per
    record not released; negated, over n × (k²/(k − 1) + 1)."""

    name = "safepub-discernibility"

    def score(self, totals):
        return -(totals.kept_squares + self.records * self._suppressed(totals)) / (self.records * self._squared())


class GroupSizeScore(SafePubScore):
    """SafePub's group size (ARX's ``MetricSDAECS.getScore``): the kept classes, plus one when any record is not
    released (they count as one class); sensitivity 1."""

    name = "safepub-group-size"

    def score(self, totals):
        return totals.kept_classes + (1 if self._suppressed(totals) else 0)


# Each SafePub score by the name of the ARX metric (and of duckanon's like it) whose score function it is.
SAFEPUB_SCORES: dict[str, type[SafePubScore]] = {
    "arx-loss": GranularityScore, "arx-precision": IntensityScore, "dm": DiscernibilityScore,
    "average-class-size": GroupSizeScore, "arx-aecs": GroupSizeScore}


METRICS: dict[str, Callable[[], Metric]] = {"loss": Loss, "dm": Discernibility, "non-uniform-entropy": NonUniformEntropy,
                                    "ncp": NormalizedCertaintyPenalty, "average-class-size": AverageClassSize,
                                    "arx-loss": ArxLoss, "arx-loss-rank": lambda: ArxLoss(aggregation="rank",
                                                                                           name="arx-loss-rank"),
                                    "dm-star": DiscernibilityStar,
                                    "arx-entropy": ArxNonUniformEntropy, "arx-nm-entropy": ArxNonMonotoneEntropy,
                                    "arx-precision": ArxPrecision,
                                    "arx-precision-monotone": lambda: ArxPrecision(monotone=True),
                                    "arx-height": ArxHeight, "arx-ebil": ArxEntropyBasedInformationLoss,
                                    "arx-ambiguity": ArxAmbiguity, "arx-aecs": ArxAverageClassSize,
                                    "arx-kl": ArxKLDivergence}
WEIGHTED = {"entropy-loss": "entropy", "mi-loss": "mutual-information"}


def metric_names() -> list[str]:
    return [*METRICS, *WEIGHTED]


def record_cost(hierarchy: Hierarchy, level: int, label: str | None, leaves: Mapping[str | None, int]) -> tuple[float, float]:
    """(LM, NCP) of one generalized value; a missing one (NULL, which stays NULL on every level) costs nothing."""
    if level == 0 or is_missing(label):
        return 0.0, 0.0
    if isinstance(hierarchy, IntervalHierarchy):
        if level == hierarchy.height:  # '*', the whole domain
            return 1.0, 1.0
        low, high = hierarchy.cuts[0][0], hierarchy.cuts[0][-1]
        lo, hi = hierarchy.interval(level, label)
        width = (hi - lo) / (high - low)
        return width, width
    total = len(hierarchy.rows)
    covered = leaves.get(label, 1)
    lm = (covered - 1) / (total - 1) if total > 1 else 0.0
    # Xu et al.: a value generalized to one that covers only itself is not generalized and costs 0.
    return lm, covered / total if covered > 1 else 0.0


def cost_table(codes: Sequence[np.ndarray], labels: Sequence[Sequence[str | None]], records: np.ndarray,
               hierarchy: Hierarchy, index: int, kinds: Sequence[str], total: int) -> dict[str, np.ndarray]:
    """Per original value of one attribute (its code and generalized value on each level in ``codes`` and ``labels``;
    its records in ``records``, of ``total`` in all): its level-0 code (``code``) and each cost kind at each level
    and when suppressed, as columns."""
    out = {"code": codes[0]}
    for level in range(hierarchy.levels):
        labels_on_level = labels[level]
        if "lm" in kinds or "ncp" in kinds:
            leaves = hierarchy.leaves_under(level)
            pairs = [record_cost(hierarchy, level, label, leaves) for label in labels_on_level]
            if "lm" in kinds:
                out[cost_column("lm", index, level)] = np.array([p[0] for p in pairs], dtype=np.float64)
            if "ncp" in kinds:
                out[cost_column("ncp", index, level)] = np.array([p[1] for p in pairs], dtype=np.float64)
        if "share" in kinds:
            leaves = hierarchy.leaves_under(level)
            out[cost_column("share", index, level)] = np.array(
                [domain_share(hierarchy, level, label, leaves) for label in labels_on_level], dtype=np.float64)
        if "log-share" in kinds:
            out[cost_column("log-share", index, level)] = np.asarray(
                log_domain_shares(hierarchy, level, labels_on_level), dtype=np.float64)
        if "log-row-share" in kinds:
            leaves = hierarchy.leaves_under(level)
            out[cost_column("log-row-share", index, level)] = np.log10(
                np.array([row_share(hierarchy, level, label, leaves) for label in labels_on_level], dtype=np.float64))
        if "entropy" in kinds:
            level_codes = codes[level]
            # The records of each value's generalization.
            general = np.bincount(level_codes, weights=records)[level_codes]
            out[cost_column("entropy", index, level)] = _log2s(general / records)
    for kind in kinds:
        out[cost_column(kind, index, None)] = (_log2s(total / records) if kind == "entropy"
                                               else np.full(len(records), float(SUPPRESSED_COST[kind])))
    return out


def _log2s(ratios: np.ndarray) -> np.ndarray:
    # math.log2, as every other entropy here is taken: NumPy's may differ from it in the last bit.
    return np.array([math.log2(r) for r in ratios.tolist()], dtype=np.float64)


def cost_column(kind: str, index: int, level: int | None) -> str:
    return f"__cost_{kind}_{index}_{'suppressed' if level is None else level}"
