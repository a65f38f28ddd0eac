"""Cell suppression (``Anonymizer.suppress_cells``, sdcMicro's ``localSuppression``): sdcMicro's own expected values
on its test data (``sdcTools/sdcMicro``, ``tests/testthat/test_localSuppression.R``: 97 cells, 109 by stratum; and
``test_localSupp.R``'s data drawn with R's generator: 2 and 10), every
release's compatible counts recomputed by brute force with pandas, the released values against the source's, the
importance order on a table whose choice is worked out by hand, and Adult against the full-domain release it starts
from."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from search_data import adult_setup, setup_table, tables

import duckanon
from duckanon import DistinctLDiversity, Hierarchy, KAnonymity, Policy
from duckanon.cli import main
from duckanon.errors import PolicyError

MACROS = Path(__file__).resolve().parents[1] / "sql" / "duckanon.sql"
MACROS_RUN = tuple(int(p) for p in duckdb.__version__.split(".")[:2]) >= (1, 4)  # as tests/test_sql_macros.py
TESTDATA2 = Path(__file__).parent / "data" / "sdcmicro_testdata2.csv"  # sdcMicro's data(testdata2): keys and age
KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]


def compatible(frame: pd.DataFrame, quasi: list[str], rows: np.ndarray | None = None) -> np.ndarray:
    """Per record (of ``rows``, a mask; all by default), the records equal to it on every quasi-identifier both hold
    (a missing value matches any), by brute force over all pairs."""
    values = frame[quasi].astype(object).where(frame[quasi].notna(), None).to_numpy()
    ours = values if rows is None else values[rows]
    matches = np.ones((len(ours), len(values)), dtype=bool)
    for j in range(len(quasi)):
        present = np.array([v is not None for v in values[:, j]])
        mine = np.array([v is not None for v in ours[:, j]])
        matches &= (ours[:, j][:, None] == values[:, j][None, :]) | ~mine[:, None] | ~present[None, :]
    return matches.sum(axis=1)


def released_rows(path: Path, columns: str = "*") -> pd.DataFrame:
    """The release's rows (its connection held until they are read: an older DuckDB's relation does not keep it)."""
    with duckdb.connect(str(path), read_only=True) as con:
        return con.sql(f"SELECT {columns} FROM release").df()


def flat(values) -> Hierarchy:
    """A value and '*' above it: cell suppression at level 0 needs no more."""
    return Hierarchy.from_lists([[str(v), "*"] for v in sorted(set(values))])


def sdcmicro_testdata2(strata: bool = False):
    """sdcMicro's testdata2 in DuckDB, with ``ageG`` as R's ``cut(age, 5, labels = paste0("AG", 1:5))`` makes it (five
    equal-width intervals closed on the right, the range widened by a thousandth at both ends)."""
    frame = pd.read_csv(TESTDATA2)
    age = frame["age"].to_numpy(dtype=float)
    breaks = np.linspace(age.min(), age.max(), 6)
    breaks[0] -= (age.max() - age.min()) / 1000
    breaks[-1] += (age.max() - age.min()) / 1000
    frame["ageG"] = [f"AG{g}" for g in np.searchsorted(breaks, age, side="left")]
    _, anon = setup_table(frame)
    policy = Policy(quasi_identifiers={c: flat(frame[c]) for c in KEYS}, models=[KAnonymity(2)],
                    suppression_limit=1.0, others="insensitive", strata=["ageG"] if strata else [])
    return frame, anon, policy


@pytest.mark.parametrize("strata, expected", [((), 97), (("ageG",), 109)])
def test_sdcmicros_expected_suppressions_on_sdcmicro_testdata2(tmp_path, strata, expected):
    """sdcMicro: ``localSuppression(inp, keyVars = 1:7)$newSupps == 97``, with ``strataVars = 8`` 109 (k = 2, the
    default importance)."""
    frame, anon, policy = sdcmicro_testdata2(bool(strata))
    path = tmp_path / "cells.duckdb"
    cells, release = anon.suppress_cells("t", policy, path, levels={c: 0 for c in policy.quasi_identifier_names})
    assert sum(cells.cells.values()) == expected
    assert release.suppressed == 0 and release.records_out == len(frame)
    released = released_rows(path)
    quasi = [*KEYS, *strata]
    assert int(released[KEYS].isna().sum().sum()) == expected
    fewest = int(compatible(released, quasi).min())
    assert fewest >= 2
    # The release's own view and the shell macro count compatible records too: every guarantee holds, and the smallest
    # class is the fewest compatible records of any record.
    with duckdb.connect(str(path), read_only=True) as con:
        view = con.sql("SELECT guarantee, recomputed, holds FROM release_verification").df()
        if MACROS_RUN:
            con.execute(MACROS.read_text())
            shell = con.sql("SELECT guarantee, recomputed, holds FROM anon_verify('release')").df()
            assert shell["holds"].all() and int(shell.set_index("guarantee").at["smallest class", "recomputed"]) == fewest
    assert view["holds"].all() and int(view.set_index("guarantee").at["smallest class", "recomputed"]) == fewest
    # sdcMicro's default importance: fewer categories, more important; so the most suppressed first.
    assert cells.order == sorted(KEYS, key=lambda c: (-frame[c].nunique(), -KEYS.index(c)))
    assert duckanon.verify(path).holds


class RMersenneTwister:
    """R's default uniform generator, to rebuild the data sdcMicro's tests draw: Mersenne-Twister seeded as R's
    ``set.seed`` seeds it (the seed scrambled 50 times by the congruence 69069 s + 1, then 625 more for the state, the
    first of which is the position) and ``unif_rand``'s 2^-32 scaling kept off 0 and 1."""

    def __init__(self, seed: int):
        state = seed & 0xFFFFFFFF
        for _ in range(50):
            state = (69069 * state + 1) & 0xFFFFFFFF
        words = []
        for _ in range(625):
            state = (69069 * state + 1) & 0xFFFFFFFF
            words.append(state)
        self.mt, self.position = words[1:], 624

    def _next(self) -> float:
        mt = self.mt
        if self.position >= 624:
            for i in range(624):
                y = (mt[i] & 0x80000000) | (mt[(i + 1) % 624] & 0x7FFFFFFF)
                mt[i] = mt[(i + 397) % 624] ^ (y >> 1) ^ (0x9908B0DF if y & 1 else 0)
            self.position = 0
        y = mt[self.position]
        self.position += 1
        y ^= y >> 11
        y ^= (y << 7) & 0x9D2C5680
        y ^= (y << 15) & 0xEFC60000
        y ^= y >> 18
        value = y * 2.3283064365386963e-10
        return min(max(value, 0.5 * 2.328306437080797e-10), 1 - 0.5 * 2.328306437080797e-10)

    def runif(self, n: int, low: float, high: float) -> np.ndarray:
        return np.array([low + (high - low) * self._next() for _ in range(n)])


