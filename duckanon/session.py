"""The anonymizer: a DuckDB connection that knows hierarchies and policies, checks them, and publishes releases.

    import duckdb, duckanon
    con = duckdb.connect("people.duckdb")
    anon = duckanon.connect(con)
    policy = duckanon.Policy(quasi_identifiers={"age": age_hierarchy, "zip": "zip"}, identifiers=["name"],
                             models=[duckanon.KAnonymity(5), duckanon.DistinctLDiversity("disease", 2)])
    anon.check("patients", policy, levels={"age": 2, "zip": 3}).summary()
    anon.publish("patients", policy, levels={"age": 2, "zip": 3}, path="release.duckdb")
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import itertools
import json
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd
from sqlglot import exp

from .engine import DuckDBEngine, Engine
from .sqlgen import build as sb
from .privacy.checks import CheckReport, RiskReport, check, class_verdicts, risk, verdict_report
from .encode.classes import SIZE, VIOLATED, Classes
from .encode.encoding import COUNT, Encoding, count_combinations
from .errors import AnonymizationError, PolicyError, PolicyNotSatisfied, ReleaseCheckFailed
from .recode.generalization import BoundHierarchy, FullDomainGeneralization, Transformation, require_coverage
from .declare.hierarchy import SCHEMA, Hierarchy, level_column
from .utility.metrics import METRICS, WEIGHTED, Loss, Metric, metric_names
from .privacy.models import DataFacts
from .partition.mondrian import Mondrian, MondrianResult, dimensions, output_styles
from .recode.ranges import Ranges
from .recode.recoding import PartitionMap
from .search.strategies import STRATEGIES, NodeEvaluator, SearchResult, solution_space
from .utility.weights import attribute_weights
from .declare.policy import SUPPRESSED, Policy
from .release.files import STORAGE_VERSION, ReleaseContent, ReleaseInfo, release_format, write_release

FILE_READERS = {".csv": "read_csv_auto", ".tsv": "read_csv_auto", ".gz": "read_csv_auto", ".parquet": "read_parquet",
                ".json": "read_json_auto"}
POLICY_TABLES = {
    "policies": ("name", "suppression", "suppression_limit", "max_suppressed", "others", "created"),
    "policy_columns": ("policy", "column_name", "role", "hierarchy_table"),
    "policy_models": ("policy", "position", "model", "sensitive", "params"),
}
_temporaries = itertools.count()


def connect(database: Engine | str | os.PathLike | None = None,
            progress: Callable[[str], None] | None = None) -> Anonymizer:
    """An anonymizer over a DuckDB connection, or over a database file opened for it (in memory without one).

    A database file this creates is written in the storage version releases use, which the DuckDB shell and clients
    from 1.2 on read; an existing file keeps its version."""
    if not isinstance(database, duckdb.DuckDBPyConnection):
        if database is None:
            database = duckdb.connect(":memory:")
        elif Path(database).exists():
            database = duckdb.connect(str(database))
        else:
            database = duckdb.connect(str(database), config={"storage_compatibility_version": STORAGE_VERSION})
    return Anonymizer(DuckDBEngine(database), progress)


def source_relation(engine: Engine, source: str | os.PathLike | exp.Expression) -> exp.Expression:
    """What a source names, as SQL: a sqlglot expression as it is, a CSV/Parquet/JSON file path as its reader, or a
    table of ``engine``; a missing file or table is an error naming it."""
    if isinstance(source, exp.Expression):
        return source
    path = Path(source)
    reader = FILE_READERS.get(path.suffix.lower())
    if reader and (isinstance(source, os.PathLike) or path.is_file()):
        if not path.is_file():
            raise AnonymizationError(f"no such file: {str(path)!r}")
        return exp.Table(this=exp.Anonymous(this=reader, expressions=[sb.lit(str(path))]))
    relation = sb.table(str(source))
    if not _exists(engine, relation):
        raise AnonymizationError(f"no table named {str(source)!r}")
    return relation


def _exists(engine: Engine, relation: exp.Expression) -> bool:
    try:
        engine.columns(relation)
        return True
    except duckdb.CatalogException:
        return False


def hierarchy_table_name(name: str) -> str:
    return f"hierarchy_{name}"


@dataclass
class Release:
    """What a publish wrote."""

    path: Path
    table: str
    records_in: int
    records_out: int
    suppressed: int
    check: CheckReport

    def summary(self) -> str:
        return (f"released {self.records_out} of {self.records_in} records to {self.path} (table {self.table!r}); "
                f"{self.suppressed} suppressed")


@dataclass
class _Bound:
    """A policy bound to one source: its relation, released columns, hierarchy tables and data facts."""

    source: exp.Expression
    policy: Policy
    columns: list[str]
    hierarchies: dict[str, BoundHierarchy]
    facts: DataFacts
    counted: exp.Table  # distinct quasi-identifier and sensitive combinations with their COUNT

    @property
    def quasi_identifiers(self) -> list[str]:
        return self.policy.quasi_identifier_names

    @property
    def allowed_suppressed(self) -> int:
        return self.policy.allowed_suppressed(self.facts.records)

    def levels(self, levels: Mapping[str, int]) -> dict[str, int]:
        return FullDomainGeneralization(levels).validate(self.hierarchies).levels


class EncodedSource:
    """A source encoded once for a policy: checking a vector of levels is one GROUP BY over a frequency table."""

    def __init__(self, engine: Engine, bound: _Bound):
        self.engine, self.bound = engine, bound
        self.encoding = Encoding(engine, bound.counted, bound.hierarchies, bound.policy.sensitive)

    def check(self, levels: Mapping[str, int]) -> CheckReport:
        levels = self.bound.levels(levels)
        classes = self.encoding.classes(levels)
        report = check(self.engine, classes, self.bound.policy.models, key_names=self.bound.quasi_identifiers,
                       allowed_suppressed=self.bound.allowed_suppressed, drop=self.bound.policy.suppression == "drop")
        # The listing holds level codes; show the generalized values they stand for.
        for i, attribute in enumerate(self.bound.quasi_identifiers):
            report.violations[attribute] = report.violations[attribute].map(
                self.encoding.labels(i, levels[attribute]))
        return report

    def risk(self, levels: Mapping[str, int], threshold: int = 5) -> RiskReport:
        return risk(self.engine, self.encoding.classes(self.bound.levels(levels)), threshold=threshold)

    def close(self) -> None:
        self.encoding.close()

    def __enter__(self) -> EncodedSource:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class Anonymizer:
    """``progress``, when given, is called with a short message as each stage of long work starts."""

    def __init__(self, engine: Engine, progress: Callable[[str], None] | None = None):
        self.engine = engine
        self.con = getattr(engine, "connection", None)  # the DuckDB connection, for callers that hold one
        self.progress = progress
        engine.run(exp.Create(this=sb.ident(SCHEMA), kind="SCHEMA", exists=True))
        for name, columns in POLICY_TABLES.items():
            engine.run(exp.Create(this=exp.Schema(this=sb.table(name, SCHEMA), expressions=[
                exp.ColumnDef(this=sb.ident(c), kind=exp.DataType.build("VARCHAR")) for c in columns]),
                kind="TABLE", exists=True))

    def _progress(self, message: str) -> None:
        if self.progress is not None:
            self.progress(message)

    # ------------------------------------------------------------ hierarchies
    def add_hierarchy(self, name: str, hierarchy: Hierarchy) -> str:
        """Store ``hierarchy`` as table ``anon.hierarchy_<name>`` (replacing one of that name); returns the name."""
        hierarchy.store(self.engine, hierarchy_table_name(name))
        return name

    def has_hierarchy(self, name: str) -> bool:
        return _exists(self.engine, sb.table(hierarchy_table_name(name), SCHEMA))

    def hierarchy(self, name: str) -> Hierarchy:
        if not self.has_hierarchy(name):
            raise AnonymizationError(f"no hierarchy named {name!r} (table anon.{hierarchy_table_name(name)})")
        return Hierarchy.from_table(self.engine, hierarchy_table_name(name), name=name)

    def add_arx_hierarchies(self, directory: str | os.PathLike, names: Sequence[str] | None = None) -> list[str]:
        """Store every ``<name>.csv`` (ARX format) of a folder as hierarchy ``<name>``."""
        files = sorted(Path(directory).glob("*.csv"))
        chosen = [f for f in files if names is None or f.stem in names]
        return [self.add_hierarchy(f.stem, Hierarchy.from_arx_csv(f, name=f.stem)) for f in chosen]

    def _hierarchy_for(self, column: str, given: Hierarchy | str) -> BoundHierarchy:
        return self._hierarchies_for({column: given})[column]

    def _hierarchies_for(self, given: Mapping[str, Hierarchy | str]) -> dict[str, BoundHierarchy]:
        """Each column's hierarchy (a Hierarchy, or a stored hierarchy's name) bound to its table.

        An inline hierarchy gets the column's name unless a different hierarchy already holds it; an equal stored
        one is reused rather than rewritten.  The stored tables it may reuse are read once, in one query."""
        for column, hierarchy in given.items():
            if not isinstance(hierarchy, (Hierarchy, str)):
                raise PolicyError(f"the hierarchy of {column!r} must be a Hierarchy or a stored hierarchy's name, "
                                  f"got {type(hierarchy).__name__}")
        names = {c: [c, f"{c}_{hashlib.sha1(json.dumps(h.rows).encode()).hexdigest()[:10]}"]
                 for c, h in given.items() if isinstance(h, Hierarchy)}
        stored = self._stored_hierarchy_rows([n for candidates in names.values() for n in candidates])
        bound = {}
        for column, hierarchy in given.items():
            if isinstance(hierarchy, str):
                bound[column] = BoundHierarchy(column, self.hierarchy(hierarchy),
                                               sb.table(hierarchy_table_name(hierarchy), SCHEMA))
                continue
            rows = set(hierarchy.rows)
            same = lambda name: stored.get(name) == rows  # noqa: E731 - rows are unique by their leaf
            name, hashed = names[column]
            if name in stored and not same(name):
                name = hashed
            if not same(name):
                self.add_hierarchy(name, hierarchy)
            bound[column] = BoundHierarchy(column, hierarchy, sb.table(hierarchy_table_name(name), SCHEMA))
        return bound

    def _stored_hierarchy_rows(self, names: Sequence[str]) -> dict[str, set[tuple]]:
        """The rows of those of the hierarchies ``names`` that are stored: one catalog query, then one query reading
        them all."""
        if not names:
            return {}
        tables = {hierarchy_table_name(n): n for n in names}
        catalog = exp.Table(this=exp.Anonymous(this="duckdb_tables", expressions=[]))
        listed = self.engine.rows(exp.select(sb.col("table_name"), sb.col("column_count")).from_(catalog)
                               .where(exp.and_(sb.col("schema_name").eq(sb.lit(SCHEMA)),
                                               sb.col("database_name").eq(exp.func("CURRENT_DATABASE")),
                                               sb.col("table_name").isin(*[sb.lit(t) for t in tables]))))
        if not listed:
            return {}
        widths = dict(listed)
        widest = max(widths.values())
        reads = [exp.select(sb.lit(table).as_("__table", quoted=True),
                            *[sb.col(level_column(j)) if j < width else
                              exp.cast(exp.Null(), "VARCHAR").as_(level_column(j), quoted=True) for j in range(widest)])
                 .from_(sb.table(table, SCHEMA)) for table, width in widths.items()]
        union = reads[0]
        for read in reads[1:]:
            union = exp.union(union, read, distinct=False, copy=False)
        rows: dict[str, set[tuple]] = {tables[t]: set() for t in widths}
        for table, *values in self.engine.rows(union):
            rows[tables[table]].add(tuple(values[:widths[table]]))
        return rows

    # --------------------------------------------------------------- policies
    def save_policy(self, name: str, policy: Policy) -> None:
        """Store a policy as rows of anon.policies, anon.policy_columns and anon.policy_models."""
        bound = {c: self._hierarchy_for(c, h) for c, h in policy.quasi_identifiers.items() if h is not None}
        columns, models, settings = policy.to_rows({c: b.table.name for c, b in bound.items()})
        with self.engine.transaction():
            self._delete_policy(name)
            maximum = settings["max_suppressed"]
            self._insert("policies", [(name, settings["suppression"], str(settings["suppression_limit"]),
                                       None if maximum is None else str(maximum), settings["others"],
                                       dt.datetime.now(dt.timezone.utc).isoformat())])
            self._insert("policy_columns", [(name, *row) for row in columns])
            self._insert("policy_models", [(name, str(i), model, sensitive, params)
                                           for i, model, sensitive, params in models])

    def policy(self, name: str) -> Policy:
        """The policy stored as ``name``.  Rows written by hand or from SQL (sql/duckanon.sql) are checked as they are
        read: a value that is not valid is a PolicyError naming the policy and the value."""
        settings = self._rows("policies", name)
        if not settings:
            raise AnonymizationError(f"no policy named {name!r}")
        try:
            if len(settings) > 1:
                raise PolicyError(f"it has {len(settings)} rows in anon.policies; delete all but one")
            _, suppression, limit, maximum, others, _created = settings[0]
            columns = [row[1:] for row in self._rows("policy_columns", name)]
            models = [(int(row[1]), *row[2:]) for row in self._rows("policy_models", name)]
            hierarchies = {c: Hierarchy.from_table(self.engine, table, name=c) for c, role, table in columns
                           if role == "quasi-identifier" and table is not None}
            policy = Policy.from_rows(columns, models, {"suppression": suppression, "suppression_limit": limit,
                                                        "max_suppressed": None if maximum is None else int(maximum),
                                                        "others": others}, hierarchies)
            unknown = [(c, role) for c, role, _table in columns if policy.role(c) != role]
            if unknown:  # Policy.from_rows skips a role it does not know: the column would lose its role
                raise PolicyError(f"column {unknown[0][0]!r} has the unknown role {unknown[0][1]!r}")
        except (ValueError, TypeError, duckdb.CatalogException) as error:
            shown = f"{error} in {error.doc!r}" if isinstance(error, json.JSONDecodeError) else str(error)
            raise PolicyError(f"policy {name!r} as stored is not valid: {shown}") from error
        return policy

    def policies(self) -> pd.DataFrame:
        return self.engine.frame(exp.select(exp.Star()).from_(sb.table("policies", SCHEMA)).order_by("name"))

    def _rows(self, table: str, policy: str) -> list[tuple]:
        column = "name" if table == "policies" else "policy"
        return self.engine.rows(exp.select(*[sb.col(c) for c in POLICY_TABLES[table]])
                             .from_(sb.table(table, SCHEMA)).where(sb.col(column).eq(sb.lit(policy))))

    def _insert(self, table: str, rows: list[tuple]) -> None:
        if rows:
            width = len(POLICY_TABLES[table])
            statement = exp.insert(exp.values([tuple(exp.Placeholder() for _ in range(width))]),
                                   sb.table(table, SCHEMA), columns=list(POLICY_TABLES[table]))
            self.engine.run_many(statement, rows)

    def _delete_policy(self, name: str) -> None:
        for table in POLICY_TABLES:
            column = "name" if table == "policies" else "policy"
            self.engine.run(exp.delete(sb.table(table, SCHEMA), where=sb.col(column).eq(sb.lit(name))))

    @contextlib.contextmanager
    def _bind(self, source, policy: Policy | str, *, partitioning: bool = False):
        """The policy bound to the source, which is read once: a temporary table of its distinct combinations of
        quasi-identifier and sensitive values with their counts gives the data facts, the coverage check and the
        encoding.  Quasi-identifiers without a hierarchy are accepted only for ``partitioning`` (Mondrian, clustering);
        the bound hierarchies then cover only the others."""
        policy = self.policy(policy) if isinstance(policy, str) else policy
        self._progress("reading the source and checking the policy's parameters")
        relation = source_relation(self.engine, source)
        columns = policy.bind(self.engine.columns(relation))
        without = [c for c, h in policy.quasi_identifiers.items() if h is None]
        if without and not partitioning:
            raise PolicyError(f"quasi-identifiers {without} have no hierarchy: generalizing to levels needs one for "
                              f"each (only partitioning, such as Anonymizer.mondrian, accepts none)")
        counted = count_combinations(self.engine, relation, policy.quasi_identifier_names, policy.sensitive)
        try:
            total = exp.func("COALESCE", exp.func("SUM", sb.col(COUNT)), sb.lit(0))
            records = int(self.engine.rows(exp.select(total).from_(counted))[0][0])
            if records == 0:
                raise AnonymizationError(f"the source {sb.to_sql(relation)} is empty: there is nothing to anonymize")
            value_counts = {}
            for attribute in policy.sensitive:
                query = exp.select(sb.col(attribute), total).from_(counted).group_by(sb.col(attribute))
                value_counts[attribute] = {v: int(n) for v, n in self.engine.rows(query)}
            facts = DataFacts(records=records, value_counts=value_counts)
            for model in policy.models:
                model.check_data(facts)
            hierarchies = self._hierarchies_for({c: h for c, h in policy.quasi_identifiers.items() if h is not None})
            # One query finds the attributes whose values are all leaves of their hierarchies; only the others need
            # the full check (interval hierarchies also cover values between their cuts).
            suspect = _not_all_leaves(self.engine, counted, hierarchies)
            require_coverage(self.engine, counted, {a: hierarchies[a] for a in suspect})
            yield _Bound(relation, policy, columns, hierarchies, facts, counted)
        finally:
            self.engine.run(sb.drop("TABLE", counted))

    # -------------------------------------------------------------------- work
    def encode(self, source, policy: Policy | str) -> EncodedSource:
        """Read ``source`` once into a frequency table with every level's codes, for many fast checks."""
        with self._bind(source, policy) as bound:
            self._progress("encoding the source into a frequency table")
            return EncodedSource(self.engine, bound)

    def check(self, source, policy: Policy | str, levels: Mapping[str, int]) -> CheckReport:
        """Whether generalizing ``source`` to ``levels`` satisfies ``policy``, and what would be suppressed."""
        with self.encode(source, policy) as encoded:
            return encoded.check(levels)

    def risk(self, source, policy: Policy | str, levels: Mapping[str, int], threshold: int = 5) -> RiskReport:
        with self.encode(source, policy) as encoded:
            return encoded.risk(levels, threshold)

    # ------------------------------------------------------------------ search
    def attribute_weights(self, source, attributes: Sequence[str], kind: str, label: str | None = None) -> pd.DataFrame:
        """Per-attribute weights (uniform, entropy or mutual information with ``label``), computed in SQL."""
        return attribute_weights(self.engine, source_relation(self.engine, source), attributes, kind=kind, label=label)

    def _metric(self, bound: _Bound, metric: Metric | str, label: str | None) -> Metric:
        if isinstance(metric, Metric):
            return metric
        if metric in WEIGHTED:
            weights = attribute_weights(self.engine, bound.source, bound.quasi_identifiers, kind=WEIGHTED[metric],
                                        label=label)
            return Loss(dict(zip(weights["attribute"], weights["weight"])), name=metric)
        if metric not in METRICS:
            raise PolicyError(f"unknown metric {metric!r}; known: {', '.join(metric_names())}")
        return METRICS[metric]()

    @contextlib.contextmanager
    def _evaluator(self, bound: _Bound, metrics: Sequence[Metric | str], label: str | None):
        resolved = [self._metric(bound, m, label) for m in metrics]
        self._progress("encoding the source into a frequency table")
        encoding = Encoding(self.engine, bound.counted, bound.hierarchies, bound.policy.sensitive)
        evaluator = None
        try:
            allowed = bound.allowed_suppressed
            suppressed_monotone = all(m.monotone_under_suppression for m in bound.policy.models)
            monotone = allowed == 0 or suppressed_monotone
            evaluator = NodeEvaluator(self.engine, encoding, [b.hierarchy for b in bound.hierarchies.values()],
                                      bound.policy.models, resolved, allowed, monotone, self.progress,
                                      suppressed_monotone, suppressed_class=bound.policy.suppression == "replace")
            yield evaluator
        finally:
            if evaluator is not None:
                evaluator.close()
            encoding.close()

    def search(self, source, policy: Policy | str, *, metric: Metric | str = "loss", strategy: str = "optimal",
               label: str | None = None) -> SearchResult:
        """The full-domain generalization that satisfies ``policy`` and minimizes ``metric``.

        ``strategy``: ``optimal`` (exact), ``samarati`` (seed 002) or ``exhaustive``; ``label`` is the class column
        that ``mi-loss`` weighs attributes by."""
        if strategy not in STRATEGIES:
            raise PolicyError(f"unknown search strategy {strategy!r}; known: {', '.join(STRATEGIES)}")
        with self._bind(source, policy) as bound, self._evaluator(bound, [metric], label) as evaluator:
            self._progress(f"{strategy} search over {evaluator.lattice.size} transformations")
            return STRATEGIES[strategy]().search(evaluator)

    def solution_space(self, source, policy: Policy | str, *, metrics: Sequence[Metric | str] = ("loss",),
                       label: str | None = None, table: str | None = None) -> pd.DataFrame:
        """Every transformation that satisfies ``policy``, with its suppressed records and each metric's value;
        stored as table ``anon.<table>`` when ``table`` is given."""
        with self._bind(source, policy) as bound, self._evaluator(bound, metrics, label) as evaluator:
            frame = solution_space(evaluator)
        if table is not None:
            with self.engine.registered(frame) as space:
                self.engine.run(sb.create_table_as(sb.table(table, SCHEMA), exp.select(exp.Star()).from_(space),
                                                   replace=True))
        return frame

    def anonymize(self, source, policy: Policy | str, path: str | os.PathLike, *, metric: Metric | str = "loss",
                  strategy: str = "optimal", label: str | None = None, table: str = "release",
                  format: str | None = None) -> tuple[SearchResult, Release]:
        """Search the best transformation and publish it (``format`` as :meth:`publish`)."""
        release_format(path, format)
        result = self.search(source, policy, metric=metric, strategy=strategy, label=label)
        if not result.found:
            raise PolicyNotSatisfied(result.summary())
        generalization = FullDomainGeneralization(result.levels)
        with self._bind(source, policy) as bound:
            metrics = {**self._node_metrics(bound, generalization), **result.best.values}
            return result, self._publish(bound, generalization, path, table, format, metrics)

    def mondrian(self, source, policy: Policy | str, path: str | os.PathLike | None = None, *, relaxed: bool = False,
                 orders: Mapping[str, Sequence[object]] | None = None, categorical: Sequence[str] = (),
                 styles: Mapping[str, str] | None = None, numeric_style: str = "range", metrics: bool = True,
                 table: str = "release", format: str | None = None) -> MondrianResult:
        """Partition ``source`` with Mondrian (strict, or ``relaxed``) in DuckDB, measure the result, and publish it
        to ``path`` when given (suppression, verification and release file as :meth:`publish`).

        Quasi-identifiers may be given without a hierarchy (None): numeric columns are cut on their value;
        categorical ones along ``orders[attribute]`` (a list of their values, None for NULL) or their hierarchy.
        ``categorical`` names numeric columns to cut along their hierarchy or order instead.  ``styles`` sets an
        output style per attribute (``range``/``mean`` for numbers, ``lca``/``set`` for categories); by default
        numbers show ``numeric_style``, categories cut along a hierarchy their lowest common ancestor and the others
        their set of values.  ``metrics=False`` skips measuring LM, DM, NCP and the average class size.  See
        :mod:`duckanon.partition.mondrian` and :mod:`duckanon.recode.recoding`."""
        with self._bind(source, policy, partitioning=True) as bound:
            dims = dimensions(self.engine, bound.counted, bound.quasi_identifiers, bound.hierarchies, orders, categorical)
            chosen = output_styles(dims, styles, numeric_style)
            self._progress(f"{'relaxed' if relaxed else 'strict'} Mondrian over {bound.facts.records} records")
            partitioning = Mondrian(self.engine, bound.counted, dims, bound.policy.sensitive, bound.policy.models,
                                    relaxed=relaxed, progress=self.progress).run()
            try:
                algorithm = f"{'relaxed' if relaxed else 'strict'} Mondrian"
                transformation = PartitionMap(partitioning.assignment, chosen, orders=orders, coded=partitioning.coded,
                                              description={"algorithm": algorithm,
                                                           "partitions": partitioning.partitions})
                measured = None
                if metrics:
                    self._progress("measuring LM, DM, NCP and the average class size")
                    measured = transformation.metrics(self.engine, bound.source, bound.columns, bound.hierarchies,
                                                      bound.policy.models)
                release = (self._publish(bound, transformation, path, table, format, measured or {})
                           if path is not None else None)
            finally:
                partitioning.close()
        return MondrianResult(partitioning, chosen, measured, release)

    def publish(self, source, policy: Policy | str, transformation: Transformation | Mapping[str, int],
                path: str | os.PathLike, *, table: str = "release", format: str | None = None) -> Release:
        """Recode ``source`` by ``transformation`` (a Transformation, or a level per quasi-identifier), suppress what
        violates the policy, and write the release file: DuckDB, Parquet or CSV by ``path``'s extension or
        ``format`` (see :mod:`duckanon.release`)."""
        if not isinstance(transformation, Transformation):
            transformation = FullDomainGeneralization(transformation)
        release_format(path, format)  # an unknown extension fails before any work
        with self._bind(source, policy, partitioning=isinstance(transformation, PartitionMap)) as bound:
            return self._publish(bound, transformation, path, table, format)

    def _publish(self, bound: _Bound, transformation: Transformation, path: str | os.PathLike, table: str,
                 format: str | None, metrics: Mapping[str, float] | None = None) -> Release:
        """``metrics``: what the algorithm measured of this transformation, recorded in the release's info; a
        full-domain generalization's are measured here when not given."""
        if isinstance(transformation, PartitionMap):
            transformation.require_styles(bound.quasi_identifiers)
        if metrics is None:
            metrics = self._measure(bound, transformation)
        temporaries = _Temporaries(self.engine)
        with temporaries:
            ranges = transformation.ranges(self.engine, bound.source, bound.columns, bound.hierarchies, temporaries.create)
            self._progress("recoding the quasi-identifiers")
            generalized = temporaries.create(transformation.compile(bound.source, bound.columns, bound.hierarchies))
            self._progress("checking the policy and suppressing")
            report, final, suppressed = self._suppress(bound, generalized, temporaries)
            final = ranges.joined(final, bound.columns)  # numbers' bounds beside their labels, NULL for '*'
            quasi = bound.quasi_identifiers
            classes_view = (exp.select(*[sb.col(c) for c in ranges.columns(quasi)],
                                       exp.func("COUNT", exp.Star()).as_("records"))
                            .from_(sb.table(table)).group_by(*[sb.col(c) for c in ranges.columns(quasi)]))
            info = ReleaseInfo(
                kind="full-domain generalization" if isinstance(transformation, FullDomainGeneralization)
                else "recoding by groups", source_records=bound.facts.records, suppressed_records=suppressed,
                suppression=bound.policy.suppression, policy=self._described_policy(bound),
                transformation=transformation.describe(), metrics=metrics or {}, classes_by=quasi)
            content = ReleaseContent(table, final, {f"{table}_classes": classes_view}, info, sources=[bound.source])
            dropped = suppressed if bound.policy.suppression == "drop" else 0
            expected = bound.facts.records - dropped
            self._progress(f"writing and verifying {path}")
            path = write_release(self.engine, path, content,
                                 lambda reader: verify_release(reader, table, bound, transformation, expected, ranges),
                                 format=format)
            return Release(path, table, bound.facts.records, expected, suppressed, report)

    def _measure(self, bound: _Bound, transformation: Transformation) -> dict[str, float]:
        if isinstance(transformation, FullDomainGeneralization):
            return self._node_metrics(bound, transformation)
        if isinstance(transformation, PartitionMap):
            self._progress("measuring LM, DM, NCP and the average class size")
            return transformation.metrics(self.engine, bound.source, bound.columns, bound.hierarchies, bound.policy.models)
        return {}

    def _node_metrics(self, bound: _Bound, generalization: FullDomainGeneralization) -> dict[str, float]:
        """The node's value under every metric that needs no label (the weighted Loss forms do)."""
        names = [m for m in metric_names() if m not in WEIGHTED]
        with self._evaluator(bound, names, None) as evaluator:
            node = evaluator.lattice.node_of(bound.levels(generalization.levels))
            return dict(evaluator.evaluate(evaluator.lattice.index(node)).values)

    @staticmethod
    def _described_policy(bound: _Bound) -> dict:
        columns, models, settings = bound.policy.to_rows({c: b.table.name for c, b in bound.hierarchies.items()})
        return {"description": bound.policy.describe(), **settings,
                "columns": [{"column": c, "role": role, "hierarchy": table} for c, role, table in columns],
                "models": [{"model": name, "sensitive": sensitive, "params": json.loads(params)}
                           for _, name, sensitive, params in models]}

    def _suppress(self, bound: _Bound, generalized: exp.Table, temporaries: _Temporaries
                  ) -> tuple[CheckReport, exp.Select, int]:
        """The policy's check of the generalized records and the final query with violating classes suppressed.

        Dropped records leave the table: what is dropped is drop mode's fixed point
        (:func:`~duckanon.privacy.checks.settle_drops`), as checks and searches count it.  Replaced records form one class of
        their own (every quasi-identifier ``*``), which must satisfy the policy too: while it does not, the smallest
        kept classes join it.
        """
        policy, quasi = bound.policy, bound.quasi_identifiers
        models = policy.models
        dropping = policy.suppression == "drop"
        classes = Classes.of(generalized, quasi)
        verdicts = temporaries.create(class_verdicts(classes, models))
        report = verdict_report(self.engine, verdicts, classes, models, key_names=quasi,
                                allowed_suppressed=bound.allowed_suppressed, drop=dropping)
        if not report.within_limit:
            raise PolicyNotSatisfied(report.summary(), report)
        suppressed_keys = temporaries.create(
            exp.select(*classes.keys_of(), sb.col(SIZE)).from_(verdicts).where(sb.col(VIOLATED)))
        absorbed = 0
        while True:
            final = _suppressed_query(generalized, bound.columns, quasi, suppressed_keys, policy.suppression)
            suppressed = self.engine.rows(exp.select(exp.func("COALESCE", exp.func("SUM", sb.col(SIZE)),
                                                                     sb.lit(0))).from_(suppressed_keys))[0][0]
            # Dropped records leave no class behind, and no kept class violates at the fixed point.
            if suppressed == 0 or dropping:
                break
            after = Classes.of(final.subquery("final"), quasi)
            if check(self.engine, after, models, key_names=quasi).satisfied:
                break
            # Replaced records form one all-'*' class that violates: the smallest kept classes join it.
            remaining = self.engine.rows(exp.select(exp.func("COUNT", exp.Star())).from_(verdicts)
                                      .where(sb.col(VIOLATED).not_()))[0][0]
            if remaining == 0:
                raise PolicyNotSatisfied(
                    "the suppressed records, all quasi-identifiers replaced by '*', still violate the policy with every "
                    "class suppressed: the table as a whole does not satisfy it", report)
            absorbed = max(1, absorbed * 2)
            smallest = (exp.select(*classes.keys_of(), sb.col(SIZE)).from_(verdicts).where(sb.col(VIOLATED).not_())
                        .order_by(sb.col(SIZE), *classes.keys_of()).limit(absorbed))
            self.engine.run(exp.insert(smallest, suppressed_keys))
            self.engine.run(exp.update(verdicts, {VIOLATED: exp.true()}, where=exp.Exists(
                this=exp.select(sb.lit(1)).from_(exp.alias_(suppressed_keys, "s", quoted=True))
                .where(sb.null_safe_join("s", verdicts.name, classes.key_columns)))))
        if suppressed > bound.allowed_suppressed:
            raise PolicyNotSatisfied(
                f"{report.summary()}; keeping the suppressed records' own class safe needs {suppressed} suppressed "
                f"records, above the limit", report)
        return report, final, int(suppressed)

    def cluster(self, source, policy: Policy | str, method, *, numeric: Sequence[str] | None = None):
        """Group the records of ``source`` with a clustering ``method`` so that every group satisfies ``policy``:
        ``duckanon.SemiSupervisedClustering`` (seed 001), ``duckanon.TopDownPartitioning`` (seed 003) or
        ``duckanon.MDAV``.  ``numeric`` names the quasi-identifiers treated as numbers (by default those of a numeric
        type).  Returns :class:`~duckanon.cluster.grouping.Clusters`, whose ``publish(path)`` writes the release."""
        from .cluster.grouping import run  # the clustering modules build on this one
        with self._bind(source, policy, partitioning=True) as bound:
            return run(self, bound, method, numeric)

    def perturb(self, source, path: str | os.PathLike, *, method, numeric: Sequence[str] = (), categorical=(),
                categorical_method=None, identifiers: Sequence[str] = (), insensitive: Sequence[str] = (),
                others: str = "error", keep: Sequence[str] | None = None, seed: int | None = None,
                table: str = "release", **measures):
        """Publish ``source`` with its private attributes replaced by perturbed values: seed 004's
        ``duckanon.EmpiricalSynthesis`` (rank re-associated draws from each attribute's empirical distribution), or
        the baselines ``duckanon.AdditiveNoise`` and ``duckanon.RandomizedResponse``; every release is measured
        (``duckanon.privacy.disclosure``).  Every column needs a role: ``identifiers`` dropped, ``numeric``/``categorical``
        perturbed, ``insensitive`` released as they are, the rest as ``others`` says (an error by default).  See
        :func:`duckanon.perturb.perturbation.perturb` for the parameters; returns a
        :class:`~duckanon.perturb.perturbation.PerturbedRelease`."""
        from .perturb.perturbation import perturb
        return perturb(self.engine, source_relation(self.engine, source), path, method=method, numeric=numeric,
                       categorical=categorical, categorical_method=categorical_method, identifiers=identifiers,
                       insensitive=insensitive, others=others, keep=keep, seed=seed, table=table,
                       progress=self.progress, **measures)


