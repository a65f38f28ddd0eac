"""A hierarchy bound to the table it is stored in: the SQL that maps a column's values to its levels, and the check
that the hierarchy covers every value.

A quasi-identifier's value at a level is the ``level_j`` column of its hierarchy table, reached by one LEFT JOIN on
the value's text form (NULL-safe, so a hierarchy row for NULL maps missing values), or a CASE expression for interval
hierarchies.  Level 0 is the value's text itself.  Encoding (level codes) and generalization (released labels) both
build on it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..engine import Engine
from ..errors import HierarchyError
from ..sqlgen import build as sb
from .hierarchy import TOP, Hierarchy, _preview, level_column


@dataclass(frozen=True)
class BoundHierarchy:
    """A quasi-identifier's hierarchy together with the DuckDB table it is stored in."""

    column: str
    hierarchy: Hierarchy
    table: exp.Table

    def allowed_values(self, level: int) -> set[str | None]:
        """Every value a release may show for this attribute at ``level`` (level > 0): suppression and NULL too."""
        return self.hierarchy.labels(level) | {TOP, None}


def level_expressions(bound: BoundHierarchy, levels: Sequence[int], source: str, join_alias: str
                      ) -> tuple[list[exp.Expression], exp.Join | None]:
    """The attribute's value at each of ``levels`` as expressions over ``source``, and the join they need (if any)."""
    value = sb.col(bound.column, source)
    expressions: list[exp.Expression] = []
    needs_join = False
    for level in levels:
        bound.hierarchy.check_level(level, bound.column)
        if level == 0:
            expressions.append(sb.as_text(value))
        elif (compiled := bound.hierarchy.generalize_sql(value, level)) is not None:
            expressions.append(compiled)
        else:
            expressions.append(sb.col(level_column(level), join_alias))
            needs_join = True
    join = None
    if needs_join:
        on = exp.NullSafeEQ(this=sb.col(level_column(0), join_alias), expression=sb.as_text(value))
        join = exp.Join(this=exp.alias_(bound.table, join_alias, quoted=True), on=on, kind=None, side="LEFT")
    return expressions, join


def uncovered_values(engine: Engine, source: exp.Expression, bound: BoundHierarchy) -> tuple[int, list[object]]:
    """How many distinct non-NULL values of the attribute its hierarchy does not cover, and some of them."""
    value = sb.col(bound.column)
    distinct = (exp.select(value).from_(source).where(value.is_(exp.Null()).not_()).distinct()).subquery("v")
    cuts = getattr(bound.hierarchy, "cuts", None)
    if cuts is not None:
        low, high = cuts[-1][0], cuts[-1][-1]
        outside = exp.or_(sb.col(bound.column) < sb.lit(low), sb.col(bound.column) >= sb.lit(high))
        query = exp.select(sb.col(bound.column)).from_(distinct).where(outside)
    else:
        leaf = sb.col(level_column(0))
        leaves = exp.select(leaf).from_(bound.table).where(leaf.is_(exp.Null()).not_())
        query = (exp.select(sb.col(bound.column)).from_(distinct)
                 .where(sb.as_text(sb.col(bound.column)).isin(query=leaves).not_()))
    rows = engine.rows(exp.select(exp.func("COUNT", exp.Star())).from_(query.subquery("u")))
    examples = engine.rows(query.order_by(sb.col(bound.column)).limit(10))
    return int(rows[0][0]), [r[0] for r in examples]


def require_coverage(engine: Engine, source: exp.Expression, bound: Mapping[str, BoundHierarchy]) -> None:
    for attribute, b in bound.items():
        count, examples = uncovered_values(engine, source, b)
        if count:
            raise HierarchyError(
                f"the hierarchy of {attribute!r} does not cover {count} of its values: {_preview(examples)}")
