"""What a report shows, computed: from the release file alone, and from the source beside it when it is given.

The release is opened read-only in a connection of its own (it is a separate file and stays as it is); the source is
read through the caller's engine.  Every count runs in SQL; risk estimation, classifiers and the frontier's searches
run in Python on what the counts return.  What cannot be computed (no source, no label, a perturbed release without
classes) is listed in ``notes`` with the reason, never silently left out.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from sqlglot import exp

from ..aggregate.private import class_size_counts
from ..declare.policy import SUPPRESSED, Policy
from ..deferred import pandas as pd
from ..encode.binding import Workspace, bind
from ..errors import AnonymizationError
from ..hierarchy.hierarchy import Hierarchy
from ..parameters import checked_number
from ..privacy.models import KAnonymity
from ..privacy.people import signature_group_histogram
from ..recode.generalization import FullDomainGeneralization
from ..release.files import open_release
from ..release.verify import (
    MISSING_MATCHES_ANY,
    person_of,
    record_table_of,
    strata_of,
    verify,
)
from ..risk.counting import (
    class_size_histogram,
    compatible_histogram,
    population_pairs,
    records,
)
from ..risk.population import ClassSizes, prosecutor_risk
from ..risk.records import RECORDS, combinations, suda2
from ..risk.summary import RiskSummary, summarize
from ..search.run import frontier as optima_by_parameter
from ..sqlgen import build as sb
from ..utility.classification import classifier_accuracy, trained_on_release_accuracy
from ..utility.distributions import Comparison, compare
from . import protected

QUASI_IDENTIFIER = "quasi-identifier"
WEIGHT = "__duckanon_records"
# Class-size buckets a custodian reads at a glance (records in classes of that size).
BUCKETS = ((1, 1), (2, 2), (3, 4), (5, 9), (10, 19), (20, 49), (50, 99), (100, None))


@dataclasses.dataclass(frozen=True)
class Population:
    """Who the records were drawn from: a ``sampling_fraction`` (records / population), or a ``relation`` holding the
    population's records (the source's quasi-identifiers among its columns)."""

    sampling_fraction: float | None = None
    relation: exp.Expression | None = None

    def __post_init__(self):
        if (self.sampling_fraction is None) == (self.relation is None):
            raise AnonymizationError("a population is a sampling fraction or a table of records: give one of them")
        if self.sampling_fraction is not None:
            checked_number(self.sampling_fraction, "sampling fraction", "population", low=0, low_open=True, high=1)


@dataclasses.dataclass(frozen=True)
class FrontierRequest:
    """Which parameter to vary, over which values, and the metric the optima minimize."""

    values: Sequence[object]
    parameter: str = "k"
    metric: str = "loss"


@dataclasses.dataclass
class ReportFigures:
    path: Path
    info: dict
    risk: RiskSummary | None
    class_buckets: pd.DataFrame | None
    comparisons: list[Comparison]
    accuracy: pd.DataFrame | None
    frontier: pd.DataFrame | None
    frontier_request: FrontierRequest | None
    levels: pd.DataFrame | None  # attribute, level, highest, examples
    notes: list[str]
    verdict: pd.DataFrame  # the release's verification: guarantee, claimed, recomputed, holds (None: not checked)
    custodian_view: bool = False  # the source's own values are shown: not to be passed on with the release
    # Per set of quasi-identifiers records are minimal sample uniques on (SUDA2): its size and records on each side;
    # and per side the records that have any.
    special_uniques: pd.DataFrame | None = None
    special_records: dict[str, int] | None = None
    # The source's classes per size bucket with differential-privacy noise (bucket, classes, scale, accuracy), when
    # asked: a figure of the source that may be passed on.
    noisy_class_sizes: pd.DataFrame | None = None
    noise_epsilon: float | None = None

    @property
    def metrics(self) -> pd.DataFrame:
        """The release's metrics that are numbers (a perturbation's disclosure measures are a nested record)."""
        numbers = {k: float(v) for k, v in (self.info.get("metrics") or {}).items() if isinstance(v, (int, float))}
        return pd.DataFrame({"metric": list(numbers), "value": list(numbers.values())})


def collect(workspace: Workspace, release_path: str | os.PathLike, *, source: exp.Expression | None = None,
            policy: Policy | None = None, label: str | None = None, population: Population | None = None,
            frontier: FrontierRequest | None = None, threshold: float = 0.2,
            custodian_view: bool = False, public_key: object | None = None,
            noise: tuple[float, str, str | os.PathLike | None] | None = None) -> ReportFigures:
    """The figures of a report on the release at ``release_path``; ``source`` (a relation of ``workspace``'s engine)
    adds the source's side (:mod:`.protected`: nothing the release hides, unless ``custodian_view``), ``label``
    classification accuracy, ``policy`` (with ``frontier``) the frontier and the hierarchies' labels.  The verdict
    is the release's verification (:func:`~duckanon.release.verify.verify`, its signature too with ``public_key``).
    ``noise`` (ε, the source's name in the privacy ledger, the ledger's file or None) adds the source's class sizes
    with differential-privacy noise, spent from its budget."""
    announce = workspace.announce
    threshold = checked_number(threshold, "threshold", "report", low=0, high=1)
    announce(f"verifying the release {str(release_path)!r} from its rows")
    verdict = verify(release_path, public_key=public_key).frame()
    reader, info = open_release(release_path)
    notes: list[str] = []
    try:
        released = sb.table(info["released_table"])
        released_columns = reader.columns(released)
        quasi = [c["column"] for c in (info.get("policy") or {}).get("columns", []) if c["role"] == QUASI_IDENTIFIER]
        if any(c not in released_columns for c in quasi):
            notes.append(f"The release lacks its quasi-identifiers {[c for c in quasi if c not in released_columns]} "
                         f"(its verification fails, above): classes are counted over the others.")
            quasi = [c for c in quasi if c in released_columns]
        # Under a policy with strata, a class is within a stratum: the stratum is a key of every class counted.
        strata = [c for c in strata_of(info.get("policy") or {}) if c in released_columns]
        if source is not None:
            missing = [c for c in [*strata, *quasi] if c not in workspace.engine.columns(source)]
            if missing:
                raise AnonymizationError(f"the source lacks the release's quasi-identifiers {missing}: is it the "
                                         f"release's source?")
        announce("counting classes and estimating risk")
        risk, buckets = _risk(workspace, reader, released, source, quasi, info, policy, population, threshold, notes,
                              strata)
        special, special_records = (_special_uniques(workspace, reader, released, source, [*strata, *quasi])
                                    if quasi else (None, None))
        noisy = None
        if noise is not None:
            if source is None or not quasi:
                raise AnonymizationError("noisy class sizes are the source's: give the release's source (and a "
                                         "release with quasi-identifiers)")
            announce(f"counting the source's classes by size with differential privacy (ε = {noise[0]:g})")
            noisy = class_size_counts(workspace, source, [*strata, *quasi],
                                      {_bucket_name(b): b for b in BUCKETS}, *noise)
        announce("comparing each attribute's distribution")
        shown = [a for a in quasi or list(_perturbed(info)) if a in released_columns]
        hierarchies = _known_hierarchies(workspace, policy)
        if source is None:
            comparisons = []
        elif custodian_view:
            comparisons = [compare(workspace.engine, source, reader, released, a) for a in shown]
        else:
            comparisons = protected.comparisons(workspace, source, reader, released, shown, info, hierarchies,
                                                threshold)
        if source is None:
            notes.append("No source was given: the report shows the release alone (no comparison with the original "
                         "data, no source risk, no classification accuracy or frontier).")
        accuracy = None
        if label is not None and source is not None:
            announce(f"classification accuracy with label {label!r}")
            accuracy = _accuracy(workspace, reader, released, source, released_columns, shown, label, info)
        elif label is None:
            notes.append("No label was given: classification accuracy is not measured (give the class column).")
        frontier_frame = None
        if frontier is not None:
            frontier_frame = _frontier(workspace, source, policy, frontier, info, threshold, notes)
        levels = _levels(hierarchies, info)
    finally:
        reader.close()
    return ReportFigures(Path(release_path), info, risk, buckets, comparisons, accuracy, frontier_frame,
                         frontier, levels, notes, verdict, custodian_view, special, special_records, noisy,
                         None if noise is None else noise[0])


# SUDA2 in a report searches sets of at most this many quasi-identifiers: seconds on a million records.
REPORT_SUDA_SIZE = 3


def _special_uniques(workspace, reader, released, source, quasi) -> tuple[pd.DataFrame, dict[str, int]]:
    """Why records are at risk: per set of quasi-identifiers that some record of the release (or of the source, when
    given) is a minimal sample unique on (SUDA2, sets of at most :data:`REPORT_SUDA_SIZE`), the set, its size and the
    records of each side unique on it and on no smaller set; and per side the records with any.  Only names of
    columns and counts: no value.  A suppressed value (``*``) is missing to SUDA2, so it never makes a record
    unique."""
    size = min(len(quasi), REPORT_SUDA_SIZE)
    shown = exp.select(*[exp.Nullif(this=sb.col(q), expression=sb.lit(SUPPRESSED)).as_(q, quoted=True)
                         for q in quasi]).from_(released)
    sides = {"release": suda2(combinations(reader, shown, quasi), quasi, max_size=size)}
    if source is not None:
        sides["source"] = suda2(combinations(workspace.engine, source, quasi), quasi, max_size=size)
    table = None
    for side, found in sides.items():
        counted = pd.DataFrame({"variables": [" × ".join(v) for v in found.msu_sets["variables"]],
                                "size": found.msu_sets["size"].astype("int64"),
                                f"{side} records": found.msu_sets["records"].astype("int64")})
        table = counted if table is None else table.merge(counted, on=["variables", "size"], how="outer")
    for side in sides:
        table[f"{side} records"] = table[f"{side} records"].fillna(0).astype("int64")
    order = [f"{side} records" for side in sides]
    table = table.sort_values([*order, "size"], ascending=[False] * len(order) + [True], kind="stable")
    special = {side: int(found.combinations.loc[found.combinations["score"] > 0, RECORDS].sum())
               for side, found in sides.items()}
    return table.reset_index(drop=True), special


def _risk(workspace, reader, released, source, quasi, info, policy, population, threshold, notes, strata=()):
    if not quasi:
        notes.append("This release has no quasi-identifiers whose equal values form classes (a perturbed release "
                     "shows new numbers): class-based risk does not apply; its disclosure measures are shown instead.")
        return None, None
    keys = [*strata, *quasi]
    released_sizes = class_size_histogram(reader, released, keys)
    source_sizes = class_size_histogram(workspace.engine, source, keys) if source is not None else None
    # A release of cell suppression: a record's class is every record compatible with it, a missing value matching any.
    compatible = (compatible_histogram(reader, released, quasi, strata)
                  if (info.get("policy") or {}).get(MISSING_MATCHES_ANY) else None)
    if compatible is not None:
        notes.append("A missing value in this release matches any value (cell suppression): a record's risk is 1 / "
                     "the records compatible with it, and the release's population figures are not estimated.")
    population_records, source_pairs, release_pairs = None, None, None
    if population is not None:
        if population.relation is not None:
            population_records = records(workspace.engine, population.relation)
        else:
            population_records = round(info["source_records"] / population.sampling_fraction)
        if population_records < info["source_records"]:
            raise AnonymizationError(f"the population ({population_records} records) is smaller than the sample "
                                     f"({info['source_records']} records)")
        if population.relation is not None:
            lacking = [c for c in strata if c not in workspace.engine.columns(population.relation)]
            if lacking:
                raise AnonymizationError(f"the population table lacks the release's strata {lacking}: a class is "
                                         f"within a stratum, and so is its population")
            if source is not None:
                source_pairs = population_pairs(workspace.engine, source, population.relation, keys)
            release_pairs = _release_population_pairs(workspace, reader, released, quasi, info, policy,
                                                      population.relation, notes, strata)
    else:
        notes.append("No population was given: journalist risk and population uniqueness are not estimated (give a "
                     "sampling fraction or a population table).")
    risk = summarize(released_sizes, source_sizes, threshold=threshold, population_records=population_records,
                     source_pairs=source_pairs, release_pairs=release_pairs,
                     people=_signature_groups(workspace, reader, released, source, quasi, info), compatible=compatible)
    buckets = pd.DataFrame({"bucket": [_bucket_name(b) for b in BUCKETS]})
    by_records = None if compatible is None else (compatible[0], compatible[1] / compatible[0])  # records, as classes
    for side, histogram in (("source", source_sizes), ("release", by_records or released_sizes)):
        if histogram is not None:
            buckets[side] = _bucket_shares(*histogram)
    return risk, buckets


def _signature_groups(workspace, reader, released, source, quasi, info) -> dict | None:
    """Under a policy that counts people, each side's signature-group sizes (the source's where it names its
    people, and its records' tables in a source of several tables); None otherwise."""
    policy = info.get("policy") or {}
    person, record_table = person_of(policy), record_table_of(policy)
    if person is None:
        return None
    groups = {"release": signature_group_histogram(reader, released, quasi, person, record_table)}
    if source is not None and person in (columns := workspace.engine.columns(source)):
        groups["source"] = signature_group_histogram(workspace.engine, source, quasi, person,
                                                     record_table if record_table in columns else None)
    return groups


def _release_population_pairs(workspace, reader, released, quasi, info, policy, population, notes, strata=()):
    """The release's classes (within each stratum of ``strata``) with their sizes in the population recoded by the
    same full-domain generalization.  The suppressed records' class (every quasi-identifier ``*``) cannot be found in
    the population: its population size is taken as its own, which overstates its risk rather than understating it.
    None (the risk is then estimated from the population's size) for other releases or without the policy's
    hierarchies."""
    levels = (info.get("transformation") or {}).get("full-domain generalization")
    if not levels or policy is None or any(h is None for h in policy.quasi_identifiers.values()):
        notes.append("The release's journalist risk is estimated from the population's size: only a full-domain "
                     "release whose policy is known can recode the population table the same way.")
        return None
    keys = [sb.col(q) for q in [*strata, *quasi]]
    classes = reader.frame(exp.select(*keys, exp.func("COUNT", exp.Star()).as_(WEIGHT)).from_(released)
                           .group_by(*keys))
    starred = (classes[quasi] == SUPPRESSED).all(axis=1)
    quasi_only = Policy(quasi_identifiers=policy.quasi_identifiers, models=[KAnonymity(1)], insensitive=strata,
                        others="drop")
    with (bind(workspace, population, quasi_only) as bound,
          workspace.engine.registered(classes[~starred].reset_index(drop=True)) as kept):
        recoded = FullDomainGeneralization(levels).compile(bound.source, bound.columns, bound.hierarchies)
        sample, population_sizes, counts = population_pairs(workspace.engine, kept, recoded, [*strata, *quasi],
                                                            sample_weight=WEIGHT)
    suppressed = classes.loc[starred, WEIGHT].to_numpy(dtype=np.int64)
    return (np.concatenate([sample, suppressed]), np.concatenate([population_sizes, suppressed]),
            np.concatenate([counts, np.ones(len(suppressed), dtype=np.int64)]))


def _bucket_name(bucket: tuple[int, int | None]) -> str:
    low, high = bucket
    if high is None:
        return f"{low}+"
    return str(low) if low == high else f"{low}–{high}"


def _bucket_shares(sizes: np.ndarray, counts: np.ndarray) -> list[float]:
    records_per_size = sizes * counts
    total = records_per_size.sum()
    shares = []
    for low, high in BUCKETS:
        inside = (sizes >= low) & (sizes <= (high if high is not None else sizes.max(initial=0)))
        shares.append(float(records_per_size[inside].sum() / total) if total else 0.0)
    return shares


def _perturbed(info: dict) -> dict[str, dict]:
    """A perturbed release's columns with their methods (none for other releases)."""
    return dict((info.get("transformation") or {}).get("perturbation") or {})


def _accuracy(workspace, reader, released, source, released_columns, shown, label, info) -> pd.DataFrame:
    """Cross-validated accuracy on the source and on the release (the measure of the seed papers' generalization
    study) and, for a perturbed release, trained on the release and tested on the source (the perturbation study's); the features are the compared attributes, perturbed
    numbers as numbers and everything else as categories."""
    if label not in released_columns or label not in workspace.engine.columns(source):
        raise AnonymizationError(f"label {label!r} is not a column of both the source and the release (the "
                                 f"release has {released_columns})")
    features = [c for c in shown if c in released_columns and c != label]
    numeric = [c for c, method in _perturbed(info).items() if "categories" not in method]
    columns = [sb.col(c) for c in [*features, label]]
    original = workspace.engine.frame(exp.select(*columns).from_(source))
    release = reader.frame(exp.select(*columns).from_(released))
    measures = {"cross-validated on the source": lambda: classifier_accuracy(original, features, label,
                                                                             numeric=numeric),
                "cross-validated on the release": lambda: classifier_accuracy(release, features, label,
                                                                              numeric=numeric)}
    if info["kind"] == "perturbation":
        measures["trained on the release, tested on the source"] = (
            lambda: trained_on_release_accuracy(release, original, features, label, numeric=numeric))
    return pd.DataFrame([{"classifier": name.replace("_", " "), "measure": measure, "accuracy": score}
                         for measure, scores in measures.items() for name, score in scores().items()])


def _frontier(workspace, source, policy, request, info, threshold, notes) -> pd.DataFrame | None:
    if source is None or policy is None:
        notes.append("The frontier needs the source and the policy: it searches the optimum for each value.")
        return None
    if info["kind"] != "full-domain generalization":
        notes.append(f"The frontier is drawn for full-domain generalization; this release is a {info['kind']}, so "
                     f"the curve shows what full-domain generalization of the same source gives.")
    rows = []
    for point in optima_by_parameter(workspace, source, policy, request.parameter, list(request.values), request.metric):
        row = {"value": point.value, "metric": point.metric, "suppressed": point.suppressed,
               "levels": None if point.levels is None else ", ".join(f"{a}={v}" for a, v in point.levels.items())}
        if point.levels is not None:
            prosecutor = prosecutor_risk(ClassSizes(point.sizes, point.counts), threshold)
            row.update(highest_risk=prosecutor.highest, average_risk=prosecutor.average,
                       records_at_risk=prosecutor.records_at_risk)
        rows.append(row)
    return pd.DataFrame(rows)


def _known_hierarchies(workspace: Workspace, policy: Policy | None) -> dict[str, Hierarchy]:
    """The policy's hierarchies that are known here (given, or stored in the workspace's catalog)."""
    known = {}
    for attribute, hierarchy in (policy.quasi_identifiers.items() if policy is not None else ()):
        if isinstance(hierarchy, str):
            hierarchy = workspace.catalog.hierarchy(hierarchy)
        if hierarchy is not None:
            known[attribute] = hierarchy
    return known


def _levels(hierarchies: dict[str, Hierarchy], info: dict) -> pd.DataFrame | None:
    """Each quasi-identifier's level, its highest where the hierarchy is known, and labels that level releases."""
    chosen = (info.get("transformation") or {}).get("full-domain generalization")
    if not chosen:
        return None
    return pd.DataFrame({"attribute": list(chosen), "level": list(chosen.values()),
                         "highest": [hierarchies[a].levels - 1 if a in hierarchies else None for a in chosen],
                         "example labels": [_examples(hierarchies.get(a), level) for a, level in chosen.items()]})


def _examples(hierarchy: Hierarchy | None, level: int, most: int = 4) -> str:
    """A few of the labels ``level`` releases (labels only: a hierarchy built from the data lists its values)."""
    if hierarchy is None:
        return ""
    if level == 0:
        return "the values themselves"
    labels = list(dict.fromkeys(label for label in hierarchy.level_values(level) if label is not None))
    if len(labels) > most:
        labels = [labels[round(i * (len(labels) - 1) / (most - 1))] for i in range(most)] + ["…"]
    return ", ".join(labels)
