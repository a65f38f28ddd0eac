"""Lattice search: every strategy against brute force (every node evaluated), on random tables and on Adult.

Brute force evaluates every node of the lattice with one NodeEvaluator (built the way the anonymizer builds it) and
takes the minimum over the satisfying nodes; the strategies run on fresh evaluators so that no cached result helps
them.  The tests that evaluate nodes run on every evaluator (SQL and in process), each against its own brute force;
test_evaluator_agreement.py holds the two to the same result node by node.  Metric values themselves are checked
against pandas in test_metrics.py.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import math
import os
from collections import Counter

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from search_data import LABEL, adult_setup, on_every_evaluator, setup_table, tables

import duckanon
from duckanon import (
    AlphaKAnonymity,
    DistinctLDiversity,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyError,
    PolicyNotSatisfied,
    PSensitiveKAnonymity,
    RecursiveCLDiversity,
    TCloseness,
)
from duckanon.encode.binding import bind
from duckanon.search import run as search_run
from duckanon.search import sql_evaluator
from duckanon.search.strategies import (
    ExhaustiveSearch,
    OptimalSearch,
    SamaratiSearch,
    solution_space,
    tag_by_paths,
)
from duckanon.utility.metrics import metric_names

METRICS = ["loss", "dm", "ncp", "non-uniform-entropy", "average-class-size", "entropy-loss", "mi-loss"]
SEED002_QIS = ["age", "sex", "race", "marital-status"]


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-9)


@contextlib.contextmanager
def evaluator(anon, source, policy, metrics, label=None, kind="auto"):
    """The evaluator (of ``kind``: auto, memory, sql) over ``source`` for ``policy``, as Anonymizer.search builds it
    (objective: metrics[0])."""
    workspace = anon.workspace
    with bind(workspace, source, policy) as bound, search_run.evaluator(workspace, bound, metrics, label,
                                                                        kind) as ev:
        yield ev


def brute_force(anon, source, policy, metrics=METRICS, label=LABEL, kind="auto"):
    """Every node's result, from one evaluator that evaluates the whole lattice; and the evaluator's monotone flag."""
    with evaluator(anon, source, policy, metrics, label, kind) as ev:
        ev.evaluate_many(list(range(ev.lattice.size)))
        # Resolve the suppressed records' own class wherever a query is needed for it.
        results = [dataclasses.replace(ev.results[i], satisfied=ev.satisfies(i)) for i in range(ev.lattice.size)]
        return {r.node: r for r in results}, ev.monotone, ev.lattice


def best_value(results, metric, nodes=None):
    values = [r.values[metric] for r in results.values() if r.satisfied and (nodes is None or r.node in nodes)]
    return min(values) if values else None


# ----------------------------------------------------------------------------------------------- random tables
MODEL_KINDS = ["k", "distinct-l", "entropy-l", "alpha-k", "t-closeness", "t-ordered", "recursive-cl", "p-sensitive"]
SUPPRESSION = [(0.0, None), (0.05, None), (0.2, None), (1.0, 0), (1.0, 4), (1.0, 15)]


@st.composite
def policies(draw, frame, hierarchies, kinds=MODEL_KINDS):
    shares = frame["s"].value_counts(normalize=True)
    models = []
    for kind in draw(st.lists(st.sampled_from(kinds), min_size=1, max_size=2, unique=True)):
        k = draw(st.integers(2, 6))
        if kind == "k":
            models.append(KAnonymity(k))
        elif kind == "distinct-l":
            models.append(DistinctLDiversity("s", 2))
        elif kind == "entropy-l":
            models.append(EntropyLDiversity("s", draw(st.sampled_from([1.2, 1.5, 2.0]))))
        elif kind == "alpha-k":
            top = float(shares.max())
            models.append(AlphaKAnonymity("s", min(1.0, top + (1 - top) * draw(st.sampled_from([0.2, 0.5, 0.8]))),
                                          k))
        elif kind in ("t-closeness", "t-ordered"):
            models.append(TCloseness("s", draw(st.sampled_from([0.15, 0.3, 0.5])),
                                     distance="equal" if kind == "t-closeness" else "ordered"))
        elif kind == "recursive-cl":
            models.append(RecursiveCLDiversity("s", draw(st.sampled_from([2.0, 3.0])), 2))
        else:
            models.append(PSensitiveKAnonymity("s", 2, k))
    limit, maximum = draw(st.sampled_from(SUPPRESSION))
    return Policy(quasi_identifiers=hierarchies, models=models, sensitive=["s"], insensitive=[LABEL],
                  suppression_limit=limit, max_suppressed=maximum)


def brute_or_reject(anon, policy, kind):
    try:
        return brute_force(anon, "t", policy, kind=kind)
    except PolicyError as error:
        # Parameters no release of this table can meet (e.g. l above the distinct values): not a search case.
        assume(False)
        raise AssertionError("unreachable") from error


# DUCKANON_SEARCH_EXAMPLES=<n> runs n random examples per property (fresh ones each run) instead of the few fixed
# ones the suite runs in its time budget.
EXAMPLES = int(os.environ.get("DUCKANON_SEARCH_EXAMPLES", "0"))
SETTINGS = settings(max_examples=EXAMPLES or 8, deadline=None, suppress_health_check=list(HealthCheck),
                    derandomize=not EXAMPLES)


@settings(max_examples=EXAMPLES or 12, deadline=None, suppress_health_check=list(HealthCheck),
          derandomize=not EXAMPLES)
@given(data=st.data())
@on_every_evaluator
def test_optimal_equals_exhaustive(data, kind):
    frame, hierarchies = data.draw(tables())
    policy = data.draw(policies(frame, hierarchies))
    con, anon = setup_table(frame)
    results, monotone, lattice = brute_or_reject(anon, policy, kind)
    # What optimal search's pruning relies on: a node's bound is at most the value of the node and of every
    # generalization of it, satisfying or not.
    for metric in METRICS:
        values = np.array([results[lattice.node(i)].values[metric] for i in range(lattice.size)])
        for i in range(lattice.size):
            bound = results[lattice.node(i)].bounds[metric]
            assert bound <= values[lattice.up_set(i)].min() * (1 + 1e-12) + 1e-12, (lattice.node(i), metric)
    # Three metrics an example keeps the file's runtime down; every metric is also run on the fixed tables below.
    metrics = data.draw(st.lists(st.sampled_from(METRICS), min_size=3, max_size=3, unique=True))
    with bind(anon.workspace, "t", policy) as bound:
        for metric in metrics:
            expected = best_value(results, metric)
            with search_run.evaluator(anon.workspace, bound, [metric], LABEL, kind) as ev:
                assert ev.monotone == monotone
                found = OptimalSearch().search(ev)
            assert found.checks <= lattice.size
            assert found.found == (expected is not None), (metric, found.summary())
            if expected is not None:
                assert close(found.best.values[metric], expected), (metric, found.summary(), expected)
                assert results[found.best.node].satisfied
                assert close(results[found.best.node].values[metric], found.best.values[metric])
            # ExhaustiveSearch evaluates node by node: run it itself on the smaller lattices only.
            if metric == metrics[0] and lattice.size <= 48:
                with search_run.evaluator(anon.workspace, bound, [metric], LABEL, kind) as ev:
                    exhaustive = ExhaustiveSearch().search(ev)
                assert exhaustive.checks == lattice.size
                assert found.checks <= exhaustive.checks
                assert exhaustive.found == found.found
                if expected is not None:
                    assert close(exhaustive.best.values[metric], expected)
    con.close()


@SETTINGS
@given(data=st.data())
@on_every_evaluator
def test_tags_samarati_and_solution_space_match_brute_force(data, kind):
    frame, hierarchies = data.draw(tables())
    policy = data.draw(policies(frame, hierarchies))
    con, anon = setup_table(frame)
    results, monotone, lattice = brute_or_reject(anon, policy, kind)
    satisfied = {node for node, r in results.items() if r.satisfied}
    within = {node for node, r in results.items() if r.within_limit}
    assert satisfied <= within
    if monotone:
        # The models' claim: the nodes within the suppression limit are closed upwards.  (Satisfying ones need not
        # be: generalizing may shrink the suppressed records' own class below what the policy needs.)
        for node in within:
            for i in np.flatnonzero(lattice.up_set(lattice.index(node))):
                assert lattice.node(int(i)) in within, (node, lattice.node(int(i)), policy.describe())
        with evaluator(anon, "t", policy, ["loss"], LABEL, kind) as ev:
            tags = tag_by_paths(ev)
            assert {lattice.node(int(i)) for i in np.flatnonzero(tags)} == within
            assert ev.checks <= lattice.size
    # Samarati: the best node of the lowest height at which any node satisfies.
    metric = data.draw(st.sampled_from(METRICS))
    with evaluator(anon, "t", policy, [metric], LABEL, kind) as ev:
        found = SamaratiSearch().search(ev)
    if found.found:
        assert found.best.node in satisfied
    heights = {sum(n) for n in satisfied}
    if monotone and heights == set(range(min(heights, default=0), lattice.height + 1)):
        # Binary search on height is exact when every height from the lowest satisfying one up has a satisfying node.
        assert found.found == bool(satisfied)
        if satisfied:
            lowest = min(heights)
            assert sum(found.best.node) == lowest, (found.summary(), lowest)
            at_lowest = {n for n in satisfied if sum(n) == lowest}
            assert close(found.best.values[metric], best_value(results, metric, at_lowest))
    # The solution space: exactly the satisfying nodes, with every metric's value.
    with evaluator(anon, "t", policy, METRICS, LABEL, kind) as ev:
        space = solution_space(ev)
    attributes = list(hierarchies)
    assert list(space.columns) == [*attributes, "suppressed", "classes", *METRICS]
    listed = {tuple(int(v) for v in row[:len(attributes)]): dict(zip(space.columns, row))
              for row in space.itertuples(index=False, name=None)}
    assert len(listed) == len(space) and set(listed) == satisfied
    for node, row in listed.items():
        assert row["suppressed"] == results[node].suppressed
        assert row["classes"] == results[node].classes
        for metric in METRICS:
            assert close(row[metric], results[node].values[metric]), (node, metric)
    con.close()


# ----------------------------------------------------------------------------------------------- fixed cases
# A table where generalization reduces suppression: the non-monotone-metric case optimal search must get right.
def non_monotone_table():
    a = Hierarchy.from_lists([["a1", "A", "*"], ["a2", "A", "*"], ["a3", "B", "*"], ["a4", "B", "*"]], name="a")
    b = Hierarchy.from_lists([["b1", "*"], ["b2", "*"]], name="b")
    rows = ([("a1", "b1")] * 5 + [("a2", "b1")] * 1 + [("a3", "b2")] * 5 + [("a4", "b2")] * 1
            + [("a1", "b2")] * 2)
    frame = pd.DataFrame(rows, columns=["a", "b"])
    frame["s"] = ["x", "y"] * (len(frame) // 2)
    frame[LABEL] = ["c0", "c1", "c1"] * (len(frame) // 3) + ["c0"] * (len(frame) % 3)
    return frame, {"a": a, "b": b}


@pytest.mark.parametrize("limit", [0.0, 0.15, 1.0])
@on_every_evaluator
def test_fixed_table_all_strategies_every_metric(limit, kind):
    frame, hierarchies = non_monotone_table()
    con, anon = setup_table(frame)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(3)], sensitive=["s"], insensitive=[LABEL],
                    suppression_limit=limit)
    results, monotone, lattice = brute_force(anon, "t", policy, kind=kind)
    assert monotone
    for metric in METRICS:
        expected = best_value(results, metric)
        result = anon.search("t", policy, metric=metric, strategy="optimal", label=LABEL, evaluator=kind)
        assert result.found == (expected is not None)
        assert close(result.best.values[metric], expected), (metric, result.summary())
        with evaluator(anon, "t", policy, [metric], LABEL, kind) as ev:
            exhaustive = ExhaustiveSearch().search(ev)
        assert exhaustive.checks == lattice.size >= result.checks
        assert close(exhaustive.best.values[metric], expected), (metric, exhaustive.summary())
    con.close()


# ----------------------------------------------------------------------------------------------- seed 002 on Adult
@pytest.fixture(scope="module")
def adult():
    con, anon, hierarchies = adult_setup(SEED002_QIS)
    yield con, anon, hierarchies
    con.close()


def seed002_policy(hierarchies, k, max_sup):
    return Policy(quasi_identifiers=hierarchies, models=[KAnonymity(k)], suppression_limit=1.0,
                  max_suppressed=max_sup, others="insensitive")


@pytest.mark.parametrize("k", [5, 10, 20])
@on_every_evaluator
def test_seed002_samarati_lowest_height(adult, k, kind):
    con, anon, hierarchies = adult
    metrics = ["loss", "dm", "non-uniform-entropy"]
    # Suppressed records and metric values do not depend on MaxSup: brute force once per k, without a cap.
    results, monotone, lattice = brute_force(anon, "adult", seed002_policy(hierarchies, k, None), metrics=metrics,
                                             label=None, kind=kind)
    assert lattice.size == 60
    for max_sup in (50, 100, 200):
        policy = seed002_policy(hierarchies, k, max_sup)
        satisfied = {n for n, r in results.items() if r.suppressed <= max_sup}
        lowest = min(sum(n) for n in satisfied)
        at_lowest = {n for n in satisfied if sum(n) == lowest}
        with bind(anon.workspace, "adult", policy) as bound:
            assert bound.allowed_suppressed == max_sup
            for metric in metrics:
                with search_run.evaluator(anon.workspace, bound, [metric], None, kind) as ev:
                    assert ev.monotone
                    result = SamaratiSearch().search(ev)
                assert result.found and sum(result.best.node) == lowest, (k, max_sup, metric, result.summary())
                assert result.best.node in at_lowest and result.best.suppressed <= max_sup
                expected = min(results[n].values[metric] for n in at_lowest)
                assert close(result.best.values[metric], expected), (k, max_sup, metric)


@on_every_evaluator
def test_seed002_rows_by_hand(adult, kind):
    """Two rows of seed 002's setting checked with plain Python: k=10, MaxSup=200 reaches height 2 only at
    [1, 0, 1, 0] (suppressing 167 records); k=5, MaxSup=100 reaches height 2, where [1, 0, 1, 0] suppresses 77."""
    con, anon, hierarchies = adult
    combos = Counter(con.execute('SELECT age, sex, race, "marital-status" FROM adult').fetchall())
    maps = [{row[0]: row for row in hierarchies[q].rows} for q in SEED002_QIS]

    def suppressed(node, k):
        classes = Counter()
        for combo, n in combos.items():
            classes[tuple(m[str(v)][level] for m, v, level in zip(maps, combo, node))] += n
        return sum(n for n in classes.values() if n < k)

    def lowest(k, max_sup):
        nodes = [n for n in itertools.product(range(5), range(2), range(2), range(3)) if suppressed(n, k) <= max_sup]
        height = min(map(sum, nodes))
        return height, sorted(n for n in nodes if sum(n) == height)

    assert lowest(10, 200) == (2, [(1, 0, 1, 0)])
    assert suppressed((1, 0, 1, 0), 10) == 167
    result = anon.search("adult", seed002_policy(hierarchies, 10, 200), metric="loss", strategy="samarati",
                         evaluator=kind)
    assert result.levels == {"age": 1, "sex": 0, "race": 1, "marital-status": 0}
    assert result.best.suppressed == 167
    height, nodes = lowest(5, 100)
    assert height == 2 and (1, 0, 1, 0) in nodes and suppressed((1, 0, 1, 0), 5) == 77
    result = anon.search("adult", seed002_policy(hierarchies, 5, 100), metric="loss", strategy="samarati",
                         evaluator=kind)
    assert sum(result.best.node) == 2 and result.best.node in nodes


@on_every_evaluator
def test_adult_optimal_checks_fewer_nodes(adult, kind):
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(10)], suppression_limit=0.01,
                    others="insensitive")
    for metric in ("dm", "average-class-size"):
        exhaustive = anon.search("adult", policy, metric=metric, strategy="exhaustive", evaluator=kind)
        optimal = anon.search("adult", policy, metric=metric, strategy="optimal", evaluator=kind)
        assert exhaustive.checks == 60
        assert optimal.checks <= exhaustive.checks
        assert close(optimal.best.values[metric], exhaustive.best.values[metric])


def test_snapshots_change_no_result(adult, monkeypatch):
    """Evaluating from snapshots (tables grouped at an evaluated node, used above 100,000 rows) gives every node the
    same result as evaluating from the frequency table; forced on here for Adult's few thousand rows."""
    con, anon, hierarchies = adult
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5), TCloseness("occupation", 0.3)],
                    sensitive=["occupation"], suppression_limit=0.03, others="insensitive")
    metrics = ["loss", "dm", "ncp", "non-uniform-entropy", "average-class-size"]
    plain, _, lattice = brute_force(anon, "adult", policy, metrics=metrics, label=None, kind="sql")
    monkeypatch.setattr(sql_evaluator, "SNAPSHOT_SOURCE_ROWS", 0)
    monkeypatch.setattr(sql_evaluator, "SNAPSHOT_REDUCTION", 2)
    with evaluator(anon, "adult", policy, metrics, kind="sql") as ev:
        found = OptimalSearch().search(ev)
        for i in lattice.by_height():  # lowest first, so later nodes come from snapshots
            ev.evaluate(int(i))
        assert len(ev.snapshots) > 1
        snapped = {r.node: r for r in ev.results.values()}
    assert close(found.best.values["loss"], best_value(plain, "loss"))
    for node, result in plain.items():
        assert snapped[node].suppressed == result.suppressed and snapped[node].classes == result.classes, node
        for metric in metrics:
            assert close(snapped[node].values[metric], result.values[metric]), (node, metric)
            assert close(snapped[node].bounds[metric], result.bounds[metric]), (node, metric)


