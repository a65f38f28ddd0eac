"""Utility metrics of full-domain generalizations, checked against an independent pandas computation.

The reference below generalizes records with plain dict lookups (Adult's ARX hierarchies read with the csv module),
forms classes with pandas, marks the records of violating classes suppressed, and computes each metric from its
definition (seed 002: LM/Loss, DM, non-uniform entropy; seed 003 formulas 1–3 / Xu et al.: NCP):

- Loss: per attribute the average over records of (leaves under the generalized value − 1) / (leaves − 1)
  (categorical) or interval width / domain width (numeric), summed over attributes (each times its weight for the
  weighted losses); a suppressed record loses 1 on every attribute;
- NCP: Σ records Σ attributes of leaves under the generalized value / all leaves (categorical, 0 when the value is
  not generalized) or interval width / domain width (numeric); a suppressed record costs 1 on every attribute;
- non-uniform entropy: Σ records Σ attributes log2(N(generalized value) / N(original value)), counts over the whole
  table; a suppressed value costs log2(|D| / N(original value));
- DM: Σ |E|² over kept classes + |D| for each suppressed record;
- average class size: records / (kept classes + 1 when any record is suppressed).
"""

from __future__ import annotations

import csv
import dataclasses
import itertools
import math
from collections import Counter

import duckdb
import numpy as np
import pandas as pd
import pytest

import duckanon
from duckanon import (
    DistinctLDiversity,
    Hierarchy,
    IntervalHierarchy,
    KAnonymity,
    Policy,
)
from duckanon.datasets import adult_hierarchy_dir, load_adult
from duckanon.encode.binding import bind
from duckanon.search import run as search_run
from duckanon.search.lattice import Lattice
from duckanon.utility.metrics import (
    METRICS,
    AverageClassSize,
    Discernibility,
    Loss,
    NodeTotals,
    NonUniformEntropy,
    NormalizedCertaintyPenalty,
    metric_names,
    record_cost,
)

ALL_METRICS = ["loss", "dm", "ncp", "non-uniform-entropy", "average-class-size", "entropy-loss", "mi-loss"]
ADULT_QIS = ["age", "sex", "race", "marital-status"]
LABEL = "salary-class"
REL = 1e-9


# ----------------------------------------------------------------------------------------------- the reference
class RefHierarchy:
    """A hierarchy as plain rows: value → its generalizations, and leaves per generalized value."""

    def __init__(self, rows, interval_domain: tuple[float, float] | None = None):
        self.rows = [tuple(r) for r in rows]
        self.map = {r[0]: r for r in self.rows}
        self.levels = len(self.rows[0])
        self.leaves = [{} for _ in range(self.levels)]
        for r in self.rows:
            for j, v in enumerate(r):
                self.leaves[j][v] = self.leaves[j].get(v, 0) + 1
        self.interval_domain = interval_domain

    def generalize(self, value, level):
        return self.map[str(value)][level]

    def costs(self, level, label):
        """(LM, NCP) of a value generalized to ``label`` on ``level``, by the definitions."""
        if level == 0:
            return 0.0, 0.0
        if self.interval_domain is not None:
            if label == "*":
                return 1.0, 1.0
            lo, hi = (float(x) for x in label[1:-1].split(","))  # "[lo, hi)"
            width = (hi - lo) / (self.interval_domain[1] - self.interval_domain[0])
            return width, width
        total, covered = len(self.rows), self.leaves[level][label]
        lm = (covered - 1) / (total - 1)
        ncp = covered / total if covered > 1 else 0.0
        return lm, ncp


def read_arx(name: str) -> RefHierarchy:
    with open(adult_hierarchy_dir() / f"{name}.csv", newline="", encoding="utf-8-sig") as handle:
        return RefHierarchy([row for row in csv.reader(handle, delimiter=";") if row])


def entropy_bits(series: pd.Series) -> float:
    p = series.value_counts(dropna=False).to_numpy(dtype=float) / len(series)
    return float(-(p * np.log2(p)).sum())


def mutual_information_bits(x: pd.Series, y: pd.Series) -> float:
    joint = pd.crosstab(x, y).to_numpy(dtype=float)
    n = joint.sum()
    px, py = joint.sum(axis=1) / n, joint.sum(axis=0) / n
    pxy = joint / n
    mask = pxy > 0
    return float((pxy[mask] * np.log2(pxy[mask] / np.outer(px, py)[mask])).sum())


