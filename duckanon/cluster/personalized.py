"""Seed 003 (Cao, Zhang, Bi, Zhao 2018, "Personalized (α,l)-diversity k-anonymity model for privacy preservation",
Computer Science 45(11)): top-down partitioning for (α,l)-diversity k-anonymity, and the personalization rule.

**Partitioning** (seed 003 Algorithm 1, after Xu et al. 2006).  A group of at least 2k records is split in two: take a
random record and the record farthest from it (the mixed-type distance of :mod:`duckanon.cluster.distance`), and send every
record to the nearer of the two -- ties shared out evenly, and each side topped up to k records with the records of the
other side that lean most towards it; both halves are split again while they hold at least 2k records.  Groups that
break l or α (any policy model :class:`~duckanon.cluster.grouping.Composition` supports: k-anonymity, (α,l)-diversity
k-anonymity with sensitivity levels, distinct l-diversity, (α,k)-anonymity) are merged and partitioned again, as long as
they hold 2k records and partitioning them still yields a valid group; the rest go to the nearest group that keeps k, l
and α (:func:`duckanon.cluster.grouping.absorb`).

**Personalization** (seed 003 §3.3).  Individuals may set a privacy protection level Ppl (a column; NULL when not
set) on the levels of the sensitive attribute's generalization hierarchy tree (GHT), numbered 1 for the leaves up to
the root.  Where a record's Ppl exceeds its value's sensitivity level Sid, the release shows the value's GHT ancestor
on level Ppl instead.  The groups satisfy the policy on the original values (seed 003 Definition 6); the sensitive
values are generalized afterwards, so the written release is verified for k-anonymity, and :meth:`Clusters.check
<duckanon.cluster.grouping.Clusters.check>` verifies the groups before personalization.

**Metrics** (seed 003 formulas 1–6).  NCP: the quasi-identifiers' NCP (:attr:`Clusters.information_loss
<duckanon.cluster.grouping.Clusters.information_loss>`) plus, per personalized record, the leaves under its published value
over all leaves (:func:`sensitive_loss`).  ARR: the mean over classes of Σ over their records of
|(s, M)| / (|M| · |f(s)|) / |M|, with |f(s)| the leaves under a published value s (:func:`average_recognition_rate`).
Both are SQL over a released (or recoded) table.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

import duckdb
import numpy as np
from sqlglot import exp

from ..declare.catalog import hierarchy_table
from ..declare.policy import Policy
from ..deferred import pandas as pd
from ..engine import Engine, as_engine
from ..errors import HierarchyError, PolicyError
from ..hierarchy.hierarchy import Hierarchy, _preview, level_column
from ..parameters import checked_number
from ..privacy.classes import VALUE, WEIGHT, Classes
from ..privacy.models import AlphaLDiversityKAnonymity, KAnonymity
from ..recode.recoding import ColumnRecoding
from ..sqlgen import build as sb
from .distance import RecordSpace
from .grouping import ClusteringMethod, Clusters, Records, absorb


class Personalization:
    """Individuals' protection levels: ``column`` holds each record's Ppl (1 … the GHT's number of levels, NULL for
    none); ``hierarchy`` is the sensitive attribute's GHT (leaves first, as every duckanon hierarchy); ``levels`` maps
    each sensitive value to its sensitivity level Sid, by default the level table of the policy's
    :class:`~duckanon.privacy.models.AlphaLDiversityKAnonymity`."""

    def __init__(self, column: str, hierarchy: Hierarchy, levels: Mapping[object, int] | None = None):
        if not isinstance(hierarchy, Hierarchy):
            raise PolicyError(f"the generalization hierarchy tree of the sensitive attribute must be a Hierarchy, "
                              f"got {type(hierarchy).__name__}")
        self.column, self.hierarchy = column, hierarchy
        self.levels = {str(v): checked_number(s, f"the sensitivity level of {v!r}", "personalization", whole=True,
                                              low=1) for v, s in levels.items()} if levels is not None else None

    @property
    def top(self) -> int:
        """The GHT's highest level, its root's, in seed 003's numbering (leaves are level 1)."""
        return self.hierarchy.levels

    def resolve(self, policy: Policy) -> tuple[str, dict[str, int]]:
        """(sensitive attribute, level table) of ``policy``'s seed 003 model."""
        models = [m for m in policy.models if isinstance(m, AlphaLDiversityKAnonymity)]
        if not models:
            raise PolicyError("personalization compares Ppl with the sensitivity levels of an "
                              "AlphaLDiversityKAnonymity model, and the policy has none")
        levels = self.levels if self.levels is not None else models[0].levels
        return models[0].sensitive, levels

    def validate(self, sensitive: str, values: np.ndarray, protection: np.ndarray, levels: Mapping[str, int]) -> None:
        """Clear errors for sensitive values the level table or the GHT lacks, and for protection levels (the
        column's values) that are not whole numbers from 1 to the GHT's top."""
        distinct = pd.unique(pd.Series(values, dtype=object))
        present = sorted((v for v in distinct if v is not None), key=str)
        unleveled = [v for v in present if v not in levels] + (["NULL"] if any(v is None for v in distinct) else [])
        if unleveled:
            raise PolicyError(f"sensitive values of {sensitive!r} missing from the level table: {_preview(unleveled)}")
        leaves = {row[0] for row in self.hierarchy.rows}
        uncovered = [v for v in present if v not in leaves]
        if uncovered:
            raise HierarchyError(f"the generalization hierarchy tree of {sensitive!r} does not cover "
                                 f"{_preview(uncovered)}")
        numbers = pd.to_numeric(pd.Series(protection, dtype=object), errors="coerce").to_numpy(dtype=float)
        given = pd.notna(pd.Series(protection, dtype=object)).to_numpy()
        wrong = given & (np.isnan(numbers) | (numbers != np.floor(numbers)) | (numbers < 1) | (numbers > self.top))
        if wrong.any():
            shown = pd.unique(pd.Series(protection[wrong], dtype=object))
            raise PolicyError(f"privacy protection levels in {self.column!r} must be whole numbers from 1 to "
                              f"{self.top} (the GHT's height: leaves are level 1, its root level {self.top}); "
                              f"found {_preview(sorted(shown, key=str))}")

    def published(self, value: exp.Expression, protection: exp.Expression, tree: str,
                  levels: Mapping[str, int]) -> exp.Expression:
        """The released sensitive value: the GHT ancestor on level Ppl where Ppl > Sid, else the value (VARCHAR).
        ``tree`` is the alias of the GHT's table, joined on the value."""
        text, protection = sb.as_text(value), sb.as_double(protection)
        sid = exp.Case(ifs=[exp.If(this=exp.EQ(this=text.copy(), expression=sb.lit(v)), true=sb.lit(s))
                            for v, s in sorted(levels.items())])
        ancestor = exp.Case(ifs=[exp.If(this=exp.EQ(this=protection.copy(), expression=sb.lit(level + 1)),
                                        true=sb.col(level_column(level), tree))
                                 for level in range(1, self.hierarchy.levels)])
        return exp.Case(ifs=[exp.If(this=protection > sid, true=ancestor)], default=text)

    def describe(self) -> dict:
        return {"column": self.column, "hierarchy": self.hierarchy.name, "levels": self.levels}


