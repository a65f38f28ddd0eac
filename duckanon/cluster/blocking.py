"""Cutting records into blocks a quadratic clustering can afford, k-d-tree fashion.

A block holding more than ``size`` records is halved along its attribute of widest interquartile range, between two
different values nearest its median (``least`` records at least on each side; at the median itself where no such
place is), until every block holds at most ``size``.  A clustering then runs within each block: the work is n ·
``size`` instead of n², and its groups never span a cut.  MDAV and seed 001's clustering block this way
(``benchmarks/bench_blocking.py`` measures what it costs them on Adult).
"""

from __future__ import annotations

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


def record_blocks(points: np.ndarray, block_size: int | None, k: int) -> list[np.ndarray]:
    """The rows of ``points`` in :func:`blocks` of at most ``block_size`` (a quarter of a block at least on each side
    of a cut, and k); one block of every row when ``block_size`` is None or holds them all."""
    if block_size is None or len(points) <= block_size:
        return [np.arange(len(points))]
    return blocks(points, block_size, least=max(k, block_size // 4))


def blocks(points: np.ndarray, size: int, least: int = 1) -> list[np.ndarray]:
    """The rows of ``points`` cut into blocks of at most ``size`` rows: a larger block is halved along its column of
    widest interquartile range (of widest range when every one is 0), at :func:`_cut`, which leaves ``least`` rows on
    each side; in the cuts' order."""
    pending, done = [np.arange(len(points))], []
    while pending:
        rows = pending.pop()
        if len(rows) <= size:
            done.append(rows)
            continue
        values = points[rows]
        # The interquartile range, not the range: an attribute of a few outliers (capital gains, mostly 0) would be
        # cut among its equal values, by row, parting neighbours.
        quartiles = np.percentile(values, [25, 75], axis=0)
        spread = quartiles[1] - quartiles[0]
        column = int(np.argmax(spread if spread.any() else values.max(axis=0) - values.min(axis=0)))
        order = np.lexsort((rows, values[:, column]))
        ordered, cut = rows[order], _cut(values[order, column], least)
        pending += [ordered[cut:], ordered[:cut]]
    return done


def _cut(sorted_values: np.ndarray, least: int) -> int:
    """Where to halve a block whose values of the cut attribute are ``sorted_values``: between two different values,
    the nearest such place to the median that leaves ``least`` rows on each side; at the median itself (parting
    equal values by row) where none does."""
    middle = len(sorted_values) // 2
    places = np.flatnonzero(sorted_values[1:] != sorted_values[:-1]) + 1
    places = places[(places >= least) & (places <= len(sorted_values) - least)]
    return middle if not len(places) else int(places[np.argmin(np.abs(places - middle))])
