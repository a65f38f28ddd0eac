"""Evaluating privacy models over equivalence classes.

:func:`class_verdicts` is the one query every check runs: per class its size, whether each model is violated, and
whether any is.  Size-only models fold into the size aggregation; every other model adds one UNION ALL branch, and a
single GROUP BY merges the branches, so no join is needed however many models a policy has.

When suppressed records are dropped, :class:`DropFixedPoint` turns those verdicts into drop mode's fixed point, and
:class:`RiskCut` marks what a policy's risk thresholds suppress; :func:`settle_and_cut` does both, in turn, until
neither marks more.  Checks, searches and publishing all suppress what it says.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlglot import exp

from ..deferred import Rows
from ..deferred import pandas as pd
from ..engine import Engine
from ..errors import PolicyError
from ..sqlgen import build as sb
from .classes import SIZE, VIOLATED, WEIGHT, Classes, Pricing, every_key_is, key_name
from .models import PrivacyModel, population_checked
from .thresholds import Cut, cut, risk_thresholds, starred_fails

_serial = itertools.count()
ROUND = "__round"


def verdict_column(i: int) -> str:
    return f"__v{i}"


def class_verdicts(classes: Classes, models: Sequence[PrivacyModel],
                   sums: Mapping[str, exp.Expression] | None = None,
                   valued: Mapping[str, Classes] | None = None) -> exp.Select:
    """``__k…, __size, [sums…,] __v0 … __vm, __violated``: one row per class.

    ``sums`` names expressions over the normalized records (weight ``__n`` and carried columns) to be summed per
    class alongside the size, e.g. the records' metric costs.  ``valued`` gives, per sensitive attribute, the same
    classes weighed otherwise for the models of that attribute's values (under a policy that counts people, each
    person's value once), while ``classes``' weight gives the sizes."""
    sums = dict(sums or {})
    size_type, flag_type, sum_type = (exp.DataType.build(t) for t in ("BIGINT", "BOOLEAN", "DOUBLE"))
    null_flag = exp.cast(exp.Null(), flag_type)

    def flags(values: dict[int, exp.Expression]) -> list[exp.Expression]:
        return [values.get(i, null_flag).as_(verdict_column(i), quoted=True) for i in range(len(models))]

    def null_sums() -> list[exp.Expression]:
        return [exp.cast(exp.Null(), sum_type).as_(name, quoted=True) for name in sums]

    size = exp.func("SUM", sb.col(WEIGHT))
    size_flags = {i: p for i, m in enumerate(models) if (p := m.size_violation(size)) is not None}
    branches: list[exp.Select] = [
        exp.select(*classes.keys_of(), exp.cast(size, size_type).as_(SIZE, quoted=True),
                   *[exp.cast(exp.func("SUM", e), sum_type).as_(name, quoted=True) for name, e in sums.items()],
                   *flags(size_flags))
        .from_(classes.normalized().subquery("records")).group_by(*classes.keys_of())
    ]
    for i, model in enumerate(models):
        verdicts = model.class_violations((valued or {}).get(model.sensitive, classes))
        if verdicts is not None:
            branches.append(exp.select(*classes.keys_of("m"), exp.cast(exp.Null(), size_type).as_(SIZE, quoted=True),
                                       *null_sums(), *flags({i: sb.col(VIOLATED, "m")}))
                            .from_(verdicts.subquery("m")))
    if len(branches) == 1:
        # Size-only models: the one aggregation already has a row per class.
        size_only = branches[0]
        size_only.select(sb.or_all(p.copy() for p in size_flags.values()).as_(VIOLATED, quoted=True), copy=False)
        return size_only
    union = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False, copy=False)  # branches are fresh: copying is quadratic
    merged_flags = [exp.func("COALESCE", exp.func("BOOL_OR", sb.col(verdict_column(i))), exp.false())
                    for i in range(len(models))]
    return (exp.select(*classes.keys_of(), exp.func("MAX", sb.col(SIZE)).as_(SIZE, quoted=True),
                       *[exp.func("MAX", sb.col(name)).as_(name, quoted=True) for name in sums],
                       *[f.as_(verdict_column(i), quoted=True) for i, f in enumerate(merged_flags)],
                       sb.or_all(merged_flags).as_(VIOLATED, quoted=True))
            .from_(union.subquery("branches")).group_by(*classes.keys_of()))


class DropFixedPoint:
    """Drop mode's fixed point of the class verdicts in table ``verdicts``, its statements built once.

    Dropped records leave the table, so a model that compares a class with its whole table
    (:attr:`~duckanon.privacy.models.PrivacyModel.compares_with_table`) must compare with the records kept: they are what the
    release's recipient, and its verification, see.  So the kept classes are checked again against the kept records,
    those that violate now are dropped too, and so on until none does.  The kept records only shrink, so this ends.
    Each table of ``classes`` (:attr:`~duckanon.privacy.classes.Classes.table_keys`) settles on its own, and a round checks
    only the tables that lost records in the round before: the others keep the records they were last checked with.
    Class-local models cannot change their verdicts, so only the others are checked again."""

    def __init__(self, classes: Classes, models: Sequence[PrivacyModel], verdicts: exp.Table):
        again = [i for i, model in enumerate(models) if model.compares_with_table]
        self.needed = bool(again)
        self._prepared: dict | None = None
        keys, flags = classes.key_columns, [verdict_column(i) for i in again]
        # The dropped classes, with the round that dropped them (0: those violating to begin with).
        dropped = sb.table(f"{verdicts.name}_dropped")
        last = exp.select(exp.func("MAX", sb.col(ROUND))).from_(dropped).subquery()

        def dropped_where(condition: exp.Expression, pairs) -> exp.Exists:
            return exp.Exists(this=exp.select(sb.lit(1)).from_(exp.alias_(dropped, "d", quoted=True)).where(
                exp.and_(condition, *[exp.NullSafeEQ(this=sb.col(key, "r"), expression=sb.col(k, "d"))
                                      for key, k in pairs])))

        pairs = list(zip(classes.keys, keys))
        kept = (exp.select(exp.Column(this=exp.Star(), table=sb.ident("r"))).from_(classes.source("r"))
                .where(exp.and_(dropped_where(exp.true(), pairs).not_(),
                                dropped_where(sb.col(ROUND, "d").eq(last), pairs[:classes.table_keys]))))
        remaining = Classes.of(kept, classes.keys, classes.weight, classes.carry, table_keys=classes.table_keys,
                               pricing=classes.pricing)
        now = class_verdicts(remaining, [models[i] for i in again]).subquery("now")
        self.start = (sb.create_table_as(dropped, exp.select(
            *[sb.col(c) for c in [*keys, *flags]], sb.lit(0).as_(ROUND, quoted=True)).from_(verdicts)
            .where(sb.col(VIOLATED)), temporary=True))
        self.round = (exp.insert(exp.select(
            *[sb.col(k, "now") for k in keys], *[sb.col(verdict_column(j), "now") for j in range(len(again))],
            last.copy() + sb.lit(1)).from_(now).where(sb.col(VIOLATED, "now")), dropped))
        self.mark = (exp.update(
            verdicts, {VIOLATED: exp.true(), **{f: sb.col(f, "d") for f in flags}},
            from_=exp.From(this=exp.alias_(dropped, "d", quoted=True)),
            where=exp.and_(sb.col(ROUND, "d") > sb.lit(0), sb.null_safe_join(verdicts.name, "d", keys))))
        self.finish = sb.drop("TABLE", dropped)
        self.held = (exp.select(exp.func("COALESCE", exp.func("SUM", sb.col(SIZE)), sb.lit(0)))
                     .from_(verdicts).where(sb.col(VIOLATED)))

    def settle(self, engine: Engine) -> int:
        """Settle the table; the records this adds to the violating classes."""
        if not self.needed:
            return 0
        # A search settles once per batch of nodes: the statements are generated once.
        if self._prepared is None:
            self._prepared = {name: engine.prepare(getattr(self, name))
                              for name in ("start", "round", "mark", "finish", "held")}
        start, round_, mark, finish, held = self._prepared.values()
        before = engine.value(held)
        engine.run(start)
        try:
            while engine.value(round_):
                pass
            engine.run(mark)
        finally:
            engine.run(finish)
        return int(engine.value(held) - before)


class RiskCut:
    """The classes a policy's risk thresholds suppress (:func:`~duckanon.privacy.thresholds.cut`), marked in place in
    ``verdicts``, a table of :func:`class_verdicts` of ``classes``: each table's kept classes (not violating, and not
    the ``exempt`` class) are counted by size, the cut is decided from that histogram, and the first classes in the
    cut's order -- size, then the other keys, NULL last -- are marked violating, each against the threshold whose
    cut reached it.  With ``strata`` (the tables are a policy's strata), each table's thresholds are as they apply in
    a stratum holding its share of the records (:meth:`~duckanon.privacy.models.PrivacyModel.in_stratum`).  Its
    statements are built once (a search cuts every batch)."""

    def __init__(self, classes: Classes, models: Sequence[PrivacyModel], verdicts: exp.Table,
                 exempt: str | None = None, strata: bool = False):
        self.thresholds = risk_thresholds(models)
        self.needed = bool(self.thresholds)
        self._prepared: tuple | None = None
        # Per table, the thresholds its cut applies (with strata, each as it applies in its stratum).
        self._per_table: dict[tuple, list] = {}
        if not self.needed:
            return
        self.flags = [verdict_column(i) for i, m in enumerate(models) if m.risk_threshold]
        keys = classes.key_columns
        self.tables, self.within = keys[:classes.table_keys], keys[classes.table_keys:]
        kept = sb.col(VIOLATED).not_()
        if exempt is not None:
            kept = exp.and_(kept, exp.not_(every_key_is(self.within, exempt)))
        self.histogram = (exp.select(*[sb.col(t) for t in self.tables], sb.col(SIZE), exp.func("COUNT", exp.Star()))
                          .from_(verdicts).where(kept).group_by(*[sb.col(t) for t in self.tables], sb.col(SIZE)))
        # With strata for tables, each stratum's records (kept or not), its share of the data's.
        self.shares = None if not (strata and self.tables) else (
            exp.select(*[sb.col(t) for t in self.tables], exp.func("SUM", sb.col(SIZE))).from_(verdicts)
            .group_by(*[sb.col(t) for t in self.tables]))
        order = exp.Order(expressions=[exp.Ordered(this=sb.col(c), nulls_first=False) for c in [SIZE, *self.within]])
        rank = exp.Window(this=exp.func("ROW_NUMBER"), partition_by=[sb.col(t) for t in self.tables], order=order)
        ranked = (exp.select(*[sb.col(k) for k in keys], rank.as_("__rank", quoted=True))
                  .from_(verdicts).where(kept.copy()).subquery("r"))
        # The cuts, per table, the prefix each threshold's cut ends at: a frame registered under this name.
        self.cuts_name = f"__duckanon_cuts_{next(_serial)}"
        bounds = [f"__to{j}" for j in range(len(self.thresholds))]
        cuts = exp.alias_(sb.table(self.cuts_name), "c", quoted=True)
        marked = (exp.select(*[sb.col(k, "r") for k in keys], sb.col("__rank", "r"), *[sb.col(b, "c") for b in bounds])
                  .from_(ranked).join(cuts, on=sb.and_all([exp.true(), *[
                      exp.NullSafeEQ(this=sb.col(t, "r"), expression=sb.col(t, "c")) for t in self.tables]]))
                  .where(sb.col("__rank", "r") <= sb.col(bounds[-1], "c")).subquery("m"))
        position = sb.col("__rank", "m")
        marks = {VIOLATED: exp.true()}
        for j, flag in enumerate(self.flags):
            start = sb.lit(0) if j == 0 else sb.col(bounds[j - 1], "m")
            marks[flag] = exp.and_(position.copy() > start, position.copy() <= sb.col(bounds[j], "m"))
        self.mark = exp.update(verdicts, marks, from_=exp.From(this=marked),
                               where=sb.null_safe_join(verdicts.name, "m", keys))

    def apply(self, engine: Engine) -> dict[tuple, Cut]:
        """Cut every table of the verdicts; per table (its key values), its cut."""
        if not self.needed:
            return {}
        if engine.dialect != "duckdb":
            raise PolicyError(f"{', '.join(t.describe() for t in self.thresholds)}: a risk threshold marks its cut "
                              f"with an UPDATE of the class verdicts, which {engine.dialect} SQL lacks; run it on "
                              f"DuckDB")
        if self._prepared is None:
            self._prepared = (engine.prepare(self.histogram), engine.prepare(self.mark))
            if self.shares is not None:
                records = {tuple(row[:-1]): int(row[-1]) for row in engine.rows(self.shares)}
                total = sum(records.values())
                self._per_table = {table: [t.in_stratum(n / total) for t in self.thresholds]
                                for table, n in records.items()}
        histogram, mark = self._prepared
        rows = engine.rows(histogram)
        sizes: dict[tuple, list] = {}
        for row in rows:
            table, size, classes = tuple(row[:len(self.tables)]), int(row[-2]), int(row[-1])
            sizes.setdefault(table, []).append(np.full(classes, size, dtype=np.int64))
        cuts = {table: cut(self.thresholds_in(table), np.concatenate(parts)) for table, parts in sizes.items()}
        marked = [(*table, *c.prefixes) for table, c in cuts.items() if c.classes]
        if marked:
            columns = [*self.tables, *[f"__to{j}" for j in range(len(self.thresholds))]]
            frame = pd.DataFrame(marked, columns=columns)
            with engine.registered(frame, self.cuts_name):
                engine.run(mark)
        return cuts

    def starred_fails(self, cuts: dict[tuple, Cut], table: tuple, suppressed: int) -> bool:
        """Whether a table's suppressed records, as one class of their own, fail a threshold with the classes its
        cut leaves (a table without kept classes: with none)."""
        left = cuts.get(table) or cut(self.thresholds_in(table), np.zeros(0, dtype=np.int64))
        return starred_fails(self.thresholds_in(table), left, suppressed)

    def thresholds_in(self, table: tuple) -> list:
        """The thresholds as they apply in ``table`` (a stratum's share of the records, under strata)."""
        return self._per_table.get(table, self.thresholds)

    def any_starred_fails(self, engine: Engine, verdicts: exp.Table, cuts: dict[tuple, Cut]) -> bool:
        """Whether the suppressed records of some table of ``verdicts`` (each table's its own class) fail a
        threshold: :meth:`starred_fails` of every table that suppresses records."""
        if not self.needed:
            return False
        tables = [sb.col(t) for t in self.tables]
        suppressed = (exp.select(*tables, exp.func("SUM", sb.col(SIZE))).from_(verdicts).where(sb.col(VIOLATED))
                      .group_by(*[t.copy() for t in tables]))
        return any(self.starred_fails(cuts, tuple(row[:-1]), int(row[-1])) for row in engine.rows(suppressed)
                   if row[-1])


def settle_and_cut(engine: Engine, fixed_point: DropFixedPoint | None, risk_cut: RiskCut
                   ) -> tuple[int, dict[tuple, Cut]]:
    """Drop mode's fixed point (where ``fixed_point`` is given) and the risk thresholds' cut, in place on their
    verdicts table, in turn until neither marks more: the records a cut drops leave the table that models comparing
    with it judge against.  Returns the records the settling added (drop mode's cascade) and the last cut per
    table."""
    settles = fixed_point is not None and fixed_point.needed
    cascaded = fixed_point.settle(engine) if settles else 0
    cuts = risk_cut.apply(engine)
    while settles and any(c.classes for c in cuts.values()):
        added = fixed_point.settle(engine)
        if not added:
            break
        cascaded += added
        cuts = risk_cut.apply(engine)
    return cascaded, cuts


def suppressed_class_violates(engine: Engine, classes: Classes, models: Sequence[PrivacyModel],
                              verdicts: exp.Expression | None = None) -> bool:
    """Whether the records of the violating classes, replaced by one class of their own in each table (every key but
    the table's ``*``, as replacement suppression publishes them), violate the models.  Every record stays in the
    table, so models that compare with the whole table (t-closeness) see the same table as before.  ``verdicts``: a table of
    :func:`class_verdicts` of ``classes`` and ``models`` already computed and cut (else it is computed here).  A risk
    threshold's own verdict on that class is :meth:`RiskCut.starred_fails`'s."""
    if verdicts is None and risk_thresholds(models):  # the cut's classes are among those suppressed
        table = sb.table(f"__duckanon_verdicts_{next(_serial)}")
        engine.run(sb.create_table_as(table, class_verdicts(classes, models), temporary=True))
        try:
            RiskCut(classes, models, table, strata=classes.table_keys > 0).apply(engine)
            return suppressed_class_violates(engine, classes, models, table)
        finally:
            engine.run(sb.drop("TABLE", table))
    verdicts = (class_verdicts(classes, models) if verdicts is None else exp.select(exp.Star()).from_(verdicts)
                ).subquery("v")
    flag = sb.col(VIOLATED, "v")
    tables = classes.table_keys  # a table's keys stay: its suppressed records form a class of that table
    starred_keys = [f"__starred{i}" for i in range(len(classes.keys))]

    def starred(key: exp.Expression, position: int) -> exp.Expression:
        return key if position < tables else exp.Case().when(flag.copy(), exp.Null()).else_(key)

    # A '*' value's domain share is 1: its log 0.
    pricing = None if classes.pricing is None else Pricing(
        tuple(f"__starred_{c}" for c in classes.pricing.columns), classes.pricing.most)
    starred_rows = (exp.select(exp.Column(this=exp.Star(), table=sb.ident("r")), *[
        starred(sb.col(key, "r"), i).as_(name, quoted=True)
        for i, (key, name) in enumerate(zip(classes.keys, starred_keys))], flag.as_("__starred", quoted=True), *[
        exp.Case().when(flag, sb.lit(0.0)).else_(sb.col(column, "r")).as_(name, quoted=True)
        for column, name in zip(classes.pricing.columns if pricing else (), pricing.columns if pricing else ())])
        .from_(classes.source("r"))
        .join(verdicts, on=sb.and_all(exp.NullSafeEQ(this=sb.col(key, "r"), expression=sb.col(k, "v"))
                                      for key, k in zip(classes.keys, classes.key_columns))))
    population = None
    if classes.population is not None:
        # Starred records could be anyone of their table: their class's population is the table's whole population.
        weight = sb.col(classes.population.weight) if classes.population.weight else sb.lit(1)
        population = Classes.of(exp.select(
            *[(sb.col(key) if i < tables else exp.Null()).as_(name, quoted=True)
              for i, (key, name) in enumerate(zip(classes.population.keys, starred_keys))],
            exp.true().as_("__starred", quoted=True), weight.as_(WEIGHT, quoted=True))
            .from_(classes.population.source("p")), [*starred_keys, "__starred"], WEIGHT, table_keys=tables)
    after = Classes.of(starred_rows, [*starred_keys, "__starred"], classes.weight, classes.carry,
                       table_keys=tables, population=population, pricing=pricing)
    star = class_verdicts(after, models).subquery("s")
    rows = engine.rows(exp.select(sb.col(VIOLATED)).from_(star).where(sb.col(key_name(len(starred_keys)))))
    return any(row[0] for row in rows)


@dataclass
class CheckReport:
    """How a set of classes fares under a policy's models."""

    records: int
    classes: int
    smallest_class: int
    violating_classes: int
    violating_records: int
    allowed_suppressed: int
    # Per model, its description and the classes and records violating it (``per_model``); the violating classes
    # listed, with their keys, size and each model's verdict (``violations``): rows, framed only when asked.
    model_rows: Rows
    violation_rows: Rows
    # Drop mode: of the violating records, those in classes that violate only against the records kept once the
    # others are dropped (models that compare with the whole table; see settle_and_cut).
    cascaded_records: int = 0
    # Replace mode: the violating records, all quasi-identifiers '*', form one class that violates the policy itself.
    replaced_class_violates: bool = False
    # The models violated in a way no suppression mends (δ-presence's population classes without a record of the data).
    unmendable: list[str] = field(default_factory=list)

    @functools.cached_property
    def per_model(self) -> pd.DataFrame:
        return self.model_rows.frame()

    @functools.cached_property
    def violations(self) -> pd.DataFrame:
        return self.violation_rows.frame()

    @property
    def satisfied(self) -> bool:
        """True when no class violates the policy."""
        return self.violating_classes == 0 and not self.unmendable

    @property
    def within_limit(self) -> bool:
        """True when suppressing every violating class stays within the suppression limit and, when suppressed
        records are replaced, their own class satisfies the policy: what a search accepts and publishing releases."""
        return (self.violating_records <= self.allowed_suppressed and not self.replaced_class_violates
                and not self.unmendable)

    def summary(self) -> str:
        if self.unmendable:
            verdict = (f"fails: {', '.join(self.unmendable)} cannot hold, whatever is suppressed: a class of the "
                       f"population holds no record of the data (generalize further)")
        elif self.satisfied:
            verdict = "holds"
        elif self.within_limit:
            verdict = f"holds after suppressing {self._suppressed()}"
        elif self.replaced_class_violates:
            verdict = (f"fails: {self._replaced()}, suppressed with every quasi-identifier '*', would "
                       f"{self._replaced_fails()} (generalize further, or drop suppressed records)")
        else:
            verdict = f"fails: {self._violating()}"
        return f"{self._counted()}; the policy {verdict}"

    # The summary's phrases, in the unit a check counts (records here; people in a check that counts people).
    def _share(self) -> str:
        return f"{self.violating_records / self.records:.2%}"

    def _cascaded(self) -> str:
        return (f", {self.cascaded_records} of them in classes that violate only against the records left once "
                f"the others are dropped" if self.cascaded_records else "")

    def _counted(self) -> str:
        return f"{self.records} records in {self.classes} classes (smallest {self.smallest_class})"

    def _suppressed(self) -> str:
        return (f"{self.violating_records} records in {self.violating_classes} classes ({self._share()}"
                f"{self._cascaded()})")

    def _replaced(self) -> str:
        return (f"the {self.violating_records} records of the {self.violating_classes} violating classes "
                f"({self._share()})")

    def _replaced_fails(self) -> str:
        return "form a class that violates it too"

    def _violating(self) -> str:
        return (f"{self.violating_records} records in {self.violating_classes} classes violate it ({self._share()}"
                f"{self._cascaded()}; at most {self.allowed_suppressed} may be suppressed)")


def check(engine: Engine, classes: Classes, models: Sequence[PrivacyModel], *,
          key_names: Sequence[str], allowed_suppressed: int = 0, most_violations: int = 1000,
          drop: bool = False, replaced_checked: bool = True, exempt: str | None = None,
          unmendable_checked: bool = True) -> CheckReport:
    """How ``classes`` fare under ``models``.  ``drop``: suppressed records are dropped, so the violating classes are
    those of drop mode's fixed point (:func:`settle_and_cut`); otherwise they are replaced, and their own class must
    satisfy the models too (:func:`suppressed_class_violates`) unless ``replaced_checked`` is False (ARX's
    semantics).  The class whose every key is ``exempt`` never violates (a release's '*' class under ARX's
    semantics).  ``unmendable_checked`` False leaves out the violations no suppression mends (:func:`unmendable`):
    a written release, whose suppressed classes are gone, was checked for them before suppression."""
    # The verdicts feed both the totals and the listing: computed once into a temporary table.
    verdicts = sb.table(f"__duckanon_verdicts_{next(_serial)}")
    query = class_verdicts(classes, models)
    if exempt is not None:  # the exempt class's verdicts read false, in the query itself (no UPDATE: Spark has none)
        starred = every_key_is(classes.key_columns[classes.table_keys:], exempt)
        flags = [VIOLATED, *[verdict_column(i) for i in range(len(models))]]
        query = exp.select(*[sb.col(c) for c in [*classes.key_columns, SIZE]], *[
            exp.and_(sb.col(f), exp.not_(starred.copy())).as_(f, quoted=True) for f in flags
        ]).from_(query.subquery("verdicts"))
    engine.run(sb.create_table_as(verdicts, query, temporary=True))
    try:
        return verdict_report(engine, verdicts, classes, models, key_names=key_names,
                              allowed_suppressed=allowed_suppressed, most_violations=most_violations, drop=drop,
                              replaced_checked=replaced_checked, unmendable_checked=unmendable_checked,
                              exempt=exempt)
    finally:
        engine.run(sb.drop("TABLE", verdicts))


def verdict_report(engine: Engine, verdicts: exp.Table, classes: Classes,
                   models: Sequence[PrivacyModel], *, key_names: Sequence[str], allowed_suppressed: int = 0,
                   most_violations: int = 1000, drop: bool = False, replaced_checked: bool = True,
                   unmendable_checked: bool = True, exempt: str | None = None) -> CheckReport:
    """The :class:`CheckReport` of ``verdicts``, a table of :func:`class_verdicts` of ``classes`` and ``models``; with
    ``drop`` the table is settled in place, and the risk thresholds' cut marked in it (:func:`settle_and_cut`; the
    ``exempt`` class is not among the classes they count), so it then marks what is suppressed; without ``drop``, violating records within the limit are checked as the one class replacement makes
    of them (unless ``replaced_checked`` is False: ARX's semantics)."""
    risk_cut = RiskCut(classes, models, verdicts, exempt, strata=classes.table_keys > 0)
    cascaded, cuts = settle_and_cut(engine, DropFixedPoint(classes, models, verdicts) if drop else None, risk_cut)
    size, violated = sb.col(SIZE), sb.col(VIOLATED)

    def records_where(condition: exp.Expression) -> exp.Expression:
        return exp.func("COALESCE", exp.func("SUM", exp.Case().when(condition, size)), sb.lit(0))

    totals = exp.select(
        exp.func("COALESCE", exp.func("SUM", size), sb.lit(0)), exp.func("COUNT", exp.Star()),
        exp.func("COALESCE", exp.func("MIN", size), sb.lit(0)),
        exp.func("COUNT", exp.Case().when(violated, sb.lit(1))), records_where(violated),
        *[records_where(sb.col(verdict_column(i))) for i in range(len(models))],
        *[exp.func("COUNT", exp.Case().when(sb.col(verdict_column(i)), sb.lit(1))) for i in range(len(models))],
    ).from_(verdicts)
    row = engine.rows(totals)[0]
    records, n_classes, smallest, bad_classes, bad_records = (int(v) for v in row[:5])
    m = len(models)
    per_model = Rows(("model", "violating_classes", "violating_records"), tuple(
        (model.describe(), int(row[5 + m + i]), int(row[5 + i])) for i, model in enumerate(models)))
    keys = [sb.col(k).as_(name, quoted=True) for k, name in zip(classes.key_columns, key_names)]
    listing = (exp.select(*keys, size.as_("size"),
                          *[sb.col(verdict_column(i)).as_(model.describe(), quoted=True) for i, model in enumerate(models)])
               .from_(verdicts).where(violated).order_by(size, *[sb.col(k) for k in classes.key_columns])
               .limit(most_violations))
    replaced_class_violates = (not drop and replaced_checked and 0 < bad_records <= allowed_suppressed
                               and (risk_cut.any_starred_fails(engine, verdicts, cuts)
                                    or suppressed_class_violates(engine, classes, models, verdicts)))
    return CheckReport(records=records, classes=n_classes, smallest_class=smallest, violating_classes=bad_classes,
                       violating_records=bad_records, allowed_suppressed=allowed_suppressed, model_rows=per_model,
                       violation_rows=Rows(tuple(listing.named_selects), tuple(engine.rows(listing))),
                       cascaded_records=cascaded,
                       replaced_class_violates=replaced_class_violates,
                       unmendable=[*(unmendable(engine, classes, models) if unmendable_checked else []),
                                   *unmet_thresholds(risk_cut, cuts)])


def unmet_thresholds(risk_cut: RiskCut, cuts: Mapping[tuple, Cut]) -> list[str]:
    """The risk thresholds that the classes left after their cut still fail (only a threshold that suppressing
    small classes need not mend, population uniqueness, can), described."""
    failed = {c.failed for c in cuts.values() if c.failed is not None}
    return [t.describe() for i, t in enumerate(risk_cut.thresholds) if i in failed]


def unmendable(engine: Engine, classes: Classes, models: Sequence[PrivacyModel]) -> list[str]:
    """The models ``classes`` (one table) violate in a way no suppression mends
    (:meth:`~duckanon.privacy.models.PrivacyModel.population_violations`), described."""
    violated = []
    for model in population_checked(models):
        query = model.population_violations(classes)
        if query is not None and any(row[-1] for row in engine.rows(query)):
            violated.append(model.describe())
    return violated
