"""The leaf codes Mondrian and the partition map place values by, and the shortcuts the fast path takes, checked
against plain Python walks of the hierarchies and against the slower paths they replace."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlglot import exp

import duckanon
from duckanon import Hierarchy, HierarchyError, KAnonymity, Policy
from duckanon.encode.binding import bind
from duckanon.engine import as_engine
from duckanon.hierarchy.bound import BoundHierarchy
from duckanon.partition.mondrian import Mondrian, dimensions, output_styles
from duckanon.recode.recoding import CodedHierarchies, HierarchyCoding, PartitionMap
from duckanon.sqlgen import build as sb


# ----------------------------------------------------------------------------------------------- hierarchies
@st.composite
def hierarchies(draw) -> Hierarchy:
    """A random tree, built from the top down: 1–3 top values, 1–3 levels below them, 1–3 children per node, maybe
    a row for missing values."""
    paths = [[f"t{i}"] for i in range(draw(st.integers(1, 3)))]
    for _ in range(draw(st.integers(1, 3))):
        paths = [path + [f"{path[-1]}.{j}"] for path in paths for j in range(draw(st.integers(1, 3)))]
    rows = [list(reversed(path)) for path in paths]  # leaf first
    if len(rows) > 1 and draw(st.booleans()):
        rows[-1][0] = None
    return Hierarchy.from_lists(rows, name="h")


def ancestors(hierarchy: Hierarchy) -> list[dict]:
    return [{row[0]: row[level] for row in hierarchy.rows} for level in range(hierarchy.levels)]


def lowest_common(hierarchy: Hierarchy, leaves: list) -> tuple[int, str | None, int]:
    """Level, label and leaves under the lowest common ancestor, by walking the hierarchy's rows."""
    up = ancestors(hierarchy)
    for level in range(hierarchy.levels):
        labels = {up[level][leaf] for leaf in leaves}
        if len(labels) == 1:
            label = labels.pop()
            return level, label, sum(1 for row in hierarchy.rows if row[level] == label)
    return hierarchy.levels, "*", len(hierarchy.rows)


def stored(con, hierarchy: Hierarchy, name: str = "h") -> BoundHierarchy:
    return BoundHierarchy(name, hierarchy, hierarchy.store(con, f"hierarchy_{name}"))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hierarchy=hierarchies(), data=st.data())