def test_r_generator_draws_what_r_draws():
    assert RMersenneTwister(42).runif(3, 0, 1) == pytest.approx([0.914806, 0.9370754, 0.2861395], abs=1e-7)


@pytest.mark.parametrize("keys, importance, expected", [
    (["Var4", "Var5"], None, 2),  # "dataframe without missing, k = 2, importance=NULL, combs=NULL"
    (["Var3", "Var4", "Var5"], ["Var5", "Var4", "Var3"], 10),  # "... importance=c(3,2,1), combs=NULL"
])
def test_sdcmicros_expected_suppressions_on_its_drawn_data(tmp_path, keys, importance, expected):
    """sdcMicro's ``test_localSupp.R``: ``set.seed(3)``, three columns of runif(30, 1, 100) and three of rounded
    runif; k = 2 (its importance c(3, 2, 1) ranks Var5 most important)."""
    draw = RMersenneTwister(3)
    numbers = draw.runif(30, 1, 100).reshape(3, 10).T  # R's array() fills column by column
    frame = pd.DataFrame({"Var1": numbers[:, 0], "Var2": numbers[:, 1], "Var3": numbers[:, 2],
                          **{f"Var{4 + i}": np.round(draw.runif(10, 1, high)).astype(int)
                             for i, high in enumerate((3, 2, 4))}})
    _, anon = setup_table(frame)
    policy = Policy(quasi_identifiers={k: flat(frame[k]) for k in keys}, models=[KAnonymity(2)],
                    suppression_limit=1.0, others="insensitive")
    path = tmp_path / "cells.duckdb"
    cells, _ = anon.suppress_cells("t", policy, path, importance=importance, levels={k: 0 for k in keys})
    assert sum(cells.cells.values()) == expected
    released = released_rows(path)
    assert int(released[keys].isna().sum().sum()) == expected and (compatible(released, keys) >= 2).all()


def test_importance_chooses_between_equally_near_neighbours(tmp_path):
    """(1, 2) is one value from (1, 1) (on b) and from (2, 2) (on a): it loses the less important one."""
    frame = pd.DataFrame({"a": ["1", "1", "2", "2", "1"], "b": ["1", "1", "2", "2", "2"]})
    _, anon = setup_table(frame)
    policy = Policy(quasi_identifiers={"a": flat(frame["a"]), "b": flat(frame["b"])}, models=[KAnonymity(2)],
                    suppression_limit=1.0)
    for important, lost in (["a"], "b"), (["b"], "a"):
        path = tmp_path / f"{lost}.duckdb"
        cells, _ = anon.suppress_cells("t", policy, path, importance=important, levels={"a": 0, "b": 0})
        assert cells.cells == {"a": int(lost == "a"), "b": int(lost == "b")} and cells.records == 1
        released = released_rows(path, "a, b")
        assert released[lost].isna().sum() == 1 and released.notna().sum().sum() == 9


