"""ARX's no-attack profitability models (``ProfitabilityProsecutorNoAttack``, ``ProfitabilityJournalistNoAttack``;
Wan et al., "A game theoretic framework for analyzing re-identification risk", PLoS ONE 10(3), 2015).

An adversary who pays C to attack a record and gains G when the attack succeeds, with success probability 1/n for a
record in a class of n, attacks only when G/n − C > 0.  The publisher removes every incentive by making each class
hold more than G/C records: k-anonymity (prosecutor: n the class's records) or k-map against the population
(journalist: n the population records the class stands for) with ARX's k = G/C + 1 when G/C is whole, ⌈G/C⌉
otherwise, 1 when G = 0 (``ProfitabilityProsecutorNoAttack.initialize``).  The models with an attack, which keep a
class when the publisher's expected payout is positive, and the journalist's payout metric are not implemented here;
the prosecutor's payout metric is :class:`~duckanon.utility.metrics.ArxPublisherPayout`.
"""

from __future__ import annotations

import math
import os

from ..errors import PolicyError
from ..parameters import checked_number
from .models import KAnonymity, KMap


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
