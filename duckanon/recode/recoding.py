"""Publishing a per-record partition or cluster assignment: the partition-map transformation.

Partitioning and clustering algorithms (Mondrian, MDAV, k-member clustering, …) decide which *group* each record
belongs to.  This module is the one way to turn such a decision into a release: :class:`PartitionMap` is a
:class:`~duckanon.recode.generalization.Transformation`, so :func:`~duckanon.release.publish.publish`
suppresses, verifies and writes it like any full-domain generalization, and :meth:`PartitionMap.metrics` measures it
with the core's metric definitions.  Quasi-identifiers without a hierarchy (``None`` in the policy) are fine here.

**The assignment.**  An :class:`Assignment` is a DuckDB table (usually temporary) with key columns, a group column
(any type with equality) and optionally a count column.  Its rows say which group which records of the source go to.
Records are named by the values of *key columns* of the source (NULL-safe: NULL matches NULL):

- a unique record id the source has (``keys=("id",)``);
- :data:`RECORD`, a pseudo-column: the record's number 1..n in the order of all released columns.  :func:`numbered`
  adds it to a source, so an algorithm that works record by record numbers the source with it, and the publish
  numbers it again the same way.  Records equal in every released column are interchangeable, so how such ties are
  numbered does not change the release;
- any columns such that records agreeing on them may be treated alike, e.g. the quasi-identifiers and sensitive
  attributes: Mondrian works on that frequency table, and the other columns ride along.

Every record matching a row goes to its group, so each record must match exactly one row; ``count`` then says how
many records a row stands for.  With ``spread=True`` the records sharing key values may be spread over several
groups: each row takes ``count`` of them, dealt out in the order of all released columns (groups in ascending order),
so publishing twice gives the same release.  :meth:`PartitionMap.misplaced` counts the records an assignment does not
place exactly once (a written release would fail its record count check).

When the keys include every recoded quasi-identifier and the rows carry counts (Mondrian's frequency table), the
groups' generalized values and the metrics are computed from the assignment table itself, weighted by the counts,
instead of from every record: on millions of records that is the difference between seconds and a minute.

A publish reads the groups' summaries three times (the metrics, the numbers' bounds, the recoding), and each would
be a pass over every record: :meth:`PartitionMap.summarized` makes them one table first (and the records with their
groups another, where the summaries come from the records), which all three read.

**Lowest common ancestors by numbers.**  :class:`HierarchyCoding` numbers a hierarchy's leaves so that every node is
the leaves whose codes share a prefix; a group's lowest common ancestor then follows from two integer aggregates, the
smallest and largest code, and one join with the hierarchy's nodes (:class:`CodedHierarchies` keeps the codes and
nodes of several hierarchies in temporary tables).  An assignment may carry its rows' codes (``Assignment.codes``), as
Mondrian's does, and the summaries then look nothing up.

**Output styles**, one per quasi-identifier (every quasi-identifier must have one):

- ``range`` (numeric): ``[lo, hi]``, the group's smallest and largest value (:mod:`duckanon.hierarchy.notation`), released with
  typed bound columns ``<column>_low`` / ``<column>_high`` (:mod:`duckanon.recode.ranges`);
- ``mean`` (numeric): the group's mean (microaggregation);
- ``lca`` (categorical, needs the attribute's hierarchy): the lowest common ancestor of the group's values;
- ``set`` (categorical): the group's distinct values, sorted, as ``{a,b,c}``.

NULL is a value of its own, as everywhere in duckanon: a group whose values are all NULL shows NULL; a group mixing
NULL with other values shows ``*`` (for ``lca`` only when the hierarchy has no row for NULL: no node covers both).
Released values are VARCHAR; the bound columns of ``range`` have the source column's type.

**Costs.**  Per record and attribute (seed 002's LM and Xu et al.'s NCP, as :mod:`duckanon.utility.metrics` defines them):
numeric styles ``(hi - lo) / (U - L)`` over the source's range (for ``mean`` too: the mean stands for that range);
``lca`` ``(leaves under the ancestor - 1) / (leaves - 1)`` and NCP ``leaves under it / leaves`` (0 for a leaf);
``set`` the same with the group's distinct values over the attribute's domain (the order given, else the source's
distinct values); ``*`` costs 1.
"""

from __future__ import annotations

import contextlib
import copy
import itertools
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from ..engine import Engine
from ..errors import HierarchyError, PolicyError
from ..hierarchy.bound import BoundHierarchy
from ..hierarchy.hierarchy import TOP, level_column
from ..hierarchy.notation import SqlNumberFormat, close_to, parse_closed
from ..privacy.checks import class_verdicts
from ..privacy.classes import SIZE, VIOLATED, WEIGHT, Classes
from ..privacy.models import PrivacyModel, sensitive_attributes
from ..sqlgen import build as sb
from ..utility.metrics import (
    AverageClassSize,
    Discernibility,
    Loss,
    NodeTotals,
    NormalizedCertaintyPenalty,
)
from .generalization import SOURCE, Transformation
from .ranges import Ranges, range_relation, require_free

RECORD = "__record"
NUMERIC_STYLES = ("range", "mean")
CATEGORICAL_STYLES = ("lca", "set")
STYLES = NUMERIC_STYLES + CATEGORICAL_STYLES

#: Column names of :class:`HierarchyCoding`'s relations.
ATTRIBUTE, LEAF, CODE = "__attribute", "__leaf", "__code"
LEVEL, PREFIX, LABEL, LEAVES = "__level", "__prefix", "__label", "__leaves"
#: Codes are compared as DOUBLE beside numbers, which holds integers exactly up to 2^53.
_MOST_CODES = 2 ** 53

_GROUP = "__group_id"
_RECORDS = "__records"
_GROUP_RECORDS = "__group_records"
_ORDINAL = "__ordinal"
_UPTO = "__upto"
_WEIGHT = "__weight"
_ASSIGNED = "__duckanon_assigned"
_WEIGHTED = "__duckanon_weighted"
_SUMMARIES = "__duckanon_summaries"
_serial = itertools.count()


def _cost_column(kind: str, index: int) -> str:
    return f"__{kind}_{index}"