def reference_weights(frame, qis, kind, label=None):
    if kind == "entropy":
        scores = [entropy_bits(frame[q]) for q in qis]
    else:
        scores = [mutual_information_bits(frame[q], frame[label]) for q in qis]
    return {q: s / sum(scores) for q, s in zip(qis, scores)}


def reference_metrics(frame, qis, hierarchies, levels, violates, allowed, weights=None):
    """Every metric of generalizing ``frame`` to ``levels``; ``violates(generalized, keys)`` marks each record whose
    class violates the policy; ``frame`` is a DataFrame or a dict of column lists.  Returns (metrics, suppressed,
    satisfied, bounds of DM and average class size)."""
    columns = {c: list(frame[c]) for c in frame}
    records = len(columns[qis[0]])
    originals = {q: [str(v) for v in columns[q]] for q in qis}
    gen = {q: [hierarchies[q].map[v][levels[q]] for v in originals[q]] for q in qis}
    keys = list(zip(*(gen[q] for q in qis)))
    dropped = np.asarray(violates(columns, keys), dtype=bool)
    suppressed = int(dropped.sum())
    sizes = Counter(keys)
    kept_sizes = Counter(k for k, d in zip(keys, dropped) if not d)

    lm = {}
    ncp_total, entropy_total = 0.0, 0.0
    for q in qis:
        h, level = hierarchies[q], levels[q]
        count_orig, count_gen = Counter(originals[q]), Counter(gen[q])
        n_orig = np.array([count_orig[v] for v in originals[q]], dtype=float)
        n_gen = np.array([count_gen[v] for v in gen[q]], dtype=float)
        costs = {label: h.costs(level, label) for label in count_gen}
        lm_cost = np.array([costs[v][0] for v in gen[q]])
        ncp_cost = np.array([costs[v][1] for v in gen[q]])
        lm[q] = float(np.where(dropped, 1.0, lm_cost).sum()) / records
        ncp_total += float(np.where(dropped, 1.0, ncp_cost).sum())
        entropy_total += float(np.where(dropped, np.log2(records / n_orig), np.log2(n_gen / n_orig)).sum())
    values = {
        "loss": sum(lm.values()),
        "ncp": ncp_total,
        "non-uniform-entropy": entropy_total,
        "dm": float(sum(s * s for s in kept_sizes.values()) + records * suppressed),
        "average-class-size": records / (len(kept_sizes) + (1 if suppressed else 0)),
    }
    for name, w in (weights or {}).items():
        values[name] = sum(w[q] * lm[q] for q in qis)
    bounds = {"dm": float(sum(s * s for s in sizes.values())), "average-class-size": records / len(sizes)}
    # Replaced records form one class of their own, which must satisfy the policy too.
    starred = [("<suppressed>",) if d else key for key, d in zip(keys, dropped)]
    star_violates = bool(np.asarray(violates(columns, starred), dtype=bool)[dropped].any())
    return values, suppressed, suppressed <= allowed and not star_violates, bounds


def k_violations(k, sensitive=None, l=None):  # noqa: E741
    """Records of classes smaller than k (or, with ``sensitive``, with fewer than l distinct sensitive values)."""
    def violates(frame, keys):
        sizes = Counter(keys)
        bad = {key for key, size in sizes.items() if size < k}
        if sensitive is not None:
            values = {}
            for key, value in zip(keys, frame[sensitive]):
                values.setdefault(key, set()).add(value)
            bad |= {key for key, vs in values.items() if len(vs) < l}
        return [key in bad for key in keys]
    return violates


def assert_close(got, expected, what):
    assert got == pytest.approx(expected, rel=REL, abs=1e-9), what


# ----------------------------------------------------------------------------------------------- fixtures
@pytest.fixture(scope="module")
def adult_env():
    con = duckdb.connect()
    load_adult(con, "adult")
    frame = con.execute("SELECT * FROM adult").df()
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in ADULT_QIS}
    reference = {q: read_arx(q) for q in ADULT_QIS}
    weights = {"entropy-loss": reference_weights(frame, ADULT_QIS, "entropy"),
               "mi-loss": reference_weights(frame, ADULT_QIS, "mutual-information", LABEL)}
    yield con, frame, hierarchies, reference, weights
    con.close()


