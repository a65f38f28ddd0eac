"""SafePub: an (ε,δ)-differentially private release by full-domain generalization of a random sample.

The algorithm of Bild, Kuhn and Prasser ("SafePub: A Truthful Data Anonymization Algorithm With Strong Privacy
Guarantees", PoPETs 2018(1), Algorithm 1; ARX 3.9.2's ``DataDependentEDDPAlgorithm``), over the policy's
:class:`~duckanon.privacy.differential.EDDifferentialPrivacy` model:

1. every record of the source is drawn with probability β (one draw per record from the operating system's secure
   generator; the sample is a temporary table of the drawn records);
2. :class:`SafePubSearch` walks the lattice from its top: each step adds the current pivot's direct specializations
   to the candidates, removes the pivot, and draws the next pivot from the candidates by the exponential mechanism
   over their scores on the sample (:class:`~duckanon.utility.metrics.SafePubScore`, with ``search_epsilon / steps``
   each); the result is the pivot with the best score (ties: the lower node), as ARX tracks its optimum;
3. the sample is published at that node with every class of fewer than k sampled records dropped: a release of
   k-anonymity with the derived k, which the publish checks and verifies and a recipient can verify again.

A differentially private release shows neither the source's size nor the sample's: its info leaves the source's
records and the suppressed records out (NULL), as the mechanism releases neither.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import warnings

import numpy as np
from sqlglot import exp

from ..declare.budget import ledger_at, source_key
from ..declare.policy import Policy
from ..deferred import pandas as pd
from ..encode.binding import BoundPolicy, Workspace, bind
from ..encode.encoding import COUNT
from ..errors import PolicyError, PolicyNotSatisfied
from ..privacy.differential import (
    EDDifferentialPrivacy,
    RandomSource,
    SecureRandom,
    differentially_private,
    exponential_choice,
)
from ..recode.generalization import FullDomainGeneralization
from ..release.files import release_format
from ..release.publish import Release, checked_table_names, publish
from ..sqlgen import build as sb
from ..utility.metrics import SAFEPUB_SCORES, Metric, SafePubScore
from .budget import SearchBudget, SearchResult, SearchStrategy
from .evaluator import NodeEvaluator
from .run import evaluator

_ID, _DRAWN, _NUMBER = "__duckanon_combination", "__duckanon_drawn", "__duckanon_copy"


class SafePubSearch(SearchStrategy):
    """SafePub's walk down the lattice by the exponential mechanism (see the module): ``steps`` choices, each with
    ``step_epsilon`` of the budget, over the objective's scores (the negated values of a
    :class:`~duckanon.utility.metrics.SafePubScore`)."""

    name = "safepub"
    lists_lattice = False

    def __init__(self, steps: int, step_epsilon: float, random: RandomSource):
        self.steps, self.step_epsilon, self.random = steps, step_epsilon, random

    def best_node(self, evaluator: NodeEvaluator, budget: SearchBudget) -> int | None:
        lattice = evaluator.lattice
        pivot = lattice.index(lattice.top)

        def score(index: int) -> float:
            return -float(evaluator.value(index))

        evaluator.evaluate_many(budget.allow([pivot], None))
        best = pivot
        candidates: dict[int, float] = {pivot: score(pivot)}
        for _ in range(self.steps):
            # As ARX: a former pivot that is a specialization of this one becomes a candidate again.
            fresh = [p for p in lattice.predecessors(pivot) if p not in candidates]
            evaluator.evaluate_many(budget.allow(fresh, best))
            candidates.update((p, score(p)) for p in fresh)
            del candidates[pivot]
            if not candidates:
                break
            indices = list(candidates)
            pivot = indices[exponential_choice([candidates[i] for i in indices], self.step_epsilon, self.random)]
            if (candidates[pivot], -lattice.node_height(pivot)) > (score(best), -lattice.node_height(best)):
                best = pivot
        return best


def score_metric(metric: Metric | str, model: EDDifferentialPrivacy, records: int) -> SafePubScore:
    """The SafePub score a metric name stands for, with the model's k over ``records`` (the source's n)."""
    if isinstance(metric, SafePubScore):
        return metric
    name = metric.name if isinstance(metric, Metric) else metric
    scores = {**SAFEPUB_SCORES, "loss": SAFEPUB_SCORES["arx-loss"], **{s.name: s for s in SAFEPUB_SCORES.values()}}
    if name not in scores:
        raise PolicyError(f"{model.name} picks its transformation by one of SafePub's score functions; metric "
                          f"{name!r} has none. Give one of: {', '.join(scores)} ('loss' and 'arx-loss' score "
                          f"granularity, 'arx-precision' intensity, 'dm' discernibility, 'average-class-size' and "
                          f"'arx-aecs' group size)")
    return scores[name](model.minimum_size, records)


def refuse_beyond_safepub(policy: Policy) -> EDDifferentialPrivacy:
    """The policy's differential-privacy model, once the policy is one SafePub releases: that model alone, every
    released column a quasi-identifier with a hierarchy (any other column would be released beside the sample's
    generalized values, outside the guarantee), suppression by dropping, no limit on it."""
    model = differentially_private(policy.models)
    if model is None:
        raise PolicyError("the policy has no EDDifferentialPrivacy model")
    others = [m.describe() for m in policy.models if m is not model]
    if others:
        raise PolicyError(f"{model.name} is enforced alone: remove {', '.join(others)} (its release is k-anonymous "
                          f"with k = {model.minimum_size} anyway)")
    released = [*policy.sensitive, *policy.insensitive, *policy.strata, *policy.methods]
    if released or policy.others == "insensitive" or policy.person is not None:
        named = released or ([policy.person] if policy.person else ["the columns without a role (others='insensitive')"])
        raise PolicyError(f"{model.name} releases quasi-identifiers only: {', '.join(map(str, named))} would be "
                          f"released beside them outside the guarantee; make them quasi-identifiers (a hierarchy "
                          f"of one level keeps a column as it is) or drop them (identifiers, others='drop')")
    if policy.suppression != "drop":
        raise PolicyError(f"{model.name} drops the classes of fewer than k sampled records and the records not "
                          f"sampled: give suppression='drop', not {policy.suppression!r}")
    if policy.suppression_limit != 1.0 or policy.max_suppressed is not None:
        raise PolicyError(f"{model.name} suppresses whatever the derived k asks (a limit would make the choice depend "
                          f"on the data outside the mechanism): give suppression_limit=1.0 and no max_suppressed")
    return model


def anonymize(workspace: Workspace, source, policy: Policy | str, path: str | os.PathLike, metric: Metric | str,
              label: str | None, table: str, format: str | None, evaluator_kind: str = "auto",
              memory_budget: int | None = None, random: RandomSource | None = None,
              ledger: str | os.PathLike | None = None, budget_key: str | None = None
              ) -> tuple[SearchResult, Release]:
    """Release ``source`` under ``policy`` (an :class:`EDDifferentialPrivacy` policy) by SafePub (see the module),
    the transformation scored by ``metric``'s SafePub score.  Its ε and δ are spent from the source's privacy budget
    (:mod:`duckanon.declare.budget`: the database's ledger, or the DuckDB file ``ledger``; ``budget_key`` names the
    source there, by default :func:`source_key`) before the data is sampled, or the release is refused.  ``random`` is for tests only: a release draws from the operating
    system's secure generator."""
    release_format(path, format)
    checked_table_names(source, table)
    policy = workspace.catalog.policy(policy) if isinstance(policy, str) else policy
    model = refuse_beyond_safepub(policy)
    random = SecureRandom() if random is None else random
    with bind(workspace, source, policy, safepub=True) as full, contextlib.ExitStack() as stack:
        records = full.facts.records
        score = score_metric(metric, model, records)
        with ledger_at(workspace.engine, ledger) as book:
            book.spend(source_key(source) if budget_key is None else budget_key, model.epsilon, model.delta,
                       f"SafePub release ({model.describe()})", os.path.abspath(path))
        sampling = model.sampling
        workspace.announce(f"drawing each of the {records:,} records with probability β = {sampling.beta:.4g}; "
                           f"classes of fewer than k = {sampling.k} drawn records are dropped")
        sample = _sample(workspace, full, sampling.beta, random)
        stack.callback(workspace.engine.run, sb.drop("TABLE", sample))
        with warnings.catch_warnings():  # δ against 1/n was judged on the source, not on the sample
            warnings.simplefilter("ignore")
            # The sample holds the quasi-identifiers alone: the columns the policy drops are not in it to name.
            drawn = stack.enter_context(bind(workspace, sample, dataclasses.replace(policy, identifiers=[],
                                                                                     others="drop"), safepub=True))
        with evaluator(workspace, drawn, [score], label, evaluator_kind, memory_budget) as nodes:
            workspace.announce(f"SafePub: {model.steps} steps from the top of {nodes.lattice.size:,} "
                               f"transformations, ε = {model.step_epsilon:.4g} each")
            result = SafePubSearch(model.steps, model.step_epsilon, random).search(nodes, SearchBudget())
        if not result.found:
            raise PolicyNotSatisfied(result.summary())
        # No metric is recorded: a score of the sample is not part of what the mechanism releases.
        release = publish(workspace, drawn, FullDomainGeneralization(result.levels), path, table, format, {},
                          read=[full.source])
    # For the custodian, the source's records and those not released (not drawn, or in classes below k); its report
    # shows the release alone: the sample is gone, and the source's figures are outside the guarantee.
    release = dataclasses.replace(release, records_in=records, suppressed=records - release.records_out,
                                  origin=(workspace, None, policy))
    return result, release


