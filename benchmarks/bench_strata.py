"""Strata: what holding every model within each stratum costs and gives, beside the same policy over the whole table.

    python benchmarks/bench_strata.py                  # Adult and IHIS
    python benchmarks/bench_strata.py --cases adult

Adult: eight quasi-identifiers with ARX's hierarchies (Adult's nine but salary-class, the sensitive attribute), at
most 5 % suppressed, k = 5 alone and with t-closeness of salary-class at t = 0.2 (equal distance); each policy over
the whole table (sex a quasi-identifier), within each sex (sex a stratum, released as it is) and within each sex ×
race.  IHIS (1.19M records, its nine quasi-identifiers): k = 5 at most 5 %, over the whole table and within each
REGION.  Per release, computed here with pandas from its file: records suppressed, classes (within strata), LM over
the eight (nine) columns (a stratum released as it is costs 0), on Adult the largest distance of a class's
salary-class distribution from its own sex's (equal distance: half the L1 distance, the '*' class included) and seed
000's accuracy (salary-class from the eight columns).  duckanon runs in a child process per case (peak RSS is that
call's); each call reads, searches, publishes and verifies.  No peer offers strata for a full-domain search (ARX has
none; sdcMicro's ``strataVars`` serve its local suppression and risk measures, which ``bench_cell_suppression.py``
compares): the yardstick is the same policy without strata, in the same run.  Timings are not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

import common
import duckdb
import pandas as pd
from bench_local_recoding import accuracy, lm_loss
from bench_search import ADULT_QIS, IHIS_QIS, adult_table, ihis_table

import duckanon
from duckanon import KAnonymity, Policy, TCloseness

K, SUPPRESSION, T = 5, 0.05, 0.2
SENSITIVE = "salary-class"
ADULT_EIGHT = [q for q in ADULT_QIS if q != SENSITIVE]
# Per data set: its quasi-identifiers, the policies (models) and the strata each is held within.
CASES = {
    "adult": {"qis": ADULT_EIGHT, "label": SENSITIVE,
              "models": {"k = 5": [KAnonymity(K)], f"k = 5, t = {T}": [KAnonymity(K), TCloseness(SENSITIVE, T)]},
              "strata": [[], ["sex"], ["sex", "race"]]},
    "ihis": {"qis": IHIS_QIS, "label": None, "models": {"k = 5": [KAnonymity(K)]}, "strata": [[], ["REGION"]]},
}


def policy_of(name: str, hierarchies: dict, models: str, strata: list[str]) -> Policy:
    case = CASES[name]
    quasi = {q: hierarchies[q] for q in case["qis"] if q not in strata}
    return Policy(quasi_identifiers=quasi, models=case["models"][models], strata=strata, insensitive=[],
                  sensitive=[SENSITIVE] if case["label"] else [], suppression_limit=SUPPRESSION, others="drop")


def duckanon_child(name: str, models: str, strata: list[str], data_dir: Path, out: Path) -> None:
    """In a process of its own: one release, its call timed and its peak memory taken."""
    con = duckdb.connect()
    table, hierarchies = adult_table(con) if name == "adult" else ihis_table(con, data_dir)
    anon = duckanon.connect(con)
    path = data_dir / f"strata-{name}-{len(CASES[name]['models'][models])}-{'-'.join(strata) or 'none'}.duckdb"
    path.unlink(missing_ok=True)
    common.reset_peak_rss()
    started = time.perf_counter()
    found, release = anon.anonymize(table, policy_of(name, hierarchies, models, strata), path)
    seconds = time.perf_counter() - started
    out.write_text(json.dumps({"path": str(path), "seconds": seconds, "search_seconds": found.seconds,
                               "checks": found.checks, "levels": found.levels, "suppressed": release.suppressed,
                               "peak_rss_mb": common.peak_rss_mb(), "verified": duckanon.verify(path).holds}))


def farthest(frame: pd.DataFrame, classes_by: list[str], within: list[str]) -> float:
    """The largest equal-distance EMD between a class's salary-class distribution and that of its records' group by
    ``within`` (none: the whole release) in the release; the '*' class (one per stratum) among the classes, the
    records whose ``within`` values are generalized away left out."""
    largest = 0.0
    shown = frame[~(frame[within].astype(str) == "*").any(axis=1)] if within else frame
    for _, part in (shown.groupby(within) if within else [((), shown)]):
        table = part[SENSITIVE].value_counts(normalize=True)
        for _, members in part.groupby(classes_by, dropna=False):
            shares = members[SENSITIVE].value_counts(normalize=True).reindex(table.index, fill_value=0)
            largest = max(largest, 0.5 * float((shares - table).abs().sum()))
    return largest


def measured_release(name: str, run: dict, hierarchies: dict, strata: list[str]) -> dict:
    """What pandas makes of one release file."""
    case = CASES[name]
    with duckdb.connect(run["path"], read_only=True) as con:
        frame = con.execute("SELECT * FROM release").df()
    quasi = [q for q in case["qis"] if q not in strata]
    shown = frame[case["qis"]].astype(str)
    starred = (shown[quasi] == "*").all(axis=1)
    keys = [*strata, *quasi]
    return {"records": len(frame), "suppressed": int(starred.sum()),
            "classes": int(frame.groupby(keys, dropna=False).ngroups),
            "smallest": int(frame.groupby(keys, dropna=False).size().min()),
            "lm": lm_loss(shown[quasi].assign(**{s: shown[s] for s in strata}), {q: hierarchies[q] for q in quasi})
            * len(quasi) / len(case["qis"]),
            "from_stratum": farthest(frame.assign(**{q: shown[q] for q in quasi}), keys, strata)
            if case["label"] else None,
            "from_sex": farthest(frame.assign(**{q: shown[q] for q in quasi}), keys, ["sex"])
            if case["label"] else None,
            "accuracy": accuracy(frame[[*case["qis"], case["label"]]].astype(str), [*case["qis"], case["label"]],
                                 case["label"]) if case["label"] else None}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "strata.md")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        name, models, strata = args.child
        duckanon_child(name, models, [s for s in strata.split(",") if s], args.data_dir, args.child_output)
        return 0
    load = common.load_at_start()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    rows, results = [], []
    for name in args.cases:
        case = CASES[name]
        con = duckdb.connect()
        _, hierarchies = adult_table(con) if name == "adult" else ihis_table(con, args.data_dir)
        con.close()
        for models in case["models"]:
            whole = None
            for strata in case["strata"]:
                within = ", ".join(strata) or "the whole table"
                common.progress(f"{name}, {models}, within {within}")
                before = os.getloadavg()[0]
                out = args.data_dir / f"duckanon-strata-{name}.json"
                measured = common.run_measured([sys.executable, str(Path(__file__).resolve()), "--child", name,
                                                models, ",".join(strata), "--child-output", str(out),
                                                "--data-dir", str(args.data_dir)])
                if measured.returncode != 0:
                    raise RuntimeError(f"duckanon's child failed on {name}, {models}, {within}")
                run = json.loads(out.read_text())
                figures = measured_release(name, run, hierarchies, strata)
                whole = whole or run
                rows.append([name, models, within, ", ".join(f"{v}" for v in run["levels"].values()),
                             f"{figures['suppressed']:,}", f"{figures['classes']:,}", f"{figures['smallest']}",
                             f"{figures['lm']:.4f}",
                             *("" if figures[f] is None else f"{figures[f]:.3f}" for f in ("from_stratum", "from_sex")),
                             "" if figures["accuracy"] is None else f"{figures['accuracy']:.4f}",
                             f"{run['checks']:,}", f"{run['search_seconds']:.2f}", f"{run['seconds']:.2f}",
                             f"{run['seconds'] / whole['seconds']:.2f}", f"{run['peak_rss_mb']:.0f}",
                             "yes" if run["verified"] else "NO", f"{(before + os.getloadavg()[0]) / 2:.1f}"])
                results.append({"case": name, "models": models, "strata": strata, **run, **figures})
    table = common.markdown_table(
        ["data", "policy", "within", "levels", "records suppressed", "classes", "smallest class", "LM",
         "largest EMD from own stratum", "largest EMD from own sex", "accuracy", "nodes checked", "search s", "whole call s",
         "call ÷ whole-table call", "peak RSS MB", "verifies", "load"], rows)
    note = ("- Levels are in the order of the quasi-identifiers (a stratum has none). LM is over all eight (nine) "
            "columns, a stratum, released as it is, costing 0.\n"
            "- 'Largest EMD from own stratum' (own sex): the largest equal distance of a class's salary-class "
            "distribution from that of its stratum's (its sex's) released records, the '*' class among the classes; "
            "the policy's t is 0.2. A class whose sex is generalized to '*' is left out of the second.\n"
            "- Each whole call reads and encodes the source, searches, publishes and verifies its release.")
    common.report("Strata: every model within each stratum", "python benchmarks/bench_strata.py", table, note,
                  results, load, args.output, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
