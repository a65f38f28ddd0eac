"""Drop mode with a model that compares with the whole table (t-closeness): search, check and publish agree.

Dropped records leave the table, so t-closeness compares each kept class with the kept records' distribution; drop
mode suppresses to a fixed point (drop what violates, recompute the distribution of what is kept, drop what violates
now, until nothing does).  Every count here is recomputed by hand with plain pandas group-bys; the equal distance is
half the L1 distance between a class's distribution and the kept records'.
"""

from __future__ import annotations

import contextlib
import math
import tempfile
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from adult_files import arx_map
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from search_data import on_every_evaluator

import duckanon
from duckanon import (
    DistinctLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyError,
    PolicyNotSatisfied,
    TCloseness,
)
from duckanon.datasets import adult_hierarchy_dir, load_adult
from duckanon.encode.binding import bind
from duckanon.search import run as search_run
from duckanon.search.strategies import ExhaustiveSearch, OptimalSearch

SEED002_QIS = ["age", "sex", "race", "marital-status"]
# The issue's node: a search comparing with the whole table's distribution counted 1,486 suppressed records here,
# within the 5 % limit (1,508), but once those are dropped more classes stray from the kept records' distribution.
ISSUE_NODE = {"age": 4, "sex": 0, "race": 0, "marital-status": 2}


def drop_fixed_point(frame: pd.DataFrame, quasi: list[str], sensitive: str, *, k: int = 1, t: float | None = None,
                     l: int = 1) -> pd.Series:  # noqa: E741
    """By hand: which records drop mode drops.  Classes are the distinct generalized quasi-identifier values (NULL a
    value of its own); a class violates when smaller than k, with fewer than l distinct sensitive values, or (equal
    distance) farther than t from the distribution of the records still kept."""
    classes = frame.groupby(quasi, dropna=False, sort=False).ngroup()
    values = frame[sensitive].fillna("<null>")
    dropped = pd.Series(False, index=frame.index)
    while True:
        kept = ~dropped
        counts = pd.crosstab(classes[kept], values[kept])
        if counts.empty:
            return dropped
        sizes = counts.sum(axis=1)
        bad = (sizes < k) | ((counts > 0).sum(axis=1) < l)
        if t is not None:
            shares = counts.div(sizes, axis=0)
            overall = counts.sum(axis=0) / sizes.sum()
            bad |= shares.sub(overall, axis=1).abs().sum(axis=1) / 2 > t + 1e-9
        if not bad.any():
            return dropped
        dropped |= classes.isin(sizes.index[bad])


# ----------------------------------------------------------------------------------------------------------- Adult
@pytest.fixture(scope="module")
def adult():
    con = duckdb.connect()
    load_adult(con, "adult")
    yield con, duckanon.connect(con), con.execute("SELECT * FROM adult").df()
    con.close()


def adult_policy(quasi: list[str], t: float) -> Policy:
    return Policy(quasi_identifiers={q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi},
                  models=[KAnonymity(5), TCloseness("salary-class", t)], sensitive=["salary-class"], others="drop",
                  suppression="drop", suppression_limit=0.05)


def generalized(frame: pd.DataFrame, levels: dict[str, int]) -> pd.DataFrame:
    out = frame.copy()
    for attribute, level in levels.items():
        out[attribute] = frame[attribute].astype(str).map(arx_map(attribute, level))
    return out


def by_hand(frame: pd.DataFrame, levels: dict[str, int], t: float) -> int:
    return int(drop_fixed_point(generalized(frame, levels), list(levels), "salary-class", k=5, t=t).sum())


@contextlib.contextmanager
def evaluator(anon, source, policy, metric="loss", kind="auto"):
    """A NodeEvaluator (of ``kind``: auto, memory, sql) built the way Anonymizer.search builds it."""
    workspace = anon.workspace
    with bind(workspace, source, policy) as bound, search_run.evaluator(workspace, bound, [metric], None,
                                                                        kind) as ev:
        yield ev


