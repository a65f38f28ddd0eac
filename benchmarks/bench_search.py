"""How long optimal search takes, and how many lattice nodes it checks, on Adult and on 1.2 million IHIS-shaped records.

    python benchmarks/bench_search.py [--cases adult ihis] [--repeat 3] [--data-dir DIR] [--timeout 1800]
    python benchmarks/bench_search.py --exact        # optimal against exhaustive search on Adult, 4 and 5 QIs

Cases (k-anonymity, k = 5, every case in a process of its own so that peak memory stays apart):

- ``adult``: the 30,162 complete Adult records, all nine ARX hierarchies as quasi-identifiers (sex, age, race,
  marital-status, education, native-country, workclass, occupation, salary-class; 12,960 nodes), DM, suppression
  limit 0% and 5%.  ARX's optimal search (Flash) takes about 0.07 s and 1 s here on 2 cores.
- ``ihis``: 1,193,504 records drawn by ``benchmarks/ihis/generate.py`` over ARX's IHIS hierarchies (nine
  quasi-identifiers, 25,920 nodes), Loss (as ARX's figure) and DM, 0% and 5%.  ARX 3.9.2 Flash with Loss on this
  file: 16 s at 0%, 199 s at 5%, 4.6 GB peak memory.  The file is generated into ``--data-dir`` (a temporary folder
  by default; never committed) and loaded into an in-memory DuckDB table before the clock starts.

Figures: ``time s`` is ``anon.search(table, policy, metric=...)`` end to end (reading the table, encoding it into the
frequency table, searching); ``search s`` is the search alone (``SearchResult.seconds``, the part ARX's Flash figure
compares with); ``nodes checked`` is how many lattice nodes were evaluated; peak RSS is the process's high-water mark
during the call (the loaded table included).  Adult cases are medians of ``--repeat`` runs; IHIS cases run once.
"""

from __future__ import annotations

import argparse
import json
import math
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import duckdb  # noqa: E402

import duckanon  # noqa: E402
from duckanon import Hierarchy, KAnonymity, Policy, datasets  # noqa: E402

RESULTS = HERE / "results" / "search.md"
K = 5
ADULT_QIS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation",
             "salary-class"]
IHIS_QIS = ["YEAR", "QUARTER", "REGION", "PERNUM", "AGE", "MARSTAT", "SEX", "RACEA", "EDUC"]
IHIS_ROWS = 1_193_504
IHIS_DIR = HERE / "ihis"
#: (data, metric, suppression limit) → ARX's figure for the same setting.
ARX = {
    ("adult", "dm", 0.0): "~0.07 s (Flash, 2 cores)",
    ("adult", "dm", 0.05): "~1 s (Flash, 2 cores)",
    ("ihis", "loss", 0.0): "16 s, 4.6 GB (ARX 3.9.2 Flash)",
    ("ihis", "loss", 0.05): "199 s, 4.6 GB (ARX 3.9.2 Flash)",
}
CASES = {
    "adult": [("dm", 0.0), ("dm", 0.05)],
    "ihis": [("loss", 0.0), ("dm", 0.0), ("loss", 0.05), ("dm", 0.05)],
}


# ------------------------------------------------------------------- data
def adult_table(con) -> tuple[str, dict[str, Hierarchy]]:
    datasets.load_adult(con, "adult")
    folder = datasets.adult_hierarchy_dir()
    return "adult", {q: Hierarchy.from_arx_csv(folder / f"{q}.csv", name=q) for q in ADULT_QIS}


def ihis_file(data_dir: Path, rows: int = IHIS_ROWS) -> Path:
    """The generated IHIS-shaped CSV of ``rows`` records in ``data_dir`` (another size in a folder of its own),
    generated there first when missing."""
    folder = data_dir if rows == IHIS_ROWS else data_dir / f"ihis-{rows}"
    path = folder / "ihis_synth.csv"
    if not path.is_file():
        common.progress(f"generating {rows:,} IHIS-shaped records into {folder}")
        subprocess.run([sys.executable, str(IHIS_DIR / "generate.py"), str(IHIS_DIR / "hierarchies"), str(folder),
                        str(rows)], check=True, stdout=subprocess.DEVNULL)
    return path