@given(data=tables(), k=st.integers(2, 5), limit=st.sampled_from([0.0, 0.1, 1.0]), cells_only=st.booleans())
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_every_release_has_k_compatible_records_and_keeps_every_other_value(tmp_path_factory, data, k, limit,
                                                                           cells_only):
    frame, hierarchies = data
    quasi = list(hierarchies)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(k)], suppression_limit=limit,
                    others="insensitive")
    _, anon = setup_table(frame)
    path = tmp_path_factory.mktemp("cells") / "release.duckdb"
    levels = {q: 0 for q in quasi} if cells_only else None
    if len(frame) < k:
        return
    try:
        cells, release = anon.suppress_cells("t", policy, path, levels=levels)
    except duckanon.PolicyNotSatisfied:
        assert not cells_only and anon.search("t", policy).levels is None
        assert not path.exists()
        return
    released = released_rows(path)
    assert len(released) == len(frame) and release.suppressed == 0
    assert (compatible(released, quasi) >= k).all()
    assert duckanon.verify(path).holds
    # Every value not suppressed is the source's on the chosen levels; the suppressed ones are counted.
    expected = frame.copy()
    for attribute, hierarchy in hierarchies.items():
        label = {row[0]: row[cells.levels[attribute]] for row in hierarchy.rows}
        expected[attribute] = frame[attribute].map(label)
    order = list(frame.columns)
    expected = expected.sort_values(order).reset_index(drop=True)
    got = released[order]
    missing = got[quasi].isna()
    assert {q: int(missing[q].sum()) for q in quasi} == cells.cells
    assert cells.records == int(missing.any(axis=1).sum())
    # Records with the same other columns: match each released record to a source record it may come from.
    for _, rows in got.groupby([c for c in order if c not in quasi]):
        pool = expected[(expected[[c for c in order if c not in quasi]] == rows.iloc[0][
            [c for c in order if c not in quasi]]).all(axis=1)]
        for _, row in rows.iterrows():
            fits = pd.Series(True, index=pool.index)
            for q in quasi:
                if pd.notna(row[q]):
                    fits &= pool[q] == row[q]
            assert fits.any()


def test_adult_keeps_every_record_the_full_domain_release_suppresses(tmp_path):
    """From the same optimum: the records that lose values are those full-domain generalization suppresses, and every
    other record is released as the full-domain release has it."""
    quasi = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
    _, anon, hierarchies = adult_setup(quasi)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(5)], suppression_limit=0.05, others="drop")
    found, full = anon.anonymize("adult", policy, tmp_path / "full.parquet")
    cells, release = anon.suppress_cells("adult", policy, tmp_path / "cells.parquet")
    assert cells.levels == found.levels and release.records_out == 30162 == full.records_out
    full_rows = pd.read_parquet(tmp_path / "full.parquet")[quasi]
    cell_rows = pd.read_parquet(tmp_path / "cells.parquet")[quasi]
    starred = (full_rows == "*").all(axis=1)
    lost = cell_rows.isna().any(axis=1)
    # Every record of a violating class loses a value in the first pass; no other record does.
    assert cells.records == int(lost.sum()) == int(starred.sum()) == full.suppressed > 0
    counted = lambda rows: rows.astype(str).value_counts().sort_index()
    pd.testing.assert_series_equal(counted(full_rows[~starred]), counted(cell_rows[~lost]))
    assert (compatible(cell_rows, quasi, lost.to_numpy()) >= 5).all()
    assert sum(cells.cells.values()) >= cells.records
    assert duckanon.verify(tmp_path / "cells.parquet").holds


def test_bad_input_is_refused_by_name_and_writes_nothing(tmp_path):
    _, anon, policy = sdcmicro_testdata2()
    path = tmp_path / "cells.duckdb"
    with pytest.raises(PolicyError, match="'age', which is not a quasi-identifier"):
        anon.suppress_cells("t", policy, path, importance=["sex", "age"])
    with pytest.raises(PolicyError, match="'sex' twice"):
        anon.suppress_cells("t", policy, path, importance=["sex", "sex"])
    with pytest.raises(PolicyError, match="'ageG', which is not a quasi-identifier"):
        anon.suppress_cells("t", dataclasses.replace(policy, strata=["ageG"]), path, importance=["ageG"])
    with_l = Policy(quasi_identifiers=policy.quasi_identifiers, sensitive=["age"], others="insensitive",
                    models=[KAnonymity(2), DistinctLDiversity("age", 2)], suppression_limit=1.0)
    with pytest.raises(PolicyError, match="k-anonymity only.*distinct"):
        anon.suppress_cells("t", with_l, path)
    assert not path.exists()


