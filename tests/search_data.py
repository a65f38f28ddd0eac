"""Random tables and hierarchies for the lattice-search tests, a table loaded into a fresh connection, and the node
evaluators every search test runs on."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import strategies as st

import duckanon
from duckanon import Hierarchy
from duckanon.datasets import adult_hierarchy_dir, load_adult

LABEL = "y"
# Adult's nine quasi-identifiers with ARX's hierarchies, as the benchmarks search them.
ADULT_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
             "salary-class"]
# The node evaluators a search can run on; each must pass every search test (the SQL one is the reference).
EVALUATOR_KINDS = ("sql", "memory")
on_every_evaluator = pytest.mark.parametrize("kind", EVALUATOR_KINDS)


@st.composite
def tree_hierarchy(draw, name):
    """A random tree over 2-6 leaves with 2-4 levels (the leaf level included), ending in '*'."""
    leaves = draw(st.integers(2, 6))
    levels = draw(st.integers(2, 4))
    rows = [[f"{name}_{j}"] for j in range(leaves)]
    current = [row[0] for row in rows]
    for level in range(1, levels - 1):
        distinct = sorted(set(current))
        parents = draw(st.lists(st.integers(0, max(0, len(distinct) - 2)), min_size=len(distinct),
                                max_size=len(distinct)))
        parent_of = {value: f"{name}_l{level}_{p}" for value, p in zip(distinct, parents)}
        current = [parent_of[value] for value in current]
        for row, value in zip(rows, current):
            row.append(value)
    for row in rows:
        row.append("*")
    return Hierarchy.from_lists(rows, name=name)


@st.composite
def tables(draw):
    """(frame, hierarchies): 20-200 records over 2-4 quasi-identifiers with skewed value frequencies, a sensitive
    column ``s`` and a binary label ``y``."""
    hierarchies = {f"q{i}": draw(tree_hierarchy(f"q{i}")) for i in range(draw(st.integers(2, 4)))}
    records = draw(st.integers(20, 200))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    columns = {}
    for name, h in hierarchies.items():
        values = h.values
        weights = rng.dirichlet(np.full(len(values), 0.7))
        picked = rng.choice(len(values), size=records, p=weights)
        picked[:2] = [0, 1]  # every attribute has at least two values, so its entropy weight is not 0
        columns[name] = [values[i] for i in picked]
    sensitive_values = ["flu", "cold", "hiv", "cancer"][:draw(st.integers(2, 4))]
    s = list(rng.choice(sensitive_values, size=records, p=rng.dirichlet(np.full(len(sensitive_values), 2.0))))
    s[:2] = sensitive_values[:2]
    columns["s"] = s
    y = list(rng.integers(0, 2, size=records))
    y[:2] = [0, 1]
    columns[LABEL] = [f"c{v}" for v in y]
    return pd.DataFrame(columns), hierarchies


def setup_table(frame):
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    con.unregister("frame")
    return con, duckanon.connect(con)


def adult_setup(quasi_identifiers):
    """Adult loaded into a fresh connection as table ``adult``: the connection, its anonymizer, and the bundled
    hierarchies of ``quasi_identifiers``."""
    con = duckdb.connect()
    load_adult(con, "adult")
    return con, duckanon.connect(con), {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv")
                                        for q in quasi_identifiers}
