"""Encode once, check many times.

The source is read once into a frequency table: one row per distinct combination of quasi-identifier and sensitive
values with its record count, and for every quasi-identifier and every level of its hierarchy an integer code (equal
codes ⇔ equal generalized values).  Checking a transformation is then one GROUP BY over the chosen level columns of
that small table, with no join to any hierarchy.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping, Sequence
from typing import TypeVar

import pandas as pd
from sqlglot import exp

from ..engine import Engine
from ..hierarchy.bound import BoundHierarchy, level_expressions
from ..privacy.classes import Classes
from ..sqlgen import build as sb

COUNT = "__count"
T = TypeVar("T")
_serial = itertools.count()


def code_column(attribute_index: int, level: int) -> str:
    return f"__q{attribute_index}_l{level}"


def count_combinations(engine: Engine, source: exp.Expression, attributes: Sequence[str],
                       sensitive: Sequence[str]) -> exp.Table:
    """One pass over ``source``: a temporary table of each distinct combination of the columns and its ``__count``."""
    raw = [sb.col(c) for c in [*attributes, *sensitive]]
    table = sb.table(f"__duckanon_counted_{next(_serial)}")
    query = exp.select(*raw, exp.func("COUNT", exp.Star()).as_(COUNT, quoted=True)).from_(source).group_by(*raw)
    engine.run(sb.create_table_as(table, query, temporary=True))
    return table


class Encoding:
    """A temporary frequency table of the source with per-level codes of each quasi-identifier, built from the
    source's counted combinations (:func:`count_combinations`)."""

    def __init__(self, engine: Engine, counted: exp.Table,
                 bound: Mapping[str, BoundHierarchy], sensitive: Sequence[str]):
        self.engine = engine
        self.attributes = list(bound)
        self.bound = dict(bound)
        self.sensitive = list(sensitive)
        self.table = sb.table(f"__duckanon_frequencies_{next(_serial)}")
        self._memo: dict[str, object] = {}
        self._build(counted)

    def _build(self, counted: exp.Table) -> None:
        query = exp.select(*[sb.col(s, "f") for s in self.sensitive], sb.col(COUNT, "f")).from_(
            exp.alias_(counted, "f", quoted=True))
        self.code_tables = []
        for i, attribute in enumerate(self.attributes):
            codes = sb.table(f"{self.table.name}_codes_{i}")
            self.engine.run(sb.create_table_as(codes, self._codes(counted, i, attribute), temporary=True, replace=True))
            self.code_tables.append(codes)
            on = exp.NullSafeEQ(this=sb.col(attribute, "f"), expression=sb.col(attribute, f"c{i}"))
            query = query.join(exp.alias_(codes, f"c{i}", quoted=True), on=on, join_type="LEFT")
            query = query.select(*[sb.col(code_column(i, level), f"c{i}")
                                   for level in range(self.bound[attribute].hierarchy.levels)])
        self.engine.run(sb.create_table_as(self.table, query, temporary=True, replace=True))

    def _codes(self, source: exp.Expression, index: int, attribute: str) -> exp.Select:
        """Distinct values of one attribute with each level's generalized value and a dense integer code for it."""
        bound = self.bound[attribute]
        levels = list(range(bound.hierarchy.levels))
        distinct = exp.select(sb.col(attribute)).from_(source).distinct().subquery("v")
        generalized, join = level_expressions(bound, levels, "v", "h")
        values = exp.select(sb.col(attribute, "v"), *[g.as_(f"__g{level}", quoted=True)
                                                      for level, g in zip(levels, generalized)]).from_(distinct)
        if join is not None:
            values = values.join(join)
        rank = lambda level: exp.Window(  # noqa: E731
            this=exp.func("DENSE_RANK"), order=exp.Order(expressions=[exp.Ordered(this=sb.col(f"__g{level}"))]))
        return exp.select(sb.col(attribute), *[rank(level).as_(code_column(index, level), quoted=True)
                                               for level in levels],
                          *[sb.col(f"__g{level}") for level in levels]).from_(values.subquery("g"))

    def level_frame(self, index: int) -> pd.DataFrame:
        """One attribute's distinct values: ``code_<j>`` and ``label_<j>`` (generalized value) for every level."""
        levels = range(self.bound[self.attributes[index]].hierarchy.levels)
        query = exp.select(*[sb.col(code_column(index, j)).as_(f"code_{j}") for j in levels],
                           *[sb.col(f"__g{j}").as_(f"label_{j}") for j in levels]).from_(self.code_tables[index])
        return self.engine.frame(query)

    def labels(self, index: int, level: int) -> dict[int, str | None]:
        """Code → generalized value of one attribute on one level."""
        query = (exp.select(sb.col(code_column(index, level)), sb.col(f"__g{level}"))
                 .from_(self.code_tables[index]).distinct())
        return dict(self.engine.rows(query))

    def classes(self, levels: Mapping[str, int]) -> Classes:
        """The equivalence classes of the full-domain generalization to ``levels``."""
        keys = []
        for i, attribute in enumerate(self.attributes):
            self.bound[attribute].hierarchy.check_level(levels[attribute], attribute)
            keys.append(code_column(i, levels[attribute]))
        return Classes.of(self.table, keys, weight=COUNT)

    def memo(self, key: str, compute: Callable[[], T]) -> T:
        """What ``compute`` derives from this encoding, computed once (under ``key``) and kept while it lives: the
        searches on one encoded source share what they read from its frequency table."""
        if key not in self._memo:
            self._memo[key] = compute()
        return self._memo[key]

    def close(self) -> None:
        self._memo.clear()
        for table in [self.table, *self.code_tables]:
            self.engine.run(sb.drop("TABLE", table))
