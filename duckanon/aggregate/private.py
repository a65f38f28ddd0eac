"""Differentially private aggregates of a source or a release: counts, sums, means and histograms, noised by
OpenDP's mechanisms (the ``dp`` extra), each spending its ε and δ from the source's privacy budget.

DuckDB computes what needs no care (a count, a histogram's counts over public categories) and hands OpenDP what does:
a sum goes through OpenDP's clamp and sum transformations over the column's values, whose sensitivity accounts for
floating-point rounding; the noise (Laplace, or Gaussian at a δ) and its calibration to ε come from OpenDP's
measurements, their privacy maps and its secure sampler.  Neighbouring tables differ by one record, added or removed
(unbounded differential privacy; OpenDP's symmetric distance of 1): a count changes by at most 1, a histogram over
fixed categories by 1 in one bin (L1 and L2 sensitivity 1), a sum clamped to [L, U] by max(|L|, |U|).

- ``count``: the records (a NULL-free column given: its non-NULL values).
- ``histogram``: the records per category of ``column``; ``categories`` must be given (a set of categories read
  from the data would tell which values occur), and records of any other value (NULL included) count in one more
  bin, ``(other)``.
- ``sum``: of ``column`` clamped to ``bounds`` (NULLs left out); ``bounds`` must be given.
- ``mean``: a noisy sum over a noisy count, each with half of ε (and δ), clipped into ``bounds``: the size of the
  table is not public under unbounded differential privacy, so it is estimated too.

Each result row states the noise's scale and its 95 % accuracy (the half-width that holds the noise with probability
0.95, OpenDP's ``*_scale_to_accuracy``).  Nothing here is seeded: OpenDP draws from its own secure generator.
"""

from __future__ import annotations

import inspect
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from sqlglot import exp

from ..declare.budget import ledger_at, source_key
from ..deferred import pandas as pd
from ..encode.binding import Workspace
from ..encode.sources import source_relation
from ..errors import MissingExtra, PolicyError
from ..parameters import checked_number
from ..risk.counting import class_size_histogram
from ..sqlgen import build as sb

STATISTICS = ("count", "sum", "mean", "histogram")
MECHANISMS = ("laplace", "gaussian")
OTHER = "(other)"
# The probability with which the stated accuracy holds.
CONFIDENCE = 0.95


def _opendp():
    try:
        import opendp.prelude as dp
    except ImportError as error:
        raise MissingExtra("differentially private aggregates need OpenDP, duckanon's `dp` extra: "
                           "pip install 'duckanon[dp]'") from error
    dp.enable_features("contrib")
    return dp


