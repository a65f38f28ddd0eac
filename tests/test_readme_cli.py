"""The README's command-line examples run as written, through the installed `duckanon` script, in a folder holding
the files the README names; each release is then read back with plain duckdb and checked with pandas."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import duckdb
import numpy as np
import pandas as pd
import pytest


README = Path(__file__).parents[1] / "README.md"
SCRIPT = Path(sys.executable).with_name("duckanon")
RECORDS = 3000  # duckanon example-data's


def readme_commands() -> list[str]:
    """Every `duckanon …` example of the README's command-line section, in order."""
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## From the command line\n"):text.index("## From the DuckDB shell\n")]
    return [c.replace("\\|", "|") for c in re.findall(r"`(duckanon [^`]+)`", section)
            if not c.startswith("duckanon COMMAND") and "…" not in c and "--version" != c.split()[-1]
            and c != "duckanon example-data"]  # how the folder itself was made


def zips(n: int, rng: np.random.Generator) -> list[str]:
    return [f"476{z:02d}" for z in rng.choice([0, 2, 77, 78, 5, 6, 9], n)]


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    """The files the README's examples name, made as the README says: `duckanon example-data`."""
    here = tmp_path_factory.mktemp("readme_cli")
    made = subprocess.run([str(SCRIPT), "example-data"], cwd=here, capture_output=True, text=True, timeout=300)
    assert made.returncode == 0, made.stderr
    return here


def output_of(command: str) -> Path | None:
    words = shlex.split(command)
    return Path(words[words.index("-o") + 1]) if "-o" in words else None


def released(path: Path) -> pd.DataFrame:
    with duckdb.connect() as con:
        if path.suffix == ".parquet":
            return con.execute("SELECT * FROM read_parquet(?)", [str(path)]).df()
        con.execute(f"ATTACH '{path}' AS r (READ_ONLY)")
        table = con.execute("SELECT released_table FROM r.release_info").fetchone()[0]
        return con.execute(f'SELECT * FROM r."{table}"').df()


def test_the_readme_shows_an_example_of_every_command():
    commands = readme_commands()
    named = {shlex.split(c)[1] for c in commands}
    assert {"people.duckdb", "check", "mondrian", "cluster", "perturb", "run", "hierarchy", "report"} <= named, commands


@pytest.mark.parametrize("command", readme_commands())
def test_readme_command_runs_as_written(folder, command):
    result = subprocess.run([str(SCRIPT), *shlex.split(command)[1:]], cwd=folder, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    output = output_of(command)
    if shlex.split(command)[1] == "hierarchy":
        with duckdb.connect(str(folder / "people.duckdb"), read_only=True) as con:
            levels = con.execute("SELECT * FROM anon.hierarchy_age").df()
        assert set(levels.iloc[:, 0].astype(int)) >= set(range(20, 80))
        return
    if output is None:
        return
    if shlex.split(command)[1] == "report":
        page = (folder / output).read_text(encoding="utf-8")
        assert "Re-identification risk" in page and "Privacy and utility for each k" in page
        return
    frame = released(folder / output)
    assert "name" not in frame.columns
    if "salary" in frame.columns:  # a perturbation: every record, new salaries
        assert len(frame) == RECORDS
        return
    quasi = [c for c in ("age", "height", "zip") if c in frame.columns]  # the examples' quasi-identifiers
    sizes = frame.groupby(quasi, dropna=False).size()
    assert sizes.min() >= 5
