"""Cell suppression (sdcMicro's ``localSuppression``) beside full-domain suppression and local recoding, in one run.

    python benchmarks/bench_cell_suppression.py                  # sdcMicro's testdata2, Adult and IHIS
    python benchmarks/bench_cell_suppression.py --cases adult

First, sdcMicro's own test data (``testdata2``, bundled in ``tests/data``) against the suppressions its tests expect
(``tests/testthat/test_localSuppression.R`` in ``sdcTools/sdcMicro``: k = 2, seven key variables, 97 values; 109 with
strata by age group).  Then Adult and IHIS as ``bench_local_recoding.py`` anonymizes them (k = 5, at most 5 %,
nine quasi-identifiers with ARX's hierarchies, ARX's Loss): the optimal full-domain generalization with its records
suppressed, the same with those records recoded locally (ARX's ``optimizeIterative``), and the same with single
values suppressed instead (``suppress_cells``, the default importance).  Per release, computed here with pandas
from its file: records and values suppressed, the records that lost a value, LM (a suppressed value, ``*`` or
missing, counts 1), the fewest compatible records of any record (a missing value matching any), and on Adult seed
000's classification accuracy (salary-class from the other eight released quasi-identifiers).  duckanon runs in a
child process per case; each call reads, searches, publishes and verifies.  Timings are not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import common
import duckdb
import numpy as np
import pandas as pd
from bench_local_recoding import (
    CASES,
    GS,
    accuracy,
    case_setup,
    hierarchies_of,
    lm_loss,
)

import duckanon
from duckanon import ArxLoss, Hierarchy, KAnonymity, Policy
from duckanon.engine.duckdb_engine import DuckDBEngine
from duckanon.risk.counting import compatible_histogram
from duckanon.sqlgen import build as sb

TESTDATA2 = ROOT / "tests" / "data" / "sdcmicro_testdata2.csv"
SDCMICRO_KEYS = ["urbrur", "roof", "walls", "water", "electcon", "relat", "sex"]
SDCMICRO_EXPECTED = {"testdata2, k = 2": 97, "testdata2, k = 2, strata by age group": 109}


def sdcmicro_cases() -> list[list[str]]:
    """sdcMicro's documented suppressions on testdata2 beside duckanon's, and its time."""
    frame = pd.read_csv(TESTDATA2)
    age = frame["age"].to_numpy(dtype=float)
    breaks = np.linspace(age.min(), age.max(), 6)  # R's cut(age, 5): equal widths, the range widened by 1/1000
    breaks[[0, -1]] += [-(age.max() - age.min()) / 1000, (age.max() - age.min()) / 1000]
    frame["ageG"] = [f"AG{g}" for g in np.searchsorted(breaks, age, side="left")]
    con = duckdb.connect()
    con.register("frame", frame)
    con.execute("CREATE TABLE testdata2 AS SELECT * FROM frame")
    anon = duckanon.connect(con)
    rows = []
    for (what, expected), strata in zip(SDCMICRO_EXPECTED.items(), [(), ("ageG",)]):
        hierarchies = {c: Hierarchy.from_lists([[str(v), "*"] for v in sorted(set(frame[c]))])
                       for c in SDCMICRO_KEYS}
        policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(2)], suppression_limit=1.0,
                        others="insensitive", strata=list(strata))
        folder = Path(tempfile.mkdtemp(prefix="cells-"))
        started = time.perf_counter()
        cells, _ = anon.suppress_cells("testdata2", policy, folder / "cells.duckdb",
                                       levels={c: 0 for c in hierarchies})
        seconds = time.perf_counter() - started
        rows.append([what, f"{expected}", f"{sum(cells.cells.values())}",
                     ", ".join(f"{a} {n}" for a, n in cells.cells.items() if n), f"{cells.passes}",
                     "yes" if duckanon.verify(folder / "cells.duckdb").holds else "NO", f"{seconds:.2f}"])
    return rows


def duckanon_child(name: str, data_dir: Path, out: Path) -> None:
    """In a process of its own: the three releases of one case, each call timed and its peak memory taken."""
    anon, table, policy, folder = case_setup(name, data_dir)
    calls = {
        "full-domain": lambda path: anon.anonymize(table, policy, path, metric=ArxLoss(GS)),
        "local recoding": lambda path: anon.anonymize_locally(table, policy, path, metric=ArxLoss(GS)),
        "cell suppression": lambda path: anon.suppress_cells(table, policy, path, metric=ArxLoss(GS)),
    }
    result = {}
    for what, call in calls.items():
        path = folder / f"{what.replace(' ', '-')}.duckdb"
        common.reset_peak_rss()
        started = time.perf_counter()
        found, release = call(path)
        seconds = time.perf_counter() - started
        search = found if what == "full-domain" else (found.steps[0].search if what == "local recoding"
                                                       else found.search)
        after = (0.0 if what == "full-domain" else sum(s.search.seconds for s in found.steps[1:])
                 if what == "local recoding" else found.seconds)
        result[what] = {"path": str(path), "seconds": seconds, "search_seconds": search.seconds, "after": after,
                        "suppressed": release.suppressed, "peak_rss_mb": common.peak_rss_mb(),
                        "verified": duckanon.verify(path).holds,
                        "passes": getattr(found, "passes", None)}
    out.write_text(json.dumps(result))


def measured_release(path: str, qis: list[str], hierarchies: dict, label: str | None) -> dict:
    """What pandas and the compatible counting make of one release file."""
    with duckdb.connect(path, read_only=True) as con:
        frame = con.execute("SELECT * FROM release").df()
        fewest = int(compatible_histogram(DuckDBEngine(con), sb.table("release"), qis)[0][0])
    values = frame[qis].astype(object)
    starred = (values.astype(str) == "*").all(axis=1)
    missing = values.isna()
    shown = values.where(~missing, "*").astype(str)
    return {"records": len(frame), "suppressed_records": int(starred.sum()),
            "cells": int(missing.to_numpy().sum() + starred.sum() * len(qis)),
            "lost_value": int((missing.any(axis=1) | starred).sum()), "lm": lm_loss(shown, hierarchies),
            "fewest": fewest, "accuracy": accuracy(shown, qis, label) if label else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "cell_suppression.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        duckanon_child(args.child, args.data_dir, args.child_output)
        return 0
    load = common.load_at_start()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    common.progress("sdcMicro's testdata2")
    sdcmicro = common.markdown_table(["data", "sdcMicro's tests expect", "duckanon", "per attribute", "passes",
                                      "verifies", "s"], sdcmicro_cases())
    rows, results = [], []
    for name in args.cases:
        case = CASES[name]
        common.progress(f"{name}: duckanon's three releases")
        before = os.getloadavg()[0]
        out = args.data_dir / f"duckanon-cells-{name}.json"
        measured = common.run_measured([sys.executable, str(Path(__file__).resolve()), "--child", name,
                                        "--child-output", str(out), "--data-dir", str(args.data_dir)])
        if measured.returncode != 0:
            raise RuntimeError(f"duckanon's child failed on {name}")
        ours = json.loads(out.read_text())
        load_pair = (before + os.getloadavg()[0]) / 2
        hierarchies = hierarchies_of(case)
        for what, run in ours.items():
            figures = measured_release(run["path"], case["qis"], hierarchies, case["label"])
            rows.append([name, what, f"{figures['records']:,}", f"{figures['suppressed_records']:,}",
                         f"{figures['cells']:,}", f"{figures['lost_value']:,}", f"{figures['lm']:.4f}",
                         f"{figures['fewest']}", "" if figures["accuracy"] is None else f"{figures['accuracy']:.4f}",
                         f"{run['search_seconds']:.2f}", f"{run['after']:.2f}",
                         f"{(run['search_seconds'] + run['after']) / run['search_seconds']:.2f}",
                         f"{run['seconds']:.2f}",
                         f"{run['seconds'] / ours['full-domain']['seconds']:.2f}",
                         f"{run['peak_rss_mb']:.0f}", "yes" if run["verified"] else "NO", f"{load_pair:.1f}"])
            results.append({"case": name, "release": what, **run, **figures})
    table = common.markdown_table(
        ["data", "release", "records", "records suppressed", "values suppressed", "records that lost a value", "LM",
         "fewest compatible", "accuracy", "search s", "after the search s", "(search + after) ÷ search",
         "whole call s", "call ÷ full-domain call", "peak RSS MB",
         "verifies", "load"], rows)
    note = ("- sdcMicro's figures are those its tests assert (`tests/testthat/test_localSuppression.R`); R is not on "
            "this machine, so sdcMicro itself was not run.\n"
            "- A record suppressed by full-domain generalization counts one suppressed value per quasi-identifier. "
            "LM and accuracy are computed here from each release file, a missing or `*` value counting as suppressed; "
            "'fewest compatible' counts, per record, the records equal to it where both hold a value (a missing "
            "value matching any; for the other releases `*` is a value of its own, as their classes count it).\n"
            "- Each whole call reads and encodes the source, searches, publishes and verifies its release. 'After the "
            "search' is local recoding's later steps or cell suppression's passes (with the release's metrics), "
            "before publishing.")
    common.report("Cell suppression beside full-domain suppression and local recoding",
                  "python benchmarks/bench_cell_suppression.py", sdcmicro + "\n\n" + table, note, results, load,
                  args.output, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
