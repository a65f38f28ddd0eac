"""How one attribute's values are distributed, in a source and in its release: records per value, counted in SQL.

A release shows generalized labels (``[20, 40)``, ``*``) or, after perturbation, new numbers; the source its original
values.  Each side is counted on its own (a release is a separate file, not joined to its source).  A numeric column
with more distinct values than a chart can show is counted in equal-width bins; the source's bins are also used for a
numeric release column, so perturbed and original numbers compare bin by bin.  Text columns keep their most frequent
values and pool the rest.
"""

from __future__ import annotations

import math
import sys
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import Engine
from ..sqlgen import build as sb

# Beyond this many distinct values a chart is unreadable: numbers are binned, text pooled.
MOST_VALUES = 24
OTHERS = "(other values)"
MISSING = "(missing)"


def _bin(value: float, width: float) -> int:
    """The bin of ``value`` counted from 0, ``floor(value / width)``; a negative value whose quotient underflows to
    -0 still falls in bin -1."""
    position = math.floor(value / width)
    return position - 1 if position * width > value else position


@dataclass(frozen=True)
class Bins:
    """``count`` bins of a round ``width`` from ``low`` (a multiple of it): [low, low + width), ...; values beyond the
    last bin fall in it, below the first in the first."""

    low: float
    width: float
    count: int

    @classmethod
    def covering(cls, low: float, high: float, most: int = MOST_VALUES) -> Bins:
        """The fewest bins of a round width (1, 2 or 5 times a power of ten) covering [low, high], at most ``most``."""
        if high <= low:  # one value: one bin of the value's own magnitude
            width = 10.0 ** math.floor(math.log10(abs(low))) if low else 1.0
            if not width:  # a subnormal value: its magnitude underflows to 0
                width = 1.0
            return cls(math.floor(low / width) * width, width, 1)
        # A span of subnormal numbers divided by ``most`` may underflow to 0: the smallest normal float bounds it.
        exponent = math.floor(math.log10(max((high - low) / most, sys.float_info.min)))
        for power in (exponent, exponent + 1, exponent + 2):
            for step in (1, 2, 5):
                width = step * 10.0 ** power
                count = math.floor(high / width) - _bin(low, width) + 1
                if count <= most:
                    return cls(_bin(low, width) * width, width, count)
        raise AssertionError("unreachable: a width of a hundred times the span/most needs one or two bins")

    def labels(self) -> list[str]:
        edges = [self.low + i * self.width for i in range(self.count + 1)]
        text = [f"{edge:.10g}" for edge in edges]
        return [f"[{a}, {b})" for a, b in zip(text, text[1:])]

    def index(self, value: exp.Expression) -> exp.Expression:
        """The bin of ``value`` in SQL."""
        position = exp.func("FLOOR", (sb.as_double(value) - sb.lit(self.low)) / sb.lit(self.width))
        return exp.func("LEAST", exp.func("GREATEST", exp.cast(position, exp.DataType.build("BIGINT")), sb.lit(0)),
                        sb.lit(self.count - 1))


def is_numeric(engine: Engine, relation: exp.Expression, column: str) -> bool:
    return sb.is_numeric_type(engine.types(relation)[column])


def bins_for(engine: Engine, relation: exp.Expression, column: str, most: int = MOST_VALUES) -> Bins | None:
    """Bins for a numeric column with more than ``most`` distinct values (None when its values fit a chart)."""
    value = sb.col(column)
    low, high, distinct = engine.rows(exp.select(exp.func("MIN", sb.as_double(value)),
                                                 exp.func("MAX", sb.as_double(value)),
                                                 exp.func("COUNT", exp.Distinct(expressions=[value])))
                                      .from_(_from(relation)))[0]
    if low is None or distinct <= most:
        return None
    return Bins.covering(float(low), float(high), most)


def value_counts(engine: Engine, relation: exp.Expression, column: str, *, bins: Bins | None = None,
                 most: int = MOST_VALUES) -> pd.DataFrame:
    """Records per value of ``column`` (columns ``value``, text, and ``records``): per bin of ``bins`` when given
    (every bin listed, empty ones at 0, in order), else per value in value order with the ``most`` - 1 most frequent
    kept and the rest pooled as ``(other values)``; NULL shows as ``(missing)``."""
    source = _from(relation)
    value, records = sb.col(column), exp.func("COUNT", exp.Star())
    if bins is not None:
        key = exp.Case().when(value.is_(exp.Null()), sb.lit(-1)).else_(bins.index(value))
        counted = dict(engine.rows(exp.select(key.as_("bin"), records).from_(source).group_by(key)))
        labels = bins.labels()
        frame = pd.DataFrame({"value": labels, "records": [int(counted.get(i, 0)) for i in range(len(labels))]})
        if counted.get(-1):
            frame.loc[len(frame)] = [MISSING, int(counted[-1])]
        return frame
    rows = engine.rows(exp.select(value, records.as_("records")).from_(source).group_by(value).order_by(value))
    frame = pd.DataFrame({"value": [MISSING if v is None else str(v) for v, _ in rows],
                          "records": [int(n) for _, n in rows]})
    if len(frame) > most:
        kept = frame.nlargest(most - 1, "records", keep="first").sort_index()
        pooled = int(frame["records"].sum() - kept["records"].sum())
        frame = pd.concat([kept, pd.DataFrame({"value": [OTHERS], "records": [pooled]})], ignore_index=True)
    return frame.reset_index(drop=True)


