"""duckanon end to end on data whose diversity grows with its size, beside ARX 3.9.2 where ARX can load it.

    python benchmarks/bench_scale.py                                    # 1M, 10M and 100M records
    python benchmarks/bench_scale.py --rows 1000000 --arx-max-rows 1000000

The data is ``duckanon.datasets.census``: census-shaped records (state, year, quarter, age, sex, marital status,
education, race, household size; 38,880 transformations), drawn person by person, so that the distinct
combinations grow with the rows (not resampled: a resampled table is k-anonymous already and needs no search).
Each size is written once as a folder of Parquet files of 10M records into ``--data-dir`` and reused; for ARX also
as one CSV (``;``), with the hierarchies in ARX's CSV format.

Per size, in this order, each in a process of its own (its peak RSS as the kernel reports it):

- **bare COPY**: DuckDB copying the same rows from the source to one Parquet file: the floor of a publish, which
  reads the source and writes as much;
- **release COPY**: in the duckanon process, after the call, DuckDB copying the written release's rows as they are to
  another Parquet file: the floor of writing what the release holds (more columns than the source: bounds, labels);
- **duckanon**: one ``anon.anonymize`` of the Parquet files to a Parquet release (k-anonymity, ``--k``, at most
  ``--suppression`` of the records suppressed, ``--metric``, the optimal search), from the call to the verified
  release; its steps from the progress it reports: encode (reading the source into the frequency table and building
  the evaluator), search, publish (recoding, checking, suppressing, writing) and verify (reading the written file
  back and checking it);
- **ARX** (``arx-bench``, ``-Xmx8g``) on the CSV, up to ``--arx-max-rows``: process start to its result (loading the
  CSV, then one ``anonymize()``), or how and when it failed.

The 1-minute load average is sampled while each process runs.  Timings are not tests.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))  # the checkout's duckanon, not an installed one
sys.path.insert(0, str(HERE))

import common  # noqa: E402
import duckdb  # noqa: E402
from bench_arx import ARX_METRICS, LOAD_LINE, RUN_LINE, arx_available  # noqa: E402
from compare import LoadSampler  # noqa: E402

DEFAULT_ROWS = [1_000_000, 10_000_000, 100_000_000]
DATA_DIR = HERE / ".data"  # the generated data, written once and reused


def census_folder(data_dir: Path, rows: int) -> Path:
    """A folder of Parquet parts, named as one Parquet source (DuckDB reads its parts as one)."""
    return data_dir / f"census-{rows}.parquet"


def census_glob(data_dir: Path, rows: int) -> str:
    return str(census_folder(data_dir, rows) / "*.parquet")


def prepare(data_dir: Path, rows: int, arx: bool) -> None:
    """The size's Parquet folder (and for ARX its CSV and the hierarchies), written once."""
    from duckanon.datasets import census

    folder = census_folder(data_dir, rows)
    if not folder.exists():
        common.progress(f"{rows:,} records: generating")
        seconds, _, _ = common.timed(lambda: census.write_census(folder, rows, progress=common.progress))
        common.progress(f"{rows:,} records generated in {seconds:.0f} s")
    hierarchies = data_dir / "census-hierarchies"
    if not hierarchies.exists():
        hierarchies.mkdir(parents=True)
        for name, hierarchy in census.census_hierarchies().items():
            hierarchy.to_arx_csv(hierarchies / f"{name}.csv")
    csv = data_dir / f"census-{rows}.csv"
    if arx and not csv.exists():
        common.progress(f"{rows:,} records: writing the CSV ARX reads")
        partial = csv.with_name(f".{csv.name}.partial")
        con = duckdb.connect()
        con.read_parquet(census_glob(data_dir, rows)).write_csv(str(partial), sep=";", header=True)
        con.close()
        partial.rename(csv)


