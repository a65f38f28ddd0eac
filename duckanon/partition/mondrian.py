"""Mondrian multidimensional partitioning (LeFevre, DeWitt, Ramakrishnan 2006; seed 002), set-based in DuckDB.

The records are partitioned level by level.  A *round* takes every partition that may still be cut and, for all of
them at once, on every quasi-identifier: counts its records per position (*cells*, one aggregation of the rows crossed
with the dimension numbers), finds the span (smallest and largest position) and the median (a running sum of record
counts over the values, one window function), the candidate cut, and whether each part would satisfy the policy (the
core's :func:`~duckanon.privacy.checks.class_verdicts` over the parts); every partition takes the allowable cut on the
dimension with the widest normalized span (ties to the first quasi-identifier).  That is one statement (the *choice*);
a second moves every record to its part.  Two renames keep the round's rows for the final assignment.  The number of
statements therefore grows with the depth of the partitioning (about log2(n/k)), never with the number of partitions,
and no Python code looks at a record or a partition.  The rounds' SQL is the same in every round (the first new
partition number is a parameter), is built once per shape of problem, and transpiles to Spark SQL.

Records are read once into the source's frequency table (each distinct combination of quasi-identifier and
sensitive values with its count, as :func:`~duckanon.encode.binding.bind` builds it); the
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
  many parts as children with records; allowable when every part satisfies the policy).  A value's position is its
  leaf's code (:class:`~duckanon.recode.recoding.HierarchyCoding`: mixed-radix digits from the top level down), so the
  ancestor on a level is the code divided by that level's base, the lowest common ancestor is the one level where
  the partition's smallest and largest code share an ancestor and their children differ (a join with a small table
  of levels), and a record's part is its code divided by the base of the level below: arithmetic, not a join per
  record.  Span ``(leaves under the ancestor - 1) / (leaves - 1)``.

NULL is a value of its own: a partition mixing NULL and other values on an attribute (not placed by a hierarchy's NULL
row or an order's None) has span 1 there, and its cut separates the NULLs from the rest.

**People.**  Under a policy that counts people (``person=``), Mondrian partitions people: a person is a point, on
each dimension the ⌈n/2⌉-th of their n records' positions (:func:`~duckanon.privacy.people.person_points`), and the
rows cut are each person's distinct combinations of the models' sensitive values at that point, so no cut parts a
person.  A row's weight ``__w`` is 1 on one row of each person (a part's weight, its median and its halves count
people), and each sensitive attribute has a weight of its own, 1 on one row of each (person, value): the models of
that attribute judge a part by it (``class_verdicts(valued=…)``), each person's value once, and the models comparing
with the table balance each attribute against its table's people's values.  Relaxed halves are dealt whole people in the order of value,
then of person.  The assignment names each person's partition, and every record of the person goes there.

A partition is final when no dimension has an allowable cut; a partition smaller than twice the smallest class any
model allows cannot have one and is set aside without evaluation.  The result is an
:class:`~duckanon.recode.recoding.Assignment` of the frequency table's rows to partitions (with their leaves' codes), published by
:class:`~duckanon.recode.recoding.PartitionMap`, which reads the hierarchies' codes from the tables the run made.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from sqlglot import exp

from ..encode.encoding import COUNT
from ..engine import Engine, Statement
from ..errors import PolicyError, PolicyNotSatisfied
from ..hierarchy.bound import BoundHierarchy
from ..hierarchy.hierarchy import _preview
from ..privacy.checks import class_verdicts
from ..privacy.classes import SIZE, VIOLATED, Classes, key_name
from ..privacy.models import PrivacyModel, sensitive_attributes
from ..privacy.people import people_k, person_points
from ..recode.recoding import (
    ATTRIBUTE,
    CATEGORICAL_STYLES,
    CODE,
    LEAF,
    LEAVES,
    LEVEL,
    NUMERIC_STYLES,
    PREFIX,
    STYLES,
    Assignment,
    CodedHierarchies,
    HierarchyCoding,
    numeric_kind,
)
from ..sqlgen import build as sb

if TYPE_CHECKING:
    from ..release.publish import Release

NUMERIC, ORDERED, HIERARCHICAL = "numeric", "ordered", "hierarchical"
# Cut kinds, per partition and dimension.
NULL_CUT, MEDIAN_CUT, HALF_CUT, CHILD_CUT = 0, 1, 2, 3

ROW, PART, WEIGHT, DONE, ORDINAL = "__row", "__p", "__w", "__done", "__o"
#: A part of a candidate cut: the partition, the dimension and how it is cut, and the part.
CUT_KEYS = [PART, "__d", "__width", "__kind", "__median", "__child", "__half", "__part"]
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
    coding: HierarchyCoding | None = None


@dataclass
class Partitioning:
    """What a Mondrian run produced: the assignment and the hierarchies' codes (temporary tables; :meth:`close`
    drops them) and its shape."""

    engine: Engine
    assignment: Assignment
    coded: CodedHierarchies
    dimensions: list[Dimension]
    relaxed: bool
    partitions: int
    rounds: int
    statements: int
    seconds: float
    sql: list[exp.Expression] = field(default_factory=list, repr=False)

    def close(self) -> None:
        self.engine.run(sb.drop("TABLE", self.assignment.table))
        self.coded.close()

    def summary(self) -> str:
        kind = "relaxed" if self.relaxed else "strict"
        return (f"{kind} Mondrian: {self.partitions} partitions in {self.rounds} rounds ({self.statements} SQL "
                f"statements), {self.seconds:.3f} s")


@dataclass
class MondrianResult:
    """What :meth:`Anonymizer.mondrian <duckanon.session.Anonymizer.mondrian>` did: the partitioning (its
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


def dimensions(engine: Engine, counted: exp.Table, quasi: Sequence[str],
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
    numeric = numeric_kind(engine, counted, quasi)
    weight = sb.col(COUNT)
    probes = []
    for q in quasi:
        value = sb.col(q)
        # Plain aggregates, not COUNT(DISTINCT): whether any value is known, and whether all known ones are equal.
        probes += [exp.func("COUNT", value),
                   exp.func("SUM", exp.Case().when(value.copy().is_(exp.Null()), weight.copy()).else_(sb.lit(0))),
                   exp.func("MIN", value.copy()).eq(exp.func("MAX", value.copy()))]
        if numeric[q] and q not in categorical and q not in orders:
            probes += [sb.as_double(exp.func("MIN", value.copy())), sb.as_double(exp.func("MAX", value.copy()))]
    row = iter(engine.rows(exp.select(*probes).from_(counted))[0])
    result = []
    for q in quasi:
        known, nulls, constant = next(row), next(row), next(row)
        if known == 0:
            raise PolicyError(f"quasi-identifier {q!r} is NULL in every record: it cannot be cut; drop it from the "
                              f"quasi-identifiers")
        if constant and nulls == 0:
            raise PolicyError(f"quasi-identifier {q!r} has the same value in every record: it cannot be cut and "
                              f"identifies nobody; drop it from the quasi-identifiers")
        if q in orders:
            result.append(_ordered(engine, counted, q, orders[q]))
        elif numeric[q] and q not in categorical:
            low, high = next(row), next(row)
            # One value besides NULL spans nothing: any positive normalizer will do.
            result.append(Dimension(q, NUMERIC, scale=float(high - low) or 1.0))
        elif q in hierarchies:
            result.append(Dimension(q, HIERARCHICAL, scale=float(max(len(hierarchies[q].hierarchy.rows) - 1, 1)),
                                    hierarchy=hierarchies[q], coding=HierarchyCoding.of(hierarchies[q])))
        else:
            raise PolicyError(f"categorical quasi-identifier {q!r} has neither a hierarchy nor an order: give one in "
                              f"the policy, or its values' order in orders={{{q!r}: [...]}}")
    return result


def _ordered(engine, counted: exp.Table, attribute: str, order: list) -> Dimension:
    texts = [None if v is None else str(v) for v in order]
    if len(set(texts)) != len(texts):
        doubled = sorted({t for t in texts if texts.count(t) > 1}, key=str)
        raise PolicyError(f"the order of {attribute!r} lists values twice: {_preview(doubled)}")
    value = sb.as_text(sb.col(attribute))
    listed = [t for t in texts if t is not None]
    outside = exp.select(value).from_(counted).where(
        exp.and_(value.is_(exp.Null()).not_(), value.copy().isin(*[sb.lit(t) for t in listed]).not_())).distinct()
    missing = [r[0] for r in engine.rows(outside.order_by(sb.col(attribute)).limit(11))]
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

    def __init__(self, engine: Engine, counted: exp.Table, dims: Sequence[Dimension],
                 sensitive: Sequence[str], models: Sequence[PrivacyModel], *, relaxed: bool = False,
                 person: str | None = None, progress: Callable[[str], None] | None = None):
        self.engine, self.counted, self.dims = engine, counted, list(dims)
        self.sensitive, self.models, self.relaxed = list(sensitive), list(models), relaxed
        self.person, self.progress = person, progress
        # Over people, a part's size is its people; one person may bring l values, so only a k bounds it.
        self.min_size = smallest_class(models) if person is None else people_k(models)
        # The sensitive attributes models look at go into the cells; size-only models need only counts.
        self.cell_sensitive = sensitive_attributes(self.models)
        # Over people, each sensitive attribute's values have a weight of their own: 1 on one row of each (person,
        # value), so a part counts each person's value once (WEIGHT, 1 on one row of each person, counts people).
        self.value_weights = [f"__wv{j}" for j in range(len(self.cell_sensitive))] if person is not None else []
        # Relaxed halves over people deal out whole people, in the order of value and then of people (ORDINAL).
        self.ordinal = [ORDINAL] if person is not None and relaxed else []
        # t-closeness, β-likeness and δ-disclosure compare a class with the whole table: the rounds need the table's
        # sensitive distribution.
        self.compares_with_table = any(m.compares_with_table for m in self.models)
        self.hierarchical = [i for i, d in enumerate(self.dims) if d.kind == HIERARCHICAL]
        # Numeric and ordered dimensions are cut on their value (at the median, or in halves).
        self.valued = [i for i, d in enumerate(self.dims) if d.kind != HIERARCHICAL]
        self.sql: list[exp.Expression] = []
        self.statements = 0
        self._tables: list[exp.Table] = []
        self._tag = next(_serial)

    # ----------------------------------------------------------------- plumbing
    def _run(self, statement: exp.Expression) -> None:
        self.sql.append(statement)
        self.statements += 1
        self.engine.run(statement)

    def _fetch(self, query: exp.Expression) -> list[tuple]:
        self.sql.append(query)
        self.statements += 1
        return self.engine.rows(query)

    def _execute(self, statement: Statement, parameters: list | None = None) -> list[tuple]:
        """A statement already recorded in :attr:`sql` (prepared, for the rounds); its rows."""
        self.statements += 1
        return self.engine.rows(statement, parameters)

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

    def _create(self, table: exp.Table, query: exp.Expression) -> exp.Table:
        self._run(sb.create_table_as(table, query, temporary=True))
        return table

    def _drop(self, table: exp.Table) -> None:
        self.engine.run(sb.drop("TABLE", table))
        self.statements += 1
        self._tables = [t for t in self._tables if t.name != table.name]

    def _say(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    # ------------------------------------------------------------------ the run
    def run(self) -> Partitioning:
        started = time.perf_counter()
        if self.person is None:
            self._require_root(self.counted, COUNT, [])
        coded = CodedHierarchies(self.engine, {self.dims[i].attribute: self.dims[i].coding for i in self.hierarchical})
        self.sql += coded.sql
        self.statements += len(coded.sql)
        try:
            if self.person is None:
                keys = [d.attribute for d in self.dims] + self.sensitive
                rows = self._create(self._table("rows"), self._numbered_rows(keys, coded))
            else:
                keys = [self.person]
                rows = self._create(self._table("rows"), self._people(coded))
                self._require_root(rows, COUNT, self.value_weights)
            # The rounds' statements are the same in every round (the first new partition number is a parameter)
            # and read tables whose names do not change from run to run: they are built once per shape of problem.
            self.nodes, self.levels = self._fixed("nodes"), self._fixed("levels")
            self.reference = self._fixed("reference")
            if self.hierarchical:
                self._create(self.nodes, self._nodes(coded))
                self._create(self.levels, self._levels())
            if self.compares_with_table:
                self._create(self.reference, self._reference(rows))
            previous = self._fixed("previous")
            self._create(previous, self._initial(rows))
            tables = {name: self._fixed(name) for name in ("current", "choice")}
            trees, compiled = self._round_statements(previous, tables)
            self.sql += trees
            rounds: list[exp.Table] = []
            next_id = 1
            while True:
                # Each CREATE … AS reports its rows: the parts of the partitions cut took the numbers from next_id
                # on, and a round that moves no row had no partition left to cut.
                ((parts,),) = self._execute(compiled["choice"], [next_id])
                ((moved,),) = self._execute(compiled["move"])
                if not moved:
                    break
                rounds.append(self._table("round"))
                for rename in (_rename(previous, rounds[-1]), _rename(tables["current"], previous)):
                    if len(rounds) == 1:
                        self.sql.append(rename)
                    self._execute(rename)
                self._say(f"Mondrian round {len(rounds)}: {parts} new partitions")
                next_id += parts
            rounds.append(previous)
            done = None
            for table in rounds[1:]:  # the first holds the rows as they started
                finished = exp.select(sb.col(ROW), sb.col(PART), sb.col(WEIGHT)).from_(table).where(sb.col(DONE))
                done = finished if done is None else exp.union(done, finished, distinct=False, copy=False)
            assignment_table = self._table("assignment")
            if self.person is not None:
                # A person's rows all went to one partition: their records go there, and the partition map
                # summarizes it over the records themselves (a person's point is only where the cuts placed them).
                codes: dict[str, str] = {}
                query = (exp.select(sb.col(self.person, "r"), sb.col(PART, "d").as_(GROUP, quoted=True)).distinct()
                         .from_(done.subquery("d"))
                         .join(exp.alias_(rows, "r", quoted=True),
                               on=exp.EQ(this=sb.col(ROW, "d"), expression=sb.col(ROW, "r")), join_type="INNER"))
            else:
                # The rows keep their leaf codes, which the partition map's summaries use rather than look them up.
                codes = {self.dims[i].attribute: f"__code_{i}" for i in self.hierarchical}
                query = (exp.select(*[sb.col(k, "r") for k in keys], sb.col(PART, "d").as_(GROUP, quoted=True),
                                    exp.cast(sb.col(WEIGHT, "d"), "BIGINT").as_(SHARE, quoted=True),
                                    *[exp.cast(sb.col(_e(i), "r"), "BIGINT").as_(codes[self.dims[i].attribute],
                                                                                quoted=True)
                                      for i in self.hierarchical])
                         .from_(done.subquery("d"))
                         .join(exp.alias_(rows, "r", quoted=True),
                               on=exp.EQ(this=sb.col(ROW, "d"), expression=sb.col(ROW, "r")), join_type="INNER"))
            self._create(assignment_table, query)
            partitions = self._fetch(exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(GROUP)])))
                                     .from_(assignment_table))[0][0]
            self._tables.remove(assignment_table)
            assignment = (Assignment(assignment_table, tuple(keys), group=GROUP) if self.person is not None else
                          Assignment(assignment_table, tuple(keys), group=GROUP, count=SHARE, spread=self.relaxed,
                                     codes=codes))
        except BaseException:
            coded.close()
            raise
        finally:
            for table in list(self._tables):
                self._drop(table)
        return Partitioning(self.engine, assignment, coded, self.dims, self.relaxed, int(partitions), len(rounds) - 1,
                            self.statements, time.perf_counter() - started, self.sql)

    def _round_statements(self, previous: exp.Table, tables: Mapping[str, exp.Table]
                          ) -> tuple[list[exp.Expression], dict[str, str]]:
        """A round's statements, as trees and as SQL: ``choice`` (its parameter the first new partition number) and
        ``move``; built once per shape of problem (building the trees takes longer than running them on small
        data)."""
        key = (self.engine.dialect, tuple((d.attribute, d.kind, d.scale, d.order, d.coding.bases if d.coding else None) for d in self.dims),
               tuple(self.sensitive), tuple(self.cell_sensitive), self.compares_with_table, self.relaxed, self.min_size,
               self.person is not None,
               tuple((type(m).__name__, json.dumps(m.params(), sort_keys=True, default=str)) for m in self.models))
        if key not in _ROUNDS:
            create = lambda name, query: sb.create_table_as(tables[name], query, temporary=True,  # noqa: E731
                                                            replace=name != "current")
            steps = {"cells": self._cells(previous),
                     **self._choice(exp.Table(this=sb.ident("cells")), exp.Placeholder())}
            choice = steps.pop("choice")
            statements = {"choice": create("choice", self._with(steps, choice)),
                          "move": create("current", self._with(*self._move(previous, tables["choice"])))}
            if len(_ROUNDS) >= 64:
                _ROUNDS.clear()
            _ROUNDS[key] = (list(statements.values()), {n: self.engine.prepare(s) for n, s in statements.items()})
        return _ROUNDS[key]

    @property
    def _table_weights(self) -> list[str]:
        """The weights the sensitive values' distributions are counted by: the records, or over people each
        attribute's own (each person's value once)."""
        return self.value_weights if self.person is not None else [WEIGHT]

    def _reference(self, rows: exp.Table) -> exp.Select:
        """Each combination of the models' sensitive values with its share ``__q<j>`` of the table's records (over
        people, of the people's values of attribute j)."""
        sensitive = [sb.col(x) for x in self.cell_sensitive]
        weights = [COUNT] if self.person is None else self.value_weights
        shares = [exp.Div(this=sb.as_double(exp.func("SUM", sb.col(w))),
                          expression=exp.Window(this=exp.func("SUM", exp.func("SUM", sb.col(w))))).as_(f"__q{j}",
                                                                                                      quoted=True)
                  for j, w in enumerate(weights)]
        return exp.select(*sensitive, *shares).from_(rows).group_by(*[x.copy() for x in sensitive])

    def _verdicts(self, relation: exp.Expression, keys: Sequence[str]) -> exp.Select:
        """The models' verdicts on the classes of ``relation`` under ``keys``, sized by ``__w`` (over people, the
        models of each sensitive attribute count its own weight)."""
        return class_verdicts(Classes.of(relation, keys, weight=WEIGHT), self.models, valued={
            attribute: Classes.of(relation, keys, weight=weight)
            for attribute, weight in zip(self.cell_sensitive, self.value_weights)})

    def _require_root(self, rows: exp.Table, weight: str, value_weights: Sequence[str]) -> None:
        """The whole table as one partition must satisfy the policy, or no partitioning can."""
        root = exp.select(sb.lit(0).as_("__root"), *[sb.col(s) for s in self.cell_sensitive],
                          sb.col(weight).as_(WEIGHT, quoted=True), *[sb.col(w) for w in value_weights]).from_(rows)
        verdicts = self._verdicts(root.subquery("root"), ["__root"])
        violated = self._fetch(exp.select(sb.col(VIOLATED)).from_(verdicts.subquery("v")))
        if violated and violated[0][0]:
            counted = " over people" if self.person is not None else ""
            raise PolicyNotSatisfied(
                "the table as a whole violates the policy (" + "; ".join(m.describe() for m in self.models) +
                f"{counted}), so no partition of it can satisfy it: nothing was published")

    # ------------------------------------------------------------ the records
    def _numbered_rows(self, keys: list[str], coded: CodedHierarchies) -> exp.Select:
        """Every frequency row with its number ``__row`` and each dimension's position ``__e<i>``: a number's value,
        a place in the given order, or a leaf's code (:class:`~duckanon.recode.recoding.HierarchyCoding`)."""
        # Relaxed Mondrian breaks ties in value order by row number, so there the numbers follow the rows' values;
        # strict Mondrian only needs them distinct, and numbering in the order of one integer sorts far less.
        order = keys if self.relaxed else [COUNT]
        number = exp.Window(this=exp.func("ROW_NUMBER"), order=exp.Order(
            expressions=[exp.Ordered(this=sb.col(k, "r"), nulls_first=True) for k in order]))
        query = exp.select(*[sb.col(k, "r") for k in keys], sb.col(COUNT, "r"), number.as_(ROW, quoted=True)).from_(
            exp.alias_(self.counted, "r", quoted=True))
        for i, d in enumerate(self.dims):
            value = sb.col(d.attribute, "r")
            if d.kind == NUMERIC:
                position = sb.as_double(value)
            elif d.kind == ORDERED:
                # One CASE built at once over the (small) order: chaining .when() would copy it each time.
                ifs = [exp.If(this=exp.EQ(this=sb.as_text(value.copy()), expression=sb.lit(t)), true=sb.lit(p))
                       for p, t in enumerate(d.order) if t is not None]
                null = [p for p, t in enumerate(d.order) if t is None]
                if null:
                    ifs.insert(0, exp.If(this=value.copy().is_(exp.Null()), true=sb.lit(null[0])))
                position = sb.as_double(exp.Case(ifs=ifs))
            else:
                alias = f"l{i}"
                query = query.join(coded.leaves(d.attribute).subquery(alias), join_type="LEFT", copy=False,
                                   on=exp.NullSafeEQ(this=sb.col(LEAF, alias), expression=sb.as_text(value)))
                position = sb.as_double(sb.col(CODE, alias))
            query = query.select(position.as_(_e(i), quoted=True), copy=False)
        return query

    def _people(self, coded: CodedHierarchies) -> exp.Select:
        """Under a policy that counts people, the rows Mondrian cuts: each person's distinct combinations of the
        models' sensitive values, all at the person's point (:func:`~duckanon.privacy.people.person_points` of
        their records' positions on the dimensions), numbered ``__row``, with ``__count`` 1 on one row of each person
        (so a part's weight is its people), a weight ``__wv<j>`` 1 on one row of each (person, value of attribute j)
        and the person's ordinal ``__o``.  The cuts then never part a person's rows."""
        person = sb.col(self.person)
        sensitive = [sb.col(x) for x in self.cell_sensitive]
        positions = self._numbered_rows([*[d.attribute for d in self.dims], *self.cell_sensitive, self.person], coded)
        points = person_points(positions.subquery("positions"), self.person,
                               {_e(i): sb.col(_e(i)) for i in range(len(self.dims))}, sb.col(COUNT))

        def first(partition: Sequence[exp.Expression]) -> exp.Expression:
            # Without sensitive values a person has one row; with them, the first in their order.
            if not sensitive:
                return sb.lit(1)
            order = exp.Order(expressions=[exp.Ordered(this=x.copy(), nulls_first=True) for x in sensitive])
            ordinal = exp.Window(this=exp.func("ROW_NUMBER"), partition_by=[x.copy() for x in partition], order=order)
            return exp.Case().when(ordinal.eq(sb.lit(1)), sb.lit(1)).else_(sb.lit(0))

        values = exp.select(person.copy(), *[x.copy() for x in sensitive]).distinct().from_(self.counted)
        weighed = exp.select(person.copy(), *[x.copy() for x in sensitive], first([person]).as_(COUNT, quoted=True),
                             *[first([person, x]).as_(w, quoted=True) for x, w in zip(sensitive, self.value_weights)]
                             ).from_(values.subquery("values"))
        v = lambda name: sb.col(name, "v")  # noqa: E731
        number = exp.Window(this=exp.func("ROW_NUMBER"), order=exp.Order(
            expressions=[exp.Ordered(this=v(x), nulls_first=True) for x in [self.person, *self.cell_sensitive]]))
        ordinal = exp.Window(this=exp.func("DENSE_RANK"), order=exp.Order(expressions=[exp.Ordered(this=v(self.person))]))
        return (exp.select(v(self.person), *[v(x) for x in self.cell_sensitive], v(COUNT),
                           *[v(w) for w in self.value_weights], number.as_(ROW, quoted=True),
                           ordinal.as_(ORDINAL, quoted=True), *[sb.col(_e(i), "p") for i in range(len(self.dims))])
                .from_(weighed.subquery("v"))
                .join(points.subquery("p"), join_type="INNER", on=v(self.person).eq(sb.col(self.person, "p"))))

    def _initial(self, rows: exp.Table) -> exp.Select:
        """Every frequency row in the root partition 0, still to cut."""
        # Weights are DOUBLE (exact for counts below 2^53): sums of BIGINT are HUGEINT, which windows sum slowly.
        return exp.select(sb.col(ROW), sb.lit(0).as_(PART, quoted=True),
                          sb.as_double(sb.col(COUNT)).as_(WEIGHT, quoted=True), exp.false().as_(DONE, quoted=True),
                          *[sb.col(_e(i)) for i in range(len(self.dims))],
                          *[sb.col(s) for s in self.cell_sensitive],
                          *[sb.as_double(sb.col(w)).as_(w, quoted=True) for w in self.value_weights],
                          *[sb.col(o) for o in self.ordinal]).from_(rows)

    def _nodes(self, coded: CodedHierarchies) -> exp.Select:
        """``__d, __level, __prefix, __width``: the nodes of the hierarchical dimensions, by dimension number, with
        the normalized span of the leaves under them."""
        dimension = exp.Case(this=sb.col(ATTRIBUTE), ifs=[exp.If(this=sb.lit(self.dims[i].attribute), true=sb.lit(i))
                                                         for i in self.hierarchical])
        scale = exp.Case(this=sb.col(ATTRIBUTE), ifs=[
            exp.If(this=sb.lit(self.dims[i].attribute), true=sb.lit(self.dims[i].scale)) for i in self.hierarchical])
        width = exp.Div(this=sb.as_double(sb.col(LEAVES) - sb.lit(1)), expression=scale)
        return exp.select(dimension.as_("__d", quoted=True), sb.col(LEVEL), sb.col(PREFIX),
                          width.as_("__width", quoted=True)).from_(coded.nodes_table)

    def _levels(self) -> exp.Select:
        """``__d, __level, __base, __child``: for every level above the leaves of every hierarchical dimension, the
        divisors that give a code's ancestor on it and on the level below."""
        rows = [(i, level, self.dims[i].coding.bases[level], self.dims[i].coding.bases[level - 1])
                for i in self.hierarchical for level in range(1, len(self.dims[i].coding.bases))]
        return exp.select(exp.Star()).from_(exp.values(rows, alias="levels",
                                                       columns=["__d", LEVEL, "__base", "__child"]))

    # ------------------------------------------------------------ one round
    def _pick(self, dimension: exp.Expression, alias: str | None = None) -> exp.Expression:
        """Each row's position on the dimension numbered ``dimension``."""
        return exp.Case(this=dimension, ifs=[exp.If(this=sb.lit(i), true=sb.col(_e(i), alias))
                                             for i in range(len(self.dims))])

    def _part(self, position: exp.Expression, cut: Callable[[str], exp.Column]) -> exp.Expression:
        """The part of a position under a partition's cut (columns ``__kind, __median, __child`` by ``cut``): NULL or
        not; above the median or not; the child of the lowest common ancestor its code lies under.  A half cut's
        rows are shared out separately; here they all fall in part 0."""
        return exp.Case(this=cut("__kind"), ifs=[
            exp.If(this=sb.lit(NULL_CUT), true=exp.Case(ifs=[exp.If(this=position.is_(exp.Null()), true=sb.lit(0))],
                                                         default=sb.lit(1))),
            exp.If(this=sb.lit(MEDIAN_CUT), true=exp.Case(ifs=[exp.If(this=position.copy() > cut("__median"),
                                                                      true=sb.lit(1))], default=sb.lit(0))),
            exp.If(this=sb.lit(CHILD_CUT), true=exp.IntDiv(this=exp.cast(position.copy(), "BIGINT"),
                                                           expression=cut("__child"))),
        ], default=sb.lit(0))

    def _cells(self, previous: exp.Table) -> exp.Select:
        """Every row still to cut once per dimension (a cross join with the dimension numbers), grouped into cells:
        ``__p, __d, __e``, the sensitive values the models need, and their records ``__w``."""
        sensitive = [sb.col(s) for s in [*self.cell_sensitive, *self.ordinal]]
        numbers = exp.values([(i,) for i in range(len(self.dims))], alias="dims", columns=["__d"])
        return (exp.select(sb.col(PART), sb.col("__d"), self._pick(sb.col("__d")).as_("__e", quoted=True), *sensitive,
                           *[exp.func("SUM", sb.col(w)).as_(w, quoted=True) for w in [WEIGHT, *self.value_weights]])
                .from_(previous).join(numbers, join_type="CROSS").where(sb.col(DONE).not_())
                .group_by(sb.col(PART), sb.col("__d"), self._pick(sb.col("__d")), *[x.copy() for x in sensitive]))

    def _candidates(self, cells: exp.Table) -> dict[str, exp.Select]:
        """Steps ending in ``candidates``: every partition's candidate cut on every dimension it spans, ``__p, __d,
        __width, __kind, __median, __child, __half, __n``.  The span is the smallest and largest position; the median
        the first value at which the running count of the partition's records reaches half of those with a value; the
        lowest common ancestor of a hierarchical dimension's smallest and largest code is cut into its children, one
        level down."""
        cell_key = lambda alias=None: [sb.col(PART, alias), sb.col("__d", alias)]  # noqa: E731
        steps: dict[str, exp.Select] = {}
        values: exp.Expression = cells
        if self.cell_sensitive:
            steps["values"] = (exp.select(*cell_key(), sb.col("__e"),
                                          exp.func("SUM", sb.col(WEIGHT)).as_(WEIGHT, quoted=True))
                               .from_(cells).group_by(*cell_key(), sb.col("__e")))
            values = exp.Table(this=sb.ident("values"))
        weight, e = sb.col(WEIGHT), sb.col("__e")
        stats = (exp.select(*cell_key(), exp.func("MIN", e).as_("__lo", quoted=True),
                            exp.func("MAX", e.copy()).as_("__hi", quoted=True),
                            exp.func("SUM", weight).as_("__n", quoted=True),
                            exp.func("SUM", exp.Case().when(e.copy().is_(exp.Null()), weight.copy()).else_(sb.lit(0)))
                            .as_("__nulls", quoted=True))
                 .from_(values.copy()).group_by(*cell_key()))
        medians = not self.relaxed and bool(self.valued)
        if medians:
            # One window pass over the values of the numeric and ordered dimensions: the running count, and the
            # count of all values, of each partition's records.
            total = exp.Window(this=exp.func("SUM", sb.col(WEIGHT)), partition_by=cell_key())
            running = exp.Window(this=exp.func("SUM", sb.col(WEIGHT)), partition_by=cell_key(),
                                 order=exp.Order(expressions=[exp.Ordered(this=sb.col("__e"))]),
                                 spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                                     end="CURRENT ROW"))
            valued = sb.col("__d").eq(sb.lit(self.valued[0])) if len(self.valued) == 1 else \
                sb.col("__d").isin(*[sb.lit(i) for i in self.valued])
            ranked = (exp.select(*cell_key(), sb.col("__e"), running.as_("__cum", quoted=True),
                                 total.as_("__known", quoted=True)).from_(values.copy())
                      .where(exp.and_(valued, sb.col("__e").is_(exp.Null()).not_())))
            steps["medians"] = (exp.select(*cell_key(), exp.func("MIN", sb.col("__e")).as_("__median", quoted=True))
                                .from_(ranked.subquery("ranked"))
                                .where(sb.lit(2) * sb.col("__cum") >= sb.col("__known")).group_by(*cell_key()))
        s = lambda name: sb.col(name, "s")  # noqa: E731
        d = s("__d")
        mixed = exp.and_(s("__nulls") > sb.lit(0), s("__nulls") < s("__n"))
        flat = exp.or_(s("__lo").is_(exp.Null()), s("__lo").eq(s("__hi")))
        # A hierarchical dimension that is not flat has a lowest common ancestor (a row of ``levels``), whose node
        # holds its normalized width; a value's span is normalized by the dimension's scale.
        located = sb.col(LEVEL, "lv").is_(exp.Null()).not_() if self.hierarchical else exp.false()
        kind = exp.Case(ifs=[exp.If(this=mixed, true=sb.lit(NULL_CUT)), exp.If(this=located, true=sb.lit(CHILD_CUT))],
                        default=sb.lit(HALF_CUT if self.relaxed else MEDIAN_CUT))
        scale = exp.Case(this=d.copy(), ifs=[exp.If(this=sb.lit(i), true=sb.lit(self.dims[i].scale))
                                             for i in self.valued]) if self.valued else exp.Null()
        width = exp.Case(ifs=[exp.If(this=mixed.copy(), true=sb.lit(1.0)),
                              exp.If(this=located.copy(), true=sb.col("__width", "nd") if self.hierarchical
                                     else exp.Null())],
                         default=exp.Div(this=sb.as_double(s("__hi") - s("__lo")), expression=scale))
        child = sb.col("__child", "lv") if self.hierarchical else exp.cast(exp.Null(), "BIGINT")
        query = (exp.select(s(PART), d, width.as_("__width", quoted=True), kind.as_("__kind", quoted=True),
                            (sb.col("__median", "md") if medians else exp.Null()).as_("__median", quoted=True),
                            child.as_("__child", quoted=True),
                            exp.func("FLOOR", s("__n") / sb.lit(2)).as_("__half", quoted=True), s("__n"))
                 .from_(stats.subquery("s")).where(exp.or_(mixed.copy(), flat.not_())))
        if self.hierarchical:
            # The lowest common ancestor of the smallest and largest code: the one level on which they have the same
            # ancestor and, one level down, different ones (HierarchyCoding); then its node.
            low, high = exp.cast(s("__lo"), "BIGINT"), exp.cast(s("__hi"), "BIGINT")
            ancestor = lambda code, base: exp.IntDiv(this=code.copy(), expression=sb.col(base, "lv"))  # noqa: E731
            query = query.join(exp.alias_(self.levels, "lv", quoted=True), join_type="LEFT", on=sb.and_all([
                sb.col("__d", "lv").eq(d.copy()), ancestor(low, "__base").eq(ancestor(high, "__base")),
                ancestor(low, "__child").neq(ancestor(high, "__child"))]))
            query = query.join(exp.alias_(self.nodes, "nd", quoted=True), join_type="LEFT", on=sb.and_all([
                sb.col("__d", "nd").eq(d.copy()), sb.col(LEVEL, "nd").eq(sb.col(LEVEL, "lv")),
                sb.col(PREFIX, "nd").eq(ancestor(low, "__base"))]))
        if medians:
            query = query.join(exp.alias_(exp.Table(this=sb.ident("medians")), "md", quoted=True), join_type="LEFT",
                               on=sb.and_all([sb.col(PART, "md").eq(s(PART)), sb.col("__d", "md").eq(d.copy())]))
        steps["candidates"] = query
        return steps

    def _choice(self, cells: exp.Table, first: exp.Expression) -> dict[str, exp.Select]:
        """Steps ending in ``choice``: every part of every partition that is cut, ``__p``, the cut (``__d, __kind,
        __median, __child, __half``), ``__part``, its records ``__size`` and its partition number ``__new`` (from
        ``first`` on).  A partition takes the allowable cut on its widest dimension (ties to the first); a cut is
        allowable when it makes two parts or more and every part satisfies the models (the core's class verdicts)."""
        table = lambda name: exp.Table(this=sb.ident(name))  # noqa: E731
        steps = self._candidates(cells)
        steps.update(self._parts(cells, table("candidates")))
        checked = "parts"
        if self.compares_with_table:
            steps.update(self._balanced("parts"))
            checked = "balanced"
        # The cut's description rides along as further keys of the parts' classes (it is the same for all parts of a
        # partition's cut on one dimension), so the choice needs no join back to the candidates.
        steps["verdicts"] = self._verdicts(table(checked), CUT_KEYS)
        key = {name: sb.col(key_name(j)) for j, name in enumerate(CUT_KEYS)}
        cut = [key[PART], key["__d"], key["__width"]]
        allowed = (exp.select(*[x.copy() for x in cut]).from_(table("verdicts")).group_by(*[x.copy() for x in cut])
                   .having(exp.and_(exp.func("COUNT", exp.Star()) >= sb.lit(2),
                                    exp.func("BOOL_OR", sb.col(VIOLATED)).not_())))
        # The widest allowable cut, ties to the first dimension: the largest (width, -dimension) pair.
        order = exp.Struct(expressions=[exp.PropertyEQ(this=sb.ident("w"), expression=key["__width"].copy()),
                                        exp.PropertyEQ(this=sb.ident("r"), expression=exp.Neg(this=key["__d"].copy())),
                                        exp.PropertyEQ(this=sb.ident("d"), expression=key["__d"].copy())])
        widest = exp.Dot(this=exp.func("MAX", order), expression=sb.ident("d"))
        steps["best"] = (exp.select(key[PART].copy().as_(PART, quoted=True), widest.as_("__d", quoted=True))
                         .from_(allowed.subquery("allowed")).where(key["__width"].copy() > sb.lit(0))
                         .group_by(key[PART].copy()))
        v = lambda name: sb.col(key_name(CUT_KEYS.index(name)), "v")  # noqa: E731
        new_id = exp.Window(this=exp.func("ROW_NUMBER"), order=exp.Order(
            expressions=[exp.Ordered(this=v(PART)), exp.Ordered(this=v("__part"))])) + first - sb.lit(1)
        steps["choice"] = (exp.select(*[v(name).as_(name, quoted=True) for name in CUT_KEYS if name != "__width"],
                                      sb.col(SIZE, "v").as_("__size", quoted=True), new_id.as_("__new", quoted=True))
                           .from_(exp.alias_(table("verdicts"), "v", quoted=True))
                           .join(exp.alias_(table("best"), "b", quoted=True), join_type="INNER", on=sb.and_all([
                               v(PART).eq(sb.col(PART, "b")), v("__d").eq(sb.col("__d", "b"))])))
        return steps

    def _parts(self, cells: exp.Table, candidates: exp.Table) -> dict[str, exp.Select]:
        """``parts``: the records of every candidate cut's parts: the cut and part (:data:`CUT_KEYS`), the sensitive
        values the models need, ``__w`` (and over people the values' weights)."""
        table = lambda name: exp.Table(this=sb.ident(name))  # noqa: E731
        sensitive = [sb.col(s) for s in self.cell_sensitive]
        c = lambda name: sb.col(name, "c")  # noqa: E731
        r = lambda name: sb.col(name, "r")  # noqa: E731
        joined = (exp.select(*[c(x) for x in CUT_KEYS if x != "__part"], c("__n"), r("__e"),
                             *[r(x.name) for x in sensitive], r(WEIGHT), *[r(x) for x in [*self.value_weights,
                                                                                          *self.ordinal]])
                  .from_(exp.alias_(cells.copy(), "r", quoted=True))
                  .join(exp.alias_(candidates.copy(), "c", quoted=True), join_type="INNER",
                        on=sb.and_all([c(PART).eq(r(PART)), c("__d").eq(r("__d"))])))

        def columns(part: exp.Expression, weight: exp.Expression) -> exp.Select:
            return exp.select(*[part.as_(x, quoted=True) if x == "__part" else sb.col(x) for x in CUT_KEYS],
                              *[x.copy() for x in sensitive], weight.as_(WEIGHT, quoted=True),
                              *[sb.col(w) for w in self.value_weights])

        part = self._part(sb.col("__e"), sb.col)
        if not self.relaxed:
            return {"parts": columns(part, sb.col(WEIGHT)).from_(joined.subquery("joined"))}
        half = sb.col("__kind").eq(sb.lit(HALF_CUT))
        whole = columns(part, sb.col(WEIGHT)).from_(table("joined")).where(
            exp.func("COALESCE", half.copy(), exp.false()).not_())
        if not sensitive:
            # Models that only count: the halves of a half cut are its first ⌊n/2⌋ records (people) and the rest.
            low = columns(sb.lit(0), sb.col("__half")).from_(candidates.copy()).where(half.copy())
            high = columns(sb.lit(1), sb.col("__n") - sb.col("__half")).from_(candidates.copy()).where(half.copy())
            return {"joined": joined, "parts": exp.union(exp.union(whole, low, distinct=False), high, distinct=False)}
        # The halves' sensitive values: records in the order of value (and sensitive values), those before a cell
        # decide how many of its records fall in the first ⌊n/2⌋.
        halves = self._before(table("joined"), "__e", [sb.col(PART), sb.col("__d")], half)
        return {"joined": joined, "halves": halves,
                "parts": exp.union(whole, self._dealt(table("halves"), columns), distinct=False)}

    def _before(self, rows: exp.Table, position: str, partition: Sequence[exp.Expression], half: exp.Expression,
                numbered: bool = False) -> exp.Select:
        """The rows of ``rows`` cut in halves, each with the weight before it ``__before`` in the order the halves
        are dealt: of value, then (over people) of person, the person's row of weight 1 first, then of sensitive
        values and, when ``numbered``, of row number."""
        ties = [ORDINAL] if self.person is not None else []
        order = [exp.Ordered(this=sb.col(position), nulls_first=False),
                 *[exp.Ordered(this=sb.col(t)) for t in ties],
                 *([exp.Ordered(this=sb.col(WEIGHT), desc=True)] if ties else []),
                 *[exp.Ordered(this=sb.col(s), nulls_first=False) for s in self.cell_sensitive]]
        if numbered:
            order.append(exp.Ordered(this=sb.col(ROW)))
        before = exp.Window(this=exp.func("SUM", sb.col(WEIGHT)), partition_by=[p.copy() for p in partition],
                            order=exp.Order(expressions=order),
                            spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                                end=sb.lit(1), end_side="PRECEDING"))
        return (exp.select(exp.Star(), exp.func("COALESCE", before, sb.lit(0)).as_("__before", quoted=True))
                .from_(rows).where(half))

    def _dealt(self, halves: exp.Table, columns: Callable[[exp.Expression, exp.Expression], exp.Select]
               ) -> exp.Select:
        """The rows of ``halves`` dealt into part 0 (the first ⌊n/2⌋ of the order) and part 1, as ``columns(part,
        weight)``: a row's records may fall on both sides; over people a row goes whole to the side its person's
        row of weight 1 falls on, so a person is never parted."""
        before, whole = sb.col("__before"), sb.col(WEIGHT)
        if self.person is not None:
            first = (before + whole.copy()) <= sb.col("__half")
            return exp.union(columns(sb.lit(0), whole.copy()).from_(halves).where(first),
                             columns(sb.lit(1), whole.copy()).from_(halves).where(first.copy().not_()),
                             distinct=False)
        lower = exp.func("LEAST", exp.func("GREATEST", sb.col("__half") - before, sb.lit(0)), whole.copy())
        low = columns(sb.lit(0), lower).from_(halves).where(lower.copy() > sb.lit(0))
        high = columns(sb.lit(1), whole.copy() - lower.copy()).from_(halves).where(
            whole.copy() - lower.copy() > sb.lit(0))
        return exp.union(low, high, distinct=False)

    def _balanced(self, parts: str) -> dict[str, exp.Select]:
        """``parts`` and one more class (keys -1) whose records make the sensitive values' distribution over all
        rows the whole table's.  A model that compares a class with its table (t-closeness, β-likeness, δ-disclosure)
        compares it with the distribution of the relation it is given;
        the parts hold only the partitions still being cut, once per candidate dimension.  The extra class has
        ``c * Q(v) - A(v)`` records of each sensitive combination v (``A`` its records in the parts, ``Q`` its share of
        the table, ``c = max A/Q``), so every v totals ``c * Q(v)``; its own verdict is never read.  Over people each
        attribute's weight is balanced so, by its own shares: each attribute's values then total its table's."""
        sensitive = [sb.col(x) for x in self.cell_sensitive]
        weights = self._table_weights
        by_value = (exp.select(*sensitive, *[exp.func("SUM", sb.col(w)).as_(f"__a{j}", quoted=True)
                                             for j, w in enumerate(weights)])
                    .from_(exp.Table(this=sb.ident(parts))).group_by(*[x.copy() for x in sensitive]))
        # A combination none of whose rows carries an attribute's weight has no share of it, and nothing to balance.
        ratios = [exp.func("COALESCE", exp.func("MAX", exp.Div(this=sb.col(f"__a{j}", "a"), expression=exp.func(
            "NULLIF", sb.col(f"__q{j}", "q"), sb.lit(0.0)))), sb.lit(0.0)).as_(f"__c{j}", quoted=True)
                  for j in range(len(weights))]
        scale = (exp.select(*ratios)
                 .from_(exp.alias_(exp.Table(this=sb.ident("by_value")), "a", quoted=True))
                 .join(exp.alias_(self.reference, "q", quoted=True), join_type="INNER",
                       on=sb.null_safe_join("a", "q", self.cell_sensitive)))
        extra = {w: sb.col(f"__c{j}", "c") * sb.col(f"__q{j}", "q")
                 - exp.func("COALESCE", sb.col(f"__a{j}", "a"), sb.lit(0.0)) for j, w in enumerate(weights)}
        columns = [*CUT_KEYS, *self.cell_sensitive, WEIGHT, *self.value_weights]
        balance = (exp.select(*[(sb.lit(-1) if k in (PART, "__d", "__part") else exp.Null()).as_(k, quoted=True)
                                for k in CUT_KEYS],
                              *[sb.col(x, "q") for x in self.cell_sensitive],
                              *[extra.get(w, sb.lit(0.0)).as_(w, quoted=True) for w in [WEIGHT, *self.value_weights]])
                   .from_(exp.alias_(self.reference, "q", quoted=True))
                   .join(exp.alias_(exp.Table(this=sb.ident("scale")), "c", quoted=True), join_type="CROSS")
                   .join(exp.alias_(exp.Table(this=sb.ident("by_value")), "a", quoted=True), join_type="LEFT",
                         on=sb.null_safe_join("a", "q", self.cell_sensitive)))
        balanced = exp.union(exp.select(*[sb.col(c) for c in columns]).from_(exp.Table(this=sb.ident(parts))),
                             exp.select(*[sb.col(c) for c in columns]).from_(balance.subquery("balance")),
                             distinct=False)
        return {"by_value": by_value, "scale": scale, "balanced": balanced}

    @staticmethod
    def _with(steps: Mapping[str, exp.Select], query: exp.Select) -> exp.Select:
        for name, step in steps.items():
            query = query.with_(sb.ident(name), as_=step, copy=False)
        return query

    def _move(self, previous: exp.Table, choice: exp.Table) -> tuple[dict[str, exp.Select], exp.Select]:
        """Steps and query: the rows of ``previous`` still to cut, each with its new partition and ``__done`` when its
        partition was not cut or its new part is too small to cut again; relaxed half cuts share a row's records
        between the two halves in the order of value (sensitive values, then row number, break ties; over people,
        whole people in the order of value, then of person: :meth:`_dealt`)."""
        w = lambda name: sb.col(name, "w")  # noqa: E731
        k = lambda name: sb.col(name, "k")  # noqa: E731
        carried = [ROW, *[_e(i) for i in range(len(self.dims))], *self.cell_sensitive, *self.value_weights,
                   *self.ordinal]
        done = exp.or_(k("__new").is_(exp.Null()), k("__size") < sb.lit(2 * self.min_size))
        moved = lambda alias: [*[sb.col(x, alias) for x in carried],  # noqa: E731
                               exp.func("COALESCE", k("__new"), sb.col(PART, alias)).as_(PART, quoted=True),
                               sb.col(WEIGHT, alias), done.copy().as_(DONE, quoted=True)]
        if not self.relaxed:
            # Each row meets its partition's parts and keeps the one its position falls in.
            part = self._part(self._pick(k("__d"), "w"), k)
            return {}, (exp.select(*moved("w")).from_(exp.alias_(previous, "w", quoted=True))
                        .join(exp.alias_(choice, "k", quoted=True), join_type="LEFT",
                              on=sb.and_all([k(PART).eq(w(PART)), k("__part").eq(part)]))
                        .where(w(DONE).not_()))
        table = lambda name: exp.Table(this=sb.ident(name))  # noqa: E731
        c = lambda name: sb.col(name, "c")  # noqa: E731
        cut = ["__kind", "__median", "__child", "__half"]
        steps = {
            "cuts": exp.select(sb.col(PART), sb.col("__d"), *[sb.col(x) for x in cut]).from_(choice).distinct(),
            # Every row with its partition's cut and its position on the cut dimension.
            "moving": (exp.select(*[w(x) for x in carried], w(PART), w(WEIGHT), *[c(x) for x in cut],
                                  self._pick(c("__d"), "w").as_("__v", quoted=True))
                       .from_(exp.alias_(previous, "w", quoted=True))
                       .join(exp.alias_(table("cuts"), "c", quoted=True), join_type="LEFT", on=c(PART).eq(w(PART)))
                       .where(w(DONE).not_())),
        }
        # Only rows of partitions cut in halves need their place in the order: the window sorts only them.
        half = sb.col("__kind").eq(sb.lit(HALF_CUT))
        steps["halved"] = self._before(table("moving"), "__v", [sb.col(PART)], half, numbered=True)

        def columns(part: exp.Expression, weight: exp.Expression) -> exp.Select:
            return exp.select(*[sb.col(x) for x in carried], sb.col(PART), part.as_("__part", quoted=True),
                              weight.as_(WEIGHT, quoted=True))

        whole = columns(self._part(sb.col("__v"), sb.col), sb.col(WEIGHT)).from_(table("moving")).where(
            exp.func("COALESCE", half.copy(), exp.false()).not_())
        shares = exp.union(whole, self._dealt(table("halved"), columns), distinct=False)
        return steps, (exp.select(*moved("m")).from_(shares.subquery("m"))
                       .join(exp.alias_(choice, "k", quoted=True), join_type="LEFT",
                             on=sb.and_all([k(PART).eq(sb.col(PART, "m")), k("__part").eq(sb.col("__part", "m"))])))
