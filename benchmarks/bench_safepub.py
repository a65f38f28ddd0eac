"""SafePub ((ε,δ)-differential privacy) side by side with ARX 3.9.2's, over many runs of each.

    python benchmarks/bench_safepub.py                      # ε 0.5, 1, 2, 3; 30 runs each; ~15 min on 2 cores
    python benchmarks/bench_safepub.py --epsilons 1 --runs 5

Adult's 30,162 complete records, all nine attributes quasi-identifiers with ARX's hierarchies (as ARX's own SafePub
tests), δ = 1e-5, the search's budget a tenth of ε over 100 steps, the granularity score (ARX's Loss metric).  Both
tools draw from secure randomness, so each run is a new draw: per ε, ARX runs ``--runs`` times in one JVM
(``arx_safepub/ArxSafePub.java``), then duckanon as many times in this process, the blocks interleaved ε by ε.
duckanon runs with ``k_rule="arx"``, ARX's k (one more than the paper's; the table gives both), so that the two
enforce the same mechanism.

Per run, computed here from each tool's output file by the same code: the records released (ARX's output marks the
others '*' in every quasi-identifier; duckanon's drops them), the chosen transformation, the granularity (the mean
over the source's records and the nine attributes of the released value's domain share, leaves under the label over
the attribute's leaves; a record not released counts 1) and seed 000's accuracy (a logistic regression and a decision
tree, the better, 3-fold cross-validated on the released records, salary-class from the other eight; not defined
when salary-class is generalized to '*', which is counted).  The distributions are compared by two-sided permutation
tests (20,000 permutations of the pooled runs): of the means of records released, granularity and accuracy, and of
the total variation distance between the two tools' distributions of each attribute's level, summed over the
attributes.  A p-value above 0.05 means no difference the runs can tell apart.  Timings are not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
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
from bench_local_recoding import accuracy, leaves_per_label
from bench_search import ADULT_QIS, adult_table

import duckanon
from duckanon import EDDifferentialPrivacy, Policy
from duckanon.hierarchy.hierarchy import Hierarchy

DELTA, STEPS, SEARCH_SHARE = 1e-5, 100, 0.1
LABEL = "salary-class"
DRIVER = HERE / "arx_safepub" / "ArxSafePub.java"
PERMUTATIONS = 20_000


def granularity(frame: pd.DataFrame, records: int, hierarchies: dict[str, Hierarchy]) -> float:
    """The mean domain share of the released values over ``records`` source records and the attributes; a record
    not released counts 1 on each."""
    total = 0.0
    for attribute, hierarchy in hierarchies.items():
        domain = len({row[0] for row in hierarchy.rows})
        shares = frame[attribute].astype(str).map({**leaves_per_label(hierarchy), "*": domain}) / domain
        if shares.isna().any():
            raise ValueError(f"{attribute}: released values that are no labels of its hierarchy")
        total += float(shares.sum()) + (records - len(frame))
    return total / (records * len(hierarchies))


def measured(frame: pd.DataFrame, records: int, hierarchies: dict[str, Hierarchy]) -> dict:
    labelled = frame[LABEL].astype(str).nunique() > 1
    return {"released": len(frame), "granularity": granularity(frame, records, hierarchies),
            "accuracy": accuracy(frame, ADULT_QIS, LABEL) if labelled else None}


def arx_block(settings: argparse.Namespace, csv: Path, epsilon: float, hierarchies: dict[str, Hierarchy]
              ) -> tuple[list[dict], dict]:
    classpath = common.arx_classpath(settings.arx, settings.data_dir, DRIVER)
    out = settings.data_dir / f"arx-safepub-{epsilon:g}"
    out.mkdir(parents=True, exist_ok=True)
    pattern = str(settings.hierarchies / "adult_hierarchy_%s.csv")
    log = out / "arx.log"
    with log.open("w") as stdout:
        run = common.run_measured(["java", "-Xmx4g", "-cp", classpath, "ArxSafePub", "run", str(csv),
                                   ",", pattern, ",".join(ADULT_QIS), str(epsilon), str(DELTA),
                                   str(SEARCH_SHARE * epsilon), str(STEPS), "loss", str(settings.runs), str(out)],
                                  stdout=stdout)
    text = log.read_text()
    if run.returncode != 0:
        raise RuntimeError(f"ARX failed: {text[-800:]}")
    records = int(re.search(r"LOAD rows=(\d+)", text).group(1))
    runs = []
    for index, levels, kept, k, ms in re.findall(r"RUN (\d+) levels=([\d,]+) kept=(\d+) k=(\d+) beta=\S+ ms=(\d+)",
                                                 text):
        frame = pd.read_csv(out / f"run_{index}.csv", dtype=str, keep_default_na=False)[ADULT_QIS]
        released = frame[~(frame == "*").all(axis=1)]
        if len(released) != int(kept):
            raise RuntimeError(f"ARX run {index}: {len(released)} rows not all '*' but {kept} not outliers")
        runs.append({"levels": [int(v) for v in levels.split(",")], "k": int(k), "seconds": int(ms) / 1e3,
                     **measured(released, records, hierarchies)})
    return runs, {"peak_rss_mb": run.peak_rss_mb, "process_wall": run.wall}


def duckanon_block(anon: duckanon.Anonymizer, table: str, hierarchies: dict[str, Hierarchy], epsilon: float,
                   runs: int, data_dir: Path, records: int) -> list[dict]:
    policy = Policy({q: hierarchies[q] for q in ADULT_QIS},
                    [EDDifferentialPrivacy(epsilon, DELTA, STEPS, SEARCH_SHARE * epsilon, k_rule="arx")],
                    others="drop")
    results = []
    for index in range(runs):
        path = data_dir / f"duckanon-safepub-{epsilon:g}-{index}.duckdb"
        started = time.perf_counter()
        result, release = anon.anonymize(table, policy, path)
        seconds = time.perf_counter() - started
        con = duckdb.connect(str(path), read_only=True)
        frame = con.sql('SELECT * FROM "release"').df()
        con.close()
        results.append({"levels": [result.levels[q] for q in ADULT_QIS], "k": policy.models[0].minimum_size,
                        "seconds": seconds, **measured(frame[ADULT_QIS], records, hierarchies)})
        path.unlink()
    return results


def permutation_p(a: list[float], b: list[float], statistic, rng: np.random.Generator) -> float:
    """Two-sided permutation p-value of ``statistic(a, b)`` (larger is more different) over the pooled runs."""
    pooled = list(a) + list(b)
    observed = statistic(a, b)
    hits = 0
    for _ in range(PERMUTATIONS):
        order = rng.permutation(len(pooled))
        first = [pooled[i] for i in order[:len(a)]]
        second = [pooled[i] for i in order[len(a):]]
        hits += statistic(first, second) >= observed - 1e-12
    return (hits + 1) / (PERMUTATIONS + 1)


def mean_difference(a, b) -> float:
    return abs(float(np.mean(a)) - float(np.mean(b)))


def level_distance(a, b) -> float:
    """Σ over attributes of the total variation distance between the two sets' distributions of its level."""
    a, b = np.array(a), np.array(b)
    total = 0.0
    for column in range(a.shape[1]):
        top = int(max(a[:, column].max(), b[:, column].max())) + 1
        pa = np.bincount(a[:, column], minlength=top) / len(a)
        pb = np.bincount(b[:, column], minlength=top) / len(b)
        total += 0.5 * float(np.abs(pa - pb).sum())
    return total


