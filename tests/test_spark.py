"""Spark as an engine (issue 16): on Adult in local[2], every model's check, the optimal search (in process and in
SQL), a Mondrian partition, risk and a release equal DuckDB's; the Spark release is checked with pandas alone.

One SparkSession serves the module (starting one takes seconds); Spark reads Adult from a Parquet file DuckDB wrote,
as a DataFrame, a path and a table of its catalog.
"""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import duckdb
import pandas as pd
import pytest

pytest.importorskip("pyspark", reason="the spark extra is not installed")

from adult_files import arx_map  # noqa: E402

import duckanon  # noqa: E402
from duckanon import (  # noqa: E402
    AlphaKAnonymity,
    DateShift,
    DistinctLDiversity,
    EDDifferentialPrivacy,
    EntropyLDiversity,
    Hierarchy,
    KAnonymity,
    Mask,
    Policy,
    PSensitiveKAnonymity,
    Pseudonymize,
    RecursiveCLDiversity,
    TCloseness,
)
from duckanon.datasets import adult_hierarchy_dir, load_adult  # noqa: E402
from duckanon.engine import spark_engine  # noqa: E402
from duckanon.engine.spark_engine import SparkEngine, spark_session  # noqa: E402
from duckanon.errors import AnonymizationError, HierarchyError  # noqa: E402
from duckanon.privacy.models import AlphaLDiversityKAnonymity  # noqa: E402
from duckanon.release import read_release_info  # noqa: E402

README = Path(__file__).parents[1] / "README.md"
QUASI = ["sex", "age", "race", "marital-status", "education"]
LEVELS = {"sex": 0, "age": 2, "race": 0, "marital-status": 1, "education": 1}
HIERARCHIES = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in QUASI}


@pytest.fixture(scope="module")
def adult(tmp_path_factory):
    """Adult in DuckDB (table ``adult``), and the same records as a Parquet file."""
    con = duckdb.connect()
    load_adult(con, "adult")
    path = tmp_path_factory.mktemp("adult") / "adult.parquet"
    con.execute("COPY adult TO ? (FORMAT parquet)", [str(path)])
    yield con, path
    con.close()


@pytest.fixture(scope="module")
def spark():
    session = spark_session("local[2]", **{"spark.sql.shuffle.partitions": "4", "spark.ui.enabled": "false"})
    yield session
    session.stop()


@pytest.fixture(scope="module")
def on_spark(spark):
    return duckanon.connect(SparkEngine(spark))


@pytest.fixture(scope="module")
def people(spark, adult):
    return spark.read.parquet(str(adult[1]))


def policy_of(models, sensitive=(), hierarchies=HIERARCHIES, **settings) -> Policy:
    return Policy(quasi_identifiers=dict(hierarchies), models=list(models), sensitive=list(sensitive), others="drop",
                  **{"suppression_limit": 0.05, **settings})


def listing(report) -> pd.DataFrame:
    frame = report.violations
    return frame.sort_values(list(frame.columns)).reset_index(drop=True)


def test_every_model_checks_as_on_duckdb(adult, on_spark, people):
    con, _ = adult
    occupations = sorted(con.execute("SELECT DISTINCT occupation FROM adult").df()["occupation"])
    models = [KAnonymity(5), DistinctLDiversity("occupation", 3), EntropyLDiversity("occupation", 2.5),
              RecursiveCLDiversity("occupation", 3, 3), AlphaKAnonymity("occupation", 0.5, 5),
              PSensitiveKAnonymity("occupation", 3, 5), TCloseness("salary-class", 0.2),
              TCloseness("education-num", 0.3, "ordered"),
              AlphaLDiversityKAnonymity("occupation", 0.6, 2, 5, {v: 1 + i % 3 for i, v in enumerate(occupations)})]
    policy = policy_of(models, ["occupation", "salary-class", "education-num"])
    spark_report = on_spark.check(people, policy, LEVELS)
    duck_report = duckanon.connect(con).check("adult", policy, LEVELS)
    assert spark_report.summary() == duck_report.summary()
    pd.testing.assert_frame_equal(listing(spark_report), listing(duck_report), check_dtype=False)
    # k-anonymity's flags against pandas: a class violates it when it holds fewer than 5 records.
    raw = con.execute("SELECT * FROM adult").df()
    generalized = pd.DataFrame({a: raw[a].astype(str).map(arx_map(a, level)) for a, level in LEVELS.items()})
    sizes = generalized.groupby(QUASI).size()
    flagged = spark_report.violations[spark_report.violations.iloc[:, len(QUASI) + 1]]
    assert int(flagged["size"].sum()) == int(sizes[sizes < 5].sum())