def distinct_combinations(data_dir: Path, rows: int) -> tuple[int, int]:
    """(distinct quasi-identifier combinations, combinations of one record) of the size's data."""
    from sqlglot import exp

    from duckanon.datasets import census
    from duckanon.engine import as_engine
    from duckanon.sqlgen import build as sb

    engine = as_engine(duckdb.connect())
    count = exp.func("COUNT", exp.Star())
    sizes = (exp.select(count.as_("n")).from_(engine.read_file(str(census_folder(data_dir, rows)), "parquet"))
             .group_by(*[sb.col(c) for c in census.QUASI_IDENTIFIERS]))
    single = exp.func("SUM", exp.Case().when(sb.col("n").eq(sb.lit(1)), sb.lit(1)).else_(sb.lit(0)))
    distinct, unique = engine.rows(exp.select(count.copy(), single).from_(sizes.subquery("sizes")))[0]
    return int(distinct), int(unique)


# ------------------------------------------------------------------ children
def child_copy(data_dir: Path, rows: int, scratch: Path) -> dict:
    target = scratch / f"copy-{rows}.parquet"
    con = duckdb.connect()
    started = time.perf_counter()
    con.read_parquet(census_glob(data_dir, rows)).write_parquet(str(target))
    seconds = time.perf_counter() - started
    con.close()
    size = target.stat().st_size
    target.unlink()
    return {"seconds": seconds, "bytes": size}


# The progress that starts each step after the first, encoding, which starts with the call.
STEPS = [("search", "optimal search over"), ("publish", "recoding the quasi"), ("verify", "verifying the written")]


