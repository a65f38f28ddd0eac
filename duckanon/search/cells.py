"""Cell suppression as sdcMicro's ``localSuppression`` (sdcMicro 5, ``R/localSuppression.R`` and
``src/calcSuppInds.cpp``): k-anonymity reached by replacing single quasi-identifier values with a missing value, a
missing value matching any value when records are counted.

The records start on a full-domain generalization: the search's optimum under the policy (its suppression limit says
how many records may need cells suppressed), or levels the caller gives (all 0: cells only, as sdcMicro).  Then, on
the combinations of released values (one row each, with its records; records with equal values are treated alike):

1. a combination of more than k records keeps k of them for the counting (sdcMicro's reduction: the others have k
   equal records that never lose a value);
2. each pass counts every combination's compatible records (equal on every quasi-identifier, a missing value
   matching any; sdcMicro's ``freqCalc``, alpha = 1); the combinations below k are taken in order of their count
   (fewest first: sdcMicro orders by individual risk, 1/fk without weights), and each loses one value: among the
   combinations nearest to it (fewest differing values, both present, more than none), the least important
   quasi-identifier on which one of them differs;
3. passes repeat until every combination has k compatible records.

Where this differs from sdcMicro: records with equal counts are taken in the order of their released values (their
codes), not of their rows in the file, so a release does not depend on how the file is ordered; records with equal
values are taken together (sdcMicro interleaves them with others by row).  On sdcMicro's ``testdata2`` both give its
documented 97 suppressed cells (109 by stratum); a replay of sdcMicro's greedy in row order gives 93 to 97 on shuffles
of that file.  Missing
values in the source are kept apart in the reduction (sdcMicro first sets them to the column's first value).
"""

from __future__ import annotations

import dataclasses
import os
import time
from collections.abc import Callable, Sequence

import numpy as np
from sqlglot import exp

from ..declare.policy import Policy
from ..deferred import pandas as pd
from ..encode.binding import BoundPolicy, Workspace
from ..encode.encoding import COUNT, Encoding, code_column
from ..errors import PolicyError, PolicyNotSatisfied
from ..recode.generalization import (
    CellSuppression,
    FullDomainGeneralization,
    suppressed_cell,
)
from ..release.files import release_format
from ..release.publish import (
    Release,
    checked_table_names,
    refuse_unmatched_models,
)
from ..risk.records import compatible_totals
from ..sqlgen import build as sb
from ..utility.metrics import Metric
from .costs import RECORDED_COST_METRICS, release_cost_metrics
from .run import checked_search, evaluator, publish_recoded, resolve_metric
from .strategies import STRATEGIES, SearchResult

_serial = iter(range(1, 2**62))
METHOD = "cell suppression"


@dataclasses.dataclass(frozen=True)
class SuppressedCells:
    """What a cell suppression did: the levels it started from (and the search that chose them, if one did), the
    order it suppresses attributes in (least important first), the records that lost a value, the cells suppressed
    per attribute, its passes and their seconds (after the search), and the record-cost metrics of the release (a
    suppressed value at its suppressed cost)."""

    levels: dict[str, int]
    search: SearchResult | None
    order: list[str]
    records: int
    cells: dict[str, int]
    passes: int
    seconds: float
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        cells = ", ".join(f"{a} {n}" for a, n in self.cells.items() if n) or "none"
        return (f"cell suppression at {self.levels}: {sum(self.cells.values())} values suppressed in {self.records} "
                f"records ({cells}) in {self.passes} passes")


def _named(attributes: Sequence[str], names: Sequence[str], what: str) -> list[int]:
    """The positions of ``names`` among ``attributes``, refusing one that is not a quasi-identifier or repeats."""
    unknown = [a for a in names if a not in attributes]
    if unknown:
        raise PolicyError(f"{what} names {unknown[0]!r}, which is not a quasi-identifier of the policy (they are "
                          f"{', '.join(attributes)})")
    repeated = [a for i, a in enumerate(names) if a in names[:i]]
    if repeated:
        raise PolicyError(f"{what} names {repeated[0]!r} twice")
    return [list(attributes).index(a) for a in names]


def suppression_order(attributes: Sequence[str], categories: Sequence[int], importance: Sequence[str] | None
                      ) -> list[int]:
    """The positions of the attributes, least important first.  ``importance`` names quasi-identifiers most important
    first; those it does not name are less important, ordered as sdcMicro orders all by default: an attribute with
    fewer ``categories`` is more important (ties in column order)."""
    named = _named(attributes, list(importance or []), "importance")
    rest = sorted((i for i in range(len(attributes)) if i not in named), key=lambda i: categories[i])
    return (named + rest)[::-1]


