"""Seed 003's top-down partitioning, personalization rule, NCP and ARR: the paper's worked example (Tables 6 and 7)
computed by hand, and pandas recomputations on Adult samples."""

from __future__ import annotations

import dataclasses
import math
from fractions import Fraction

import duckdb
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sqlglot import exp

import duckanon
from duckanon import (
    AlphaLDiversityKAnonymity,
    Hierarchy,
    HierarchyError,
    KAnonymity,
    Personalization,
    Policy,
    PolicyError,
    TopDownPartitioning,
    datasets,
)
from duckanon.cluster.distance import RecordSpace
from duckanon.cluster.personalized import (
    average_recognition_rate,
    recognition_rate_query,
    sensitive_loss,
    sensitive_loss_query,
    top_down_partition,
)
from duckanon.engine import as_engine
from duckanon.sqlgen import build as sb

QI = ["Gender", "Age", "Zip code"]
# Table 4's sensitivity levels (Sid) and Figure 1's tree of Disease, as the seed 003 experiment uses them.
LEVELS = datasets.SEED003_SENSITIVITY_LEVELS
GHT = datasets.seed003_disease_hierarchy()


def table_6(age_of_record_7: int = 36) -> pd.DataFrame:
    """Table 6, with each record's number."""
    return pd.DataFrame([
        (1, "Male", 34, "100751", "Cancer", 4), (2, "Male", 43, "100720", "Flu", 2),
        (3, "Female", 66, "200386", "HIV", 3), (4, "Female", 70, "200425", "Asthma", None),
        (5, "Female", 55, "178642", "Cancer", None), (6, "Female", 48, "178653", "Flu", 1),
        (7, "Female", age_of_record_7, "178634", "Hepatitis", 2),
    ], columns=["No", "Gender", "Age", "Zip code", "Disease", "Ppl"]).astype({"Ppl": "Int64"})


# Table 7: the personalized (0.5, 2)-diversity 2-anonymous table, as groups of record numbers and released values.
TABLE_7_GROUPS = {frozenset({1, 2}), frozenset({3, 4}), frozenset({5, 6, 7})}
TABLE_7_DISEASE = {1: "Cancer", 2: "Respiratory infection", 3: "HIV", 4: "Asthma", 5: "Cancer", 6: "Flu",
                   7: "Hepatitis"}


@pytest.fixture
def anon(con):
    return duckanon.connect(con)


def load(con, frame: pd.DataFrame, name: str) -> str:
    con.register(f"{name}_frame", frame)
    as_engine(con).run(sb.create_table_as(sb.table(name), exp.select(exp.Star()).from_(sb.table(f"{name}_frame")),
                                   replace=True))
    con.unregister(f"{name}_frame")
    return name


def example_policy(frame: pd.DataFrame) -> Policy:
    """(α, l, k) = (0.5, 2, 2); Gender flat, Age a number (no hierarchy needed), Zip code redacted digit by digit."""
    return Policy(quasi_identifiers={"Gender": Hierarchy.from_lists([["Male", "*"], ["Female", "*"]]), "Age": None,
                                     "Zip code": Hierarchy.redaction(frame["Zip code"])},
                  models=[AlphaLDiversityKAnonymity("Disease", 0.5, 2, 2, LEVELS)], identifiers=["No", "Ppl"])


def groups_by_number(clusters, frame: pd.DataFrame) -> set[frozenset]:
    numbered = frame.sort_values(clusters.numbering, na_position="first", kind="stable").reset_index(drop=True)
    return {frozenset(numbered.loc[clusters.groups == g, "No"]) for g in range(clusters.count)}


