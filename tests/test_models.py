"""Privacy models: hand-computed cases, an independent pandas computation on Adult, property tests against a plain
Python reference, parameter validation, and portability of the generated SQL.

Conventions the references share with duckanon (and that the tests pin down):
* NULL is a sensitive value of its own (distinct, entropy, recursive, α-k, p-sensitive, equal distance);
* "exactly at the bound passes": entropy ≥ ln l and EMD ≤ t are checked with a 1e-9 tolerance, shares ≤ α as
  IEEE doubles (so a share of 1/3 meets α = 1/3);
* recursive (c,l): a class passes when r1 < c·(r_l + … + r_m), strictly, with c as the decimal the user wrote;
* t-closeness compares with the distribution of the whole input; the hierarchical distance puts NULL where the
  hierarchy's NULL row says, else right under the root; the ordered distance is only tested without NULL (anon.check
  refuses NULL for it);
* (α,l)-k checked directly (without anon.check's coverage check) pools values missing from the level table, NULL
  included, into one level of their own.
"""

from __future__ import annotations

import csv
import itertools
import math
from collections import Counter, defaultdict
from fractions import Fraction

import duckdb
import numpy as np
import pandas as pd
import pytest
import sqlglot
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import (
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    BasicBetaLikeness,
    DeltaDisclosurePrivacy,
    DistinctLDiversity,
    EnhancedBetaLikeness,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    KMap,
    PolicyError,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
    datasets,
)
from duckanon.engine import as_engine
from duckanon.privacy import checks
from duckanon.privacy.classes import Classes
from duckanon.sqlgen import build as sb

TOL = 1e-9


def verdicts(con, classes, models):
    """{class key tuple: (size, [violated per model])} straight from class_verdicts."""
    rows = as_engine(con).rows(checks.class_verdicts(classes, models))
    width = len(classes.keys)
    return {row[:width]: (row[width], list(row[width + 1:width + 1 + len(models)])) for row in rows}


def emds(con, model, classes):
    """Per-class EMD of a t-closeness model (white box: the distance query its verdicts are built on)."""
    query = {"equal": model._equal, "ordered": model._ordered, "hierarchical": model._hierarchical}[model.distance]
    return {row[:-1]: row[-1] for row in as_engine(con).rows(query(classes))}


def frame_classes(con, frame, keys, weight=None, name="t"):
    con.register(name, frame)
    return Classes.of(sb.table(name), keys, weight)


# =============================================================================================== hand-computed


def test_k_anonymity_counts_weights(con):
    # Rows carry record counts: class a = 3 + 1 records, class b = 2 records.
    frame = pd.DataFrame({"q": ["a", "a", "b"], "n": [3, 1, 2]})
    got = verdicts(con, frame_classes(con, frame, ["q"], weight="n"), [KAnonymity(2), KAnonymity(3), KAnonymity(5)])
    assert got == {("a",): (4, [False, False, True]), ("b",): (2, [False, True, True])}


def test_distinct_l_diversity_counts_null_as_a_value(con):
    frame = pd.DataFrame({"q": [1, 1, 2, 2, 3], "s": ["x", None, "x", "x", None]})
    got = verdicts(con, frame_classes(con, frame, ["q"]), [DistinctLDiversity("s", 2), DistinctLDiversity("s", 1)])
    assert {k: v[1] for k, v in got.items()} == {(1,): [False, False], (2,): [True, False], (3,): [True, False]}


def test_entropy_l_diversity_by_hand(con):
    # Class 1 counts (2, 1, 1): H = -(1/2 ln 1/2 + 2 · 1/4 ln 1/4) = 1.5 ln 2 = 1.0397 = ln(2^1.5) = ln 2.828.
    # Class 2 counts (3, 1):    H = -(3/4 ln 3/4 + 1/4 ln 1/4) = 0.5623 = ln 1.755.
    # Class 3 counts (1, 1):    H = ln 2 (with a NULL as one of the values).
    frame = pd.DataFrame({"q": [1, 1, 1, 1, 2, 2, 2, 2, 3, 3],
                          "s": ["x", "x", "y", "z", "x", "x", "x", "y", "x", None]})
    models = [EntropyLDiversity("s", 2 ** 1.5), EntropyLDiversity("s", 2.83), EntropyLDiversity("s", 1.75),
              EntropyLDiversity("s", 1.76), EntropyLDiversity("s", 2)]
    got = {k: v[1] for k, v in verdicts(con, frame_classes(con, frame, ["q"]), models).items()}
    assert got == {(1,): [False, True, False, False, False],  # exactly ln 2.828 passes, ln 2.83 fails
                   (2,): [True, True, False, True, True],     # ln 1.75 = 0.5596 < 0.5623 < ln 1.76 = 0.5653
                   (3,): [True, True, False, False, False]}   # exactly ln 2 passes


def test_recursive_cl_diversity_by_hand(con):
    # One class, counts r = (3, 2, 1).
    # (2,2): 3 < 2·(2+1) = 6 passes   (1,2): 3 < 1·3 fails (strict)   (3,3): 3 < 3·1 fails   (3.5,3): 3 < 3.5 passes
    # (0.5,2): 3 < 1.5 fails   (1.1, 2): 3 < 3.3 passes   (10, 4): no r4, 3 < 0 fails.
    frame = pd.DataFrame({"q": [1] * 6, "s": ["x", "x", "x", "y", "y", "z"]})
    models = [RecursiveCLDiversity("s", c, l) for c, l in [(2, 2), (1, 2), (3, 3), (3.5, 3), (0.5, 2), (1.1, 2),
                                                            (10, 4)]]
    got = verdicts(con, frame_classes(con, frame, ["q"]), models)
    assert got[(1,)][1] == [False, True, True, False, True, False, True]