@dataclass(frozen=True)
class Query:
    """One aggregate's settings, checked before any work."""

    statistic: str
    column: str | None
    bounds: tuple[float, float] | None
    categories: tuple | None
    epsilon: float
    delta: float
    mechanism: str

    @classmethod
    def checked(cls, statistic: str, column: str | None, bounds: Sequence[float] | None,
                categories: Sequence[object] | None, epsilon: float, delta: float, mechanism: str) -> Query:
        owner = f"differentially private {statistic}"
        if statistic not in STATISTICS:
            raise PolicyError(f"unknown statistic {statistic!r}; known: {', '.join(STATISTICS)}")
        if mechanism not in MECHANISMS:
            raise PolicyError(f"{owner}: mechanism must be one of {', '.join(MECHANISMS)}, got {mechanism!r}")
        epsilon = float(checked_number(epsilon, "epsilon", owner, low=0, low_open=True))
        delta = float(checked_number(delta, "delta", owner, low=0, high=1, high_open=True))
        if mechanism == "gaussian" and delta == 0:
            raise PolicyError(f"{owner}: the gaussian mechanism needs a delta above 0")
        if mechanism == "laplace" and delta != 0:
            raise PolicyError(f"{owner}: the laplace mechanism spends no delta; give delta=0 (or the gaussian "
                              f"mechanism)")
        if statistic in ("sum", "mean", "histogram") and column is None:
            raise PolicyError(f"{owner}: name the column (column=)")
        if statistic in ("sum", "mean"):
            if bounds is None:
                raise PolicyError(f"{owner} of {column!r}: give bounds=(low, high): each value is clamped to them, "
                                  f"which bounds what one record can change")
            if len(bounds) != 2:
                raise PolicyError(f"{owner} of {column!r}: bounds must be (low, high), got {bounds!r}")
            low = checked_number(bounds[0], "the low bound", owner)
            high = checked_number(bounds[1], "the high bound", owner)
            if not low < high:
                raise PolicyError(f"{owner} of {column!r}: bounds must be (low, high) with low < high, got {bounds!r}")
            bounds = (low, high)
        elif bounds is not None:
            raise PolicyError(f"{owner}: bounds are for a sum or a mean")
        if statistic == "histogram":
            if not categories:
                raise PolicyError(f"{owner} of {column!r}: give categories=[…], the public list of its values (a "
                                  f"list read from the data would tell which values occur)")
            if len(set(categories)) != len(categories):
                raise PolicyError(f"{owner} of {column!r}: categories repeat a value")
            categories = tuple(categories)
        elif categories is not None:
            raise PolicyError(f"{owner}: categories are for a histogram")
        return cls(statistic, column, bounds, categories, epsilon, delta, mechanism)

    def describe(self) -> str:
        of = f" of {self.column}" if self.column else ""
        return f"{self.mechanism} {self.statistic}{of} (ε = {self.epsilon:g}, δ = {self.delta:g})"


def aggregate(workspace: Workspace, source, statistic: str, *, epsilon: float, delta: float = 0.0,
              column: str | None = None, bounds: Sequence[float] | None = None,
              categories: Sequence[object] | None = None, mechanism: str = "laplace",
              ledger: str | os.PathLike | None = None, source_name: str | None = None) -> pd.DataFrame:
    """The differentially private ``statistic`` of ``source`` (see the module): one row per value (one, or one per
    category and ``(other)`` for a histogram) with ``value``, the noise's ``scale`` and its 95 % ``accuracy``.  Its ε
    and δ are spent from the source's privacy budget first (the database's ledger, or the file ``ledger``;
    ``source_name`` names the source there, by default :func:`~duckanon.declare.budget.source_key`)."""
    query = Query.checked(statistic, column, bounds, categories, epsilon, delta, mechanism)
    dp = _opendp()
    engine = workspace.engine
    relation = source_relation(engine, source)
    if column is not None and column not in engine.columns(relation):
        raise PolicyError(f"the source has no column {column!r}; it has {engine.columns(relation)}")
    numeric = column is not None and statistic in ("sum", "mean")
    integral = numeric and _integral(engine, relation, column)
    if numeric and not integral and not _numeric(engine, relation, column):
        raise PolicyError(f"differentially private {statistic} of {column!r}: the column is not numeric")
    with ledger_at(engine, ledger) as book:
        book.spend(source_key(source) if source_name is None else source_name, query.epsilon, query.delta,
                   query.describe(), None)
    if statistic == "count":
        counted = int(engine.value(_count(relation, column)))
        return _rows(dp, query, [None], np.array([counted]), _counting(dp, query, 1, query.epsilon, query.delta))
    if statistic == "histogram":
        counts = _histogram(engine, relation, column, query.categories)
        return _rows(dp, query, [*query.categories, OTHER], counts,
                     _counting(dp, query, len(counts), query.epsilon, query.delta))
    values = engine.arrays(exp.select(sb.col(column)).from_(relation).where(sb.col(column).is_(exp.null()).not_())
                           )[column]
    if statistic == "sum":
        noisy, scale = _noisy_sum(dp, query, values, integral, query.epsilon, query.delta)
        return _frame(query, [None], [noisy], [scale], [_accuracy(dp, query, scale, integral)])
    half_epsilon, half_delta = query.epsilon / 2, query.delta / 2
    total, sum_scale = _noisy_sum(dp, query, values, integral, half_epsilon, half_delta)
    count_noise = _counting(dp, query, 1, half_epsilon, half_delta)
    records = max(float(count_noise[0](np.array([len(values)]))[0]), 1.0)
    low, high = query.bounds
    mean = min(max(total / records, low), high)
    return _frame(query, [None], [mean], [sum_scale], [math.nan]).assign(
        noisy_sum=total, noisy_count=records, count_scale=count_noise[1])