class PersonalizedValues(ColumnRecoding):
    """Each personalized record's sensitive value released as its GHT ancestor: the partition map's recoding hook.
    ``tree`` is the table the GHT is stored in."""

    def __init__(self, sensitive: str, personalization: Personalization, levels: Mapping[str, int], tree: exp.Table):
        self.sensitive, self.personalization = sensitive, personalization
        self.levels, self.tree = dict(levels), tree
        self.reads = [personalization.column]

    def recode(self, recoded: exp.Subquery, columns: Sequence[str]) -> exp.Select:
        value = sb.col(self.sensitive, recoded.alias)
        published = self.personalization.published(value, sb.col(self.personalization.column, recoded.alias), "tree",
                                                   self.levels)
        on = exp.EQ(this=sb.col(level_column(0), "tree"), expression=sb.as_text(value.copy()))
        projection = [published.as_(c, quoted=True) if c == self.sensitive else sb.col(c, recoded.alias)
                      for c in columns]
        return (exp.select(*projection).from_(recoded)
                .join(exp.alias_(self.tree, "tree", quoted=True), on=on, join_type="LEFT"))

    def describe(self) -> dict:
        return {"personalized sensitive values": {
            "attribute": self.sensitive, **self.personalization.describe(),
            "note": "the groups satisfy the policy's models on the original sensitive values (seed 003 Definition 6)"}}