def numbered(source: exp.Expression, columns: Sequence[str]) -> exp.Select:
    """``source`` with :data:`RECORD`: each record's number 1..n in the order of ``columns`` (the released ones)."""
    number = exp.Window(this=exp.func("ROW_NUMBER"),
                        order=exp.Order(expressions=[exp.Ordered(this=sb.col(c), nulls_first=True) for c in columns]))
    return exp.select(exp.Star(), number.as_(RECORD, quoted=True)).from_(_aliased(source, "numbered_source"))


def _aliased(relation: exp.Expression, alias: str) -> exp.Expression:
    if isinstance(relation, exp.Table):
        return exp.alias_(relation, alias, quoted=True)
    return relation.subquery(alias)


def numeric_kind(engine: Engine, relation: exp.Expression, columns: Sequence[str]) -> dict[str, bool]:
    """Whether each column of ``relation`` is numeric in DuckDB (integers, decimals, floating point)."""
    types = engine.types(relation)
    return {c: sb.is_numeric_type(types[c]) for c in columns}


@dataclass
class _Summary:
    """One attribute's summary of a group: ``aggregates`` (name -> aggregate over the group's rows, joined to
    ``leaf_join`` when given), and ``label``, ``lm``, ``ncp`` and the numeric ``bounds`` over those (alias ``g``,
    joined to ``node_join``)."""

    aggregates: dict[str, exp.Expression]
    label: exp.Expression
    lm: exp.Expression
    ncp: exp.Expression
    leaf_join: exp.Join | None = None
    node_join: exp.Join | None = None
    bounds: tuple[exp.Expression, exp.Expression] | None = None  # the group's smallest and largest value (``range``)


@dataclass(frozen=True)
class HierarchyCoding:
    """A hierarchy's leaves numbered so that every node is the set of leaves whose codes share a prefix.

    Digit ``m`` of a leaf is the place of its level-``m`` ancestor among that node's siblings (the children of its
    level ``m+1`` node, or of one virtual root above the top level), in label order; ``F_m`` is the most children
    any node has on level ``m``; ``B_0 = 1`` and ``B_{m+1} = B_m F_m`` (:attr:`bases`).  A leaf's code is
    ``sum(digit_m * B_m)``, so its ancestor on level ``m`` is ``code // B_m``, codes sort like the leaves under
    their ancestors from the top down, and the lowest common ancestor of a set of leaves is the lowest level on
    which its smallest and largest code have the same ancestor (level ``height + 1`` is the virtual root).  Two
    integer aggregates (MIN and MAX of the codes) thus place any group of values, with no per-level labels."""

    bound: BoundHierarchy
    bases: tuple[int, ...]  # B_0 .. B_{height+1}

    @classmethod
    def of(cls, bound: BoundHierarchy) -> HierarchyCoding:
        rows, top = bound.hierarchy.rows, bound.hierarchy.height
        bases = [1]
        for level in range(top + 1):
            children: dict[object, set] = {}
            for row in rows:  # the hierarchy's rows (metadata), not records
                children.setdefault(row[level + 1] if level < top else None, set()).add(row[level])
            bases.append(bases[-1] * max(len(c) for c in children.values()))
        if bases[-1] > _MOST_CODES:
            raise HierarchyError(f"the hierarchy of {bound.column!r} has too many nodes on too many levels to number "
                                 f"its leaves ({bases[-1]} codes, at most 2^53): merge levels or nodes")
        return cls(bound, tuple(bases))

    @property
    def height(self) -> int:
        return self.bound.hierarchy.height

    def coded(self) -> exp.Select:
        """The hierarchy table's rows (``level_0`` … ``level_h``) with each leaf's ``__code``."""
        top = self.height
        code: exp.Expression | None = None
        for level in range(top + 1):
            siblings = [sb.col(level_column(level + 1))] if level < top else []
            place = exp.Window(this=exp.func("DENSE_RANK"), partition_by=siblings, order=exp.Order(
                expressions=[exp.Ordered(this=sb.col(level_column(level)), nulls_first=False)])) - sb.lit(1)
            term = place if self.bases[level] == 1 else place * sb.lit(self.bases[level])
            code = term if code is None else exp.Add(this=code, expression=term)
        return exp.select(*[sb.col(level_column(j)) for j in range(top + 1)],
                          exp.cast(code, "BIGINT").as_(CODE, quoted=True)).from_(self.bound.table)

    def leaves(self) -> exp.Select:
        """``__leaf, __code``: every original value's text (NULL for a row for missing values) and its code."""
        return exp.select(sb.col(level_column(0)).as_(LEAF, quoted=True), sb.col(CODE)).from_(
            self.coded().subquery("coded"))

    def nodes(self, labels: bool = True) -> exp.Query:
        """``__level, __prefix, [__label,] __leaves``: every node on levels 0 … height + 1 (the virtual root, labelled
        ``*``) with the number of leaves under it."""
        branches = []
        for level in range(self.height + 2):
            root = level > self.height
            prefix = sb.lit(0) if root else self.ancestor(sb.col(CODE), level)
            label = sb.lit(TOP) if root else exp.func("MIN", sb.col(level_column(level)))
            branch = exp.select(sb.lit(level).as_(LEVEL, quoted=True), prefix.as_(PREFIX, quoted=True),
                                *([label.as_(LABEL, quoted=True)] if labels else []),
                                exp.func("COUNT", exp.Star()).as_(LEAVES, quoted=True)
                                ).from_(self.coded().subquery("coded"))
            branches.append(branch if root else branch.group_by(prefix.copy()))
        union = branches[0]
        for branch in branches[1:]:
            union = exp.union(union, branch, distinct=False, copy=False)
        return union

    def base(self, level: exp.Expression) -> exp.Expression:
        """``B_level`` for a level given as an expression."""
        return exp.Case(this=level, ifs=[exp.If(this=sb.lit(j), true=sb.lit(b)) for j, b in enumerate(self.bases)])

    def ancestor(self, code: exp.Expression, level: int | exp.Expression) -> exp.Expression:
        """The prefix naming a code's ancestor on ``level``."""
        base = sb.lit(self.bases[level]) if isinstance(level, int) else self.base(level)
        return exp.IntDiv(this=code, expression=base)

    def lowest_common_level(self, low: exp.Expression, high: exp.Expression) -> exp.Expression:
        """The level of the lowest common ancestor of the leaves from code ``low`` to code ``high``."""
        ifs = [exp.If(this=low.copy().eq(high.copy()), true=sb.lit(0))]
        ifs += [exp.If(this=self.ancestor(low.copy(), j).eq(self.ancestor(high.copy(), j)), true=sb.lit(j))
                for j in range(1, self.height + 1)]
        return exp.Case(ifs=ifs, default=sb.lit(self.height + 1))


