"""The counting behind every risk figure, in SQL: how many classes of each size a table has over its
quasi-identifiers, and, given a population, how large each sample class is in it.

A class is the records with equal quasi-identifiers (NULL equal to NULL, as GROUP BY has it); a release's suppressed
records, all ``*``, form one.  Only these small histograms leave the database; the estimators work on them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from ..engine import Engine
from ..errors import AnonymizationError
from ..sqlgen import build as sb

# Every column of these queries is named here, never after a source column (a quasi-identifier may be called "size").
SIZE, POPULATION_SIZE = "__duckanon_size", "__duckanon_population_size"


def _relation(relation: exp.Expression) -> exp.Expression:
    return relation.subquery("r") if isinstance(relation, exp.Select) else relation


def _key(position: int) -> str:
    return f"__duckanon_key{position}"


def _class_sizes(relation: exp.Expression, quasi: Sequence[str], name: str = SIZE, weight: str | None = None
                 ) -> exp.Select:
    """One row per class: its keys (as ``_key(i)``) and its size (as ``name``): its rows, or the sum of their
    ``weight`` where each row stands for that many records."""
    keys = [sb.col(q) for q in quasi]
    size = exp.func("COUNT", exp.Star()) if weight is None else exp.func("SUM", sb.col(weight))
    return (exp.select(*[key.as_(_key(i), quoted=True) for i, key in enumerate(keys)], size.as_(name, quoted=True))
            .from_(_relation(relation)).group_by(*keys))


def class_size_histogram(engine: Engine, relation: exp.Expression, quasi: Sequence[str], weight: str | None = None
                         ) -> tuple[np.ndarray, np.ndarray]:
    """The class sizes that occur in ``relation`` over ``quasi`` (ascending) and how many classes have each (each
    row standing for ``weight`` records where that column is named)."""
    return class_size_histograms(engine, relation, quasi, weight=weight).get(
        (), (np.zeros(0, np.int64), np.zeros(0, np.int64)))


def class_size_histograms(engine: Engine, relation: exp.Expression, quasi: Sequence[str], strata: Sequence[str] = (),
                          weight: str | None = None) -> dict[tuple, tuple[np.ndarray, np.ndarray]]:
    """Per stratum of ``strata`` (its values, in their order; ``()`` without strata), :func:`class_size_histogram`
    of its rows, in one query."""
    sizes = _class_sizes(relation, [*strata, *quasi], weight=weight).subquery("s")
    tables = [sb.col(_key(i)) for i in range(len(strata))]
    rows = engine.rows(exp.select(*tables, sb.col(SIZE), exp.func("COUNT", exp.Star())).from_(sizes)
                       .group_by(*[t.copy() for t in tables], sb.col(SIZE)).order_by(sb.col(SIZE)))
    grouped: dict[tuple, list] = {}
    for row in rows:
        grouped.setdefault(tuple(row[:len(strata)]), []).append(row[len(strata):])
    return {stratum: (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64))
            for stratum, rows in grouped.items()}


def population_pairs(engine: Engine, sample: exp.Expression, population: exp.Expression, quasi: Sequence[str],
                     sample_weight: str | None = None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """For the sample's classes: their size in the sample, in the population, and how many classes have that pair
    (``sample_weight``: a column of the sample giving the records each row stands for).  A sample class the
    population lacks, or holds fewer records of, is an error: the population must contain the sample."""
    ours = _class_sizes(sample, quasi, weight=sample_weight).subquery("s")
    theirs = _class_sizes(population, quasi, POPULATION_SIZE).subquery("p")
    # Compared as text: a release keeps a value at level 0 in its own type, a recoding writes text.
    on = sb.and_all(exp.NullSafeEQ(this=sb.as_text(sb.col(_key(i), "s")), expression=sb.as_text(sb.col(_key(i), "p")))
                    for i in range(len(quasi)))
    size, population_size = sb.col(SIZE, "s"), sb.col(POPULATION_SIZE, "p")
    rows = engine.rows(exp.select(size, population_size, exp.func("COUNT", exp.Star()))
                       .from_(ours).join(theirs, on=on, join_type="LEFT")
                       .group_by(size, population_size).order_by(size, population_size))
    short = [(f, big) for f, big, _ in rows if big is None or big < f]
    if short:
        f, big = short[0]
        raise AnonymizationError(
            f"the population does not contain the sample: a sample class of {f} records has "
            f"{big or 0} in the population over {list(quasi)} ({len(short)} such class sizes)")
    return tuple(np.array([r[i] for r in rows], dtype=np.int64) for i in range(3))


def records(engine: Engine, relation: exp.Expression) -> int:
    return int(engine.value(exp.select(exp.func("COUNT", exp.Star())).from_(_relation(relation))))


# ------------------------------------------------------------------ a missing value matching any (cell suppression)
# Column names of :func:`compatible_counts`, never a source column's.
RECORDS, COMPATIBLE = "__duckanon_records", "__duckanon_compatible"


def compatible_counts(relation: exp.Expression, quasi: Sequence[str], exact: Sequence[str] = ()) -> exp.Select:
    """One row per distinct combination of ``exact`` and ``quasi`` in ``relation``: its values, its records
    (:data:`RECORDS`) and the records compatible with it (:data:`COMPATIBLE`): equal on every quasi-identifier, a
    missing value (NULL) matching any, as sdcMicro's ``freqCalc`` counts them (alpha = 1), and equal on every column
    of ``exact`` (a policy's strata: a NULL there matches only a NULL).

    A combination that misses nothing is compatible with one such combination, itself; only pairs where one side
    misses a value are joined on the condition, so the cost grows with the combinations holding a NULL."""
    combos, partial = "__duckanon_combos", "__duckanon_partial"
    keys = [sb.col(q) for q in quasi]
    counted = (exp.select(*[sb.col(c) for c in exact], *keys, exp.func("COUNT", exp.Star()).as_(RECORDS, quoted=True),
                          sb.or_all(k.copy().is_(exp.Null()) for k in keys).as_(partial, quoted=True))
               .from_(_relation(relation)).group_by(*[sb.col(c) for c in exact], *[k.copy() for k in keys]))
    compatible = sb.and_all([*(exp.NullSafeEQ(this=sb.col(c, "a"), expression=sb.col(c, "b")) for c in exact),
                             *(sb.or_all([sb.col(q, "a").is_(exp.Null()), sb.col(q, "b").is_(exp.Null()),
                                          sb.col(q, "a").eq(sb.col(q, "b"))]) for q in quasi)])
    shown = [*exact, *quasi]

    def matched(records: exp.Expression, where: exp.Expression | None, joined: exp.Expression | None = None
                ) -> exp.Select:
        query = exp.select(*[sb.col(q, "a") for q in shown], sb.col(RECORDS, "a"),
                           records.as_(COMPATIBLE, quoted=True)).from_(exp.alias_(sb.table(combos), "a", quoted=True))
        if joined is not None:
            query = query.join(exp.alias_(sb.table(combos), "b", quoted=True), on=exp.and_(compatible.copy(), joined),
                               join_type="INNER")
        return query if where is None else query.where(where)

    a_partial, b_partial = sb.col(partial, "a"), sb.col(partial, "b")
    pairs = exp.union(exp.union(
        matched(sb.col(RECORDS, "a"), exp.not_(a_partial)),  # a combination without NULLs: itself
        matched(sb.col(RECORDS, "b"), None, b_partial.copy()),  # any combination with one holding a NULL
        distinct=False),
        matched(sb.col(RECORDS, "b"), a_partial.copy(), exp.not_(b_partial.copy())),  # one with NULLs, the others
        distinct=False)
    total = exp.cast(exp.func("SUM", sb.col(COMPATIBLE)), exp.DataType.build("BIGINT"))
    return (exp.select(*[sb.col(q) for q in shown], sb.col(RECORDS), total.as_(COMPATIBLE, quoted=True))
            .from_(pairs.subquery("pairs")).group_by(*[sb.col(q) for q in shown], sb.col(RECORDS))
            .with_(combos, as_=counted))


def compatible_histogram(engine: Engine, relation: exp.Expression, quasi: Sequence[str], exact: Sequence[str] = ()
                         ) -> tuple[np.ndarray, np.ndarray, int]:
    """Where a missing value matches any: the numbers of compatible records that occur (ascending), how many records
    have each, and the distinct combinations (:func:`compatible_counts`, within each value of ``exact``)."""
    counts = compatible_counts(relation, quasi, exact).subquery("c")
    rows = engine.rows(exp.select(sb.col(COMPATIBLE), exp.func("SUM", sb.col(RECORDS)), exp.func("COUNT", exp.Star()))
                       .from_(counts).group_by(sb.col(COMPATIBLE)).order_by(sb.col(COMPATIBLE)))
    return (np.array([r[0] for r in rows], dtype=np.int64), np.array([r[1] for r in rows], dtype=np.int64),
            int(sum(r[2] for r in rows)))
