"""A model of the diagnosis when one person has several records: counting records against counting each person's
value once (entropy l-diversity, or t-closeness with the equal distance).

    python benchmarks/bench_person_values.py [--model entropy-l|t-closeness] [--values 2 3 4 5] [--output FILE]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``: 30,162 people, 136,844 visits, a diagnosis
per visit, more often chronic with age).  Per parameter (l, or t), two optimal full-domain generalizations (Loss, at
most 5 % suppressed, ARX's Adult hierarchies for age, sex, race and marital status, k = 5, the model of the
diagnosis), the patient's id pseudonymized: one counting records, one counting people (``Policy(person=...)``: each
signature shared by 5 people, each person's diagnosis counted once per class, and for t-closeness once in the table,
people of a violating class suppressed whole until none more).  Then, in pandas, from each release alone: the
classes that fail the model counting each person's value once (and the people in them), the classes that fail it
counting records, and the people whose signature fewer than 5 people share.  Results: ``results/person_values_<model>.md``.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

import common
from longitudinal_setup import both_ways, described, loaded, policy_arguments, report

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from duckanon import EntropyLDiversity, KAnonymity, TCloseness  # noqa: E402
from duckanon.datasets.longitudinal import load_adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]
K = 5
MODELS = {  # per model: its parameter's name, the model of a value, its default values, a title
    "entropy-l": ("l", lambda x: EntropyLDiversity("diagnosis", x), [2.0, 3.0, 4.0, 5.0],
                  "Entropy l-diversity of the diagnosis"),
    "t-closeness": ("t", lambda x: TCloseness("diagnosis", x), [0.05, 0.1, 0.15, 0.2],
                    "t-closeness of the diagnosis (equal distance)"),
}


def failing_classes(release: pd.DataFrame, model: str, value: float, by_people: bool) -> tuple[int, int]:
    """(classes that fail the model, people with a record in one), the '*' class left out; ``by_people`` counts each
    person's diagnosis once per class, and for t-closeness once in the table (all of the release's records, the '*'
    ones too, which keep their diagnosis)."""
    starred = (release[QUASI] == "*").all(axis=1)
    shown = release[~starred]
    rows = shown[[*QUASI, "patient_id", "diagnosis"]].drop_duplicates() if by_people else shown
    counts = rows.groupby([*QUASI, "diagnosis"]).size()
    per_class = list(range(len(QUASI)))
    shares = counts / counts.groupby(level=per_class).transform("sum")
    if model == "entropy-l":
        entropy = -(shares * np.log(shares)).groupby(level=per_class).sum()
        failing = entropy[entropy < np.log(value) - 1e-9].index
    else:
        table = release[["patient_id", "diagnosis"]].drop_duplicates() if by_people else release
        q = table["diagnosis"].value_counts(normalize=True)
        p = shares.unstack("diagnosis", fill_value=0.0).reindex(columns=q.index, fill_value=0.0)
        distance = (p - q).abs().sum(axis=1) / 2
        failing = distance[distance > value + 1e-9].index
    people = shown[shown.set_index(QUASI).index.isin(failing)]["patient_id"].nunique()
    return len(failing), int(people)


def signatures_below_k(release: pd.DataFrame) -> int:
    classes = release[QUASI].astype(str).agg("|".join, axis=1)
    signatures = classes.groupby(release["patient_id"]).agg(frozenset)
    return int((signatures.map(signatures.value_counts()) < K).sum())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", choices=sorted(MODELS), default="entropy-l")
    parser.add_argument("--values", type=float, nargs="+", help="the model's parameter (l or t) values")
    parser.add_argument("--output", type=Path)
    args = parser.parse_args()
    parameter, build, defaults, title = MODELS[args.model]
    output = args.output or HERE / "results" / f"person_values_{args.model}.md"
    con, anon, hierarchies, pseudonym = loaded(load_adult_visits, QUASI)
    rows = []
    with tempfile.TemporaryDirectory() as scratch:
        for value in args.values or defaults:
            base = policy_arguments(hierarchies, pseudonym, [KAnonymity(K), build(value)])
            for unit, outcome in both_ways(anon, base, Path(scratch), f"{parameter} = {value:g}"):
                if outcome is None:
                    rows.append([f"{value:g}", unit, "no transformation satisfies the policy", *["–"] * 8])
                    continue
                result, release, released = outcome.result, outcome.release, outcome.rows
                levels, people = described(outcome, QUASI)
                failing_people, in_failing = failing_classes(released, args.model, value, by_people=True)
                failing_records, _ = failing_classes(released, args.model, value, by_people=False)
                rows.append([f"{value:g}", unit, levels, f"{result.best.values['loss']:.4f}", f"{release.suppressed:,}",
                             f"{people:,}", f"{failing_people:,}", f"{in_failing:,}", f"{failing_records:,}",
                             f"{signatures_below_k(released):,}", f"{outcome.wall:.1f}"])
    table = common.markdown_table(
        [parameter, "counting", "levels above 0", "loss", "records suppressed", "people suppressed",
         "classes failing, each person once", "people in them", "classes failing, counting records",
         f"people whose signature < {K} people share", "s"], rows)
    report(con, output, f"{title} when one person has several visits",
           f"Longitudinal Adult (`duckanon.datasets.longitudinal`, seed 27), k = {K}, quasi-identifiers "
           f"{', '.join(QUASI)}; figures computed with pandas from each release.", table)


if __name__ == "__main__":
    main()
