"""Privacy models, each a SQL query over equivalence classes.

A model answers, for every class, whether it violates the model.  Models that look only at a class's size give a
predicate over the size (:meth:`PrivacyModel.size_violation`); models that look at the sensitive values give a query
``__k…, __violated`` over the class/value cells (:meth:`PrivacyModel.class_violations`).  A policy combines models
by UNION ALL and one GROUP BY, so adding a model adds no join.  Models do not know how classes were formed (full-domain
levels, partitions, clusters) nor who searches; they see :class:`~duckanon.privacy.classes.Classes`.

Whether a class violates depends on that class alone, except for models that compare it with its whole table
(:attr:`PrivacyModel.compares_with_table`: t-closeness).  No transformation changes the table, and replaced records
stay in it, so suppressing a violating class never makes another class violate -- unless suppressed records are
dropped: that moves the distribution such models compare with, so drop mode suppresses to a fixed point
(:func:`duckanon.privacy.checks.settle_drops`).
"""

from __future__ import annotations

import math
from abc import ABC
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from sqlglot import exp

from ..errors import PolicyError
from ..hierarchy.hierarchy import Hierarchy
from ..parameters import checked_number
from ..sqlgen import build as sb
from .classes import SIZE, VALUE, VIOLATED, WEIGHT, Classes

# Entropy and distances are floating point; a class exactly at the bound must pass.
TOLERANCE = 1e-9


@dataclass(frozen=True)
class DataFacts:
    """What models need to know about the data to reject impossible parameters up front."""

    records: int
    value_counts: Mapping[str, Mapping[object, int]] = field(default_factory=dict)

    def distinct(self, attribute: str) -> int:
        return len(self.value_counts[attribute])


def _count(n: object, name: str, model: str, minimum: int = 1) -> int:
    return checked_number(n, name, model, whole=True, low=minimum)


def _share(x: object, name: str, model: str, *, low_open: bool) -> float:
    return float(checked_number(x, name, model, low=0, high=1, low_open=low_open))


def _ratio(numerator: exp.Expression, denominator: exp.Expression) -> exp.Expression:
    return exp.Div(this=sb.as_double(numerator), expression=sb.as_double(denominator))


def _sum(expression: exp.Expression) -> exp.Expression:
    return exp.func("SUM", expression)


def _grouped(classes: Classes, source: exp.Select, alias: str, violated: exp.Expression) -> exp.Select:
    return (exp.select(*classes.keys_of(), violated.as_(VIOLATED, quoted=True))
            .from_(source.subquery(alias)).group_by(*classes.keys_of()))


class PrivacyModel(ABC):
    """A privacy model.  ``sensitive`` names the attribute it protects, None for models over class sizes alone."""

    name: str = ""
    sensitive: str | None = None
    # Whether a class merged with any class satisfying the model satisfies it: then generalization never grows the
    # set of records in violating classes, so "at most N suppressed" is monotone and searches may tag by it.
    monotone_under_suppression: bool = False
    # Whether a class's verdict depends on the records of its whole table, not on the class alone: dropping other
    # classes' records then changes it (and such a model is never monotone under drop suppression).
    compares_with_table: bool = False

    def size_violation(self, size: exp.Expression) -> exp.Expression | None:
        """A predicate over the class size that is true when a class violates this model's size bound."""
        return None

    def class_violations(self, classes: Classes) -> exp.Select | None:
        """``__k…, __violated`` per class, for models over the sensitive values."""
        return None

    def check_data(self, facts: DataFacts) -> None:
        """Reject parameters that no release of this data can satisfy."""

    def params(self) -> dict:
        return {k: v for k, v in vars(self).items() if not k.startswith("_")}

    def describe(self) -> str:
        # Level tables and hierarchies are left out (too long); a list of values such as highly_sensitive is kept, so
        # that models differing only in it describe (and name their columns in a check's listing) differently.
        shown = {k: v for k, v in self.params().items()
                 if not isinstance(v, dict) and not (isinstance(v, list) and any(isinstance(x, list) for x in v))}
        args = ", ".join(f"{k}={v!r}" for k, v in shown.items())
        return f"{self.name}({args})"

    def __repr__(self) -> str:
        return self.describe()

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.params() == other.params()

    def _check_k(self, facts: DataFacts) -> None:
        k = getattr(self, "k", None)
        if k is not None and k > facts.records:
            raise PolicyError(f"{self.name}: k={k} is larger than the table ({facts.records} records)")

    def _check_distinct(self, facts: DataFacts, needed: int, parameter: str) -> None:
        distinct = facts.distinct(self.sensitive)
        if needed > distinct:
            raise PolicyError(f"{self.name}: {parameter}={getattr(self, parameter)!r} needs {needed} distinct values "
                              f"but {self.sensitive!r} has only {distinct}")


