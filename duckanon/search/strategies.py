"""Searching the generalization lattice for the transformation that satisfies a policy and loses the least.

The strategies ask a :class:`~duckanon.search.evaluator.NodeEvaluator` about nodes and know nothing else (which
models are monotone, and what a verdict lets them conclude, is told there):

- :class:`ExhaustiveSearch` evaluates every node;
- :class:`OptimalSearch` returns the same optimum as exhaustive search, evaluating far fewer nodes: every node is
  settled by evaluating it, by a failing node above it (monotone policies: a node's generalizations satisfy it
  whenever the node does), or by a node below it whose lower bound reaches the best value found; it interleaves
  binary searches along paths up the lattice with the evaluation of the nodes known to satisfy;
- :class:`SamaratiSearch` is seed 002's binary search on lattice height: the best node of the lowest height at which
  any node satisfies (exact for monotone policies), settling most nodes of a height without evaluating them.

A :class:`~.budget.SearchBudget` bounds a search's time or checks (its result then says whether it is proven) and
reports its progress; the heuristic strategies for lattices too wide to list are in :mod:`.heuristics`.

:func:`solution_space` lists every satisfying node with every metric's value.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

from ..deferred import pandas as pd
from ..errors import PolicyError
from .budget import ROUND, SearchBudget, SearchResult, SearchStrategy, better
from .evaluator import NodeEvaluator, NodeResult
from .heuristics import GeneticSearch, LightningSearch, TopDownSearch

__all__ = [
    "ROUND",
    "STRATEGIES",
    "ExhaustiveSearch",
    "OptimalSearch",
    "SamaratiSearch",
    "SearchBudget",
    "SearchResult",
    "SearchStrategy",
    "solution_space",
    "tag_by_paths",
]


class ExhaustiveSearch(SearchStrategy):
    name = "exhaustive"

    def best_node(self, evaluator, budget):
        best = None
        order = evaluator.lattice.by_height()
        for start in range(0, len(order), ROUND):
            batch = budget.allow(order[start:start + ROUND], best)
            for index, result in zip(batch, evaluator.evaluate_many(batch)):
                if result.within_limit and better(evaluator, index, best) and evaluator.satisfies(index):
                    best = index
            if budget.stopped:
                break
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

    def best_node(self, evaluator, budget):
        try:
            return _Bounded(evaluator, budget, self.paths, self.frontier, self.candidates).run()
        finally:
            evaluator.pending = None


# See _Bounded.descent_count.
DESCENT_WITH_FRONTIER = 24


class _Knowledge:
    """What a search knows of the nodes from those it has evaluated (within its budget): verdicts (1 within the
    suppression limit, -1 not, 0 unknown; for monotone policies a node within the limit tags its generalizations, a
    failing one its specializations), values, and estimates: the largest lower bound of the objective known for each
    node, the metric's own before evaluation, raised by the bounds of evaluated nodes below."""

    def __init__(self, evaluator: NodeEvaluator, budget: SearchBudget):
        self.evaluator, self.budget = evaluator, budget
        self.lattice = lattice = evaluator.lattice
        self.masks = evaluator.masks
        self.objective = evaluator.objective
        self.monotone = evaluator.monotone
        size = lattice.size
        self.tags = np.zeros(size, dtype=np.int8)
        # Objects where the objective is not a float (a rank-aggregated loss): compared as the metric orders them.
        prior = evaluator.prior_bounds()
        kind = object if prior.dtype == object else float
        self.value = np.full(size, np.inf, dtype=kind)
        self.bound = np.full(size, -np.inf, dtype=kind)
        self.estimate = np.array(prior, dtype=kind)
        self.satisfying = np.zeros(size, dtype=bool)  # evaluated and within the suppression limit
        self.best: int | None = None  # the best satisfying node found, as the progress reports tell

    def evaluate(self, indices: Iterable[int]) -> None:
        """Evaluate the nodes (those the budget allows), recording what each tells."""
        fresh = [i for i in self.budget.allow(indices, self.best) if i not in self.evaluator.results]
        for index, result in zip(fresh, self.evaluator.evaluate_many(fresh)):
            self._record(index, result)

    def _record(self, index: int, result: NodeResult) -> None:
        self.value[index], self.bound[index] = result.values[self.objective], result.bounds[self.objective]
        up = self.masks.up(index)
        if self.monotone:
            mask = up if result.within_limit else self.masks.down(index)
            np.copyto(self.tags, 1 if result.within_limit else -1, where=mask & (self.tags == 0))
        self.tags[index] = 1 if result.within_limit else -1
        self.satisfying[index] = result.within_limit
        np.maximum(self.estimate, self.bound[index], out=self.estimate, where=up)

    def beats(self, index: int, best: int | None) -> bool:
        """Whether an evaluated node within the limit has a lower (value, index) than ``best``."""
        return best is None or (self.value[index], index) < (self.value[best], best)