# ----------------------------------------------------------------------------------------------- bad input
@pytest.fixture
def small(con):
    frame, hierarchies = non_monotone_table()
    frame["constant"] = "same"
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    return duckanon.connect(con), hierarchies


def small_policy(hierarchies, **kw):
    return Policy(quasi_identifiers=hierarchies, models=[KAnonymity(2)], sensitive=["s"], others="insensitive", **kw)


def test_quasi_identifier_without_hierarchy(small):
    anon, hierarchies = small
    policy = Policy(quasi_identifiers={"a": None, "b": hierarchies["b"]}, models=[KAnonymity(2)], others="insensitive")
    with pytest.raises(PolicyError, match="'a'.*hierarchy"):
        anon.search("t", policy)
    with pytest.raises(PolicyError, match="'a'"):
        anon.solution_space("t", policy)


def test_quasi_identifier_with_unknown_stored_hierarchy(small):
    anon, hierarchies = small
    policy = Policy(quasi_identifiers={"a": "no_such_hierarchy", "b": hierarchies["b"]}, models=[KAnonymity(2)],
                    others="insensitive")
    with pytest.raises(duckanon.AnonymizationError, match="no_such_hierarchy"):
        anon.search("t", policy)


@pytest.mark.parametrize("limit", [-0.1, 1.5, float("nan"), True, "0.1"])
def test_suppression_limit_outside_unit_interval(small, limit):
    _, hierarchies = small
    with pytest.raises(PolicyError, match="suppression_limit"):
        small_policy(hierarchies, suppression_limit=limit)


