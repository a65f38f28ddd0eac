"""l-diversity when one person has several records: counting records against counting each person's value once.

    python benchmarks/bench_person_diversity.py [--l 1.5 2 3] [--output results/person_diversity.md]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 136,844 visits, a diagnosis
per visit, more often chronic with age).  Per l, two optimal full-domain generalizations (Loss, at most 5 %
suppressed, ARX's Adult hierarchies for age, sex, race and marital status, k = 5, entropy l-diversity of the
diagnosis), the patient's id pseudonymized: one counting records, one counting people (``Policy(person=...)``: each
signature shared by 5 people, each person's diagnosis counted once per class, people of a violating class suppressed
whole until none more).  Then, in pandas, from each release alone: the classes whose diagnoses, each person's counted
once, fall short of l (and the people in them), the classes short of l counting records, and the people whose
signature fewer than 5 people share.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import common
from longitudinal_setup import both_ways, loaded

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from duckanon import EntropyLDiversity, KAnonymity  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]
K = 5


def short_classes(release: pd.DataFrame, l: float, by_people: bool) -> tuple[int, int]:  # noqa: E741
    """(classes whose diagnosis entropy is below ln l, people with a record in one), the '*' class left out;
    ``by_people`` counts each person's diagnosis once per class."""
    shown = release[~(release[QUASI] == "*").all(axis=1)]
    rows = shown[[*QUASI, "patient_id", "diagnosis"]].drop_duplicates() if by_people else shown
    counts = rows.groupby([*QUASI, "diagnosis"]).size()
    shares = counts / counts.groupby(level=list(range(len(QUASI)))).transform("sum")
    entropy = -(shares * np.log(shares)).groupby(level=list(range(len(QUASI)))).sum()
    short = entropy[entropy < np.log(l) - 1e-9].index
    people = shown[shown.set_index(QUASI).index.isin(short)]["patient_id"].nunique()
    return len(short), int(people)


def signatures_below_k(release: pd.DataFrame) -> int:
    classes = release[QUASI].astype(str).agg("|".join, axis=1)
    signatures = classes.groupby(release["patient_id"]).agg(frozenset)
    return int((signatures.map(signatures.value_counts()) < K).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--l", type=float, nargs="+", default=[2.0, 3.0, 4.0, 5.0])
    parser.add_argument("--output", type=Path, default=HERE / "results" / "person_diversity.md")
    args = parser.parse_args()
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for l in args.l:  # noqa: E741
            base = {"quasi_identifiers": hierarchies, "models": [KAnonymity(K), EntropyLDiversity("diagnosis", l)],
                    "pseudonymize": {"patient_id": pseudonym}, "others": "drop",
                    "suppression_limit": 0.05}
            for unit, outcome in both_ways(anon, base, Path(scratch), f"l = {l}"):
                if outcome is None:
                    rows.append([f"{l:g}", unit, "no transformation satisfies the policy", *["–"] * 8])
                    continue
                wall, result, release, released = outcome.wall, outcome.result, outcome.release, outcome.rows
                levels = ", ".join(f"{a}={v}" for a, v in result.levels.items() if v) or "none"
                people = released.loc[(released[QUASI] == "*").all(axis=1), "patient_id"].nunique()
                short_people, in_short = short_classes(released, l, by_people=True)
                short_records, _ = short_classes(released, l, by_people=False)
                rows.append([f"{l:g}", unit, levels, f"{result.best.values['loss']:.4f}", f"{release.suppressed:,}",
                             f"{people:,}", f"{short_people:,}", f"{in_short:,}", f"{short_records:,}",
                             f"{signatures_below_k(released):,}", f"{wall:.1f}"])
    table = common.markdown_table(
        ["l", "counting", "levels above 0", "loss", "records suppressed", "people suppressed",
         "classes short of l, each person once", "people in them", "classes short of l, counting records",
         f"people whose signature < {K} people share", "s"], rows)
    text = (f"# Entropy l-diversity of the diagnosis when one person has several visits\n\n"
            f"Longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27), k = {K}, quasi-identifiers "
            f"{', '.join(QUASI)}; figures computed with pandas from each release.\n\n{table}\n\n"
            f"{common.facts_markdown(common.machine_facts(con))}\n")
    print(text)
    common.write_text(args.output, text)


if __name__ == "__main__":
    main()
