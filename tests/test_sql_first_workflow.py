"""The SQL-first workflow end to end, as the README shows it: a DuckDB 1.5 shell user builds hierarchies and declares
a policy in SQL in people.duckdb, then `duckanon run people.duckdb --policy NAME --table patients -o …` searches and
publishes. Everything runs through the real `duckdb` shell binary and the installed `duckanon` script; the release is
checked with pandas against the Python builders' hierarchies, and people.duckdb must be unchanged by the command and
still open in the 1.5 shell (also after the Python package wrote to it).
"""

from __future__ import annotations

import hashlib
import re
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest
from test_sql_macros import DUCKDB_SHELL, parse_json_results

import duckanon
from duckanon import DistinctLDiversity, Hierarchy, KAnonymity, Policy

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
SCRIPT = Path(sys.executable).with_name("duckanon")

pytestmark = pytest.mark.skipif(DUCKDB_SHELL is None, reason="the `duckdb` shell binary is not on PATH")

def readme_workflow() -> tuple[str, str] | None:
    """The README's SQL-first blocks: the SQL a shell user runs in the repository's folder (`duckdb people.duckdb`),
    then the command."""
    text = README.read_text(encoding="utf-8")
    sql = [b for b in re.findall(r"```sql\n(.*?)```", text, flags=re.S) if "anon_policy_models(" in b]
    commands = [line for b in re.findall(r"```sh\n(.*?)```", text, flags=re.S) for line in b.splitlines()
                if line.startswith("duckanon run ")]
    return (sql[0], commands[0]) if sql and commands else None


def workflow() -> tuple[str, str]:
    found = readme_workflow()
    assert found is not None, "README.md has no SQL-first section (a ```sql block declaring a policy, a duckanon run)"
    return found


RECORDS = 3000


def patients_frame() -> pd.DataFrame:
    """100 zip codes 47600-47699 and a few from anywhere: no k = 5 release keeps ages or zip codes as they are, and
    the few zip codes from elsewhere are suppressed."""
    rng = np.random.default_rng(12)
    zips = np.array([f"{z:05d}" for z in rng.choice(np.arange(47600, 47700), RECORDS)])
    elsewhere = rng.random(RECORDS) < 0.008
    zips[elsewhere] = [f"{z:05d}" for z in rng.integers(10000, 99999, elsewhere.sum())]
    return pd.DataFrame({
        "name": [f"person {i}" for i in range(RECORDS)],
        "age": rng.integers(20, 80, RECORDS),
        "zip": zips,
        "disease": rng.choice(["flu", "cold", "hiv", "cancer", "asthma"], RECORDS),
        "visit_count": rng.integers(1, 9, RECORDS)})


