"""What share of its domain a generalized value stands for, as ARX measures it (``DomainShareMaterialized``,
``DomainShareInterval``): the entropy-based information loss and ambiguity metrics sum it over records, and the
profitability models price each class by it."""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping

from ..deferred import is_missing
from .hierarchy import Hierarchy, IntervalHierarchy


def domain_share(hierarchy: Hierarchy, level: int, label: str | None, leaves: Mapping[str | None, int]) -> float:
    """ARX's domain share of a generalized value (``DomainShareMaterialized``, ``DomainShareInterval``): the hierarchy
    rows it covers over all rows, or its interval's width over the domain's; an original value (or NULL, which stays
    NULL) counts as one row, or 1 over the domain's width; ``*`` is 1."""
    if isinstance(hierarchy, IntervalHierarchy):
        low, high = hierarchy.cuts[0][0], hierarchy.cuts[0][-1]
        if level == hierarchy.height:
            return 1.0
        if level == 0 or is_missing(label):
            return 1.0 / (high - low)
        lo, hi = hierarchy.interval(level, label)
        return (hi - lo) / (high - low)
    return row_share(hierarchy, level, label, leaves)


def row_share(hierarchy: Hierarchy, level: int, label: str | None, leaves: Mapping[str | None, int]) -> float:
    """ARX's ``DomainShareMaterialized`` of a generalized value: the hierarchy rows it covers over all rows; an
    original value (or NULL, which stays NULL) counts as one row."""
    if level == 0 or is_missing(label):
        return 1.0 / len(hierarchy.rows)
    return leaves.get(label, 1) / len(hierarchy.rows)


def log_domain_shares(hierarchy: Hierarchy, level: int, labels: Iterable[str | None]) -> list[float]:
    """log10 of each label's :func:`domain_share` on ``level``.  Taken with ``math.log10`` one value at a time, so that
    every caller gets the very same numbers (NumPy's vectorized logarithm may round the last bit otherwise)."""
    leaves = hierarchy.leaves_under(level)
    return [math.log10(domain_share(hierarchy, level, label, leaves)) for label in labels]


def log_domain_size(hierarchy: Hierarchy) -> float:
    """log10 of the domain's size as ARX's domain shares count it (its rows, or its interval's width): minus the log10
    share of an original value."""
    return -log_domain_shares(hierarchy, 0, [None])[0]
