"""The census-shaped generator (``duckanon.datasets.census``): seeded, covered by its hierarchies, shaped as it says,
and more diverse the more records it draws; its Parquet parts hold the same records as its table."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest

import duckanon
from duckanon import AnonymizationError, KAnonymity, Policy
from duckanon.datasets import census


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 1,000 records, so that several chunks and parts cost little."""
    monkeypatch.setattr(census, "CHUNK", 1_000)


def _drawn(rows: int, seed: int = 0) -> pd.DataFrame:
    con = duckdb.connect()
    census.generate_census(con, "people", rows, seed=seed)
    return con.table("people").df()


def _sorted(frame: pd.DataFrame) -> pd.DataFrame:
    return frame.sort_values(census.QUASI_IDENTIFIERS).reset_index(drop=True)


def test_the_same_seed_draws_the_same_records_and_another_seed_others(small_chunks):
    first, again, other = _drawn(4_500), _drawn(4_500), _drawn(4_500, seed=1)
    pd.testing.assert_frame_equal(_sorted(first), _sorted(again))
    assert not _sorted(first).equals(_sorted(other))
    assert len(first) == 4_500 and first.notna().all().all()


def test_every_value_is_a_leaf_of_its_hierarchy_and_a_search_binds_it():
    frame = _drawn(20_000)
    for name, hierarchy in census.census_hierarchies().items():
        leaves = {str(row[0]) for row in hierarchy.rows}
        assert set(frame[name].astype(str)) <= leaves, name
    con = duckdb.connect()
    census.generate_census(con, "people", 20_000)
    policy = Policy(quasi_identifiers=census.census_hierarchies(), models=[KAnonymity(5)], suppression_limit=0.05)
    result = duckanon.connect(con).search("people", policy, metric="dm")
    assert result.found and result.lattice_size == 38_880


def test_the_records_are_shaped_as_the_module_says():
    frame = _drawn(200_000)
    children = frame[frame["age"] < 15]
    assert (children["marital"] == "never married").all()
    assert (frame.loc[frame["age"] < 6, "education"] == "none").all()
    assert frame["year"].between(census.FIRST_YEAR, census.FIRST_YEAR + census.YEARS - 1).all()
    assert frame["household"].between(1, census.HOUSEHOLD).all()
    # Each state's share within 5 standard errors of its population's share.
    population = pd.Series({s: p for s, _, p in census._STATES}, dtype=float)
    expected = population / population.sum()
    observed = frame["state"].value_counts(normalize=True).reindex(expected.index, fill_value=0)
    error = np.sqrt(expected * (1 - expected) / len(frame))
    assert (abs(observed - expected) <= 5 * error).all()
    # Women outnumber men among the old, not among the young; widowhood comes with age.
    old, young = frame[frame["age"] >= 80], frame[frame["age"] < 40]
    assert (old["sex"] == "female").mean() > 0.55 > (young["sex"] == "female").mean()
    assert (old["marital"] == "widowed").mean() > 0.4 > 10 * (young["marital"] == "widowed").mean()


def test_distinct_combinations_grow_with_the_records_while_the_share_of_uniques_falls():
    frame = _drawn(400_000)
    sizes = {}
    for rows in (40_000, 400_000):
        counts = frame.head(rows).groupby(census.QUASI_IDENTIFIERS, observed=True).size()
        sizes[rows] = (len(counts), (counts == 1).sum() / rows)
    (small, small_unique), (large, large_unique) = sizes[40_000], sizes[400_000]
    assert large > 5 * small  # ten times the records, far more than five times the combinations
    assert large_unique < small_unique


def test_the_parquet_parts_hold_the_records_of_the_table(small_chunks, tmp_path):
    folder = census.write_census(tmp_path / "people.parquet", 4_500, part_rows=2_000)
    assert sorted(p.name for p in folder.iterdir()) == ["part-00000.parquet", "part-00001.parquet",
                                                        "part-00002.parquet"]
    con = duckdb.connect()  # kept: DuckDB 1.2 closes a connection nothing holds before its relation is read
    read = con.read_parquet(str(folder / "*.parquet")).df()
    pd.testing.assert_frame_equal(_sorted(read), _sorted(_drawn(4_500)))
    assert [p.name for p in tmp_path.iterdir()] == ["people.parquet"]


def test_census_files_refuse_an_existing_folder_and_a_part_not_of_whole_chunks(small_chunks, tmp_path):
    (tmp_path / "taken").mkdir()
    with pytest.raises(AnonymizationError, match="exists"):
        census.write_census(tmp_path / "taken", 10)
    with pytest.raises(AnonymizationError, match="part_rows 1500 is not a multiple of the chunk, 1000"):
        census.write_census(tmp_path / "new", 10, part_rows=1_500)
    with pytest.raises(AnonymizationError, match="rows"):
        census.write_census(tmp_path / "new", 0)
    assert [p.name for p in tmp_path.iterdir()] == ["taken"]


def test_a_partial_folder_a_stopped_run_left_is_replaced(small_chunks, tmp_path):
    stale = tmp_path / ".people.parquet.partial"
    stale.mkdir()
    (stale / "part-00000.parquet").write_text("left by a stopped run")
    folder = census.write_census(tmp_path / "people.parquet", 1_500)
    assert [p.name for p in tmp_path.iterdir()] == ["people.parquet"]
    con = duckdb.connect()
    assert len(con.read_parquet(str(folder / "*.parquet")).df()) == 1_500
