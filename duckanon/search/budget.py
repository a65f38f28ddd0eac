"""What every lattice search shares: its budget (time and check limits, progress), its result, and the
:class:`SearchStrategy` contract.

A strategy asks a :class:`~duckanon.search.evaluator.NodeEvaluator` about nodes and knows nothing else.  The exact
strategies (:mod:`.strategies`) list the lattice's nodes to tag and prune them; the heuristic ones
(:mod:`.heuristics`) only walk from node to neighbour, so they also search a
:class:`~duckanon.search.lattice.WideLattice`, too large to list, and they need a limit.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import numpy as np

from ..errors import PolicyError
from ..parameters import checked_number
from .evaluator import NodeEvaluator, NodeResult
from .lattice import LISTED_NODES

# Nodes a search round evaluates together (the greedy descent without prior bounds takes at least this many,
# tag_by_paths climbs this many paths): the SQL evaluator's batch, so that a round's nodes share one query.
ROUND = 64
# Seconds between two progress reports of a search: often enough to show it moves, rarely enough to read.
PROGRESS_SECONDS = 1.0


class SearchBudget:
    """What a search may spend, and its progress reports.

    ``time_limit`` (seconds) and ``check_limit`` (nodes evaluated) bound one search; every strategy passes each batch
    it is about to evaluate through :meth:`allow`, which keeps what the limits leave (the time left, at the pace of
    the checks so far, bounds a batch too).  Once they cut a batch short,
    :attr:`stopped` is set and the strategy returns the best node it has found: not proven to be the one it would find
    without a limit.  Progress (nodes checked of the lattice, best value so far, time) goes to the evaluator's
    ``progress`` at most every ``report_seconds``, and once more at the end."""

    def __init__(self, time_limit: float | None = None, check_limit: int | None = None, *,
                 report_seconds: float = PROGRESS_SECONDS, clock: Callable[[], float] = time.monotonic):
        self.time_limit = None if time_limit is None else checked_number(time_limit, "time_limit", "search", low=0,
                                                                         low_open=True, note="seconds")
        self.check_limit = None if check_limit is None else checked_number(check_limit, "check_limit", "search",
                                                                           whole=True, low=1, note="nodes")
        self.report_seconds, self.clock = report_seconds, clock
        self.stopped = False

    def start(self, evaluator: NodeEvaluator, strategy: str) -> None:
        self.evaluator, self.strategy = evaluator, strategy
        self.started = self.reported = self.clock()
        self.checks_before = evaluator.checks
        self.stopped = False

    def allow(self, batch: Iterable[int], best: int | None) -> list[int]:
        """The longest head of ``batch`` (without repeats) whose nodes not yet evaluated fit the limits."""
        now = self.clock()
        if now - self.reported >= self.report_seconds:
            self._report(best, now, "")
        checked = self.evaluator.checks - self.checks_before
        room = np.inf
        # A search checks one node at least, so that it can name the closest.
        if self.time_limit is not None and checked:
            elapsed = now - self.started
            # Past the limit nothing more; before it, as many nodes as the time left allows at the pace so far (at
            # least one), so that a large batch does not run far past the limit.
            room = 0 if elapsed >= self.time_limit else max(1, int((self.time_limit - elapsed) * checked / elapsed))
        if self.check_limit is not None:
            room = min(room, self.check_limit - checked)
        allowed = []
        for index in dict.fromkeys(int(i) for i in batch):
            if index not in self.evaluator.results:
                if room <= 0:
                    self.stopped = True
                    break
                room -= 1
            allowed.append(index)
        return allowed

    def finish(self, best: int | None) -> None:
        self._report(best, self.clock(), " stopped at the limit" if self.stopped else " done")

    def _report(self, best: int | None, now: float, ending: str) -> None:
        self.reported = now
        if self.evaluator.progress is None:
            return
        objective = self.evaluator.objective
        found = ("none satisfying" if best is None
                 else f"best {objective} {self.evaluator.results[best].values[objective]:.6g}")
        self.evaluator.progress(f"{self.strategy} search{ending}: {self.evaluator.checks:,} of "
                                f"{self.evaluator.lattice.size:,} nodes checked, {found} ({now - self.started:.1f} s)")


@dataclass
class SearchResult:
    """``proven``: the strategy ran to its end, so ``best`` is what it finds without a limit (for optimal and
    exhaustive search, the optimum); otherwise a limit stopped it and ``best`` is the best node it had found."""

    strategy: str
    metric: str
    best: NodeResult | None
    closest: NodeResult
    checks: int
    lattice_size: int
    seconds: float
    attributes: list[str] = field(default_factory=list)
    proven: bool = True

    @property
    def found(self) -> bool:
        return self.best is not None

    @property
    def levels(self) -> dict[str, int]:
        node = (self.best or self.closest).node
        return dict(zip(self.attributes, node))

    def summary(self) -> str:
        checked = f"({self.checks} of {self.lattice_size} nodes checked, {self.seconds:.2f} s)"
        if self.best is None:
            closest = (f"{dict(zip(self.attributes, self.closest.node))}, would suppress {self.closest.suppressed} "
                       f"records {checked}")
            if self.proven:
                return f"{self.strategy}: no transformation satisfies the policy; the closest, {closest}"
            return (f"{self.strategy}: stopped at the limit before finding a transformation that satisfies the policy; "
                    f"the closest checked, {closest}")
        found = (f"{self.levels} with {self.metric} = {self.best.values[self.metric]:.6g}, {self.best.suppressed} "
                 f"records suppressed {checked}")
        if self.proven:
            return f"{self.strategy}: {found}"
        return f"{self.strategy}: best found within the limit, not proven optimal: {found}"


class SearchStrategy(ABC):
    name = ""
    # Whether it lists the lattice's nodes (so cannot search a wide one), and whether it needs a time or check limit
    # to end (a heuristic's walk over a wide lattice has no end of its own that comes soon enough).
    lists_lattice = True
    needs_limit = False

    @classmethod
    def check_budget(cls, time_limit: float | None, check_limit: int | None) -> None:
        """Refuse a strategy that needs a limit given none, before any work."""
        if cls.needs_limit and time_limit is None and check_limit is None:
            raise PolicyError(f"the {cls.name} search needs a time_limit (seconds) or a check_limit (nodes): it is a "
                              "heuristic, and runs until one stops it")

    def search(self, evaluator: NodeEvaluator, budget: SearchBudget | None = None) -> SearchResult:
        """The strategy's best node, within ``budget``'s limits when given."""
        budget = budget or SearchBudget()
        self.check_budget(budget.time_limit, budget.check_limit)
        if self.lists_lattice and not evaluator.lattice.listed:
            raise PolicyError(f"the {self.name} search lists the lattice's nodes, and this one has "
                              f"{evaluator.lattice.size:,} (more than {LISTED_NODES:,}); search it with a heuristic "
                              f"strategy ({', '.join(walking_strategies())}) and a time limit")
        budget.start(evaluator, self.name)
        started = time.perf_counter()
        best = self.best_node(evaluator, budget)
        proven = not budget.stopped
        if best is None and not evaluator.suppressed_monotone and evaluator.lattice.listed:
            # The top need not suppress least: name the true closest node, which only evaluating them all can tell.
            evaluator.evaluate_many(budget.allow(range(evaluator.lattice.size), None))
        closest = min(evaluator.results.values(), key=lambda r: (r.suppressed, sum(r.node)))
        budget.finish(best)
        return SearchResult(self.name, evaluator.objective, evaluator.evaluate(best) if best is not None else None,
                            closest, evaluator.checks, evaluator.lattice.size, time.perf_counter() - started,
                            list(evaluator.lattice.attributes), proven)

    @abstractmethod
    def best_node(self, evaluator: NodeEvaluator, budget: SearchBudget) -> int | None:
        """Index of the best satisfying node, or None when none satisfies; when ``budget`` stops it, the best found
        so far."""


def walking_strategies(kind: type[SearchStrategy] = SearchStrategy) -> list[str]:
    """The names of the strategies (subclasses of ``kind``, in the order they are defined) that do not list the
    lattice: the heuristics."""
    names = []
    for strategy in kind.__subclasses__():
        if strategy.name and not strategy.lists_lattice:
            names.append(strategy.name)
        names += walking_strategies(strategy)
    return names


def better(evaluator: NodeEvaluator, candidate: int, best: int | None) -> bool:
    if best is None:
        return True
    return (evaluator.value(candidate), candidate) < (evaluator.value(best), best)