def evaluate_all(anon, source, policy, metrics, label=None):
    """Every node of the lattice evaluated by NodeEvaluator, built the way the anonymizer builds it."""
    workspace = anon.workspace
    with bind(workspace, source, policy) as bound, search_run.evaluator(workspace, bound, metrics, label) as evaluator:
        lattice = evaluator.lattice
        evaluator.evaluate_many(list(range(lattice.size)))
        results = [dataclasses.replace(evaluator.results[i], satisfied=evaluator.satisfies(i))
                   for i in range(lattice.size)]
        return lattice, {r.node: r for r in results}, bound.allowed_suppressed


ADULT_CASES = [
    # (models, suppression_limit, max_suppressed, sensitive)
    pytest.param([KAnonymity(5)], 0.0, None, id="k5-nosup"),
    pytest.param([KAnonymity(5)], 0.05, None, id="k5-5pct"),
    pytest.param([KAnonymity(10)], 0.05, None, id="k10-5pct"),
    pytest.param([KAnonymity(10)], 1.0, 100, id="k10-max100"),
    pytest.param([KAnonymity(5), DistinctLDiversity("occupation", 3)], 0.02, None, id="k5-l3-2pct"),
]
# Nodes compared with the pandas reference (every node is compared for the first case).
SOME_NODES = [(0, 0, 0, 0), (1, 0, 1, 0), (2, 1, 0, 1), (0, 0, 1, 2), (3, 0, 1, 1), (4, 1, 1, 2), (1, 1, 0, 2),
              (2, 0, 0, 0)]


@pytest.mark.parametrize("models, limit, maximum", [p.values[:3] for p in ADULT_CASES],
                         ids=[p.id for p in ADULT_CASES])
def test_adult_metrics_match_pandas(adult_env, models, limit, maximum):
    con, frame, hierarchies, reference, weights = adult_env
    sensitive = [m.sensitive for m in models if m.sensitive]
    policy = Policy(quasi_identifiers=hierarchies, models=models, suppression_limit=limit, max_suppressed=maximum,
                    others="insensitive")
    anon = duckanon.connect(con)
    lattice, results, allowed = evaluate_all(anon, "adult", policy, ALL_METRICS, label=LABEL)
    assert lattice.size == 60
    expected_allowed = int(limit * len(frame) + 1e-9)
    assert allowed == (expected_allowed if maximum is None else min(expected_allowed, maximum))
    k = models[0].k
    violates = k_violations(k, sensitive[0], models[1].l) if sensitive else k_violations(k)
    nodes = [lattice.node(i) for i in range(lattice.size)] if limit == 0.05 and k == 5 else SOME_NODES
    space = anon.solution_space("adult", policy, metrics=ALL_METRICS, label=LABEL)
    space_by_node = {tuple(int(v) for v in row[:4]): row for row in space.itertuples(index=False, name=None)}
    columns = {c: frame[c].tolist() for c in [*ADULT_QIS, *sensitive]}
    for node in nodes:
        levels = dict(zip(ADULT_QIS, node))
        values, suppressed, satisfied, bounds = reference_metrics(columns, ADULT_QIS, reference, levels, violates,
                                                                  allowed, weights)
        got = results[node]
        assert got.suppressed == suppressed, node
        assert got.within_limit == (suppressed <= allowed), node
        assert got.satisfied == satisfied, node
        for name in ALL_METRICS:
            assert_close(got.values[name], values[name], (node, name))
        assert_close(got.bounds["dm"], bounds["dm"], (node, "dm bound"))
        assert_close(got.bounds["average-class-size"], bounds["average-class-size"], (node, "acs bound"))
        # solution_space lists exactly the satisfying nodes, with the same values.
        assert (node in space_by_node) == satisfied, node
        if satisfied:
            row = dict(zip(space.columns, space_by_node[node]))
            assert row["suppressed"] == suppressed
            for name in ALL_METRICS:
                assert_close(row[name], values[name], (node, name, "solution_space"))
    # Without suppression the bounds are the metrics themselves.
    for result in results.values():
        if result.suppressed == 0:
            for name in ALL_METRICS:
                assert_close(result.bounds[name], result.values[name], (result.node, name, "bound"))


def test_adult_weights_are_the_definitions(adult_env):
    con, frame, _, _, weights = adult_env
    for metric, kind in (("entropy-loss", "entropy"), ("mi-loss", "mutual-information")):
        table = duckanon.connect(con).attribute_weights("adult", ADULT_QIS, kind, label=LABEL)
        for attribute, weight in zip(table["attribute"], table["weight"]):
            assert_close(weight, weights[metric][attribute], (metric, attribute))


