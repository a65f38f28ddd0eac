"""The README's Python examples run as written, in a folder `duckanon example-data` made."""

from __future__ import annotations

import re
from pathlib import Path

import duckdb

from duckanon.datasets.examples import write_examples

README = Path(__file__).parents[1] / "README.md"


def python_blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), flags=re.S)


def test_readme_python_examples_run(tmp_path, monkeypatch):
    write_examples(tmp_path)  # what `duckanon example-data` writes: the files the examples read
    n = 3000
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
