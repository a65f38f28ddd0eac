"""Seed 001's semi-supervised (α,k) clustering, and the mixed-type distance and group machinery the clustering
algorithms share (duckanon.cluster.distance, duckanon.cluster.grouping).

Distances, group losses and join costs are compared with a plain-Python reading of the definitions (walking the
hierarchy rows); clusterings with hand-worked examples and with pandas group-bys over the release."""

from __future__ import annotations

import math
from unittest import mock

import duckdb
import numpy as np
import pandas as pd
import pytest
from blocking_reference import textbook_blocks
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import (
    MDAV,
    AlphaKAnonymity,
    AnonymizationError,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyError,
    SemiSupervisedClustering,
    TopDownPartitioning,
)
from duckanon.cluster import semisupervised
from duckanon.cluster.distance import CodedTexts, RecordSpace
from duckanon.cluster.grouping import VALUE, read_query, text_values
from duckanon.sqlgen import build as sb

# A three-level hierarchy of six leaves, with a row for NULL (which generalizes like "e").
TREE = Hierarchy.from_lists([
    ["a", "ab", "abcd", "*"], ["b", "ab", "abcd", "*"], ["c", "cd", "abcd", "*"], ["d", "cd", "abcd", "*"],
    ["e", "ef", "ef", "*"], ["f", "ef", "ef", "*"], [None, "ef", "ef", "*"]], name="tree")
# The same without the NULL row: NULL is then a value of its own, under no node.
TREE_NO_NULL = Hierarchy.from_lists([row for row in TREE.rows if row[0] is not None], name="tree_no_null")


# ------------------------------------------------------------------------------------------ reference definitions

def ref_numeric(values: list) -> float:
    """NCP of generalizing numbers (None for NULL) to one value: their span over the domain's, 1 for mixed NULL."""
    return _numeric_span(values) / ref_numeric.width if ref_numeric.width else 0.0


def _numeric_span(values):
    present = [v for v in values if v is not None]
    if present and len(present) < len(values):
        return math.inf
    return (max(present) - min(present)) if present else 0.0


def ref_numeric_loss(values: list, width: float) -> float:
    present = [v for v in values if v is not None]
    if present and len(present) < len(values):
        return 1.0
    if not present or width == 0:
        return 0.0
    return (max(present) - min(present)) / width


def ref_categorical_loss(values: list, hierarchy: Hierarchy | None) -> float:
    """NCP of generalizing categories to their lowest common ancestor, walking the hierarchy's rows; without a
    hierarchy, values under one root."""
    if hierarchy is None:
        leaves = sorted({v for v in values if v is not None})
        hierarchy = Hierarchy.from_lists([[v, "*"] for v in leaves] or [[None, "*"]])
    if len(set(values)) == 1:
        return 0.0
    paths = {row[0]: row for row in hierarchy.rows}
    if any(v not in paths for v in values):  # NULL without a row shares no node with anything
        return 1.0
    for level in range(1, hierarchy.levels):
        nodes = {paths[v][level] for v in values}
        if len(nodes) == 1:
            node = nodes.pop()
            leaves = sum(1 for row in hierarchy.rows if row[level] == node)
            return leaves / len(hierarchy.rows) if leaves > 1 else 0.0
    return 1.0


def ref_distance(frame: pd.DataFrame, i: int, j: int, hierarchies, width: float) -> float:
    pair = frame.iloc[[i, j]]
    parts = [ref_numeric_loss(_values(pair["x"]), width)] + [
        ref_categorical_loss(_values(pair[c]), hierarchies[c]) for c in ("tree", "bare", "flat")]
    return sum(parts) / len(parts)


def _values(series: pd.Series) -> list:
    return [None if pd.isna(v) else v for v in series]


MIXED = st.lists(st.tuples(st.one_of(st.none(), st.integers(0, 40)),
                           st.sampled_from(["a", "b", "c", "d", "e", "f", None]),
                           st.sampled_from(["a", "b", "c", "d", "e", "f", None]),
                           st.sampled_from(["u", "v", "w", None])), min_size=2, max_size=14)


