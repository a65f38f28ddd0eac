"""The generalization lattice: every vector of levels, one per quasi-identifier.

Node ``a`` generalizes node ``b`` when every level of ``a`` is at least that of ``b``.  Nodes are rows of an integer
matrix so that the up-set (all generalizations) and down-set (all specializations) of a node are one vectorized
comparison, which is what the searches' tagging and pruning need.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence

import numpy as np

Node = tuple[int, ...]


class Lattice:
    def __init__(self, attributes: Sequence[str], levels: Sequence[int]):
        """``levels[i]`` is how many levels attribute ``i`` has (level 0 included)."""
        if len(attributes) != len(levels) or not attributes:
            raise ValueError("a lattice needs one level count per attribute")
        self.attributes = list(attributes)
        self.levels = np.asarray(levels, dtype=np.int64)
        self.top: Node = tuple(int(h) - 1 for h in self.levels)
        self.bottom: Node = tuple(0 for _ in self.levels)
        grids = np.meshgrid(*[np.arange(h) for h in self.levels], indexing="ij")
        self.nodes = np.stack([g.ravel() for g in grids], axis=1)
        self.heights = self.nodes.sum(axis=1)
        # Strides of the mixed-radix numbering that meshgrid's C order uses.
        # A node's index is its levels times these; one level up in attribute i adds strides[i].
        self.strides = np.array([int(np.prod(self.levels[i + 1:])) for i in range(len(self.levels))], dtype=np.int64)

    @property
    def size(self) -> int:
        return len(self.nodes)

    @property
    def height(self) -> int:
        return int(self.heights.max())

    def index(self, node: Node) -> int:
        return int(np.dot(node, self.strides))

    def node(self, index: int) -> Node:
        return tuple(int(v) for v in self.nodes[index])

    def levels_of(self, node: Node) -> dict[str, int]:
        return dict(zip(self.attributes, (int(v) for v in node)))

    def node_of(self, levels: Mapping[str, int]) -> Node:
        return tuple(int(levels[a]) for a in self.attributes)

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

    def successors(self, index: int) -> Iterator[int]:
        """Direct generalizations: one attribute one level up."""
        node = self.nodes[index]
        for i, stride in enumerate(self.strides):
            if node[i] + 1 < self.levels[i]:
                yield index + int(stride)

    def predecessors(self, index: int) -> Iterator[int]:
        node = self.nodes[index]
        for i, stride in enumerate(self.strides):
            if node[i] > 0:
                yield index - int(stride)


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