def _sample(workspace: Workspace, bound: BoundPolicy, beta: float, random: RandomSource) -> exp.Table:
    """A temporary table of the drawn records: per distinct combination of the source (all its columns are
    quasi-identifiers), as many copies as of its records were drawn, one draw per record."""
    engine = workspace.engine
    numbered = sb.table(f"{bound.counted.name}_numbered")
    # Numbered in the order of the combinations (distinct, so the order is total; Spark numbers only in an order).
    order = exp.Order(expressions=[exp.Ordered(this=sb.col(c)) for c in bound.quasi_identifiers])
    engine.run(sb.create_table_as(numbered, exp.select(exp.Star(), exp.Window(
        this=exp.func("ROW_NUMBER"), order=order).as_(_ID, quoted=True)).from_(bound.counted), temporary=True))
    try:
        arrays = engine.arrays(exp.select(sb.col(_ID), sb.col(COUNT)).from_(numbered).order_by(sb.col(_ID)))
        drawn = random.sampled(arrays[COUNT], beta)
        if not drawn.any():
            raise PolicyNotSatisfied(f"none of the {int(arrays[COUNT].sum()):,} records was drawn (each with "
                                     f"probability β = {beta:.4g}): there is nothing to release")
        draws = pd.DataFrame({_ID: arrays[_ID][drawn > 0], _DRAWN: drawn[drawn > 0]})
        copies = pd.DataFrame({_NUMBER: np.arange(1, int(drawn.max()) + 1, dtype=np.int64)})
        sample = sb.table(f"{bound.counted.name}_sample")
        columns = [sb.col(c, "c") for c in bound.quasi_identifiers]
        with engine.registered(draws) as draws_table, engine.registered(copies) as copies_table:
            every = exp.select(exp.Star())
            query = (exp.select(*columns).from_(every.from_(numbered).subquery("c"))
                     .join(every.from_(draws_table).subquery("d"),
                           on=exp.EQ(this=sb.col(_ID, "c"), expression=sb.col(_ID, "d")))
                     .join(every.from_(copies_table).subquery("n"),
                           on=exp.LTE(this=sb.col(_NUMBER, "n"), expression=sb.col(_DRAWN, "d"))))
            engine.run(sb.create_table_as(sample, query, temporary=True))
        return sample
    finally:
        engine.run(sb.drop("TABLE", numbered))
