"""Searching the generalization lattice for the transformation that satisfies a policy and loses the least.

:class:`NodeEvaluator` is the only piece that knows models and metrics: it evaluates one node with one SQL query over
the encoded frequency table (class sizes, violations, suppressed records, metric totals) and reports whether the node
satisfies the policy within the suppression limit, its metric value and a lower bound for its generalizations.  The
strategies see nothing else, so every strategy works with every model and metric:

- :class:`ExhaustiveSearch` evaluates every node;
- :class:`OptimalSearch` returns the same optimum as exhaustive search, evaluating far fewer nodes: when the policy
  is monotone (a node's generalizations satisfy it whenever the node does) it first tags nodes by binary searches on
  paths up the lattice, then evaluates candidates bottom-up and prunes the up-set of every node whose lower bound
  reaches the best value found;
- :class:`SamaratiSearch` is seed 002's binary search on lattice height: the best node of the lowest height at which
  any node satisfies (exact for monotone policies).

Monotonicity: without suppression every model here is monotone (generalization merges classes, and the union of
classes satisfying a model satisfies it).  With suppression only models for which a class merged with any satisfying
class satisfies again keep the suppressed-record count monotone: k-anonymity, distinct l-diversity and p-sensitive
k-anonymity (:attr:`~duckanon.models.PrivacyModel.monotone_under_suppression`).  For the others the search falls back
to lower-bound pruning alone, which is still exact.
"""

from __future__ import annotations

import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from . import sqlbuild as sb
from .checks import class_verdicts
from .classes import SIZE, VIOLATED, Classes
from .encoding import COUNT, Encoding, code_column
from .hierarchy import Hierarchy
from .lattice import Lattice, Node
from .metrics import Metric, NodeTotals, cost_column, cost_table
from .models import PrivacyModel

_serial = itertools.count()
# Nodes evaluated per query: one query's fixed cost (~3 ms) is shared, while each node still costs a pass over the
# frequency table.
BATCH = 64
# A node whose classes are SNAPSHOT_REDUCTION times fewer than the rows it was computed from, on a table of at least
# SNAPSHOT_SOURCE_ROWS rows, becomes a snapshot; below that size the per-query cost dominates and a copy gains nothing.
SNAPSHOT_REDUCTION = 8
SNAPSHOT_SOURCE_ROWS = 100_000
SNAPSHOT_LIMIT = 8


@dataclass(frozen=True)
class NodeResult:
    node: Node
    suppressed: int
    satisfied: bool
    values: dict[str, float]
    bounds: dict[str, float]
    classes: int


@dataclass(frozen=True)
class _Snapshot:
    """The costed table grouped at ``node`` (every coarser level's codes kept, costs summed): it evaluates every
    generalization of ``node`` over fewer rows."""

    node: Node
    table: exp.Table
    rows: int
    query: str