class _Paths:
    """Binary searches in lockstep along paths up the lattice through nodes of unknown verdict (monotone policies):
    the middle of each path is evaluated next; one within the limit tags its generalizations, a failing one its
    specializations, and the tags narrow every path to its stretch still unknown."""

    def __init__(self, lattice, count: int):
        self.lattice, self.count = lattice, count
        self.paths: list[list] = []  # [path, low, high]

    def middles(self, walkable: np.ndarray, starts: Iterable[int]) -> list[int]:
        """Advance the searches (one step each) along ``walkable`` nodes, starting new paths at ``starts`` (in their
        order) while fewer than ``count`` run; the nodes to evaluate next."""
        if not self.count:
            return []
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
        for start in map(int, starts):
            if len(self.paths) >= self.count:
                break
            if claimed[start]:
                continue
            path = [start]
            while upward := [s for s in self.lattice.successors(path[-1]) if walkable[s] and not claimed[s]]:
                path.append(upward[0])
            claimed[path] = True
            self.paths.append([path, 0, len(path) - 1])
        return [path[(low + high) // 2] for path, low, high in self.paths]


class _Bounded(_Knowledge):
    """The state of one optimal search (see :class:`OptimalSearch`)."""

    def __init__(self, evaluator: NodeEvaluator, budget: SearchBudget, paths: int, frontier: int, candidates: int):
        super().__init__(evaluator, budget)
        lattice = self.lattice
        self.candidate_count = candidates
        bounded = bool(np.isfinite(self.estimate.astype(float)).all())
        self.frontier_count = frontier if bounded else 0
        # Without suppression a satisfying node's bound is its value, so its up-set is settled at once and the paths
        # best run through every node of unknown verdict: a failing node above the settled region still settles the
        # nodes below it.  With suppression, paths through settled nodes cost more checks than they save (measured on
        # Adult: 5% suppression, DM 3,875 checks with paths kept to unsettled nodes against 4,437 through all).
        self.through_settled = evaluator.allowed_suppressed == 0
        self.paths = _Paths(lattice, 0 if bounded else paths)
        # Direct specializations of unknown verdict of the best satisfying nodes that each round adds (at least):
        # where no frontier finds the border the descent walks it, so it takes more (Adult, checks at 0% / 5%: DM
        # 201 / 2,474 with 24, 193 / 2,286 with 64; Loss, with a frontier, 121 / 372 with 24, 108 / 561 with 64).
        self.descent_count = DESCENT_WITH_FRONTIER if bounded else ROUND
        # Per attribute, the nodes that have a generalization in it and that generalization's index.
        self.raisable = [np.flatnonzero(lattice.nodes[:, i] + 1 < n) for i, n in enumerate(lattice.levels)]

    def _record(self, index: int, result: NodeResult) -> None:
        super()._record(index, result)
        if result.within_limit and self.beats(index, self.best) and self.evaluator.satisfies(index):
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
        while not self.budget.stopped:
            open_ = ~self.settled()
            if not open_.any():
                break
            self.evaluator.pending = open_
            batch = self._frontier(open_) + self._path_middles(open_) if self.monotone else []
            # Greedy descent: the open direct specializations of unknown verdict of the best satisfying nodes found,
            # which may satisfy at a lower cost or fail just below the border (settling the most beneath them); a
            # good best early lets the bounds settle more.
            batch += self._descent(open_ & (self.tags == 0))
            candidates = np.flatnonzero(open_ & (self.tags > 0) if self.monotone else open_)
            if not self.monotone and len(candidates):
                # Nothing but lower nodes' bounds prunes here: two heights at a time, so that they can.
                heights = lattice.heights[candidates]
                candidates = candidates[heights < heights.min() + 2]
            if len(candidates):
                order = np.lexsort((candidates, lattice.heights[candidates], self.estimate[candidates]))
                batch += [int(i) for i in candidates[order[:self.candidate_count]]]
            self.evaluate(batch)
        return self.best

    def _descent(self, unknown: np.ndarray) -> list[int]:
        """The ``unknown`` direct specializations of the satisfying nodes found, best first (each node's in attribute
        order, each once), through the node that brings their number to :attr:`descent_count`."""
        found = np.flatnonzero(self.satisfying)
        found = found[np.lexsort((found, self.value[found]))]
        # Row r: found node r's specialization in each attribute, -1 where there is none or it is not unknown.
        below = np.where(self.lattice.nodes[found] > 0, found[:, None] - self.lattice.strides[None, :], -1)
        below = np.where((below >= 0) & unknown[np.maximum(below, 0)], below, -1)
        flat = below.ravel()
        kept = np.flatnonzero(flat >= 0)
        _, first = np.unique(flat[kept], return_index=True)
        first = kept[np.sort(first)]  # each specialization where it first appears
        if len(first) > self.descent_count:
            last_row = first[self.descent_count - 1] // below.shape[1]
            first = first[first // below.shape[1] <= last_row]
        return flat[first].tolist()

    def _frontier(self, open_: np.ndarray) -> list[int]:
        """The open nodes of unknown verdict with no direct generalization that is one, lowest estimate first."""
        if not self.frontier_count:
            return []
        unknown = open_ & (self.tags == 0)
        covered = np.zeros_like(unknown)
        for nodes, stride in zip(self.raisable, self.lattice.strides):
            covered[nodes] |= unknown[nodes + stride]
        frontier = np.flatnonzero(unknown & ~covered)
        order = np.lexsort((frontier, self.estimate[frontier]))
        return frontier[order[:self.frontier_count]].tolist()

    def _path_middles(self, open_: np.ndarray) -> list[int]:
        """The paths' next middles, new paths starting at the lowest open nodes of unknown verdict."""
        walkable = (self.tags == 0) if self.through_settled else open_ & (self.tags == 0)
        starts = np.flatnonzero(open_ & (self.tags == 0))
        return self.paths.middles(walkable, starts[np.argsort(self.lattice.heights[starts], kind="stable")])


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
    limit), then the best node of that height under the metric (least (value, index)).

    The result is that of evaluating every node of each height the binary search visits, with fewer checks: a visited
    height above the final one needs one satisfying node, not all; for monotone policies a node below a failing one
    fails and one above a node within the limit is within it, and binary searches along paths up from the height's
    unknown nodes find the failing nodes that settle most of it at once; at the final height a node whose estimate
    (its prior bound, or the bound of an evaluated node below) cannot beat the best found is not evaluated.  Stopped
    by a limit, it returns the satisfying node found of least height, then value.

    Checks on Adult (9 quasi-identifiers, k = 5; evaluating whole heights took 5,448 at 0% and 6,623 at 5%): DM 189
    at 0%, 2,029 at 5%; Loss 255 and 2,083.  The same nodes are found.
    """

    name = "samarati"

    def __init__(self, paths: int = 16):
        self.paths = paths

    def best_node(self, evaluator, budget):
        heights = _Heights(evaluator, budget, self.paths)
        low, high = 0, evaluator.lattice.height
        lowest = None  # the lowest height visited at which a node satisfies
        while low <= high and not budget.stopped:
            middle = (low + high) // 2
            if heights.best_at(middle, first=True) is not None:
                lowest, high = middle, middle - 1
            else:
                low = middle + 1
        best = None if lowest is None else heights.best_at(lowest)
        return heights.lowest_found() if budget.stopped else best


class _Heights(_Knowledge):
    """The state of one Samarati search: the satisfying nodes of one height at a time."""

    def __init__(self, evaluator: NodeEvaluator, budget: SearchBudget, paths: int):
        super().__init__(evaluator, budget)
        self.path_count = paths if self.monotone else 0
        self.rejected = np.zeros(self.lattice.size, dtype=bool)  # within the limit, but not satisfying

    def best_at(self, height: int, first: bool = False) -> int | None:
        """The satisfying node of least (value, index) at ``height`` (with ``first``, any satisfying node there), or
        None when none satisfies; when the budget stops the search, the best found there."""
        at = self.lattice.heights == height
        paths = _Paths(self.lattice, self.path_count)
        found = None
        while True:
            found = self._best_evaluated(at, found)
            if found is not None and (self.best is None or height <= self.lattice.heights[self.best]):
                self.best = found
            if first and found is not None:
                return found
            open_ = at & ~self.evaluator.evaluated & (self.tags >= 0)
            if found is not None:
                # A node's value is at least its estimate, and at an equal value the lower index wins.
                best_value = self.value[found]
                open_ &= (self.estimate < best_value) | ((self.estimate == best_value)
                                                          & (np.arange(self.lattice.size) < found))
            if self.budget.stopped or not open_.any():
                return found
            batch = _lowest_estimate(self.estimate, open_ & (self.tags > 0), ROUND)
            if self.path_count:
                batch += paths.middles(self.tags == 0, _lowest_estimate(self.estimate, open_ & (self.tags == 0)))
            else:
                batch += _lowest_estimate(self.estimate, open_, ROUND)
            self.evaluate(batch)

    def lowest_found(self) -> int | None:
        """The satisfying evaluated node of least (height, value, index): what a stopped search returns."""
        candidates = np.flatnonzero(self.satisfying & ~self.rejected)
        order = np.lexsort((candidates, self.value[candidates], self.lattice.heights[candidates]))
        return self._first_satisfying(candidates[order], None)

    def _best_evaluated(self, at: np.ndarray, found: int | None) -> int | None:
        """The satisfying evaluated node of least (value, index) at the height, if lower than ``found``'s."""
        candidates = np.flatnonzero(at & self.satisfying & ~self.rejected)
        return self._first_satisfying(candidates[np.lexsort((candidates, self.value[candidates]))], found)

    def _first_satisfying(self, ordered: np.ndarray, found: int | None) -> int | None:
        """The first of ``ordered`` (evaluated nodes within the limit) that satisfies, if it comes before the first
        that does not beat ``found``; else ``found``."""
        for index in ordered.tolist():
            if not self.beats(index, found):
                break
            if self.evaluator.satisfies(index):
                return index
            self.rejected[index] = True
        return found


def _lowest_estimate(estimate: np.ndarray, mask: np.ndarray, count: int | None = None) -> list[int]:
    """The nodes of ``mask``, lowest estimate first (then by index), at most ``count``."""
    nodes = np.flatnonzero(mask)
    return nodes[np.lexsort((nodes, estimate[nodes]))][:count].tolist()


STRATEGIES: dict[str, type[SearchStrategy]] = {s.name: s for s in (OptimalSearch, SamaratiSearch, ExhaustiveSearch,
                                                                   LightningSearch, TopDownSearch, GeneticSearch)}


def solution_space(evaluator: NodeEvaluator) -> pd.DataFrame:
    """Every satisfying node with its suppressed records and every metric's value (seed 000, steps 2–3; a
    rank-aggregated loss as its number)."""
    lattice = evaluator.lattice
    if not lattice.listed:
        raise PolicyError(f"the solution space lists every node, and this lattice has {lattice.size:,}: too many")
    candidates = tag_by_paths(evaluator) if evaluator.monotone else np.ones(lattice.size, dtype=bool)
    chosen = [int(i) for i in lattice.by_height() if candidates[i]]
    rows = [{**dict(zip(lattice.attributes, r.node)), "suppressed": r.suppressed, "classes": r.classes,
             **{name: float(value) for name, value in r.values.items()}}
            for i, r in zip(chosen, evaluator.evaluate_many(chosen)) if r.within_limit and evaluator.satisfies(i)]
    columns = [*lattice.attributes, "suppressed", "classes", *[m.name for m in evaluator.metrics]]
    return pd.DataFrame(rows, columns=columns)
