"""MDAV microaggregation (Domingo-Ferrer & Mateo-Sanz 2002; Domingo-Ferrer & Torra 2005) of numeric
quasi-identifiers: groups of at least k records whose values are replaced by the group's mean.

Values are standardized (z-scores, so no attribute dominates by its unit) and compared by Euclidean distance.  While at
least 3k records remain: the record r farthest from their centroid takes its k - 1 nearest records as a group, and the
remaining record s farthest from r does the same.  With 2k to 3k - 1 records left, one more group forms around the
record farthest from their centroid, and the rest form the last group; fewer than 2k form one group.  Every step is one
vectorized pass over the remaining records.

Exact MDAV is quadratic (each group's step measures the distance to every remaining record).  Above ``block_size``
records (default :data:`BLOCK_SIZE`), the standardized records are first cut into blocks (:mod:`.blocking`) and MDAV
runs within each block: the information lost grows (``benchmarks/bench_blocking.py`` measures it against exact MDAV on
Adult).  ``block_size=None`` runs exact MDAV whatever the size.

The release shows each group's mean (:mod:`duckanon.recode.recoding`'s ``mean`` style).  MDAV protects identities (k) only:
a policy with models over sensitive values is refused, since nothing in MDAV guarantees them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..declare.policy import Policy
from ..errors import PolicyError
from ..privacy.models import KAnonymity
from .blocking import checked_block_size, record_blocks, require_two_groups
from .grouping import ClusteringMethod, Records

#: The most records exact MDAV groups at once by default (Adult's 30,162 are grouped exactly).
BLOCK_SIZE = 50_000


class MDAV(ClusteringMethod):
    """Maximum distance to average vector microaggregation (see the module's docstring): exact up to ``block_size``
    records, within blocks of at most that many beyond; ``block_size=None``: exact at any size."""

    name = "MDAV microaggregation"

    def __init__(self, block_size: int | None = BLOCK_SIZE):
        self.block_size = checked_block_size(block_size, self.name)

    def describe(self) -> dict:
        return {**super().describe(), "block_size": self.block_size}

    def check_policy(self, policy: Policy, numeric: Sequence[str]) -> None:
        categorical = [q for q in policy.quasi_identifier_names if q not in numeric]
        if categorical:
            raise PolicyError(f"{self.name} averages numbers, and quasi-identifiers {categorical} are not numeric; "
                              f"use SemiSupervisedClustering or TopDownPartitioning for categories")
        others = [m.describe() for m in policy.models if not isinstance(m, KAnonymity)]
        if others:
            raise PolicyError(f"{self.name} builds groups of at least k records and guarantees nothing else; it cannot "
                              f"meet {', '.join(others)}")

    def styles(self, policy: Policy, numeric: Sequence[str]) -> dict[str, str]:
        return {q: "mean" for q in policy.quasi_identifier_names}

    def assign(self, records: Records) -> tuple[np.ndarray, int]:
        quasi = records.policy.quasi_identifier_names
        values = np.column_stack([records.columns[q] for q in quasi])
        missing = [q for q, column in zip(quasi, values.T) if np.isnan(column).any()]
        if missing:
            raise PolicyError(f"{self.name} needs a number in every record, and {missing} hold NULLs")
        spread = values.std(axis=0)
        standardized = (values - values.mean(axis=0)) / np.where(spread > 0, spread, 1.0)
        k = records.composition.k
        require_two_groups(self.block_size, len(standardized), k, self.name)
        return blocked_mdav(standardized, k, self.block_size)


def blocked_mdav(points: np.ndarray, k: int, block_size: int | None) -> tuple[np.ndarray, int]:
    """:func:`mdav` within each of the :func:`~.blocking.record_blocks` of at most ``block_size`` rows, its groups
    numbered on; exact MDAV when ``block_size`` is None or holds every row."""
    groups, count = np.empty(len(points), dtype=np.int64), 0
    for block in record_blocks(points, block_size, k):
        grouped, made = mdav(points[block], k)
        groups[block] = grouped + count
        count += made
    return groups, count


def mdav(points: np.ndarray, k: int) -> tuple[np.ndarray, int]:
    """Group the rows of ``points`` (records × attributes) by MDAV; returns (group of every row, number of groups).

    Squared distances are |x|² - 2x·p + |p|², summed column by column; grouped records are masked out and the working
    copy is compacted only when a quarter of it is grouped.  No BLAS call: on a busy machine its threads turn a
    product of a hundred thousand rows from a millisecond into a hundred."""
    groups = np.full(len(points), -1, dtype=np.int64)
    index, work = np.arange(len(points)), np.asfortranarray(points, dtype=float)  # columns contiguous
    squares = np.einsum("ij,ij->i", work, work)
    alive = np.ones(len(work), dtype=bool)
    left = len(work)
    count = 0

    def distances(point: np.ndarray) -> np.ndarray:
        squared = squares + np.einsum("j,j->", point, point)
        for column, coordinate in zip(work.T, point):
            squared -= (2 * coordinate) * column
        return squared

    def farthest_from(point: np.ndarray) -> int:
        return int(np.argmax(np.where(alive, distances(point), -np.inf)))

    def centroid() -> np.ndarray:
        return np.einsum("i,ij->j", alive.astype(float), work) / left

    def group_around(position: int) -> None:
        nonlocal index, work, squares, alive, left, count
        members = np.argpartition(np.where(alive, distances(work[position].copy()), np.inf), k - 1)[:k]
        groups[index[members]] = count
        count += 1
        alive[members] = False
        left -= k
        if left < 0.75 * len(alive):
            index, work, squares, alive = index[alive], np.asfortranarray(work[alive]), squares[alive], alive[alive]

    while left >= 3 * k:
        first = farthest_from(centroid())
        anchor = work[first].copy()
        group_around(first)
        group_around(farthest_from(anchor))
    if left >= 2 * k:
        group_around(farthest_from(centroid()))
    if left:
        groups[index[alive]] = count
        count += 1
    return groups, count
