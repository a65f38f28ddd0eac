"""The files the README's examples read, made in a folder of the reader's: ``duckanon example-data [FOLDER]``.

Synthetic patients (name, age, zip, disease, visit count) in ``people.duckdb`` with a hierarchy for ``zip`` and the
policy ``patients_k5`` stored in its ``anon`` schema; the same people as ``people.csv`` (with a height); ARX-format
hierarchies ``age.csv``, ``zip.csv`` and ``hier/``; ``visits.parquet`` (age, zip); ``applicants.parquet`` (name,
salary, age, education level, label); and the bundled Adult records as ``adult.parquet``.  Nothing is overwritten:
a folder that already holds one of these names is refused, naming it.  The database is written in the storage version
releases use, so the DuckDB shell of 1.2 and later opens it.
"""

from __future__ import annotations

import os
from pathlib import Path

import duckdb
import numpy as np
from sqlglot import exp

from ..declare.catalog import Catalog
from ..declare.policy import Policy
from ..deferred import pandas as pd
from ..engine import DuckDBEngine
from ..errors import AnonymizationError
from ..hierarchy.hierarchy import Hierarchy
from ..privacy.models import DistinctLDiversity, KAnonymity
from ..release.files import STORAGE_VERSION
from ..sqlgen import build as sb
from . import load_adult

FILES = ("people.duckdb", "people.csv", "age.csv", "zip.csv", "hier", "visits.parquet", "applicants.parquet",
         "adult.parquet")
ZIP_AREAS = (0, 2, 77, 78, 5, 6, 9)


def write_examples(folder: str | os.PathLike = ".", *, records: int = 3000, seed: int = 5) -> list[Path]:
    """Write the README's example files into ``folder`` (made if missing); returns their paths."""
    folder = Path(folder)
    taken = [name for name in FILES if (folder / name).exists()]
    if taken:
        raise AnonymizationError(f"{str(folder)!r} already holds {', '.join(taken)}: example-data writes only into a "
                                 f"folder without them (nothing was written)")
    folder.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    patients = pd.DataFrame({
        "name": [f"person {i}" for i in range(records)], "age": rng.integers(20, 80, records),
        "zip": [f"476{z:02d}" for z in rng.choice(ZIP_AREAS, records)],
        "disease": rng.choice(["flu", "cold", "hiv", "cancer", "asthma"], records),
        "visit_count": rng.integers(1, 9, records)})
    ages = Hierarchy.intervals(range(0, 120), widths=[5, 10, 20], name="age")
    zips = Hierarchy.redaction(sorted(set(patients["zip"])), name="zip")
    (folder / "hier").mkdir()
    for directory in (folder, folder / "hier"):
        ages.to_arx_csv(directory / "age.csv")
        zips.to_arx_csv(directory / "zip.csv")
    _people_database(folder / "people.duckdb", patients, ages, zips)
    people = patients[["name", "age", "zip", "disease"]].assign(height=rng.integers(150, 200, records))
    people[["name", "age", "height", "zip", "disease"]].to_csv(folder / "people.csv", index=False)
    applicants = pd.DataFrame({
        "name": [f"applicant {i}" for i in range(records)],
        "salary": rng.integers(20_000, 150_000, records).astype(float), "age": rng.integers(20, 80, records),
        "elevel": rng.integers(0, 5, records), "label": rng.choice(["A", "B"], records)})
    with duckdb.connect() as con:
        engine = DuckDBEngine(con)
        for name, frame in (("visits.parquet", patients[["age", "zip"]]), ("applicants.parquet", applicants)):
            with engine.registered(frame) as rows:
                engine.run(_copy(exp.select(exp.Star()).from_(rows), folder / name))
        load_adult(con, "adult")
        engine.run(_copy(exp.select(exp.Star()).from_(sb.table("adult")), folder / "adult.parquet"))
    return [folder / name for name in FILES]


def _people_database(path: Path, patients: pd.DataFrame, ages: Hierarchy, zips: Hierarchy) -> None:
    with duckdb.connect(str(path), config={"storage_compatibility_version": STORAGE_VERSION}) as con:
        engine = DuckDBEngine(con)
        with engine.registered(patients) as rows:
            engine.run(sb.create_table_as(sb.table("patients"), exp.select(exp.Star()).from_(rows)))
        catalog = Catalog(engine)
        catalog.add_hierarchy("zip", zips)
        catalog.save_policy("patients_k5", Policy(
            identifiers=["name"], quasi_identifiers={"age": ages, "zip": "zip"}, sensitive=["disease"],
            insensitive=["visit_count"], models=[KAnonymity(5), DistinctLDiversity("disease", 3)],
            suppression_limit=0.02))


def _copy(query: exp.Select, target: Path) -> exp.Copy:
    return exp.Copy(this=query.subquery(), kind=False, files=[sb.lit(str(target))], params=[
        exp.CopyParameter(this=exp.var("FORMAT"), expression=exp.var("parquet"))])