@pytest.mark.parametrize("maximum", [-1, 2.5, True])
def test_max_suppressed_invalid(small, maximum):
    _, hierarchies = small
    with pytest.raises(PolicyError, match="max_suppressed"):
        small_policy(hierarchies, suppression_limit=1.0, max_suppressed=maximum)


def test_max_suppressed_caps_the_share(small):
    _, hierarchies = small
    assert small_policy(hierarchies, suppression_limit=1.0, max_suppressed=3).allowed_suppressed(14) == 3
    assert small_policy(hierarchies, suppression_limit=0.1, max_suppressed=3).allowed_suppressed(14) == 1
    assert small_policy(hierarchies, suppression_limit=0.5).allowed_suppressed(14) == 7


def test_mi_loss_label_problems(small):
    anon, hierarchies = small
    policy = small_policy(hierarchies)
    with pytest.raises(PolicyError, match="label"):
        anon.search("t", policy, metric="mi-loss")
    with pytest.raises(PolicyError, match="'constant'.*one value"):
        anon.search("t", policy, metric="mi-loss", label="constant")
    with pytest.raises(PolicyError, match="'nope' is not a column"):
        anon.search("t", policy, metric="mi-loss", label="nope")
    with pytest.raises(PolicyError, match="'a'"):
        anon.search("t", policy, metric="mi-loss", label="a")
    with pytest.raises(PolicyError, match="label"):
        anon.solution_space("t", policy, metrics=["loss", "mi-loss"])
    # With a real label it works.
    assert anon.search("t", policy, metric="mi-loss", label=LABEL).found


