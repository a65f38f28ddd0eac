"""Typed ranges: the numeric bounds of generalized numbers, released beside their labels.

**Bound columns.**  A release shows a generalized number as text (``[20, 39]``), which BI tools can neither sort nor
filter by value.  So every numeric quasi-identifier a transformation generalizes -- a full-domain generalization
along a hierarchy over a numeric column, and the ``range`` style of partition maps (Mondrian, the clustering
methods) -- is released with two more columns right after it: ``<column>_low`` and ``<column>_high``, of the
source column's type.  They are **closed** bounds of what the label stands for: ``low <= value <= high`` for every
original value the label replaces, and they are a function of the label (every record showing a label shows the same
bounds), so they reveal nothing the label does not:

- a hierarchy node: the smallest and largest of its leaves (level-0 values of the hierarchy table whose text is a
  value of the column's type), computed in SQL from the hierarchy table, never parsed from labels; an interval
  hierarchy (:meth:`~duckanon.hierarchy.hierarchy.Hierarchy.intervals`) also places values its table does not list, and
  those count as leaves of their interval too; level 0 (no generalization) is the value itself;
- a partition or cluster: its smallest and largest value (over every group showing that label).

``*`` (suppressed, the top of a hierarchy, a group mixing NULL with numbers) and NULL have NULL bounds, as has a node
without numeric leaves (e.g. where a hierarchy's NULL row goes).  The ``mean`` style (microaggregation) gets no bounds:
a group's smallest and largest value beside its mean would reveal more than the mean (with three records, all three).

The notation of the labels is :mod:`duckanon.hierarchy.notation`'s.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..engine import Engine
from ..errors import PolicyError, ReleaseCheckFailed
from ..hierarchy.hierarchy import TOP
from ..sqlgen import build as sb

#: The columns of a range relation: a label and the bounds of what it stands for.
LABEL, LOW, HIGH = "__range_label", "__range_low", "__range_high"


def low_column(attribute: str) -> str:
    return f"{attribute}_low"


def high_column(attribute: str) -> str:
    return f"{attribute}_high"


# ----------------------------------------------------------------------------------------------- the bound columns
def range_relation(rows: exp.Expression, label: str, low: str, high: str) -> exp.Select:
    """Per label of ``rows`` (not NULL, not ``*``): the smallest ``low`` and the largest ``high``."""
    labelled = sb.col(label)
    return (exp.select(labelled.as_(LABEL, quoted=True), exp.func("MIN", sb.col(low)).as_(LOW, quoted=True),
                       exp.func("MAX", sb.col(high)).as_(HIGH, quoted=True))
            .from_(rows).where(exp.and_(labelled.copy().is_(exp.Null()).not_(), labelled.copy().neq(sb.lit(TOP))))
            .group_by(labelled.copy()))


@dataclass(frozen=True)
class Ranges:
    """The bound columns of one release: per ranged attribute, a (temporary) table of its labels and their bounds
    (:data:`LABEL`, :data:`LOW`, :data:`HIGH`)."""

    relations: Mapping[str, exp.Table]

    def names(self, attribute: str) -> list[str]:
        return [attribute, low_column(attribute), high_column(attribute)] if attribute in self.relations else [
            attribute]

    def columns(self, columns: Sequence[str]) -> list[str]:
        """``columns`` with each ranged attribute's bound columns right after it."""
        return [name for column in columns for name in self.names(column)]

    def joined(self, released: exp.Expression, columns: Sequence[str]) -> exp.Expression:
        """``released`` (a query of ``columns``) with the bound columns, matched by label."""
        if not self.relations:
            return released
        query = exp.select().from_(exp.alias_(released, "ranged", quoted=True) if isinstance(released, exp.Table)
                                   else released.subquery("ranged"))
        for i, column in enumerate(columns):
            query = query.select(sb.col(column, "ranged"), copy=False)
            if column in self.relations:
                alias = f"r{i}"
                query = query.select(sb.col(LOW, alias).as_(low_column(column), quoted=True),
                                     sb.col(HIGH, alias).as_(high_column(column), quoted=True), copy=False)
                query = query.join(exp.alias_(self.relations[column], alias, quoted=True),
                                   on=exp.EQ(this=sb.col(LABEL, alias), expression=sb.col(column, "ranged")),
                                   join_type="LEFT", copy=False)
        return query

    def verify(self, reader: Engine, table: str, transformation, hierarchies: Mapping) -> None:
        """Check a written release's bound columns (:func:`bound_rows`), and as the transformation defines a label's
        bounds (:meth:`~duckanon.recode.generalization.Transformation.range_problems`)."""
        for attribute, (rows, problems) in bound_rows(reader, sb.table(table), list(self.relations)).items():
            problems += transformation.range_problems(attribute, hierarchies.get(attribute), rows)
            if problems:
                raise ReleaseCheckFailed(f"release check: the bounds of {attribute!r} do not match their labels: "
                                         f"{'; '.join(problems[:5])}")


