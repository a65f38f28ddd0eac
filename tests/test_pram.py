"""PRAM (``Pram``): sdcMicro's invariant transition matrix recomputed here by its R code's loops, the released
transitions against the matrix statistically (fixed seeds), and bad matrices refused by name with nothing written."""

from __future__ import annotations

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import duckanon
from duckanon import Pram
from duckanon.cli import main
from duckanon.errors import PolicyError


def sdcmicro_matrix(shares: np.ndarray, kept: np.ndarray, alpha: float) -> np.ndarray:
    """sdcMicro's calcTransitionMatrix (R/pram.R), loop for loop, from its draws ``kept`` of the diagonal."""
    count = len(shares)
    p = np.empty((count, count))
    for i in range(count):
        p[i, :] = (1 - kept[i]) / (count - 1)
        p[i, i] = kept[i]
    q = p.copy()
    for k in range(count):
        s = sum(shares[i] * p[i, k] for i in range(count))
        for j in range(count):
            q[k, j] = p[j, k] * shares[j] / s
    return alpha * (p @ q) + (1 - alpha) * np.eye(count)


@given(counts=st.lists(st.integers(1, 500), min_size=2, max_size=6), keep=st.floats(0, 0.99),
       alpha=st.floats(0, 1), seed=st.integers(0, 2**32 - 1))
@settings(max_examples=60, deadline=None)
def test_the_invariant_matrix_is_sdcmicros_and_keeps_the_shares(counts, keep, alpha, seed):
    values = np.repeat(np.arange(len(counts)), counts)
    shares = np.array(counts) / sum(counts)
    matrix = Pram(keep=keep, alpha=alpha).transition_matrix(values, np.random.default_rng(seed),
                                                           [f"c{i}" for i in range(len(counts))])
    kept = np.random.default_rng(seed).uniform(keep, 1, len(counts))
    assert np.allclose(matrix, sdcmicro_matrix(shares, kept, alpha))
    assert np.allclose(matrix.sum(axis=1), 1) and (matrix >= -1e-12).all()
    assert np.allclose(shares @ matrix, shares)


def released(tmp_path, frame: pd.DataFrame, method: Pram, name: str = "r.duckdb") -> pd.DataFrame:
    """``frame`` (an ``id`` and a category ``c``) perturbed by ``method``, joined back to the originals by ``id``."""
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE t AS SELECT * FROM frame")
    duckanon.connect(con).perturb("t", tmp_path / name, method=method, categorical=["c"], insensitive=["id"],
                                  seed=7, measure=False)
    with duckdb.connect(str(tmp_path / name), read_only=True) as reader:
        out = reader.execute("SELECT id, c FROM release").df()
    return frame.merge(out, on="id", suffixes=("", "_released"))


def test_released_transitions_follow_a_given_matrix(tmp_path):
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"id": range(30_000), "c": rng.choice(["a", "b", "c"], 30_000, p=[0.5, 0.3, 0.2])})
    matrix = pd.DataFrame([[0.8, 0.1, 0.1], [0.2, 0.7, 0.1], [0.0, 0.5, 0.5]], index=list("abc"), columns=list("abc"))
    pairs = released(tmp_path, frame, Pram(matrix=matrix))
    observed = pd.crosstab(pairs["c"], pairs["c_released"]).reindex(index=list("abc"), columns=list("abc"),
                                                                      fill_value=0)
    rows = observed.sum(axis=1).to_numpy()[:, None]
    # Each cell within 4 standard errors of its binomial share.
    spread = 4 * np.sqrt(matrix.to_numpy() * (1 - matrix.to_numpy()) / rows) + 1e-9
    assert (np.abs(observed.to_numpy() / rows - matrix.to_numpy()) <= spread).all()
    assert observed.loc["c", "a"] == 0


