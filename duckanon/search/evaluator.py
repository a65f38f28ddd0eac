"""The node-evaluator interface: all that a search over the generalization lattice knows of models, metrics and data.

A search asks of a node (a vector of levels, one per quasi-identifier) whether it satisfies the policy within the
suppression limit, its metric values and a lower bound of them for its generalizations; a :class:`NodeEvaluator`
answers.  The strategies see nothing else, so every strategy works with every model, every metric and every
evaluator.  :class:`~duckanon.search.sql_evaluator.SqlNodeEvaluator` answers with batched SQL queries over the
encoded frequency table (a Spark evaluator reuses it with another engine); an in-process evaluator is to answer the
same from the frequency table's arrays.

Monotonicity: without suppression every model here is monotone (generalization merges classes, and the union of
classes satisfying a model satisfies it).  With suppression only models for which a class merged with any satisfying
class satisfies again keep the suppressed-record count monotone: k-anonymity, distinct l-diversity and p-sensitive
k-anonymity (:attr:`~duckanon.privacy.models.PrivacyModel.monotone_under_suppression`).  For the others a search falls
back to lower-bound pruning alone, which is still exact: every metric's bound holds whichever records are suppressed.

What is monotone is "within the suppression limit"; a node *satisfies* the policy when, besides, the suppressed
records -- replaced by ``*``, one class of their own -- satisfy it too (size-only models: from the node's totals;
others: one more look at the data, made only for a node about to become the best).  So tags follow the limit, and
only nodes that satisfy become the best: a search returns what publishing releases unchanged.  Dropped records form
no class, but they leave the table that models such as t-closeness compare with
(:attr:`~duckanon.privacy.models.PrivacyModel.compares_with_table`): with such a model a node suppresses what drop
mode's fixed point does (:func:`~duckanon.privacy.checks.settle_and_cut`), as publishing does, and the policy is not
monotone under suppression.
"""

from __future__ import annotations

import dataclasses
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np

from ..encode.encoding import Encoding
from ..errors import PolicyError
from ..hierarchy.hierarchy import Hierarchy
from ..privacy.models import PrivacyModel
from ..privacy.thresholds import risk_thresholds
from ..utility.metrics import Metric, NodeTotals
from .costs import RecordCosts
from .lattice import LatticeMasks, Node, lattice_of


@dataclass(frozen=True)
class NodeResult:
    """One node's evaluation.  ``within_limit``: the violating classes hold at most the allowed suppressed records
    (monotone for the models that tag by it).  ``satisfied``: within the limit, and, when suppressed records are
    replaced and so form one class of their own, that class satisfies the policy too; None until
    :meth:`NodeEvaluator.satisfies` has checked that class (only models over sensitive values or the population need
    a look at the data)."""

    node: Node
    suppressed: int
    within_limit: bool
    satisfied: bool | None
    values: dict[str, float]
    bounds: dict[str, float]
    classes: int
    # What the values and verdicts were derived from: a stratified search adds its strata's.
    totals: NodeTotals | None = field(default=None, repr=False, compare=False)