def test_tables_6_and_7_with_record_7_in_its_groups_age_range(con, anon, tmp_path):
    """Table 7 puts record 7 in the group aged [46, 60], but Table 6 gives it age 36; with 56 (in that range) the
    partitioning yields Table 7's groups whatever the random first record, and the release is Table 7's: record 2
    asked for level 2 > Flu's Sid 1 and shows Flu's parent; records 1, 3, 6, 7 asked for no more than their Sid."""
    frame = table_6(56)
    load(con, frame, "t6")
    personalization = Personalization("Ppl", GHT)
    for seed in range(8):
        clusters = anon.cluster("t6", example_policy(frame), TopDownPartitioning(seed, personalization))
        assert groups_by_number(clusters, frame) == TABLE_7_GROUPS
    release = clusters.publish(tmp_path / "t7.duckdb")
    assert release.records_out == 7
    released = duckdb.connect(str(tmp_path / "t7.duckdb"), read_only=True).execute("SELECT * FROM release").df()
    assert list(released.columns) == ["Gender", "Age", "Age_low", "Age_high", "Zip code", "Disease"]  # No, Ppl dropped
    # Records are told apart by their (unique) age range and zip prefix together with the disease.
    by_group = released.groupby(QI)["Disease"].apply(lambda s: sorted(s)).to_dict()
    assert sorted(map(tuple, by_group.values())) == sorted([
        ("Cancer", "Respiratory infection"), ("Asthma", "HIV"), ("Cancer", "Flu", "Hepatitis")])
    assert sorted(released["Disease"]) == sorted(TABLE_7_DISEASE.values())
    assert set(by_group) == {("Male", "[34, 43]", "1007**"), ("Female", "[66, 70]", "200***"),
                             ("Female", "[48, 56]", "1786**")}

    # ARR (formulas 4-6): group 1: (1/(2·1) + 1/(2·2)) / 2 = 3/8; group 2: (1/2 + 1/2) / 2 = 1/2; group 3: 1/3.
    release_table = sb.table("release", "main", "t7")
    con.execute(f"ATTACH '{tmp_path / 't7.duckdb'}' AS t7 (READ_ONLY)")
    arr = average_recognition_rate(con, release_table, QI, "Disease", GHT)
    assert math.isclose(arr, float((Fraction(3, 8) + Fraction(1, 2) + Fraction(1, 3)) / 3))  # 29/72

    # NCP (formulas 1-3) by hand.  Age over the domain 34..70 (36 wide): [34,43] 9/36, [66,70] 4/36, [48,56] 8/36.
    # Zip code over 7 leaves: 1007** covers 2, 200*** 2, 1786** 3.  Gender is never generalized.  Disease: one
    # "Respiratory infection", 2 of 8 leaves.
    quasi_ncp = (2 * (Fraction(9, 36) + Fraction(2, 7)) + 2 * (Fraction(4, 36) + Fraction(2, 7))
                 + 3 * (Fraction(8, 36) + Fraction(3, 7)))
    assert math.isclose(clusters.information_loss, float(quasi_ncp))
    assert math.isclose(sensitive_loss(con, release_table, "Disease", GHT), 2 / 8)


def test_tables_6_and_7_as_printed(con, anon):
    """With Table 6's age 36 record 7 is nearer records 1 and 2 in age, and whether it joins them or records 5 and 6
    depends on the random first record: seed 0 splits as Table 7 does, seed 2 the other way; both satisfy the model."""
    frame = table_6()
    load(con, frame, "t6")
    personalization = Personalization("Ppl", GHT)
    table_7 = anon.cluster("t6", example_policy(frame), TopDownPartitioning(0, personalization))
    assert groups_by_number(table_7, frame) == TABLE_7_GROUPS
    other = anon.cluster("t6", example_policy(frame), TopDownPartitioning(2, personalization))
    assert groups_by_number(other, frame) == {frozenset({1, 2, 7}), frozenset({3, 4}), frozenset({5, 6})}
    assert table_7.check().satisfied and other.check().satisfied


