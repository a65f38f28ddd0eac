"""MDAV microaggregation: the groups against a plain textbook implementation, and the release's group means against
pandas."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from blocking_reference import textbook_blocks
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

import duckanon
from duckanon import (
    MDAV,
    DistinctLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyError,
)
from duckanon.cluster.blocking import blocks
from duckanon.cluster.mdav import mdav
from duckanon.engine import as_engine
from duckanon.sqlgen import build as sb


def textbook_mdav(points: np.ndarray, k: int) -> list[set[int]]:
    """Domingo-Ferrer & Torra (2005), record by record."""
    remaining = list(range(len(points)))
    groups = []

    def distance(i, point):
        return float(((points[i] - point) ** 2).sum())

    def take_around(anchor):
        nearest = sorted(remaining, key=lambda i: distance(i, points[anchor]))[:k]
        groups.append(set(nearest))
        for i in nearest:
            remaining.remove(i)

    while len(remaining) >= 3 * k:
        centroid = points[remaining].mean(axis=0)
        r = max(remaining, key=lambda i: distance(i, centroid))
        take_around(r)
        s = max(remaining, key=lambda i: distance(i, points[r]))
        take_around(s)
    if len(remaining) >= 2 * k:
        centroid = points[remaining].mean(axis=0)
        take_around(max(remaining, key=lambda i: distance(i, centroid)))
    if remaining:
        groups.append(set(remaining))
    return groups


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 120), k=st.integers(1, 12), dims=st.integers(1, 4), seed=st.integers(0, 2**32 - 1))
def test_groups_are_the_textbook_ones(n, k, dims, seed):
    points = np.random.default_rng(seed).normal(size=(n, dims))  # continuous: no ties between distances
    groups, count = mdav(points, k)
    ours = [set(np.flatnonzero(groups == g).tolist()) for g in range(count)]
    assert sorted(map(sorted, ours)) == sorted(map(sorted, textbook_mdav(points, k)))
    sizes = np.bincount(groups)
    assert sizes.sum() == n and (sizes >= min(k, n)).all() and (sizes < 2 * k).all()


def numeric_policy(quasi, k: int, **roles) -> Policy:
    return Policy(quasi_identifiers={q: None for q in quasi}, models=[KAnonymity(k)], **roles)


def test_release_shows_each_groups_mean(con, tmp_path):
    from duckanon.datasets import resample_adult
    resample_adult(con, 2000, "adult_rows", seed=4)
    anon = duckanon.connect(con)
    quasi = ["age", "education-num", "hours-per-week"]
    clusters = anon.cluster("adult_rows", numeric_policy(quasi, 10, others="drop"), MDAV())
    assert clusters.sizes.min() >= 10 and clusters.sizes.max() < 20
    assert clusters.check().satisfied
    release = clusters.publish(tmp_path / "mdav.duckdb")
    assert (release.records_out, release.suppressed) == (2000, 0)
    released = duckdb.connect(str(tmp_path / "mdav.duckdb"), read_only=True).execute("SELECT * FROM release").df()
    # Every group's records, in the order they were numbered, and pandas' means of their original values.
    frame = con.sql("SELECT * FROM adult_rows").df()[quasi]
    numbered = frame.sort_values(quasi, kind="stable").reset_index(drop=True)
    means = numbered.groupby(clusters.groups).transform("mean")
    expected = sorted(map(tuple, means.round(9).to_numpy()))
    shown = sorted(map(tuple, released[quasi].astype(float).round(9).to_numpy()))
    assert shown == expected
    assert (released.groupby(quasi).size() >= 10).all()


def test_mdav_refuses_categories_sensitive_models_and_nulls(con):
    frame = pd.DataFrame({"x": [1.0, 2.0, None, 4.0], "c": ["a", "b", "a", "b"], "s": ["p", "q", "p", "q"]})
    con.register("frame", frame)
    as_engine(con).run(sb.create_table_as(sb.table("t"), exp.select(exp.Star()).from_(sb.table("frame"))))
    anon = duckanon.connect(con)
    categorical = Policy(quasi_identifiers={"x": None, "c": Hierarchy.from_lists([["a", "*"], ["b", "*"]])},
                         models=[KAnonymity(2)], sensitive=["s"])
    with pytest.raises(PolicyError, match=r"quasi-identifiers \['c'\] are not numeric"):
        anon.cluster("t", categorical, MDAV())
    diverse = Policy(quasi_identifiers={"x": None}, models=[KAnonymity(2), DistinctLDiversity("s", 2)], others="drop")
    with pytest.raises(PolicyError, match="cannot meet distinct-l-diversity"):
        anon.cluster("t", diverse, MDAV())
    with pytest.raises(PolicyError, match=r"\['x'\] hold NULLs"):
        anon.cluster("t", numeric_policy(["x"], 2, others="drop"), MDAV())


@settings(max_examples=20, deadline=None)
@given(n=st.integers(30, 400), k=st.integers(2, 6), blocks_of=st.integers(12, 60), seed=st.integers(0, 2**32 - 1),
       ties=st.booleans())
def test_blocked_mdav_is_textbook_mdav_within_median_cut_blocks(n, k, blocks_of, seed, ties):
    rng = np.random.default_rng(seed)
    points = rng.integers(0, 4, size=(n, 3)).astype(float) if ties else rng.normal(size=(n, 3))
    size = max(blocks_of, 2 * k)
    least = max(k, size // 4)
    cut = blocks(points, size, least)
    assert sorted(map(sorted, map(set, (b.tolist() for b in cut)))) == sorted(map(sorted, textbook_blocks(
        points, size, least)))
    assert all(least <= len(b) <= size for b in cut) or len(cut) == 1
    if ties:
        return  # equal distances: textbook MDAV's choice among them is its own
    records = {"x": points[:, 0], "y": points[:, 1], "z": points[:, 2]}
    con = duckdb.connect()
    con.register("frame", pd.DataFrame(records))
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    clusters = duckanon.connect(con).cluster("t", numeric_policy(["x", "y", "z"], k), MDAV(block_size=size))
    read = np.column_stack([clusters.records.columns[c] for c in "xyz"])  # in the order records are numbered
    standardized = (read - read.mean(axis=0)) / read.std(axis=0)
    expected = [{block[i] for i in members} for block in map(sorted, textbook_blocks(standardized, size, least))
                for members in textbook_mdav(standardized[block], k)]
    groups = clusters.groups
    ours = [set(np.flatnonzero(groups == g).tolist()) for g in range(clusters.count)]
    assert sorted(map(sorted, ours)) == sorted(map(sorted, expected))


def test_a_block_below_two_groups_is_refused_and_none_is_exact(con):
    con.execute("CREATE TABLE t AS SELECT range::DOUBLE AS x FROM range(100)")
    anon = duckanon.connect(con)
    with pytest.raises(PolicyError, match="block_size 9 is below 2k = 10"):
        anon.cluster("t", numeric_policy(["x"], 5), MDAV(block_size=9))
    exact = anon.cluster("t", numeric_policy(["x"], 5), MDAV(block_size=None))
    assert exact.count == 20 and exact.method.describe() == {"algorithm": "MDAV microaggregation", "block_size": None}
    with pytest.raises(PolicyError, match="block_size"):
        MDAV(block_size=1)
