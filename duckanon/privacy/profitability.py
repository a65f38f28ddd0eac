"""ARX's no-attack profitability models (``ProfitabilityProsecutorNoAttack``, ``ProfitabilityJournalistNoAttack``;
Wan et al., "A game theoretic framework for analyzing re-identification risk", PLoS ONE 10(3), 2015).

An adversary who pays C to attack a record and gains G when the attack succeeds, with success probability 1/n for a
record in a class of n, attacks only when G/n − C > 0.  The publisher removes every incentive by making each class
hold more than G/C records: k-anonymity (prosecutor: n the class's records) or k-map against the population
(journalist: n the population records the class stands for) with ARX's k = G/C + 1 when G/C is whole, ⌈G/C⌉
otherwise, 1 when G = 0 (``ProfitabilityProsecutorNoAttack.initialize``).

With an attack (``ProfitabilityProsecutor``, ``ProfitabilityJournalist``), the publisher instead keeps a class when
keeping it pays: a record of a class brings the publisher B × (1 − IL), IL the class's entropy-based information loss,
less L × 1/n when the attack pays the adversary; a class whose expected payout is not positive violates the model.
The prosecutor's payout metric is :class:`~duckanon.utility.metrics.ArxPublisherPayout`; the journalist's is not
implemented.
"""

from __future__ import annotations

import math
import os

import numpy as np
from sqlglot import exp

from ..errors import PolicyError
from ..parameters import checked_number
from ..sqlgen import build as sb
from .classes import LOG_SHARE, POPULATION, SIZE, VIOLATED
from .models import KAnonymity, KMap, PrivacyModel, population_source


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
        self.adversary_gain = float(checked_number(adversary_gain, "adversary_gain", self.name, low=0))
        self.adversary_cost = float(checked_number(adversary_cost, "adversary_cost", self.name, low=0))
        self.publisher_loss = float(checked_number(publisher_loss, "publisher_loss", self.name, low=0))
        self.publisher_benefit = float(checked_number(publisher_benefit, "publisher_benefit", self.name, low=0))

    def _success(self) -> exp.Expression:
        """The adversary's success probability in a class (a row of :meth:`Classes.priced`)."""
        return sb.as_double(sb.lit(1.0)) / sb.as_double(sb.col(SIZE))

    def class_violations(self, classes):
        priced = classes.priced().subquery("priced")  # raises where the classes carry no domain shares
        double = lambda value: sb.as_double(sb.lit(value))  # noqa: E731 - DOUBLE, never DECIMAL, arithmetic
        success = self._success()
        attack = exp.paren(double(self.adversary_gain) * success - double(self.adversary_cost)) > double(0.0)
        penalty = exp.Case().when(attack, double(self.publisher_loss) * success.copy()).else_(double(0.0))
        loss = classes.pricing.information_loss(sb.col(LOG_SHARE))
        payout = double(self.publisher_benefit) * exp.paren(double(1.0) - loss) - penalty
        return exp.select(*classes.keys_of(), exp.not_(payout > double(0.0)).as_(VIOLATED, quoted=True)).from_(priced)

    def _success_of(self, sizes: np.ndarray, population: np.ndarray | None) -> np.ndarray:
        return 1.0 / np.asarray(sizes, dtype=np.float64)

    def priced_verdicts(self, sizes, information_loss, population):
        success = self._success_of(sizes, population)
        attack = self.adversary_gain * success - self.adversary_cost > 0.0
        penalty = np.where(attack, self.publisher_loss * success, 0.0)
        payout = self.publisher_benefit * (1.0 - information_loss) - penalty
        return ~(payout > 0.0)


class JournalistProfitability(ProsecutorProfitability):
    """ARX's ``ProfitabilityJournalist``: :class:`ProsecutorProfitability` with the adversary's success probability
    1 over the class's records in the ``population`` table (a journalist does not know whether the target is in the
    data), or over its own records where the population has none (``getSuccessProbability``)."""

    name = "profitability-journalist"

    def __init__(self, adversary_gain: float, adversary_cost: float, publisher_loss: float,
                 publisher_benefit: float, population: str | os.PathLike):
        super().__init__(adversary_gain, adversary_cost, publisher_loss, publisher_benefit)
        self.population = population_source(population, self.name)

    def _success(self):
        people = exp.Case().when(sb.col(POPULATION).eq(sb.lit(0)), sb.col(SIZE)).else_(sb.col(POPULATION))
        return sb.as_double(sb.lit(1.0)) / sb.as_double(people)

    def _success_of(self, sizes, population):
        people = np.where(population == 0, sizes, population)
        return 1.0 / np.asarray(people, dtype=np.float64)