def test_unknown_metric_lists_the_known(small):
    anon, hierarchies = small
    with pytest.raises(PolicyError, match="unknown metric 'lm'") as error:
        anon.search("t", small_policy(hierarchies), metric="lm")
    for name in metric_names():
        assert name in str(error.value)
    with pytest.raises(PolicyError, match="unknown metric"):
        anon.solution_space("t", small_policy(hierarchies), metrics=["loss", "precision"])


def test_unknown_strategy_lists_the_known(small):
    anon, hierarchies = small
    with pytest.raises(PolicyError, match="unknown search strategy 'greedy'") as error:
        anon.search("t", small_policy(hierarchies), strategy="greedy")
    for name in ("optimal", "samarati", "exhaustive"):
        assert name in str(error.value)
    with pytest.raises(PolicyError, match="unknown search strategy"):
        anon.anonymize("t", small_policy(hierarchies), "never.duckdb", strategy="greedy")


def unsatisfiable(con):
    """'a' tops out in two values, and 'B' holds one record: k=3 fails everywhere, suppressing 1 record at best."""
    a = Hierarchy.from_lists([["a1", "A"], ["a2", "A"], ["b1", "B"]], name="a_two_tops")
    b = Hierarchy.from_lists([["x", "*"], ["z", "*"]], name="b_two")
    frame = pd.DataFrame({"a": ["a1"] * 3 + ["a2"] * 3 + ["b1"], "b": ["x", "z", "x", "x", "z", "x", "x"]})
    con.register("frame", frame)
    con.execute("CREATE TABLE u AS SELECT * FROM frame")
    con.unregister("frame")
    return duckanon.connect(con), Policy(quasi_identifiers={"a": a, "b": b}, models=[KAnonymity(3)])