class CodedHierarchies:
    """Hierarchies' codes (:class:`HierarchyCoding`) in two temporary tables, for queries that use them many times:
    ``coded`` (``__attribute``, ``level_0`` …, ``__code``: every leaf) and ``nodes`` (``__attribute, __level,
    __prefix, __label, __leaves``: every node).  :meth:`close` drops them."""

    def __init__(self, engine: Engine, codings: Mapping[str, HierarchyCoding]):
        self.engine = engine
        self.codings = dict(codings)
        self.sql: list[exp.Expression] = []  # the statements that made the tables
        tag = next(_serial)
        self.coded, self.nodes_table = sb.table(f"__duckanon_coded_{tag}"), sb.table(f"__duckanon_nodes_{tag}")
        if not self.codings:
            return
        height = max(c.height for c in self.codings.values())
        branches = [exp.select(sb.lit(a).as_(ATTRIBUTE, quoted=True),
                               *[sb.col(level_column(j)) if j <= c.height else
                                 exp.cast(exp.Null(), "VARCHAR").as_(level_column(j), quoted=True)
                                 for j in range(height + 1)], sb.col(CODE)).from_(c.coded().subquery("coded"))
                    for a, c in self.codings.items()]
        union = branches[0]
        for branch in branches[1:]:
            union = exp.union(union, branch, distinct=False, copy=False)
        self._create(self.coded, union)
        # Every node: each leaf's ancestor on each level, as a prefix of its code.
        levels = exp.values([(a, j, b, j > c.height) for a, c in self.codings.items() for j, b in enumerate(c.bases)],
                            alias="levels", columns=[ATTRIBUTE, LEVEL, "__base", "__root"])
        level = sb.col(LEVEL, "levels")
        label = exp.Case(ifs=[exp.If(this=sb.col("__root", "levels"), true=sb.lit(TOP))],
                         default=exp.Case(this=level, ifs=[exp.If(this=sb.lit(j), true=sb.col(level_column(j), "c"))
                                                           for j in range(height + 1)]))
        prefix = exp.IntDiv(this=sb.col(CODE, "c"), expression=sb.col("__base", "levels"))
        nodes = (exp.select(sb.col(ATTRIBUTE, "c"), level.as_(LEVEL, quoted=True), prefix.as_(PREFIX, quoted=True),
                            exp.func("MIN", label).as_(LABEL, quoted=True),
                            exp.func("COUNT", exp.Star()).as_(LEAVES, quoted=True))
                 .from_(exp.alias_(self.coded, "c", quoted=True))
                 .join(levels, join_type="INNER", on=sb.col(ATTRIBUTE, "levels").eq(sb.col(ATTRIBUTE, "c")))
                 .group_by(sb.col(ATTRIBUTE, "c"), level.copy(), prefix.copy()))
        self._create(self.nodes_table, nodes)

    @classmethod
    def of(cls, engine: Engine, hierarchies: Mapping[str, BoundHierarchy]) -> CodedHierarchies:
        return cls(engine, {a: HierarchyCoding.of(b) for a, b in hierarchies.items()})

    def _create(self, table: exp.Table, query: exp.Expression) -> None:
        statement = sb.create_table_as(table, query, temporary=True)
        self.sql.append(statement)
        self.engine.run(statement)

    def leaves(self, attribute: str) -> exp.Select:
        """``__leaf, __code`` of one attribute's hierarchy."""
        return (exp.select(sb.col(level_column(0)).as_(LEAF, quoted=True), sb.col(CODE)).from_(self.coded)
                .where(sb.col(ATTRIBUTE).eq(sb.lit(attribute))))

    def nodes(self, attribute: str) -> exp.Select:
        """``__level, __prefix, __label, __leaves`` of one attribute's hierarchy."""
        return (exp.select(sb.col(LEVEL), sb.col(PREFIX), sb.col(LABEL), sb.col(LEAVES)).from_(self.nodes_table)
                .where(sb.col(ATTRIBUTE).eq(sb.lit(attribute))))

    def close(self) -> None:
        for table in (self.nodes_table, self.coded):
            self.engine.run(sb.drop("TABLE", table))