def test_adult_hand_checked_rows(adult_env):
    """A few values worked out by hand from Adult's counts."""
    con, frame, hierarchies, _, _ = adult_env
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(1)], others="insensitive")
    _, results, _ = evaluate_all(duckanon.connect(con), "adult", policy, ALL_METRICS, label=LABEL)
    records = len(frame)
    # Top: every attribute is '*': Loss = 4 (one per attribute), NCP = 4 |D|, DM = |D|², one class.
    top = results[(4, 1, 1, 2)]
    assert_close(top.values["loss"], 4.0, "top loss")
    assert_close(top.values["ncp"], 4.0 * records, "top ncp")
    assert_close(top.values["dm"], float(records) ** 2, "top dm")
    assert_close(top.values["average-class-size"], float(records), "top acs")
    # Entropy at the top: Σ over attributes of Σ_v N(v) log2(|D|/N(v)) = |D| · Σ H(attribute).
    assert_close(top.values["non-uniform-entropy"], records * sum(entropy_bits(frame[q]) for q in ADULT_QIS), "ent")
    # Only sex generalized: Loss 1 (sex has 2 leaves: (2-1)/(2-1)), NCP = |D| · 2/2.
    sex = results[(0, 1, 0, 0)]
    assert_close(sex.values["loss"], 1.0, "sex loss")
    assert_close(sex.values["ncp"], float(records), "sex ncp")
    # Only age to 5-year bands: every age falls in a band of 5 of the 100 leaves... except where the band is cut by
    # the hierarchy's ends; LM per record = (leaves - 1) / 99.
    rows = read_arx("age")
    bands = {r[0]: rows.leaves[1][r[1]] for r in rows.rows}
    expected = sum((bands[str(a)] - 1) / 99 for a in frame["age"]) / records
    assert_close(results[(1, 0, 0, 0)].values["loss"], expected, "age loss")
    # Bottom with k=1: nothing generalized, nothing suppressed.
    bottom = results[(0, 0, 0, 0)]
    for name in ("loss", "ncp", "non-uniform-entropy", "entropy-loss", "mi-loss"):
        assert bottom.values[name] == 0.0
    assert bottom.suppressed == 0


def test_adult_lower_bounds_hold_for_every_generalization(adult_env):
    """lower_bound(node) <= value(w) for every generalization w of every node: what optimal search relies on."""
    con, _, hierarchies, _, _ = adult_env
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(20)], suppression_limit=0.1,
                    others="insensitive")
    lattice, results, _ = evaluate_all(duckanon.connect(con), "adult", policy, ALL_METRICS, label=LABEL)
    assert_bounds_hold(lattice, results, ALL_METRICS)


def assert_bounds_hold(lattice, results, metrics):
    for i in range(lattice.size):
        node = lattice.node(i)
        up = np.flatnonzero(lattice.up_set(i))
        for name in metrics:
            bound = results[node].bounds[name]
            assert bound <= results[node].values[name] * (1 + 1e-12) + 1e-12, (node, name)
            for j in up:
                other = results[lattice.node(int(j))]
                assert bound <= other.values[name] * (1 + 1e-12) + 1e-12, (node, other.node, name)


# ----------------------------------------------------------------------------------------------- by hand
# Six records, two quasi-identifiers: a categorical tree (4 leaves in 2 groups) and numbers in 10-wide intervals
# over [0, 20).
TINY_A = Hierarchy.from_lists([["x1", "X", "*"], ["x2", "X", "*"], ["y1", "Y", "*"], ["y2", "Y", "*"]], name="a")
TINY_B = Hierarchy.intervals(range(20), widths=[10], name="b")
TINY = pd.DataFrame({"a": ["x1", "x2", "x1", "y1", "y1", "y2"], "b": [1, 3, 7, 12, 14, 18],
                     "s": ["p", "q", "p", "q", "p", "q"]})


def tiny_results(con, models, limit, metrics=ALL_METRICS[:5], frame=TINY, hierarchies=None):
    con.register("tiny_frame", frame)
    con.execute("CREATE OR REPLACE TABLE tiny AS SELECT * FROM tiny_frame")
    con.unregister("tiny_frame")
    policy = Policy(quasi_identifiers=hierarchies or {"a": TINY_A, "b": TINY_B}, models=models,
                    suppression_limit=limit, others="insensitive")
    return evaluate_all(duckanon.connect(con), "tiny", policy, metrics)


