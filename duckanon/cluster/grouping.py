"""What the clustering algorithms share besides the distance: the groups' constraints, placing leftover records, and
the run that reads a source, groups its records and publishes them.

**Constraints.**  A policy's models over one sensitive attribute become a :class:`Composition` every group must meet:
at least k records, at least l distinct sensitive values, and share rules.  A share rule sorts the sensitive values
into categories -- the value itself for (α,k)-anonymity (all values, or only the highly sensitive ones), its
sensitivity level for seed 003's (α,l)-diversity k-anonymity -- and bounds each category's share of a group by its α.
All of these survive merging: the union of groups that meet them meets them, so a group can always be repaired by
merging it with others, and the whole table meets them whenever the models' own data checks pass.

**Leftovers.**  Records an algorithm could not place (:func:`absorb`) go, in rounds, to the group whose information
loss grows least when they join and that still meets the constraints; a group takes its proposers in that order for as
long as it stays valid.  Records no group can take join their nearest group anyway, and groups left invalid merge with
the group nearest them until every group is valid.

**People.**  Under a policy that counts people (``person=``) the members are people: each person's point
(:func:`~duckanon.privacy.people.person_points`) is grouped, k people per group, and :class:`PeopleComposition` then
merges the groups that fail a model of the sensitive values over people (each person's value once), as leftovers'
groups are repaired.  Every record of a person takes their group's summary.

**The run.**  :func:`run` reads the records numbered as :mod:`duckanon.recode.recoding` numbers them (by all released
columns), builds the record space and the constraints, lets a :class:`ClusteringMethod` assign groups, and returns
:class:`Clusters`, which checks the groups with the core's SQL models and publishes them through
:class:`~duckanon.recode.recoding.PartitionMap` and :func:`~duckanon.release.publish.publish`.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from sqlglot import exp

from ..declare.policy import Policy
from ..deferred import pandas as pd
from ..encode.binding import BoundPolicy, Workspace, bind
from ..engine import Engine
from ..errors import AnonymizationError, PolicyError, PolicyNotSatisfied
from ..hierarchy.bound import BoundHierarchy
from ..privacy.checks import CheckReport, check
from ..privacy.classes import Classes
from ..privacy.models import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    DistinctLDiversity,
    KAnonymity,
    PrivacyModel,
    PSensitiveKAnonymity,
)
from ..privacy.people import people_check, people_k, person_points
from ..recode.recoding import (
    RECORD,
    Assignment,
    ColumnRecoding,
    PartitionMap,
    numbered,
    numeric_kind,
)
from ..release.digest import fingerprint
from ..release.publish import (
    Release,
    measured_models,
    publish,
    refuse_unwritable,
    signing,
)
from ..sqlgen import build as sb
from .distance import CodedTexts, RecordSpace, row_blocks

# A share exactly at α passes, as in the SQL models.
TOLERANCE = 1e-9
GROUP = "group_id"
PERSON_TEXT = "__person"  # a person's key as text, as read and as written back in the key's own type
VALUE, CODE = "__value", "__code"  # a distinct text, and its number, when texts are read as numbers
_serial = itertools.count()


@dataclass(frozen=True)
class ShareRule:
    """Sensitive values sorted into categories (-1: not bounded), each category's share of a group at most α."""

    category: np.ndarray  # per value code
    alpha: np.ndarray  # per category

    def caps(self, size: int) -> np.ndarray:
        """How many records of each category a group of ``size`` records may hold."""
        return np.floor(self.alpha * size + TOLERANCE).astype(np.int64)


@dataclass
class Tally:
    """Per group: its size, its records per sensitive value (when l > 1) and per category of each share rule; over
    people, ``pairs``: its distinct (person, value) pairs, which a share is of."""

    sizes: np.ndarray
    values: np.ndarray | None
    categories: list[np.ndarray]
    pairs: np.ndarray | None = None


