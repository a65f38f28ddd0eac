"""People, not records: how exposed each person is when one person has several records.

A class of k records may hold one person's k visits; and a person whose records fall in classes {A, B} is singled
out when nobody else has records in both, however large A and B are.  So, over classes whose records carry a person
column:

- a person's **signature** is the set of classes (combinations of quasi-identifier values) their records fall in;
- a class's **people** are the distinct persons with a record in it;
- a person is **exposed at k** when fewer than k people (themself included) share their signature.  If every
  signature is shared by k people or more, every class holds k people or more too (each of its people brings a
  signature group of k into it).

A policy that counts people (``Policy(person=...)``) asks that every signature be shared by k people, suppressing
people (all of a person's records at once) whose signature is shared by fewer; suppressed people, all of whose
values are ``*``, share one signature, which must then hold k people too unless suppressed records are dropped or
left unchecked.

In a release of several tables stacked into one (:mod:`duckanon.encode.tables`), column ``record_table`` names the
table each record comes from, and a signature is the set of a person's (table, class) pairs: having a record in a
table is something an attacker may know, as much as its values.

Everything is counted in SQL over the classes (set-based; the same trees run on Spark): a class's key is the text of
its values, each prefixed by its length (NULL as ``-``), so that keys, and the sorted concatenation of a person's
distinct keys that is their signature, are equal exactly when the classes are.  :func:`signature_sharing` computes
the same over arrays, for the in-process search.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..deferred import Rows
from ..deferred import pandas as pd
from ..engine import Engine
from ..errors import PolicyError
from ..hierarchy.hierarchy import TOP
from ..parameters import checked_number
from ..sqlgen import build as sb
from .checks import CheckReport, class_verdicts
from .classes import (
    VALUE,
    VIOLATED,
    WEIGHT,
    Classes,
    every_key_is,
    information_losses,
    summed,
)
from .models import KAnonymity, KMap, PrivacyModel, population_checked
from .thresholds import RiskThreshold, cut, risk_thresholds

PERSON, SIGNATURE, PEOPLE, RECORDS = "__person", "__signature", "__people", "__records"
_KEY = "__class_key"
_SHARE = "__person_share"  # a person's costliest class's sum of log10 domain shares
_rounds = itertools.count()  # names the temporary tables of settled_people's rounds


@dataclass(frozen=True)
class PersonExposure:
    """The people of a relation at ``k``: how many hold records, how many fall in a class of fewer than k people,
    how many have a signature fewer than k people share, and how many have one nobody else has."""

    k: int
    records: int
    people: int
    classes: int
    signatures: int
    people_in_small_classes: int
    people_below_k: int
    unique_people: int
    smallest_signature_group: int

    def summary(self) -> str:
        return (f"{self.people:,} people with {self.records:,} records in {self.classes:,} classes: "
                f"{self.people_in_small_classes:,} in a class of fewer than {self.k} people, "
                f"{self.people_below_k:,} whose signature fewer than {self.k} people share "
                f"({self.unique_people:,} unique)")


@dataclass
class PeopleCheckReport(CheckReport):
    """How classes fare under a policy that counts people: ``violating_classes`` and ``violating_records`` are the
    signature groups shared by fewer than k people and their records; ``violating_people`` their people, which the
    suppression limit (``allowed_suppressed``) counts."""

    k: int = 0
    people: int = 0
    signatures: int = 0
    smallest_signature_group: int = 0
    violating_people: int = 0

    @property
    def satisfied(self) -> bool:
        return self.violating_people == 0

    @property
    def within_limit(self) -> bool:
        # ``unmendable``: the risk thresholds the groups left still fail, or a population signature no person has
        return (self.violating_people <= self.allowed_suppressed and not self.replaced_class_violates
                and not self.unmendable)

    def _share(self) -> str:
        return f"{self.violating_people / self.people:.2%}" if self.people else "0%"

    def _counted(self) -> str:
        return (f"{self.people} people with {self.records} records in {self.classes} classes and {self.signatures} "
                f"signatures (the smallest shared by {self.smallest_signature_group})")

    def _suppressed(self) -> str:
        return (f"{self.violating_people} people ({self._share()}; {self.violating_records} records) whose "
                f"signatures fewer than {self.k} people share")

    def _replaced(self) -> str:
        return f"the {self.violating_people} people whose signatures fewer than {self.k} people share"

    def _replaced_fails(self) -> str:
        return f"share a signature of fewer than {self.k} people themselves"

    def _violating(self) -> str:
        return (f"{self.violating_people} people ({self._share()}) have signatures fewer than {self.k} people share; "
                f"at most {self.allowed_suppressed} may be suppressed")


def class_key(columns: Sequence[str]) -> exp.Expression:
    """An injective text of a record's class: each key column's text prefixed by its length, NULL as ``-``."""
    return class_key_of([sb.col(column) for column in columns])


def class_key_of(values: Sequence[exp.Expression]) -> exp.Expression:
    """:func:`class_key` of a class whose key columns hold ``values``."""
    return sb.concatenated([sb.length_prefixed(value) for value in values])


def sets_signature_k(model: PrivacyModel) -> bool:
    """Whether ``model`` asks, under a policy that counts people, that every signature be shared by its k
    (:attr:`~duckanon.privacy.models.PrivacyModel.minimum_size`): k-anonymity; k-map estimated from the population's
    size (whose sample is then of people, and k' a signature's); and a model of sensitive values with a class size,
    such as (α,k)-anonymity, whose classes then hold k people (each of a class's people brings a signature group of k
    into it)."""
    return (isinstance(model, KAnonymity) or _estimated(model)
            or (model.sensitive is not None and counts_people(model) and model.minimum_size is not None))


def _estimated(model: PrivacyModel) -> bool:
    """Whether ``model`` is k-map estimated from the population's size."""
    return isinstance(model, KMap) and model.population is None