def test_partitions_hold_k_to_2k_minus_1_records():
    rng = np.random.default_rng(0)
    values = rng.integers(0, 50, size=(301, 2)).astype(float)
    space = RecordSpace.from_columns({"a": values[:, 0], "b": values[:, 1]}, {}, ["a", "b"])
    for k in (1, 2, 5, 17, 100, 150):
        members, sizes = top_down_partition(space, np.arange(301), k, np.random.default_rng(k))
        assert sorted(members.tolist()) == list(range(301)) and sizes.sum() == 301
        assert sizes.min() >= k and sizes.max() <= max(2 * k - 1, k)
    # Fewer than 2k records stay one group.
    assert top_down_partition(space, np.arange(9), 5, rng)[1].tolist() == [9]


def test_a_split_follows_the_two_far_records():
    """On a line, the first split is around a random record and the record farthest from it: the two ends."""
    space = RecordSpace.from_columns({"x": np.array([0, 1, 2, 3, 10, 11, 12, 13], dtype=float)}, {}, ["x"])
    members, sizes = top_down_partition(space, np.arange(8), 4, np.random.default_rng(5))
    parts = np.split(members, np.cumsum(sizes)[:-1])
    assert sorted(sorted(p.tolist()) for p in parts) == [[0, 1, 2, 3], [4, 5, 6, 7]]


# ---------------------------------------------------------------------------------------------------- on Adult

ADULT_QI = ["age", "workclass", "education", "native-country", "marital-status", "race", "sex"]
DISEASES = sorted(LEVELS)


def patients(con, rows: int, seed: int) -> pd.DataFrame:
    """Adult resampled, with a Disease drawn uniformly from Table 4's values and a Ppl of 1–4 for a quarter of the
    records (seed 003 §5)."""
    from duckanon.datasets import resample_adult
    resample_adult(con, rows, "adult_rows", seed=seed, replace=True)
    frame = con.sql("SELECT * FROM adult_rows").df()
    rng = np.random.default_rng(seed)
    frame["disease"] = rng.choice(DISEASES, size=rows)
    frame["ppl"] = pd.array(np.where(rng.random(rows) < 0.25, rng.integers(1, 5, size=rows), -1),
                            dtype="Int64").astype("Int64")
    frame.loc[frame["ppl"] == -1, "ppl"] = pd.NA
    load(con, frame, "patients")
    return frame


def adult_policy(k: int, model) -> Policy:
    from duckanon.datasets import adult_hierarchy_dir
    return Policy(quasi_identifiers={q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in ADULT_QI},
                  models=[model], sensitive=["disease"], identifiers=["ppl"], others="drop")


def pandas_alpha_l(frame: pd.DataFrame, keys, k: int, l: int, alpha: float) -> bool:  # noqa: E741
    grouped = frame.groupby(keys, dropna=False)
    level_share = frame.assign(level=frame["disease"].map(LEVELS)).groupby(keys, dropna=False)["level"].apply(
        lambda s: s.value_counts(normalize=True).max())
    return bool((grouped.size() >= k).all() and (grouped["disease"].nunique() >= l).all()
                and (level_share <= alpha + 1e-12).all())


def pandas_arr(frame: pd.DataFrame, keys, leaves: dict) -> float:
    """Formulas 4–6 record by record: RR_t = |(s, M)| / (|M| · |f(s)|), averaged over M, then over the classes."""
    sizes = frame.groupby(keys, dropna=False)["disease"].transform("size")
    same = frame.groupby([*keys, "disease"], dropna=False)["disease"].transform("size")
    rate = same / (sizes * frame["disease"].map(lambda s: leaves.get(s, 1)))
    return float(rate.groupby([frame[k] for k in keys], dropna=False).mean().mean())


@settings(max_examples=4, deadline=None)
@given(rows=st.integers(80, 400), seed=st.integers(0, 10_000), k=st.integers(4, 9),
       alpha=st.sampled_from([0.5, 0.6, 0.8]))
