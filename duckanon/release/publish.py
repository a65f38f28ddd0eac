"""Publishing a transformation of a bound source: recode, check and suppress, write, verify.

:func:`publish` recodes the quasi-identifiers by any :class:`~duckanon.recode.generalization.Transformation`, checks
the policy's models over the recoded classes and suppresses what violates them (:func:`suppress`), adds the numbers'
typed bounds, and writes the release file with its ``release_info`` and a classes view (:mod:`duckanon.release.files`);
the written file is verified on its own (:func:`verify_release`) before it replaces the target.  Every algorithm ends
here: full-domain generalization, Mondrian's and the clusterings' partition maps.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from sqlglot import exp

from ..declare.policy import SUPPRESSED, Policy
from ..deferred import pandas as pd
from ..encode.binding import BoundPolicy, EncodedSource, Workspace, bind
from ..encode.encoding import COUNT, price_column
from ..encode.tables import Tables
from ..engine import Engine
from ..errors import AnonymizationError, PolicyError, PolicyNotSatisfied, ReleaseCheckFailed
from ..hierarchy.shares import log_domain_shares, log_domain_size
from ..privacy.checks import CheckReport, check, class_verdicts, verdict_report
from ..privacy.classes import SIZE, VIOLATED, Classes, Pricing, compatible_classes
from ..privacy.models import KAnonymity, PrivacyModel, prices_classes
from ..privacy.people import (
    PERSON,
    PeopleCheckReport,
    people_check,
    table_holds,
)
from ..recode.generalization import Transformation
from ..recode.protect import protected
from ..recode.ranges import Ranges
from ..recode.recoding import PartitionMap
from ..risk.counting import class_size_histogram
from ..sqlgen import build as sb
from .files import (
    INFO_TABLE,
    ReleaseContent,
    ReleaseInfo,
    checked_table_name,
    release_format,
    write_release,
)
from .digest import rows_by_text
from .signing import Signer
from .verify import MISSING_MATCHES_ANY, VIEW, verification_view

_temporaries = itertools.count()
PERSON_CARRIED = "__duckanon_person"  # each recoded record's person, as the source has it
RECORDS = "__duckanon_records"  # how many records a row of the recoded table stands for


class Reportable:
    """A written release that knows where it came from (``origin``: the workspace, the source relation and the
    policy, None where there is none), so that it can be reported on with its source beside it."""

    path: Path
    origin: tuple[Workspace, exp.Expression, Policy | None] | None

    def report(self, path: str | os.PathLike | None = None, **options) -> Path:
        """Write this release's HTML report, its source and policy beside it (``options`` as
        :meth:`duckanon.session.Anonymizer.report`)."""
        workspace = self.origin[0] if self.origin is not None else None
        if workspace is None or workspace.reporter is None:
            raise AnonymizationError("this release does not know its source: use Anonymizer.report(path, source=...)")
        _, source, policy = self.origin
        return workspace.reporter(workspace, self.path, path, source=source, policy=policy, **options)


@dataclass
class Release(Reportable):
    """What a publish wrote."""

    path: Path
    table: str
    records_in: int
    records_out: int
    suppressed: int
    check: CheckReport
    origin: tuple[Workspace, exp.Expression, Policy | None] | None = field(default=None, repr=False, compare=False)

    def summary(self) -> str:
        return (f"released {self.records_out} of {self.records_in} records to {self.path} (table {self.table!r}); "
                f"{self.suppressed} suppressed")


def publish_source(workspace: Workspace, source, policy: Policy | str, transformation: Transformation,
                   path: str | os.PathLike, table: str, format: str | None,
                   measure: Callable[[BoundPolicy], Mapping[str, float]] | None = None) -> Release:
    """Bind ``policy`` to ``source`` and :func:`publish` ``transformation`` of it; ``measure`` gives the metrics the
    release records (a partition map measures itself without it)."""
    refuse_unwritable(source, path, table, format)
    with bind(workspace, source, policy, partitioning=isinstance(transformation, PartitionMap)) as bound:
        return publish(workspace, bound, transformation, path, table, format,
                       measure(bound) if measure is not None else None)


def publish(workspace: Workspace, bound: BoundPolicy, transformation: Transformation, path: str | os.PathLike,
            table: str, format: str | None, metrics: Mapping[str, float] | None = None,
            read: Sequence[exp.Expression] = ()) -> Release:
    """Write ``transformation`` of ``bound``'s source to ``path`` as table ``table``, violating classes suppressed.

    ``metrics``: what the algorithm measured of this transformation, recorded in the release's info; a partition
    map's are measured here when not given.  ``read``: the relations ``bound``'s source was made from (a sample's
    source), whose files the release may not replace either.  Under a differentially private policy the info leaves
    out the source's records and the suppressed ones: the mechanism releases neither."""
    engine = workspace.engine
    with _Temporaries(engine) as temporaries:
        if isinstance(transformation, PartitionMap):
            transformation.require_styles(bound.quasi_identifiers)
            workspace.announce("summarizing the groups")
            transformation = transformation.summarized(engine, bound.source, bound.columns, bound.hierarchies,
                                                       temporaries.create)
            if metrics is None:
                metrics = partition_metrics(workspace, bound, transformation)
        workspace.announce("recoding the quasi-identifiers")
        ranges = transformation.ranges(engine, bound.source, bound.columns, bound.hierarchies, temporaries.create)
        generalized, weight = temporaries.create_protected(bound, transformation)
        population = _generalized_population(bound, transformation, temporaries)
        prices = label_prices(engine, bound, transformation, generalized)
        workspace.announce("checking the policy and suppressing")
        if transformation.missing_matches_any:
            report, suppressed = _check_compatible(engine, bound, generalized, transformation.kind), 0
            final = exp.select(exp.Star()).from_(generalized)
        else:
            report, final, suppressed = suppress(engine, bound, generalized, temporaries, population, prices, weight)
        # The numbers' bounds beside their labels, NULL for '*'.
        final = ranges.joined(final, [*bound.columns, *([weight] if weight else [])])
        quasi, keys = bound.quasi_identifiers, bound.policy.class_keys
        classes_view = (exp.select(*[sb.col(c) for c in ranges.columns(keys)],
                                   exp.func("COUNT", exp.Star()).as_("records"))
                        .from_(sb.table(table)).group_by(*[sb.col(c) for c in ranges.columns(keys)]))
        withheld = any(m.differentially_private for m in bound.policy.models)
        info = ReleaseInfo(
            kind=transformation.kind, source_records=None if withheld else bound.facts.records,
            suppressed_records=None if withheld else suppressed,
            suppression=bound.policy.suppression,
            policy=described_policy(bound, report, transformation.missing_matches_any),
            transformation=transformation.describe(), metrics=metrics or {}, classes_by=quasi,
            strata=bound.policy.strata,
            person=bound.policy.person, missing_matches_any=transformation.missing_matches_any)
        types = engine.types(final)
        verification = verification_view(table, {c: types[c] for c in ranges.columns(bound.columns)}, quasi,
                                          bound.policy.models, bound.allowed_suppressed, bound.policy.suppression,
                                          bound.policy.person, bound.policy.record_table, bound.lacking,
                                          transformation.missing_matches_any, bound.policy.strata)
        content = ReleaseContent(table, final, {f"{table}_classes": classes_view, VIEW: verification}, info,
                                 sources=[bound.source, *read], parts=released_parts(bound, ranges),
                                 record_table=bound.policy.record_table, weight=weight)
        dropped = suppressed if bound.policy.drops else 0
        expected = bound.facts.records - dropped
        workspace.announce(f"writing {path}")
        # The population's classes, counted here, go to the connection that re-checks the written file.
        population_classes = None if population is None else engine.frame(
            _population_classes(population, quasi, starred=suppressed > 0 and not bound.policy.drops,
                                person=bound.policy.person, strata=bound.policy.strata))
        path = write_release(engine, path, content,
                             lambda reader: verify_release(reader, table, bound, transformation, expected, ranges,
                                                           population_classes, prices),
                             format=format, signer=workspace.signer, announce=workspace.announce)
        return Release(path, table, bound.facts.records, expected, suppressed, report,
                       origin=(workspace, bound.source, bound.policy))


