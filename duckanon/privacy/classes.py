"""Equivalence classes as a relation that privacy models and risk measures query.

A :class:`Classes` is any relation whose rows are records (or counts of records) and a list of key columns that group
them into equivalence classes: the frequency table of a transformation's level codes, a generalized table, or a
published release.  Models never see which: they read the normalized projection :meth:`Classes.normalized`, whose
columns are named by us (``__k0`` …, ``__value``, ``__n``) so a user's column name can never collide with ours.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlglot import exp

from ..errors import PolicyError
from ..sqlgen import build as sb

WEIGHT = "__n"
VALUE = "__value"
SIZE = "__size"
VIOLATED = "__violated"
POPULATION = "__population"


def key_name(i: int) -> str:
    return f"__k{i}"


def every_key_is(columns: Sequence[str], value: str) -> exp.Expression:
    """True where every one of ``columns`` holds ``value`` (the '*' class); false, never NULL, where one is NULL:
    a NULL would turn a verdict NULL and hide a violation."""
    return exp.func("COALESCE", sb.and_all(sb.col(c).eq(sb.lit(value)) for c in columns), exp.false())


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

    @classmethod
    def of(cls, relation: exp.Expression, keys: Sequence[str], weight: str | None = None,
           carry: Sequence[str] = (), table_keys: int = 0, population: Classes | None = None) -> Classes:
        return cls(relation, tuple(keys), weight, tuple(carry), table_keys, population)

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

    def cells(self, sensitive: str) -> exp.Select:
        """``__k… , __value, __n``: records per class and sensitive value."""
        return (exp.select(*self.keys_of(), sb.col(VALUE), exp.func("SUM", sb.col(WEIGHT)).as_(WEIGHT, quoted=True))
                .from_(self.normalized(sensitive).subquery("records"))
                .group_by(*self.keys_of(), sb.col(VALUE)))
