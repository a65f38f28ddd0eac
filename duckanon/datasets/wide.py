"""A wide synthetic table, for searches over 20–40 quasi-identifiers (where the lattice is too large to list).

Records are drawn from a mixture of ``CLUSTERS`` latent groups with skewed weights, so that attributes are
correlated as in survey data and the number of distinct combinations grows with the rows.  Attribute ``q01``,
``q02``, … cycles through kinds:

- every third attribute is numeric, 0–99, around a group-specific centre (normal, standard deviation 12, clipped),
  generalized in intervals of 5, 25 and 50 and then ``*`` (5 levels);
- the others are categorical with ``CARDINALITIES`` values in turn; a record takes its group's favourite value with
  probability 0.7, else a uniform one; values are paired, the pairs paired again when there are more than four
  values, then ``*`` (3 or 4 levels).

Seeded: the same arguments give the same table and hierarchies.
"""

from __future__ import annotations

import duckdb
import numpy as np
from sqlglot import exp

from ..deferred import pandas as pd
from ..engine import as_engine
from ..errors import AnonymizationError
from ..hierarchy.hierarchy import Hierarchy
from ..parameters import checked_number
from ..sqlgen import build as sb

CLUSTERS = 12
CARDINALITIES = (2, 4, 6, 8, 12, 16)
NUMERIC_WIDTHS = (5, 25, 50)
# Rows drawn and written at a time.
CHUNK = 500_000


def wide_attributes(attributes: int) -> list[str]:
    return [f"q{i + 1:02d}" for i in range(attributes)]


def _numeric(position: int) -> bool:
    return position % 3 == 0


def _cardinality(position: int) -> int:
    return CARDINALITIES[(position - position // 3 - 1) % len(CARDINALITIES)]


def wide_hierarchies(attributes: int) -> dict[str, Hierarchy]:
    """The hierarchy of each of ``attributes`` attributes of :func:`generate_wide`."""
    checked_number(attributes, "attributes", "wide table", whole=True, low=1)
    hierarchies = {}
    for position, name in enumerate(wide_attributes(attributes)):
        if _numeric(position):
            hierarchies[name] = Hierarchy.intervals(range(100), widths=NUMERIC_WIDTHS, name=name)
            continue
        values = _cardinality(position)
        rows = []
        for value in range(values):
            row = [f"{name}_{value}", f"{name}_p{value // 2}"]
            if values > 4:
                row.append(f"{name}_g{value // 4}")
            rows.append([*row, "*"])
        hierarchies[name] = Hierarchy.from_lists(rows, name=name)
    return hierarchies


def generate_wide(con: duckdb.DuckDBPyConnection, table: str, rows: int, attributes: int, *, seed: int = 0,
                  replace: bool = False) -> dict[str, Hierarchy]:
    """Create ``table`` with ``rows`` records of ``attributes`` attributes (see the module); their hierarchies."""
    rows = checked_number(rows, "rows", "wide table", whole=True, low=1)
    hierarchies = wide_hierarchies(attributes)
    seed = checked_number(seed, "seed", "wide table", whole=True, low=0)
    # The mixture's parameters come from the seed alone, so every chunk draws from the same one.
    setup = np.random.default_rng([seed, 0])
    weights = setup.dirichlet(np.full(CLUSTERS, 0.8))
    centres = setup.uniform(10, 90, (CLUSTERS, attributes))
    favourites = [setup.integers(0, _cardinality(p), CLUSTERS) if not _numeric(p) else None
                  for p in range(attributes)]
    target = sb.table(table)
    engine = as_engine(con)
    try:
        for index, start in enumerate(range(0, rows, CHUNK)):
            rng = np.random.default_rng([seed, index + 1])
            count = min(CHUNK, rows - start)
            group = rng.choice(CLUSTERS, size=count, p=weights)
            columns = {}
            for position, name in enumerate(hierarchies):
                if _numeric(position):
                    columns[name] = np.clip(np.rint(rng.normal(centres[group, position], 12)), 0, 99).astype(np.int32)
                    continue
                values = _cardinality(position)
                own = rng.random(count) < 0.7
                drawn = np.where(own, favourites[position][group], rng.integers(0, values, count))
                columns[name] = np.char.add(f"{name}_", drawn.astype(str))
            with engine.registered(pd.DataFrame(columns, copy=False)) as chunk:
                query = exp.select(exp.Star()).from_(chunk)
                engine.run(sb.create_table_as(target, query, replace=replace) if index == 0
                           else exp.insert(query, target))
    except duckdb.CatalogException as error:
        raise AnonymizationError(f"cannot create table {table!r} (replace=True replaces one): {error}") from error
    return hierarchies
