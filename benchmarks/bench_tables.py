"""People exposed when a person table and a visits table are released each on its own, and what a release of both
together (``duckanon.Tables``) costs to protect them.

    python benchmarks/bench_tables.py [--k 2 5 10] [--output results/tables.md]

The data is Adult made longitudinal and split in two (``duckanon.datasets.longitudinal.adult_patients_and_visits``):
30,162 patients (sex, race, marital status, education: what stays) and 136,844 visits (the age at the visit: what
changes), joined by ``patient_id``, which every release pseudonymizes under one key, so that a recipient joins the
tables.  Per k, three releases (optimal Loss, ARX's Adult hierarchies, at most 5 % suppressed):

- **each table counting records**: the patients and the visits anonymized each on its own, each with k-anonymity over
  its records (what a tool without a person column does);
- **each table counting people**: the same, the visits under ``Policy(person=...)`` (each signature of visit classes
  shared by k people), the patients counting records (one record per person);
- **both tables together**: ``Tables`` — a signature is the set of a person's (table, class) pairs;
- **both together, as Parquet**: the same release written as a folder of one Parquet file per table;
- **both together, diagnosis 3-diverse**: the same, with distinct 3-diversity of the visits' diagnosis over people
  (each person's diagnosis once per visit class; the patients table, which lacks it, not judged).

Then, in pandas, from the released tables alone, joined by the pseudonym: people whose signature over both tables is
shared by fewer than k people, and by nobody else; and the utility, per released cell of each quasi-identifier, by
Iyengar's loss (the leaves its label covers less one, over the hierarchy's leaves less one; '*' costs 1), averaged
over the cells of both tables, with the people and records suppressed.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import tempfile
from pathlib import Path

import duckdb
import pandas as pd

import common
from longitudinal_setup import KEY_VARIABLE, loaded

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import duckanon  # noqa: E402
from duckanon import DistinctLDiversity, Hierarchy, KAnonymity, Policy, Pseudonymize, Tables  # noqa: E402
from duckanon.datasets import adult_hierarchy_dir  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_patients_and_visits  # noqa: E402

PERSON_QUASI = ["sex", "race", "marital-status", "education"]
VISIT_QUASI = ["age"]
HIERARCHIES = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in PERSON_QUASI + VISIT_QUASI}


def policy(quasi: list[str], k: int, **changes) -> Policy:
    return Policy(quasi_identifiers={q: HIERARCHIES[q] for q in quasi}, models=[KAnonymity(k)],
                  pseudonymize={"patient_id": Pseudonymize(f"env:{KEY_VARIABLE}")}, others="drop",
                  suppression_limit=0.05, **changes)


def exposure(patients: pd.DataFrame, visits: pd.DataFrame, k: int) -> tuple[int, int]:
    """(people whose signature over both tables fewer than k people share, people whose signature is unique), from
    the released tables joined by the pseudonym."""
    pairs = pd.concat([
        pd.DataFrame({"person": patients["patient_id"],
                      "pair": "patients|" + patients[PERSON_QUASI].astype(str).agg("|".join, axis=1)}),
        pd.DataFrame({"person": visits["patient_id"],
                      "pair": "visits|" + visits[VISIT_QUASI].astype(str).agg("|".join, axis=1)})]).drop_duplicates()
    signatures = pairs.sort_values("pair").groupby("person")["pair"].agg(tuple)
    sharing = signatures.map(signatures.value_counts())
    return int((sharing < k).sum()), int((sharing == 1).sum())


def cell_loss(released: pd.DataFrame, attribute: str, level: int) -> pd.Series:
    """Per released cell of ``attribute`` (at ``level`` of its hierarchy), Iyengar's loss; '*' costs 1."""
    rows = HIERARCHIES[attribute].rows
    covered = pd.Series([row[level] for row in rows]).value_counts()
    loss = (covered - 1) / (len(rows) - 1)
    return released[attribute].map(loss).where(released[attribute] != "*", 1.0).astype(float)


