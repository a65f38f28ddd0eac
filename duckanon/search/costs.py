"""The record costs both node evaluators sum: per attribute and original value, each cost kind at every level.

Read once per evaluator from the encoding (:func:`~duckanon.utility.metrics.cost_table` per attribute).  What they sum
to over the table at each level gives the metrics' prior bounds, which every evaluator must give alike.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..encode.encoding import COUNT, Encoding, LevelValues, code_column
from ..hierarchy.hierarchy import Hierarchy
from ..sqlgen import build as sb
from ..utility.metrics import (
    CostSum,
    Loss,
    Metric,
    NonUniformEntropy,
    NormalizedCertaintyPenalty,
    RecordCostMetric,
    cost_column,
    cost_table,
)


@dataclass(frozen=True)
class AttributeCosts:
    """One attribute's distinct original values that records hold: ``values`` their code and label on every level,
    ``records`` each one's records (float64), and ``table`` each cost kind at each level and when suppressed, per
    value, beside its level-0 code (``code``): columns of the values' rows."""

    values: LevelValues
    records: np.ndarray
    table: dict[str, np.ndarray]


class RecordCosts:
    """The record costs of ``metrics`` over an encoding: the cost sums they need (:class:`CostSum`), per attribute
    its :class:`AttributeCosts`, and per cost kind and attribute the table's total cost on each level."""

    def __init__(self, encoding: Encoding, hierarchies: Sequence[Hierarchy], metrics: Sequence[Metric]):
        self.names = list(encoding.attributes)
        self.sums: list[CostSum] = [s for m in metrics for s in m.cost_sums(self.names)]
        # Σ C_t² and Σ C_t² log2 C_t over the tuples (C_t: the records with one set of original quasi-identifier
        # values), for metrics that weigh tuples.
        self.tuples = (encoding.memo("tuple weights", lambda: _tuple_weights(encoding))
                       if any(m.weighs_tuples for m in metrics) else None)
        self.kinds = sorted({s.kind for s in self.sums})
        self.level_costs: dict[str, list[np.ndarray]] = {kind: [] for kind in self.kinds}
        self.records, self.attributes = 0, []
        if not self.kinds:
            self.bottom: dict[str, float] = {}
            return
        self.records, self.attributes = encoding.memo(f"record costs {self.kinds}",
                                                      lambda: _read(encoding, hierarchies, self.kinds))
        for i, (attribute, hierarchy) in enumerate(zip(self.attributes, hierarchies)):
            for kind in self.kinds:
                self.level_costs[kind].append(np.array(
                    [attribute.records @ attribute.table[cost_column(kind, i, j)] for j in range(hierarchy.levels)]))
        self.bottom = {s.name: self._bottom(s) for s in self.sums}

    def _bottom(self, cost_sum: CostSum) -> float:
        """The cost sum over every record at the lattice's bottom.  Summed as 10^ per record (``exp10``), it takes
        each attribute's level-0 cost as the same for every value, as a share is for an original value."""
        if not cost_sum.exp10:
            return float(sum(costs[0] for costs in self._level_costs(cost_sum)))
        exponent = 0.0
        for i, name in enumerate(self.names):
            original = self.attributes[i].table[cost_column(cost_sum.kind, i, 0)]
            if cost_sum.weights[name] and len(original):
                if np.ptp(original) > 1e-12 * max(1.0, float(np.abs(original).max())):
                    raise ValueError(f"cost {cost_sum.kind!r} of {name!r} differs between original values")
                exponent += cost_sum.weights[name] * float(original[0])
        return self.records * 10.0 ** exponent

    def _level_costs(self, cost_sum: CostSum) -> list[np.ndarray]:
        """Per attribute, the table's cost in ``cost_sum`` on each level (weighted)."""
        return [cost_sum.weights[a] * costs for a, costs in zip(self.names, self.level_costs[cost_sum.kind])]

    def prior_bounds(self, metric: Metric, nodes: np.ndarray) -> np.ndarray | None:
        """``metric``'s lower bounds of every node known before evaluating any (rows of ``nodes``), or None.  Slightly
        lowered: they are summed in another order than the evaluated values, and must never exceed them."""
        sums = metric.cost_sums(self.names)
        bounds = metric.prior_bounds(nodes, {s.name: self._level_costs(s) for s in sums}, self.records)
        if bounds is None:
            return None
        return bounds - 1e-9 * np.abs(bounds) - 1e-12


