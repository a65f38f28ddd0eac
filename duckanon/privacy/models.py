"""Privacy models, each a SQL query over equivalence classes and the same verdicts over arrays.

A model answers, for every class, whether it violates the model.  A model with a bound on the class size names it
(:attr:`PrivacyModel.minimum_size`, giving the predicate :meth:`PrivacyModel.size_violation`); models that look at the
sensitive values give a query ``__k…, __violated`` over the class/value cells (:meth:`PrivacyModel.class_violations`).
A policy combines models by UNION ALL and one GROUP BY, so adding a model adds no join.  Models do not know how classes
were formed (full-domain levels, partitions, clusters) nor who searches; they see
:class:`~duckanon.privacy.classes.Classes`.  The in-process evaluator asks the same of a
:class:`~duckanon.privacy.cells.ClassCells` (:meth:`PrivacyModel.cell_violations`), which must answer exactly as the
query does: same formulas, same tolerance, NULL a value of its own, values named by their text.

Whether a class violates depends on that class alone, except for models that compare it with its whole table
(:attr:`PrivacyModel.compares_with_table`: t-closeness).  No transformation changes the table, and replaced records
stay in it, so suppressing a violating class never makes another class violate -- unless suppressed records are
dropped: that moves the distribution such models compare with, so drop mode suppresses to a fixed point
(:func:`duckanon.privacy.checks.settle_and_cut`).
"""

from __future__ import annotations

import itertools
import math
import os
from abc import ABC
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import TypeVar

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from ..hierarchy.hierarchy import Hierarchy
from ..parameters import checked_number
from ..sqlgen import build as sb
from .cells import ClassCells, SensitiveValues
from .classes import POPULATION, SIZE, VALUE, VIOLATED, WEIGHT, Classes

# Entropy and distances are floating point; a class exactly at the bound must pass.
TOLERANCE = 1e-9

PerValue = TypeVar("PerValue")


@dataclass(frozen=True)
class DataFacts:
    """What models need to know about the data to reject impossible parameters up front."""

    records: int
    # Per sensitive attribute, what each value counts: its records, or under a policy that counts people its people
    # (each person's value once, as the models then count them).
    value_counts: Mapping[str, Mapping[object, int]] = field(default_factory=dict)
    # Under a policy that counts people, how many people the records are of (the units a sample is drawn in).
    people: int | None = None

    @property
    def size(self) -> int:
        """The data's size in the units the policy counts: its people, or its records."""
        return self.records if self.people is None else self.people

    @property
    def unit(self) -> str:
        return "records" if self.people is None else "people"

    @property
    def value_unit(self) -> str:
        return "records" if self.people is None else "people's values"

    def distinct(self, attribute: str) -> int:
        return len(self.value_counts[attribute])

    def share(self, attribute: str, count: int) -> float:
        """``count``'s share of all that ``attribute``'s values count (the table's records, or people's values)."""
        return count / sum(self.value_counts[attribute].values())


def _count(n: object, name: str, model: str, minimum: int = 1) -> int:
    return checked_number(n, name, model, whole=True, low=minimum)


def _share(x: object, name: str, model: str, *, low_open: bool) -> float:
    return float(checked_number(x, name, model, low=0, high=1, low_open=low_open))


def _ratio(numerator: exp.Expression, denominator: exp.Expression) -> exp.Expression:
    return exp.Div(this=sb.as_double(numerator), expression=sb.as_double(denominator))


def _sum(expression: exp.Expression) -> exp.Expression:
    return exp.func("SUM", expression)


def _table_shares(classes: Classes, sensitive: str) -> exp.Select:
    """``__k…`` (the table keys), ``__value``, ``__q``: each value's share q of its table
    (:meth:`~duckanon.privacy.classes.Classes.table_cells`)."""
    n, table = sb.col(WEIGHT), classes.table_keys_of()
    return exp.select(*table, sb.col(VALUE), _ratio(n, exp.Window(this=_sum(n.copy()), partition_by=table)).as_(
        "__q", quoted=True)).from_(classes.table_cells(sensitive).subquery("table_cells"))


def _in_table(classes: Classes, left: str, right: str) -> exp.Expression:
    """A class's cell (under ``left``) meets its value in its table's shares (under ``right``), NULL-safe."""
    return sb.and_all([sb.null_safe_join(left, right, classes.key_columns[:classes.table_keys]),
                       exp.NullSafeEQ(this=sb.col(VALUE, left), expression=sb.col(VALUE, right))])


