"""Searching a source encoded once (``anon.encode``): the same results as searching the table, no second reading of
it, and its own policy only; ``anonymize`` and the command line's search, check and publish share one reading and
encoding of the source."""

from __future__ import annotations

import duckdb
import pandas as pd
import pytest

import duckanon
from duckanon import (
    DistinctLDiversity,
    Hierarchy,
    KAnonymity,
    Policy,
    PolicyError,
    ReleaseCheckFailed,
)
from duckanon.cli import main
from duckanon.encode import binding


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


def _counting_reads(monkeypatch):
    """How often a source is read into a frequency table (every binding counts its combinations once)."""
    reads = []
    counted = binding.count_combinations
    monkeypatch.setattr(binding, "count_combinations", lambda *a, **k: reads.append(a[1]) or counted(*a, **k))
    return reads


def test_anonymize_reads_and_encodes_the_source_once(source, tmp_path, monkeypatch):
    con, _, policy, frame = source
    reads, said = _counting_reads(monkeypatch), []
    anon = duckanon.connect(con, progress=said.append)
    result, release = anon.anonymize("patients", policy, tmp_path / "release.duckdb", metric="loss")
    assert len(reads) == 1
    assert said.count("encoding the source into a frequency table") == 1
    # The recorded metrics are the node's own, measured over the same encoding the search used.
    assert release.records_in == len(frame)
    assert duckanon.verify(release.path).info["metrics"]["loss"] == pytest.approx(result.best.values["loss"], rel=1e-12)


def test_the_command_line_searches_checks_and_publishes_one_encoding(tmp_path, monkeypatch, capsys):
    reads = _counting_reads(monkeypatch)
    assert main(["-o", str(tmp_path / "adult.duckdb")]) == 0
    assert len(reads) == 1
    assert capsys.readouterr().err.count("encoding the source into a frequency table") == 1


def test_a_source_changed_after_encoding_fails_its_publish_and_writes_nothing(source, tmp_path):
    con, anon, policy, frame = source
    with anon.encode("patients", policy) as encoded:
        con.execute("DELETE FROM patients WHERE age < 25")
        with pytest.raises(ReleaseCheckFailed, match=f"{(frame['age'] >= 25).sum()} records written, "
                                                     f"{len(frame)} expected"):
            anon.publish(encoded, None, {"age": 1, "zip": 1}, tmp_path / "release.duckdb")
    assert list(tmp_path.iterdir()) == []
