"""ARX's profitability with an attack when one person has several records: pricing classes of records, or pricing
people's signature groups.

    python benchmarks/bench_person_profitability.py [--gain 100 300] [--output results/person_profitability.md]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 136,844 visits).  Per
adversary gain G (cost C = 10, publisher's loss L = 1,000 per re-identification and benefit B = 1,200 per record), two
optimal full-domain generalizations (Loss, at most 5 % suppressed, dropped, ARX's Adult hierarchies for age, sex, race
and marital status, k = 2, ``ProsecutorProfitability``), the patient's id pseudonymized: one counting records (a class
of n records is attacked when G / n − C > 0), one counting people (a signature group of n people, priced by its
costliest class).  Then, in pandas, from each release alone: the people on whom an attack pays (fewer than G / C people
share their signature), the records in classes on which it pays (fewer than G / C records), and the people alone in
their signature.
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

from duckanon import KAnonymity, ProsecutorProfitability  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]
K, COST, LOSS, BENEFIT = 2, 10.0, 1000.0, 1200.0


def attacked(release: pd.DataFrame, gain: float) -> tuple[int, int, int]:
    """(people on whom an attack pays, records in classes on which one pays, people alone in their signature)."""
    classes = release[QUASI].astype(str).agg("|".join, axis=1)
    records = classes.map(classes.value_counts())
    signatures = classes.groupby(release["patient_id"]).agg(frozenset)
    people = signatures.map(signatures.value_counts())
    return (int((gain / people - COST > 0).sum()), int((gain / records - COST > 0).sum()), int((people == 1).sum()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--gain", type=float, nargs="+", default=[100.0, 300.0])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "person_profitability.md")
    args = parser.parse_args()
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for gain in args.gain:
            model = ProsecutorProfitability(gain, COST, LOSS, BENEFIT)
            base = policy_arguments(hierarchies, pseudonym, [KAnonymity(K), model], suppression="drop")
            for unit, released in both_ways(anon, base, Path(scratch), f"gain {gain:g}"):
                if released is None:
                    rows.append([f"{gain:g}", unit, "no transformation satisfies the policy", *["–"] * 6])
                    continue
                levels, _ = described(released, QUASI)
                people_attacked, records_attacked, alone = attacked(released.rows, gain)
                rows.append([f"{gain:g}", unit, levels, f"{released.result.best.values['loss']:.4f}",
                             f"{released.release.suppressed:,}", f"{people_attacked:,}", f"{records_attacked:,}",
                             f"{alone:,}", f"{released.wall:.1f}"])
    table = common.markdown_table(
        ["G", "counting", "levels above 0", "loss", "records dropped", "people on whom an attack pays",
         "records in classes on which one pays", "people alone in their signature", "s"], rows)
    report(con, args.output, "Profitability with an attack when one person has several visits",
           f"Longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27), k = {K}, C = {COST:g}, L = {LOSS:g}, "
           f"B = {BENEFIT:g}, quasi-identifiers {', '.join(QUASI)}; figures computed with pandas from each release.",
           table)


if __name__ == "__main__":
    main()