def _with_shares(classes: Classes, sensitive: str) -> exp.Select:
    """The class/value cells of ``sensitive`` with each value's share p of its class and q of the class's table."""
    n = sb.col(WEIGHT, "c")
    return exp.select(
        *classes.keys_of("c"), sb.col(VALUE, "c"), n,
        _ratio(n.copy(), exp.Window(this=_sum(n.copy()), partition_by=classes.keys_of("c"))).as_("__p", quoted=True),
        sb.col("__q", "t"),
    ).from_(classes.cells(sensitive).subquery("c")).join(
        _table_shares(classes, sensitive).subquery("t"), on=_in_table(classes, "c", "t"), join_type="INNER")


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
    # Whether, without suppression, a generalization of a satisfying node satisfies too (true of every model over
    # classes; of a risk threshold only where its figure cannot grow as classes merge).
    monotone_under_generalization: bool = True
    # Whether the model bounds a risk figure of the release's class sizes as a whole, not each class: a
    # RiskThreshold (privacy/thresholds.py), which suppresses the smallest classes until the figure holds.
    risk_threshold: bool = False
    # Whether the model is a differential-privacy guarantee: its release then shows neither the source's size nor
    # the records suppressed, which the mechanism does not release.
    differentially_private: bool = False

    @property
    def minimum_size(self) -> int | None:
        """The class size below which a class violates this model: its ``k``; None for models without one."""
        return getattr(self, "k", None)

    @property
    def bounds_class_size(self) -> bool:
        """Whether a class's size alone can fail the model, as ARX's ``isMinimalClassSizeAvailable`` says: a model
        with a k, and l-diversity (a class needs ⌈l⌉ records).  Only ARX's size-first order (``DeltaPresence``'s
        ``arx_size_first``) asks it."""
        return self.minimum_size is not None

    # Whether the model's population classes without a record of the data are checked only when no model of the
    # policy bounds class size, as ARX orders its checks (DeltaPresence's option): see population_checked().
    arx_size_first: bool = False

    def size_violation(self, size: exp.Expression) -> exp.Expression | None:
        """A predicate over the class size that is true when a class is smaller than :attr:`minimum_size`."""
        return None if self.minimum_size is None else size < sb.lit(self.minimum_size)

    def class_violations(self, classes: Classes) -> exp.Select | None:
        """``__k…, __violated`` per class, for models over the sensitive values or the population's records."""
        return None

    # The population table (a table, view or file, as a source is named) the model compares classes with; None for
    # models of the data alone.  bind() reads it once and gives the classes its records (Classes.population).
    population: str | None = None

    def population_verdicts(self, sizes: np.ndarray, population: np.ndarray) -> np.ndarray | None:
        """Per class of ``sizes`` records and ``population`` population records, whether it violates the model's
        condition on the population: :meth:`class_violations`'s verdicts over arrays, exactly.  None for models of
        the data alone."""
        return None

    def unmendable_with(self, population_only: int) -> bool:
        """Whether ``population_only`` population classes that hold no record of the data violate the model in a way
        no suppression mends: :meth:`population_violations` over arrays."""
        return False

    def population_violations(self, classes: Classes) -> exp.Select | None:
        """``__k…`` (the table keys), ``__violated``: per table of ``classes``, whether it violates the model in a way
        no suppression mends (δ-presence's population classes that hold no record of the data); None for models
        without such a condition."""
        return None

    # Whether a class's verdict depends on what its generalized values cost the publisher (ARX's entropy-based
    # information loss of the class): its checks then need each record's domain shares (Classes.pricing), which only a
    # full-domain generalization over hierarchies gives.
    prices_classes: bool = False

    def priced_verdicts(self, sizes: np.ndarray, information_loss: np.ndarray,
                        population: np.ndarray | None) -> np.ndarray | None:
        """Per class of ``sizes`` records, ``information_loss`` (ARX's entropy-based loss of one of its records, in
        [0, 1]) and ``population`` population records (None without a population), whether it violates the model:
        :meth:`class_violations`'s verdicts over arrays, exactly.  None for models that do not price classes."""
        return None

    def cell_violations(self, cells: ClassCells) -> np.ndarray | None:
        """Per class of ``cells``, whether it violates the model's condition on the sensitive values: the verdicts
        :meth:`class_violations` gives over the same classes, exactly.  None for models without such a condition."""
        return None

    def _per_value(self, values: SensitiveValues, compute: Callable[[SensitiveValues], PerValue]) -> PerValue:
        """``compute(values)``, something per value code, kept for the next call with the same values: an evaluator
        asks about every node with the same ones, and computing it loops over the values in Python."""
        cached = getattr(self, "_per_value_cache", None)
        if cached is None or not (cached[0] is values or cached[0] == values):
            cached = self._per_value_cache = (values, compute(values))
        return cached[1]

    def check_data(self, facts: DataFacts) -> None:
        """Reject parameters that no release of this data can satisfy."""

    def for_data(self, facts: DataFacts) -> PrivacyModel:
        """The model as it applies to this data: itself, or, for a model with a threshold derived from the data
        (estimated k-map), a copy that records what it was derived from, so that a release's checks reproduce it."""
        return self

    def in_stratum(self, share: float) -> PrivacyModel:
        """The model as it applies within a stratum holding ``share`` of the data's records: itself, or, for a
        model estimated from the population's size (population uniqueness), a copy over the stratum's share of the
        population (every stratum sampled alike)."""
        return self

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
        if k is not None and k > facts.size:
            raise PolicyError(f"{self.name}: k={k} is larger than the table ({facts.size} {facts.unit})")

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

    def check_data(self, facts):
        self._check_k(facts)


