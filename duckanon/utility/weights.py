"""Utility weights of quasi-identifiers: how much each attribute's information loss should count.

A weighted information-loss measure sums ``w_i · Loss(X_i)`` over the quasi-identifiers ``X_i``; the larger ``w_i``,
the less a search for the best generalization is willing to coarsen ``X_i``.  Three ways to set the weights:

- ``uniform``: every attribute weighs ``1/q`` (Iyengar's Loss).
- ``entropy``: ``H(X_i)`` normalized to sum 1 (Entropy Loss): attributes carrying more information weigh more.
- ``mutual-information``: ``MI(Y, X_i) = H(Y) − H(Y|X_i)`` with the class label ``Y``, normalized to sum 1
  (Gu & Dong's MI Loss, Computer Engineering 48(4), 2022, formulas 1–4): attributes that tell more about the label
  weigh more, so a classifier trained on the release keeps what it needs.

Entropies and mutual information are computed in bits (log base 2); the normalization makes the base irrelevant to
the weights.  NULL is a value of its own, as in GROUP BY.
"""

from __future__ import annotations

from collections.abc import Sequence

import duckdb
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import Engine, as_engine
from ..errors import AnonymizationError, PolicyError
from ..sqlgen import build as sb

KINDS = ("uniform", "entropy", "mutual-information")
POSITION = "attribute_position"
RECORDS = "records"
SCORE = "score"
LABEL_CONSTANT = "label_constant"


def attribute_weights(database: Engine | duckdb.DuckDBPyConnection, source: exp.Expression | str, attributes: Sequence[str], *,
                      kind: str, label: str | None = None) -> pd.DataFrame:
    """Weights of ``attributes`` of ``source`` (a table name, or a sqlglot table or query), one row per attribute in
    the order given: ``attribute``, ``score`` (1 for ``uniform``; ``H(X_i)`` for ``entropy``; ``MI(Y, X_i)`` with
    ``Y`` = ``label`` for ``mutual-information``, both in bits) and ``weight`` (the scores normalized to sum 1).

    ``label`` is used only by ``mutual-information``, which needs it.  Raises PolicyError for an unknown kind, a
    missing or constant label, columns the source lacks, and scores that are all zero (nothing to normalize).
    """
    if kind not in KINDS:
        raise PolicyError(f"unknown weight kind {kind!r}; the kinds are {', '.join(map(repr, KINDS))}")
    engine = as_engine(database)
    relation = _relation(source)
    columns = _source_columns(engine, relation)
    attributes = _checked_attributes(attributes, columns)
    if kind == "uniform":
        scores = [1.0] * len(attributes)
    elif kind == "entropy":
        scores = _entropies(engine, relation, attributes)
    else:
        scores = _mutual_informations(engine, relation, attributes, _checked_label(label, attributes, columns))
    total = sum(scores)
    if total <= 0:
        measure = "entropy" if kind == "entropy" else f"mutual information with {label!r}"
        raise PolicyError(f"every attribute's {measure} is zero ({', '.join(map(repr, attributes))}), so there is "
                          f"nothing to weigh them by; use kind='uniform'")
    return pd.DataFrame({"attribute": attributes, SCORE: scores, "weight": [s / total for s in scores]})


def _relation(source: exp.Expression | str) -> exp.Expression:
    if isinstance(source, str):
        return sb.table(source)
    if isinstance(source, exp.Query):
        return source.subquery("weighted_source")
    if isinstance(source, exp.Expression):
        return source
    raise PolicyError(f"source must be a table name or a sqlglot expression, got {type(source).__name__}")


def _source_columns(engine: Engine, relation: exp.Expression) -> list[str]:
    try:
        return engine.columns(exp.select(exp.Star()).from_(relation))
    except engine.catalog_errors as error:
        raise AnonymizationError(f"cannot read the source {sb.to_sql(relation)}: {error}") from error


def _checked_attributes(attributes: Sequence[str], columns: list[str]) -> list[str]:
    if isinstance(attributes, str):
        raise PolicyError(f"attributes must be a list of column names, got the string {attributes!r}")
    attributes = list(attributes)
    if not attributes:
        raise PolicyError("attributes is empty: name at least one column to weigh")
    not_names = [a for a in attributes if not isinstance(a, str)]
    if not_names:
        raise PolicyError(f"attributes must be column names (strings), got {not_names!r}")
    repeated = sorted({a for a in attributes if attributes.count(a) > 1})
    if repeated:
        raise PolicyError(f"attributes lists these columns more than once: {repeated!r}")
    unknown = [a for a in attributes if a not in columns]
    if unknown:
        raise PolicyError(f"attributes not in the source: {unknown!r}; its columns are {columns!r}")
    return attributes


def _checked_label(label: str | None, attributes: list[str], columns: list[str]) -> str:
    if label is None:
        raise PolicyError("kind='mutual-information' needs label=<the class label column>")
    if label not in columns:
        raise PolicyError(f"label {label!r} is not a column of the source; its columns are {columns!r}")
    if label in attributes:
        raise PolicyError(f"label {label!r} is also listed among the attributes; its mutual information with "
                          f"itself is its entropy, which says nothing about how useful it is")
    return label


