"""Running Mondrian on a source: bind the policy, partition the frequency table, measure, and publish the partition
map (:mod:`.mondrian` for the partitioning itself, :mod:`duckanon.recode.recoding` for the map)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

from ..declare.policy import Policy
from ..encode.binding import Workspace, bind
from ..recode.recoding import PartitionMap
from ..release.publish import partition_metrics, publish
from .mondrian import Mondrian, MondrianResult, dimensions, output_styles


def mondrian(workspace: Workspace, source, policy: Policy | str, path: str | os.PathLike | None, *, relaxed: bool,
             orders: Mapping[str, Sequence[object]] | None, categorical: Sequence[str],
             styles: Mapping[str, str] | None, numeric_style: str, metrics: bool, table: str,
             format: str | None) -> MondrianResult:
    """Partition ``source`` with strict (or ``relaxed``) Mondrian, measure the partition map unless ``metrics`` is
    False, and publish it to ``path`` when given (see :meth:`Anonymizer.mondrian`)."""
    engine = workspace.engine
    with bind(workspace, source, policy, partitioning=True) as bound:
        dims = dimensions(engine, bound.counted, bound.quasi_identifiers, bound.hierarchies, orders, categorical)
        chosen = output_styles(dims, styles, numeric_style)
        algorithm = f"{'relaxed' if relaxed else 'strict'} Mondrian"
        people = f" of {bound.people} people" if bound.people is not None else ""
        workspace.announce(f"{algorithm} over {bound.facts.records} records{people}")
        partitioning = Mondrian(engine, bound.counted, dims, bound.policy.sensitive, bound.policy.models,
                                relaxed=relaxed, person=bound.policy.person, progress=workspace.progress).run()
        try:
            transformation = PartitionMap(partitioning.assignment, chosen, orders=orders, coded=partitioning.coded,
                                          description={"algorithm": algorithm, "partitions": partitioning.partitions})
            measured = partition_metrics(workspace, bound, transformation) if metrics else None
            release = (publish(workspace, bound, transformation, path, table, format, measured or {})
                       if path is not None else None)
        finally:
            partitioning.close()
    return MondrianResult(partitioning, chosen, measured, release)