def test_the_command_suppresses_cells(tmp_path, capsys):
    frame = pd.read_csv(TESTDATA2)
    source = tmp_path / "testdata2.csv"
    frame.to_csv(source, index=False)
    args = [str(source), "-o", str(tmp_path / "cells.parquet"), "--k", "2", "--suppression-limit", "1",
            "--others", "insensitive", "--cell-suppression", "--importance", "water", "--levels",
            ",".join(f"{c}=0" for c in KEYS)]
    for key in KEYS:
        hierarchy = tmp_path / f"{key}.csv"
        flat(frame[key]).to_arx_csv(hierarchy)
        args += ["--qi", f"{key}={hierarchy}"]
    assert main(args) == 0
    out = capsys.readouterr().out
    released = pd.read_parquet(tmp_path / "cells.parquet")
    assert "values suppressed" in out and released[KEYS].isna().sum().sum() > 0
    assert (compatible(released, KEYS) >= 2).all()
    # water, the most important, loses fewer values than with the default order (56 of 97).
    assert released["water"].isna().sum() < 56
    assert main([*args, "--check-only"]) != 0
    assert "--cell-suppression suppresses values and writes a release: it takes no --check-only" in (
        capsys.readouterr().err)


def test_a_stratum_of_fewer_than_k_records_is_refused_by_name(tmp_path):
    frame = pd.DataFrame({"a": ["1", "2", "1", "2", "1"], "g": ["x", "x", "x", "x", "y"]})
    _, anon = setup_table(frame)
    policy = Policy(quasi_identifiers={"a": flat(frame["a"])}, models=[KAnonymity(2)], suppression_limit=1.0,
                    strata=["g"])
    with pytest.raises(duckanon.PolicyNotSatisfied, match=r"stratum \{'g': 'y'\}: it holds 1 record"):
        anon.suppress_cells("t", policy, tmp_path / "cells.duckdb", levels={"a": 0})
    assert not (tmp_path / "cells.duckdb").exists()


def test_the_report_counts_compatible_records_and_the_values_suppressed(tmp_path):
    """The report's risk of a cell-suppression release is each record's 1 / its compatible records (brute force here),
    and it says how many values were suppressed, not records."""
    _, anon, policy = sdcmicro_testdata2()
    path = tmp_path / "cells.duckdb"
    cells, release = anon.suppress_cells("t", policy, path, levels={c: 0 for c in policy.quasi_identifier_names})
    page = release.report(tmp_path / "cells.html", tables=tmp_path / "report.duckdb")
    fk = compatible(released_rows(path), KEYS)
    with duckdb.connect(str(tmp_path / "report.duckdb"), read_only=True) as con:
        risk = con.sql("SELECT measure, release FROM report_risk").df().set_index("measure")["release"]
    assert risk["average prosecutor risk"] == pytest.approx(float(np.mean(1.0 / fk)))
    assert risk["highest prosecutor risk"] == pytest.approx(1.0 / fk.min())
    assert risk["sample uniques"] == int((fk == 1).sum()) == 0
    assert risk["records at risk (prosecutor)"] == int((1.0 / fk > 0.2).sum())
    html = page.read_text()
    assert 'data-figure="suppression.values" data-value="97"' in html
    assert f'data-figure="suppression.records" data-value="{cells.records}"' in html
    assert "matches any value" in html


def test_an_encoded_source_gives_the_same_release_as_its_table(tmp_path):
    """Encoded once, the source's frequency table serves the search and the suppression; the release is the one the
    table gives, and the encoding stays usable."""
    frame, anon, policy = sdcmicro_testdata2()
    levels = {c: 0 for c in policy.quasi_identifier_names}
    direct, _ = anon.suppress_cells("t", policy, tmp_path / "direct.duckdb", levels=levels)
    with anon.encode("t", policy) as encoded:
        again, _ = anon.suppress_cells(encoded, None, tmp_path / "encoded.duckdb", levels=levels)
        assert encoded.check(levels).records == len(frame)
    assert again.cells == direct.cells
    order = [*KEYS, "age"]
    pd.testing.assert_frame_equal(released_rows(tmp_path / "encoded.duckdb")[order].sort_values(order, ignore_index=True),
                                  released_rows(tmp_path / "direct.duckdb")[order].sort_values(order, ignore_index=True))
