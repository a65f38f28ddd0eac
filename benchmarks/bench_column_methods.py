"""What releasing columns transformed costs a publish: pseudonyms (keyed HMAC-SHA-256 in SQL), masks, date shifts.

    python benchmarks/bench_column_methods.py [--copies 1 10] [--repeat 3]

The data is Adult made longitudinal (``duckanon.datasets.longitudinal``), ``copies`` times over with distinct people
(136,844 visits each).  The same full-domain generalization (k = 5 over age, sex, race and marital status, violating records
dropped) is published to Parquet twice per repetition, interleaved: once releasing the patient's id and visit date as they are and dropping
name, e-mail and phone; once pseudonymizing the id, masking the e-mail (its domain kept) and the phone (its last four
digits kept) and shifting each patient's visit dates by one offset within ±30 days.  Printed: records, the median
wall time of each publish and their ratio, and the peak memory of the process.
"""

from __future__ import annotations

import argparse
import os
import secrets
import statistics
import sys
import tempfile
from pathlib import Path

import duckdb
import pandas as pd

import common

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import duckanon  # noqa: E402
from duckanon import DateShift, Hierarchy, KAnonymity, Mask, Policy, Pseudonymize  # noqa: E402
from duckanon.datasets import adult_hierarchy_dir  # noqa: E402
from duckanon.datasets.longitudinal import adult_visits  # noqa: E402

QUASI = ["age", "sex", "race", "marital-status"]
LEVELS = {"age": 2, "sex": 0, "race": 0, "marital-status": 1}
KEY_VARIABLE = "DUCKANON_BENCH_PSEUDONYM_KEY"


def visits(copies: int) -> pd.DataFrame:
    frames = []
    for copy in range(copies):
        frame = adult_visits(seed=copy)
        frame["patient_id"] += copy * 1_000_000
        frames.append(frame)
    return pd.concat(frames, ignore_index=True)


def policies() -> dict[str, Policy]:
    hierarchies = {q: Hierarchy.from_arx_csv(adult_hierarchy_dir() / f"{q}.csv") for q in QUASI}
    key = f"env:{KEY_VARIABLE}"
    base = {"quasi_identifiers": hierarchies, "models": [KAnonymity(5)], "sensitive": ["diagnosis"], "others": "drop",
            "suppression": "drop", "suppression_limit": 0.05}
    return {"as they are": Policy(**base, insensitive=["patient_id", "visit_date"], identifiers=["name", "email",
                                                                                                   "phone"]),
            "transformed": Policy(**base, identifiers=["name"], pseudonymize={"patient_id": Pseudonymize(key)},
                                  mask={"email": Mask.email_domain(), "phone": Mask.keep_last(4)},
                                  date_shift={"visit_date": DateShift(30, "patient_id", key)})}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--copies", type=int, nargs="+", default=[1, 10])
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    os.environ[KEY_VARIABLE] = secrets.token_hex(32)
    rows = []
    for copies in args.copies:
        common.progress(f"{copies} copies: generating")
        con = duckdb.connect()
        frame = visits(copies)
        con.register("frame", frame)
        con.execute("CREATE TABLE adult_visits AS SELECT * REPLACE (CAST(visit_date AS DATE) AS visit_date) FROM frame")
        con.unregister("frame")
        anon = duckanon.connect(con)
        times: dict[str, list[float]] = {name: [] for name in policies()}
        with tempfile.TemporaryDirectory() as scratch:
            for repetition in range(args.repeat):
                for name, policy in policies().items():
                    target = Path(scratch) / f"{name.replace(' ', '-')}.parquet"
                    wall, _cpu, _ = common.timed(
                        lambda policy=policy, target=target: anon.publish("adult_visits", policy, LEVELS, target))
                    times[name].append(wall)
                    common.progress(f"  {name}, run {repetition + 1}: {wall:.2f} s")
        plain, transformed = (statistics.median(times[n]) for n in ("as they are", "transformed"))
        rows.append([f"{len(frame):,}", f"{plain:.2f}", f"{transformed:.2f}", f"{transformed / plain:.2f}",
                     f"{common.peak_rss_mb():,.0f}"])
        con.close()
    table = common.markdown_table(["records", "publish, columns as they are (s)", "publish, columns transformed (s)",
                                   "ratio", "peak MB (process)"], rows)
    print(f"# Publishing with columns transformed\n\n{table}\n\n{common.facts_markdown(common.machine_facts())}")


if __name__ == "__main__":
    main()