def test_codes_place_every_group_of_leaves_at_its_lowest_common_ancestor(hierarchy, data):
    con = duckdb.connect()
    coding = HierarchyCoding.of(stored(con, hierarchy))
    codes = dict(as_engine(con).rows(coding.leaves()))
    nodes = {(level, prefix): (label, leaves) for level, prefix, label, leaves in as_engine(con).rows(coding.nodes())}
    assert set(codes) == set(hierarchy.values) and len(set(codes.values())) == len(codes)
    group = data.draw(st.lists(st.sampled_from(hierarchy.values), min_size=1, max_size=6, unique=True))
    low, high = min(codes[v] for v in group), max(codes[v] for v in group)
    (level,), = as_engine(con).rows(exp.select(coding.lowest_common_level(sb.lit(low), sb.lit(high))))
    want_level, want_label, want_leaves = lowest_common(hierarchy, group)
    assert level == want_level
    assert nodes[(level, low // coding.bases[level])] == (want_label, want_leaves)
    # Every leaf under that node, and no other, has the node's prefix.
    under = {v for v, c in codes.items() if c // coding.bases[level] == low // coding.bases[level]}
    assert len(under) == want_leaves and set(group) <= under


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(hierarchy=hierarchies())
def test_coded_tables_hold_what_the_inline_queries_compute(hierarchy):
    con = duckdb.connect()
    bound = stored(con, hierarchy)
    inline = HierarchyCoding.of(bound)
    coded = CodedHierarchies.of(as_engine(con), {"a": bound})
    try:
        assert coded.codings["a"].bases == inline.bases
        assert sorted(as_engine(con).rows(coded.leaves("a")), key=str) == sorted(as_engine(con).rows(inline.leaves()),
                                                                                 key=str)
        assert sorted(as_engine(con).rows(coded.nodes("a")), key=str) == sorted(as_engine(con).rows(inline.nodes()),
                                                                               key=str)
    finally:
        coded.close()


def test_a_hierarchy_too_wide_to_number_is_refused_by_name(con):
    # A spine of seven levels where one node on each level has 300 children: 300^7 codes, beyond 2^53.
    rows, height = [], 7
    spine = [f"s{level}" for level in range(height + 1)]
    spine[height] = "*"
    rows.append(list(spine))
    for level in range(1, height + 1):
        for child in range(299):
            # A side branch under the spine node of this level, one node a level down to its own leaf.
            row = [f"b{level}_{child}_{below}" for below in range(level)] + spine[level:]
            rows.append(row)
    wide = Hierarchy.from_lists(rows, name="wide")
    with pytest.raises(HierarchyError, match="'w'"):
        HierarchyCoding.of(stored(con, wide, "w"))


# ------------------------------------------------------------------------------------------- the fast path
COLOR = Hierarchy.from_lists([["red", "warm", "*"], ["orange", "warm", "*"], ["blue", "cold", "*"],
                              ["green", "cold", "*"]], name="color")


@pytest.fixture
def people(con):
    frame = pd.DataFrame({
        "age": [20 + (i * 7) % 41 for i in range(120)],
        "color": [["red", "orange", "blue", "green", None][i % 5] for i in range(120)],
        "s": [["a", "b", "c"][i % 3] for i in range(120)],
    })
    con.register("frame", frame)
    con.execute("CREATE TABLE people AS SELECT * FROM frame")
    con.unregister("frame")
    return duckanon.connect(con)


@pytest.mark.parametrize("relaxed", [False, True])
def test_metrics_from_the_rows_codes_equal_those_from_looking_the_values_up(people, relaxed):
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR}, models=[KAnonymity(4)], sensitive=["s"],
                 others="drop")
    with bind(people.workspace, "people", pol, partitioning=True) as bound:
        dims = dimensions(as_engine(people.con), bound.counted, bound.quasi_identifiers, bound.hierarchies)
        partitioning = Mondrian(as_engine(people.con), bound.counted, dims, pol.sensitive, pol.models, relaxed=relaxed).run()
        try:
            styles = output_styles(dims, None)
            fast = PartitionMap(partitioning.assignment, styles, coded=partitioning.coded)
            plain = PartitionMap(type(partitioning.assignment)(
                partitioning.assignment.table, partitioning.assignment.keys, partitioning.assignment.group,
                partitioning.assignment.count, partitioning.assignment.spread), styles)
            args = (as_engine(people.con), bound.source, bound.columns, bound.hierarchies, pol.models)
            assert fast.metrics(*args) == pytest.approx(plain.metrics(*args))
            recoded = {}
            for name, transformation in (("fast", fast), ("plain", plain)):
                query = transformation.compile(bound.source, bound.columns, bound.hierarchies)
                recoded[name] = as_engine(people.con).frame(query).sort_values(bound.columns).reset_index(drop=True)
            pd.testing.assert_frame_equal(recoded["fast"], recoded["plain"])
        finally:
            partitioning.close()


def test_statements_grow_with_the_rounds_not_the_partitions(con):
    """Every round costs the same statements (choice, move, two renames, dropping its table at the end)."""
    anon = duckanon.connect(con)
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR}, models=[KAnonymity(2)], sensitive=["s"],
                 others="drop")
    shapes = []
    for n in (40, 640):
        con.execute(f"""CREATE OR REPLACE TABLE t AS SELECT (i * 37) % 61 AS age,
                        ['red', 'orange', 'blue', 'green'][1 + i % 4] AS color, 'x' AS s FROM range({n}) r(i)""")
        result = anon.mondrian("t", pol, metrics=False)
        shapes.append((result.partitioning.partitions, result.partitioning.rounds, result.partitioning.statements))
    (small_parts, small_rounds, small_statements), (big_parts, big_rounds, big_statements) = shapes
    assert big_parts > 8 * small_parts
    assert big_statements - small_statements == 5 * (big_rounds - small_rounds)


def test_inline_hierarchies_reuse_an_equal_stored_table_and_never_overwrite_a_different_one(people):
    con = people.con
    pol = Policy(quasi_identifiers={"age": None, "color": COLOR}, models=[KAnonymity(2)], sensitive=["s"],
                 others="drop")
    people.mondrian("people", pol, metrics=False)
    tables = lambda: sorted(r[0] for r in con.execute(  # noqa: E731
        "SELECT table_name FROM duckdb_tables() WHERE schema_name = 'anon' AND table_name LIKE 'hierarchy_%'").fetchall())
    assert tables() == ["hierarchy_color"]
    people.mondrian("people", pol, metrics=False)
    assert tables() == ["hierarchy_color"]  # the equal stored one was reused
    other = Hierarchy.from_lists([["red", "*"], ["orange", "*"], ["blue", "*"], ["green", "*"]], name="color")
    _, table = people.catalog.stored({"color": other})["color"]
    assert table.name != "hierarchy_color" and len(tables()) == 2
    # The first table still holds the first hierarchy.
    assert people.hierarchy("color") == COLOR
