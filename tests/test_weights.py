"""Attribute weights (duckanon.utility.weights) against pandas/numpy on Adult, hand-computed tables, bad input and hostile
column names."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from sqlglot import exp

from duckanon.datasets import load_adult
from duckanon.engine import as_engine
from duckanon.errors import AnonymizationError, PolicyError
from duckanon.sqlgen import build as sb
from duckanon.utility.weights import KINDS, attribute_weights

ADULT_ATTRIBUTES = ["age", "education-num", "capital-gain", "hours-per-week", "race", "relationship", "workclass",
                    "native-country", "marital-status", "occupation", "sex"]
LABEL = "salary-class"


def entropy_bits(column: pd.Series) -> float:
    p = column.value_counts(dropna=False).to_numpy() / len(column)
    return float(-(p * np.log2(p)).sum())


def mutual_information_bits(x: pd.Series, y: pd.Series) -> float:
    """H(Y) − H(Y|X), the paper's formulas 1–3, with NULL a value of its own."""
    joint = pd.DataFrame({"x": x, "y": y}).groupby(["x", "y"], dropna=False).size()
    p_xy = joint.to_numpy() / len(x)
    p_x = joint.groupby(level="x", dropna=False).transform("sum").to_numpy() / len(x)
    conditional = -(p_xy * np.log2(p_xy / p_x)).sum()
    return entropy_bits(y) - float(conditional)


@pytest.fixture(params=[True, False], ids=["complete", "with-missing"])
def adult(request, con):
    load_adult(con, "adult", complete=request.param)
    return as_engine(con).frame(exp.select(exp.Star()).from_(sb.table("adult")))


def test_entropy_matches_pandas_on_adult(con, adult):
    weights = attribute_weights(con, sb.table("adult"), ADULT_ATTRIBUTES, kind="entropy")
    expected = [entropy_bits(adult[a]) for a in ADULT_ATTRIBUTES]
    assert list(weights["attribute"]) == ADULT_ATTRIBUTES
    np.testing.assert_allclose(weights["score"], expected, rtol=1e-9)
    np.testing.assert_allclose(weights["weight"], np.array(expected) / sum(expected), rtol=1e-9)


def test_mutual_information_matches_pandas_on_adult(con, adult):
    weights = attribute_weights(con, "adult", ADULT_ATTRIBUTES, kind="mutual-information", label=LABEL)
    expected = [mutual_information_bits(adult[a], adult[LABEL]) for a in ADULT_ATTRIBUTES]
    np.testing.assert_allclose(weights["score"], expected, rtol=1e-9)
    np.testing.assert_allclose(weights["weight"], np.array(expected) / sum(expected), rtol=1e-9)
    assert weights["weight"].sum() == pytest.approx(1)


def test_uniform_weights(con, adult):
    weights = attribute_weights(con, "adult", ADULT_ATTRIBUTES, kind="uniform")
    assert list(weights.columns) == ["attribute", "score", "weight"]
    assert (weights["weight"] == 1 / len(ADULT_ATTRIBUTES)).all()


# Y splits 4/4 (H(Y) = 1 bit).  "copy" predicts Y, "coin" is independent of it, "missing" predicts Y by being NULL
# or not, "three" (4/2/2, H = 1.5 bits) is independent, "skewed" is a for three yes, b for one yes and four no,
# "constant" has one value.
TINY = pd.DataFrame({
    "y": ["yes", "yes", "yes", "yes", "no", "no", "no", "no"],
    "copy": ["p", "p", "p", "p", "q", "q", "q", "q"],
    "coin": ["h", "t", "h", "t", "h", "t", "h", "t"],
    "missing": [None, None, None, None, "v", "v", "v", "v"],
    "three": ["a", "a", "b", "c", "a", "a", "b", "c"],
    "skewed": ["a", "a", "a", "b", "b", "b", "b", "b"],
    "constant": ["k"] * 8,
})


@pytest.fixture
def tiny(con):
    con.register("tiny_frame", TINY)
    as_engine(con).run(sb.create_table_as(sb.table("tiny"), exp.select(exp.Star()).from_(sb.table("tiny_frame"))))
    return "tiny"


def h(*probabilities: float) -> float:
    return -sum(p * math.log2(p) for p in probabilities)


def test_hand_computed_entropies(con, tiny):
    attributes = ["copy", "coin", "missing", "three", "skewed", "constant"]
    weights = attribute_weights(con, tiny, attributes, kind="entropy").set_index("attribute")
    expected = {"copy": 1, "coin": 1, "missing": 1, "three": 1.5, "skewed": h(3 / 8, 5 / 8), "constant": 0}
    for attribute, bits in expected.items():
        assert weights.loc[attribute, "score"] == pytest.approx(bits, abs=1e-12), attribute
    assert weights.loc["constant", "score"] == 0
    assert weights.loc["three", "weight"] == pytest.approx(1.5 / sum(expected.values()))