class KAnonymity(PrivacyModel):
    """Every class holds at least k records."""

    name = "k-anonymity"
    monotone_under_suppression = True

    def __init__(self, k: int):
        self.k = _count(k, "k", self.name)

    def size_violation(self, size):
        return size < sb.lit(self.k)

    def check_data(self, facts):
        self._check_k(facts)


class DistinctLDiversity(PrivacyModel):
    """Every class holds at least l distinct values of the sensitive attribute (NULL counts as a value)."""

    name = "distinct-l-diversity"
    monotone_under_suppression = True

    def __init__(self, sensitive: str, l: int):  # noqa: E741 - the models' own letter
        self.sensitive, self.l = sensitive, _count(l, "l", self.name)

    def class_violations(self, classes):
        return _grouped(classes, classes.cells(self.sensitive), "cells", exp.func("COUNT", exp.Star()) < sb.lit(self.l))

    def check_data(self, facts):
        self._check_distinct(facts, self.l, "l")


class EntropyLDiversity(PrivacyModel):
    """Every class's sensitive values have entropy of at least log(l)."""

    name = "entropy-l-diversity"

    def __init__(self, sensitive: str, l: float):  # noqa: E741
        self.sensitive, self.l = sensitive, checked_number(l, "l", self.name, low=1)

    def class_violations(self, classes):
        n = sb.col(WEIGHT)
        total = _sum(n)
        # H = ln(N) - sum(n ln n) / N, with N the class size and n the count of each value.
        entropy = exp.func("LN", total) - _ratio(_sum(n * exp.func("LN", n)), total)
        return _grouped(classes, classes.cells(self.sensitive), "cells",
                        entropy < sb.lit(math.log(self.l) - TOLERANCE))

    def check_data(self, facts):
        self._check_distinct(facts, math.ceil(self.l - TOLERANCE), "l")


class RecursiveCLDiversity(PrivacyModel):
    """Recursive (c,l)-diversity: r1 < c·(r_l + … + r_m) with r the value counts of a class in decreasing order."""

    name = "recursive-cl-diversity"

    def __init__(self, sensitive: str, c: float, l: int):  # noqa: E741
        self.sensitive, self.c = sensitive, checked_number(c, "c", self.name, low=0, low_open=True)
        self.l = _count(l, "l", self.name, minimum=2)

    def class_violations(self, classes):
        rank = exp.Window(this=exp.func("ROW_NUMBER"), partition_by=classes.keys_of(),
                          order=exp.Order(expressions=[exp.Ordered(this=sb.col(WEIGHT), desc=True)]))
        ranked = (exp.select(*classes.keys_of(), sb.col(WEIGHT), rank.as_("__rank", quoted=True))
                  .from_(classes.cells(self.sensitive).subquery("cells")))
        tail = _sum(exp.Case().when(sb.col("__rank") >= sb.lit(self.l), sb.col(WEIGHT)).else_(sb.lit(0)))
        return _grouped(classes, ranked, "ranked", exp.func("MAX", sb.col(WEIGHT)) >= sb.lit(self.c) * tail)

    def check_data(self, facts):
        self._check_distinct(facts, self.l, "l")