def ihis_table(con, data_dir: Path) -> tuple[str, dict[str, Hierarchy]]:
    path = ihis_file(data_dir)
    con.execute("CREATE TABLE ihis AS SELECT * FROM read_csv(?, delim=';', header=true, all_varchar=true)",
                [str(path)])
    hierarchies = {q: Hierarchy.from_arx_csv(IHIS_DIR / "hierarchies" / f"ihis_hierarchy_{q}.csv", name=q)
                   for q in IHIS_QIS}
    return "ihis", hierarchies


# ------------------------------------------------------------------- child
def child(data: str, metric: str, suppression: float, repeat: int, data_dir: Path) -> dict:
    con = duckdb.connect()
    load, load_cpu, (table, hierarchies) = common.timed(
        lambda: adult_table(con) if data == "adult" else ihis_table(con, data_dir))
    rows = con.execute(f'SELECT COUNT(*) FROM "{table}"').fetchall()[0][0]
    common.progress(f"{data}: {rows:,} rows loaded in {load:.1f} s; {metric}, {suppression:.0%} suppression")
    anon = duckanon.connect(con)
    policy = Policy(quasi_identifiers=hierarchies, models=[KAnonymity(K)], suppression_limit=suppression,
                    others="insensitive")
    runs = []
    for run in range(repeat):
        common.reset_peak_rss()
        wall, cpu, result = common.timed(lambda: anon.search(table, policy, metric=metric))
        runs.append({"wall": wall, "cpu": cpu, "search": result.seconds, "checks": result.checks,
                     "peak_rss_mb": common.peak_rss_mb(), "levels": result.levels,
                     "value": result.best.values[metric] if result.found else None,
                     "suppressed": result.best.suppressed if result.found else None})
        common.progress(f"  run {run + 1}/{repeat}: {wall:.2f} s (search {result.seconds:.2f} s), "
                        f"{result.checks} nodes checked; {result.summary()}")
    nodes = 1
    for h in hierarchies.values():
        nodes *= h.levels
    return {"data": data, "rows": rows, "qis": len(hierarchies), "nodes": nodes, "metric": metric,
            "suppression": suppression, "load_s": load, "runs": runs, "facts": common.machine_facts(con),
            "load_average_end": common.machine_facts()["load_average"]}


# ------------------------------------------------------------------ exactness
def exact(qi_counts=(4, 5), suppressions=(0.0, 0.05), metrics=("dm", "loss")) -> list[list]:
    """Optimal against exhaustive search on Adult with the first quasi-identifiers: same node, same value
    (to 1e-12: floating-point sums depend on how nodes were batched)."""
    con = duckdb.connect()
    table, hierarchies = adult_table(con)
    anon = duckanon.connect(con)
    rows = []
    for count in qi_counts:
        chosen = {q: hierarchies[q] for q in ADULT_QIS[:count]}
        for suppression in suppressions:
            policy = Policy(quasi_identifiers=chosen, models=[KAnonymity(K)], suppression_limit=suppression,
                            others="insensitive")
            for metric in metrics:
                optimal = anon.search(table, policy, metric=metric)
                exhaustive = anon.search(table, policy, metric=metric, strategy="exhaustive")
                # Same node; values agree up to the order DuckDB sums floating-point costs in (batches differ).
                same = optimal.levels == exhaustive.levels and math.isclose(
                    optimal.best.values[metric], exhaustive.best.values[metric], rel_tol=1e-12)
                rows.append([count, f"{suppression:.0%}", metric, optimal.lattice_size, optimal.checks,
                             exhaustive.checks, "yes" if same else "NO", optimal.summary()])
                common.progress(f"{count} QIs, {suppression:.0%}, {metric}: {'same' if same else 'DIFFERENT'}")
    return rows


# ------------------------------------------------------------------ parent
HEADERS = ["data", "rows", "QIs", "nodes", "k", "suppression", "metric", "time s", "search s", "nodes checked",
           "peak RSS MB", "ARX figure"]