def test_hand_computed_mutual_information(con, tiny):
    attributes = ["copy", "coin", "missing", "three", "skewed", "constant"]
    weights = attribute_weights(con, tiny, attributes, kind="mutual-information", label="y").set_index("attribute")
    # H(Y|skewed) = 3/8·0 + 5/8·H(1/5, 4/5).
    skewed = 1 - 5 / 8 * h(1 / 5, 4 / 5)
    expected = {"copy": 1, "coin": 0, "missing": 1, "three": 0, "skewed": skewed, "constant": 0}
    for attribute, bits in expected.items():
        assert weights.loc[attribute, "score"] == pytest.approx(bits, abs=1e-12), attribute
    # Independence gives exactly zero, not rounding noise.
    assert (weights.loc[["coin", "three", "constant"], "score"] == 0).all()
    assert weights.loc["copy", "weight"] == pytest.approx(1 / (2 + skewed))


def test_a_query_as_source(con, tiny):
    # Rows 0, 2, 4, 6: y yes yes no no; copy p p q q; three a b a b.
    heads = exp.select(exp.Star()).from_(sb.table(tiny)).where(sb.col("coin").eq(sb.lit("h")))
    weights = attribute_weights(con, heads, ["copy", "three"], kind="mutual-information", label="y")
    assert weights["score"].tolist() == [pytest.approx(1), 0]


@pytest.mark.parametrize("kind, label, attributes, message", [
    ("gini", None, ["copy"], "'uniform', 'entropy', 'mutual-information'"),
    ("mutual-information", None, ["copy"], "needs label"),
    ("mutual-information", "salary", ["copy"], "label 'salary' is not a column"),
    ("mutual-information", "constant", ["copy"], "label 'constant' has one value"),
    ("mutual-information", "y", ["copy", "ghost"], "['ghost']"),
    ("entropy", None, ["ghost"], "['ghost']"),
    ("uniform", None, ["ghost"], "['ghost']"),
    ("mutual-information", "y", ["coin", "three", "constant"], "mutual information with 'y' is zero"),
    ("entropy", None, ["constant"], "entropy is zero"),
    ("mutual-information", "y", ["copy", "y"], "label 'y' is also listed"),
    ("uniform", None, [], "attributes is empty"),
    ("uniform", None, ["copy", "copy"], "more than once: ['copy']"),
    ("uniform", None, "copy", "a list of column names"),
])
def test_bad_input(con, tiny, kind, label, attributes, message):
    with pytest.raises(PolicyError) as raised:
        attribute_weights(con, tiny, attributes, kind=kind, label=label)
    assert message in str(raised.value)


def test_missing_and_empty_sources(con, tiny):
    with pytest.raises(AnonymizationError, match="nowhere"):
        attribute_weights(con, "nowhere", ["copy"], kind="uniform")
    empty = exp.select(exp.Star()).from_(sb.table(tiny)).where(exp.false())
    for kind in ("entropy", "mutual-information"):
        with pytest.raises(AnonymizationError, match="empty"):
            attribute_weights(con, empty, ["copy"], kind=kind, label="y")


HOSTILE = ['x"; DROP TABLE t; --', "it's", "with space", "年龄 (ans)", "Ünïcödé-naïve"]
HOSTILE_LABEL = 'class "label" ✓'


def test_hostile_column_names(con):
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({name: rng.integers(0, 3 + i, 200).astype(str) for i, name in enumerate(HOSTILE)})
    frame[HOSTILE_LABEL] = np.where(frame[HOSTILE[0]] == "0", "yes", rng.choice(["yes", "no"], 200))
    con.register("hostile_frame", frame)
    as_engine(con).run(sb.create_table_as(sb.table('t "hostile"'), exp.select(exp.Star()).from_(sb.table("hostile_frame"))))
    for kind in KINDS:
        weights = attribute_weights(con, 't "hostile"', HOSTILE, kind=kind, label=HOSTILE_LABEL)
        assert list(weights["attribute"]) == HOSTILE
        if kind == "entropy":
            np.testing.assert_allclose(weights["score"], [entropy_bits(frame[a]) for a in HOSTILE], rtol=1e-9)
        if kind == "mutual-information":
            np.testing.assert_allclose(weights["score"],
                                       [mutual_information_bits(frame[a], frame[HOSTILE_LABEL]) for a in HOSTILE],
                                       rtol=1e-9)
    assert as_engine(con).rows(exp.select(exp.func("COUNT", exp.Star())).from_(sb.table('t "hostile"')))[0][0] == 200
