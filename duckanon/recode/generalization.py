"""Compiling generalizations to SQL.

A quasi-identifier's value at a level is the ``level_j`` column of its hierarchy table, reached by one LEFT JOIN on
the value's text form (NULL-safe, so a hierarchy row for NULL maps missing values), or a CASE expression for interval
hierarchies.  Level 0 is the value's text itself.  Generalized columns are VARCHAR; a release adds typed bounds of
generalized numbers (:meth:`Transformation.ranges`, :mod:`duckanon.recode.ranges`).
"""

from __future__ import annotations

import math
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence

from sqlglot import exp

from ..engine import Engine
from ..errors import PolicyError
from ..hierarchy.bound import BoundHierarchy, level_expressions
from ..hierarchy.hierarchy import level_column
from ..sqlgen import build as sb
from .ranges import Ranges, range_relation, require_free

SOURCE = "src"
# In a local recoding's assignment, the step that generalizes a combination of quasi-identifiers.
STEP = "__step"
LEAF_LABEL, LEAF_VALUE = "__leaf_label", "__leaf_value"


def _from_source(source: exp.Expression) -> exp.Expression:
    return exp.alias_(source, SOURCE, quoted=True) if isinstance(source, exp.Table) else source.subquery(SOURCE)


def generalize(source: exp.Expression, columns: Sequence[str], bound: Mapping[str, BoundHierarchy],
               levels: Mapping[str, int]) -> exp.Select:
    """SELECT ``columns`` of ``source`` with each quasi-identifier generalized to its level."""
    select = exp.select().from_(_from_source(source))
    for i, column in enumerate(columns):
        if column in bound:
            (expression,), join = level_expressions(bound[column], [levels[column]], SOURCE, f"h{i}")
            if join is not None:
                select = select.join(join)
            select = select.select(expression.as_(column, quoted=True))
        else:
            select = select.select(sb.col(column, SOURCE))
    return select


class Transformation(ABC):
    """How a release recodes the quasi-identifiers: it compiles to a SELECT over the source.

    Full-domain generalization (one level per attribute) is one; per-record partition or cluster maps of the
    partitioning and clustering algorithms are others.  Suppression, checking and publishing do not care which.
    """

    #: What a release's info calls it.
    kind: str
    #: Whether a missing value in the release matches any value when its classes are counted (cell suppression).
    missing_matches_any = False
    #: Whether a release groups its alike records within the recoding (one pass over the source) rather than from
    #: the recoded table (two): DuckDB plans a recoding with windows over common table expressions, as a partition
    #: map's, 2.5 times slower under a GROUP BY, and groups a recoding by joins alone within it in 0.6 of the time.
    groups_within_recoding = False

    @abstractmethod
    def compile(self, source: exp.Expression, columns: Sequence[str],
                hierarchies: Mapping[str, BoundHierarchy]) -> exp.Select:
        """SELECT ``columns`` of ``source``, quasi-identifiers recoded (VARCHAR)."""

    @abstractmethod
    def allowed_values(self, attribute: str, bound: BoundHierarchy) -> set[str | None] | None:
        """The values a release may show for ``attribute``, or None when the original values may show."""

    @abstractmethod
    def describe(self) -> dict:
        """A JSON-able description for the release's metadata."""

    def ranges(self, engine: Engine, source: exp.Expression, columns: Sequence[str],
               hierarchies: Mapping[str, BoundHierarchy], materialize: Callable[[exp.Expression], exp.Table]
               ) -> Ranges:
        """The bound columns of the numbers this transformation generalizes (:mod:`duckanon.recode.ranges`): per such
        attribute, its labels and the bounds of what each stands for.  ``materialize`` turns a query into a
        temporary table the caller drops.  By default there are none."""
        return Ranges({})

    def range_problems(self, attribute: str, bound: BoundHierarchy | None,
                       rows: Sequence[tuple[str, object, object]]) -> list[str]:
        """What is wrong with a written release's distinct (label, low, high) of ``attribute`` by this
        transformation's definition of a label's bounds, computed apart from the SQL that wrote them."""
        return []


