"""Searching the generalization lattice for the transformation that satisfies a policy and loses the least.

:class:`NodeEvaluator` is the only piece that knows models and metrics: it evaluates a batch of nodes with one SQL
query over the encoded frequency table (class sizes, violations, suppressed records, metric totals) and reports
whether each node satisfies the policy within the suppression limit, its metric value and a lower bound for its
generalizations.  On a big table it keeps snapshots (the table grouped at an evaluated or nearby node) and computes
each node from the smallest snapshot below it.  The strategies see nothing else, so every strategy works with every
model and metric:

- :class:`ExhaustiveSearch` evaluates every node;
- :class:`OptimalSearch` returns the same optimum as exhaustive search, evaluating far fewer nodes: every node is
  settled by evaluating it, by a failing node above it (monotone policies: a node's generalizations satisfy it
  whenever the node does), or by a node below it whose lower bound reaches the best value found; it interleaves
  binary searches along paths up the lattice with the evaluation of the nodes known to satisfy;
- :class:`SamaratiSearch` is seed 002's binary search on lattice height: the best node of the lowest height at which
  any node satisfies (exact for monotone policies).

Monotonicity: without suppression every model here is monotone (generalization merges classes, and the union of
classes satisfying a model satisfies it).  With suppression only models for which a class merged with any satisfying
class satisfies again keep the suppressed-record count monotone: k-anonymity, distinct l-diversity and p-sensitive
k-anonymity (:attr:`~duckanon.privacy.models.PrivacyModel.monotone_under_suppression`).  For the others the search falls back
to lower-bound pruning alone, which is still exact: every metric's bound holds whichever records are suppressed.

What is monotone is "within the suppression limit"; a node *satisfies* the policy when, besides, the suppressed
records -- replaced by ``*``, one class of their own -- satisfy it too (size-only models: from the node's totals;
others: one query, made only for a node about to become the best).  So tags follow the limit, and only nodes that
satisfy become the best: the search returns what publishing releases unchanged.  Dropped records form no class, but
they leave the table that models such as t-closeness compare with
(:attr:`~duckanon.privacy.models.PrivacyModel.compares_with_table`): with such a model a node suppresses what drop mode's
fixed point does (:func:`~duckanon.privacy.checks.settle_drops`, a few more queries per batch of nodes), as publishing does,
and the policy is not monotone under suppression.
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import duckdb
import numpy as np
import pandas as pd
from sqlglot import exp

from ..sqlgen import build as sb
from ..privacy.checks import DropFixedPoint, class_verdicts, suppressed_class_violates
from ..encode.classes import SIZE, VIOLATED, Classes, key_name
from ..encode.encoding import COUNT, Encoding, code_column
from ..declare.hierarchy import Hierarchy
from .lattice import Lattice, Node
from ..utility.metrics import Metric, NodeTotals, cost_column, cost_table
from ..privacy.models import PrivacyModel

_serial = itertools.count()
# Nodes evaluated per query: one query's fixed cost (~3 ms) is shared, while each node still costs a pass over the
# rows of the table it is computed from.
BATCH = 64
# At most this many source rows (summed over a query's nodes) per query: a query's hash tables grow with it, and on a
# big table a handful of nodes already amortizes the fixed cost.
ROWS_PER_QUERY = 2_500_000
# A node whose classes are SNAPSHOT_REDUCTION times fewer than the rows it was computed from, on a table of at least
# SNAPSHOT_SOURCE_ROWS rows, may become a snapshot: a copy of the table grouped at that node, from which its
# generalizations are computed over fewer rows.  It becomes one when the nodes still pending above it would save at
# least SNAPSHOT_PAYOFF times the rows its grouping reads.  At most SNAPSHOT_LIMIT snapshots of SNAPSHOT_BYTES_LIMIT
# bytes in all (estimated from their column types) are kept; to make room, those with the fewest pending nodes above
# them are dropped.  Below SNAPSHOT_SOURCE_ROWS (Adult's 19,502-row table) a query is one single-threaded pass that
# snapshots did not make cheaper (Adult, 5% DM: 5.4 s with snapshots, 4.8 s without).  On the 1.17M-row IHIS-shaped
# table the lowered candidates cut the rows read for DM at 0% from 689M to 150M, and 64 snapshots rather than 16 the
# rows read for Loss at 0% from 408M to 145M.
SNAPSHOT_REDUCTION = 4
SNAPSHOT_SOURCE_ROWS = 100_000
SNAPSHOT_PAYOFF = 4
SNAPSHOT_LIMIT = 64
SNAPSHOT_BYTES_LIMIT = 512 * 2**20
SNAPSHOTS_PER_BATCH = 2
# Meet snapshots stop after this many did not shrink the rows: a search whose batches spread over the lattice (binary
# searches on paths) has meets near the bottom, and each failed try costs a pass over the big table (IHIS, DM 5%:
# 283 -> 342 CPU seconds without the stop).
MEET_FAILURES = 3


@dataclass(frozen=True)
class NodeResult:
    """One node's evaluation.  ``within_limit``: the violating classes hold at most the allowed suppressed records
    (monotone for the models that tag by it).  ``satisfied``: within the limit, and, when suppressed records are
    replaced and so form one class of their own, that class satisfies the policy too; None until
    :meth:`NodeEvaluator.satisfies` has checked that class (only models over sensitive values need a query)."""

    node: Node
    suppressed: int
    within_limit: bool
    satisfied: bool | None
    values: dict[str, float]
    bounds: dict[str, float]
    classes: int


@dataclass(frozen=True)
class _Snapshot:
    """The costed table grouped at ``node`` (every coarser level's codes kept, costs summed): it evaluates every
    generalization of ``node`` over fewer rows.  ``fragment`` is the SQL that projects its rows for the nodes of the
    nodes view whose ``__source`` is ``id``."""

    id: int
    node: Node
    table: exp.Table
    rows: int
    fragment: str
    above: np.ndarray  # mask of the lattice nodes it can evaluate (the node's up-set)


@dataclass(frozen=True)
class _Settling:
    """The statements of a batch's evaluation with drop mode's fixed point: the records grouped into a temporary table
    (``group_head`` + the records' SQL + ``group_tail``), its class verdicts into another, settled, the totals read
    and both tables dropped."""

    group_head: str
    group_tail: str
    create_verdicts: str
    fixed_point: DropFixedPoint
    totals: str
    drops: list[str]


class NodeEvaluator:
    """Evaluates lattice nodes against a policy's models and scores them with metrics, over an encoded source.

    ``objective`` (the first metric) is what searches minimize; the others are computed alongside.  A search may set
    :attr:`pending` (a mask of the nodes it may still evaluate) so that snapshots are made where they will be used.
    """

    def __init__(self, con: duckdb.DuckDBPyConnection, encoding: Encoding, hierarchies: Sequence[Hierarchy],
                 models: Sequence[PrivacyModel], metrics: Sequence[Metric], allowed_suppressed: int,
                 monotone: bool, progress: Callable[[str], None] | None = None, suppressed_monotone: bool = True,
                 suppressed_class: bool = True):
        names = [m.name for m in metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"metrics need distinct names, got {names}")
        self.con, self.encoding, self.models, self.metrics = con, encoding, list(models), list(metrics)
        self.hierarchies = list(hierarchies)
        self.allowed_suppressed = allowed_suppressed
        # Whether suppressed records stay, all quasi-identifiers '*', as a class that must satisfy the policy too;
        # otherwise they are dropped.
        self.suppressed_class = suppressed_class
        # Dropped records leave the table some models compare with: each node is settled to drop mode's fixed point,
        # and being within the limit is then not monotone (whatever the models claim).
        self.settles = not suppressed_class and any(m.compares_with_table for m in self.models)
        self.monotone = monotone and not (self.settles and allowed_suppressed > 0)
        # Whether generalizing never increases the suppressed records (then the top node suppresses least).
        self.suppressed_monotone = suppressed_monotone and not self.settles
        self.objective = metrics[0].name
        self.lattice = Lattice(encoding.attributes, [h.levels for h in hierarchies])
        self.masks = LatticeMasks(self.lattice)
        self.results: dict[int, NodeResult] = {}
        self.evaluated = np.zeros(self.lattice.size, dtype=bool)
        self.pending: np.ndarray | None = None
        self.progress = progress
        self.queries = 0
        self.weights = {m.name: m.weights(encoding.attributes) for m in metrics if m.cost_kind}
        self.sensitive_models = any(m.sensitive is not None for m in models)
        self.cost_kinds = sorted({m.cost_kind for m in metrics if m.cost_kind})
        self.nodes_view = f"__duckanon_nodes_{next(_serial)}"
        self.records_name = f"__duckanon_records_{next(_serial)}"
        self.carried = [f"__{prefix}_{m.name}" for m in self.metrics if m.cost_kind is not None
                        for prefix in ("all", "suppressed")]
        base = self._base_table()
        self._tail = self._totals_query()
        rows = sb.fetch_rows(con, exp.select(exp.func("COUNT", exp.Star())).from_(base))[0][0]
        self.base_rows = rows
        bottom = self.lattice.bottom
        self.snapshots = [self._new_snapshot(bottom, base, rows)]
        self._failed_meets: list[Node] = []

    @property
    def checks(self) -> int:
        return len(self.results)

    def _base_table(self) -> exp.Table:
        """The frequency table as the evaluator reads it: level codes in the narrowest integer type that holds them
        and, for record-cost metrics, every needed record cost at every level, times the row's record count.

        Built once; costs are pre-multiplied by the count so a class's cost is a plain SUM."""
        f = "f"
        codes = [code_column(i, j) for i, h in enumerate(self.hierarchies) for j in range(h.levels)]
        widest = sb.fetch_rows(self.con, exp.select(*[exp.func("MAX", sb.col(c)) for c in codes])
                               .from_(self.encoding.table))[0]
        columns = [exp.cast(sb.col(c, f), _code_type(m)).as_(c, quoted=True) for c, m in zip(codes, widest)]
        # Distinct generalized values per attribute and level (codes are dense ranks), for estimating row counts.
        largest = iter(int(m or 1) for m in widest)
        self.distinct = [np.array([next(largest) for _ in range(h.levels)], dtype=np.float64)
                         for h in self.hierarchies]
        columns += [sb.col(c, f) for c in [*self.encoding.sensitive, COUNT]]
        query = exp.select(*columns).from_(exp.alias_(self.encoding.table, f, quoted=True))
        registered = []
        self.level_costs: dict[str, list[np.ndarray]] = {kind: [] for kind in self.cost_kinds}
        self.records = 0
        if self.cost_kinds:
            self.records = records = sb.fetch_rows(self.con, exp.select(exp.func("SUM", sb.col(COUNT)))
                                    .from_(self.encoding.table))[0][0]
            for i, hierarchy in enumerate(self.hierarchies):
                level_codes = self.encoding.level_frame(i)
                counts = dict(sb.fetch_rows(self.con, exp.select(sb.col(code_column(i, 0)), exp.func("SUM", sb.col(COUNT)))
                                            .from_(self.encoding.table).group_by(sb.col(code_column(i, 0)))))
                costs = cost_table(level_codes, pd.Series(counts), hierarchy, i, self.cost_kinds, records)
                weight = costs["code"].map(counts).fillna(0).to_numpy(dtype=np.float64)
                for kind in self.cost_kinds:
                    self.level_costs[kind].append(np.array(
                        [weight @ costs[cost_column(kind, i, j)].to_numpy(dtype=np.float64)
                         for j in range(hierarchy.levels)]))
                name = f"__duckanon_costs_{next(_serial)}"
                self.con.register(name, costs)
                registered.append(name)
                query = query.join(
                    exp.alias_(sb.table(name), f"c{i}", quoted=True),
                    on=sb.col(code_column(i, 0), f).eq(sb.col("code", f"c{i}")), join_type="LEFT",
                ).select(*[(sb.col(COUNT, f) * sb.col(c, f"c{i}")).as_(c, quoted=True)
                           for c in costs.columns if c != "code" and not c.endswith("_suppressed")])
            # A suppressed record's cost does not depend on the levels: one column per metric, summed up front.
            for metric in self.metrics:
                if metric.cost_kind is not None:
                    total = sb.lit(0)
                    for i, attribute in enumerate(self.encoding.attributes):
                        total = total + sb.lit(self.weights[metric.name][attribute]) * (
                            sb.col(COUNT, f) * sb.col(cost_column(metric.cost_kind, i, None), f"c{i}"))
                    query = query.select(exp.cast(total, exp.DataType.build("DOUBLE")).as_(
                        _suppressed_cost(metric), quoted=True))
        table = sb.table(f"__duckanon_costed_{next(_serial)}")
        try:
            sb.run(self.con, sb.create_table_as(table, query, temporary=True))
        finally:
            for name in registered:
                self.con.unregister(name)
        return table

    def _fragment(self, source_id: int, table: exp.Table, floor: Node) -> str:
        """The rows of ``table`` met with each node of the nodes view whose ``__source`` is ``source_id`` (all at or
        above ``floor``): CASEs on the node's levels pick the level's code and cost columns."""
        def at_level(i: int, column) -> exp.Expression:
            case = exp.Case(this=sb.col(f"__l{i}", "n"))
            case.set("ifs", [exp.If(this=sb.lit(j), true=sb.col(column(j), "t"))
                             for j in range(floor[i], self.hierarchies[i].levels)])
            return case

        projection = [sb.col("__node", "n")]
        projection += [at_level(i, lambda j, i=i: code_column(i, j)).as_(f"__node_k{i}", quoted=True)
                       for i in range(len(self.hierarchies))]
        projection += [sb.col(COUNT, "t")] + [sb.col(s, "t") for s in self.encoding.sensitive]
        for metric in self.metrics:
            if metric.cost_kind is None:
                continue
            weights, kind = self.weights[metric.name], metric.cost_kind
            total = sb.lit(0)
            for i, attribute in enumerate(self.encoding.attributes):
                total = total + sb.lit(weights[attribute]) * at_level(i, lambda j, i=i: cost_column(kind, i, j))
            projection.append(exp.cast(total, exp.DataType.build("DOUBLE")).as_(f"__all_{metric.name}", quoted=True))
            projection.append(sb.col(_suppressed_cost(metric), "t").as_(f"__suppressed_{metric.name}", quoted=True))
        query = (exp.select(*projection).from_(exp.alias_(table, "t", quoted=True))
                 .join(exp.alias_(sb.table(self.nodes_view), "n", quoted=True), join_type="CROSS")
                 .where(sb.col("__source", "n").eq(sb.lit(source_id))))
        return sb.to_sql(query)

    def _classes(self, relation: str) -> Classes:
        """The classes of every node in ``relation`` (rows of the nodes' records): the node id leads the class key
        and tells the nodes' tables apart."""
        keys = ["__node"] + [f"__node_k{i}" for i in range(len(self.hierarchies))]
        return Classes.of(sb.table(relation), keys, weight=COUNT, carry=self.carried, table_keys=1)

    def _verdicts(self, classes: Classes) -> exp.Select:
        return class_verdicts(classes, self.models, {name: sb.col(name) for name in self.carried})

    def _totals_query(self) -> str:
        """Per node of the records relation (the union of the sources' fragments, named ``records_name``): the
        models' verdicts per class, then the node's totals.  Built once."""
        return sb.to_sql(self._totals(self._verdicts(self._classes(self.records_name)).subquery("v")))

    def _totals(self, verdicts: exp.Expression) -> exp.Select:
        """Per node, its totals from the class verdicts ``verdicts``."""
        size, violated = sb.as_double(sb.col(SIZE)), sb.col(VIOLATED)

        def where(condition: exp.Expression, value: exp.Expression) -> exp.Expression:
            return exp.func("COALESCE", exp.func("SUM", exp.Case().when(condition, value)), sb.lit(0))

        node = sb.col(key_name(0))  # the node id leads every class key
        suppressed = where(violated, size)
        # The suppressed records' own class against the size-only models (the others need a query of their own).
        too_small = [p for m in self.models if (p := m.size_violation(suppressed.copy())) is not None]
        columns = [node, exp.func("SUM", size), suppressed, exp.func("COUNT", exp.Star()),
                   exp.func("COUNT", exp.Case().when(violated.not_(), sb.lit(1))),
                   exp.func("SUM", size * size), where(violated.not_(), size * size),
                   sb.or_all(too_small) if too_small else exp.false()]
        for metric in self.metrics:
            if metric.cost_kind is not None:
                every, dropped = sb.col(f"__all_{metric.name}"), sb.col(f"__suppressed_{metric.name}")
                columns += [exp.func("SUM", every), where(violated.not_(), every), where(violated, dropped)]
        return exp.select(*columns).from_(verdicts).group_by(node)

    @functools.cached_property
    def _settling(self) -> _Settling:
        """The statements that evaluate a batch with drop mode's fixed point (:meth:`_settled_totals`), built once."""
        grouped = self._classes(f"__duckanon_grouped_{next(_serial)}")
        keys = [sb.col(k) for k in [*grouped.keys, *self.encoding.sensitive]]
        count = exp.cast(exp.func("SUM", sb.col(COUNT)), exp.DataType.build("BIGINT")).as_(COUNT, quoted=True)
        grouping = (exp.select(*keys, count, *[exp.func("SUM", sb.col(c)).as_(c, quoted=True) for c in self.carried])
                    .from_(sb.table(self.records_name)).group_by(*keys))
        verdicts = sb.table(f"__duckanon_settled_{next(_serial)}")
        return _Settling(
            group_head=f'CREATE TEMPORARY TABLE "{grouped.relation.name}" AS WITH "{self.records_name}" AS (',
            group_tail=f") {sb.to_sql(grouping)}",
            create_verdicts=sb.to_sql(sb.create_table_as(verdicts, self._verdicts(grouped), temporary=True)),
            fixed_point=DropFixedPoint(grouped, self.models, verdicts), totals=sb.to_sql(self._totals(verdicts)),
            drops=[sb.to_sql(sb.drop("TABLE", t)) for t in (verdicts, grouped.relation)])

    def _settled_totals(self, records: str) -> list[tuple]:
        """The totals of the nodes in ``records`` (SQL of their records' relation), each node's verdicts settled to
        drop mode's fixed point: the records grouped by class and sensitive values into a temporary table, the
        verdicts into another, settled in place."""
        settling = self._settling
        try:
            self.con.execute(settling.group_head + records + settling.group_tail)
            self.con.execute(settling.create_verdicts)
            settling.fixed_point.settle(self.con)
            return self.con.execute(settling.totals).fetchall()
        finally:
            for drop in settling.drops:
                self.con.execute(drop)

    def _new_snapshot(self, node: Node, table: exp.Table, rows: int) -> _Snapshot:
        source_id = next(_serial)
        return _Snapshot(source_id, node, table, rows, self._fragment(source_id, table, node),
                         self.masks.up(self.lattice.index(node)))

    def evaluate(self, index: int) -> NodeResult:
        return self.evaluate_many([index])[0]

    def evaluate_many(self, indices: Sequence[int]) -> list[NodeResult]:
        """Evaluate nodes (cached), each from the smallest snapshot that covers it; as few queries as the row budget
        allows, each reading every source its nodes need."""
        wanted = [i for i in dict.fromkeys(int(i) for i in indices) if i not in self.results]
        if wanted:
            index = np.asarray(wanted, dtype=np.int64)
            source = self._sources(index)
            self._snapshot_meets(index, source)
            source = self._sources(index)  # positions move too when making room drops snapshots
            rows = np.array([s.rows for s in self.snapshots], dtype=np.float64)
            order = np.argsort(source, kind="stable")  # nodes of one source together: fewer branches per query
            batch: list[tuple[int, int]] = []
            budget = 0.0
            for position in order:
                k = int(source[position])
                if batch and (len(batch) >= BATCH or budget + rows[k] > ROWS_PER_QUERY):
                    self._run(batch)
                    batch, budget = [], 0.0
                batch.append((wanted[position], k))
                budget += rows[k]
            self._run(batch)
            self._snapshot_some(index, source, [self.results[i].classes for i in wanted])
            if self.progress is not None:
                self.progress(f"{len(self.results)} nodes checked")
        return [self.results[int(i)] for i in indices]

    def _run(self, batch: list[tuple[int, int]]) -> None:
        nodes = [index for index, _ in batch]
        levels = self.lattice.nodes[nodes]
        used = sorted({k for _, k in batch})
        frame = pd.DataFrame({"__node": np.asarray(nodes, dtype=np.int64),
                              "__source": np.asarray([self.snapshots[k].id for _, k in batch], dtype=np.int64),
                              **{f"__l{i}": levels[:, i] for i in range(levels.shape[1])}})
        records = " UNION ALL ".join(self.snapshots[k].fragment for k in used)
        self.con.register(self.nodes_view, frame)
        try:
            if self.settles:
                rows = self._settled_totals(records)
            else:
                rows = self.con.execute(f'WITH "{self.records_name}" AS ({records}) {self._tail}').fetchall()
        finally:
            self.con.unregister(self.nodes_view)
        self.queries += 1
        for row in rows:
            index, row = int(row[0]), row[1:]
            costs, position = {}, 7
            for metric in self.metrics:
                if metric.cost_kind is not None:
                    costs[metric.name] = tuple(float(v) for v in row[position:position + 3])
                    position += 3
            totals = NodeTotals(records=int(row[0]), suppressed=int(row[1]), classes=int(row[2]),
                                kept_classes=int(row[3]), squares=float(row[4]), kept_squares=float(row[5]),
                                costs=costs)
            within_limit = totals.suppressed <= self.allowed_suppressed
            satisfied = within_limit
            if within_limit and totals.suppressed and self.suppressed_class:
                satisfied = None if self.sensitive_models else not row[6]
            self.results[index] = NodeResult(
                node=self.lattice.node(index), suppressed=totals.suppressed, within_limit=within_limit,
                satisfied=satisfied,
                values={m.name: m.value(totals) for m in self.metrics},
                bounds={m.name: m.lower_bound(totals) for m in self.metrics}, classes=totals.classes)
            self.evaluated[index] = True

    def _sources(self, index: np.ndarray) -> np.ndarray:
        """Per node, the position of the smallest snapshot that covers it."""
        rows = np.array([s.rows for s in self.snapshots], dtype=np.float64)
        covers = np.stack([s.above[index] for s in self.snapshots])  # snapshots × nodes
        return np.where(covers, rows[:, None], np.inf).argmin(axis=0)

    def _snapshot_some(self, index: np.ndarray, source: np.ndarray, estimates: Sequence[float]) -> None:
        """Make the snapshots that save the most rows for the nodes still pending.

        A candidate is a just evaluated node whose classes (``estimates``) are far fewer than the rows of the snapshot
        it was computed from, or the node reached by lowering its levels one at a time while its estimated rows stay
        low (the estimate scales by the change in the product of distinct values): a lower snapshot covers more
        pending nodes.  Its worth is the rows it saves the pending nodes above it, against the snapshot each would use
        now; it is made when that is at least SNAPSHOT_PAYOFF times the rows its grouping reads."""
        pending = self.pending if self.pending is not None else ~self.evaluated
        pending = pending & ~self.evaluated
        current = None
        existing = {s.node for s in self.snapshots}
        candidates: dict[Node, tuple[float, _Snapshot]] = {}
        for i, k, classes in zip(index.tolist(), source.tolist(), estimates):
            parent = self.snapshots[k]
            rows = parent.rows
            if rows < SNAPSHOT_SOURCE_ROWS or classes * SNAPSHOT_REDUCTION > rows:
                continue
            if current is None:  # the rows each node would now be computed from
                current = np.full(self.lattice.size, np.inf)
                for s in self.snapshots:
                    np.minimum(current, np.where(s.above, s.rows, np.inf), out=current)
            node = list(self.lattice.node(i))
            estimate = float(classes)
            while True:
                at = self.lattice.index(tuple(node))
                # Worth it only where no snapshot as good covers the node already.
                if current[at] >= estimate * SNAPSHOT_REDUCTION and tuple(node) not in existing:
                    mask = self.masks.up(at) & pending
                    saving = float(np.sum(np.maximum(current[mask] - estimate, 0.0)))
                    if saving >= SNAPSHOT_PAYOFF * rows and saving > candidates.get(tuple(node), (0.0, None))[0]:
                        candidates[tuple(node)] = (saving, parent)
                lower = [(estimate * self.distinct[a][node[a] - 1] / self.distinct[a][node[a]], a)
                         for a in range(len(node)) if node[a] > parent.node[a]]
                if not lower:
                    break
                estimate, a = min(lower)
                if estimate * SNAPSHOT_REDUCTION > rows:
                    break
                node[a] -= 1
        made: list[np.ndarray] = []
        for node, (_, parent) in sorted(candidates.items(), key=lambda c: (-c[1][0], c[0])):
            if len(made) >= SNAPSHOTS_PER_BATCH:
                break
            above = self.masks.up(self.lattice.index(node))
            if any((above & m & pending).sum() * 2 > (above & pending).sum() for m in made):
                continue  # mostly covered by a snapshot just made
            if not self._room(pending, {id(p) for _, p in candidates.values()}, node):
                break
            self._snapshot(node, parent)
            made.append(above)

    def _snapshot_meets(self, index: np.ndarray, source: np.ndarray) -> None:
        """Before evaluating several nodes that would read the same big snapshot, group it once at their meet (each
        attribute at the nodes' lowest level), when that has far fewer rows: a search working down from the top
        evaluates nodes below every snapshot made from its earlier results."""
        parents = {k: self.snapshots[k] for k in np.unique(source).tolist()}
        for k, parent in parents.items():
            members = index[source == k]
            if parent.rows < SNAPSHOT_SOURCE_ROWS or len(members) < 2 or len(self._failed_meets) >= MEET_FAILURES:
                continue
            meet = tuple(int(v) for v in self.lattice.nodes[members].min(axis=0))
            # A meet at or below one that did not shrink the rows would not either.
            if any(all(m <= f for m, f in zip(meet, failed)) for failed in self._failed_meets):
                continue
            if not self._room(self.pending if self.pending is not None else ~self.evaluated,
                              {id(p) for p in parents.values()}, meet):
                continue
            snapshot = self._snapshot(meet, parent)
            if snapshot.rows * SNAPSHOT_REDUCTION > parent.rows:
                self._failed_meets.append(meet)
                sb.run(self.con, sb.drop("TABLE", snapshot.table))
                self.snapshots.pop()

    def _room(self, pending: np.ndarray, keep: set[int], node: Node) -> bool:
        """Whether a snapshot at ``node`` fits the limits, after dropping (never those whose ``id`` is in ``keep``)
        those with no pending node above them, then those with fewer pending nodes above them than ``node`` has."""
        wanted = int((self.masks.up(self.lattice.index(node)) & pending).sum())

        def full() -> bool:
            size = sum(s.rows * self._row_bytes(s.node) for s in self.snapshots[1:])
            return (len(self.snapshots) > SNAPSHOT_LIMIT
                    or size + self._row_bytes(node) * self.base_rows / 4 > SNAPSHOT_BYTES_LIMIT)

        droppable = sorted(((int((s.above & pending).sum()), -s.rows, k) for k, s in enumerate(self.snapshots)
                            if k > 0 and id(s) not in keep), reverse=True)
        while full() and droppable and droppable[-1][0] < max(wanted, 1):
            *_, k = droppable.pop()
            sb.run(self.con, sb.drop("TABLE", self.snapshots[k].table))
            self.snapshots[k] = None
            self.snapshots = [s for s in self.snapshots if s is not None]
            droppable = sorted(((int((s.above & pending).sum()), -s.rows, j) for j, s in enumerate(self.snapshots)
                                if j > 0 and id(s) not in keep), reverse=True)
        return not full()

    def _row_bytes(self, node: Node) -> float:
        """Estimated bytes per row of a snapshot at ``node``: its code, count and cost columns."""
        codes = sum(h.levels - level for h, level in zip(self.hierarchies, node))
        costs = codes * len(self.cost_kinds) + sum(1 for m in self.metrics if m.cost_kind is not None)
        return 2.0 * codes + 8.0 * (costs + 1) + 16.0 * len(self.encoding.sensitive)

    def _snapshot(self, node: Node, source: _Snapshot) -> _Snapshot:
        """Group ``source`` at ``node``, keeping every coarser level's codes and costs, as a new snapshot."""
        codes = [code_column(i, j) for i, level in enumerate(node) for j in range(level, self.hierarchies[i].levels)]
        keys = [*codes, *self.encoding.sensitive]
        costs = [cost_column(kind, i, j) for kind in self.cost_kinds
                 for i, level in enumerate(node) for j in range(level, self.hierarchies[i].levels)]
        costs += [_suppressed_cost(m) for m in self.metrics if m.cost_kind is not None]
        count = exp.cast(exp.func("SUM", sb.col(COUNT)), exp.DataType.build("BIGINT")).as_(COUNT, quoted=True)
        query = (exp.select(*[sb.col(k) for k in keys], count,
                            *[exp.func("SUM", sb.col(c)).as_(c, quoted=True) for c in costs])
                 .from_(source.table).group_by(*[sb.col(k) for k in keys]))
        table = sb.table(f"__duckanon_snapshot_{next(_serial)}")
        sb.run(self.con, sb.create_table_as(table, query, temporary=True))
        rows = sb.fetch_rows(self.con, exp.select(exp.func("COUNT", exp.Star())).from_(table))[0][0]
        self.snapshots.append(self._new_snapshot(node, table, rows))
        return self.snapshots[-1]

    def value(self, index: int) -> float:
        return self.evaluate(index).values[self.objective]

    def satisfies(self, index: int) -> bool:
        """Whether the node satisfies the policy, its suppressed records' own class included."""
        result = self.evaluate(index)
        if result.satisfied is None:
            classes = self.encoding.classes(self.lattice.levels_of(result.node))
            violates = suppressed_class_violates(self.con, classes, self.models)
            result = self.results[index] = dataclasses.replace(result, satisfied=not violates)
        return result.satisfied

    def prior_bounds(self) -> np.ndarray:
        """Per lattice node, a lower bound of the objective for it and its generalizations known before evaluating
        it (-inf where the metric has none).  Slightly lowered: it is summed in another order than the evaluated
        values, and must never exceed them."""
        metric = self.metrics[0]
        bounds = None
        if metric.cost_kind is not None:
            weights = self.weights[metric.name]
            level_costs = [weights[a] * costs for a, costs in zip(self.encoding.attributes,
                                                                  self.level_costs[metric.cost_kind])]
            bounds = metric.prior_bounds(self.lattice.nodes, level_costs, self.records)
        if bounds is None:
            return np.full(self.lattice.size, -np.inf)
        return bounds - 1e-9 * np.abs(bounds) - 1e-12

    def close(self) -> None:
        for snapshot in self.snapshots:
            sb.run(self.con, sb.drop("TABLE", snapshot.table))


def _suppressed_cost(metric: Metric) -> str:
    """The column of a row's records' cost under ``metric`` when suppressed (weighted, summed over attributes)."""
    return f"__suppressed_cost_{metric.name}"


def _code_type(largest: int | None) -> exp.DataType:
    """The narrowest unsigned integer type for codes up to ``largest``: narrower keys group faster."""
    largest = largest or 0
    for name, limit in (("UTINYINT", 2**8), ("USMALLINT", 2**16), ("UINTEGER", 2**32)):
        if largest < limit:
            return exp.DataType.build(name, dialect=sb.DIALECT)
    return exp.DataType.build("UBIGINT", dialect=sb.DIALECT)


class LatticeMasks:
    """Up-sets and down-sets of lattice nodes as AND of per-attribute masks (one comparison per level, precomputed):
    far cheaper than comparing the whole node matrix, which searches do for every evaluated node."""

    def __init__(self, lattice: Lattice):
        self.lattice = lattice
        nodes = lattice.nodes
        self._ge = [[nodes[:, i] >= level for level in range(int(n))] for i, n in enumerate(lattice.levels)]
        self._le = [[nodes[:, i] <= level for level in range(int(n))] for i, n in enumerate(lattice.levels)]

    def _combine(self, table, index: int) -> np.ndarray:
        node = self.lattice.nodes[index]
        mask = table[0][node[0]].copy()
        for i in range(1, len(node)):
            mask &= table[i][node[i]]
        return mask

    def up(self, index: int) -> np.ndarray:
        """Mask of the node and all its generalizations."""
        return self._combine(self._ge, index)

    def down(self, index: int) -> np.ndarray:
        """Mask of the node and all its specializations."""
        return self._combine(self._le, index)



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
        if best is None and not evaluator.suppressed_monotone:
            # The top need not suppress least: name the true closest node, which only evaluating them all can tell.
            evaluator.evaluate_many(range(evaluator.lattice.size))
        closest = min(evaluator.results.values(), key=lambda r: (r.suppressed, sum(r.node)))
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
                if (evaluator.evaluate_many([int(index)])[0].within_limit and _better(evaluator, int(index), best)
                        and evaluator.satisfies(int(index))):
                    best = int(index)
        return best


class OptimalSearch(SearchStrategy):
    """Exact: the satisfying node of least (value, index), as exhaustive search finds it.

    Every node is settled by one of: it was evaluated; it lies below an evaluated node that fails a monotone policy
    (so it fails too); or its estimate (the metric's bound known before evaluation, or the largest bound of the
    evaluated nodes below it) already reaches the best (value, index) found, so it cannot beat it.  Each round
    evaluates one batch: the open direct specializations of the best satisfying nodes found (greedy descent), the
    unsettled nodes known to satisfy (lowest estimate first), and for monotone policies nodes that settle many
    unknown ones when they fail:

    - when the metric bounds every node before evaluation (the record-cost metrics), the frontier of the open
      region: the open nodes of unknown verdict none of whose generalizations is one, lowest bound first.  A failing
      frontier node settles the most below it;
    - otherwise the middle nodes of binary searches along paths of nodes of unknown verdict (open ones only, with
      suppression).

    When the policy is not monotone the rounds evaluate unsettled nodes by their estimate alone.

    Checks on Adult (9 quasi-identifiers, k = 5; Loss at 0% / Loss at 5%): paths 153 / 677, frontier 121 / 372.  For
    DM the frontier has no order (every bound unknown): Adult DM 5% 2,286 checks by paths (16) and a descent of 64
    nodes a round, 6,203 by frontier; IHIS DM 0% 792 by paths, 1,663 by frontier.
    """

    name = "optimal"

    def __init__(self, paths: int = 16, frontier: int = 16, candidates: int = 16):
        self.paths, self.frontier, self.candidates = paths, frontier, candidates

    def best_node(self, evaluator):
        try:
            return _Bounded(evaluator, self.paths, self.frontier, self.candidates).run()
        finally:
            evaluator.pending = None


# See _Bounded.descent_count.
DESCENT_WITH_FRONTIER = 24


class _Bounded:
    """The state of one optimal search (see :class:`OptimalSearch`)."""

    def __init__(self, evaluator: NodeEvaluator, paths: int, frontier: int, candidates: int):
        self.evaluator = evaluator
        self.lattice = lattice = evaluator.lattice
        self.masks = evaluator.masks
        self.objective = evaluator.objective
        self.monotone = evaluator.monotone
        self.candidate_count = candidates
        size = lattice.size
        self.tags = np.zeros(size, dtype=np.int8)  # 1 satisfies, -1 fails, 0 unknown
        self.value = np.full(size, np.inf)
        self.bound = np.full(size, -np.inf)
        # Largest bound known for each node: the metric's own before evaluation, raised by evaluated nodes below.
        self.estimate = evaluator.prior_bounds()
        bounded = bool(np.isfinite(self.estimate).all())
        self.frontier_count = frontier if bounded else 0
        # Without suppression a satisfying node's bound is its value, so its up-set is settled at once and the paths
        # best run through every node of unknown verdict: a failing node above the settled region still settles the
        # nodes below it.  With suppression, paths through settled nodes cost more checks than they save (measured on
        # Adult: 5% suppression, DM 3,875 checks with paths kept to unsettled nodes against 4,437 through all).
        self.through_settled = evaluator.allowed_suppressed == 0
        self.path_count = 0 if bounded else paths
        # Direct specializations of unknown verdict of the best satisfying nodes that each round adds (at least):
        # where no frontier finds the border the descent walks it, so it takes more (Adult, checks at 0% / 5%: DM
        # 201 / 2,474 with 24, 193 / 2,286 with 64; Loss, with a frontier, 121 / 372 with 24, 108 / 561 with 64).
        self.descent_count = DESCENT_WITH_FRONTIER if bounded else BATCH
        self.satisfying = np.zeros(size, dtype=bool)  # evaluated and within the suppression limit
        self.best: int | None = None
        self.paths: list[list] = []  # [path, low, high]
        # Per attribute, the nodes that have a generalization in it and that generalization's index.
        self.raisable = [np.flatnonzero(lattice.nodes[:, i] + 1 < n) for i, n in enumerate(lattice.levels)]
        self.strides = [lattice.index(tuple(int(a == i) for a in range(len(lattice.levels))))
                        for i in range(len(lattice.levels))]

    def evaluate(self, indices: list[int]) -> None:
        fresh = [i for i in dict.fromkeys(indices) if not self.evaluator.evaluated[i]]
        for index, result in zip(fresh, self.evaluator.evaluate_many(fresh)):
            self._record(index, result)

    def _record(self, index: int, result: NodeResult) -> None:
        value, bound = result.values[self.objective], result.bounds[self.objective]
        self.value[index], self.bound[index] = value, bound
        up = self.masks.up(index)
        if self.monotone:
            mask = up if result.within_limit else self.masks.down(index)
            self.tags[mask & (self.tags == 0)] = 1 if result.within_limit else -1
        self.tags[index] = 1 if result.within_limit else -1
        self.satisfying[index] = result.within_limit
        self.estimate[up] = np.maximum(self.estimate[up], bound)
        if (result.within_limit and (self.best is None or (value, index) < (self.value[self.best], self.best))
                and self.evaluator.satisfies(index)):
            self.best = index

    def settled(self) -> np.ndarray:
        evaluated = self.evaluator.evaluated
        done = evaluated | (self.tags < 0)
        if self.best is not None:
            best_value = self.value[self.best]
            # Above a node whose bound exceeds the best value nothing can beat it; at equal bound, the nodes above a
            # node numbered after the best are numbered after it too, so they lose the tie.
            done |= self.estimate > best_value
            for index in np.flatnonzero(evaluated & (self.bound == best_value)):
                if index >= self.best:
                    done |= self.masks.up(int(index))
        return done

    def run(self) -> int | None:
        lattice = self.lattice
        if self.monotone:
            top = lattice.index(lattice.top)
            self.evaluate([top])
            if self.tags[top] < 0:
                return None
        while True:
            open_ = ~self.settled()
            if not open_.any():
                return self.best
            self.evaluator.pending = open_
            batch = self._frontier(open_) + self._path_middles(open_) if self.monotone else []
            # Greedy descent: the open direct specializations of unknown verdict of the best satisfying nodes found,
            # which may satisfy at a lower cost or fail just below the border (settling the most beneath them); a
            # good best early lets the bounds settle more.
            descent: dict[int, None] = {}
            unknown = open_ & (self.tags == 0)
            found = np.flatnonzero(self.satisfying)
            for index in found[np.lexsort((found, self.value[found]))].tolist():
                descent.update((p, None) for p in lattice.predecessors(index) if unknown[p])
                if len(descent) >= self.descent_count:
                    break
            batch += list(descent)
            candidates = np.flatnonzero(open_ & (self.tags > 0) if self.monotone else open_)
            if not self.monotone and len(candidates):
                # Nothing but lower nodes' bounds prunes here: two heights at a time, so that they can.
                heights = lattice.heights[candidates]
                candidates = candidates[heights < heights.min() + 2]
            if len(candidates):
                order = np.lexsort((candidates, lattice.heights[candidates], self.estimate[candidates]))
                batch += [int(i) for i in candidates[order[:self.candidate_count]]]
            self.evaluate(batch)

    def _frontier(self, open_: np.ndarray) -> list[int]:
        """The open nodes of unknown verdict with no direct generalization that is one, lowest estimate first."""
        if not self.frontier_count:
            return []
        unknown = open_ & (self.tags == 0)
        covered = np.zeros_like(unknown)
        for nodes, stride in zip(self.raisable, self.strides):
            covered[nodes] |= unknown[nodes + stride]
        frontier = np.flatnonzero(unknown & ~covered)
        order = np.lexsort((frontier, self.estimate[frontier]))
        return frontier[order[:self.frontier_count]].tolist()

    def _path_middles(self, open_: np.ndarray) -> list[int]:
        """Advance the binary searches (one step each) along paths of nodes with unknown verdicts, starting new
        paths at the lowest open unknown nodes; the nodes to evaluate next."""
        if not self.path_count:
            return []
        walkable = (self.tags == 0) if self.through_settled else open_ & (self.tags == 0)
        alive = []
        for path, low, high in self.paths:
            # Tags and bounds from other nodes may settle this path's ends: narrow to the stretch still unknown.
            while low <= high and not walkable[path[low]]:
                low += 1
            while low <= high and not walkable[path[high]]:
                high -= 1
            if low <= high:
                alive.append([path, low, high])
        self.paths = alive
        claimed = np.zeros(self.lattice.size, dtype=bool)
        for path, low, high in self.paths:
            claimed[path[low:high + 1]] = True
        if len(self.paths) < self.path_count:
            starts = np.flatnonzero(open_ & (self.tags == 0) & ~claimed)
            starts = starts[np.argsort(self.lattice.heights[starts], kind="stable")]
            for start in starts.tolist():
                if len(self.paths) >= self.path_count:
                    break
                if claimed[start]:
                    continue
                path = [start]
                while upward := [s for s in self.lattice.successors(path[-1]) if walkable[s] and not claimed[s]]:
                    path.append(upward[0])
                claimed[path] = True
                self.paths.append([path, 0, len(path) - 1])
        return [path[(low + high) // 2] for path, low, high in self.paths]


def tag_by_paths(evaluator: NodeEvaluator, paths_per_round: int = BATCH) -> np.ndarray:
    """For a monotone policy: which nodes satisfy it, found by binary searches along paths up the lattice.

    A node that satisfies tags its whole up-set, one that fails its whole down-set, so most nodes are never checked.
    Many paths are searched in lockstep so that each round's middle nodes are evaluated as one batch.
    """
    lattice = evaluator.lattice
    tags = np.zeros(lattice.size, dtype=np.int8)  # 1 satisfies, -1 fails, 0 unknown

    def record(index: int, ok: bool) -> None:
        mask = evaluator.masks.up(index) if ok else evaluator.masks.down(index)
        tags[mask & (tags == 0)] = 1 if ok else -1

    top = lattice.index(lattice.top)
    record(top, evaluator.evaluate(top).within_limit)
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
                record(paths[k][middle], result.within_limit)
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
                if result.within_limit and _better(evaluator, index, found) and evaluator.satisfies(index):
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
            for i, r in zip(chosen, evaluator.evaluate_many(chosen)) if r.within_limit and evaluator.satisfies(i)]
    columns = [*lattice.attributes, "suppressed", "classes", *[m.name for m in evaluator.metrics]]
    return pd.DataFrame(rows, columns=columns)