def people_k(models: Sequence[PrivacyModel]) -> int:
    """The k every signature must be shared by under a policy that counts people (bound to its data: k-map's k'
    depends on it): the largest of its models' (:func:`sets_signature_k`; 1 when none has one)."""
    return max((m.minimum_size for m in models if sets_signature_k(m)), default=1)


def _by_table(classes: Classes, record_table: str | None) -> Classes:
    """``classes`` told apart also by ``record_table``, the column naming each record's table in a release of several
    tables (None: one table): the keys a signature is made of."""
    return classes if record_table is None else dataclasses.replace(classes, keys=(*classes.keys, record_table))


def _keyed(classes: Classes, person: str, record_table: str | None) -> exp.Select:
    """Per record (or counted row): its person, its class's key (its table's name in it) and its records."""
    classes = _by_table(classes, record_table)
    return exp.select(sb.col(VALUE).as_(PERSON, quoted=True), class_key(classes.key_columns).as_(_KEY, quoted=True),
                      sb.col(WEIGHT)).from_(classes.normalized(person).subquery("records"))


def _sorted_set(column: str) -> exp.Expression:
    """The distinct values of ``column`` in a group, sorted and concatenated (each is length-prefixed already)."""
    return exp.ArrayToString(this=exp.ArraySort(this=exp.ArrayAgg(this=exp.Distinct(expressions=[sb.col(column)]))),
                             expression=sb.lit(""))


def signatures(classes: Classes, person: str, record_table: str | None = None) -> exp.Select:
    """One row per person: the person (``__person``), their signature (``__signature``) and records (``__records``)."""
    return (exp.select(sb.col(PERSON), _sorted_set(_KEY).as_(SIGNATURE, quoted=True),
                       exp.func("SUM", sb.col(WEIGHT)).as_(RECORDS, quoted=True))
            .from_(_keyed(classes, person, record_table).subquery("keyed")).group_by(sb.col(PERSON)))


def signature_groups(classes: Classes, person: str, record_table: str | None = None) -> exp.Select:
    """Per person, how many people share their signature (``__people``), beside the person and their records."""
    sharing = exp.Window(this=exp.func("COUNT", exp.Star()), partition_by=[sb.col(SIGNATURE)])
    return exp.select(sb.col(PERSON), sb.col(SIGNATURE), sb.col(RECORDS), sharing.as_(PEOPLE, quoted=True)).from_(
        signatures(classes, person, record_table).subquery("signed"))


FIRST = "__first"  # a signature group's first person, in the person column's order


def group_sizes(classes: Classes, person: str, record_table: str | None = None) -> exp.Select:
    """One row per signature group: the signature, its people (``__people``) and its first person (``__first``)."""
    return (exp.select(sb.col(SIGNATURE), exp.func("COUNT", exp.Star()).as_(PEOPLE, quoted=True),
                       exp.func("MIN", sb.col(PERSON)).as_(FIRST, quoted=True))
            .from_(signatures(classes, person, record_table).subquery("signed")).group_by(sb.col(SIGNATURE)))


def signature_group_histogram(engine: Engine, relation: exp.Expression, quasi: Sequence[str], person: str,
                              record_table: str | None = None) -> tuple[np.ndarray, np.ndarray]:
    """The sizes of ``relation``'s signature groups (how many people share a signature; ascending) and how many
    groups have each: the class-size histogram of people, whose prosecutor risk is 1 / their group's size."""
    groups = group_sizes(Classes.of(relation, quasi), person, record_table).subquery("g")
    rows = engine.rows(exp.select(sb.col(PEOPLE), exp.func("COUNT", exp.Star())).from_(groups).group_by(
        sb.col(PEOPLE)).order_by(sb.col(PEOPLE)))
    return np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64)


def starred_signature(keys: int) -> exp.Expression:
    """The signature of a person all of whose records are suppressed ('*' in each of ``keys`` key columns)."""
    return class_key_of([sb.lit(TOP)] * keys)


def signature_classes(classes: Classes, person: str, everyone: bool = True) -> Classes:
    """People as the records of their signature groups: one row per person of ``classes`` keyed by their signature,
    and as its population (``Classes.population``) the population's signature groups, each weighing its people,
    which models counted in a population table judge them by.  With ``everyone``, the group of the suppressed (all
    values '*') weighs every population person, since a suppressed person could be anyone."""
    own = signatures(classes, person).subquery("people")
    return Classes.of(own, [SIGNATURE], population=_population_groups(classes, person, everyone))