class FullDomainGeneralization(Transformation):
    """Every value of an attribute generalized to the same level of its hierarchy."""

    kind = "full-domain generalization"
    groups_within_recoding = True  # joins with the hierarchies' tables and CASE expressions, no windows

    def __init__(self, levels: Mapping[str, int]):
        self.levels = dict(levels)

    def validate(self, hierarchies: Mapping[str, BoundHierarchy]) -> FullDomainGeneralization:
        unknown = [a for a in self.levels if a not in hierarchies]
        if unknown:
            raise PolicyError(f"levels given for columns that are not quasi-identifiers: {unknown}")
        missing = [a for a in hierarchies if a not in self.levels]
        if missing:
            raise PolicyError(f"no level given for quasi-identifiers {missing}")
        for attribute, level in self.levels.items():
            hierarchies[attribute].hierarchy.check_level(level, attribute)
        return self

    def compile(self, source, columns, hierarchies):
        self.validate(hierarchies)
        return generalize(source, columns, hierarchies, self.levels)

    def allowed_values(self, attribute, bound):
        level = self.levels[attribute]
        return None if level == 0 else bound.allowed_values(level)

    def describe(self):
        return {"full-domain generalization": self.levels}

    def ranges(self, engine, source, columns, hierarchies, materialize):
        """A hierarchy node's bounds: the smallest and largest of its leaves -- the hierarchy table's level-0 values
        that are numbers of the column's type, and, on levels computed without the table (interval hierarchies, level
        0), the source's values the level places under the node."""
        self.validate(hierarchies)
        return leveled_ranges(engine, source, columns, hierarchies, materialize,
                              {a: [level] for a, level in self.levels.items()})

    def range_problems(self, attribute, bound, rows):
        return level_range_problems(bound, self.levels[attribute], rows)


def leveled_ranges(engine: Engine, source: exp.Expression, columns: Sequence[str],
                   hierarchies: Mapping[str, BoundHierarchy], materialize: Callable[[exp.Expression], exp.Table],
                   levels: Mapping[str, Sequence[int]]) -> Ranges:
    """The bounds of the labels numeric attributes show on ``levels`` (per attribute, the levels its records are
    generalized to): per label, the smallest and largest leaf under it on any of them."""
    types = engine.types(source)
    ranged = [a for a in hierarchies if sb.is_numeric_type(types[a])]
    require_free(ranged, columns)
    placing = [a for a in ranged if any(_placed_without_table(hierarchies[a], level) for level in levels[a])]
    values = materialize(_distinct_values(source, placing)) if placing else None
    relations = {}
    for attribute in ranged:
        own = None if values is None else _values_of(values, attribute)
        leaves = [_leaves(hierarchies[attribute], level, types[attribute], own) for level in levels[attribute]]
        union = leaves[0]
        for more in leaves[1:]:
            union = exp.union(union, more, distinct=False)
        relations[attribute] = materialize(range_relation(union.subquery("leaves"), LEAF_LABEL, LEAF_VALUE,
                                                          LEAF_VALUE))
    return Ranges(relations)


def _placed_without_table(bound: BoundHierarchy, level: int) -> bool:
    """Whether ``level`` labels a value without the hierarchy's table (an interval hierarchy's levels, level 0): the
    source's values are then leaves too."""
    return level_expressions(bound, [level], SOURCE, "h")[1] is None


def _grouped_in(attribute: str) -> str:
    return f"__grouped_{attribute}"


def _distinct_values(source: exp.Expression, attributes: Sequence[str]) -> exp.Select:
    """Each of ``attributes``' distinct values in ``source``, in one reading of it: a row per value of one attribute
    (grouping sets), which ``__grouped_<attribute>`` = 0 marks as that attribute's."""
    sets = exp.GroupingSets(expressions=[exp.Tuple(expressions=[sb.col(a)]) for a in attributes])
    return exp.select(*[sb.col(a) for a in attributes], *[
        exp.Anonymous(this="GROUPING", expressions=[sb.col(a)]).as_(_grouped_in(a), quoted=True) for a in attributes
    ]).from_(_from_source(source)).group_by(sets)


def _values_of(values: exp.Table, attribute: str) -> exp.Select:
    """``attribute``'s distinct values from :func:`_distinct_values`' table."""
    return exp.select(sb.col(attribute)).from_(values).where(sb.col(_grouped_in(attribute)).eq(sb.lit(0)))


