"""The SQL node evaluator: nodes evaluated in batches by queries over the encoded frequency table.

One query evaluates a batch of nodes: the table's rows met with each node's levels (CASEs pick each level's codes and
costs), grouped into every node's classes, the models' verdicts per class, then per node its totals (class sizes,
violations, suppressed records, metric totals).  On a big table the evaluator keeps snapshots (the table grouped at an
evaluated or nearby node) and computes each node from the smallest snapshot below it.  With drop mode and a model that
compares classes with the table, each batch's classes are settled to drop mode's fixed point
(:class:`~duckanon.privacy.checks.DropFixedPoint`, a few more queries per batch).

Rendering a tree costs more than running a small query, so every statement is generated once by the engine and run
as prepared text: each snapshot's rows met with the batch's nodes are a view made with the snapshot, and a batch's
query (the union of its snapshots' views, then the totals) is generated once per set of snapshots.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..encode.encoding import COUNT, Encoding, code_column, level_price_column, price_column
from ..engine import Engine, Prepared
from ..hierarchy.hierarchy import Hierarchy
from ..privacy.checks import DropFixedPoint, RiskCut, class_verdicts, settle_and_cut, suppressed_class_violates
from ..privacy.classes import POPULATION, SIZE, VIOLATED, Classes, Pricing, key_name
from ..privacy.models import PrivacyModel, population_checked, prices_classes
from ..privacy.thresholds import Cut
from ..sqlgen import build as sb
from ..utility.metrics import CostSum, Metric, NodeTotals, TupleWeights, cost_column
from .evaluator import NodeEvaluator, NodeResult
from .lattice import Node

_VERDICTS = "__duckanon_verdicts"
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
class _Snapshot:
    """The costed table grouped at ``node`` (every coarser level's codes kept, costs summed): it evaluates every
    generalization of ``node`` over fewer rows.  ``records`` is a view of its rows met with the nodes of the nodes
    view whose ``__source`` is ``id``."""

    id: int
    node: Node
    table: exp.Table
    records: exp.Table
    rows: int

    def covers(self, nodes: np.ndarray) -> np.ndarray:
        """Per row of ``nodes`` (levels), whether it generalizes this snapshot's node."""
        return (nodes >= np.asarray(self.node)).all(axis=1)


@dataclass(frozen=True)
class _Settling:
    """The statements of a batch's evaluation with its class verdicts in a table: the records grouped into temporary
    table ``grouped`` (``grouping``, reading the records relation), its class verdicts into another, settled to drop
    mode's fixed point where the evaluator settles, cut by the risk thresholds, the totals read and both tables
    dropped."""

    grouped: exp.Table
    grouping: exp.Select
    create_verdicts: Prepared
    fixed_point: DropFixedPoint
    risk_cut: RiskCut
    totals: Prepared
    drops: list[Prepared]


class SqlNodeEvaluator(NodeEvaluator):
    """Evaluates lattice nodes with SQL queries over the encoded frequency table, many nodes a query; makes snapshots
    where the search's :attr:`pending` nodes will use them."""

    def __init__(self, engine: Engine, encoding: Encoding, hierarchies: Sequence[Hierarchy],
                 models: Sequence[PrivacyModel], metrics: Sequence[Metric], allowed_suppressed: int,
                 monotone: bool, progress: Callable[[str], None] | None = None, suppressed_monotone: bool = True,
                 suppressed_class: bool = True, drops: bool | None = None):
        super().__init__(encoding, hierarchies, models, metrics, allowed_suppressed, monotone, progress,
                         suppressed_monotone, suppressed_class, drops)
        self.engine = engine
        # Drop mode's fixed point and the risk thresholds' cut change verdicts in place: a batch's go to a table.
        self.materializes = self.settles or bool(self.thresholds)
        self.counting = [m for m in self.metrics if m.counts_classes]
        # Models that price classes read each record's log10 domain shares, carried beside its codes.
        self.pricing = (Pricing(tuple(price_column(i) for i in range(len(hierarchies))),
                                encoding.most_information()) if prices_classes(models) else None)
        self.cost_kinds = self.costs.kinds
        self.nodes_view = f"__duckanon_nodes_{next(_serial)}"
        self.records_name = f"__duckanon_records_{next(_serial)}"
        self.carried = [f"__{prefix}_{s.name}" for s in self.costs.sums for prefix in ("all", "suppressed")]
        if self.costs.tuples is not None:  # each row's records × its tuple's, summed per class as Q_c
            self.carried.append(TUPLE_WEIGHT)
        base = self._base_table()
        # The class verdicts of a batch's records, built once and copied into each batch's statement.
        self._batch_verdicts = self._verdicts(self._classes(self.records_name)).subquery("v")
        # Per set of snapshots a batch reads (by id), its statement; the sets of dropped snapshots never recur.
        self._statements: dict[tuple[int, ...], Prepared] = {}
        rows = engine.value(exp.select(exp.func("COUNT", exp.Star())).from_(base))
        self.base_rows = rows
        bottom = self.lattice.bottom
        self.snapshots = [self._new_snapshot(bottom, base, rows)]
        self._failed_meets: list[Node] = []

    def _base_table(self) -> exp.Table:
        """The frequency table as the evaluator reads it: level codes in the narrowest integer type that holds them
        and, for record-cost metrics, every needed record cost at every level, times the row's record count.

        Built once; costs are pre-multiplied by the count so a class's cost is a plain SUM."""
        f = "f"
        codes = [code_column(i, j) for i, h in enumerate(self.hierarchies) for j in range(h.levels)]
        widest = self.engine.rows(exp.select(*[exp.func("MAX", sb.col(c)) for c in codes])
                                  .from_(self.encoding.table))[0]
        columns = [exp.cast(sb.col(c, f), _code_type(m)).as_(c, quoted=True) for c, m in zip(codes, widest)]
        # Distinct generalized values per attribute and level (codes are dense ranks), for estimating row counts.
        largest = iter(int(m or 1) for m in widest)
        self.distinct = [np.array([next(largest) for _ in range(h.levels)], dtype=np.float64)
                         for h in self.hierarchies]
        columns += [sb.col(c, f) for c in [*self.encoding.sensitive, COUNT]]
        if self.costs.tuples is not None:
            tuple_records = exp.Window(this=exp.func("SUM", sb.col(COUNT, f)), partition_by=[
                sb.col(code_column(i, 0), f) for i in range(len(self.hierarchies))])
            columns.append((sb.as_double(sb.col(COUNT, f)) * sb.as_double(tuple_records)).as_(TUPLE_WEIGHT,
                                                                                              quoted=True))
        query = exp.select(*columns).from_(exp.alias_(self.encoding.table, f, quoted=True))
        table = sb.table(f"__duckanon_costed_{next(_serial)}")
        with contextlib.ExitStack() as registered:  # the attributes' cost tables, read until the table is built
            for i, attribute in enumerate(self.costs.attributes):
                costs = attribute.table
                costs_table = registered.enter_context(self.engine.registered(costs))
                query = query.join(
                    exp.alias_(costs_table, f"c{i}", quoted=True),
                    on=sb.col(code_column(i, 0), f).eq(sb.col("code", f"c{i}")), join_type="LEFT",
                ).select(*[(sb.col(COUNT, f) * sb.col(c, f"c{i}")).as_(c, quoted=True)
                           for c in costs if c != "code" and not c.endswith("_suppressed")])
            # A suppressed record's cost does not depend on the levels: one column per cost sum, summed up front.
            for cost_sum in self.costs.sums:
                total = sb.lit(0)
                for i, weight in _weighted(cost_sum, self.encoding.attributes):
                    total = total + sb.lit(weight) * sb.col(cost_column(cost_sum.kind, i, None), f"c{i}")
                suppressed = sb.as_double(sb.col(COUNT, f) * _per_record(cost_sum, total))
                query = query.select(suppressed.as_(_suppressed_cost(cost_sum), quoted=True))
            if self.pricing is not None:
                for i, (prices, hierarchy) in enumerate(zip(self.encoding.price_tables(), self.hierarchies)):
                    query = query.join(exp.alias_(prices, f"p{i}", quoted=True), join_type="LEFT", on=sb.col(
                        code_column(i, 0), f).eq(sb.col(code_column(i, 0), f"p{i}"))).select(
                        *[sb.col(level_price_column(j), f"p{i}").as_(_level_price(i, j), quoted=True)
                          for j in range(hierarchy.levels)])
            self.engine.run(sb.create_table_as(table, query, temporary=True))
        return table

    def _records(self, source_id: int, table: exp.Table, floor: Node) -> exp.Select:
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
        for cost_sum in self.costs.sums:
            total = sb.lit(0)
            for i, weight in _weighted(cost_sum, self.encoding.attributes):
                total = total + sb.lit(weight) * at_level(i, lambda j, i=i: cost_column(cost_sum.kind, i, j))
            if cost_sum.exp10:  # the columns hold the row's records × the cost: one record's, as a power, × them
                count = sb.as_double(sb.col(COUNT, "t"))
                total = count * _per_record(cost_sum, total / count.copy())
            projection.append(exp.cast(total, exp.DataType.build("DOUBLE")).as_(f"__all_{cost_sum.name}", quoted=True))
            projection.append(sb.col(_suppressed_cost(cost_sum), "t").as_(f"__suppressed_{cost_sum.name}",
                                                                          quoted=True))
        if self.pricing is not None:
            projection += [at_level(i, lambda j, i=i: _level_price(i, j)).as_(price_column(i), quoted=True)
                           for i in range(len(self.hierarchies))]
        if self.costs.tuples is not None:
            projection.append(sb.col(TUPLE_WEIGHT, "t"))
        return (exp.select(*projection).from_(exp.alias_(table, "t", quoted=True))
                .join(exp.alias_(sb.table(self.nodes_view), "n", quoted=True), join_type="CROSS")
                .where(sb.col("__source", "n").eq(sb.lit(source_id))))

    def _classes(self, relation: str) -> Classes:
        """The classes of every node in ``relation`` (rows of the nodes' records): the node id leads the class key
        and tells the nodes' tables apart; with the population's classes at the same nodes, when there is one."""
        return Classes.of(sb.table(relation), self._keys, weight=COUNT, carry=self.carried, table_keys=1,
                          population=self._population_classes(), pricing=self.pricing)

    @property
    def _keys(self) -> list[str]:
        return ["__node"] + [f"__node_k{i}" for i in range(len(self.hierarchies))]

    def _population_classes(self) -> Classes | None:
        table = self.encoding.population_table
        return None if table is None else Classes.of(self._at_nodes(table), self._keys, weight=COUNT, table_keys=1)

    def _at_nodes(self, table: exp.Table) -> exp.Select:
        """The rows of a frequency table (the source's or the population's) met with every node of the nodes view:
        the node id, each attribute's code at the node's level, the count."""
        def at_level(i: int) -> exp.Expression:
            return exp.Case(this=sb.col(f"__l{i}", "n"), ifs=[
                exp.If(this=sb.lit(j), true=sb.col(code_column(i, j), "t")) for j in range(self.hierarchies[i].levels)])

        return (exp.select(sb.col("__node", "n"), *[at_level(i).as_(f"__node_k{i}", quoted=True)
                                                    for i in range(len(self.hierarchies))], sb.col(COUNT, "t"))
                .from_(exp.alias_(table, "t", quoted=True))
                .join(exp.alias_(sb.table(self.nodes_view), "n", quoted=True), join_type="CROSS"))

    def _unmendable(self) -> set[int]:
        """The nodes of the nodes view whose classes violate a model in a way no suppression mends."""
        population = self._population_classes()
        if population is None:
            return set()
        classes = Classes.of(self._at_nodes(self.encoding.table), self._keys, weight=COUNT, table_keys=1,
                             population=population)
        flagged: set[int] = set()
        for model in population_checked(self.models):
            query = model.population_violations(classes)
            if query is not None:
                flagged |= {int(node) for node, violated in self.engine.rows(query) if violated}
        return flagged

    def _verdicts(self, classes: Classes) -> exp.Select:
        verdicts = class_verdicts(classes, self.models, {name: sb.col(name) for name in self.carried})
        if not any(m.counts_population for m in self.counting):
            return verdicts
        # Each class's population records, for metrics that weigh classes by them.
        counted = classes.with_population().subquery("p")
        on = sb.and_all(exp.NullSafeEQ(this=sb.col(k, "v"), expression=sb.col(k, "p")) for k in classes.key_columns)
        return (exp.select(exp.Column(this=exp.Star(), table=sb.ident("v")), sb.col(POPULATION, "p"))
                .from_(verdicts.subquery("v")).join(counted, on=on, join_type="LEFT"))

    def _totals_query(self, records: exp.Expression) -> exp.Select:
        """Per node of ``records`` (the union of the batch's snapshots' records, named ``records_name``): the models'
        verdicts per class, then the node's totals."""
        return self._totals(self._batch_verdicts.copy(), [(sb.ident(self.records_name), records)])

    def _totals(self, verdicts: exp.Expression, ctes: Sequence[tuple[exp.Identifier, exp.Expression]] = ()
                ) -> exp.Select:
        """Per node, its totals from the class verdicts ``verdicts``, which may read the common table expressions
        ``ctes`` (name, query)."""
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
        for cost_sum in self.costs.sums:
            every, dropped = sb.col(f"__all_{cost_sum.name}"), sb.col(f"__suppressed_{cost_sum.name}")
            columns += [exp.func("SUM", every), where(violated.not_(), every), where(violated, dropped)]
        population = sb.col(POPULATION)
        columns += [where(violated.not_(), m.counted_sql(size.copy(), population.copy() if m.counts_population
                                                         else None)) for m in self.counting]
        if self.costs.tuples is not None:
            weight = sb.col(TUPLE_WEIGHT)
            columns += [where(violated.copy(), weight.copy()),
                        where(violated.not_(), weight.copy() * exp.func("LOG2", size.copy()))]
            columns += [where(violated.not_(), weight.copy() * sb.col(f"__all_{s.name}") / size.copy())
                        for s in self.costs.sums]
        if not self.spread:
            return _with(exp.select(*columns).from_(verdicts).group_by(node), ctes)
        # Per attribute, Σ c·ln c over its codes among the suppressed records (c records each), by node: the verdicts
        # are read once per attribute, so they are named once.
        named = sb.table(_VERDICTS)
        totals = exp.select(*columns).from_(named).group_by(node.copy())
        query = exp.select(exp.Star()).from_(totals.subquery("t"))
        for i in range(len(self.hierarchies)):
            key, count = sb.col(key_name(i + 1)), sb.col("__c")
            per_code = (exp.select(node.copy(), exp.func("SUM", size.copy()).as_("__c", quoted=True))
                        .from_(named).where(violated.copy()).group_by(node.copy(), key))
            spread = (exp.select(node.copy().as_(f"__n{i}", quoted=True),
                                 exp.func("SUM", count * exp.func("LN", count)).as_(f"__spread{i}", quoted=True))
                      .from_(per_code.subquery("p")).group_by(node.copy()))
            query = query.join(spread.subquery(f"s{i}"), on=sb.col(key_name(0), "t").eq(sb.col(f"__n{i}", f"s{i}")),
                               join_type="LEFT")
        return _with(query, [*ctes, (sb.ident(_VERDICTS), exp.select(exp.Star()).from_(verdicts))])

    @functools.cached_property
    def _settling(self) -> _Settling:
        """The statements that evaluate a batch with its verdicts in a table (:meth:`_settled_totals`), generated
        once."""
        grouped = self._classes(f"__duckanon_grouped_{next(_serial)}")
        keys = [sb.col(k) for k in [*grouped.keys, *self.encoding.sensitive]]
        count = exp.cast(exp.func("SUM", sb.col(COUNT)), exp.DataType.build("BIGINT")).as_(COUNT, quoted=True)
        prices = self.pricing.columns if self.pricing is not None else ()
        grouping = (exp.select(*keys, count, *[exp.func("SUM", sb.col(c)).as_(c, quoted=True) for c in self.carried],
                               *[exp.func("MIN", sb.col(c)).as_(c, quoted=True) for c in prices])
                    .from_(sb.table(self.records_name)).group_by(*keys))
        verdicts = sb.table(f"__duckanon_settled_{next(_serial)}")
        prepare = self.engine.prepare
        return _Settling(
            grouped=grouped.relation, grouping=grouping,
            create_verdicts=prepare(sb.create_table_as(verdicts, self._verdicts(grouped), temporary=True)),
            fixed_point=DropFixedPoint(grouped, self.models, verdicts), risk_cut=RiskCut(grouped, self.models, verdicts),
            totals=prepare(self._totals(verdicts)),
            drops=[prepare(sb.drop("TABLE", t)) for t in (verdicts, grouped.relation)])

    def _batch_statement(self, sources: Sequence[_Snapshot]) -> Prepared:
        """The statement of a batch whose nodes read ``sources``: the nodes' totals or, when verdicts change in place,
        the grouping of their records (:meth:`_settled_totals`).  Generated once per set of sources."""
        key = tuple(source.id for source in sources)
        if key not in self._statements:
            records = functools.reduce(lambda a, b: exp.union(a, b, distinct=False, copy=False),
                                       [exp.select(exp.Star()).from_(source.records) for source in sources])
            if self.materializes:
                settling = self._settling
                statement = sb.create_table_as(settling.grouped, settling.grouping.copy().with_(
                    sb.ident(self.records_name), as_=records, copy=False), temporary=True)
            else:
                statement = self._totals_query(records)
            self._statements[key] = self.engine.prepare(statement)
        return self._statements[key]

    def _settled_totals(self, grouping: Prepared) -> tuple[list[tuple], dict[tuple, Cut]]:
        """The totals of a batch's nodes, and per node (its place) the risk thresholds' cut, each node's verdicts
        settled to drop mode's fixed point where the evaluator settles and cut: the records grouped by class and
        sensitive values into a temporary table (``grouping``), the verdicts into another, changed in place."""
        settling = self._settling
        try:
            self.engine.run(grouping)
            self.engine.run(settling.create_verdicts)
            _, cuts = settle_and_cut(self.engine, settling.fixed_point if self.settles else None, settling.risk_cut)
            return self.engine.rows(settling.totals), cuts
        finally:
            for drop in settling.drops:
                self.engine.run(drop)

    def _new_snapshot(self, node: Node, table: exp.Table, rows: int) -> _Snapshot:
        """A snapshot of ``table`` (grouped at ``node``) with its records view, which batches' statements name."""
        source_id = next(_serial)
        records = sb.table(f"__duckanon_snapshot_records_{source_id}")
        view = exp.Create(this=records, kind="VIEW", expression=self._records(source_id, table, node),
                          properties=exp.Properties(expressions=[exp.TemporaryProperty()]))
        # Creating the view reads the nodes view: an empty one of the batches' shape stands in.
        with self.engine.registered(self._nodes_frame([], []), self.nodes_view):
            self.engine.run(view)
        return _Snapshot(source_id, node, table, records, rows)

    def _drop_snapshot(self, snapshot: _Snapshot) -> None:
        self.engine.run(sb.drop("VIEW", snapshot.records))
        self.engine.run(sb.drop("TABLE", snapshot.table))

    def _nodes_frame(self, nodes: Sequence[int], sources: Sequence[int]) -> pd.DataFrame:
        """The nodes view's rows: each node's id (its place in ``nodes``: a wide lattice's indices pass 64 bits), the
        id of the snapshot it is computed from, and its levels."""
        levels = np.array([self.lattice.node(i) for i in nodes], dtype=np.int64).reshape(len(nodes),
                                                                                           len(self.hierarchies))
        return pd.DataFrame({"__node": np.arange(len(nodes), dtype=np.int64),
                             "__source": np.asarray(sources, dtype=np.int64),
                             **{f"__l{i}": levels[:, i] for i in range(levels.shape[1])}})

    def _evaluate(self, indices: list[int]) -> dict[int, NodeResult]:
        """Evaluate nodes, each from the smallest snapshot that covers it; as few queries as the row budget allows,
        each reading every source its nodes need."""
        levels = np.array([self.lattice.node(i) for i in indices], dtype=np.int64)
        source = self._sources(levels)
        self._snapshot_meets(levels, source)
        source = self._sources(levels)  # positions move too when making room drops snapshots
        rows = np.array([s.rows for s in self.snapshots], dtype=np.float64)
        order = np.argsort(source, kind="stable")  # nodes of one source together: fewer branches per query
        results: dict[int, NodeResult] = {}
        batch: list[tuple[int, int]] = []
        budget = 0.0
        for position in order:
            k = int(source[position])
            if batch and (len(batch) >= BATCH or budget + rows[k] > ROWS_PER_QUERY):
                results.update(self._run(batch))
                batch, budget = [], 0.0
            batch.append((indices[position], k))
            budget += rows[k]
        results.update(self._run(batch))
        self._snapshot_some(indices, source, [results[i].classes for i in indices])
        return results

    def _run(self, batch: list[tuple[int, int]]) -> dict[int, NodeResult]:
        indices = [index for index, _ in batch]
        frame = self._nodes_frame(indices, [self.snapshots[k].id for _, k in batch])
        statement = self._batch_statement([self.snapshots[k] for k in sorted({k for _, k in batch})])
        with self.engine.registered(frame, self.nodes_view):
            rows, cuts = self._settled_totals(statement) if self.materializes else (self.engine.rows(statement), {})
            unmendable = self._unmendable()
        results = {}
        for row in rows:
            place, row = int(row[0]), row[1:]  # the node's place in the batch
            index = indices[place]
            costs, position = {}, 7
            for cost_sum in self.costs.sums:
                costs[cost_sum.name] = tuple(float(v) for v in row[position:position + 3])
                position += 3
            counted = {m.name: float(v) for m, v in zip(self.counting, row[position:position + len(self.counting)])}
            position += len(self.counting)
            tuples = None
            if self.costs.tuples is not None:
                kept_costs = {s.name: float(v) for s, v in zip(self.costs.sums, row[position + 2:])}
                tuples = TupleWeights(*self.costs.tuples, float(row[position]), float(row[position + 1]), kept_costs)
                position += 2 + len(self.costs.sums)
            totals = NodeTotals(records=int(row[0]), suppressed=int(row[1]), classes=int(row[2]),
                                kept_classes=int(row[3]), squares=float(row[4]), kept_squares=float(row[5]),
                                costs=costs, bottom=self.costs.bottom, levels=self.lattice.node(index),
                                heights=self.heights,
                                suppressed_entropy=self._spread(int(row[1]), row[position:]) if self.spread else (),
                                counted_classes=counted, tuples=tuples)
            cut = cuts.get((place,))
            starred_fails = bool(self.thresholds) and self._settling.risk_cut.starred_fails(cuts, (place,),
                                                                                            totals.suppressed)
            results[index] = self._result(index, totals, suppressed_too_small=bool(row[6]) or starred_fails,
                                          unmendable=place in unmendable or (cut is not None and not cut.holds))
        return results

    def _sources(self, nodes: np.ndarray) -> np.ndarray:
        """Per node (a row of levels), the position of the smallest snapshot that covers it."""
        rows = np.array([s.rows for s in self.snapshots], dtype=np.float64)
        covers = np.stack([s.covers(nodes) for s in self.snapshots])  # snapshots × nodes
        return np.where(covers, rows[:, None], np.inf).argmin(axis=0)

    def _pending(self) -> np.ndarray | None:
        """The listed nodes the search may still ask for (all not evaluated unless it told); None on a wide lattice,
        where they are not known."""
        if self.masks is None:
            return None
        return (self.pending if self.pending is not None else ~self.evaluated) & ~self.evaluated

    def _pending_above(self, node: Node, pending: np.ndarray | None) -> int:
        """How many ``pending`` nodes a snapshot at ``node`` would serve (0 where they are not known)."""
        return 0 if pending is None else int((self.masks.up(self.lattice.index(node)) & pending).sum())

    def _snapshot_some(self, index: list[int], source: np.ndarray, estimates: Sequence[float]) -> None:
        """Make the snapshots that save the most rows for the nodes still pending.

        A candidate is a just evaluated node whose classes (``estimates``) are far fewer than the rows of the snapshot
        it was computed from, or the node reached by lowering its levels one at a time while its estimated rows stay
        low (the estimate scales by the change in the product of distinct values): a lower snapshot covers more
        pending nodes.  Its worth is the rows it saves the pending nodes above it, against the snapshot each would use
        now; it is made when that is at least SNAPSHOT_PAYOFF times the rows its grouping reads.  On a wide lattice,
        whose pending nodes are unknown, only the meets of batches make snapshots (:meth:`_snapshot_meets`)."""
        pending = self._pending()
        if pending is None:
            return
        pending[index] = False  # just evaluated
        current = None
        existing = {s.node for s in self.snapshots}
        candidates: dict[Node, tuple[float, _Snapshot]] = {}
        for i, k, classes in zip(index, source.tolist(), estimates):
            parent = self.snapshots[k]
            rows = parent.rows
            if rows < SNAPSHOT_SOURCE_ROWS or classes * SNAPSHOT_REDUCTION > rows:
                continue
            if current is None:  # the rows each node would now be computed from
                current = np.full(self.lattice.size, np.inf)
                for s in self.snapshots:
                    covered = self.masks.up(self.lattice.index(s.node))
                    np.minimum(current, np.where(covered, s.rows, np.inf), out=current)
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

    def _snapshot_meets(self, levels: np.ndarray, source: np.ndarray) -> None:
        """Before evaluating several nodes that would read the same big snapshot, group it once at their meet (each
        attribute at the nodes' lowest level), when that has far fewer rows: a search working down from the top
        evaluates nodes below every snapshot made from its earlier results."""
        parents = {k: self.snapshots[k] for k in np.unique(source).tolist()}
        for k, parent in parents.items():
            members = levels[source == k]
            if parent.rows < SNAPSHOT_SOURCE_ROWS or len(members) < 2 or len(self._failed_meets) >= MEET_FAILURES:
                continue
            meet = tuple(int(v) for v in members.min(axis=0))
            # A meet at or below one that did not shrink the rows would not either.
            if any(all(m <= f for m, f in zip(meet, failed)) for failed in self._failed_meets):
                continue
            if not self._room(self._pending(), {id(p) for p in parents.values()}, meet):
                continue
            snapshot = self._snapshot(meet, parent)
            if snapshot.rows * SNAPSHOT_REDUCTION > parent.rows:
                self._failed_meets.append(meet)
                self._drop_snapshot(snapshot)
                self.snapshots.pop()

    def _room(self, pending: np.ndarray | None, keep: set[int], node: Node) -> bool:
        """Whether a snapshot at ``node`` fits the limits, after dropping (never those whose ``id`` is in ``keep``)
        those with no pending node above them, then those with fewer pending nodes above them than ``node`` has."""
        wanted = self._pending_above(node, pending)

        def full() -> bool:
            size = sum(s.rows * self._row_bytes(s.node) for s in self.snapshots[1:])
            return (len(self.snapshots) > SNAPSHOT_LIMIT
                    or size + self._row_bytes(node) * self.base_rows / 4 > SNAPSHOT_BYTES_LIMIT)

        droppable = sorted(((self._pending_above(s.node, pending), -s.rows, k) for k, s in enumerate(self.snapshots)
                            if k > 0 and id(s) not in keep), reverse=True)
        while full() and droppable and droppable[-1][0] < max(wanted, 1):
            *_, k = droppable.pop()
            self._drop_snapshot(self.snapshots[k])
            self.snapshots[k] = None
            self.snapshots = [s for s in self.snapshots if s is not None]
            droppable = sorted(((self._pending_above(s.node, pending), -s.rows, j)
                                for j, s in enumerate(self.snapshots) if j > 0 and id(s) not in keep), reverse=True)
        return not full()

    def _row_bytes(self, node: Node) -> float:
        """Estimated bytes per row of a snapshot at ``node``: its code, count and cost columns."""
        codes = sum(h.levels - level for h, level in zip(self.hierarchies, node))
        costs = codes * len(self.cost_kinds) + len(self.costs.sums)
        return 2.0 * codes + 8.0 * (costs + 1) + 16.0 * len(self.encoding.sensitive)

    def _snapshot(self, node: Node, source: _Snapshot) -> _Snapshot:
        """Group ``source`` at ``node``, keeping every coarser level's codes and costs, as a new snapshot."""
        codes = [code_column(i, j) for i, level in enumerate(node) for j in range(level, self.hierarchies[i].levels)]
        keys = [*codes, *self.encoding.sensitive]
        costs = [cost_column(kind, i, j) for kind in self.cost_kinds
                 for i, level in enumerate(node) for j in range(level, self.hierarchies[i].levels)]
        costs += [_suppressed_cost(s) for s in self.costs.sums]
        costs += [TUPLE_WEIGHT] if self.costs.tuples is not None else []
        # A value's share on a level at or above the snapshot's is alike for all the records grouped with it.
        prices = ([_level_price(i, j) for i, level in enumerate(node) for j in range(level, self.hierarchies[i].levels)]
                  if self.pricing is not None else [])
        count = exp.cast(exp.func("SUM", sb.col(COUNT)), exp.DataType.build("BIGINT")).as_(COUNT, quoted=True)
        query = (exp.select(*[sb.col(k) for k in keys], count,
                            *[exp.func("SUM", sb.col(c)).as_(c, quoted=True) for c in costs],
                            *[exp.func("MIN", sb.col(c)).as_(c, quoted=True) for c in prices])
                 .from_(source.table).group_by(*[sb.col(k) for k in keys]))
        table = sb.table(f"__duckanon_snapshot_{next(_serial)}")
        self.engine.run(sb.create_table_as(table, query, temporary=True))
        rows = self.engine.value(exp.select(exp.func("COUNT", exp.Star())).from_(table))
        self.snapshots.append(self._new_snapshot(node, table, rows))
        return self.snapshots[-1]

    @staticmethod
    def _spread(suppressed: int, columns: Sequence) -> tuple[float, ...]:
        """Per attribute, Σ c·log2(n / c) = (n ln n − Σ c ln c) / ln 2 from the totals' (node, Σ c ln c) columns."""
        sums = [float(v or 0.0) for v in columns[1::2]]
        if suppressed == 0:
            return (0.0,) * len(sums)
        whole = suppressed * math.log(suppressed)
        return tuple(max(whole - v, 0.0) / math.log(2) for v in sums)

    def _suppressed_class_violates(self, node: Node) -> bool:
        classes = self.encoding.classes(self.lattice.levels_of(node), priced=prices_classes(self.models))
        return suppressed_class_violates(self.engine, classes, self.models)

    def close(self) -> None:
        for snapshot in self.snapshots:
            self._drop_snapshot(snapshot)


def _with(statement: exp.Select, ctes: Sequence[tuple[exp.Identifier, exp.Expression]]) -> exp.Select:
    """``statement`` with the common table expressions ``ctes`` (name, query), in their order."""
    for name, query in ctes:
        statement = statement.with_(name, as_=query, copy=False)
    return statement


def _per_record(cost_sum: CostSum, weighted: exp.Expression) -> exp.Expression:
    """A record's cost in ``cost_sum`` from its weighted sum over attributes: the sum, or 10 to its power."""
    return exp.Pow(this=sb.lit(10.0), expression=exp.paren(weighted)) if cost_sum.exp10 else weighted


def _suppressed_cost(cost_sum: CostSum) -> str:
    """The column of a row's records' cost in ``cost_sum`` when suppressed (weighted, summed over attributes)."""
    return f"__suppressed_cost_{cost_sum.name}"


def _weighted(cost_sum: CostSum, attributes: Sequence[str]) -> list[tuple[int, float]]:
    """(position, weight) of the attributes ``cost_sum`` counts: those weighted 0 are left out of its SQL."""
    return [(i, cost_sum.weights[a]) for i, a in enumerate(attributes) if cost_sum.weights[a] != 0]


# A row's records times its tuple's records (those with its original quasi-identifier values).
TUPLE_WEIGHT = "__tuple_weight"


def _level_price(attribute: int, level: int) -> str:
    """The column of the evaluator's tables holding a record's log10 domain share of one attribute on one level."""
    return f"__price_{attribute}_l{level}"


def _code_type(largest: int | None) -> exp.DataType:
    """The narrowest unsigned integer type for codes up to ``largest``: narrower keys group faster."""
    largest = largest or 0
    for name, limit in (("UTINYINT", 2**8), ("USMALLINT", 2**16), ("UINTEGER", 2**32)):
        if largest < limit:
            return exp.DataType.build(name, dialect=sb.DIALECT)
    return exp.DataType.build("UBIGINT", dialect=sb.DIALECT)
