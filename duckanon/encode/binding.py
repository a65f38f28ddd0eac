"""Binding a policy to a source: the source read once into a frequency table, with what every algorithm needs of it.

:func:`bind` names the source as SQL (a table, a CSV/Parquet/JSON file, or a sqlglot expression), checks the policy's
columns against it, and reads it once into a temporary table of its distinct quasi-identifier and sensitive value
combinations with their counts.  That table gives the data facts the privacy models check their parameters against,
the check that each hierarchy covers its column's values, and the encoding searches and checks run on
(:class:`EncodedSource`).  The algorithms work in a :class:`Workspace`: the engine, the catalog, and where progress
is told.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

from sqlglot import exp

from ..declare.catalog import Catalog
from ..declare.policy import Policy
from ..engine import Engine
from ..errors import AnonymizationError, HierarchyError, PolicyError
from ..hierarchy.bound import BoundHierarchy, require_coverage
from ..hierarchy.hierarchy import level_column
from ..privacy.checks import CheckReport, check
from ..privacy.models import DataFacts, prices_classes
from ..privacy.people import (
    PeopleCheckReport,
    lacking_tables,
    people_check,
    require_people,
    table_holds,
)
from ..privacy.risk_report import RiskReport, person_risk, risk
from ..privacy.thresholds import PopulationUniqueness
from ..recode.generalization import FullDomainGeneralization
from ..recode.protect import check_methods
from ..sqlgen import build as sb
from .encoding import COUNT, Encoding, count_combinations
from .sources import source_relation
from .tables import Tables


@dataclass
class Workspace:
    """What the algorithms work with: the engine, the catalog of stored hierarchies and policies, and ``progress``,
    which, when given, is told a short message as each stage of long work starts."""

    engine: Engine
    catalog: Catalog
    progress: Callable[[str], None] | None = None
    # What writes a release's report (:func:`duckanon.report.report`), given by the façade: the rooms below it
    # publish releases, and a release is reported through the workspace it came from.
    reporter: Callable[..., Path] | None = None
    # What signs every release written through this workspace (a release.signing.Signer; see
    # release.publish.signing), None for unsigned releases.
    signer: object | None = None

    def announce(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)


@dataclass
class BoundPolicy:
    """A policy bound to one source: its relation, released columns, hierarchy tables and data facts."""

    source: exp.Expression
    policy: Policy
    columns: list[str]
    hierarchies: dict[str, BoundHierarchy]
    facts: DataFacts
    counted: exp.Table  # distinct quasi-identifier, sensitive (and person) combinations with their COUNT
    # The population table's distinct quasi-identifier combinations with their COUNT, when a model compares classes
    # with their population (δ-presence, k-map); None otherwise.
    population: exp.Table | None = None
    people: int | None = None  # the distinct people, under a policy that counts them
    # Under a source of several tables (:class:`~.tables.Tables`), each table's columns; its rows are those whose
    # ``policy.record_table`` names it.
    tables: Mapping[str, list[str]] | None = None

    def encoding(self, engine: Engine) -> Encoding:
        """The source's frequency table with every level's codes (the population's beside it, when there is one);
        under a policy that counts people, each row's person beside its sensitive values."""
        return Encoding(engine, self.counted, self.hierarchies, self.counted_sensitive, population=self.population,
                        population_carried=[*self.policy.strata, *([self.policy.person] if self.policy.person
                                                                      else [])],
                        strata=self.policy.strata)

    @property
    def counted_sensitive(self) -> list[str]:
        """The columns counted beside the quasi-identifiers: the sensitive ones and the person."""
        return [*self.policy.sensitive, *self.policy.person_columns]

    @property
    def quasi_identifiers(self) -> list[str]:
        return self.policy.quasi_identifier_names

    @property
    def lacking(self) -> dict[str, list[str]]:
        """Under a source of several tables, each quasi-identifier and sensitive column some tables lack, with those
        tables (:func:`~duckanon.privacy.people.lacking_tables`); empty otherwise."""
        return lacking_tables(self.tables or {}, [*self.quasi_identifiers, *self.policy.sensitive])

    @property
    def allowed_suppressed(self) -> int:
        """How many records, or under a policy that counts people how many people, may be suppressed."""
        return self.policy.suppression_units(self.facts.records, self.people)

    def levels(self, levels: Mapping[str, int]) -> dict[str, int]:
        return FullDomainGeneralization(levels).validate(self.hierarchies).levels


@contextlib.contextmanager
def bind(workspace: Workspace, source, policy: Policy | str, *, partitioning: bool = False,
         safepub: bool = False) -> Iterator[BoundPolicy]:
    """The policy (or the name of a stored one) bound to the source, which is read once: a temporary table of its
    distinct combinations of quasi-identifier and sensitive values with their counts gives the data facts, the
    coverage check and the encoding.  Quasi-identifiers without a hierarchy are accepted only for ``partitioning``
    (Mondrian, clustering); the bound hierarchies then cover only the others.  A differentially private policy is
    bound only for ``safepub``, the driver that enforces it: anything else would release, or search, the whole
    source without its guarantee."""
    engine = workspace.engine
    policy = workspace.catalog.policy(policy) if isinstance(policy, str) else policy
    private = [m.describe() for m in policy.models if m.differentially_private]
    if private and not safepub:
        raise PolicyError(f"{private[0]} is released by Anonymizer.anonymize (duckanon search) alone, by SafePub: it "
                          f"samples the source and chooses the transformation by the exponential mechanism. Checking, "
                          f"searching or publishing otherwise would treat the whole source without the guarantee")
    workspace.announce("reading the source and checking the policy's parameters")
    tables = None
    if isinstance(source, Tables):
        stacked = source.stack(engine)
        relation, policy, tables = stacked.relation, stacked.policy(policy), stacked.columns
    else:
        relation = source_relation(engine, source)
    columns = policy.bind(engine.columns(relation))
    check_methods(engine, relation, policy.methods)
    without = [c for c, h in policy.quasi_identifiers.items() if h is None]
    compared = [m.describe() for m in policy.models if m.population is not None]
    if compared and partitioning:
        raise PolicyError(f"{', '.join(compared)} compares classes with a population table, which only a full-domain "
                          f"generalization recodes alike (the search, check and publish); partitioning and clustering "
                          f"form classes of the data's records alone")
    priced = [m.describe() for m in policy.models if m.prices_classes]
    if priced and partitioning:
        raise PolicyError(f"{', '.join(priced)} prices each class by the domain shares of its generalized values, "
                          f"which only a full-domain generalization over hierarchies gives (the search, check and "
                          f"publish); partitioning and clustering recode otherwise")
    if without and not partitioning:
        raise PolicyError(f"quasi-identifiers {without} have no hierarchy: generalizing to levels needs one for "
                          f"each (only partitioning, such as Anonymizer.mondrian, accepts none)")
    person = policy.person
    if person is not None:
        if partitioning and tables is not None:
            raise PolicyError(f"several tables ({', '.join(tables)}) are released together by full-domain "
                              f"generalization (the search, check and publish); partitioning forms the classes of "
                              f"one table")
        require_people(engine, relation, person)
    if policy.strata:
        _require_stratifiable(policy, partitioning)
    counted = count_combinations(engine, relation, policy.quasi_identifier_names,
                                 [*policy.sensitive, *policy.person_columns, *policy.strata])
    population, people = None, None
    try:
        total = exp.func("COALESCE", exp.func("SUM", sb.col(COUNT)), sb.lit(0))
        records = int(engine.rows(exp.select(total).from_(counted))[0][0])
        if records == 0:
            raise AnonymizationError(f"the source {sb.to_sql(relation)} is empty: there is nothing to anonymize")
        value_counts = {}
        # Under a policy that counts people, a value counts its people: the models count each person's value once.
        per_value = total if person is None else exp.func("COUNT", exp.Distinct(expressions=[sb.col(person)]))
        lacking = lacking_tables(tables or {}, policy.sensitive)
        for attribute in policy.sensitive:
            query = exp.select(sb.col(attribute), per_value.copy()).from_(counted).group_by(sb.col(attribute))
            if attribute in lacking:  # only the tables that hold it: the others' NULL is no value of theirs
                query = query.where(table_holds(attribute, lacking, policy.record_table))
            value_counts[attribute] = {v: int(n) for v, n in engine.rows(query)}
        if person is not None:
            people = int(engine.value(exp.select(exp.func("COUNT", exp.Distinct(expressions=[sb.col(person)])))
                                      .from_(counted)))
        facts = DataFacts(records=records, value_counts=value_counts, people=people)
        for model in policy.models:
            model.check_data(facts)
        policy = policy.for_data(facts)
        stored = workspace.catalog.stored({c: h for c, h in policy.quasi_identifiers.items() if h is not None})
        hierarchies = {c: BoundHierarchy(c, hierarchy, table) for c, (hierarchy, table) in stored.items()}
        # One query finds the attributes whose values are all leaves of their hierarchies; only the others need
        # the full check (interval hierarchies also cover values between their cuts).
        suspect = _not_all_leaves(engine, counted, hierarchies)
        require_coverage(engine, counted, {a: hierarchies[a] for a in suspect})
        _require_nested_missing(engine, counted, hierarchies)
        named = sorted({m.population for m in policy.models if m.population is not None})
        if named:
            workspace.announce(f"reading the population table {named[0]}")
            population = _population(workspace, relation, counted, policy, named, facts.records, hierarchies)
        yield BoundPolicy(relation, policy, columns, hierarchies, facts, counted, population, people, tables)
    finally:
        for table in (counted, population):
            if table is not None:
                engine.run(sb.drop("TABLE", table))


def _require_stratifiable(policy: Policy, partitioning: bool) -> None:
    """Refuse by name what strata do not reach yet: partitioning and clustering (their groups would have to be cut
    within each stratum), and under drop mode population uniqueness (a stratum's population is its share of the
    records, which a release that drops records no longer shows its recipient)."""
    if partitioning:
        raise PolicyError(f"strata {policy.strata} are enforced by full-domain generalization (the search, check and "
                          f"publish); partitioning and clustering form classes across strata")
    estimated = [m.describe() for m in policy.models if isinstance(m, PopulationUniqueness)]
    if estimated and policy.drops:
        raise PolicyError(f"{', '.join(estimated)} within strata {policy.strata} estimates each stratum's population "
                          f"from its share of the records, which a release that drops records no longer shows: use "
                          f"suppression='replace' or 'replace-unchecked'")


def _population(workspace: Workspace, relation: exp.Expression, counted: exp.Table, policy: Policy,
                named: list[str], records: int, hierarchies: Mapping[str, BoundHierarchy]) -> exp.Table:
    """The population table read once: its quasi-identifier combinations counted, as the data's types.  It must hold
    the data (every combination at least as often), and the hierarchies must cover it."""
    engine, quasi, person = workspace.engine, policy.quasi_identifier_names, policy.person
    if len(named) > 1:
        raise PolicyError(f"the policy's models name different population tables ({', '.join(map(repr, named))}); a "
                          f"release is a sample of one population")
    if policy.record_table is not None:
        raise PolicyError(f"the population table {named[0]!r} is one table: a release of several tables is not "
                          f"counted in a population")
    source = source_relation(engine, named[0])
    types, own = engine.types(relation), engine.types(source)
    missing = [q for q in quasi if q not in own]
    if missing:
        raise PolicyError(f"the population table {named[0]!r} lacks the quasi-identifiers {missing}")
    if person is not None and person not in own:
        raise PolicyError(f"the population table {named[0]!r} lacks the person column {person!r}: under a policy "
                          f"that counts people, a signature's population is the population's people who have it")
    lacking = [s for s in policy.strata if s not in own]
    if lacking:
        raise PolicyError(f"the population table {named[0]!r} lacks the strata {lacking}: a class is counted in its "
                          f"stratum's population")
    # Under a policy that counts people, each population record keeps its person (a signature is a person's); under
    # strata, its stratum.
    carried = [*policy.strata, *([] if person is None else [person])]
    typed = exp.select(*[sb.col(c) if own[c] == types[c] else exp.cast(
        sb.col(c), exp.DataType.build(types[c], dialect=sb.DIALECT)).as_(c, quoted=True)
        for c in [*quasi, *carried]]).from_(sb.derived(source, "population")).subquery("typed")
    try:
        population = count_combinations(engine, typed, quasi, carried)
    except Exception as error:  # a value the data's type cannot hold: the population is not of this data
        raise PolicyError(f"the population table {named[0]!r}: its quasi-identifiers do not convert to the data's "
                          f"types ({error})") from None
    try:
        total = exp.func("COALESCE", exp.func("SUM", sb.col(COUNT)), sb.lit(0))
        people = int(engine.value(exp.select(total).from_(population)))
        if people < records:
            raise PolicyError(f"the population table {named[0]!r} holds {people} records, fewer than the data's "
                              f"{records}: it cannot be the population the data was sampled from")
        _require_contained(engine, counted, population, policy.class_keys, named[0])
        require_coverage(engine, population, hierarchies)
    except BaseException:
        engine.run(sb.drop("TABLE", population))
        raise
    return population


def _require_contained(engine: Engine, counted: exp.Table, population: exp.Table, quasi: list[str],
                       name: str) -> None:
    """Refuse a population that lacks some of the data's records: a combination of quasi-identifiers found more
    often in the data than in the population (named, the first such)."""
    def combinations(table: exp.Table, alias: str) -> exp.Subquery:  # each counted beside other columns (a person)
        return (exp.select(*[sb.col(q) for q in quasi], exp.func("SUM", sb.col(COUNT)).as_(COUNT, quoted=True))
                .from_(table).group_by(*[sb.col(q) for q in quasi]).subquery(alias))

    on = sb.and_all(exp.NullSafeEQ(this=sb.col(q, "s"), expression=sb.col(q, "p")) for q in quasi)
    held = exp.func("COALESCE", sb.col(COUNT, "p"), sb.lit(0))
    query = (exp.select(*[sb.col(q, "s") for q in quasi], sb.col(COUNT, "s"), held)
             .from_(combinations(counted, "s")).join(combinations(population, "p"), on=on, join_type="LEFT")
             .where(held < sb.col(COUNT, "s")).limit(1))
    rows = engine.rows(query)
    if rows:
        *values, in_data, in_population = rows[0]
        shown = ", ".join(f"{q} = {v!r}" for q, v in zip(quasi, values))
        raise PolicyError(f"the population table {name!r} does not hold the data: {shown} is in {in_data} of the "
                          f"data's records and {in_population} of the population's")


def _require_nested_missing(engine: Engine, counted: exp.Table, hierarchies: Mapping[str, BoundHierarchy]) -> None:
    """Refuse a hierarchy under which a class holding the column's missing values would split on a higher level: a
    generalization must only merge classes, or no search can trust a node's verdict for the nodes above it."""
    for attribute, bound in hierarchies.items():
        split = bound.hierarchy.missing_split()
        if split is None:
            continue
        missing = exp.select(exp.func("COUNT", exp.Star())).from_(counted).where(sb.col(attribute).is_(exp.Null()))
        if int(engine.rows(missing)[0][0]):
            value, level, label = split
            raise HierarchyError(
                f"the hierarchy of {attribute!r} generalizes {value!r} to NULL on level {level} and to {label!r} on "
                f"level {level + 1}, while the column's missing values stay NULL on every level (the hierarchy has no "
                f"NULL row): their class on level {level} would split above it. Give NULL a row (e.g. NULL, …, "
                f"{label!r}) or {value!r} a label on level {level}")


def _not_all_leaves(engine: Engine, counted: exp.Table, hierarchies: Mapping[str, BoundHierarchy]) -> list[str]:
    """The attributes with a known value (its text) that is not a leaf of their hierarchy, in one query: every
    attribute's values beside its name, joined to every hierarchy's leaves beside theirs (on Spark, one job or two
    rather than two per attribute)."""
    if not hierarchies:
        return []
    attribute, value, leaf = "__attribute", "__value", level_column(0)

    def stacked(selects: list[exp.Select]) -> exp.Query:
        return functools.reduce(lambda a, b: exp.union(a, b, distinct=False, copy=False), selects)

    values = stacked([exp.select(sb.lit(a).as_(attribute, quoted=True), sb.as_text(sb.col(a)).as_(value, quoted=True))
                      .from_(counted).where(sb.col(a).is_(exp.Null()).not_()) for a in hierarchies])
    leaves = stacked([exp.select(sb.lit(a).as_(attribute, quoted=True), sb.col(leaf).as_(value, quoted=True))
                      .from_(b.table).where(sb.col(leaf).is_(exp.Null()).not_()) for a, b in hierarchies.items()])
    on = exp.and_(sb.col(attribute, "v").eq(sb.col(attribute, "h")), sb.col(value, "v").eq(sb.col(value, "h")))
    query = (exp.select(sb.col(attribute, "v")).distinct().from_(values.subquery("v"))
             .join(leaves.subquery("h"), on=on, join_type="LEFT").where(sb.col(attribute, "h").is_(exp.Null())))
    found = {row[0] for row in engine.rows(query)}
    return [a for a in hierarchies if a in found]


class EncodedSource:
    """A source encoded once for a policy: checking a vector of levels is one GROUP BY over a frequency table.  It
    keeps its binding (the counted combinations, a population's table) until closed, so that a search, a check and a
    publish of one call share this one read and encoding of the source."""

    def __init__(self, engine: Engine, bound: BoundPolicy, binding: contextlib.ExitStack):
        self.engine, self.bound, self._binding = engine, bound, binding
        self.encoding = bound.encoding(engine)

    def check(self, levels: Mapping[str, int]) -> CheckReport:
        levels = self.bound.levels(levels)
        policy = self.bound.policy
        if policy.person is not None:
            return self._check_people(levels)
        classes = self.encoding.classes(levels, priced=prices_classes(self.bound.policy.models))
        report = check(self.engine, classes, self.bound.policy.models, key_names=policy.class_keys,
                       allowed_suppressed=self.bound.allowed_suppressed, drop=self.bound.policy.drops,
                       replaced_checked=self.bound.policy.checks_replaced)
        # The listing holds level codes; show the generalized values they stand for.
        if len(report.violation_rows):
            quasi = self.bound.quasi_identifiers
            labels = self.encoding.labels_at({i: levels[a] for i, a in enumerate(quasi)})
            for i, attribute in enumerate(quasi):
                report.violation_rows = report.violation_rows.mapped(attribute, labels[i])
        return report

    def _check_people(self, levels: Mapping[str, int]) -> PeopleCheckReport:
        """The check of a policy that counts people: every signature shared by k people."""
        policy = self.bound.policy
        classes = self.encoding.classes(levels, priced=prices_classes(policy.models))
        return people_check(self.engine, classes, policy.person, policy.person_k,
                            models=policy.models, allowed_suppressed=self.bound.allowed_suppressed,
                            replaced_checked=policy.checks_replaced, record_table=policy.record_table,
                            lacking=self.bound.lacking, drops=policy.drops)

    def risk(self, levels: Mapping[str, int], threshold: int = 5) -> RiskReport:
        """The prosecutor risk of the generalization to ``levels`` before suppression: of records, or under a policy
        that counts people of people (1 / the people sharing their signature)."""
        classes, policy = self.encoding.classes(self.bound.levels(levels)), self.bound.policy
        if policy.person is not None:
            return person_risk(self.engine, classes, policy.person, threshold=threshold,
                               record_table=policy.record_table)
        return risk(self.engine, classes, threshold=threshold)

    def close(self) -> None:
        with self._binding:
            self.encoding.close()

    def __enter__(self) -> EncodedSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def encode(workspace: Workspace, source, policy: Policy | str) -> EncodedSource:
    """Read ``source`` once into a frequency table with every level's codes, for many fast checks."""
    binding = contextlib.ExitStack()
    try:
        bound = binding.enter_context(bind(workspace, source, policy))
        workspace.announce("encoding the source into a frequency table")
        return EncodedSource(workspace.engine, bound, binding)
    except BaseException:
        binding.close()
        raise


@contextlib.contextmanager
def encoded_source(workspace: Workspace, source, policy: Policy | str | None) -> Iterator[EncodedSource]:
    """``source`` encoded for ``policy``: an :class:`EncodedSource` as it is (``policy`` then its own, or None), any
    other source read and encoded here and closed on leaving."""
    if isinstance(source, EncodedSource):
        if policy is not None:
            policy = workspace.catalog.policy(policy) if isinstance(policy, str) else policy
            # The bound policy holds what its models derived from the data (estimated k-map's k'): compare alike.
            if policy.for_data(source.bound.facts) != source.bound.policy:
                raise PolicyError("the encoded source was encoded for another policy; use it with its own (or none)")
        yield source
        return
    if policy is None:
        raise PolicyError("a policy is needed for a source that is not encoded for one")
    with encode(workspace, source, policy) as encoded:
        yield encoded