@on_every_evaluator
def test_adult_issue_node_search_check_and_publish_count_the_fixed_point(adult, tmp_path, kind):
    con, anon, frame = adult
    policy = adult_policy(SEED002_QIS, 0.15)
    expected = by_hand(frame, ISSUE_NODE, 0.15)
    assert expected == 1593  # the issue's figure: 1,486 violate against the whole table, 107 more after dropping
    with evaluator(anon, "adult", policy, kind=kind) as ev:
        result = ev.evaluate(ev.lattice.index(tuple(ISSUE_NODE[q] for q in SEED002_QIS)))
    report = anon.check("adult", policy, ISSUE_NODE)
    assert result.suppressed == report.violating_records == expected
    assert report.cascaded_records == expected - 1486
    assert not result.within_limit and not report.within_limit and not report.satisfied
    with pytest.raises(PolicyNotSatisfied) as refused:
        anon.publish("adult", policy, ISSUE_NODE, tmp_path / "r.duckdb")
    message = str(refused.value)
    # Drop mode has no class of suppressed records: the message says what fails, the records over the limit.
    assert "own class" not in message and "1593 records" in message and "at most 1508" in message
    assert "once the others are dropped" in message
    assert not (tmp_path / "r.duckdb").exists()


@pytest.mark.parametrize("quasi, t", [(SEED002_QIS, 0.15), (["age", "education", "occupation"], 0.2)])
@on_every_evaluator
def test_adult_search_check_and_publish_agree(adult, tmp_path, quasi, t, kind):
    con, anon, frame = adult
    policy = adult_policy(quasi, t)
    found = anon.search("adult", policy, evaluator=kind)
    assert found.found
    report = anon.check("adult", policy, found.levels)
    release = anon.publish("adult", policy, found.levels, tmp_path / "r.duckdb", table="adult")
    expected = by_hand(frame, found.levels, t)
    assert found.best.suppressed == report.violating_records == release.suppressed == expected
    assert report.within_limit and found.best.within_limit
    with duckdb.connect(str(tmp_path / "r.duckdb"), read_only=True) as reader:
        released = reader.execute("SELECT * FROM adult").df()
    assert len(released) == len(frame) - expected
    # The release itself: no class strays farther than t from the released records' distribution.
    assert not drop_fixed_point(released, quasi, "salary-class", k=5, t=t).any()
    # Every node of the lattice: the search's count is the fixed point by hand; and no node the search skipped beats
    # the one it found.
    with evaluator(anon, "adult", policy, kind=kind) as ev:
        results = ev.evaluate_many(range(ev.lattice.size))
        assert not ev.monotone
        exhaustive = ExhaustiveSearch().search(ev)
    for result in results:
        levels = dict(zip(quasi, result.node))
        assert result.suppressed == by_hand(frame, levels, t), levels
    assert math.isclose(exhaustive.best.values["loss"], found.best.values["loss"], rel_tol=1e-12)


# --------------------------------------------------------------------------------------------- random small tables
@st.composite
def small_tables(draw):
    """(frame, hierarchies): 8-60 records, two quasi-identifiers with 3-level trees (one with NULLs), a sensitive
    column ``s`` of 2-4 values whose frequencies depend on ``a``: classes far from the table's distribution, whose
    dropping moves it."""
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    hierarchies, columns = {}, {}
    records = draw(st.integers(8, 60))
    for name in ("a", "b"):
        leaves = draw(st.integers(2, 5))
        groups = draw(st.integers(1, leaves))
        rows = [[f"{name}{j}", f"{name}_g{j % groups}", "*"] for j in range(leaves)]
        hierarchies[name] = Hierarchy.from_lists(rows, name=name)
        values = [row[0] for row in rows] + ([None] if name == "b" else [])
        columns[name] = list(rng.choice(np.array(values, dtype=object), size=records,
                                        p=rng.dirichlet(np.full(len(values), 0.8))))
    sensitive = ["flu", "cold", "hiv", "cancer"][:draw(st.integers(2, 4))]
    shares = {a: rng.dirichlet(np.full(len(sensitive), 0.5)) for a in set(columns["a"])}
    s = [sensitive[rng.choice(len(sensitive), p=shares[a])] for a in columns["a"]]
    s[:2] = sensitive[:2]
    columns["s"] = s
    return pd.DataFrame(columns), hierarchies


