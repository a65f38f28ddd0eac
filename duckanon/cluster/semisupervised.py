"""Seed 001 (Yang, Yang, Zhang 2011, "Anonymous data publishing by semi-supervised clustering", J. Harbin Eng.
Univ. 32(11)): semi-supervised (α,k)-anonymity by clustering.

The user names the highly sensitive values Sh and their α; the other values may get a looser α of their own.  In the
policy that is one :class:`~duckanon.privacy.models.AlphaKAnonymity` with ``highly_sensitive=Sh`` and, optionally, a second
one without (its α bounds every value, Sh included, so it should be the looser).  The algorithm (seed 001 §3.2, Fig. 2):

1. each record's sum of distances to all records (the mixed-type distance of :mod:`duckanon.cluster.distance`, seed 001
   formula 1; summed exactly without a distance matrix);
2. the unassigned record with the smallest sum seeds the next cluster (a central record, never an outlier);
3. the cluster grows by the unassigned records nearest its seed, nearest first, a record joining only while every
   bounded value keeps at most ⌊α·k⌋ records of the cluster's k; a seed that cannot gather k records is passed over
   (it may still join a later cluster), and clustering stops when the unassigned records cannot fill another cluster;
4. the remaining records go to the nearest cluster (the one whose information loss grows least) that stays valid
   (:func:`duckanon.cluster.grouping.absorb`).

Steps 1–3 are quadratic (each cluster's growth measures the distance from its seed to every unassigned record).
Above ``block_size`` records (default :data:`BLOCK_SIZE`), the records are first cut into blocks (:mod:`.blocking`:
each record a point of its numbers scaled to [0, 1] and of its categories' leaf ranks, listed subtree by subtree),
and steps 1–4 run within each block, seeds central to it.  A block is halved only where each half, as one
cluster, meets the policy (records alike may hold more of a value than its α allows): the allowed place nearest the
median; so within every block step 4 ends with every cluster valid, as over the whole table.  ``block_size=None`` clusters exactly whatever the size.

Each cluster is generalized (numbers to the cluster's interval, categories to their lowest common ancestor) and
published through :class:`~duckanon.recode.recoding.PartitionMap`; its information loss is seed 001 §2.2's, the NCP.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..declare.policy import Policy
from ..errors import PolicyError
from .blocking import checked_block_size, record_blocks, require_two_groups
from .distance import RecordSpace
from .grouping import ClusteringMethod, Composition, Records, absorb

#: The most records grown into clusters at once by default: each cluster's growth measures the distance from its
#: seed to every unassigned record of its block.  Adult's 30,162 records are clustered exactly.
BLOCK_SIZE = 40_000


class SemiSupervisedClustering(ClusteringMethod):
    """Seed 001's semi-supervised (α,k)-anonymity clustering (see the module's docstring): exact up to
    ``block_size`` records, within blocks of at most that many beyond; ``block_size=None``: exact at any size."""

    name = "semi-supervised (α,k) clustering"

    def __init__(self, block_size: int | None = BLOCK_SIZE):
        self.block_size = checked_block_size(block_size, self.name)

    def describe(self) -> dict:
        return {**super().describe(), "block_size": self.block_size}

    def check_policy(self, policy: Policy, numeric: Sequence[str]) -> None:
        lacking = [m.describe() for m in policy.models if getattr(m, "l", 1) > 1 or getattr(m, "p", 1) > 1]
        if lacking:
            raise PolicyError(f"{self.name} grows clusters under k and α only; for {', '.join(lacking)} use "
                              f"TopDownPartitioning, which repairs groups that lack distinct values")

    def assign(self, records: Records) -> tuple[np.ndarray, int]:
        space, composition = records.space, records.composition
        require_two_groups(self.block_size, space.size, composition.k, self.name)
        if self.block_size is None or space.size <= self.block_size:
            return absorb(space, composition, *_grow_clusters(space, composition))
        groups, count = np.full(space.size, -1, dtype=np.int64), 0
        # A block is cut only into halves each valid as one cluster, so that step 4 within it ends with every
        # cluster valid, as over the whole table.
        for block in record_blocks(space.points(), self.block_size, composition.k, splits=composition.splits):
            block_space, block_composition = space.part(block), composition.part(block)
            placed, made = absorb(block_space, block_composition, *_grow_clusters(block_space, block_composition))
            groups[block] = placed + count
            count += made
        return groups, count


def _grow_clusters(space: RecordSpace, composition: Composition) -> tuple[np.ndarray, int]:
    """Steps 1–3: each record's cluster (-1 for those left over) and the number of clusters."""
    k, n = composition.k, space.size
    groups = np.full(n, -1, dtype=np.int64)
    seeds = np.lexsort((np.arange(n), space.distance_sums()))
    unassigned = np.arange(n)
    count = position = 0  # seeds before ``position`` are assigned or were passed over
    while len(unassigned) >= k and composition.capacity(unassigned) >= k:
        position = _next_unassigned(seeds, groups, position)
        if position == n:
            break
        seed = seeds[position]
        position += 1
        others = unassigned[unassigned != seed]
        members = _nearest_fitting(space.distances_from(seed, others), others, seed, composition, k - 1)
        if members is None:
            continue
        groups[seed] = count
        groups[members] = count
        count += 1
        unassigned = unassigned[groups[unassigned] < 0]
    return groups, count


def _next_unassigned(seeds: np.ndarray, groups: np.ndarray, position: int, window: int = 1024) -> int:
    """The first position at or after ``position`` whose seed is unassigned (``len(seeds)`` if none), looked up a
    window at a time."""
    while position < len(seeds):
        free = np.flatnonzero(groups[seeds[position:position + window]] < 0)
        if free.size:
            return position + int(free[0])
        position += window
    return len(seeds)


def _nearest_fitting(distances: np.ndarray, others: np.ndarray, seed: int, composition: Composition,
                     need: int) -> np.ndarray | None:
    """The ``need`` records of ``others`` nearest the seed that the cluster may take (ties: lower record first).  Most
    clusters fill from a few times ``need`` nearest candidates; when α turns too many away, the shortlist grows
    eightfold until it holds every candidate."""
    if need == 0:
        return others[:0]
    shortlist = min(len(others), max(4 * need, need + 64))
    while True:
        if shortlist < len(others):
            # Every candidate as near as the shortlist's farthest, so ties go to the lower record as in a full sort.
            farthest = distances[np.argpartition(distances, shortlist - 1)[shortlist - 1]]
            candidates = np.flatnonzero(distances <= farthest)
        else:
            candidates = np.arange(len(others))
        candidates = candidates[np.lexsort((others[candidates], distances[candidates]))]
        chosen = composition.fitting(seed, others[candidates], need)
        if chosen is not None or shortlist == len(others):
            return chosen
        shortlist = min(len(others), 8 * shortlist)
