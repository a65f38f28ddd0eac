"""Heuristic searches for lattices too wide for an exact search: ARX 3.9.2's three best-effort algorithms.

Each walks from node to neighbour (it never lists the lattice, so it also searches a
:class:`~duckanon.search.lattice.WideLattice` of 20–40 quasi-identifiers), keeps the best satisfying node it has
evaluated (least (value, index), as the exact searches order them) and needs a time or check limit; stopped by it,
the result is not proven (:class:`~duckanon.search.budget.SearchResult`).  Each expansion or generation is one batch
of the evaluator, so the SQL evaluator answers it in one query.

- :class:`LightningSearch` is ARX's ``LIGHTNINGAlgorithm`` (Prasser et al., "Lightning: Utility-Driven Anonymization
  of High-Dimensional Data", Transactions on Data Privacy 9(2), 2016): best-first bottom-up from the bottom node, a
  queue of evaluated nodes by value; expanding a node evaluates its direct generalizations, and every
  ``height``-th expansion goes greedily up (depth first, the cheapest generalization each time) to reach a satisfying
  node early; a node whose lower bound reaches the best value is not expanded.  Run to its end it is exact.
- :class:`TopDownSearch` is ARX's ``LIGHTNINGTopDownAlgorithm``: best-first from the top node down through direct
  specializations.  Where ARX expands every node, it does not expand one that fails a monotone policy (all its
  specializations fail too), which changes no result and saves their checks.
- :class:`GeneticSearch` is ARX's ``GeneticAlgorithm``, with its parameters and defaults: two subpopulations of
  attributes + ``subpopulation_size`` individuals (the first seeded with a "triangle" of nodes, attribute prefixes at
  their top level), each generation keeping an elite, breeding children by uniform crossover of parents drawn by
  fitness (1 − the value's place between the best and worst of the fittest ``production_fraction``), and mutating the
  rest; every ``immigration_interval`` generations the fittest move between the subpopulations.  ARX 3.9.2 computes
  the number that move as ``(int) fraction * k``, which casts the fraction to 0 first, so nothing ever moves there;
  here ``round(immigration_fraction * k)`` do (``immigration_fraction=0`` gives ARX's behaviour).  Individuals are
  drawn from ``seed`` (None: fresh entropy): the search's randomness is not a privacy mechanism.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Iterable

import numpy as np

from ..parameters import checked_number
from .budget import NodeEvaluator, SearchBudget, SearchStrategy, better


class _Walk:
    """A heuristic's evaluations within its budget, and the best satisfying node among them."""

    def __init__(self, evaluator: NodeEvaluator, budget: SearchBudget):
        self.evaluator, self.budget = evaluator, budget
        self.best: int | None = None

    def evaluate(self, indices: Iterable[int]) -> list[int]:
        """Evaluate the nodes the budget allows (those evaluated before cost nothing); the allowed ones, in order."""
        allowed = self.budget.allow(indices, self.best)
        for index, result in zip(allowed, self.evaluator.evaluate_many(allowed)):
            if result.within_limit and better(self.evaluator, index, self.best) and self.evaluator.satisfies(index):
                self.best = index
        return allowed

    def value(self, index: int):
        return self.evaluator.value(index)

    def bound(self, index: int):
        return self.evaluator.results[index].bounds[self.evaluator.objective]