def _population_groups(classes: Classes, person: str, everyone: bool = True) -> Classes:
    """The population's signature groups of ``classes`` (:func:`signature_classes`), each weighing its people."""
    signed = signatures(classes.population, person).subquery("population_people")
    groups = exp.select(sb.col(SIGNATURE), exp.func("COUNT", exp.Star()).as_(PEOPLE, quoted=True)).from_(
        signed).group_by(sb.col(SIGNATURE))
    if everyone:  # at the top every population person may have that signature already: they are everyone still
        groups = exp.select(sb.col(SIGNATURE), exp.func("MAX", sb.col(PEOPLE)).as_(PEOPLE, quoted=True)).from_(
            exp.union(groups, exp.select(starred_signature(len(classes.keys)).as_(SIGNATURE, quoted=True),
                                         exp.func("COUNT", exp.Star()).as_(PEOPLE, quoted=True)).from_(signed.copy()),
                      distinct=False).subquery("groups")).group_by(sb.col(SIGNATURE))
    return Classes.of(groups.subquery("population_groups"), [SIGNATURE], weight=PEOPLE)


def priced_signature_classes(classes: Classes, person: str) -> Classes:
    """People as the records of their signature groups, priced for the profitability models with an attack: an
    adversary attacks a person, who is one of the people sharing their signature (a journalist's: of the population's
    people with it, where any), and each record of theirs must pay the publisher, so a group is priced by its
    costliest class (the largest sum of its values' log10 domain shares, the largest information loss).  ``classes``
    carry each record's shares (:attr:`Classes.pricing`)."""
    if classes.pricing is None:
        raise PolicyError("a model that prices classes by their information loss needs each record's domain shares, "
                          "which only a full-domain generalization over hierarchies gives")
    total = summed([sb.col(c) for c in classes.pricing.columns])
    keyed = exp.select(sb.col(VALUE).as_(PERSON, quoted=True), class_key(classes.key_columns).as_(_KEY, quoted=True),
                       sb.as_double(total).as_(_SHARE, quoted=True)).from_(classes.normalized(person).subquery("r"))
    people = (exp.select(sb.col(PERSON), _sorted_set(_KEY).as_(SIGNATURE, quoted=True),
                         exp.func("MAX", sb.col(_SHARE)).as_(_SHARE, quoted=True))
              .from_(keyed.subquery("keyed")).group_by(sb.col(PERSON)))
    population = _population_groups(classes, person) if classes.population is not None else None
    return Classes.of(people.subquery("priced_people"), [SIGNATURE], population=population,
                      pricing=dataclasses.replace(classes.pricing, columns=(_SHARE,)))


def _in_population_failing(classes: Classes, person: str, models: Sequence[PrivacyModel]) -> exp.Select:
    """``__person`` of each person whose signature group fails a model counted in a population table
    (:func:`counted_in_population`), the group's population its signature's population people."""
    groups = signature_classes(classes, person)
    failing = exp.select(*groups.keys_of()).from_(class_verdicts(groups, models).subquery("verdicts")).where(
        sb.col(VIOLATED))
    return exp.select(sb.col(PERSON)).from_(signatures(classes, person).subquery("signed")).where(
        exp.In(this=sb.col(SIGNATURE), query=failing.subquery()))


def _priced_failing(classes: Classes, person: str, models: Sequence[PrivacyModel]) -> exp.Select:
    """``__person`` of each person whose signature group fails a profitability model that prices classes
    (:func:`priced_signature_classes`)."""
    groups = priced_signature_classes(classes, person)
    failing = exp.select(*groups.keys_of()).from_(class_verdicts(groups, models).subquery("verdicts")).where(
        sb.col(VIOLATED))
    return exp.select(sb.col(PERSON)).from_(groups.source("priced")).where(
        exp.In(this=sb.col(SIGNATURE), query=failing.subquery()))


def population_only_failing(engine: Engine, classes: Classes, person: str, models: Sequence[PrivacyModel]
                            ) -> list[str]:
    """The ``models`` counted in a population table (those :func:`~duckanon.privacy.models.population_checked`
    picks) that a signature of the population no person of ``classes`` has fails whatever is suppressed
    (δ-presence with delta_min > 0: δ = 0 there), described."""
    groups = signature_classes(classes, person, everyone=False)
    failing = []
    for model in models:
        query = model.population_violations(groups)
        if query is not None and any(row[-1] for row in engine.rows(query)):
            failing.append(f"{model.describe()} (a population signature no person of the data has)")
    return failing


def exposed_people(classes: Classes, person: str, k: int, record_table: str | None = None) -> exp.Select:
    """``__person`` of each person whose signature fewer than ``k`` people share (those a policy suppresses)."""
    return exp.select(sb.col(PERSON)).from_(signature_groups(classes, person, record_table).subquery("g")).where(
        sb.col(PEOPLE) < sb.lit(k))


def _starred_groups(engine: Engine, classes: Classes, person: str, record_table: str | None,
                    suppressed: exp.Expression, people: int) -> np.ndarray:
    """The sizes of the groups the ``people`` ``suppressed`` (a query of ``__person``) form once their values are all
    '*': one group, or in a release of several tables one per set of tables they have records in (their
    signature then)."""
    if record_table is None:
        return np.array([people] if people else [], dtype=np.int64)
    keyed = classes.normalized(person).subquery("records")
    tables = (exp.select(sb.col(VALUE), _sorted_set("__table").as_(SIGNATURE, quoted=True))
              .from_(exp.select(sb.col(VALUE), sb.length_prefixed(sb.col(record_table)).as_("__table", quoted=True))
                     .from_(keyed).subquery("t"))
              .where(exp.In(this=sb.col(VALUE), query=_people_of(suppressed)))
              .group_by(sb.col(VALUE)))
    sizes = exp.select(exp.func("COUNT", exp.Star()).as_(PEOPLE, quoted=True)).from_(tables.subquery("s")).group_by(
        sb.col(SIGNATURE))
    return np.array([r[0] for r in engine.rows(sizes)], dtype=np.int64)


