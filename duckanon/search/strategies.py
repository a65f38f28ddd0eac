"""Searching the generalization lattice for the transformation that satisfies a policy and loses the least.

The strategies ask a :class:`~duckanon.search.evaluator.NodeEvaluator` about nodes and know nothing else (which
models are monotone, and what a verdict lets them conclude, is told there):

- :class:`ExhaustiveSearch` evaluates every node;
- :class:`OptimalSearch` returns the same optimum as exhaustive search, evaluating far fewer nodes: every node is
  settled by evaluating it, by a failing node above it (monotone policies: a node's generalizations satisfy it
  whenever the node does), or by a node below it whose lower bound reaches the best value found; it interleaves
  binary searches along paths up the lattice with the evaluation of the nodes known to satisfy;
- :class:`SamaratiSearch` is seed 002's binary search on lattice height: the best node of the lowest height at which
  any node satisfies (exact for monotone policies).

:func:`solution_space` lists every satisfying node with every metric's value.
"""

from __future__ import annotations

import time
from abc import ABC, abstractmethod
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from .evaluator import NodeEvaluator, NodeResult

# Nodes a search round evaluates together (the greedy descent without prior bounds takes at least this many,
# tag_by_paths climbs this many paths): the SQL evaluator's batch, so that a round's nodes share one query.
ROUND = 64


@dataclass
class SearchResult:
    strategy: str
    metric: str
    best: NodeResult | None
    closest: NodeResult
    checks: int
    lattice_size: int
    seconds: float
    attributes: list[str] = field(default_factory=list)

    @property
    def found(self) -> bool:
        return self.best is not None

    @property
    def levels(self) -> dict[str, int]:
        node = (self.best or self.closest).node
        return dict(zip(self.attributes, node))

    def summary(self) -> str:
        if self.best is None:
            return (f"{self.strategy}: no transformation satisfies the policy; the closest, "
                    f"{dict(zip(self.attributes, self.closest.node))}, would suppress {self.closest.suppressed} records "
                    f"({self.checks} of {self.lattice_size} nodes checked, {self.seconds:.2f} s)")
        return (f"{self.strategy}: {self.levels} with {self.metric} = {self.best.values[self.metric]:.6g}, "
                f"{self.best.suppressed} records suppressed ({self.checks} of {self.lattice_size} nodes checked, "
                f"{self.seconds:.2f} s)")


class SearchStrategy(ABC):
    name = ""

    def search(self, evaluator: NodeEvaluator) -> SearchResult:
        started = time.perf_counter()
        best = self.best_node(evaluator)
        if best is None and not evaluator.suppressed_monotone:
            # The top need not suppress least: name the true closest node, which only evaluating them all can tell.
            evaluator.evaluate_many(range(evaluator.lattice.size))
        closest = min(evaluator.results.values(), key=lambda r: (r.suppressed, sum(r.node)))
        return SearchResult(self.name, evaluator.objective, evaluator.evaluate(best) if best is not None else None,
                            closest, evaluator.checks, evaluator.lattice.size, time.perf_counter() - started,
                            list(evaluator.lattice.attributes))

    @abstractmethod
    def best_node(self, evaluator: NodeEvaluator) -> int | None:
        """Index of the best satisfying node, or None when none satisfies."""


def _better(evaluator: NodeEvaluator, candidate: int, best: int | None) -> bool:
    if best is None:
        return True
    return (evaluator.value(candidate), candidate) < (evaluator.value(best), best)


class ExhaustiveSearch(SearchStrategy):
    name = "exhaustive"

    def best_node(self, evaluator):
        best = None
        for height in range(evaluator.lattice.height + 1):
            for index in evaluator.lattice.at_height(height):
                if (evaluator.evaluate_many([int(index)])[0].within_limit and _better(evaluator, int(index), best)
                        and evaluator.satisfies(int(index))):
                    best = int(index)
        return best