class NodeEvaluator:
    """Evaluates lattice nodes against a policy's models and scores them with metrics, over an encoded source.

    ``objective`` (the first metric) is what searches minimize; the others are computed alongside.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, encoding: Encoding, hierarchies: Sequence[Hierarchy],
                 models: Sequence[PrivacyModel], metrics: Sequence[Metric], allowed_suppressed: int,
                 monotone: bool, progress: Callable[[str], None] | None = None):
        names = [m.name for m in metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"metrics need distinct names, got {names}")
        self.con, self.encoding, self.models, self.metrics = con, encoding, list(models), list(metrics)
        self.hierarchies = list(hierarchies)
        self.allowed_suppressed = allowed_suppressed
        self.monotone = monotone
        self.objective = metrics[0].name
        self.lattice = Lattice(encoding.attributes, [h.levels for h in hierarchies])
        self.results: dict[int, NodeResult] = {}
        self.progress = progress
        self.weights = {m.name: m.weights(encoding.attributes) for m in metrics if m.cost_kind}
        self.cost_kinds = sorted({m.cost_kind for m in metrics if m.cost_kind})
        self.nodes_view = f"__duckanon_nodes_{next(_serial)}"
        base = self._costed_table()
        rows = sb.fetch_rows(con, exp.select(exp.func("COUNT", exp.Star())).from_(base))[0][0]
        bottom = self.lattice.bottom
        self.snapshots = [_Snapshot(bottom, base, rows, self._batch_query(base, bottom))]

    @property
    def checks(self) -> int:
        return len(self.results)

    def _costed_table(self) -> exp.Table:
        """The frequency table with every needed record cost, times the row's record count, at every level.

        Built once; costs are pre-multiplied by the count so a class's cost is a plain SUM."""
        if not self.cost_kinds:
            return self.encoding.table
        records = sb.fetch_rows(self.con, exp.select(exp.func("SUM", sb.col(COUNT))).from_(self.encoding.table))[0][0]
        costed = exp.select(exp.Column(this=exp.Star(), table=sb.ident("f"))).from_(
            exp.alias_(self.encoding.table, "f", quoted=True))
        registered = []
        for i, hierarchy in enumerate(self.hierarchies):
            codes = self.encoding.level_frame(i)
            counts = dict(sb.fetch_rows(self.con, exp.select(sb.col(code_column(i, 0)), exp.func("SUM", sb.col(COUNT)))
                                        .from_(self.encoding.table).group_by(sb.col(code_column(i, 0)))))
            costs = cost_table(codes, pd.Series(counts), hierarchy, i, self.cost_kinds, records)
            name = f"__duckanon_costs_{next(_serial)}"
            self.con.register(name, costs)
            registered.append(name)
            costed = costed.join(
                exp.alias_(sb.table(name), f"c{i}", quoted=True),
                on=sb.col(code_column(i, 0), "f").eq(sb.col("code", f"c{i}")), join_type="LEFT",
            ).select(*[(sb.col(COUNT, "f") * sb.col(c, f"c{i}")).as_(c, quoted=True)
                       for c in costs.columns if c != "code"])
        table = sb.table(f"__duckanon_costed_{next(_serial)}")
        sb.run(self.con, sb.create_table_as(table, costed, temporary=True))
        for name in registered:
            self.con.unregister(name)
        return table

    def _batch_query(self, table: exp.Table, floor: Node) -> str:
        """One statement evaluating every node listed in the registered nodes view (columns ``__node``, ``__l<i>``),
        all at or above ``floor``: each row of ``table`` meets each node, CASEs on the node's levels pick the level's
        code and cost columns, and the node id leads the class key.  Built once per table."""
        def at_level(i: int, column) -> exp.Expression:
            case = exp.Case(this=sb.col(f"__l{i}", "n"))
            case.set("ifs", [exp.If(this=sb.lit(j), true=sb.col(column(j), "t"))
                             for j in range(floor[i], self.hierarchies[i].levels)])
            return case

        projection = [sb.col("__node", "n")]
        projection += [at_level(i, lambda j, i=i: code_column(i, j)).as_(f"__node_k{i}", quoted=True)
                       for i in range(len(self.hierarchies))]
        projection += [sb.col(COUNT, "t")] + [sb.col(s, "t") for s in self.encoding.sensitive]
        carried = []
        for metric in self.metrics:
            if metric.cost_kind is None:
                continue
            weights, kind = self.weights[metric.name], metric.cost_kind
            for prefix, column_at in (("all", lambda i, kind=kind: at_level(i, lambda j: cost_column(kind, i, j))),
                                      ("suppressed", lambda i, kind=kind: sb.col(cost_column(kind, i, None), "t"))):
                total = sb.lit(0)
                for i, attribute in enumerate(self.encoding.attributes):
                    total = total + sb.lit(weights[attribute]) * column_at(i)
                projection.append(total.as_(f"__{prefix}_{metric.name}", quoted=True))
                carried.append(f"__{prefix}_{metric.name}")
        relation = (exp.select(*projection).from_(exp.alias_(table, "t", quoted=True))
                    .join(exp.alias_(sb.table(self.nodes_view), "n", quoted=True), join_type="CROSS"))
        keys = ["__node"] + [f"__node_k{i}" for i in range(len(self.hierarchies))]
        classes = Classes.of(relation, keys, weight=COUNT, carry=carried)
        verdicts = class_verdicts(classes, self.models, {name: sb.col(name) for name in carried}).subquery("v")
        size, violated = sb.as_double(sb.col(SIZE)), sb.col(VIOLATED)

        def where(condition: exp.Expression, value: exp.Expression) -> exp.Expression:
            return exp.func("COALESCE", exp.func("SUM", exp.Case().when(condition, value)), sb.lit(0))

        node = sb.col(classes.key_columns[0])
        columns = [node, exp.func("SUM", size), where(violated, size), exp.func("COUNT", exp.Star()),
                   exp.func("COUNT", exp.Case().when(violated.not_(), sb.lit(1))),
                   exp.func("SUM", size * size), where(violated.not_(), size * size)]
        for metric in self.metrics:
            if metric.cost_kind is not None:
                every, dropped = sb.col(f"__all_{metric.name}"), sb.col(f"__suppressed_{metric.name}")
                columns += [exp.func("SUM", every), where(violated.not_(), every), where(violated, dropped)]
        return sb.to_sql(exp.select(*columns).from_(verdicts).group_by(node))

    def evaluate(self, index: int) -> NodeResult:
        return self.evaluate_many([index])[0]

    def evaluate_many(self, indices: Sequence[int]) -> list[NodeResult]:
        """Evaluate nodes (cached), a batch per query, each from the smallest snapshot that covers it."""
        pending: dict[int, list[int]] = {}
        for index in dict.fromkeys(int(i) for i in indices):
            if index not in self.results:
                node = self.lattice.nodes[index]
                usable = [k for k, s in enumerate(self.snapshots) if all(node >= np.asarray(s.node))]
                pending.setdefault(min(usable, key=lambda k: self.snapshots[k].rows), []).append(index)
        for k, batch in pending.items():
            snapshot = self.snapshots[k]
            for first in range(0, len(batch), BATCH):
                self._run(snapshot, batch[first:first + BATCH])
        return [self.results[int(i)] for i in indices]

    def _run(self, snapshot: _Snapshot, batch: list[int]) -> None:
        levels = self.lattice.nodes[batch]
        frame = pd.DataFrame({"__node": np.asarray(batch, dtype=np.int64),
                              **{f"__l{i}": levels[:, i] for i in range(levels.shape[1])}})
        self.con.register(self.nodes_view, frame)
        try:
            rows = self.con.execute(snapshot.query).fetchall()
        finally:
            self.con.unregister(self.nodes_view)
        for row in rows:
            index, row = int(row[0]), row[1:]
            costs, position = {}, 6
            for metric in self.metrics:
                if metric.cost_kind is not None:
                    costs[metric.name] = tuple(float(v) for v in row[position:position + 3])
                    position += 3
            totals = NodeTotals(records=int(row[0]), suppressed=int(row[1]), classes=int(row[2]),
                                kept_classes=int(row[3]), squares=float(row[4]), kept_squares=float(row[5]),
                                costs=costs)
            self.results[index] = NodeResult(
                node=self.lattice.node(index), suppressed=totals.suppressed,
                satisfied=totals.suppressed <= self.allowed_suppressed,
                values={m.name: m.value(totals) for m in self.metrics},
                bounds={m.name: m.lower_bound(totals) for m in self.metrics}, classes=totals.classes)
            if (snapshot.rows >= SNAPSHOT_SOURCE_ROWS and totals.classes * SNAPSHOT_REDUCTION <= snapshot.rows
                    and len(self.snapshots) <= SNAPSHOT_LIMIT):
                self._snapshot(self.results[index].node, snapshot)
        if self.progress is not None:
            self.progress(f"{len(self.results)} nodes checked")

    def _snapshot(self, node: Node, source: _Snapshot) -> None:
        """Group ``source`` at ``node``, keeping every coarser level's codes and costs, as a new snapshot."""
        codes = [code_column(i, j) for i, level in enumerate(node) for j in range(level, self.hierarchies[i].levels)]
        keys = [*codes, *self.encoding.sensitive]
        costs = [cost_column(kind, i, j) for kind in self.cost_kinds
                 for i, level in enumerate(node) for j in [*range(level, self.hierarchies[i].levels), None]]
        query = (exp.select(*[sb.col(k) for k in keys], *[exp.func("SUM", sb.col(c)).as_(c, quoted=True)
                                                          for c in [COUNT, *costs]])
                 .from_(source.table).group_by(*[sb.col(k) for k in keys]))
        table = sb.table(f"__duckanon_snapshot_{next(_serial)}")
        sb.run(self.con, sb.create_table_as(table, query, temporary=True))
        rows = sb.fetch_rows(self.con, exp.select(exp.func("COUNT", exp.Star())).from_(table))[0][0]
        self.snapshots.append(_Snapshot(node, table, rows, self._batch_query(table, node)))

    def value(self, index: int) -> float:
        return self.evaluate(index).values[self.objective]

    def close(self) -> None:
        for snapshot in self.snapshots[1:]:
            sb.run(self.con, sb.drop("TABLE", snapshot.table))
        if self.snapshots[0].table is not self.encoding.table:
            sb.run(self.con, sb.drop("TABLE", self.snapshots[0].table))


