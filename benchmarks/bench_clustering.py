"""How long the clustering algorithms take, and how much memory, on Adult (30,162 records) and on 100,000 records.

    python benchmarks/bench_clustering.py [--rows 30162 100000] [--methods semi top-down mdav lattice-ak lattice-al]
    python benchmarks/bench_clustering.py --data census --rows 10000000 --methods top-down

Every (row count, method) runs in its own process, so each peak-memory figure is that method's alone.  30,162 rows
are Adult's complete records (``load_adult``); other counts are Adult resampled with noise (``resample_adult``).  A
Disease and a Ppl column are added as seed 003's experiment draws them (``experiments/seed003_personalized.py``).
All at k = 25:

- ``semi``: seed 001's SemiSupervisedClustering; eight quasi-identifiers (age, workclass, education, marital-status,
  race, sex, native-country, salary-class), occupation sensitive, α 0.3 for its three most frequent values, 0.4 for all;
- ``top-down``: seed 003's TopDownPartitioning with personalization; Table 8's seven quasi-identifiers, Disease
  sensitive, (α, l) = (0.8, 4);
- ``mdav``: MDAV on the six numeric attributes (age, fnlwgt, education-num, capital-gain, capital-loss,
  hours-per-week), k-anonymity;
- ``lattice-ak`` / ``lattice-al``: the peer figure, generalization: the optimal full-domain search (least NCP, no
  suppression) under the ``semi`` and ``top-down`` policies, over ARX's hierarchies.

With ``--data census`` the records are ``duckanon.datasets.census`` (seed 0, the data of ``bench_scale.py``, written
once under ``--data-dir``), whose distinct combinations grow with the rows where resampled Adult repeats its 30,162
records: ``top-down`` then partitions by its nine columns and their hierarchies at k = 25, k-anonymity alone (the
census has no sensitive column).

Figures: ``cluster s`` is ``anon.cluster`` (reading the records and grouping them), ``publish s`` is
``clusters.publish`` (recoding in SQL, checking, writing and verifying the release file); for the lattice rows the
search and the publish of its result.  Peak RSS is the process's high-water mark, reset after the data is loaded.
The issue's target: under 30 s and 2 GB for each method on Adult.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import bench_scale  # noqa: E402
import common  # noqa: E402
import duckdb  # noqa: E402

import duckanon  # noqa: E402
from duckanon import (MDAV, AlphaKAnonymity, AlphaLDiversityKAnonymity, Hierarchy, KAnonymity,  # noqa: E402
                      Personalization, Policy, SemiSupervisedClustering, TopDownPartitioning)
from duckanon import datasets  # noqa: E402
from duckanon.datasets import census  # noqa: E402
from experiments.seed003_personalized import DISEASE_TREE, LEVELS, QUASI_IDENTIFIERS as SEED003_QI  # noqa: E402
from experiments.seed003_personalized import add_disease  # noqa: E402

K = 25
SEED001_QI = ("age", "workclass", "education", "marital-status", "race", "sex", "native-country", "salary-class")
HIGHLY_SENSITIVE = ["Prof-specialty", "Craft-repair", "Exec-managerial"]
NUMERIC = ("age", "fnlwgt", "education-num", "capital-gain", "capital-loss", "hours-per-week")
METHODS = ("semi", "top-down", "mdav", "lattice-ak", "lattice-al")
TITLES = {"semi": "semi-supervised (α,k) clustering (seed 001)",
          "top-down": "top-down partitioning, personalized (α,l) (seed 003)",
          "mdav": "MDAV microaggregation",
          "lattice-ak": "peer: lattice search, (α,k) policy of seed 001",
          "lattice-al": "peer: lattice search, (α,l) policy of seed 003"}
CENSUS_TITLE = "top-down partitioning, k-anonymity (seed 003), census"
TARGET_ROWS, TARGET_SECONDS, TARGET_MB = 30162, 30.0, 2048
RESULTS = HERE / "results" / "clustering.md"


def hierarchies(quasi) -> dict[str, Hierarchy]:
    folder = datasets.adult_hierarchy_dir()
    return {q: Hierarchy.from_arx_csv(folder / f"{q}.csv", name=q) for q in quasi}


def policy(method: str) -> Policy:
    if method in ("semi", "lattice-ak"):
        return Policy(quasi_identifiers=hierarchies(SEED001_QI), others="drop", models=[
            AlphaKAnonymity("occupation", 0.3, K, highly_sensitive=HIGHLY_SENSITIVE),
            AlphaKAnonymity("occupation", 0.4 if method == "semi" else 0.3, K)])
    if method in ("top-down", "lattice-al"):
        return Policy(quasi_identifiers=hierarchies(SEED003_QI), sensitive=["disease"], identifiers=["ppl"],
                      others="drop", models=[AlphaLDiversityKAnonymity("disease", 0.8, 4, K, LEVELS)])
    return Policy(quasi_identifiers={q: None for q in NUMERIC}, models=[KAnonymity(K)], others="drop")


# ------------------------------------------------------------------- child
def child(rows: int, method: str, data: str, data_dir: Path) -> dict:
    workdir = tempfile.mkdtemp(prefix="duckanon-bench-clustering-")
    try:
        con = duckdb.connect()
        common.progress(f"{rows:,} rows, {method}: loading")
        if data == "census":
            bench_scale.prepare(data_dir, rows, arx=False)
            con.read_parquet(bench_scale.census_glob(data_dir, rows)).create("records")
            chosen = Policy(quasi_identifiers=census.census_hierarchies(), models=[KAnonymity(K)], others="drop")
        else:
            if rows == datasets.ADULT_COMPLETE_RECORDS:
                datasets.load_adult(con, "source")
            else:
                datasets.resample_adult(con, rows, "source", seed=0)
            add_disease(con, "source", "records", seed=0)
            chosen = policy(method)
        anon = duckanon.connect(con, progress=common.progress)
        common.reset_peak_rss()
        path = os.path.join(workdir, "release.duckdb")
        result = {"rows": rows, "method": method, "data": data, "facts": common.machine_facts(con)}
        if method.startswith("lattice"):
            wall, cpu, found = common.timed(lambda: anon.search("records", chosen, metric="ncp"))
            result.update(cluster_s=wall, cluster_cpu_s=cpu, ncp=found.best.values["ncp"] if found.found else None,
                          groups=None, detail=found.summary())
            if found.found:
                wall, cpu, release = common.timed(lambda: anon.publish("records", chosen, found.levels, path))
                result.update(publish_s=wall, publish_cpu_s=cpu, groups=release.check.classes)
        else:
            personalization = Personalization("ppl", DISEASE_TREE) if data == "adult" else None
            algorithm = {"semi": SemiSupervisedClustering(), "mdav": MDAV(),
                         "top-down": TopDownPartitioning(0, personalization)}[method]
            wall, cpu, clusters = common.timed(lambda: anon.cluster("records", chosen, algorithm))
            result.update(cluster_s=wall, cluster_cpu_s=cpu, ncp=clusters.information_loss, groups=clusters.count,
                          detail=clusters.summary(), largest=int(clusters.sizes.max()))
            wall, cpu, release = common.timed(lambda: clusters.publish(path))
            result.update(publish_s=wall, publish_cpu_s=cpu, released=release.records_out,
                          suppressed=release.suppressed)
        result["peak_rss_mb"] = common.peak_rss_mb()
        result["load_average_end"] = common.machine_facts()["load_average"]
        con.close()
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------ parent
HEADERS = ["rows", "method", "groups", "NCP per record", "cluster s", "cluster CPU s", "publish s", "total s",
           "peak RSS MB", "target (Adult: < 30 s, < 2 GB)"]


def verdict(result: dict) -> str:
    if result["rows"] != TARGET_ROWS or result["method"].startswith("lattice"):
        return "–"
    total = result["cluster_s"] + result.get("publish_s", 0.0)
    met = total < TARGET_SECONDS and result["peak_rss_mb"] < TARGET_MB
    return "met" if met else "MISSED"


def table_rows(results: list[dict]) -> list[list]:
    rows = []
    for r in results:
        total = r["cluster_s"] + r.get("publish_s", 0.0)
        ncp = f"{r['ncp'] / r['rows']:.4g}" if r["ncp"] is not None else "–"  # near 0 where records repeat
        title = CENSUS_TITLE if r.get("data") == "census" else TITLES[r["method"]]
        rows.append([f"{r['rows']:,}", title, r["groups"] if r["groups"] is not None else "–", ncp,
                     r["cluster_s"], r["cluster_cpu_s"], r.get("publish_s", float("nan")), total,
                     f"{r['peak_rss_mb']:.0f}", verdict(r)])
    return rows


def notes(results: list[dict]) -> str:
    lines = [
        "- k = 25 everywhere. `groups`: clusters (or, for the lattice, classes of the release). `NCP per record`: "
        "the quasi-identifiers' NCP (seed 001 §2.2, seed 003 formulas 1-3) over records; MDAV's numbers count as "
        "their group's range. `cluster s`: `anon.cluster` (read + group) or `anon.search`; `publish s`: writing and "
        "verifying the release file. Wall seconds; CPU seconds count every thread.",
        "- Peak RSS: the process's high-water mark from after loading the data to the end (the source table is in "
        "memory, so it is included).",
    ]
    for r in results:
        lines.append(f"- {r['rows']:,} rows, {r['method']}: {r['detail']}; load average at end "
                     f"{r['load_average_end']}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[TARGET_ROWS, 100_000])
    parser.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    parser.add_argument("--data", choices=["adult", "census"], default="adult",
                        help="resampled Adult with seed 003's Disease and Ppl, or the census of bench_scale.py")
    parser.add_argument("--data-dir", type=Path, default=bench_scale.DATA_DIR, help="where the census is written")
    parser.add_argument("--output", type=Path, default=RESULTS, help="markdown results file")
    parser.add_argument("--json", type=Path, default=None, help="also write every raw measurement as JSON")
    parser.add_argument("--child-output", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.data == "census" and set(args.methods) != {"top-down"}:
        parser.error("--data census runs top-down alone: the other methods' policies name Adult's columns")

    if args.child_output is not None:  # one row count, one method, in this process
        (rows,), (method,) = args.rows, args.methods
        args.child_output.write_text(json.dumps(child(rows, method, args.data, args.data_dir)))
        return 0

    load = common.load_at_start()
    data = ["--data", args.data, "--data-dir", str(args.data_dir)]
    results = [common.run_child(__file__, ["--rows", str(rows), "--methods", method, *data])
               for rows in args.rows for method in args.methods]
    table = common.markdown_table(HEADERS, table_rows(results))
    note_text = notes(results)
    command = (f"python benchmarks/bench_clustering.py {'--data census ' if args.data == 'census' else ''}"
               f"--rows {' '.join(map(str, args.rows))} --methods {' '.join(args.methods)}")
    common.report("Clustering benchmark", command, table, note_text, results, load, args.output, args.json)
    return 0 if all(verdict(r) != "MISSED" for r in results) else 1


if __name__ == "__main__":
    raise SystemExit(main())