class KMap(PrivacyModel):
    """k-map (Sweeney; ARX's ``KMap``): every class stands for at least k records of the population the data was sampled
    from. Given the population table (``population``), each class's population records are counted: a class violates
    when fewer than k of them generalize to it. Given only the population's size (``population_size``), as ARX's
    ``KMap(k, significance, population, estimator)``, they are estimated: a sample class of size c stands for a
    population class whose size is modelled as Poisson with mean λ = f·k (f = n / N, the sample's records over
    ``population_size``), and the model enforces k-anonymity with the smallest k' at which a population class below
    k is improbable at ``significance`` (Pannekoek, "Statistical methods for some simple disclosure limitation
    rules", Statistica Neerlandica 53, 1999; zero-truncated: El Emam & Dankar, "Protecting privacy using
    k-anonymity", JAMIA 15, 2008). k' is computed exactly as ARX 3.9.2 does (``KMap.calculateKPoisson`` and
    ``calculateKZeroPoisson``, off-by-ones included), then capped at k and at n. The data's record count enters k',
    so a bound policy holds ``sample_records`` (:meth:`for_data`) and a release records it.  Under a policy that counts
    people, the sample is of people: ``sample_records`` and ``population_size`` count people, and k' is the people a
    signature needs."""

    name = "k-map"
    monotone_under_suppression = True  # with the population too: a class merged with one of ≥ k people has ≥ k
    ESTIMATORS = ("zero-truncated-poisson", "poisson")

    def __init__(self, k: int, population_size: int | None = None, significance: float = 0.01,
                 estimator: str = "zero-truncated-poisson", sample_records: int | None = None,
                 population: str | os.PathLike | None = None):
        self.k = _count(k, "k", self.name)
        if (population_size is None) == (population is None):
            raise PolicyError(f"{self.name}: give either population (the population table, counted exactly) or "
                              f"population_size (its size, from which the class sizes are estimated)")
        self.population = None if population is None else population_source(population, self.name)
        self.population_size = (None if population_size is None
                                else _count(population_size, "population_size", self.name))
        self.significance = float(checked_number(significance, "significance", self.name, low=0, high=1,
                                                 low_open=True, high_open=True))
        if estimator not in self.ESTIMATORS:
            raise PolicyError(f"{self.name}: estimator must be one of {', '.join(self.ESTIMATORS)}, got {estimator!r}")
        self.estimator = estimator
        self.sample_records = None if sample_records is None else _count(sample_records, "sample_records", self.name)
        if self.sample_records is not None and self.population_size is not None \
                and self.sample_records > self.population_size:
            raise PolicyError(f"{self.name}: population_size={self.population_size} is smaller than the data "
                              f"({self.sample_records} records)")

    def params(self):
        params = super().params()
        if self.population is None:
            del params["population"]
        else:  # counted in the population table: the estimator's settings play no part
            params = {"k": self.k, "population": self.population}
        return params

    def class_violations(self, classes):
        if self.population is None:
            return None
        counted = classes.with_population().subquery("counted")
        return exp.select(*classes.keys_of(), (sb.col(POPULATION) < sb.lit(self.k)).as_(VIOLATED, quoted=True)
                          ).from_(counted)

    def population_verdicts(self, sizes, population):
        return None if self.population is None else population < self.k

    @property
    def minimum_size(self) -> int | None:
        if self.population is not None:
            return None
        if self.sample_records is None:
            raise PolicyError(f"{self.name}: k' depends on the data's record count; bind the policy to a source "
                              "(every check, search and publish does) before checking")
        return derived_k(self.k, self.sample_records / self.population_size, self.significance, self.estimator,
                         self.sample_records)

    def check_data(self, facts):
        if self.population_size is not None and facts.size > self.population_size:
            raise PolicyError(f"{self.name}: population_size={self.population_size} is smaller than the data "
                              f"({facts.size} {facts.unit})")

    def for_data(self, facts):
        # Under a policy that counts people the sample is of people, and k' is a signature's.
        if self.population is not None:
            return self
        return KMap(self.k, self.population_size, self.significance, self.estimator, facts.size)

    def describe(self):
        if self.population is not None:
            return f"{self.name}(k={self.k}, population={self.population!r})"
        derived = "" if self.sample_records is None else f", k'={self.minimum_size}"
        return (f"{self.name}(k={self.k}, population_size={self.population_size}, significance={self.significance}, "
                f"estimator={self.estimator!r}{derived})")


def _poisson_probability(j: int, mean: float) -> float:
    return math.exp(j * math.log(mean) - mean - math.lgamma(j + 1))


def derived_k(k: int, sampling_fraction: float, significance: float, estimator: str, records: int) -> int:
    """The sample class size k-map's estimate enforces (see :class:`KMap`), as ARX computes it: with λ = f·k, the
    Poisson estimator returns m + 2 for the least m ≥ 0 with P(X ≤ m) ≥ 1 − significance, the zero-truncated one
    m + 1 for the least m ≥ 1 with P(1 ≤ X ≤ m) / P(X ≥ 1) ≥ 1 − significance; both stop looking at m = k − 1,
    and the result is capped at k and at ``records``."""
    mean, threshold = sampling_fraction * k, 1 - significance
    if estimator == "poisson":
        reached, cumulative = 0, _poisson_probability(0, mean)
        while cumulative < threshold and reached + 1 < k:
            reached += 1
            cumulative += _poisson_probability(reached, mean)
        estimate = reached + 2
    else:
        positive = 1 - math.exp(-mean)
        reached, cumulative = 1, _poisson_probability(1, mean) / positive
        while cumulative < threshold and reached + 1 < k:
            reached += 1
            cumulative += _poisson_probability(reached, mean) / positive
        estimate = reached + 1
    return min(k, records, estimate)


def population_source(population: object, model: str) -> str:
    """The population table's name or file path, as a stored policy and a release record it."""
    if isinstance(population, os.PathLike):
        population = os.fspath(population)
    if not isinstance(population, str) or not population.strip():
        raise PolicyError(f"{model}: population must name a table, view or file (a non-empty string or path), got "
                          f"{population!r}")
    return population