def mixed_space(rows):
    frame = pd.DataFrame(rows, columns=["x", "tree", "bare", "flat"])
    hierarchies = {"tree": TREE, "bare": TREE_NO_NULL, "flat": None}
    columns = {"x": np.array([np.nan if v is None else v for v in frame["x"]], dtype=float),
               **{c: frame[c].to_numpy(dtype=object) for c in ("tree", "bare", "flat")}}
    space = RecordSpace.from_columns(columns, {c: h for c, h in hierarchies.items() if h is not None}, ["x"])
    present = [v for v in frame["x"] if v is not None and not pd.isna(v)]
    width = float(max(present) - min(present)) if present else 0.0
    return frame, space, hierarchies, width


@settings(max_examples=40, deadline=None)
@given(MIXED)
def test_distances_match_the_definition(rows):
    frame, space, hierarchies, width = mixed_space(rows)
    n = len(frame)
    expected = np.array([[ref_distance(frame, i, j, hierarchies, width) for j in range(n)] for i in range(n)])
    every = np.arange(n)
    assert np.allclose([space.distances_from(i, every) for i in every], expected)
    assert np.allclose(space.paired_distances(every, every[::-1]), expected[every, every[::-1]])
    # The sums seed 001 seeds its clusters by, computed without a single pair.
    assert np.allclose(space.distance_sums(), expected.sum(axis=1))


@settings(max_examples=40, deadline=None)
@given(MIXED, st.data())
def test_a_part_of_the_records_measures_distances_as_the_whole(rows, data):
    frame, space, hierarchies, width = mixed_space(rows)
    chosen = np.array(data.draw(st.permutations(range(len(frame))))[:data.draw(st.integers(1, len(frame)))])
    expected = np.array([[ref_distance(frame, i, j, hierarchies, width) for j in chosen] for i in chosen])
    part = space.part(chosen)
    every = np.arange(len(chosen))
    assert np.allclose([part.distances_from(i, every) for i in every], expected)
    assert np.allclose(part.distance_sums(), expected.sum(axis=1))


def test_a_categorys_points_list_its_leaves_subtree_by_subtree():
    """Blocks are cut between points: the leaves under any node of the hierarchy hold consecutive points."""
    values = np.array([row[0] for row in TREE.rows] * 2, dtype=object)
    space = RecordSpace.from_columns({"tree": values}, {"tree": TREE}, [])
    points = space.points()[:, 0]
    assert len(set(points)) == len(TREE.rows) and points.min() == 0 and points.max() == 1
    for level in range(1, TREE.levels):
        for node in {row[level] for row in TREE.rows}:
            under = {points[i] for i, row in enumerate(TREE.rows) if row[level] == node}
            between = {p for p in points if min(under) < p < max(under)}
            assert between <= under, (level, node)


@settings(max_examples=40, deadline=None)
@given(MIXED, st.data())
def test_group_losses_join_and_merge_costs_match_the_definition(rows, data):
    frame, space, hierarchies, width = mixed_space(rows)
    n = len(frame)
    count = data.draw(st.integers(1, n))
    groups = np.array(data.draw(st.permutations(list(range(count)) + data.draw(
        st.lists(st.integers(0, count - 1), min_size=n - count, max_size=n - count)))))

    def group_loss(members) -> float:
        part = frame.iloc[sorted(members)]
        return (ref_numeric_loss(_values(part["x"]), width)
                + sum(ref_categorical_loss(_values(part[c]), hierarchies[c]) for c in ("tree", "bare", "flat")))

    members = [np.flatnonzero(groups == g) for g in range(count)]
    losses = np.array([group_loss(m) for m in members])
    assert np.allclose(space.record_losses(groups, count).sum(axis=1), losses[groups])
    assert math.isclose(space.information_loss(groups, count), sum(len(m) * losses[g] for g, m in enumerate(members)),
                        abs_tol=1e-9)
    summary = space.summarize(groups, count)
    every = np.arange(count)
    joins = space.join_costs(np.arange(n), summary, every)
    for record in range(n):
        for g, m in enumerate(members):
            grown = group_loss(list(m) + [record]) * (len(m) + 1) - losses[g] * len(m)
            assert math.isclose(joins[record, g], grown, abs_tol=1e-9)
    for g, m in enumerate(members):
        merged = space.merge_costs(g, summary, every)
        for h, other in enumerate(members):
            union = list(m) + list(other)
            expected = group_loss(union) * len(union) - losses[g] * len(m) - losses[h] * len(other)
            if h != g:
                assert math.isclose(merged[h], expected, abs_tol=1e-9)