def thresholds_failing(thresholds: Sequence[RiskThreshold], groups: np.ndarray) -> list[str]:
    """The risk ``thresholds`` that signature groups of ``groups`` people (the release's: those kept, and under
    replacement the suppressed people's own) fail."""
    sizes, counts = np.unique(np.asarray(groups, dtype=np.int64), return_counts=True)
    return [t.describe() for t in thresholds if not t.holds(sizes, counts)]


def lacking_tables(tables: Mapping[str, Sequence[str]], quasi: Sequence[str]) -> dict[str, list[str]]:
    """In a release of several ``tables`` (each with its columns), each of the quasi-identifiers ``quasi`` that some
    tables lack, with those tables: their records hold NULL there, suppressed or not."""
    return {q: [name for name, columns in tables.items() if q not in columns]
            for q in quasi if any(q not in columns for columns in tables.values())}


def table_holds(column: str, lacking: Mapping[str, Sequence[str]], record_table: str | None) -> exp.Expression:
    """True where the record's table (named in ``record_table``) holds ``column`` (:func:`lacking_tables`)."""
    if column not in lacking:
        return exp.true()
    return exp.not_(exp.In(this=sb.col(record_table), expressions=[sb.lit(name) for name in lacking[column]]))


def shows_suppressed(quasi: Sequence[str], lacking: Mapping[str, Sequence[str]] | None = None,
                     record_table: str | None = None) -> exp.Expression:
    """True where a record shows what suppression (by replacement) leaves: '*' in every quasi-identifier its table
    holds (every one, but in a release of several tables those ``lacking`` names for its table); never NULL."""
    lacking = lacking or {}
    return exp.func("COALESCE", sb.and_all(
        exp.or_(sb.col(q).eq(sb.lit(TOP)), exp.not_(table_holds(q, lacking, record_table)))
        if q in lacking else sb.col(q).eq(sb.lit(TOP)) for q in quasi), exp.false())


def counts_people(model: PrivacyModel) -> bool:
    """Whether a policy that counts people can enforce ``model``: k-anonymity (over signatures), a risk threshold
    (over signature groups, a person's risk), or a model of a class's sensitive values (the l-diversity forms; those
    comparing a class with its table: t-closeness, β-likeness, δ-disclosure; and those with a k as well:
    (α,k)-anonymity, p-sensitive k-anonymity), which then counts each person's value once per class and once in the
    table; k-map estimated from the population's size, the models counted in a population table
    (:func:`counted_in_population`), and the profitability models that price classes (a signature group by its people
    and its costliest class: :func:`priced_signature_classes`).  A model's k is a signature's
    (:func:`sets_signature_k`)."""
    return isinstance(model, (KAnonymity, RiskThreshold)) or _estimated(model) or counted_in_population(model) or (
        model.prices_classes) or (model.sensitive is not None and model.population is None)


def counted_in_population(model: PrivacyModel) -> bool:
    """Whether ``model`` judges classes by their records in a population table (k-map counted there, δ-presence):
    over people, a signature group by the population's people who have its signature."""
    return model.population is not None and model.sensitive is None and not model.prices_classes


def population_models(models: Sequence[PrivacyModel]) -> list[PrivacyModel]:
    """The models of ``models`` counted in a population table (:func:`counted_in_population`)."""
    return [m for m in models if counted_in_population(m)]


def priced_models(models: Sequence[PrivacyModel]) -> list[PrivacyModel]:
    """The models of ``models`` that price classes by their information loss (ARX's profitability with an attack)."""
    return [m for m in models if m.prices_classes]


def unmendable_models(models: Sequence[PrivacyModel]) -> list[PrivacyModel]:
    """The models of a policy of ``models`` whose population signatures without a person of the data are checked:
    those :func:`~duckanon.privacy.models.population_checked` picks, counted in a population table."""
    return population_models(population_checked(models))


def person_values(relation: exp.Expression, keys: Sequence[str], person: str, sensitive: str,
                  record_table: str | None = None, lacking: Mapping[str, Sequence[str]] | None = None,
                  table: exp.Expression | None = None) -> Classes:
    """The distinct (class, person, value) rows of ``relation`` as classes: each person's value of ``sensitive``
    once per class, as a model over sensitive values counts them under a policy that counts people; and, for the
    models that compare a class with its table, the distinct (person, value) rows of ``table`` (``relation`` when
    None: the release, or under ``drop`` the people kept), each person's value once in the table.  In a release of
    several tables, a class is one table's (``record_table`` joins the keys), and only the tables that hold
    ``sensitive`` count, in the classes as in the table (``lacking``: :func:`lacking_tables`)."""
    keyed = [*keys, *([record_table] if record_table is not None else [])]
    holds = (table_holds(sensitive, lacking, record_table)
             if record_table is not None and sensitive in (lacking or {}) else None)

    def distinct(columns: Sequence[str], source: exp.Expression, alias: str) -> exp.Subquery:
        rows = exp.select(*[sb.col(c) for c in columns]).distinct().from_(sb.derived(source, "r"))
        return (rows if holds is None else rows.where(holds.copy())).subquery(alias)

    return Classes.of(distinct([*keyed, person, sensitive], relation, "v"), keyed,
                      table=Classes.of(distinct([person, sensitive], relation if table is None else table,
                                                "table_values"), ()))