# Classes {flu}, {flu, cold} and {cold x 4} at t = 0.3: the first strays from the table's distribution; once it is
# dropped, the kept records are mostly cold and the second strays too (test_release has the same table).
CASCADE = (pd.DataFrame({"a": ["a0", "a1", "a1"] + ["a2"] * 4, "b": ["b0"] * 7,
                         "s": ["flu", "flu", "cold", "cold", "cold", "cold", "cold"]}),
           {"a": Hierarchy.from_lists([["a0", "g0", "*"], ["a1", "g0", "*"], ["a2", "g1", "*"]], name="a"),
            "b": Hierarchy.from_lists([["b0", "g0", "*"], ["b1", "g0", "*"]], name="b")})


@settings(max_examples=6, deadline=None, suppress_health_check=list(HealthCheck), derandomize=True)
@given(table=small_tables(), t=st.sampled_from([0.1, 0.15, 0.2, 0.3]), distance=st.sampled_from(["equal", "ordered"]),
       k=st.sampled_from([1, 2, 3]), l=st.sampled_from([1, 2]), limit=st.sampled_from([0.1, 0.25, 0.5, 1.0]))
@example(table=CASCADE, t=0.3, distance="equal", k=1, l=1, limit=0.5)
@on_every_evaluator
def test_every_node_check_search_and_publish_agree(table, t, distance, k, l, limit, kind):  # noqa: E741
    frame, hierarchies = table
    models = [TCloseness("s", t, distance=distance)] + ([KAnonymity(k)] if k > 1 else []) + (
        [DistinctLDiversity("s", l)] if l > 1 else [])
    policy = Policy(quasi_identifiers=hierarchies, models=models, sensitive=["s"], suppression="drop",
                    suppression_limit=limit)
    allowed = policy.allowed_suppressed(len(frame))
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    try:
        with evaluator(anon, "t", policy, kind=kind) as ev:
            results = ev.evaluate_many(range(ev.lattice.size))
            assert not ev.monotone or allowed == 0
    except PolicyError:
        assume(False)
    with tempfile.TemporaryDirectory() as folder, anon.encode("t", policy) as encoded:
        for result in results:
            levels = dict(zip(["a", "b"], result.node))
            report = encoded.check(levels)
            assert report.violating_records == result.suppressed, levels
            assert report.within_limit == result.within_limit == (result.suppressed <= allowed), levels
            if distance == "equal":
                by_hand = drop_fixed_point(generalize(frame, hierarchies, levels), ["a", "b"], "s", k=k, t=t, l=l)
                assert result.suppressed == int(by_hand.sum()), levels
            target = Path(folder) / f"{result.node}.duckdb"
            try:
                release = anon.publish("t", policy, levels, target, table="t")
            except PolicyNotSatisfied:
                assert not result.within_limit, levels
                assert not target.exists()
                continue
            assert result.within_limit, levels
            assert release.suppressed == result.suppressed
            with duckdb.connect(str(target), read_only=True) as reader:
                assert reader.execute("SELECT count(*) FROM t").fetchone()[0] == len(frame) - result.suppressed
    # Pruning stays exact: the optimal search finds the least Loss among the nodes within the limit.
    within = [r.values["loss"] for r in results if r.within_limit]
    with bind(anon.workspace, "t", policy) as bound:
        for strategy in (OptimalSearch(), ExhaustiveSearch()):
            with search_run.evaluator(anon.workspace, bound, ["loss"], None, kind) as ev:
                found = strategy.search(ev)
            assert found.found == bool(within)
            if within:
                assert math.isclose(found.best.values["loss"], min(within), rel_tol=1e-12, abs_tol=1e-12)
    con.close()


def generalize(frame: pd.DataFrame, hierarchies: dict[str, Hierarchy], levels: dict[str, int]) -> pd.DataFrame:
    out = frame.copy()
    for attribute, level in levels.items():
        mapping = {row[0]: row[level] for row in hierarchies[attribute].rows}
        out[attribute] = frame[attribute].map(lambda v, m=mapping: None if pd.isna(v) else m[v])
    return out
