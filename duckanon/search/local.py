"""Local recoding as ARX does it (``ARXResult.optimizeIterative``, ARX 3.9.2): the records the optimal full-domain
generalization suppresses are anonymized again among themselves, by a search of their own, and so on while a step
releases any of them.

Each step is a search over a part of the frequency table (:meth:`~duckanon.encode.encoding.Encoding.part`, the rows
the step before it suppressed, in the same codes), under the policy's models and a suppression limit of the same share
of the step's records (ARX's ``getInstanceForLocalRecoding`` keeps the share).  A row's fate depends on its
quasi-identifiers alone (its class at every node), so the steps assign combinations of quasi-identifiers; the rows the
last step leaves suppressed stay on its levels, where the publish suppresses them.  The release is one
:class:`~duckanon.recode.generalization.LocalGeneralization`, checked as a whole by the publish (its classes are the
records with equal released values, whichever step recoded them) and verified from its file.

Where this differs from ARX: a model that compares a class with its table (t-closeness, β-likeness, δ-disclosure)
compares a step's classes with the step's records while searching (ARX: with the whole input); the publish then checks
every class against the whole table.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

import numpy as np
from sqlglot import exp

from ..declare.policy import Policy
from ..encode.binding import BoundPolicy, Workspace
from ..encode.encoding import COUNT, Encoding, code_column
from ..engine import Engine
from ..errors import PolicyError, PolicyNotSatisfied
from ..parameters import checked_number
from ..privacy.checks import class_verdicts, verdict_report
from ..privacy.classes import VIOLATED
from ..privacy.models import prices_classes
from ..privacy.thresholds import PopulationUniqueness
from ..recode.generalization import STEP, LocalGeneralization
from ..release.files import release_format
from ..release.publish import Release, checked_table_names
from ..sqlgen import build as sb
from ..utility.metrics import (
    Metric,
)
from .costs import RECORDED_COST_METRICS, release_cost_metrics
from .run import checked_search, evaluator, publish_recoded, resolve_metric
from .strategies import STRATEGIES, SearchBudget, SearchResult

_serial = iter(range(1, 2**62))


@dataclasses.dataclass(frozen=True)
class LocalStep:
    """One step: the levels its search chose for the records it was given, how many it was given, how many it
    released on those levels (the rest go to the next step), and its search."""

    levels: dict[str, int]
    records: int
    released: int
    search: SearchResult


@dataclasses.dataclass(frozen=True)
class LocalRecoding:
    """The steps of a local recoding, the records the last one left suppressed, and the record-cost metrics (Loss,
    NCP, non-uniform entropy, and the search's metric when it is one) of the whole release: each record at its
    step's levels, the ones left suppressed at their suppressed cost."""

    steps: list[LocalStep]
    suppressed: int
    metrics: dict[str, float] = dataclasses.field(default_factory=dict)

    def summary(self) -> str:
        steps = "; ".join(f"step {i}: {s.released} of {s.records} records at {s.levels}"
                          for i, s in enumerate(self.steps))
        return f"local recoding in {len(self.steps)} steps ({steps}); {self.suppressed} left suppressed"


def refuse_unsupported(policy: Policy) -> None:
    """Local recoding recodes records on several levels: a model whose verdict needs one level for every record, or
    more than each class's own records, is refused by name (as ARX's ``isLocalRecodingSupported``)."""
    if policy.person is not None:
        raise PolicyError("local recoding counts records: a policy with person= is not supported")
    for model in policy.models:
        if model.population is not None:
            raise PolicyError(f"local recoding does not support {model.describe()}: it compares classes with a "
                              f"population table, whose classes would need one level for every record")
        if prices_classes([model]):
            raise PolicyError(f"local recoding does not support {model.describe()}: it prices classes by the "
                              f"domain shares of one level per attribute")
        if isinstance(model, PopulationUniqueness):
            raise PolicyError(f"local recoding does not support {model.describe()}: population uniqueness is "
                              f"estimated from all classes together, not step by step (ARX refuses it too)")


def local_recoding(workspace: Workspace, bound: BoundPolicy, encoding: Encoding, metric: Metric | str,
                   strategy: str, label: str | None, evaluator_kind: str, memory_budget: int | None,
                   iterations: int, budget: SearchBudget) -> tuple[LocalRecoding, LocalGeneralization]:
    """The steps of a local recoding of ``encoding`` (``bound``'s frequency table), at most ``iterations``, each
    searched by ``strategy`` within ``budget``'s limits; and the transformation that releases them, whose assignment
    (when it has one) is a temporary table the caller drops.  Raises :class:`PolicyNotSatisfied` when the first
    search finds nothing."""
    engine = workspace.engine
    metric = resolve_metric(workspace, bound, metric, label)
    hierarchies = [b.hierarchy for b in bound.hierarchies.values()]
    steps: list[LocalStep] = []
    parts: list[Encoding] = []  # the rows each step leaves suppressed, nested: the next step's
    current, records = encoding, bound.facts.records
    try:
        while len(steps) < iterations and records > 0:
            workspace.announce(f"local recoding, step {len(steps)}: searching {records} records")
            scoped = dataclasses.replace(bound, facts=dataclasses.replace(bound.facts, records=records))
            with evaluator(workspace, scoped, [metric], label, evaluator_kind, memory_budget, current) as nodes:
                result = STRATEGIES[strategy]().search(nodes, SearchBudget(budget.time_limit, budget.check_limit))
            if not result.found:
                if not steps:
                    raise PolicyNotSatisfied(result.summary())
                break
            left = _suppressed_part(engine, scoped, current, result.levels)
            remaining = left.records()
            if remaining == records and steps:  # a later step releases nothing: ARX stops here too
                left.close()
                break
            steps.append(LocalStep(result.levels, records, records - remaining, result))
            parts.append(left)
            current, records = left, remaining
        stepped = _steps_of_rows(engine, encoding, parts)
        try:
            assignment = _assignment(engine, encoding, stepped, len(steps))
            measured = _release_metrics(encoding, hierarchies, steps, stepped, [metric, *RECORDED_COST_METRICS])
        finally:
            engine.run(sb.drop("TABLE", stepped))
    finally:
        for part in parts:
            part.close()
    transformation = LocalGeneralization([s.levels for s in steps], assignment, [s.released for s in steps],
                                         encoding.strata)
    return LocalRecoding(steps, records, measured), transformation


def _row_keys(encoding: Encoding) -> list[str]:
    """The columns that tell a frequency table's combinations apart for the steps: its strata (a combination of
    quasi-identifiers may be suppressed in one stratum and not in another) and the level-0 codes."""
    return [*encoding.strata, *(code_column(i, 0) for i in range(len(encoding.attributes)))]


def _same_row(keys: Sequence[str], left: str, right: str) -> exp.Expression:
    return sb.and_all(exp.NullSafeEQ(this=sb.col(c, left), expression=sb.col(c, right)) for c in keys)


def _release_metrics(encoding: Encoding, hierarchies, steps: Sequence[LocalStep], stepped: exp.Table,
                     metrics: Sequence[Metric]) -> dict[str, float]:
    """Each record-cost metric of ``metrics`` over the whole release: every record costs what its step's levels
    cost it, the ones the last step left suppressed their suppressed cost (as a node's value counts them), summed
    over the frequency table's rows (``stepped``: :func:`_steps_of_rows`)."""
    leaves = [code_column(i, 0) for i in range(len(encoding.attributes))]
    on = _same_row(_row_keys(encoding), "f", "s")
    arrays = encoding.engine.arrays(
        exp.select(*[sb.col(c, "f") for c in leaves], sb.col(COUNT, "f"),
                   exp.func("COALESCE", sb.col(STEP, "s"), exp.Literal.number(0)).as_(STEP, quoted=True))
        .from_(exp.alias_(encoding.table, "f", quoted=True))
        .join(exp.alias_(stepped, "s", quoted=True), on=on, join_type="LEFT"))
    step = np.asarray(arrays[STEP], dtype=np.int64)
    suppressed = step >= len(steps)
    levels = np.array([[s.levels[a] for a in encoding.attributes] for s in steps])[np.minimum(step, len(steps) - 1)]
    cost_columns = np.where(suppressed[:, None], np.array([h.levels for h in hierarchies]), levels)
    return release_cost_metrics(encoding, hierarchies, metrics, [np.asarray(arrays[c], dtype=np.int64) for c in leaves],
                                np.asarray(arrays[COUNT], dtype=np.float64), cost_columns)


def _suppressed_part(engine: Engine, bound: BoundPolicy, encoding: Encoding, levels: dict[str, int]) -> Encoding:
    """The rows of ``encoding`` whose class at ``levels`` the policy suppresses (drop mode's fixed point and the risk
    thresholds' cut included, as a check and a publish suppress them), as a part of it."""
    policy = bound.policy
    classes = encoding.classes(levels)
    verdicts = sb.table(f"__duckanon_local_verdicts_{next(_serial)}")
    engine.run(sb.create_table_as(verdicts, class_verdicts(classes, policy.models), temporary=True))
    try:
        verdict_report(engine, verdicts, classes, policy.models, key_names=policy.class_keys,
                       allowed_suppressed=bound.allowed_suppressed, drop=policy.drops,
                       replaced_checked=policy.checks_replaced)
        codes = [*encoding.strata, *(code_column(i, levels[a]) for i, a in enumerate(encoding.attributes))]
        matched = sb.and_all(exp.NullSafeEQ(this=sb.col(key, "v"), expression=sb.col(code, encoding.table.name))
                             for key, code in zip(classes.key_columns, codes))
        return encoding.part(exp.Exists(this=exp.select(exp.Literal.number(1)).from_(
            exp.alias_(verdicts, "v", quoted=True)).where(exp.and_(matched, sb.col(VIOLATED, "v")))))
    finally:
        engine.run(sb.drop("TABLE", verdicts))


def _steps_of_rows(engine: Engine, encoding: Encoding, parts: Sequence[Encoding]) -> exp.Table:
    """A temporary table of each combination of quasi-identifiers (level-0 codes, within its stratum) past step 0
    with its step (:data:`STEP`): how many of the nested ``parts`` (the rows each step left suppressed) hold it, so
    that the step after the last one marks the combinations left suppressed."""
    leaves = _row_keys(encoding)
    held = [exp.select(*[sb.col(c) for c in leaves]).from_(part.table).distinct() for part in parts]
    union = held[0]  # step 0 always leaves a part, empty when it suppresses nothing
    for more in held[1:]:
        union = exp.union(union, more, distinct=False)
    table = sb.table(f"__duckanon_local_steps_{next(_serial)}")
    engine.run(sb.create_table_as(table, exp.select(*[sb.col(c) for c in leaves], exp.cast(
        exp.func("COUNT", exp.Star()), exp.DataType.build("INTEGER")).as_(STEP, quoted=True))
        .from_(union.subquery("held")).group_by(*[sb.col(c) for c in leaves]), temporary=True))
    return table


def _assignment(engine: Engine, encoding: Encoding, stepped: exp.Table, steps: int) -> exp.Table | None:
    """A temporary table of each combination of quasi-identifiers (original values) the steps after the first
    generalize, with its step (:data:`STEP`; those left suppressed stay on the last step's levels, where the
    publish suppresses them); None when there is no later step."""
    if steps < 2:
        return None
    last = exp.func("LEAST", sb.col(STEP, "r"), exp.Literal.number(steps - 1))
    table = sb.table(f"__duckanon_local_assigned_{next(_serial)}")
    engine.run(sb.create_table_as(table, encoding.decoded(
        stepped, [*(sb.col(s, "r") for s in encoding.strata), last.as_(STEP, quoted=True)]), temporary=True))
    return table


def anonymize_locally(workspace: Workspace, source, policy: Policy | str, path: str | os.PathLike,
                      metric: Metric | str, strategy: str, label: str | None, table: str, format: str | None,
                      evaluator_kind: str = "auto", memory_budget: int | None = None, iterations: int = 100,
                      time_limit: float | None = None, check_limit: int | None = None
                      ) -> tuple[LocalRecoding, Release]:
    """Search the best full-domain generalization, recode the records it suppresses locally (:func:`local_recoding`)
    and publish the whole: one read of the source, whose frequency table every step's search shares."""
    release_format(path, format)
    checked_table_names(source, table)
    budget = checked_search(strategy, evaluator_kind, memory_budget, time_limit, check_limit)
    iterations = int(checked_number(iterations, "iterations", "local recoding", whole=True, low=1))
    return publish_recoded(workspace, source, policy, path, table, format, refuse_unsupported,
                           lambda bound, encoding: local_recoding(workspace, bound, encoding, metric, strategy, label,
                                                                  evaluator_kind, memory_budget, iterations, budget))