def spread_counts(engine: Engine, relation: exp.Expression, low: str, high: str, bins: Bins, *,
                  whole: bool) -> pd.DataFrame:
    """Records per bin when each record stands for a range ``low <= value <= high`` of its own (a generalized number
    released with its bounds): a record's weight is spread evenly over its range, so a bin gets the share of the
    range it covers (``whole``: whole numbers, the range being ``[low, high + 1)``).  Columns ``value`` (the bins'
    labels) and ``records`` (fractions); records without bounds (suppressed, ``*``) are left out."""
    lo, hi = sb.as_double(sb.col(low)), sb.as_double(sb.col(high))
    end = hi + sb.lit(1) if whole else hi
    edges = [(i, bins.low + i * bins.width, bins.low + (i + 1) * bins.width) for i in range(bins.count)]
    branches = []
    for i, left, right in edges:
        overlap = exp.func("GREATEST", sb.lit(0), exp.func("LEAST", end.copy(), sb.lit(right))
                           - exp.func("GREATEST", lo.copy(), sb.lit(left)))
        # A range of one point (a float range low = high) falls wholly in the bin holding it.
        point = exp.Case().when(exp.and_(lo.copy() >= sb.lit(left), lo.copy() < sb.lit(right)), sb.lit(1.0)) \
            .else_(sb.lit(0.0))
        share = exp.Case().when(end.copy() > lo.copy(), overlap / (end.copy() - lo.copy())).else_(point)
        branches.append(exp.func("SUM", share).as_(f"b{i}"))
    known = exp.and_(sb.col(low).is_(exp.Null()).not_(), sb.col(high).is_(exp.Null()).not_())
    row = engine.rows(exp.select(*branches).from_(_from(relation)).where(known))[0]
    return pd.DataFrame({"value": bins.labels(), "records": [float(v or 0.0) for v in row]})


@dataclass(frozen=True)
class Comparison:
    """One attribute's distribution in the source and in the release, with the figures that summarize the change.

    ``aligned``: both sides are counted over the same categories (bins or the release's labels), in the same order,
    so the two compare bar by bar and :attr:`total_variation` is defined.  ``withheld_below``: source counts from 1 to
    this minus 1 are withheld (NaN), as statistical offices suppress small cells; None when nothing is withheld."""

    attribute: str
    original: pd.DataFrame  # value, records
    released: pd.DataFrame  # value, records
    aligned: bool
    original_distinct: int
    released_distinct: int
    total_variation: float | None = None
    withheld_below: int | None = None
    how: str = ""  # how the source side was counted, for the reader

    @staticmethod
    def distance(original: Sequence[float], released: Sequence[float]) -> float:
        """Half the L1 distance between two distributions over the same categories (counts, normalized here)."""
        p, q = np.asarray(original, dtype=float), np.asarray(released, dtype=float)
        size = max(len(p), len(q))
        p, q = np.pad(p, (0, size - len(p))), np.pad(q, (0, size - len(q)))
        return float(0.5 * np.abs(p / max(p.sum(), 1) - q / max(q.sum(), 1)).sum())


def compare(original_engine: Engine, original: exp.Expression, released_engine: Engine, released: exp.Expression,
            attribute: str) -> Comparison:
    """``attribute`` counted in the source (``original`` read by ``original_engine``) and in the release, the source
    by its own values: what only the custodian may see."""
    numbers = is_numeric(original_engine, original, attribute)
    bins = bins_for(original_engine, original, attribute) if numbers else None
    shared = None  # the bins both sides are counted over, where both hold numbers
    if numbers and is_numeric(released_engine, released, attribute):
        shared = bins or _covering_bins(original_engine, original, released_engine, released, attribute)
    original_counts = value_counts(original_engine, original, attribute, bins=shared or bins)
    released_counts = value_counts(released_engine, released, attribute, bins=shared)
    distance = (Comparison.distance(original_counts["records"], released_counts["records"])
                if shared is not None else None)
    return Comparison(attribute, original_counts, released_counts, aligned=shared is not None,
                      original_distinct=distinct_values(original_engine, original, attribute),
                      released_distinct=distinct_values(released_engine, released, attribute),
                      total_variation=distance, how="the source's own values")


def _covering_bins(original_engine: Engine, original: exp.Expression, released_engine: Engine,
                   released: exp.Expression, attribute: str) -> Bins | None:
    """Bins over both sides' range, for numbers with few distinct values in the source but new ones in the release."""
    spans = [engine.rows(exp.select(exp.func("MIN", sb.as_double(sb.col(attribute))),
                                    exp.func("MAX", sb.as_double(sb.col(attribute)))).from_(_from(relation)))[0]
             for engine, relation in ((original_engine, original), (released_engine, released))]
    lows = [s[0] for s in spans if s[0] is not None]
    highs = [s[1] for s in spans if s[1] is not None]
    if not lows:
        return None
    return Bins.covering(float(min(lows)), float(max(highs)))


def _from(relation: exp.Expression) -> exp.Expression:
    return relation.subquery("r") if isinstance(relation, exp.Select) else relation


def distinct_values(engine: Engine, relation: exp.Expression, column: str) -> int:
    return int(engine.value(exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(column)])))
                            .from_(_from(relation))))
