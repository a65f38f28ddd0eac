"""The README's Python examples run as written, on a small patients database made here."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd

README = Path(__file__).parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_python_examples_run(tmp_path, monkeypatch):
    rng = np.random.default_rng(0)
    n = 3000
    zips = [f"{z:05d}" for z in rng.choice([47677, 47678, 47602, 47905, 47906, 47909], n)]
    patients = pd.DataFrame({
        "name": [f"person {i}" for i in range(n)], "age": rng.integers(20, 80, n), "zip": zips,
        "disease": rng.choice(["flu", "cold", "hiv", "cancer", "asthma"], n), "visit_count": rng.integers(1, 9, n)})
    with duckdb.connect(str(tmp_path / "people.duckdb")) as con:
        con.register("frame", patients)
        con.execute("CREATE TABLE patients AS SELECT * FROM frame")
    (tmp_path / "zip.csv").write_text("".join(f"{z};{z[:4]}*;{z[:3]}**;{z[:2]}***;*\n" for z in sorted(set(zips))))
    monkeypatch.chdir(tmp_path)
    blocks = python_blocks()
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(compile(block, str(README), "exec"), namespace)  # noqa: S102 - our own README
    assert (tmp_path / "patients_release.duckdb").exists()
    release_file = str(tmp_path / "patients_release.duckdb")
    with duckdb.connect(release_file, read_only=True, config={"python_enable_replacements": False}) as con:
        released = con.execute("SELECT * FROM patients").df()
    assert "name" not in released.columns and len(released) == n
