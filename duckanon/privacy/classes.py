"""Equivalence classes as a relation that privacy models and risk measures query.

A :class:`Classes` is any relation whose rows are records (or counts of records) and a list of key columns that group
them into equivalence classes: the frequency table of a transformation's level codes, a generalized table, or a
published release.  Models never see which: they read the normalized projection :meth:`Classes.normalized`, whose
columns are named by us (``__k0`` …, ``__value``, ``__n``) so a user's column name can never collide with ours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from ..risk.counting import COMPATIBLE, compatible_counts
from ..sqlgen import build as sb

WEIGHT = "__n"
VALUE = "__value"
SIZE = "__size"
VIOLATED = "__violated"
POPULATION = "__population"
LOG_SHARE = "__log_share"


def summed(terms: Sequence[exp.Expression]) -> exp.Expression:
    """The sum of ``terms`` in their order (0 for none): log10 domain shares are summed in key order everywhere, as
    the in-process evaluator sums them."""
    total = terms[0] if terms else sb.lit(0.0)
    for term in terms[1:]:
        total = total + term
    return total


def key_name(i: int) -> str:
    return f"__k{i}"


def every_key_is(columns: Sequence[str], value: str) -> exp.Expression:
    """True where every one of ``columns`` holds ``value`` (the '*' class); false, never NULL, where one is NULL:
    a NULL would turn a verdict NULL and hide a violation."""
    return exp.func("COALESCE", sb.and_all(sb.col(c).eq(sb.lit(value)) for c in columns), exp.false())


@dataclass(frozen=True)
class Pricing:
    """What the classes' generalized values cost the publisher, for models that price each class by ARX's entropy-based
    information loss: ``columns``, one carried column per key after the table keys, hold per record the log10 domain
    share of that key's value (:func:`~duckanon.hierarchy.shares.log_domain_shares`; 0 for '*'), and ``most`` is
    ARX's maxIL, log10 of the product of the domains' sizes."""

    columns: tuple[str, ...]
    most: float

    def information_loss(self, log_share: exp.Expression) -> exp.Expression:
        """A class's entropy-based information loss from the sum of its values' log10 shares: 1 + that / maxIL,
        within [0, 1] as ARX clamps it (0 when there is no information to lose); :meth:`losses` over arrays."""
        if self.most == 0 or not math.isfinite(self.most):
            return sb.as_double(sb.lit(0.0))
        loss = sb.as_double(sb.lit(1.0)) + log_share / sb.as_double(sb.lit(self.most))
        return exp.func("GREATEST", exp.func("LEAST", loss, sb.as_double(sb.lit(1.0))), sb.as_double(sb.lit(0.0)))

    def losses(self, log_shares: np.ndarray) -> np.ndarray:
        """:meth:`information_loss` per class of ``log_shares``, to the last bit."""
        return information_losses(log_shares, self.most)


def information_losses(log_shares: np.ndarray, most: float) -> np.ndarray:
    """Per class, ARX's entropy-based information loss from the sum of its values' log10 shares and maxIL ``most``:
    :meth:`Pricing.information_loss` over arrays, to the last bit."""
    if most == 0 or not math.isfinite(most):
        return np.zeros(len(log_shares))
    return np.minimum(np.maximum(1.0 + np.asarray(log_shares, dtype=np.float64) / most, 0.0), 1.0)


@dataclass(frozen=True)
class Classes:
    relation: exp.Expression
    keys: tuple[str, ...]
    weight: str | None = None
    carry: tuple[str, ...] = ()  # further columns passed through the normalized projection under their own names
    # How many leading keys tell apart tables whose classes are evaluated together (a search's lattice nodes): models
    # that compare a class with its whole table compare it with the records of its own table.
    table_keys: int = 0
    # The same classes over a population table the data is a sample of (the population's records with the same key
    # columns, generalized alike), for models that compare a class with its population (δ-presence, k-map).
    population: Classes | None = None
    # Each record's log10 domain shares, for models that price classes (profitability with an attack).
    pricing: Pricing | None = None
    # The rows of the table the classes form, when not the classes' own rows, as classes under no key: models that
    # compare a class with its table compare with these (under a policy that counts people, each person's value once
    # in the table as in each class).  Only for classes of one table (no table keys).
    table: Classes | None = None

    @classmethod
    def of(cls, relation: exp.Expression, keys: Sequence[str], weight: str | None = None,
           carry: Sequence[str] = (), table_keys: int = 0, population: Classes | None = None,
           pricing: Pricing | None = None, table: Classes | None = None) -> Classes:
        carried = tuple(dict.fromkeys([*carry, *(pricing.columns if pricing else ())]))
        if table is not None and (table_keys or table.keys):
            raise ValueError("a table given apart from the classes is one table: no table keys, and no keys of its own")
        return cls(relation, tuple(keys), weight, carried, table_keys, population, pricing, table)

    @property
    def key_columns(self) -> list[str]:
        return [key_name(i) for i in range(len(self.keys))]

    def keys_of(self, alias: str | None = None) -> list[exp.Column]:
        return [sb.col(k, alias) for k in self.key_columns]

    def table_keys_of(self, alias: str | None = None) -> list[exp.Column]:
        """The keys that name a class's table (none when all classes form one table)."""
        return self.keys_of(alias)[:self.table_keys]

    def normalized(self, sensitive: str | None = None) -> exp.Select:
        """``__k0 … , [__value,] __n[, carried…]``: one row per input row."""
        weight = sb.col(self.weight) if self.weight else sb.lit(1)
        columns = [sb.col(k).as_(key_name(i), quoted=True) for i, k in enumerate(self.keys)]
        if sensitive is not None:
            columns.append(sb.col(sensitive).as_(VALUE, quoted=True))
        columns.append(weight.as_(WEIGHT, quoted=True))
        columns.extend(sb.col(c) for c in self.carry)
        return exp.select(*columns).from_(self.source("src"))

    def source(self, alias: str) -> exp.Expression:
        """The relation under ``alias``, to select from."""
        return sb.derived(self.relation, alias)

    def sizes(self) -> exp.Select:
        """``__k… , __size``: one row per class."""
        size = exp.cast(exp.func("SUM", sb.col(WEIGHT)), exp.DataType.build("BIGINT"))
        return (exp.select(*self.keys_of(), size.as_(SIZE, quoted=True))
                .from_(self.normalized().subquery("records"))
                .group_by(*self.keys_of()))

    def with_population(self) -> exp.Select:
        """``__k… , __size, __population``: per class, its records and its population's records (0 where the population
        has none, which a population that holds the data never leaves)."""
        return (exp.select(*self.keys_of("s"), sb.col(SIZE, "s"),
                           exp.func("COALESCE", sb.col(SIZE, "p"), sb.lit(0)).as_(POPULATION, quoted=True))
                .from_(self._sizes_in("s")).join(self._sizes_in("p", population=True), on=self._same_class(),
                                                  join_type="LEFT"))

    def population_only(self) -> exp.Select:
        """``__k…`` (the table keys), ``__violated``: per table, whether the population has a class no record of the
        data falls in."""
        tables = self.table_keys_of("p")
        return (exp.select(*tables, exp.func("BOOL_OR", sb.col(SIZE, "s").is_(exp.Null())).as_(VIOLATED, quoted=True))
                .from_(self._sizes_in("p", population=True)).join(self._sizes_in("s"), on=self._same_class(),
                                                                   join_type="LEFT")
                .group_by(*[t.copy() for t in tables]))

    def _sizes_in(self, alias: str, population: bool = False) -> exp.Subquery:
        """:meth:`sizes` of these classes (or of their population's) under ``alias``."""
        if not population:
            return self.sizes().subquery(alias)
        if self.population is None:
            raise PolicyError("a model that compares classes with their population needs the population table, "
                              "which these classes were given without")
        return self.population.sizes().subquery(alias)

    def _same_class(self) -> exp.Expression:
        """The data's class ``s`` and the population's ``p`` are one class (keys NULL-safe, as GROUP BY groups)."""
        return sb.and_all(exp.NullSafeEQ(this=sb.col(k, "s"), expression=sb.col(k, "p")) for k in self.key_columns)

    def priced(self) -> exp.Select:
        """``__k… , __size, __log_share[, __population]``: per class, its records, the sum over its quasi-identifiers
        of the log10 domain share of its values (alike for all its records; summed in key order, as the in-process
        evaluator sums them) and, when the classes have a population, its population's records."""
        if self.pricing is None:
            raise PolicyError("a model that prices classes by their information loss needs each record's domain "
                              "shares, which only a full-domain generalization over hierarchies gives")
        total = summed([exp.func("MIN", sb.col(c)) for c in self.pricing.columns])
        size = exp.cast(exp.func("SUM", sb.col(WEIGHT)), exp.DataType.build("BIGINT"))
        priced = (exp.select(*self.keys_of(), size.as_(SIZE, quoted=True),
                             exp.cast(total, exp.DataType.build("DOUBLE")).as_(LOG_SHARE, quoted=True))
                  .from_(self.normalized().subquery("records")).group_by(*self.keys_of()))
        if self.population is None:
            return priced
        return (exp.select(*self.keys_of("s"), sb.col(SIZE, "s"), sb.col(LOG_SHARE, "s"),
                           exp.func("COALESCE", sb.col(SIZE, "p"), sb.lit(0)).as_(POPULATION, quoted=True))
                .from_(priced.subquery("s")).join(self._sizes_in("p", population=True), on=self._same_class(),
                                                  join_type="LEFT"))

    def cells(self, sensitive: str) -> exp.Select:
        """``__k… , __value, __n``: records per class and sensitive value."""
        return (exp.select(*self.keys_of(), sb.col(VALUE), exp.func("SUM", sb.col(WEIGHT)).as_(WEIGHT, quoted=True))
                .from_(self.normalized(sensitive).subquery("records"))
                .group_by(*self.keys_of(), sb.col(VALUE)))

    def table_cells(self, sensitive: str) -> exp.Select:
        """``__k…`` (the table keys), ``__value``, ``__n``: records per table and sensitive value, the distribution a
        model that compares a class with its table compares with (of :attr:`table` when the classes name one)."""
        source = self.table or self
        tables = self.table_keys_of()
        return (exp.select(*tables, sb.col(VALUE), exp.func("SUM", sb.col(WEIGHT)).as_(WEIGHT, quoted=True))
                .from_(source.normalized(sensitive).subquery("records"))
                .group_by(*[t.copy() for t in tables], sb.col(VALUE)))


def compatible_classes(relation: exp.Expression, quasi: Sequence[str], strata: Sequence[str] = ()) -> Classes:
    """The classes of ``relation`` by ``quasi`` when a missing value matches any (a release of cell suppression): one
    per distinct combination (within each stratum of ``strata``, which lead the key as its tables'), its size the
    records compatible with it (:func:`~duckanon.risk.counting.compatible_counts`)."""
    return Classes.of(compatible_counts(relation, quasi, strata).subquery("compatible"), [*strata, *quasi],
                      weight=COMPATIBLE, table_keys=len(strata))
