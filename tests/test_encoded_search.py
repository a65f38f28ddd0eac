"""Searching a source encoded once (``anon.encode``): the same results as searching the table, no second reading of
it, and its own policy only."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import duckanon
from duckanon import DistinctLDiversity, Hierarchy, KAnonymity, Policy, PolicyError


@pytest.fixture
def source():
    con = duckdb.connect()
    frame = pd.DataFrame({"age": [21, 25, 33, 37, 22, 38, 29, 31] * 3,
                          "zip": ["100", "101", "200", "201", "100", "201", "101", "200"] * 3,
                          "disease": ["flu", "cold", "flu", "hiv", "cold", "flu", "hiv", "cold"] * 3})
    con.register("frame", frame)
    con.execute("CREATE TABLE patients AS SELECT * FROM frame")
    con.unregister("frame")
    policy = Policy(quasi_identifiers={"age": Hierarchy.intervals(range(20, 40), widths=[5, 10], name="age"),
                                       "zip": Hierarchy.redaction(["100", "101", "200", "201"], name="zip")},
                    models=[KAnonymity(4), DistinctLDiversity("disease", 2)], sensitive=["disease"],
                    suppression_limit=0.1)
    yield con, duckanon.connect(con), policy, frame
    con.close()


@pytest.mark.parametrize("metric", ["dm", "loss", "non-uniform-entropy"])
def test_an_encoded_source_searches_as_its_table(source, metric):
    con, anon, policy, _ = source
    on_table = anon.search("patients", policy, metric=metric)
    with anon.encode("patients", policy) as encoded:
        # Read after encoding, the table's rows no longer matter: the encoded source searches what it read.
        con.execute("DELETE FROM patients")
        for evaluator in ("memory", "sql"):
            on_encoded = anon.search(encoded, metric=metric, evaluator=evaluator)
            assert on_encoded.levels == on_table.levels
            assert on_encoded.best.suppressed == on_table.best.suppressed
            assert on_encoded.best.values[metric] == pytest.approx(on_table.best.values[metric], rel=1e-9)


def test_an_encoded_source_is_searched_with_its_own_policy_only(source):
    _, anon, policy, _ = source
    with anon.encode("patients", policy) as encoded:
        assert anon.search(encoded, policy, metric="dm").found
        other = Policy(quasi_identifiers=policy.quasi_identifiers, models=[KAnonymity(2)], sensitive=["disease"])
        with pytest.raises(PolicyError, match="encoded for another policy"):
            anon.search(encoded, other, metric="dm")
    with pytest.raises(PolicyError, match="a policy is needed"):
        anon.search("patients", metric="dm")


def test_anonymize_an_encoded_source_publishes_its_table(source, tmp_path):
    _, anon, policy, frame = source
    with anon.encode("patients", policy) as encoded:
        result, release = anon.anonymize(encoded, None, tmp_path / "release.duckdb", metric="loss")
    assert release.records_in == len(frame)
    released = duckdb.connect(str(tmp_path / "release.duckdb"), read_only=True)
    rows = released.execute("SELECT COUNT(*) FROM release").fetchone()[0]
    assert rows + (release.suppressed if policy.suppression == "drop" else 0) == len(frame)
    # Every class of the release holds at least k records and two diseases (pandas, not the engine).
    kept = released.execute("SELECT * FROM release").df()
    groups = kept.groupby(["age", "zip"], dropna=False)["disease"]
    assert (groups.size() >= 4).all() and (groups.nunique() >= 2).all()
    released.close()
