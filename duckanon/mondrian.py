"""Mondrian multidimensional partitioning (LeFevre, DeWitt, Ramakrishnan 2006; seed 002), set-based in DuckDB.

The records are partitioned level by level.  Each *round* is one SQL statement that takes every partition that may
still be cut and computes for all of them at once, on every quasi-identifier: the span (smallest and largest value),
the median (a running sum of record counts over the values, a window function), the candidate cut, and whether each
part would satisfy the policy (the core's :func:`~duckanon.checks.class_verdicts` over the parts); every partition
takes the allowable cut on the dimension with the widest normalized span (ties to the first quasi-identifier), and
the same statement moves every record to its part.  A small query then counts what is left to cut.  The number of
statements therefore grows with the depth of the partitioning (about log2(n/k)), never with the number of partitions,
and no Python code looks at a record or a partition.  The round's SQL is the same in every round (the first new
partition number is a parameter) and transpiles to Spark SQL.

Records are read once into the source's frequency table (each distinct combination of quasi-identifier and
sensitive values with its count, as :meth:`Anonymizer._bind <duckanon.anonymizer.Anonymizer._bind>` builds it); the
rounds work on its rows, weighted by their counts.  Strict Mondrian never separates equal records, so that is exact;
relaxed Mondrian may send part of a row's records to each half, which then becomes two weighted rows.

**Dimensions.**  Every quasi-identifier is a dimension with a position per value:

- *numeric* columns are cut on their value: ``lhs = {v <= median}``, ``rhs = {v > median}`` (strict), or the records
  in value order split into two halves of ⌊n/2⌋ and ⌈n/2⌉, records equal to the median going to either side (relaxed);
  the normalized span is ``(max - min) / (U - L)`` over the source's range;
- *ordered* categorical columns (``orders``) are cut the same way on their position in the given order; span
  ``(last - first) / (values - 1)``;
- *hierarchical* categorical columns are cut along their hierarchy: the partition's generalized value is the lowest
  common ancestor of its values, and the cut sends each record to the child of that ancestor its value lies under (as
  many parts as children with records; allowable when every part satisfies the policy).  Leaves are numbered so that
  every node covers a contiguous range of positions, which makes the ancestor a function of the partition's smallest
  and largest position; span ``(leaves under the ancestor - 1) / (leaves - 1)``.

NULL is a value of its own: a partition mixing NULL and other values on an attribute (not placed by a hierarchy's NULL
row or an order's None) has span 1 there, and its cut separates the NULLs from the rest.

A partition is final when no dimension has an allowable cut; a partition smaller than twice the smallest class any
model allows cannot have one and is set aside without evaluation.  The result is an :class:`~duckanon.recoding.Assignment`
of the frequency table's rows to partitions, published by :class:`~duckanon.recoding.PartitionMap`.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import duckdb
from sqlglot import exp

from . import sqlbuild as sb
from .checks import class_verdicts
from .classes import SIZE, VIOLATED, Classes, key_name
from .encoding import COUNT
from .errors import PolicyError, PolicyNotSatisfied
from .generalization import BoundHierarchy
from .hierarchy import _preview, level_column
from .models import PrivacyModel, TCloseness, sensitive_attributes
from .recoding import CATEGORICAL_STYLES, NUMERIC_STYLES, STYLES, Assignment, numeric_kind

if TYPE_CHECKING:
    from .anonymizer import Release

NUMERIC, ORDERED, HIERARCHICAL = "numeric", "ordered", "hierarchical"
# Cut kinds, per partition and dimension.
NULL_CUT, MEDIAN_CUT, HALF_CUT, CHILD_CUT = "null", "median", "half", "children"

ROW, PART, WEIGHT, DONE = "__row", "__p", "__w", "__done"
GROUP, SHARE = "group_id", "records"
_serial = itertools.count()
#: The rounds' statements by shape of problem (see Mondrian._round_statements).
_ROUNDS: dict[tuple, tuple[list[exp.Expression], list[str]]] = {}


def _e(index: int) -> str:
    return f"__e{index}"


@dataclass(frozen=True)
class Dimension:
    """A quasi-identifier as Mondrian cuts it: ``kind`` numeric, ordered or hierarchical; ``scale`` the normalizer
    of its span (the source's range, the order's length - 1, the hierarchy's leaves - 1)."""

    attribute: str
    kind: str
    scale: float
    order: tuple | None = None
    hierarchy: BoundHierarchy | None = None


@dataclass
class Partitioning:
    """What a Mondrian run produced: the assignment (a temporary table; :meth:`close` drops it) and its shape."""

    con: duckdb.DuckDBPyConnection
    assignment: Assignment
    dimensions: list[Dimension]
    relaxed: bool
    partitions: int
    rounds: int
    statements: int
    seconds: float
    sql: list[exp.Expression] = field(default_factory=list, repr=False)

    def close(self) -> None:
        sb.run(self.con, sb.drop("TABLE", self.assignment.table))

    def summary(self) -> str:
        kind = "relaxed" if self.relaxed else "strict"
        return (f"{kind} Mondrian: {self.partitions} partitions in {self.rounds} rounds ({self.statements} SQL "
                f"statements), {self.seconds:.3f} s")


@dataclass
class MondrianResult:
    """What :meth:`Anonymizer.mondrian <duckanon.anonymizer.Anonymizer.mondrian>` did: the partitioning (its
    assignment table is dropped once published), the output styles, the metrics (``loss`` = LM, ``dm``, ``ncp``,
    ``average-class-size``, with ``records``, ``classes``, ``suppressed``) and the release, when one was written."""

    partitioning: Partitioning
    styles: dict[str, str]
    metrics: dict[str, float] | None
    release: Release | None

    def summary(self) -> str:
        parts = [self.partitioning.summary()]
        if self.metrics is not None:
            parts.append(f"LM {self.metrics['loss']:.4f}, DM {self.metrics['dm']:.0f}, NCP {self.metrics['ncp']:.1f}, "
                         f"average class size {self.metrics['average-class-size']:.2f}")
        if self.release is not None:
            parts.append(self.release.summary())
        return "; ".join(parts)


def output_styles(dims: Sequence[Dimension], styles: Mapping[str, str] | None, numeric_style: str = "range"
                  ) -> dict[str, str]:
    """Each quasi-identifier's output style: ``styles`` where given, else ``numeric_style`` for numbers, the lowest
    common ancestor for categories cut along a hierarchy and the set of values for those cut along an order."""
    styles = dict(styles or {})
    by_name = {d.attribute: d for d in dims}
    unknown = [a for a in styles if a not in by_name]
    if unknown:
        raise PolicyError(f"output styles given for columns that are not quasi-identifiers: {unknown}")
    chosen = {}
    for d in dims:
        default = numeric_style if d.kind == NUMERIC else "lca" if d.kind == HIERARCHICAL else "set"
        style = styles.get(d.attribute, default)
        if style in NUMERIC_STYLES and d.kind != NUMERIC:
            raise PolicyError(f"output style {style!r} is for numbers, and {d.attribute!r} is cut as a category; use "
                              f"{', '.join(CATEGORICAL_STYLES)}")
        if style not in STYLES:
            raise PolicyError(f"output style {style!r} of {d.attribute!r} is not one of {', '.join(STYLES)}")
        chosen[d.attribute] = style
    return chosen


def dimensions(con: duckdb.DuckDBPyConnection, counted: exp.Table, quasi: Sequence[str],
               hierarchies: Mapping[str, BoundHierarchy], orders: Mapping[str, Sequence[object]] | None = None,
               categorical: Sequence[str] = ()) -> list[Dimension]:
    """How each quasi-identifier is cut: numeric columns on their value (unless named in ``categorical``), categorical
    ones along their order when ``orders`` gives one, else along their hierarchy.  Rejects, naming the column, what
    cannot be cut: a column that is all NULL or constant, a categorical one with neither hierarchy nor order, values
    missing from an order."""
    orders = {a: list(v) for a, v in (orders or {}).items()}
    unknown = [a for a in [*orders, *categorical] if a not in quasi]
    if unknown:
        raise PolicyError(f"orders or categorical name columns that are not quasi-identifiers: {unknown}")
    numeric = numeric_kind(con, counted, quasi)
    weight = sb.col(COUNT)
    probes = []
    for q in quasi:
        value = sb.col(q)
        probes += [exp.func("COUNT", exp.Distinct(expressions=[value])),
                   exp.func("SUM", exp.Case().when(value.is_(exp.Null()), weight.copy()).else_(sb.lit(0)))]
        if numeric[q] and q not in categorical and q not in orders:
            probes += [sb.as_double(exp.func("MIN", value)), sb.as_double(exp.func("MAX", value))]
    row = iter(sb.fetch_rows(con, exp.select(*probes).from_(counted))[0])
    result = []
    for q in quasi:
        distinct, nulls = next(row), next(row)
        if distinct == 0:
            raise PolicyError(f"quasi-identifier {q!r} is NULL in every record: it cannot be cut; drop it from the "
                              f"quasi-identifiers")
        if distinct == 1 and nulls == 0:
            raise PolicyError(f"quasi-identifier {q!r} has the same value in every record: it cannot be cut and "
                              f"identifies nobody; drop it from the quasi-identifiers")
        if q in orders:
            result.append(_ordered(con, counted, q, orders[q]))
        elif numeric[q] and q not in categorical:
            low, high = next(row), next(row)
            # One value besides NULL spans nothing: any positive normalizer will do.
            result.append(Dimension(q, NUMERIC, scale=float(high - low) or 1.0))
        elif q in hierarchies:
            result.append(Dimension(q, HIERARCHICAL, scale=float(max(len(hierarchies[q].hierarchy.rows) - 1, 1)),
                                    hierarchy=hierarchies[q]))
        else:
            raise PolicyError(f"categorical quasi-identifier {q!r} has neither a hierarchy nor an order: give one in "
                              f"the policy, or its values' order in orders={{{q!r}: [...]}}")
    return result


def _ordered(con, counted: exp.Table, attribute: str, order: list) -> Dimension:
    texts = [None if v is None else str(v) for v in order]
    if len(set(texts)) != len(texts):
        doubled = sorted({t for t in texts if texts.count(t) > 1}, key=str)
        raise PolicyError(f"the order of {attribute!r} lists values twice: {_preview(doubled)}")
    value = sb.as_text(sb.col(attribute))
    listed = [t for t in texts if t is not None]
    outside = exp.select(value).from_(counted).where(
        exp.and_(value.is_(exp.Null()).not_(), value.copy().isin(*[sb.lit(t) for t in listed]).not_())).distinct()
    missing = [r[0] for r in sb.fetch_rows(con, outside.order_by(sb.col(attribute)).limit(11))]
    if missing:
        raise PolicyError(f"the order of {attribute!r} does not list its values {_preview(missing)}")
    return Dimension(attribute, ORDERED, scale=float(max(len(texts) - 1, 1)), order=tuple(texts))


def _rename(table: exp.Table, to: exp.Table) -> exp.Alter:
    return exp.Alter(this=table.copy(), kind="TABLE", actions=[exp.AlterRename(this=to.copy())])


def smallest_class(models: Sequence[PrivacyModel]) -> int:
    """A lower bound on the records of any class the models allow: k, and l or p distinct values need that many."""
    bound = 1
    for model in models:
        for parameter in ("k", "l", "p"):
            value = getattr(model, parameter, None)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                bound = max(bound, math.ceil(value - 1e-9))
    return bound


class Mondrian:
    """One run of Mondrian over a frequency table ``counted`` (quasi-identifier and sensitive columns, ``__count``)."""

    def __init__(self, con: duckdb.DuckDBPyConnection, counted: exp.Table, dims: Sequence[Dimension],
                 sensitive: Sequence[str], models: Sequence[PrivacyModel], *, relaxed: bool = False,
                 progress: Callable[[str], None] | None = None):
        self.con, self.counted, self.dims = con, counted, list(dims)
        self.sensitive, self.models, self.relaxed = list(sensitive), list(models), relaxed
        self.progress = progress
        self.min_size = smallest_class(models)
        # The sensitive attributes models look at go into the cells; size-only models need only counts.
        self.cell_sensitive = sensitive_attributes(self.models)
        # t-closeness compares a class with the whole table: the rounds need the table's sensitive distribution.
        self.compares_with_table = any(isinstance(m, TCloseness) for m in self.models)
        self.hierarchical = [i for i, d in enumerate(self.dims) if d.kind == HIERARCHICAL]
        self.sql: list[exp.Expression] = []
        self._tables: list[exp.Table] = []
        self._tag = next(_serial)

    # ----------------------------------------------------------------- plumbing
    def _run(self, statement: exp.Expression) -> duckdb.DuckDBPyConnection:
        self.sql.append(statement)
        return sb.run(self.con, statement)

    def _fetch(self, query: exp.Expression) -> list[tuple]:
        self.sql.append(query)
        return sb.fetch_rows(self.con, query)

    def _table(self, purpose: str) -> exp.Table:
        table = sb.table(f"__duckanon_mondrian_{self._tag}_{purpose}_{next(_serial)}")
        self._tables.append(table)
        return table

    def _fixed(self, purpose: str) -> exp.Table:
        """A table name the same in every run, so the rounds' SQL is too (a connection runs one statement at a time,
        and every run drops its tables)."""
        table = sb.table(f"__duckanon_mondrian_{purpose}")
        self._tables.append(table)
        return table

    def _create(self, purpose: str, query: exp.Expression) -> exp.Table:
        table = self._table(purpose)
        self._run(sb.create_table_as(table, query, temporary=True))
        return table

    def _drop(self, table: exp.Table) -> None:
        sb.run(self.con, sb.drop("TABLE", table))
        self._tables = [t for t in self._tables if t.name != table.name]

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    # ------------------------------------------------------------------ the run
    def run(self) -> Partitioning:
        started = time.perf_counter()
        try:
            self._require_root()
            keys = [d.attribute for d in self.dims] + self.sensitive
            rows = self._create("rows", self._numbered_rows(keys))
            self.positions = self._fixed("positions")
            if self.hierarchical:
                self._run(sb.create_table_as(self.positions, self._positions(), temporary=True))
            # Every round is the same statement over the previous round's rows, with the first new partition number
            # as its parameter: the table it reads is renamed to a fixed name before it runs.
            self.reference = self._fixed("reference")
            if self.compares_with_table:
                self._run(sb.create_table_as(self.reference, self._reference(), temporary=True))
            previous, current = self._fixed("previous"), self._fixed("current")
            self._run(sb.create_table_as(previous, self._initial(rows), temporary=True))
            statements, compiled = self._round_statements(previous, current)
            self.sql += statements
            rounds: list[exp.Table] = []
            next_id = 1
            while True:
                self.con.execute(compiled[0], [next_id])
                left, top = self.con.execute(compiled[1]).fetchone()
                rounds.append(self._table("round"))
                sb.run(self.con, _rename(previous, rounds[-1]))
                sb.run(self.con, _rename(current, previous))
                self._say(f"Mondrian round {len(rounds)}: {int(left or 0)} frequency rows in partitions still to cut")
                if not left:
                    break
                next_id = int(top) + 1
            rounds.append(previous)
            done = None
            for table in rounds[1:]:  # the first holds the rows as they started
                finished = exp.select(sb.col(ROW), sb.col(PART), sb.col(WEIGHT)).from_(table).where(sb.col(DONE))
                done = finished if done is None else exp.union(done, finished, distinct=False, copy=False)
            assignment_table = self._table("assignment")
            query = (exp.select(*[sb.col(k, "r") for k in keys], sb.col(PART, "d").as_(GROUP, quoted=True),
                                exp.cast(sb.col(WEIGHT, "d"), "BIGINT").as_(SHARE, quoted=True))
                     .from_(done.subquery("d"))
                     .join(exp.alias_(rows, "r", quoted=True),
                           on=exp.EQ(this=sb.col(ROW, "d"), expression=sb.col(ROW, "r")), join_type="INNER"))
            self._run(sb.create_table_as(assignment_table, query, temporary=True))
            partitions = self._fetch(exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(GROUP)])))
                                     .from_(assignment_table))[0][0]
            self._tables.remove(assignment_table)
            assignment = Assignment(assignment_table, tuple(keys), group=GROUP, count=SHARE, spread=self.relaxed)
            statements = len(self.sql) + 4 * (len(rounds) - 1) - 2
            return Partitioning(self.con, assignment, self.dims, self.relaxed, int(partitions), len(rounds) - 1,
                                statements, time.perf_counter() - started, self.sql)
        finally:
            for table in list(self._tables):
                self._drop(table)

    def _round_statements(self, previous: exp.Table, current: exp.Table) -> tuple[list[exp.Expression], list[str]]:
        """The round and the progress query after it, as trees and as SQL; built once per shape of problem (building
        the round's tree takes longer than running it on small data)."""
        key = (tuple((d.attribute, d.kind, d.scale) for d in self.dims), tuple(self.sensitive),
               tuple(self.cell_sensitive), self.compares_with_table, self.relaxed, self.min_size,
               tuple((type(m).__name__, json.dumps(m.params(), sort_keys=True, default=str)) for m in self.models))
        if key not in _ROUNDS:
            statement = sb.create_table_as(current, self._round(previous, exp.Placeholder()), temporary=True)
            still_to_cut = exp.Case().when(sb.col(DONE).not_(), sb.lit(1)).else_(sb.lit(0))
            progress = exp.select(exp.func("SUM", still_to_cut), exp.func("MAX", sb.col(PART))).from_(current)
            if len(_ROUNDS) >= 64:
                _ROUNDS.clear()
            _ROUNDS[key] = ([statement, progress], [sb.to_sql(statement), sb.to_sql(progress)])
        return _ROUNDS[key]

    def _reference(self) -> exp.Select:
        """Each combination of the models' sensitive values with its share ``__q`` of the table's records."""
        sensitive = [sb.col(x) for x in self.cell_sensitive]
        share = exp.Div(this=sb.as_double(exp.func("SUM", sb.col(COUNT))),
                        expression=exp.Window(this=exp.func("SUM", exp.func("SUM", sb.col(COUNT)))))
        return (exp.select(*sensitive, share.as_("__q", quoted=True)).from_(self.counted)
                .group_by(*[x.copy() for x in sensitive]))

    def _require_root(self) -> None:
        """The whole table as one partition must satisfy the policy, or no partitioning can."""
        root = exp.select(sb.lit(0).as_("__root"), *[sb.col(s) for s in self.sensitive], sb.col(COUNT)).from_(self.counted)
        verdicts = class_verdicts(Classes.of(root, ["__root"], weight=COUNT), self.models)
        violated = self._fetch(exp.select(sb.col(VIOLATED)).from_(verdicts.subquery("v")))
        if violated and violated[0][0]:
            raise PolicyNotSatisfied(
                "the table as a whole violates the policy (" + "; ".join(m.describe() for m in self.models) +
                "), so no partition of it can satisfy it: nothing was published")

    # ------------------------------------------------------------ the records
    def _numbered_rows(self, keys: list[str]) -> exp.Select:
        number = exp.Window(this=exp.func("ROW_NUMBER"), order=exp.Order(
            expressions=[exp.Ordered(this=sb.col(k), nulls_first=True) for k in keys]))
        return exp.select(*[sb.col(k) for k in keys], sb.col(COUNT), number.as_(ROW, quoted=True)).from_(self.counted)

    def _initial(self, rows: exp.Table) -> exp.Select:
        """Every frequency row in the root partition 0, still to cut, with each dimension's position ``__e<i>``."""
        # Weights are DOUBLE (exact for counts below 2^53): sums of BIGINT are HUGEINT, which windows sum slowly.
        query = exp.select(sb.col(ROW, "r"), sb.lit(0).as_(PART, quoted=True),
                           sb.as_double(sb.col(COUNT, "r")).as_(WEIGHT, quoted=True), exp.false().as_(DONE, quoted=True),
                           *[sb.col(s, "r") for s in self.sensitive]).from_(exp.alias_(rows, "r", quoted=True))
        for i, d in enumerate(self.dims):
            value = sb.col(d.attribute, "r")
            if d.kind == NUMERIC:
                query = query.select(sb.as_double(value).as_(_e(i), quoted=True), copy=False)
            elif d.kind == ORDERED:
                # One CASE built at once over the (small) order: chaining .when() would copy it each time.
                ifs = [exp.If(this=exp.EQ(this=sb.as_text(value.copy()), expression=sb.lit(t)), true=sb.lit(p))
                       for p, t in enumerate(d.order) if t is not None]
                null = [p for p, t in enumerate(d.order) if t is None]
                if null:
                    ifs.insert(0, exp.If(this=value.copy().is_(exp.Null()), true=sb.lit(null[0])))
                query = query.select(sb.as_double(exp.Case(ifs=ifs)).as_(_e(i), quoted=True), copy=False)
            else:
                alias = f"l{i}"
                leaves = (exp.select(sb.col("__pos"), sb.col("__leaf")).from_(self.positions)
                          .where(exp.and_(sb.col("__d").eq(sb.lit(i)), sb.col("__level").eq(sb.lit(0)))))
                query = query.join(leaves.subquery(alias), join_type="LEFT", copy=False,
                                   on=exp.NullSafeEQ(this=sb.col("__leaf", alias), expression=sb.as_text(value)))
                query = query.select(sb.as_double(sb.col("__pos", alias)).as_(_e(i), quoted=True), copy=False)
        return query

    def _positions(self) -> exp.Expression:
        """``__d, __level, __leaf, __pos, __first, __last``: for every hierarchical dimension, leaf and level, the
        leaf's position and the positions its ancestor on that level covers.  Leaves are numbered in the order of
        their ancestors from the top down, so every node covers a contiguous range; a level above the top (one
        virtual root) makes a lowest common ancestor exist even for hierarchies with several top values."""
        branches = []
        for i in self.hierarchical:
            hierarchy = self.dims[i].hierarchy
            top = hierarchy.hierarchy.height
            order = [exp.Ordered(this=sb.col(level_column(j)), nulls_first=False) for j in range(top, -1, -1)]
            numbered = exp.select(*[sb.col(level_column(j)) for j in range(top + 1)], (exp.Window(
                this=exp.func("ROW_NUMBER"), order=exp.Order(expressions=order)) - sb.lit(1)).as_("__pos", quoted=True)
            ).from_(hierarchy.table).subquery("numbered")
            for level in range(top + 2):
                node = [sb.col(level_column(level))] if level <= top else []
                first = exp.Window(this=exp.func("MIN", sb.col("__pos")), partition_by=node)
                last = exp.Window(this=exp.func("MAX", sb.col("__pos")), partition_by=node)
                branches.append(exp.select(sb.lit(i).as_("__d", quoted=True), sb.lit(level).as_("__level", quoted=True),
                                           sb.col(level_column(0)).as_("__leaf", quoted=True), sb.col("__pos"),
                                           first.as_("__first", quoted=True), last.as_("__last", quoted=True))
                                .from_(numbered.copy()))
        union = branches[0]
        for branch in branches[1:]:
            union = exp.union(union, branch, distinct=False, copy=False)
        return union

    # ------------------------------------------------------------ one round
    def _choice(self, active: exp.Table, next_id: exp.Expression) -> dict[str, exp.Select]:
        """The steps (common table expressions, in order) ending in ``choice``: for every partition with an
        allowable cut, the cut on its widest dimension, one row per part (``__p, __d, __kind, __median, __lca,
        __half, __part, __size, __new``); new partitions are numbered from ``next_id`` on."""
        sensitive = [sb.col(s) for s in self.cell_sensitive]
        # Every active row once per dimension (a cross join with the dimension numbers), grouped into cells: the
        # partition, the dimension, a position on it (and the sensitive values the models need) with their records.
        numbers = exp.values([(i,) for i in range(len(self.dims))], alias="dims", columns=["__d"])
        position = exp.Case(ifs=[exp.If(this=sb.col("__d").eq(sb.lit(i)), true=sb.col(_e(i)))
                                 for i in range(len(self.dims))])
        cell_key = [sb.col(PART), sb.col("__d")]
        cells = (exp.select(*cell_key, position.as_("__e", quoted=True), *sensitive,
                            exp.func("SUM", sb.col(WEIGHT)).as_(WEIGHT, quoted=True))
                 .from_(active).join(numbers, join_type="CROSS")
                 .group_by(*[c.copy() for c in cell_key], position.copy(), *[x.copy() for x in sensitive]))
        with_ = {"cells": cells}
        values = exp.Table(this=sb.ident("cells"))
        if sensitive:
            with_["values"] = (exp.select(*[c.copy() for c in cell_key], sb.col("__e"),
                                          exp.func("SUM", sb.col(WEIGHT)).as_(WEIGHT, quoted=True))
                               .from_(values).group_by(*[c.copy() for c in cell_key], sb.col("__e")))
            values = exp.Table(this=sb.ident("values"))
        weight, e = sb.col(WEIGHT), sb.col("__e")
        with_["stats"] = (
            exp.select(*[c.copy() for c in cell_key], exp.func("MIN", e).as_("__lo", quoted=True),
                       exp.func("MAX", e.copy()).as_("__hi", quoted=True),
                       exp.func("SUM", weight).as_("__n", quoted=True),
                       exp.func("SUM", exp.Case().when(e.copy().is_(exp.Null()), weight.copy()).else_(sb.lit(0)))
                       .as_("__nulls", quoted=True))
            .from_(values).group_by(*[c.copy() for c in cell_key]))
        ordered_dims = [sb.lit(i) for i, d in enumerate(self.dims) if d.kind != HIERARCHICAL]
        medians = not self.relaxed and bool(ordered_dims)
        if medians:
            # The median of a numeric or ordered dimension: the first value at which the running count reaches half
            # of the non-NULL records.  Both sums share one sort.
            by_value = lambda: exp.Order(expressions=[exp.Ordered(this=sb.col("__e"))])  # noqa: E731
            running = exp.Window(this=exp.func("SUM", sb.col(WEIGHT)), partition_by=[c.copy() for c in cell_key],
                                 order=by_value(), spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED",
                                                                       start_side="PRECEDING", end="CURRENT ROW"))
            total = exp.Window(this=exp.func("SUM", sb.col(WEIGHT)), partition_by=[c.copy() for c in cell_key],
                               order=by_value(), spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED",
                                                                     start_side="PRECEDING", end="UNBOUNDED",
                                                                     end_side="FOLLOWING"))
            ranked = (exp.select(*[c.copy() for c in cell_key], sb.col("__e"), running.as_("__cum", quoted=True),
                                 total.as_("__nn", quoted=True)).from_(values)
                      .where(exp.and_(sb.col("__d").isin(*ordered_dims), sb.col("__e").is_(exp.Null()).not_())))
            with_["medians"] = (exp.select(*[c.copy() for c in cell_key], exp.func("MIN", exp.Case().when(
                sb.lit(2) * sb.col("__cum") >= sb.col("__nn"), sb.col("__e"))).as_("__median", quoted=True))
                .from_(ranked.subquery("ranked")).group_by(*[c.copy() for c in cell_key]))
        cut_cells = "cells"
        if self.relaxed:
            # Records in the order of value (and sensitive values): those before a cell, for the ⌊n/2⌋ half.
            before = exp.Window(this=exp.func("SUM", sb.col(WEIGHT)), partition_by=[c.copy() for c in cell_key],
                                order=exp.Order(expressions=[exp.Ordered(this=sb.col("__e"), nulls_first=False),
                                                             *[exp.Ordered(this=x.copy(), nulls_first=False)
                                                               for x in sensitive]]),
                                spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                                    end=sb.lit(1), end_side="PRECEDING"))
            # Only numeric and ordered dimensions are cut in halves: the window sorts only their cells.
            halved = sb.col("__d").isin(*[o.copy() for o in ordered_dims]) if ordered_dims else exp.false()
            sorted_cells = (exp.select(exp.Star(), exp.func("COALESCE", before, sb.lit(0)).as_("__before", quoted=True))
                            .from_(exp.Table(this=sb.ident("cells"))).where(halved))
            other_cells = (exp.select(exp.Star(), sb.lit(0.0).as_("__before", quoted=True))
                           .from_(exp.Table(this=sb.ident("cells"))).where(halved.copy().not_()))
            with_["ordered_cells"] = exp.union(sorted_cells, other_cells, distinct=False)
            cut_cells = "ordered_cells"
        if self.hierarchical:
            # The lowest level on which the smallest and largest position share an ancestor; its leaves.
            on_low = sb.and_all([sb.col("__d", "a").eq(sb.col("__d", "s")),
                                 sb.col("__pos", "a").eq(sb.col("__lo", "s"))])
            on_high = sb.and_all([sb.col("__d", "b").eq(sb.col("__d", "s")), sb.col("__pos", "b").eq(sb.col("__hi", "s")),
                                  sb.col("__level", "b").eq(sb.col("__level", "a")),
                                  sb.col("__first", "b").eq(sb.col("__first", "a"))])
            with_["lca"] = (exp.select(sb.col(PART, "s"), sb.col("__d", "s"), exp.func("MIN", sb.col("__level", "a")).as_("__lca", quoted=True),
                              exp.func("MIN", sb.col("__last", "a") - sb.col("__first", "a") + sb.lit(1))
                              .as_("__leaves", quoted=True))
                   .from_(exp.alias_(exp.Table(this=sb.ident("stats")), "s", quoted=True))
                   .join(exp.alias_(self.positions, "a", quoted=True), on=on_low, join_type="INNER")
                   .join(exp.alias_(self.positions, "b", quoted=True), on=on_high, join_type="INNER")
                   .where(sb.col("__d", "s").isin(*[sb.lit(i) for i in self.hierarchical]))
                   .group_by(sb.col(PART, "s"), sb.col("__d", "s")))

        s = lambda name: sb.col(name, "s")  # noqa: E731
        dm = lambda name: sb.col(name, "dm")  # noqa: E731
        d = s("__d")
        # Per dimension its span's normalizer and whether it is cut along a hierarchy, as a small relation to join.
        facts = exp.values([(i, dim.scale, dim.kind == HIERARCHICAL) for i, dim in enumerate(self.dims)],
                           alias="dm", columns=["__d", "__scale", "__hierarchical"])
        mixed = exp.and_(s("__nulls") > sb.lit(0), s("__nulls") < s("__n"))
        flat = exp.or_(s("__lo").is_(exp.Null()), s("__lo").eq(s("__hi")))
        kind = exp.Case(ifs=[exp.If(this=mixed, true=sb.lit(NULL_CUT)), exp.If(this=flat, true=exp.Null()),
                             exp.If(this=dm("__hierarchical"), true=sb.lit(CHILD_CUT))],
                        default=sb.lit(HALF_CUT if self.relaxed else MEDIAN_CUT))
        spread = sb.col("__leaves", "l") - sb.lit(1) if self.hierarchical else exp.Null()
        width = exp.Case(ifs=[exp.If(this=mixed.copy(), true=sb.lit(1.0)), exp.If(this=flat.copy(), true=sb.lit(0.0)),
                              exp.If(this=dm("__hierarchical"), true=exp.Div(this=sb.as_double(spread),
                                                                            expression=dm("__scale")))],
                         default=exp.Div(this=sb.as_double(s("__hi") - s("__lo")), expression=dm("__scale")))
        candidates = exp.select(s(PART), d.copy(), kind.as_("__kind", quoted=True), width.as_("__width", quoted=True),
                                (sb.col("__median", "md") if medians else exp.Null()).as_("__median", quoted=True), s("__n"),
                                exp.func("FLOOR", s("__n") / sb.lit(2)).as_("__half", quoted=True),
                                (sb.col("__lca", "l") if self.hierarchical else exp.cast(exp.Null(), "INT"))
                                .as_("__lca", quoted=True)
                                ).from_(exp.alias_(exp.Table(this=sb.ident("stats")), "s", quoted=True))
        candidates = candidates.join(facts, join_type="INNER", on=dm("__d").eq(d.copy()))
        if medians:
            candidates = candidates.join(exp.alias_(exp.Table(this=sb.ident("medians")), "md", quoted=True),
                                         join_type="LEFT", on=sb.and_all([sb.col(PART, "md").eq(s(PART)),
                                                                          sb.col("__d", "md").eq(d.copy())]))
        if self.hierarchical:
            candidates = candidates.join(exp.alias_(exp.Table(this=sb.ident("lca")), "l", quoted=True), join_type="LEFT",
                                         on=sb.and_all([sb.col(PART, "l").eq(s(PART)), sb.col("__d", "l").eq(d.copy())]))
        with_["candidates"] = (exp.select(exp.Star()).from_(candidates.subquery("candidate"))
                               .where(sb.col("__kind").is_(exp.Null()).not_()))

        # Every cell's part under its partition's candidate cut on that dimension.
        c = lambda name: sb.col(name, "c")  # noqa: E731
        r = lambda name: sb.col(name, "r")  # noqa: E731
        parts = (exp.select(r(PART), r("__d"), *[r(x.name) for x in sensitive])
                 .from_(exp.alias_(exp.Table(this=sb.ident(cut_cells)), "r", quoted=True))
                 .join(exp.alias_(exp.Table(this=sb.ident("candidates")), "c", quoted=True), join_type="INNER",
                       on=sb.and_all([c(PART).eq(r(PART)), c("__d").eq(r("__d"))])))
        if self.hierarchical:
            parts = parts.join(exp.alias_(self.positions, "x", quoted=True), join_type="LEFT", on=sb.and_all([
                sb.col("__d", "x").eq(r("__d")), sb.col("__pos", "x").eq(r("__e")),
                sb.col("__level", "x").eq(c("__lca") - sb.lit(1))]))
        part = exp.Case(ifs=[
            exp.If(this=c("__kind").eq(sb.lit(NULL_CUT)),
                   true=exp.Case(ifs=[exp.If(this=r("__e").is_(exp.Null()), true=sb.lit(0))], default=sb.lit(1))),
            exp.If(this=c("__kind").eq(sb.lit(MEDIAN_CUT)),
                   true=exp.Case(ifs=[exp.If(this=r("__e") > c("__median"), true=sb.lit(1))], default=sb.lit(0))),
            exp.If(this=c("__kind").eq(sb.lit(HALF_CUT)), true=sb.lit(0)),
        ], default=exp.cast(sb.col("__first", "x"), "BIGINT") if self.hierarchical else exp.Null())
        if self.relaxed:
            lower = exp.func("LEAST", exp.func("GREATEST", c("__half") - r("__before"), sb.lit(0)), r(WEIGHT))
            first_share = exp.Case(ifs=[exp.If(this=c("__kind").eq(sb.lit(HALF_CUT)), true=lower)], default=r(WEIGHT))
            low_parts = parts.copy().select(part.as_("__part", quoted=True), first_share.as_(WEIGHT, quoted=True))
            high_parts = (parts.copy().select(sb.lit(1).as_("__part", quoted=True),
                                              (r(WEIGHT) - lower.copy()).as_(WEIGHT, quoted=True))
                          .where(c("__kind").eq(sb.lit(HALF_CUT))))
            parts = exp.union(low_parts, high_parts, distinct=False)
            parts = exp.select(exp.Star()).from_(parts.subquery("shares")).where(sb.col(WEIGHT) > sb.lit(0))
        else:
            parts = parts.select(part.as_("__part", quoted=True), r(WEIGHT))
        with_["parts"] = parts
        checked = "parts"
        if self.compares_with_table:
            with_.update(self._balanced("parts"))
            checked = "balanced"
        classes = Classes.of(exp.Table(this=sb.ident(checked)), [PART, "__d", "__part"], weight=WEIGHT)
        with_["verdicts"] = class_verdicts(classes, self.models)
        k0, k1, k2 = (sb.col(key_name(j)) for j in range(3))
        allowed = (exp.select(k0.as_(PART, quoted=True), k1.as_("__d", quoted=True))
                   .from_(exp.Table(this=sb.ident("verdicts"))).group_by(k0.copy(), k1.copy())
                   .having(exp.and_(exp.func("COUNT", exp.Star()) >= sb.lit(2),
                                    exp.func("BOOL_OR", sb.col(VIOLATED)).not_())))
        rank = exp.Window(this=exp.func("ROW_NUMBER"), partition_by=[c(PART)],
                          order=exp.Order(expressions=[exp.Ordered(this=c("__width"), desc=True),
                                                       exp.Ordered(this=c("__d"))]))
        best = (exp.select(exp.Column(this=exp.Star(), table=sb.ident("c")), rank.as_("__rank", quoted=True))
                .from_(exp.alias_(exp.Table(this=sb.ident("candidates")), "c", quoted=True))
                .join(exp.alias_(allowed.subquery("allowed"), "a", quoted=True), join_type="INNER",
                      on=sb.and_all([sb.col(PART, "a").eq(c(PART)), sb.col("__d", "a").eq(c("__d"))]))
                .where(c("__width") > sb.lit(0)))
        with_["best"] = best
        b = lambda name: sb.col(name, "b")  # noqa: E731
        v = lambda name: sb.col(name, "v")  # noqa: E731
        new_id = exp.Window(this=exp.func("ROW_NUMBER"), order=exp.Order(
            expressions=[exp.Ordered(this=b(PART)), exp.Ordered(this=v(key_name(2)))])) + next_id - sb.lit(1)
        query = (exp.select(b(PART), b("__d"), b("__kind"), b("__median"), b("__lca"), b("__half"),
                            v(key_name(2)).as_("__part", quoted=True), v(SIZE).as_("__size", quoted=True),
                            new_id.as_("__new", quoted=True))
                 .from_(exp.alias_(exp.Table(this=sb.ident("best")), "b", quoted=True))
                 .join(exp.alias_(exp.Table(this=sb.ident("verdicts")), "v", quoted=True), join_type="INNER",
                       on=sb.and_all([v(key_name(0)).eq(b(PART)), v(key_name(1)).eq(b("__d"))]))
                 .where(b("__rank").eq(sb.lit(1))))
        with_["choice"] = query
        return with_

    def _balanced(self, parts: str) -> dict[str, exp.Select]:
        """``parts`` and one more class (keys -1) whose records make the sensitive values' distribution over all
        rows the whole table's.  t-closeness compares every class with the distribution of the relation it is given;
        the parts hold only the partitions still being cut, once per candidate dimension.  The extra class has
        ``c * Q(v) - A(v)`` records of each sensitive combination v (``A`` its records in the parts, ``Q`` its share of
        the table, ``c = max A/Q``), so every v totals ``c * Q(v)``; its own verdict is never read."""
        sensitive = [sb.col(x) for x in self.cell_sensitive]
        by_value = (exp.select(*sensitive, exp.func("SUM", sb.col(WEIGHT)).as_("__a", quoted=True))
                    .from_(exp.Table(this=sb.ident(parts))).group_by(*[x.copy() for x in sensitive]))
        ratio = exp.func("MAX", exp.Div(this=sb.col("__a", "a"), expression=sb.col("__q", "q")))
        scale = (exp.select(exp.func("COALESCE", ratio, sb.lit(0.0)).as_("__c", quoted=True))
                 .from_(exp.alias_(exp.Table(this=sb.ident("by_value")), "a", quoted=True))
                 .join(exp.alias_(self.reference, "q", quoted=True), join_type="INNER",
                       on=sb.null_safe_join("a", "q", self.cell_sensitive)))
        balance = (exp.select(*[sb.lit(-1).as_(k, quoted=True) for k in (PART, "__d", "__part")],
                              *[sb.col(x, "q") for x in self.cell_sensitive],
                              (sb.col("__c", "c") * sb.col("__q", "q") - exp.func("COALESCE", sb.col("__a", "a"),
                                                                                   sb.lit(0.0))).as_(WEIGHT, quoted=True))
                   .from_(exp.alias_(self.reference, "q", quoted=True))
                   .join(exp.alias_(exp.Table(this=sb.ident("scale")), "c", quoted=True), join_type="CROSS")
                   .join(exp.alias_(exp.Table(this=sb.ident("by_value")), "a", quoted=True), join_type="LEFT",
                         on=sb.null_safe_join("a", "q", self.cell_sensitive)))
        columns = [PART, "__d", "__part", *self.cell_sensitive, WEIGHT]
        balanced = exp.union(exp.select(*[sb.col(c) for c in columns]).from_(exp.Table(this=sb.ident(parts))),
                             exp.select(*[sb.col(c) for c in columns]).from_(balance.subquery("balance")),
                             distinct=False)
        return {"by_value": by_value, "scale": scale, "balanced": balanced}

    def _round(self, previous: exp.Table, next_id: exp.Expression) -> exp.Select:
        """One round as one statement: the rows of ``previous`` still to cut, each with its new partition and
        ``__done`` when its partition was not cut or its new part is too small to cut again (relaxed half cuts
        share a row's records between the two halves); the rows already done are left behind."""
        steps = {"active": exp.select(exp.Star()).from_(previous).where(sb.col(DONE).not_())}
        active, choice = exp.Table(this=sb.ident("active")), exp.Table(this=sb.ident("choice"))
        steps.update(self._choice(active, next_id))
        w = lambda name: sb.col(name, "w")  # noqa: E731
        c = lambda name: sb.col(name, "c")  # noqa: E731
        columns = [w(ROW), *[w(_e(i)) for i in range(len(self.dims))], *[w(s) for s in self.sensitive]]
        cut = (exp.select(sb.col(PART), sb.col("__d"), sb.col("__kind"), sb.col("__median"), sb.col("__lca"),
                          sb.col("__half")).from_(choice).distinct())
        position = exp.Case(ifs=[exp.If(this=c("__d").eq(sb.lit(i)), true=w(_e(i))) for i in range(len(self.dims))])
        rows = (exp.select(*columns, w(PART), w(WEIGHT), c("__kind"), position.as_("__e", quoted=True))
                .from_(exp.alias_(active, "w", quoted=True))
                .join(cut.subquery("c"), join_type="LEFT", on=c(PART).eq(w(PART))))
        if self.hierarchical:
            rows = rows.join(exp.alias_(self.positions, "x", quoted=True), join_type="LEFT", on=sb.and_all([
                sb.col("__d", "x").eq(c("__d")), sb.col("__pos", "x").eq(position.copy()),
                sb.col("__level", "x").eq(c("__lca") - sb.lit(1))]))
        e = sb.col("__e")
        part = exp.Case(ifs=[
            exp.If(this=c("__kind").eq(sb.lit(NULL_CUT)),
                   true=exp.Case(ifs=[exp.If(this=e.is_(exp.Null()), true=sb.lit(0))], default=sb.lit(1))),
            exp.If(this=c("__kind").eq(sb.lit(MEDIAN_CUT)),
                   true=exp.Case(ifs=[exp.If(this=e.copy() > c("__median"), true=sb.lit(1))], default=sb.lit(0))),
            exp.If(this=c("__kind").eq(sb.lit(HALF_CUT)), true=sb.lit(0)),
        ], default=exp.cast(sb.col("__first", "x"), "BIGINT") if self.hierarchical else exp.Null())
        rows = rows.select(part.as_("__part", quoted=True))
        if self.relaxed:
            order = [exp.Ordered(this=sb.col("__e"), nulls_first=False),
                     *[exp.Ordered(this=sb.col(s), nulls_first=False) for s in self.cell_sensitive],
                     exp.Ordered(this=sb.col(ROW))]
            before = exp.Window(this=exp.func("SUM", sb.col(WEIGHT)), partition_by=[sb.col(PART)],
                                order=exp.Order(expressions=order),
                                spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                                    end=sb.lit(1), end_side="PRECEDING"))
            steps["moving"] = rows.select(c("__half"))
            # Only rows of partitions cut in halves need their place in the order: the window sorts only them.
            half = sb.col("__kind").eq(sb.lit(HALF_CUT))
            steps["ordered"] = exp.union(
                exp.select(exp.Star(), exp.func("COALESCE", before, sb.lit(0)).as_("__before", quoted=True))
                .from_(exp.Table(this=sb.ident("moving"))).where(half.copy()),
                exp.select(exp.Star(), sb.lit(0.0).as_("__before", quoted=True))
                .from_(exp.Table(this=sb.ident("moving"))).where(exp.func("COALESCE", half.copy(), exp.false()).not_()),
                distinct=False)
            lower = exp.func("LEAST", exp.func("GREATEST", sb.col("__half") - sb.col("__before"), sb.lit(0)),
                             sb.col(WEIGHT))
            plain = [sb.col(x.name) for x in columns]
            low = exp.select(*plain, sb.col(PART), sb.col("__part"),
                             exp.Case(ifs=[exp.If(this=half, true=lower)], default=sb.col(WEIGHT)).as_(WEIGHT, quoted=True)
                             ).from_(exp.Table(this=sb.ident("ordered")))
            high = (exp.select(*[x.copy() for x in plain], sb.col(PART), sb.lit(1).as_("__part", quoted=True),
                               (sb.col(WEIGHT) - lower.copy()).as_(WEIGHT, quoted=True))
                    .from_(exp.Table(this=sb.ident("ordered"))).where(half.copy()))
            shares = exp.union(low, high, distinct=False)
            source = exp.select(exp.Star()).from_(shares.subquery("shares")).where(sb.col(WEIGHT) > sb.lit(0))
        else:
            source = rows.select(w(WEIGHT).as_("__weight_kept", quoted=True))
            source = exp.select(*[sb.col(x.name) for x in columns], sb.col(PART), sb.col("__part"),
                                sb.col("__weight_kept").as_(WEIGHT, quoted=True)).from_(source.subquery("rows"))
        m = lambda name: sb.col(name, "m")  # noqa: E731
        k = lambda name: sb.col(name, "k")  # noqa: E731
        done = exp.or_(k("__new").is_(exp.Null()), k("__size") < sb.lit(2 * self.min_size))
        query = (exp.select(*[m(x.name) for x in columns], exp.func("COALESCE", k("__new"), m(PART)).as_(PART, quoted=True),
                            m(WEIGHT), done.as_(DONE, quoted=True))
                 .from_(source.subquery("m"))
                 .join(exp.alias_(choice, "k", quoted=True), join_type="LEFT",
                       on=sb.and_all([k(PART).eq(m(PART)), k("__part").eq(m("__part"))])))
        for name, step in steps.items():
            query = query.with_(sb.ident(name), as_=step, copy=False)
        return query