def test_tiny_interval_hierarchy_shape():
    assert isinstance(TINY_B, IntervalHierarchy)
    assert TINY_B.cuts == [[0.0, 10.0, 20.0]]
    assert TINY_B.levels == 3
    assert {r[0]: r[1] for r in TINY_B.rows}["12"] == "[10, 20)"


def test_tiny_without_suppression_by_hand(con):
    _, results, _ = tiny_results(con, [KAnonymity(3)], 0.0)
    r = results[(1, 1)]
    # classes (X, [00, 10)) and (Y, [10, 20)), 3 records each
    assert r.satisfied and r.suppressed == 0
    # a: (2-1)/(4-1) per record; b: width 10 of domain 20
    assert_close(r.values["loss"], 1 / 3 + 1 / 2, "loss")
    # a: 2/4 per record; b: 10/20 per record; 6 records
    assert_close(r.values["ncp"], 6 * 0.5 + 6 * 0.5, "ncp")
    # a: x1 (2 of 3 X) ×2, x2 (1 of 3) , y1 (2 of 3 Y) ×2, y2; b: every value unique, 3 per interval
    assert_close(r.values["non-uniform-entropy"], 4 * math.log2(3 / 2) + 2 * math.log2(3) + 6 * math.log2(3), "ent")
    assert_close(r.values["dm"], 9 + 9, "dm")
    assert_close(r.values["average-class-size"], 3.0, "acs")
    # Bottom is every record its own class: 6 violate k=3, not allowed.
    assert results[(0, 0)].suppressed == 6 and not results[(0, 0)].satisfied
    # Top: one class of six.
    top = results[(2, 2)]
    assert_close(top.values["loss"], 2.0, "top loss")
    assert_close(top.values["ncp"], 12.0, "top ncp")
    assert_close(top.values["dm"], 36.0, "top dm")


def test_tiny_with_suppression_by_hand(con):
    _, results, allowed = tiny_results(con, [KAnonymity(2)], 0.5)
    assert allowed == 3
    r = results[(0, 1)]
    # classes (x1,[00, 10)) = {1, 7}, (x2,[00, 10)) = {3}, (y1,[10, 20)) = {12, 14}, (y2,[10, 20)) = {18}: 3, 18 go
    assert r.suppressed == 2 and r.satisfied and r.classes == 4
    # a: only the 2 suppressed lose (1 each); b: 4 kept × 0.5 + 2 suppressed × 1
    assert_close(r.values["loss"], 2 / 6 + 4 / 6, "loss")
    assert_close(r.values["ncp"], 2 + 4 * 0.5 + 2, "ncp")
    # a: suppressed x2 and y2 cost log2(6/1) each; b: kept 1, 7, 12, 14 cost log2(3/1), suppressed 3, 18 log2(6/1)
    assert_close(r.values["non-uniform-entropy"], 4 * math.log2(6) + 4 * math.log2(3), "ent")
    assert_close(r.values["dm"], 4 + 4 + 6 * 2, "dm")
    assert_close(r.values["average-class-size"], 6 / 3, "acs")
    # Bounds ignore suppression: Loss counts b only (0.5 each), DM Σ|E|² over all four classes, ACS over four.
    assert_close(r.bounds["loss"], 0.5, "loss bound")
    assert_close(r.bounds["ncp"], 3.0, "ncp bound")
    assert_close(r.bounds["non-uniform-entropy"], 4 * math.log2(3) + 2 * math.log2(3), "ent bound")
    assert_close(r.bounds["dm"], 4 + 1 + 4 + 1, "dm bound")
    assert_close(r.bounds["average-class-size"], 6 / 4, "acs bound")


def test_tiny_matches_reference_everywhere(con):
    for models, limit in (([KAnonymity(2)], 0.5), ([KAnonymity(3)], 0.0), ([KAnonymity(2)], 0.2)):
        lattice, results, allowed = tiny_results(con, models, limit)
        reference = {"a": RefHierarchy(TINY_A.rows), "b": RefHierarchy(TINY_B.rows, (0.0, 20.0))}
        for i in range(lattice.size):
            node = lattice.node(i)
            values, suppressed, satisfied, _ = reference_metrics(
                TINY, ["a", "b"], reference, dict(zip(["a", "b"], node)), k_violations(models[0].k), allowed)
            assert results[node].suppressed == suppressed and results[node].satisfied == satisfied
            for name in ALL_METRICS[:5]:
                assert_close(results[node].values[name], values[name], (node, name))
        assert_bounds_hold(lattice, results, ALL_METRICS[:5])