def tuple_counts(encoding: Encoding) -> exp.Select:
    """The records of each tuple (set of original quasi-identifier values) of ``encoding``, as ``__tuple``."""
    codes = [sb.col(code_column(i, 0)) for i in range(len(encoding.attributes))]
    return (exp.select(exp.func("SUM", sb.col(COUNT)).as_("__tuple", quoted=True)).from_(encoding.table)
            .group_by(*codes))


def _tuple_weights(encoding: Encoding) -> tuple[float, float]:
    counts = np.asarray(encoding.engine.arrays(tuple_counts(encoding))["__tuple"], dtype=np.float64)
    squares = counts * counts
    return float(squares.sum()), float((squares * np.log2(counts)).sum())


def _read(encoding: Encoding, hierarchies: Sequence[Hierarchy], kinds: Sequence[str]
          ) -> tuple[int, list[AttributeCosts]]:
    """The records of an encoding and each attribute's costs of ``kinds``."""
    records, values = encoding.memo("attribute values", lambda: _values(encoding, len(hierarchies)))
    return records, [AttributeCosts(held, counts, cost_table(held.codes, held.labels, counts, hierarchy, i, kinds,
                                                            records))
                     for i, (hierarchy, (held, counts)) in enumerate(zip(hierarchies, values))]


def _values(encoding: Encoding, attributes: int) -> tuple[int, list[tuple[LevelValues, np.ndarray]]]:
    """The records of an encoding and, per attribute, the values records hold (their codes and labels on every level)
    with each one's records: read once for every evaluator of the encoding, whatever costs it needs."""
    engine = encoding.engine
    records = int(engine.value(exp.select(exp.func("SUM", sb.col(COUNT))).from_(encoding.table)))
    values = []
    for i in range(attributes):
        code = sb.col(code_column(i, 0))
        counted = engine.arrays(exp.select(code.as_("code"), exp.func("SUM", sb.col(COUNT)).as_("records"))
                                .from_(encoding.table).group_by(code.copy()))
        levels = encoding.level_values(i)
        # Per level-0 code (dense, from 1), its records; 0 for a value only a population table holds, which costs the
        # data nothing (and has no frequency to cost by).
        per_code = np.zeros(int(levels.codes[0].max(initial=0)) + 1)
        per_code[np.asarray(counted["code"], dtype=np.int64)] = np.asarray(counted["records"], dtype=np.float64)
        held = levels.kept(per_code[levels.codes[0]] > 0)
        values.append((held, per_code[held.codes[0]]))
    return records, values


# The metrics a release that recodes records on levels of their own records beside the search's: those summed over
# records (no label needed).
RECORDED_COST_METRICS = [Loss(), NormalizedCertaintyPenalty(), NonUniformEntropy()]


def release_cost_metrics(encoding: Encoding, hierarchies: Sequence[Hierarchy], metrics: Sequence[Metric],
                         codes: Sequence[np.ndarray], counts: np.ndarray, cost_columns: np.ndarray
                         ) -> dict[str, float]:
    """Each record-cost metric of ``metrics`` over a release that recodes the frequency table's rows (their level-0
    ``codes`` per attribute and their ``counts``) each on its own levels: ``cost_columns`` (rows × attributes) holds
    the level each row's attribute is released on, or the attribute's number of levels where its value is suppressed
    (its suppressed cost, as a node's value counts it).  Local recoding and cell suppression record these."""
    priced = [m for m in metrics if isinstance(m, RecordCostMetric)]
    if not priced:
        return {}
    costs = RecordCosts(encoding, hierarchies, priced)
    values = {}
    for metric in priced:
        total = 0.0
        for cost_sum in metric.cost_sums(encoding.attributes):
            for i, attribute in enumerate(encoding.attributes):
                weight = cost_sum.weights[attribute]
                if not weight:
                    continue
                table = costs.attributes[i].table
                row_of_code = np.zeros(int(table["code"].max()) + 1, dtype=np.int64)
                row_of_code[table["code"]] = np.arange(len(table["code"]))
                rows = row_of_code[codes[i]]
                by_level = np.column_stack([table[cost_column(cost_sum.kind, i, j)]
                                            for j in range(hierarchies[i].levels)]
                                           + [table[cost_column(cost_sum.kind, i, None)]])
                total += weight * float(counts @ by_level[rows, cost_columns[:, i]])
        values[metric.name] = float(total / counts.sum() if metric.average else total)
    return values
