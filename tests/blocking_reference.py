"""Blocks of records as :mod:`duckanon.cluster.blocking` defines them, cut by a plain reading of the definition
(the MDAV and seed 001 tests hold the clusterings' blocks to it)."""

from __future__ import annotations

import numpy as np


def textbook_blocks(points: np.ndarray, size: int, least: int, stands=None) -> list[set[int]]:
    """Halve any block larger than ``size`` along its attribute of widest interquartile range (widest range when all
    are 0), between different values nearest the median with ``least`` records on each side, else at the median (ties
    by row).  With ``stands`` (given a part's rows), only places where it accepts both parts count, the median
    included; an attribute with none gives way to the one of next widest spread, and a block none can cut stays
    whole."""
    def cut(rows):
        if len(rows) <= size:
            return [set(rows)]
        iqr = [float(np.subtract(*np.percentile([points[r, j] for r in rows], [75, 25])))
               for j in range(points.shape[1])]
        if not any(iqr):
            iqr = [max(points[r, j] for r in rows) - min(points[r, j] for r in rows) for j in range(points.shape[1])]
        for column in sorted(range(len(iqr)), key=lambda j: (-iqr[j], j)):  # widest first, ties: the first
            ordered = sorted(rows, key=lambda r: (points[r, column], r))

            def allowed(i, ordered=ordered):
                return stands is None or (stands(ordered[:i]) and stands(ordered[i:]))

            middle = len(ordered) // 2
            between = [i for i in range(least, len(ordered) - least + 1)
                       if points[ordered[i - 1], column] != points[ordered[i], column] and allowed(i)]
            if between:
                at = min(between, key=lambda i: (abs(i - middle), i))
            elif allowed(middle):
                at = middle
            else:
                continue
            return cut(ordered[:at]) + cut(ordered[at:])
        return [set(rows)]
    return cut(list(range(len(points))))