def test_the_identity_keeps_every_record_and_the_invariant_matrix_keeps_the_shares(tmp_path):
    """sdcMicro's "pram respects identity and custom transition matrices": the identity changes nothing."""
    rng = np.random.default_rng(2)
    frame = pd.DataFrame({"id": range(20_000), "c": rng.choice(["x", "y", "z", "w"], 20_000, p=[0.4, 0.3, 0.2, 0.1])})
    identity = pd.DataFrame(np.eye(4), index=list("xyzw"), columns=list("xyzw"))
    same = released(tmp_path, frame, Pram(matrix=identity, invariant=True), "same.duckdb")
    assert (same["c"] == same["c_released"]).all()
    pairs = released(tmp_path, frame, Pram(keep=0.5, alpha=1.0), "pram.duckdb")
    before, after = (pairs[c].value_counts(normalize=True).sort_index() for c in ("c", "c_released"))
    assert np.allclose(before, after, atol=4 * np.sqrt(0.25 / 20_000) * 2)
    assert (pairs["c"] != pairs["c_released"]).mean() > 0.1


def test_bad_matrices_are_refused_by_name_and_nothing_is_written(tmp_path):
    with pytest.raises(PolicyError, match="row 'b' sums to 0.9, not 1"):
        Pram(matrix={"a": {"a": 1.0}, "b": {"a": 0.5, "b": 0.4}})
    with pytest.raises(PolicyError, match=r"row 'a', column 'a' must lie in \[0, 1\], got -0.5"):
        Pram(matrix={"a": {"a": -0.5, "b": 1.5}, "b": {"b": 1.0}})
    with pytest.raises(PolicyError, match="names \\['z'\\], which are no rows"):
        Pram(matrix={"a": {"a": 0.5, "z": 0.5}, "b": {"b": 1.0}})
    frame = pd.DataFrame({"id": range(100), "c": ["a"] * 70 + ["b"] * 30})
    with pytest.raises(PolicyError, match="lacks \\['b'\\]"):
        released(tmp_path, frame, Pram(matrix={"a": {"a": 1.0}}))
    drifting = {"a": {"a": 0.5, "b": 0.5}, "b": {"a": 0.5, "b": 0.5}}
    with pytest.raises(PolicyError, match="not invariant.*'b' would hold 0.5 of the records instead of 0.3"):
        released(tmp_path, frame, Pram(matrix=drifting, invariant=True))
    assert not list(tmp_path.iterdir())


def test_the_perturb_command_prams_with_a_matrix_file(tmp_path, capsys):
    pd.DataFrame({"id": range(200), "c": ["a", "b"] * 100}).to_csv(tmp_path / "t.csv", index=False)
    pd.DataFrame([[0.9, 0.1], [0.1, 0.9]], index=["a", "b"], columns=["a", "b"]).to_csv(tmp_path / "m.csv")
    out = tmp_path / "r.duckdb"
    assert main(["perturb", str(tmp_path / "t.csv"), "--categorical", "c", "--categorical-method", "pram",
                 "--transition-matrix", str(tmp_path / "m.csv"), "--invariant", "--insensitive", "id", "-o",
                 str(out), "--seed", "1"]) == 0
    info = duckanon.verify(out).info
    recorded = info["transformation"]["perturbation"]["c"]
    assert recorded["matrix"] == "given" and recorded["invariant"] is True
    assert recorded["transition_matrix"] == {"a": {"a": 0.9, "b": 0.1}, "b": {"a": 0.1, "b": 0.9}}
    assert main(["perturb", str(tmp_path / "t.csv"), "--categorical", "c", "--transition-matrix",
                 str(tmp_path / "m.csv"), "--insensitive", "id", "-o", str(tmp_path / "x.duckdb")]) == 2
    assert "are for --categorical-method pram" in capsys.readouterr().err


def test_the_release_records_the_matrix_it_was_drawn_from(tmp_path):
    """The drawn invariant matrix goes into release_info (analysts correct their estimates by it): its rows sum to 1
    and it keeps the source's shares, computed here with pandas."""
    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"id": range(5_000), "c": rng.choice(["x", "y", "z"], 5_000, p=[0.6, 0.3, 0.1])})
    released(tmp_path, frame, Pram(keep=0.6, alpha=0.8))
    recorded = duckanon.verify(tmp_path / "r.duckdb").info["transformation"]["perturbation"]["c"]
    matrix = pd.DataFrame(recorded["transition_matrix"]).T.loc[["x", "y", "z"], ["x", "y", "z"]]
    shares = frame["c"].value_counts(normalize=True).loc[["x", "y", "z"]].to_numpy()
    assert np.allclose(matrix.sum(axis=1), 1) and np.allclose(shares @ matrix.to_numpy(), shares)
    assert recorded["keep"] == 0.6 and recorded["alpha"] == 0.8