def test_alpha_k_anonymity_by_hand(con):
    # Class 1 = (x, x, x, y): shares x 3/4, y 1/4.   Class 2 = (y, z): 1/2 each.   Class 3 = (NULL, NULL, x): 2/3.
    frame = pd.DataFrame({"q": [1, 1, 1, 1, 2, 2, 3, 3, 3], "s": ["x", "x", "x", "y", "y", "z", None, None, "x"]})
    models = [AlphaKAnonymity("s", 0.75, 2), AlphaKAnonymity("s", 0.7, 2), AlphaKAnonymity("s", 2 / 3, 3),
              AlphaKAnonymity("s", 0.25, 1, highly_sensitive=["y"]),
              AlphaKAnonymity("s", 0.2, 1, highly_sensitive=["y"]),
              AlphaKAnonymity("s", 0.3, 2, highly_sensitive=["x"]), AlphaKAnonymity("s", 1, 4)]
    got = {k: v[1] for k, v in verdicts(con, frame_classes(con, frame, ["q"]), models).items()}
    assert got == {
        (1,): [False, True, True, False, True, True, False],     # x 3/4 > 0.7 and > 2/3
        (2,): [False, False, True, True, True, False, True],    # y 1/2 > 0.25; 2 records < 3, < 4
        (3,): [False, False, False, False, False, True, True],  # NULL 2/3 counts without a highly sensitive set
    }


def test_p_sensitive_k_anonymity_by_hand(con):
    frame = pd.DataFrame({"q": [1, 1, 1, 2, 2, 3], "s": ["x", "y", "y", "x", "x", "z"]})
    models = [PSensitiveKAnonymity("s", 2, 2), PSensitiveKAnonymity("s", 1, 2), PSensitiveKAnonymity("s", 2, 3)]
    got = {k: v[1] for k, v in verdicts(con, frame_classes(con, frame, ["q"]), models).items()}
    assert got == {(1,): [False, False, False], (2,): [True, False, True], (3,): [True, True, True]}


def test_t_closeness_equal_distance_by_hand(con):
    # Table: x 5, y 3, z 2 of 10 records, Q = (0.5, 0.3, 0.2).
    # Class A = (x, x, x, y):        P = (3/4, 1/4, 0):   (1/4 + 1/20 + 1/5) / 2 = 1/4
    # Class B = (x, x, y, y, z, z):  P = (1/3, 1/3, 1/3): (1/6 + 1/30 + 2/15) / 2 = 1/6
    frame = pd.DataFrame({"q": ["A"] * 4 + ["B"] * 6, "s": list("xxxy") + list("xxyyzz")})
    classes = frame_classes(con, frame, ["q"])
    got = emds(con, TCloseness("s", 0.2), classes)
    assert got[("A",)] == pytest.approx(0.25, abs=TOL) and got[("B",)] == pytest.approx(1 / 6, abs=TOL)
    models = [TCloseness("s", 0.25), TCloseness("s", 0.2), TCloseness("s", 1 / 6), TCloseness("s", 0.16)]
    got = {k: v[1] for k, v in verdicts(con, classes, models).items()}
    assert got == {("A",): [False, True, True, True], ("B",): [False, False, False, True]}


def test_entropy_l_diversity_with_grassbergers_estimator_by_hand(con):
    # Class A = (x, x, y): Shannon ln 3 − (2 ln 2)/3 = 0.6365; Grassberger G(3) − (2 G(2) + G(1))/3 with G(1) = −γ − ln 2
    # = −1.2704, G(2) = G(3) = G(1) + 2 = 0.7296: 0.7296 − 0.1889/3 = 0.6667.  ln 1.9 = 0.6419 lies between them.
    # Class B = (x, x, x): one value; its estimate is 0, and ⌈l⌉ distinct values are needed too.
    frame = pd.DataFrame({"q": ["A"] * 3 + ["B"] * 3, "s": list("xxy") + list("xxx")})
    classes = frame_classes(con, frame, ["q"])
    models = [EntropyLDiversity("s", 1.9), EntropyLDiversity("s", 1.9, "grassberger"),
              EntropyLDiversity("s", 2, "grassberger"), EntropyLDiversity("s", 1.0, "grassberger")]
    got = {k: v[1] for k, v in verdicts(con, classes, models).items()}
    assert got == {("A",): [True, False, True, False], ("B",): [True, True, True, False]}


def test_beta_likeness_and_delta_disclosure_by_hand(con):
    # Table: x 5, y 3, z 2 of 10 records, q = (0.5, 0.3, 0.2).
    # Class A = (x, x, x, y):        p = (3/4, 1/4):       gains (p - q) / q = (1/2, -1/6); |log2 p/q| = (0.585, 0.263)
    # Class B = (x, x, y, y, z, z):  p = (1/3, 1/3, 1/3):  gains (-1/3, 1/9, 2/3);      |log2 p/q| = (0.585, 0.152, 0.737)
    frame = pd.DataFrame({"q": ["A"] * 4 + ["B"] * 6, "s": list("xxxy") + list("xxyyzz")})
    classes = frame_classes(con, frame, ["q"])
    models = [BasicBetaLikeness("s", 0.5), BasicBetaLikeness("s", 0.6), BasicBetaLikeness("s", 2 / 3),
              # enhanced: z's bound is min(β, -ln 0.2 = 1.609), x's min(β, -ln 0.5 = 0.693)
              EnhancedBetaLikeness("s", 0.6), EnhancedBetaLikeness("s", 5.0),
              # δ-disclosure fails at |log2 p/q| ≥ δ: A's largest is log2 1.5, B's log2 5/3
              DeltaDisclosurePrivacy("s", 0.737), DeltaDisclosurePrivacy("s", math.log2(5 / 3)),
              DeltaDisclosurePrivacy("s", math.log2(1.5))]
    got = {k: v[1] for k, v in verdicts(con, classes, models).items()}
    assert got == {("A",): [False, False, False, False, False, False, False, True],
                   ("B",): [True, True, False, True, False, False, True, True]}