def refuse_unwritable(source, path: str | os.PathLike, table: str, format: str | None) -> None:
    """Refuse, before any work, a release path of an unknown extension or a table name the release cannot have."""
    release_format(path, format)
    checked_table_names(source, table)


def checked_table_names(source, table: str) -> None:
    """Refuse a ``table`` name no release's table can have, and, for a source of several tables, a table of theirs
    whose view would take the name of the release's own table or views (DuckDB matches names without case)."""
    checked_table_name(table)
    names = (source.tables if isinstance(source, Tables)
             else source.bound.tables or {} if isinstance(source, EncodedSource) else {})
    own = {name.lower() for name in (table, f"{table}_classes", VIEW, INFO_TABLE)}
    taken = [name for name in names if name.lower() in own]
    if taken:
        raise AnonymizationError(f"the source table {taken[0]!r} would take the name of the release's own table "
                                 f"or view ({table!r}, {table}_classes, {VIEW}, {INFO_TABLE}): name the release's "
                                 f"table otherwise (table=) or the source table")


def released_parts(bound: BoundPolicy, ranges: Ranges) -> dict[str, list[str]]:
    """Under a source of several tables, each table's released columns (with their bounds) in its own order; none
    otherwise."""
    if bound.tables is None:
        return {}
    return {name: ranges.columns([c for c in columns if c in bound.columns]) for name, columns in bound.tables.items()}


