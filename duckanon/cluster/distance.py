"""Records as points of a mixed-type space: the distance and the information loss the clustering algorithms share.

Each quasi-identifier contributes the normalized certainty penalty (NCP, Xu et al. 2006) of generalizing the records
it compares to one value.  A numeric attribute contributes the width of the interval spanning their values over the
width of the attribute's domain (values normalized to [0, 1], seed 001 §2.1); a categorical attribute the number of
leaves under their lowest common ancestor in its hierarchy over all its leaves (0 for equal values; with a flat
hierarchy, value → ``*``, simply 0 or 1).  The distance of two records is the mean over the attributes, so it lies in
[0, 1]; the information loss of a group of records is that penalty for generalizing the whole group to one value per
attribute, summed over the group's records and the attributes (seed 001 §2.2, seed 003 formulas 1–3).  The distance
of a record to a group is therefore the information loss the group gains when the record joins it.

NULL is a value of its own, as elsewhere in duckanon: two NULLs are equal; a NULL number and a number are as far apart
as the domain is wide (penalty 1); a NULL category has the path of the hierarchy's NULL row if it has one, and is
otherwise a leaf that shares no ancestor with any other value (penalty 1).

Nothing here holds an n×n matrix.  One record against many records (or pairs of records) is one vectorized pass per
attribute -- two table lookups for a category, one for the level of every two leaves' lowest common ancestor and one
for that ancestor's penalty; blocks of records against groups are bounded by :data:`BLOCK_CELLS` cells; and the sum
of each record's distances to all records, which seed 001 picks its cluster seeds by, is exact in O(n log n): by
sorting for numbers and by counting the records under every hierarchy node for categories.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from ..deferred import pandas as pd
from ..errors import HierarchyError
from ..hierarchy.hierarchy import Hierarchy, _preview

#: Cells of one block of record-to-group costs computed at once (32 MiB of float64).
BLOCK_CELLS = 1 << 22
#: Hierarchies with at most this many leaves get a table of every two leaves' common ancestor level (4 MiB).
COMMON_TABLE_LEAVES = 2048


@dataclass(frozen=True)
class CodedTexts:
    """A text column as each record's number among the column's distinct values (-1 for NULL), ``values`` in that
    numbering: how a categorical attribute is read, since DuckDB hands over numbers many times faster than texts and a
    hierarchy then maps each distinct value once."""

    codes: np.ndarray
    values: np.ndarray

    @classmethod
    def of(cls, texts: np.ndarray) -> CodedTexts:
        codes, values = pd.factorize(pd.Series(texts, dtype=object))  # NULL (None, NaN): -1
        return cls(codes, np.asarray(values, dtype=object))

    def texts(self) -> np.ndarray:
        """The column's texts, None for NULL."""
        return np.append(self.values, None)[self.codes]  # -1 picks the None appended last