class TopDownPartitioning(ClusteringMethod):
    """Seed 003's top-down partitioning (see the module's docstring); ``seed`` seeds the random first records,
    ``personalization`` applies individuals' protection levels to the release."""

    name = "top-down partitioning"

    def __init__(self, seed: int = 0, personalization: Personalization | None = None):
        self.seed = checked_number(seed, "seed", self.name, whole=True, low=0)
        self.personalization = personalization

    def extra_columns(self) -> list[str]:
        return [self.personalization.column] if self.personalization is not None else []

    def check_policy(self, policy: Policy, numeric: Sequence[str]) -> None:
        if self.personalization is not None:
            sensitive, _ = self.personalization.resolve(policy)
            if self.personalization.column in (*policy.quasi_identifier_names, sensitive):
                raise PolicyError(f"the protection level column {self.personalization.column!r} cannot be a "
                                  f"quasi-identifier or the sensitive attribute")

    def assign(self, records: Records) -> tuple[np.ndarray, int]:
        space, composition = records.space, records.composition
        if self.personalization is not None:
            sensitive, levels = self.personalization.resolve(records.policy)
            self.personalization.validate(sensitive, records.columns[sensitive],
                                          records.columns[self.personalization.column], levels)
        k = composition.k
        rng = np.random.default_rng(self.seed)
        groups = np.full(space.size, -1, dtype=np.int64)
        count = 0
        pending = np.arange(space.size)
        while True:
            members, sizes = top_down_partition(space, pending, k, rng)
            part = np.repeat(np.arange(len(sizes)), sizes)
            local = np.full(space.size, -1, dtype=np.int64)
            local[members] = part
            valid = composition.valid(composition.tally(local, len(sizes)))
            kept = valid[part]
            groups[members[kept]] = count + (np.cumsum(valid) - 1)[part[kept]]
            count += int(valid.sum())
            rest = members[~kept]
            if len(rest) == len(pending) or len(rest) < 2 * k:
                break
            pending = rest
        return absorb(space, composition, groups, count)

    def release_recoding(self, clusters: Clusters) -> ColumnRecoding | None:
        if self.personalization is None:
            return None
        sensitive, levels = self.personalization.resolve(clusters.policy)
        name = clusters.workspace.catalog.add_hierarchy(f"ght_{sensitive}", self.personalization.hierarchy)
        return PersonalizedValues(sensitive, self.personalization, levels, hierarchy_table(name))

    def release_policy(self, policy: Policy) -> Policy:
        if self.personalization is None:
            return policy
        # The groups meet the policy on the original values (checked by Clusters.check); generalizing some sensitive
        # values afterwards leaves the classes' sizes alone.
        k = max([getattr(m, "k", 1) for m in policy.models] + [1])
        return dataclasses.replace(policy, models=[KAnonymity(k)])

    def describe(self) -> dict:
        # Never the seed: with it anyone could retrace the random first records (a release holds no random seed).
        described = {"algorithm": self.name}
        if self.personalization is not None:
            described["personalization"] = self.personalization.describe()
        return described