def test_t_closeness_ordered_distance_salary_example(con):
    # Li, Li, Venkatasubramanian 2007, §4: salaries 3k … 11k, one record each, Q uniform 1/9.
    # P1 = {3k, 4k, 5k}: differences p - q = (2, 2, 2, -1, -1, -1, -1, -1, -1)/9, running sums
    #   (2, 4, 6, 5, 4, 3, 2, 1, 0)/9, sum 27/9, divided by m - 1 = 8: 0.375.
    # P2 = {6k, 8k, 11k}: differences (-1, -1, -1, 2, -1, 2, -1, -1, 2)/9, running sums
    #   (-1, -2, -3, -1, -2, 0, -1, -2, 0)/9, |sum| 12/9, / 8 = 1/6 = 0.167.
    # P3 = {7k, 9k, 10k}: differences (-1, -1, -1, -1, 2, -1, 2, 2, -1)/9, running sums
    #   (-1, -2, -3, -4, -2, -3, -1, 1, 0)/9, |sum| 17/9, / 8 = 17/72 = 0.236.
    frame = pd.DataFrame({"zip": ["4767*"] * 3 + ["4790*"] * 3 + ["4760*"] * 3,
                          "salary": [3, 4, 5, 6, 8, 11, 7, 9, 10]})
    frame["salary"] *= 1000
    classes = frame_classes(con, frame, ["zip"])
    got = emds(con, TCloseness("salary", 0.2, "ordered"), classes)
    assert round(got[("4767*",)], 3) == 0.375
    assert round(got[("4790*",)], 3) == 0.167
    assert got[("4760*",)] == pytest.approx(17 / 72, abs=TOL)
    models = [TCloseness("salary", t, "ordered") for t in (0.375, 0.37, 17 / 72, 0.2, 1 / 6, 0.16)]
    got = {k: v[1] for k, v in verdicts(con, classes, models).items()}
    assert got == {("4767*",): [False, True, True, True, True, True],
                   ("4790*",): [False, False, False, False, False, True],
                   ("4760*",): [False, False, False, True, True, True]}


# A two-level tree:  * ─ A ─ a1, a2
#                      └ B ─ b1, b2          H = 2; ground distance 1/2 under the same parent, 1 otherwise.
TREE = Hierarchy.from_lists([["a1", "A", "*"], ["a2", "A", "*"], ["b1", "B", "*"], ["b2", "B", "*"]], name="tree")