@dataclass
class SearchResult:
    strategy: str
    metric: str
    best: NodeResult | None
    closest: NodeResult
    checks: int
    lattice_size: int
    seconds: float
    attributes: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.best is not None

    @property
    def levels(self) -> dict[str, int]:
        node = (self.best or self.closest).node
        return dict(zip(self.attributes, node))

    def summary(self) -> str:
        if self.best is None:
            return (f"{self.strategy}: no transformation satisfies the policy; the closest, "
                    f"{dict(zip(self.attributes, self.closest.node))}, would suppress {self.closest.suppressed} records "
                    f"({self.checks} of {self.lattice_size} nodes checked, {self.seconds:.2f} s)")
        return (f"{self.strategy}: {self.levels} with {self.metric} = {self.best.values[self.metric]:.6g}, "
                f"{self.best.suppressed} records suppressed ({self.checks} of {self.lattice_size} nodes checked, "
                f"{self.seconds:.2f} s)")


class SearchStrategy(ABC):
    name = ""

    def search(self, evaluator: NodeEvaluator) -> SearchResult:
        started = time.perf_counter()
        best = self.best_node(evaluator)
        results = evaluator.results.values()
        closest = min(results, key=lambda r: (r.suppressed, sum(r.node)))
        return SearchResult(self.name, evaluator.objective, evaluator.evaluate(best) if best is not None else None,
                            closest, evaluator.checks, evaluator.lattice.size, time.perf_counter() - started,
                            list(evaluator.encoding.attributes))

    @abstractmethod
    def best_node(self, evaluator: NodeEvaluator) -> int | None:
        """Index of the best satisfying node, or None when none satisfies."""