def bound_rows(reader: Engine, released: exp.Table, attributes: Sequence[str]
               ) -> dict[str, tuple[list[tuple[str, object, object]], list[str]]]:
    """Per attribute of ``attributes``: the distinct (label, low, high) of its bound columns in ``released``, and what
    is wrong with them whatever made them: bounds that are not numbers, differ between records of one label or are
    NULL for some, shown for ``*`` or NULL, or a lower bound above the upper one.  The release is read once: its
    distinct labels and bounds, with their records, are what each attribute's bounds are judged from."""
    types = reader.types(released)
    found: dict[str, tuple[list[tuple[str, object, object]], list[str]]] = {}
    numeric = []
    for attribute in attributes:
        odd = [c for c in (low_column(attribute), high_column(attribute)) if not sb.is_numeric_type(types.get(c, ""))]
        if odd:
            found[attribute] = [], [f"bound columns {odd} are not numbers"]
        else:
            numeric.append(attribute)
    if not numeric:
        return found
    shown = [sb.col(c) for a in numeric for c in (a, low_column(a), high_column(a))]
    records = "__records"
    with reader.temporary(exp.select(*shown, exp.func("COUNT", exp.Star()).as_(records, quoted=True))
                          .from_(released).group_by(*[c.copy() for c in shown])) as labelled:
        for attribute in numeric:
            found[attribute] = _judged_bounds(reader, labelled, attribute, sb.col(records))
    return {a: found[a] for a in attributes}


def _judged_bounds(reader: Engine, labelled: exp.Table, attribute: str, records: exp.Column
                   ) -> tuple[list[tuple[str, object, object]], list[str]]:
    """:func:`bound_rows` of one attribute, from ``labelled``: the distinct labels and bounds, ``records`` each."""
    label = sb.col(attribute)
    bounds = [sb.col(low_column(attribute)), sb.col(high_column(attribute))]
    distinct = lambda c: exp.func("COUNT", exp.Distinct(expressions=[c.copy()]))  # noqa: E731
    given = lambda c: exp.func("SUM", exp.Case().when(c.copy().is_(exp.Null()).not_(), records.copy())  # noqa: E731
                               .else_(sb.lit(0)))
    query = (exp.select(label, *[distinct(c) for c in bounds], *[given(c) for c in bounds],
                        exp.func("SUM", records.copy()), exp.func("MIN", bounds[0].copy()),
                        exp.func("MAX", bounds[1].copy()))
             .from_(labelled).group_by(label.copy()))
    rows, problems = [], []
    for text, lows, highs, with_low, with_high, count, lowest, highest in reader.rows(query):
        if (lows, highs) not in ((0, 0), (1, 1)) or {with_low, with_high} - {0, count}:
            problems.append(f"{text!r} shows several bounds, or some NULL")
        elif text in (None, TOP) and with_low:
            problems.append(f"{text!r} shows bounds")
        elif with_low and lowest > highest:
            problems.append(f"{text!r} shows a lower bound above its upper bound")
        elif text not in (None, TOP):
            rows.append((text, lowest, highest))
    return rows, problems


def bounded_attributes(columns: Sequence[str], attributes: Iterable[str]) -> list[str]:
    """Those of ``attributes`` released with bound columns right after them in ``columns``."""
    return [a for a in attributes if a in columns and [low_column(a), high_column(a)] ==
            columns[columns.index(a) + 1:columns.index(a) + 3]]


def require_free(attributes: Iterable[str], columns: Sequence[str]) -> None:
    """The bound columns of ``attributes`` must not be named like released ``columns``."""
    taken = [c for a in attributes for c in (low_column(a), high_column(a)) if c in columns]
    if taken:
        raise PolicyError(f"the release would show the bounds of generalized numbers in columns {taken}, which the "
                          f"release already has: rename or drop those columns")