@dataclass(frozen=True)
class Assignment:
    """Which group the records of a source go to: ``table`` has the ``keys`` columns, ``group`` and maybe ``count``
    (the records each row stands for); ``spread`` when records with equal keys may go to several groups.

    See the module's docstring for how records are named (a record id, :data:`RECORD`, or any columns records may be
    treated alike by).  ``codes`` may name, per attribute, a column holding each row's leaf code as the partition
    map's :class:`CodedHierarchies` numbers it: summaries of the rows then need not look the values up."""

    table: exp.Table
    keys: tuple[str, ...]
    group: str = "group_id"
    count: str | None = None
    spread: bool = False
    codes: Mapping[str, str] = field(default_factory=dict)

    def __post_init__(self):
        if not self.keys:
            raise PolicyError("an assignment needs at least one key column naming the records")
        if self.spread and self.count is None:
            raise PolicyError("an assignment that spreads records with equal keys over groups needs their count")
        object.__setattr__(self, "keys", tuple(self.keys))

    def _keyed(self, source: exp.Expression, columns: Sequence[str]) -> exp.Select:
        return numbered(source, columns) if RECORD in self.keys else exp.select(exp.Star()).from_(
            _aliased(source, "keyed_source"))

    def assigned(self, source: exp.Expression, columns: Sequence[str]) -> exp.Select:
        """The source's ``columns`` with each record's group as ``__group_id``: one row per assigned record."""
        records = self._keyed(source, columns)
        if self.spread:
            ordinal = exp.Window(this=exp.func("ROW_NUMBER"), partition_by=[sb.col(k) for k in self.keys],
                                 order=exp.Order(expressions=[exp.Ordered(this=sb.col(c), nulls_first=True)
                                                              for c in columns]))
            records = exp.select(exp.Star(), ordinal.as_(_ORDINAL, quoted=True)).from_(records.subquery("records"))
        rows = exp.select(*[sb.col(k) for k in self.keys], sb.col(self.group).as_(_GROUP, quoted=True)).from_(self.table)
        on = sb.null_safe_join("r", "a", self.keys)
        if self.spread:
            upto = exp.Window(this=exp.func("SUM", sb.col(self.count)), partition_by=[sb.col(k) for k in self.keys],
                              order=exp.Order(expressions=[exp.Ordered(this=sb.col(self.group))]),
                              spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                                  end="CURRENT ROW"))
            rows = rows.select(sb.col(self.count).as_("__share", quoted=True), upto.as_(_UPTO, quoted=True))
            ordinal = sb.col(_ORDINAL, "r")
            on = sb.and_all([on, ordinal > sb.col(_UPTO, "a") - sb.col("__share", "a"),
                             ordinal <= sb.col(_UPTO, "a")])
        return (exp.select(*[sb.col(c, "r") for c in columns], sb.col(_GROUP, "a"))
                .from_(records.subquery("r")).join(rows.subquery("a"), on=on, join_type="INNER"))

    def weighted(self, columns: Sequence[str]) -> exp.Select:
        """The assignment's own rows as weighted records: the key ``columns``, ``__group_id``, ``__weight`` and the
        code columns."""
        return exp.select(*[sb.col(c) for c in columns], sb.col(self.group).as_(_GROUP, quoted=True),
                          sb.col(self.count).as_(_WEIGHT, quoted=True),
                          *[sb.col(c) for c in self.codes.values()]).from_(self.table)


class ColumnRecoding(ABC):
    """A column a partition map recodes record by record besides the quasi-identifiers (seed 003's personalized
    sensitive value): a hook of the map.  The map recodes the quasi-identifiers of the records read with the columns
    the hook :attr:`reads` too, then the hook recodes its column over that."""

    #: Source columns the recoding needs besides the released ones; records are numbered by these too.
    reads: Sequence[str] = ()

    @abstractmethod
    def recode(self, recoded: exp.Subquery, columns: Sequence[str]) -> exp.Select:
        """SELECT ``columns`` of ``recoded`` (the quasi-identifiers recoded, :attr:`reads` beside the released
        columns), with the hook's column recoded."""

    @abstractmethod
    def describe(self) -> dict:
        """Entries added to the release's description of the transformation."""