def _require_records(relation: exp.Expression, rows: list[tuple]) -> None:
    if not rows:
        raise AnonymizationError(f"the source {sb.to_sql(relation)} is empty: there is nothing to weigh")


def _set_position(attributes: list[str]) -> exp.Expression:
    """Which grouping set a row of ``GROUP BY GROUPING SETS`` comes from: the position of the one attribute it groups
    by.  GROUPING() tells a grouped-out column from a NULL value, so NULL stays a value of its own."""
    return exp.Case(ifs=[exp.If(this=exp.func("GROUPING", sb.col(a)).eq(0), true=sb.lit(i))
                         for i, a in enumerate(attributes)])


def _log2(value: exp.Expression) -> exp.Expression:
    return exp.Log(this=sb.lit(2), expression=value)


def _share(part: exp.Expression, whole: exp.Expression) -> exp.Expression:
    return exp.paren(exp.Div(this=sb.as_double(part), expression=sb.as_double(whole)))


def _in_order(rows: list[tuple], count: int) -> list[float]:
    by_position = {position: score for position, score, *_ in rows}
    return [by_position[i] for i in range(count)]


def _entropies(engine: Engine, relation: exp.Expression, attributes: list[str]) -> list[float]:
    """``H(X_i) = −Σ_x p(x) log2 p(x)`` for every attribute, from one scan grouping by each attribute on its own."""
    counts = (exp.select(_set_position(attributes).as_(POSITION), exp.func("COUNT", exp.Star()).as_("n"))
              .from_(relation)
              .group_by(exp.GroupingSets(expressions=[exp.Tuple(expressions=[sb.col(a)]) for a in attributes])))
    total = exp.Window(this=exp.func("SUM", sb.col("n")), partition_by=[sb.col(POSITION)])
    shares = exp.select(sb.col(POSITION), _share(sb.col("n"), total).as_("p")).from_(counts.subquery("counts"))
    p = sb.col("p")
    query = (exp.select(sb.col(POSITION), exp.Neg(this=exp.func("SUM", p * _log2(p))).as_(SCORE))
             .from_(shares.subquery("shares")).group_by(sb.col(POSITION)))
    rows = engine.rows(query)
    _require_records(relation, rows)
    # A constant attribute gives −1·log2(1) = −0.0; report it as 0.
    return [abs(score) for score in _in_order(rows, len(attributes))]


def _mutual_informations(engine: Engine, relation: exp.Expression, attributes: list[str],
                         label: str) -> list[float]:
    """``MI(Y, X_i) = Σ_{x,y} p(x,y) log2(p(x,y) / (p(x) p(y)))`` — equal to ``H(Y) − H(Y|X_i)`` — for every attribute,
    from one scan grouping by each (attribute, label) pair; the marginal counts are window sums over the joint ones."""
    counts = (exp.select(_set_position(attributes).as_(POSITION), *[sb.col(a) for a in attributes], sb.col(label),
                         exp.func("COUNT", exp.Star()).as_("n"))
              .from_(relation)
              .group_by(exp.GroupingSets(expressions=[exp.Tuple(expressions=[sb.col(a), sb.col(label)])
                                                      for a in attributes])))

    def window_sum(*partition: exp.Expression) -> exp.Expression:
        return exp.Window(this=exp.func("SUM", sb.col("n")), partition_by=[sb.col(POSITION), *partition])

    # In the rows of attribute i's grouping set every other attribute is NULL, so partitioning by all of them
    # partitions by attribute i alone.
    marginals = exp.select(
        sb.col(POSITION), sb.col("n"),
        window_sum(*[sb.col(a) for a in attributes]).as_("n_x"),
        window_sum(sb.col(label)).as_("n_y"),
        window_sum().as_(RECORDS),
    ).from_(counts.subquery("counts"))
    n, n_x, n_y, records = (sb.col(c) for c in ("n", "n_x", "n_y", RECORDS))
    # n·N / (n_x·n_y) is exactly 1 for independent counts, so independence gives exactly zero, not rounding noise.
    ratio = exp.Div(this=exp.paren(sb.as_double(n) * sb.as_double(records)),
                    expression=exp.paren(sb.as_double(n_x) * sb.as_double(n_y)))
    information = exp.func("SUM", _share(n, records) * _log2(ratio))
    query = (exp.select(
        sb.col(POSITION),
        # MI is never negative; a sum of terms of both signs can round a hair below zero.
        exp.func("GREATEST", information, sb.lit(0.0)).as_(SCORE),
        exp.func("BOOL_AND", n_y.eq(records)).as_(LABEL_CONSTANT),
    ).from_(marginals.subquery("marginals")).group_by(sb.col(POSITION)))
    rows = engine.rows(query)
    _require_records(relation, rows)
    if rows[0][2]:
        raise PolicyError(f"label {label!r} has one value in every record, so its mutual information with every "
                          f"attribute is 0 and cannot weigh them; use a label with at least two values")
    return _in_order(rows, len(attributes))