def test_weighted_loss_by_hand(con):
    """Loss with weights: Σ w_i · (average loss of attribute i)."""
    metric = Loss({"a": 0.25, "b": 0.75}, name="weighted")
    _, results, _ = tiny_results(con, [KAnonymity(2)], 0.5, metrics=[metric, "loss"])
    r = results[(0, 1)]
    assert_close(r.values["weighted"], 0.25 * (2 / 6) + 0.75 * (4 / 6), "weighted")
    r = results[(1, 1)]
    assert_close(r.values["weighted"], 0.25 * (1 / 3) + 0.75 * 0.5, "weighted")


def test_interval_numeric_width_over_domain(con):
    """Numeric loss is the interval's width over the hierarchy's span, level by level; '*' loses 1."""
    frame = pd.DataFrame({"a": ["x1"] * 8, "b": [0, 1, 7, 12, 25, 33, 34, 39], "s": list("pqpqpqpq")})
    b = Hierarchy.intervals(range(40), widths=[5, 20], name="b40")
    lattice, results, _ = tiny_results(con, [KAnonymity(1)], 0.0, frame=frame, hierarchies={"a": TINY_A, "b": b})
    for level, width in ((0, 0.0), (1, 5 / 40), (2, 20 / 40), (3, 1.0)):
        r = results[(0, level)]
        assert_close(r.values["loss"], width, ("loss", level))
        assert_close(r.values["ncp"], 8 * width, ("ncp", level))
    # A hierarchy from explicit, uneven cuts: [00, 10), [10, 40) over a domain of 40.
    uneven = Hierarchy.intervals(range(40), cuts=[[0, 10, 40]], name="b_uneven")
    _, results, _ = tiny_results(con, [KAnonymity(1)], 0.0, frame=frame, hierarchies={"a": TINY_A, "b": uneven})
    expected = (3 * 10 / 40 + 5 * 30 / 40) / 8
    assert_close(results[(0, 1)].values["loss"], expected, "uneven loss")
    assert_close(results[(0, 1)].values["ncp"], 8 * expected, "uneven ncp")


def test_record_cost_categorical_single_leaf_and_top():
    """A value whose generalization covers only itself is not generalized: LM 0 and NCP 0 (Xu et al.: NCP is 0 when
    card(u) = 1).  A top level that is not one value is costed by its leaves like any other level."""
    h = Hierarchy.from_lists([["a", "ab", "abc"], ["b", "ab", "abc"], ["c", "c", "abc"], ["d", "d", "d"]])
    assert record_cost(h, 0, "a", h.leaves_under(0)) == (0.0, 0.0)
    assert record_cost(h, 1, "ab", h.leaves_under(1)) == pytest.approx((1 / 3, 2 / 4))
    assert record_cost(h, 1, "c", h.leaves_under(1)) == (0.0, 0.0)
    assert record_cost(h, 2, "abc", h.leaves_under(2)) == pytest.approx((2 / 3, 3 / 4))
    assert record_cost(h, 2, "d", h.leaves_under(2)) == (0.0, 0.0)
    star = Hierarchy.from_lists([["a", "*"], ["b", "*"]])
    assert record_cost(star, 1, "*", star.leaves_under(1)) == (1.0, 1.0)


def test_single_leaf_groups_end_to_end(con):
    a = Hierarchy.from_lists([["x1", "X", "*"], ["x2", "X", "*"], ["y1", "y1", "*"], ["y2", "y2", "*"]], name="a2")
    lattice, results, _ = tiny_results(con, [KAnonymity(1)], 0.0, hierarchies={"a": a, "b": TINY_B})
    r = results[(1, 0)]
    # x1, x2, x1 generalize to X (2 of 4 leaves); y1, y1, y2 stay themselves.
    assert_close(r.values["loss"], 3 * (1 / 3) / 6, "loss")
    assert_close(r.values["ncp"], 3 * 0.5, "ncp")
    assert_close(r.values["non-uniform-entropy"], 2 * math.log2(3 / 2) + math.log2(3), "ent")


