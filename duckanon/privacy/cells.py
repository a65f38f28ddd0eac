"""Equivalence classes as arrays, for checking models in process.

The in-process node evaluator (:mod:`duckanon.search.memory_evaluator`) groups the frequency table's rows into a
node's classes with NumPy and asks each privacy model for its verdicts over a :class:`ClassCells`: the classes'
sizes and, per class, its records per value of one sensitive attribute.  A model's
:meth:`~duckanon.privacy.models.PrivacyModel.cell_violations` must give exactly the verdicts its SQL form
(:meth:`~duckanon.privacy.models.PrivacyModel.class_violations`) gives over the same classes.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class SensitiveValues:
    """One sensitive attribute's distinct values as the evaluator codes them: code ``c`` is the ``c``-th value in the
    engine's ascending order (NULL last, as ``ORDER BY`` puts it), and ``texts[c]`` is that value cast to text (None
    for NULL), as the SQL models compare it with the values they name."""

    texts: tuple[str | None, ...]

    def __len__(self) -> int:
        return len(self.texts)


@dataclass(frozen=True)
class ClassCells:
    """One table's classes and their records per value of one sensitive attribute.

    Cells are sorted by class, then by value code; every class has at least one cell.  ``table_counts`` holds the
    records per value code of the table the classes form (what t-closeness compares a class with): all of a node's
    records, or those kept when dropped records leave it."""

    sizes: np.ndarray         # int64, records per class
    cell_class: np.ndarray    # int64, per cell its class
    cell_value: np.ndarray    # int64, per cell its value code
    cell_count: np.ndarray    # int64, per cell its records
    table_counts: np.ndarray  # int64, per value code its records in the table
    values: SensitiveValues

    @property
    def classes(self) -> int:
        return len(self.sizes)

    def class_starts(self) -> np.ndarray:
        """Per class, the position of its first cell (cells are sorted by class, and every class has one)."""
        return self._starts

    @functools.cached_property
    def _starts(self) -> np.ndarray:
        starts = np.zeros(self.classes, dtype=np.int64)
        np.cumsum(self.distinct()[:-1], out=starts[1:])
        return starts

    def distinct(self) -> np.ndarray:
        """Per class, how many distinct values it holds."""
        return np.bincount(self.cell_class, minlength=self.classes)

    def per_class_sum(self, per_cell: np.ndarray) -> np.ndarray:
        """Per class, the sum of ``per_cell`` over its cells (in the array's own type: integers stay exact)."""
        return np.add.reduceat(per_cell, self.class_starts())

    def per_class_max(self, per_cell: np.ndarray) -> np.ndarray:
        """Per class, the largest of ``per_cell`` over its cells."""
        return np.maximum.reduceat(per_cell, self.class_starts())

    def groups(self, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The cells grouped by class and label, as ``GROUP BY class, label`` groups them: ``labels`` gives each value
        code a group number (values whose SQL label is equal, NULL included, share one).  Returns per cell its group
        and per group its first cell; groups are numbered in class order."""
        width = int(labels.max()) + 1 if len(labels) else 1
        key = self.cell_class * width + labels[self.cell_value]
        if (key[1:] < key[:-1]).any():
            _, first, group = np.unique(key, return_index=True, return_inverse=True)
            return group, first
        # Labels that follow the value order (leaves, most hierarchies) leave the cells sorted by group: no sort.
        opens = np.empty(len(key), dtype=bool)
        opens[:1] = True
        opens[1:] = key[1:] != key[:-1]
        return np.cumsum(opens) - 1, np.flatnonzero(opens)

    def group_sums(self, labels: np.ndarray) -> np.ndarray:
        """Per cell, the records of its class whose values share its label (``SUM(n) OVER (PARTITION BY class,
        label)``); see :meth:`groups`.  Floats, exact for counts below 2**53."""
        group, _ = self.groups(labels)
        return np.bincount(group, weights=self.cell_count)[group]

    def table_shares(self) -> np.ndarray:
        """Per value code, its share of the table's records."""
        total = self.table_counts.sum()
        # A table every record of which was dropped holds no class to compare with it.
        return self.table_counts / total if total else np.zeros(len(self.table_counts))