def summary(values: list[float | None], digits: int = 4) -> str:
    """Mean ± standard deviation of the values given (None: not defined in that run)."""
    present = [v for v in values if v is not None]
    if not present:
        return "–"
    spread = np.std(present, ddof=1) if len(present) > 1 else 0.0
    return f"{np.mean(present):,.{digits}f} ± {spread:,.{digits}f}"


def modal(levels: list[list[int]]) -> str:
    counted: dict[tuple, int] = {}
    for node in levels:
        counted[tuple(node)] = counted.get(tuple(node), 0) + 1
    node, times = max(counted.items(), key=lambda item: item[1])
    return f"{','.join(map(str, node))} ({times}×), {len(counted)} distinct"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--epsilons", type=float, nargs="+", default=[0.5, 1.0, 2.0, 3.0])
    parser.add_argument("--runs", type=int, default=30)
    parser.add_argument("--arx", type=Path, default=ROOT.parent / "shared" / "peers" / "arx")
    parser.add_argument("--hierarchies", type=Path, default=ROOT.parent / "shared" / "data" / "adult" / "hierarchies")
    parser.add_argument("--data-dir", type=Path, default=HERE / ".data")
    parser.add_argument("--output", type=Path, default=HERE / "results" / "safepub.md")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    load = common.load_at_start()
    args.data_dir.mkdir(parents=True, exist_ok=True)
    csv = args.data_dir / "adult_complete.csv"
    if not csv.is_file():
        subprocess.run([sys.executable, str(args.arx / "prep_adult.py"), str(csv)], check=True,
                       stdout=subprocess.DEVNULL)
    con = duckdb.connect()
    table, hierarchies = adult_table(con)
    anon = duckanon.connect(con)
    records = int(con.execute(f'SELECT count(*) FROM "{table}"').fetchall()[0][0])
    rng = np.random.default_rng(0)  # the permutations' order only
    rows, results = [], []
    for epsilon in args.epsilons:
        common.progress(f"ε = {epsilon:g}: ARX, {args.runs} runs")
        before = os.getloadavg()[0]
        arx, process = arx_block(args, csv, epsilon, hierarchies)
        common.progress(f"ε = {epsilon:g}: duckanon, {args.runs} runs")
        ours = duckanon_block(anon, table, hierarchies, epsilon, args.runs, args.data_dir, records)
        pair_load = (before + os.getloadavg()[0]) / 2
        p = {name: permutation_p([r[name] for r in arx if r[name] is not None],
                                 [r[name] for r in ours if r[name] is not None], mean_difference, rng)
             for name in ("released", "granularity", "accuracy")}
        p["levels"] = permutation_p([r["levels"] for r in arx], [r["levels"] for r in ours], level_distance, rng)
        p["label"] = permutation_p([r["accuracy"] is None for r in arx], [r["accuracy"] is None for r in ours],
                                   mean_difference, rng)
        paper_k = EDDifferentialPrivacy(epsilon, DELTA, STEPS, SEARCH_SHARE * epsilon).minimum_size
        for tool, runs in (("ARX 3.9.2", arx), ("duckanon", ours)):
            rows.append([f"{epsilon:g}", tool, f"{runs[0]['k']} (paper {paper_k})", summary([r["released"] for r in runs], 0),
                         modal([r["levels"] for r in runs]), summary([r["granularity"] for r in runs]),
                         summary([r["accuracy"] for r in runs]),
                         sum(r["accuracy"] is None for r in runs), f"{np.median([r['seconds'] for r in runs]):.2f}",
                         f"{pair_load:.1f}"])
        rows.append([f"{epsilon:g}", "p (permutation)", "", f"{p['released']:.2f}", f"{p['levels']:.2f}",
                     f"{p['granularity']:.2f}", f"{p['accuracy']:.2f}", f"{p['label']:.2f}", "", ""])
        results.append({"epsilon": epsilon, "arx": arx, "duckanon": ours, "p": p, "arx_process": process})
    table_text = common.markdown_table(
        ["ε", "tool", "k", "records released", "transformation: commonest (times), distinct", "granularity",
         "accuracy", "runs without salary-class", "s per run (median)", "load"], rows)
    note = (f"- Adult, {records:,} records, nine quasi-identifiers; δ = {DELTA:g}; the search spends ε/10 over "
            f"{STEPS} steps; granularity score. {args.runs} runs per tool and ε, mean ± standard deviation.\n"
            "- Levels in the order sex, age, race, marital-status, education, native-country, workclass, occupation, "
            "salary-class.\n"
            "- ARX's seconds are its warm anonymize() calls in one JVM (loading once); duckanon's are whole calls "
            "(read, sample, search, publish to a DuckDB file, verify).")
    common.report("SafePub beside ARX 3.9.2", " ".join(sys.argv), table_text, note, results, load, args.output,
                  args.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
