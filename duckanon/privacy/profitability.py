"""ARX's no-attack profitability models (``ProfitabilityProsecutorNoAttack``, ``ProfitabilityJournalistNoAttack``;
Wan et al., "A game theoretic framework for analyzing re-identification risk", PLoS ONE 10(3), 2015).

An adversary who pays C to attack a record and gains G when the attack succeeds, with success probability 1/n for a
record in a class of n, attacks only when G/n − C > 0.  The publisher removes every incentive by making each class
hold more than G/C records: k-anonymity (prosecutor: n the class's records) or k-map against the population
(journalist: n the population records the class stands for) with ARX's k = G/C + 1 when G/C is whole, ⌈G/C⌉
otherwise, 1 when G = 0 (``ProfitabilityProsecutorNoAttack.initialize``).

With an attack (``ProfitabilityProsecutor``, ``ProfitabilityJournalist``), the publisher instead keeps a class when
keeping it pays: a record of a class brings the publisher B × (1 − IL), IL the class's entropy-based information loss,
less L × p when the attack pays the adversary; a class whose expected payout is not positive violates the model.
:class:`CostBenefit` is ARX's ``RiskModelCostBenefit``, which these models and the publisher-payout metric
(:class:`~duckanon.utility.metrics.ArxPublisherPayout`) share.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from ..parameters import checked_number
from ..sqlgen import build as sb
from .classes import LOG_SHARE, POPULATION, SIZE, VIOLATED
from .models import KAnonymity, KMap, PrivacyModel, population_source


def _double(value: float) -> exp.Expression:
    """A literal as DOUBLE: DuckDB would otherwise compute with DECIMAL, and round otherwise than NumPy."""
    return sb.as_double(sb.lit(value))


@dataclass(frozen=True)
class CostBenefit:
    """ARX's cost-benefit configuration and what its ``RiskModelCostBenefit`` derives from it: an adversary gains G
    per successful attack at cost C; the publisher gains B per record released and loses L per record re-identified.
    A prosecutor succeeds in a class of n records with p = 1/n; a journalist with 1 over the class's records in the
    population (1/n where it has none: ``getSuccessProbability``).  The attack pays when G × p − C > 0, and then costs
    the publisher L × p per record (``getExpectedPublisherPayout``).  Each formula over arrays and in SQL, alike."""

    adversary_gain: float
    adversary_cost: float
    publisher_loss: float
    publisher_benefit: float

    @classmethod
    def checked(cls, owner: str, adversary_gain: float, adversary_cost: float, publisher_loss: float,
                publisher_benefit: float) -> CostBenefit:
        """The terms, each checked (a finite number ≥ 0) and named in the error for ``owner``."""
        given = {"adversary_gain": adversary_gain, "adversary_cost": adversary_cost,
                 "publisher_loss": publisher_loss, "publisher_benefit": publisher_benefit}
        return cls(**{name: float(checked_number(value, name, owner, low=0)) for name, value in given.items()})

    def success(self, sizes: np.ndarray, population: np.ndarray | None) -> np.ndarray:
        """Per class of ``sizes`` records (and, for a journalist, ``population`` records), the adversary's p."""
        sizes = np.asarray(sizes, dtype=np.float64)
        people = sizes if population is None else np.where(population == 0, sizes, population)
        return 1.0 / np.asarray(people, dtype=np.float64)

    def success_sql(self, size: exp.Expression, population: exp.Expression | None) -> exp.Expression:
        """:meth:`success` of a class of ``size`` records (and ``population`` records)."""
        people = size if population is None else exp.Case().when(population.eq(sb.lit(0)), size).else_(population)
        return _double(1.0) / sb.as_double(people)

    def penalty(self, success: np.ndarray) -> np.ndarray:
        """What the publisher expects to lose per record where the adversary succeeds with ``success``."""
        return np.where(self.adversary_gain * success - self.adversary_cost > 0.0, self.publisher_loss * success, 0.0)

    def penalty_sql(self, success: exp.Expression) -> exp.Expression:
        """:meth:`penalty` in SQL."""
        attacked = exp.paren(_double(self.adversary_gain) * success - _double(self.adversary_cost)) > _double(0.0)
        return exp.Case().when(attacked, _double(self.publisher_loss) * success.copy()).else_(_double(0.0))


def no_attack_k(adversary_gain: float, adversary_cost: float, owner: str) -> int:
    """The least class size at which an attack does not pay: more than G/C records (ARX's formula)."""
    gain = float(checked_number(adversary_gain, "adversary_gain", owner, low=0))
    cost = float(checked_number(adversary_cost, "adversary_cost", owner, low=0))
    if gain == 0:
        return 1
    if cost == 0:
        raise PolicyError(f"{owner}: adversary_cost=0 with adversary_gain={gain:g}: an attack always pays, so no "
                          f"class is large enough")
    threshold = gain / cost
    return int(threshold) + 1 if threshold == math.floor(threshold) else math.ceil(threshold)