def valued_models(models: Sequence[PrivacyModel]) -> dict[str, list[PrivacyModel]]:
    """The models over sensitive values, by the attribute each protects."""
    valued: dict[str, list[PrivacyModel]] = {}
    for model in models:
        if model.sensitive is not None:
            valued.setdefault(model.sensitive, []).append(model)
    return valued


def _people_of(people: exp.Expression) -> exp.Subquery:
    """The ``__person`` column of ``people``, as the subquery an ``IN`` takes."""
    return exp.select(sb.col(PERSON)).from_(sb.derived(people, "p")).subquery()


def _without(classes: Classes, person: str, people: exp.Expression) -> Classes:
    """``classes`` over the rows of the people ``people`` (a query of ``__person``) does not name."""
    kept = exp.select(exp.Star()).from_(classes.source("c")).where(
        exp.not_(exp.In(this=sb.col(person), query=_people_of(people))))
    return dataclasses.replace(classes, relation=kept.subquery("kept"))


def _in_violating_classes(classes: Classes, person: str, valued: Mapping[str, Sequence[PrivacyModel]],
                          record_table: str | None = None, lacking: Mapping[str, Sequence[str]] | None = None,
                          table: exp.Expression | None = None) -> exp.Select:
    """``__person`` of each person with a row in a class that violates a model over sensitive values, each
    person's value counted once per class (per table's class, of the tables holding it: :func:`person_values`),
    and once in ``table`` (the classes' own rows when None) for the models that compare with it."""
    keys = list(classes.keys)
    selects = []
    for sensitive, models in valued.items():
        counted = person_values(classes.relation, keys, person, sensitive, record_table, lacking, table)
        violating = exp.select(*counted.keys_of()).from_(class_verdicts(counted, models).subquery("verdicts")).where(
            sb.col(VIOLATED))
        on = sb.and_all(exp.NullSafeEQ(this=sb.col(k, "r"), expression=sb.col(c, "x"))
                        for k, c in zip(counted.keys, counted.key_columns))
        selects.append(exp.select(sb.col(person, "r").as_(PERSON, quoted=True)).from_(classes.source("r")).join(
            violating.subquery("x"), on=on, join_type="INNER"))
    union = selects[0]
    for other in selects[1:]:
        union = exp.union(union, other, distinct=False)
    return union


@contextlib.contextmanager
def settled_people(engine: Engine, classes: Classes, person: str, k: int, models: Sequence[PrivacyModel] = (),
                   record_table: str | None = None, lacking: Mapping[str, Sequence[str]] | None = None,
                   table: exp.Expression | None = None) -> Iterator[exp.Expression]:
    """A query of ``__person``: the people a policy that counts people suppresses.  With k alone, those whose
    signature fewer than ``k`` people share, and those whose signature group fails a model counted in the population
    or a profitability model that prices it (signature groups are apart: that is final).  With models over
    sensitive values, round after round over the people left, those too with a row in a class that violates one,
    until a round suppresses nobody more: a person suppressed leaves every class of theirs, which may then violate.
    With risk thresholds, once a round suppresses nobody more, the smallest signature groups left go as ARX cuts the
    smallest classes (:func:`group_cut`); with models over values the rounds then go on, else that is final (each
    round's people are kept in a temporary table, dropped after).  A model that compares a class with its table
    compares it with the rows of ``table`` (replacement keeps every person's values in the release), or when None
    with the people left, round after round (as dropping leaves them)."""
    valued, thresholds = valued_models(models), risk_thresholds(models)
    counted, priced = population_models(models), priced_models(models)

    def exposed(kept: Classes) -> exp.Select:
        found = exposed_people(kept, person, k, record_table)
        if counted:  # each person once: a publish joins the records to them
            found = exp.union(found, _in_population_failing(kept, person, counted), distinct=True)
        if priced:
            found = exp.union(found, _priced_failing(kept, person, priced), distinct=True)
        return found

    if not valued and not thresholds:
        yield exposed(classes)
        return
    tables: list[exp.Table] = []
    current: exp.Select | None = None  # nobody, before the first round
    cuts = 0

    def count(query: exp.Select) -> int:
        return int(engine.value(exp.select(exp.func("COUNT", exp.Star())).from_(query.subquery("n"))))

    try:
        while True:
            kept = classes if current is None else _without(classes, person, current)
            found = exposed(kept)
            if valued:
                found = exp.union(found, _in_violating_classes(kept, person, valued, record_table, lacking, table),
                                  distinct=False)
            newly = exp.select(sb.col(PERSON)).distinct().from_(found.subquery("n"))
            if not count(newly):
                if not thresholds or (cuts and not valued):
                    break
                cuts += 1
                newly = _cut_people(engine, kept, person, record_table, thresholds)
                if not count(newly):
                    break
            settled = sb.table(f"__duckanon_settled_{next(_rounds)}")
            engine.run(sb.create_table_as(settled, newly if current is None else exp.union(
                current, newly, distinct=False), temporary=True))
            tables.append(settled)
            current = exp.select(sb.col(PERSON)).from_(settled)
        yield newly if current is None else current  # nobody found in the first round: its empty query
    finally:
        for round_table in tables:
            engine.run(sb.drop("TABLE", round_table))