@pytest.mark.parametrize("evaluator", ["memory", "sql"])
def test_optimal_search_finds_duckdbs_optimum(adult, on_spark, people, evaluator):
    con, _ = adult
    quasi = QUASI[:3] if evaluator == "sql" else QUASI  # the SQL evaluator runs a Spark job per node
    policy = policy_of([KAnonymity(5), TCloseness("salary-class", 0.3)], ["salary-class"],
                       {q: HIERARCHIES[q] for q in quasi})
    on_duckdb = duckanon.connect(con).search("adult", policy, evaluator=evaluator)
    found = on_spark.search(people, policy, evaluator=evaluator)
    assert found.best.node == on_duckdb.best.node and found.proven
    assert found.best.suppressed == on_duckdb.best.suppressed
    assert found.best.values["loss"] == pytest.approx(on_duckdb.best.values["loss"], rel=1e-12)


def test_risk_equals_duckdbs(adult, on_spark, people):
    con, _ = adult
    policy = policy_of([KAnonymity(5)])
    spark_risk = on_spark.risk(people, policy, LEVELS)
    duck_risk = duckanon.connect(con).risk("adult", policy, LEVELS)
    scalars = ["records", "classes", "highest_risk", "average_risk", "threshold", "records_below_threshold"]
    assert [getattr(spark_risk, f) for f in scalars] == pytest.approx([getattr(duck_risk, f) for f in scalars])
    pd.testing.assert_frame_equal(spark_risk.histogram, duck_risk.histogram, check_dtype=False)
    # Against pandas: the histogram of class sizes of the generalized records.
    raw = con.execute("SELECT * FROM adult").df()
    sizes = pd.DataFrame({a: raw[a].astype(str).map(arx_map(a, level)) for a, level in LEVELS.items()}).groupby(
        QUASI).size()
    assert spark_risk.classes == len(sizes) and spark_risk.highest_risk == 1 / sizes.min()


def test_mondrian_partition_equals_duckdbs(adult, on_spark, spark):
    con, path = adult
    people = spark.read.parquet(str(path))
    people.createOrReplaceTempView("adult_people")
    policy = Policy(quasi_identifiers={"age": None, "education-num": None, "sex": HIERARCHIES["sex"]},
                    models=[KAnonymity(50)], others="drop")
    on_duckdb = duckanon.connect(con).mondrian("adult", policy)
    found = on_spark.mondrian("adult_people", policy)  # a table (view) of Spark's catalog
    assert found.partitioning.partitions == on_duckdb.partitioning.partitions
    assert found.metrics == pytest.approx(on_duckdb.metrics, rel=1e-12)


def test_mondrian_over_people_equals_duckdbs(adult, on_spark, tmp_path):
    """Mondrian partitioning people (four records each), relaxed so that halves deal out whole people: Spark's SQL
    finds DuckDB's partitions and measures them alike."""
    con, _ = adult
    source = tmp_path / "visits.parquet"
    con.execute("COPY (SELECT *, (row_number() OVER () - 1) // 4 AS person FROM adult) TO ? (FORMAT parquet)",
                [str(source)])
    for models in ([KAnonymity(20)], [KAnonymity(20), DistinctLDiversity("salary-class", 2)]):
        policy = Policy(quasi_identifiers={"age": None, "education-num": None, "sex": HIERARCHIES["sex"]},
                        models=models, sensitive=["salary-class"], insensitive=["person"], person="person",
                        others="drop")
        on_duckdb = duckanon.connect(con).mondrian(str(source), policy, relaxed=True)
        found = on_spark.mondrian(str(source), policy, relaxed=True)
        assert found.partitioning.partitions == on_duckdb.partitioning.partitions > 1
        assert found.metrics == pytest.approx(on_duckdb.metrics, rel=1e-12)


@pytest.fixture(scope="module")
def spark_release(adult, on_spark, tmp_path_factory):
    _, path = adult
    target = tmp_path_factory.mktemp("spark") / "adult_k5.parquet"
    policy = policy_of([KAnonymity(5)], ["salary-class"])
    result, release = on_spark.anonymize(str(path), policy, target)  # a Parquet path as the source
    return result, release, target