def _better(evaluator: NodeEvaluator, candidate: int, best: int | None) -> bool:
    if best is None:
        return True
    return (evaluator.value(candidate), candidate) < (evaluator.value(best), best)


class ExhaustiveSearch(SearchStrategy):
    name = "exhaustive"

    def best_node(self, evaluator):
        best = None
        for height in range(evaluator.lattice.height + 1):
            for index in evaluator.lattice.at_height(height):
                if evaluator.evaluate_many([int(index)])[0].satisfied and _better(evaluator, int(index), best):
                    best = int(index)
        return best


class OptimalSearch(SearchStrategy):
    name = "optimal"

    def best_node(self, evaluator):
        lattice = evaluator.lattice
        candidates = np.ones(lattice.size, dtype=bool)
        if evaluator.monotone:
            satisfied = tag_by_paths(evaluator)
            candidates = satisfied
        pruned = np.zeros(lattice.size, dtype=bool)
        best: int | None = None
        objective = evaluator.objective
        for height in range(lattice.height + 1):
            # Nodes of one height cannot prune each other, so a height's candidates are evaluated as one batch.
            level = [int(i) for i in lattice.at_height(height) if candidates[i] and not pruned[i]]
            for index, result in zip(level, evaluator.evaluate_many(level)):
                bound = result.bounds[objective]
                if best is not None and bound >= evaluator.value(best):
                    pruned |= lattice.up_set(index)
                    continue
                if result.satisfied:
                    if _better(evaluator, index, best):
                        best = index
                    if bound >= result.values[objective]:
                        # No generalization can score below this node's own value.
                        pruned |= lattice.up_set(index)
        return best