def signing(workspace: Workspace, sign_with: object | None) -> Workspace:
    """``workspace``, signing the releases written through it with the Ed25519 key ``sign_with`` (a key file's path,
    PEM bytes or a ``cryptography`` key; see :mod:`.signing`) when given."""
    if sign_with is None:
        return workspace
    return dataclasses.replace(workspace, signer=Signer(sign_with))


def released_class_sizes(workspace: Workspace, bound: BoundPolicy, transformation: Transformation
                         ) -> tuple[np.ndarray, np.ndarray, int]:
    """The class-size histogram (sizes, classes of each) of the release ``transformation`` of ``bound``'s source would
    be, suppression included, and its suppressed records; nothing is written."""
    engine = workspace.engine
    with _Temporaries(engine) as temporaries:
        generalized, weight = temporaries.create_protected(bound, transformation)  # with each record's person
        population = _generalized_population(bound, transformation, temporaries)
        prices = label_prices(engine, bound, transformation, generalized)
        _, final, suppressed = suppress(engine, bound, generalized, temporaries, population, prices, weight)
        sizes, counts = class_size_histogram(engine, final, bound.policy.class_keys, weight)
    return sizes, counts, suppressed


def partition_metrics(workspace: Workspace, bound: BoundPolicy, partition: PartitionMap) -> dict[str, float]:
    """LM, DM, NCP and the average class size of the release ``partition`` gives ``bound``'s source
    (:meth:`PartitionMap.metrics <duckanon.recode.recoding.PartitionMap.metrics>`)."""
    workspace.announce("measuring LM, DM, NCP and the average class size")
    return partition.metrics(workspace.engine, bound.source, bound.columns, bound.hierarchies,
                             measured_models(bound.policy))


def measured_models(policy: Policy) -> list[PrivacyModel]:
    """The models a partition's metrics count a class suppressed by: the policy's; over people, none (every partition
    or group formed over people holds them, each person counted once, which the publish checks; counted over records
    they would judge otherwise)."""
    return list(policy.models) if policy.person is None else []


def described_policy(bound: BoundPolicy, report: CheckReport | None = None, missing_matches_any: bool = False
                     ) -> dict:
    """The policy as the release's info records it: its description, settings, columns with their hierarchy tables,
    and models with their parameters; under a policy that counts people, the source's people and those suppressed
    (from ``report``), which a recipient checks the suppression limit against; ``missing_matches_any`` when the
    release's classes count a missing value as matching any (cell suppression), as its checks must."""
    columns, models, settings = bound.policy.to_rows({c: b.table.name for c, b in bound.hierarchies.items()})
    if missing_matches_any:
        settings = {**settings, MISSING_MATCHES_ANY: True}
    methods = bound.policy.methods
    if isinstance(report, PeopleCheckReport):
        settings = {**settings, "people": {"source": report.people, "suppressed": report.violating_people}}
    if bound.tables is not None:
        settings = {**settings, "tables": {name: [c for c in columns if c in bound.columns]
                                           for name, columns in bound.tables.items()}}
    return {"description": bound.policy.describe(), **settings,
            "columns": [{"column": c, "role": role, "hierarchy": table,
                         **({"method": methods[c].params()} if c in methods and methods[c].role == role else {})}
                        for c, role, table in columns],
            "models": [{"model": name, "sensitive": sensitive, "params": json.loads(params)}
                       for _, name, sensitive, params in models]}