class AlphaKAnonymity(PrivacyModel):
    """(α,k)-anonymity: classes of at least k records in which no sensitive value has a share above α.

    With ``highly_sensitive`` given, α bounds only those values (seed 001's semi-supervised variant).
    """

    name = "alpha-k-anonymity"

    def __init__(self, sensitive: str, alpha: float, k: int, highly_sensitive: Iterable[object] | None = None):
        self.sensitive = sensitive
        self.alpha = _share(alpha, "alpha", self.name, low_open=True)
        self.k = _count(k, "k", self.name)
        if highly_sensitive is not None:
            highly_sensitive = list(highly_sensitive)
            if any(v is None for v in highly_sensitive):
                raise PolicyError(f"{self.name}: NULL cannot be a highly sensitive value; replace missing values first")
        self.highly_sensitive = sorted(map(str, highly_sensitive)) if highly_sensitive is not None else None

    def size_violation(self, size):
        return size < sb.lit(self.k)

    def _bounded(self, value: exp.Expression) -> exp.Expression:
        if self.highly_sensitive is None:
            return exp.true()
        return exp.In(this=sb.as_text(value), expressions=[sb.lit(v) for v in self.highly_sensitive])

    def class_violations(self, classes):
        n = sb.col(WEIGHT)
        bounded = exp.func("MAX", exp.Case().when(self._bounded(sb.col(VALUE)), n).else_(sb.lit(0)))
        return _grouped(classes, classes.cells(self.sensitive), "cells", _ratio(bounded, _sum(n)) > sb.lit(self.alpha))

    def check_data(self, facts):
        self._check_k(facts)
        counts = facts.value_counts[self.sensitive]
        if self.highly_sensitive is not None:
            unknown = sorted(set(self.highly_sensitive) - {str(v) for v in counts})
            if unknown:
                raise PolicyError(f"{self.name}: highly sensitive values not found in {self.sensitive!r}: {unknown}")
        bounded = {v: c for v, c in counts.items()
                   if self.highly_sensitive is None or str(v) in self.highly_sensitive}
        too_common = {v: c / facts.records for v, c in bounded.items() if c / facts.records > self.alpha}
        if too_common:
            value, share = max(too_common.items(), key=lambda item: item[1])
            raise PolicyError(
                f"{self.name}: no release can satisfy alpha={self.alpha}: value {value!r} of {self.sensitive!r} makes "
                f"up {share:.4f} of all records, so some class must hold at least that share")


class PSensitiveKAnonymity(PrivacyModel):
    """p-sensitive k-anonymity: classes of at least k records with at least p distinct sensitive values."""

    name = "p-sensitive-k-anonymity"
    monotone_under_suppression = True

    def __init__(self, sensitive: str, p: int, k: int):
        self.sensitive, self.p, self.k = sensitive, _count(p, "p", self.name), _count(k, "k", self.name)
        if self.p > self.k:
            raise PolicyError(f"{self.name}: p={p} cannot exceed k={k}")

    def size_violation(self, size):
        return size < sb.lit(self.k)

    def class_violations(self, classes):
        return _grouped(classes, classes.cells(self.sensitive), "cells", exp.func("COUNT", exp.Star()) < sb.lit(self.p))

    def check_data(self, facts):
        self._check_k(facts)
        self._check_distinct(facts, self.p, "p")