class DeltaPresence(PrivacyModel):
    """δ-presence (Nergiz, Atzori & Clifton, "Hiding the presence of individuals from shared databases", SIGMOD 2007;
    ARX's ``DPresence``): the data is a sample of a population table, and for every class the share of its
    population's records that are in the sample, δ = records / population records, lies in [delta_min, delta_max], so
    that an attacker who knows someone is in the population cannot tell with more (or less) confidence than that
    whether they are in the data.  A class is counted against the population records that generalize to it, the
    data's among them.  A population class that holds no record of the data has δ = 0: with delta_min > 0 no
    transformation that leaves such a class satisfies the model, whatever it suppresses (ARX's
    ``HashGroupify.analyzeAll``).

    ``arx_size_first``: ARX's order of checks instead.  ARX tests a class's size against the policy's smallest class
    size (k-anonymity's k, l-diversity's ⌈l⌉, an estimated k-map's k') before δ-presence
    (``HashGroupify.isPrivacyModelFulfilled``), so in a policy with such a model a population class without a record
    of the data fails the size test, is suppressed at no cost, and no longer fails the transformation.  Alone, or
    beside models without a size bound (t-closeness, β-likeness), δ-presence is checked as by default."""

    name = "delta-presence"

    def __init__(self, delta_min: float, delta_max: float, population: str | os.PathLike,
                 arx_size_first: bool = False):
        self.delta_min = _share(delta_min, "delta_min", self.name, low_open=False)
        self.delta_max = _share(delta_max, "delta_max", self.name, low_open=True)
        if self.delta_min > self.delta_max:
            raise PolicyError(f"{self.name}: delta_min={delta_min} exceeds delta_max={delta_max}")
        self.population = population_source(population, self.name)
        if not isinstance(arx_size_first, bool):
            raise PolicyError(f"{self.name}: arx_size_first must be True or False, got {arx_size_first!r}")
        self.arx_size_first = arx_size_first

    def params(self):
        params = super().params()
        if not self.arx_size_first:  # the default, left out as policies stored before it was named record it
            del params["arx_size_first"]
        return params

    def class_violations(self, classes):
        counted = classes.with_population().subquery("counted")
        delta = _ratio(sb.col(SIZE), sb.col(POPULATION))
        return exp.select(*classes.keys_of(), exp.or_(delta < sb.lit(self.delta_min), delta > sb.lit(self.delta_max))
                          .as_(VIOLATED, quoted=True)).from_(counted)

    def population_verdicts(self, sizes, population):
        with np.errstate(divide="ignore", invalid="ignore"):
            delta = sizes.astype(np.float64) / population.astype(np.float64)
        return (delta < self.delta_min) | (delta > self.delta_max)

    def population_violations(self, classes):
        return classes.population_only() if self.delta_min > 0 else None

    def unmendable_with(self, population_only):
        return self.delta_min > 0 and population_only > 0


class DistinctLDiversity(PrivacyModel):
    """Every class holds at least l distinct values of the sensitive attribute (NULL counts as a value)."""

    name = "distinct-l-diversity"
    bounds_class_size = True  # ARX's l-diversity has a minimal class size, ⌈l⌉
    monotone_under_suppression = True

    def __init__(self, sensitive: str, l: int):  # noqa: E741 - the models' own letter
        self.sensitive, self.l = sensitive, _count(l, "l", self.name)

    def class_violations(self, classes):
        return _grouped(classes, classes.cells(self.sensitive), "cells", exp.func("COUNT", exp.Star()) < sb.lit(self.l))

    def cell_violations(self, cells):
        return cells.distinct() < self.l

    def check_data(self, facts):
        self._check_distinct(facts, self.l, "l")


class EntropyLDiversity(PrivacyModel):
    """Every class's sensitive values have entropy of at least ln(l).  ``estimator`` ``shannon`` (the default) takes
    the entropy of the class's value shares, ln N − Σ n ln n / N; ``grassberger`` estimates it from the counts as ARX
    does (``EntropyLDiversity`` with ``EntropyEstimator.GRASSBERGER``; P. Grassberger, "Entropy estimates from
    insufficient samplings", 2003): G(N) − Σ n G(n) / N, and, as ARX, also needs ⌈l⌉ distinct values.  (ARX 3.9.2's
    check stops at the first partial sum of n G(n) above its bound, in the order of its hash buckets; as G(1) < 0 the
    sum can fall again, so ARX rejects some classes whose estimate meets the bound: 103 more Adult records at one
    node measured.  Here the estimate is the whole sum's.)"""

    name = "entropy-l-diversity"
    bounds_class_size = True  # ARX's l-diversity has a minimal class size, ⌈l⌉
    ESTIMATORS = ("shannon", "grassberger")

    def __init__(self, sensitive: str, l: float, estimator: str = "shannon"):  # noqa: E741
        self.sensitive, self.l = sensitive, checked_number(l, "l", self.name, low=1)
        if estimator not in self.ESTIMATORS:
            raise PolicyError(f"{self.name}: estimator must be one of {', '.join(self.ESTIMATORS)}, got {estimator!r}")
        self.estimator = estimator

    def params(self):
        params = super().params()
        if self.estimator == "shannon":  # the default, left out as releases before it was named record it
            del params["estimator"]
        return params

    def class_violations(self, classes):
        n = sb.col(WEIGHT)
        total = _sum(n)
        if self.estimator == "shannon":
            # H = ln(N) - sum(n ln n) / N, with N the class size and n the count of each value.
            entropy = exp.func("LN", total) - _ratio(_sum(n * exp.func("LN", n)), total)
            return _grouped(classes, classes.cells(self.sensitive), "cells",
                            entropy < sb.lit(math.log(self.l) - TOLERANCE))
        estimate = _grassberger_sql(total) - _ratio(_sum(n * _grassberger_sql(n)), total)
        return _grouped(classes, classes.cells(self.sensitive), "cells", exp.or_(
            estimate < sb.lit(math.log(self.l) - TOLERANCE), exp.func("COUNT", exp.Star()) < sb.lit(math.ceil(self.l))))

    def cell_violations(self, cells):
        n = cells.cell_count
        total = cells.sizes
        if self.estimator == "shannon":
            n, total = n.astype(float), total.astype(float)
            entropy = np.log(total) - cells.per_class_sum(n * np.log(n)) / total
            return entropy < math.log(self.l) - TOLERANCE
        estimate = _grassberger(total) - cells.per_class_sum(n * _grassberger(n)) / total
        return (estimate < math.log(self.l) - TOLERANCE) | (cells.distinct() < math.ceil(self.l))

    def check_data(self, facts):
        self._check_distinct(facts, math.ceil(self.l - TOLERANCE), "l")