def test_spark_release_checked_with_pandas(adult, spark_release):
    con, _ = adult
    result, release, target = spark_release
    released = pd.read_parquet(target)  # pyarrow skips _release_info.json and Spark's _SUCCESS
    raw = con.execute("SELECT * FROM adult").df()
    levels = dict(zip(result.attributes, result.best.node))
    assert len(released) == len(raw) == release.records_out
    suppressed = (released[QUASI] == "*").all(axis=1)
    assert int(suppressed.sum()) == release.suppressed == result.best.suppressed
    assert released[~suppressed].groupby(QUASI).size().min() >= 5
    # The kept records are exactly generalizations of source records: by the ARX files, read with csv.
    expected = pd.DataFrame({a: raw[a].astype(str).map(arx_map(a, level)) for a, level in levels.items()})
    expected["salary-class"] = raw["salary-class"]
    counts = expected.groupby(QUASI + ["salary-class"]).size()
    kept = released[~suppressed].groupby(QUASI + ["salary-class"]).size()
    difference = counts.sub(kept, fill_value=0)
    assert (difference >= 0).all() and difference.sum() == release.suppressed
    assert sorted(released["salary-class"]) == sorted(raw["salary-class"])
    assert not {"fnlwgt", "occupation"} & set(released.columns)
    info = json.loads((target / "_release_info.json").read_text())["release_info"]
    assert info["tool"] == "duckanon" and int(info["suppressed_records"]) == release.suppressed
    assert json.loads(info["transformation"]) == {"full-domain generalization": levels}


def test_spark_release_equals_duckdbs(adult, spark_release, tmp_path):
    con, _ = adult
    result, _, target = spark_release
    levels = dict(zip(result.attributes, result.best.node))
    duckanon.connect(con).publish("adult", policy_of([KAnonymity(5)], ["salary-class"]), levels,
                                  tmp_path / "d.parquet")
    ours, theirs = pd.read_parquet(target), pd.read_parquet(tmp_path / "d.parquet")
    assert list(ours.columns) == list(theirs.columns)
    columns = list(theirs.columns)
    pd.testing.assert_frame_equal(ours.sort_values(columns).reset_index(drop=True),
                                  theirs.sort_values(columns).reset_index(drop=True), check_dtype=False)
    assert read_release_info(target)["released_records"] == len(theirs)


def test_a_spark_release_folder_verifies_and_its_tampering_is_caught(adult, spark_release, tmp_path):
    """The folder Spark wrote has the content digest DuckDB gives the same rows (it is computed in DuckDB over the
    parts, as a recipient reads them); a part rewritten with one record made unique fails k and the digest."""
    con, _ = adult
    result, _, target = spark_release
    verification = duckanon.verify(target)
    assert verification.holds, verification.frame()
    levels = dict(zip(result.attributes, result.best.node))
    duckanon.connect(con).publish("adult", policy_of([KAnonymity(5)], ["salary-class"]), levels,
                                  tmp_path / "d.parquet")
    assert read_release_info(target)["content_digest"] == read_release_info(tmp_path / "d.parquet")["content_digest"]
    copy = tmp_path / "copy.parquet"
    shutil.copytree(target, copy)
    parts = sorted(copy.glob("*.parquet"))
    with duckdb.connect() as local:
        local.execute(f"CREATE TABLE t AS SELECT * FROM read_parquet('{copy}/*.parquet')")
        local.execute("UPDATE t SET age = 'nowhere' WHERE rowid = (SELECT min(rowid) FROM t WHERE age <> '*')")
        for part in parts:
            part.unlink()
        local.execute(f"COPY t TO '{copy}/part-00000.parquet' (FORMAT parquet)")
    failed = duckanon.verify(copy)
    assert failed.failure.guarantee == "k-anonymity with k = 5"
    assert not failed.frame().set_index("guarantee").loc["content digest of the rows", "holds"]


def test_a_failed_spark_publish_leaves_no_output_and_the_earlier_release(adult, on_spark, spark_release,
                                                                      monkeypatch):
    _, path = adult
    _, _, target = spark_release
    before = pd.read_parquet(target)
    from duckanon.release import publish

    def failing(*args, **kwargs):
        raise publish.ReleaseCheckFailed("release check: simulated")

    monkeypatch.setattr(publish, "verify_release", failing)
    with pytest.raises(publish.ReleaseCheckFailed, match="simulated"):
        on_spark.publish(str(path), policy_of([KAnonymity(5)], ["salary-class"]), LEVELS, target)
    # No partial folder left: the path and the hidden folder it links to.
    assert sorted(p.name for p in target.parent.iterdir()) == sorted([target.name, target.resolve().name])
    pd.testing.assert_frame_equal(pd.read_parquet(target), before)