class OptimalSearch(SearchStrategy):
    """Exact: the satisfying node of least (value, index), as exhaustive search finds it.

    Every node is settled by one of: it was evaluated; it lies below an evaluated node that fails a monotone policy
    (so it fails too); or its estimate (the metric's bound known before evaluation, or the largest bound of the
    evaluated nodes below it) already reaches the best (value, index) found, so it cannot beat it.  Each round
    evaluates one batch: the open direct specializations of the best satisfying nodes found (greedy descent), the
    unsettled nodes known to satisfy (lowest estimate first), and for monotone policies nodes that settle many
    unknown ones when they fail:

    - when the metric bounds every node before evaluation (the record-cost metrics), the frontier of the open
      region: the open nodes of unknown verdict none of whose generalizations is one, lowest bound first.  A failing
      frontier node settles the most below it;
    - otherwise the middle nodes of binary searches along paths of nodes of unknown verdict (open ones only, with
      suppression).

    When the policy is not monotone the rounds evaluate unsettled nodes by their estimate alone.

    Checks on Adult (9 quasi-identifiers, k = 5; Loss at 0% / Loss at 5%): paths 153 / 677, frontier 121 / 372.  For
    DM the frontier has no order (every bound unknown): Adult DM 5% 2,286 checks by paths (16) and a descent of 64
    nodes a round, 6,203 by frontier; IHIS DM 0% 792 by paths, 1,663 by frontier.
    """

    name = "optimal"

    def __init__(self, paths: int = 16, frontier: int = 16, candidates: int = 16):
        self.paths, self.frontier, self.candidates = paths, frontier, candidates

    def best_node(self, evaluator):
        try:
            return _Bounded(evaluator, self.paths, self.frontier, self.candidates).run()
        finally:
            evaluator.pending = None


# See _Bounded.descent_count.
DESCENT_WITH_FRONTIER = 24