def class_size_counts(workspace: Workspace, relation: exp.Expression, keys: Sequence[str],
                      buckets: Mapping[str, tuple[int, int | None]], epsilon: float, source_name: str,
                      ledger: str | os.PathLike | None = None) -> pd.DataFrame:
    """The number of classes over ``keys`` whose size falls in each of ``buckets`` (a name to (low, high), high None:
    no bound), with Laplace noise at ``epsilon`` (spent from ``source_name``'s budget): one record added or removed
    makes a class, or moves one class to a neighbouring bucket, so the counts change by at most 2 in total."""
    query = Query.checked("histogram", "class size", None, list(buckets), epsilon, 0.0, "laplace")
    dp = _opendp()
    with ledger_at(workspace.engine, ledger) as book:
        book.spend(source_name, query.epsilon, 0.0, f"laplace histogram of class sizes over {', '.join(keys)} "
                                                    f"(ε = {query.epsilon:g})", None)
    sizes, classes = class_size_histogram(workspace.engine, relation, keys)
    largest = int(sizes.max(initial=0))
    counts = np.array([int(classes[(sizes >= low) & (sizes <= (largest if high is None else high))].sum())
                       for low, high in buckets.values()], dtype=np.int64)
    noise, scale = _counting(dp, query, len(buckets), query.epsilon, 0.0, sensitivity=2)
    return pd.DataFrame({"bucket": list(buckets), "classes": noise(counts), "scale": scale,
                         "accuracy": _accuracy(dp, query, scale, integral=True)})


def _integral(engine, relation: exp.Expression, column: str) -> bool:
    kind = engine.types(relation)[column].upper()
    return any(kind.startswith(t) for t in ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "UTINYINT", "USMALLINT",
                                            "UINTEGER", "UBIGINT", "INT", "LONG", "SHORT", "BYTE"))


def _numeric(engine, relation: exp.Expression, column: str) -> bool:
    kind = engine.types(relation)[column].upper()
    return any(kind.startswith(t) for t in ("FLOAT", "DOUBLE", "REAL", "DECIMAL", "HUGEINT", "NUMERIC"))


def _count(relation: exp.Expression, column: str | None) -> exp.Select:
    counted = exp.Star() if column is None else sb.col(column)
    return exp.select(exp.func("COUNT", counted)).from_(relation)


def _histogram(engine, relation: exp.Expression, column: str, categories: Sequence[object]) -> np.ndarray:
    """Per category, then for every other value (NULL too), the records: one GROUP BY."""
    rows = dict(engine.rows(exp.select(exp.cast(sb.col(column), "VARCHAR"), exp.func("COUNT", exp.Star()))
                            .from_(relation).group_by(exp.cast(sb.col(column), "VARCHAR"))))
    named = [str(c) for c in categories]
    counts = [int(rows.pop(c, 0)) for c in named]
    return np.array([*counts, int(sum(rows.values()))], dtype=np.int64)


