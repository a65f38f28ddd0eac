"""Publishing a per-record partition or cluster assignment: the partition-map transformation.

Partitioning and clustering algorithms (Mondrian, MDAV, k-member clustering, …) decide which *group* each record
belongs to.  This module is the one way to turn such a decision into a release: :class:`PartitionMap` is a
:class:`~duckanon.generalization.Transformation`, so :meth:`Anonymizer.publish <duckanon.anonymizer.Anonymizer.publish>`
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

**Output styles**, one per quasi-identifier (every quasi-identifier must have one):

- ``range`` (numeric): ``[lo-hi]``, the group's smallest and largest value;
- ``mean`` (numeric): the group's mean (microaggregation);
- ``lca`` (categorical, needs the attribute's hierarchy): the lowest common ancestor of the group's values;
- ``set`` (categorical): the group's distinct values, sorted, as ``{a,b,c}``.

NULL is a value of its own, as everywhere in duckanon: a group whose values are all NULL shows NULL; a group mixing
NULL with other values shows ``*`` (for ``lca`` only when the hierarchy has no row for NULL: no node covers both).
Released values are VARCHAR.

**Costs.**  Per record and attribute (seed 002's LM and Xu et al.'s NCP, as :mod:`duckanon.metrics` defines them):
numeric styles ``(hi - lo) / (U - L)`` over the source's range (for ``mean`` too: the mean stands for that range);
``lca`` ``(leaves under the ancestor - 1) / (leaves - 1)`` and NCP ``leaves under it / leaves`` (0 for a leaf);
``set`` the same with the group's distinct values over the attribute's domain (the order given, else the source's
distinct values); ``*`` costs 1.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import duckdb
from sqlglot import exp

from . import sqlbuild as sb
from .checks import class_verdicts
from .classes import SIZE, VIOLATED, WEIGHT, Classes
from .errors import PolicyError
from .generalization import SOURCE, BoundHierarchy, Transformation
from .hierarchy import TOP, level_column
from .metrics import AverageClassSize, Discernibility, Loss, NodeTotals, NormalizedCertaintyPenalty
from .models import PrivacyModel, sensitive_attributes

RECORD = "__record"
NUMERIC_STYLES = ("range", "mean")
CATEGORICAL_STYLES = ("lca", "set")
STYLES = NUMERIC_STYLES + CATEGORICAL_STYLES

_GROUP = "__group_id"
_ORDINAL = "__ordinal"
_UPTO = "__upto"
_WEIGHT = "__weight"
_ASSIGNED = "__duckanon_assigned"
_WEIGHTED = "__duckanon_weighted"
_SUMMARIES = "__duckanon_summaries"
_serial = itertools.count()


def _leaves_column(level: int) -> str:
    return f"__leaves_{level}"


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


def numeric_kind(con: duckdb.DuckDBPyConnection, relation: exp.Expression, columns: Sequence[str]) -> dict[str, bool]:
    """Whether each column of ``relation`` is numeric in DuckDB (integers, decimals, floating point)."""
    query = relation if isinstance(relation, exp.Query) else exp.select(exp.Star()).from_(relation)
    description = con.execute(sb.to_sql(query.limit(0))).description
    types = {d[0]: str(d[1]).upper() for d in description}
    numeric = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
               "UHUGEINT", "FLOAT", "DOUBLE", "DECIMAL", "NUMBER")
    return {c: types[c].startswith(numeric) for c in columns}


@dataclass(frozen=True)
class Assignment:
    """Which group the records of a source go to: ``table`` has the ``keys`` columns, ``group`` and maybe ``count``
    (the records each row stands for); ``spread`` when records with equal keys may go to several groups.

    See the module's docstring for how records are named (a record id, :data:`RECORD`, or any columns records may be
    treated alike by)."""

    table: exp.Table
    keys: tuple[str, ...]
    group: str = "group_id"
    count: str | None = None
    spread: bool = False

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
        """The assignment's own rows as weighted records: the key ``columns``, ``__group_id`` and ``__weight``."""
        return exp.select(*[sb.col(c) for c in columns], sb.col(self.group).as_(_GROUP, quoted=True),
                          sb.col(self.count).as_(_WEIGHT, quoted=True)).from_(self.table)


