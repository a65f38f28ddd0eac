"""Running a full-domain search: a bound source's evaluator, the search, the solution space, and publishing a node.

The evaluator is built here, over the frequency table :func:`~duckanon.encode.binding.bind` reads, with the metrics
resolved by name (the weighted Loss forms weigh the quasi-identifiers in SQL first): in process
(:class:`~.memory_evaluator.MemoryNodeEvaluator`) when its arrays fit the memory budget, in SQL otherwise, or as the
caller chooses.  The strategies know only its interface (:mod:`.evaluator`).  A published generalization records its
node's value under every metric.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TypeVar

import numpy as np
from sqlglot import exp

from ..declare.policy import Policy
from ..deferred import pandas as pd
from ..encode.binding import BoundPolicy, EncodedSource, Workspace, bind, encoded_source
from ..encode.encoding import Encoding
from ..errors import PolicyError, PolicyNotSatisfied
from ..hierarchy.hierarchy import SCHEMA
from ..parameters import checked_number
from ..privacy.people import population_models, valued_models
from ..privacy.thresholds import risk_thresholds
from ..recode.generalization import FullDomainGeneralization, Transformation
from ..release.files import release_format
from ..release.publish import (
    Release,
    checked_table_names,
    publish,
    released_class_sizes,
)
from ..sqlgen import build as sb
from ..utility.metrics import METRICS, WEIGHTED, Loss, Metric, metric_names
from ..utility.weights import attribute_weights
from . import strategies
from .evaluator import NodeEvaluator
from .memory_evaluator import DEFAULT_MEMORY_BUDGET, MemoryNodeEvaluator, memory_plan
from .person_evaluator import PersonNodeEvaluator
from .sql_evaluator import SqlNodeEvaluator
from .strategies import STRATEGIES, SearchBudget, SearchResult
from .stratified import StratifiedNodeEvaluator, sums_over_strata

Recoded = TypeVar("Recoded")

EVALUATOR_CLASSES: dict[str, type[NodeEvaluator]] = {"memory": MemoryNodeEvaluator, "sql": SqlNodeEvaluator}
EVALUATORS = ("auto", *EVALUATOR_CLASSES)


def resolve_metric(workspace: Workspace, bound: BoundPolicy, metric: Metric | str, label: str | None) -> Metric:
    """A metric given by name as its object; ``label`` is the class column ``mi-loss`` weighs attributes by."""
    if isinstance(metric, Metric):
        return metric
    if metric in WEIGHTED:
        weights = attribute_weights(workspace.engine, bound.source, bound.quasi_identifiers, kind=WEIGHTED[metric],
                                    label=label)
        return Loss(dict(zip(weights["attribute"], weights["weight"])), name=metric)
    if metric not in METRICS:
        raise PolicyError(f"unknown metric {metric!r}; known: {', '.join(metric_names())}")
    return METRICS[metric]()


def checked_evaluator(kind: str, memory_budget: int | None) -> int | None:
    """``memory_budget`` checked (bytes, or None for the default) after ``kind`` (one of :data:`EVALUATORS`)."""
    if kind not in EVALUATORS:
        raise PolicyError(f"unknown evaluator {kind!r}; known: {', '.join(EVALUATORS)}")
    if memory_budget is None:
        return None
    return checked_number(memory_budget, "memory_budget", "evaluator", whole=True, low=0, note="bytes")


@contextlib.contextmanager
def evaluator(workspace: Workspace, bound: BoundPolicy, metrics: Sequence[Metric | str], label: str | None,
              kind: str = "auto", memory_budget: int | None = None, encoding: Encoding | None = None,
              snapshots: bool = True) -> Iterator[NodeEvaluator]:
    """The node evaluator of ``bound``'s source and policy under ``metrics``, over an encoding of its frequency
    table (``encoding``, when the source was encoded before; it is then left open): ``kind`` ``memory`` evaluates in
    process, ``sql`` in the engine, ``auto`` in process when its arrays fit ``memory_budget`` bytes (by default
    ``DEFAULT_MEMORY_BUDGET``).  Without ``snapshots`` an evaluator in process keeps none, and needs no room for
    them: for evaluating one node."""
    memory_budget = checked_evaluator(kind, memory_budget)
    resolved = [resolve_metric(workspace, bound, m, label) for m in metrics]
    owned = encoding is None
    if owned:
        workspace.announce("encoding the source into a frequency table")
        encoding = bound.encoding(workspace.engine)
    built = None
    try:
        policy = bound.policy
        allowed = bound.allowed_suppressed
        suppressed_monotone = all(m.monotone_under_suppression for m in policy.models)
        monotone = (allowed == 0 and all(m.monotone_under_generalization for m in policy.models)
                    ) or suppressed_monotone
        if policy.person is not None and (valued_models(policy.models) or risk_thresholds(policy.models)
                                          or population_models(policy.models)):
            # People suppressed for a model over values leave every class of theirs (a fixed point), and a risk
            # threshold's cut of signature groups, or a population's signature groups, are not proven monotone:
            # none prunes.
            monotone = suppressed_monotone = False
        hierarchies = [b.hierarchy for b in bound.hierarchies.values()]
        arguments = (workspace.engine, encoding, hierarchies, policy.models, resolved, allowed, monotone,
                     workspace.progress, suppressed_monotone)
        settings = {"suppressed_class": policy.checks_replaced, "drops": policy.drops}
        if policy.person is not None:
            if kind == "sql":
                raise PolicyError("a policy with person= is searched in process (the SQL evaluator counts records); "
                                  "use evaluator='memory' or 'auto'")
            budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
            needed, leaves = memory_plan(workspace.engine, encoding, resolved, budget)
            if kind == "auto" and needed > budget:  # no SQL evaluator to fall back on: refuse rather than exhaust RAM
                raise PolicyError(f"a policy with person= is searched in process, which needs {_size(needed)} here, "
                                  f"above the memory budget of {_size(budget)}: give a larger memory_budget "
                                  f"(--memory-budget), or evaluator='memory' to search regardless")
            workspace.announce(f"evaluating nodes in process, by people's signatures: they need {_size(needed)}")
            built = PersonNodeEvaluator(*arguments, **settings, leaves=leaves, person=policy.person, k=policy.person_k,
                                        record_table=policy.record_table, lacking=bound.lacking)
        else:
            kind, leaves = _chosen(workspace, encoding, bound, resolved, kind, memory_budget, snapshots)
            chosen = EVALUATOR_CLASSES[kind]
            layout = {"leaves": leaves, "snapshots": snapshots} if kind == "memory" else {}
            if policy.strata:  # one evaluator per stratum, over its part, without progress: the strata report as one
                built = StratifiedNodeEvaluator(*arguments[1:], **settings, build=lambda part, models: chosen(
                    workspace.engine, part, hierarchies, models, resolved, allowed, monotone, None,
                    suppressed_monotone, **settings, **layout))
            else:
                built = chosen(*arguments, **settings, **layout)
        yield built
    finally:
        if built is not None:
            built.close()
        if owned:
            encoding.close()


def _chosen(workspace: Workspace, encoding: Encoding, bound: BoundPolicy, metrics: Sequence[Metric], kind: str,
            memory_budget: int | None, snapshots: bool) -> tuple[str, bool]:
    """``memory`` or ``sql``: ``kind``, or for ``auto`` whether the in-process arrays (with room for ``snapshots``
    or not) fit the budget; announced.  And, in process, whether the arrays are the original values' codes alone
    (:func:`memory_plan`)."""
    budget = DEFAULT_MEMORY_BUDGET if memory_budget is None else memory_budget
    needed, leaves = ((0, False) if kind == "sql"
                      else memory_plan(workspace.engine, encoding, metrics, budget, snapshots))
    if kind != "auto":
        workspace.announce(f"evaluating nodes {_WHERE[kind]}, as asked")
        return kind, leaves
    kind = "memory" if needed <= budget else "sql"
    codes = ", reading the original values' codes alone" if kind == "memory" and leaves else ""
    workspace.announce(f"evaluating nodes {_WHERE[kind]}{codes}: they need {_size(needed)} in memory, the budget is "
                       f"{_size(budget)}")
    return kind, leaves


_WHERE = {"memory": "in process", "sql": "in SQL"}


def _size(count: int) -> str:
    """A byte count for people: 40 KB, 12 MB, 1.5 GB."""
    if count >= 1e9:
        return f"{count / 1e9:.1f} GB"
    return f"{count / 1e6:.0f} MB" if count >= 1e6 else f"{count / 1e3:.0f} KB"


def publish_recoded(workspace: Workspace, source, policy: Policy | str, path: str | os.PathLike, table: str,
                    format: str | None, refuse: Callable[[Policy], None],
                    recode: Callable[[BoundPolicy, Encoding], tuple[Recoded, Transformation]]
                    ) -> tuple[Recoded, Release]:
    """Bind ``source`` to ``policy`` (which ``refuse`` may refuse first), encode it once, let ``recode`` turn the
    frequency table into its result (with ``summary()`` and the ``metrics`` the release records) and a transformation
    whose ``assignment`` is a temporary table or None, publish the transformation and drop the assignment: the driver
    of the algorithms that recode records on levels of their own (local recoding, cell suppression)."""
    started = time.perf_counter()
    with encoded_source(workspace, source, policy) as encoded:
        bound = encoded.bound
        refuse(bound.policy)
        result, transformation = recode(bound, encoded.encoding)
        try:
            workspace.announce(f"{result.summary()} ({time.perf_counter() - started:.1f} s); publishing")
            release = publish(workspace, bound, transformation, path, table, format, result.metrics)
        finally:
            if transformation.assignment is not None:
                workspace.engine.run(sb.drop("TABLE", transformation.assignment))
    return result, release


def checked_search(strategy: str, evaluator_kind: str, memory_budget: int | None, time_limit: float | None,
                   check_limit: int | None) -> SearchBudget:
    """A search's settings checked before any work: the strategy known, the evaluator and its budget, and the limits
    the strategy needs; the budget they give."""
    if strategy not in STRATEGIES:
        raise PolicyError(f"unknown search strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
    checked_evaluator(evaluator_kind, memory_budget)
    budget = SearchBudget(time_limit, check_limit)
    STRATEGIES[strategy].check_budget(budget.time_limit, budget.check_limit)
    return budget


def search(workspace: Workspace, source, policy: Policy | str, metric: Metric | str, strategy: str,
           label: str | None, evaluator_kind: str = "auto", memory_budget: int | None = None,
           time_limit: float | None = None, check_limit: int | None = None) -> SearchResult:
    """The full-domain generalization that satisfies ``policy`` and minimizes ``metric``, found by ``strategy``
    (nodes evaluated as ``evaluator_kind`` and ``memory_budget`` choose, see :func:`evaluator`); ``source`` may be an
    :class:`EncodedSource` (see :func:`~duckanon.encode.binding.encoded_source`); within
    ``time_limit`` seconds and ``check_limit`` nodes evaluated, when given (see
    :class:`~duckanon.search.strategies.SearchBudget`)."""
    budget = checked_search(strategy, evaluator_kind, memory_budget, time_limit, check_limit)
    with (encoded_source(workspace, source, policy) as encoded,
          evaluator(workspace, encoded.bound, [metric], label, evaluator_kind, memory_budget,
                    encoded.encoding) as nodes):
        workspace.announce(f"{strategy} search over {nodes.lattice.size} transformations")
        return STRATEGIES[strategy]().search(nodes, budget)


def solution_space(workspace: Workspace, source, policy: Policy | str, metrics: Sequence[Metric | str],
                   label: str | None, table: str | None, evaluator_kind: str = "auto",
                   memory_budget: int | None = None) -> pd.DataFrame:
    """Every transformation that satisfies ``policy`` with its suppressed records and each metric's value; stored as
    table ``anon.<table>`` when ``table`` is given."""
    checked_evaluator(evaluator_kind, memory_budget)
    with (encoded_source(workspace, source, policy) as encoded,
          evaluator(workspace, encoded.bound, metrics, label, evaluator_kind, memory_budget,
                    encoded.encoding) as nodes):
        frame = strategies.solution_space(nodes)
    if table is not None:
        with workspace.engine.registered(frame) as space:
            workspace.engine.run(sb.create_table_as(sb.table(table, SCHEMA), exp.select(exp.Star()).from_(space),
                                                    replace=True))
    return frame


@dataclasses.dataclass(frozen=True)
class FrontierPoint:
    """The optimum for one value of the varied parameter: its levels and metric value, and the class sizes of the
    release it gives (suppression included), from which its risk follows; ``levels`` is None when nothing satisfies
    the policy at that value."""

    value: object
    levels: dict[str, int] | None
    metric: float | None
    suppressed: int
    sizes: np.ndarray
    counts: np.ndarray


def frontier(workspace: Workspace, source, policy: Policy | str, parameter: str, values: Sequence[object],
             metric: Metric | str, label: str | None = None, evaluator_kind: str = "auto",
             memory_budget: int | None = None) -> list[FrontierPoint]:
    """For each of ``values`` of ``parameter`` (``k``, ``l``, ``t`` ...: set in every model that has it), the optimal
    full-domain generalization under ``metric`` and what its release would be: one read and encoding of the source
    for all of them, each search on the fast evaluator."""
    checked_evaluator(evaluator_kind, memory_budget)
    policy = workspace.catalog.policy(policy) if isinstance(policy, str) else policy
    varied_policies = [policy.with_parameter(parameter, value) for value in values]  # bad values fail before work
    points = []
    with bind(workspace, source, policy) as bound:
        encoding = bound.encoding(workspace.engine)
        try:
            for position, (value, varied_policy) in enumerate(zip(values, varied_policies), 1):
                workspace.announce(f"frontier: {parameter} = {value} ({position} of {len(values)})")
                varied = dataclasses.replace(bound, policy=varied_policy)
                with evaluator(workspace, varied, [metric], label, evaluator_kind, memory_budget, encoding) as nodes:
                    result = strategies.STRATEGIES["optimal"]().search(nodes, SearchBudget(None, None))
                if not result.found:
                    points.append(FrontierPoint(value, None, None, 0, np.zeros(0, np.int64), np.zeros(0, np.int64)))
                    continue
                sizes, counts, suppressed = released_class_sizes(workspace, varied,
                                                                 FullDomainGeneralization(result.levels))
                points.append(FrontierPoint(value, result.levels, float(result.best.values[result.metric]),
                                            suppressed, sizes, counts))
        finally:
            encoding.close()
    return points


def node_metrics(workspace: Workspace, encoded: EncodedSource, generalization: FullDomainGeneralization
                 ) -> dict[str, float]:
    """The node's value under every metric that needs no label (the weighted Loss forms do) and, under a policy with
    strata, is a sum over them.  The metrics are evaluated in process a group at a time, each group as many as fit
    the memory budget together (with no room for snapshots: one node is evaluated): all at once would fall back on SQL
    on a large table, where this one node takes the time of hundreds of in-process checks."""
    bound = encoded.bound
    names = [m for m in metric_names() if m not in WEIGHTED
             and (not bound.policy.strata or sums_over_strata(METRICS[m]()))]
    values = {}
    for group in _fitting_groups(workspace, encoded, names):
        with evaluator(workspace, bound, group, None, encoding=encoded.encoding, snapshots=False) as nodes:
            node = nodes.lattice.node_of(bound.levels(generalization.levels))
            values.update(nodes.evaluate(nodes.lattice.index(node)).values)
    return {name: values[name] for name in names}


def _fitting_groups(workspace: Workspace, encoded: EncodedSource, names: Sequence[str]) -> list[list[str]]:
    """``names`` in order, cut into groups whose in-process evaluator fits the default memory budget (a metric that
    alone does not fit is a group of its own, evaluated in SQL)."""
    if encoded.bound.policy.person is not None:  # evaluated by people's signatures, in process, whatever the size
        return [list(names)]
    groups: list[list[str]] = []
    for name in names:
        widened = [*groups[-1], name] if groups else None
        if widened is not None and memory_plan(workspace.engine, encoded.encoding, [METRICS[m]() for m in widened],
                                               DEFAULT_MEMORY_BUDGET, snapshots=False)[0] <= DEFAULT_MEMORY_BUDGET:
            groups[-1] = widened
        else:
            groups.append([name])
    return groups


def publish_generalization(workspace: Workspace, source, policy: Policy | str | None,
                           generalization: FullDomainGeneralization, path: str | os.PathLike, table: str,
                           format: str | None, found: Mapping[str, float] | None = None) -> Release:
    """Publish a full-domain generalization of ``source`` (an :class:`EncodedSource` is published from its own
    binding and encoding, not read again); its release records the node's metrics and ``found``, what a search
    measured of it."""
    release_format(path, format)  # an unknown extension or a bad table name fails before any work
    checked_table_names(source, table)
    with encoded_source(workspace, source, policy) as encoded:
        # A rank-aggregated loss is recorded as its number (ARX's mean of the attributes' losses).
        metrics = {name: float(value) for name, value in {**node_metrics(workspace, encoded, generalization),
                                                          **(found or {})}.items()}
        return publish(workspace, encoded.bound, generalization, path, table, format, metrics)


def anonymize(workspace: Workspace, source, policy: Policy | str, path: str | os.PathLike, metric: Metric | str,
              strategy: str, label: str | None, table: str, format: str | None, evaluator_kind: str = "auto",
              memory_budget: int | None = None, time_limit: float | None = None, check_limit: int | None = None
              ) -> tuple[SearchResult, Release]:
    """Search the best transformation (within the limits, as :func:`search`) and publish it, both over one reading
    and encoding of the source (an :class:`EncodedSource`'s own)."""
    release_format(path, format)
    checked_table_names(source, table)
    checked_search(strategy, evaluator_kind, memory_budget, time_limit, check_limit)
    with encoded_source(workspace, source, policy) as encoded:
        result = search(workspace, encoded, None, metric, strategy, label, evaluator_kind, memory_budget, time_limit,
                        check_limit)
        if not result.found:
            raise PolicyNotSatisfied(result.summary())
        return result, publish_generalization(workspace, encoded, None, FullDomainGeneralization(result.levels),
                                              path, table, format, result.best.values)