def suppress(engine: Engine, bound: BoundPolicy, generalized: exp.Table, temporaries: _Temporaries,
             generalized_population: exp.Table | None = None, prices: LabelPrices | None = None,
             weight: str | None = None) -> tuple[CheckReport, exp.Select, int]:
    """The policy's check of the generalized records (against ``generalized_population``, the population's
    quasi-identifier combinations recoded alike with their counts, when a model compares with it; priced by ``prices``
    when a model prices classes) and the final query with violating classes suppressed.  With ``weight``, a row of
    ``generalized`` stands for that many records, and so does a row of the final query, which keeps the column.

    Dropped records leave the table: what is dropped is drop mode's fixed point
    (:func:`~duckanon.privacy.checks.settle_and_cut`), as checks and searches count it.  Replaced records form one class
    of their own (every quasi-identifier ``*``), which must satisfy the policy too, as checks and searches require.
    """
    policy, quasi = bound.policy, bound.quasi_identifiers
    if policy.person is not None:
        return _suppress_people(engine, bound, generalized, temporaries, generalized_population, prices)
    population = None if generalized_population is None else Classes.of(
        generalized_population, policy.class_keys, COUNT, table_keys=len(policy.strata))
    with contextlib.ExitStack() as registered:
        classes = priced_classes(engine, registered, generalized, quasi, population, prices, policy.strata, weight)
        verdicts = temporaries.create(class_verdicts(classes, policy.models))
        report = verdict_report(engine, verdicts, classes, policy.models, key_names=policy.class_keys,
                                allowed_suppressed=bound.allowed_suppressed, drop=policy.drops,
                                replaced_checked=policy.checks_replaced)
    if not report.within_limit:
        raise PolicyNotSatisfied(report.summary(), report)
    suppressed_keys = temporaries.create(
        exp.select(*classes.keys_of(), sb.col(SIZE)).from_(verdicts).where(sb.col(VIOLATED)))
    keys = classes.key_columns
    on = sb.and_all(exp.NullSafeEQ(this=sb.col(q, "g"), expression=sb.col(k, "s"))
                    for q, k in zip(policy.class_keys, keys))
    final = _suppressed_query(generalized, [*bound.columns, *([weight] if weight else [])], quasi, suppressed_keys,
                              keys, on, policy.drops)
    return report, final, report.violating_records


def refuse_unmatched_models(policy: Policy, method: str) -> None:
    """A release whose missing values match any value has no equivalence classes, only each record's compatible
    records: it can be held to k-anonymity alone (as sdcMicro's ``localSuppression``); any other model, or counting
    people, is refused by name."""
    if policy.person is not None:
        raise PolicyError(f"{method} counts records: a policy with person= is not supported")
    for model in policy.models:
        if not isinstance(model, KAnonymity):
            raise PolicyError(f"{method} reaches k-anonymity only (a missing value matching any value leaves no "
                              f"classes for {model.describe()} to judge): remove it from the policy")
    if not policy.models:
        raise PolicyError(f"{method} needs a k-anonymity model in the policy")


def _check_compatible(engine: Engine, bound: BoundPolicy, generalized: exp.Table, method: str) -> CheckReport:
    """The policy's check of ``generalized`` when a missing value matches any value: each record's class is every
    record compatible with it (:func:`~duckanon.privacy.classes.compatible_classes`).  Nothing is suppressed: the
    transformation (``method``) must reach the policy itself."""
    refuse_unmatched_models(bound.policy, method)
    report = check(engine, compatible_classes(generalized, bound.quasi_identifiers, bound.policy.strata),
                   bound.policy.models, key_names=bound.policy.class_keys)
    if not report.satisfied:
        raise PolicyNotSatisfied(report.summary(), report)
    return report


