"""Cutting records into blocks a quadratic clustering can afford, k-d-tree fashion.

A block holding more than ``size`` records is halved along its attribute of widest interquartile range, between two
different values nearest its median (``least`` records at least on each side; at the median itself where no such
place is), until every block holds at most ``size``.  A clustering then runs within each block: the work is n ·
``size`` instead of n², and its groups never span a cut.  MDAV and seed 001's clustering block this way
(``benchmarks/bench_blocking.py`` measures what it costs them on Adult).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..errors import PolicyError
from ..parameters import checked_number


def checked_block_size(block_size: int | None, method: str) -> int | None:
    """``block_size`` (None: exact at any size) checked for ``method``'s name."""
    return None if block_size is None else checked_number(block_size, "block_size", method, whole=True, low=2)


def require_two_groups(block_size: int | None, records: int, k: int, method: str) -> None:
    """Refuse a ``block_size`` that cuts ``records`` into halves too small for a group of k each."""
    if block_size is not None and records > block_size and block_size < 2 * k:
        raise PolicyError(f"{method}: block_size {block_size} is below 2k = {2 * k}: a block's halves could not "
                          f"each hold a group of k records")


def record_blocks(points: np.ndarray, block_size: int | None, k: int,
                  splits: Callable[[np.ndarray], np.ndarray] | None = None) -> list[np.ndarray]:
    """The rows of ``points`` in :func:`blocks` of at most ``block_size`` (a quarter of a block at least on each side
    of a cut, and k; cut only where ``splits`` allows); one block of every row when ``block_size`` is None or holds
    them all."""
    if block_size is None or len(points) <= block_size:
        return [np.arange(len(points))]
    return blocks(points, block_size, least=max(k, block_size // 4), splits=splits)


def blocks(points: np.ndarray, size: int, least: int = 1,
           splits: Callable[[np.ndarray], np.ndarray] | None = None) -> list[np.ndarray]:
    """The rows of ``points`` cut into blocks of at most ``size`` rows: a larger block is halved along its column of
    widest interquartile range (of widest range when every one is 0), at :func:`_cut`, which leaves ``least`` rows on
    each side; in the cuts' order.

    ``splits``, given a block's rows in the order of a column, says at which of the positions 0 … len(rows) the block
    may be cut (a clustering that keeps shares of values, seed 001's α, cannot within a part that breaks them as a
    whole).  A cut is then the allowed place nearest the median; where a column allows none, the column of next
    widest spread is tried, and a block no column allows a cut of stays whole whatever its size."""
    pending, done = [np.arange(len(points))], []
    while pending:
        rows = pending.pop()
        halves = None if len(rows) <= size else _halves(points, rows, least, splits)
        if halves is None:
            done.append(rows)
        else:
            pending += halves
    return done


def _halves(points: np.ndarray, rows: np.ndarray, least: int, splits: Callable[[np.ndarray], np.ndarray] | None
            ) -> list[np.ndarray] | None:
    """``rows`` halved along the column of widest spread that allows a cut (upper half first), or None."""
    values = points[rows]
    # The interquartile range, not the range: an attribute of a few outliers (capital gains, mostly 0) would be cut
    # among its equal values, by row, parting neighbours.
    quartiles = np.percentile(values, [25, 75], axis=0)
    spread = quartiles[1] - quartiles[0]
    spread = spread if spread.any() else values.max(axis=0) - values.min(axis=0)
    for column in np.argsort(-spread, kind="stable"):
        order = np.lexsort((rows, values[:, column]))
        ordered = rows[order]
        cut = _cut(values[order, column], least, None if splits is None else splits(ordered))
        if cut is not None:
            return [ordered[cut:], ordered[:cut]]
    return None


def _cut(sorted_values: np.ndarray, least: int, allowed: np.ndarray | None = None) -> int | None:
    """Where to halve a block whose values of the cut attribute are ``sorted_values``: between two different values,
    the nearest such place to the median that leaves ``least`` rows on each side (and that ``allowed``, a mask over
    the places 0 … len, allows); else at the median itself, parting equal values by row, where allowed; else None."""
    middle = len(sorted_values) // 2
    places = np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1
    places = places[(places >= least) & (places <= len(sorted_values) - least)]
    if allowed is not None:
        places = places[allowed[places]]
    if len(places):
        return int(places[np.argmin(np.abs(places - middle))])
    return middle if allowed is None or allowed[middle] else None
