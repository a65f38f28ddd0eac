"""The generalization lattice: every vector of levels, one per quasi-identifier.

Node ``a`` generalizes node ``b`` when every level of ``a`` is at least that of ``b``.  A node's index is its levels
in a mixed-radix numbering (the last attribute varies fastest); one level up in attribute ``i`` adds ``strides[i]``.

A :class:`Lattice` lists its nodes as rows of an integer matrix, so that the up-set (all generalizations) and down-set
(all specializations) of a node are one vectorized comparison, which the exact searches' tagging and pruning need.
A :class:`WideLattice` -- 20 or 40 quasi-identifiers make 10^12 nodes or more -- lists nothing: it numbers nodes
(indices are Python integers, past 64 bits) and names their neighbours, all that a heuristic search walks.
:func:`lattice_of` chooses.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence

import numpy as np

Node = tuple[int, ...]

# The most nodes a lattice lists: 2**20 rows of levels and a mask per attribute level stay within a few hundred MB
# for 20 attributes, while Adult (12,960 nodes) and IHIS (25,920) list whole.
LISTED_NODES = 2 ** 20


class WideLattice:
    """The nodes numbered, not listed: index and levels convert in arbitrary precision."""

    listed = False

    def __init__(self, attributes: Sequence[str], levels: Sequence[int]):
        """``levels[i]`` is how many levels attribute ``i`` has (level 0 included)."""
        if len(attributes) != len(levels) or not attributes:
            raise ValueError("a lattice needs one level count per attribute")
        self.attributes = list(attributes)
        self.level_counts = [int(h) for h in levels]
        self.top: Node = tuple(h - 1 for h in self.level_counts)
        self.bottom: Node = tuple(0 for _ in self.level_counts)
        self.size = math.prod(self.level_counts)
        self.height = sum(self.top)
        self.place_values = [math.prod(self.level_counts[i + 1:]) for i in range(len(self.level_counts))]

    def index(self, node: Sequence[int]) -> int:
        return sum(int(level) * place for level, place in zip(node, self.place_values))

    def node(self, index: int) -> Node:
        levels = []
        for place in self.place_values:
            level, index = divmod(int(index), place)
            levels.append(level)
        return tuple(levels)

    def levels_of(self, node: Node) -> dict[str, int]:
        return dict(zip(self.attributes, (int(v) for v in node)))

    def node_of(self, levels: Mapping[str, int]) -> Node:
        return tuple(int(levels[a]) for a in self.attributes)

    def node_height(self, index: int) -> int:
        return sum(self.node(index))

    def successors(self, index: int) -> Iterator[int]:
        """Direct generalizations: one attribute one level up, in attribute order."""
        for level, count, place in zip(self.node(index), self.level_counts, self.place_values):
            if level + 1 < count:
                yield index + place

    def predecessors(self, index: int) -> Iterator[int]:
        """Direct specializations: one attribute one level down, in attribute order."""
        for level, place in zip(self.node(index), self.place_values):
            if level > 0:
                yield index - place


class Lattice(WideLattice):
    """Every node listed: ``nodes`` (one row of levels per index), ``heights`` and the strides as arrays."""

    listed = True

    def __init__(self, attributes: Sequence[str], levels: Sequence[int]):
        super().__init__(attributes, levels)
        self.levels = np.asarray(levels, dtype=np.int64)
        grids = np.meshgrid(*[np.arange(h) for h in self.levels], indexing="ij")
        self.nodes = np.stack([g.ravel() for g in grids], axis=1)
        self.heights = self.nodes.sum(axis=1)
        self.strides = np.array(self.place_values, dtype=np.int64)

    def index(self, node: Node) -> int:
        return int(np.dot(node, self.strides))

    def node(self, index: int) -> Node:
        return tuple(int(v) for v in self.nodes[index])

    def node_height(self, index: int) -> int:
        return int(self.heights[index])

    def by_height(self) -> np.ndarray:
        """Node indices, lowest height first (ties in numbering order)."""
        return np.lexsort((np.arange(self.size), self.heights))

    def at_height(self, height: int) -> np.ndarray:
        return np.flatnonzero(self.heights == height)

    def up_set(self, index: int) -> np.ndarray:
        """Mask of the node and all its generalizations."""
        return np.all(self.nodes >= self.nodes[index], axis=1)

    def down_set(self, index: int) -> np.ndarray:
        """Mask of the node and all its specializations."""
        return np.all(self.nodes <= self.nodes[index], axis=1)


def lattice_of(attributes: Sequence[str], levels: Sequence[int]) -> WideLattice:
    """A :class:`Lattice` when its nodes number at most :data:`LISTED_NODES`, else a :class:`WideLattice`."""
    if math.prod(int(h) for h in levels) <= LISTED_NODES:
        return Lattice(attributes, levels)
    return WideLattice(attributes, levels)


class LatticeMasks:
    """Up-sets and down-sets of lattice nodes as AND of per-attribute masks (one comparison per level, precomputed):
    far cheaper than comparing the whole node matrix, which searches do for every evaluated node."""

    def __init__(self, lattice: Lattice):
        self.lattice = lattice
        nodes = lattice.nodes
        # None where the comparison holds for every node (level 0 up, the top level down): nothing to AND.
        self._ge = [[nodes[:, i] >= level if level > 0 else None for level in range(int(n))]
                    for i, n in enumerate(lattice.levels)]
        self._le = [[nodes[:, i] <= level if level + 1 < n else None for level in range(int(n))]
                    for i, n in enumerate(lattice.levels)]

    def _combine(self, table, index: int) -> np.ndarray:
        mask = np.ones(self.lattice.size, dtype=bool)
        for masks, level in zip(table, self.lattice.nodes[index]):
            if masks[level] is not None:
                mask &= masks[level]
        return mask

    def up(self, index: int) -> np.ndarray:
        """Mask of the node and all its generalizations."""
        return self._combine(self._ge, index)

    def down(self, index: int) -> np.ndarray:
        """Mask of the node and all its specializations."""
        return self._combine(self._le, index)