def _suppress_people(engine: Engine, bound: BoundPolicy, generalized: exp.Table, temporaries: _Temporaries,
                     generalized_population: exp.Table | None, prices: LabelPrices | None
                     ) -> tuple[PeopleCheckReport, exp.Select, int]:
    """:func:`suppress` under a policy that counts people: every record of each person whose signature fewer than k
    people share is suppressed (``generalized`` carries each record's person as ``__duckanon_person``, and so, for
    the models counted in it, does the population recoded alike)."""
    policy, quasi = bound.policy, bound.quasi_identifiers
    population = None if generalized_population is None else Classes.of(exp.select(
        *[sb.col(q) for q in quasi], sb.col(policy.person).as_(PERSON_CARRIED, quoted=True), sb.col(COUNT)).from_(
        generalized_population).subquery("population"), quasi, COUNT)
    kept: list[exp.Table] = []  # the people the check suppresses, settled once
    with contextlib.ExitStack() as registered:
        classes = priced_classes(engine, registered, generalized, quasi, population, prices)
        report = people_check(engine, classes, PERSON_CARRIED, policy.person_k, models=policy.models,
                              allowed_suppressed=bound.allowed_suppressed, replaced_checked=policy.checks_replaced,
                              record_table=policy.record_table, lacking=bound.lacking, drops=policy.drops,
                              keep=lambda people: kept.append(temporaries.create(people)))
    if not report.within_limit:
        raise PolicyNotSatisfied(report.summary(), report)
    exposed, = kept
    on = exp.NullSafeEQ(this=sb.col(PERSON_CARRIED, "g"), expression=sb.col(PERSON, "s"))
    final = _suppressed_query(generalized, bound.columns, bound.quasi_identifiers, exposed, [PERSON], on,
                              policy.drops, bound.lacking, policy.record_table)
    return report, final, report.violating_records


@dataclass(frozen=True)
class LabelPrices:
    """Per quasi-identifier, each value a full-domain generalization released (as text; NULL as None) with its log10
    domain share on its level, and ARX's maxIL: what models that price classes read (the numbers the encoding's price
    tables give the search)."""

    frames: list[pd.DataFrame]
    most: float


def label_prices(engine: Engine, bound: BoundPolicy, transformation: Transformation, generalized: exp.Table
                 ) -> LabelPrices | None:
    """The :class:`LabelPrices` of ``generalized`` (``transformation``'s records) when a model prices classes.  A '*'
    that is not a label of its level marks a suppressed value, which stands for the whole domain (share 1, log 0), as
    the searches price it.  None for a transformation without levels, whose classes a pricing model then refuses."""
    levels = getattr(transformation, "levels", None)
    if not prices_classes(bound.policy.models) or levels is None:
        return None
    frames = []
    for attribute in bound.quasi_identifiers:
        hierarchy, level = bound.hierarchies[attribute].hierarchy, levels[attribute]
        shown = [row[0] for row in engine.rows(exp.select(sb.as_text(sb.col(attribute))).from_(generalized).distinct())]
        labels = list(dict.fromkeys([*shown, SUPPRESSED]))
        logs = log_domain_shares(hierarchy, level, labels)
        marker = SUPPRESSED not in hierarchy.leaves_under(level)
        frames.append(pd.DataFrame({"label": pd.Series(labels, dtype=object), "price": [
            0.0 if label == SUPPRESSED and marker else log for label, log in zip(labels, logs)]}))
    return LabelPrices(frames, sum(log_domain_size(bound.hierarchies[a].hierarchy) for a in bound.quasi_identifiers))


def priced_classes(engine: Engine, registered: contextlib.ExitStack, relation: exp.Expression, quasi: Sequence[str],
                   population: Classes | None, prices: LabelPrices | None, strata: Sequence[str] = (),
                   weight: str | None = None) -> Classes:
    """The classes of ``relation`` by ``quasi`` within each table of the ``strata`` (their leading keys), each record
    with its values' log10 domain shares when ``prices`` are given (the price frames registered on ``engine`` while
    ``registered`` lasts); each row of ``relation`` stands for ``weight`` records where that column is named."""
    keys, tables = [*strata, *quasi], len(strata)
    if prices is None:
        return Classes.of(relation, keys, weight, population=population, table_keys=tables)
    priced = exp.select(exp.Column(this=exp.Star(), table=sb.ident("r"))).from_(sb.derived(relation, "r"))
    for i, (attribute, frame) in enumerate(zip(quasi, prices.frames)):
        table = registered.enter_context(engine.registered(frame))
        priced = priced.join(exp.alias_(table, f"p{i}", quoted=True), join_type="LEFT", on=exp.NullSafeEQ(
            this=sb.as_text(sb.col(attribute, "r")), expression=sb.col("label", f"p{i}"))).select(
            sb.col("price", f"p{i}").as_(price_column(i), quoted=True))
    pricing = Pricing(tuple(price_column(i) for i in range(len(quasi))), prices.most)
    return Classes.of(priced.subquery("priced"), keys, weight, population=population, pricing=pricing,
                      table_keys=tables)