# ----------------------------------------------------------------------------------------------- NodeTotals level
def totals(**kw):
    base = dict(records=10, suppressed=0, classes=3, kept_classes=3, squares=34.0, kept_squares=34.0, costs={})
    base.update(kw)
    return NodeTotals(**base)


def test_metric_formulas_on_totals():
    t = totals(suppressed=3, classes=4, kept_classes=2, squares=40.0, kept_squares=30.0,
               costs={"loss": (5.0, 3.0, 6.0), "ncp": (5.0, 3.0, 6.0), "non-uniform-entropy": (5.0, 3.0, 6.0)})
    assert Discernibility().value(t) == 30 + 10 * 3
    assert Discernibility().lower_bound(t) == 40
    assert AverageClassSize().value(t) == 10 / 3
    assert AverageClassSize().lower_bound(t) == 10 / 4
    assert Loss().value(t) == pytest.approx(0.9) and Loss().lower_bound(t) == pytest.approx(0.5)
    assert NormalizedCertaintyPenalty().value(t) == 9.0 and NormalizedCertaintyPenalty().lower_bound(t) == 5.0
    assert NonUniformEntropy().value(t) == 9.0
    no_sup = totals()
    assert AverageClassSize().value(no_sup) == AverageClassSize().lower_bound(no_sup) == 10 / 3
    assert Discernibility().value(no_sup) == Discernibility().lower_bound(no_sup) == 34.0


def test_metric_names_and_weights():
    arx = {"arx-loss", "arx-loss-rank", "dm-star", "arx-entropy", "arx-nm-entropy", "arx-precision",
           "arx-precision-monotone", "arx-height", "arx-ebil", "arx-ambiguity", "arx-aecs", "arx-kl"}
    assert set(metric_names()) == {*ALL_METRICS, *arx}
    assert set(METRICS) == {*ALL_METRICS[:5], *arx}
    assert Loss().weights(["a", "b"]) == {"a": 1.0, "b": 1.0}
    with pytest.raises(duckanon.PolicyError, match="'b'"):
        Loss({"a": 1.0}).weights(["a", "b"])


def test_lattice_numbering():
    lattice = Lattice(["a", "b", "c"], [5, 2, 3])
    assert lattice.size == 30 and lattice.height == 4 + 1 + 2
    for i in range(lattice.size):
        node = lattice.node(i)
        assert lattice.index(node) == i
        assert set(lattice.successors(i)) == {lattice.index(n) for n in _neighbours(node, lattice, +1)}
        assert set(lattice.predecessors(i)) == {lattice.index(n) for n in _neighbours(node, lattice, -1)}
        up = {lattice.node(int(j)) for j in np.flatnonzero(lattice.up_set(i))}
        every = itertools.product(range(5), range(2), range(3))
        assert up == {n for n in every if all(x >= y for x, y in zip(n, node))}
    order = [lattice.node(int(i)) for i in lattice.by_height()]
    assert [sum(n) for n in order] == sorted(sum(n) for n in order)
    assert lattice.levels_of((1, 0, 2)) == {"a": 1, "b": 0, "c": 2}
    assert lattice.node_of({"a": 1, "b": 0, "c": 2}) == (1, 0, 2)
    with pytest.raises(ValueError):
        Lattice([], [])


def _neighbours(node, lattice, step):
    for i in range(len(node)):
        moved = list(node)
        moved[i] += step
        if 0 <= moved[i] < lattice.levels[i]:
            yield tuple(moved)


@pytest.mark.parametrize("kind", ["sql", "memory"])
def test_null_in_an_interval_quasi_identifier_costs_nothing(kind):
    """NULL stays NULL on every level, so it loses nothing; it once made the search fail on its (missing) interval.
    By hand: [20, 30) and [30, 40) each cover half the domain 20-40, so six records lose 0.5 and the two NULLs 0."""
    con = duckdb.connect()
    con.execute("CREATE TABLE t AS SELECT * FROM (VALUES (21), (25), (NULL), (33), (37), (NULL), (22), (38)) v(b)")
    policy = Policy(quasi_identifiers={"b": Hierarchy.intervals(range(20, 40), widths=[10], name="b")},
                    models=[KAnonymity(2)])
    result = duckanon.connect(con).search("t", policy, metric="loss", evaluator=kind)
    assert result.levels == {"b": 1} and result.best.suppressed == 0
    assert math.isclose(result.best.values["loss"], 6 * 0.5 / 8)
    con.close()
