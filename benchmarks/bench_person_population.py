"""k-map counted in a population table when one person has several records: over classes of records, or over the
population's people who share a signature.

    python benchmarks/bench_person_population.py [--k 2 5 10] [--share 0.2] [--output results/person_population.md]

The population is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 136,844 visits); the
data is a sample of its people (``--share``, by a hash of the patient's id), each with all their visits.  Per k, two
optimal full-domain generalizations of the sample (Loss, at most 5 % suppressed, ARX's Adult hierarchies for age,
sex, race and marital status, ``KMap(k, population=...)``), the patient's id pseudonymized: one counting records (a
class needs k population records), one counting people (``Policy(person=...)``: a signature needs k population people
who have it).  Then, in pandas, from each release and the population generalized alike: the classes with fewer than
k population records, and the released people whose signature fewer than k population people have (the suppressed
people's group, all '*', stands for everyone).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

import common
from longitudinal_setup import both_ways, described, loaded, policy_arguments, report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from duckanon import KAnonymity, KMap  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]


def generalized(frame: pd.DataFrame, hierarchies: dict, levels: dict[str, int]) -> pd.DataFrame:
    """``frame``'s quasi-identifiers at ``levels``, by the hierarchies' own tables."""
    out = frame.copy()
    for attribute, hierarchy in hierarchies.items():
        mapping = {str(row[0]): row[levels[attribute]] for row in hierarchy.rows}
        out[attribute] = frame[attribute].astype(str).map(mapping)
    return out


def signatures(frame: pd.DataFrame) -> pd.Series:
    """Per patient, the set of their records' classes."""
    classes = frame[QUASI].astype(str).agg("|".join, axis=1)
    return classes.groupby(frame["patient_id"]).agg(frozenset)


def population_shortfalls(release: pd.DataFrame, population: pd.DataFrame, hierarchies: dict,
                          levels: dict[str, int], k: int) -> tuple[int, int]:
    """(classes of the release with fewer than k population records, released people whose signature fewer than k
    population people have), the '*' rows left out (they stand for everyone)."""
    shown = release[~(release[QUASI] == "*").all(axis=1)]
    everyone = generalized(population, hierarchies, levels)
    records = everyone.groupby(QUASI).size()
    classes = shown.groupby(QUASI).size()
    thin_classes = int((records.reindex(classes.index, fill_value=0) < k).sum())
    people_with = signatures(everyone).value_counts()
    released = signatures(shown)
    thin_people = int((released.map(people_with).fillna(0) < k).sum())
    return thin_classes, thin_people


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--share", type=float, default=0.2, help="the sample's share of the population's people")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "person_population.md")
    args = parser.parse_args()
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI)
    con.execute("CREATE TABLE sampled_visits AS SELECT * FROM adult_visits WHERE hash(patient_id) % 1000 < ?",
                [round(args.share * 1000)])
    sample_records, sample_people = con.execute(
        "SELECT count(*), count(DISTINCT patient_id) FROM sampled_visits").fetchone()
    population = con.execute("SELECT * FROM adult_visits").df()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k in args.k:
            base = policy_arguments(hierarchies, pseudonym, [KAnonymity(1), KMap(k, population="adult_visits")])
            for unit, outcome in both_ways(anon, base, Path(scratch), f"k = {k}", source="sampled_visits"):
                if outcome is None:
                    rows.append([f"{k}", unit, "no transformation satisfies the policy", *["–"] * 6])
                    continue
                levels, people = described(outcome, QUASI)
                thin_classes, thin_people = population_shortfalls(outcome.rows, population, hierarchies,
                                                                  outcome.result.levels, k)
                rows.append([f"{k}", unit, levels, f"{outcome.result.best.values['loss']:.4f}",
                             f"{outcome.release.suppressed:,}", f"{people:,}", f"{thin_classes:,}",
                             f"{thin_people:,}", f"{outcome.wall:.1f}"])
    table = common.markdown_table(
        ["k", "counting", "levels above 0", "loss", "records suppressed", "people suppressed",
         "classes with < k population records", "people whose signature < k population people have", "s"], rows)
    report(con, args.output, "k-map against a population when one person has several visits",
           f"Population: longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27), 30,162 people; sample: "
           f"{sample_people:,} of its people ({sample_records:,} visits), quasi-identifiers {', '.join(QUASI)}; "
           f"figures computed with pandas from each release and the population.", table)


if __name__ == "__main__":
    main()