def greedy_cells(codes: np.ndarray, counts: np.ndarray, k: int, order: Sequence[int], strata: Sequence[int] = (),
                 announce: Callable[[str], None] = lambda _: None) -> tuple[np.ndarray, int]:
    """Which values of each combination (a row of ``codes``, one column per attribute, -1 where missing, rows in the
    order ties are taken in; ``counts`` its records) sdcMicro's greedy suppresses to reach ``k`` compatible records
    each, attributes tried in ``order``; and the passes it took.  The columns ``strata`` are never suppressed, and a
    combination's nearest are sought in its stratum only (sdcMicro's ``strataVars``)."""
    cards = [max(int(codes[:, j].max()) + 1, 1) if len(codes) else 1 for j in range(codes.shape[1])]
    if counts.sum() < k:
        raise PolicyNotSatisfied(f"{METHOD} cannot reach k = {k}: the data holds {int(counts.sum())} records")
    weights = np.where(counts > k, k, counts).astype(np.float64)  # the reduction
    # One contiguous row of small codes per attribute: a combination's distances to all are a few byte-wide passes.
    kind = np.uint8 if max(cards) < 255 else np.uint16 if max(cards) < 65535 else np.uint32
    missing_code = np.iinfo(kind).max
    current = np.where(codes < 0, missing_code, codes).astype(kind).T.copy()
    passes = 0
    while True:
        missing = current == missing_code
        fk, = compatible_totals(np.where(missing, 0, current).astype(np.int64), missing, cards, [weights])
        problems = np.flatnonzero(fk < k)
        if not problems.size:
            return (current.T == missing_code) & (codes >= 0), passes
        passes += 1
        announce(f"{METHOD}, pass {passes}: {problems.size} combinations below k = {k}")
        for i in problems[np.argsort(fk[problems], kind="stable")]:
            row = current[:, i].copy()
            differs: dict[int, np.ndarray] = {}
            distance = np.zeros(current.shape[1], dtype=np.uint8)
            for j in range(len(row)):
                if row[j] != missing_code:
                    differs[j] = (current[j] != row[j]) & (current[j] != missing_code)
                    distance += differs[j].view(np.uint8)
            for j in strata:  # another stratum's combinations are never near
                distance[current[j] != row[j]] = 0
            nearest = distance == distance[distance > 0].min()
            current[next(j for j in order if j in differs and (differs[j] & nearest).any()), i] = missing_code