def _leaves(bound: BoundHierarchy, level: int, type_name: str, values: exp.Select | None) -> exp.Select:
    """Each leaf of the attribute's hierarchy (and each of the source's ``values`` the level places without the
    table) with its label on ``level``."""
    leaf = sb.col(level_column(0))
    typed = exp.TryCast(this=leaf, to=exp.DataType.build(type_name, dialect=sb.DIALECT))
    # A text such as '47.5' casts to the INTEGER 48: only leaves that are numbers of the type count.
    exact = sb.as_double(typed.copy()).eq(exp.TryCast(this=leaf.copy(), to=exp.DataType.build("DOUBLE")))
    leaves = (exp.select(sb.col(level_column(level)).as_(LEAF_LABEL, quoted=True),
                         typed.as_(LEAF_VALUE, quoted=True)).from_(bound.table).where(exact))
    (label,), join = level_expressions(bound, [level], SOURCE, "h")
    if join is not None:
        return leaves
    placed = exp.select(label.as_(LEAF_LABEL, quoted=True),
                        sb.col(bound.column, SOURCE).as_(LEAF_VALUE, quoted=True)).from_(_from_source(values))
    return exp.union(leaves, placed, distinct=False)


def level_range_problems(bound: BoundHierarchy, level: int, rows: Sequence[tuple[str, object, object]]) -> list[str]:
    """What is wrong with a release's distinct (label, low, high) of an attribute generalized to ``level``: each
    label's bounds must span its leaves in the hierarchy (computed here from its rows, apart from the SQL)."""
    hierarchy = bound.hierarchy
    leaves: dict[str | None, list[float]] = {}
    for row in hierarchy.rows:
        number = _number(row[0])
        if number is not None:
            leaves.setdefault(row[level], []).append(number)
    unlisted = level > 0 and hierarchy.generalize_sql(sb.col(bound.column), level) is not None
    problems = []
    for label, low, high in rows:
        low, high = (None if b is None else float(b) for b in (low, high))
        under = leaves.get(label, [])
        if level == 0:
            expected = (_number(label),) * 2
        elif unlisted:
            # Values the table does not list are leaves too: the bounds hold the listed ones and lie within the
            # interval.
            try:
                lowest, highest = hierarchy.interval(level, label)
            except KeyError:
                problems.append(f"{label!r} is not an interval of level {level}")
                continue
            if low is None or not (lowest <= low <= min(under, default=low) and
                                   max(under, default=high) <= high < highest):
                problems.append(f"{label!r} shows [{low}, {high}], not within its interval around its leaves")
            continue
        else:
            expected = (min(under), max(under)) if under else (None, None)
        if (low, high) != expected:
            problems.append(f"{label!r} shows [{low}, {high}], its leaves span {list(expected)}")
    return problems


def _assigned(select: exp.Select, assignment: exp.Table, keys: Sequence[str]) -> exp.Select:
    """``select`` (over the source) joined with ``assignment`` (as ``a``) on ``keys``, the source's original values of
    the combinations it lists (a policy's strata first: within a stratum)."""
    on = sb.and_all(exp.NullSafeEQ(this=sb.col(q, SOURCE), expression=sb.col(q, "a")) for q in keys)
    return select.join(exp.alias_(assignment, "a", quoted=True), on=on, join_type="LEFT")