def tag_by_paths(evaluator: NodeEvaluator, paths_per_round: int = BATCH) -> np.ndarray:
    """For a monotone policy: which nodes satisfy it, found by binary searches along paths up the lattice.

    A node that satisfies tags its whole up-set, one that fails its whole down-set, so most nodes are never checked.
    Many paths are searched in lockstep so that each round's middle nodes are evaluated as one batch.
    """
    lattice = evaluator.lattice
    tags = np.zeros(lattice.size, dtype=np.int8)  # 1 satisfies, -1 fails, 0 unknown

    def record(index: int, ok: bool) -> None:
        mask = lattice.up_set(index) if ok else lattice.down_set(index)
        tags[mask & (tags == 0)] = 1 if ok else -1

    top = lattice.index(lattice.top)
    record(top, evaluator.evaluate(top).satisfied)
    if tags[top] < 0:
        return tags == 1
    order = [int(i) for i in lattice.by_height()]
    cursor = 0
    while True:
        # Build up to ``paths_per_round`` paths from the lowest untagged nodes, each climbing through untagged nodes.
        paths: list[list[int]] = []
        claimed: set[int] = set()
        while cursor < len(order) and len(paths) < paths_per_round:
            start = order[cursor]
            if tags[start] or start in claimed:
                cursor += 1 if tags[start] else 0
                if not tags[start]:
                    break
                continue
            path = [start]
            while upward := [s for s in lattice.successors(path[-1]) if tags[s] == 0 and s not in claimed]:
                path.append(upward[0])
            claimed.update(path)
            paths.append(path)
            cursor += 1
        if not paths:
            if cursor >= len(order):
                return tags == 1
            continue
        bounds = [[0, len(path) - 1] for path in paths]
        while any(low <= high for low, high in bounds):
            middles = [(k, (low + high) // 2) for k, (low, high) in enumerate(bounds) if low <= high]
            results = evaluator.evaluate_many([paths[k][m] for k, m in middles])
            for (k, middle), result in zip(middles, results):
                record(paths[k][middle], result.satisfied)
            for k, (low, high) in enumerate(bounds):
                # Tags from other paths may settle this path's nodes: narrow to the still-unknown stretch.
                while low <= high and tags[paths[k][low]] < 0:
                    low += 1
                while low <= high and tags[paths[k][high]] > 0:
                    high -= 1
                bounds[k] = [low, high]


class SamaratiSearch(SearchStrategy):
    """Seed 002: binary search on height for the lowest height with a satisfying node (MaxSup being the suppression
    limit), then the best node of that height under the metric."""

    name = "samarati"

    def best_node(self, evaluator):
        lattice = evaluator.lattice
        low, high = 0, lattice.height
        best: int | None = None
        while low <= high:
            middle = (low + high) // 2
            found = None
            level = [int(i) for i in lattice.at_height(middle)]
            for index, result in zip(level, evaluator.evaluate_many(level)):
                if result.satisfied and _better(evaluator, index, found):
                    found = index
            if found is not None:
                best, high = found, middle - 1
            else:
                low = middle + 1
        return best


STRATEGIES: dict[str, type[SearchStrategy]] = {s.name: s for s in (OptimalSearch, SamaratiSearch, ExhaustiveSearch)}


def solution_space(evaluator: NodeEvaluator) -> pd.DataFrame:
    """Every satisfying node with its suppressed records and every metric's value (seed 000, steps 2–3)."""
    lattice = evaluator.lattice
    candidates = tag_by_paths(evaluator) if evaluator.monotone else np.ones(lattice.size, dtype=bool)
    chosen = [int(i) for i in lattice.by_height() if candidates[i]]
    rows = [{**dict(zip(lattice.attributes, r.node)), "suppressed": r.suppressed, "classes": r.classes, **r.values}
            for r in evaluator.evaluate_many(chosen) if r.satisfied]
    columns = [*lattice.attributes, "suppressed", "classes", *[m.name for m in evaluator.metrics]]
    return pd.DataFrame(rows, columns=columns)