class TCloseness(PrivacyModel):
    """t-closeness: the earth mover's distance between each class's sensitive distribution and the whole table's is
    at most t.  ``distance`` is ``equal`` (categorical), ``ordered`` (values in their natural order) or
    ``hierarchical`` (ground distance from the sensitive attribute's hierarchy, Li et al. 2007)."""

    name = "t-closeness"
    DISTANCES = ("equal", "ordered", "hierarchical")
    compares_with_table = True

    def __init__(self, sensitive: str, t: float, distance: str = "equal", hierarchy: Hierarchy | None = None):
        self.sensitive = sensitive
        self.t = _share(t, "t", self.name, low_open=False)
        if distance not in self.DISTANCES:
            raise PolicyError(f"{self.name}: distance must be one of {', '.join(self.DISTANCES)}, got {distance!r}")
        if (distance == "hierarchical") != (hierarchy is not None):
            raise PolicyError(f"{self.name}: a hierarchy is needed for, and only for, the hierarchical distance")
        if hierarchy is not None:
            roots = {row[-1] for row in hierarchy.rows}
            if hierarchy.height < 1 or len(roots) != 1 or None in roots:
                raise PolicyError(
                    f"{self.name}: the hierarchical distance needs a hierarchy of at least two levels ending in one "
                    f"root (such as '*'); {hierarchy!r} has top values {sorted(map(str, roots))[:5]}")
        self.distance = distance
        self._hierarchy = hierarchy

    def params(self):
        params = super().params()
        if self._hierarchy is not None:
            params["hierarchy"] = [list(r) for r in self._hierarchy.rows]
        return params

    def class_violations(self, classes):
        distance = {"equal": self._equal, "ordered": self._ordered, "hierarchical": self._hierarchical}[self.distance]
        emd = distance(classes)
        return (exp.select(*classes.keys_of(), (sb.col("__emd") > sb.lit(self.t + TOLERANCE)).as_(VIOLATED, quoted=True))
                .from_(emd.subquery("distances")))

    def _with_shares(self, classes: Classes) -> exp.Select:
        """Cells with the class share p and the table share q of each value."""
        n = sb.col(WEIGHT)
        over = lambda *partition: exp.Window(this=_sum(n), partition_by=list(partition))  # noqa: E731
        table = classes.table_keys_of()
        return exp.select(
            *classes.keys_of(), sb.col(VALUE), n,
            _ratio(n, over(*classes.keys_of())).as_("__p", quoted=True),
            _ratio(over(*table, sb.col(VALUE)), over(*table)).as_("__q", quoted=True),
        ).from_(classes.cells(self.sensitive).subquery("cells"))

    def _equal(self, classes):
        # Values absent from a class contribute their table share q: EMD = (sum |p - q| over present + 1 - sum q) / 2.
        p, q = sb.col("__p"), sb.col("__q")
        emd = (_sum(exp.func("ABS", p - q)) + sb.lit(1) - _sum(q)) / sb.lit(2)
        return (exp.select(*classes.keys_of(), emd.as_("__emd", quoted=True))
                .from_(self._with_shares(classes).subquery("shares")).group_by(*classes.keys_of()))

    def _ordered(self, classes):
        # Every class meets every value of the ordered domain so the running difference of p and q can be summed.
        # The domain is that of the class's table: the values its records take, in order.
        cells = classes.cells(self.sensitive)
        n = sb.col(WEIGHT)
        table = classes.table_keys_of()
        table_columns = classes.key_columns[:classes.table_keys]
        domain = (exp.select(
            *table, sb.col(VALUE),
            _ratio(_sum(n), exp.Window(this=_sum(_sum(n)), partition_by=table)).as_("__q", quoted=True),
            exp.Window(this=exp.func("ROW_NUMBER"), partition_by=table,
                       order=exp.Order(expressions=[exp.Ordered(this=sb.col(VALUE))])).as_("__pos", quoted=True),
            exp.Window(this=exp.func("COUNT", exp.Star()), partition_by=table).as_("__m", quoted=True),
        ).from_(cells.subquery("cells")).group_by(*table, sb.col(VALUE)))
        sizes = (exp.select(*classes.keys_of(), _sum(n).as_(SIZE, quoted=True))
                 .from_(cells.subquery("cells")).group_by(*classes.keys_of()))
        joined_on = sb.and_all([sb.null_safe_join("s", "c", classes.key_columns),
                                exp.NullSafeEQ(this=sb.col(VALUE, "d"), expression=sb.col(VALUE, "c"))])
        difference = _ratio(exp.func("COALESCE", sb.col(WEIGHT, "c"), sb.lit(0)), sb.col(SIZE, "s")) - sb.col("__q", "d")
        running = exp.Window(this=_sum(difference), partition_by=classes.keys_of("s"),
                             order=exp.Order(expressions=[exp.Ordered(this=sb.col("__pos", "d"))]))
        in_table = ({"on": sb.null_safe_join("s", "d", table_columns), "join_type": "INNER"} if table_columns
                    else {"join_type": "CROSS"})
        grid = (exp.select(*classes.keys_of("s"), running.as_("__cum", quoted=True), sb.col("__m", "d"))
                .from_(sizes.subquery("s"))
                .join(domain.subquery("d"), **in_table)
                .join(cells.subquery("c"), on=joined_on, join_type="LEFT"))
        steps = exp.func("GREATEST", exp.func("MAX", sb.col("__m")) - sb.lit(1), sb.lit(1))
        emd = _ratio(_sum(exp.func("ABS", sb.col("__cum"))), steps)
        return (exp.select(*classes.keys_of(), emd.as_("__emd", quoted=True))
                .from_(grid.subquery("grid")).group_by(*classes.keys_of()))

    def _hierarchical(self, classes):
        # Li et al.: EMD = sum over inner nodes N of height(N)/H * min(pos_extra(N), neg_extra(N)), where the extra of a
        # child C is P(C) - Q(C).  Children a class does not touch have P = 0: their mass Q is all negative extra, so
        # neg_extra(N) = sum over touched children of max(Q - P, 0) + Q(N) - sum over touched children of Q.
        # NULL takes the path of the hierarchy's NULL row if it has one; otherwise NULL, like any value the hierarchy
        # does not cover, is a leaf right under the root (at the largest distance from every other value).
        hierarchy = self._hierarchy
        top = hierarchy.height
        root = hierarchy.rows[0][top]
        null_row = next((row for row in hierarchy.rows if row[0] is None), None)
        null_path = list(null_row) if null_row is not None else [None] * top + [root]
        n = sb.col(WEIGHT)
        ancestors = exp.select(*classes.keys_of(), n, *[
            exp.Case().when(sb.col(VALUE).is_(exp.Null()), sb.lit(null_path[level]))
            .else_(_lookup(hierarchy, sb.col(VALUE), level)).as_(f"__a{level}", quoted=True) for level in range(top + 1)
        ]).from_(classes.cells(self.sensitive).subquery("cells"))
        share = lambda partition: _ratio(exp.Window(this=_sum(n), partition_by=partition),  # noqa: E731
                                         exp.Window(this=_sum(n), partition_by=classes.keys_of()))
        table = classes.table_keys_of()
        table_share = lambda level: _ratio(  # noqa: E731
            exp.Window(this=_sum(n), partition_by=[*table, sb.col(f"__a{level}")]),
            exp.Window(this=_sum(n), partition_by=table))
        shares = exp.select(*classes.keys_of(), *[sb.col(f"__a{j}") for j in range(top + 1)], *[
            column for level in range(top + 1) for column in (
                share(classes.keys_of() + [sb.col(f"__a{level}")]).as_(f"__p{level}", quoted=True),
                table_share(level).as_(f"__q{level}", quoted=True))
        ]).from_(ancestors.subquery("ancestors"))
        costs = []
        for level in range(1, top + 1):
            child, node = f"__a{level - 1}", f"__a{level}"
            children = (exp.select(*classes.keys_of(), sb.col(node),
                                   exp.func("ANY_VALUE", sb.col(f"__p{level - 1}")).as_("__pc", quoted=True),
                                   exp.func("ANY_VALUE", sb.col(f"__q{level - 1}")).as_("__qc", quoted=True),
                                   exp.func("ANY_VALUE", sb.col(f"__q{level}")).as_("__qn", quoted=True))
                        .from_(shares.subquery("shares")).group_by(*classes.keys_of(), sb.col(node), sb.col(child)))
            pc, qc = sb.col("__pc"), sb.col("__qc")
            positive = _sum(exp.func("GREATEST", pc - qc, sb.lit(0)))
            negative = (_sum(exp.func("GREATEST", qc - pc, sb.lit(0)))
                        + exp.func("ANY_VALUE", sb.col("__qn")) - _sum(qc))
            cost = sb.lit(level / top) * exp.func("LEAST", positive, negative)
            costs.append(exp.select(*classes.keys_of(), cost.as_("__cost", quoted=True))
                         .from_(children.subquery("children")).group_by(*classes.keys_of(), sb.col(node)))
        union = costs[0]
        for more in costs[1:]:
            union = exp.union(union, more, distinct=False, copy=False)
        return (exp.select(*classes.keys_of(), _sum(sb.col("__cost")).as_("__emd", quoted=True))
                .from_(union.subquery("costs")).group_by(*classes.keys_of()))

    def check_data(self, facts):
        values = facts.value_counts[self.sensitive]
        if self.distance == "hierarchical":
            known = set(self._hierarchy.values)
            missing = sorted({str(v) for v in values if v is not None} - {v for v in known if v is not None})
            if missing:
                raise PolicyError(f"{self.name}: the hierarchy of {self.sensitive!r} does not cover {missing[:10]}")
        if self.distance == "ordered" and None in values:
            raise PolicyError(f"{self.name}: the ordered distance needs {self.sensitive!r} to have no NULL")