class NumericAttribute:
    """A numeric quasi-identifier, normalized to [0, 1] over the data's range; NaN stands for NULL."""

    kind = "numeric"

    def __init__(self, name: str, values: np.ndarray):
        self.name = name
        values = np.asarray(values, dtype=float)
        self.missing = np.isnan(values)
        self.has_missing = bool(self.missing.any())
        present = values[~self.missing]
        self.low, self.high = (float(present.min()), float(present.max())) if present.size else (0.0, 0.0)
        width = self.high - self.low
        self.scaled = (values - self.low) / width if width > 0 else np.where(self.missing, np.nan, 0.0)
        self.size = len(values)

    def _penalty(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        penalty = np.abs(left - right)
        if self.has_missing:
            penalty = np.where(np.isnan(penalty), np.isnan(left) != np.isnan(right), penalty)
        return penalty

    def penalties_from(self, record: int, others: np.ndarray) -> np.ndarray:
        return self._penalty(self.scaled[others], self.scaled[record])

    def paired_penalties(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        return self._penalty(self.scaled[left], self.scaled[right])

    def penalty_sums(self) -> np.ndarray:
        """Σ over all records j of the penalty of (i, j), for every record i."""
        sums = np.zeros(self.size)
        present = np.flatnonzero(~self.missing)
        order = present[np.argsort(self.scaled[present], kind="stable")]
        x = self.scaled[order]
        prefix = np.cumsum(x)
        below = np.arange(len(x))
        above = len(x) - 1 - below
        # Σ|x_i - x_j| = x_i·(records below) - (their sum) + (sum of those above) - x_i·(records above)
        sums[order] = x * below - (prefix - x) + (prefix[-1] - prefix if len(x) else 0) - x * above
        sums[order] += int(self.missing.sum())
        sums[self.missing] = len(present)
        return sums

    def points(self) -> np.ndarray:
        """Each record's position for cutting records into blocks: its scaled value, -1 for NULL."""
        return np.nan_to_num(self.scaled, nan=-1.0)

    def part(self, records: np.ndarray) -> NumericAttribute:
        """The attribute of ``records`` alone, scaled as over all records."""
        part = copy.copy(self)
        part.scaled, part.missing, part.size = self.scaled[records], self.missing[records], len(records)
        part.has_missing = bool(part.missing.any())
        return part

    # --------------------------------------------------------------- groups
    def summarize(self, index: GroupIndex) -> dict:
        values = self.scaled[index.order]
        missing = self.missing[index.order]
        low = np.fmin.reduceat(values, index.starts)
        high = np.fmax.reduceat(values, index.starts)
        any_missing = np.logical_or.reduceat(missing, index.starts)
        any_present = np.logical_or.reduceat(~missing, index.starts)
        return {"low": low, "high": high, "missing": any_missing, "present": any_present}

    @staticmethod
    def _loss(low, high, missing, present) -> np.ndarray:
        width = np.where(present, high - low, 0.0)
        return np.where(missing & present, 1.0, width)

    def group_loss(self, state: dict) -> np.ndarray:
        return self._loss(state["low"], state["high"], state["missing"], state["present"])

    def join_loss(self, records: np.ndarray, state: dict, groups: np.ndarray) -> np.ndarray:
        """Per record (rows) and group (columns): the group's penalty once the record joins it."""
        x = self.scaled[records][:, None]
        low, high = state["low"][groups][None, :], state["high"][groups][None, :]
        missing = state["missing"][groups][None, :] | np.isnan(x)
        present = state["present"][groups][None, :] | ~np.isnan(x)
        return self._loss(np.fmin(low, x), np.fmax(high, x), missing, present)

    def merge_loss(self, group: int, state: dict, groups: np.ndarray) -> np.ndarray:
        """Per group of ``groups``: the penalty of the union of ``group`` and that group."""
        pick = lambda key: state[key][groups]  # noqa: E731
        return self._loss(np.fmin(pick("low"), state["low"][group]), np.fmax(pick("high"), state["high"][group]),
                          pick("missing") | state["missing"][group], pick("present") | state["present"][group])


class CategoricalAttribute:
    """A categorical quasi-identifier: each record's leaf of the attribute's hierarchy, and per leaf its ancestors.

    A node is a level's label (the hierarchy guarantees one parent per label).  ``penalty[level, leaf]`` is the NCP of
    the leaf's ancestor on that level -- the leaves under it over all leaves, 0 for a node over a single leaf -- with a
    last row of 1 for "no common ancestor".  For hierarchies of up to :data:`COMMON_TABLE_LEAVES` leaves the level of
    every two leaves' lowest common ancestor is tabulated, so a distance is two lookups; larger ones compare the
    ancestors level by level."""

    kind = "categorical"

    def __init__(self, name: str, column: CodedTexts, hierarchy: Hierarchy):
        self.name = name
        rows = hierarchy.rows
        self.levels = hierarchy.levels
        ancestors, penalties = [], []
        for level in range(self.levels):
            labels = pd.Series([row[level] for row in rows], dtype=object)
            codes, uniques = pd.factorize(labels, use_na_sentinel=False)
            counts = np.bincount(codes, minlength=len(uniques))
            ancestors.append(codes.astype(np.int64))
            penalties.append(np.where(counts > 1, counts / len(rows), 0.0)[codes])
        leaf_of_value = {row[0]: i for i, row in enumerate(rows)}
        leaf_of_code = np.array([leaf_of_value.get(v, -1) for v in column.values], dtype=np.int32)
        if (leaf_of_code < 0).any():
            examples = sorted(column.values[leaf_of_code < 0], key=str)
            raise HierarchyError(f"the hierarchy of {name!r} does not cover {len(examples)} of its values: "
                                 f"{_preview(examples)}")
        missing = column.codes < 0
        self.leaf = np.append(leaf_of_code, np.int32(-1))[column.codes]  # NULL's leaf is set below
        if None in leaf_of_value:
            self.leaf[missing] = leaf_of_value[None]
        elif missing.any():
            # NULL without a hierarchy row: a leaf of its own, under no node any other value is under.
            for level in range(self.levels):
                ancestors[level] = np.append(ancestors[level], ancestors[level].max() + 1)
                penalties[level] = np.append(penalties[level], 0.0)
            self.leaf[missing] = len(rows)
        self.ancestors = np.stack(ancestors)  # (levels, leaves): node codes
        self.penalty = np.vstack([np.stack(penalties), np.ones((1, self.ancestors.shape[1]))])
        self.common = self._common_table() if self.ancestors.shape[1] <= COMMON_TABLE_LEAVES else None
        # With the table, the penalty of every two leaves (the first's ancestor at their common level): a distance
        # is then one lookup per attribute, what top-down partitioning does for every record at every split.
        self.pair_penalty = (None if self.common is None else
                             self.penalty[self.common, np.arange(self.common.shape[0])[:, None]])
        self.size = len(column.codes)

    def _common_table(self) -> np.ndarray:
        leaves = self.ancestors.shape[1]
        common = np.full((leaves, leaves), self.levels, dtype=np.int8)
        for level in reversed(range(self.levels)):
            codes = self.ancestors[level]
            common[codes[:, None] == codes[None, :]] = level
        return common

    def _common_level(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The level of the lowest common ancestor of records ``left`` and ``right`` (broadcast against each other),
        ``levels`` when they have none."""
        a, b = self.leaf[left], self.leaf[right]
        if self.common is not None:
            return self.common[a, b]
        common = np.full(np.broadcast_shapes(a.shape, b.shape), self.levels, dtype=np.int8)
        for level in reversed(range(self.levels)):
            common[self.ancestors[level, a] == self.ancestors[level, b]] = level
        return common

    def _common_block(self, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """(len(rows), len(columns)): ``_common_level`` of every row record with every column record."""
        if self.common is not None:  # whole rows of the table, gathered: far faster than pairs
            return self.common[:, self.leaf[columns]][self.leaf[rows]]
        return self._common_level(rows[:, None], columns[None, :])

    def _penalty_at(self, level: np.ndarray, records: np.ndarray) -> np.ndarray:
        """The penalty of the records' ancestors on ``level`` (broadcast; 1 above the top)."""
        return self.penalty[level, self.leaf[records]]

    def penalties_from(self, record: int, others: np.ndarray) -> np.ndarray:
        if self.pair_penalty is not None:  # one row of the table, gathered: the hot path of growing clusters
            return self.pair_penalty[self.leaf[record]][self.leaf[others]]
        return self._penalty_at(self._common_level(others, np.int64(record)), np.int64(record))

    def paired_penalties(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        if self.pair_penalty is not None:
            leaves = self.pair_penalty.shape[1]
            # int32 holds every index: the table exists for up to COMMON_TABLE_LEAVES (+ NULL's) leaves
            return self.pair_penalty.ravel()[self.leaf[left] * leaves + self.leaf[right]]
        return self._penalty_at(self._common_level(left, right), left)

    def penalty_sums(self) -> np.ndarray:
        """Σ over all records j of the penalty of (i, j): per level, the records first met under i's ancestor there
        cost that ancestor's penalty; records under no common node cost 1."""
        sums = np.zeros(self.size)
        below = np.zeros(self.size)
        for level in range(self.levels):
            codes = self.ancestors[level, self.leaf]
            under = np.bincount(codes)[codes].astype(float)
            sums += self.penalty[level, self.leaf] * (under - below)
            below = under
        return sums + (self.size - below)

    def part(self, records: np.ndarray) -> CategoricalAttribute:
        """The attribute of ``records`` alone (the hierarchy's tables shared)."""
        part = copy.copy(self)
        part.leaf, part.size = self.leaf[records], len(records)
        return part

    def points(self) -> np.ndarray:
        """Each record's position for cutting records into blocks: its leaf's rank when the leaves are listed
        subtree by subtree (a cut between ranks parts few subtrees), over [0, 1]."""
        leaves = self.ancestors.shape[1]
        rank = np.empty(leaves)
        rank[np.lexsort(self.ancestors)] = np.arange(leaves) / max(leaves - 1, 1)
        return rank[self.leaf]

    # --------------------------------------------------------------- groups
    def summarize(self, index: GroupIndex) -> dict:
        representative = index.order[index.starts]
        run = np.repeat(np.arange(len(index.starts)), index.sizes)
        level = np.maximum.reduceat(self._common_level(index.order, representative[run]), index.starts)
        return {"level": level.astype(np.int64), "representative": representative}

    def group_loss(self, state: dict) -> np.ndarray:
        return self._penalty_at(state["level"], state["representative"])

    def join_loss(self, records: np.ndarray, state: dict, groups: np.ndarray) -> np.ndarray:
        representative = state["representative"][groups]
        level = np.maximum(state["level"][groups][None, :], self._common_block(records, representative))
        return self._penalty_at(level, representative[None, :])

    def merge_loss(self, group: int, state: dict, groups: np.ndarray) -> np.ndarray:
        representative = state["representative"][groups]
        level = np.maximum(np.maximum(state["level"][groups], state["level"][group]),
                           self._common_level(representative, np.int64(state["representative"][group])))
        return self._penalty_at(level, representative)


Attribute = NumericAttribute | CategoricalAttribute


@dataclass(frozen=True)
class GroupIndex:
    """Records sorted by group: ``order`` the record indices, ``starts`` where each group begins in it."""

    order: np.ndarray
    starts: np.ndarray
    sizes: np.ndarray

    @classmethod
    def of(cls, groups: np.ndarray, count: int) -> GroupIndex:
        """Groups numbered 0 … count-1, every one non-empty; records with group -1 are left out."""
        members = np.flatnonzero(groups >= 0)
        order = members[np.argsort(groups[members], kind="stable")]
        sizes = np.bincount(groups[members], minlength=count)
        if (sizes == 0).any():
            raise ValueError("every group must hold a record")
        starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
        return cls(order, starts, sizes)


@dataclass
class GroupSummary:
    """What the distance of a record to a group needs: each group's size, generalization per attribute, and loss
    (the per-record penalty of its generalization, summed over attributes)."""

    sizes: np.ndarray
    states: list[dict]
    loss: np.ndarray


class RecordSpace:
    """The quasi-identifiers of a table's records, for distances, group generalizations and information loss."""

    def __init__(self, attributes: Sequence[Attribute]):
        if not attributes:
            raise ValueError("a record space needs at least one attribute")
        self.attributes = list(attributes)
        self.size = attributes[0].size

    @classmethod
    def from_columns(cls, columns: Mapping[str, np.ndarray], hierarchies: Mapping[str, Hierarchy],
                     numeric: Sequence[str]) -> RecordSpace:
        """``columns``: each quasi-identifier's values (numeric ones as floats with NaN for NULL, the others as
        text with None for NULL, or as :class:`CodedTexts`); ``hierarchies`` those of the categorical ones.  A
        categorical attribute without one is flat: its values under a single root, so values are equal or not
        (penalty 0 or 1)."""
        attributes: list[Attribute] = []
        for name, values in columns.items():
            if name in numeric:
                attributes.append(NumericAttribute(name, np.asarray(values, dtype=float)))
                continue
            column = values if isinstance(values, CodedTexts) else CodedTexts.of(values)
            hierarchy = hierarchies.get(name)
            if hierarchy is None:
                distinct = sorted(column.values, key=str)
                hierarchy = Hierarchy([[v, "*"] for v in distinct] or [[None, "*"]], name=name)
            attributes.append(CategoricalAttribute(name, column, hierarchy))
        return cls(attributes)

    @property
    def names(self) -> list[str]:
        return [a.name for a in self.attributes]

    # ------------------------------------------------------------ distances
    def distances_from(self, record: int, others: np.ndarray) -> np.ndarray:
        total = np.zeros(len(others))
        for attribute in self.attributes:
            total += attribute.penalties_from(record, others)
        return total / len(self.attributes)

    def paired_distances(self, left: np.ndarray, right: np.ndarray) -> np.ndarray:
        """The distance of record ``left[i]`` to record ``right[i]``, for every i."""
        total = np.zeros(len(left))
        for attribute in self.attributes:
            total += attribute.paired_penalties(left, right)
        return total / len(self.attributes)

    def distance_sums(self) -> np.ndarray:
        """Each record's distances to all records, summed: exact, without computing a single pair."""
        return sum(a.penalty_sums() for a in self.attributes) / len(self.attributes)

    def part(self, records: np.ndarray) -> RecordSpace:
        """The space of ``records`` alone, numbered 0 … len(records) - 1 in their order; distances and losses as in
        this space (numbers keep its scale)."""
        return RecordSpace([a.part(records) for a in self.attributes])

    def points(self) -> np.ndarray:
        """(records, attributes): each record as a point to cut blocks of records by (:mod:`.blocking`)."""
        return np.column_stack([a.points() for a in self.attributes])

    # --------------------------------------------------------------- groups
    def summarize(self, groups: np.ndarray, count: int) -> GroupSummary:
        index = GroupIndex.of(groups, count)
        states = [a.summarize(index) for a in self.attributes]
        loss = sum(a.group_loss(s) for a, s in zip(self.attributes, states))
        return GroupSummary(index.sizes, states, np.asarray(loss, dtype=float))

    def join_costs(self, records: np.ndarray, summary: GroupSummary, groups: np.ndarray) -> np.ndarray:
        """(len(records), len(groups)): how much each group's information loss grows when the record joins it."""
        after = sum(a.join_loss(records, s, groups) for a, s in zip(self.attributes, summary.states))
        sizes = summary.sizes[groups][None, :]
        return (sizes + 1) * after - sizes * summary.loss[groups][None, :]

    def merge_costs(self, group: int, summary: GroupSummary, groups: np.ndarray) -> np.ndarray:
        """Per group of ``groups``: how much the information loss grows when it and ``group`` merge."""
        after = sum(a.merge_loss(group, s, groups) for a, s in zip(self.attributes, summary.states))
        sizes = summary.sizes[groups] + summary.sizes[group]
        return sizes * after - summary.sizes[groups] * summary.loss[groups] - summary.sizes[group] * summary.loss[group]

    def distinct(self, records: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(one record of each distinct combination of quasi-identifier values among ``records``, the position of
        each record's in it): records alike have the same distance to everything."""
        values = np.column_stack([np.nan_to_num(a.scaled[records], nan=-1.0) if a.kind == "numeric" else a.leaf[records]
                                  for a in self.attributes])
        _, first, inverse = np.unique(values, axis=0, return_index=True, return_inverse=True)
        return records[first], inverse.ravel()

    def record_losses(self, groups: np.ndarray, count: int) -> np.ndarray:
        """(records, attributes): each record's penalty per attribute when its group is generalized to one value."""
        index = GroupIndex.of(groups, count)
        per_group = np.column_stack([a.group_loss(a.summarize(index)) for a in self.attributes])
        return per_group[groups]

    def information_loss(self, groups: np.ndarray, count: int) -> float:
        """The table's NCP: Σ over records and attributes of the penalty of its group's generalization."""
        return float(self.record_losses(groups, count).sum())


def row_blocks(rows: int, columns: int) -> Iterator[slice]:
    """Slices of ``rows`` so that each block of rows × ``columns`` stays within :data:`BLOCK_CELLS`."""
    step = max(1, BLOCK_CELLS // max(columns, 1))
    for start in range(0, rows, step):
        yield slice(start, min(start + step, rows))