def test_large_hierarchies_compare_ancestors_level_by_level(monkeypatch):
    """Hierarchies too large for the table of common levels give the same distances."""
    rows = [["a", "b", "c", "d", "e", None, "a", "f"], [1, 5, 2, 9, 9, 3, 1, 4]]
    columns = {"tree": np.array(rows[0], dtype=object), "x": np.array(rows[1], dtype=float)}
    tabulated = RecordSpace.from_columns(columns, {"tree": TREE_NO_NULL}, ["x"])
    monkeypatch.setattr("duckanon.cluster.distance.COMMON_TABLE_LEAVES", 0)
    compared = RecordSpace.from_columns(columns, {"tree": TREE_NO_NULL}, ["x"])
    assert compared.attributes[0].common is None and tabulated.attributes[0].common is not None
    every = np.arange(8)
    for record in every:
        assert np.array_equal(compared.distances_from(record, every), tabulated.distances_from(record, every))
    assert np.array_equal(compared.paired_distances(every, every[::-1]), tabulated.paired_distances(every, every[::-1]))
    assert np.array_equal(compared.distance_sums(), tabulated.distance_sums())
    groups = np.array([0, 0, 1, 1, 2, 2, 2, 0])
    assert compared.information_loss(groups, 3) == tabulated.information_loss(groups, 3)
    costs = [space.join_costs(every, space.summarize(groups, 3), np.arange(3)) for space in (compared, tabulated)]
    assert np.array_equal(*costs)


def test_a_value_outside_the_hierarchy_is_named():
    with pytest.raises(duckanon.HierarchyError, match="'zzz'"):
        RecordSpace.from_columns({"tree": np.array(["a", "zzz"], dtype=object)}, {"tree": TREE}, [])


# --------------------------------------------------------------------------------------------------- seed 001

# Eight records on a line; the highly sensitive value A may make up at most a quarter of a cluster of four.
LINE = pd.DataFrame({"x": [0, 1, 2, 3, 10, 11, 12, 13], "s": ["A", "A", "B", "C", "B", "C", "B", "C"]})


@pytest.fixture
def anon(con):
    return duckanon.connect(con)


def table(con, frame: pd.DataFrame, name: str) -> str:
    con.register(f"{name}_frame", frame)
    con.execute(sb.to_sql(sb.create_table_as(sb.table(name), pd_select(f"{name}_frame"), replace=True)))
    con.unregister(f"{name}_frame")
    return name


def pd_select(name: str):
    from sqlglot import exp
    return exp.select(exp.Star()).from_(sb.table(name))


def members(clusters, frame: pd.DataFrame, key: str) -> set[frozenset]:
    """The clusters as sets of ``key`` values (records are numbered in the order of the released columns)."""
    numbered = frame.sort_values(clusters.numbering, na_position="first", kind="stable").reset_index(drop=True)
    return {frozenset(numbered.loc[clusters.groups == g, key]) for g in range(clusters.count)}


def test_seeds_are_central_and_alpha_turns_a_record_away(con, anon):
    """Distance sums (range 13): x=3 and x=10 have the smallest (40/13), x=3 first.  Its cluster takes x=2 (B) and
    x=1 (A), skips x=0 (a second A would exceed ⌊0.25·4⌋ = 1) and takes x=10.  The next seed is x=11 (sum 42/13),
    which gathers x=12, x=13 and x=0."""
    table(con, LINE, "line")
    policy = Policy(quasi_identifiers={"x": None}, models=[AlphaKAnonymity("s", 0.25, 4, highly_sensitive=["A"])])
    clusters = anon.cluster("line", policy, SemiSupervisedClustering())
    assert members(clusters, LINE, "x") == {frozenset({1, 2, 3, 10}), frozenset({0, 11, 12, 13})}
    # Without α the clusters are the two runs of the line.
    plain = Policy(quasi_identifiers={"x": None}, models=[KAnonymity(4)], sensitive=["s"])
    assert members(anon.cluster("line", plain, SemiSupervisedClustering()), LINE, "x") == {
        frozenset({0, 1, 2, 3}), frozenset({10, 11, 12, 13})}


