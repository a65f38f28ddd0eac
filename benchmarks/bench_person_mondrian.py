"""Mondrian when one person has several records: partitioning records against partitioning people.

    python benchmarks/bench_person_mondrian.py [--k 5 10 25] [--output FILE]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 136,844 visits, age at the
visit, a diagnosis per visit).  Per k, strict and relaxed Mondrian over age (cut on its value) and ARX's Adult
hierarchies of sex, race and marital status, k-anonymity alone and with distinct 3-diversity of the diagnosis, the
patient's id pseudonymized: once counting records, once counting people (``Policy(person=...)``: each person a point,
the cuts part people, each partition's class holds k people and each person's diagnosis once).  Then, in pandas, from
each release alone: the people whose signature (the set of classes their visits fall in) fewer than k people share,
the people whose visits fall in more than one class, and the classes whose distinct people are fewer than l in
diagnoses; beside Mondrian's LM and NCP of the release, the mean cell loss of each attribute as the other benchmarks
measure it is not defined for ranges, so LM stands for it.  Results: ``results/person_mondrian.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

import common
from longitudinal_setup import loaded, policy_arguments, report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from duckanon import DistinctLDiversity, KAnonymity, Policy  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]
L = 3


def exposed(release: pd.DataFrame, k: int) -> tuple[int, int, int]:
    """(people whose signature fewer than k people share, people in more than one class, classes with fewer than L
    distinct diagnoses), by pandas from the release."""
    classes = release[QUASI].astype(str).agg("|".join, axis=1)
    signatures = classes.groupby(release["patient_id"]).agg(frozenset)
    below = int((signatures.map(signatures.value_counts()) < k).sum())
    spread = int((classes.groupby(release["patient_id"]).nunique() > 1).sum())
    diagnoses = release.groupby(classes)["diagnosis"].nunique()
    return below, spread, int((diagnoses < L).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[5, 10, 25])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "person_mondrian.md")
    args = parser.parse_args()
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI[1:])
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k in args.k:
            for models, named in (([KAnonymity(k)], "k"), ([KAnonymity(k), DistinctLDiversity("diagnosis", L)],
                                                              f"k, distinct {L}-diverse diagnosis")):
                base = policy_arguments({"age": None, **hierarchies}, pseudonym, models, suppression_limit=0.0,
                                        sensitive=["diagnosis"])
                for relaxed in (False, True):
                    for unit, policy in (("records", Policy(**base)), ("people", Policy(**base, person="patient_id"))):
                        kind = "relaxed" if relaxed else "strict"
                        common.progress(f"k = {k}, {named}: {kind} Mondrian counting {unit}")
                        target = Path(scratch) / f"{k}-{len(models)}-{kind}-{unit}.parquet"
                        wall, _cpu, result = common.timed(lambda policy=policy, target=target, relaxed=relaxed: (
                            anon.mondrian("adult_visits", policy, target, relaxed=relaxed)))
                        below, spread, undiverse = exposed(pd.read_parquet(target), k)
                        metrics = result.metrics
                        rows.append([k, named, kind, unit, f"{result.partitioning.partitions:,}",
                                     f"{metrics['loss']:.4f}", f"{metrics['ncp']:,.0f}",
                                     f"{metrics['average-class-size']:.1f}", f"{below:,}", f"{spread:,}",
                                     f"{undiverse:,}", f"{wall:.1f}"])
    table = common.markdown_table(
        ["k", "models", "Mondrian", "counting", "partitions", "LM", "NCP", "records per class",
         "people whose signature < k people share", "people in more than one class",
         f"classes with < {L} diagnoses", "s"], rows)
    report(con, args.output, "Mondrian when one person has several visits",
           f"Longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27), quasi-identifiers {', '.join(QUASI)} "
           f"(age cut on its value), nothing suppressed; the release's figures computed with pandas from each "
           f"release.", table)


if __name__ == "__main__":
    main()