def test_spark_names_the_formats_it_writes(adult, on_spark, tmp_path):
    _, path = adult
    with pytest.raises(AnonymizationError, match=r"on spark, a release is written as parquet.*\.parquet path"):
        on_spark.publish(str(path), policy_of([KAnonymity(5)]), LEVELS, tmp_path / "r.duckdb")
    assert not list(tmp_path.iterdir())


def test_a_column_the_hierarchy_does_not_cover_fails_as_on_duckdb(adult, on_spark, spark):
    con, _ = adult
    frame = con.execute("SELECT * REPLACE (CASE WHEN age = 39 THEN 'unknown' ELSE CAST(age AS VARCHAR) END AS age) "
                        "FROM adult").df()
    con.register("odd_ages", frame)
    spark.createDataFrame(frame).createOrReplaceTempView("odd_ages")
    policy = policy_of([KAnonymity(5)])
    with pytest.raises(HierarchyError) as on_duckdb:
        duckanon.connect(con).check("odd_ages", policy, LEVELS)
    with pytest.raises(HierarchyError) as found:
        on_spark.check("odd_ages", policy, LEVELS)
    assert str(found.value) == str(on_duckdb.value) and "'unknown'" in str(found.value)


def test_without_pyspark_the_error_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "pyspark", None)
    monkeypatch.setitem(sys.modules, "pyspark.sql", None)
    with pytest.raises(AnonymizationError, match=r'pip install "\.\[spark\]"'):
        SparkEngine(object())


def test_without_java_the_error_says_what_to_install(monkeypatch):
    monkeypatch.delenv("JAVA_HOME", raising=False)
    monkeypatch.setattr(spark_engine.shutil, "which", lambda name: None)
    with pytest.raises(AnonymizationError, match="Java 17 or newer.*openjdk-17-jre-headless"):
        spark_session("local[1]")