def group_cut(thresholds: Sequence[RiskThreshold], sizes: np.ndarray) -> int:
    """How many of the signature groups of ``sizes`` people the risk ``thresholds`` suppress, the smallest first:
    :func:`~duckanon.privacy.thresholds.cut`, which cuts classes by their records, applied to groups by their
    people.  Which groups of one size go, the callers decide alike: those whose first person comes first."""
    return cut(thresholds, sizes).classes


def _cut_people(engine: Engine, classes: Classes, person: str, record_table: str | None,
                thresholds: Sequence[RiskThreshold]) -> exp.Select:
    """``__person`` of the people in the signature groups :func:`group_cut` suppresses among ``classes``."""
    groups = group_sizes(classes, person, record_table).subquery("g")
    sizes = np.array([r[0] for r in engine.rows(exp.select(sb.col(PEOPLE)).from_(groups))], dtype=np.int64)
    order = exp.Order(expressions=[exp.Ordered(this=sb.col(PEOPLE)), exp.Ordered(this=sb.col(FIRST))])
    ranked = exp.select(sb.col(SIGNATURE), exp.Window(this=exp.func("ROW_NUMBER"), order=order).as_(
        "__rank", quoted=True)).from_(groups.copy())
    chosen = exp.select(sb.col(SIGNATURE)).from_(ranked.subquery("r")).where(
        sb.col("__rank") <= sb.lit(group_cut(thresholds, sizes)))
    return exp.select(sb.col(PERSON)).from_(signatures(classes, person, record_table).subquery("signed")).where(
        exp.In(this=sb.col(SIGNATURE), query=chosen.subquery()))


def _starred_violates(engine: Engine, classes: Classes, person: str, suppressed: exp.Expression,
                      models: Sequence[PrivacyModel], record_table: str | None, lacking: Mapping[str, Sequence[str]]
                      | None, table: exp.Expression) -> bool:
    """Whether the suppressed people's rows, one class once all their values are '*' (one per table, in a release
    of several tables), violate a model over sensitive values (each person's value counted once, in the class and
    in ``table``, the rows replacement keeps)."""
    # One class: every row keyed alike.
    rows = exp.select(sb.lit(1).as_("__starred", quoted=True), exp.Star()).from_(classes.source("c")).where(
        exp.In(this=sb.col(person), query=_people_of(suppressed)))
    starred = dataclasses.replace(classes, relation=rows.subquery("starred"), keys=("__starred",))
    return bool(engine.rows(exp.select(sb.col(PERSON)).from_(
        _in_violating_classes(starred, person, valued_models(models), record_table, lacking, table).subquery("v")
    ).limit(1)))


def _starred_group_fails(engine: Engine, classes: Classes, person: str, models: Sequence[PrivacyModel],
                         suppressed: int) -> bool:
    """Whether the ``suppressed`` people, one signature group once all their values are '*', fail a model counted in
    the population or a profitability model that prices classes: a suppressed person could be anyone, so the group's
    population is every population person; '*' values' shares are 1, so such a group loses all its information."""
    if not models:
        return False
    group = np.array([suppressed], dtype=np.int64)
    population = None if classes.population is None else np.array([int(engine.value(exp.select(exp.func(
        "COUNT", exp.Distinct(expressions=[sb.col(person)]))).from_(classes.population.source("p"))))], dtype=np.int64)
    for model in models:
        if model.prices_classes:
            loss = information_losses(np.zeros(1), classes.pricing.most)
            failed = model.priced_verdicts(group, loss, population if model.population is not None else None)
        else:
            failed = model.population_verdicts(group, population)
        if bool(failed[0]):
            return True
    return False