@pytest.mark.parametrize("strategy", ["optimal", "samarati", "exhaustive"])
@on_every_evaluator
def test_no_satisfying_node(con, tmp_path, strategy, kind):
    anon, policy = unsatisfiable(con)
    result = anon.search("u", policy, metric="loss", strategy=strategy, evaluator=kind)
    assert not result.found and result.best is None
    summary = result.summary()
    assert "no transformation satisfies" in summary
    # (a=0, b=1) has classes a1 (3), a2 (3), b1 (1) and (a=1, b=1) A (6), B (1): 1 record is the fewest any node
    # suppresses.  Exhaustive search, having seen every node, names the lower of the two.
    assert result.closest.suppressed == 1
    if strategy == "exhaustive":
        assert result.closest.node == (0, 1)
    levels = dict(zip(["a", "b"], result.closest.node))
    assert f"{levels}, would suppress 1 records" in summary
    target = tmp_path / "release.duckdb"
    with pytest.raises(PolicyNotSatisfied, match="no transformation satisfies"):
        anon.anonymize("u", policy, target, strategy=strategy, evaluator=kind)
    assert not target.exists()
    space = anon.solution_space("u", policy, evaluator=kind)
    assert space.empty and "loss" in space.columns


@on_every_evaluator
def test_found_summary_and_levels(small, kind):
    anon, hierarchies = small
    result = anon.search("t", small_policy(hierarchies, suppression_limit=0.2), metric="dm", evaluator=kind)
    assert result.found
    assert set(result.levels) == {"a", "b"}
    assert "dm =" in result.summary() and "records suppressed" in result.summary()