@dataclass
class Composition:
    """What every group must meet: ``k`` records, ``l`` distinct sensitive values, and the share ``rules``.
    ``values`` holds each record's sensitive value code (all 0 when the policy names no sensitive attribute)."""

    k: int
    l: int  # noqa: E741 - the models' own letter
    rules: list[ShareRule]
    values: np.ndarray
    value_labels: list[object]

    SUPPORTED = (KAnonymity, AlphaKAnonymity, AlphaLDiversityKAnonymity, DistinctLDiversity, PSensitiveKAnonymity)

    @classmethod
    def of(cls, models: Sequence[PrivacyModel], sensitive_values: np.ndarray | None, records: int,
           algorithm: str) -> Composition:
        """The constraints of ``models`` for the records whose sensitive values (as text, None for NULL) are given."""
        cls.require_supported(models, algorithm)
        if sensitive_values is None:
            codes, labels = np.zeros(records, dtype=np.int64), [None]
        else:
            codes, uniques = pd.factorize(pd.Series(sensitive_values, dtype=object), use_na_sentinel=False)
            codes, labels = codes.astype(np.int64), list(uniques)
        k = max([getattr(m, "k", 1) for m in models] + [1])
        l = max([getattr(m, "l", 1) for m in models if not isinstance(m, PSensitiveKAnonymity)]  # noqa: E741
                + [m.p for m in models if isinstance(m, PSensitiveKAnonymity)] + [1])
        value_alpha = np.full(len(labels), np.inf)
        rules: list[ShareRule] = []
        for model in models:
            if isinstance(model, (AlphaKAnonymity, AlphaLDiversityKAnonymity)) and model.alpha * k < 1 - TOLERANCE:
                raise PolicyError(
                    f"{model.name}: alpha·k = {model.alpha}·{k} = {model.alpha * k:g} < 1: a group of k records could "
                    f"not hold a single record of a bounded value, so no valid table of such groups exists "
                    f"(seed 001 §3.1: α·k ≥ 1)")
            if isinstance(model, AlphaKAnonymity):
                bounded = np.array([model.highly_sensitive is None or (v is not None and str(v) in
                                                                       model.highly_sensitive) for v in labels])
                value_alpha[bounded] = np.minimum(value_alpha[bounded], model.alpha)
            elif isinstance(model, AlphaLDiversityKAnonymity):
                levels = sorted(set(model.levels.values()))
                category = np.array([levels.index(model.levels[str(v)]) for v in labels], dtype=np.int64)
                rules.append(ShareRule(category, np.full(len(levels), model.alpha)))
        if np.isfinite(value_alpha).any():
            bounded = np.isfinite(value_alpha)
            category = np.where(bounded, np.cumsum(bounded) - 1, -1)
            rules.insert(0, ShareRule(category, value_alpha[bounded]))
        return cls(k, l, rules, codes, labels)

    @classmethod
    def require_supported(cls, models: Sequence[PrivacyModel], algorithm: str) -> None:
        unsupported = [m for m in models if not isinstance(m, cls.SUPPORTED)]
        if unsupported:
            names = ", ".join(m.name for m in cls.SUPPORTED)
            raise PolicyError(f"{algorithm} builds groups for {names}; it cannot guarantee "
                              f"{', '.join(m.describe() for m in unsupported)}")
        sensitive = {m.sensitive for m in models if m.sensitive is not None}
        if len(sensitive) > 1:
            raise PolicyError(f"{algorithm} protects one sensitive attribute; the policy's models name "
                              f"{sorted(sensitive)}")

    # -------------------------------------------------------------- tallies
    def tally(self, groups: np.ndarray, count: int) -> Tally:
        member = groups >= 0
        g = groups[member]
        return Tally(np.bincount(g, minlength=count), *self._tallied(g, self.values[member], count))

    def _tallied(self, g: np.ndarray, v: np.ndarray, count: int) -> tuple[np.ndarray | None, list[np.ndarray]]:
        """Per group, the values ``v`` (of members of groups ``g``) counted per value (when l > 1) and per category
        of each share rule."""
        values = None
        if self.l > 1:
            width = len(self.value_labels)
            values = np.bincount(g * width + v, minlength=count * width).reshape(count, width)
        categories = []
        for rule in self.rules:
            width = len(rule.alpha)
            c = rule.category[v]
            bounded = c >= 0
            categories.append(np.bincount(g[bounded] * width + c[bounded], minlength=count * width)
                              .reshape(count, width))
        return values, categories

    def valid(self, tally: Tally) -> np.ndarray:
        ok = tally.sizes >= self.k
        if tally.values is not None:
            ok &= (tally.values > 0).sum(axis=1) >= self.l
        shared = tally.pairs if tally.pairs is not None else tally.sizes
        for rule, counts in zip(self.rules, tally.categories):
            ok &= (counts <= rule.alpha[None, :] * shared[:, None] + TOLERANCE).all(axis=1)
        return ok

    def accepts(self, tally: Tally, records: np.ndarray, groups: np.ndarray) -> np.ndarray:
        """(len(records), len(groups)): whether a valid group stays valid when the record joins it alone (joining
        only raises the share of the record's own categories)."""
        ok = np.ones((len(records), len(groups)), dtype=bool)
        sizes = tally.sizes[groups][None, :] + 1
        for rule, counts in zip(self.rules, tally.categories):
            category = rule.category[self.values[records]]
            bounded = category >= 0
            if not bounded.any():
                continue
            held = counts[groups][:, np.maximum(category, 0)].T + 1
            fits = held <= rule.alpha[np.maximum(category, 0)][:, None] * sizes + TOLERANCE
            ok &= fits | ~bounded[:, None]
        return ok

    def first_fitting(self, tally: Tally, records: np.ndarray, targets: np.ndarray, costs: np.ndarray) -> np.ndarray:
        """Which proposals a group takes: each group takes its proposers nearest first for as long as it stays valid.
        Returns a mask over the proposals as given."""
        order = np.lexsort((records, costs, targets))
        target, record = targets[order], records[order]
        starts = np.flatnonzero(np.r_[True, target[1:] != target[:-1]])
        run = np.repeat(np.arange(len(starts)), np.diff(np.r_[starts, len(target)]))
        position = np.arange(len(target)) - starts[run]
        fits = np.ones(len(target), dtype=bool)
        for rule, counts in zip(self.rules, tally.categories):
            category = rule.category[self.values[record]]
            bounded = category >= 0
            key = np.where(bounded, target * len(rule.alpha) + category, -1)
            held = counts[target, np.maximum(category, 0)] + _occurrence(key) + 1
            room = rule.alpha[np.maximum(category, 0)] * (tally.sizes[target] + position + 1) + TOLERANCE
            fits &= ~bounded | (held <= room)
        first_misfit = np.minimum.reduceat(np.where(fits, len(target), position), starts)
        taken = np.empty(len(target), dtype=bool)
        taken[order] = position < first_misfit[run]
        return taken

    def fitting(self, seed: int, candidates: np.ndarray, need: int) -> np.ndarray | None:
        """The first ``need`` of ``candidates`` (in the order given) that a group of k records grown from ``seed`` may
        take, or None when fewer fit.  Each share rule admits a candidate while fewer of its category than the rule
        allows were admitted before it; a candidate must pass every rule (with several rules this may turn away a
        candidate a one-by-one scan would take, never the other way round)."""
        fits = np.ones(len(candidates), dtype=bool)
        for rule in self.rules:
            category = rule.category[self.values[candidates]]
            room = rule.caps(self.k)
            own = rule.category[self.values[seed]]
            if own >= 0:
                room[own] -= 1
            bounded = category >= 0
            fits &= ~bounded | (_occurrence(np.where(bounded, category, -1)) < room[np.maximum(category, 0)])
        chosen = candidates[fits][:need]
        return chosen if len(chosen) == need else None

    def splits(self, ordered: np.ndarray) -> np.ndarray:
        """Per place p of 0 … len(ordered): whether the records of ``ordered`` before p, and those from p on, each
        meet these constraints as one group."""
        values = self.values[ordered]
        return self._valid_prefixes(values) & self._valid_prefixes(values[::-1])[::-1]

    def _valid_prefixes(self, values: np.ndarray) -> np.ndarray:
        """Per length p of 0 … len(values): whether the first p records (of these sensitive values) meet these
        constraints as one group, as :meth:`valid` judges a group."""
        size = np.arange(len(values) + 1)
        ok = size >= self.k
        if self.l > 1:
            first = np.zeros(len(values), dtype=bool)
            first[np.unique(values, return_index=True)[1]] = True
            ok &= np.r_[0, np.cumsum(first)] >= self.l
        for rule in self.rules:
            category = rule.category[values]
            for j, alpha in enumerate(rule.alpha):
                ok &= np.r_[0, np.cumsum(category == j)] <= alpha * size + TOLERANCE
        return ok

    def part(self, records: np.ndarray) -> Composition:
        """The same constraints over ``records`` alone, numbered 0 … len(records) - 1 in their order."""
        return dataclasses.replace(self, values=self.values[records])

    def capacity(self, unassigned: np.ndarray) -> int:
        """How many of ``unassigned`` records one group of k could take at most: below k no further group can form."""
        most = len(unassigned)
        for rule in self.rules:
            category = rule.category[self.values[unassigned]]
            counts = np.bincount(category[category >= 0], minlength=len(rule.alpha))
            most = min(most, int((category < 0).sum() + np.minimum(counts, rule.caps(self.k)).sum()))
        return most