def _lookup(hierarchy: Hierarchy, value: exp.Expression, level: int) -> exp.Expression:
    """The value's ancestor on ``level`` as a CASE over the (small) sensitive hierarchy."""
    if level == 0:
        return sb.as_text(value)
    # One CASE node built at once: chaining .when() copies the CASE each time, quadratic in the hierarchy's size.
    text = sb.as_text(value)
    ifs = [exp.If(this=exp.EQ(this=text.copy(), expression=sb.lit(row[0])), true=sb.lit(row[level]))
           for row in hierarchy.rows if row[0] is not None]
    # The single root, for values the hierarchy lacks.
    default = sb.lit(hierarchy.rows[0][level]) if level == hierarchy.height else None
    return exp.Case(ifs=ifs, default=default)


class AlphaLDiversityKAnonymity(PrivacyModel):
    """Seed 003's (α,l)-diversity k-anonymity: classes of at least k records, at least l distinct sensitive values, and
    no sensitivity level holding a share above α.  ``levels`` maps each sensitive value to its level (Sid)."""

    name = "alpha-l-diversity-k-anonymity"

    def __init__(self, sensitive: str, alpha: float, l: int, k: int, levels: Mapping[object, int]):  # noqa: E741
        self.sensitive = sensitive
        self.alpha = _share(alpha, "alpha", self.name, low_open=True)
        self.l, self.k = _count(l, "l", self.name), _count(k, "k", self.name)
        if self.l > self.k:
            raise PolicyError(f"{self.name}: l={l} cannot exceed k={k}")
        if not levels:
            raise PolicyError(f"{self.name}: the table of sensitivity levels is empty")
        if any(v is None for v in levels):
            raise PolicyError(f"{self.name}: NULL cannot be given a sensitivity level; replace missing values first")
        self.levels = {str(v): _count(s, f"the level of {v!r}", self.name) for v, s in levels.items()}

    def size_violation(self, size):
        return size < sb.lit(self.k)

    def class_violations(self, classes):
        n = sb.col(WEIGHT)
        # One CASE node built at once (chaining .when() copies it each time: quadratic in the number of values).
        level = exp.Case(ifs=[exp.If(this=exp.EQ(this=sb.as_text(sb.col(VALUE)), expression=sb.lit(value)),
                                     true=sb.lit(sid)) for value, sid in sorted(self.levels.items())])
        with_level = (exp.select(*classes.keys_of(), n, level.as_("__sid", quoted=True))
                      .from_(classes.cells(self.sensitive).subquery("cells")))
        per_level = exp.Window(this=_sum(n), partition_by=classes.keys_of() + [sb.col("__sid")])
        with_level_count = (exp.select(*classes.keys_of(), n, per_level.as_("__level_n", quoted=True))
                            .from_(with_level.subquery("levelled")))
        violated = exp.or_(exp.func("COUNT", exp.Star()) < sb.lit(self.l),
                           _ratio(exp.func("MAX", sb.col("__level_n")), _sum(n)) > sb.lit(self.alpha))
        return _grouped(classes, with_level_count, "level_counts", violated)

    def check_data(self, facts):
        self._check_k(facts)
        self._check_distinct(facts, self.l, "l")
        counts = facts.value_counts[self.sensitive]
        missing = sorted("NULL" if v is None else str(v) for v in counts if v is None or str(v) not in self.levels)
        if missing:
            raise PolicyError(f"{self.name}: sensitive values of {self.sensitive!r} missing from the level table: "
                              f"{missing[:10]}")
        per_level: dict[int, int] = {}
        for value, count in counts.items():
            per_level[self.levels[str(value)]] = per_level.get(self.levels[str(value)], 0) + count
        level, count = max(per_level.items(), key=lambda item: item[1])
        if count / facts.records > self.alpha:
            raise PolicyError(
                f"{self.name}: no release can satisfy alpha={self.alpha}: sensitivity level {level} makes up "
                f"{count / facts.records:.4f} of all records")


MODELS: dict[str, type[PrivacyModel]] = {m.name: m for m in (
    KAnonymity, DistinctLDiversity, EntropyLDiversity, RecursiveCLDiversity, AlphaKAnonymity, PSensitiveKAnonymity,
    TCloseness, AlphaLDiversityKAnonymity)}


def model_from_params(name: str, params: Mapping) -> PrivacyModel:
    """Rebuild a model stored by :meth:`PrivacyModel.params`."""
    if name not in MODELS:
        raise PolicyError(f"unknown privacy model {name!r}; known: {', '.join(MODELS)}")
    params = dict(params)
    if "hierarchy" in params:
        params["hierarchy"] = Hierarchy(params["hierarchy"], name=f"{params.get('sensitive')} (t-closeness)")
    return MODELS[name](**params)


def sensitive_attributes(models: Sequence[PrivacyModel]) -> list[str]:
    seen: list[str] = []
    for model in models:
        if model.sensitive is not None and model.sensitive not in seen:
            seen.append(model.sensitive)
    return seen