@on_every_evaluator
def test_closest_is_the_least_suppressing_node(con, kind):
    """Entropy l-diversity without suppression is monotone, so optimal search stops at the failing top (all 20
    records suppressed); yet (a=0, b=0) keeps its diverse class and suppresses only 16."""
    a = Hierarchy.from_lists([["a1", "*"], ["a2", "*"]], name="a")
    b = Hierarchy.from_lists([["b1", "*"], ["b2", "*"]], name="b")
    frame = pd.DataFrame([("a1", "b1", "x"), ("a1", "b1", "y")] * 2 + [("a2", "b2", "x")] * 16, columns=["a", "b", "s"])
    con.register("frame", frame)
    con.execute("CREATE TABLE e AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers={"a": a, "b": b}, models=[EntropyLDiversity("s", 1.8)], sensitive=["s"])
    assert anon.search("e", policy, strategy="exhaustive", evaluator=kind).closest.suppressed == 16
    result = anon.search("e", policy, strategy="optimal", evaluator=kind)
    assert not result.found
    assert result.closest.suppressed == 16, result.summary()


@on_every_evaluator
def test_anonymize_publishes_what_search_found(con, tmp_path, kind):
    """k=3, at most 2 of 14 records suppressed: (a=1, b=0) suppresses 2 records, but their replaced '*' class of 2
    violates k=3 (publishing it would take 8 suppressed); the search must pass it over for (a=2, b=0)."""
    frame, hierarchies = non_monotone_table()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(3)], sensitive=["s"], insensitive=[LABEL],
                    suppression_limit=0.15)
    result, release = anon.anonymize("t", policy, tmp_path / "r.duckdb", metric="loss", evaluator=kind)
    assert result.levels == {"a": 2, "b": 0}, result.summary()
    assert release.suppressed == result.best.suppressed == 0