def _generalized_population(bound: BoundPolicy, transformation: Transformation, temporaries: _Temporaries
                            ) -> exp.Table | None:
    """The population's quasi-identifier combinations recoded by ``transformation``, with their counts; None when no
    model compares with the population."""
    if bound.population is None:
        return None
    return temporaries.create(transformation.compile(
        bound.population, [*bound.policy.class_keys, *([bound.policy.person] if bound.policy.person else []), COUNT],
        bound.hierarchies))


def _population_classes(population: exp.Table, quasi: Sequence[str], starred: bool, person: str | None,
                        strata: Sequence[str] = ()) -> exp.Select:
    """The population's classes in the release's values (within each stratum of ``strata``), ``__count`` people each
    (per person too under a policy that counts people, whose check weighs the suppressed people's group itself);
    with ``starred``, also the class of suppressed records (every quasi-identifier '*'), whose people are the whole
    population (of their stratum): a starred record could be anyone of it."""
    count = exp.cast(exp.func("SUM", sb.col(COUNT)), exp.DataType.build("BIGINT")).as_(COUNT, quoted=True)
    keys = [*strata, *quasi, *([person] if person is not None else [])]
    classes = exp.select(*[sb.col(c) for c in keys], count).from_(population).group_by(*[sb.col(c) for c in keys])
    if not starred or person is not None:
        return classes
    everyone = exp.select(*[sb.col(s) for s in strata], *[sb.lit(SUPPRESSED).as_(q, quoted=True) for q in quasi],
                          count.copy()).from_(population)
    if strata:
        everyone = everyone.group_by(*[sb.col(s) for s in strata])
    return exp.union(classes, everyone, distinct=False)


def _suppressed_query(generalized: exp.Table, columns: Sequence[str], quasi: Sequence[str], suppressed: exp.Table,
                      keys: Sequence[str], on: exp.Expression, drops: bool,
                      lacking: Mapping[str, Sequence[str]] | None = None, record_table: str | None = None
                      ) -> exp.Select:
    """``columns`` of ``generalized`` (``g``) with the records matching a row of ``suppressed`` (``s``, by its
    ``keys``, as ``on`` says) suppressed: dropped, or their quasi-identifiers '*' -- but those their table lacks
    (``lacking``: each such column's tables, as column ``record_table`` names them), which stay NULL as in the
    table's own file or view."""
    marked = exp.select(*[sb.col(k) for k in keys], exp.true().as_("__suppressed", quoted=True)).from_(suppressed)
    flag = sb.col("__suppressed", "s")
    query = exp.select().from_(exp.alias_(generalized, "g", quoted=True)).join(
        marked.subquery("s"), on=on, join_type="LEFT")
    for column in columns:
        value = sb.col(column, "g")
        if column in quasi and not drops:
            starred = flag.is_(exp.Null()).not_()
            if lacking and column in lacking:
                starred = exp.and_(starred, table_holds(column, lacking, record_table))
            value = exp.Case().when(starred, sb.lit(SUPPRESSED)).else_(value).as_(column, quoted=True)
        query = query.select(value)
    return query.where(flag.is_(exp.Null())) if drops else query


class _Temporaries(contextlib.AbstractContextManager):
    """Temporary tables of one operation, dropped when it ends."""

    def __init__(self, engine: Engine):
        self.engine, self.tables = engine, []

    def create_protected(self, bound: BoundPolicy, transformation: Transformation) -> tuple[exp.Table, str | None]:
        """The released columns of ``transformation`` of ``bound``'s source, each column the policy releases
        transformed by its method (:mod:`duckanon.recode.protect`), as a temporary table, and the column that says
        how many records each row stands for.

        A release repeats each class's values in all its records, so records alike in every released column (in
        their text: values equal under a collation stay apart) are one row with their count: the check, the
        suppression and the digest then cost a row per distinct released row, and only the writing repeats them.
        Records stay one row each (no such column, None) under a policy that counts people, whose checks count a
        person's records, and when a missing value matches any (cell suppression), whose classes count records."""
        methods, person = bound.policy.methods, bound.policy.person
        read = [c for m in methods.values() for c in m.reads() if c not in bound.columns]
        recoded = transformation.compile(bound.source, [*bound.columns, *dict.fromkeys(read)], bound.hierarchies)
        # Under a policy that counts people, each record's person as the source has it, to find signatures by.
        carried = {PERSON_CARRIED: person} if person is not None else None
        with protected(self.engine, recoded, bound.columns, methods, carried) as query:
            if person is not None or transformation.missing_matches_any:
                return self.create(query), None
            if transformation.groups_within_recoding:
                return self.create(rows_by_text(query, self.engine.types(query), RECORDS)), RECORDS
            records = self.create(query)
        grouped = self.create(rows_by_text(records, self.engine.types(records), RECORDS))
        self.drop(records)
        return grouped, RECORDS

    def create(self, query: exp.Expression) -> exp.Table:
        table = sb.table(f"__duckanon_tmp_{next(_temporaries)}")
        self.engine.run(sb.create_table_as(table, query, temporary=True))
        self.tables.append(table)
        return table

    def drop(self, table: exp.Table) -> None:
        """Drop ``table`` now, before the operation ends."""
        self.engine.run(sb.drop("TABLE", table))
        self.tables.remove(table)

    def __exit__(self, *exc) -> None:
        for table in list(self.tables):
            self.drop(table)


