"""A search under a policy with strata: each stratum a table of its own, one generalization for all.

Every model holds within each stratum as if it were the whole table (its classes, the table t-closeness compares a
class with, a risk threshold's figure and cut, drop mode's fixed point, the class its suppressed records form, which
keep their stratum), so a node's verdict in a stratum is the verdict of an ordinary evaluator over that stratum's rows
of the frequency table (:meth:`~duckanon.encode.encoding.Encoding.strata_parts`).  :class:`StratifiedNodeEvaluator`
asks one such evaluator per stratum and adds up: the records suppressed (the suppression limit counts the whole
release), the classes and every metric's sums, which classes within strata partition.  Whatever kind of evaluator
the parts are, the search sees one, and the verdicts stay those the publish recomputes over the stratified classes.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..encode.encoding import Encoding
from ..errors import PolicyError
from ..privacy.models import PrivacyModel
from ..utility.metrics import Metric, NodeTotals
from .evaluator import NodeEvaluator, NodeResult
from .lattice import Node


def sums_over_strata(metric: Metric) -> bool:
    """Whether ``metric``'s value over strata is that of their summed totals (:func:`summed`)."""
    return not (metric.suppressed_spread or metric.weighs_tuples)


def refuse_unstratified_metrics(metrics: Sequence[Metric], strata: Sequence[str]) -> None:
    """Refuse by name a metric whose value is not a sum over strata: one that weighs how the suppressed records
    spread over each attribute's values, or each record by its tuple's records, across the whole release."""
    named = [m.name for m in metrics if not sums_over_strata(m)]
    if named:
        raise PolicyError(f"metric {', '.join(named)} is not a sum over strata {list(strata)} (it weighs records "
                          f"across the whole release): choose another metric, or remove the strata")


class StratifiedNodeEvaluator(NodeEvaluator):
    """One evaluator per stratum of ``encoding``, built by ``build`` over the stratum's part and the models as they
    apply in it (:meth:`~duckanon.privacy.models.PrivacyModel.in_stratum`), with the whole release's suppression
    limit, so that a part never refuses a node on its own count; a node's totals are the parts' summed,
    and it is within the limit when all the strata together suppress no more than the limit allows and no stratum
    violates a model in a way suppression cannot mend.  Its suppressed records form one class per stratum: the node
    satisfies the policy when each of those does."""

    def __init__(self, encoding: Encoding, hierarchies, models, metrics: Sequence[Metric], allowed_suppressed: int,
                 monotone: bool, progress: Callable[[str], None] | None = None, suppressed_monotone: bool = True,
                 suppressed_class: bool = True, drops: bool | None = None, *,
                 build: Callable[[Encoding, Sequence[PrivacyModel]], NodeEvaluator]):
        refuse_unstratified_metrics(metrics, encoding.strata)
        super().__init__(encoding, hierarchies, models, metrics, allowed_suppressed, monotone, progress,
                         suppressed_monotone, suppressed_class, drops)
        self.parts: list[tuple[tuple, Encoding, NodeEvaluator]] = []
        try:
            for stratum, part in encoding.strata_parts():
                try:
                    share = part.records() / encoding.records()
                    self.parts.append((stratum, part, build(part, [m.in_stratum(share) for m in models])))
                except BaseException:
                    part.close()
                    raise
        except BaseException:
            self.close()
            raise
        if progress is not None:
            progress(f"searching {len(self.parts)} strata of {', '.join(encoding.strata)} together")

    def _evaluate(self, indices: list[int]) -> dict[int, NodeResult]:
        per_stratum = []
        for _, _, part in self.parts:
            part.pending = self.pending
            per_stratum.append(part.evaluate_many(indices))
        results = {}
        for position, index in enumerate(indices):
            mine = [answers[position] for answers in per_stratum]
            # A part is given the whole release's limit, so it exceeds it only by a violation no suppression mends
            # (or by suppressing more than all strata may together, which the sum refuses anyway).
            unmendable = any(r.suppressed <= self.allowed_suppressed and not r.within_limit for r in mine)
            too_small = any(r.suppressed and r.within_limit and r.satisfied is False for r in mine)
            results[index] = self._result(index, summed([r.totals for r in mine], self.costs.bottom), too_small,
                                          unmendable)
        return results

    def _suppressed_class_violates(self, node: Node) -> bool:
        index = self.lattice.index(node)
        return any(not part.satisfies(index) for _, _, part in self.parts if part.evaluate(index).suppressed)

    def close(self) -> None:
        for _, part, evaluator in self.parts:
            try:
                evaluator.close()
            finally:
                part.close()
        self.parts = []


def summed(parts: Sequence[NodeTotals], bottom) -> NodeTotals:
    """One node's totals over strata from each stratum's: classes within strata partition the release, so counts,
    squares and cost sums add up (``bottom``: the whole table's sums at the lattice's bottom)."""
    first = parts[0]
    return NodeTotals(
        records=sum(p.records for p in parts), suppressed=sum(p.suppressed for p in parts),
        classes=sum(p.classes for p in parts), kept_classes=sum(p.kept_classes for p in parts),
        squares=sum(p.squares for p in parts), kept_squares=sum(p.kept_squares for p in parts),
        costs={name: tuple(sum(p.costs[name][i] for p in parts) for i in range(3)) for name in first.costs},
        bottom=bottom, levels=first.levels, heights=first.heights,
        counted_classes={name: sum(p.counted_classes[name] for p in parts) for name in first.counted_classes})