def _not_all_leaves(engine: Engine, counted: exp.Table,
                    hierarchies: Mapping[str, BoundHierarchy]) -> list[str]:
    """The attributes with a known value (its text) that is not a leaf of their hierarchy, in one query."""
    if not hierarchies:
        return []
    branches = []
    for attribute, bound in hierarchies.items():
        value = sb.as_text(sb.col(attribute))
        leaf = sb.col(level_column(0))
        leaves = exp.select(leaf).from_(bound.table).where(leaf.copy().is_(exp.Null()).not_())
        outside = (exp.select(sb.lit(attribute).as_("__attribute", quoted=True)).from_(counted)
                   .where(exp.and_(sb.col(attribute).is_(exp.Null()).not_(), value.isin(query=leaves).not_())).limit(1))
        branches.append(exp.select(exp.Star()).from_(outside.subquery(f"a{len(branches)}")))
    union = branches[0]
    for branch in branches[1:]:
        union = exp.union(union, branch, distinct=False, copy=False)
    return [row[0] for row in engine.rows(union)]


def _suppressed_query(generalized: exp.Table, columns: Sequence[str], quasi: Sequence[str], suppressed: exp.Table,
                      mode: str) -> exp.Select:
    keys = Classes.of(generalized, quasi).key_columns
    marked = exp.select(*[sb.col(k) for k in keys], exp.true().as_("__suppressed", quoted=True)).from_(suppressed)
    on = sb.and_all(exp.NullSafeEQ(this=sb.col(q, "g"), expression=sb.col(k, "s")) for q, k in zip(quasi, keys))
    flag = sb.col("__suppressed", "s")
    query = exp.select().from_(exp.alias_(generalized, "g", quoted=True)).join(
        marked.subquery("s"), on=on, join_type="LEFT")
    for column in columns:
        value = sb.col(column, "g")
        if column in quasi and mode == "replace":
            value = exp.Case().when(flag.is_(exp.Null()).not_(), sb.lit(SUPPRESSED)).else_(value).as_(column, quoted=True)
        query = query.select(value)
    return query.where(flag.is_(exp.Null())) if mode == "drop" else query