class LocalGeneralization(Transformation):
    """Local recoding as ARX does it (``ARXResult.optimizeIterative``): full-domain generalizations in steps, each of
    the records the steps before it left suppressed, so that a record's quasi-identifiers take the levels of its own
    step.  ``steps`` are the levels of each step; ``assignment`` a table of the quasi-identifier combinations of the
    records past step 0 (the quasi-identifiers' original values) with their step (:data:`STEP`, from 1); records it
    does not list are generalized by step 0."""

    kind = "local recoding"

    def __init__(self, steps: Sequence[Mapping[str, int]], assignment: exp.Table | None,
                 records: Sequence[int] = (), strata: Sequence[str] = ()):
        if not steps:
            raise PolicyError("local recoding needs at least one step's levels")
        self.steps = [FullDomainGeneralization(levels) for levels in steps]
        self.assignment, self.strata = assignment, list(strata)
        self.records = list(records)

    def levels_of(self, attribute: str) -> list[int]:
        """The distinct levels the steps generalize ``attribute`` to, in the order they first appear."""
        return list(dict.fromkeys(step.levels[attribute] for step in self.steps))

    def compile(self, source, columns, hierarchies):
        for step in self.steps:
            step.validate(hierarchies)
        select = exp.select().from_(_from_source(source))
        step = exp.Literal.number(0)
        if self.assignment is not None and len(self.steps) > 1:
            select = _assigned(select, self.assignment, [*self.strata, *hierarchies])
            step = exp.func("COALESCE", sb.col(STEP, "a"), exp.Literal.number(0))
        for i, column in enumerate(columns):
            if column not in hierarchies:
                select = select.select(sb.col(column, SOURCE))
                continue
            levels = self.levels_of(column)
            expressions, join = level_expressions(hierarchies[column], levels, SOURCE, f"h{i}")
            if join is not None:
                select = select.join(join)
            by_level = dict(zip(levels, expressions))
            if len(levels) == 1:
                value = expressions[0]
            else:
                value = exp.Case()
                for number, generalization in enumerate(self.steps):
                    value = value.when(step.copy().eq(exp.Literal.number(number)),
                                       by_level[generalization.levels[column]].copy())
            select = select.select(value.as_(column, quoted=True))
        return select

    def allowed_values(self, attribute, bound):
        allowed: set[str | None] = set()
        for step in self.steps:
            values = step.allowed_values(attribute, bound)
            if values is None:
                return None
            allowed |= values
        return allowed

    def describe(self):
        return {"local recoding": [step.levels for step in self.steps],
                **({"records per step": self.records} if self.records else {})}

    def ranges(self, engine, source, columns, hierarchies, materialize):
        for step in self.steps:
            step.validate(hierarchies)
        return leveled_ranges(engine, source, columns, hierarchies, materialize,
                              {a: self.levels_of(a) for a in hierarchies})

    def range_problems(self, attribute, bound, rows):
        """A label's bounds hold when they are right on one of the levels the attribute is generalized to."""
        problems = []
        for row in rows:
            each = [level_range_problems(bound, level, [row]) for level in self.levels_of(attribute)]
            if all(each):
                problems.extend(each[0])
        return problems


def _number(text: str | None) -> float | None:
    try:
        number = float(text)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def suppressed_cell(index: int) -> str:
    """In a cell suppression's assignment, whether the ``index``-th quasi-identifier's value is suppressed."""
    return f"__suppressed_{index}"


class CellSuppression(Transformation):
    """Full-domain generalization to ``levels``, then single values of some records replaced by a missing value
    (NULL), as sdcMicro's ``localSuppression`` does.  ``assignment`` lists the combinations of quasi-identifiers
    (their original values, within a stratum of ``strata`` when the policy has them) that lose values, with one
    boolean per quasi-identifier (:func:`suppressed_cell`, in the hierarchies' order); None when no value is
    suppressed.  ``suppressed``: the cells suppressed per attribute;
    ``records``: the records that lose a value.

    A release of it counts a missing value as matching any value (:attr:`missing_matches_any`): a record's class is
    every record compatible with it, so its checks, ``verify`` and risk figures count compatible records."""

    kind = "cell suppression"
    missing_matches_any = True

    def __init__(self, levels: Mapping[str, int], assignment: exp.Table | None,
                 suppressed: Mapping[str, int] | None = None, records: int | None = None, strata: Sequence[str] = ()):
        self.generalization = FullDomainGeneralization(levels)
        self.assignment, self.strata = assignment, list(strata)
        self.suppressed = dict(suppressed or {})
        self.records = records

    def compile(self, source, columns, hierarchies):
        select = self.generalization.compile(source, columns, hierarchies)
        if self.assignment is None:
            return select
        quasi = list(hierarchies)
        select = _assigned(select, self.assignment, [*self.strata, *quasi])
        for expression in select.expressions:
            if expression.alias in hierarchies:
                flag = sb.col(suppressed_cell(quasi.index(expression.alias)), "a")
                expression.set("this", exp.Case().when(flag, exp.Null()).else_(expression.this))
        return select

    def allowed_values(self, attribute, bound):
        allowed = self.generalization.allowed_values(attribute, bound)
        return None if allowed is None else allowed | {None}

    def describe(self):
        return {"cell suppression": {"levels": self.generalization.levels, "suppressed cells": self.suppressed,
                                     **({"records": self.records} if self.records is not None else {})}}

    def ranges(self, engine, source, columns, hierarchies, materialize):
        return self.generalization.ranges(engine, source, columns, hierarchies, materialize)

    def range_problems(self, attribute, bound, rows):
        return self.generalization.range_problems(attribute, bound, rows)