def top_down_partition(space: RecordSpace, records: np.ndarray, k: int, rng: np.random.Generator
                       ) -> tuple[np.ndarray, np.ndarray]:
    """``records`` split recursively around a random record and the record farthest from it, into groups of k to
    2k - 1 records (or one smaller group when there are fewer than 2k).  Returns the records group by group and the
    groups' sizes.

    The recursion runs level by level: every group still to be split is split at once, each record compared with its
    own group's two records in one vectorized pass, so the work per level is linear in the records however many
    groups there are.  The records start in a random order and a split keeps each side's records in their order, so
    a group's records are always in random order: records that lean to neither side (records alike, often identical)
    go to the first side by that order until the sides are even, dealt out afresh each time groups are merged and
    partitioned again, and only the groups whose cut is moved to keep k records on a side are sorted."""
    done_members, done_sizes = [], []
    # The groups still to split, as consecutive runs of ``order``; ``local`` holds their records' attributes in that
    # order, moved along with it, so that distances read memory in sequence rather than at random.
    order, sizes = rng.permutation(records), np.array([len(records)])
    local = space.part(order)
    while len(sizes):
        small = sizes < 2 * k
        finished = np.repeat(small, sizes)
        done_members.append(order[finished])
        done_sizes.append(sizes[small])
        if small.any():
            kept = np.flatnonzero(~finished)
            order, local = order[kept], local.part(kept)
        sizes = sizes[~small]
        if not len(sizes):
            break
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        run = np.repeat(np.arange(len(sizes)), sizes)
        positions = np.arange(len(order))
        first = starts + (rng.random(len(sizes)) * sizes).astype(np.int64)
        from_first = local.paired_distances(positions, first[run])
        farthest = _first_maximum(from_first, starts, run)
        lean = from_first - local.paired_distances(positions, farthest[run])  # < 0: nearer the group's first record
        sides, cut = _split_sides(lean, starts, sizes, run, k)
        moved = _stable_partition(sides, starts, cut, run)
        order, local = order[moved], local.part(moved)
        sizes = np.column_stack([cut, sizes - cut]).ravel()
    return np.concatenate(done_members), np.concatenate(done_sizes)


