"""Mondrian and clustering when one person has several records: partitioning records against partitioning people.

    python benchmarks/bench_person_partitioning.py [--k 5 10 25] [--clustering-k 5] [--clustering-people 6000]
                                                   [--output FILE]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 136,844 visits, age at the
visit, a diagnosis per visit).  Quasi-identifiers: age (cut on its value) and ARX's Adult hierarchies of sex, race
and marital status; nothing suppressed; the patient's id pseudonymized.  Per k: strict and relaxed Mondrian under
k-anonymity alone and with distinct 3-diversity of the diagnosis; per clustering k: seed 003's top-down partitioning
(k, distinct 3-diversity) and seed 001's semi-supervised clustering ((0.3, k)-anonymity of the diagnosis), on the
visits of the first ``--clustering-people`` people (seed 001's clustering is quadratic in what it groups: over all
136,844 visits it ran past 17 minutes, issue 30).  Each
once counting records, once counting people (``Policy(person=...)``: a person is a point, their records never part,
a class holds k people and each person's diagnosis once).  Then, in pandas, from each release alone: the people
whose signature (the set of classes their visits fall in) fewer than k people share, the people whose visits fall in
more than one class, the classes with fewer than 3 distinct diagnoses, and the mean width of the released age range;
beside the algorithm's LM and NCP (``PartitionMap.metrics``).  Results: ``results/person_partitioning.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import duckdb
import pandas as pd

import common
from longitudinal_setup import loaded, policy_arguments, report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import duckanon  # noqa: E402
from duckanon import (  # noqa: E402
    AlphaKAnonymity,
    DistinctLDiversity,
    KAnonymity,
    Policy,
    SemiSupervisedClustering,
    TopDownPartitioning,
)
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]
L, ALPHA = 3, 0.3


def exposed(release: pd.DataFrame, k: int) -> tuple[int, int, int, float]:
    """(people whose signature fewer than k people share, people in more than one class, classes with fewer than L
    distinct diagnoses, mean width of the released age range), by pandas from the release."""
    classes = release[QUASI].astype(str).agg("|".join, axis=1)
    signatures = classes.groupby(release["patient_id"]).agg(frozenset)
    below = int((signatures.map(signatures.value_counts()) < k).sum())
    spread = int((classes.groupby(release["patient_id"]).nunique() > 1).sum())
    diagnoses = release.groupby(classes)["diagnosis"].nunique()
    width = (release["age_high"] - release["age_low"]).mean() if "age_high" in release else float("nan")
    return below, spread, int((diagnoses < L).sum()), float(width)


def runs(anon: duckanon.Anonymizer, k_values: list[int], clustering_k: list[int]
         ) -> Iterator[tuple[int, str, str, list, Callable[[Policy, Path], tuple[int, dict]]]]:
    """(k, algorithm, models' name, models, run): ``run(policy, path)`` publishes and gives (groups, metrics); the
    clustering methods group table ``sampled_visits``."""
    def mondrian(relaxed: bool):
        def run(policy: Policy, path: Path) -> tuple[int, dict]:
            result = anon.mondrian("adult_visits", policy, path, relaxed=relaxed)
            return result.partitioning.partitions, result.metrics
        return run

    def clustering(method):
        def run(policy: Policy, path: Path) -> tuple[int, dict]:
            clusters = anon.cluster("sampled_visits", policy, method)
            clusters.publish(path)
            return clusters.count, clusters.metrics()
        return run

    for k in k_values:
        for models, named in (([KAnonymity(k)], "k"),
                              ([KAnonymity(k), DistinctLDiversity("diagnosis", L)], f"k, distinct {L}-diverse")):
            for relaxed in (False, True):
                yield k, f"{'relaxed' if relaxed else 'strict'} Mondrian", named, models, mondrian(relaxed)
    for k in clustering_k:
        yield (k, "top-down partitioning (seed 003)", f"k, distinct {L}-diverse",
               [KAnonymity(k), DistinctLDiversity("diagnosis", L)], clustering(TopDownPartitioning()))
        yield (k, "semi-supervised (seed 001)", f"({ALPHA}, k)", [AlphaKAnonymity("diagnosis", ALPHA, k)],
               clustering(SemiSupervisedClustering()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 25])
    parser.add_argument("--clustering-k", type=int, nargs="*", default=[5])
    parser.add_argument("--clustering-people", type=int, default=6000)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "person_partitioning.md")
    args = parser.parse_args()
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI[1:])
    visits = con.table("adult_visits")
    first = visits.aggregate("min(patient_id)").fetchall()[0][0]
    visits.filter(duckdb.ColumnExpression("patient_id") < first + args.clustering_people).create("sampled_visits")
    sampled = con.table("sampled_visits").aggregate("count(*)").fetchall()[0][0]
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k, algorithm, named, models, run in runs(anon, args.k, args.clustering_k):
            base = policy_arguments({"age": None, **hierarchies}, pseudonym, models, suppression_limit=0.0,
                                    sensitive=["diagnosis"])
            for unit, policy in (("records", Policy(**base)), ("people", Policy(**base, person="patient_id"))):
                common.progress(f"k = {k}, {named}: {algorithm} counting {unit}")
                target = Path(scratch) / f"{len(rows)}.parquet"
                wall, _cpu, (groups, metrics) = common.timed(lambda policy=policy, target=target: run(policy, target))
                below, spread, undiverse, width = exposed(pd.read_parquet(target), k)
                rows.append([k, algorithm, named, unit, f"{groups:,}", f"{metrics['loss']:.4f}",
                             f"{metrics['ncp']:,.0f}", f"{metrics['average-class-size']:.1f}", f"{width:.2f}",
                             f"{below:,}", f"{spread:,}", f"{undiverse:,}", f"{wall:.1f}"])
    table = common.markdown_table(
        ["k", "algorithm", "models", "counting", "groups", "LM", "NCP", "records per class", "age range width",
         "people whose signature < k people share", "people in more than one class",
         f"classes with < {L} diagnoses", "s"], rows)
    report(con, args.output, "Mondrian and clustering when one person has several visits",
           f"Longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27): Mondrian over its 30,162 people's "
           f"136,844 visits, the clustering methods over the first {args.clustering_people:,} people's {sampled:,} "
           f"visits. Quasi-identifiers {', '.join(QUASI)} (age cut on its value, released as a range), nothing "
           f"suppressed; the release's figures computed with pandas from each release.", table)


if __name__ == "__main__":
    main()
