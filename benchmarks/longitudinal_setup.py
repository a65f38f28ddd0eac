"""What the benchmarks on longitudinal Adult share: the data loaded, the anonymizer, the hierarchies, and a pseudonym
key drawn for the run (given through an environment variable, as a custodian gives it)."""

from __future__ import annotations

import os
import secrets
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

import duckdb

import common

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckanon  # noqa: E402
from duckanon import Hierarchy, Pseudonymize  # noqa: E402
from duckanon.datasets import adult_hierarchy_dir  # noqa: E402

KEY_VARIABLE = "DUCKANON_BENCH_PSEUDONYM_KEY"


def loaded(load: Callable[[duckdb.DuckDBPyConnection], object], quasi: Sequence[str]
           ) -> tuple[duckdb.DuckDBPyConnection, duckanon.Anonymizer, dict[str, Hierarchy], Pseudonymize]:
    """A connection holding what ``load`` creates, its anonymizer, ARX's Adult hierarchies of ``quasi``, and the
    pseudonymization of the patient's id under this run's key."""
    os.environ[KEY_VARIABLE] = secrets.token_hex(32)
    con = duckdb.connect()
    common.progress("generating the longitudinal Adult data")
    load(con)
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in quasi}
    return con, duckanon.connect(con), hierarchies, Pseudonymize(f"env:{KEY_VARIABLE}")