# Grassberger's entropy correction G(n) as ARX computes it: G(1) = −γ − ln 2, G(2k) = G(1) + 2 Σ_{j≤k} 1/(2j − 1) for
# 2k ≤ 100 (an odd n takes G of n − 1), and beyond, for the even n' ≤ n, ln n' + m (1/24 − m (7/960 − m 31/8064)) with
# m = 1 / (n'/2)².
_EULER_GAMMA = 0.5772156649015329
_G_SMALL = list(itertools.accumulate((2.0 / (2 * k - 1) for k in range(1, 51)),
                                     initial=-_EULER_GAMMA - math.log(2)))
_G_SERIES = (1 / 24, 7 / 960, 31 / 8064)


def _grassberger(n: np.ndarray) -> np.ndarray:
    """G(n) per count (counts of at least 1)."""
    n = np.asarray(n, dtype=np.int64)
    even = n - n % 2
    table = np.array(_G_SMALL)[np.minimum(even, 100) // 2]
    half = np.maximum(even // 2, 1).astype(float)
    m = 1.0 / (half * half)
    s1, s2, s3 = _G_SERIES
    with np.errstate(divide="ignore"):
        series = np.log(np.maximum(even, 1).astype(float)) + m * (s1 - m * (s2 - m * s3))
    return np.where(n <= 100, table, series)


def _grassberger_sql(n: exp.Expression) -> exp.Expression:
    """G(n) of an integer expression, as :func:`_grassberger`."""
    even = exp.paren(n.copy() - exp.Mod(this=n.copy(), expression=sb.lit(2)))
    small = exp.Case(ifs=[exp.If(this=exp.EQ(this=even.copy(), expression=sb.lit(2 * k)), true=sb.lit(g))
                          for k, g in enumerate(_G_SMALL)])
    half = exp.cast(exp.paren(exp.Div(this=even.copy(), expression=sb.lit(2))), exp.DataType.build("DOUBLE"))
    m = exp.paren(sb.lit(1.0) / exp.paren(half * half.copy()))
    s1, s2, s3 = (sb.lit(s) for s in _G_SERIES)
    series = exp.func("LN", exp.cast(even.copy(), exp.DataType.build("DOUBLE"))) + m * exp.paren(
        s1 - m.copy() * exp.paren(s2 - m.copy() * s3))
    return exp.Case(ifs=[exp.If(this=exp.LTE(this=n.copy(), expression=sb.lit(100)), true=small)], default=series)


class RecursiveCLDiversity(PrivacyModel):
    """Recursive (c,l)-diversity: r1 < c·(r_l + … + r_m) with r the value counts of a class in decreasing order."""

    name = "recursive-cl-diversity"
    bounds_class_size = True  # ARX's l-diversity has a minimal class size, ⌈l⌉

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

    def cell_violations(self, cells):
        # Each class's counts in decreasing order; the tail is r_l + … + r_m (ties in any order give the same sum).
        order = np.lexsort((-cells.cell_count, cells.cell_class))
        rank = np.arange(len(order)) - cells.class_starts()[cells.cell_class]
        tail = cells.per_class_sum(np.where(rank >= self.l - 1, cells.cell_count[order], 0))
        return self._at_least_c_times(cells.per_class_max(cells.cell_count), tail)

    def _at_least_c_times(self, first: np.ndarray, tail: np.ndarray) -> np.ndarray:
        """``first >= c * tail`` as the SQL computes it: c is a literal written as Python writes it, which the engine
        multiplies exactly as a decimal, or as a DOUBLE when written with an exponent (below 1e-4, from 1e16)."""
        written = str(self.c)
        if "e" in written:
            return first.astype(float) >= self.c * tail.astype(float)
        c = Fraction(written)
        if int(first.max(initial=1)) * c.denominator < 2 ** 63 and int(tail.max(initial=1)) * c.numerator < 2 ** 63:
            return first * c.denominator >= tail * c.numerator
        # A c of many digits: Python integers, exact at any size.
        return (first.astype(object) * c.denominator >= tail.astype(object) * c.numerator).astype(bool)

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

    def _bounded(self, value: exp.Expression) -> exp.Expression:
        if self.highly_sensitive is None:
            return exp.true()
        return exp.In(this=sb.as_text(value), expressions=[sb.lit(v) for v in self.highly_sensitive])

    def class_violations(self, classes):
        n = sb.col(WEIGHT)
        bounded = exp.func("MAX", exp.Case().when(self._bounded(sb.col(VALUE)), n).else_(sb.lit(0)))
        return _grouped(classes, classes.cells(self.sensitive), "cells", _ratio(bounded, _sum(n)) > sb.lit(self.alpha))

    def cell_violations(self, cells):
        bounded = self._per_value(cells.values, self._bounded_codes)
        largest = cells.per_class_max(np.where(bounded[cells.cell_value], cells.cell_count, 0))
        return largest / cells.sizes > self.alpha

    def _bounded_codes(self, values: SensitiveValues) -> np.ndarray:
        """Per value code, whether α bounds it (as :meth:`_bounded`: NULL's text is never highly sensitive)."""
        if self.highly_sensitive is None:
            return np.ones(len(values), dtype=bool)
        named = set(self.highly_sensitive)
        return np.array([text is not None and text in named for text in values.texts], dtype=bool)

    def check_data(self, facts):
        self._check_k(facts)
        counts = facts.value_counts[self.sensitive]
        if self.highly_sensitive is not None:
            unknown = sorted(set(self.highly_sensitive) - {str(v) for v in counts})
            if unknown:
                raise PolicyError(f"{self.name}: highly sensitive values not found in {self.sensitive!r}: {unknown}")
        bounded = {v: c for v, c in counts.items()
                   if self.highly_sensitive is None or str(v) in self.highly_sensitive}
        shares = {v: facts.share(self.sensitive, c) for v, c in bounded.items()}
        too_common = {v: share for v, share in shares.items() if share > self.alpha}
        if too_common:
            value, share = max(too_common.items(), key=lambda item: item[1])
            raise PolicyError(
                f"{self.name}: no release can satisfy alpha={self.alpha}: value {value!r} of {self.sensitive!r} makes "
                f"up {share:.4f} of all {facts.value_unit}, so some class must hold at least that share")


class PSensitiveKAnonymity(PrivacyModel):
    """p-sensitive k-anonymity: classes of at least k records with at least p distinct sensitive values."""

    name = "p-sensitive-k-anonymity"
    monotone_under_suppression = True

    def __init__(self, sensitive: str, p: int, k: int):
        self.sensitive, self.p, self.k = sensitive, _count(p, "p", self.name), _count(k, "k", self.name)
        if self.p > self.k:
            raise PolicyError(f"{self.name}: p={p} cannot exceed k={k}")

    def class_violations(self, classes):
        return _grouped(classes, classes.cells(self.sensitive), "cells", exp.func("COUNT", exp.Star()) < sb.lit(self.p))

    def cell_violations(self, cells):
        return cells.distinct() < self.p

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

    def cell_violations(self, cells):
        distance = {"equal": self._equal_emd, "ordered": self._ordered_emd,
                    "hierarchical": self._hierarchical_emd}[self.distance]
        return distance(cells) > self.t + TOLERANCE

    def _equal(self, classes):
        # Values absent from a class contribute their table share q: EMD = (sum |p - q| over present + 1 - sum q) / 2.
        p, q = sb.col("__p"), sb.col("__q")
        emd = (_sum(exp.func("ABS", p - q)) + sb.lit(1) - _sum(q)) / sb.lit(2)
        return (exp.select(*classes.keys_of(), emd.as_("__emd", quoted=True))
                .from_(_with_shares(classes, self.sensitive).subquery("shares")).group_by(*classes.keys_of()))

    def _equal_emd(self, cells: ClassCells) -> np.ndarray:
        """Per class, the equal distance (as :meth:`_equal`)."""
        p = cells.cell_count / cells.sizes[cells.cell_class]
        q = cells.table_shares()[cells.cell_value]
        return (cells.per_class_sum(np.abs(p - q)) + 1 - cells.per_class_sum(q)) / 2

    def _ordered(self, classes):
        # Every class meets every value of the ordered domain so the running difference of p and q can be summed.
        # The domain is that of the class's table: the values its records take, in order.
        cells = classes.cells(self.sensitive)
        n = sb.col(WEIGHT)
        table = classes.table_keys_of()
        table_columns = classes.key_columns[:classes.table_keys]
        domain = (exp.select(
            *table, sb.col(VALUE), sb.col("__q"),
            exp.Window(this=exp.func("ROW_NUMBER"), partition_by=table,
                       order=exp.Order(expressions=[exp.Ordered(this=sb.col(VALUE))])).as_("__pos", quoted=True),
            exp.Window(this=exp.func("COUNT", exp.Star()), partition_by=table).as_("__m", quoted=True),
        ).from_(_table_shares(classes, self.sensitive).subquery("shares")))
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

    def _ordered_emd(self, cells: ClassCells) -> np.ndarray:
        """Per class, the ordered distance (as :meth:`_ordered`): sum over the domain's positions j of |P(j) - Q(j)|,
        P and Q the running shares, over max(m - 1, 1).  The domain is the values the table holds, in code order.
        Between two of a class's cells P stays at the shares up to the first, and Q only grows, so each such run of
        positions sums in closed form from prefix sums of Q: no classes × domain grid."""
        held = cells.table_counts > 0
        positions = int(held.sum())
        # Per value code its place in the domain (for a value the table lacks, that of the next value it holds; the
        # SQL meets such a cell with no position, and it adds nothing to P).
        place = np.cumsum(held) - held
        table_running = np.cumsum(cells.table_shares()[held])
        below = np.concatenate(([0.0], np.cumsum(table_running)))  # below[j]: Q(0) + … + Q(j - 1)
        starts = cells.class_starts()
        counted = np.where(held[cells.cell_value], cells.cell_count, 0)
        through = np.cumsum(counted)
        class_running = (through - (through[starts] - counted[starts])[cells.cell_class]) / cells.sizes[cells.cell_class]
        # Each cell's run: from its own position to the next cell's of its class, or to the domain's end.
        begin = place[cells.cell_value]
        end = np.append(begin[1:], positions)
        end[starts[1:] - 1] = positions
        split = np.clip(np.searchsorted(table_running, class_running), begin, end)  # Q < P before it, Q ≥ P from it
        runs = (class_running * (split - begin) - (below[split] - below[begin])
                + (below[end] - below[split]) - class_running * (end - split))
        # Before a class's first cell P is 0.
        return (below[begin[starts]] + cells.per_class_sum(runs)) / max(positions - 1, 1)

    def _hierarchical(self, classes):
        # Li et al.: EMD = sum over inner nodes N of height(N)/H * min(pos_extra(N), neg_extra(N)), where the extra of a
        # child C is P(C) - Q(C).  Children a class does not touch have P = 0: their mass Q is all negative extra, so
        # neg_extra(N) = sum over touched children of max(Q - P, 0) + Q(N) - sum over touched children of Q.
        # NULL takes the path of the hierarchy's NULL row if it has one; otherwise NULL, like any value the hierarchy
        # does not cover, is a leaf right under the root (at the largest distance from every other value).
        hierarchy = self._hierarchy
        top = hierarchy.height
        null_path = self._null_path()
        n = sb.col(WEIGHT)
        labels = [exp.Case().when(sb.col(VALUE).is_(exp.Null()), sb.lit(null_path[level]))
                  .else_(_lookup(hierarchy, sb.col(VALUE), level)).as_(f"__a{level}", quoted=True)
                  for level in range(top + 1)]
        ancestors = exp.select(*classes.keys_of(), sb.col(VALUE), n, *[label.copy() for label in labels]).from_(
            classes.cells(self.sensitive).subquery("cells"))
        table = classes.table_keys_of()
        table_ancestors = exp.select(*table, sb.col(VALUE), *[_ratio(
            exp.Window(this=_sum(n.copy()), partition_by=[*table, sb.col(f"__a{level}")]),
            exp.Window(this=_sum(n.copy()), partition_by=table)).as_(f"__q{level}", quoted=True)
            for level in range(top + 1)]).from_(exp.select(*table, sb.col(VALUE), n.copy(), *labels).from_(
                classes.table_cells(self.sensitive).subquery("table_cells")).subquery("labelled"))
        share = lambda partition: _ratio(exp.Window(this=_sum(sb.col(WEIGHT, "a")), partition_by=partition),  # noqa: E731
                                         exp.Window(this=_sum(sb.col(WEIGHT, "a")), partition_by=classes.keys_of("a")))
        shares = exp.select(*classes.keys_of("a"), *[sb.col(f"__a{j}", "a") for j in range(top + 1)], *[
            column for level in range(top + 1) for column in (
                share(classes.keys_of("a") + [sb.col(f"__a{level}", "a")]).as_(f"__p{level}", quoted=True),
                sb.col(f"__q{level}", "t"))
        ]).from_(ancestors.subquery("a")).join(table_ancestors.subquery("t"), on=_in_table(classes, "a", "t"),
                                                join_type="INNER")
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

    def _null_path(self) -> tuple[str | None, ...]:
        """NULL's labels, leaf to root: the hierarchy's NULL row, or else NULL right under the root."""
        hierarchy = self._hierarchy
        null_row = next((row for row in hierarchy.rows if row[0] is None), None)
        return null_row if null_row is not None else (None,) * hierarchy.height + (hierarchy.rows[0][-1],)

    def _hierarchical_emd(self, cells: ClassCells) -> np.ndarray:
        """Per class, the hierarchical distance (as :meth:`_hierarchical`, level by level over the same groups)."""
        labels, children = self._per_value(cells.values, self._hierarchy_groups)
        top = self._hierarchy.height
        table_counts = cells.table_counts.astype(float)
        total = table_counts.sum()
        # Per level: the table's share of each label, and per cell its class's share of the cell's label.
        # A table every record of which was dropped holds no class to compare with it.
        table_share = [np.bincount(level, weights=table_counts, minlength=level.max() + 1) / (total or 1.0)
                       for level in labels]
        size = cells.sizes[cells.cell_class]
        class_share = [cells.group_sums(level) / size for level in labels]
        emd = np.zeros(cells.classes)
        for level in range(1, top + 1):
            # One cell stands for each (class, node, child), as the SQL's GROUP BY class, node, child.
            _, child_first = cells.groups(children[level])
            node_group, node_first = cells.groups(labels[level])
            pc = class_share[level - 1][child_first]
            qc = table_share[level - 1][labels[level - 1][cells.cell_value[child_first]]]
            node = node_group[child_first]
            nodes = len(node_first)
            positive = np.bincount(node, weights=np.maximum(pc - qc, 0), minlength=nodes)
            negative = (np.bincount(node, weights=np.maximum(qc - pc, 0), minlength=nodes)
                        + table_share[level][labels[level][cells.cell_value[node_first]]]
                        - np.bincount(node, weights=qc, minlength=nodes))
            emd += np.bincount(cells.cell_class[node_first], weights=level / top * np.minimum(positive, negative),
                               minlength=cells.classes)
        return emd

    def _hierarchy_groups(self, values: SensitiveValues) -> tuple[list[np.ndarray], list[np.ndarray | None]]:
        """Per level, each value code's group number for its label there, as the SQL labels it (:meth:`_hierarchical`,
        :func:`_lookup`: NULL along :meth:`_null_path`, a value the hierarchy lacks right under the root); and per level
        above the leaves a group number for each value's pair (label, label one level down)."""
        hierarchy = self._hierarchy
        top = hierarchy.height
        rows = {row[0]: row for row in hierarchy.rows if row[0] is not None}
        root = hierarchy.rows[0][top]
        paths = [self._null_path() if text is None else rows.get(text, (text,) + (None,) * (top - 1) + (root,))
                 for text in values.texts]
        labels = [_group_numbers([path[level] for path in paths]) for level in range(top + 1)]
        children = [None] + [_group_numbers(list(zip(labels[level].tolist(), labels[level - 1].tolist())))
                             for level in range(1, top + 1)]
        return labels, children

    def check_data(self, facts):
        values = facts.value_counts[self.sensitive]
        if self.distance == "hierarchical":
            known = set(self._hierarchy.values)
            missing = sorted({str(v) for v in values if v is not None} - {v for v in known if v is not None})
            if missing:
                raise PolicyError(f"{self.name}: the hierarchy of {self.sensitive!r} does not cover {missing[:10]}")
        if self.distance == "ordered" and None in values:
            raise PolicyError(f"{self.name}: the ordered distance needs {self.sensitive!r} to have no NULL")


def _group_numbers(labels: Sequence[object]) -> np.ndarray:
    """A group number per label, equal labels (None included) sharing one: SQL's GROUP BY over labels in Python."""
    numbers: dict[object, int] = {}
    return np.array([numbers.setdefault(label, len(numbers)) for label in labels], dtype=np.int64)


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

    def cell_violations(self, cells):
        per_level = cells.group_sums(self._per_value(cells.values, self._level_groups))
        return (cells.distinct() < self.l) | (cells.per_class_max(per_level) / cells.sizes > self.alpha)

    def _level_groups(self, values: SensitiveValues) -> np.ndarray:
        """Per value code, a group number per sensitivity level; NULL and values the table lacks, whose level the SQL
        finds NULL, share a group of their own."""
        return _group_numbers([None if text is None else self.levels.get(text) for text in values.texts])

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
        if facts.share(self.sensitive, count) > self.alpha:
            raise PolicyError(
                f"{self.name}: no release can satisfy alpha={self.alpha}: sensitivity level {level} makes up "
                f"{facts.share(self.sensitive, count):.4f} of all {facts.value_unit}")


class _ShareRatioModel(PrivacyModel):
    """A model that bounds, for every sensitive value a class holds, how its share p in the class compares with its
    share q in the class's table (the whole input, or what drop mode keeps): a class violates when one of its values
    does (:meth:`_violates`, the same formula over SQL columns and NumPy arrays)."""

    compares_with_table = True

    def _violates(self, p, q, functions):
        """Whether a value of class share ``p`` and table share ``q`` violates; ``functions`` gives ``ln``,
        ``least``, ``abs`` and ``lit`` (a number as an operand) for the kind of ``p`` and ``q`` (SQL expressions or
        arrays)."""
        raise NotImplementedError

    def class_violations(self, classes):
        shares = _with_shares(classes, self.sensitive)
        functions = {"ln": lambda x: exp.func("LN", x), "least": lambda a, b: exp.func("LEAST", a, b),
                     "abs": lambda x: exp.func("ABS", x), "lit": sb.lit}
        violated = self._violates(sb.col("__p"), sb.col("__q"), functions)
        return _grouped(classes, shares, "shares",
                        exp.func("MAX", exp.Case().when(violated, sb.lit(1)).else_(sb.lit(0))).eq(sb.lit(1)))

    def cell_violations(self, cells):
        p = cells.cell_count / cells.sizes[cells.cell_class]
        q = cells.table_shares()[cells.cell_value]
        functions = {"ln": np.log, "least": np.minimum, "abs": np.abs, "lit": float}
        with np.errstate(divide="ignore", invalid="ignore"):
            return cells.per_class_max(self._violates(p, q, functions).astype(np.int8)) == 1


class BasicBetaLikeness(_ShareRatioModel):
    """Basic β-likeness (Cao & Karras 2012; ARX's ``BasicBLikeness``): in every class, no sensitive value's share p
    exceeds its table share q by more than β relatively: (p − q) / q ≤ β."""

    name = "basic-beta-likeness"

    def __init__(self, sensitive: str, beta: float):
        self.sensitive = sensitive
        self.beta = float(checked_number(beta, "beta", self.name, low=0, low_open=True))

    def _violates(self, p, q, functions):
        return (p - q) / q > functions["lit"](self.beta + TOLERANCE)


class EnhancedBetaLikeness(_ShareRatioModel):
    """Enhanced β-likeness (Cao & Karras 2012; ARX's ``EnhancedBLikeness``): the relative gain (p − q) / q of every
    sensitive value in a class is at most min(β, −ln q), so that rare values may gain less."""

    name = "enhanced-beta-likeness"

    def __init__(self, sensitive: str, beta: float):
        self.sensitive = sensitive
        self.beta = float(checked_number(beta, "beta", self.name, low=0, low_open=True))

    def _violates(self, p, q, functions):
        return (p - q) / q > functions["least"](functions["lit"](self.beta), -functions["ln"](q)) + functions["lit"](
            TOLERANCE)


class DeltaDisclosurePrivacy(_ShareRatioModel):
    """δ-disclosure privacy (Brickell & Shmatikov 2008; ARX's ``DDisclosurePrivacy``): every sensitive value a class
    holds has |log2(p / q)| < δ, strictly, as ARX checks it."""

    name = "delta-disclosure-privacy"

    def __init__(self, sensitive: str, delta: float):
        self.sensitive = sensitive
        self.delta = float(checked_number(delta, "delta", self.name, low=0, low_open=True))

    def _violates(self, p, q, functions):
        return functions["abs"](functions["ln"](p / q)) / functions["lit"](math.log(2)) >= functions["lit"](
            self.delta - TOLERANCE)


def population_checked(models: Sequence[PrivacyModel]) -> list[PrivacyModel]:
    """The models whose population classes without a record of the data are checked
    (:meth:`PrivacyModel.population_violations`, :meth:`PrivacyModel.unmendable_with`) in a policy of ``models``: all,
    but those checked after the size bound (ARX's order) when a model of the policy bounds class size."""
    if not any(model.bounds_class_size for model in models):
        return list(models)
    return [model for model in models if not model.arx_size_first]


def prices_classes(models: Sequence[PrivacyModel]) -> bool:
    """Whether a model of ``models`` prices classes: their checks then need each record's domain shares."""
    return any(model.prices_classes for model in models)


def sensitive_attributes(models: Sequence[PrivacyModel]) -> list[str]:
    seen: list[str] = []
    for model in models:
        if model.sensitive is not None and model.sensitive not in seen:
            seen.append(model.sensitive)
    return seen