class PartitionMap(Transformation):
    """Every record's quasi-identifiers replaced by a summary of its group (see the module's docstring).

    ``styles`` gives each quasi-identifier's output style (``range``, ``mean``, ``lca``, ``set``); ``orders`` the
    value order of categorical attributes cut along an order (their domain for ``set`` costs); ``description`` is
    merged into the release's transformation metadata (e.g. the algorithm and its parameters)."""

    def __init__(self, assignment: Assignment, styles: Mapping[str, str], *,
                 orders: Mapping[str, Sequence[object]] | None = None, description: Mapping | None = None):
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

    def misplaced(self, con: duckdb.DuckDBPyConnection, source: exp.Expression, columns: Sequence[str]) -> int:
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
        return int(sb.fetch_rows(con, query)[0][0])

    @property
    def summarizes_assignment(self) -> bool:
        """Whether the groups' values come from the assignment's rows (keys hold every recoded column, and counts
        weigh the rows) rather than from the source's records."""
        return self.assignment.count is not None and all(a in self.assignment.keys for a in self.styles)

    # ------------------------------------------------------------ compiling
    def compile(self, source, columns, hierarchies):
        self._validate(columns, hierarchies)
        return self._recoded(source, columns, hierarchies)

    def _summaries(self, relation: exp.Expression, hierarchies: Mapping[str, BoundHierarchy], weighted: bool,
                   costs: bool) -> exp.Select:
        """One row per group of ``relation`` (records or weighted rows with ``__group_id``): its generalized value
        per styled attribute, and the cost columns ``__lm_<i>`` / ``__ncp_<i>`` when ``costs``."""
        summaries = (exp.select(sb.col(_GROUP, SOURCE)).from_(exp.alias_(relation, SOURCE, quoted=True))
                     .group_by(sb.col(_GROUP, SOURCE)))
        for i, (attribute, style) in enumerate(self.styles.items()):
            label, lm, ncp, join = self._summary(i, attribute, style, hierarchies.get(attribute), relation, weighted)
            if join is not None:
                summaries = summaries.join(join, copy=False)
            summaries = summaries.select(label.as_(attribute, quoted=True), copy=False)
            if costs:
                summaries = summaries.select(lm.as_(_cost_column("lm", i), quoted=True),
                                             ncp.as_(_cost_column("ncp", i), quoted=True), copy=False)
        return summaries

    def _recoded(self, source: exp.Expression, columns: Sequence[str], hierarchies: Mapping[str, BoundHierarchy]
                 ) -> exp.Select:
        """The released columns with quasi-identifiers replaced by their group's summary."""
        assigned, summaries = sb.table(_ASSIGNED), sb.table(_SUMMARIES)
        if self.summarizes_assignment:
            summarized = self._summaries(exp.Table(this=sb.ident(_WEIGHTED)), hierarchies, True, False)
        else:
            summarized = self._summaries(exp.Table(this=sb.ident(_ASSIGNED)), hierarchies, False, False)
        projection = [sb.col(c, "g") if c in self.styles else sb.col(c, "r") for c in columns]
        query = (exp.select(*projection).from_(exp.alias_(assigned, "r", quoted=True))
                 .join(exp.alias_(summaries, "g", quoted=True), join_type="INNER",
                       on=exp.EQ(this=sb.col(_GROUP, "r"), expression=sb.col(_GROUP, "g"))))
        query = query.with_(sb.ident(_ASSIGNED), as_=self.assignment.assigned(source, columns), copy=False)
        if self.summarizes_assignment:
            query = query.with_(sb.ident(_WEIGHTED), as_=self.assignment.weighted(list(self.styles)), copy=False)
        return query.with_(sb.ident(_SUMMARIES), as_=summarized, copy=False)

    def _summary(self, index: int, attribute: str, style: str, bound: BoundHierarchy | None,
                 relation: exp.Expression, weighted: bool
                 ) -> tuple[exp.Expression, exp.Expression, exp.Expression, exp.Join | None]:
        """(label, LM cost, NCP cost, join it needs) of one attribute, as aggregates over a group's rows of
        ``relation``, whose ``__weight`` counts records when ``weighted``; domains are measured over all of it."""
        value = lambda: sb.col(attribute, SOURCE)  # noqa: E731 - a fresh node wherever the value appears
        values = exp.func("COUNT", value())
        records = exp.func("COUNT", exp.Star())
        one, zero = sb.lit(1.0), sb.lit(0.0)

        def guarded(label: exp.Expression, lm: exp.Expression, ncp: exp.Expression):
            # All NULL: NULL, no loss; NULL mixed with values: '*', full loss.
            def ifs(all_null: exp.Expression, mixed: exp.Expression) -> list[exp.If]:
                return [exp.If(this=values.copy().eq(sb.lit(0)), true=all_null),
                        exp.If(this=values.copy() < records.copy(), true=mixed)]

            return (exp.Case(ifs=ifs(exp.Null(), sb.lit(TOP)), default=label),
                    exp.Case(ifs=ifs(zero.copy(), one.copy()), default=lm),
                    exp.Case(ifs=ifs(zero.copy(), one.copy()), default=ncp))

        if style in NUMERIC_STYLES:
            low, high = exp.func("MIN", value()), exp.func("MAX", value())
            if style == "range":
                label = exp.Concat(expressions=[sb.lit("["), sb.as_text(low), sb.lit("-"), sb.as_text(high),
                                                sb.lit("]")], safe=False)
            elif weighted:
                weight = sb.col(_WEIGHT, SOURCE)
                label = sb.as_text(exp.Div(this=exp.func("SUM", sb.as_double(value()) * weight),
                                           expression=exp.func("SUM", weight.copy())))
            else:
                label = sb.as_text(exp.func("AVG", value()))
            column = sb.col(attribute)
            domain = exp.select(exp.func("MAX", column) - exp.func("MIN", column)).from_(relation.copy())
            width = _share(high - low, domain.subquery())
            return (*guarded(label, width, width.copy()), None)
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
            return (*guarded(label, lm, ncp), None)
        # lca: the lowest level on which every value of the group has the same ancestor.
        hierarchy = bound.hierarchy
        alias = f"h{index}"
        text = sb.as_text(value())
        leaves_total = len(hierarchy.rows)
        levels = range(1, hierarchy.levels)
        level_value = lambda j: sb.col(level_column(j), alias)  # noqa: E731
        shared = lambda j: exp.and_(exp.func("MIN", level_value(j)).eq(exp.func("MAX", level_value(j))),  # noqa: E731
                                    exp.func("COUNT", level_value(j)).eq(records.copy()))
        leaf_shared = exp.and_(exp.func("MIN", text).eq(exp.func("MAX", text.copy())), values.eq(records))
        label = exp.Case(ifs=[exp.If(this=values.eq(sb.lit(0)), true=exp.Null()),
                              exp.If(this=leaf_shared, true=exp.func("MIN", text.copy())),
                              *[exp.If(this=shared(j), true=exp.func("MIN", level_value(j))) for j in levels]],
                         default=sb.lit(TOP))
        covered = exp.Case(ifs=[exp.If(this=values.eq(sb.lit(0)), true=sb.lit(1)),
                                exp.If(this=leaf_shared.copy(), true=sb.lit(1)),
                                *[exp.If(this=shared(j), true=exp.func("MIN", sb.col(_leaves_column(j), alias)))
                                  for j in levels]],
                           default=sb.lit(leaves_total))
        lm = _share(covered - sb.lit(1), sb.lit(max(leaves_total - 1, 1)))
        ncp = exp.Case(ifs=[exp.If(this=covered.copy() > sb.lit(1), true=_share(covered.copy(), sb.lit(leaves_total)))],
                       default=zero)
        counted = exp.select(*[sb.col(level_column(j)) for j in range(hierarchy.levels)],
                             *[exp.Window(this=exp.func("COUNT", exp.Star()),
                                          partition_by=[sb.col(level_column(j))]).as_(_leaves_column(j), quoted=True)
                               for j in levels]).from_(bound.table)
        on = exp.NullSafeEQ(this=sb.col(level_column(0), alias), expression=text.copy())
        join = exp.Join(this=counted.subquery(alias), on=on, kind=None, side="LEFT")
        return label, lm, ncp, join

    # ------------------------------------------------------------ the rest of the Transformation interface
    def allowed_values(self, attribute, bound):
        if self.styles.get(attribute) != "lca":
            return None
        hierarchy = bound.hierarchy
        return set().union(*(hierarchy.labels(j) for j in range(hierarchy.levels))) | {TOP, None}

    def describe(self):
        return {"partition map": {"styles": self.styles, **self.description}}

    # ------------------------------------------------------------ metrics
    def metrics(self, con: duckdb.DuckDBPyConnection, source: exp.Expression, columns: Sequence[str],
                hierarchies: Mapping[str, BoundHierarchy], models: Sequence[PrivacyModel]) -> dict[str, float]:
        """LM (``loss``), DM (``dm``), NCP (``ncp``) and average class size of the release this map gives, by the
        core's definitions (:mod:`duckanon.metrics`), with ``records``, ``classes`` and ``suppressed``.  Classes are
        the release's: records with equal generalized quasi-identifiers; classes that violate ``models`` count as
        suppressed, as the publish suppresses them."""
        self._validate(columns, hierarchies)
        quasi = list(self.styles)
        sensitive = sensitive_attributes(models)
        costs = [_cost_column(kind, i) for i in range(len(quasi)) for kind in ("lm", "ncp")]
        g = lambda name: sb.col(name, "g")  # noqa: E731
        if self.summarizes_assignment and all(c in self.assignment.keys for c in sensitive):
            # The assignment's rows stand for their records: measure them, weighted, instead of every record.
            rows, weight = exp.Table(this=sb.ident(_WEIGHTED)), _WEIGHT
            definitions = {_WEIGHTED: self.assignment.weighted([*quasi, *sensitive])}
            summaries = self._summaries(rows, hierarchies, True, True)
            extra = [sb.col(c, "r") for c in sensitive] + [sb.col(_WEIGHT, "r")]
        else:
            rows, weight = exp.Table(this=sb.ident(_ASSIGNED)), None
            definitions = {_ASSIGNED: self.assignment.assigned(source, columns)}
            summaries = self._summaries(rows, hierarchies, False, True)
            extra = [sb.col(c, "r") for c in sensitive]
        records = (exp.select(*[g(q) for q in quasi], *extra, *[g(c) for c in costs])
                   .from_(exp.alias_(rows, "r", quoted=True))
                   .join(summaries.subquery("g", copy=False), join_type="INNER", copy=False,
                         on=exp.EQ(this=sb.col(_GROUP, "r"), expression=g(_GROUP))))
        for name, definition in definitions.items():
            records = records.with_(sb.ident(name), as_=definition, copy=False)
        # Materialized once: the classes' queries then read a table rather than repeat this one.
        measured = sb.table(f"__duckanon_partition_records_{next(_serial)}")
        sb.run(con, sb.create_table_as(measured, records, temporary=True))
        classes = Classes.of(measured, quasi, weight=weight, carry=costs)
        per_record = lambda kind: _added([sb.col(_cost_column(kind, i)) for i in range(len(quasi))])  # noqa: E731
        sums = {f"__sum_{kind}": per_record(kind) * sb.col(WEIGHT) for kind in ("lm", "ncp")}
        verdicts = sb.table(f"__duckanon_partition_verdicts_{next(_serial)}")
        sb.run(con, sb.create_table_as(verdicts, class_verdicts(classes, models, sums), temporary=True))
        try:
            size, violated = sb.col(SIZE), sb.col(VIOLATED)
            kept = violated.not_()

            def total(expression: exp.Expression, where: exp.Expression | None = None) -> exp.Expression:
                summed = exp.Case().when(where, expression) if where is not None else expression
                return exp.func("COALESCE", exp.func("SUM", summed), sb.lit(0))

            row = sb.fetch_rows(con, exp.select(
                total(size), total(size, violated), exp.func("COUNT", exp.Star()),
                exp.func("COUNT", exp.Case().when(kept, sb.lit(1))), total(size * size), total(size * size, kept.copy()),
                total(sb.col("__sum_lm")), total(sb.col("__sum_lm"), kept.copy()),
                total(sb.col("__sum_ncp")), total(sb.col("__sum_ncp"), kept.copy()),
            ).from_(verdicts))[0]
        finally:
            sb.run(con, sb.drop("TABLE", verdicts))
            sb.run(con, sb.drop("TABLE", measured))
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