def verify_release(reader: Engine, table: str, bound: BoundPolicy, transformation: Transformation,
                   expected_records: int, ranges: Ranges, population_classes: pd.DataFrame | None = None,
                   prices: LabelPrices | None = None) -> None:
    """Re-check a written release on its own: columns, record count, the policy, that no raw value shows, and the
    numbers' bound columns.  ``population_classes`` (:func:`_population_classes`) are what models that compare with
    the population count the release's classes against; their classes without a record of the data were checked
    before suppression (a suppressed class leaves its population class without a released record)."""
    released = sb.table(table)
    columns = reader.columns(released)
    if columns != ranges.columns(bound.columns):
        raise ReleaseCheckFailed(f"release check: columns {columns} differ from the expected "
                                 f"{ranges.columns(bound.columns)}")
    records = reader.rows(exp.select(exp.func("COUNT", exp.Star())).from_(released))[0][0]
    if records != expected_records:
        raise ReleaseCheckFailed(f"release check: {records} records written, {expected_records} expected")
    policy = bound.policy
    with contextlib.ExitStack() as registered:
        population = None if population_classes is None else Classes.of(
            registered.enter_context(reader.registered(population_classes)), policy.class_keys, COUNT,
            table_keys=len(policy.strata))
        classes = priced_classes(reader, registered, released, bound.quasi_identifiers, population, prices,
                                 policy.strata)
        if transformation.missing_matches_any:
            report = check(reader, compatible_classes(released, bound.quasi_identifiers, policy.strata),
                           policy.models, key_names=policy.class_keys, unmendable_checked=False)
        elif policy.person is not None:  # the released person column (a pseudonym) tells people apart
            report = people_check(reader, classes, policy.person, policy.person_k, models=policy.models,
                                  exempt=policy.exempt_class, record_table=policy.record_table,
                                  lacking=bound.lacking, unmendable_checked=False)
        else:
            report = check(reader, classes, policy.models, key_names=policy.class_keys,
                           exempt=policy.exempt_class, unmendable_checked=False)
    if not report.satisfied:
        raise ReleaseCheckFailed(f"release check: the written table violates the policy: {report.summary()}")
    for attribute, hierarchy in bound.hierarchies.items():
        allowed = transformation.allowed_values(attribute, hierarchy)
        if allowed is None:
            continue
        shown = {r[0] for r in reader.rows(exp.select(sb.col(attribute)).from_(released).distinct())}
        leaked = shown - allowed
        if leaked:
            raise ReleaseCheckFailed(
                f"release check: {attribute!r} shows values its transformation does not produce: "
                f"{sorted(leaked, key=str)[:10]}")
    ranges.verify(reader, table, transformation, bound.hierarchies)
    catalog = exp.Table(this=exp.Anonymous(this="duckdb_views", expressions=[]))
    views = [r[0] for r in reader.rows(exp.select(sb.col("view_name")).from_(catalog).where(sb.col("internal").not_()))]
    for view in views:
        # Run, not fetched: a TIMESTAMPTZ fetched into Python needs pytz, which a reader of the release may lack.
        reader.rows(exp.select(exp.func("COUNT", exp.Star())).from_(
            exp.select(exp.Star()).from_(sb.table(view)).limit(1).subquery("first_row")))