def shell(db: Path, script: str, cwd: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run([DUCKDB_SHELL, "-bail", *options, str(db)], input=script, capture_output=True, text=True,
                          cwd=cwd, timeout=300)


def shell_json(db: Path, query: str, cwd: Path) -> list[dict]:
    proc = shell(db, query + ";\n", cwd, "-json", "-readonly")
    assert proc.returncode == 0, proc.stderr
    [rows] = parse_json_results(proc.stdout)
    return rows


def digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture
def people(tmp_path) -> tuple[Path, pd.DataFrame]:
    """people.duckdb made by the 1.5 shell, its table patients read from a CSV, then the README's SQL run on it."""
    frame = patients_frame()
    frame.to_csv(tmp_path / "patients.csv", index=False)
    db = tmp_path / "people.duckdb"
    create = ("CREATE TABLE patients AS SELECT * FROM read_csv('patients.csv', header = true, columns = "
              "{'name': 'VARCHAR', 'age': 'INTEGER', 'zip': 'VARCHAR', 'disease': 'VARCHAR', "
              "'visit_count': 'INTEGER'});\n")
    proc = shell(db, create, tmp_path)
    assert proc.returncode == 0, proc.stderr
    sql, _command = workflow()
    proc = shell(db, sql, ROOT)  # from the repository's folder, as the README says
    assert proc.returncode == 0, proc.stderr
    assert not db.with_name(db.name + ".wal").exists()
    return db, frame


def level_of(values: set[str], hierarchy: Hierarchy) -> int:
    """The level whose labels the released values are (suppressed '*' aside)."""
    shown = values - {"*"}
    levels = [level for level in range(hierarchy.levels) if shown <= hierarchy.labels(level)]
    assert levels, f"released values {sorted(shown)[:5]} are no level of the hierarchy"
    return levels[0]


def test_sql_first_workflow_through_the_shell_and_the_command(people, tmp_path):
    db, frame = people
    before = digest(db)
    _sql, command = workflow()
    argv = shlex.split(command)
    assert argv[0] == "duckanon"
    done = subprocess.run([str(SCRIPT), *argv[1:]], capture_output=True, text=True, cwd=tmp_path, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    release = tmp_path / argv[argv.index("-o") + 1]

    # The source database: unchanged, and the shell still opens it with everything the user declared.
    assert digest(db) == before
    assert shell_json(db, "SELECT count(*) AS n FROM patients", tmp_path) == [{"n": RECORDS}]
    assert shell_json(db, "SELECT name FROM anon.policies", tmp_path) == [{"name": "patients_sql"}]

    # The release, checked with pandas against the Python builders' hierarchies of the same values.
    with duckdb.connect(str(release), read_only=True) as con:
        released = con.execute("SELECT * FROM patients").df()
    assert shell_json(release, "SELECT count(*) AS n FROM patients", tmp_path) == [{"n": RECORDS}]
    assert "name" not in released.columns
    assert not any(frame["name"].isin(released[c].astype(str)).any() for c in released.columns)
    hierarchies = {"age": Hierarchy.intervals(frame["age"], widths=[5, 10, 20]), "zip": Hierarchy.redaction(frame["zip"])}
    levels = {qi: level_of(set(released[qi]), h) for qi, h in hierarchies.items()}
    assert min(levels.values()) > 0  # the data makes the search generalize both (patients_frame)
    for qi, level in levels.items():
        if level > 0:  # generalized: no raw value of the column is in it
            assert not set(released[qi]) & set(frame[qi].astype(str)), qi
    classes = released.groupby(["age", "zip"])
    assert classes.size().min() >= 5                         # k-anonymity, the suppressed records' class included
    assert classes["disease"].nunique().min() >= 3           # distinct 3-diversity
    suppressed = released["age"].eq("*")
    assert 0 < suppressed.sum() <= int(0.02 * RECORDS)
    assert (released.loc[suppressed, "zip"] == "*").all()
    # Every kept record is a source record generalized to the chosen levels; the rest were suppressed.
    mapped = frame.assign(**{qi: frame[qi].astype(str).map({r[0]: r[levels[qi]] for r in h.rows})
                             for qi, h in hierarchies.items()})
    key = ["age", "zip", "disease", "visit_count"]
    expected = Counter(mapped[key].itertuples(index=False, name=None))
    kept = Counter(released.loc[~suppressed, key].astype({"visit_count": int}).itertuples(index=False, name=None))
    assert not kept - expected
    assert sum((expected - kept).values()) == suppressed.sum()
    assert Counter(released.loc[suppressed, "disease"]) == Counter(
        d for (_a, _z, d, _v), n in (expected - kept).items() for _ in range(n))


def test_the_shell_reads_the_database_after_the_python_package_wrote_to_it(people, tmp_path):
    db, frame = people
    anon = duckanon.connect(str(db))  # Python duckdb 2.0, read-write, on the file the 1.5 shell made
    try:
        declared = anon.policy("patients_sql")
        assert declared == Policy(
            quasi_identifiers={"age": Hierarchy.intervals(frame["age"], widths=[5, 10, 20]),
                               "zip": Hierarchy.redaction(frame["zip"])},
            models=[KAnonymity(5), DistinctLDiversity("disease", 3)], identifiers=["name"], sensitive=["disease"],
            insensitive=["visit_count"], suppression_limit=0.02)
        result = anon.search("patients", "patients_sql")
        assert result.found
        anon.add_hierarchy("visits", Hierarchy.intervals(frame["visit_count"], widths=[2, 4]))
        anon.save_policy("patients_k10", Policy(quasi_identifiers={"age": "age", "zip": "zip"},
                                                models=[KAnonymity(10)], identifiers=["name"],
                                                others="insensitive"))
    finally:
        anon.con.close()
    assert shell_json(db, "SELECT name FROM anon.policies ORDER BY name", tmp_path) == [
        {"name": "patients_k10"}, {"name": "patients_sql"}]
    assert shell_json(db, "SELECT count(*) AS n FROM anon.hierarchy_visits", tmp_path) == [{"n": 8}]
    proc = shell(db, ".read sql/duckanon.sql\nSELECT * FROM anon_k_anonymity('patients', ['age', 'zip']);\n", ROOT,
                 "-json", "-readonly")
    assert proc.returncode == 0, proc.stderr
    sizes = frame.groupby(["age", "zip"]).size()
    assert parse_json_results(proc.stdout) == [[{"k": int(sizes.min()), "classes": len(sizes), "records": RECORDS}]]


def test_the_readmes_shell_blocks_run_in_the_folder_example_data_makes(tmp_path):
    """What a newcomer does: `duckanon example-data`, then the README's shell SQL on its people.duckdb (from the
    repository's folder, as the README says), then its `duckanon run`; the file the Python package made opens in the
    1.5 shell throughout."""
    made = subprocess.run([str(SCRIPT), "example-data", str(tmp_path)], capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    db = tmp_path / "people.duckdb"
    text = README.read_text(encoding="utf-8")
    macros = next(b for b in re.findall(r"```sql\n(.*?)```", text, flags=re.S) if "anon_k_anonymity(" in b)
    proc = shell(db, macros, ROOT, "-json")
    assert proc.returncode == 0, proc.stderr
    counted = parse_json_results(proc.stdout)[0][0]
    assert counted["records"] == 3000 and counted["k"] >= 1
    sql, command = workflow()
    proc = shell(db, sql, ROOT)
    assert proc.returncode == 0, proc.stderr
    done = subprocess.run([str(SCRIPT), *shlex.split(command)[1:]], capture_output=True, text=True, cwd=tmp_path,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert shell_json(tmp_path / "patients_release.duckdb", "SELECT count(*) AS n FROM patients", tmp_path) == [
        {"n": 3000}]
    assert shell_json(db, "SELECT name FROM anon.policies ORDER BY name", tmp_path) == [
        {"name": "patients_k5"}, {"name": "patients_sql"}]
