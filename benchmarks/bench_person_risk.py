"""An average re-identification risk threshold when one person has several records: over classes of records, or
over people's signature groups.

    python benchmarks/bench_person_risk.py [--threshold 0.02 0.01 0.005] [--output results/person_risk.md]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 136,844 visits).  Per
threshold t, two optimal full-domain generalizations (Loss, at most 5 % suppressed, ARX's Adult hierarchies for age,
sex, race and marital status, k = 2, ``AverageReidentificationRisk(t)``), the patient's id pseudonymized: one counting
records (the figure ARX bounds: classes / records), one counting people (``Policy(person=...)``: signature groups /
people, the smallest groups cut until it holds).  Then, in pandas, from each release alone: the average and highest
risk of a record (1 / its class's records) and of a person (1 / the people sharing their signature, the suppressed
people's own group included), and the people whose signature nobody else has.
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

from duckanon import AverageReidentificationRisk, KAnonymity  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]
K = 2


def risks(release: pd.DataFrame) -> tuple[float, float, float, float, int]:
    """(a record's average and highest risk, a person's average and highest risk, people alone in their signature)
    of ``release``, every row counted ('*' rows form their class and group, as a recipient sees them)."""
    classes = release[QUASI].astype(str).agg("|".join, axis=1)
    records = classes.map(classes.value_counts())
    signatures = classes.groupby(release["patient_id"]).agg(frozenset)
    people = signatures.map(signatures.value_counts())
    return (float((1 / records).mean()), float(1 / records.min()), float((1 / people).mean()),
            float(1 / people.min()), int((people == 1).sum()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threshold", type=float, nargs="+", default=[0.02, 0.01, 0.005])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "person_risk.md")
    args = parser.parse_args()
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for threshold in args.threshold:
            base = policy_arguments(hierarchies, pseudonym, [KAnonymity(K), AverageReidentificationRisk(threshold)])
            for unit, released in both_ways(anon, base, Path(scratch), f"average risk {threshold:g}"):
                if released is None:
                    rows.append([f"{threshold:g}", unit, "no transformation satisfies the policy", *["–"] * 9])
                    continue
                shown = released.rows
                levels, people = described(released, QUASI)
                record_average, record_highest, person_average, person_highest, alone = risks(shown)
                rows.append([f"{threshold:g}", unit, levels, f"{released.result.best.values['loss']:.4f}",
                             f"{released.release.suppressed:,}", f"{people:,}", f"{record_average:.4f}",
                             f"{record_highest:.3f}", f"{person_average:.4f}", f"{person_highest:.3f}", f"{alone:,}",
                             f"{released.wall:.1f}"])
    table = common.markdown_table(
        ["threshold", "counting", "levels above 0", "loss", "records suppressed", "people suppressed",
         "record: average risk", "record: highest", "person: average risk", "person: highest",
         "people alone in their signature", "s"], rows)
    report(con, args.output, "An average-risk threshold when one person has several visits",
           f"Longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27), k = {K}, quasi-identifiers "
           f"{', '.join(QUASI)}; risks computed with pandas from each release.", table)


if __name__ == "__main__":
    main()