class PartitionMap(Transformation):
    """Every record's quasi-identifiers replaced by a summary of its group (see the module's docstring).

    ``styles`` gives each quasi-identifier's output style (``range``, ``mean``, ``lca``, ``set``); ``orders`` the
    value order of categorical attributes cut along an order (their domain for ``set`` costs); ``description`` is
    merged into the release's transformation metadata (e.g. the algorithm and its parameters); ``coded``, the
    hierarchies' codes as tables (:class:`CodedHierarchies`) when the caller holds them, saves reading the hierarchies
    again (without, the queries number their leaves themselves); ``recoding`` recodes one more column
    (:class:`ColumnRecoding`)."""

    kind = "recoding by groups"

    def __init__(self, assignment: Assignment, styles: Mapping[str, str], *,
                 orders: Mapping[str, Sequence[object]] | None = None, description: Mapping | None = None,
                 coded: CodedHierarchies | None = None, recoding: ColumnRecoding | None = None):
        unknown = {a: s for a, s in styles.items() if s not in STYLES}
        if unknown:
            attribute, style = next(iter(unknown.items()))
            raise PolicyError(f"output style {style!r} of {attribute!r} is not one of {', '.join(STYLES)}")
        if not styles:
            raise PolicyError("a partition map needs an output style for at least one quasi-identifier")
        self.assignment = assignment
        self.styles = dict(styles)
        self.orders = {a: list(v) for a, v in (orders or {}).items()}
        self.description = dict(description or {})
        self.coded = coded
        self.recoding = recoding
        # Tables :meth:`summarized` made, which the metrics, bounds and recoding then read: every group's summary,
        # and the assigned records of the columns named.
        self.summaries_table: exp.Table | None = None
        self.assigned_table: tuple[exp.Table, tuple[str, ...]] | None = None

    # ------------------------------------------------------------ validation
    def require_styles(self, quasi_identifiers: Sequence[str]) -> None:
        """Every quasi-identifier has a style, and nothing else does: a QI without one would be released raw."""
        missing = [q for q in quasi_identifiers if q not in self.styles]
        if missing:
            raise PolicyError(f"the partition map gives no output style for quasi-identifiers {missing}")
        extra = [a for a in self.styles if a not in quasi_identifiers]
        if extra:
            raise PolicyError(f"the partition map gives output styles for columns that are not quasi-identifiers: "
                              f"{extra}")

    def _validate(self, columns: Sequence[str], hierarchies: Mapping[str, BoundHierarchy]) -> None:
        absent = [a for a in self.styles if a not in columns]
        if absent:
            raise PolicyError(f"the partition map recodes columns the release does not keep: {absent}")
        lacking = [a for a, s in self.styles.items() if s == "lca" and a not in hierarchies]
        if lacking:
            raise PolicyError(f"output style 'lca' needs a hierarchy, and {lacking} have none; use 'set'")

    def misplaced(self, engine: Engine, source: exp.Expression, columns: Sequence[str]) -> int:
        """How many records of ``source`` the assignment does not place exactly once (0 when it is complete): those
        no row assigns, those two rows assign, and (with counts) those a key's counts miss or claim in excess."""
        a = self.assignment
        keys = [sb.col(k) for k in a.keys]
        per_key = (exp.select(*keys, exp.func("COUNT", exp.Star()).as_("__records", quoted=True))
                   .from_(a._keyed(source, columns).subquery("r")).group_by(*[k.copy() for k in keys]))
        counted = exp.func("SUM", sb.col(a.count)) if a.count is not None else exp.func("COUNT", exp.Star())
        rows = (exp.select(*[k.copy() for k in keys], exp.func("COUNT", exp.Star()).as_("__rows", quoted=True),
                           counted.as_("__counted", quoted=True))
                .from_(a.table).group_by(*[k.copy() for k in keys]))
        records = exp.func("COALESCE", sb.col("__records", "r"), sb.lit(0))
        matched = exp.func("COALESCE", sb.col("__rows", "a"), sb.lit(0))
        claimed = exp.func("COALESCE", sb.col("__counted", "a"), sb.lit(0))
        if a.spread:
            wrong = exp.func("ABS", records - claimed)
        else:
            # Every record of a key joins each of the key's rows: placed once only when there is exactly one.
            wrong = exp.func("ABS", records - records.copy() * matched)
            if a.count is not None:
                wrong = wrong + exp.func("ABS", records.copy() - claimed)
        query = (exp.select(exp.func("COALESCE", exp.func("SUM", wrong), sb.lit(0)))
                 .from_(per_key.subquery("r"))
                 .join(rows.subquery("a"), on=sb.null_safe_join("r", "a", a.keys), join_type="FULL OUTER"))
        return int(engine.rows(query)[0][0])

    @property
    def summarizes_assignment(self) -> bool:
        """Whether the groups' values come from the assignment's rows (keys hold every recoded column, and counts
        weigh the rows) rather than from the source's records."""
        return self.assignment.count is not None and all(a in self.assignment.keys for a in self.styles)

    # ------------------------------------------------------------ compiling
    def _read(self, columns: Sequence[str]) -> Sequence[str]:
        """The columns records are read and numbered by: the released ones and those the recoding hook reads (the
        ones the groups were assigned by)."""
        if self.recoding is None:
            return columns
        return list(columns) + [c for c in self.recoding.reads if c not in columns]

    def compile(self, source, columns, hierarchies):
        read = self._read(columns)
        self._validate(read, hierarchies)
        recoded = self._recoded(source, read, hierarchies)
        return recoded if self.recoding is None else self.recoding.recode(recoded.subquery("recoded"), columns)

    def _summaries(self, relation: exp.Expression, hierarchies: Mapping[str, BoundHierarchy], weighted: bool,
                   costs: bool, coded: CodedHierarchies | None, bounds: bool = False) -> exp.Select:
        """One row per group of ``relation`` (records or weighted rows with ``__group_id``): its generalized value
        per styled attribute, when ``costs`` its records ``__group_records`` and the cost columns ``__lm_<i>`` /
        ``__ncp_<i>``, and when ``bounds`` the smallest and largest value of each ``range`` attribute (``__lower_<i>``,
        ``__upper_<i>``).

        One aggregation over the group's rows, then a join per ``lca`` attribute with its hierarchy's nodes, which
        turns the smallest and largest leaf code into the lowest common ancestor (:class:`HierarchyCoding`)."""
        aggregated = (exp.select(sb.col(_GROUP, SOURCE), exp.func("COUNT", exp.Star()).as_(_RECORDS, quoted=True))
                      .from_(exp.alias_(relation, SOURCE, quoted=True)).group_by(sb.col(_GROUP, SOURCE)))
        summaries = exp.select(sb.col(_GROUP, "g"))
        if costs:
            records = exp.func("SUM", sb.col(_WEIGHT, SOURCE)) if weighted else exp.func("COUNT", exp.Star())
            aggregated = aggregated.select(records.as_(_GROUP_RECORDS, quoted=True), copy=False)
            summaries = summaries.select(sb.col(_GROUP_RECORDS, "g"), copy=False)
        joins = []
        for i, (attribute, style) in enumerate(self.styles.items()):
            part = self._summary(i, attribute, style, hierarchies.get(attribute), relation, weighted, coded)
            aggregated = aggregated.select(*[e.as_(name, quoted=True) for name, e in part.aggregates.items()],
                                           copy=False)
            if part.leaf_join is not None:
                aggregated = aggregated.join(part.leaf_join, copy=False)
            if part.node_join is not None:
                joins.append(part.node_join)
            summaries = summaries.select(part.label.as_(attribute, quoted=True), copy=False)
            if costs:
                summaries = summaries.select(part.lm.as_(_cost_column("lm", i), quoted=True),
                                             part.ncp.as_(_cost_column("ncp", i), quoted=True), copy=False)
            if bounds and part.bounds is not None:
                summaries = summaries.select(*[b.as_(b.name, quoted=True) for b in part.bounds], copy=False)
        summaries = summaries.from_(aggregated.subquery("g", copy=False), copy=False)
        for join in joins:
            summaries = summaries.join(join, copy=False)
        return summaries

    def _assigned(self, source: exp.Expression, columns: Sequence[str]) -> tuple[exp.Table, exp.Select | None]:
        """The records of ``source`` with their groups (:meth:`Assignment.assigned`): the table :meth:`summarized`
        made of them where it holds ``columns``, else a CTE's name and its query."""
        if self.assigned_table is not None and set(columns) <= set(self.assigned_table[1]):
            return self.assigned_table[0], None
        return exp.Table(this=sb.ident(_ASSIGNED)), self.assignment.assigned(source, columns)

    def _rows(self, source: exp.Expression, columns: Sequence[str]) -> tuple[exp.Table, exp.Select | None, bool]:
        """The rows groups are summarized over (a table, or a CTE's name and its query), and whether they are weighted
        (the assignment's own rows, see :attr:`summarizes_assignment`) rather than the assigned records."""
        if self.summarizes_assignment:
            return exp.Table(this=sb.ident(_WEIGHTED)), self.assignment.weighted(list(self.styles)), True
        return *self._assigned(source, columns), False

    def _recoded(self, source: exp.Expression, columns: Sequence[str], hierarchies: Mapping[str, BoundHierarchy]
                 ) -> exp.Select:
        """The released columns with quasi-identifiers replaced by their group's summary."""
        assigned, definition = self._assigned(source, columns)
        summaries = self.summaries_table if self.summaries_table is not None else sb.table(_SUMMARIES)
        projection = [sb.col(c, "g") if c in self.styles else sb.col(c, "r") for c in columns]
        query = _with(exp.select(*projection).from_(exp.alias_(assigned, "r", quoted=True))
                      .join(exp.alias_(summaries, "g", quoted=True), join_type="INNER",
                            on=exp.EQ(this=sb.col(_GROUP, "r"), expression=sb.col(_GROUP, "g"))), assigned, definition)
        if self.summaries_table is not None:
            return query
        rows, definition, weighted = self._rows(source, columns)
        if weighted:
            query = _with(query, rows, definition)
        return query.with_(sb.ident(_SUMMARIES), as_=self._summaries(rows, hierarchies, weighted, False, self.coded),
                           copy=False)

    def summarized(self, engine: Engine, source: exp.Expression, columns: Sequence[str],
                   hierarchies: Mapping[str, BoundHierarchy], materialize: Callable[[exp.Expression], exp.Table]
                   ) -> PartitionMap:
        """This map with every group's summary (label, costs and bounds of each attribute) made a table by
        ``materialize``, which its metrics, bounds and recoding then read: one publish summarizes the records once
        rather than three times (each is a pass over every record).  Where the summaries come from the records, the
        records with their groups are made a table too: numbered and joined to their groups once, not twice."""
        columns = self._read(columns)
        self._validate(columns, hierarchies)
        summarized = copy.copy(self)
        if not self.summarizes_assignment:
            summarized.assigned_table = (materialize(self.assignment.assigned(source, columns)), tuple(columns))
        rows, definition, weighted = summarized._rows(source, columns)
        with self._coding(engine, hierarchies) as coded:
            summarized.summaries_table = materialize(_with(
                self._summaries(rows, hierarchies, weighted, True, coded, bounds=True), rows, definition))
        return summarized

    @contextlib.contextmanager
    def _coding(self, engine: Engine, hierarchies: Mapping[str, BoundHierarchy]
                ) -> Iterator[CodedHierarchies | None]:
        """The hierarchies' codes as tables for the ``lca`` attributes: the map's own, or made for the summaries and
        dropped after (the summarizing queries read them rather than each numbering the leaves)."""
        lca = {a: hierarchies[a] for a, style in self.styles.items() if style == "lca"}
        if not lca or (self.coded is not None and all(a in self.coded.codings for a in lca)):
            yield self.coded
            return
        coded = CodedHierarchies.of(engine, lca)
        try:
            yield coded
        finally:
            coded.close()

    def ranges(self, engine, source, columns, hierarchies, materialize):
        """The ``range`` attributes' bounds: each group's smallest and largest value (over the groups showing a
        label, which have the same ones unless a label rounds beyond six decimals)."""
        ranged = {a: i for i, (a, style) in enumerate(self.styles.items()) if style == "range"}
        if not ranged:
            return Ranges({})
        columns = self._read(columns)
        require_free(ranged, columns)
        self._validate(columns, hierarchies)
        summarized = self.summaries_table
        if summarized is None:
            rows, definition, weighted = self._rows(source, columns)
            summarized = materialize(_with(self._summaries(rows, hierarchies, weighted, False, self.coded, bounds=True),
                                           rows, definition))
        return Ranges({a: materialize(range_relation(summarized, a, _cost_column("lower", i), _cost_column("upper", i)))
                       for a, i in ranged.items()})

    def _summary(self, index: int, attribute: str, style: str, bound: BoundHierarchy | None,
                 relation: exp.Expression, weighted: bool, coded: CodedHierarchies | None) -> _Summary:
        """How one attribute is summarized per group of ``relation`` (whose ``__weight`` counts records when
        ``weighted``; domains are measured over all of it): aggregates over the group's rows, and the label, LM and
        NCP cost over those aggregates (alias ``g``)."""
        value = lambda: sb.col(attribute, SOURCE)  # noqa: E731 - a fresh node wherever the value appears
        values = exp.func("COUNT", value())
        records = exp.func("COUNT", exp.Star())
        one, zero = sb.lit(1.0), sb.lit(0.0)
        label_name, lm_name, ncp_name = (_cost_column(kind, index) for kind in ("label", "lm", "ncp"))
        g = lambda name: sb.col(name, "g")  # noqa: E731

        def ifs(all_null: exp.Expression, mixed: exp.Expression, counted: exp.Expression = values,
                total: exp.Expression = records) -> list[exp.If]:
            # All NULL: NULL, no loss; NULL mixed with values: '*', full loss.
            return [exp.If(this=counted.copy().eq(sb.lit(0)), true=all_null),
                    exp.If(this=counted.copy() < total.copy(), true=mixed)]

        def guarded(label: exp.Expression, lm: exp.Expression, ncp: exp.Expression | None) -> _Summary:
            aggregates = {label_name: exp.Case(ifs=ifs(exp.Null(), sb.lit(TOP)), default=label),
                          lm_name: exp.Case(ifs=ifs(zero.copy(), one.copy()), default=lm)}
            if ncp is not None:
                aggregates[ncp_name] = exp.Case(ifs=ifs(zero.copy(), one.copy()), default=ncp)
            return _Summary(aggregates, g(label_name), g(lm_name), g(ncp_name if ncp is not None else lm_name))

        if style in NUMERIC_STYLES:
            low, high = exp.func("MIN", value()), exp.func("MAX", value())
            column = sb.col(attribute)
            domain = exp.select(exp.func("MAX", column) - exp.func("MIN", column)).from_(relation.copy())
            # A numeric summary stands for its range: LM and NCP are the same share of the domain.
            lm = _share(high.copy() - low.copy(), domain.subquery())
            if style == "range":
                # The label is written from the group's bounds, in the format of every range the column shows
                # (window aggregates over the groups whose values are all known).
                lower, upper, counted = (g(_cost_column(kind, index)) for kind in ("lower", "upper", "values"))
                shown = lambda bound: exp.Case(ifs=[exp.If(this=counted.copy().eq(g(_RECORDS)),  # noqa: E731
                                                           true=bound.copy())])
                written = SqlNumberFormat.of_bounds(shown(lower), shown(upper))
                label = exp.Case(ifs=ifs(exp.Null(), sb.lit(TOP), counted, g(_RECORDS)),
                                 default=written.closed(lower.copy(), upper.copy()))
                aggregates = {lower.name: low, upper.name: high, counted.name: values,
                              lm_name: exp.Case(ifs=ifs(zero.copy(), one.copy()), default=lm)}
                return _Summary(aggregates, label, g(lm_name), g(lm_name), bounds=(lower.copy(), upper.copy()))
            if weighted:
                weight = sb.col(_WEIGHT, SOURCE)
                label = sb.as_text(exp.Div(this=exp.func("SUM", sb.as_double(value()) * weight),
                                           expression=exp.func("SUM", weight.copy())))
            else:
                label = sb.as_text(exp.func("AVG", value()))
            return guarded(label, lm, None)
        if style == "set":
            text = sb.as_text(value())
            distinct = exp.func("COUNT", exp.Distinct(expressions=[text.copy()]))
            listed = exp.func("ARRAY_TO_STRING", exp.func("LIST_SORT", exp.func("LIST_DISTINCT", exp.func(
                "ARRAY_AGG", text.copy()))), sb.lit(","))
            label = exp.Concat(expressions=[sb.lit("{"), listed, sb.lit("}")], safe=False)
            if attribute in self.orders:
                domain_size: exp.Expression = sb.lit(len(self.orders[attribute]))
            else:
                domain_size = exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(attribute)]))).from_(
                    relation.copy()).subquery()
            lm = _share(distinct - sb.lit(1), domain_size - sb.lit(1))
            ncp = exp.Case(ifs=[exp.If(this=distinct.copy() > sb.lit(1), true=_share(distinct.copy(), domain_size.copy()))],
                           default=zero)
            return guarded(label, lm, ncp)
        # lca: the node of the hierarchy on the level where the group's smallest and largest code meet.
        if coded is not None and attribute in coded.codings:
            coding = coded.codings[attribute]
            leaves, labelled = coded.leaves(attribute), coded.nodes(attribute)
        else:
            coding = HierarchyCoding.of(bound)
            leaves, labelled = coding.leaves(), coding.nodes()
        codes, nodes = f"h{index}", f"n{index}"
        if weighted and coded is not None and attribute in coded.codings and attribute in self.assignment.codes:
            # The assignment's rows carry their codes.
            code, leaf_join = sb.col(self.assignment.codes[attribute], SOURCE), None
        else:
            code = sb.col(CODE, codes)
            leaf_join = exp.Join(this=leaves.subquery(codes), kind=None, side="LEFT", on=exp.NullSafeEQ(
                this=sb.col(LEAF, codes), expression=sb.as_text(value())))
        low_name, level_name, coded_name, values_name = (_cost_column(kind, index)
                                                         for kind in ("low", "level", "coded", "values"))
        aggregates = {low_name: exp.func("MIN", code),
                      level_name: coding.lowest_common_level(exp.func("MIN", code.copy()),
                                                             exp.func("MAX", code.copy())),
                      coded_name: exp.func("COUNT", code.copy()), values_name: values}
        # Each node's costs, computed once per node: leaves under it over the hierarchy's (LM: minus one each).
        total = len(bound.hierarchy.rows)
        leaves_under = sb.col(LEAVES)
        costed = exp.select(
            sb.col(LEVEL), sb.col(PREFIX), sb.col(LABEL),
            _share(leaves_under - sb.lit(1), sb.lit(max(total - 1, 1))).as_(_cost_column("lm", index), quoted=True),
            exp.Case(ifs=[exp.If(this=leaves_under.copy() > sb.lit(1),
                                 true=_share(leaves_under.copy(), sb.lit(total)))], default=zero)
            .as_(_cost_column("ncp", index), quoted=True)).from_(labelled.subquery("labelled", copy=False))
        node_join = exp.Join(this=costed.subquery(nodes), kind=None, side="LEFT", on=sb.and_all([
            sb.col(LEVEL, nodes).eq(g(level_name)),
            sb.col(PREFIX, nodes).eq(coding.ancestor(g(low_name), g(level_name)))]))
        # All NULL: NULL, covering one leaf (no loss); a value no node covers with the others (NULL beside values
        # when the hierarchy has no row for NULL): '*', covering every leaf.
        all_null = g(values_name).eq(sb.lit(0))
        uncovered = g(coded_name) < g(_RECORDS)
        everything = sb.lit(1.0 if total > 1 else 0.0)
        pick = lambda null, whole, node: exp.Case(ifs=[  # noqa: E731
            exp.If(this=all_null.copy(), true=null), exp.If(this=uncovered.copy(), true=whole)], default=node)
        label = pick(exp.Null(), sb.lit(TOP), sb.col(LABEL, nodes))
        lm = pick(zero.copy(), everything, sb.col(_cost_column("lm", index), nodes))
        ncp = pick(zero.copy(), everything.copy(), sb.col(_cost_column("ncp", index), nodes))
        return _Summary(aggregates, label, lm, ncp, leaf_join, node_join)

    # ------------------------------------------------------------ the rest of the Transformation interface
    def range_problems(self, attribute, bound, rows):
        """A range's bounds are the numbers its label shows (within its rounding beyond six decimals)."""
        problems = []
        for label, low, high in rows:
            shown = parse_closed(label)
            if shown is None:
                problems.append(f"{label!r} is not a range [low, high]")
            elif low is None or not (close_to(float(low), shown[0], shown[2]) and
                                     close_to(float(high), shown[1], shown[2])):
                problems.append(f"{label!r} shows the bounds [{low}, {high}]")
        return problems

    def allowed_values(self, attribute, bound):
        if self.styles.get(attribute) != "lca":
            return None
        hierarchy = bound.hierarchy
        return set().union(*(hierarchy.labels(j) for j in range(hierarchy.levels))) | {TOP, None}

    def describe(self):
        described = {"partition map": {"styles": self.styles, **self.description}}
        return {**described, **self.recoding.describe()} if self.recoding is not None else described

    # ------------------------------------------------------------ metrics
    def metrics(self, engine: Engine, source: exp.Expression, columns: Sequence[str],
                hierarchies: Mapping[str, BoundHierarchy], models: Sequence[PrivacyModel]) -> dict[str, float]:
        """LM (``loss``), DM (``dm``), NCP (``ncp``) and average class size of the release this map gives, by the
        core's definitions (:mod:`duckanon.utility.metrics`), with ``records``, ``classes`` and ``suppressed``.  Classes are
        the release's: records with equal generalized quasi-identifiers; classes that violate ``models`` count as
        suppressed, as the publish suppresses them."""
        self._validate(columns, hierarchies)
        if self.summaries_table is not None:
            return self._metrics(engine, source, columns, hierarchies, models, None)
        with self._coding(engine, hierarchies) as coded:
            return self._metrics(engine, source, columns, hierarchies, models, coded)

    def _metrics(self, engine: Engine, source: exp.Expression, columns: Sequence[str],
                 hierarchies: Mapping[str, BoundHierarchy], models: Sequence[PrivacyModel],
                 coded: CodedHierarchies | None) -> dict[str, float]:
        quasi = list(self.styles)
        sensitive = sensitive_attributes(models)
        costs = [_cost_column(kind, i) for i in range(len(quasi)) for kind in ("lm", "ncp")]
        g = lambda name: sb.col(name, "g")  # noqa: E731
        weighted = self.summarizes_assignment and all(c in self.assignment.keys for c in sensitive)
        if weighted:
            # The assignment's rows stand for their records: measure them, weighted, instead of every record.
            rows, weight = exp.Table(this=sb.ident(_WEIGHTED)), _WEIGHT
            definition = self.assignment.weighted([*quasi, *sensitive])
            extra = [sb.col(c, "r") for c in sensitive] + [sb.col(_WEIGHT, "r")]
        else:
            (rows, definition), weight = self._assigned(source, columns), None
            extra = [sb.col(c, "r") for c in sensitive]
        summarized, made = self.summaries_table, None
        if summarized is None:
            summaries = _with(self._summaries(rows, hierarchies, weighted, True, coded), rows,
                              None if definition is None else definition.copy())
            # Materialized once: the classes' queries then read small tables rather than repeat these queries.
            summarized = made = sb.table(f"__duckanon_partition_summaries_{next(_serial)}")
            engine.run(sb.create_table_as(summarized, summaries, temporary=True))
        measured = None
        try:
            if sensitive:
                records = (exp.select(*[g(q) for q in quasi], *extra, *[g(c) for c in costs])
                           .from_(exp.alias_(rows, "r", quoted=True))
                           .join(exp.alias_(summarized, "g", quoted=True), join_type="INNER",
                                 on=exp.EQ(this=sb.col(_GROUP, "r"), expression=g(_GROUP))))
                records = _with(records, rows, definition)
                measured = sb.table(f"__duckanon_partition_records_{next(_serial)}")
                engine.run(sb.create_table_as(measured, records, temporary=True))
                classes = Classes.of(measured, quasi, weight=weight, carry=costs)
            else:
                # Models that count records only: a group's records all carry its summary, so the groups, weighted
                # by their records, are the release's records.
                classes = Classes.of(summarized, quasi, weight=_GROUP_RECORDS, carry=costs)
            per_record = lambda kind: _added([sb.col(_cost_column(kind, i)) for i in range(len(quasi))])  # noqa: E731
            sums = {f"__sum_{kind}": per_record(kind) * sb.col(WEIGHT) for kind in ("lm", "ncp")}
            size, violated = sb.col(SIZE), sb.col(VIOLATED)
            kept = violated.not_()

            def total(expression: exp.Expression, where: exp.Expression | None = None) -> exp.Expression:
                summed = exp.Case().when(where, expression) if where is not None else expression
                return exp.func("COALESCE", exp.func("SUM", summed), sb.lit(0))

            row = engine.rows(exp.select(
                total(size), total(size, violated), exp.func("COUNT", exp.Star()),
                exp.func("COUNT", exp.Case().when(kept, sb.lit(1))), total(size * size), total(size * size, kept.copy()),
                total(sb.col("__sum_lm")), total(sb.col("__sum_lm"), kept.copy()),
                total(sb.col("__sum_ncp")), total(sb.col("__sum_ncp"), kept.copy()),
            ).from_(class_verdicts(classes, models, sums).subquery("verdicts")))[0]
        finally:
            for table in (measured, made):
                if table is not None:
                    engine.run(sb.drop("TABLE", table))
        records_n, suppressed, n_classes, kept_classes, squares, kept_squares, lm_all, lm_kept, ncp_all, ncp_kept = row
        per_suppressed = float(suppressed) * len(quasi)  # a suppressed record loses 1 on every attribute
        totals = NodeTotals(records=int(records_n), suppressed=int(suppressed), classes=int(n_classes),
                            kept_classes=int(kept_classes), squares=float(squares), kept_squares=float(kept_squares),
                            costs={"loss": (float(lm_all), float(lm_kept), per_suppressed),
                                   "ncp": (float(ncp_all), float(ncp_kept), per_suppressed)})
        metrics = (Loss(), Discernibility(), NormalizedCertaintyPenalty(), AverageClassSize())
        values = {m.name: float(m.value(totals)) for m in metrics}
        values.update(records=totals.records, classes=totals.classes, suppressed=totals.suppressed)
        return values


def _with(query: exp.Select, rows: exp.Table, definition: exp.Select | None) -> exp.Select:
    """``query`` with ``rows`` defined as a CTE by ``definition``; as it is where ``rows`` is a table (no
    definition)."""
    return query if definition is None else query.with_(rows.this, as_=definition, copy=False)


def _share(numerator: exp.Expression, denominator: exp.Expression) -> exp.Expression:
    """numerator / denominator as DOUBLE, 0 where the denominator is 0 (a constant domain loses nothing)."""
    return exp.func("COALESCE", exp.Div(this=sb.as_double(numerator),
                                        expression=exp.func("NULLIF", sb.as_double(denominator), sb.lit(0))),
                    sb.lit(0.0))


def _added(terms: Sequence[exp.Expression]) -> exp.Expression:
    total = terms[0]
    for term in terms[1:]:
        total = exp.Add(this=total, expression=term)
    return total
