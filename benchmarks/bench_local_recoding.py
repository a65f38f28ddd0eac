"""Local recoding of the suppressed records beside ARX 3.9.2's (``ARXResult.optimizeIterative``), in one run.

    python benchmarks/bench_local_recoding.py                  # Adult and IHIS (ARX's IHIS search takes minutes)
    python benchmarks/bench_local_recoding.py --cases adult

Both tools anonymize the same records with k-anonymity (k = 5, at most 5 % suppressed, nine quasi-identifiers with
ARX's hierarchies) under ARX's Loss (gs-factor 0.5, geometric mean): the optimal full-domain generalization, then
the records it suppresses anonymized again among themselves, step by step, until a step releases none (ARX: at most
``--iterations`` steps, adaption factor 0; duckanon: the same bound).  Per case and tool: the records each step
releases, the records left suppressed, the time of the full-domain search and of the local steps, peak memory, and,
computed here with pandas from each tool's own output by one definition for both, the information loss (LM: the mean
over records and quasi-identifiers of (leaves under the released value − 1) / (leaves of the hierarchy − 1), a
suppressed value 1) and, on Adult, seed 000's classification accuracy (salary-class from the other eight released
quasi-identifiers, 3-fold cross-validation).  ARX runs in its own JVM (``ArxLocal.java``: load, one search, the local
steps, the output written); duckanon in a child process (load, one ``anonymize`` and one ``anonymize_locally``, each
publishing and verifying its release).  Timings are not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
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
import pandas as pd
from bench_search import (
    ADULT_QIS,
    IHIS_DIR,
    IHIS_QIS,
    adult_table,
    ihis_file,
    ihis_table,
)

import duckanon
from duckanon import ArxLoss, KAnonymity, Policy
from duckanon.hierarchy.hierarchy import Hierarchy

K, SUPPRESSION, GS = 5, 0.05, 0.5
DRIVER = HERE / "arx_local" / "ArxLocal.java"
CASES = {
    "adult": {"qis": ADULT_QIS, "hierarchies": ROOT.parent / "shared" / "data" / "adult" / "hierarchies"
              / "adult_hierarchy_%s.csv", "delimiter": ",", "label": "salary-class"},
    "ihis": {"qis": IHIS_QIS, "hierarchies": IHIS_DIR / "hierarchies" / "ihis_hierarchy_%s.csv", "delimiter": ";",
             "label": None},
}


def leaves_per_label(hierarchy: Hierarchy) -> dict[str, int]:
    """How many leaves each label of the hierarchy stands for (a label on several levels must stand for the same
    leaves there, else the loss of an output without its levels is ambiguous: refused)."""
    counted: dict[tuple[int, str], set[str]] = {}
    for row in hierarchy.rows:
        for level, label in enumerate(row):
            counted.setdefault((level, label), set()).add(row[0])
    sizes: dict[str, int] = {}
    for (_, label), leaves in counted.items():
        if sizes.setdefault(label, len(leaves)) != len(leaves):
            raise ValueError(f"label {label!r} stands for different leaves on different levels")
    return sizes


def lm_loss(frame: pd.DataFrame, hierarchies: dict[str, Hierarchy]) -> float:
    """Iyengar's LM of a released table: per record and quasi-identifier (leaves under its value − 1) / (leaves − 1),
    '*' where suppressed counts 1; the mean over both."""
    losses = []
    for attribute, hierarchy in hierarchies.items():
        sizes = leaves_per_label(hierarchy)
        domain = len({row[0] for row in hierarchy.rows})
        values = frame[attribute].astype(str)
        unknown = set(values.unique()) - set(sizes) - {"*"}
        if unknown:
            raise ValueError(f"{attribute}: released values {sorted(unknown)[:5]} are no labels of its hierarchy")
        leaves = values.map({**sizes, "*": domain})
        losses.append(((leaves - 1) / (domain - 1)).to_numpy())
    return float(sum(loss.sum() for loss in losses) / (len(frame) * len(losses)))


def accuracy(frame: pd.DataFrame, qis: list[str], label: str) -> float:
    from duckanon.utility.classification import classifier_accuracy
    scores = classifier_accuracy(frame.astype(str), [q for q in qis if q != label], label)
    return max(scores.values())


def hierarchies_of(case: dict) -> dict[str, Hierarchy]:
    return {q: Hierarchy.from_arx_csv(Path(str(case["hierarchies"]) % q), name=q) for q in case["qis"]}


def case_setup(name: str, data_dir: Path) -> tuple[duckanon.Anonymizer, str, Policy, Path]:
    """The case's records loaded into a fresh connection: its anonymizer, the table, the policy both tools enforce
    (k = 5, at most 5 %, ARX's replace-unchecked) and a new folder for the releases."""
    case = CASES[name]
    con = duckdb.connect()
    table, hierarchies = adult_table(con) if name == "adult" else ihis_table(con, data_dir)
    policy = Policy(quasi_identifiers={q: hierarchies[q] for q in case["qis"]}, models=[KAnonymity(K)],
                    suppression_limit=SUPPRESSION, suppression="replace-unchecked", others="insensitive")
    return duckanon.connect(con), table, policy, Path(tempfile.mkdtemp(prefix=f"{name}-"))


def duckanon_child(name: str, data_dir: Path, iterations: int, out: Path) -> None:
    """In a process of its own: one full-domain anonymize and one local recoding of the case's records."""
    anon, table, policy, folder = case_setup(name, data_dir)
    common.reset_peak_rss()
    started = time.perf_counter()
    search, full = anon.anonymize(table, policy, folder / "full.duckdb", metric=ArxLoss(GS))
    full_seconds = time.perf_counter() - started
    started = time.perf_counter()
    recoding, local = anon.anonymize_locally(table, policy, folder / "local.duckdb", metric=ArxLoss(GS),
                                             iterations=iterations)
    local_seconds = time.perf_counter() - started
    result = {"full_levels": search.levels, "full_suppressed": full.suppressed, "full_seconds": full_seconds,
              "full_search_seconds": search.seconds, "local_seconds": local_seconds,
              "steps": [{"levels": s.levels, "released": s.released, "records": s.records,
                         "seconds": s.search.seconds} for s in recoding.steps],
              "local_suppressed": local.suppressed, "peak_rss_mb": common.peak_rss_mb(),
              "full_release": str(folder / "full.duckdb"), "local_release": str(folder / "local.duckdb"),
              "verified": duckanon.verify(folder / "local.duckdb").holds}
    out.write_text(json.dumps(result))


def arx_run(name: str, csv: Path, settings: argparse.Namespace, output: Path) -> dict:
    case = CASES[name]
    classpath = common.arx_classpath(settings.arx, settings.data_dir, DRIVER)
    delimiter = "tab" if case["delimiter"] == "\t" else case["delimiter"]
    log = output.with_suffix(".log")
    with log.open("w") as stdout:
        measured = common.run_measured(["java", "-Xmx8g", "-cp", classpath, "ArxLocal", str(csv),
                                        delimiter, str(case["hierarchies"]), ",".join(case["qis"]), str(K),
                                        str(SUPPRESSION), str(GS), str(settings.iterations), str(output)],
                                       stdout=stdout)
    text = log.read_text()
    if measured.returncode != 0:
        raise RuntimeError(f"ARX failed: {text[-500:]}")
    glob = re.search(r"GLOBAL levels=\{(.*)\} suppressed=(\d+) ms=(\d+)", text)
    local = re.search(r"LOCAL steps=(\d+) suppressed=(\d+) ms=(\d+)", text)
    steps = [int(r) for r in re.findall(r"STEP levels=\[.*\] records=(\d+)", text)]
    return {"full_levels": glob.group(1), "full_suppressed": int(glob.group(2)), "full_seconds": int(glob.group(3)) / 1e3,
            "local_seconds": int(local.group(3)) / 1e3, "local_suppressed": int(local.group(2)),
            "released_per_step": steps, "peak_rss_mb": measured.peak_rss_mb, "process_wall": measured.wall}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--cases", nargs="+", default=list(CASES), choices=list(CASES))
    parser.add_argument("--iterations", type=int, default=100)
    parser.add_argument("--arx", type=Path, default=ROOT.parent / "shared" / "peers" / "arx")
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "local_recoding.md")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        duckanon_child(args.child, args.data_dir, args.iterations, args.child_output)
        return 0
    load = common.load_at_start()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    rows, results = [], []
    for name in args.cases:
        case = CASES[name]
        if name == "adult":
            csv = args.data_dir / "adult_complete.csv"
            if not csv.is_file():
                subprocess.run([sys.executable, str(args.arx / "prep_adult.py"), str(csv)], check=True,
                               stdout=subprocess.DEVNULL)
        else:
            csv = ihis_file(args.data_dir)
        hierarchies = hierarchies_of(case)
        common.progress(f"{name}: ARX")
        before = os.getloadavg()[0]
        arx_output = args.data_dir / f"arx-local-{name}.csv"
        arx = arx_run(name, csv, args, arx_output)
        common.progress(f"{name}: duckanon")
        out = args.data_dir / f"duckanon-local-{name}.json"
        measured = common.run_measured([sys.executable, str(Path(__file__).resolve()), "--child", name,
                                        "--child-output", str(out), "--data-dir", str(args.data_dir),
                                        "--iterations", str(args.iterations)])
        if measured.returncode != 0:
            raise RuntimeError(f"duckanon's child failed on {name}")
        ours = json.loads(out.read_text())
        load_pair = (before + os.getloadavg()[0]) / 2
        arx_frame = pd.read_csv(arx_output, sep=",", dtype=str, keep_default_na=False)
        with duckdb.connect(ours["local_release"], read_only=True) as con:
            local_frame = con.execute("SELECT * FROM release").df().astype(str)
        with duckdb.connect(ours["full_release"], read_only=True) as con:
            full_frame = con.execute("SELECT * FROM release").df().astype(str)
        label = case["label"]
        accuracies = {"full": accuracy(full_frame, case["qis"], label) if label else None,
                      "local": accuracy(local_frame, case["qis"], label) if label else None,
                      "arx": accuracy(arx_frame, case["qis"], label) if label else None}
        # (suppressed, LM, full-domain search s, local steps s, whole call s, released per later step, accuracy)
        local_steps = sum(s["seconds"] for s in ours["steps"][1:])
        figures = {
            "ARX full-domain": (arx["full_suppressed"], None, arx["full_seconds"], None, None, "", None),
            "ARX local recoding": (arx["local_suppressed"], lm_loss(arx_frame, hierarchies), arx["full_seconds"],
                                   arx["local_seconds"], None, ", ".join(f"{r:,}" for r in arx["released_per_step"]),
                                   accuracies["arx"]),
            "duckanon full-domain": (ours["full_suppressed"], lm_loss(full_frame, hierarchies),
                                     ours["full_search_seconds"], None, ours["full_seconds"], "", accuracies["full"]),
            "duckanon local recoding": (ours["local_suppressed"], lm_loss(local_frame, hierarchies),
                                        ours["steps"][0]["seconds"], local_steps, ours["local_seconds"],
                                        ", ".join(f"{s['released']:,}" for s in ours["steps"][1:]),
                                        accuracies["local"]),
        }
        for what, (suppressed, loss, search, local_time, call, released, acc) in figures.items():
            tool = what.split()[0]
            rows.append([name, what, f"{suppressed:,}", "" if loss is None else f"{loss:.4f}", f"{search:.2f}",
                         "" if local_time is None else f"{local_time:.2f}",
                         "" if local_time is None else f"{(search + local_time) / search:.2f}",
                         "" if call is None else f"{call:.2f}", released,
                         f"{(arx if tool == 'ARX' else ours)['peak_rss_mb']:.0f}",
                         "" if acc is None else f"{acc:.4f}", f"{load_pair:.1f}"])
        results.append({"case": name, "arx": arx, "duckanon": ours, "load": load_pair})
    table = common.markdown_table(
        ["data", "release", "suppressed", "LM", "full-domain search s", "local steps s", "(search + steps) ÷ search",
         "whole call s", "released per later step", "peak RSS MB", "accuracy", "load"], rows)
    note = ("- Both sides search the optimum under ARX's Loss (gs 0.5, geometric mean). ARX's search is its one "
            "`anonymize()` call, JIT warm-up included; its local steps are `optimizeIterative`. duckanon's whole call "
            "is `anonymize` or `anonymize_locally`: reading and encoding the source, the searches, publishing and "
            "verifying the release.\n"
            "- LM and accuracy are computed here from each tool's output file; ARX's full-domain output is not "
            "written (its LM is the same node's as duckanon's).")
    common.report("Local recoding beside ARX 3.9.2", "python benchmarks/bench_local_recoding.py", table, note,
                  results, load, args.output, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