def _counting(dp, query: Query, size: int, epsilon: float, delta: float, sensitivity: int = 1):
    """The OpenDP measurement that noises ``size`` counts at (``epsilon``, ``delta``) when one record changes them by
    at most ``sensitivity`` in total (L1; it bounds their L2 change too), its scale found by OpenDP's binary search;
    (a function of the counts, the scale)."""
    domain = dp.vector_domain(dp.atom_domain(T=int), size=size)
    distance = dp.l1_distance(T=int) if query.mechanism == "laplace" else dp.l2_distance(T=int)
    measurement, scale = _calibrated(dp, query, lambda scale: (domain, distance), None, sensitivity, epsilon, delta)
    return (lambda counts: np.asarray(measurement(np.asarray(counts, dtype=np.int64).tolist()))), scale


def _calibrated(dp, query: Query, space, before, sensitivity: int, epsilon: float, delta: float):
    """The noise of ``query``'s mechanism after the transformation ``before`` (None: none) over ``space(scale)``'s
    domain and metric, at the smallest scale OpenDP's privacy map puts within (``epsilon``, ``delta``) for inputs
    ``sensitivity`` apart; (the measurement, its scale)."""
    def make(scale: float):
        noise = (dp.m.make_laplace if query.mechanism == "laplace" else dp.m.make_gaussian)(*space(scale), scale)
        chained = noise if before is None else before >> noise
        if query.mechanism == "laplace":
            return chained
        return dp.c.make_fix_delta(dp.c.make_zCDP_to_approxDP(chained), delta)

    target = epsilon if query.mechanism == "laplace" else (epsilon, delta)
    scale = float(dp.binary_search_param(make, d_in=sensitivity, d_out=target))
    return make(scale), scale


def _noisy_sum(dp, query: Query, values: np.ndarray, integral: bool, epsilon: float, delta: float
               ) -> tuple[float, float]:
    """The clamped sum of ``values`` through OpenDP's clamp, sum and noise, at (``epsilon``, ``delta``)."""
    low, high = query.bounds
    bounds = (math.floor(low), math.ceil(high)) if integral else (float(low), float(high))
    space = (dp.vector_domain(dp.atom_domain(T=int) if integral else _numbers(dp)), dp.symmetric_distance())
    summed = dp.t.make_clamp(*space, bounds) >> dp.t.make_sum(dp.vector_domain(dp.atom_domain(bounds=bounds)),
                                                               dp.symmetric_distance())
    measurement, scale = _calibrated(dp, query, lambda scale: (summed.output_domain, summed.output_metric), summed,
                                     1, epsilon, delta)
    data = np.asarray(values, dtype=np.int64 if integral else np.float64).tolist()
    return float(measurement(data)), scale


def _numbers(dp):
    """OpenDP's domain of floats without NaN (its ``nan=False``; before 0.14 its default, ``nullable=False``)."""
    if "nan" in inspect.signature(dp.atom_domain).parameters:
        return dp.atom_domain(T=float, nan=False)
    return dp.atom_domain(T=float)


def _accuracy(dp, query: Query, scale: float, integral: bool) -> float:
    """The half-width that holds the noise with probability :data:`CONFIDENCE`."""
    alpha = 1 - CONFIDENCE
    if query.mechanism == "laplace":
        convert = dp.discrete_laplacian_scale_to_accuracy if integral else dp.laplacian_scale_to_accuracy
    else:
        convert = dp.discrete_gaussian_scale_to_accuracy if integral else dp.gaussian_scale_to_accuracy
    return float(convert(scale, alpha))


def _rows(dp, query: Query, labels: list, counts: np.ndarray, noise) -> pd.DataFrame:
    noisy, scale = noise[0](counts), noise[1]
    accuracy = _accuracy(dp, query, scale, integral=True)
    return _frame(query, labels, list(noisy), [scale] * len(labels), [accuracy] * len(labels))


def _frame(query: Query, labels: list, values: list, scales: list, accuracies: list) -> pd.DataFrame:
    frame = pd.DataFrame({"value": values, "scale": scales, "accuracy": accuracies})
    if query.statistic == "histogram":
        frame.insert(0, query.column, labels)
    return frame