def test_a_leftover_joins_the_cluster_whose_loss_grows_least(con, anon, tmp_path):
    """x=30 cannot seed a cluster of four: joining [10, 13] costs 5·20/30 - 4·3/30, joining [0, 3] 5·30/30 - 4·3/30."""
    frame = pd.DataFrame({"x": [0, 1, 2, 3, 10, 11, 12, 13, 30]})
    table(con, frame, "line9")
    policy = Policy(quasi_identifiers={"x": None}, models=[KAnonymity(4)])
    clusters = anon.cluster("line9", policy, SemiSupervisedClustering())
    assert members(clusters, frame, "x") == {frozenset({0, 1, 2, 3}), frozenset({10, 11, 12, 13, 30})}
    release = clusters.publish(tmp_path / "line9.duckdb")
    assert release.records_out == 9


def adult_sample(con, rows: int, seed: int) -> str:
    from duckanon.datasets import resample_adult
    resample_adult(con, rows, "adult_sample", seed=seed, replace=True)
    return "adult_sample"


ADULT_QI = ["age", "workclass", "education", "marital-status", "race", "sex", "native-country", "salary-class"]


def adult_policy(k: int, alpha_high: float, alpha_other: float | None, highly=("Prof-specialty", "Exec-managerial"),
                 quasi=ADULT_QI) -> Policy:
    from duckanon.datasets import adult_hierarchy_dir
    models = [AlphaKAnonymity("occupation", alpha_high, k, highly_sensitive=list(highly))]
    if alpha_other is not None:
        models.append(AlphaKAnonymity("occupation", alpha_other, k))
    return Policy(quasi_identifiers={q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi},
                  models=models, others="drop")


def pandas_alpha_k(frame: pd.DataFrame, keys, k: int, bounds: dict) -> bool:
    """Every class (rows equal on ``keys``) holds at least k records and each bounded value at most its α share."""
    grouped = frame.groupby(keys, dropna=False)
    sizes = grouped.size()
    if (sizes < k).any():
        return False
    for value, alpha in bounds.items():
        share = grouped["occupation"].apply(lambda s, v=value: (s == v).mean())
        if (share > alpha + 1e-12).any():
            return False
    return True


@settings(max_examples=4, deadline=None)
@given(rows=st.integers(60, 300), seed=st.integers(0, 10_000), k=st.integers(4, 12),
       alpha_high=st.sampled_from([0.25, 0.3, 0.5]), quasi=st.integers(2, 8))
def test_every_release_satisfies_its_policy_and_keeps_every_record(tmp_path_factory, rows, seed, k, alpha_high, quasi):
    con = duckdb.connect()
    anon = duckanon.connect(con)
    source = adult_sample(con, rows, seed)
    frame = con.sql(f"SELECT * FROM {source}").df()
    shares = frame["occupation"].value_counts(normalize=True)
    highly = [v for v in ("Prof-specialty", "Exec-managerial", "Craft-repair") if shares.get(v, 0) <= alpha_high]
    if not highly or alpha_high * k < 1:
        return
    policy = adult_policy(k, alpha_high, 0.5 if shares.max() <= 0.5 else None, highly, ADULT_QI[:quasi])
    clusters = anon.cluster(source, policy, SemiSupervisedClustering())
    bounds = {v: alpha_high for v in highly}
    if len(policy.models) == 2:
        bounds.update({v: min(bounds.get(v, 1), 0.5) for v in frame["occupation"].unique()})
    # The groups themselves, by pandas over the records in the order they were numbered.
    numbered = frame.sort_values(clusters.numbering, na_position="first", kind="stable").reset_index(drop=True)
    assert pandas_alpha_k(numbered.assign(group=clusters.groups), ["group"], k, bounds)
    assert clusters.sizes.sum() == rows and clusters.sizes.min() >= k
    # The core's SQL models over the recoded records, and the release (re-checked on writing) by pandas.
    assert clusters.check().satisfied
    path = tmp_path_factory.mktemp("release") / "r.duckdb"
    release = clusters.publish(path)
    assert (release.records_in, release.records_out, release.suppressed) == (rows, rows, 0)
    released = duckdb.connect(str(path), read_only=True).execute("SELECT * FROM release").df()
    assert pandas_alpha_k(released, ADULT_QI[:quasi], k, bounds)
    assert sorted(released["occupation"]) == sorted(frame["occupation"])


