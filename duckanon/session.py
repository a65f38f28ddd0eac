"""The façade: an anonymizer over a database that knows hierarchies and policies, checks them, and publishes releases.

    import duckdb, duckanon
    con = duckdb.connect("people.duckdb")
    anon = duckanon.connect(con)
    policy = duckanon.Policy(quasi_identifiers={"age": age_hierarchy, "zip": "zip"}, identifiers=["name"],
                             models=[duckanon.KAnonymity(5), duckanon.DistinctLDiversity("disease", 2)])
    anon.check("patients", policy, levels={"age": 2, "zip": 3}).summary()
    anon.publish("patients", policy, levels={"age": 2, "zip": 3}, path="release.duckdb")

Each method hands its work to the room that does it: the catalog (:mod:`duckanon.declare.catalog`), binding a source
to a policy (:mod:`duckanon.encode.binding`), publishing (:mod:`duckanon.release.publish`), and each algorithm's run
(:mod:`duckanon.search.run`, :mod:`duckanon.partition.run`, :mod:`duckanon.cluster.grouping`,
:mod:`duckanon.perturb.perturbation`).  They all work in one :class:`~duckanon.encode.binding.Workspace`.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

import duckdb

from . import report
from .aggregate import private
from .cluster import grouping
from .declare.budget import PrivacyBudget, ledger_at, source_key
from .declare.catalog import Catalog
from .declare.policy import Policy
from .deferred import pandas as pd
from .encode.binding import EncodedSource, Workspace, encode, encoded_source
from .encode.sources import source_relation
from .encode.tables import exposure
from .engine import DuckDBEngine, Engine
from .engine.duckdb_engine import as_engine
from .errors import PolicyError
from .hierarchy.hierarchy import Hierarchy
from .partition import run as partition_run
from .partition.mondrian import MondrianResult
from .perturb.perturbation import perturb
from .privacy.checks import CheckReport
from .privacy.differential import differentially_private
from .privacy.people import PersonExposure
from .privacy.risk_report import RiskReport
from .recode.generalization import FullDomainGeneralization, Transformation
from .release.files import STORAGE_VERSION
from .release.publish import Release, Reportable, publish_source, signing
from .risk.records import IndividualRisk, Suda, combinations, individual_risk, suda2
from .search import cells, local, safepub
from .search import run as search_run
from .search.cells import SuppressedCells
from .search.local import LocalRecoding
from .search.strategies import SearchResult
from .utility.metrics import Metric
from .utility.weights import attribute_weights


def connect(database: Engine | duckdb.DuckDBPyConnection | str | os.PathLike | None = None,
            progress: Callable[[str], None] | None = None) -> Anonymizer:
    """An anonymizer over an engine or a DuckDB connection, or over a database file opened for it (in memory without
    one).

    A database file this creates is written in the storage version releases use, which the DuckDB shell and clients
    from 1.2 on read; an existing file keeps its version."""
    if database is None:
        database = duckdb.connect(":memory:")
    elif not isinstance(database, (Engine, duckdb.DuckDBPyConnection)):
        config = {} if Path(database).exists() else {"storage_compatibility_version": STORAGE_VERSION}
        database = duckdb.connect(str(database), config=config)
    return Anonymizer(database, progress)


class Anonymizer:
    """``database``: an engine or a DuckDB connection.  ``progress``, when given, is called with a short message as
    each stage of long work starts."""

    def __init__(self, database: Engine | duckdb.DuckDBPyConnection, progress: Callable[[str], None] | None = None):
        engine = as_engine(database)
        self.workspace = Workspace(engine, Catalog(engine), progress, reporter=report.report)
        self.engine, self.catalog = engine, self.workspace.catalog
        self.con = engine.connection if isinstance(engine, DuckDBEngine) else None  # for callers that hold one

    @property
    def progress(self) -> Callable[[str], None] | None:
        return self.workspace.progress

    @progress.setter
    def progress(self, progress: Callable[[str], None] | None) -> None:
        self.workspace.progress = progress

    # ------------------------------------------------------------ the catalog
    def add_hierarchy(self, name: str, hierarchy: Hierarchy) -> str:
        """Store ``hierarchy`` as table ``anon.hierarchy_<name>`` (replacing one of that name); returns the name."""
        return self.catalog.add_hierarchy(name, hierarchy)

    def has_hierarchy(self, name: str) -> bool:
        return self.catalog.has_hierarchy(name)

    def hierarchy(self, name: str) -> Hierarchy:
        return self.catalog.hierarchy(name)

    def add_arx_hierarchies(self, directory: str | os.PathLike, names: Sequence[str] | None = None) -> list[str]:
        """Store every ``<name>.csv`` (ARX format) of a folder as hierarchy ``<name>``."""
        return self.catalog.add_arx_hierarchies(directory, names)

    def save_policy(self, name: str, policy: Policy) -> None:
        """Store a policy as rows of anon.policies, anon.policy_columns and anon.policy_models."""
        self.catalog.save_policy(name, policy)

    def policy(self, name: str) -> Policy:
        """The policy stored as ``name`` (its rows are checked as they are read)."""
        return self.catalog.policy(name)

    def policies(self) -> pd.DataFrame:
        return self.catalog.policies()

    # ------------------------------------------------------- privacy budgets
    def set_privacy_budget(self, source, epsilon: float, delta: float = 0.0, *,
                           ledger: str | os.PathLike | None = None) -> PrivacyBudget:
        """Declare the ε and δ that every differentially private output of ``source`` (as :meth:`anonymize` names
        it) may spend together; an output that would exceed it is refused (see :mod:`duckanon.declare.budget`).
        ``ledger``: a DuckDB file keeping budgets and spends instead of this database's ``anon`` schema."""
        with ledger_at(self.engine, ledger) as book:
            return book.declare(source_key(source), epsilon, delta)

    def privacy_budget(self, source, *, ledger: str | os.PathLike | None = None) -> PrivacyBudget:
        """``source``'s budget (if declared) and what its differentially private outputs spent."""
        with ledger_at(self.engine, ledger) as book:
            return book.state(source_key(source))

    def privacy_spent(self, source=None, *, ledger: str | os.PathLike | None = None) -> pd.DataFrame:
        """The ledger of differentially private outputs (of ``source``, or of every source): ε, δ, what, where, when."""
        with ledger_at(self.engine, ledger) as book:
            return book.spent(None if source is None else source_key(source))

    def dp_aggregate(self, source, statistic: str, *, epsilon: float, delta: float = 0.0, column: str | None = None,
                     bounds: Sequence[float] | None = None, categories: Sequence[object] | None = None,
                     mechanism: str = "laplace", ledger: str | os.PathLike | None = None,
                     source_name: str | None = None) -> pd.DataFrame:
        """A differentially private ``count``, ``sum``, ``mean`` or ``histogram`` of ``source`` (a source or a
        release file), noised by OpenDP (the ``dp`` extra) with the ``laplace`` or ``gaussian`` mechanism; a sum and a
        mean need ``bounds``, a histogram its public ``categories``.  Its ε and δ are spent from the source's privacy
        budget first.  One row per value with its noise's scale and 95 % accuracy (see
        :mod:`duckanon.aggregate.private`)."""
        return private.aggregate(self.workspace, source, statistic, epsilon=epsilon, delta=delta, column=column,
                                 bounds=bounds, categories=categories, mechanism=mechanism, ledger=ledger,
                                 source_name=source_name)

    # --------------------------------------------------------------- checking
    def encode(self, source, policy: Policy | str) -> EncodedSource:
        """Read ``source`` once into a frequency table with every level's codes, for many fast checks and searches
        (close it, or use it in a ``with`` block, to drop the table)."""
        return encode(self.workspace, source, policy)

    def check(self, source, policy: Policy | str, levels: Mapping[str, int]) -> CheckReport:
        """Whether generalizing ``source`` (or what :meth:`encode` gave) to ``levels`` satisfies ``policy``, and what
        would be suppressed."""
        with encoded_source(self.workspace, source, policy) as encoded:
            return encoded.check(levels)

    def risk(self, source, policy: Policy | str, levels: Mapping[str, int], threshold: int = 5) -> RiskReport:
        with encoded_source(self.workspace, source, policy) as encoded:
            return encoded.risk(levels, threshold)

    def suda2(self, source, variables: Sequence[str], *, strata: Sequence[str] = (), max_size: int | None = None,
              dis_fraction: float = 0.01, original_scores: bool = True) -> Suda:
        """SUDA2's minimal sample uniques of ``source``'s records over the key ``variables`` (sets of at most
        ``max_size``), each record's SUDA and DIS-SUDA score as sdcMicro's ``suda2`` computes them, the variables'
        contributions and why records are at risk (``Suda.why``); per stratum of ``strata`` (see
        :mod:`duckanon.risk.records`)."""
        frame = combinations(self.engine, source_relation(self.engine, source), variables, strata)
        return suda2(frame, variables, strata, max_size, dis_fraction, original_scores)

    def individual_risk(self, source, variables: Sequence[str], *, weight: str | None = None,
                        strata: Sequence[str] = (), method: str = "approx", qual: float = 1.0) -> IndividualRisk:
        """Each record's re-identification risk over the key ``variables`` and the global risk, as sdcMicro's
        ``measure_risk``: with a sampling ``weight`` column the Benedetti–Franconi risk (``method`` ``approx`` or
        ``exact``, times ``qual``), without 1 / its key's frequency; a missing key value matches any value; per
        stratum of ``strata`` (see :mod:`duckanon.risk.records`)."""
        frame = combinations(self.engine, source_relation(self.engine, source), variables, strata, weight)
        return individual_risk(frame, variables, strata, weight is not None, method, qual)

    def person_exposure(self, source, quasi_identifiers: Sequence[str], person: str, k: int = 5) -> PersonExposure:
        """How exposed people are in ``source`` (a release, or any table or file, or :class:`~duckanon.Tables`
        joined by ``person``) when one person has several records: the classes and signatures (sets of classes of one
        person's records; of (table, class) pairs over several tables) that fewer than ``k`` people share
        (:mod:`duckanon.privacy.people`)."""
        return exposure(self.engine, source, list(quasi_identifiers), person, k)

    # ------------------------------------------------------------------ search
    def attribute_weights(self, source, attributes: Sequence[str], kind: str, label: str | None = None) -> pd.DataFrame:
        """Per-attribute weights (uniform, entropy or mutual information with ``label``), computed in SQL."""
        return attribute_weights(self.engine, source_relation(self.engine, source), attributes, kind=kind, label=label)

    def search(self, source, policy: Policy | str | None = None, *, metric: Metric | str = "loss", strategy: str = "optimal",
               label: str | None = None, evaluator: str = "auto", memory_budget: int | None = None,
               time_limit: float | None = None, check_limit: int | None = None) -> SearchResult:
        """The full-domain generalization that satisfies ``policy`` and minimizes ``metric``.

        ``source`` may be an :class:`EncodedSource` (:meth:`encode`), searched without reading the source again
        (``policy`` is then its own, and may be left out).  ``strategy``: ``optimal`` (exact), ``samarati`` (seed
        002) or ``exhaustive``; ``label`` is the class column that ``mi-loss`` weighs attributes by.  ``evaluator``: ``memory`` checks nodes in process, ``sql`` in the
        database, ``auto`` in process when that needs at most ``memory_budget`` bytes (by default
        :data:`~duckanon.search.memory_evaluator.DEFAULT_MEMORY_BUDGET`).  ``time_limit`` (seconds) and
        ``check_limit`` (nodes) stop the search early: it returns the best node found, with ``proven`` False."""
        return search_run.search(self.workspace, source, policy, metric, strategy, label, evaluator, memory_budget,
                                 time_limit, check_limit)

    def solution_space(self, source, policy: Policy | str | None = None, *, metrics: Sequence[Metric | str] = ("loss",),
                       label: str | None = None, table: str | None = None, evaluator: str = "auto",
                       memory_budget: int | None = None) -> pd.DataFrame:
        """Every transformation that satisfies ``policy``, with its suppressed records and each metric's value;
        stored as table ``anon.<table>`` when ``table`` is given (``source`` and ``evaluator`` as :meth:`search`)."""
        return search_run.solution_space(self.workspace, source, policy, metrics, label, table, evaluator,
                                         memory_budget)

    def anonymize(self, source, policy: Policy | str | None, path: str | os.PathLike, *, metric: Metric | str = "loss",
                  strategy: str | None = None, label: str | None = None, table: str = "release",
                  format: str | None = None, evaluator: str = "auto", memory_budget: int | None = None,
                  time_limit: float | None = None, check_limit: int | None = None,
                  sign_with: object | None = None, ledger: str | os.PathLike | None = None,
                  source_name: str | None = None) -> tuple[SearchResult, Release]:
        """Search the best transformation and publish it (``format`` and ``sign_with`` as :meth:`publish`;
        ``source``, ``evaluator`` and the limits as :meth:`search`: a search stopped by a limit publishes the best
        node it found; ``strategy`` by default ``optimal``).  Under an :class:`EDDifferentialPrivacy` policy it
        releases by SafePub (:mod:`duckanon.search.safepub`): a random sample, the transformation drawn by the
        exponential mechanism from ``metric``'s SafePub score, classes below the derived k dropped; its ε and δ are
        spent from the source's privacy budget (:meth:`set_privacy_budget`; ``ledger`` and ``source_name`` say
        where the budget is kept and what names the source there)."""
        workspace = signing(self.workspace, sign_with)
        resolved = self.catalog.policy(policy) if isinstance(policy, str) else policy
        model = None if resolved is None else differentially_private(resolved.models)
        if model is None:
            if ledger is not None or source_name is not None:
                raise PolicyError("ledger and source_name keep a differentially private release's spend: the policy "
                                  "has no EDDifferentialPrivacy model")
            return search_run.anonymize(workspace, source, policy, path, metric, strategy or "optimal", label, table,
                                        format, evaluator, memory_budget, time_limit, check_limit)
        given = {"strategy": strategy if strategy not in (None, "safepub") else None, "time_limit": time_limit,
                 "check_limit": check_limit}
        refused = [f"{name}={value!r}" for name, value in given.items() if value is not None]
        if refused or isinstance(source, EncodedSource):
            what = ", ".join(refused) or "an encoded source (it would be sampled once for many releases)"
            raise PolicyError(f"{model.name} walks {model.steps} steps by the exponential mechanism (SafePub) from "
                              f"the source itself: it takes no {what}")
        return safepub.anonymize(workspace, source, resolved, path, metric, label, table, format, evaluator,
                                 memory_budget, ledger=ledger, budget_key=source_name)

    def anonymize_locally(self, source, policy: Policy | str | None, path: str | os.PathLike, *,
                          metric: Metric | str = "loss", strategy: str = "optimal", label: str | None = None,
                          table: str = "release", format: str | None = None, evaluator: str = "auto",
                          memory_budget: int | None = None, iterations: int = 100, time_limit: float | None = None,
                          check_limit: int | None = None, sign_with: object | None = None
                          ) -> tuple[LocalRecoding, Release]:
        """As :meth:`anonymize`, then the records the generalization suppresses are anonymized again among
        themselves on levels of their own, in at most ``iterations`` steps, as ARX's local recoding
        (``optimizeIterative``) does; the release holds each record on its step's levels (see
        :mod:`duckanon.search.local`).  The limits apply to each step's search."""
        return local.anonymize_locally(signing(self.workspace, sign_with), source, policy, path, metric, strategy,
                                       label, table, format, evaluator, memory_budget, iterations, time_limit,
                                       check_limit)

    def suppress_cells(self, source, policy: Policy | str | None, path: str | os.PathLike, *,
                       importance: Sequence[str] | str | None = None, levels: Mapping[str, int] | None = None,
                       metric: Metric | str = "loss", strategy: str = "optimal", label: str | None = None,
                       table: str = "release", format: str | None = None, evaluator: str = "auto",
                       memory_budget: int | None = None, time_limit: float | None = None,
                       check_limit: int | None = None, sign_with: object | None = None
                       ) -> tuple[SuppressedCells, Release]:
        """As :meth:`anonymize`, but the records the generalization would suppress keep their records: single values
        are replaced by a missing value instead, as sdcMicro's ``localSuppression`` does, until every record has k
        compatible records (a missing value matching any value, as the release's checks and ``verify`` count them;
        see :mod:`duckanon.search.cells`).  ``importance`` names quasi-identifiers most important first (suppressed
        last); k-anonymity holds within each stratum of the policy's ``strata`` (sdcMicro's ``strataVars``);
        ``levels`` starts from those levels instead of the search's optimum (all 0: cells only)."""
        return cells.suppress_cells(signing(self.workspace, sign_with), source, policy, path, importance,
                                    None if levels is None else dict(levels), metric, strategy, label, table,
                                    format, evaluator, memory_budget, time_limit, check_limit)

    # ---------------------------------------------------------------- publish
    def publish(self, source, policy: Policy | str, transformation: Transformation | Mapping[str, int],
                path: str | os.PathLike, *, table: str = "release", format: str | None = None,
                sign_with: object | None = None) -> Release:
        """Recode ``source`` by ``transformation`` (a Transformation, or a level per quasi-identifier), suppress what
        violates the policy, and write the release file: DuckDB, Parquet or CSV by ``path``'s extension or
        ``format`` (see :mod:`duckanon.release`).  ``sign_with``: an Ed25519 private key (a key file's path, PEM
        bytes or a ``cryptography`` key; the ``sign`` extra) that signs the release's info and content digest, so
        that :func:`duckanon.verify` with its public key detects any change.  A generalization to levels publishes
        what :meth:`encode` gave from its own reading and encoding."""
        if not isinstance(transformation, Transformation):
            transformation = FullDomainGeneralization(transformation)
        workspace = signing(self.workspace, sign_with)
        if isinstance(transformation, FullDomainGeneralization):
            return search_run.publish_generalization(workspace, source, policy, transformation, path, table, format)
        return publish_source(workspace, source, policy, transformation, path, table, format)

    # ----------------------------------------------------------------- report
    def report(self, release: str | os.PathLike | Reportable, path: str | os.PathLike | None = None, *, source=None,
               policy: Policy | str | None = None, label: str | None = None, sampling_fraction: float | None = None,
               population=None, frontier: Sequence[object] | None = None, parameter: str = "k",
               metric: str = "loss", threshold: float = 0.2, tables: str | os.PathLike | None = None,
               custodian_view: bool = False, public_key: object | None = None,
               noise_epsilon: float | None = None, ledger: str | os.PathLike | None = None,
               source_name: str | None = None) -> Path:
        """Write one self-contained HTML report on a release (a path, or what a publish returned) to ``path``
        (default: the release's path with ``.html``): its policy, transformation and suppression, re-identification
        risk (prosecutor; journalist and population uniqueness given ``sampling_fraction`` or a ``population``
        table), each attribute's distribution in ``source`` and release, classification accuracy for ``label``,
        and, given ``frontier`` values of ``parameter``, the optimum's ``metric`` and risk for each.  Given
        ``tables`` (a ``.duckdb`` path), the same figures go there as ``report_*`` tables; the release is only read.
        The source's side shows only the release's own categories with small counts withheld, unless
        ``custodian_view`` (the source's own values; the page then says it is not to be passed on).  Its verdict is
        the release's verification (:func:`duckanon.verify`; with ``public_key``, its signature too).
        ``noise_epsilon``: the source's class sizes also shown with differential-privacy noise at that ε (the ``dp``
        extra), spent from the source's privacy budget (``ledger`` and ``source_name`` as :meth:`anonymize`).  See
        :mod:`duckanon.report`."""
        if isinstance(release, Reportable):
            return release.report(path, label=label, sampling_fraction=sampling_fraction, population=population,
                                  frontier=frontier, parameter=parameter, metric=metric, threshold=threshold,
                                  tables=tables, custodian_view=custodian_view, public_key=public_key,
                                  noise_epsilon=noise_epsilon, ledger=ledger, source_name=source_name)
        return report.report(self.workspace, release, path, source=source, policy=policy, label=label,
                             sampling_fraction=sampling_fraction, population=population, frontier=frontier,
                             parameter=parameter, metric=metric, threshold=threshold, tables=tables,
                             custodian_view=custodian_view, public_key=public_key, noise_epsilon=noise_epsilon,
                             ledger=ledger, source_name=source_name)

    # --------------------------------------------------- the other algorithms
    def mondrian(self, source, policy: Policy | str, path: str | os.PathLike | None = None, *, relaxed: bool = False,
                 orders: Mapping[str, Sequence[object]] | None = None, categorical: Sequence[str] = (),
                 styles: Mapping[str, str] | None = None, numeric_style: str = "range", metrics: bool = True,
                 table: str = "release", format: str | None = None, sign_with: object | None = None) -> MondrianResult:
        """Partition ``source`` with Mondrian (strict, or ``relaxed``) in DuckDB, measure the result, and publish it
        to ``path`` when given (suppression, verification and release file as :meth:`publish`).

        Quasi-identifiers may be given without a hierarchy (None): numeric columns are cut on their value;
        categorical ones along ``orders[attribute]`` (a list of their values, None for NULL) or their hierarchy.
        ``categorical`` names numeric columns to cut along their hierarchy or order instead.  ``styles`` sets an
        output style per attribute (``range``/``mean`` for numbers, ``lca``/``set`` for categories); by default
        numbers show ``numeric_style``, categories cut along a hierarchy their lowest common ancestor and the others
        their set of values.  ``metrics=False`` skips measuring LM, DM, NCP and the average class size.
        ``sign_with`` as :meth:`publish`.  See :mod:`duckanon.partition.mondrian` and
        :mod:`duckanon.recode.recoding`."""
        return partition_run.mondrian(signing(self.workspace, sign_with), source, policy, path, relaxed=relaxed, orders=orders,
                                      categorical=categorical, styles=styles, numeric_style=numeric_style,
                                      metrics=metrics, table=table, format=format)

    def cluster(self, source, policy: Policy | str, method, *, numeric: Sequence[str] | None = None):
        """Group the records of ``source`` with a clustering ``method`` so that every group satisfies ``policy``:
        ``duckanon.SemiSupervisedClustering`` (seed 001), ``duckanon.TopDownPartitioning`` (seed 003) or
        ``duckanon.MDAV``.  ``numeric`` names the quasi-identifiers treated as numbers (by default those of a numeric
        type).  Returns :class:`~duckanon.cluster.grouping.Clusters`, whose ``publish(path)`` writes the release."""
        return grouping.run(self.workspace, source, policy, method, numeric)

    def perturb(self, source, path: str | os.PathLike, *, method, numeric: Sequence[str] = (), categorical=(),
                categorical_method=None, identifiers: Sequence[str] = (), insensitive: Sequence[str] = (),
                others: str = "error", keep: Sequence[str] | None = None, seed: int | None = None,
                table: str = "release", sign_with: object | None = None, **measures):
        """Publish ``source`` with its private attributes replaced by perturbed values: seed 004's
        ``duckanon.EmpiricalSynthesis`` (rank re-associated draws from each attribute's empirical distribution), or
        the baselines ``duckanon.AdditiveNoise`` and ``duckanon.RandomizedResponse``; every release is measured
        (``duckanon.privacy.disclosure``).  Every column needs a role: ``identifiers`` dropped, ``numeric``/``categorical``
        perturbed, ``insensitive`` released as they are, the rest as ``others`` says (an error by default).  See
        :func:`duckanon.perturb.perturbation.perturb` for the parameters (``sign_with`` as :meth:`publish`); returns a
        :class:`~duckanon.perturb.perturbation.PerturbedRelease`."""
        relation = source_relation(self.engine, source)
        released = perturb(self.engine, relation, path, method=method, numeric=numeric, categorical=categorical,
                           categorical_method=categorical_method, identifiers=identifiers, insensitive=insensitive,
                           others=others, keep=keep, seed=seed, table=table, progress=self.progress,
                           signer=signing(self.workspace, sign_with).signer, **measures)
        released.origin = (self.workspace, relation, None)
        return released