def cell_suppression(workspace: Workspace, bound: BoundPolicy, encoding: Encoding, levels: dict[str, int],
                     importance: Sequence[str] | None, search: SearchResult | None,
                     metrics: Sequence[Metric]) -> tuple[SuppressedCells, CellSuppression]:
    """The cells sdcMicro's greedy suppresses in ``encoding`` (``bound``'s frequency table) generalized to
    ``levels``, within each stratum of the policy (k-anonymity then holds in each, a record's compatible records
    sharing its stratum, as sdcMicro's ``strataVars``); and the transformation that releases them, whose assignment
    (when it has one) is a temporary table the caller drops."""
    engine, attributes, strata = workspace.engine, encoding.attributes, encoding.strata
    started = time.perf_counter()
    k = max(model.k for model in bound.policy.models)
    keys = [code_column(i, levels[a]) for i, a in enumerate(attributes)]
    grouped = [sb.col(c) for c in [*strata, *keys]]
    combos = engine.frame(exp.select(*grouped, exp.func("SUM", sb.col(COUNT)).as_(COUNT))
                          .from_(encoding.table).group_by(*[c.copy() for c in grouped])
                          .order_by(*[exp.Ordered(this=c.copy(), nulls_first=False) for c in grouped]))
    codes = np.column_stack([combos[c].to_numpy(dtype=np.int64) for c in keys]) if len(combos) else np.zeros(
        (0, len(keys)), np.int64)
    for i, attribute in enumerate(attributes):  # a missing value in the source matches any, as a suppressed one
        missing = [code for code, label in encoding.labels(i, levels[attribute]).items() if label is None]
        codes[np.isin(codes[:, i], missing), i] = -1
    categories = [len(np.unique(codes[codes[:, i] >= 0, i])) for i in range(len(attributes))]
    order = suppression_order(attributes, categories, importance)
    if strata:  # one more column, never suppressed: each stratum's code (its missing value a value of its own)
        stratum = combos.groupby(strata, dropna=False, sort=False).ngroup().to_numpy(dtype=np.int64)
        codes = np.column_stack([codes, stratum])
        sizes = combos[COUNT].groupby(stratum).sum()
        if (sizes < k).any():  # sdcMicro refuses a stratum of fewer than k records too: no suppression mends it
            first = int(np.flatnonzero(stratum == int(sizes.index[sizes < k][0]))[0])
            values = {s: combos[s].iloc[first] for s in strata}
            held = int(sizes[sizes < k].iloc[0])
            raise PolicyNotSatisfied(f"{METHOD} cannot reach k = {k} in the stratum {values}: it holds "
                                     f"{held} record{'' if held == 1 else 's'}")
    suppressed, passes = greedy_cells(codes, combos[COUNT].to_numpy(dtype=np.int64), k, order,
                                      [len(attributes)] if strata else [], workspace.announce)
    counts = combos[COUNT].to_numpy(dtype=np.int64)
    cells = {a: int(counts @ suppressed[:, i]) for i, a in enumerate(attributes)}
    flags = pd.DataFrame({**{f"__stratum_{j}": combos[s] for j, s in enumerate(strata)},
                          **{f"__node_{i}": combos[c] for i, c in enumerate(keys)},
                          **{suppressed_cell(i): suppressed[:, i] for i in range(len(attributes))}})
    flags = flags[suppressed.any(axis=1)]
    assignment, measured = None, {}
    with engine.registered(flags) as flagged:
        on = sb.and_all([*(exp.NullSafeEQ(this=sb.col(s, "f"), expression=sb.col(f"__stratum_{j}", "m"))
                           for j, s in enumerate(strata)),
                         *(sb.col(c, "f").eq(sb.col(f"__node_{i}", "m")) for i, c in enumerate(keys))])
        leaves = [code_column(i, 0) for i in range(len(attributes))]
        marks = [exp.func("COALESCE", sb.col(suppressed_cell(i), "m"), exp.false()).as_(suppressed_cell(i),
                                                                                         quoted=True)
                 for i in range(len(attributes))]
        rows = (exp.select(*[sb.col(c, "f") for c in [*strata, *leaves]], sb.col(COUNT, "f"), *marks)
                .from_(exp.alias_(encoding.table, "f", quoted=True))
                .join(exp.alias_(flagged, "m", quoted=True), on=on, join_type="LEFT"))
        arrays = engine.arrays(rows)
        hierarchies = [b.hierarchy for b in bound.hierarchies.values()]
        at_levels = np.array([levels[a] for a in attributes])
        marked = np.column_stack([np.asarray(arrays[suppressed_cell(i)], dtype=bool) for i in range(len(attributes))])
        cost_columns = np.where(marked, np.array([h.levels for h in hierarchies]), at_levels)
        measured = release_cost_metrics(encoding, hierarchies, [*metrics, *RECORDED_COST_METRICS],
                                        [np.asarray(arrays[c], dtype=np.int64) for c in leaves],
                                        np.asarray(arrays[COUNT], dtype=np.float64), cost_columns)
        if len(flags):
            assigned = (exp.select(*[sb.col(c) for c in [*strata, *leaves]],
                                   *[exp.func("BOOL_OR", sb.col(suppressed_cell(i))).as_(suppressed_cell(i),
                                                                                          quoted=True)
                                     for i in range(len(attributes))])
                        .from_(rows.subquery("rows")).where(sb.or_all(sb.col(suppressed_cell(i))
                                                                      for i in range(len(attributes))))
                        .group_by(*[sb.col(c) for c in [*strata, *leaves]]))
            assignment = sb.table(f"__duckanon_cells_{next(_serial)}")
            engine.run(sb.create_table_as(assignment, encoding.decoded(
                assigned, [*(sb.col(s, "r") for s in strata),
                           *(sb.col(suppressed_cell(i), "r") for i in range(len(attributes)))]), temporary=True))
    records = int(counts @ suppressed.any(axis=1))
    result = SuppressedCells(dict(levels), search, [attributes[j] for j in order], records, cells, passes,
                             time.perf_counter() - started, measured)
    return result, CellSuppression(levels, assignment, cells, records, strata)


def suppress_cells(workspace: Workspace, source, policy: Policy | str, path: str | os.PathLike,
                   importance: Sequence[str] | None, levels: dict[str, int] | None,
                   metric: Metric | str,
                   strategy: str, label: str | None, table: str, format: str | None, evaluator_kind: str = "auto",
                   memory_budget: int | None = None, time_limit: float | None = None,
                   check_limit: int | None = None) -> tuple[SuppressedCells, Release]:
    """Generalize ``source`` to ``levels`` (None: the search's optimum under ``policy``), suppress single values
    until the policy's k-anonymity holds with a missing value matching any, in each stratum of the policy
    (:func:`cell_suppression`), and publish:
    one read of the source, whose frequency table the search and the suppression share."""
    release_format(path, format)
    checked_table_names(source, table)
    budget = checked_search(strategy, evaluator_kind, memory_budget, time_limit, check_limit)
    importance = [importance] if isinstance(importance, str) else importance

    def recode(bound: BoundPolicy, encoding: Encoding) -> tuple[SuppressedCells, CellSuppression]:
        suppression_order(list(bound.hierarchies), [0] * len(bound.hierarchies), importance)  # before work
        if levels is not None:
            FullDomainGeneralization(levels).validate(bound.hierarchies)
        chosen = resolve_metric(workspace, bound, metric, label)
        found = None
        if levels is None:
            with evaluator(workspace, bound, [chosen], label, evaluator_kind, memory_budget, encoding) as nodes:
                workspace.announce(f"{strategy} search over {nodes.lattice.size} transformations")
                found = STRATEGIES[strategy]().search(nodes, budget)
            if not found.found:
                raise PolicyNotSatisfied(found.summary())
        return cell_suppression(workspace, bound, encoding, dict(levels or found.levels), importance, found,
                                [chosen])

    return publish_recoded(workspace, source, policy, path, table, format,
                           lambda checked: refuse_unmatched_models(checked, METHOD), recode)
