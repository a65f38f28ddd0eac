"""What the benchmarks on longitudinal Adult share: the data loaded, the anonymizer, the hierarchies, a pseudonym key
drawn for the run (given through an environment variable, as a custodian gives it), and a policy released counting
records and counting people."""

from __future__ import annotations

import itertools
import os
import secrets
import sys
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import duckdb
import pandas as pd

import common

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import duckanon  # noqa: E402
from duckanon import Hierarchy, Policy, Pseudonymize  # noqa: E402
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


@dataclass(frozen=True)
class Released:
    """One release of :func:`both_ways`: its file, wall seconds, the search's result, the release, and its rows."""

    path: Path
    wall: float
    result: object
    release: object
    rows: pd.DataFrame


def both_ways(anon: duckanon.Anonymizer, base: dict, folder: Path, label: str, source: str = "adult_visits"
              ) -> Iterator[tuple[str, Released | None]]:
    """The policy ``base`` (a Policy's arguments) counting records, then counting people by ``patient_id``, each
    searched and published from ``source`` into ``folder`` (announced as ``label``): per unit, its release, or None
    where no transformation satisfies the policy."""
    for unit, policy in (("records", Policy(**base)), ("people", Policy(**base, person="patient_id"))):
        common.progress(f"{label}: searching and publishing, counting {unit}")
        target = folder / f"{next(_releases)}-{unit}.parquet"
        try:
            wall, _cpu, (result, release) = common.timed(
                lambda policy=policy, target=target: anon.anonymize(source, policy, target))
        except duckanon.PolicyNotSatisfied:
            yield unit, None
            continue
        yield unit, Released(target, wall, result, release, pd.read_parquet(target))


_releases = itertools.count()


def policy_arguments(hierarchies: dict[str, Hierarchy], pseudonym: Pseudonymize, models: Sequence[object],
                     **changes) -> dict:
    """A policy's arguments as the benchmarks release longitudinal Adult: ``hierarchies``' quasi-identifiers, the
    ``models``, the patient's id pseudonymized, the other columns dropped, at most 5 % suppressed (``changes`` over
    these)."""
    return {"quasi_identifiers": hierarchies, "models": list(models), "pseudonymize": {"patient_id": pseudonym},
            "others": "drop", "suppression_limit": 0.05, **changes}


def described(outcome: Released, quasi: Sequence[str]) -> tuple[str, int]:
    """A release's levels above 0, as text, and the people it suppressed (all their records '*')."""
    levels = ", ".join(f"{a}={v}" for a, v in outcome.result.levels.items() if v) or "none"
    shown = outcome.rows
    return levels, int(shown.loc[(shown[list(quasi)] == "*").all(axis=1), "patient_id"].nunique())


def report(con: duckdb.DuckDBPyConnection, output: Path, title: str, lead: str, table: str) -> None:
    """Print a benchmark's results (a title, what was measured, the table and the machine's facts) and write them to
    ``output``."""
    text = f"# {title}\n\n{lead}\n\n{table}\n\n{common.facts_markdown(common.machine_facts(con))}\n"
    print(text)
    common.write_text(output, text)