def test_readme_spark_section_runs(tmp_path):
    """The README's Spark example, as written, in a Python of its own started in a folder where `duckanon
    example-data` wrote adult.parquet (as a user runs it: Spark resolves relative paths against the folder its JVM
    started in)."""
    block = re.search(r"## On Apache Spark.*?```py\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)
    assert block is not None
    environment = {**os.environ, "PYTHONPATH": str(README.parent)}
    made = subprocess.run([sys.executable, "-m", "duckanon", "example-data"], cwd=tmp_path, env=environment,
                          capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    (tmp_path / "example.py").write_text(block.group(1), encoding="utf-8")
    finished = subprocess.run([sys.executable, "example.py"], cwd=tmp_path, env=environment, capture_output=True,
                              text=True, timeout=600)
    assert finished.returncode == 0, finished.stderr[-3000:]
    assert "released 30162 of 30162 records" in finished.stdout
    released = pd.read_parquet(tmp_path / "adult_release.parquet")
    assert len(released) == 30162
    kept = released[(released[QUASI] != "*").any(axis=1)]
    assert kept.groupby(QUASI).size().min() >= 5


def test_duckanon_report_reads_a_spark_release_folder(adult, spark_release, tmp_path):
    """The command line's report takes the release folder Spark wrote, its source a Parquet file."""
    con, path = adult
    _, release, target = spark_release
    output = tmp_path / "report.html"
    finished = subprocess.run([sys.executable, "-m", "duckanon", "report", str(target), "--source", str(path),
                               "-o", str(output)], capture_output=True, text=True, timeout=600,
                              env={**os.environ, "PYTHONPATH": str(README.parent)})
    assert finished.returncode == 0, finished.stderr[-3000:]
    text = output.read_text(encoding="utf-8")
    shown = re.search(r'data-figure="suppression.records" data-value="(\d+)"', text)
    assert shown is not None and int(shown.group(1)) == release.suppressed


def test_storing_a_policy_on_spark_says_to_give_the_policy(on_spark):
    with pytest.raises(AnonymizationError, match="give the Policy itself"):
        on_spark.save_policy("adult_k5", policy_of([KAnonymity(5)]))


def test_a_later_session_creates_the_catalog_where_an_earlier_left_its_folder(spark, tmp_path):
    """A second run from the same folder: the earlier session's in-memory catalog is gone, but the folder of its
    `anon` schema stayed in the warehouse, and CREATE SCHEMA anon failed on it (LOCATION_ALREADY_EXISTS).  The
    schema now lives in the engine's scratch folder."""
    warehouse = spark.conf.get("spark.sql.warehouse.dir").removeprefix("file:")
    spark.sql("DROP SCHEMA IF EXISTS anon CASCADE")
    left = os.path.join(warehouse, "anon.db", "hierarchy_sex")  # what an earlier session left
    os.makedirs(left, exist_ok=True)
    with open(os.path.join(left, "part-00000.parquet"), "wb") as file:
        file.write(b"PAR1")
    engine = SparkEngine(spark, scratch=str(tmp_path))
    anon = duckanon.connect(engine)
    anon.add_hierarchy("sex", HIERARCHIES["sex"])
    assert sorted(anon.hierarchy("sex").rows) == sorted(HIERARCHIES["sex"].rows)
    location = spark.sql("DESCRIBE SCHEMA anon").collect()
    assert any(str(tmp_path) in str(row) for row in location)


def test_risk_thresholds_are_refused_on_spark_by_name(on_spark, people):
    """A risk threshold's cut is marked with an UPDATE, which Spark SQL lacks: one error naming the model and what
    to do, not Spark's parse error."""
    with pytest.raises(duckanon.PolicyError, match="average-reidentification-risk.*run it on DuckDB"):
        on_spark.check(people, policy_of([duckanon.AverageReidentificationRisk(0.05)]), LEVELS)


@pytest.mark.parametrize("evaluator", ["memory", "sql"])
def test_profitability_prices_classes_as_on_duckdb(adult, on_spark, people, evaluator):
    """ARX's profitability with an attack prices each class by its values' domain shares, read from tables made on
    the engine: the same check and the same optimum as on DuckDB."""
    con, _ = adult
    quasi = QUASI[:3] if evaluator == "sql" else QUASI
    model = duckanon.ProsecutorProfitability(adversary_gain=120, adversary_cost=20, publisher_loss=3000,
                                             publisher_benefit=1200)
    policy = policy_of([model], hierarchies={q: HIERARCHIES[q] for q in quasi}, suppression="replace-unchecked")
    levels = {q: LEVELS[q] for q in quasi}
    spark_report, duck_report = on_spark.check(people, policy, levels), duckanon.connect(con).check("adult", policy,
                                                                                                    levels)
    assert spark_report.summary() == duck_report.summary() and spark_report.violating_records > 0
    found, on_duckdb = on_spark.search(people, policy, evaluator=evaluator), duckanon.connect(con).search(
        "adult", policy, evaluator=evaluator)
    assert found.best.node == on_duckdb.best.node and found.best.suppressed == on_duckdb.best.suppressed


def test_columns_released_transformed_are_the_same_on_spark(adult, on_spark, tmp_path, monkeypatch):
    """Pseudonyms, masks and date shifts computed by Spark's SQL equal DuckDB's, byte for byte."""
    con, _ = adult
    monkeypatch.setenv("DUCKANON_SPARK_TEST_KEY", "a secret of more than thirty-two bytes, for the test")
    source = tmp_path / "visits.parquet"
    con.execute("COPY (SELECT *, (row_number() OVER () - 1) // 3 AS person, 'p' || ((row_number() OVER () - 1) // 3) "
                "|| '@example.org' AS email, DATE '2020-01-01' + CAST(row_number() OVER () % 365 AS INTEGER) AS visit, "
                "TIMESTAMP '2020-01-01 08:30:00' + to_days(CAST(row_number() OVER () % 365 AS INTEGER)) AS seen "
                "FROM adult) TO ? (FORMAT parquet)", [str(source)])
    key = "env:DUCKANON_SPARK_TEST_KEY"
    policy = dataclasses.replace(
        policy_of([KAnonymity(5)], ["salary-class"]), pseudonymize={"person": Pseudonymize(key)},
        mask={"email": Mask.email_domain()},
        date_shift={"visit": DateShift(20, "person", key), "seen": DateShift(20, "person", key)})
    on_spark.publish(str(source), policy, LEVELS, tmp_path / "s.parquet")
    duckanon.connect(con).publish(str(source), policy, LEVELS, tmp_path / "d.parquet")
    ours, theirs = pd.read_parquet(tmp_path / "s.parquet"), pd.read_parquet(tmp_path / "d.parquet")
    columns = list(theirs.columns)
    assert {"person", "email", "visit", "seen"} <= set(columns)
    pd.testing.assert_frame_equal(ours[columns].sort_values(columns).reset_index(drop=True),
                                  theirs.sort_values(columns).reset_index(drop=True), check_dtype=False)


def test_a_policy_counting_people_gives_the_same_release_on_spark(adult, on_spark, tmp_path):
    """Signatures, people suppressed and the verification, computed by Spark's SQL, equal DuckDB's."""
    con, _ = adult
    source = tmp_path / "visits.parquet"
    con.execute("COPY (SELECT *, (row_number() OVER () - 1) // 4 AS person FROM adult) TO ? (FORMAT parquet)",
                [str(source)])
    policy = dataclasses.replace(policy_of([KAnonymity(5)], ["salary-class"], suppression_limit=0.05),
                                 insensitive=["person"], person="person")
    found, _ = on_spark.anonymize(str(source), policy, tmp_path / "s.parquet")
    expected, release = duckanon.connect(con).anonymize(str(source), policy, tmp_path / "d.parquet")
    assert found.levels == expected.levels and found.best.suppressed == expected.best.suppressed
    ours, theirs = pd.read_parquet(tmp_path / "s.parquet"), pd.read_parquet(tmp_path / "d.parquet")
    columns = list(theirs.columns)
    pd.testing.assert_frame_equal(ours[columns].sort_values(columns).reset_index(drop=True),
                                  theirs.sort_values(columns).reset_index(drop=True), check_dtype=False)
    assert read_release_info(tmp_path / "s.parquet")["policy"]["people"] == {
        "source": 7541, "suppressed": release.check.violating_people}


def test_several_tables_give_the_same_release_on_spark(adult, on_spark, tmp_path):
    """A person table and an event table joined by a key: stacked, signed by (table, class) pairs, suppressed by
    person and verified by Spark's SQL as by DuckDB's."""
    con, _ = adult
    people, events = tmp_path / "people.parquet", tmp_path / "events.parquet"
    con.execute("COPY (SELECT row_number() OVER () AS person, sex, race, \"marital-status\" FROM adult) TO ? "
                "(FORMAT parquet)", [str(people)])
    con.execute("COPY (SELECT person, age + shift AS age, education FROM (SELECT row_number() OVER () AS person, "
                "age, education FROM adult), (VALUES (0), (3)) AS s(shift) WHERE person % 3 <> 0 OR shift = 0) TO ? "
                "(FORMAT parquet)", [str(events)])
    policy = policy_of([KAnonymity(5)], hierarchies={q: HIERARCHIES[q] for q in QUASI if q != "age"} | {
        "age": Hierarchy.intervals(range(0, 100), widths=[5, 10, 20, 40])}, suppression_limit=0.05,
        insensitive=["person"])
    tables = duckanon.Tables({"people": str(people), "events": str(events)}, key="person")
    found, _ = on_spark.anonymize(tables, policy, tmp_path / "s.parquet")
    expected, release = duckanon.connect(con).anonymize(tables, policy, tmp_path / "d.parquet")
    assert found.levels == expected.levels and found.best.suppressed == expected.best.suppressed
    for name in ("people", "events"):  # a file per table from DuckDB, a folder of parts per table from Spark
        ours, theirs = (pd.read_parquet(tmp_path / f"{side}.parquet" / f"{name}.parquet") for side in "sd")
        columns = list(theirs.columns)
        pd.testing.assert_frame_equal(ours[columns].sort_values(columns).reset_index(drop=True),
                                      theirs.sort_values(columns).reset_index(drop=True), check_dtype=False)
    assert duckanon.verify(tmp_path / "s.parquet").holds and release.check.violating_people > 0


def test_cell_suppression_on_spark_equals_duckdbs(adult, on_spark, tmp_path):
    """The same cells suppressed on Spark as on DuckDB, the same rows; the Spark release verifies, its classes
    counting a missing value as matching any."""
    con, path = adult
    policy = policy_of([KAnonymity(10)], ["salary-class"], suppression_limit=0.02)
    found, release = on_spark.suppress_cells(str(path), policy, tmp_path / "s.parquet", importance=["sex"])
    expected, _ = duckanon.connect(con).suppress_cells(str(path), policy, tmp_path / "d.parquet", importance=["sex"])
    assert (found.levels, found.cells) == (expected.levels, expected.cells) and found.records > 0
    order = [*QUASI, "salary-class"]
    spark_rows = pd.read_parquet(tmp_path / "s.parquet")[order].sort_values(order).reset_index(drop=True)
    duck_rows = pd.read_parquet(tmp_path / "d.parquet")[order].sort_values(order).reset_index(drop=True)
    pd.testing.assert_frame_equal(spark_rows, duck_rows)
    assert release.suppressed == 0 and duckanon.verify(tmp_path / "s.parquet").holds


def test_local_recoding_on_spark_equals_duckdbs(adult, on_spark, tmp_path):
    """The same steps, records per step and release rows on Spark as on DuckDB; the Spark release verifies."""
    con, path = adult
    policy = policy_of([KAnonymity(10)], ["salary-class"], suppression_limit=0.02)
    found, release = on_spark.anonymize_locally(str(path), policy, tmp_path / "s.parquet")
    expected, duck_release = duckanon.connect(con).anonymize_locally(str(path), policy, tmp_path / "d.parquet")
    assert [(s.levels, s.released) for s in found.steps] == [(s.levels, s.released) for s in expected.steps]
    assert len(found.steps) > 1 and release.suppressed == duck_release.suppressed
    order = [*QUASI, "salary-class"]
    spark_rows = pd.read_parquet(tmp_path / "s.parquet")[order].sort_values(order).reset_index(drop=True)
    duck_rows = pd.read_parquet(tmp_path / "d.parquet")[order].sort_values(order).reset_index(drop=True)
    pd.testing.assert_frame_equal(spark_rows, duck_rows)
    assert duckanon.verify(tmp_path / "s.parquet").holds


def test_strata_on_spark_equal_duckdbs(adult, on_spark, tmp_path):
    """A policy with strata searches and publishes on Spark as on DuckDB (one evaluator per stratum, classes within
    strata, t-closeness against each stratum's distribution); the Spark release verifies."""
    con, path = adult
    hierarchies = {q: h for q, h in HIERARCHIES.items() if q != "sex"}
    policy = policy_of([KAnonymity(5), TCloseness("salary-class", 0.3)], ["salary-class"], hierarchies,
                       strata=["sex"])
    found, release = on_spark.anonymize(str(path), policy, tmp_path / "s.parquet")
    expected, duck_release = duckanon.connect(con).anonymize(str(path), policy, tmp_path / "d.parquet")
    assert (found.levels, release.suppressed) == (expected.levels, duck_release.suppressed)
    order = ["sex", *hierarchies, "salary-class"]
    spark_rows = pd.read_parquet(tmp_path / "s.parquet")[order].sort_values(order).reset_index(drop=True)
    duck_rows = pd.read_parquet(tmp_path / "d.parquet")[order].sort_values(order).reset_index(drop=True)
    pd.testing.assert_frame_equal(spark_rows, duck_rows)
    assert duckanon.verify(tmp_path / "s.parquet").holds


def test_a_differentially_private_release_and_aggregate_on_spark(on_spark, adult, tmp_path):
    """SafePub and a noisy count run on Spark; their spends go to a ledger file (Spark has no transactions), and
    without one they are refused by name before any work."""
    private = Policy(HIERARCHIES, [EDDifferentialPrivacy(1.0, 1e-6, steps=10)], others="drop")
    with pytest.raises(duckanon.PolicyError, match="give ledger="):
        on_spark.anonymize(str(adult[1]), private, tmp_path / "refused.parquet")
    assert not (tmp_path / "refused.parquet").exists()
    ledger = tmp_path / "ledger.duckdb"
    _, release = on_spark.anonymize(str(adult[1]), private, tmp_path / "private.parquet", ledger=ledger)
    assert duckanon.verify(tmp_path / "private.parquet").holds
    assert release.records_out <= len(adult[0].execute("SELECT * FROM adult").fetchall())
    counted = on_spark.dp_aggregate(str(adult[1]), "count", epsilon=1.0, ledger=ledger)
    assert abs(counted["value"][0] - 30_162) < 40
    assert on_spark.privacy_budget(adult[1], ledger=ledger).spent_epsilon == 2.0
