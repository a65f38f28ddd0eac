"""Encode once, check many times.

The source is read once into a frequency table: one row per distinct combination of quasi-identifier and sensitive
values with its record count, and for every quasi-identifier and every level of its hierarchy an integer code (equal
codes ⇔ equal generalized values).  Checking a transformation is then one GROUP BY over the chosen level columns of
that small table, with no join to any hierarchy.
"""

from __future__ import annotations

import copy
import functools
import itertools
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np
from sqlglot import exp

from ..engine import Engine
from ..hierarchy.bound import BoundHierarchy, level_expressions
from ..hierarchy.shares import log_domain_shares, log_domain_size
from ..privacy.classes import Classes, Pricing
from ..sqlgen import build as sb

COUNT = "__count"
T = TypeVar("T")
_serial = itertools.count()


def code_column(attribute_index: int, level: int) -> str:
    return f"__q{attribute_index}_l{level}"


def price_column(attribute_index: int) -> str:
    """In priced classes, a record's log10 domain share of one attribute's value."""
    return f"__price_{attribute_index}"


def level_price_column(level: int) -> str:
    """In a price table (:meth:`Encoding.prices`), the log10 domain share of an original value's generalization."""
    return f"__price_l{level}"


def count_combinations(engine: Engine, source: exp.Expression, attributes: Sequence[str],
                       sensitive: Sequence[str]) -> exp.Table:
    """One pass over ``source``: a temporary table of each distinct combination of the columns and its ``__count``."""
    raw = [sb.col(c) for c in [*attributes, *sensitive]]
    table = sb.table(f"__duckanon_counted_{next(_serial)}")
    query = exp.select(*raw, exp.func("COUNT", exp.Star()).as_(COUNT, quoted=True)).from_(source).group_by(*raw)
    engine.run(sb.create_table_as(table, query, temporary=True))
    return table


@dataclass(frozen=True)
class LevelValues:
    """One attribute's distinct values, row by row: per level, their codes and their generalized values (labels)."""

    codes: list[np.ndarray]
    labels: list[list[str | None]]

    def __len__(self) -> int:
        return len(self.codes[0])

    def kept(self, mask: np.ndarray) -> LevelValues:
        """The values where ``mask`` is true."""
        positions = np.flatnonzero(mask)
        return LevelValues([codes[positions] for codes in self.codes],
                           [[labels[p] for p in positions] for labels in self.labels])


