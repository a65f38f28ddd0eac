"""No release holds a random seed (issue 12): with the seed, anyone could regenerate the noise of a perturbation or
retrace the random choices of a partitioning.  Every algorithm's release_info is read back cell by cell (JSON cells
walked to their keys) and must neither name a seed nor hold the seed's value."""

from __future__ import annotations

import json

import duckdb
import numpy as np
import pandas as pd
import pytest

import duckanon
from duckanon import (
    MDAV,
    AdditiveNoise,
    AlphaKAnonymity,
    AlphaLDiversityKAnonymity,
    EmpiricalSynthesis,
    Hierarchy,
    KAnonymity,
    Personalization,
    Policy,
    RandomizedResponse,
    SemiSupervisedClustering,
    TopDownPartitioning,
)
from duckanon.release.files import INFO_TABLE

SEED = 918_273_645  # distinctive: its digits appear nowhere else by chance
N = 400
SEED_NAMES = {"seed", "random seed", "rng seed", "random state"}


@pytest.fixture(scope="module")
def anon():
    rng = np.random.default_rng(1)
    frame = pd.DataFrame({
        "name": [f"person {i}" for i in range(N)], "age": rng.integers(20, 80, N),
        "zip": rng.choice(["47677", "47678", "47602", "47905", "47906"], N),
        "disease": rng.choice(["flu", "cold", "asthma", "hiv", "cancer"], N),
        "visit_count": rng.integers(1, 9, N)})
    frame["ppl"] = np.where(frame["visit_count"] > 6, 2, None)
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE patients AS SELECT * FROM frame")
    con.unregister("frame")
    anonymizer = duckanon.connect(con)
    anonymizer.add_hierarchy("age", Hierarchy.intervals(frame["age"], widths=[10, 20]))
    anonymizer.add_hierarchy("zip", Hierarchy.redaction(frame["zip"]))
    yield anonymizer
    con.close()


def cells(value) -> list:
    """A cell and, when it holds JSON, everything inside it: (keys, scalars)."""
    if isinstance(value, str):
        try:
            parsed = json.loads(value)
        except ValueError:
            return [], [value]
        if not isinstance(parsed, (dict, list)):
            return [], [value]
        value = parsed
    if isinstance(value, dict):
        keys, scalars = list(map(str, value)), []
        for item in value.values():
            more_keys, more = cells(item)
            keys, scalars = keys + more_keys, scalars + more
        return keys, scalars
    if isinstance(value, (list, tuple)):
        keys, scalars = [], []
        for item in value:
            more_keys, more = cells(item)
            keys, scalars = keys + more_keys, scalars + more
        return keys, scalars
    return [], [value]


def assert_no_seed(path) -> None:
    with duckdb.connect(str(path), read_only=True) as reader:
        cursor = reader.execute(f'SELECT * FROM "{INFO_TABLE}"')
        columns = [d[0] for d in cursor.description]
        rows = cursor.fetchall()
    assert rows, "release_info is empty"
    keys, scalars = list(columns), []
    for row in rows:
        for value in row:
            more_keys, more = cells(value)
            keys, scalars = keys + more_keys, scalars + more
    # Column names and JSON keys may not mention a seed; in a (key, value) layout the key is a text cell of its own.
    named = [k for k in keys if "seed" in k.lower()]
    named += [s for s in scalars if isinstance(s, str) and s.strip().lower().replace("_", " ") in SEED_NAMES]
    assert not named, f"release_info names a seed: {named}"
    shown = [s for s in scalars if str(SEED) in str(s)]
    assert not shown, f"release_info holds the seed's value: {shown}"


PARTITIONED = dict(identifiers=["name", "ppl"], quasi_identifiers={"age": None, "zip": "zip"},
                   insensitive=["visit_count"])


def test_full_domain_search_release(anon, tmp_path):
    policy = Policy(identifiers=["name", "ppl"], quasi_identifiers={"age": "age", "zip": "zip"},
                    insensitive=["visit_count"], sensitive=["disease"], models=[KAnonymity(5)],
                    suppression_limit=0.05)
    _, release = anon.anonymize("patients", policy, tmp_path / "search.duckdb")
    assert_no_seed(release.path)


def test_mondrian_release(anon, tmp_path):
    policy = Policy(**PARTITIONED, sensitive=["disease"], models=[KAnonymity(5)])
    result = anon.mondrian("patients", policy, tmp_path / "mondrian.duckdb")
    assert_no_seed(result.release.path)


@pytest.mark.parametrize("method", [
    SemiSupervisedClustering(), TopDownPartitioning(seed=SEED), MDAV()], ids=lambda m: m.name)
def test_clustering_releases(anon, tmp_path, method):
    if isinstance(method, MDAV):
        policy = Policy(identifiers=["name", "ppl", "zip"], quasi_identifiers={"age": None, "visit_count": None},
                        sensitive=["disease"], models=[KAnonymity(5)])
    else:
        policy = Policy(**PARTITIONED, models=[AlphaKAnonymity("disease", 0.5, 5)])
    release = anon.cluster("patients", policy, method).publish(tmp_path / "clusters.duckdb")
    assert_no_seed(release.path)


def test_personalized_top_down_release(anon, tmp_path):
    levels = {"hiv": 3, "cancer": 3, "asthma": 2, "flu": 1, "cold": 1}
    tree = Hierarchy.from_mapping({"flu": ["respiratory", "*"], "cold": ["respiratory", "*"],
                                   "asthma": ["respiratory", "*"], "hiv": ["severe", "*"], "cancer": ["severe", "*"]})
    policy = Policy(**PARTITIONED, models=[AlphaLDiversityKAnonymity("disease", 0.6, 3, 10, levels)])
    method = TopDownPartitioning(seed=SEED, personalization=Personalization("ppl", tree))
    release = anon.cluster("patients", policy, method).publish(tmp_path / "personalized.duckdb")
    assert_no_seed(release.path)


@pytest.mark.parametrize("methods", [
    dict(method=EmpiricalSynthesis(10)),
    dict(method=AdditiveNoise("gaussian", 4), categorical=["disease"], categorical_method=RandomizedResponse(0.7)),
], ids=["synthesis", "noise and randomized response"])
def test_perturbation_releases(anon, tmp_path, methods):
    kept = ["zip", "visit_count"] + ([] if "categorical" in methods else ["disease"])
    release = anon.perturb("patients", tmp_path / "perturbed.duckdb", numeric=["age"], keep=kept, seed=SEED,
                           **methods)
    assert_no_seed(release.path)