def test_personalized_releases_satisfy_the_model_before_personalization(tmp_path_factory, rows, seed, k, alpha):
    con = duckdb.connect()
    anon = duckanon.connect(con)
    frame = patients(con, rows, seed)
    policy = adult_policy(k, AlphaLDiversityKAnonymity("disease", alpha, 4, k, LEVELS))
    clusters = anon.cluster("patients", policy, TopDownPartitioning(seed, Personalization("ppl", GHT)))
    numbered = frame.sort_values(clusters.numbering, na_position="first", kind="stable").reset_index(drop=True)
    # The groups, by pandas over the original values; and by the core's SQL models over the recoded records.
    assert pandas_alpha_l(numbered.assign(group=clusters.groups), ["group"], k, 4, alpha)
    assert clusters.check().satisfied
    path = tmp_path_factory.mktemp("release") / "p.duckdb"
    release = clusters.publish(path)
    assert (release.records_out, release.suppressed) == (rows, 0)
    released = duckdb.connect(str(path), read_only=True).execute("SELECT * FROM release").df()
    assert "ppl" not in released.columns
    assert (released.groupby(ADULT_QI).size() >= k).all()
    # The rule, by pandas: the multiset of released values is each record's ancestor on level Ppl where Ppl > Sid.
    ancestor = {(row[0], level + 1): row[level] for row in GHT.rows for level in range(GHT.levels)}
    expected = [ancestor[(d, int(p))] if not pd.isna(p) and p > LEVELS[d] else d
                for d, p in zip(frame["disease"], frame["ppl"])]
    assert sorted(released["disease"]) == sorted(expected)
    # ARR and the sensitive part of NCP, by SQL over the release and by pandas.
    con.execute(f"ATTACH '{path}' AS rel (READ_ONLY)")
    release_table = sb.table("release", "main", "rel")
    leaves = {label: n for level in range(1, GHT.levels) for label, n in GHT.leaves_under(level).items()}
    assert math.isclose(average_recognition_rate(con, release_table, ADULT_QI, "disease", GHT),
                        pandas_arr(released, ADULT_QI, leaves))
    generalized = released["disease"].map(lambda s: leaves[s] / 8 if s not in LEVELS else 0.0)
    assert math.isclose(sensitive_loss(con, release_table, "disease", GHT), generalized.sum())


def test_k_anonymity_alone_keeps_every_partition(con, anon):
    frame = patients(con, 600, 7)
    clusters = anon.cluster("patients", adult_policy(6, KAnonymity(6)), TopDownPartitioning(3))
    assert clusters.sizes.min() >= 6 and clusters.sizes.max() <= 11
    assert clusters.check().satisfied
    with clusters.recoded() as recoded:
        released = as_engine(con).frame(exp.select(exp.Star()).from_(recoded))
        assert math.isclose(average_recognition_rate(con, recoded, ADULT_QI, "disease"),
                            pandas_arr(released, ADULT_QI, {}))
    assert sorted(released["disease"]) == sorted(frame["disease"])  # no personalization: values as they are


# ------------------------------------------------------------------------------------------------ bad input

def test_a_protection_level_above_the_trees_height_is_refused(con, anon, tmp_path):
    frame = table_6()
    frame.loc[1, "Ppl"] = 5
    load(con, frame, "t6")
    with pytest.raises(PolicyError, match=r"'Ppl' must be whole numbers from 1 to 4 .*found 5"):
        anon.cluster("t6", example_policy(frame), TopDownPartitioning(0, Personalization("Ppl", GHT))).publish(
            tmp_path / "never.duckdb")
    frame.loc[1, "Ppl"] = 0
    load(con, frame, "t6")
    with pytest.raises(PolicyError, match="found 0"):
        anon.cluster("t6", example_policy(frame), TopDownPartitioning(0, Personalization("Ppl", GHT)))
    frame = frame.astype({"Ppl": "string"})
    frame.loc[1, "Ppl"] = "high"
    load(con, frame, "t6")
    with pytest.raises(PolicyError, match="found 'high'"):
        anon.cluster("t6", example_policy(frame), TopDownPartitioning(0, Personalization("Ppl", GHT)))
    assert not list(tmp_path.iterdir())


