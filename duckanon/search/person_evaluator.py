"""Evaluating lattice nodes of a policy that counts people (``Policy(person=...)``), in process.

The frequency table carries each row's person beside its quasi-identifiers (:meth:`BoundPolicy.encoding`).  At a
node, every row gets its class; each person's signature is the set of their classes, and people whose signature
fewer than k people share are suppressed, all their records at once (:func:`~duckanon.privacy.people
.signature_sharing`).  A class may so lose some of its records and keep others: the metrics are summed over the
classes split into their kept and suppressed parts, which is what the release shows.

Verdicts and the suppression limit count people; the suppressed records' own signature (every value ``*``) must hold
k people under ``replace``.  In a release of several tables, a class is one table's combination of values (the
rows' table codes join the grouping), and suppressed people share a signature with those who have records in the same
tables.  Being within the limit is monotone: generalizing merges classes, so people with one
signature keep sharing one, and signature groups only grow.  A metric's lower bound is kept only where it holds
whichever records are suppressed (a suppressed record costs the most, or suppression is not counted); the others
search without bounds, which stays exact.  Publishing checks the same in SQL (:func:`~duckanon.privacy.people
.people_check`), and tests hold the two together.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence

import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..encode.encoding import code_column
from ..privacy.cells import ClassCells
from ..privacy.classes import information_losses
from ..privacy.people import (
    group_cut,
    population_models,
    priced_models,
    signature_groups_of,
    signature_sharing,
    thresholds_failing,
    unmendable_models,
    valued_models,
)
from ..privacy.thresholds import risk_thresholds
from ..sqlgen import build as sb
from ..utility.metrics import (
    DiscernibilityStar,
    Loss,
    NodeTotals,
    NonUniformEntropy,
    NormalizedCertaintyPenalty,
)
from .evaluator import NodeResult
from .memory_evaluator import MemoryNodeEvaluator, _group, _NodeClasses

# Metrics whose lower bound holds however many of a class's records are suppressed: a suppressed record costs at
# least what any generalization of it does (Loss, NCP, non-uniform entropy), or suppression does not count (DM*).
_BOUNDED = (Loss, NormalizedCertaintyPenalty, NonUniformEntropy, DiscernibilityStar)


class PersonNodeEvaluator(MemoryNodeEvaluator):
    """A :class:`MemoryNodeEvaluator` whose classes are judged by people's signatures (see the module's text)."""

    def __init__(self, *args, person: str, k: int, record_table: str | None = None,
                 lacking: Mapping[str, Sequence[str]] | None = None, **kwargs):
        super().__init__(*args, **kwargs)
        self.person, self.k, self.record_table = person, k, record_table
        self.people = len(self.values[person])
        self.attributes = len(self.hierarchies)
        self.valued, self.thresholds = valued_models(self.models), risk_thresholds(self.models)
        # Per sensitive column some tables lack, the codes of the tables that hold it (whose records its models count).
        self.holders = {} if record_table is None else {
            name: np.flatnonzero(~np.isin(np.asarray(self.values[record_table].texts, dtype=object), lacking[name]))
            for name in self.valued if name in (lacking or {})}
        self._whole_table_counts: dict[str, np.ndarray] = {}
        self.counted, self.priced = population_models(self.models), priced_models(self.models)
        # The population's people, for the models counted in it and a journalist's profitability priced over it.
        self.population_people = self._population_people() if self.counted or any(
            m.population is not None for m in self.priced) else None

    def _population_people(self) -> tuple[list[list[np.ndarray]], np.ndarray, int]:
        """The population's rows for the models counted in it: per attribute, its codes (0-based) on every level;
        each row's person (codes 0 … after the data's people, as signature_groups_of takes them with the data's);
        and the population's people."""
        table = self.encoding.population_table
        names = [code_column(i, j) for i, h in enumerate(self.hierarchies) for j in range(h.levels)]
        arrays = self.encoding.engine.arrays(exp.select(
            *[exp.cast(sb.col(c) - sb.lit(1), exp.DataType.build("INTEGER")).as_(c, quoted=True) for c in names],
            sb.col(self.person)).from_(table))
        codes = [[np.asarray(arrays[code_column(i, j)]) for j in range(h.levels)] for i, h in enumerate(self.hierarchies)]
        person, people = pd.factorize(np.asarray(arrays[self.person], dtype=object))
        return codes, person.astype(np.int64) + self.people, len(people)

    def _population_groups(self, node: np.ndarray, codes: Sequence[np.ndarray], cards: Sequence[int],
                           person: np.ndarray) -> tuple[np.ndarray, np.ndarray, int]:
        """Per data person, their signature group's id among the data's and the population's people together; per
        group, the population's people with its signature; and how many population groups no data person has (as
        :func:`~duckanon.privacy.people.signature_classes` counts them)."""
        own_codes, own_person, own_people = self.population_people
        columns = [np.concatenate([mine, own_codes[i][level]]) for i, (mine, level) in enumerate(zip(codes, node))]
        together = _group(columns, cards, np.ones(len(columns[0])))
        group = signature_groups_of(together.ids, np.concatenate([person, own_person]), self.people + own_people)
        population = np.bincount(group[self.people:], minlength=int(group.max()) + 1)
        held = np.bincount(group[:self.people], minlength=len(population)) > 0
        return group[:self.people], population, int(((population > 0) & ~held).sum())

    # Every node is computed from the frequency table itself: a snapshot groups rows by class and would merge people.
    def _may_snapshot(self, index, node, source, classes) -> bool:
        return False

    def _snapshot_meets(self, nodes) -> None:
        return None

    def _people_classes(self, node: np.ndarray) -> tuple[_NodeClasses, int, int, float, bool, bool]:
        """The node's classes split into kept and suppressed parts (``violated`` marks the latter), the people
        suppressed, the unsplit classes' count and squares, and whether the suppressed people, all their values '*',
        violate the policy (fewer than k with records in the same tables, or their values one class violating a
        model), as :func:`~duckanon.privacy.people.people_check`'s ``replaced_class_violates``, and whether a risk
        threshold fails the signature groups the release would show (its ``unmendable``)."""
        rows = self.base
        codes = self._codes(rows, node)
        cards = [self.cards[i][level] for i, level in enumerate(node)]
        classes = _group(codes, cards, rows.weights)
        person = rows.sensitive[self.person]
        signed = classes if self.record_table is None else _group(
            [classes.ids, rows.sensitive[self.record_table]], [classes.count, len(self.values[self.record_table])],
            rows.weights)
        groups = self._population_groups(node, codes, cards, person) if self.population_people is not None else None
        # Per row, its class's sum of log10 domain shares, which a priced profitability model prices it by.
        shares = self._log_shares(node, classes)[classes.ids] if self.priced else None
        exposed = self._settled(signed.ids, person, rows, groups, shares)
        suppressed_rows = exposed[person]
        parts = _group([*codes, suppressed_rows.astype(np.int32)], [*cards, 2], rows.weights)
        violated = parts.codes[-1].astype(bool)
        split = _NodeClasses(node, rows, codes, parts, parts.sizes, {}, violated)
        sizes = classes.sizes
        people = int(exposed.sum())
        starred = (np.zeros(int(suppressed_rows.sum()), dtype=np.int64) if self.record_table is None
                   else rows.sensitive[self.record_table][suppressed_rows].astype(np.int64))  # one class per table
        starred_groups = self._starred_groups(exposed, person, rows)
        starred_violates = people > 0 and (int(starred_groups.min()) < self.k or (
            bool(self.valued) and self._violating(starred, person[suppressed_rows], rows, suppressed_rows,
                                                  None).any()) or (  # their population: every population person
            groups is not None and self._population_fails(np.array([people]),
                                                          np.array([self.population_people[2]])).any()) or (
            self._priced_fail(np.array([people]), np.zeros(1),  # '*' values' shares are 1: their logs 0
                              None if groups is None else np.array([self.population_people[2]])).any()))
        failing = bool(self.thresholds) and bool(thresholds_failing(self.thresholds, np.concatenate([
            self._groups(signed.ids, person, ~suppressed_rows)[0],
            starred_groups if self.suppressed_class else starred_groups[:0]])))
        failing = failing or (groups is not None and any(  # a population signature no data person has
            model.unmendable_with(groups[2]) for model in unmendable_models(self.models)))
        return split, people, classes.count, float(np.dot(sizes, sizes)), starred_violates, failing

    def _priced_fail(self, sizes: np.ndarray, shares: np.ndarray, population: np.ndarray | None) -> np.ndarray:
        """Per signature group of ``sizes`` people whose costliest class's log10 domain shares sum to ``shares`` (and
        of ``population`` population people), whether it fails a profitability model that prices classes."""
        failing = np.zeros(len(sizes), dtype=bool)
        losses = information_losses(shares, self.most_information) if self.priced else None
        for model in self.priced:
            failing |= model.priced_verdicts(sizes, losses, population if model.population is not None else None)
        return failing

    def _population_fails(self, sizes: np.ndarray, population: np.ndarray) -> np.ndarray:
        """Per signature group of ``sizes`` people and ``population`` population people, whether it fails a model
        counted in the population."""
        failing = np.zeros(len(sizes), dtype=bool)
        for model in self.counted:
            failing |= model.population_verdicts(sizes, population)
        return failing

    def _settled(self, signed: np.ndarray, person: np.ndarray, rows,
                 groups: tuple[np.ndarray, np.ndarray, int] | None, shares: np.ndarray | None) -> np.ndarray:
        """Per person, whether the policy suppresses them: as :func:`~duckanon.privacy.people.settled_people`
        (``signed``: each row's class, one table's in a release of several tables, as signatures and models count
        it; ``groups``: :meth:`_population_groups`, for the models counted in the population; ``shares``: each row's
        class's log10 domain shares, for the priced profitability models)."""

        def population_failing(kept: np.ndarray) -> np.ndarray:
            """Per person, whether their signature group, of the ``kept`` people, fails a population's model or is
            priced out by a profitability model (the group's costliest class,
            :func:`~duckanon.privacy.people.priced_signature_classes`)."""
            failing = np.zeros(self.people, dtype=bool)
            if groups is not None and self.counted:
                group, population, _ = groups
                sizes = np.bincount(group[kept], minlength=len(population))
                failing |= kept & self._population_fails(sizes[group], population[group])
            if self.priced:
                on = kept[person]
                sizes, who, group = self._groups(signed, person, on)
                costliest = np.full(self.people, -np.inf)
                np.maximum.at(costliest, person[on], shares[on])
                population = None if groups is None else groups[1][groups[0][who]]
                failing[who] |= self._priced_fail(sizes[group], costliest[who], population)
            return failing

        if not self.valued and not self.thresholds:
            return (signature_sharing(signed, person, self.people) < self.k) | population_failing(
                np.ones(self.people, dtype=bool))
        suppressed = np.zeros(self.people, dtype=bool)
        cuts = 0
        while True:
            on = ~suppressed[person]
            sizes, who, group = self._groups(signed, person, on)
            newly = population_failing(~suppressed)
            newly[who[sizes[group] < self.k]] = True
            if self.valued:
                newly[person[on][self._violating(signed[on], person[on], rows, on, on if self.settles else None)]] = True
            if not newly.any():
                if not self.thresholds or (cuts and not self.valued):
                    return suppressed
                cuts += 1
                newly[who[np.isin(group, self._cut_groups(sizes, who, group))]] = True
                if not newly.any():
                    return suppressed
            suppressed |= newly

    def _groups(self, signed: np.ndarray, person: np.ndarray, on: np.ndarray
                ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The signature groups of the rows ``on``: each group's people, the people (codes, ascending), and each
        one's group."""
        who, codes = np.unique(person[on], return_inverse=True)
        group = signature_groups_of(signed[on], codes, len(who))
        return np.bincount(group), who, group

    def _cut_groups(self, sizes: np.ndarray, who: np.ndarray, group: np.ndarray) -> np.ndarray:
        """The groups :func:`~duckanon.privacy.people.group_cut` suppresses: the smallest, among those of one size
        those whose first person (the lowest code: the column's order) comes first."""
        first = np.full(len(sizes), np.iinfo(np.int64).max)
        np.minimum.at(first, group, who)
        order = np.lexsort((first, sizes))
        return order[:group_cut(self.thresholds, sizes)]

    def _violating(self, class_ids: np.ndarray, person: np.ndarray, rows, taken: np.ndarray,
                   table: np.ndarray | None) -> np.ndarray:
        """Per row (of those ``taken``), whether its class violates a model over sensitive values, each person's
        value counted once per class (the distinct (class, person, value) rows, as the SQL counts them), of the
        tables that hold the sensitive column; and once in the table the rows ``table`` form (every row when None)
        for the models that compare with it."""
        dense, classes = pd.factorize(class_ids)
        hit = np.zeros(len(classes), dtype=bool)
        for name, models in self.valued.items():
            values = self.values[name]
            counted = self._holding(name, rows, taken)
            if not counted.any():
                continue
            # The classes of the counted records only: a class of a table without the column has no value to judge.
            judged, judged_classes = pd.factorize(dense[counted])
            # Each distinct (cell, person) once, packed in one integer (a cell's code below the rows, a person's below
            # the people: it fits 64 bits), as sorting integers beats sorting rows.
            cell = judged.astype(np.int64) * len(values) + rows.sensitive[name][taken][counted].astype(np.int64)
            code, distinct = pd.factorize(cell)
            pairs = np.unique(code.astype(np.int64) * self.people + person[counted])
            first, counts = np.unique(pairs // self.people, return_counts=True)
            order = np.argsort(distinct[first])  # cells sorted by class, then value
            cells, counts = distinct[first][order], counts[order]
            cells_of = ClassCells(sizes=np.bincount(cells // len(values), weights=counts,
                                                    minlength=len(judged_classes)).astype(np.int64),
                                  cell_class=cells // len(values), cell_value=cells % len(values),
                                  cell_count=counts.astype(np.int64),
                                  table_counts=self._table_counts(name, rows, table), values=values)
            for model in models:
                hit[judged_classes[model.cell_violations(cells_of)]] = True
        return hit[dense]

    def _holding(self, name: str, rows, taken: np.ndarray) -> np.ndarray:
        """Per row of those ``taken``, whether its table holds sensitive column ``name``."""
        if name not in self.holders:
            return np.ones(int(taken.sum()), dtype=bool)
        return np.isin(rows.sensitive[self.record_table][taken], self.holders[name])

    def _table_counts(self, name: str, rows, table: np.ndarray | None) -> np.ndarray:
        """Per value code of sensitive column ``name``, the people with that value among the rows ``table`` (all
        when None; then computed once) of the tables holding the column: each person's value once in the table."""
        if table is None and name in self._whole_table_counts:
            return self._whole_table_counts[name]
        taken = np.ones(len(rows.weights), dtype=bool) if table is None else table
        held = self._holding(name, rows, taken)
        values = len(self.values[name])
        pairs = np.unique(rows.sensitive[self.person][taken][held].astype(np.int64) * values
                          + rows.sensitive[name][taken][held])
        counts = np.bincount(pairs % values, minlength=values).astype(np.int64)
        if table is None:
            self._whole_table_counts[name] = counts
        return counts

    def _starred_groups(self, exposed: np.ndarray, person: np.ndarray, rows) -> np.ndarray:
        """The sizes of the groups the ``exposed`` people form once their values are all '*': one, or per set of
        tables they have records in."""
        count = int(exposed.sum())
        if self.record_table is None or count == 0:
            return np.array([count] if count else [], dtype=np.int64)
        mine = exposed[person]
        who, index = np.unique(person[mine], return_inverse=True)
        return np.bincount(signature_groups_of(rows.sensitive[self.record_table][mine], index, len(who)))

    def _suppressed_entropy(self, classes: _NodeClasses) -> tuple[float, ...]:
        # the split's last column marks the suppressed part
        return super()._suppressed_entropy(classes)[:self.attributes]

    def _evaluate(self, indices: list[int]) -> dict[int, NodeResult]:
        results = {}
        for index in indices:
            node = np.asarray(self.lattice.node(index), dtype=np.int64)
            split, people, count, squares, starred_violates, failing = self._people_classes(node)
            totals = dataclasses.replace(self._totals(split), classes=count, squares=squares)
            results[index] = self._people_result(index, totals, people, starred_violates, failing)
        return results

    def _people_result(self, index: int, totals: NodeTotals, people: int, starred_violates: bool,
                       failing: bool) -> NodeResult:
        # failing: a risk threshold the cut left, or a population signature no data person has
        within_limit = people <= self.allowed_suppressed and not failing
        satisfied = within_limit and not (self.suppressed_class and starred_violates)
        return NodeResult(node=self.lattice.node(index), suppressed=totals.suppressed, within_limit=within_limit,
                          satisfied=satisfied, values={m.name: m.value(totals) for m in self.metrics},
                          bounds={m.name: m.lower_bound(totals) if type(m) in _BOUNDED else -math.inf
                                  for m in self.metrics}, classes=totals.classes)

    def _suppressed_class_violates(self, node) -> bool:
        return self._people_classes(np.asarray(node, dtype=np.int64))[4]

    def prior_bounds(self) -> np.ndarray:
        if type(self.metrics[0]) in _BOUNDED:
            return super().prior_bounds()
        return np.full(self.lattice.size, -np.inf)