class _BestFirst(SearchStrategy):
    """Best-first expansion from one end of the lattice (ARX's Lightning and its top-down variant)."""

    lists_lattice = False
    needs_limit = True
    upward = True

    def best_node(self, evaluator, budget):
        walk = _Walk(evaluator, budget)
        lattice = evaluator.lattice
        start = lattice.index(lattice.bottom if self.upward else lattice.top)
        walk.evaluate([start])
        self.queue: list[tuple[object, int]] = [(walk.value(start), start)]
        self.expanded: set[int] = set()
        self.insufficient: set[int] = set()  # bound at or above the best value: nothing above can beat it
        expansions = 0
        while self.queue and not budget.stopped:
            _, index = heapq.heappop(self.queue)
            if self._pruned(walk, index):
                continue
            expansions += 1
            self._expand_from(walk, index, expansions)
        return walk.best

    def _expand_from(self, walk: _Walk, index: int, expansions: int) -> None:
        self._expand(walk, index)

    def _pruned(self, walk: _Walk, index: int) -> bool:
        if index in self.expanded or index in self.insufficient:
            return True
        if (self.upward and walk.best is not None and index != walk.best
                and walk.bound(index) >= walk.value(walk.best)):
            self.insufficient.add(index)
            return True
        if not self.upward and walk.evaluator.monotone and not walk.evaluator.results[index].within_limit:
            self.expanded.add(index)  # its specializations fail too
            return True
        return False

    def _expand(self, walk: _Walk, index: int) -> int | None:
        """Evaluate the node's direct neighbours up (or down) not expanded or pruned, queue them, and mark the node
        expanded; the cheapest of them (None when there is none, or the budget cut the batch)."""
        lattice = walk.evaluator.lattice
        near = lattice.successors(index) if self.upward else lattice.predecessors(index)
        fresh = [n for n in near if n not in self.expanded and n not in self.insufficient]
        evaluated = walk.evaluate(fresh)
        for n in evaluated:
            heapq.heappush(self.queue, (walk.value(n), n))
        self.expanded.add(index)
        if len(evaluated) < len(fresh) or not evaluated:
            return None
        return min(evaluated, key=lambda n: (walk.value(n), n))


class LightningSearch(_BestFirst):
    """ARX's Lightning: best-first bottom-up, every ``height``-th expansion a greedy climb (see the module)."""

    name = "lightning"

    def best_node(self, evaluator, budget):
        self.stepping = max(evaluator.lattice.height, 1)
        return super().best_node(evaluator, budget)

    def _expand_from(self, walk: _Walk, index: int, expansions: int) -> None:
        if expansions % self.stepping:
            self._expand(walk, index)
            return
        # Depth first without backtracking: always on to the cheapest fresh generalization.
        while index is not None and not walk.budget.stopped:
            index = self._expand(walk, index)


class TopDownSearch(_BestFirst):
    """ARX's top-down Lightning: best-first from the top through direct specializations (see the module)."""

    name = "top-down"
    upward = False