def test_t_closeness_hierarchical_distance_by_hand(con):
    # Table: a1 2, a2 2, b1 3, b2 1 of 8: Q = (1/4, 1/4, 3/8, 1/8), Q(A) = Q(B) = 1/2.
    # C1 = (a1, b2):      node A: extras a1 +1/4, a2 -1/4 → 1/2 · 1/4 = 1/8; node B: b1 -3/8, b2 +3/8 → 1/2 · 3/8
    #                     = 3/16; root: A 0, B 0 → 0.                                      EMD = 5/16 = 0.3125
    # C2 = (a1, a2, a2):  node A: +1/12, +5/12 → 0; node B: both negative → 0; root: A +1/2, B -1/2 → 1 · 1/2.
    #                                                                                      EMD = 1/2
    # C3 = (b1, b1, b1):  node A: 0; node B: b1 +5/8, b2 -1/8 → 1/2 · 1/8; root: 1 · 1/2. EMD = 9/16 = 0.5625
    frame = pd.DataFrame({"q": [1, 1, 2, 2, 2, 3, 3, 3], "s": ["a1", "b2", "a1", "a2", "a2", "b1", "b1", "b1"]})
    classes = frame_classes(con, frame, ["q"])
    got = emds(con, TCloseness("s", 0.5, "hierarchical", TREE), classes)
    assert got == pytest.approx({(1,): 5 / 16, (2,): 0.5, (3,): 9 / 16}, abs=TOL)
    models = [TCloseness("s", t, "hierarchical", TREE) for t in (0.5, 0.3125, 0.3, 0.5625)]
    got = {k: v[1] for k, v in verdicts(con, classes, models).items()}
    assert got == {(1,): [False, False, True, False], (2,): [False, True, True, False], (3,): [True, True, True, False]}
    # The closed form is the earth mover's distance itself: solve the transport problem for C1 and C3.
    optimize = pytest.importorskip("scipy.optimize")
    leaves = ["a1", "a2", "b1", "b2"]
    ground = np.array([[0 if i == j else (0.5 if i // 2 == j // 2 else 1) for j in range(4)] for i in range(4)])
    q = np.array([2, 2, 3, 1]) / 8
    for p, expected in (([0.5, 0, 0, 0.5], 5 / 16), ([0, 0, 1, 0], 9 / 16)):
        equalities = [np.kron(np.eye(4)[i], np.ones(4)) for i in range(4)] + [np.kron(np.ones(4), np.eye(4)[j])
                                                                              for j in range(4)]
        result = optimize.linprog(ground.ravel(), A_eq=np.array(equalities), b_eq=np.concatenate([p, q]))
        assert result.fun == pytest.approx(expected, abs=1e-9), leaves


def test_t_closeness_hierarchical_null_is_a_leaf_under_the_root(con):
    # Without a NULL row NULL hangs right under the root (distance 1 to every value).  Table: NULL 2, a1 1, a2 1,
    # b1 2 of 6.  Class (NULL, NULL): everything but the NULL mass 1/3 must move 1 → EMD 2/3.  Class (a1, a2): node A
    # extras +1/3, +1/3 → 0; root: A +2/3, B -1/3, NULL -1/3 → 2/3.
    frame = pd.DataFrame({"q": [1, 1, 2, 2, 3, 3], "s": [None, None, "a1", "a2", "b1", "b1"]})
    classes = frame_classes(con, frame, ["q"])
    got = emds(con, TCloseness("s", 0.5, "hierarchical", TREE), classes)
    assert got == pytest.approx({(1,): 2 / 3, (2,): 2 / 3, (3,): 2 / 3}, abs=TOL)
    # With a NULL row under B, NULL is b1's sibling: class (NULL, NULL) only moves 1/3 across the root and 1/3 within B
    # (B: NULL +2/3, b1 -1/3 → 1/2 · 1/3; root: A -1/3, B +1/3 → 1/3), EMD 1/2.
    with_null = Hierarchy.from_lists([*TREE.rows, [None, "B", "*"]])
    got = emds(con, TCloseness("s", 0.5, "hierarchical", with_null), classes)
    assert got[(1,)] == pytest.approx(0.5, abs=TOL)


def test_alpha_l_diversity_k_anonymity_by_hand(con):
    # Levels: x 3, y 3, z 1, w 2.  Class 1 = (x, y, z): level 3 share 2/3, 3 distinct.  Class 2 = (x, z, w, w):
    # levels 3, 1, 2, 2: largest share 1/2, 3 distinct.  Class 3 = (z, z): 1 distinct, share 1.
    levels = {"x": 3, "y": 3, "z": 1, "w": 2}
    frame = pd.DataFrame({"q": [1, 1, 1, 2, 2, 2, 2, 3, 3], "s": list("xyz") + list("xzww") + list("zz")})
    models = [AlphaLDiversityKAnonymity("s", a, l, k, levels) for a, l, k in
              [(2 / 3, 2, 2), (0.6, 2, 2), (0.5, 3, 3), (1, 2, 2), (1, 1, 4)]]
    got = {k: v[1] for k, v in verdicts(con, frame_classes(con, frame, ["q"]), models).items()}
    assert got == {(1,): [False, True, True, False, True],
                   (2,): [False, False, False, False, False],
                   (3,): [True, True, True, True, True]}


# ============================================================================= Adult, computed again in pandas

QUASI = ["age", "sex", "race", "marital-status", "native-country", "workclass"]
OCCUPATION_LEVELS = {
    "Adm-clerical": 1, "Sales": 1, "Tech-support": 1,
    "Craft-repair": 2, "Machine-op-inspct": 2, "Transport-moving": 2, "Handlers-cleaners": 2,
    "Prof-specialty": 3, "Other-service": 3, "Farming-fishing": 3,
    "Exec-managerial": 4, "Protective-serv": 4, "Priv-house-serv": 4, "Armed-Forces": 4,
}
LEVEL_VECTORS = [
    {"age": 1, "sex": 0, "race": 0, "marital-status": 1, "native-country": 1, "workclass": 1},
    {"age": 2, "sex": 0, "race": 1, "marital-status": 2, "native-country": 1, "workclass": 2},
    {"age": 0, "sex": 1, "race": 1, "marital-status": 0, "native-country": 2, "workclass": 0},
    {"age": 3, "sex": 1, "race": 0, "marital-status": 2, "native-country": 2, "workclass": 2},
]


def read_arx(name):
    """{value: [level_0, level_1, …]} from a bundled ARX CSV, read with the csv module."""
    with open(datasets.adult_hierarchy_dir() / f"{name}.csv", newline="", encoding="utf-8") as handle:
        return {row[0]: row for row in csv.reader(handle, delimiter=";") if row}


def adult_models(education_hierarchy):
    return [
        KAnonymity(5), KAnonymity(12),
        DistinctLDiversity("salary-class", 2), DistinctLDiversity("occupation", 4),
        EntropyLDiversity("occupation", 3), EntropyLDiversity("salary-class", 1.5),
        RecursiveCLDiversity("occupation", 3, 3), RecursiveCLDiversity("salary-class", 4, 2),
        AlphaKAnonymity("salary-class", 0.8, 3),
        AlphaKAnonymity("occupation", 0.4, 2, highly_sensitive=["Exec-managerial", "Prof-specialty"]),
        PSensitiveKAnonymity("occupation", 3, 5),
        TCloseness("occupation", 0.25),
        TCloseness("education-num", 0.1, "ordered"),
        TCloseness("education", 0.2, "hierarchical", education_hierarchy),
        AlphaLDiversityKAnonymity("occupation", 0.5, 3, 4, OCCUPATION_LEVELS),
        BasicBetaLikeness("occupation", 1.5), EnhancedBetaLikeness("occupation", 1.0),
        DeltaDisclosurePrivacy("salary-class", 1.2), DeltaDisclosurePrivacy("occupation", 2.0),
        EntropyLDiversity("occupation", 3, "grassberger"), EntropyLDiversity("salary-class", 1.5, "grassberger"),
    ]


def crosstab(frame, keys, sensitive):
    counts = frame.groupby(keys + [sensitive]).size().unstack(fill_value=0)
    return counts.reindex(columns=sorted(frame[sensitive].unique()), fill_value=0)


def pandas_emd(frame, keys, model, tree=None):
    """Per-class EMD (Series indexed by the class keys) computed from a crosstab."""
    counts = crosstab(frame, keys, model.sensitive)
    p = counts.div(counts.sum(axis=1), axis=0)
    q = counts.sum(axis=0) / counts.values.sum()
    if model.distance == "equal":
        return (p - q).abs().sum(axis=1) / 2
    if model.distance == "ordered":
        m = len(q)
        return (p - q).cumsum(axis=1).abs().sum(axis=1) / max(m - 1, 1)
    height = len(next(iter(tree.values()))) - 1
    total = pd.Series(0.0, index=counts.index)
    for level in range(1, height + 1):
        child = {v: tree[str(v)][level - 1] for v in counts.columns}
        node = {v: tree[str(v)][level] for v in counts.columns}
        extra = (p - q).T.groupby(lambda v: (node[v], child[v])).sum().T  # extra of each child, by (node, child)
        positive = extra.clip(lower=0).T.groupby(lambda nc: nc[0]).sum().T
        negative = (-extra).clip(lower=0).T.groupby(lambda nc: nc[0]).sum().T
        total += np.minimum(positive, negative).sum(axis=1) * level / height
    return total


def grassberger_g(n: int) -> float:
    """Grassberger's G(n) as ARX's EntropyLDiversity computes it, from its definition: G(1) = −γ − ln 2,
    G(2k) = G(1) + 2 Σ_{j ≤ k} 1/(2j − 1) up to 100 (odd n as n − 1), ARX's series beyond."""
    even = n - n % 2
    if n <= 100:
        return -0.5772156649015329 - math.log(2) + sum(2 / (2 * j - 1) for j in range(1, even // 2 + 1))
    m = 1 / (even / 2) ** 2
    return math.log(even) + m * (1 / 24 - m * (7 / 960 - m * 31 / 8064))


def grassberger_entropy(counts: pd.DataFrame) -> pd.Series:
    """Per class (row of value counts), Grassberger's estimate G(N) − Σ n G(n) / N."""
    def row(values):
        held = [int(v) for v in values if v > 0]
        total = sum(held)
        return grassberger_g(total) - sum(v * grassberger_g(v) for v in held) / total
    return counts.apply(lambda r: row(r.to_numpy()), axis=1)


def pandas_violations(frame, keys, model, tree=None):
    """Boolean Series per class: does it violate ``model``?  Computed with group-bys, independently of duckanon."""
    size = frame.groupby(keys).size()
    too_small = size < getattr(model, "k", 0)
    if isinstance(model, KAnonymity):
        return too_small
    counts = crosstab(frame, keys, model.sensitive)
    distinct = (counts > 0).sum(axis=1)
    share = counts.div(size, axis=0)
    if isinstance(model, DistinctLDiversity):
        return distinct < model.l
    if isinstance(model, EntropyLDiversity) and model.estimator == "grassberger":
        return (grassberger_entropy(counts) < math.log(model.l) - TOL) | (distinct < math.ceil(model.l))
    if isinstance(model, EntropyLDiversity):
        entropy = -(share * np.log(share.where(share > 0, 1))).sum(axis=1)
        return entropy < math.log(model.l) - TOL
    if isinstance(model, RecursiveCLDiversity):
        ordered = -np.sort(-counts.values, axis=1)
        return pd.Series(~(ordered[:, 0] < model.c * ordered[:, model.l - 1:].sum(axis=1)), index=counts.index)
    if isinstance(model, AlphaKAnonymity):
        bounded = share if model.highly_sensitive is None else share[model.highly_sensitive]
        return too_small | (bounded.max(axis=1) > model.alpha)
    if isinstance(model, PSensitiveKAnonymity):
        return too_small | (distinct < model.p)
    # β-likeness and δ-disclosure (ARX's BasicBLikeness, EnhancedBLikeness, DDisclosurePrivacy): per value a class
    # holds, its share p in the class against its share q in the whole table.
    q = counts.sum(axis=0) / counts.values.sum()
    held = counts > 0
    if isinstance(model, BasicBetaLikeness):
        return (((share - q) / q > model.beta + TOL) & held).any(axis=1)
    if isinstance(model, EnhancedBetaLikeness):
        bound = np.minimum(model.beta, -np.log(q))
        return (((share - q) / q > bound + TOL) & held).any(axis=1)
    if isinstance(model, DeltaDisclosurePrivacy):
        with np.errstate(divide="ignore"):
            return ((np.abs(np.log2(share / q)) >= model.delta - TOL) & held).any(axis=1)
    if isinstance(model, TCloseness):
        return pandas_emd(frame, keys, model, tree) > model.t + TOL
    if isinstance(model, AlphaLDiversityKAnonymity):
        per_level = counts.T.groupby(lambda v: model.levels[str(v)]).sum().T
        return too_small | (distinct < model.l) | (per_level.max(axis=1).div(size) > model.alpha)
    raise AssertionError(model)


@pytest.fixture(scope="module")
def adult():
    con = duckdb.connect()
    datasets.load_adult(con, "adult")
    frame = con.execute('SELECT * FROM "adult"').df()
    hierarchies = {q: read_arx(q) for q in QUASI}
    education = read_arx("education")
    yield con, frame, hierarchies, education
    con.close()


def generalize(frame, hierarchies, levels):
    out = frame.copy()
    for q, level in levels.items():
        out[q] = frame[q].astype(str).map({value: row[level] for value, row in hierarchies[q].items()})
        assert out[q].notna().all(), q
    return out


def test_adult_every_model_matches_pandas(adult):
    con, frame, hierarchies, education = adult
    education_hierarchy = Hierarchy.from_arx_csv(datasets.adult_hierarchy_dir() / "education.csv")
    models = adult_models(education_hierarchy)
    policy = duckanon.Policy(
        quasi_identifiers={q: Hierarchy.from_arx_csv(datasets.adult_hierarchy_dir() / f"{q}.csv") for q in QUASI},
        models=models, sensitive=["salary-class", "occupation", "education", "education-num"], others="insensitive")
    anon = duckanon.connect(con)
    with anon.encode("adult", policy) as encoded:
        for levels in LEVEL_VECTORS:
            generalized = generalize(frame, hierarchies, levels)
            size = generalized.groupby(QUASI).size()
            expected = pd.DataFrame({i: pandas_violations(generalized, QUASI, m, education)
                                     for i, m in enumerate(models)}).reindex(size.index).fillna(False).astype(bool)
            # The whole pipeline (encoded frequency table, level codes) agrees on the counts …
            report = encoded.check(levels)
            assert report.records == len(frame) and report.classes == len(size)
            assert report.per_model["violating_classes"].tolist() == expected.sum().tolist(), levels
            assert report.per_model["violating_records"].tolist() == [int(size[expected[i]].sum())
                                                                      for i in range(len(models))], levels
            any_model = expected.any(axis=1)
            assert (report.violating_classes, report.violating_records) == (int(any_model.sum()),
                                                                            int(size[any_model].sum()))
            # … and the models, run on the pandas-generalized records, flag exactly the same classes.
            got = verdicts(con, frame_classes(con, generalized, QUASI, name="generalized"), models)
            assert set(got) == set(size.index)
            for key, (class_size, flags) in got.items():
                assert class_size == size[key] and flags == expected.loc[key].tolist(), (levels, key)


@pytest.mark.parametrize("distance", ["equal", "ordered", "hierarchical"])
def test_adult_t_closeness_distances_and_boundaries(adult, distance):
    con, frame, hierarchies, education = adult
    sensitive = {"equal": "occupation", "ordered": "education-num", "hierarchical": "education"}[distance]
    tree = Hierarchy.from_arx_csv(datasets.adult_hierarchy_dir() / "education.csv") if distance == "hierarchical" \
        else None
    for levels in LEVEL_VECTORS[:1]:
        generalized = generalize(frame, hierarchies, levels)
        classes = frame_classes(con, generalized, QUASI, name="generalized")
        expected = pandas_emd(generalized, QUASI, TCloseness(sensitive, 0, distance, tree), education)
        got = emds(con, TCloseness(sensitive, 0, distance, tree), classes)
        assert set(got) == set(expected.index)
        assert max(abs(got[key] - expected[key]) for key in got) < TOL
        # Thresholds at, just below and just above some classes' distances.
        picks = expected.sort_values().iloc[[len(expected) // 4, len(expected) // 2, -1]]
        ts = sorted({min(max(e + d, 0.0), 1.0) for e in picks for d in (-1e-7, 0.0, 1e-7)})
        result = verdicts(con, classes, [TCloseness(sensitive, t, distance, tree) for t in ts])
        for i, t in enumerate(ts):
            assert {k for k, (_, flags) in result.items() if flags[i]} == set(expected.index[expected > t + TOL]), t


# ==================================================================== property tests against a Python reference

VALUES = ["x", "y", "z", "w"]
SMALL_TREE_ROWS = [["x", "XY", "*"], ["y", "XY", "*"], ["z", "ZW", "*"], ["w", "ZW", "*"]]


def reference_verdict(model, cells, whole, tree_paths=None):
    """Does one class violate ``model``?  ``cells``: Counter value → records of the class, ``whole``: of the table."""
    size = sum(cells.values())
    if size < getattr(model, "k", 0):
        return True
    if isinstance(model, KAnonymity):
        return False
    if isinstance(model, (DistinctLDiversity, PSensitiveKAnonymity)):
        return len(cells) < (model.l if isinstance(model, DistinctLDiversity) else model.p)
    if isinstance(model, EntropyLDiversity):
        entropy = -sum(n / size * math.log(n / size) for n in cells.values())
        return entropy < math.log(model.l) - TOL
    if isinstance(model, RecursiveCLDiversity):
        r = sorted(cells.values(), reverse=True)
        return not r[0] < Fraction(repr(model.c)) * sum(r[model.l - 1:])
    if isinstance(model, AlphaKAnonymity):
        bounded = [n for v, n in cells.items() if model.highly_sensitive is None or
                   (v is not None and str(v) in model.highly_sensitive)]
        return max(bounded, default=0) / size > model.alpha
    if isinstance(model, AlphaLDiversityKAnonymity):
        per_level = Counter()
        for v, n in cells.items():
            per_level[model.levels.get(str(v)) if v is not None else None] += n
        return len(cells) < model.l or max(per_level.values()) / size > model.alpha
    if isinstance(model, TCloseness):
        total = sum(whole.values())
        p = {v: Fraction(cells.get(v, 0), size) for v in whole}
        q = {v: Fraction(n, total) for v, n in whole.items()}
        if model.distance == "equal":
            emd = sum(abs(p[v] - q[v]) for v in whole) / 2
        elif model.distance == "ordered":
            domain = sorted(whole)
            running = list(itertools.accumulate(p[v] - q[v] for v in domain))
            emd = sum(abs(r) for r in running) / max(len(domain) - 1, 1)
        else:
            height = len(next(iter(tree_paths.values()))) - 1
            emd = Fraction(0)
            for level in range(1, height + 1):
                extras = defaultdict(Fraction)  # (node, child) → extra
                for v in whole:
                    path = tree_paths[v]
                    extras[(path[level], path[level - 1])] += p[v] - q[v]
                nodes = defaultdict(lambda: [Fraction(0), Fraction(0)])
                for (node, _child), extra in extras.items():
                    nodes[node][0 if extra > 0 else 1] += abs(extra)
                emd += Fraction(level, height) * sum(min(pos, neg) for pos, neg in nodes.values())
        return float(emd) > model.t + TOL
    raise AssertionError(model)


def reference(records, model, attribute, tree_paths=None):
    """{class key: violated} for records ``(key, {attribute: value}, weight)``."""
    classes = defaultdict(Counter)
    whole = Counter()
    for key, values, weight in records:
        classes[key][values[attribute]] += weight
        whole[values[attribute]] += weight
    return {key: reference_verdict(model, cells, whole, tree_paths) for key, cells in classes.items()}


rows_strategy = st.lists(st.tuples(st.sampled_from([0, 1, 2, None]), st.sampled_from(["a", "b", None]),
                                   st.sampled_from([*VALUES, None]), st.integers(0, 5), st.integers(1, 3)),
                         min_size=1, max_size=40)

# A grid of parameters for every model (building a query costs more than running it, so the query is built once
# and every generated table is checked against the whole grid).  Levels and hierarchies: SMALL_TREE puts NULL right
# under the root, SMALL_TREE_NULL gives NULL a row under ZW.
SMALL_TREE = Hierarchy.from_lists(SMALL_TREE_ROWS)
SMALL_TREE_NULL = Hierarchy.from_lists(SMALL_TREE_ROWS + [[None, "ZW", "*"]])
LEVEL_MAPS = [{"x": 1, "y": 1, "z": 2, "w": 3}, {"x": 2, "y": 1, "z": 2, "w": 1}, {"x": 1, "y": 2, "z": 3, "w": 3}]
GRID = [
    *[(KAnonymity(k), "s") for k in (1, 2, 3, 4)],
    *[(DistinctLDiversity("s", l), "s") for l in (1, 2, 3, 4)],
    *[(EntropyLDiversity("s", l), "s") for l in (1, 1.5, 2, 2.5, 3)],
    *[(RecursiveCLDiversity("s", c, l), "s") for c, l in [(0.5, 2), (1, 2), (1.5, 2), (2, 2), (0.7, 3), (2, 3),
                                                            (3, 3), (1, 4)]],
    *[(AlphaKAnonymity("s", a, k), "s") for a, k in [(0.25, 1), (1 / 3, 2), (0.4, 1), (0.5, 2), (2 / 3, 3),
                                                      (0.75, 1), (1, 4)]],
    *[(AlphaKAnonymity("s", a, k, highly_sensitive=h), "s") for a, k, h in [
        (0.25, 1, ["x"]), (1 / 3, 2, ["x", "y"]), (0.5, 1, ["z", "w", "y"]), (2 / 3, 2, VALUES)]],
    *[(PSensitiveKAnonymity("s", p, k), "s") for p, k in [(1, 1), (2, 2), (2, 3), (3, 4)]],
    *[(TCloseness("s", t), "s") for t in (0, 0.1, 0.25, 1 / 3, 0.5)],
    *[(TCloseness("o", t, "ordered"), "o") for t in (0, 0.1, 0.2, 0.25, 0.5)],
    *[(TCloseness("s", t, "hierarchical", SMALL_TREE), "s") for t in (0, 0.25, 0.5)],
    *[(TCloseness("s", t, "hierarchical", SMALL_TREE_NULL), "s") for t in (0.1, 0.5)],
    *[(AlphaLDiversityKAnonymity("s", a, l, k, levels), "s") for a, l, k, levels in [
        (0.5, 2, 2, LEVEL_MAPS[0]), (2 / 3, 1, 1, LEVEL_MAPS[1]), (0.4, 2, 3, LEVEL_MAPS[2]),
        (1, 3, 3, LEVEL_MAPS[0])]],
]
_grid_sql = {}
CHUNK = 12  # DuckDB plans a few queries of a dozen models faster than one of them all


def grid_sql(weighted):
    """The class_verdicts queries over table t for the grid, CHUNK models each."""
    if weighted not in _grid_sql:
        classes = Classes.of(sb.table("t"), ["k0", "k1"], "w" if weighted else None)
        _grid_sql[weighted] = [sb.to_sql(checks.class_verdicts(classes, [m for m, _ in GRID[i:i + CHUNK]]))
                               for i in range(0, len(GRID), CHUNK)]
    return _grid_sql[weighted]


def tree_paths(tree):
    paths = {row[0]: row for row in tree.rows}
    paths.setdefault(None, (None, None, "*"))
    return paths


def run_property(rows, weighted):
    frame = pd.DataFrame({
        "k0": pd.array([r[0] for r in rows], dtype="Int64"),
        "k1": pd.Series([r[1] for r in rows], dtype=object),
        "s": pd.Series([r[2] for r in rows], dtype=object),
        "o": [r[3] for r in rows],
        "w": [r[4] if weighted else 1 for r in rows],
    })
    con = duckdb.connect()
    try:
        con.register("t", frame)
        got = {}
        for sql in grid_sql(weighted):
            for row in con.execute(sql).fetchall():
                size, flags = got.setdefault(row[:2], (row[2], []))
                assert row[2] == size
                flags.extend(row[3:-1])
    finally:
        con.close()
    records = [((r[0], r[1]), {"s": r[2], "o": r[3]}, r[4] if weighted else 1) for r in rows]
    sizes = Counter()
    for key, _, weight in records:
        sizes[key] += weight
    assert {k: v[0] for k, v in got.items()} == dict(sizes)
    for i, (model, attribute) in enumerate(GRID):
        tree = getattr(model, "_hierarchy", None)
        expected = reference(records, model, attribute, tree_paths(tree) if tree is not None else None)
        assert {k: v[1][i] for k, v in got.items()} == expected, model


@settings(max_examples=45, deadline=None)
@given(rows=rows_strategy)
def test_models_match_reference(rows):
    run_property(rows, weighted=False)


@settings(max_examples=20, deadline=None)
@given(rows=rows_strategy)
def test_weighted_classes_match_reference(rows):
    # Rows that stand for several records (a frequency table's counts) give the verdicts of the expanded records.
    run_property(rows, weighted=True)


# ============================================================================================ bad parameters


@pytest.mark.parametrize("make", [
    lambda: KAnonymity(0), lambda: KAnonymity(-1), lambda: KAnonymity(2.0), lambda: KAnonymity(True),
    lambda: KAnonymity("3"), lambda: KAnonymity(None), lambda: AlphaKAnonymity("s", 0.5, 0),
    lambda: PSensitiveKAnonymity("s", 2, 1.5), lambda: AlphaLDiversityKAnonymity("s", 0.5, 2, 0, {"x": 1}),
])
def test_k_must_be_a_whole_number_of_at_least_1(make):
    with pytest.raises(PolicyError, match="k must be a whole number of at least 1"):
        make()


@pytest.mark.parametrize("make, message", [
    (lambda: DistinctLDiversity("s", 0), "l must be a whole number"),
    (lambda: DistinctLDiversity("s", 2.5), "l must be a whole number"),
    (lambda: EntropyLDiversity("s", 0.5), "l must be a number of at least 1"),
    (lambda: EntropyLDiversity("s", "2"), "l must be a number of at least 1"),
    (lambda: RecursiveCLDiversity("s", 2, 1), "l must be a whole number of at least 2"),
    (lambda: RecursiveCLDiversity("s", 0, 2), "c must be a positive number"),
    (lambda: RecursiveCLDiversity("s", -1, 2), "c must be a positive number"),
    (lambda: PSensitiveKAnonymity("s", 0, 2), "p must be a whole number"),
    (lambda: PSensitiveKAnonymity("s", 3, 2), "p=3 cannot exceed k=2"),
    (lambda: AlphaLDiversityKAnonymity("s", 0.5, 3, 2, {"x": 1}), "l=3 cannot exceed k=2"),
    (lambda: AlphaLDiversityKAnonymity("s", 0.5, 2, 2, {}), "table of sensitivity levels is empty"),
    (lambda: AlphaLDiversityKAnonymity("s", 0.5, 2, 2, {"x": 0}), "the level of 'x' must be a whole number"),
    (lambda: AlphaLDiversityKAnonymity("s", 0.5, 2, 2, {"x": 1, None: 2}), "NULL cannot be given a sensitivity"),
    (lambda: AlphaKAnonymity("s", 0.5, 2, highly_sensitive=["x", None]), "NULL cannot be a highly sensitive"),
    (lambda: BasicBetaLikeness("s", 0), "basic-beta-likeness: beta must be"),
    (lambda: EnhancedBetaLikeness("s", -1), "enhanced-beta-likeness: beta must be"),
    (lambda: DeltaDisclosurePrivacy("s", float("inf")), "delta-disclosure-privacy: delta must be"),
    (lambda: EntropyLDiversity("s", 2, "miller-madow"), "estimator must be one of shannon, grassberger"),
])
def test_bad_model_parameters(make, message):
    with pytest.raises(PolicyError, match=message):
        make()


@pytest.mark.parametrize("alpha", [0, -0.1, 1.01, 2, float("nan"), True, "0.5", None])
def test_alpha_must_lie_in_0_1(alpha):
    with pytest.raises(PolicyError, match=r"alpha must lie in \(0, 1\]"):
        AlphaKAnonymity("s", alpha, 2)
    with pytest.raises(PolicyError, match=r"alpha must lie in \(0, 1\]"):
        AlphaLDiversityKAnonymity("s", alpha, 2, 2, {"x": 1})


@pytest.mark.parametrize("t", [-0.01, 1.5, float("nan"), float("inf"), True, "0.2"])
def test_t_must_lie_in_0_1(t):
    with pytest.raises(PolicyError, match=r"t must lie in \[0, 1\]"):
        TCloseness("s", t)


def test_t_bounds_and_alpha_1_are_allowed():
    assert TCloseness("s", 0).t == 0 and TCloseness("s", 1).t == 1 and AlphaKAnonymity("s", 1, 1).alpha == 1


@pytest.mark.parametrize("make, message", [
    (lambda: TCloseness("s", 0.2, "manhattan"), "distance must be one of equal, ordered, hierarchical"),
    (lambda: TCloseness("s", 0.2, "hierarchical"), "a hierarchy is needed"),
    (lambda: TCloseness("s", 0.2, "equal", TREE), "a hierarchy is needed"),
    (lambda: TCloseness("s", 0.2, "hierarchical", Hierarchy.from_lists([["a", "A"], ["b", "B"]])), "one root"),
    (lambda: TCloseness("s", 0.2, "hierarchical", Hierarchy.from_lists([["a"], ["b"]])), "at least two levels"),
])
def test_bad_t_closeness_settings(make, message):
    with pytest.raises(PolicyError, match=message):
        make()


SMALL = pd.DataFrame({"q": ["1", "1", "2", "2", "2", "3"], "s": ["x", "y", "x", "x", "x", "y"],
                      "o": [1, 2, 3, 4, 5, 6]})
Q_HIERARCHY = Hierarchy.from_lists([["1", "*"], ["2", "*"], ["3", "*"]], name="q")


def anon_check(con, models, frame=SMALL):
    con.register("small", frame)
    policy = duckanon.Policy(quasi_identifiers={"q": Q_HIERARCHY}, models=models, others="insensitive")
    return duckanon.connect(con).check("small", policy, {"q": 0})


@pytest.mark.parametrize("model, named", [
    (DistinctLDiversity("s", 3), "l=3"), (EntropyLDiversity("s", 2.5), "l=2.5"),
    (RecursiveCLDiversity("s", 2, 3), "l=3"), (PSensitiveKAnonymity("s", 3, 4), "p=3"),
    (AlphaLDiversityKAnonymity("s", 1, 3, 3, {"x": 1, "y": 2}), "l=3"),
])
def test_l_beyond_the_distinct_values_is_rejected(con, model, named):
    with pytest.raises(PolicyError, match=f"{named} needs 3 distinct values but 's' has only 2"):
        anon_check(con, [model])


def test_k_beyond_the_table_is_rejected(con):
    with pytest.raises(PolicyError, match="k=7 is larger than the table"):
        anon_check(con, [KAnonymity(7)])


def test_alpha_below_a_values_overall_share_is_rejected(con):
    # x makes up 4/6 of the records: every release has a class where x has at least that share.
    with pytest.raises(PolicyError, match="no release can satisfy alpha=0.6: value 'x' of 's' makes up 0.6667"):
        anon_check(con, [AlphaKAnonymity("s", 0.6, 1)])
    with pytest.raises(PolicyError, match="no release can satisfy alpha=0.6"):
        anon_check(con, [AlphaKAnonymity("s", 0.6, 1, highly_sensitive=["x"])])
    # Bounding only y (2/6) makes 0.6 possible; at 2/3 the whole table as one class meets it.
    assert anon_check(con, [AlphaKAnonymity("s", 0.6, 1, highly_sensitive=["y"])]).violating_classes == 1
    assert anon_check(con, [AlphaKAnonymity("s", 2 / 3, 1)]).violating_classes == 2
    with pytest.raises(PolicyError, match="no release can satisfy alpha=0.6: sensitivity level 1"):
        anon_check(con, [AlphaLDiversityKAnonymity("s", 0.6, 1, 1, {"x": 1, "y": 2})])
    with pytest.raises(PolicyError, match="not found in 's'"):
        anon_check(con, [AlphaKAnonymity("s", 0.6, 1, highly_sensitive=["z"])])


def test_level_table_must_cover_every_value(con):
    with pytest.raises(PolicyError, match=r"missing from the level table: \['y'\]"):
        anon_check(con, [AlphaLDiversityKAnonymity("s", 1, 1, 1, {"x": 1})])
    with_null = SMALL.assign(s=["x", "y", "x", None, "x", "y"])
    with pytest.raises(PolicyError, match=r"missing from the level table: \['NULL'\]"):
        anon_check(con, [AlphaLDiversityKAnonymity("s", 1, 1, 1, {"x": 1, "y": 2})], with_null)


def test_distances_that_need_more_of_the_data_are_rejected(con):
    with pytest.raises(PolicyError, match="does not cover"):
        anon_check(con, [TCloseness("s", 0.5, "hierarchical", Hierarchy.from_lists([["x", "*"]]))])
    with pytest.raises(PolicyError, match="ordered distance needs 'o' to have no NULL"):
        anon_check(con, [TCloseness("o", 0.5, "ordered")],
                   SMALL.assign(o=pd.array([1, 2, None, 4, 5, 6], dtype="Int64")))


# ============================================================================================== portability


def all_models():
    return [KAnonymity(3), DistinctLDiversity("s", 2), EntropyLDiversity("s", 1.5), RecursiveCLDiversity("s", 2, 2),
            AlphaKAnonymity("s", 0.5, 2), AlphaKAnonymity("s", 0.5, 2, highly_sensitive=["x"]),
            PSensitiveKAnonymity("s", 2, 2), TCloseness("s", 0.3), TCloseness("o", 0.3, "ordered"),
            TCloseness("s", 0.3, "hierarchical", Hierarchy.from_lists(SMALL_TREE_ROWS)),
            AlphaLDiversityKAnonymity("s", 0.5, 2, 2, {"x": 1, "y": 2, "z": 3, "w": 3}),
            EntropyLDiversity("s", 1.5, "grassberger"), BasicBetaLikeness("s", 1.0), EnhancedBetaLikeness("s", 1.0),
            DeltaDisclosurePrivacy("s", 1.0), KMap(3, 50, sample_records=5)]


@pytest.mark.parametrize("model", all_models(), ids=lambda m: m.describe())
@pytest.mark.parametrize("dialect", ["spark", "postgres"])
def test_class_verdicts_transpile(con, model, dialect):
    classes = Classes.of(sb.table("my table"), ["q 1", 'q"2'])
    statement = checks.class_verdicts(classes, [model, KAnonymity(2)])
    duck = sb.to_sql(statement)
    for sql in (sqlglot.transpile(duck, read="duckdb", write=dialect)[0], statement.sql(dialect=dialect)):
        parsed = sqlglot.parse_one(sql, read=dialect)
        assert isinstance(parsed, sqlglot.exp.Query)
        assert parsed.sql(dialect=dialect)
    # The DuckDB text parses back to a query that DuckDB runs with the same result.
    frame = pd.DataFrame({"q 1": [1, 1, 2, 2, 2], 'q"2': ["a"] * 5, "s": ["x", "y", "z", "z", "w"],
                          "o": [1, 2, 3, 4, 5]})
    con.register("my table", frame)
    again = sqlglot.parse_one(duck, read="duckdb").sql(dialect="duckdb")
    assert sorted(con.execute(again).fetchall()) == sorted(con.execute(duck).fetchall())