def table_rows(results: list[dict]) -> list[list]:
    out = []
    for r in results:
        runs = r["runs"]
        if not runs:
            out.append([r["data"], f"{r['rows']:,}", r["qis"], f"{r['nodes']:,}", K, f"{r['suppression']:.0%}",
                        r["metric"], f"> {r['timeout']:.0f} (stopped)", "–", "–", "–",
                        ARX.get((r["data"], r["metric"], r["suppression"]), "–")])
            continue
        out.append([r["data"], f"{r['rows']:,}", r["qis"], f"{r['nodes']:,}", K, f"{r['suppression']:.0%}",
                    r["metric"], statistics.median(x["wall"] for x in runs),
                    statistics.median(x["search"] for x in runs), runs[-1]["checks"],
                    f"{max(x['peak_rss_mb'] for x in runs):.0f}",
                    ARX.get((r["data"], r["metric"], r["suppression"]), "–")])
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=sorted(CASES))
    parser.add_argument("--metrics", nargs="+", default=None, help="only these metrics (default: each case's)")
    parser.add_argument("--suppression", nargs="+", type=float, default=None, help="only these limits")
    parser.add_argument("--repeat", type=int, default=3, help="runs of each Adult case (median); IHIS runs once")
    parser.add_argument("--data-dir", type=Path, default=None,
                        help="where the IHIS-shaped file is generated (default: a temporary folder)")
    parser.add_argument("--timeout", type=float, default=1800, help="seconds before a case is stopped")
    parser.add_argument("--output", type=Path, default=RESULTS, help="markdown results file")
    parser.add_argument("--json", type=Path, default=None, help="also write every raw measurement as JSON")
    parser.add_argument("--exact", action="store_true", help="only compare optimal with exhaustive on Adult")
    parser.add_argument("--child", nargs=3, default=None, help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    if args.exact:
        rows = exact()
        print(common.markdown_table(["QIs", "suppression", "metric", "nodes", "optimal checks", "exhaustive checks",
                                     "same optimum", "optimal"], rows))
        return 0 if all(r[6] == "yes" for r in rows) else 1

    if args.child_output is not None:
        data, metric, suppression = args.child
        repeat = args.repeat if data == "adult" else 1
        args.child_output.write_text(json.dumps(child(data, metric, float(suppression), repeat, args.data_dir)))
        return 0

    load = common.load_at_start()
    data_dir = args.data_dir
    cleanup = None
    if "ihis" in args.cases:
        if data_dir is None:
            cleanup = data_dir = Path(tempfile.mkdtemp(prefix="duckanon-ihis-"))
        data_dir.mkdir(parents=True, exist_ok=True)
        generate, _, _ = common.timed(lambda: ihis_file(data_dir))
        common.progress(f"IHIS-shaped file ready ({generate:.1f} s)")
    results = []
    try:
        for data in args.cases:
            for metric, suppression in CASES[data]:
                if (args.metrics and metric not in args.metrics) or (
                        args.suppression is not None and suppression not in args.suppression):
                    continue
                child_args = ["--child", data, metric, str(suppression), "--repeat", str(args.repeat)]
                if data_dir is not None:
                    child_args += ["--data-dir", str(data_dir)]
                try:
                    results.append(common.run_child(__file__, child_args, timeout=args.timeout))
                except TimeoutError:
                    common.progress(f"{data} {metric} {suppression:.0%}: stopped after {args.timeout:.0f} s")
                    nodes = 12_960 if data == "adult" else 25_920
                    rows = 30_162 if data == "adult" else IHIS_ROWS
                    results.append({"data": data, "rows": rows, "qis": 9, "nodes": nodes, "metric": metric,
                                    "suppression": suppression, "runs": [], "timeout": args.timeout})
    finally:
        if cleanup is not None:
            shutil.rmtree(cleanup, ignore_errors=True)

    table = common.markdown_table(HEADERS, table_rows(results))
    done = [r for r in results if r["runs"]]
    notes = [
        f"- k-anonymity, k = {K}, all quasi-identifiers of each data set; `time s` = `anon.search` end to end on a "
        "loaded table (read, encode, search), `search s` = the search alone (what ARX's Flash figure compares with); "
        f"Adult: median of {args.repeat} runs, IHIS: one run.",
        "- peak RSS = the process's high-water mark during the call, reset before it; it includes the loaded table "
        "(in memory).",
    ]
    for r in done:
        best = r["runs"][-1]
        notes.append(f"- {r['data']} {r['metric']} {r['suppression']:.0%}: load {r['load_s']:.1f} s (not in the "
                     f"figures); optimum {best['levels']} = {best['value']:.6g}, {best['suppressed']} suppressed; "
                     f"CPU {statistics.median(x['cpu'] for x in r['runs']):.2f} s.")
    note_text = "\n".join(notes)
    command = "python benchmarks/bench_search.py " + " ".join(argv if argv is not None else sys.argv[1:])
    common.report("Search benchmark", command, table, note_text, results, load, args.output, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