class _Bounded:
    """The state of one optimal search (see :class:`OptimalSearch`)."""

    def __init__(self, evaluator: NodeEvaluator, paths: int, frontier: int, candidates: int):
        self.evaluator = evaluator
        self.lattice = lattice = evaluator.lattice
        self.masks = evaluator.masks
        self.objective = evaluator.objective
        self.monotone = evaluator.monotone
        self.candidate_count = candidates
        size = lattice.size
        self.tags = np.zeros(size, dtype=np.int8)  # 1 satisfies, -1 fails, 0 unknown
        self.value = np.full(size, np.inf)
        self.bound = np.full(size, -np.inf)
        # Largest bound known for each node: the metric's own before evaluation, raised by evaluated nodes below.
        self.estimate = evaluator.prior_bounds()
        bounded = bool(np.isfinite(self.estimate).all())
        self.frontier_count = frontier if bounded else 0
        # Without suppression a satisfying node's bound is its value, so its up-set is settled at once and the paths
        # best run through every node of unknown verdict: a failing node above the settled region still settles the
        # nodes below it.  With suppression, paths through settled nodes cost more checks than they save (measured on
        # Adult: 5% suppression, DM 3,875 checks with paths kept to unsettled nodes against 4,437 through all).
        self.through_settled = evaluator.allowed_suppressed == 0
        self.path_count = 0 if bounded else paths
        # Direct specializations of unknown verdict of the best satisfying nodes that each round adds (at least):
        # where no frontier finds the border the descent walks it, so it takes more (Adult, checks at 0% / 5%: DM
        # 201 / 2,474 with 24, 193 / 2,286 with 64; Loss, with a frontier, 121 / 372 with 24, 108 / 561 with 64).
        self.descent_count = DESCENT_WITH_FRONTIER if bounded else ROUND
        self.satisfying = np.zeros(size, dtype=bool)  # evaluated and within the suppression limit
        self.best: int | None = None
        self.paths: list[list] = []  # [path, low, high]
        # Per attribute, the nodes that have a generalization in it and that generalization's index.
        self.raisable = [np.flatnonzero(lattice.nodes[:, i] + 1 < n) for i, n in enumerate(lattice.levels)]
        self.strides = [lattice.index(tuple(int(a == i) for a in range(len(lattice.levels))))
                        for i in range(len(lattice.levels))]

    def evaluate(self, indices: list[int]) -> None:
        fresh = [i for i in dict.fromkeys(indices) if not self.evaluator.evaluated[i]]
        for index, result in zip(fresh, self.evaluator.evaluate_many(fresh)):
            self._record(index, result)

    def _record(self, index: int, result: NodeResult) -> None:
        value, bound = result.values[self.objective], result.bounds[self.objective]
        self.value[index], self.bound[index] = value, bound
        up = self.masks.up(index)
        if self.monotone:
            mask = up if result.within_limit else self.masks.down(index)
            self.tags[mask & (self.tags == 0)] = 1 if result.within_limit else -1
        self.tags[index] = 1 if result.within_limit else -1
        self.satisfying[index] = result.within_limit
        self.estimate[up] = np.maximum(self.estimate[up], bound)
        if (result.within_limit and (self.best is None or (value, index) < (self.value[self.best], self.best))
                and self.evaluator.satisfies(index)):
            self.best = index

    def settled(self) -> np.ndarray:
        evaluated = self.evaluator.evaluated
        done = evaluated | (self.tags < 0)
        if self.best is not None:
            best_value = self.value[self.best]
            # Above a node whose bound exceeds the best value nothing can beat it; at equal bound, the nodes above a
            # node numbered after the best are numbered after it too, so they lose the tie.
            done |= self.estimate > best_value
            for index in np.flatnonzero(evaluated & (self.bound == best_value)):
                if index >= self.best:
                    done |= self.masks.up(int(index))
        return done

    def run(self) -> int | None:
        lattice = self.lattice
        if self.monotone:
            top = lattice.index(lattice.top)
            self.evaluate([top])
            if self.tags[top] < 0:
                return None
        while True:
            open_ = ~self.settled()
            if not open_.any():
                return self.best
            self.evaluator.pending = open_
            batch = self._frontier(open_) + self._path_middles(open_) if self.monotone else []
            # Greedy descent: the open direct specializations of unknown verdict of the best satisfying nodes found,
            # which may satisfy at a lower cost or fail just below the border (settling the most beneath them); a
            # good best early lets the bounds settle more.
            descent: dict[int, None] = {}
            unknown = open_ & (self.tags == 0)
            found = np.flatnonzero(self.satisfying)
            for index in found[np.lexsort((found, self.value[found]))].tolist():
                descent.update((p, None) for p in lattice.predecessors(index) if unknown[p])
                if len(descent) >= self.descent_count:
                    break
            batch += list(descent)
            candidates = np.flatnonzero(open_ & (self.tags > 0) if self.monotone else open_)
            if not self.monotone and len(candidates):
                # Nothing but lower nodes' bounds prunes here: two heights at a time, so that they can.
                heights = lattice.heights[candidates]
                candidates = candidates[heights < heights.min() + 2]
            if len(candidates):
                order = np.lexsort((candidates, lattice.heights[candidates], self.estimate[candidates]))
                batch += [int(i) for i in candidates[order[:self.candidate_count]]]
            self.evaluate(batch)

    def _frontier(self, open_: np.ndarray) -> list[int]:
        """The open nodes of unknown verdict with no direct generalization that is one, lowest estimate first."""
        if not self.frontier_count:
            return []
        unknown = open_ & (self.tags == 0)
        covered = np.zeros_like(unknown)
        for nodes, stride in zip(self.raisable, self.strides):
            covered[nodes] |= unknown[nodes + stride]
        frontier = np.flatnonzero(unknown & ~covered)
        order = np.lexsort((frontier, self.estimate[frontier]))
        return frontier[order[:self.frontier_count]].tolist()

    def _path_middles(self, open_: np.ndarray) -> list[int]:
        """Advance the binary searches (one step each) along paths of nodes with unknown verdicts, starting new
        paths at the lowest open unknown nodes; the nodes to evaluate next."""
        if not self.path_count:
            return []
        walkable = (self.tags == 0) if self.through_settled else open_ & (self.tags == 0)
        alive = []
        for path, low, high in self.paths:
            # Tags and bounds from other nodes may settle this path's ends: narrow to the stretch still unknown.
            while low <= high and not walkable[path[low]]:
                low += 1
            while low <= high and not walkable[path[high]]:
                high -= 1
            if low <= high:
                alive.append([path, low, high])
        self.paths = alive
        claimed = np.zeros(self.lattice.size, dtype=bool)
        for path, low, high in self.paths:
            claimed[path[low:high + 1]] = True
        if len(self.paths) < self.path_count:
            starts = np.flatnonzero(open_ & (self.tags == 0) & ~claimed)
            starts = starts[np.argsort(self.lattice.heights[starts], kind="stable")]
            for start in starts.tolist():
                if len(self.paths) >= self.path_count:
                    break
                if claimed[start]:
                    continue
                path = [start]
                while upward := [s for s in self.lattice.successors(path[-1]) if walkable[s] and not claimed[s]]:
                    path.append(upward[0])
                claimed[path] = True
                self.paths.append([path, 0, len(path) - 1])
        return [path[(low + high) // 2] for path, low, high in self.paths]


def tag_by_paths(evaluator: NodeEvaluator, paths_per_round: int = ROUND) -> np.ndarray:
    """For a monotone policy: which nodes satisfy it, found by binary searches along paths up the lattice.

    A node that satisfies tags its whole up-set, one that fails its whole down-set, so most nodes are never checked.
    Many paths are searched in lockstep so that each round's middle nodes are evaluated as one batch.
    """
    lattice = evaluator.lattice
    tags = np.zeros(lattice.size, dtype=np.int8)  # 1 satisfies, -1 fails, 0 unknown

    def record(index: int, ok: bool) -> None:
        mask = evaluator.masks.up(index) if ok else evaluator.masks.down(index)
        tags[mask & (tags == 0)] = 1 if ok else -1

    top = lattice.index(lattice.top)
    record(top, evaluator.evaluate(top).within_limit)
    if tags[top] < 0:
        return tags == 1
    order = [int(i) for i in lattice.by_height()]
    cursor = 0
    while True:
        # Build up to ``paths_per_round`` paths from the lowest untagged nodes, each climbing through untagged nodes.
        paths: list[list[int]] = []
        claimed: set[int] = set()
        while cursor < len(order) and len(paths) < paths_per_round:
            start = order[cursor]
            if tags[start] or start in claimed:
                cursor += 1 if tags[start] else 0
                if not tags[start]:
                    break
                continue
            path = [start]
            while upward := [s for s in lattice.successors(path[-1]) if tags[s] == 0 and s not in claimed]:
                path.append(upward[0])
            claimed.update(path)
            paths.append(path)
            cursor += 1
        if not paths:
            if cursor >= len(order):
                return tags == 1
            continue
        bounds = [[0, len(path) - 1] for path in paths]
        while any(low <= high for low, high in bounds):
            middles = [(k, (low + high) // 2) for k, (low, high) in enumerate(bounds) if low <= high]
            results = evaluator.evaluate_many([paths[k][m] for k, m in middles])
            for (k, middle), result in zip(middles, results):
                record(paths[k][middle], result.within_limit)
            for k, (low, high) in enumerate(bounds):
                # Tags from other paths may settle this path's nodes: narrow to the still-unknown stretch.
                while low <= high and tags[paths[k][low]] < 0:
                    low += 1
                while low <= high and tags[paths[k][high]] > 0:
                    high -= 1
                bounds[k] = [low, high]


class SamaratiSearch(SearchStrategy):
    """Seed 002: binary search on height for the lowest height with a satisfying node (MaxSup being the suppression
    limit), then the best node of that height under the metric."""

    name = "samarati"

    def best_node(self, evaluator):
        lattice = evaluator.lattice
        low, high = 0, lattice.height
        best: int | None = None
        while low <= high:
            middle = (low + high) // 2
            found = None
            level = [int(i) for i in lattice.at_height(middle)]
            for index, result in zip(level, evaluator.evaluate_many(level)):
                if result.within_limit and _better(evaluator, index, found) and evaluator.satisfies(index):
                    found = index
            if found is not None:
                best, high = found, middle - 1
            else:
                low = middle + 1
        return best


STRATEGIES: dict[str, type[SearchStrategy]] = {s.name: s for s in (OptimalSearch, SamaratiSearch, ExhaustiveSearch)}


def solution_space(evaluator: NodeEvaluator) -> pd.DataFrame:
    """Every satisfying node with its suppressed records and every metric's value (seed 000, steps 2–3)."""
    lattice = evaluator.lattice
    candidates = tag_by_paths(evaluator) if evaluator.monotone else np.ones(lattice.size, dtype=bool)
    chosen = [int(i) for i in lattice.by_height() if candidates[i]]
    rows = [{**dict(zip(lattice.attributes, r.node)), "suppressed": r.suppressed, "classes": r.classes, **r.values}
            for i, r in zip(chosen, evaluator.evaluate_many(chosen)) if r.within_limit and evaluator.satisfies(i)]
    columns = [*lattice.attributes, "suppressed", "classes", *[m.name for m in evaluator.metrics]]
    return pd.DataFrame(rows, columns=columns)