class GeneticSearch(SearchStrategy):
    """ARX's genetic algorithm over level vectors (see the module), with ARX's defaults."""

    name = "genetic"
    lists_lattice = False
    needs_limit = True

    def __init__(self, subpopulation_size: int = 100, iterations: int = 50, elite_fraction: float = 0.2,
                 crossover_fraction: float = 0.2, production_fraction: float = 0.2,
                 mutation_probability: float = 0.2, immigration_interval: int = 10,
                 immigration_fraction: float = 0.2, seed: int | None = None):
        where = "genetic search"
        self.subpopulation_size = checked_number(subpopulation_size, "subpopulation_size", where, whole=True, low=1)
        self.iterations = checked_number(iterations, "iterations", where, whole=True, low=0)
        self.immigration_interval = checked_number(immigration_interval, "immigration_interval", where, whole=True,
                                                   low=1)
        fractions = {"elite_fraction": elite_fraction, "crossover_fraction": crossover_fraction,
                     "production_fraction": production_fraction, "mutation_probability": mutation_probability,
                     "immigration_fraction": immigration_fraction}
        for name, value in fractions.items():
            # Parents are drawn from the fittest production_fraction: it cannot be 0.
            setattr(self, name, checked_number(value, name, where, low=0, high=1,
                                               low_open=name == "production_fraction"))
        self.seed = seed

    def best_node(self, evaluator, budget):
        self.walk = walk = _Walk(evaluator, budget)
        self.random = np.random.default_rng(self.seed)
        self.top = np.asarray(evaluator.lattice.top, dtype=np.int64)
        attributes = len(self.top)
        size = attributes + self.subpopulation_size
        triangle = [np.where(np.arange(attributes) <= i, self.top, 0) for i in range(attributes)]
        first = triangle + [self._random_node() for _ in range(size - len(triangle))]
        second = [self._random_node() for _ in range(size)]
        populations = []
        for vectors in (first, second):
            populations.append(self._individuals(vectors))
            if budget.stopped:
                return walk.best
        migrants = round(self.immigration_fraction * size)
        for generation in range(self.iterations):
            for population in populations:
                self._sort(population)
            if generation % self.immigration_interval == 0 and migrants:
                first, second = populations
                for emigrants, hosts in ((first, second), (second, first)):  # the fittest move, one way then back
                    hosts.extend(emigrants[:migrants])
                    del emigrants[:migrants]
                for population in populations:
                    self._sort(population)
            for population in populations:
                self._breed(population)
                if budget.stopped:
                    return walk.best
        return walk.best

    def _random_node(self) -> np.ndarray:
        # ARX rounds a uniform draw over [0, top]: the end levels are half as likely as the others.
        return np.rint(self.random.random(len(self.top)) * self.top).astype(np.int64)

    def _individuals(self, vectors: list[np.ndarray]) -> list[int]:
        """The nodes of ``vectors`` (repeats kept), evaluated as one batch: as many as the budget allowed."""
        lattice = self.walk.evaluator.lattice
        indices = [lattice.index(tuple(int(v) for v in vector)) for vector in vectors]
        allowed = set(self.walk.evaluate(indices))
        kept = []
        for index in indices:  # the budget allows a head of the batch
            if index not in allowed:
                break
            kept.append(index)
        return kept

    def _sort(self, population: list[int]) -> None:
        """Fittest first: least value (a stable sort, as ARX's)."""
        population.sort(key=self.walk.value)

    def _breed(self, population: list[int]) -> None:
        """One generation in place: the elite kept, the last places taken by crossover children of parents drawn by
        fitness, the places between by mutations of random members of the generation before."""
        lattice = self.walk.evaluator.lattice
        size = len(population)
        crossovers = math.ceil(self.crossover_fraction * size)
        elite = math.ceil(self.elite_fraction * size)
        producers = math.ceil(self.production_fraction * size)
        fathers, mothers = self._parents(population, producers, crossovers), self._parents(population, producers,
                                                                                            crossovers)
        children = []
        for father, mother in zip(fathers, mothers):
            from_father = self.random.random(len(self.top)) < 0.5
            children.append(np.where(from_father, lattice.node(father), lattice.node(mother)))
        old = list(population)
        mutants = [self._mutant(np.asarray(lattice.node(old[int(self.random.integers(size))]), dtype=np.int64))
                   for _ in range(elite, size - crossovers)]
        places = [size - c - 1 for c in range(crossovers)] + list(range(elite, size - crossovers))
        for place, index in zip(places, self._individuals(children + mutants)):
            population[place] = index

    def _parents(self, population: list[int], producers: int, count: int) -> list[int]:
        """``count`` parents drawn from the fittest ``producers``, weighing 1 − (value − best) / (worst − best)."""
        pool = population[:producers]
        values = np.array([float(self.walk.value(i)) for i in pool])
        low, high = values.min(), values.max()
        spread = high - low
        weights = np.ones(len(pool)) if not np.isfinite(spread) or spread == 0 else 1 - (values - low) / spread
        chosen = self.random.choice(len(pool), size=count, p=weights / weights.sum())
        return [pool[int(c)] for c in chosen]

    def _mutant(self, node: np.ndarray) -> np.ndarray:
        """Up to ⌈mutation_probability × attributes⌉ attributes (how many drawn from 0 up) at random levels."""
        most = math.ceil(self.mutation_probability * len(node))
        changed = self.random.permutation(len(node))[:int(self.random.integers(most + 1))]
        node = node.copy()
        node[changed] = self._random_node()[changed]
        return node