def _occurrence(keys: np.ndarray) -> np.ndarray:
    """For each position, how many earlier positions hold the same key (keys < 0 are not counted)."""
    order = np.argsort(keys, kind="stable")
    sorted_keys = keys[order]
    starts = np.flatnonzero(np.r_[True, sorted_keys[1:] != sorted_keys[:-1]])
    run = np.repeat(starts, np.diff(np.r_[starts, len(keys)]))
    occurrence = np.empty(len(keys), dtype=np.int64)
    occurrence[order] = np.arange(len(keys)) - run
    return occurrence


@dataclass
class PeopleComposition(Composition):
    """The constraints over people: the members are people, ``values`` the codes of the distinct (person, value)
    pairs and ``holders`` each pair's person.  A group's size is its people; its values are its people's, each
    person's once; a share is of its pairs (as the models count over people).  Only :meth:`tally` and
    :meth:`valid` serve it: the methods form groups of k people, which :func:`_repair` then merges until valid."""

    holders: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))

    @classmethod
    def of_pairs(cls, models: Sequence[PrivacyModel], values: np.ndarray, holders: np.ndarray, k: int,
                 algorithm: str) -> PeopleComposition:
        """The constraints of ``models`` over people whose distinct values (as text) are ``values``, held by the
        people numbered ``holders``; ``k`` the people a group needs."""
        pairs = Composition.of(models, values, len(values), algorithm)
        return cls(k, pairs.l, pairs.rules, pairs.values, pairs.value_labels, holders=holders)

    def tally(self, groups: np.ndarray, count: int) -> Tally:
        g = groups[self.holders]
        held = g >= 0
        sizes = np.bincount(groups[groups >= 0], minlength=count)
        return Tally(sizes, *self._tallied(g[held], self.values[held], count), pairs=np.bincount(g[held],
                                                                                               minlength=count))