@settings(max_examples=5, deadline=None)
@given(rows=st.integers(200, 500), seed=st.integers(0, 10_000), k=st.integers(3, 8), block=st.integers(30, 120))
def test_blocked_clusters_lie_within_median_cut_blocks_and_the_release_keeps_its_policy(rows, seed, k, block):
    """Above ``block_size`` records, the records are clustered within the blocks an independent splitter cuts from
    their points, a block halved only where each half as one cluster meets (α,k) (by pandas); every cluster holds the
    policy and every record is in one."""
    con = duckdb.connect()
    anon = duckanon.connect(con)
    source = adult_sample(con, rows, seed)
    frame = con.sql(f"SELECT * FROM {source}").df()
    block = max(block, 2 * k)
    seen = {}
    real_blocks = semisupervised.record_blocks

    def blocks_seen(points, *args, **kwargs):
        seen["points"] = points
        return real_blocks(points, *args, **kwargs)

    policy = adult_policy(k, 0.5, None, quasi=ADULT_QI[:4])
    with mock.patch.object(semisupervised, "record_blocks", blocks_seen):
        clusters = anon.cluster(source, policy, SemiSupervisedClustering(block_size=block))
    numbered = frame.sort_values(clusters.numbering, na_position="first", kind="stable").reset_index(drop=True)
    highly = {v: 0.5 for v in ("Prof-specialty", "Exec-managerial")}
    occupation = numbered["occupation"].to_numpy()
    stands = lambda rows: len(rows) >= k and all(
        (occupation[list(rows)] == v).mean() <= alpha for v, alpha in highly.items())
    cut = textbook_blocks(seen["points"], block, max(k, block // 4), stands)
    block_of = {record: b for b, records in enumerate(cut) for record in records}
    for group in range(clusters.count):
        assert len({block_of[m] for m in np.flatnonzero(clusters.groups == group)}) == 1, group
    assert pandas_alpha_k(numbered.assign(group=clusters.groups), ["group"], k, highly)
    assert clusters.sizes.sum() == rows and clusters.method.describe()["block_size"] == block


def test_blocks_below_two_clusters_are_refused_and_none_is_exact(con, anon):
    source = adult_sample(con, 300, 1)
    with pytest.raises(PolicyError, match="block_size 9 is below 2k = 10"):
        anon.cluster(source, adult_policy(5, 0.5, None), SemiSupervisedClustering(block_size=9))
    exact = anon.cluster(source, adult_policy(5, 0.5, None), SemiSupervisedClustering(block_size=None))
    within_one_block = anon.cluster(source, adult_policy(5, 0.5, None), SemiSupervisedClustering(block_size=300))
    assert np.array_equal(exact.groups, within_one_block.groups)
    with pytest.raises(PolicyError, match="block_size"):
        SemiSupervisedClustering(block_size=1)


def test_information_loss_is_the_cores_ncp_of_the_release(con, anon):
    source = adult_sample(con, 500, 3)
    clusters = anon.cluster(source, adult_policy(10, 0.3, 0.4), SemiSupervisedClustering())
    measured = clusters.metrics()
    assert math.isclose(clusters.information_loss, measured["ncp"], rel_tol=1e-9)
    assert measured["records"] == 500 and measured["suppressed"] == 0


def test_adult_release(con, anon, tmp_path):
    """Seed 001's setting on 3,000 Adult records: eight quasi-identifiers, α 0.3 for the highly sensitive
    occupations and 0.4 for the others, k = 25."""
    source = adult_sample(con, 3000, 1)
    clusters = anon.cluster(source, adult_policy(25, 0.3, 0.4), SemiSupervisedClustering())
    assert clusters.sizes.min() >= 25 and clusters.sizes.max() < 50
    report = clusters.check()
    assert report.satisfied and report.smallest_class >= 25
    release = clusters.publish(tmp_path / "adult.duckdb")
    assert release.records_out == 3000 and release.suppressed == 0
    released = duckdb.connect(str(tmp_path / "adult.duckdb"), read_only=True).execute("SELECT * FROM release").df()
    assert released["age"].str.fullmatch(r"\[\d+, \d+\]").all()  # numbers as their cluster's range
    frame = con.sql(f"SELECT * FROM {source}").df()
    bounds = {"Prof-specialty": 0.3, "Exec-managerial": 0.3, **{v: 0.4 for v in frame["occupation"].unique()
                                                                if v not in ("Prof-specialty", "Exec-managerial")}}
    assert pandas_alpha_k(released, ADULT_QI, 25, bounds)


# ------------------------------------------------------------------------------------------------ bad input

def test_alpha_times_k_below_one_is_refused(con, anon, tmp_path):
    table(con, LINE, "line")
    policy = Policy(quasi_identifiers={"x": None}, models=[AlphaKAnonymity("s", 0.3, 3, highly_sensitive=["A"])])
    with pytest.raises(PolicyError, match=r"alpha·k = 0.3·3 = 0.9 < 1.*seed 001 §3.1"):
        anon.cluster("line", policy, SemiSupervisedClustering())
    assert con.sql("SELECT count(*) FROM line").fetchall() == [(8,)]


def test_alpha_below_a_values_frequency_is_refused(con, anon):
    """A makes up a quarter of the records, so no table of classes with at most 20 % A exists (seed 001 §3.1)."""
    table(con, LINE, "line")
    policy = Policy(quasi_identifiers={"x": None}, models=[AlphaKAnonymity("s", 0.2, 5, highly_sensitive=["A"])])
    with pytest.raises(PolicyError, match=r"no release can satisfy alpha=0.2: value 'A' of 's' makes up 0.2500"):
        anon.cluster("line", policy, SemiSupervisedClustering())


def test_models_the_clustering_cannot_guarantee_are_refused(con, anon):
    table(con, LINE, "line")
    entropy = Policy(quasi_identifiers={"x": None}, models=[KAnonymity(2), EntropyLDiversity("s", 2)])
    with pytest.raises(PolicyError, match="cannot guarantee entropy-l-diversity"):
        anon.cluster("line", entropy, SemiSupervisedClustering())
    diverse = Policy(quasi_identifiers={"x": None}, models=[duckanon.DistinctLDiversity("s", 2), KAnonymity(2)])
    with pytest.raises(PolicyError, match="use TopDownPartitioning"):
        anon.cluster("line", diverse, SemiSupervisedClustering())
    with pytest.raises(PolicyError, match="not quasi-identifiers"):
        anon.cluster("line", Policy(quasi_identifiers={"x": None}, models=[KAnonymity(2)], sensitive=["s"]),
                     TopDownPartitioning(), numeric=["s"])


def test_a_failed_clustering_publishes_nothing(con, anon, tmp_path):
    table(con, LINE, "line")
    policy = Policy(quasi_identifiers={"x": None}, models=[AlphaKAnonymity("s", 0.3, 3, highly_sensitive=["A"])])
    with pytest.raises(PolicyError):
        anon.cluster("line", policy, SemiSupervisedClustering()).publish(tmp_path / "never.duckdb")
    assert not list(tmp_path.iterdir())


def test_clusters_publish_without_reading_the_source_again_and_refuse_a_changed_one(con, tmp_path):
    """The publish reuses the binding of the clustering (one message of reading the source in all) and releases every
    record in its group; once the rows grouped change (a value, a record more), the check and the publish are
    refused by name and no file is left, where the records' numbers would otherwise give other records the groups."""
    heard = []
    anon = duckanon.connect(con, progress=heard.append)
    table(con, LINE, "line")
    policy = Policy(quasi_identifiers={"x": None}, models=[KAnonymity(4)], sensitive=["s"])
    clusters = anon.cluster("line", policy, MDAV())
    release = clusters.publish(tmp_path / "line.duckdb")
    assert [m for m in heard if m.startswith("reading the source")] == [
        "reading the source and checking the policy's parameters"]
    assert release.records_out == 8 and release.suppressed == 0
    with duckdb.connect(str(tmp_path / "line.duckdb"), read_only=True) as reader:
        released = reader.execute("SELECT x, s FROM release").fetchall()
    assert sorted(released) == sorted(("1.5" if x < 5 else "11.5", s) for x, s in zip(LINE["x"], LINE["s"]))
    for change in ("UPDATE line SET x = 4 WHERE x = 3", "INSERT INTO line VALUES (14, 'A')"):
        con.execute(change)
        for attempt in (clusters.check, lambda: clusters.publish(tmp_path / "changed.duckdb")):
            with pytest.raises(AnonymizationError, match="changed since its records were grouped"):
                attempt()
        assert sorted(p.name for p in tmp_path.iterdir()) == ["line.duckdb"]
        con.execute("DELETE FROM line")
        con.execute("INSERT INTO line SELECT * FROM (VALUES (0, 'A'), (1, 'A'), (2, 'B'), (3, 'C'), (10, 'B'), "
                    "(11, 'C'), (12, 'B'), (13, 'C')) AS t(x, s)")
    assert clusters.check().satisfied  # the rows grouped again: the same fingerprint


def test_the_sql_it_runs_transpiles_to_spark(con):
    table(con, LINE, "line")
    query = read_query(sb.table("line"), ["x", "s"], ["x"], ["x"], "s", [])
    spark = sb.to_sql(query, "spark")
    assert "ROW_NUMBER() OVER (ORDER BY `x`, `s`) AS `__record`" in spark  # NULLS FIRST is Spark's default
    assert con.sql(sb.to_sql(query)).fetchall()[0] == (1, 0.0, "A")



def test_texts_read_as_numbers_are_the_texts_read_as_texts(con):
    """A categorical column is read as numbers into its distinct texts: decoded, each record has its own text, NULL
    stays NULL, in record order, on DuckDB and transpiled for Spark."""
    frame = pd.DataFrame({"x": [3, 1, 2, 1, 5, 4], "c": ["b", None, "a", "b", "c", None]})
    table(con, frame, "coded")
    source = sb.table("coded")
    coded = {"c": text_values(source, "c")}
    values = np.array([r[0] for r in con.sql(sb.to_sql(coded["c"].order_by(sb.col(VALUE)))).fetchall()], dtype=object)
    query = read_query(source, ["x", "c"], ["x", "c"], ["x"], None, [], coded)
    read = con.sql(sb.to_sql(query)).fetchnumpy()
    texts = CodedTexts(np.ma.filled(np.ma.asarray(read["c"]), -1).astype(np.int64), values).texts()
    as_texts = con.sql(sb.to_sql(read_query(source, ["x", "c"], ["x", "c"], ["x"], None, []))).df()
    assert texts.tolist() == [None if pd.isna(v) else v for v in as_texts["c"]]
    given = [None if pd.isna(v) else v for v in frame["c"]]
    assert sorted(zip(read["x"].tolist(), texts.tolist()), key=str) == sorted(zip(frame["x"].astype(float), given),
                                                                              key=str)
    assert "ROW_NUMBER() OVER (ORDER BY `__value`)" in sb.to_sql(query, "spark")


def test_coded_texts_decode_to_the_texts_with_null_as_none():
    column = CodedTexts.of(np.array(["b", None, "a", "b", np.nan], dtype=object))
    assert column.texts().tolist() == ["b", None, "a", "b", None]
    assert sorted(column.values) == ["a", "b"] and (column.codes < 0).sum() == 2

# ------------------------------------------------------------------------------------------------- over people
COLORS = Hierarchy.from_lists([["red", "warm", "*"], ["orange", "warm", "*"], ["blue", "cold", "*"],
                               ["green", "cold", "*"]], name="colors")
PEOPLE = st.lists(st.tuples(st.integers(0, 14), st.integers(0, 40), st.sampled_from(["red", "orange", "blue", "green"]),
                            st.sampled_from(["a", "b", "c"])), min_size=4, max_size=70)


def people_frame(con, rows) -> pd.DataFrame:
    frame = pd.DataFrame(rows, columns=["pid", "age", "color", "s"])
    frame.insert(0, "row", range(len(frame)))
    table(con, frame, "visits")
    return frame


def person_ages(frame: pd.DataFrame) -> pd.Series:
    """Each person's point on age: the ⌈n/2⌉-th of their n ages in order."""
    return frame.groupby("pid")["age"].agg(lambda ages: sorted(ages)[math.ceil(len(ages) / 2) - 1])


def check_people_groups(frame: pd.DataFrame, released: pd.DataFrame, quasi: list[str], k: int,
                        l: int = 1, alpha: float | None = None) -> None:  # noqa: E741
    """By pandas: every record once; each person in one class of k people or more, whose people's distinct values
    number l or more, and no value more than α of the class's distinct (person, value) pairs."""
    assert sorted(released["row"]) == sorted(frame["row"])
    classes = released[quasi].astype(str).agg("|".join, axis=1)
    assert (classes.groupby(released["pid"]).nunique() == 1).all()
    assert classes.groupby(released["pid"]).first().value_counts().min() >= k
    pairs = pd.DataFrame({"class": classes, "pid": released["pid"], "s": released["s"]}).drop_duplicates()
    assert pairs.groupby("class")["s"].nunique().min() >= l
    if alpha is not None:
        assert pairs.groupby("class")["s"].value_counts(normalize=True).max() <= alpha + 1e-9


@settings(max_examples=12, deadline=None)
@given(rows=PEOPLE, k=st.integers(2, 4))
def test_mdav_over_people_groups_their_points_and_every_record_takes_its_groups_mean(tmp_path_factory, rows, k):
    """MDAV of the people's points (each person's lower median age, by pandas) gives the groups; each record shows
    the mean age of all its group's records."""
    from duckanon.cluster.mdav import mdav

    con = duckdb.connect()
    frame = people_frame(con, rows)
    if frame["pid"].nunique() < k:
        return
    points = person_ages(frame)
    standardized = (points.to_numpy(float) - points.mean()) / (points.std(ddof=0) or 1.0)
    groups, _ = mdav(standardized[:, None], k)
    group_of = dict(zip(points.index, groups))
    pol = Policy(quasi_identifiers={"age": None}, models=[KAnonymity(k)], sensitive=["s"], person="pid",
                 insensitive=["row", "pid"], others="drop")
    clusters = duckanon.connect(con).cluster("visits", pol, duckanon.MDAV())
    assert sorted(np.bincount(clusters.groups)) == sorted(np.bincount(groups))
    path = tmp_path_factory.mktemp("mdav") / "r.parquet"
    clusters.publish(path)
    released = pd.read_parquet(path).set_index("row").sort_index()
    means = frame.groupby(frame["pid"].map(group_of))["age"].mean()
    expected = frame["pid"].map(group_of).map(means)
    assert np.allclose(released["age"].astype(float).to_numpy(), expected.to_numpy())
    check_people_groups(frame, released.reset_index(), ["age"], k)


@settings(max_examples=12, deadline=None)
@given(rows=PEOPLE, k=st.integers(2, 4), method=st.sampled_from(["semi-supervised", "top-down"]))
def test_every_clustering_over_people_satisfies_its_policy_over_people(tmp_path_factory, rows, k, method):
    con = duckdb.connect()
    frame = people_frame(con, rows)
    pairs = frame[["pid", "s"]].drop_duplicates()
    if method == "semi-supervised":
        models, clustering, bounds = [AlphaKAnonymity("s", 0.5, k)], SemiSupervisedClustering(), {"alpha": 0.5}
    else:
        models, clustering, bounds = [KAnonymity(k), duckanon.DistinctLDiversity("s", 2)], TopDownPartitioning(), \
            {"l": 2}
    pol = Policy(quasi_identifiers={"age": None, "color": COLORS}, models=models, sensitive=["s"], person="pid",
                 insensitive=["row", "pid"], others="drop")
    anon = duckanon.connect(con)
    shares = pairs["s"].value_counts(normalize=True)
    if frame["pid"].nunique() < k or pairs["s"].nunique() < 2 or (method == "semi-supervised" and shares.max() > 0.5):
        with pytest.raises((PolicyError, duckanon.PolicyNotSatisfied)):
            anon.cluster("visits", pol, clustering).publish(tmp_path_factory.mktemp("none") / "r.parquet")
        return
    clusters = anon.cluster("visits", pol, clustering)
    assert clusters.check().satisfied
    path = tmp_path_factory.mktemp(method) / "r.parquet"
    release = clusters.publish(path)
    assert release.suppressed == 0 and duckanon.verify(path).holds
    check_people_groups(frame, pd.read_parquet(path), ["age", "color"], k, **bounds)