class NodeEvaluator(ABC):
    """Evaluates lattice nodes against a policy's models and scores them with metrics, over an encoded source.

    ``objective`` (the first metric) is what searches minimize; the others are computed alongside.  A search may set
    :attr:`pending` (a mask of the nodes it may still evaluate) so that an evaluator prepares for where it will be
    asked next.

    An implementation computes a batch of new nodes (:meth:`_evaluate`), the suppressed records' own class of one
    node (:meth:`_suppressed_class_violates`) and frees what it holds (:meth:`close`); this class keeps the results,
    derives the verdicts from each node's totals (:meth:`_result`) and reads the record costs both sum
    (:attr:`costs`), from which the prior bounds come.  It must give every node the result :class:`~.sql_evaluator.SqlNodeEvaluator` gives it: the
    same suppressed records (drop mode's fixed point where :attr:`settles`), classes and verdicts, and the same metric
    values and bounds up to floating-point summation order; the searches' checks, optimum and solution space then
    stay the same.  ``pending`` is a hint: no result may depend on it.
    """

    def __init__(self, encoding: Encoding, hierarchies: Sequence[Hierarchy], models: Sequence[PrivacyModel],
                 metrics: Sequence[Metric], allowed_suppressed: int, monotone: bool,
                 progress: Callable[[str], None] | None = None, suppressed_monotone: bool = True,
                 suppressed_class: bool = True, drops: bool | None = None):
        names = [m.name for m in metrics]
        if len(set(names)) != len(names):
            raise ValueError(f"metrics need distinct names, got {names}")
        self.encoding, self.models, self.metrics = encoding, list(models), list(metrics)
        self.hierarchies = list(hierarchies)
        self.heights = tuple(h.levels - 1 for h in self.hierarchies)
        self.allowed_suppressed = allowed_suppressed
        # Whether suppressed records stay, all quasi-identifiers '*', as a class that must satisfy the policy too;
        # and whether they are dropped (by default when they are not such a class; ARX's semantics keep them in the
        # table, unchecked).
        self.suppressed_class = suppressed_class
        drops = not suppressed_class if drops is None else drops
        # Dropped records leave the table some models compare with: each node is settled to drop mode's fixed point,
        # and being within the limit is then not monotone (whatever the models claim).
        self.settles = drops and any(m.compares_with_table for m in self.models)
        self.monotone = monotone and not (self.settles and allowed_suppressed > 0)
        # Whether generalizing never increases the suppressed records (then the top node suppresses least).
        self.suppressed_monotone = suppressed_monotone and not self.settles
        # Whether the suppressed records' own class needs a look at the data (a model over sensitive values, the
        # population or the class's price), not just the totals' size.
        self.data_models = any(m.sensitive is not None or m.population is not None or m.prices_classes
                               for m in self.models)
        # Risk thresholds suppress, after the other models, the smallest classes until the release's figure holds.
        self.thresholds = risk_thresholds(self.models)
        self.objective = metrics[0].name
        self.lattice = lattice_of(encoding.attributes, [h.levels for h in hierarchies])
        self.masks = LatticeMasks(self.lattice) if self.lattice.listed else None
        counting = [m.name for m in metrics if m.counts_population]
        if counting and encoding.population_table is None:
            raise PolicyError(f"metric {', '.join(counting)} counts each class's records in a population table: give "
                              f"the policy a model that names one (e.g. JournalistProfitability)")
        self.costs = RecordCosts(encoding, hierarchies, metrics)
        # Whether totals carry each attribute's spread over the suppressed records (a metric needs it).
        self.spread = any(m.suppressed_spread for m in metrics)
        self.results: dict[int, NodeResult] = {}
        # Per listed node, whether it was evaluated (a wide lattice's are the results' keys).
        self.evaluated = np.zeros(self.lattice.size, dtype=bool) if self.lattice.listed else None
        self.pending: np.ndarray | None = None
        self.progress = progress

    @property
    def checks(self) -> int:
        """Nodes evaluated so far."""
        return len(self.results)

    def evaluate(self, index: int) -> NodeResult:
        return self.evaluate_many([index])[0]

    def evaluate_many(self, indices: Iterable[int]) -> list[NodeResult]:
        """The nodes' results, in order; each node is computed once."""
        indices = [int(i) for i in indices]
        wanted = [i for i in dict.fromkeys(indices) if i not in self.results]
        if wanted:
            for index, result in self._evaluate(wanted).items():
                self.results[index] = result
                if self.evaluated is not None:
                    self.evaluated[index] = True
        return [self.results[i] for i in indices]

    def value(self, index: int) -> float:
        return self.evaluate(index).values[self.objective]

    def satisfies(self, index: int) -> bool:
        """Whether the node satisfies the policy, its suppressed records' own class included."""
        result = self.evaluate(index)
        if result.satisfied is None:
            violates = self._suppressed_class_violates(result.node)
            result = self.results[index] = dataclasses.replace(result, satisfied=not violates)
        return result.satisfied

    def _result(self, index: int, totals: NodeTotals, suppressed_too_small: bool, unmendable: bool = False
                ) -> NodeResult:
        """A node's result from its totals; ``suppressed_too_small``: its suppressed records, as one class, violate a
        size-only model or a risk threshold; ``unmendable``: it violates a model in a way no suppression mends (a
        risk threshold its cut does not meet included)."""
        within_limit = totals.suppressed <= self.allowed_suppressed and not unmendable
        satisfied = within_limit
        if within_limit and totals.suppressed and self.suppressed_class:
            satisfied = None if self.data_models else not suppressed_too_small
        return NodeResult(node=self.lattice.node(index), suppressed=totals.suppressed, within_limit=within_limit,
                          satisfied=satisfied, values={m.name: m.value(totals) for m in self.metrics},
                          bounds={m.name: m.lower_bound(totals) for m in self.metrics}, classes=totals.classes,
                          totals=totals)

    @abstractmethod
    def _evaluate(self, indices: list[int]) -> dict[int, NodeResult]:
        """The results of nodes not evaluated before (distinct), each built by :meth:`_result`."""

    @abstractmethod
    def _suppressed_class_violates(self, node: Node) -> bool:
        """Whether the node's suppressed records, replaced by ``*`` as one class, violate the models (asked only of
        a node within the limit that suppresses records, when a model reads sensitive values or the population)."""

    def prior_bounds(self) -> np.ndarray:
        """Per lattice node, a lower bound of the objective for it and its generalizations known before evaluating
        it (-inf where the metric has none); never above any value that evaluation gives.  Of a listed lattice."""
        bounds = self.costs.prior_bounds(self.metrics[0], self.lattice.nodes)
        return np.full(self.lattice.size, -np.inf) if bounds is None else bounds

    @abstractmethod
    def close(self) -> None:
        """Free what the evaluator holds (temporary tables, arrays)."""