@pytest.mark.parametrize("outlier_values, chosen", [(("x", "x"), {"a": 1, "b": 0}), (("y", "x"), {"a": 0, "b": 0})])
@on_every_evaluator
def test_suppressed_class_must_be_diverse(con, tmp_path, outlier_values, chosen, kind):
    """Distinct 2-diversity, 2 of 14 records may be suppressed.  At the bottom node the two one-record classes
    (a2, b1) and (a4, b2) violate; replaced by '*' they form one class, diverse only if their values differ.  Loss by
    hand: bottom 2 × 2/14 = 0.286 (suppressed records lose 1 on both attributes), (a=1, b=0) 1/3, (a=0, b=1) 1."""
    a = Hierarchy.from_lists([["a1", "A", "*"], ["a2", "A", "*"], ["a3", "B", "*"], ["a4", "B", "*"]], name="a")
    b = Hierarchy.from_lists([["b1", "*"], ["b2", "*"]], name="b")
    rows = ([("a1", "b1", v) for v in "xyxyxy"] + [("a3", "b2", v) for v in "xyxyxy"]
            + [("a2", "b1", outlier_values[0]), ("a4", "b2", outlier_values[1])])
    con.register("frame", pd.DataFrame(rows, columns=["a", "b", "s"]))
    con.execute("CREATE TABLE d AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers={"a": a, "b": b}, models=[DistinctLDiversity("s", 2)], sensitive=["s"],
                    max_suppressed=2)
    for strategy in ("optimal", "exhaustive", "samarati"):
        assert anon.search("d", policy, metric="loss", strategy=strategy, evaluator=kind).levels == chosen, strategy
    result, release = anon.anonymize("d", policy, tmp_path / "d.duckdb", metric="loss", evaluator=kind)
    assert release.suppressed == result.best.suppressed == (2 if chosen == {"a": 0, "b": 0} else 0)
    released = duckdb.connect(str(release.path), read_only=True).execute("SELECT a, b, s FROM release").df()
    for _, group in released.groupby(["a", "b"]):
        assert group["s"].nunique() >= 2
