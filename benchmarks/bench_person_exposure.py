"""How exposed people are in a release that counts records, when one person has several records.

    python benchmarks/bench_person_exposure.py [--k 2 5 10] [--output results/person_exposure.md]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 1–50 visits each, age at the
visit).  Per k, two optimal full-domain generalizations (Loss, at most 5 % suppressed, ARX's Adult hierarchies for
seven quasi-identifiers) are published with the person's id pseudonymized, as a longitudinal release keeps it so that
a person's visits can be followed: one counting records (k-anonymity over records, the limit 5 % of the records), one
counting people (``Policy(person=...)``: each signature shared by k people, the limit 5 % of the people).  Then, in
pandas, from each release alone:

- people with a record in a class of fewer than k distinct people (a class of k records may hold one person's
  visits);
- people whose signature, the set of classes their records fall in, is shared by fewer than k people, and by nobody
  else (unique): a person whose visits sit in classes {A, B} is singled out when nobody else has both.

The same figures by ``Anonymizer.person_exposure`` (SQL) are held equal to these.

Suppressed records (every quasi-identifier ``*``) count as one class, as the release shows them.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import pandas as pd

import common
from longitudinal_setup import both_ways, loaded, policy_arguments, report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from duckanon import KAnonymity  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status", "education", "native-country", "workclass"]


def exposure(release: pd.DataFrame, k: int) -> dict[str, int]:
    """People exposed in ``release`` (one row per record, ``patient_id`` a pseudonym), computed with pandas."""
    classes = release[QUASI].astype(str).agg("|".join, axis=1)
    records = pd.DataFrame({"person": release["patient_id"], "class": classes})
    distinct = records.drop_duplicates()
    people_per_class = distinct.groupby("class")["person"].nunique()
    thin = set(people_per_class[people_per_class < k].index)
    in_thin = distinct[distinct["class"].isin(thin)]["person"].nunique()
    signatures = distinct.sort_values("class").groupby("person")["class"].agg(tuple)
    sharing = signatures.map(signatures.value_counts())
    return {"records": len(release), "people": int(signatures.size),
            "people_in_thin_classes": int(in_thin),
            "people_signature_below_k": int((sharing < k).sum()),
            "people_signature_unique": int((sharing == 1).sum())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "person_exposure.md")
    args = parser.parse_args()
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI)
    source = con.execute("SELECT count(*), count(DISTINCT patient_id) FROM adult_visits").fetchone()
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k in args.k:
            base = policy_arguments(hierarchies, pseudonym, [KAnonymity(k)], sensitive=["diagnosis"])
            for unit, outcome in both_ways(anon, base, Path(scratch), f"k = {k}"):
                wall, result, release, released = outcome.wall, outcome.result, outcome.release, outcome.rows
                figures = exposure(released, k)
                # duckanon's SQL, held to pandas's
                measured = anon.person_exposure(outcome.path, QUASI, "patient_id", k)
                assert (measured.records, measured.people, measured.people_in_small_classes, measured.people_below_k,
                        measured.unique_people) == tuple(figures.values()), (measured, figures)
                levels = ", ".join(f"{a}={level}" for a, level in zip(result.attributes, result.best.node) if level)
                people = (release.check.violating_people if unit == "people"
                          else released.loc[(released[QUASI] == "*").all(axis=1), "patient_id"].nunique())
                rows.append([k, unit, levels, f"{result.best.values['loss']:.4f}", f"{release.suppressed:,}",
                             f"{people:,}", f"{figures['people_in_thin_classes']:,}",
                             f"{figures['people_signature_below_k']:,}", f"{figures['people_signature_unique']:,}",
                             f"{result.checks:,}", f"{wall:.1f}"])
    table = common.markdown_table(
        ["k", "counting", "levels above 0", "loss", "records suppressed", "people suppressed",
         "people in a class of < k people", "people whose signature < k people share", "people with a unique signature",
         "nodes checked", "s"], rows)
    report(con, args.output, "People exposed by a release that counts records",
           f"Longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27): {source[0]:,} visits of {source[1]:,} "
           f"people.", table)


if __name__ == "__main__":
    main()
