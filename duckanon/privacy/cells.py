"""Equivalence classes as arrays, for checking models in process.

The in-process node evaluator (:mod:`duckanon.search.memory_evaluator`) groups the frequency table's rows into a
node's classes with NumPy and asks each privacy model for its verdicts over a :class:`ClassCells`: the classes'
sizes and, per class, its records per value of one sensitive attribute.  A model's
:meth:`~duckanon.privacy.models.PrivacyModel.cell_violations` must give exactly the verdicts its SQL form
(:meth:`~duckanon.privacy.models.PrivacyModel.class_violations`) gives over the same classes.
"""

from __future__ import annotations

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
        """Per class, the position of its first cell (cells are sorted by class)."""
        return np.searchsorted(self.cell_class, np.arange(self.classes))

    def distinct(self) -> np.ndarray:
        """Per class, how many distinct values it holds."""
        return np.bincount(self.cell_class, minlength=self.classes)
