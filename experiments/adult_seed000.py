"""Seed 000 (Gu & Dong 2022, "MI Loss evaluation model for k-anonymity in PPDM", Computer Engineering 48(4)
143–147): its eleven Adult quasi-identifiers, their generalization hierarchies, and the paper's reference figures.

The paper anonymizes with ARX but does not print its hierarchies; these are ours.  Numeric attributes get a few
nested interval levels, because the experiment searches the whole lattice of level vectors (its size is the product
of the level counts); categorical ones use the ARX hierarchies bundled with duckanon, and ``relationship`` (which has
none) gets a three-level one.
"""

from __future__ import annotations

import duckdb
import pandas as pd
from sqlglot import exp

from duckanon.engine import as_engine
from duckanon import Hierarchy
from duckanon.sqlgen import build as sb
from duckanon.datasets import adult_hierarchy_dir
from duckanon.hierarchy.hierarchy import TOP

#: Table 1 of the paper, in its order, with the Adult column names ("country" is native-country).
SEED000_QUASI_IDENTIFIERS: tuple[str, ...] = (
    "age", "education-num", "capital-gain", "hours-per-week", "race", "relationship", "workclass",
    "native-country", "marital-status", "occupation", "sex",
)
LABEL = "salary-class"

#: Table 2 of the paper: each quasi-identifier's utility weight under Loss (uniform), Entropy Loss and MI Loss.
#: Both computed columns come from all 32,561 records, missing values counting as a value.  The MI Loss column is
#: not formula 4's normalized MI(Y, X_i) but normalized MI(Y, X_i) / H(X_i), the gain ratio (within 0.002; see
#: tests/test_experiment_parts.py).
PAPER_WEIGHTS = pd.DataFrame(
    [
        ("age", 1 / 11, 0.2294, 0.0355),
        ("education-num", 1 / 11, 0.1183, 0.0683),
        ("capital-gain", 1 / 11, 0.0350, 0.2976),
        ("hours-per-week", 1 / 11, 0.1405, 0.0375),
        ("race", 1 / 11, 0.0322, 0.0225),
        ("relationship", 1 / 11, 0.0869, 0.1643),
        ("workclass", 1 / 11, 0.0665, 0.0281),
        ("native-country", 1 / 11, 0.0381, 0.0197),
        ("marital-status", 1 / 11, 0.0740, 0.1828),
        ("occupation", 1 / 11, 0.1419, 0.0565),
        ("sex", 1 / 11, 0.0370, 0.0870),
    ],
    columns=["attribute", "loss", "entropy_loss", "mi_loss"],
)

PAPER_ACCURACY_NOTE = (
    "Gu & Dong (section 4.2, Fig. 3) train a classifier on each model's optimal k-anonymous table (k = 2, 3, 5, 10) "
    "and score it by 3-fold cross-validation. The text says linear regression (线性回归), but predicting whether "
    "salary exceeds 50K is classification, so it is read here as logistic regression. On the original data "
    "(plotted as k = 0) the accuracy is 89.23%, the upper bound for every anonymized table; for every k the table "
    "chosen with MI Loss weights classifies 0.73%-3.00% better than those chosen with Loss or Entropy Loss, and the "
    "lead grows with k."
)

# Nested interval levels, finest first; every hierarchy ends in "*".
AGE_WIDTHS = [5, 10, 20]  # ARX's Adult age hierarchy; the paper's own example generalizes 17 to (15,20]
# Counted from 1, so the intervals split at 9 (HS-grad) and 13 (Bachelors): schooling, high school to associate
# degrees, university.
EDUCATION_NUM_WIDTHS = [4, 8]
EDUCATION_NUM_ORIGIN = 1
# 92% of records have no capital gain and the rest run to 99999: 0 stays apart on every level below "*".
CAPITAL_GAIN_CUTS = [[0, 1, 5000, 10000, 100000], [0, 1, 100000]]
HOURS_PER_WEEK_WIDTHS = [10, 20]

RELATIONSHIP_PARENTS = {
    "Husband": ["spouse", TOP],
    "Wife": ["spouse", TOP],
    "Own-child": ["relative", TOP],
    "Other-relative": ["relative", TOP],
    "Not-in-family": ["no family", TOP],
    "Unmarried": ["no family", TOP],
}
ARX_HIERARCHIES = ("race", "workclass", "native-country", "marital-status", "occupation", "sex")


def _distinct_values(con: duckdb.DuckDBPyConnection, table: str, column: str) -> list:
    query = exp.select(sb.col(column)).distinct().from_(sb.table(table)).where(sb.col(column).is_(exp.null()).not_())
    return [value for (value,) in as_engine(con).rows(query)]


def seed000_hierarchies(con: duckdb.DuckDBPyConnection, table: str = "adult") -> dict[str, Hierarchy]:
    """A hierarchy for each of the paper's quasi-identifiers, in Table 1's order; the numeric ones are built over the
    values ``table`` holds."""
    def values(column: str) -> list:
        return _distinct_values(con, table, column)

    built = {
        "age": Hierarchy.intervals(values("age"), widths=AGE_WIDTHS, name="age"),
        "education-num": Hierarchy.intervals(values("education-num"), widths=EDUCATION_NUM_WIDTHS,
                                             origin=EDUCATION_NUM_ORIGIN, name="education-num"),
        "capital-gain": Hierarchy.intervals(values("capital-gain"), cuts=CAPITAL_GAIN_CUTS, name="capital-gain"),
        "hours-per-week": Hierarchy.intervals(values("hours-per-week"), widths=HOURS_PER_WEEK_WIDTHS,
                                              name="hours-per-week"),
        "relationship": Hierarchy.from_mapping(RELATIONSHIP_PARENTS, name="relationship"),
    }
    for name in ARX_HIERARCHIES:
        built[name] = Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{name}.csv", name=name)
    return {name: built[name] for name in SEED000_QUASI_IDENTIFIERS}