def compact(groups: np.ndarray) -> tuple[np.ndarray, int]:
    """Group numbers renumbered 0 … count-1 in order of first appearance; -1 stays."""
    member = groups >= 0
    _, first, inverse = np.unique(groups[member], return_index=True, return_inverse=True)
    rank = np.empty(len(first), dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(len(first))
    out = np.full(len(groups), -1, dtype=np.int64)
    out[member] = rank[inverse]
    return out, len(first)


def absorb(space: RecordSpace, composition: Composition, groups: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """Place the records of group -1 (see the module's docstring); every given group must be valid."""
    groups = groups.copy()
    if count == 0:
        groups[:] = 0
        return _repair(space, composition, groups, 1)
    every = np.arange(count)
    while (pending := np.flatnonzero(groups < 0)).size:
        summary = space.summarize(groups, count)
        tally = composition.tally(groups, count)
        best = np.zeros(len(pending), dtype=np.int64)
        best_cost = np.zeros(len(pending))
        for block in row_blocks(len(pending), count):
            records = pending[block]
            distinct, alike = space.distinct(records)
            cost = space.join_costs(distinct, summary, every)[alike]
            cost[~composition.accepts(tally, records, every)] = np.inf
            best[block] = cost.argmin(axis=1)
            best_cost[block] = cost[np.arange(len(records)), best[block]]
        placeable = np.isfinite(best_cost)
        if not placeable.any():
            return _repair(space, composition, _nearest(space, groups, count, pending), count)
        records, targets = pending[placeable], best[placeable]
        taken = composition.first_fitting(tally, records, targets, best_cost[placeable])
        groups[records[taken]] = targets[taken]
    return groups, count


def _nearest(space: RecordSpace, groups: np.ndarray, count: int, records: np.ndarray) -> np.ndarray:
    """``records`` placed in the groups whose information loss grows least, whatever the constraints say."""
    summary = space.summarize(groups, count)
    groups = groups.copy()
    every = np.arange(count)
    for block in row_blocks(len(records), count):
        distinct, alike = space.distinct(records[block])
        groups[records[block]] = space.join_costs(distinct, summary, every).argmin(axis=1)[alike]
    return groups


def _repair(space: RecordSpace, composition: Composition, groups: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """Merge each invalid group with the group whose union with it loses least, until every group is valid."""
    while True:
        invalid = np.flatnonzero(~composition.valid(composition.tally(groups, count)))
        if not invalid.size:
            return groups, count
        if count == 1:
            raise PolicyNotSatisfied("the table as a whole does not meet the policy's constraints, so no grouping "
                                     "of its records does")
        group = int(invalid[0])
        others = np.flatnonzero(np.arange(count) != group)
        partner = others[space.merge_costs(group, space.summarize(groups, count), others).argmin()]
        groups = np.where(groups == group, partner, groups)
        groups, count = compact(groups)


# ------------------------------------------------------------------------------------------------------------- runs

@dataclass
class Records:
    """The records of a source as an algorithm sees them: record i is the source's record numbered i + 1."""

    policy: Policy
    space: RecordSpace
    composition: Composition
    columns: dict[str, np.ndarray]  # every column read, by name
    numeric: list[str]  # the numeric quasi-identifiers


class ClusteringMethod(ABC):
    """An algorithm that assigns every record of a source to a group that satisfies the policy."""

    name: str = ""

    def extra_columns(self) -> list[str]:
        """Source columns the method reads besides the quasi-identifiers and the sensitive attribute."""
        return []

    def check_policy(self, policy: Policy, numeric: Sequence[str]) -> None:
        """Reject policies the method cannot serve."""

    @abstractmethod
    def assign(self, records: Records) -> tuple[np.ndarray, int]:
        """(group of every record, numbered 0 … count-1; count)."""

    def styles(self, policy: Policy, numeric: Sequence[str]) -> dict[str, str]:
        """How the release shows each quasi-identifier (see :mod:`duckanon.recode.recoding`): numeric ones as their group's
        range, categorical ones as their lowest common ancestor (the set of their values without a hierarchy)."""
        return {q: "range" if q in numeric else "lca" if policy.quasi_identifiers[q] is not None else "set"
                for q in policy.quasi_identifier_names}

    def describe(self) -> dict:
        return {"algorithm": self.name}

    def release_recoding(self, clusters: Clusters) -> ColumnRecoding | None:
        """One more column the release recodes by the groups' partition map, if the method recodes one."""
        return None

    def release_policy(self, policy: Policy) -> Policy:
        """The policy the written release is verified against."""
        return policy


def run(workspace: Workspace, source, policy: Policy | str, method: ClusteringMethod,
        numeric: Sequence[str] | None) -> Clusters:
    """Read ``source``, let ``method`` group its records so that every group satisfies ``policy``, and return the
    groups (see :class:`Clusters`)."""
    with bind(workspace, source, policy, partitioning=True) as bound:
        return _grouped(workspace, bound, method, numeric)


def _grouped(workspace: Workspace, bound: BoundPolicy, method: ClusteringMethod, numeric: Sequence[str] | None
             ) -> Clusters:
    started = time.perf_counter()
    engine = workspace.engine
    policy = bound.policy
    quasi = policy.quasi_identifier_names
    kinds = numeric_kind(engine, bound.source, quasi)
    numeric = [q for q in quasi if kinds[q]] if numeric is None else list(numeric)
    unknown = [c for c in numeric if c not in quasi]
    if unknown:
        raise PolicyError(f"numeric={unknown} names columns that are not quasi-identifiers")
    not_numbers = [c for c in numeric if not kinds[c]]
    if not_numbers:
        raise PolicyError(f"quasi-identifiers {not_numbers} are not numeric columns, so they cannot be numeric")
    Composition.require_supported(policy.models, method.name)
    method.check_policy(policy, numeric)
    extra = method.extra_columns()
    absent = [c for c in extra if c not in engine.columns(bound.source)]
    if absent:
        raise PolicyError(f"{method.name} reads columns the source does not have: {absent}")
    numbering = bound.columns + [c for c in extra if c not in bound.columns]
    named = [m.sensitive for m in policy.models if m.sensitive is not None]
    sensitive = named[0] if named else None
    if policy.person is not None:
        if extra:
            raise PolicyError(f"{method.name} reads {extra} record by record, and a policy with person= "
                              f"({policy.person!r}) groups people: drop person= or the method's per-record columns")
        return _grouped_people(workspace, bound, method, numeric, sensitive, started)
    workspace.announce(f"{method.name}: reading the records")
    # The distinct texts come from the bound combinations, so the source is still read once.
    coded = [c for c in dict.fromkeys([*quasi, *([sensitive] if sensitive in policy.sensitive else [])])
             if c not in numeric]
    distinct = {c: text_values(bound.counted, c) for c in coded}
    values = {c: np.asarray(engine.arrays(query.order_by(sb.col(VALUE)))[VALUE], dtype=object)
              for c, query in distinct.items()}
    fetched = engine.arrays(read_query(bound.source, numbering, quasi, numeric, sensitive, extra, distinct))
    texts = {c: CodedTexts(np.ma.filled(np.ma.asarray(fetched[c]), -1).astype(np.int64), values[c]) for c in coded}
    columns = {name: texts[name].texts() if name in texts else _unmasked(column, float if name in numeric else object)
               for name, column in fetched.items()}
    space = RecordSpace.from_columns({q: texts.get(q, columns[q]) for q in quasi},
                                     {q: b.hierarchy for q, b in bound.hierarchies.items()}, numeric)
    composition = Composition.of(policy.models, columns[sensitive] if sensitive is not None else None,
                                 space.size, method.name)
    workspace.announce(f"{method.name}: grouping {space.size} records")
    records = Records(policy, space, composition, columns, numeric)
    groups, count = method.assign(records)
    seconds = time.perf_counter() - started
    return Clusters(workspace, bound, method, records, groups, count, numbering, seconds,
                    rows_fingerprint(engine, bound.source, numbering))


def _grouped_people(workspace: Workspace, bound: BoundPolicy, method: ClusteringMethod, numeric: Sequence[str],
                    sensitive: str | None, started: float) -> Clusters:
    """:func:`_grouped` under a policy that counts people: ``method`` groups the people's points
    (:func:`~duckanon.privacy.people.person_points`: numbers by value, categories by their text), k people per group,
    and groups that fail a model of the sensitive values over people (each person's value once) then merge with their
    nearest until none does; every record of a person takes their group's summary."""
    engine, policy = workspace.engine, bound.policy
    person, quasi = policy.person, policy.quasi_identifier_names
    positions = {q: sb.as_double(sb.col(q)) if q in numeric else sb.as_text(sb.col(q)) for q in quasi}
    points = person_points(bound.source, person, positions)
    workspace.announce(f"{method.name}: reading the points of {bound.people} people")
    fetched = engine.arrays(exp.select(sb.as_text(sb.col(person)).as_(PERSON_TEXT, quoted=True),
                                       *[sb.col(q) for q in quasi]).from_(points.subquery("points"))
                            .order_by(sb.col(person)))
    columns = {q: _unmasked(fetched[q], float if q in numeric else object) for q in quasi}
    people = _unmasked(fetched[PERSON_TEXT], object)
    space = RecordSpace.from_columns(columns, {q: b.hierarchy for q, b in bound.hierarchies.items()}, numeric)
    k = people_k(policy.models)
    building = Composition.of([KAnonymity(k)] if k > 1 else [], None, space.size, method.name)
    workspace.announce(f"{method.name}: grouping {space.size} people")
    records = Records(policy, space, building, columns, list(numeric))
    groups, count = method.assign(records)
    if sensitive is not None:
        pairs = engine.arrays(exp.select(sb.as_text(sb.col(person)).as_(PERSON_TEXT, quoted=True),
                                         sb.as_text(sb.col(sensitive)).as_(sensitive, quoted=True)).distinct()
                              .from_(sb.derived(bound.source, "records")))
        holders = pd.Index(people).get_indexer(_unmasked(pairs[PERSON_TEXT], object))
        composition = PeopleComposition.of_pairs(policy.models, _unmasked(pairs[sensitive], object), holders, k,
                                                 method.name)
        groups, count = _repair(space, composition, groups, count)
    return Clusters(workspace, bound, method, records, groups, count, bound.columns, time.perf_counter() - started,
                    rows_fingerprint(engine, bound.source, bound.columns), people=people)


def rows_fingerprint(engine: Engine, source: exp.Expression, columns: Sequence[str]) -> tuple[int, int]:
    """The records' count and the sum of their rows' hashes over ``columns`` (see
    :func:`~duckanon.release.digest.fingerprint`)."""
    return fingerprint(engine, exp.select(*[sb.col(c) for c in columns]).from_(sb.derived(source, "records")))


def read_query(source: exp.Expression, numbering: Sequence[str], quasi: Sequence[str], numeric: Sequence[str],
               sensitive: str | None, extra: Sequence[str], coded: Mapping[str, exp.Select] | None = None
               ) -> exp.Select:
    """The records as the algorithms read them, in the order of their number (:func:`~duckanon.recode.recoding.numbered`):
    numeric quasi-identifiers as DOUBLE, the other quasi-identifiers and the sensitive attribute as text, and the
    ``extra`` columns as they are.  A column ``coded`` names (with the query of its distinct texts,
    :func:`text_values`) is read as each text's number in that query's order by :data:`VALUE`, NULL for NULL."""
    coded = coded or {}
    read, joins = [sb.col(RECORD, "records")], []
    for column in [*quasi, *([sensitive] if sensitive is not None and sensitive not in quasi else [])]:
        if column in coded:
            alias = f"codes_{len(joins)}"
            number = exp.Window(this=exp.func("ROW_NUMBER"), order=exp.Order(expressions=[sb.col(VALUE)])) - sb.lit(1)
            numbered_texts = exp.select(sb.col(VALUE), number.as_(CODE, quoted=True)).from_(
                coded[column].subquery("texts"))
            joins.append((numbered_texts.subquery(alias), exp.EQ(this=sb.as_text(sb.col(column, "records")),
                                                                 expression=sb.col(VALUE, alias))))
            read.append(sb.col(CODE, alias).as_(column, quoted=True))
        elif column in numeric:
            read.append(sb.as_double(sb.col(column, "records")).as_(column, quoted=True))
        else:
            read.append(sb.as_text(sb.col(column, "records")).as_(column, quoted=True))
    read += [sb.col(c, "records") for c in extra if c not in quasi and c != sensitive]
    query = exp.select(*read).from_(numbered(source, numbering).subquery("records"))
    for relation, on in joins:
        query = query.join(relation, on=on, join_type="LEFT")
    return query.order_by(sb.col(RECORD, "records"))


def text_values(relation: exp.Expression, column: str) -> exp.Select:
    """The distinct texts of ``column`` in ``relation`` (NULL left out), as :data:`VALUE`."""
    return (exp.select(sb.as_text(sb.col(column)).as_(VALUE, quoted=True)).distinct().from_(relation)
            .where(exp.Not(this=exp.Is(this=sb.col(column), expression=exp.Null()))))


def _unmasked(values: np.ndarray, kind: type) -> np.ndarray:
    """A fetched column as a plain array: NaN (numbers) or None (anything else) where it is NULL."""
    if kind is float:
        return np.ma.filled(np.ma.asarray(values).astype(float), np.nan)
    if np.ma.isMaskedArray(values):
        out = np.ma.getdata(values).astype(object)
        out[np.ma.getmaskarray(values)] = None
        return out
    return np.asarray(values, dtype=object)


@dataclass
class Clusters:
    """The groups a clustering method gave the records of a source; :meth:`publish` writes them as a release."""

    workspace: Workspace
    # The policy as bound to the source when it was grouped: the check and the publish bind it no more.
    bound: BoundPolicy
    method: ClusteringMethod
    records: Records
    groups: np.ndarray
    count: int
    numbering: list[str]  # the columns records are numbered by: the released ones and those the method reads
    seconds: float
    # The rows grouped (:func:`rows_fingerprint` of the numbering columns), which the check and the publish require
    # unchanged.
    read: tuple[int, int]
    # Under a policy that counts people, the members grouped are people: their keys as text, in member order.
    people: np.ndarray | None = None
    _styles: dict[str, str] = field(init=False)

    def __post_init__(self):
        # The combinations table is the binding's, dropped when it closes: nothing after the grouping reads it.
        self.bound = dataclasses.replace(self.bound, counted=None)
        self._styles = self.method.styles(self.policy, self.records.numeric)

    @property
    def source(self) -> exp.Expression:
        return self.bound.source

    @property
    def policy(self) -> Policy:
        return self.bound.policy

    @property
    def hierarchies(self) -> dict[str, BoundHierarchy]:
        return self.bound.hierarchies

    @property
    def columns(self) -> list[str]:
        """The released columns."""
        return self.bound.columns

    @property
    def sizes(self) -> np.ndarray:
        return np.bincount(self.groups, minlength=self.count)

    @property
    def information_loss(self) -> float:
        """NCP of the quasi-identifiers (seed 001 §2.2; seed 003 formulas 1–3): Σ over records and attributes."""
        return self.records.space.information_loss(self.groups, self.count)

    def summary(self) -> str:
        sizes = self.sizes
        members = "records" if self.people is None else "people"
        return (f"{self.method.name}: {len(self.groups)} {members} in {self.count} groups of {sizes.min()}–"
                f"{sizes.max()} {members}; NCP {self.information_loss:.1f}; {self.seconds:.2f} s")

    # -------------------------------------------------------------- in SQL
    def _require_unchanged(self) -> None:
        """The groups name records by their number among the source's rows: refuse a source whose rows changed since
        they were grouped, where other records would take the groups."""
        if rows_fingerprint(self.workspace.engine, self.source, self.numbering) != self.read:
            raise AnonymizationError(f"the source {sb.to_sql(self.source)} changed since its records were grouped "
                                     f"({self.read[0]:,} records then): cluster it again")

    def _assignment(self) -> exp.Table:
        """A temporary table of (record number, group), or under a policy that counts people of (person, group)."""
        engine = self.workspace.engine
        table = sb.table(f"__duckanon_assignment_{next(_serial)}")
        if self.people is None:
            frame = pd.DataFrame({RECORD: np.arange(1, len(self.groups) + 1, dtype=np.int64), GROUP: self.groups})
            columns: list[exp.Expression] = [exp.Star()]
        else:
            # The keys went out as text, which gives every key type's value back exactly.
            person = self.policy.person
            frame = pd.DataFrame({PERSON_TEXT: self.people, GROUP: self.groups})
            kind = engine.types(self.source)[person]
            columns = [exp.cast(sb.col(PERSON_TEXT), exp.DataType.build(kind, dialect=engine.dialect)).as_(
                person, quoted=True), sb.col(GROUP)]
        with engine.registered(frame) as groups:
            engine.run(sb.create_table_as(table, exp.select(*columns).from_(groups), temporary=True))
        return table

    def _partition(self, assignment: exp.Table, recoding: ColumnRecoding | None = None) -> PartitionMap:
        description = {**self.method.describe(), "groups": self.count}
        keys = (RECORD,) if self.people is None else (self.policy.person,)
        return PartitionMap(Assignment(assignment, keys, GROUP), self._styles, description=description,
                            recoding=recoding)

    def _released(self, assignment: exp.Table) -> PartitionMap:
        """The partition map the release applies: the groups' summaries, and the method's own recoding."""
        return self._partition(assignment, self.method.release_recoding(self))

    def check(self) -> CheckReport:
        """The policy's models, evaluated by the core's SQL over the records recoded by their groups (before any
        further recoding of the sensitive values by the method)."""
        quasi, person, models = self.policy.quasi_identifier_names, self.policy.person, self.policy.models
        self._require_unchanged()
        with self._materialized(self._partition, self.numbering) as recoded:
            if person is not None:
                return people_check(self.workspace.engine, Classes.of(recoded, quasi), person, people_k(models),
                                    models=models, replaced_checked=False)
            return check(self.workspace.engine, Classes.of(recoded, quasi), models, key_names=quasi)

    def metrics(self) -> dict[str, float]:
        """The core's LM (``loss``), DM, NCP and average class size of the groups' release, computed in SQL by
        :meth:`PartitionMap.metrics <duckanon.recode.recoding.PartitionMap.metrics>`."""
        self._require_unchanged()
        assignment = self._assignment()
        try:
            return self._partition(assignment).metrics(self.workspace.engine, self.source, self.numbering,
                                                       self.hierarchies, measured_models(self.policy))
        finally:
            self.workspace.engine.run(sb.drop("TABLE", assignment))

    def recoded(self) -> contextlib.AbstractContextManager[exp.Table]:
        """A temporary table of what :meth:`publish` would release, before it checks and suppresses (for metrics)."""
        return self._materialized(self._released, self.columns)

    @contextlib.contextmanager
    def _materialized(self, recoding: Callable[[exp.Table], PartitionMap], columns: Sequence[str]
                      ) -> Iterator[exp.Table]:
        """A temporary table of ``columns`` recoded by ``recoding`` of the groups' assignment; both dropped after."""
        engine = self.workspace.engine
        assignment = self._assignment()
        recoded = sb.table(f"__duckanon_recoded_{next(_serial)}")
        try:
            compiled = recoding(assignment).compile(self.source, columns, self.hierarchies)
            engine.run(sb.create_table_as(recoded, compiled, temporary=True))
            yield recoded
        finally:
            engine.run(sb.drop("TABLE", recoded))
            engine.run(sb.drop("TABLE", assignment))

    def publish(self, path, *, table: str = "release", format: str | None = None,
                sign_with: object | None = None) -> Release:
        """Write the release: quasi-identifiers recoded by group (:class:`~duckanon.recode.recoding.PartitionMap`), checked,
        and verified by :func:`~duckanon.release.publish.publish` (``format`` and ``sign_with`` as
        :meth:`Anonymizer.publish`).  The policy stays bound as it was for the grouping: the source is read only to
        find its rows unchanged."""
        refuse_unwritable(self.source, path, table, format)
        self._require_unchanged()
        policy = self.method.release_policy(self.policy)
        for model in policy.models:
            model.check_data(self.bound.facts)
        bound = dataclasses.replace(self.bound, policy=policy.for_data(self.bound.facts))
        assignment = self._assignment()
        try:
            return publish(signing(self.workspace, sign_with), bound, self._released(assignment), path, table, format)
        finally:
            self.workspace.engine.run(sb.drop("TABLE", assignment))