def people_check(engine: Engine, classes: Classes, person: str, k: int, *, models: Sequence[PrivacyModel] = (),
                 allowed_suppressed: int = 0, replaced_checked: bool = True, exempt: str | None = None,
                 record_table: str | None = None, lacking: Mapping[str, Sequence[str]] | None = None,
                 drops: bool = False, unmendable_checked: bool = True,
                 keep: Callable[[exp.Select], object] | None = None) -> PeopleCheckReport:
    """How ``classes`` fare when every signature must be shared by ``k`` people and every class satisfy the
    ``models`` over sensitive values, each person's value counted once per class (the people suppressed:
    :func:`settled_people`).  ``replaced_checked``: suppressed people, all their values '*', must share a signature
    of k people too (under ``record_table``, with those that have records in the same tables), and satisfy the
    models as one class.  Records of the class whose every key is ``exempt`` (a release's '*' class under ARX's
    semantics) are left out of the check.  ``lacking``: in a release of several tables, the columns some tables
    lack (:func:`lacking_tables`), whose models count the other tables' records.  ``drops``: suppressed people leave
    the table that models comparing a class with it compare with (else the table is every record, the exempt class's
    too, as replacement keeps their values).  Models counted in a population table judge signature groups by the
    population's people with their signature (:func:`signature_classes`); with ``unmendable_checked``, a population
    signature no person has fails δ-presence as no suppression mends (not of a release, whose suppressed people leave
    theirs).  ``keep`` is given the query of the people suppressed (``__person``) while it reads, to keep them (a
    publish suppresses them without settling again)."""
    if record_table is not None:
        classes = dataclasses.replace(classes, carry=(*classes.carry, record_table))
    thresholds, counted, priced = risk_thresholds(models), population_models(models), priced_models(models)
    unmendable = unmendable_models(models) if unmendable_checked else []
    models = [m for m in models if m.sensitive is not None]
    whole = classes.relation  # the exempt class's values stay in the table too
    if exempt is not None:
        kept = exp.select(exp.Star()).from_(classes.source("c")).where(
            exp.not_(every_key_is(list(classes.keys), exempt)))
        classes = dataclasses.replace(classes, relation=kept.subquery("checked"))
    groups = signature_groups(classes, person, record_table).subquery("g")
    count = exp.func("COUNT", exp.Star())
    with settled_people(engine, classes, person, k, [*models, *thresholds, *counted, *priced], record_table, lacking,
                        None if drops else whole) as suppressed:
        if keep is not None:
            keep(exp.select(sb.col(PERSON)).from_(sb.derived(suppressed, "s")))
        hit = exp.In(this=sb.col(PERSON), query=_people_of(suppressed))

        def where(value: exp.Expression) -> exp.Expression:
            return exp.func("COALESCE", exp.func("SUM", exp.Case().when(hit.copy(), value).else_(sb.lit(0))),
                            sb.lit(0))

        people, sigs, smallest, violating_people, violating_records, records = engine.rows(exp.select(
            count.copy(), exp.func("COUNT", exp.Distinct(expressions=[sb.col(SIGNATURE)])),
            exp.func("COALESCE", exp.func("MIN", sb.col(PEOPLE)), sb.lit(0)), where(sb.lit(1)),
            where(sb.col(RECORDS)), exp.func("COALESCE", exp.func("SUM", sb.col(RECORDS)), sb.lit(0))
        ).from_(groups))[0]
        violating_people = int(violating_people)
        violating_groups = engine.rows(exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(SIGNATURE)])))
                                       .from_(groups.copy()).where(hit.copy()))[0][0]
        starred = (_starred_groups(engine, classes, person, record_table, suppressed, violating_people)
                   if replaced_checked else np.zeros(0, dtype=np.int64))
        replaced_violates = replaced_checked and violating_people > 0 and (
            int(starred.min()) < k
            or (bool(models) and _starred_violates(engine, classes, person, suppressed, models, record_table,
                                                   lacking, whole))
            or _starred_group_fails(engine, classes, person, [*counted, *priced], violating_people))
        failing = population_only_failing(engine, classes, person, unmendable) if unmendable else []
        if thresholds:  # over the groups the release shows: those kept, and the suppressed people's own
            kept = group_sizes(_without(classes, person, suppressed), person, record_table).subquery("k")
            shown = [r[0] for r in engine.rows(exp.select(sb.col(PEOPLE)).from_(kept))]
            failing += thresholds_failing(thresholds, np.concatenate([shown, starred]))
    sizes = classes.sizes().subquery("s")
    class_count, smallest_class = engine.rows(exp.select(
        count.copy(), exp.func("COALESCE", exp.func("MIN", sb.col("__size")), sb.lit(0))).from_(sizes))[0]
    model = "; ".join([f"k-anonymity over people (k={k})",
                       *(f"{m.describe()} over people" for m in [*models, *thresholds, *counted, *priced])])
    per_model = Rows(("model", "violating_signatures", "violating_people", "violating_records"),
                     ((model, int(violating_groups), int(violating_people), int(violating_records)),))
    return PeopleCheckReport(
        records=int(records), classes=int(class_count), smallest_class=int(smallest_class),
        violating_classes=int(violating_groups), violating_records=int(violating_records),
        allowed_suppressed=allowed_suppressed, model_rows=per_model,
        violation_rows=Rows(("violating_people", "violating_records"), ()),
        replaced_class_violates=replaced_violates, unmendable=failing, k=k, people=int(people),
        signatures=int(sigs), smallest_signature_group=int(smallest), violating_people=int(violating_people))


