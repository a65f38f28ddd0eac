"""How long the k-anonymity and l-diversity checks take on 1M and 10M records of Adult resampled.

    python benchmarks/bench_checks.py [--rows 1000000 10000000] [--repeat 5] [--slow-repeat 3] [--db file|memory ...]

For each row count (each in its own process, so memory figures stay apart) the script builds ``n`` records with
``duckanon.datasets.resample_adult`` (timed, but not part of the figures) and checks two policies, each at three vectors
of levels (bottom = every level 0, the most classes and the worst case for a check; middle = each hierarchy's
``(height) // 2``; top = every level at ``*``):

- the eight Adult quasi-identifiers with ARX hierarchies, ``salary-class`` sensitive, l = 2;
- the same without ``occupation``, which becomes the sensitive attribute (14 values), l = 3.

Figures, medians over the runs:

- encode: ``anon.encode(table, policy)``, the pass over the table into the frequency table (``--slow-repeat`` runs);
  combos is that table's row count (distinct quasi-identifier and sensitive combinations);
- k-anon / l-div / entropy-l: ``duckanon.privacy.checks.check`` of one model (KAnonymity(5), DistinctLDiversity(s, l),
  EntropyLDiversity(s, l)) over the encoded table, as ``EncodedSource.check`` runs it (``--repeat`` runs);
  all three: ``encoded.check(levels)`` with the policy of all three models (one UNION ALL + GROUP BY);
- end-to-end: ``anon.check(table, policy, levels)`` with that three-model policy: what a user calling check once pays
  (bind + encode + check; ``--slow-repeat`` runs, after one untimed warm-up call that stores the hierarchies);
- peak RSS: the process's resident-set high-water mark, reset before that row's checks and end-to-end runs, so it
  includes the source table when the database is in memory.

Wall seconds are the figures; CPU seconds (all threads) are kept beside them, because on a shared machine wall time
moves with other load while CPU time mostly does not.  DuckDB runs with its default thread count.
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

import common  # noqa: E402
import duckdb  # noqa: E402

import duckanon  # noqa: E402
from duckanon.engine import as_engine  # noqa: E402
from duckanon import DistinctLDiversity, EntropyLDiversity, Hierarchy, KAnonymity, Policy  # noqa: E402
from duckanon import datasets  # noqa: E402
from duckanon.sqlgen import build as sqlbuild  # noqa: E402
from duckanon.privacy.checks import check  # noqa: E402

TABLE = "adult_resampled"
QUASI_IDENTIFIERS = ["sex", "age", "race", "marital-status", "education", "native-country", "workclass", "occupation"]
#: (sensitive attribute, l, quasi-identifiers)
SETUPS = [
    ("salary-class", 2, QUASI_IDENTIFIERS),
    ("occupation", 3, [q for q in QUASI_IDENTIFIERS if q != "occupation"]),
]
K = 5
#: The issue's targets: seconds for the checks at a row count.
TARGETS = {1_000_000: 0.5, 10_000_000: 3.0}
MODEL_KEYS = ("k", "l", "entropy")
RESULTS = HERE / "results" / "checks.md"


# ------------------------------------------------------------------- child
def level_vectors(hierarchies: dict[str, Hierarchy], quasi: list[str]) -> dict[str, dict[str, int]]:
    return {
        "bottom": {q: 0 for q in quasi},
        "middle": {q: (hierarchies[q].levels - 1) // 2 for q in quasi},
        "top": {q: hierarchies[q].levels - 1 for q in quasi},
    }


def measure_setup(con, anon, hierarchies, sensitive, l, quasi, repeat, slow_repeat) -> list[dict]:  # noqa: E741
    models = {"k": KAnonymity(K), "l": DistinctLDiversity(sensitive, l), "entropy": EntropyLDiversity(sensitive, l)}
    policy = Policy(quasi_identifiers={q: hierarchies[q] for q in quasi}, models=list(models.values()),
                    sensitive=[sensitive], others="insensitive")
    vectors = level_vectors(hierarchies, quasi)
    label = f"{len(quasi)} QIs, {sensitive} l={l}"

    common.progress(f"  {label}: warm-up anon.check (stores the hierarchies)")
    first, first_cpu, _ = common.timed(lambda: anon.check(TABLE, policy, vectors["bottom"]))

    rows = {name: {"levels": levels, "checks": {key: common.Timing() for key in (*MODEL_KEYS, "all")},
                   "end_to_end": common.Timing(), "peak_rss_mb": 0.0} for name, levels in vectors.items()}
    encode = common.Timing()
    encode_peak = combos = memory_after_encode = None
    for run in range(slow_repeat):
        common.progress(f"  {label}: encode {run + 1}/{slow_repeat}")
        common.reset_peak_rss()
        wall, cpu, encoded = common.timed(lambda: anon.encode(TABLE, policy))
        encode.add(wall, cpu)
        encode_peak = max(encode_peak or 0.0, common.peak_rss_mb())
        try:
            if run == 0:
                table_sql = sqlbuild.to_sql(encoded.encoding.table)
                combos = con.execute(f"SELECT COUNT(*) FROM {table_sql}").fetchone()[0]
                memory_after_encode = common.duckdb_memory_mb(con)
                common.progress(f"  {label}: checks on the encoded table ({combos} combinations), {repeat} runs each")
                for name, row in rows.items():
                    common.reset_peak_rss()
                    levels = row["levels"]
                    for key, model in models.items():
                        common.measure(lambda m=model: check(as_engine(con), encoded.encoding.classes(levels), [m],
                                                             key_names=quasi,
                                                             allowed_suppressed=0),
                                       repeat, row["checks"][key])
                    _, report = common.measure(lambda: encoded.check(levels), repeat, row["checks"]["all"])
                    row["report"] = report
                    row["peak_rss_mb"] = common.peak_rss_mb()
        finally:
            encoded.close()

    for name, row in rows.items():
        common.progress(f"  {label}: end-to-end anon.check at {name} levels, {slow_repeat} runs")
        common.reset_peak_rss()
        _, report = common.measure(lambda: anon.check(TABLE, policy, row["levels"]), slow_repeat, row["end_to_end"])
        row["peak_rss_mb"] = max(row["peak_rss_mb"], common.peak_rss_mb())
        encoded_report = row.pop("report")
        if (report.classes, report.violating_records) != (encoded_report.classes, encoded_report.violating_records):
            raise AssertionError(f"end-to-end and encoded checks disagree at {name}: {report.summary()} vs "
                                 f"{encoded_report.summary()}")
        row["classes"] = report.classes
        row["violating_records"] = report.violating_records
        row["summary"] = report.summary()

    return [{
        "quasi_identifiers": quasi, "sensitive": sensitive, "l": l, "vector": name, "levels": row["levels"],
        "combos": combos, "classes": row["classes"], "violating_records": row["violating_records"],
        "summary": row["summary"], "encode": encode.as_dict(), "encode_peak_rss_mb": encode_peak,
        "checks": {key: t.as_dict() for key, t in row["checks"].items()}, "end_to_end": row["end_to_end"].as_dict(),
        "first_end_to_end": {"wall": first, "cpu": first_cpu}, "peak_rss_mb": row["peak_rss_mb"],
        "duckdb_memory_after_encode_mb": memory_after_encode,
    } for name, row in rows.items()]


def child(n: int, repeat: int, slow_repeat: int, db: str) -> dict:
    workdir = tempfile.mkdtemp(prefix="duckanon-bench-db-")
    try:
        path = ":memory:" if db == "memory" else os.path.join(workdir, "bench.duckdb")
        con = duckdb.connect(path)
        common.progress(f"{n:,} rows ({db} database): resampling Adult")
        common.reset_peak_rss()
        build, build_cpu, _ = common.timed(lambda: datasets.resample_adult(con, n, TABLE, seed=0))
        if db == "file":
            con.execute("CHECKPOINT")
        facts = common.machine_facts(con)
        result = {
            "rows": n, "db": db, "build_s": build, "build_cpu_s": build_cpu,
            "rss_after_build_mb": common.current_rss_mb(), "peak_rss_build_mb": common.peak_rss_mb(),
            "database_size": {k: str(v) for k, v in common.database_size(con).items()},
            "duckdb_memory_after_build_mb": common.duckdb_memory_mb(con), "facts": facts, "setups": [],
        }
        common.progress(f"{n:,} rows: built in {build:.1f} s; RSS {result['rss_after_build_mb']:.0f} MB")
        anon = duckanon.connect(con)
        folder = datasets.adult_hierarchy_dir()
        hierarchies = {q: Hierarchy.from_arx_csv(folder / f"{q}.csv", name=q) for q in QUASI_IDENTIFIERS}
        for sensitive, l, quasi in SETUPS:  # noqa: E741
            result["setups"] += measure_setup(con, anon, hierarchies, sensitive, l, quasi, repeat, slow_repeat)
        result["load_average_end"] = common.machine_facts()["load_average"]
        con.close()
        return result
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


# ------------------------------------------------------------------ parent
HEADERS = ["rows", "db", "QIs", "sensitive", "levels", "combos", "classes", "encode s", "k-anon check s",
           "l-div check s", "entropy-l check s", "all 3 check s", "end-to-end s", "e2e CPU s", "peak RSS MB",
           "target"]


def verdict(n: int, entry: dict) -> str:
    target = TARGETS.get(n)
    if target is None:
        return "–"
    checks = max(entry["checks"][key]["median"] for key in ("k", "l", "entropy"))
    e2e = entry["end_to_end"]["median"]
    word = lambda seconds: "met" if seconds < target else "MISSED"  # noqa: E731
    return f"< {target:g} s: checks {word(checks)}, end-to-end {word(e2e)}"


def table_rows(results: list[dict]) -> list[list]:
    rows = []
    for result in results:
        n = result["rows"]
        for entry in result["setups"]:
            quasi = entry["quasi_identifiers"]
            qis = f"{len(quasi)}" if len(quasi) == len(QUASI_IDENTIFIERS) else f"{len(quasi)} (no occupation)"
            levels = ",".join(str(entry["levels"][q]) for q in quasi)
            rows.append([
                f"{n:,}", result["db"], qis, f"{entry['sensitive']} (l={entry['l']})", f"{entry['vector']} {levels}",
                f"{entry['combos']:,}", f"{entry['classes']:,}", entry["encode"]["median"],
                entry["checks"]["k"]["median"], entry["checks"]["l"]["median"], entry["checks"]["entropy"]["median"],
                entry["checks"]["all"]["median"], entry["end_to_end"]["median"], entry["end_to_end"]["median_cpu"],
                f"{entry['peak_rss_mb']:.0f}", verdict(n, entry),
            ])
    return rows


def notes(results: list[dict], repeat: int, slow_repeat: int) -> str:
    lines = [
        f"- Medians: checks over {repeat} runs, encode and end-to-end over {slow_repeat} runs (after one untimed "
        "warm-up `anon.check`). Seconds are wall time; `e2e CPU s` is process CPU time (all threads): well above "
        "`end-to-end s`, the run had both cores.",
        "- QIs: sex, age, race, marital-status, education, native-country, workclass, occupation (ARX hierarchies); "
        "levels are listed in that order. `combos` = rows of the encoded frequency table; `classes` = equivalence "
        "classes at those levels.",
        "- `all 3 check s` = `encoded.check(levels)` with k-anonymity, distinct and entropy l-diversity in one policy; "
        "`end-to-end s` = `anon.check(table, policy, levels)` with that policy.",
        "- Peak RSS = process high-water mark during that row's checks and end-to-end runs (reset before them); "
        "it includes the table itself for an in-memory database.",
    ]
    for result in results:
        first = result["setups"][0]
        lines.append(
            f"- {result['rows']:,} rows, {result['db']} database: resample {result['build_s']:.1f} s "
            f"(not in the figures); RSS after build {result['rss_after_build_mb']:.0f} MB; DuckDB memory after build "
            f"{result['duckdb_memory_after_build_mb']['total']:.0f} MB, after encode "
            f"{first['duckdb_memory_after_encode_mb']['total']:.0f} MB; database_size memory_usage "
            f"{result['database_size'].get('memory_usage', '?')}; first (cold) anon.check "
            f"{first['first_end_to_end']['wall']:.2f} s; load average at end {result['load_average_end']}.")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=[1_000_000, 10_000_000])
    parser.add_argument("--repeat", type=int, default=5, help="runs of each check on the encoded table (median)")
    parser.add_argument("--slow-repeat", type=int, default=None,
                        help="runs of encode and of end-to-end anon.check per level vector (default: min(repeat, 3))")
    parser.add_argument("--db", nargs="+", choices=("file", "memory"), default=["file"],
                        help="where the table lives: a DuckDB file in a temporary folder (default) or in memory")
    parser.add_argument("--output", type=Path, default=RESULTS, help="markdown results file")
    parser.add_argument("--json", type=Path, default=None, help="also write every raw measurement as JSON")
    parser.add_argument("--child-output", type=Path, default=None, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    slow_repeat = args.slow_repeat or min(args.repeat, 3)

    if args.child_output is not None:  # one row count, one database kind, in this process
        (n,), (db,) = args.rows, args.db
        args.child_output.write_text(json.dumps(child(n, args.repeat, slow_repeat, db)))
        return 0

    load = common.load_at_start()
    results = []
    for db in args.db:
        for n in args.rows:
            results.append(common.run_child(__file__, ["--rows", str(n), "--repeat", str(args.repeat),
                                                       "--slow-repeat", str(slow_repeat), "--db", db]))
    table = common.markdown_table(HEADERS, table_rows(results))
    note_text = notes(results, args.repeat, slow_repeat)
    command = (f"python benchmarks/bench_checks.py --rows {' '.join(map(str, args.rows))} --repeat {args.repeat} "
               f"--slow-repeat {slow_repeat} --db {' '.join(args.db)}")
    common.report("Check benchmark", command, table, note_text, results, load, args.output, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