def test_protection_levels_stored_as_text_work_as_numbers(con, anon, tmp_path):
    frame = table_6(56).astype({"Ppl": "string"})
    load(con, frame, "t6")
    clusters = anon.cluster("t6", example_policy(frame), TopDownPartitioning(0, Personalization("Ppl", GHT)))
    clusters.publish(tmp_path / "t7.duckdb")
    released = duckdb.connect(str(tmp_path / "t7.duckdb"), read_only=True).execute("SELECT * FROM release").df()
    assert sorted(released["Disease"]) == sorted(TABLE_7_DISEASE.values())


def test_a_sensitive_value_missing_from_the_level_table_is_refused(con, anon):
    frame = table_6()
    frame.loc[3, "Disease"] = "Malaria"
    load(con, frame, "t6")
    with pytest.raises(PolicyError, match="missing from the level table: \\['Malaria'\\]"):
        anon.cluster("t6", example_policy(frame), TopDownPartitioning(0, Personalization("Ppl", GHT)))
    levels = {**LEVELS, "Malaria": 2}
    policy = example_policy(frame)
    policy.models[0] = AlphaLDiversityKAnonymity("Disease", 0.5, 2, 2, levels)
    with pytest.raises(HierarchyError, match="does not cover 'Malaria'"):
        anon.cluster("t6", policy, TopDownPartitioning(0, Personalization("Ppl", GHT)))


def test_personalization_needs_sensitivity_levels(con, anon):
    frame = table_6()
    load(con, frame, "t6")
    policy = example_policy(frame)
    policy.models[0] = KAnonymity(2)
    with pytest.raises(PolicyError, match="the sensitivity levels of an AlphaLDiversityKAnonymity model"):
        anon.cluster("t6", policy, TopDownPartitioning(0, Personalization("Ppl", GHT)))


def test_the_sql_it_runs_transpiles_to_spark(con, anon):
    frame = table_6(56)
    load(con, frame, "t6")
    clusters = anon.cluster("t6", example_policy(frame), TopDownPartitioning(0, Personalization("Ppl", GHT)))
    assignment = clusters._assignment()
    transformation = clusters._released(assignment)
    compiled = transformation.compile(clusters.source, clusters.columns, clusters.hierarchies)
    queries = [compiled, recognition_rate_query(sb.table("t6"), QI, "Disease", GHT),
               sensitive_loss_query(sb.table("t6"), "Disease", GHT)]
    for query in queries:
        spark = sb.to_sql(query, "spark")
        assert "`" in spark and '"' not in spark
    rule = "CASE WHEN CAST(`recoded`.`Ppl` AS DOUBLE) > CASE WHEN CAST(`recoded`.`Disease` AS STRING) = 'Asthma' THEN 2"
    assert rule in sb.to_sql(compiled, "spark")
    assert sorted(r[-1] for r in as_engine(con).rows(compiled)) == sorted(TABLE_7_DISEASE.values())


def test_personalization_refuses_a_policy_that_counts_people():
    """Protection levels are read record by record; a policy with person= groups people: one error naming both."""
    con = duckdb.connect()
    frame = patients(con, 60, 1).assign(pid=lambda f: f.index // 2)
    load(con, frame, "visits")
    policy = dataclasses.replace(adult_policy(4, AlphaLDiversityKAnonymity("disease", 0.6, 4, 4, LEVELS)),
                                 insensitive=["pid"], person="pid")
    with pytest.raises(PolicyError, match=r"reads \['ppl'\] record by record.*person= \('pid'\)"):
        duckanon.connect(con).cluster("visits", policy, TopDownPartitioning(0, Personalization("ppl", GHT)))