def person_exposure(engine: Engine, relation: exp.Expression, quasi: Sequence[str], person: str, k: int
                    ) -> PersonExposure:
    """The :class:`PersonExposure` of ``relation`` (rows carrying column ``person``) at ``k``.  PolicyError naming
    the column for a column the relation lacks, a person column holding NULL, or a k that is not a whole number of
    at least 1."""
    checked_number(k, "k", "person exposure", whole=True, low=1)
    columns = engine.columns(relation)
    missing = [c for c in [*quasi, person] if c not in columns]
    if missing:
        raise PolicyError(f"person exposure names columns the relation does not have: {missing}; it has {columns}")
    if person in quasi:
        raise PolicyError(f"the person column {person!r} is also a quasi-identifier")
    require_people(engine, relation, person)
    classes = Classes.of(relation, quasi)
    groups = signature_groups(classes, person).subquery("g")
    count, people = exp.func("COUNT", exp.Star()), sb.col(PEOPLE)
    total, signature_count, below, unique, smallest = engine.rows(exp.select(
        count.copy(), exp.func("COUNT", exp.Distinct(expressions=[sb.col(SIGNATURE)])),
        exp.Filter(this=count.copy(), expression=exp.Where(this=people.copy() < sb.lit(k))),
        exp.Filter(this=count.copy(), expression=exp.Where(this=people.copy().eq(sb.lit(1)))),
        exp.func("MIN", people.copy())).from_(groups))[0]
    keyed = _keyed(classes, person, None).subquery("keyed")
    per_class = exp.select(sb.col(_KEY), exp.func("COUNT", exp.Distinct(expressions=[sb.col(PERSON)])).as_(
        PEOPLE, quoted=True), exp.func("SUM", sb.col(WEIGHT)).as_(RECORDS, quoted=True)).from_(keyed).group_by(
        sb.col(_KEY))
    small = exp.select(sb.col(_KEY)).from_(per_class.subquery("c")).where(people.copy() < sb.lit(k))
    in_small = exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(PERSON)]))).from_(keyed.copy()).where(
        exp.In(this=sb.col(_KEY), query=small.subquery()))
    records, class_count = engine.rows(exp.select(exp.func("SUM", sb.col(RECORDS)), exp.func("COUNT", exp.Star()))
                                       .from_(per_class.subquery("c")))[0]
    (thin,), = engine.rows(in_small)
    return PersonExposure(k=k, records=int(records or 0), people=int(total), classes=int(class_count),
                          signatures=int(signature_count), people_in_small_classes=int(thin),
                          people_below_k=int(below), unique_people=int(unique),
                          smallest_signature_group=int(smallest or 0))


def person_points(relation: exp.Expression, person: str, positions: Mapping[str, exp.Expression],
                  weight: exp.Expression | None = None) -> exp.Select:
    """Each person's point, which partitioning and clustering place a person by (all their records then take the
    place's generalized values): ``person`` and, under each name of ``positions``, the ⌈n/2⌉-th of the person's n
    records (each row of ``relation`` weighing ``weight`` records, 1 when None) in the order of that expression, NULL
    last.  A value the person has, their lower median; NULL when at least half their records have none."""
    key = sb.col(person)
    names = list(positions)
    weighed = weight if weight is not None else sb.lit(1)
    running = [exp.Window(this=exp.func("SUM", sb.col("__weight")), partition_by=[key.copy()],
                          order=exp.Order(expressions=[exp.Ordered(this=sb.col(f"__p{i}"), nulls_first=False)]),
                          spec=exp.WindowSpec(kind="ROWS", start="UNBOUNDED", start_side="PRECEDING",
                                              end="CURRENT ROW")).as_(f"__cum{i}", quoted=True)
               for i in range(len(names))]
    placed = exp.select(key.copy(), weighed.as_("__weight", quoted=True),
                        *[positions[n].as_(f"__p{i}", quoted=True) for i, n in enumerate(names)]
                        ).from_(sb.derived(relation, "records"))
    ranked = exp.select(key.copy(), *[sb.col(f"__p{i}") for i in range(len(names))], *running,
                        exp.Window(this=exp.func("SUM", sb.col("__weight")), partition_by=[key.copy()])
                        .as_("__all", quoted=True)).from_(placed.subquery("placed"))
    medians = [exp.func("MIN", exp.Case().when(sb.lit(2) * sb.col(f"__cum{i}") >= sb.col("__all"),
                                               sb.col(f"__p{i}"))).as_(n, quoted=True) for i, n in enumerate(names)]
    return exp.select(key.copy(), *medians).from_(ranked.subquery("ranked")).group_by(key.copy())


def require_people(engine: Engine, relation: exp.Expression, person: str) -> None:
    """PolicyError naming the person column when some record has no person (NULL)."""
    (nulls,), = engine.rows(exp.select(exp.func("COUNT", exp.Star())).from_(sb.derived(relation, "r")).where(
        sb.col(person).is_(exp.Null())))
    if nulls:
        raise PolicyError(f"the person column {person!r} is NULL in {nulls} records: each record needs its person")


def signature_groups_of(class_ids: np.ndarray, person: np.ndarray, people: int) -> np.ndarray:
    """Per person (codes ``0 … people-1``; every one holds a row), a dense id of their set of classes, from each row's
    class id and person code.  Exactly: each person's sorted class list is folded into a dense id one position at a
    time (the id so far paired with the next class, or none past the list's end, and numbered again), so that two
    people end with one id exactly when their lists are equal."""
    classes = int(class_ids.max()) + 1 if len(class_ids) else 1
    pairs = np.unique(person.astype(np.int64) * classes + class_ids.astype(np.int64))
    owner, owned = pairs // classes, pairs % classes
    counts = np.bincount(owner, minlength=people)
    position = np.arange(len(pairs)) - (np.cumsum(counts) - counts)[owner]
    ids = np.zeros(people, dtype=np.int64)
    for step in range(int(counts.max()) if people else 0):
        at = position == step
        following = np.full(people, classes, dtype=np.int64)  # ``classes``: the list has ended
        following[owner[at]] = owned[at]
        ids = pd.factorize(ids * (classes + 1) + following)[0].astype(np.int64)
    return ids


def signature_sharing(class_ids: np.ndarray, person: np.ndarray, people: int) -> np.ndarray:
    """Per person (codes ``0 … people-1``), how many people have the same set of classes as they do
    (:func:`signature_groups_of`)."""
    ids = signature_groups_of(class_ids, person, people)
    return np.bincount(ids)[ids]