def _split_sides(lean: np.ndarray, starts: np.ndarray, sizes: np.ndarray, run: np.ndarray, k: int
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Which records go to their group's first side, and each group's number of them: the records leaning to the
    first record and half of those leaning to neither (the first by position), the cut then moved to keep k records
    on each side -- in those groups, the side holds the records that lean most towards it, ties by position."""
    tied = lean == 0
    nearer = np.add.reduceat(lean < 0, starts)
    ties = np.add.reduceat(tied, starts)
    even = nearer + ties // 2
    cut = np.minimum(np.maximum(even, k), sizes - k)
    ties_before = np.cumsum(tied) - tied
    tie_rank = ties_before - ties_before[starts][run]
    sides = (lean < 0) | (tied & (tie_rank < (ties // 2)[run]))
    moved = cut != even
    if moved.any():
        records = np.flatnonzero(moved[run])
        by_lean = records[np.lexsort((lean[records], run[records]))]  # stable: ties stay in position order
        rank = np.arange(len(by_lean)) - np.repeat(np.cumsum(sizes[moved]) - sizes[moved], sizes[moved])
        sides[by_lean] = rank < cut[run[by_lean]]
    return sides, cut


def _stable_partition(sides: np.ndarray, starts: np.ndarray, cut: np.ndarray, run: np.ndarray) -> np.ndarray:
    """Where each position's record comes from once each group's first-side records are moved ahead of the others,
    both in their order."""
    firsts_before = np.cumsum(sides) - sides
    within_first = firsts_before - firsts_before[starts][run]
    positions = np.arange(len(sides))
    group_start = starts[run]
    destination = group_start + np.where(sides, within_first, cut[run] + (positions - group_start - within_first))
    source = np.empty_like(destination)
    source[destination] = positions
    return source


def _first_maximum(values: np.ndarray, starts: np.ndarray, run: np.ndarray) -> np.ndarray:
    """Per run of ``values`` (runs begin at ``starts``; ``run`` numbers each position's run), the position of its
    first maximum."""
    highest = np.maximum.reduceat(values, starts)
    positions = np.where(values == highest[run], np.arange(len(values)), len(values))
    return np.minimum.reduceat(positions, starts)


# ------------------------------------------------------------------------------------------------------------ metrics

def _leaves(hierarchy: Hierarchy | None, value: exp.Expression) -> exp.Expression:
    """The number of leaves under a published sensitive value: 1 for an original value."""
    if hierarchy is None:
        return sb.lit(1)
    originals = {row[0] for row in hierarchy.rows}
    inner: dict[str, int] = {}
    for level in range(1, hierarchy.levels):
        for label, leaves in hierarchy.leaves_under(level).items():
            if label is not None and label not in originals:
                inner.setdefault(label, leaves)
    if not inner:
        return sb.lit(1)
    return exp.Case(ifs=[exp.If(this=exp.EQ(this=sb.as_text(value.copy()), expression=sb.lit(label)),
                                true=sb.lit(leaves)) for label, leaves in sorted(inner.items())], default=sb.lit(1))


def recognition_rate_query(relation: exp.Expression, quasi_identifiers: Sequence[str], sensitive: str,
                           hierarchy: Hierarchy | None = None) -> exp.Select:
    """ARR_D (seed 003 formulas 4–6) of a released table as one query: classes are records with equal
    quasi-identifiers, and a class M holding n records of published value s adds n · n / (|M| · |f(s)|) / |M|."""
    classes = Classes.of(relation, quasi_identifiers)
    n = sb.col(WEIGHT)
    size = exp.Window(this=exp.func("SUM", n.copy()), partition_by=classes.keys_of())
    cells = (exp.select(*classes.keys_of(), n, size.as_("__size", quoted=True),
                        _leaves(hierarchy, sb.col(VALUE)).as_("__leaves", quoted=True))
             .from_(classes.cells(sensitive).subquery("cells")))
    rate = sb.as_double(n.copy() * n.copy()) / (sb.col("__size") * sb.col("__size") * sb.col("__leaves"))
    per_class = (exp.select(exp.func("SUM", rate).as_("__arr", quoted=True))
                 .from_(cells.subquery("sized")).group_by(*classes.keys_of()))
    return exp.select(exp.func("AVG", sb.col("__arr"))).from_(per_class.subquery("classes"))


def average_recognition_rate(database: Engine | duckdb.DuckDBPyConnection, relation: exp.Expression,
                             quasi_identifiers: Sequence[str], sensitive: str,
                             hierarchy: Hierarchy | None = None) -> float:
    """ARR_D of ``relation`` (a release, or a recoded table); ``hierarchy`` is the GHT that published values may be
    nodes of (None: every value is an original one)."""
    return float(as_engine(database).value(recognition_rate_query(relation, quasi_identifiers, sensitive, hierarchy)))


def sensitive_loss_query(relation: exp.Expression, sensitive: str, hierarchy: Hierarchy) -> exp.Select:
    """Σ over records of the NCP of their published sensitive value: leaves under it over all leaves, 0 for an
    original value (seed 003 formula 2)."""
    leaves = _leaves(hierarchy, sb.col(sensitive))
    penalty = exp.Case(ifs=[exp.If(this=leaves > sb.lit(1), true=sb.as_double(leaves.copy()) / sb.lit(
        len(hierarchy.rows)))], default=sb.lit(0.0))
    return exp.select(exp.func("COALESCE", exp.func("SUM", penalty), sb.lit(0.0))).from_(relation)


def sensitive_loss(database: Engine | duckdb.DuckDBPyConnection, relation: exp.Expression, sensitive: str,
                   hierarchy: Hierarchy) -> float:
    return float(as_engine(database).value(sensitive_loss_query(relation, sensitive, hierarchy)))