class Encoding:
    """A temporary frequency table of the source with per-level codes of each quasi-identifier, built from the
    source's counted combinations (:func:`count_combinations`); and, given a population's counted quasi-identifier
    combinations, the population's frequency table in the same codes (:attr:`population_table`), with its
    ``population_carried`` columns (a policy's person).  Under a policy with ``strata``, their columns are carried
    too and lead every class's key as the keys of its table (:meth:`classes`); :meth:`strata_parts` splits the
    table by them."""

    def __init__(self, engine: Engine, counted: exp.Table,
                 bound: Mapping[str, BoundHierarchy], sensitive: Sequence[str], population: exp.Table | None = None,
                 population_carried: Sequence[str] = (), strata: Sequence[str] = ()):
        self.engine = engine
        self.attributes = list(bound)
        self.bound = dict(bound)
        self.sensitive = list(sensitive)
        self.strata = list(strata)
        self.table = sb.table(f"__duckanon_frequencies_{next(_serial)}")
        self.population_table = None if population is None else sb.table(f"{self.table.name}_population")
        self._memo: dict[str, object] = {}
        self._price_tables: list[exp.Table] = []
        self._build(counted, population, population_carried)
        # The tables :meth:`close` drops: a part shares the codes with the encoding it was taken from.
        self._owned = [self.table, *self.code_tables, *([self.population_table] if population is not None else [])]

    def part(self, rows: exp.Expression, population_rows: exp.Expression | None = None) -> Encoding:
        """The rows of :attr:`table` the condition ``rows`` holds for, as an encoding of its own in the same codes (a
        search of some of the records, as local recoding runs on those a generalization suppresses): a temporary
        table of its own, closed apart from this encoding, which must outlive it.  ``population_rows``: the
        population's rows it keeps (a stratum's), in a table of its own; without it the part shares the population."""
        part = copy.copy(self)
        part.table = sb.table(f"__duckanon_frequencies_{next(_serial)}")
        part._memo, part._price_tables = {}, []
        self.engine.run(sb.create_table_as(part.table, exp.select(exp.Star()).from_(self.table).where(rows),
                                           temporary=True))
        part._owned = [part.table]
        if population_rows is not None and self.population_table is not None:
            part.population_table = sb.table(f"{part.table.name}_population")
            part._owned.append(part.population_table)
            self.engine.run(sb.create_table_as(part.population_table, exp.select(exp.Star()).from_(
                self.population_table).where(population_rows), temporary=True))
        return part

    def strata_parts(self) -> list[tuple[tuple, Encoding]]:
        """Each stratum's values (a tuple, in :attr:`strata`'s order) with its rows as a :meth:`part` of no strata (and
        its population's rows as the part's population): within a stratum the records form one table.  The caller
        closes the parts."""
        columns = [sb.col(c) for c in self.strata]
        values = self.engine.rows(exp.select(*columns).from_(self.table).distinct().order_by(
            *[exp.Ordered(this=c.copy(), nulls_first=False) for c in columns]))
        parts = []
        try:
            for stratum in values:
                within = sb.and_all(exp.NullSafeEQ(this=sb.col(c), expression=sb.lit(v))
                                    for c, v in zip(self.strata, stratum))
                part = self.part(within, within.copy())
                part.strata = []
                parts.append((tuple(stratum), part))
        except BaseException:
            for _, part in parts:
                part.close()
            raise
        return parts

    def _build(self, counted: exp.Table, population: exp.Table | None, population_carried: Sequence[str]) -> None:
        self.code_tables = []
        for i, attribute in enumerate(self.attributes):
            codes = sb.table(f"{self.table.name}_codes_{i}")
            values = [counted] if population is None else [counted, population]
            self.engine.run(sb.create_table_as(codes, self._codes(values, i, attribute), temporary=True, replace=True))
            self.code_tables.append(codes)
        self.engine.run(sb.create_table_as(self.table, self._coded(counted, [*self.sensitive, *self.strata]),
                                           temporary=True, replace=True))
        if population is not None:
            self.engine.run(sb.create_table_as(self.population_table, self._coded(population, population_carried),
                                               temporary=True, replace=True))

    def _coded(self, counted: exp.Table, sensitive: Sequence[str]) -> exp.Select:
        """``counted``'s rows with every level's code of every quasi-identifier, its ``sensitive`` columns and count."""
        query = exp.select(*[sb.col(s, "f") for s in sensitive], sb.col(COUNT, "f")).from_(
            exp.alias_(counted, "f", quoted=True))
        for i, (attribute, codes) in enumerate(zip(self.attributes, self.code_tables)):
            on = exp.NullSafeEQ(this=sb.col(attribute, "f"), expression=sb.col(attribute, f"c{i}"))
            query = query.join(exp.alias_(codes, f"c{i}", quoted=True), on=on, join_type="LEFT")
            query = query.select(*[sb.col(code_column(i, level), f"c{i}")
                                   for level in range(self.bound[attribute].hierarchy.levels)])
        return query

    def _codes(self, sources: Sequence[exp.Expression], index: int, attribute: str) -> exp.Select:
        """Distinct values of one attribute in ``sources`` with each level's generalized value and a dense integer
        code for it."""
        bound = self.bound[attribute]
        levels = list(range(bound.hierarchy.levels))
        selects = [exp.select(sb.col(attribute)).from_(source) for source in sources]
        distinct = functools.reduce(lambda a, b: exp.union(a, b, distinct=True), selects[1:],
                                    selects[0].distinct()).subquery("v")
        generalized, join = level_expressions(bound, levels, "v", "h")
        # The level expressions are this query's own (a big CASE for an interval hierarchy): aliased, not copied.
        values = exp.select(sb.col(attribute, "v"), *[g.as_(f"__g{level}", quoted=True, copy=False)
                                                      for level, g in zip(levels, generalized)]).from_(distinct)
        if join is not None:
            values = values.join(join)
        rank = lambda level: exp.Window(  # noqa: E731
            this=exp.func("DENSE_RANK"), order=exp.Order(expressions=[exp.Ordered(this=sb.col(f"__g{level}"))]))
        return exp.select(sb.col(attribute), *[rank(level).as_(code_column(index, level), quoted=True)
                                               for level in levels],
                          *[sb.col(f"__g{level}") for level in levels]).from_(values.subquery("g"))

    def decoded(self, rows: exp.Expression, carried: Sequence[exp.Expression]) -> exp.Select:
        """``carried`` (expressions over ``rows``, as ``r``) and each quasi-identifier's original value in place of
        the level-0 codes ``rows`` hold (:func:`code_column` of level 0)."""
        query = exp.select(*carried).from_(sb.derived(rows, "r"))
        for i, (attribute, codes) in enumerate(zip(self.attributes, self.code_tables)):
            leaf = code_column(i, 0)
            query = query.join(exp.alias_(codes, f"c{i}", quoted=True), join_type="INNER",
                               on=sb.col(leaf, "r").eq(sb.col(leaf, f"c{i}")))
            query = query.select(sb.col(attribute, f"c{i}").as_(attribute, quoted=True))
        return query

    def level_values(self, index: int) -> LevelValues:
        """One attribute's distinct values, read once: their code and generalized value on every level."""
        def read() -> LevelValues:
            levels = range(self.bound[self.attributes[index]].hierarchy.levels)
            query = exp.select(*[sb.col(code_column(index, j)).as_(f"code_{j}") for j in levels],
                               *[sb.col(f"__g{j}").as_(f"label_{j}") for j in levels]).from_(self.code_tables[index])
            columns = self.engine.arrays(query)
            # A missing value's label is NULL on every level: masked in the array, None in the list.
            return LevelValues([np.asarray(columns[f"code_{j}"], dtype=np.int64) for j in levels],
                               [columns[f"label_{j}"].tolist() for j in levels])
        return self.memo(f"level values {index}", read)

    def labels(self, index: int, level: int) -> dict[int, str | None]:
        """Code → generalized value of one attribute on one level."""
        return self.labels_at({index: level})[index]

    def labels_at(self, levels: Mapping[int, int]) -> dict[int, dict[int, str | None]]:
        """:meth:`labels` of each attribute (its index) at its level of ``levels``, in one query: a row per original
        value, small, rather than a DISTINCT per attribute (on Spark, a job each)."""
        stacked = functools.reduce(
            lambda a, b: exp.union(a, b, distinct=False, copy=False),
            [exp.select(sb.lit(i).as_("__attribute", quoted=True), sb.col(code_column(i, level)),
                        sb.col(f"__g{level}")).from_(self.code_tables[i]) for i, level in levels.items()])
        labels: dict[int, dict[int, str | None]] = {i: {} for i in levels}
        for index, code, label in self.engine.rows(stacked):
            labels[index][code] = label
        return labels

    def classes(self, levels: Mapping[str, int], priced: bool = False) -> Classes:
        """The equivalence classes of the full-domain generalization to ``levels``; ``priced``: with each record's
        log10 domain shares (:class:`~duckanon.privacy.classes.Pricing`), for models that price classes."""
        keys = list(self.strata)
        for i, attribute in enumerate(self.attributes):
            self.bound[attribute].hierarchy.check_level(levels[attribute], attribute)
            keys.append(code_column(i, levels[attribute]))
        tables = len(self.strata)
        population = None if self.population_table is None else Classes.of(self.population_table, keys, weight=COUNT,
                                                                           table_keys=tables)
        if not priced:
            return Classes.of(self.table, keys, weight=COUNT, population=population, table_keys=tables)
        relation = exp.select(exp.Column(this=exp.Star(), table=sb.ident("f"))).from_(
            exp.alias_(self.table, "f", quoted=True))
        for i, (attribute, prices) in enumerate(zip(self.attributes, self.price_tables())):
            relation = relation.join(exp.alias_(prices, f"p{i}", quoted=True), join_type="LEFT", on=sb.col(
                code_column(i, 0), "f").eq(sb.col(code_column(i, 0), f"p{i}"))).select(
                sb.col(level_price_column(levels[attribute]), f"p{i}").as_(price_column(i), quoted=True))
        pricing = Pricing(tuple(price_column(i) for i in range(len(self.attributes))), self.most_information())
        return Classes.of(relation.subquery("priced"), keys, weight=COUNT, population=population, pricing=pricing,
                          table_keys=tables)

    def prices(self, index: int) -> dict[str, np.ndarray]:
        """One attribute's original values (``code_0``, the code column's name) with the log10 domain share of their
        generalized value on every level (:func:`level_price_column`), as columns."""
        def compute() -> dict[str, np.ndarray]:
            hierarchy = self.bound[self.attributes[index]].hierarchy
            values = self.level_values(index)
            return {code_column(index, 0): values.codes[0],
                    **{level_price_column(j): np.asarray(log_domain_shares(hierarchy, j, values.labels[j]),
                                                         dtype=np.float64) for j in range(hierarchy.levels)}}
        return self.memo(f"prices {index}", compute)

    def price_tables(self) -> list[exp.Table]:
        """:meth:`prices` of every attribute as temporary tables, made once."""
        def create() -> list[exp.Table]:
            tables = []
            for i in range(len(self.attributes)):
                table = sb.table(f"{self.table.name}_prices_{i}")
                with self.engine.registered(self.prices(i)) as frame:
                    self.engine.run(sb.create_table_as(table, exp.select(exp.Star()).from_(frame), temporary=True,
                                                       replace=True))
                tables.append(table)
            self._price_tables = tables
            return tables
        return self.memo("price tables", create)

    def records(self) -> int:
        """The records of the frequency table (its counts summed), counted once."""
        total = exp.func("COALESCE", exp.func("SUM", sb.col(COUNT)), sb.lit(0))
        return self.memo("records", lambda: int(self.engine.value(exp.select(total).from_(self.table))))

    def most_information(self) -> float:
        """ARX's maxIL: log10 of the product of the quasi-identifiers' domain sizes."""
        return sum(log_domain_size(self.bound[a].hierarchy) for a in self.attributes)

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """What ``compute`` derives from this encoding, computed once (under ``key``) and kept while it lives: the
        searches on one encoded source share what they read from its frequency table."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def close(self) -> None:
        self._memo.clear()
        for table in [*self._owned, *self._price_tables]:
            self.engine.run(sb.drop("TABLE", table))
