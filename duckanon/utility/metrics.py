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
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import PolicyError
from ..hierarchy.hierarchy import Hierarchy, IntervalHierarchy

COST_KINDS = ("lm", "ncp", "entropy")


@dataclass(frozen=True)
class NodeTotals:
    """What one node's evaluation query returns."""

    records: int
    suppressed: int
    classes: int
    kept_classes: int
    squares: float
    kept_squares: float
    # per cost name: (sum over all records at the node's levels, sum over kept records, sum over suppressed records
    # at their suppressed cost)
    costs: Mapping[str, tuple[float, float, float]] = field(default_factory=dict)


class Metric(ABC):
    """A utility metric: lower is better."""

    name: str = ""
    cost_kind: str | None = None

    def weights(self, attributes: Sequence[str]) -> dict[str, float]:
        """Per-attribute weights of the record cost (record-cost metrics only)."""
        return {a: 1.0 for a in attributes}

    @abstractmethod
    def value(self, totals: NodeTotals) -> float: ...

    @abstractmethod
    def lower_bound(self, totals: NodeTotals) -> float: ...

    def prior_bounds(self, nodes: np.ndarray, level_costs: Sequence[np.ndarray], records: int) -> np.ndarray | None:
        """Lower bounds of every node (rows of ``nodes``, a level per attribute) known before evaluating any, or None.

        ``level_costs[i][j]`` is Σ over records of attribute i's cost at level j (this metric's cost kind, times the
        attribute's weight).
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
        total = sum(costs[nodes[:, i]] for i, costs in enumerate(level_costs))
        return total / records if self.average else total


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
        if self._weights is None:
            return super().weights(attributes)
        missing = [a for a in attributes if a not in self._weights]
        if missing:
            raise PolicyError(f"metric {self.name}: no weight for quasi-identifiers {missing}")
        return {a: float(self._weights[a]) for a in attributes}


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


METRICS: dict[str, type[Metric]] = {"loss": Loss, "dm": Discernibility, "non-uniform-entropy": NonUniformEntropy,
                                    "ncp": NormalizedCertaintyPenalty, "average-class-size": AverageClassSize}
WEIGHTED = {"entropy-loss": "entropy", "mi-loss": "mutual-information"}


def metric_names() -> list[str]:
    return [*METRICS, *WEIGHTED]


def record_cost(hierarchy: Hierarchy, level: int, label: str | None, leaves: Mapping[str | None, int]) -> tuple[float, float]:
    """(LM, NCP) of one generalized value; a missing one (NULL, which stays NULL on every level) costs nothing."""
    if level == 0 or pd.isna(label):
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


def cost_table(codes: pd.DataFrame, counts: pd.Series, hierarchy: Hierarchy, index: int, kinds: Sequence[str],
               records: int) -> pd.DataFrame:
    """Per original value (its level-0 code) of one attribute: each cost kind at each level and when suppressed.

    ``codes`` has the attribute's level codes ``code_<j>`` and generalized values ``label_<j>``; ``counts`` the number
    of records per level-0 code."""
    out = pd.DataFrame({"code": codes["code_0"].to_numpy()})
    n_orig = codes["code_0"].map(counts).to_numpy(dtype=float)
    for level in range(hierarchy.levels):
        labels = codes[f"label_{level}"].tolist()
        if "lm" in kinds or "ncp" in kinds:
            leaves = hierarchy.leaves_under(level)
            pairs = [record_cost(hierarchy, level, label, leaves) for label in labels]
            if "lm" in kinds:
                out[cost_column("lm", index, level)] = [p[0] for p in pairs]
            if "ncp" in kinds:
                out[cost_column("ncp", index, level)] = [p[1] for p in pairs]
        if "entropy" in kinds:
            per_code = pd.Series(n_orig, index=codes[f"code_{level}"]).groupby(level=0).sum()
            n_general = codes[f"code_{level}"].map(per_code).to_numpy(dtype=float)
            out[cost_column("entropy", index, level)] = [math.log2(g / o) for g, o in zip(n_general, n_orig)]
    for kind in kinds:
        out[cost_column(kind, index, None)] = (
            [math.log2(records / o) for o in n_orig] if kind == "entropy" else 1.0)
    return out


def cost_column(kind: str, index: int, level: int | None) -> str:
    return f"__cost_{kind}_{index}_{'suppressed' if level is None else level}"