class ProsecutorNoAttackProfitability(KAnonymity):
    """No attack pays a prosecutor (who knows the target is in the data): k-anonymity with k = :func:`no_attack_k`."""

    name = "no-attack-profitability-prosecutor"

    def __init__(self, adversary_gain: float, adversary_cost: float):
        super().__init__(no_attack_k(adversary_gain, adversary_cost, self.name))
        self.adversary_gain, self.adversary_cost = float(adversary_gain), float(adversary_cost)

    def params(self):
        return {"adversary_gain": self.adversary_gain, "adversary_cost": self.adversary_cost}

    def describe(self):
        return (f"{self.name}(adversary_gain={self.adversary_gain}, adversary_cost={self.adversary_cost}, "
                f"k={self.k})")


class JournalistNoAttackProfitability(KMap):
    """No attack pays a journalist (who knows only that the target is in the population): every class stands for
    at least k = :func:`no_attack_k` records of the ``population`` table (k-map, counted)."""

    name = "no-attack-profitability-journalist"

    def __init__(self, adversary_gain: float, adversary_cost: float, population: str | os.PathLike):
        super().__init__(no_attack_k(adversary_gain, adversary_cost, self.name), population=population)
        self.adversary_gain, self.adversary_cost = float(adversary_gain), float(adversary_cost)

    def params(self):
        return {"adversary_gain": self.adversary_gain, "adversary_cost": self.adversary_cost,
                "population": self.population}

    def describe(self):
        return (f"{self.name}(adversary_gain={self.adversary_gain}, adversary_cost={self.adversary_cost}, "
                f"k={self.k}, population={self.population!r})")


class ProsecutorProfitability(PrivacyModel):
    """ARX's ``ProfitabilityProsecutor`` (Wan et al.'s re-identification game with an attack): a class of n records
    violates the model unless the publisher's expected payout per record is positive,
    B × (1 − IL) − (G × 1/n − C > 0 ? L × 1/n : 0) > 0 (``RiskModelCostBenefit.getExpectedPublisherPayout``), with IL
    the class's entropy-based information loss, 1 + Σ over quasi-identifiers of log10(domain share of its value) /
    log10(Π domain sizes), clamped to [0, 1] (``MetricSDNMEntropyBasedInformationLoss.getEntropyBasedInformationLoss``),
    1/n the adversary's success probability, G and C the adversary's gain and cost, B and L the publisher's benefit
    per record and loss per re-identified record.

    The verdict depends on the class's generalized values, not only on its records, so the model is defined for
    full-domain generalization over hierarchies, and is monotone neither under generalization nor under suppression
    (as ARX declares it).  A class of '*' values has IL = 1 and never pays: under ``replace`` suppression the suppressed
    records' own class violates it, so only ``replace-unchecked`` (ARX's semantics) and ``drop`` suppress."""

    name = "profitability-prosecutor"
    monotone_under_generalization = False
    prices_classes = True

    def __init__(self, adversary_gain: float, adversary_cost: float, publisher_loss: float,
                 publisher_benefit: float):
        self._terms = CostBenefit.checked(self.name, adversary_gain, adversary_cost, publisher_loss, publisher_benefit)
        self.adversary_gain, self.adversary_cost = self._terms.adversary_gain, self._terms.adversary_cost
        self.publisher_loss, self.publisher_benefit = self._terms.publisher_loss, self._terms.publisher_benefit

    def class_violations(self, classes):
        priced = classes.priced().subquery("priced")  # raises where the classes carry no domain shares
        population = sb.col(POPULATION) if self.population is not None else None
        penalty = self._terms.penalty_sql(self._terms.success_sql(sb.col(SIZE), population))
        loss = classes.pricing.information_loss(sb.col(LOG_SHARE))
        payout = _double(self.publisher_benefit) * exp.paren(_double(1.0) - loss) - penalty
        return exp.select(*classes.keys_of(), exp.not_(payout > _double(0.0)).as_(VIOLATED, quoted=True)).from_(
            priced)

    def priced_verdicts(self, sizes, information_loss, population):
        penalty = self._terms.penalty(self._terms.success(sizes, population if self.population is not None else None))
        return ~(self.publisher_benefit * (1.0 - information_loss) - penalty > 0.0)


class JournalistProfitability(ProsecutorProfitability):
    """ARX's ``ProfitabilityJournalist``: :class:`ProsecutorProfitability` with the adversary's success probability
    1 over the class's records in the ``population`` table (a journalist does not know whether the target is in the
    data), or over its own records where the population has none (``getSuccessProbability``)."""

    name = "profitability-journalist"

    def __init__(self, adversary_gain: float, adversary_cost: float, publisher_loss: float,
                 publisher_benefit: float, population: str | os.PathLike):
        super().__init__(adversary_gain, adversary_cost, publisher_loss, publisher_benefit)
        self.population = population_source(population, self.name)
