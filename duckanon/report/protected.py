"""Each attribute's distribution, source beside release, shown without anything the release hides.

A report travels with its release, so its source side may show only what the release's own categories show:

- **a full-domain release**: the source recoded by the release's own generalization (the same levels, the same
  hierarchies), counted per label the release shows; the two sides differ only by what was suppressed;
- **numbers released as ranges** (Mondrian, clustering: ``<column>_low``/``_high``): both sides over round bins of
  the source's span, each released record spread evenly over its range;
- **numbers released as numbers** (perturbation) or as text that reads as numbers (a group's mean): both sides over
  the same round bins;
- **anything else**: per label the release shows; a source value counts under the most specific release label that
  is the value itself or, where the policy's hierarchy is known, one of its generalizations; every other value is
  pooled as one category.

Source counts from 1 to ``k - 1`` (the policy's k; without one, the records a risk threshold tolerates) are withheld,
and when only one count would be, the next smallest is withheld with it, so that no withheld count follows from the
total (complementary suppression, as statistical offices do).  The custodian's view
(:func:`duckanon.utility.distributions.compare`) shows the source's own values instead, and the page says so.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence

import numpy as np
from sqlglot import exp

from ..declare.policy import SUPPRESSED, Policy
from ..deferred import pandas as pd
from ..encode.binding import Workspace, bind
from ..engine import Engine
from ..hierarchy.hierarchy import Hierarchy
from ..privacy.models import KAnonymity
from ..recode.generalization import FullDomainGeneralization
from ..recode.ranges import high_column, low_column
from ..sqlgen import build as sb
from ..utility.distributions import (
    MISSING,
    MOST_VALUES,
    OTHERS,
    Bins,
    Comparison,
    distinct_values,
    is_numeric,
    spread_counts,
    value_counts,
)

NOT_SHOWN = "(values not in the release)"  # short enough for a plot's axis label (plots._short)
WHOLE_TYPES = ("TINYINT", "SMALLINT", "INTEGER", "BIGINT", "HUGEINT", "UTINYINT", "USMALLINT", "UINTEGER", "UBIGINT",
               "UHUGEINT")


def smallest_shown(info: dict, threshold: float) -> int:
    """The smallest source count a report shows: the policy's largest k, else the class size at which prosecutor
    risk stays within ``threshold``."""
    ks = [m["params"]["k"] for m in ((info.get("policy") or {}).get("models") or []) if "k" in m.get("params", {})]
    return int(max(ks)) if ks else max(2, math.ceil(1 / threshold)) if threshold > 0 else 2


def comparisons(workspace: Workspace, source: exp.Expression, reader: Engine, released: exp.Expression,
                attributes: Sequence[str], info: dict, hierarchies: Mapping[str, Hierarchy],
                threshold: float) -> list[Comparison]:
    """The protected comparison of each attribute (see the module's text)."""
    engine, smallest = workspace.engine, smallest_shown(info, threshold)
    columns = set(reader.columns(released))
    levels = (info.get("transformation") or {}).get("full-domain generalization")
    quasi = [c["column"] for c in ((info.get("policy") or {}).get("columns") or [])
             if c["role"] == "quasi-identifier"]
    if levels and quasi and all(q in hierarchies for q in quasi):
        # The source recoded by the release's own generalization: one bind, every attribute counted from it.
        policy = Policy(quasi_identifiers={q: hierarchies[q] for q in quasi}, models=[KAnonymity(1)], others="drop")
        with bind(workspace, source, policy) as bound:
            recoded = FullDomainGeneralization(levels).compile(bound.source, bound.columns, bound.hierarchies)
            return [_labelled(attribute, engine, recoded, reader, released, None, smallest,
                              "recoded by the release's own generalization", original=source)
                    if attribute in quasi else _compared(engine, source, reader, released, attribute, columns, None,
                                                         smallest)
                    for attribute in attributes]
    return [_compared(engine, source, reader, released, attribute, columns, hierarchies.get(attribute), smallest)
            for attribute in attributes]


def _compared(engine, source, reader, released, attribute, columns, hierarchy, smallest) -> Comparison:
    if is_numeric(engine, source, attribute):
        low, high = low_column(attribute), high_column(attribute)
        if low in columns and high in columns:
            return _ranged(engine, source, reader, released, attribute, smallest)
        if is_numeric(reader, released, attribute):
            return _binned(engine, source, reader, released, attribute, smallest)
        if _numbers_as_text(reader, released, attribute):  # a group's mean (microaggregation), or '*'
            return _binned(engine, source, reader, _as_numbers(released, attribute), attribute, smallest,
                           starred=_starred(reader, released, attribute))
    return _labelled(attribute, engine, source, reader, released, hierarchy, smallest,
                     "per label the release shows" + (", each value under its most specific generalization there"
                                                      if hierarchy is not None else ""))


def _span_bins(engine: Engine, relation: exp.Expression, attribute: str) -> Bins | None:
    value = sb.as_double(sb.col(attribute))
    low, high = engine.rows(exp.select(exp.func("MIN", value), exp.func("MAX", value.copy()))
                            .from_(sb.derived(relation, "r")))[0]
    return None if low is None else Bins.covering(float(low), float(high))


def _ranged(engine, source, reader, released, attribute, smallest) -> Comparison:
    bins = _span_bins(engine, source, attribute)
    if bins is None:
        return _labelled(attribute, engine, source, reader, released, None, smallest, "per label the release shows")
    whole = reader.types(released)[low_column(attribute)].upper().startswith(WHOLE_TYPES)
    original = value_counts(engine, source, attribute, bins=bins)
    spread = spread_counts(reader, released, low_column(attribute), high_column(attribute), bins, whole=whole)
    unbounded = int(reader.value(exp.select(exp.func("COUNT", exp.Star())).from_(sb.derived(released, "r"))
                                 .where(sb.col(low_column(attribute)).is_(exp.Null()))))
    counts = dict(zip(spread["value"], spread["records"]))
    if unbounded:
        counts[SUPPRESSED] = unbounded
    return _aligned(attribute, dict(zip(original["value"], original["records"])), counts,
                    [*original["value"], *([SUPPRESSED] if unbounded else [])], smallest,
                    "over round bins, each released record spread evenly over its range",
                    distinct_values(engine, source, attribute), distinct_values(reader, released, attribute))


def _numbers_as_text(reader: Engine, released: exp.Expression, attribute: str) -> bool:
    """Whether every released value of a text column but '*' reads as a number (and some do)."""
    value = sb.col(attribute)
    number = exp.TryCast(this=value.copy(), to=exp.DataType.build("DOUBLE"))
    stray = exp.and_(value.copy().is_(exp.Null()).not_(), value.copy().neq(sb.lit(SUPPRESSED)),
                     number.copy().is_(exp.Null()))
    strays, numbers = reader.rows(exp.select(exp.func("COUNT", exp.Case().when(stray, sb.lit(1))),
                                             exp.func("COUNT", number)).from_(sb.derived(released, "r")))[0]
    return strays == 0 and numbers > 0


def _as_numbers(released: exp.Expression, attribute: str) -> exp.Select:
    number = exp.TryCast(this=sb.col(attribute), to=exp.DataType.build("DOUBLE"))
    return exp.select(number.as_(attribute, quoted=True)).from_(sb.derived(released, "r")).where(
        sb.col(attribute).neq(sb.lit(SUPPRESSED)))


def _starred(reader: Engine, released: exp.Expression, attribute: str) -> int:
    return int(reader.value(exp.select(exp.func("COUNT", exp.Star())).from_(sb.derived(released, "r"))
                            .where(sb.col(attribute).eq(sb.lit(SUPPRESSED)))))


def _binned(engine, source, reader, released, attribute, smallest, starred: int = 0) -> Comparison:
    spans = [_span_bins(e, r, attribute) for e, r in ((engine, source), (reader, released))]
    known = [b for b in spans if b is not None]
    if not known:
        return _labelled(attribute, engine, source, reader, released, None, smallest, "per label the release shows")
    bins = Bins.covering(min(b.low for b in known), max(b.low + b.width * b.count for b in known) - 1e-9)
    original = value_counts(engine, source, attribute, bins=bins)
    release = value_counts(reader, released, attribute, bins=bins)
    counts = dict(zip(release["value"], release["records"]))
    if starred:
        counts[SUPPRESSED] = starred
    order = list(dict.fromkeys([*original["value"], *release["value"], *([SUPPRESSED] if starred else [])]))
    return _aligned(attribute, dict(zip(original["value"], original["records"])), counts, order, smallest,
                    "over the same round bins as the release", distinct_values(engine, source, attribute),
                    distinct_values(reader, released, attribute))


def _labelled(attribute, engine, source, reader, released, hierarchy, smallest, how, original=None) -> Comparison:
    """Both sides per label the release shows; source values that are none of them go under the most specific of
    their generalizations that is (``hierarchy``), else into one pooled category."""
    release = _counts(reader, released, attribute)
    labels = set(release)
    generalizations = {} if hierarchy is None else {MISSING if row[0] is None else row[0]: row[1:]
                                                    for row in hierarchy.rows}
    counted: dict[str, float] = {}
    for value, records in _counts(engine, source, attribute).items():
        label = value if value in labels else next((g for g in generalizations.get(value, ()) if g in labels),
                                                   NOT_SHOWN)
        counted[label] = counted.get(label, 0) + records
    order = sorted(labels - {SUPPRESSED, MISSING}, key=_natural) + [v for v in (MISSING, SUPPRESSED) if v in labels]
    if counted.get(NOT_SHOWN):
        order.append(NOT_SHOWN)
    if len(order) > MOST_VALUES:
        kept = set(sorted(order, key=lambda v: -release.get(v, 0))[:MOST_VALUES - 1])
        counted, release = _pooled(counted, kept), _pooled(release, kept)
        order = [v for v in order if v in kept] + [OTHERS]
    return _aligned(attribute, counted, release, order, smallest, how,
                    distinct_values(engine, original if original is not None else source, attribute),
                    distinct_values(reader, released, attribute))


def _counts(engine: Engine, relation: exp.Expression, attribute: str) -> dict[str, int]:
    value = sb.as_text(sb.col(attribute))
    rows = engine.rows(exp.select(value, exp.func("COUNT", exp.Star())).from_(sb.derived(relation, "r"))
                       .group_by(value.copy()))
    return {MISSING if v is None else v: int(n) for v, n in rows}


def _pooled(counts: Mapping[str, float], kept: set[str]) -> dict[str, float]:
    pooled = {k: v for k, v in counts.items() if k in kept}
    rest = sum(v for k, v in counts.items() if k not in kept)
    if rest:
        pooled[OTHERS] = rest
    return pooled


def _natural(label: str) -> tuple:
    """Labels in reading order: numbers by value (``5-9`` before ``10-19``), then text."""
    found = re.search(r"-?\d+(\.\d+)?", label)
    return (0, float(found.group()), label) if found else (1, 0.0, label)


def _aligned(attribute: str, original: Mapping[str, float], released: Mapping[str, float], order: Sequence[str],
             smallest: int, how: str, original_distinct: int, released_distinct: int) -> Comparison:
    source_counts = np.array([float(original.get(v, 0)) for v in order])
    release_counts = np.array([float(released.get(v, 0)) for v in order])
    distance = Comparison.distance(source_counts, release_counts)
    return Comparison(attribute, pd.DataFrame({"value": list(order), "records": withheld(source_counts, smallest)}),
                      pd.DataFrame({"value": list(order), "records": release_counts}), aligned=True,
                      original_distinct=original_distinct, released_distinct=released_distinct,
                      total_variation=distance, withheld_below=smallest, how=how)


def withheld(counts: np.ndarray, smallest: int) -> np.ndarray:
    """``counts`` with those from 1 to ``smallest - 1`` set to NaN; when that is one count alone, the next smallest
    positive count goes too, so the total does not give it away."""
    shown = counts.astype(float).copy()
    small = (shown > 0) & (shown < smallest)
    if small.sum() == 1:
        others = np.where((shown > 0) & ~small)[0]
        if len(others):
            small[others[np.argmin(shown[others])]] = True
    shown[small] = np.nan
    return shown