def utility(patients: pd.DataFrame, visits: pd.DataFrame, levels: dict[str, dict[str, int]]) -> float:
    """The mean cell loss over the quasi-identifier cells of both released tables."""
    cells = [cell_loss(patients, q, levels["patients"][q]) for q in PERSON_QUASI]
    cells += [cell_loss(visits, q, levels["visits"][q]) for q in VISIT_QUASI]
    return float(pd.concat(cells).mean())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--k", type=int, nargs="+", default=[2, 5, 10])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "tables.md")
    args = parser.parse_args()
    con, anon, _, _ = loaded(load_adult_patients_and_visits, [])
    sizes = {t: con.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("patients", "visits")}
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for k in args.k:
            for how in ("each table counting records", "each table counting people", *TOGETHER):
                common.progress(f"k = {k}: {how}")
                folder = Path(scratch) / f"k{k}-{how.replace(' ', '-')}"
                folder.mkdir()
                wall, _cpu, (patients, visits, levels, suppressed) = common.timed(
                    lambda how=how, folder=folder, k=k: release(anon, how, folder, k))
                below, unique = exposure(patients, visits, k)
                shown = {t: ", ".join(f"{a}={v}" for a, v in levels[t].items() if v) or "none" for t in levels}
                rows.append([k, how, shown["patients"], shown["visits"], f"{utility(patients, visits, levels):.4f}",
                             f"{suppressed[0]:,}", f"{suppressed[1]:,}", f"{below:,}", f"{unique:,}", f"{wall:.1f}"])
    table = common.markdown_table(
        ["k", "released", "patients: levels above 0", "visits: levels above 0", "mean cell loss",
         "people suppressed", "visit records suppressed", "people whose signature < k people share",
         "people with a unique signature", "s"], rows)
    text = (f"# Releasing a person table and a visits table: each on its own, or together\n\n"
            f"Longitudinal Adult in two tables (`duckanon.datasets.longitudinal`, seed 27): {sizes['patients']:,} "
            f"patients, {sizes['visits']:,} visits. Exposure and loss computed with pandas from the released tables "
            f"joined by the pseudonym.\n\n{table}\n\n{common.facts_markdown(common.machine_facts(con))}\n")
    print(text)
    common.write_text(args.output, text)


# Each way of releasing both tables together: its file, and what its policy adds.
TOGETHER = {"both tables together": ("both.duckdb", {}),
            "both together, as Parquet": ("both.parquet", {}),
            "both together, diagnosis 3-diverse": ("both.duckdb", {"sensitive": ["diagnosis"]})}


def release(anon, how: str, folder: Path, k: int):
    """The released patients and visits of one way of releasing them, each table's levels, and the people and visit
    records suppressed."""
    if how in TOGETHER:
        quasi = PERSON_QUASI + VISIT_QUASI
        file, changes = TOGETHER[how]
        declared = policy(quasi, k, **changes)
        if changes:
            declared = dataclasses.replace(declared, models=[*declared.models, DistinctLDiversity("diagnosis", 3)])
        _, released = anon.anonymize(Tables({"patients": "patients", "visits": "visits"}, key="patient_id"),
                                     declared, folder / file)
        if released.path.is_dir():
            patients, visits = (pd.read_parquet(released.path / f"{t}.parquet") for t in ("patients", "visits"))
        else:
            with duckdb.connect(str(released.path), read_only=True) as con:
                patients, visits = (con.execute(f"SELECT * FROM {t}").df() for t in ("patients", "visits"))
        levels = duckanon.read_release_info(released.path)["transformation"]["full-domain generalization"]
        starred = visits[(visits[VISIT_QUASI] == "*").all(axis=1)]
        return (patients, visits, {"patients": {q: levels[q] for q in PERSON_QUASI},
                                   "visits": {q: levels[q] for q in VISIT_QUASI}},
                (released.check.violating_people, len(starred)))
    person = {"person": "patient_id"} if how == "each table counting people" else {}
    found_patients, patients_release = anon.anonymize("patients", policy(PERSON_QUASI, k), folder / "patients.parquet")
    found_visits, visits_release = anon.anonymize("visits", policy(VISIT_QUASI, k, **person), folder / "visits.parquet")
    patients, visits = pd.read_parquet(patients_release.path), pd.read_parquet(visits_release.path)
    starred = visits[(visits[VISIT_QUASI] == "*").all(axis=1)]
    hidden = patients[(patients[PERSON_QUASI] == "*").all(axis=1)]["patient_id"]
    people = len(set(hidden) | set(starred["patient_id"]))  # starred in either table
    return (patients, visits, {"patients": found_patients.levels, "visits": found_visits.levels},
            (people, len(starred)))


if __name__ == "__main__":
    main()