def child_duckanon(data_dir: Path, rows: int, scratch: Path, k: int, suppression: float, metric: str) -> dict:
    import duckanon
    from duckanon import KAnonymity, Policy
    from duckanon.datasets import census

    heard: list[tuple[float, str]] = []
    started = time.perf_counter()

    def hear(message: str) -> None:
        heard.append((time.perf_counter() - started, message))
        common.progress(f"duckanon {rows:,}: {message}")

    con = duckdb.connect()
    anon = duckanon.connect(con, progress=hear)
    policy = Policy(quasi_identifiers=census.census_hierarchies(), models=[KAnonymity(k)], suppression_limit=suppression)
    target = scratch / f"release-{rows}.parquet"
    result, release = anon.anonymize(census_folder(data_dir, rows), policy, target, metric=metric)
    total = time.perf_counter() - started
    starts = [0.0, *(next(t for t, m in heard if m.startswith(prefix)) for _, prefix in STEPS), total]
    steps = {step: end - start for step, start, end in zip(["encode", *(s for s, _ in STEPS)], starts, starts[1:])}
    # The release's own rows copied as they are to another Parquet file: the floor for writing what it holds.
    copied = scratch / f"release-copy-{rows}.parquet"
    copy_started = time.perf_counter()
    con.read_parquet(str(target)).write_parquet(str(copied))
    release_copy = time.perf_counter() - copy_started
    copied.unlink()
    con.close()
    size = target.stat().st_size
    target.unlink()
    return {"seconds": total, "steps": steps, "release_copy": release_copy, "checks": result.checks,
            "lattice": result.lattice_size,
            "levels": result.levels, "suppressed": release.suppressed, "released": release.records_out,
            "bytes": size, "evaluator": next((m for _, m in heard if m.startswith("evaluating nodes")), ""),
            "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}


def child_main(args: argparse.Namespace) -> None:
    scratch = Path(args.scratch)
    if args.child == "copy":
        result = child_copy(args.data_dir, args.child_rows, scratch)
    else:
        result = child_duckanon(args.data_dir, args.child_rows, scratch, args.k, args.suppression, args.metric)
    args.child_output.write_text(json.dumps(result))


# ------------------------------------------------------------------- parent
def measured_child(kind: str, rows: int, args: argparse.Namespace, scratch: Path) -> dict:
    output = scratch / f"{kind}-{rows}.json"
    command = [sys.executable, str(Path(__file__)), "--child", kind, "--child-rows", str(rows), "--child-output",
               str(output), "--scratch", str(scratch), "--data-dir", str(args.data_dir), "--k", str(args.k),
               "--suppression", repr(args.suppression), "--metric", args.metric]
    with LoadSampler() as load:
        measured = common.run_measured(command, timeout=args.timeout, env=common.checkout_environment())
    if measured.returncode != 0:
        why = "stopped at the timeout" if measured.returncode is None else f"exit code {measured.returncode}"
        return {"error": f"{why} after {measured.wall:.0f} s", "peak_rss_mb": measured.peak_rss_mb,
                "load": statistics.mean(load.samples)}
    result = json.loads(output.read_text())
    result.update(peak_rss_mb=measured.peak_rss_mb, process_wall=measured.wall, load=statistics.mean(load.samples), error=None)
    return result


def arx_child(rows: int, args: argparse.Namespace, scratch: Path) -> dict:
    from duckanon.datasets import census

    command = [str(args.arx / "arx-bench"), str(args.data_dir / f"census-{rows}.csv"), ";",
               str(args.data_dir / "census-hierarchies" / "%s.csv"), str(args.k), repr(args.suppression),
               ARX_METRICS[args.metric], "1", ",".join(census.QUASI_IDENTIFIERS)]
    with open(scratch / f"arx-{rows}.out", "w+") as out, open(scratch / f"arx-{rows}.err", "w+") as err, \
            LoadSampler() as load:
        measured = common.run_measured(command, timeout=args.timeout, stdout=out, stderr=err)
        out.seek(0)
        err.seek(0)
        text, errors = out.read(), err.read()
    runs, loaded = RUN_LINE.findall(text), LOAD_LINE.search(text)
    if measured.returncode != 0 or not runs:
        why = ("stopped at the timeout" if measured.returncode is None else
               f"exit code {measured.returncode}")
        thrown = re.search(r"(java\.lang\.\w+Error[^\n]*)", errors)
        stage = "loading the CSV" if loaded is None else "anonymizing"
        return {"error": f"{why} after {measured.wall:.0f} s while {stage}"
                         + (f": {thrown.group(1).strip()}" if thrown else ""),
                "peak_rss_mb": measured.peak_rss_mb, "load": statistics.mean(load.samples)}
    _, ms, _, levels, _, suppressed, checked = runs[-1]
    return {"error": None, "seconds": measured.wall, "load_s": int(loaded.group(2)) / 1000, "anonymize_s": int(ms) / 1000,
            "checks": int(checked), "levels": levels, "suppressed": int(suppressed), "peak_rss_mb": measured.peak_rss_mb,
            "load": statistics.mean(load.samples)}


def figure(value, form: str = ".1f") -> str:
    return "–" if value is None else format(value, form)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, nargs="+", default=DEFAULT_ROWS)
    parser.add_argument("--data-dir", type=Path, default=DATA_DIR)
    parser.add_argument("--arx", type=Path, default=HERE.parent.parent / "shared" / "peers" / "arx")
    parser.add_argument("--arx-max-rows", type=int, default=10_000_000,
                        help="the largest size ARX is run on (its CSV is written for it)")
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--suppression", type=float, default=0.05)
    parser.add_argument("--metric", default="arx-loss", choices=sorted(ARX_METRICS))
    parser.add_argument("--timeout", type=float, default=3600)
    parser.add_argument("--output", type=Path, default=HERE / "results" / "scale.md")
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--child", choices=["copy", "duckanon"], help=argparse.SUPPRESS)
    parser.add_argument("--child-rows", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-output", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child_main(args)
        return 0
    start_load = common.load_at_start()
    missing = arx_available(args.arx)
    if missing:
        common.progress(f"ARX is not run: {missing}")
    args.data_dir.mkdir(parents=True, exist_ok=True)
    scratch = args.data_dir / "scale-scratch"
    scratch.mkdir(exist_ok=True)
    results = []
    for rows in args.rows:
        with_arx = missing is None and rows <= args.arx_max_rows
        prepare(args.data_dir, rows, with_arx)
        distinct, unique = distinct_combinations(args.data_dir, rows)
        common.progress(f"{rows:,} records: {distinct:,} distinct combinations, {unique:,} of one record")
        copy = measured_child("copy", rows, args, scratch)
        duck = measured_child("duckanon", rows, args, scratch)
        arx = arx_child(rows, args, scratch) if with_arx else None
        results.append({"rows": rows, "distinct": distinct, "unique": unique, "copy": copy, "duckanon": duck,
                        "arx": arx})
        common.progress(f"{rows:,}: {json.dumps(results[-1])}")
    rows_out = []
    for r in results:
        d, c, a = r["duckanon"], r["copy"], r["arx"]
        steps = d.get("steps", {})
        publish_verify = None if d.get("error") else (steps.get("publish") or 0) + (steps.get("verify") or 0)
        release_copy = d.get("release_copy")
        rows_out.append([
            f"{r['rows']:,}", f"{r['distinct']:,}", f"{r['unique'] / r['rows']:.2f}",
            d.get("error") or figure(d["seconds"]),
            *(figure(steps.get(s)) for s in ("encode", "search", "publish", "verify")),
            figure(c.get("seconds"), ".1f") if not c.get("error") else c["error"],
            figure(publish_verify / c["seconds"], ".2f") if publish_verify and not c.get("error") else "–",
            figure(release_copy),
            figure(publish_verify / release_copy, ".2f") if publish_verify and release_copy else "–",
            f"{d['peak_rss_mb']:,.0f}", d.get("checks", "–"),
            "not run" if a is None else a["error"] or f"{a['seconds']:.1f} ({a['load_s']:.1f} + {a['anonymize_s']:.1f})",
            "–" if a is None else f"{a['peak_rss_mb']:,.0f}",
            "–" if a is None or a["error"] else a["checks"],
            f"{d['load']:.2f}" + ("" if a is None else f" / {a['load']:.2f}"),
        ])
    table = common.markdown_table(
        ["rows", "distinct combinations", "share unique", "duckanon s", "encode s", "search s", "publish s",
         "verify s", "bare COPY s", "(publish + verify) / COPY", "release COPY s", "(publish + verify) / release COPY",
         "peak MB", "nodes checked",
         "ARX s (load + anonymize)", "ARX peak MB", "ARX nodes", "load duckanon / ARX"], rows_out)
    levels = "\n".join(f"- {r['rows']:,}: duckanon {r['duckanon'].get('levels')}, {r['duckanon'].get('suppressed')} "
                       f"suppressed, {r['duckanon'].get('evaluator', '')}"
                       + ("" if not r["arx"] or r["arx"]["error"] else
                          f"; ARX {r['arx']['levels']}, {r['arx']['suppressed']} suppressed") for r in results)
    notes = (f"- k-anonymity, k = {args.k}, at most {args.suppression:.0%} suppressed, {args.metric}, optimal search; "
             f"the data: `duckanon.datasets.census` (seed 0) as Parquet files of 10M records.\n"
             f"- duckanon s: one `anon.anonymize` from the call to the verified Parquet release, in a process of its "
             f"own (no warm-up); its steps from the progress it reports.\n"
             f"- bare COPY: DuckDB copying the same rows to one Parquet file, in a process of its own, just before.\n"
             f"- release COPY: DuckDB copying the written release's rows as they are to another Parquet file, in the "
             f"duckanon process right after the call: the release has more columns than the source (bounds, labels "
             f"as text), so writing it costs more than the bare COPY.\n"
             f"- ARX: process start to its result (`arx-bench`, -Xmx8g): loading the CSV, then one `anonymize()`.\n"
             f"{levels}")
    common.report("duckanon at scale, beside ARX 3.9.2", " ".join(["python benchmarks/bench_scale.py", *sys.argv[1:]]),
                  table, notes, [{"facts": common.machine_facts(), "load_average_end":
                                  " ".join(f"{x:.2f}" for x in os.getloadavg())}], start_load, args.output,
                  args.json)
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))
    return 1 if any(r["duckanon"].get("error") for r in results) else 0


if __name__ == "__main__":
    sys.exit(main())