class _Temporaries:
    """Temporary tables of one operation, dropped when it ends."""

    def __init__(self, engine: Engine):
        self.engine, self.tables = engine, []

    def create(self, query: exp.Expression) -> exp.Table:
        table = sb.table(f"__duckanon_tmp_{next(_temporaries)}")
        self.engine.run(sb.create_table_as(table, query, temporary=True))
        self.tables.append(table)
        return table

    def __enter__(self) -> _Temporaries:
        return self

    def __exit__(self, *exc) -> None:
        for table in self.tables:
            self.engine.run(sb.drop("TABLE", table))
        self.tables.clear()


def verify_release(reader: Engine, table: str, bound: _Bound, transformation: Transformation,
                   expected_records: int, ranges: Ranges) -> None:
    """Re-check a written release on its own: columns, record count, the policy, that no raw value shows, and the
    numbers' bound columns."""
    released = sb.table(table)
    columns = reader.columns(released)
    if columns != ranges.columns(bound.columns):
        raise ReleaseCheckFailed(f"release check: columns {columns} differ from the expected "
                                 f"{ranges.columns(bound.columns)}")
    records = reader.rows(exp.select(exp.func("COUNT", exp.Star())).from_(released))[0][0]
    if records != expected_records:
        raise ReleaseCheckFailed(f"release check: {records} records written, {expected_records} expected")
    report = check(reader, Classes.of(released, bound.quasi_identifiers), bound.policy.models,
                   key_names=bound.quasi_identifiers)
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
        reader.rows(exp.select(exp.Star()).from_(sb.table(view)).limit(1))
